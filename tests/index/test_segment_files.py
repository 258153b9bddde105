"""The files of a segment, byte for byte: a build, an add, a deletion and a compaction (and
the shards of a sharded build) write them through one writer, so that the same questions
give the same files whichever path wrote them."""
import hashlib
import json
from pathlib import Path

import pytest

from cqa_search import Question, add_questions, build_index, compact, delete_questions
from cqa_search.index.store import current_generation

TOY = Path(__file__).resolve().parents[1] / "data" / "toy_archive.jsonl"

#: Digests of the files each step writes on the toy archive (:func:`digest`), recorded with
#: the writers of 812b850 (before the segment writer had one home). A change of the index
#: format changes them on purpose: record the new ones then, with the format version bumped
#: (format 4: a sharded index's statistics in stats/<field>/, as unsharded). They are of
#: the fields indexed by default then (:data:`OLD_FIELDS`); with today's default fields
#: (the title too), the steps must agree with one another byte for byte all the same.
OLD_FIELDS = ("question", "answers")
PINNED = {
    "build": "7a3c6441a3ffb74f090e7f80e68a0b1403c508c693a9605765e5d2afe82779f4",
    "build first 7": "b17cf822ceaae3c3ac674a9eb317eb24c45584f57ee1ffcfb6571a04098cd0ea",
    "add the others": "b75c0c333f182126394cc042563c60082afe0c8e4e58e7ed5c5fedf6b8948291",
    "replace and delete": "46019e164dac5230fea0274f0534984fdc9f828636fd95ed11af24a9fb1a8157",
    "compact again": "2d99c69ccab4ea7742a4521069dc57b301dc3d3953d1ed484e79352511ac554a",
    "2 shards": "e27f1762bd1442ece07ed98d05c66ead06e6ea963bf195692464ed7fb907faee",
}


def questions():
    return [Question.from_dict(json.loads(line)) for line in TOY.read_text().splitlines()]


def files(path) -> dict:
    """sha256 of every file of the live generation but the manifests (ids, dates)."""
    root = Path(path) / current_generation(path)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def digest(hashes) -> str:
    return hashlib.sha256("".join(f"{k} {v}\n" for k, v in sorted(hashes.items()))
                          .encode()).hexdigest()


@pytest.mark.parametrize("fields", [OLD_FIELDS, None])
def test_build_add_delete_compact_write_the_same_files(tmp_path, fields):
    qs = questions()
    options = {} if fields is None else {"fields": fields}
    pinned = PINNED if fields == OLD_FIELDS else {}
    build_index(qs, tmp_path / "all", **options)
    whole = files(tmp_path / "all")
    assert digest(whole) == pinned.get("build", digest(whole))
    assert any(rel.endswith("fields/question/bm25.npy") for rel in whole)
    assert any(rel.endswith("fields/title/counts.npy") for rel in whole) == (fields is None)

    live = tmp_path / "live"
    build_index(qs[:7], live, **options)
    assert digest(files(live)) == pinned.get("build first 7", digest(files(live)))
    add_questions(live, qs[7:])
    added = files(live)
    assert digest(added) == pinned.get("add the others", digest(added))
    assert not any(rel.startswith("segments/seg-000002/") and rel.endswith("bm25.npy")
                   for rel in added)  # a segment that is not the whole collection
    compact(live)
    assert files(live) == whole  # the archive built at once, byte for byte

    add_questions(live, [Question("t02", "visa renewal replaced", category="Visas",
                                  answers=("new answer",))], replace=True)
    delete_questions(live, ["t05"])
    assert digest(files(live)) == pinned.get("replace and delete", digest(files(live)))
    compact(live)
    compacted = files(live)
    assert digest(compacted) == pinned.get("compact again", digest(compacted))


def test_shards_write_the_files_of_an_unsharded_build(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")
    from cqa_search.distributed._ray import connect
    from cqa_search.distributed.build import build_sharded_index

    connect()
    qs = questions()
    build_index(qs, tmp_path / "one", fields=OLD_FIELDS)
    one = files(tmp_path / "one")
    build_sharded_index(qs, tmp_path / "s1", 1, fields=OLD_FIELDS)
    root = tmp_path / "s1" / current_generation(tmp_path / "s1")
    shard = files(root / "shards" / "00000")
    # a shard's BM25 weights are those of the global statistics, stored apart: with one
    # shard, those of the unsharded build
    assert shard.pop("fields/question/bm25.global.npy") == \
        one.pop("segments/seg-000001/fields/question/bm25.npy")
    assert shard == one
    build_sharded_index(qs, tmp_path / "s2", 2, fields=OLD_FIELDS)
    assert digest(files(tmp_path / "s2")) == PINNED["2 shards"]
    # today's default fields (the title too): one shard writes the unsharded build's files
    build_index(qs, tmp_path / "one-title")
    build_sharded_index(qs, tmp_path / "s1-title", 1)
    shard = files(tmp_path / "s1-title" / current_generation(tmp_path / "s1-title") / "shards"
                  / "00000")
    shard["segments/seg-000001/fields/question/bm25.npy"] = shard.pop(
        "fields/question/bm25.global.npy")
    assert shard == files(tmp_path / "one-title")
