"""The write seam on a sharded index: a model's rows computed when questions are added go
to the shards that get the questions (a run of the new segment; a new shard stores the
model with its rows), and a compaction merges them; the shards written inside a
generation hold no writers' lock."""
import os

from cqa_search import Question, SearchEngine, add_questions, compact, delete_questions
from cqa_search.distributed.build import build_sharded_index
from cqa_search.index.models import add_model
from cqa_search.index.sharded_writer import ShardedWriter
from cqa_search.index.sharding import read_shards, shard_models
from cqa_search.index.store import open_index
from cqa_search.index.writer import writer_class

from ..index.test_writer import TitleLengths, lengths_kind  # noqa: F401 (a fixture)

FIRST = [Question("a", "renew my visa", "x"), Question("b", "cheap sofa shop", "y")]
MORE = [Question("c", "car battery", "z"), Question("d", "beach", "w"),
        Question("e", "work permit office", "v")]


def shard_parts(path, name):
    """Each live shard's model ``name`` and its questions."""
    top = open_index(path)
    out = []
    for s, entry in enumerate(read_shards(top)):
        if entry["dir"] is not None:
            archive = SearchEngine.open(os.path.join(top.root, entry["dir"])).archive
            out.append((shard_models(top, s)[name],
                        [archive[r] for r in range(entry["n_docs"])]))
    return out


def shard_lengths(path):
    """Each live shard's rows of the model and the title lengths of its questions."""
    return [(model.lengths_.tolist(), [len(q.title) for q in questions])
            for model, questions in shard_parts(path, "lengths")]


def test_rows_added_later_go_with_their_shards(ray_session, tmp_path, lengths_kind):
    path = tmp_path / "s3"
    build_sharded_index(FIRST, path, 3)  # the first shard without questions
    assert writer_class(open_index(path)) is ShardedWriter
    model = TitleLengths().added_rows(FIRST)  # (the rows of the index: the shards' in order)
    add_model(path, "lengths", TitleLengths.from_state({"scale": 1}, {}, model))
    add_questions(path, MORE)  # two to the empty shard (a new index), one to the next
    top = open_index(path, verify=True)
    assert [e["n_docs"] for e in read_shards(top)] == [2, 2, 1]
    runs = [open_index(os.path.join(top.root, f"shards/0000{s}")).models["lengths"]["runs"]
            for s in range(3)]
    assert runs == [[], [{"segment": "seg-000002", "arrays": ["lengths"]}], []]
    assert all(rows == lengths for rows, lengths in shard_lengths(path))
    assert not [f for _, _, files in os.walk(top.root) for f in files if f == ".lock"]
    delete_questions(path, ["a"])
    compact(path)
    top = open_index(path, verify=True)
    assert not [rel for rel in top.manifest["files"] if "/rows/" in rel]
    assert all(rows == lengths for rows, lengths in shard_lengths(path))


def test_compaction_as_ray_tasks_writes_the_shards_as_in_process(ray_session, tmp_path):
    """`compact(ray=True)`: each shard's new generation written by a Ray task (the driver
    writes the top level only), its files byte for byte those of the compaction in this
    process; a task that fails stops it by name and the index is unchanged."""
    import shutil

    import pytest

    from cqa_search.distributed._ray import ShardError
    from cqa_search.index.store import CURRENT

    base = tmp_path / "base"
    build_sharded_index(FIRST + MORE, base, 3)
    add_questions(base, [Question("f", "visa fee", "u")])  # a second segment in a shard
    delete_questions(base, ["b", "d"])
    here, there = tmp_path / "here", tmp_path / "there"
    shutil.copytree(base, here)
    shutil.copytree(base, there)
    compact(here, ray=False)
    summary = compact(there, ray=True)
    assert "merged into one segment" in str(summary)

    def shard_files(path):
        top = open_index(path, verify=True)
        out = {}
        for s, entry in enumerate(read_shards(top)):
            if entry["dir"] is not None:
                shard = open_index(os.path.join(top.root, entry["dir"]), verify=True)
                out[s] = {rel: info["sha256"] for rel, info in shard.manifest["files"].items()}
        return out
    assert shard_files(there) == shard_files(here) != {}
    one, other = SearchEngine.open(here), SearchEngine.open(there)
    for text in ("visa", "sofa", "battery office"):
        assert one.search(text, 5).doc_ids == other.search(text, 5).doc_ids
    # a shard's task that fails: named, the index as it was
    failing = tmp_path / "failing"
    shutil.copytree(base, failing)
    top = open_index(failing)
    shard = open_index(os.path.join(top.root, "shards/00001"))
    damaged = os.path.join(shard.root, "vocab.json")
    size = os.path.getsize(damaged)
    with open(damaged, "wb") as f:
        f.write(b"x" * size)
    current = (failing / CURRENT).read_text()
    with pytest.raises(ShardError, match=r"compacting the shards failed on shard 1 "
                                         r"\(shards/00001\) \(IndexFormatError: .*the "
                                         "compaction stopped and the index is unchanged"):
        compact(failing, ray=True)
    assert (failing / CURRENT).read_text() == current
    assert open_index(failing).manifest == top.manifest
