"""The index directory: generations, round trip, mmap, version and corruption checks,
atomic commits, leftovers of crashed writers, concurrent writers, permissions."""
import json
import multiprocessing
import os
import shutil
import stat

import numpy as np
import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.exceptions import ArchiveError, IndexFormatError
from cqa_search.index.store import (CURRENT, FORMAT_VERSION, IndexWriter, current_generation,
                                    is_compatible, open_index, verify_index)

QUERIES = ["renew visa", "cheap furniture sofa", "car will not start battery", "swimming"]


def results(engine):
    return [(r.doc_ids, r.scores.tolist(), r.features.tolist())
            for r in (engine.search(q, k=5) for q in QUERIES)]


def live(path):
    """The directory of an index's live generation."""
    return path / current_generation(path)


SEG = "segments/seg-000001"


def seg(path):
    """The directory of the (single) segment of an index's live generation."""
    return live(path) / SEG


def generations(path):
    return sorted(p.name for p in path.iterdir() if p.name.startswith("gen-"))


def test_open_with_and_without_mmap_gives_identical_results(toy_index):
    assert results(SearchEngine.open(toy_index, mmap=True)) == \
        results(SearchEngine.open(toy_index, mmap=False))


def test_rebuild_gives_identical_results(toy_index, tmp_path, fixtures):
    build_index(fixtures / "toy_archive.jsonl", tmp_path / "again")
    assert results(SearchEngine.open(tmp_path / "again")) == results(SearchEngine.open(toy_index))


def test_manifest_records_version_analyzer_stats_and_checksums(toy_index):
    assert (toy_index / CURRENT).read_text() == "gen-000001\n"
    manifest = json.loads((live(toy_index) / "manifest.json").read_text())
    assert manifest == open_index(toy_index).manifest
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["analyzer"]["stem"] == "snowball"
    assert manifest["stats"]["n_docs"] == 12 and manifest["stats"]["n_categories"] == 3
    assert len(manifest["build_id"]) == 16
    for rel, info in manifest["files"].items():
        assert os.path.getsize(live(toy_index) / rel) == info["bytes"]
        assert len(info["sha256"]) == 64
    assert is_compatible(toy_index)
    verify_index(toy_index)


@pytest.fixture
def index_copy(toy_index, tmp_path):
    path = tmp_path / "copy"
    shutil.copytree(toy_index, path)
    return path


def _rewrite_manifest(path, change):
    mpath = live(path) / "manifest.json"
    manifest = json.loads(mpath.read_text())
    change(manifest)
    mpath.write_text(json.dumps(manifest))


def test_bumped_format_version_raises(index_copy):
    _rewrite_manifest(index_copy, lambda m: m.update(format_version=FORMAT_VERSION + 1))
    assert not is_compatible(index_copy)
    with pytest.raises(IndexFormatError, match=rf"format version {FORMAT_VERSION + 1}, but this "
                                               rf"cqa_search .* reads version {FORMAT_VERSION} "
                                               r"\(and 3 for an unsharded index\): a newer cqa_search wrote "
                                               r"it: upgrade cqa_search, or rebuild it with "
                                               r"`cqa-search build-index`"):
        SearchEngine.open(index_copy)
    _rewrite_manifest(index_copy, lambda m: m.update(format_version=2))
    with pytest.raises(IndexFormatError, match=r"format version 2, but this cqa_search .* "
                                               rf"reads version {FORMAT_VERSION} \(and 3 for "
                                               r"an unsharded index\): rebuild it with `cqa-search "
                                               r"build-index`$"):
        SearchEngine.open(index_copy)


def test_an_unsharded_index_of_format_3_is_read_and_written_as_format_4(index_copy, tmp_path):
    """Format 4 changed the sharded layout only: an unsharded index of format 3 opens, and
    the next generation a change writes is of format 4; a sharded one asks for a rebuild."""
    expected = SearchEngine.open(index_copy).search("visa", k=5)
    _rewrite_manifest(index_copy, lambda m: m.update(format_version=3))
    assert is_compatible(index_copy)
    got = SearchEngine.open(index_copy).search("visa", k=5)
    assert got.doc_ids == expected.doc_ids and list(got.scores) == list(expected.scores)
    from cqa_search.index.live import add_questions

    add_questions(index_copy, [Question("new-1", "renew my visa")])
    manifest = json.loads((live(index_copy) / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert "new-1" in SearchEngine.open(index_copy).search("visa", k=50).doc_ids
    _rewrite_manifest(index_copy, lambda m: m.update(format_version=3, shards=[]))
    assert not is_compatible(index_copy)
    with pytest.raises(IndexFormatError, match="format version 3, but this cqa_search .* reads "
                                               f"version {FORMAT_VERSION} \\(and 3 for an "
                                               "unsharded index\\): rebuild it"):
        SearchEngine.open(index_copy)


def test_an_index_of_the_old_layout_asks_for_a_rebuild_and_can_be_rebuilt(tmp_path):
    old = tmp_path / "old"
    (old / "fields" / "question").mkdir(parents=True)
    (old / "fields" / "question" / "indptr.npy").write_bytes(b"")
    (old / "vocab.json").write_text("[]")
    (old / "manifest.json").write_text(json.dumps({
        "format": "cqa_search-index", "format_version": 2,
        "files": {"vocab.json": {"bytes": 2, "sha256": "0" * 64},
                  "fields/question/indptr.npy": {"bytes": 0, "sha256": "0" * 64}}}))
    with pytest.raises(IndexFormatError, match="format version 2, but this cqa_search .* reads "
                                               f"version {FORMAT_VERSION} \\(and 3 for an "
                                               "unsharded index\\): rebuild it"):
        SearchEngine.open(old)
    build_index([Question("a", "renew visa")], old)
    assert sorted(p.name for p in old.iterdir()) == [".lock", CURRENT, "gen-000001"]
    assert SearchEngine.open(old).search("visa").doc_ids == ("a",)


def test_truncated_file_raises(index_copy):
    path = seg(index_copy) / "fields" / "question" / "indices.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(IndexFormatError, match=r"corrupted index .*indices.npy has \d+ bytes, "
                                               r"expected \d+"):
        SearchEngine.open(index_copy)


def test_missing_file_raises(index_copy):
    (live(index_copy) / "vocab.json").unlink()
    with pytest.raises(IndexFormatError, match="vocab.json is missing"):
        SearchEngine.open(index_copy)


def test_a_generation_directory_is_not_the_index(index_copy):
    live = index_copy / current_generation(index_copy)
    with pytest.raises(IndexFormatError, match=f"{live} is one generation of the index "
                                               f"{index_copy}: open the index directory itself"):
        SearchEngine.open(live)


def test_missing_live_generation_and_bad_pointer(index_copy):
    shutil.rmtree(live(index_copy))
    with pytest.raises(IndexFormatError, match="live generation gen-000001 is missing"):
        SearchEngine.open(index_copy)
    (index_copy / CURRENT).write_text("../../etc\n")
    with pytest.raises(IndexFormatError, match="CURRENT names no generation"):
        SearchEngine.open(index_copy)


def test_altered_bytes_are_caught_by_verify(index_copy):
    path = seg(index_copy) / "fields" / "question" / "counts.npy"
    data = bytearray(path.read_bytes())
    data[-4] ^= 0x02  # the last count's low byte: a count, still in range
    path.write_bytes(bytes(data))
    SearchEngine.open(index_copy)  # same size, valid values: only the checksum can tell
    with pytest.raises(IndexFormatError, match="counts.npy does not match its checksum"):
        SearchEngine.open(index_copy, verify=True)


def test_inconsistent_array_raises_on_open(index_copy):
    path = seg(index_copy) / "fields" / "question" / "doc_len.npy"
    arr = np.load(path)
    arr[0] += 1
    np.save(path, arr)  # same size, but the lengths no longer add up
    with pytest.raises(IndexFormatError, match="document lengths do not match the manifest"):
        SearchEngine.open(index_copy)


def test_pickled_array_is_refused(index_copy):
    path = seg(index_copy) / "doc_category.npy"
    np.save(path, np.array([object()] * 12), allow_pickle=True)
    _rewrite_manifest(index_copy, lambda m: m["files"][f"{SEG}/doc_category.npy"].update(
        bytes=path.stat().st_size))
    with pytest.raises(IndexFormatError, match="cannot read .*/doc_category.npy"):
        SearchEngine.open(index_copy)


def test_missing_and_foreign_directories(tmp_path):
    with pytest.raises(IndexFormatError, match="no index at .*nothing"):
        open_index(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="no index at .*nothing"):  # as open() says it
        SearchEngine.open(tmp_path / "nothing")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(IndexFormatError, match="is not a cqa_search index"):
        open_index(tmp_path / "foreign")
    (tmp_path / "foreign" / "manifest.json").write_text('{"name": "something else"}')
    with pytest.raises(IndexFormatError, match="manifest.json is foreign"):
        open_index(tmp_path / "foreign")


def test_build_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(IndexFormatError, match="exists and is not a cqa_search index; refusing"):
        build_index([Question("a", "x y")], tmp_path / "photos")
    assert sorted(os.listdir(tmp_path / "photos")) == ["cat.jpg"]


def test_failed_build_leaves_no_index_and_keeps_the_old_one(tmp_path):
    out = tmp_path / "idx"
    build_index([Question("a", "old question")], out)

    def questions():
        yield Question("b", "new question")
        raise RuntimeError("crash mid-build")

    with pytest.raises(RuntimeError, match="crash mid-build"):
        build_index(questions(), out)
    assert SearchEngine.open(out).archive.doc_ids == ["a"]
    assert sorted(os.listdir(out)) == [".lock", CURRENT, "gen-000001"]  # no temporary left

    with pytest.raises(ArchiveError, match="duplicate question id 'b'"):
        build_index([Question("b", "x"), Question("b", "y")], tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_rebuilds_switch_generations_and_keep_only_the_previous_one(tmp_path):
    out = tmp_path / "idx"
    for i in range(4):
        build_index([Question("a", f"question number {i}")], out)
    assert current_generation(out) == "gen-000004"
    assert generations(out) == ["gen-000003", "gen-000004"]
    assert SearchEngine.open(out).archive[0].title == "question number 3"


def test_a_crash_before_the_switch_leaves_the_old_generation_live(tmp_path, monkeypatch):
    out = tmp_path / "idx"
    build_index([Question("a", "old question")], out)
    real_replace = os.replace

    def crash(src, dst, *args, **kwargs):
        if os.path.basename(dst) == CURRENT:
            raise KeyboardInterrupt("killed just before the switch")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        build_index([Question("b", "new question")], out)
    monkeypatch.setattr(os, "replace", real_replace)
    assert SearchEngine.open(out).archive.doc_ids == ["a"]
    assert generations(out) == ["gen-000001", "gen-000002"]  # gen 2 never became live
    build_index([Question("c", "newer question")], out)      # the next writer cleans up
    assert SearchEngine.open(out).archive.doc_ids == ["c"]
    assert generations(out) == ["gen-000001", "gen-000003"]
    assert not [p for p in os.listdir(out) if p.startswith((".tmp-", "CURRENT.tmp"))]


def test_a_dead_writers_temporary_directory_is_removed(tmp_path):
    out = tmp_path / "idx"
    build_index([Question("a", "old question")], out)
    (out / ".tmp-deadbeef0000").mkdir()                      # a killed writer's, no owner
    os.utime(out / ".tmp-deadbeef0000", (0, 0))
    (out / ".tmp-deadbeef0000" / "archive.jsonl").write_bytes(b"x" * 1000)
    os.utime(out / ".tmp-deadbeef0000", (0, 0))
    alive = IndexWriter(out)                                  # a writer still at work
    build_index([Question("b", "new question")], out)
    names = os.listdir(out)
    assert ".tmp-deadbeef0000" not in names and os.path.basename(alive.tmp) in names
    alive.abort()
    assert not os.path.exists(alive.tmp)


def test_another_writer_never_finds_a_new_writers_owner_file_unlocked(tmp_path, monkeypatch):
    """A writer's temporary directory is removed by another writer when its owner file can
    be locked (its writer died). At the moment the new writer locks its file (the only
    moment it could be found unlocked), the directory must still count as alive."""
    import fcntl

    from cqa_search.index import store

    out = tmp_path / "idx"
    build_index([Question("a", "old question")], out)
    seen, flock = [], fcntl.flock

    def checking_flock(fd, operation):
        if operation == fcntl.LOCK_EX:  # the writer taking its lock (not a probe: LOCK_NB)
            seen.extend(store._owner_alive(str(out / n)) for n in os.listdir(out)
                        if n.startswith(".tmp-"))
        return flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", checking_flock)
    writer = IndexWriter(out)
    writer.abort()
    assert seen == [True]


def _add_questions(path, start, n):
    for i in range(start, start + n):
        build_index([Question(f"q{i}", f"question {i}")], path)


def test_concurrent_writers_all_land_and_readers_always_open(tmp_path):
    out = tmp_path / "idx"
    build_index([Question("q", "opening question")], out)
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_add_questions, args=(out, 100 * w, 8)) for w in range(2)]
    for w in writers:
        w.start()
    opened = 0
    while any(w.is_alive() for w in writers):
        engine = SearchEngine.open(out)       # never fails while writers switch
        assert len(engine.archive.doc_ids) == 1 and engine.search("question").doc_ids
        opened += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert opened > 0 and current_generation(out) == "gen-000017"
    assert len(generations(out)) == 2


def test_directories_and_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "idx"
        build_index([Question("a", "renew visa")], out)
        build_index([Question("a", "renew visa")], out)
    finally:
        os.umask(old)
    for path in (out, live(out), seg(out) / "fields", live(out) / "vocab.json"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o044 == 0o044, (path, oct(mode))


@pytest.mark.parametrize("change, message", [
    (lambda m: m["files"]["vocab.json"].pop("bytes"), "file list of its manifest.json is malformed"),
    (lambda m: m.update(files=[]), "file list of its manifest.json is malformed"),
    (lambda m: m.update(files=None), "file list of its manifest.json is malformed"),
    (lambda m: m.update(stats={"n_docs": "many"}), "bad manifest"),
    (lambda m: m.update(models={"x": 3}), "model list of its manifest.json is malformed"),
    (lambda m: m.update(analyzer={"stem": "klingon"}), "bad manifest"),
])
def test_malformed_manifests_are_corrupted_indexes(index_copy, change, message):
    _rewrite_manifest(index_copy, change)
    with pytest.raises(IndexFormatError, match=message):
        SearchEngine.open(index_copy)


def test_manifest_as_a_directory_and_bad_arrays(index_copy):
    root = live(index_copy)
    saved = (root / SEG / "doc_category.npy").read_bytes()
    np.save(root / SEG / "doc_category.npy", np.full(12, 7, dtype=np.int32))  # no category 7
    with pytest.raises(IndexFormatError, match="doc_category.npy holds 7, above its bound 2"):
        SearchEngine.open(index_copy)
    (root / SEG / "doc_category.npy").write_bytes(saved)
    indptr = np.load(root / SEG / "fields" / "question" / "indptr.npy")
    indptr[3], indptr[4] = indptr[4], indptr[3] - 1  # offsets out of order
    np.save(root / SEG / "fields" / "question" / "indptr.npy", indptr)
    with pytest.raises(IndexFormatError, match="indptr.npy is not non-decreasing"):
        SearchEngine.open(index_copy)
    (root / "manifest.json").unlink()
    (root / "manifest.json").mkdir()
    with pytest.raises(IndexFormatError, match="gen-000001/manifest.json is a directory, not a "
                                               "regular file"):
        SearchEngine.open(index_copy)


def _store_ranker(path, name="ranker", features=("bm25", "lm_jm")):
    from cqa_search.index.models import add_model
    from cqa_search.ranking import LinearRanker

    X = np.array([[2.0, 1.0], [1.0, 0.5], [3.0, 2.0], [0.5, 0.1]])
    ranker = LinearRanker("ranksvm", random_state=0).fit(X, [1, 0, 1, 0], qid=[0, 0, 1, 1],
                                                         feature_names=list(features))
    add_model(path, name, ranker)


def test_rollback_makes_the_previous_generation_live_again(index_copy, capsys):
    from cqa_search.cli.__main__ import main
    from cqa_search.index.live import delete_questions
    from cqa_search.index.store import rollback

    engine = SearchEngine.open(index_copy)
    before = results(engine)
    delete_questions(index_copy, ["t01"])
    assert "t01" not in SearchEngine.open(index_copy).archive
    damaged = current_generation(index_copy)
    assert main(["rollback", str(index_copy)]) == 0
    out = capsys.readouterr().out
    restored = current_generation(index_copy)
    assert out.startswith(f"rolled back {index_copy}: the index of gen-000001 is live again, "
                          f"as {restored} (it replaces {damaged}")
    assert out.endswith(f"One step: an index keeps only the generation before the live one, "
                        f"so a second rollback brings {damaged} back\n")
    assert restored > damaged and engine.reopen() is not engine  # a reader follows it
    assert results(SearchEngine.open(index_copy, verify=True)) == before
    assert open_index(index_copy).manifest["rolled_back"] == {"from": damaged, "to": "gen-000001"}
    # each change keeps the one before it: rolling back again undoes the deletion's undo
    assert rollback(index_copy)[1] == damaged
    assert "t01" not in SearchEngine.open(index_copy).archive


def test_rollback_needs_a_sound_earlier_generation(tmp_path):
    from cqa_search.index.store import rollback

    build_index([Question("a", "renew visa"), Question("b", "cheap sofa")], tmp_path / "idx")
    with pytest.raises(IndexFormatError, match="keeps no sound generation before gen-000001"):
        rollback(tmp_path / "idx")
    with pytest.raises(IndexFormatError, match="no index at"):
        rollback(tmp_path / "nothing")


def test_a_damaged_model_is_removed_or_rolled_back_not_rebuilt(index_copy, capsys):
    """A model's damaged file: the error names the model and the two ways out that keep
    the questions and the other models."""
    from cqa_search.cli.__main__ import main

    _store_ranker(index_copy, "other", features=("vsm", "bm25"))
    _store_ranker(index_copy)
    model_file = next((live(index_copy) / "models" / "ranker").glob("*.npy"))
    model_file.write_bytes(model_file.read_bytes()[:-8])  # only this generation has it
    with pytest.raises(IndexFormatError, match=r"models/ranker/.* the file belongs to model "
                                               r"'ranker', not to the questions \(no rebuild "
                                               r"needed\): `cqa-search remove-model .* ranker` "
                                               r"drops that model .*`cqa-search rollback"):
        SearchEngine.open(index_copy)
    assert main(["remove-model", str(index_copy), "ranker"]) == 0
    assert "model 'ranker' removed" in capsys.readouterr().out
    engine = SearchEngine.open(index_copy, verify=True)
    assert set(engine.models) == {"other"} and engine.ranker is None
    assert main(["remove-model", str(index_copy), "ranker"]) == 1
    assert "has no model 'ranker' (models: other)" in capsys.readouterr().err
    # damaged and shared with the previous generation: rolling back cannot help, removing can
    _store_ranker(index_copy)
    shared = next((live(index_copy) / "models" / "other").glob("*.npy"))
    shared.write_bytes(shared.read_bytes()[:-8])
    assert main(["rollback", str(index_copy)]) == 1
    assert "keeps no sound generation" in capsys.readouterr().err
    assert main(["remove-model", str(index_copy), "other"]) == 0
    assert set(SearchEngine.open(index_copy, verify=True).models) == {"ranker"}
