"""The compiled kernels (numba) against the numpy paths, and the switch between them."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import SearchConfig
from cqa_search import compiled
from cqa_search.exceptions import ParameterError

pytest.importorskip("numba")


@pytest.fixture
def fresh(monkeypatch):
    """The module's switch as in a new process (whatever this one chose before); the
    kernels, once loaded, stay importable from numba's cache."""
    for name, value in (("_chosen", None), ("_from_environment", None), ("_kernels", None),
                        ("_failed", False), ("_spent", 0.0)):
        monkeypatch.setattr(compiled, name, value)
    monkeypatch.delenv(compiled.ENVIRONMENT_VARIABLE, raising=False)
    return compiled


def test_engine_results_are_the_same_with_and_without_the_kernel(toy_engine, fresh):
    engine = toy_engine.with_config(SearchConfig(features=()))
    queries = ["how to renew my residence visa", "visa documents", "family visa work",
               "category:Visas renew", "office",
               "visa renew documents office family work residence how to my the a"]
    assert compiled.use("numba") == "numba"
    with_kernel = [engine.search(q, k=k) for q in queries for k in (1, 10, 100)]
    assert compiled.use("numpy") == "numpy"
    without = [engine.search(q, k=k) for q in queries for k in (1, 10, 100)]
    for a, b in zip(with_kernel, without):
        assert a.doc_ids == b.doc_ids and a.scores.tolist() == b.scores.tolist()


def test_auto_loads_the_kernels_once_the_numpy_paths_have_cost_enough(fresh):
    assert compiled.active() == "numpy"
    compiled.note_numpy_time(compiled.AUTO_LOAD_SECONDS / 2)
    assert compiled.active() == "numpy"
    compiled.note_numpy_time(compiled.AUTO_LOAD_SECONDS / 2)
    assert compiled.active() == "numba"
    assert compiled.describe().endswith(", loaded")


def test_use_chooses_and_active_says(fresh):
    assert "(auto)" in compiled.describe()  # not loaded yet: says when it will be
    assert compiled.use("numpy") == "numpy" and not compiled.load()
    compiled.note_numpy_time(10 * compiled.AUTO_LOAD_SECONDS)  # no auto-load under numpy
    assert compiled.active() == "numpy"
    assert compiled.describe() == "compiled kernels: off (compiled.use('numpy')): the numpy paths"
    assert compiled.use("numba") == "numba"
    assert compiled.use("numpy") == "numpy"   # set aside, not unloaded
    assert compiled.use("auto") == "numba"    # loaded already: in use again
    with pytest.raises(ParameterError, match=r"implementation must be one of "
                                             r"\{'auto', 'numba', 'numpy'\}; got 'fast'"):
        compiled.use("fast")


@pytest.mark.parametrize("value, expected", [("0", "numpy"), ("numpy", "numpy"),
                                             ("off", "numpy"), ("numba", "numba"),
                                             ("auto", "numpy"), ("", "numpy")])
def test_the_environment_chooses_when_use_is_not_called(fresh, monkeypatch, value, expected):
    monkeypatch.setenv(compiled.ENVIRONMENT_VARIABLE, value)
    assert compiled.active() == expected  # numba: loaded at the first search
    compiled.use("numpy")
    assert compiled.active() == "numpy"   # use() wins over the environment


def test_threads_search_at_once(toy_engine, fresh):
    """The kernel keeps no state between calls (each thread has its own window) and
    releases the GIL: threads get what a single thread gets."""
    from concurrent.futures import ThreadPoolExecutor

    from cqa_search.retrieval import BM25

    compiled.use("numba")
    field, model = toy_engine.index["question"], BM25()
    terms = np.arange(min(40, len(field.indptr) - 1))

    def one(seed):
        coef = np.random.default_rng(seed).random(len(terms)) + 0.5
        return [a.tolist() for a in compiled.top_k_of_postings(
            field.indptr, field.indices, model.posting_weights(field), terms, coef, 5,
            n_docs=field.n_docs)]

    alone = [one(s) for s in range(200)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(200))) == alone


def test_version_says_which_implementation_is_used(capsys, fresh, monkeypatch):
    from cqa_search.cli.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cqa-search ") and out[1].startswith("compiled kernels: numba ")
    monkeypatch.setenv(compiled.ENVIRONMENT_VARIABLE, "0")
    monkeypatch.setattr(compiled, "_from_environment", None)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "off (CQA_SEARCH_COMPILED=0)" in capsys.readouterr().out


def test_a_kernel_that_cannot_be_built_leaves_the_numpy_paths_and_says_so(fresh, monkeypatch,
                                                                           caplog):
    import cqa_search._numba_kernels as kernels

    def broken(*args):
        raise RuntimeError("no LLVM today")

    monkeypatch.setattr(kernels, "align", broken)
    assert not compiled.load() and compiled.active() == "numpy"
    assert "no LLVM today" in caplog.text
    assert "could not build them" in compiled.describe()
    with pytest.raises(RuntimeError, match="cannot be loaded: numba .* could not build them"):
        compiled.use("numba")


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.integers(0, 400), min_size=1, max_size=700),
       needles=st.lists(st.integers(-60, 420), max_size=80))
def test_directed_search_is_searchsorted(keys, needles):
    compiled.load()
    keys = np.sort(np.array(keys, dtype=np.int64))
    needles = np.array(needles, dtype=np.int64)
    low, high = int(keys[0]), int(keys[-1])
    for shift in (0, 1, 3, 12):  # buckets of one key value up to one bucket for them all
        for start in {low, low // 2, 0}:  # the directory may start below the first key
            starts = compiled._kernels.bucket_starts(keys, start, shift,
                                                     ((high - start) >> shift) + 1)
            assert starts.tolist() == np.searchsorted(
                keys, start + (np.arange(len(starts)) << shift)).tolist()
            got = compiled._kernels.search_directed(keys, starts, start, shift, needles)
            assert got.tolist() == np.searchsorted(keys, needles).tolist()
    assert compiled.search_sorted(keys, needles).tolist() == \
        np.searchsorted(keys, needles).tolist()


@pytest.mark.parametrize("unsorted_keys", [compiled.UNSORTED_KEYS, 0])
def test_directed_search_of_a_wide_or_skewed_table(unsorted_keys, monkeypatch):
    """The same positions with the needles searched as given (a table in the cache) and
    sorted and distinct first (a larger one)."""
    compiled.load()
    monkeypatch.setattr(compiled, "UNSORTED_KEYS", unsorted_keys)
    rng = np.random.default_rng(0)
    skewed = np.unique(np.concatenate([rng.integers(0, 1000, 5000),
                                       rng.integers(0, 1 << 50, 50)])).astype(np.int64)
    wide = np.array([-5, 0, 1 << 62, (1 << 62) + 1], dtype=np.int64)  # numpy's search
    for keys in (skewed, wide):
        needles = np.concatenate([keys, keys + 1, keys - 1, rng.integers(-10, 1 << 50, 500)])
        needles = rng.permutation(needles)
        assert compiled.search_sorted(keys, needles).tolist() == \
            np.searchsorted(keys, needles).tolist()
