"""Vectorised look-ups in posting lists (the CSC layout of :class:`FieldIndex`)."""
from __future__ import annotations

import numpy as np

from .. import compiled

__all__ = ["locate"]


def locate(indptr, indices, term_ids, rows):
    """Posting positions of every (term, row) pair that occurs, by one batched binary
    search over all pairs (instead of one search per term).

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_terms + 1,)
    indices : ndarray of int, shape (nnz,)
        Rows of each term's postings, sorted within a term.
    term_ids : ndarray of int, shape (n_query_terms,)
    rows : ndarray of int64, shape (n_rows,)

    Returns
    -------
    positions : ndarray of int64
        Posting positions (into ``indices``) found, term-major: the pairs of
        ``term_ids[0]`` first, in the order of ``rows``.
    i, j : ndarray of int64
        Their index into ``rows`` and into ``term_ids``.

    Examples
    --------
    >>> indptr = np.array([0, 2, 5]); indices = np.array([1, 3, 0, 1, 4])
    >>> [a.tolist() for a in locate(indptr, indices, np.array([1, 0]), np.array([1, 4]))]
    [[3, 4, 0], [0, 1, 0], [0, 0, 1]]
    """
    rows = np.asarray(rows, dtype=np.int64)
    term_ids = np.asarray(term_ids, dtype=np.int64)
    if compiled.active() == "numba":  # the same pairs in the same order, compiled
        return compiled.locate(indptr, indices, term_ids, rows)
    return compiled.timed(_locate, indptr, np.asarray(indices), term_ids, rows)


def _locate(indptr, indices, term_ids, rows):
    lo = indptr[term_ids]
    df = indptr[term_ids + 1] - lo
    j = np.flatnonzero(df > 0)
    if len(j) == 0 or len(rows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    n = len(rows)
    # pairs term-major: pair k is (term j[k // n], row k % n)
    base = np.repeat(lo[j], n)
    end = base + np.repeat(df[j], n)
    length = end - base
    target = np.tile(rows, len(j))
    # Branchless binary search, all ranges at once: base stays the last position whose
    # row is below the target (or the range start), until every range is one long.
    for _ in range(int(df[j].max()).bit_length()):
        half = length >> 1
        probe = base + half
        np.copyto(base, probe, where=indices[probe] < target)
        length -= half
    base += indices[base] < target                      # the lower bound
    found = np.flatnonzero(base < end)
    found = found[indices[base[found]] == target[found]]
    return base[found], found % n, j[found // n]
