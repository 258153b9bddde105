"""The compiled kernels (numba) against the numpy paths, and when they are loaded."""
import numpy as np
import pytest

from cqa_search import SearchConfig
from cqa_search import compiled

pytest.importorskip("numba")


def test_engine_results_are_the_same_with_and_without_the_kernel(toy_engine, monkeypatch):
    engine = toy_engine.with_config(SearchConfig(features=()))
    queries = ["how to renew my residence visa", "visa documents", "family visa work",
               "category:Visas renew", "office"]
    assert compiled.load()
    with_kernel = [engine.search(q, k=k) for q in queries for k in (1, 10, 100)]
    monkeypatch.setattr(compiled, "_kernels", None)
    monkeypatch.setattr(compiled, "_failed", True)  # the numpy path, no auto-load
    without = [engine.search(q, k=k) for q in queries for k in (1, 10, 100)]
    for a, b in zip(with_kernel, without):
        assert a.doc_ids == b.doc_ids and a.scores.tolist() == b.scores.tolist()


def test_the_kernel_loads_itself_once_the_numpy_path_has_cost_enough(monkeypatch):
    monkeypatch.setattr(compiled, "_kernels", None)
    monkeypatch.setattr(compiled, "_spent", 0.0)
    compiled.note_numpy_time(compiled.AUTO_LOAD_SECONDS / 2)
    assert not compiled.loaded()
    compiled.note_numpy_time(compiled.AUTO_LOAD_SECONDS / 2)
    assert compiled.loaded()


def test_the_environment_turns_it_off(monkeypatch):
    monkeypatch.setattr(compiled, "_kernels", None)
    monkeypatch.setenv(compiled.ENVIRONMENT_VARIABLE, "0")
    assert not compiled.available() and not compiled.load() and not compiled.loaded()


def test_threads_search_at_once(toy_engine):
    """The kernel keeps no state between calls and releases the GIL: threads get what a
    single thread gets."""
    from concurrent.futures import ThreadPoolExecutor

    from cqa_search.retrieval import BM25

    assert compiled.load()
    field, model = toy_engine.index["question"], BM25()
    terms = np.arange(min(40, len(field.indptr) - 1))

    def one(seed):
        coef = np.random.default_rng(seed).random(len(terms)) + 0.5
        return [a.tolist() for a in compiled.top_k_of_postings(
            field.indptr, field.indices, model.posting_weights(field),
            model.max_posting_weights(field), terms, coef, 5)]

    alone = [one(s) for s in range(200)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(200))) == alone


def test_version_says_whether_the_kernels_can_be_used(capsys, monkeypatch):
    from cqa_search.cli.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cqa-search ") and out[1].startswith("compiled kernels: numba ")
    monkeypatch.setenv(compiled.ENVIRONMENT_VARIABLE, "0")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "off (CQA_SEARCH_COMPILED=0)" in capsys.readouterr().out


def test_a_kernel_that_cannot_be_built_leaves_the_numpy_paths_and_says_so(monkeypatch, caplog):
    import cqa_search._numba_kernels as kernels

    def broken(*args):
        raise RuntimeError("no LLVM today")

    monkeypatch.setattr(compiled, "_kernels", None)
    monkeypatch.setattr(compiled, "_failed", False)
    monkeypatch.setattr(kernels, "align", broken)
    assert not compiled.load() and not compiled.loaded()
    assert "no LLVM today" in caplog.text
    assert "could not build them" in compiled.describe()
