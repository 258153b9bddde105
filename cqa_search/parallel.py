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
import time

__all__ = ["map_queries", "n_workers", "PROBE_SECONDS", "WORTH_SECONDS"]

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


#: Seconds of items run in this process first, to estimate what the rest will cost.
PROBE_SECONDS = 0.05
#: Estimated seconds of the remaining items below which they stay in this process:
#: starting and stopping the workers and sending the results back costs ~0.1 s, so a
#: smaller batch would only be slower on several processes.
WORTH_SECONDS = 0.5


def map_queries(function, items, *, state, n_jobs=None) -> list:
    """``[function(state, item) for item in items]``, in order, on ``n_jobs`` processes.

    ``state`` (e.g. an opened engine) is shared with the workers by forking, never
    pickled; ``function``'s results are pickled back, so they should be plain data
    (arrays, lists, dicts), not objects holding the index. The first items run here for
    :data:`PROBE_SECONDS`; the rest goes to the workers only when it is estimated to take
    :data:`WORTH_SECONDS` or more (the results are the same either way).
    """
    global _TASK
    items = list(items)
    workers = n_workers(n_jobs, len(items))
    if workers == 1:
        return [function(state, item) for item in items]
    done, started = [], time.perf_counter()
    while len(done) < len(items) and time.perf_counter() - started < PROBE_SECONDS:
        done.append(function(state, items[len(done)]))
    rest = items[len(done):]
    per_item = (time.perf_counter() - started) / max(len(done), 1)
    if per_item * len(rest) < WORTH_SECONDS or len(rest) < 2:
        return done + [function(state, item) for item in rest]
    workers = min(workers, len(rest))
    size = -(-len(rest) // (4 * workers))  # a few chunks per worker evens out long queries
    chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
    _TASK = (function, state)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_chunk, chunks)
    finally:
        _TASK = None
    return done + [result for part in parts for result in part]
