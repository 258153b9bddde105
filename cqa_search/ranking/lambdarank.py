"""LambdaRank for a linear model, with gradients scaled by delta-MAP.

RankNet (Burges et al., 2005) scores ``s = Z w`` and, for a pair ``(i, j)`` of a query
with ``y_i > y_j``, pays ``C_ij = log(1 + exp(-sigma (s_i - s_j)))``. LambdaRank
(Burges et al., 2006; used by Gillenwater et al., 2013, §4, for NDCG) scales each
pair's gradient by how much the target metric changes when the two candidates swap
places in the current ranking; here the metric is average precision:

    lambda_ij = -sigma |Delta AP_ij| / (1 + exp(sigma (s_i - s_j)))
    dC/dw     = sum_ij lambda_ij (z_i - z_j) + alpha w

(``alpha``: L2 penalty). ``|Delta AP_ij|`` has a closed form from the ranks ``a`` (of
the relevant ``i``) and ``b`` (of the non-relevant ``j``), the number ``C_r`` of relevant
candidates in the top ``r`` and the prefix sums ``Q_r`` of ``1/rank`` over relevant
candidates, with ``R`` relevant candidates in the query:

    a < b:  R Delta AP = C_b / b - C_a / a - (Q_{b-1} - Q_a)
    a > b:  R Delta AP = (C_{b-1} + 1) / b - C_a / a + (Q_{a-1} - Q_b)

Training is stochastic gradient descent with one step per query, queries shuffled every
epoch. ``loss_curve_`` records the lambda-weighted RankNet loss (per query, averaged);
training stops when it has not fallen by ``tol`` (relative) for ``n_iter_no_change``
epochs.

References
----------
Burges, C., Ragno, R. and Le, Q. V. (2006). Learning to rank with non-smooth cost
functions. NIPS.
Gillenwater, J., He, X., Gao, J. and Deng, L. (2013). End-to-end learning of parsing
models for information retrieval. ICASSP.
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np

from .._utils import Interval
from ..exceptions import ConvergenceWarning
from ._utils import LearnerFit, relevant
from .powell import initial_weights

logger = logging.getLogger(__name__)

DEFAULTS = {"learning_rate": 0.05, "sigma": 1.0, "alpha": 1e-4, "init": "zeros",
            "shuffle": True, "n_iter_no_change": 5}
CONSTRAINTS = {"learning_rate": Interval(0, None, closed="neither"),
               "sigma": Interval(0, None, closed="neither"),
               "alpha": Interval(0, None),
               "init": ("zeros", "best-feature", "uniform"),
               "shuffle": (True, False),
               "n_iter_no_change": Interval(1, None, kind=numbers.Integral)}
MAX_ITER = 200  # epochs
EARLY_STOPPING = True


def delta_ap(scores, rel, i, j):
    """``|AP(swap i, j) - AP|`` for pairs of relevant ``i`` and non-relevant ``j`` of one
    query ranked by ``scores`` (ties: non-relevant first).

    Examples
    --------
    >>> rel = np.array([False, True, True])
    >>> delta_ap(np.array([3.0, 2.0, 1.0]), rel, np.array([1, 2]), np.array([0, 0])).round(4)
    array([0.25  , 0.4167])
    """
    n = len(scores)
    order = np.lexsort((rel, -scores))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(1, n + 1)
    r_sorted = rel[order].astype(np.float64)
    C = np.concatenate([[0.0], np.cumsum(r_sorted)])                      # C[r]: top r
    Q = np.concatenate([[0.0], np.cumsum(r_sorted / np.arange(1, n + 1))])  # Q[r]
    R = r_sorted.sum()
    a, b = rank[i], rank[j]
    down = a < b
    d = np.where(down,
                 C[b] / b - C[a] / a - (Q[b - 1] - Q[a]),
                 (C[b - 1] + 1) / b - C[a] / a + (Q[a - 1] - Q[b]))
    return np.abs(d) / R


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, learning_rate=0.05,
        sigma=1.0, alpha=1e-4, init="zeros", shuffle=True, n_iter_no_change=5):
    """LambdaRank (delta-MAP) for a linear scoring function.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
        Shuffles the queries of every epoch.
    max_iter : int
        Maximum epochs.
    tol : float
        Minimum relative decrease of the loss.
    callback : callable, optional
        ``callback(epoch, coef, None)`` after every epoch (early stopping).
    learning_rate, sigma, alpha : float
    init : {"zeros", "best-feature", "uniform"}
    shuffle : bool
    n_iter_no_change : int

    Returns
    -------
    LearnerFit
    """
    rel = relevant(y)
    w = np.zeros(Z.shape[1]) if init == "zeros" else initial_weights(init, Z, y, groups)
    queries = []
    for s in groups.slices():
        rq = rel[s]
        if rq.any() and not rq.all():
            i, j = np.nonzero(rq[:, None] & ~rq[None, :])
            queries.append((s, rq, i, j))
    if not queries:
        raise ValueError("lambdarank needs at least one query with relevant and non-relevant "
                         "candidates")
    curve, best, no_change, converged = [], np.inf, 0, False
    epoch = 0
    for epoch in range(1, max_iter + 1):
        total = 0.0
        order = rng.permutation(len(queries)) if shuffle else range(len(queries))
        for q in order:
            s, rq, i, j = queries[q]
            Zq = Z[s]
            sq = Zq @ w
            weight = delta_ap(sq, rq, i, j)
            margin = sigma * (sq[i] - sq[j])
            total += float(np.sum(weight * np.logaddexp(0.0, -margin)))
            lam = -sigma * weight * np.exp(-np.logaddexp(0.0, margin))  # 1 / (1 + e^m)
            per_doc = np.zeros(len(sq))
            np.add.at(per_doc, i, lam)
            np.add.at(per_doc, j, -lam)
            w = w - learning_rate * (per_doc @ Zq + alpha * w)
        loss = total / len(queries)
        curve.append(loss)
        logger.debug("lambdarank epoch %d: loss %.5f", epoch, loss)
        if callback is not None:
            callback(epoch, w.copy(), None)
        if loss > best - tol * abs(best):
            no_change += 1
            if no_change >= n_iter_no_change:
                converged = True
                break
        else:
            no_change = 0
        best = min(best, loss)
    if not converged and max_iter > 0:
        warnings.warn(f"lambdarank reached max_iter={max_iter} epochs while the loss still "
                      f"fell by more than tol={tol}; increase max_iter", ConvergenceWarning,
                      stacklevel=3)
    return LearnerFit(coef=w, n_iter=epoch, loss_curve=curve, converged=converged)
