"""The BM25 top k compiled with numba (optional): MaxScore over the query terms'
postings, document at a time, the twin of the numpy path of
:func:`~cqa_search.retrieval.candidates.retrieve`.

The numpy path sums every posting of the query terms into an ``n_docs``-long array
(``bincount``) and then selects among the matching documents. The compiled kernel
(``_numba_kernels.top_k``) walks the postings in row order with one cursor per term and
keeps the k best in a heap; once the k-th best score is known, the terms whose largest
possible contributions cannot lift a document to it no longer propose documents, and are
only looked up for the documents the others propose (MaxScore, Turtle and Flood 1995).
Its results are those of the numpy path bit for bit: the same float32 products summed in
float64 in query order, the same order ``(-score, tie rank, row)`` (a hypothesis test in
``tests/retrieval/test_candidates.py`` checks both against exhaustive scoring).

numba is an optional dependency (``pip install 'cqa-search[fast]'``); importing it costs
about half a second, and the kernel is compiled once and then read from numba's cache on
disk. It is therefore loaded by :func:`load` (``cqa-search serve`` does it before serving,
the benchmarks before timing), or on its own once the numpy path has spent
:data:`AUTO_LOAD_SECONDS` of CPU in a process (a loop of searches over a large archive): a
single search from the command line never pays for it. ``CQA_SEARCH_COMPILED=0`` keeps the
numpy path.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

__all__ = ["load", "kernel", "top_k_of_postings", "available", "AUTO_LOAD_SECONDS",
           "ENVIRONMENT_VARIABLE"]

#: CPU seconds the numpy path may spend in a process before the compiled kernel is loaded.
AUTO_LOAD_SECONDS = 2.0
#: The environment variable that keeps the numpy path ("0").
ENVIRONMENT_VARIABLE = "CQA_SEARCH_COMPILED"

_kernel = None          # the compiled function once loaded
_failed = False         # numba missing or the kernel could not be built
_spent = 0.0            # CPU seconds of the numpy path so far
_lock = threading.Lock()


def _allowed_by_environment() -> bool:
    return os.environ.get(ENVIRONMENT_VARIABLE, "1").strip().lower() not in (
        "0", "false", "no", "off")


def available() -> bool:
    """True when numba can be imported and the environment allows it (the kernel may not
    be loaded yet)."""
    if not _allowed_by_environment():
        return False
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def load() -> bool:
    """Import numba and compile (or read from its cache) the kernel now; True when it is
    ready. Without numba (or with ``CQA_SEARCH_COMPILED=0``) nothing happens and the numpy
    path stays in use."""
    global _kernel, _failed
    if _kernel is not None:
        return True
    if _failed or not _allowed_by_environment():
        return False
    with _lock:
        if _kernel is None and not _failed:
            try:
                from ._numba_kernels import top_k

                top_k(*_example())  # compiled (or read from numba's cache) now
                _kernel = top_k
            except Exception:  # noqa: BLE001 - numba absent or broken: the numpy path
                _failed = True
    return _kernel is not None


def kernel():
    """The compiled kernel, or None while it is not loaded."""
    return _kernel


def note_numpy_time(seconds: float) -> None:
    """Count CPU time spent by the numpy path; past :data:`AUTO_LOAD_SECONDS`, load."""
    global _spent
    _spent += seconds
    if _spent >= AUTO_LOAD_SECONDS and _kernel is None and not _failed:
        load()


def timed(function, *args):
    """``function(*args)``, its CPU time counted towards :data:`AUTO_LOAD_SECONDS`."""
    started = time.process_time()
    try:
        return function(*args)
    finally:
        note_numpy_time(time.process_time() - started)


def top_k_of_postings(indptr, indices, weights, max_weights, term_ids, coef, k, *,
                      doc_category=None, category=None, allowed=None, tie_rank=None):
    """``(rows, scores)`` of the ``k`` best documents holding a query term (score > 0),
    passing the filters, ordered by ``(-score, tie_rank, row)`` (the kernel must be loaded).

    Parameters
    ----------
    indptr, indices : ndarray
        The field's postings (:class:`~cqa_search.index.term_index.FieldIndex`).
    weights : ndarray of float32
        Every posting's weight (:meth:`TermModel.posting_weights`).
    max_weights : ndarray of float32
        Each term's largest posting weight (:meth:`TermModel.max_posting_weights`).
    term_ids : ndarray of int, distinct query terms, in query order
    coef : ndarray of float, their query weights
    k : int >= 1
    doc_category, category, allowed, tie_rank
        As :func:`~cqa_search.retrieval.candidates.retrieve`.
    """
    no_int = np.zeros(0, dtype=np.int32)
    return _kernel(
        np.asarray(indptr), np.asarray(indices), np.asarray(weights), np.asarray(max_weights),
        np.asarray(term_ids, dtype=np.int64), np.asarray(coef, dtype=np.float32), int(k),
        no_int if doc_category is None else np.asarray(doc_category),
        -1 if category is None else int(category), category is not None,
        np.zeros(0, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool),
        allowed is not None,
        no_int if tie_rank is None else np.asarray(tie_rank), tie_rank is not None)


def _example():
    return (np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32),
            np.ones(2, dtype=np.float32), np.ones(1, dtype=np.float32),
            np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.float32), 1,
            np.zeros(0, dtype=np.int32), -1, False, np.zeros(0, dtype=bool), False,
            np.zeros(0, dtype=np.int32), False)
