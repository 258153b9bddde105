"""What the ranking learners share: query groups in a canonical order, per-query average
precision of a score vector, within-query pairs, query-grouped folds, learner results.

Every learner sees the training rows in the *canonical order* of :class:`QueryGroups`:
queries sorted by id, and the rows of a query sorted by their feature values (then
label). Nothing downstream reads the caller's row order, so a fit does not depend on it;
randomness (restarts, query shuffling, folds) comes only from ``random_state``.

Average precision here is the training objective of the MAP learners. Ties in score are
broken *pessimistically* (non-relevant first), which is independent of row order and
never rewards a weight vector for leaving relevant and non-relevant candidates tied.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..exceptions import ParameterError

__all__ = ["QueryGroups", "average_precision", "mean_average_precision", "query_folds",
           "query_minmax", "LearnerFit", "relevant"]

#: Labels at or above this are relevant for average precision (the qrels convention).
RELEVANCE_THRESHOLD = 1


def relevant(y) -> np.ndarray:
    """Boolean relevance of graded labels (``y >= 1``)."""
    return np.asarray(y) >= RELEVANCE_THRESHOLD


class QueryGroups:
    """Training rows grouped by query, in a canonical order.

    Parameters
    ----------
    qid : array-like of shape (n_samples,)
        Query id of each row (any sortable type: str or int).
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)

    Attributes
    ----------
    order : ndarray of int64, shape (n_samples,)
        ``X[order]`` is the canonical order: query id, then feature values, then label.
    qids : ndarray, shape (n_queries,)
        Distinct query ids, sorted.
    bounds : ndarray of int64, shape (n_queries + 1,)
        Query ``q`` holds canonical rows ``bounds[q]:bounds[q + 1]``.
    group : ndarray of int64, shape (n_samples,)
        Query index of each canonical row.

    Examples
    --------
    >>> import numpy as np
    >>> g = QueryGroups(["b", "a", "b"], np.array([[1.0], [5.0], [0.0]]), np.array([1, 0, 0]))
    >>> g.order.tolist(), g.qids.tolist(), g.bounds.tolist()
    ([1, 2, 0], ['a', 'b'], [0, 1, 3])
    """

    def __init__(self, qid, X, y):
        qid = np.asarray(qid)
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        self.qids, codes = np.unique(qid, return_inverse=True)
        codes = codes.ravel()
        # np.lexsort: the last key is the primary one.
        keys = [y] + [X[:, j] for j in range(X.shape[1] - 1, -1, -1)] + [codes]
        self.order = np.lexsort(keys).astype(np.int64)
        self.group = codes[self.order].astype(np.int64)
        counts = np.bincount(self.group, minlength=len(self.qids))
        self.bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @classmethod
    def _from_group(cls, group):
        """Groups of rows already in canonical order (``group`` sorted, contiguous)."""
        self = cls.__new__(cls)
        group = np.asarray(group, dtype=np.int64)
        uniq, self.group = np.unique(group, return_inverse=True)
        self.group = self.group.ravel().astype(np.int64)
        self.qids = uniq
        self.order = np.arange(len(group), dtype=np.int64)
        counts = np.bincount(self.group, minlength=len(uniq))
        self.bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self

    @property
    def n_queries(self) -> int:
        return len(self.qids)

    def __len__(self):
        return len(self.group)

    def slices(self):
        """``slice`` of canonical rows of each query, in query order."""
        return [slice(int(a), int(b)) for a, b in zip(self.bounds[:-1], self.bounds[1:])]

    def subset(self, queries) -> tuple:
        """Canonical rows of the given query indices and their :class:`QueryGroups`."""
        queries = np.sort(np.asarray(queries, dtype=np.int64))
        rows = np.concatenate([np.arange(self.bounds[q], self.bounds[q + 1]) for q in queries]) \
            if len(queries) else np.zeros(0, np.int64)
        return rows, QueryGroups._from_group(self.group[rows])

    def pairs(self, y):
        """Within-query preference pairs ``(hi, lo)``: canonical rows with ``y[hi] > y[lo]``.

        Returns
        -------
        hi, lo : ndarray of int64, shape (n_pairs,)
            Grouped by query, in canonical order.
        """
        y = np.asarray(y)
        his, los = [], []
        for s in self.slices():
            yq = y[s]
            i, j = np.nonzero(yq[:, None] > yq[None, :])
            his.append(i + s.start)
            los.append(j + s.start)
        if not his:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(his).astype(np.int64), np.concatenate(los).astype(np.int64)


def average_precision(scores, y, groups: QueryGroups) -> np.ndarray:
    """Average precision of each query when its rows are ranked by ``scores``.

    AP is the mean of precision@i over the ranks i that hold a relevant row (``y >= 1``);
    a query without relevant rows scores 0. Ties are broken pessimistically
    (non-relevant first).

    Parameters
    ----------
    scores, y : ndarray of shape (n_samples,)
        In the canonical order of ``groups``.
    groups : QueryGroups

    Returns
    -------
    ndarray of shape (n_queries,)

    Examples
    --------
    >>> import numpy as np
    >>> g = QueryGroups._from_group([0, 0, 0, 1, 1])
    >>> average_precision(np.array([3., 2., 1., 5., 5.]), np.array([0, 1, 1, 1, 0]), g).round(4)
    array([0.5833, 0.5   ])
    """
    rel = relevant(y)
    n = len(rel)
    idx = np.lexsort((rel, -np.asarray(scores, dtype=np.float64), groups.group))
    r = rel[idx].astype(np.float64)
    starts = groups.bounds[:-1]
    pos = np.arange(1, n + 1) - np.repeat(starts, np.diff(groups.bounds))
    csum = np.cumsum(r)
    before = np.concatenate([[0.0], csum])[starts]
    hits = csum - np.repeat(before, np.diff(groups.bounds))
    prec = np.where(r > 0, hits / pos, 0.0)
    total = np.bincount(groups.group, weights=prec, minlength=groups.n_queries)
    n_rel = np.bincount(groups.group, weights=r, minlength=groups.n_queries)
    return np.divide(total, n_rel, out=np.zeros_like(total), where=n_rel > 0)


def mean_average_precision(scores, y, groups: QueryGroups) -> float:
    """Mean of :func:`average_precision` over all queries (those without relevant rows
    count as 0, as in the SemEval convention)."""
    return float(average_precision(scores, y, groups).mean()) if groups.n_queries else 0.0


def query_minmax(X, qid=None) -> np.ndarray:
    """Per-query min-max normalisation: each column of each query's rows mapped to [0, 1].

    A column that is constant within a query becomes 0 there. ``qid=None``: all rows are
    one query (the candidates of one search).

    Examples
    --------
    >>> import numpy as np
    >>> query_minmax(np.array([[1.0, 5.0], [3.0, 5.0], [10.0, 0.0]]), ["a", "a", "b"])
    array([[0., 0.],
           [1., 0.],
           [0., 0.]])
    """
    X = np.asarray(X, dtype=np.float64)
    if len(X) == 0:
        return X.copy()
    if qid is None:
        lo, hi = X.min(axis=0), X.max(axis=0)
        return (X - lo) / np.where(hi > lo, hi - lo, 1.0)
    _, codes = np.unique(np.asarray(qid), return_inverse=True)
    codes = codes.ravel()
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    lo = np.minimum.reduceat(X[order], starts, axis=0)
    hi = np.maximum.reduceat(X[order], starts, axis=0)
    group = np.cumsum(np.r_[True, np.diff(codes[order]) != 0]) - 1
    Z = np.empty_like(X)
    span = hi - lo
    Z[order] = (X[order] - lo[group]) / np.where(span > 0, span, 1.0)[group]
    return Z


def query_folds(n_queries, n_splits, rng):
    """Query-grouped k-fold split: ``[(train_queries, test_queries), ...]``.

    Queries are shuffled with ``rng`` and dealt into ``n_splits`` folds of (almost)
    equal size. (scikit-learn's ``GroupKFold`` shuffles only from version 1.6 and
    balances rows, not queries; the queries of a rerank task all have the same size.)
    """
    if n_splits < 2 or n_splits > n_queries:
        raise ParameterError(f"n_splits must be in [2, n_queries={n_queries}]; got {n_splits}")
    perm = rng.permutation(n_queries)
    folds = np.array_split(perm, n_splits)
    out = []
    for k in range(n_splits):
        test = np.sort(folds[k])
        train = np.sort(np.concatenate([folds[i] for i in range(n_splits) if i != k]))
        out.append((train, test))
    return out


@dataclass
class LearnerFit:
    """What a learner returns: a linear part, optional threshold steps, diagnostics.

    The ranking function over normalised features ``Z`` is
    ``Z @ coef + intercept + sum_k step_coef[k] * (Z[:, step_feature[k]] > step_threshold[k])``.
    """

    coef: np.ndarray
    n_iter: int
    loss_curve: list = field(default_factory=list)
    init_score: float | None = None
    intercept: float = 0.0
    step_feature: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step_threshold: np.ndarray = field(default_factory=lambda: np.zeros(0))
    step_coef: np.ndarray = field(default_factory=lambda: np.zeros(0))
    converged: bool = True
    info: dict = field(default_factory=dict)

    def decision(self, Z) -> np.ndarray:
        """Scores of normalised rows ``Z``."""
        s = Z @ self.coef + self.intercept
        if len(self.step_coef):
            s = s + (Z[:, self.step_feature] > self.step_threshold) @ self.step_coef
        return s
