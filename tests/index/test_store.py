"""The index directory: round trip, mmap, version and corruption checks, atomic writes."""
import json
import os

import numpy as np
import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.exceptions import ArchiveError, IndexFormatError
from cqa_search.index.store import FORMAT_VERSION, is_compatible, open_index, verify_index

QUERIES = ["renew visa", "cheap furniture sofa", "car will not start battery", "swimming"]


def results(engine):
    return [(r.doc_ids, r.scores.tolist(), r.features.tolist())
            for r in (engine.search(q, k=5) for q in QUERIES)]


def test_open_with_and_without_mmap_gives_identical_results(toy_index):
    assert results(SearchEngine.open(toy_index, mmap=True)) == \
        results(SearchEngine.open(toy_index, mmap=False))


def test_rebuild_gives_identical_results(toy_index, tmp_path, fixtures):
    build_index(fixtures / "toy_archive.jsonl", tmp_path / "again")
    assert results(SearchEngine.open(tmp_path / "again")) == results(SearchEngine.open(toy_index))


def test_manifest_records_version_analyzer_stats_and_checksums(toy_index):
    manifest = json.loads((toy_index / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["analyzer"]["stem"] == "snowball"
    assert manifest["stats"]["n_docs"] == 12 and manifest["stats"]["n_categories"] == 3
    for rel, info in manifest["files"].items():
        assert os.path.getsize(toy_index / rel) == info["bytes"] and len(info["sha256"]) == 64
    assert is_compatible(toy_index)
    verify_index(toy_index)


@pytest.fixture
def index_copy(toy_index, tmp_path):
    import shutil
    path = tmp_path / "copy"
    shutil.copytree(toy_index, path)
    return path


def test_bumped_format_version_raises(index_copy):
    mpath = index_copy / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    mpath.write_text(json.dumps(manifest))
    assert not is_compatible(index_copy)
    with pytest.raises(IndexFormatError, match=r"format version 3, but this cqa_search .* reads "
                                               r"version 2: rebuild it with `cqa-search build-index`"):
        SearchEngine.open(index_copy)


def test_truncated_file_raises(index_copy):
    path = index_copy / "fields" / "question" / "indices.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(IndexFormatError, match=r"corrupted index .*indices.npy has \d+ bytes, "
                                               r"expected \d+"):
        SearchEngine.open(index_copy)


def test_missing_file_raises(index_copy):
    (index_copy / "vocab.json").unlink()
    with pytest.raises(IndexFormatError, match="vocab.json is missing"):
        SearchEngine.open(index_copy)


def test_altered_bytes_are_caught_by_verify(index_copy):
    path = index_copy / "fields" / "question" / "counts.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    SearchEngine.open(index_copy)  # same size: only the checksum can tell
    with pytest.raises(IndexFormatError, match="counts.npy does not match its checksum"):
        SearchEngine.open(index_copy, verify=True)


def test_inconsistent_array_raises_on_open(index_copy):
    path = index_copy / "fields" / "question" / "doc_len.npy"
    arr = np.load(path)
    arr[0] += 1
    np.save(path, arr)  # same size, but the lengths no longer add up
    with pytest.raises(IndexFormatError, match="document lengths do not match the manifest"):
        SearchEngine.open(index_copy)


def test_pickled_array_is_refused(index_copy):
    path = index_copy / "doc_category.npy"
    np.save(path, np.array([object()] * 12), allow_pickle=True)
    manifest = json.loads((index_copy / "manifest.json").read_text())
    manifest["files"]["doc_category.npy"]["bytes"] = path.stat().st_size
    (index_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="cannot read doc_category.npy"):
        SearchEngine.open(index_copy)


def test_missing_and_foreign_directories(tmp_path):
    with pytest.raises(IndexFormatError, match="no index at .*nothing"):
        open_index(tmp_path / "nothing")
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
    assert (tmp_path / "photos" / "cat.jpg").exists()


def test_failed_build_leaves_no_index_and_keeps_the_old_one(tmp_path):
    out = tmp_path / "idx"
    build_index([Question("a", "old question")], out)

    def questions():
        yield Question("b", "new question")
        raise RuntimeError("crash mid-build")

    with pytest.raises(RuntimeError, match="crash mid-build"):
        build_index(questions(), out)
    assert SearchEngine.open(out).archive.doc_ids == ["a"]
    assert sorted(os.listdir(tmp_path)) == ["idx"]  # no temporary directory left behind

    with pytest.raises(ArchiveError, match="duplicate question id 'b'"):
        build_index([Question("b", "x"), Question("b", "y")], tmp_path / "new")
    assert not (tmp_path / "new").exists()
