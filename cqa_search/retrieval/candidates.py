"""Top-k selection over dense score vectors, with deterministic tie-breaking and filters."""
from __future__ import annotations

import numpy as np

__all__ = ["top_k"]


def top_k(scores, k, *, allowed=None, tie_rank=None) -> np.ndarray:
    """Rows of the ``k`` best scores, sorted by ``(-score, tie_rank)``.

    Parameters
    ----------
    scores : ndarray of float, shape (n_docs,)
    k : int or None
        How many; None for all allowed rows.
    allowed : ndarray of bool, shape (n_docs,), or ndarray of int rows, optional
        Only these rows can be returned (e.g. documents matching the query in the wanted
        category).
    tie_rank : ndarray of int, shape (n_docs,), optional
        Secondary key for equal scores (the rank of each row's doc id in sorted order,
        so ties are broken by doc id); the row itself when None.

    Returns
    -------
    rows : ndarray of int64

    Examples
    --------
    >>> top_k(np.array([0.5, 2.0, 0.5, 1.0]), 3).tolist()
    [1, 3, 0]
    >>> top_k(np.array([0.5, 2.0, 0.5, 1.0]), 2, allowed=np.array([True, False, True, False])).tolist()
    [0, 2]
    """
    if allowed is None:
        rows = np.arange(len(scores))
    elif allowed.dtype == bool:
        rows = np.flatnonzero(allowed)
    else:
        rows = np.asarray(allowed, dtype=np.int64)
    sub = scores[rows]
    if k is not None and k < len(rows):
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        # Keep every row tied with the k-th score so the tie-break below sees them all.
        kth = np.partition(sub, len(sub) - k)[len(sub) - k]
        keep = sub >= kth
        rows, sub = rows[keep], sub[keep]
    secondary = rows if tie_rank is None else tie_rank[rows]
    order = np.lexsort((secondary, -sub))
    out = rows[order]
    return out if k is None else out[:k]
