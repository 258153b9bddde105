"""Issue 12 on stored indexes: flipped bits, kill -9 of writers, readers against a writer.

Small N here (CI); ``scripts/reliability.py`` runs the same loops at full N and prints the
figures of BENCHMARKS.md.
"""
import pytest

from cqa_search.testing import harness as reliability

pytestmark = pytest.mark.reliability


@pytest.fixture
def index(demo_index):
    return demo_index


def test_flipped_bits_in_every_file_give_a_result_or_corrupted_index(index, tmp_path):
    copy = reliability.fresh_copy(index, tmp_path / "copy")
    cases = reliability.corruption_cases(copy, n_per_file=2, seed=1)
    assert len(cases) > 60  # arrays, JSON, the archive, the manifest, every model's files
    result = reliability.run_corruptions(copy, cases)
    assert "crashed" not in result, result
    assert result["unexpected"] == [], result["unexpected"][:3]
    assert result["outcomes"]["corrupted index"] > 0


def test_a_crafted_file_with_its_checksum_is_still_refused(index, tmp_path):
    """A flip with the manifest's checksum and size updated (what --verify cannot catch):
    the checks of every array still stand between it and scipy."""
    import json

    import numpy as np

    from cqa_search.index.store import current_generation
    from cqa_search.index.store import _sha256

    copy = reliability.fresh_copy(index, tmp_path / "copy")
    root = copy / current_generation(copy)
    rel = next(str(p.relative_to(root)) for p in root.rglob("ibm1_indices.npy"))
    arr = np.load(root / rel)
    arr[len(arr) // 2] = 2 ** 30  # far out of range: would segfault in scipy's tocsc
    np.save(root / rel, arr)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["files"][rel] = {"bytes": (root / rel).stat().st_size, "sha256": _sha256(root / rel)}
    (root / "manifest.json").write_text(json.dumps(manifest))
    from cqa_search import SearchEngine
    from cqa_search.exceptions import IndexFormatError

    with pytest.raises(IndexFormatError, match="corrupted index .*translation.*ibm1 table "
                                               "indices holds 1073741824, above its bound"):
        SearchEngine.open(copy, verify=True)


def test_kill_minus_nine_never_breaks_the_index(index, tmp_path):
    copy = reliability.fresh_copy(index, tmp_path / "copy")
    result = reliability.kill_loop(copy, n_kills=5, seed=2, max_delay=2.5)
    assert result["open_failures"] == [], result
    assert result["leftovers_after_next_write"] == []
    assert len(result["generation_dirs"]) <= 2


def test_readers_never_fail_while_a_writer_rebuilds_and_refits(tmp_path):
    path = tmp_path / "idx"
    from cqa_search import build_index

    build_index(reliability.demo_questions(), path)
    result = reliability.readers_against_writer(path, n_readers=3, seconds=6)
    assert result["writes"] >= 2 and result["opens"] > 0
    assert result["failed_opens"] == 0, result["errors"]
    assert result["reader_exit_codes"] == [0, 0, 0]
