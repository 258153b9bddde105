"""Many queries on several cores: forked worker processes sharing one opened engine.

A query's work is mostly Python (analysis, candidate bookkeeping, feature scorers) between
short numpy kernels, so threads would mostly wait for each other on the interpreter lock.
Forked processes share the engine's memory-mapped index and loaded models copy-on-write
(nothing is reopened, so every worker reads the same index generation) and each runs a
share of the queries with one BLAS thread.
"""
from __future__ import annotations

import multiprocessing
import os

__all__ = ["map_queries", "n_workers"]

_TASK = None  # (function, shared state) of the running map, inherited by forked workers


def n_workers(n_jobs, n_items) -> int:
    """Worker processes for ``n_jobs`` (None or 1: none; -1: one per core)."""
    if n_jobs is None or n_items < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        from .exceptions import ParameterError

        raise ParameterError(f"n_jobs must be a positive integer, -1 (every core) or None; "
                             f"got {n_jobs!r}")
    return min(n_jobs, n_items)


def _chunk(items):
    from threadpoolctl import threadpool_limits

    function, state = _TASK
    with threadpool_limits(1):
        return [function(state, item) for item in items]


def map_queries(function, items, *, state, n_jobs=None) -> list:
    """``[function(state, item) for item in items]``, in order, on ``n_jobs`` processes.

    ``state`` (e.g. an opened engine) is shared with the workers by forking, never
    pickled; ``function``'s results are pickled back, so they should be plain data
    (arrays, lists, dicts), not objects holding the index.
    """
    global _TASK
    items = list(items)
    workers = n_workers(n_jobs, len(items))
    if workers == 1:
        return [function(state, item) for item in items]
    size = -(-len(items) // (4 * workers))  # a few chunks per worker evens out long queries
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    _TASK = (function, state)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_chunk, chunks)
    finally:
        _TASK = None
    return [result for part in parts for result in part]
