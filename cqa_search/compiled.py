"""Compiled twins of the hottest numpy paths (numba, optional): each gives the numpy
path's result (bit for bit, but for the sum-form DP: to rounding), and the numpy path stays
the reference and the fallback.

- :func:`top_k_of_postings`: the BM25 top k by MaxScore over the query terms' postings,
  document at a time (:func:`~cqa_search.retrieval.candidates.top_k_of_model`, for queries of
  up to :data:`MAXSCORE_TERMS` terms). The numpy path
  sums every posting of the query terms into an ``n_docs``-long array (``bincount``) and
  then selects among the matching documents. The kernel walks the postings in row order
  with one cursor per term and keeps the k best in a heap; once the k-th best score is
  known, the terms whose largest possible contributions cannot lift a document to it no
  longer propose documents, and are only looked up for the documents the others propose
  (MaxScore, Turtle and Flood 1995). The same float32 products are summed in float64 in
  query order, and hits are ordered by ``(-score, tie rank, row)``: a hypothesis test in
  ``tests/retrieval/test_candidates.py`` checks both paths against exhaustive scoring.
- :func:`sum_dp` and :func:`viterbi`: the segmentation DPs of the translation features
  (:mod:`cqa_search.translation.scoring`), a loop over positions that numpy runs as one
  small ``einsum`` or ``argmax`` per position.
- :func:`align`: eq. 9's alignment of each candidate's words to the query terms, one pass
  over the (candidate, word, query term) entries instead of sorting them by (candidate,
  term) to reduce groups.
- :func:`locate`: the posting positions of (term, candidate) pairs that the term features
  read (:func:`cqa_search.retrieval.postings.locate`), one binary search a pair instead
  of numpy's rounds over all pairs at once (as many rounds as the longest posting list
  has bits).

numba is an optional dependency (``pip install 'cqa-search[fast]'``); importing it and
reading the kernels from numba's cache on disk costs about half a second (the first time on
a machine, compiling them takes about 7 s; ``NUMBA_CACHE_DIR`` moves the cache). They are therefore loaded by :func:`load` (``cqa-search serve`` does it before
serving, the benchmarks before timing), or on their own once the numpy paths have spent
:data:`AUTO_LOAD_SECONDS` of CPU in a process (a loop of searches): a single search from
the command line never pays for it. ``CQA_SEARCH_COMPILED=0`` keeps the numpy paths.
"""
from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

__all__ = ["load", "loaded", "available", "describe", "timed", "top_k_of_postings", "sum_dp", "viterbi",
           "locate", "align", "AUTO_LOAD_SECONDS", "MAXSCORE_TERMS", "ENVIRONMENT_VARIABLE"]

#: CPU seconds the numpy path may spend in a process before the compiled kernel is loaded.
AUTO_LOAD_SECONDS = 2.0
#: Longest query (in distinct terms) whose top k MaxScore computes: every document it
#: visits costs a look at each essential term, and past 8-10 terms the numpy path, one
#: pass over every posting, is faster (measured on 200,000 and 800,000 questions).
MAXSCORE_TERMS = 8
#: The environment variable that keeps the numpy path ("0").
ENVIRONMENT_VARIABLE = "CQA_SEARCH_COMPILED"

_kernels = None         # the module of compiled kernels once loaded
_failed = False         # numba missing or a kernel could not be built
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


def describe() -> str:
    """One line on the kernels for people (``cqa-search --version``): installed or not,
    turned off, loaded."""
    if not _allowed_by_environment():
        return f"compiled kernels: off ({ENVIRONMENT_VARIABLE}=0): the numpy paths"
    if not available():
        return ("compiled kernels: not installed, the numpy paths "
                "(pip install 'cqa-search[fast]' for numba)")
    from importlib.metadata import PackageNotFoundError, version

    try:
        numba = f"numba {version('numba')}"
    except PackageNotFoundError:  # (importable without metadata)
        numba = "numba"
    if _failed:
        return f"compiled kernels: {numba} could not build them: the numpy paths"
    return (f"compiled kernels: {numba}, " + ("loaded" if loaded() else
            "loaded by `serve`, or after 2 s of searching"))


def load() -> bool:
    """Import numba and compile (or read from its cache) the kernels now; True when they
    are ready. Without numba (or with ``CQA_SEARCH_COMPILED=0``) nothing happens and the
    numpy paths stay in use."""
    global _kernels, _failed
    if _kernels is not None:
        return True
    if _failed or not _allowed_by_environment():
        return False
    with _lock:
        if _kernels is None and not _failed:
            try:
                from . import _numba_kernels as kernels

                for name, example in _examples().items():  # compiled or read from the cache
                    getattr(kernels, name)(*example)
                _kernels = kernels
            except Exception as exc:  # noqa: BLE001 - numba absent or broken: numpy paths
                _failed = True
                if available():  # (installed, yet it failed: say so once)
                    logging.getLogger(__name__).warning(
                        "the compiled kernels could not be loaded (%s: %s); searching with "
                        "the numpy paths", type(exc).__name__, exc)
    return _kernels is not None


def loaded() -> bool:
    """True when the kernels are loaded (the compiled paths are taken)."""
    return _kernels is not None


def note_numpy_time(seconds: float) -> None:
    """Count CPU time spent by the numpy paths; past :data:`AUTO_LOAD_SECONDS`, load."""
    global _spent
    _spent += seconds
    if _spent >= AUTO_LOAD_SECONDS and _kernels is None and not _failed:
        load()


def timed(function, *args):
    """``function(*args)`` (a numpy path), its CPU time counted towards
    :data:`AUTO_LOAD_SECONDS`."""
    started = time.process_time()
    try:
        return function(*args)
    finally:
        note_numpy_time(time.process_time() - started)


def top_k_of_postings(indptr, indices, weights, max_weights, term_ids, coef, k, *,
                      doc_category=None, category=None, allowed=None, tie_rank=None):
    """``(rows, scores)`` of the ``k`` best documents holding a query term (score > 0),
    passing the filters, ordered by ``(-score, tie_rank, row)`` (the kernels must be
    loaded).

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
        As :func:`~cqa_search.retrieval.candidates.top_k_of_model`.
    """
    no_int = np.zeros(0, dtype=np.int32)
    return _kernels.top_k(
        np.asarray(indptr), np.asarray(indices), np.asarray(weights), np.asarray(max_weights),
        np.asarray(term_ids, dtype=np.int64), np.asarray(coef, dtype=np.float32), int(k),
        no_int if doc_category is None else np.asarray(doc_category),
        -1 if category is None else int(category), category is not None,
        np.zeros(0, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool),
        allowed is not None,
        no_int if tie_rank is None else np.asarray(tie_rank), tie_rank is not None)


def sum_dp(probs, lengths, running, rescale):
    """``log alpha`` of the sum-form DP of every row at its end (the kernels must be
    loaded): :func:`cqa_search.translation.scoring._sum_dp` with ``running`` (rows still
    running at each position) computed."""
    return _kernels.sum_dp(np.ascontiguousarray(probs, dtype=np.float64),
                           np.asarray(lengths, dtype=np.int64),
                           np.asarray(running, dtype=np.int64), int(rescale))


def viterbi(logp, floor):
    """``(pad, back)`` of the max-form DP (the kernels must be loaded): see
    :func:`cqa_search.translation.scoring._viterbi`."""
    return _kernels.viterbi(np.ascontiguousarray(logp, dtype=np.float64), float(floor))


def locate(indptr, indices, term_ids, rows):
    """``(positions, i, j)`` of :func:`cqa_search.retrieval.postings.locate` (the kernels
    must be loaded)."""
    return _kernels.locate(np.asarray(indptr), np.asarray(indices),
                           np.asarray(term_ids, dtype=np.int64), np.asarray(rows, dtype=np.int64))


def align(doc, term, prob, last, p_null, n, n_terms):
    """Eq. 9's winners, flat ``(n * n_terms,)`` (the kernels must be loaded): see
    :meth:`cqa_search.translation.scoring.TranslationScorer._align`."""
    return _kernels.align(np.asarray(doc, dtype=np.int64), np.asarray(term, dtype=np.int64),
                          np.asarray(prob, dtype=np.float64), np.asarray(last, dtype=np.int64),
                          np.asarray(p_null, dtype=np.float64), int(n), int(n_terms))


def _examples():
    top_k = (np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32),
             np.ones(2, dtype=np.float32), np.ones(1, dtype=np.float32),
             np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.float32), 1,
             np.zeros(0, dtype=np.int32), -1, False, np.zeros(0, dtype=bool), False,
             np.zeros(0, dtype=np.int32), False)
    probs = np.full((2, 2, 1), 0.5)
    return {"top_k": top_k,
            "sum_dp": (probs, np.array([2]), np.array([1, 1, 1]), 4),
            "viterbi": (np.log(probs), -1e30),
            "locate": top_k[:2] + (np.zeros(1, dtype=np.int64), np.array([1], dtype=np.int64)),
            "align": (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.ones(1),
                      np.zeros(1, dtype=np.int64), np.zeros(1), 1, 1)}
