"""Issue 29: hostile files in an index, a full disk, the terminal, forged files that keep
their checksums, a server whose index goes bad, slow clients.

Small N here (CI); ``scripts/reliability.py`` runs every case of each family (the
figures of BENCHMARKS.md). The loops live in environment.py and forgery.py.
"""
import errno
import json
import os
import signal
import sys

import pytest

from cqa_search import SearchEngine
from cqa_search.cli.__main__ import main
from cqa_search.exceptions import IndexFormatError
from cqa_search.index.store import current_generation
from cqa_search.testing import environment, forgery, harness

pytestmark = pytest.mark.reliability


@pytest.fixture
def index(demo_index):
    return demo_index


def _failures(results):
    return [r for r in results if not r["ok"]]


def test_fifo_device_and_foreign_links_are_corrupted_index(index, tmp_path):
    """A FIFO (the open would wait for ever), /dev/zero (endless), links out of the index,
    a generation directory linked to a foreign folder: one line and exit 1, in bounded
    time and memory. Every third case here; the script runs them all."""
    cases = environment.hostile_file_cases()
    assert len(cases) > 25
    results = environment.hostile_files(index, tmp_path, cases[::3])
    assert _failures(results) == []


def test_a_fifo_current_file_in_process(index, tmp_path):
    copy = harness.fresh_copy(index, tmp_path / "copy")
    (copy / "CURRENT").unlink()
    os.mkfifo(copy / "CURRENT")
    with pytest.raises(IndexFormatError, match="CURRENT is a FIFO, not a regular file"):
        SearchEngine.open(copy)


def test_writers_on_a_file_size_limit(index, tmp_path):
    """``ulimit -f`` (EFBIG): one line, exit 1, the index as it was (build-index is in
    test_bad_archives.py; the script runs every command)."""
    commands = [c for c in environment.writer_commands(tmp_path / "copy", tmp_path / "new",
                                                        tmp_path)
                if c[0] in ("fit", "add", "delete", "convert")]
    assert len(commands) == 4
    assert _failures(environment.full_disk(index, tmp_path, commands=commands)) == []


@pytest.mark.skipif(not environment.tmpfs_available(),
                    reason="no tmpfs can be mounted here (needs root and unshare)")
def test_writers_on_a_full_file_system(index, tmp_path):
    """A real full disk (ENOSPC): a small tmpfs in a private mount namespace."""
    commands = [c for c in environment.writer_commands("@INDEX", "@OUT", tmp_path)
                if c[0] in ("add", "compact")]
    assert _failures(environment.full_file_system(index, tmp_path, commands=commands)) == []


def test_no_space_left_in_process(index, tmp_path, capsys, monkeypatch):
    """Any command that writes an index, at the OS boundary of its writes."""
    copy = harness.fresh_copy(index, tmp_path / "copy")
    before = current_generation(copy)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("cqa_search.index.store._HashingFile.write", full)
    assert main(["delete", str(copy), "travel-021"]) == 1
    assert capsys.readouterr().err == (f"cqa-search: error: cannot write: No space left on "
                                       f"device (the index {copy} is unchanged)\n")
    assert current_generation(copy) == before
    assert [n for n in os.listdir(copy) if n.startswith(".tmp-")] == []


def test_the_terminal(index):
    """stdout on /dev/full: one line, exit 1; in ASCII: replaced characters, exit 0; a
    pipe closed early: a quiet exit 0 (every output case of query; the script runs
    info and --json too)."""
    results = environment.terminal(index, labels=("query",))
    assert len(results) == 3
    assert _failures(results) == []


def test_ascii_output_replaces_what_it_cannot_encode(index, capsys, monkeypatch):
    import io

    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr("sys.stdout", out)
    assert main(["query", str(index), "café visa", "-k", "1"]) == 0
    out.flush()
    text = out.buffer.getvalue().decode("ascii")
    assert "'caf?' is not in the archive" in text


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # forged weights
def test_forged_counts_and_weights_are_refused(index, tmp_path):
    """The issue's cases, with their checksums: a count beyond its dtype, ranker weights at
    float32's maximum; then a sample of every forgery (the script runs them all)."""
    copy = harness.fresh_copy(index, tmp_path / "copy")
    root = copy / current_generation(copy)
    weights = json.loads((root / "manifest.json").read_text())["segments"][0]["fields"][
        "question"]["weights"]
    for case, message in [
        (("manifest.json", ["segments", 0, "fields", "question", "weights", next(iter(weights))],
          []), "bad manifest .*segment weights name no stored file"),  # was an AttributeError
        (("models/translation/model.json", ["meta", "ibm1", "n_cooccurrences"], 99999999999),
         "model 'translation' cannot be loaded .ibm1 n_cooccurrences is 99,999,999,999, "
         "outside"),
        (("models/ranker/coef.npy", "element", "max"), "ranker 'ranker' gives scores that are "
                                                       "not finite numbers"),
        (("models/ranker/norm_offset.npy", "element", "max"), "not finite numbers"),
        (("manifest.json", ["stats", "n_rows"], 1e308), "bad manifest"),
        (("models/topics-gnmfnc/shared_topics.npy", "element", "max_all"),
         "cannot score with its stored values"),
    ]:
        saved = forgery.forge(root, case)
        try:
            with pytest.raises(IndexFormatError, match=message):
                for text in harness.QUERIES:
                    SearchEngine.open(copy, verify=True).search(text)
        finally:
            for file, data in saved.items():
                file.write_bytes(data)
    cases = forgery.forgery_cases(copy, n=60, seed=3)
    result = forgery.run_forgeries(copy, cases, harness.QUERIES)
    assert "crashed" not in result, result
    assert result["unexpected"] == [], result["unexpected"][:3]
    assert result["outcomes"]["corrupted index"] > 0


def test_corruptions_are_compared_with_the_pristine_index(index, tmp_path):
    """A bit flip that is not refused gives results equal to the pristine index's, or is
    counted as different (by file); with --verify nothing differs."""
    copy = harness.fresh_copy(index, tmp_path / "copy")
    cases = [c for c in harness.corruption_cases(copy, n_per_file=3, seed=4)
             if c[0].endswith(("archive.jsonl", "bm25.npy", "model.json"))]
    plain = harness.run_corruptions(copy, cases)
    verified = harness.run_corruptions(copy, cases, verify=True)
    for result in (plain, verified):
        assert "crashed" not in result and result["unexpected"] == []
        assert sum(result["outcomes"].values()) == len(cases)
    assert sum(plain["different"].values()) == plain["outcomes"]["different results"]
    assert verified["outcomes"]["different results"] == 0 and verified["different"] == {}


@pytest.fixture
def server_stack():
    pytest.importorskip("fastapi", reason="the server extra is not installed")


def test_the_server_follows_bad_generations_and_stops(server_stack, index, tmp_path):
    """A FIFO manifest, /dev/zero, a model that cannot load: /health says so, the next good
    generation is served, SIGINT stops the server in bounded time with a FIFO live, and a
    server started on a bad model answers 503 and serves the good one that follows."""
    steps = environment.watcher(index, tmp_path, sig=signal.SIGINT)
    assert len(steps) == 5
    assert _failures(steps) == []


def test_slow_clients_are_dropped(server_stack, index):
    """200 connections that trickle their request heads are closed after the head timeout
    (uvicorn kept them for as long as they trickled) while others are answered."""
    result = environment.slow_clients(index, n_clients=200)
    assert result["ok"], result
