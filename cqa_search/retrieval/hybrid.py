"""The hybrid first stage: a term model's top list and a dense (vector) top list, merged.

A term model (BM25) finds only the questions that share a word with the query; question
vectors (:mod:`cqa_search.vectors`) find the others. The hybrid score of a question is::

    s(q, d) = (1 - a) * T(q, d) / max_d' T(q, d') + a * cos(q, d)

(``T``: the term model's score, normalised by the best score of the archive, so both parts
are at most 1). Scoring every question by ``s`` costs two passes over the archive; instead
:func:`merge` scores the union of the two top lists (each of depth ``m``, typically ``2n``
for ``n`` candidates), computing the part a row lacks exactly (the term score of a row
only the dense list holds, the cosine of a row only the term list holds).

A row in neither list has ``T <= T_m`` and ``cos <= c_m`` (the last score of each full
list), so its ``s`` is at most ``(1 - a) T_m / T_max + a c_m``: when the ``n``-th merged
score is above that bound, the merged top ``n`` is exactly the top ``n`` of the whole
archive (the threshold test of Fagin, Lotem and Naor 2003), which :attr:`Merged.exact`
reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Merged", "merge", "hybrid_scores"]


@dataclass(frozen=True)
class Merged:
    """The merged candidates of :func:`merge`, sorted by (-score, tie rank).

    Attributes
    ----------
    rows : ndarray of int64
    scores : ndarray of float64
        ``s(q, d)``.
    term_scores : ndarray of float64
        The term model's raw score of each row (``T(q, d)``).
    dense_scores : ndarray of float64
        The cosine of each row.
    term_max : float
        ``max_d T(q, d)``, the normaliser (0: no row matches a query term).
    exact : bool
        The rows are provably the top of the whole archive (see the module docstring).
    """

    rows: np.ndarray
    scores: np.ndarray
    term_scores: np.ndarray
    dense_scores: np.ndarray
    term_max: float
    exact: bool


def hybrid_scores(term_scores, dense_scores, a, term_max) -> np.ndarray:
    """``(1 - a) * T / term_max + a * cos`` (the term part 0 when ``term_max`` is not
    positive).

    Examples
    --------
    >>> hybrid_scores(np.array([4.0, 2.0]), np.array([0.1, 0.9]), 0.5, 4.0).tolist()
    [0.55, 0.7]
    """
    term = np.asarray(term_scores, dtype=np.float64)
    dense = np.asarray(dense_scores, dtype=np.float64)
    part = term / term_max if term_max > 0 else np.zeros_like(term)
    return (1.0 - a) * part + a * dense


def merge(term_rows, term_scores, dense_rows, dense_scores, n, *, a, term_of, dense_of,
          term_complete=False, dense_complete=False, tie_rank=None) -> Merged:
    """The top ``n`` of the union of a term top list and a dense top list by the hybrid
    score.

    Parameters
    ----------
    term_rows, term_scores : ndarray
        The term model's best rows of the archive, sorted by decreasing score (its first
        score is ``max_d T(q, d)``).
    dense_rows, dense_scores : ndarray
        The rows of largest cosine, sorted by decreasing cosine.
    n : int or None
        How many to return (None: the whole union).
    a : float in [0, 1]
        Weight of the cosine.
    term_of : callable
        ``term_of(rows) -> scores``: the term score of rows (exact, e.g. a TermModel's
        ``score_rows``).
    dense_of : callable
        ``dense_of(rows) -> cosines``.
    term_complete, dense_complete : bool
        The list holds every row that can score above 0 (term: every matching row) or
        every allowed row (dense): rows outside it score 0 (term) or are not candidates
        (dense). Used by the exactness bound only.
    tie_rank : ndarray of int or callable, optional
        Secondary sort key per row (default: the row), or ``tie_rank(rows) -> keys``
        (keys compared among these rows only).

    Returns
    -------
    Merged
    """
    if not 0 <= a <= 1:
        raise ValueError(f"a must be in [0, 1]; got {a!r}")
    term_rows = np.asarray(term_rows, dtype=np.int64)
    dense_rows = np.asarray(dense_rows, dtype=np.int64)
    term_scores = np.asarray(term_scores, dtype=np.float64)
    dense_scores = np.asarray(dense_scores, dtype=np.float64)
    term_max = float(term_scores[0]) if len(term_scores) else 0.0
    rows = np.union1d(term_rows, dense_rows)
    term = np.zeros(len(rows))
    dense = np.zeros(len(rows))
    in_term = np.searchsorted(rows, term_rows)
    in_dense = np.searchsorted(rows, dense_rows)
    term[in_term] = term_scores
    dense[in_dense] = dense_scores
    missing = np.ones(len(rows), dtype=bool)
    missing[in_term] = False
    if missing.any():
        term[missing] = term_of(rows[missing])
    missing[:] = True
    missing[in_dense] = False
    if missing.any():
        dense[missing] = dense_of(rows[missing])
    scores = hybrid_scores(term, dense, a, term_max)
    secondary = rows if tie_rank is None else \
        tie_rank(rows) if callable(tie_rank) else np.asarray(tie_rank)[rows]
    order = np.lexsort((secondary, -scores))
    if n is not None:
        order = order[:n]
    # Bound on the score of any row in neither list (see the module docstring).
    if dense_complete:
        exact = True
    else:
        t_bound = 0.0 if term_complete or not len(term_scores) else term_scores[-1]
        c_bound = dense_scores[-1] if len(dense_scores) else 1.0
        bound = hybrid_scores(np.array([t_bound]), np.array([c_bound]), a, term_max)[0]
        exact = bool(len(order) and (n is None or len(order) >= n)
                     and scores[order[-1]] > bound)
    return Merged(rows[order], scores[order], term[order], dense[order], term_max, exact)
