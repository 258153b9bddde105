"""Coordinate ascent on MAP (Metzler & Croft, 2007), with an exact line search.

One weight at a time is moved to the value that maximises training MAP while the others
stay fixed; sweeps over all coordinates repeat until a sweep gains less than ``tol``.

Line search. Along a coordinate ``j`` the scores are ``s(t) = a + t * b`` with ``a`` the
current scores and ``b = Z[:, j]``. A query's average precision changes only where a
relevant and a non-relevant candidate of that query swap, at ``t = (a_k - a_i) / (b_i -
b_k)``; between these breakpoints it is constant. Each query's AP is evaluated once per
interval, the per-query step functions are merged into MAP(t), and the weight moves to
the middle of the best interval (staying put unless MAP rises by more than 1e-12, so
MAP never falls). This is exact where Metzler & Croft's grid of step sizes is
approximate.

As MAP ignores the scale of ``w``, ``w`` is rescaled to unit Euclidean norm after every
sweep (Metzler & Croft normalise to unit L1 norm; only the scale differs).

References
----------
Metzler, D. and Croft, W. B. (2007). Linear feature-based models for information
retrieval. Information Retrieval 10(3), 257-274.
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np

from .._utils import Interval
from ..exceptions import ConvergenceWarning
from ._utils import LearnerFit, mean_average_precision, relevant
from .powell import initial_weights

logger = logging.getLogger(__name__)

DEFAULTS = {"n_restarts": 1, "init": "best-feature", "shuffle": False}
CONSTRAINTS = {"n_restarts": Interval(1, None, kind=numbers.Integral),
               "init": ("best-feature", "uniform"),
               "shuffle": (False, True)}
MAX_ITER = 100  # sweeps over the coordinates
EARLY_STOPPING = False


def _ap_rows(S, rel):
    """AP of each row of ``S`` (scores of one query at several points), pessimistic ties."""
    m, n = S.shape
    order = np.lexsort((np.broadcast_to(rel, S.shape), -S), axis=-1)
    r = rel[order].astype(np.float64)
    hits = np.cumsum(r, axis=1)
    prec = np.where(r > 0, hits / np.arange(1, n + 1), 0.0)
    n_rel = rel.sum()
    return prec.sum(axis=1) / n_rel if n_rel else np.zeros(m)


def line_search(a, b, y, groups):
    """Best step ``t`` along direction ``b`` from scores ``a`` (see the module docstring).

    Returns
    -------
    t : float
        The step (0.0 when no step improves MAP).
    gain : float
        MAP(t) - MAP(0).
    """
    rel = relevant(y)
    times, deltas = [], []
    base_at_minus_inf = 0.0  # sum over queries of AP on the leftmost interval
    current = 0.0            # sum over queries of AP at t = 0 exactly
    for s in groups.slices():
        rq = rel[s]
        if not rq.any():
            continue
        aq, bq = a[s], b[s]
        if rq.all():
            current += 1.0
            base_at_minus_inf += 1.0
            continue
        i = np.nonzero(rq)[0]
        k = np.nonzero(~rq)[0]
        db = bq[i][:, None] - bq[k][None, :]
        da = aq[i][:, None] - aq[k][None, :]
        moving = db != 0
        cross = np.unique(-da[moving] / db[moving])
        current += _ap_rows(aq[None, :], rq)[0]
        if len(cross) == 0:
            base_at_minus_inf += _ap_rows(aq[None, :], rq)[0]
            continue
        # one point inside each of the len(cross) + 1 intervals
        inner = (cross[:-1] + cross[1:]) / 2
        span = max(1.0, float(np.abs(cross).max()))
        points = np.concatenate([[cross[0] - span], inner, [cross[-1] + span]])
        ap = _ap_rows(aq[None, :] + points[:, None] * bq[None, :], rq)
        base_at_minus_inf += ap[0]
        times.append(cross)
        deltas.append(np.diff(ap))
    if not times:
        return 0.0, 0.0
    times = np.concatenate(times)
    deltas = np.concatenate(deltas)
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    uniq, start = np.unique(times, return_index=True)
    summed = np.add.reduceat(deltas, start)
    values = base_at_minus_inf + np.concatenate([[0.0], np.cumsum(summed)])  # per interval
    n_q = groups.n_queries
    best = values.max()
    if best <= current + 1e-12 * n_q:
        return 0.0, 0.0
    # among the best intervals, the one nearest to t = 0
    span = max(1.0, float(np.abs(uniq).max()))
    lo = np.concatenate([[uniq[0] - 2 * span], uniq])
    hi = np.concatenate([uniq, [uniq[-1] + 2 * span]])
    mids = (lo + hi) / 2
    cand = np.nonzero(values >= best - 1e-12 * n_q)[0]
    pick = cand[np.argmin(np.abs(mids[cand]))]
    return float(mids[pick]), float((best - current) / n_q)


def _unit(w):
    norm = np.linalg.norm(w)
    return w / norm if norm > 0 else w


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, n_restarts=1,
        init="best-feature", shuffle=False):
    """Coordinate ascent on training MAP of ``Z @ w``.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
    max_iter : int
        Maximum sweeps over the coordinates (per restart).
    tol : float
        Stop when a sweep raises MAP by less than this.
    n_restarts : int
        The first start is ``init``; the others are random directions.
    init : {"best-feature", "uniform"}
    shuffle : bool
        Visit the coordinates in a random order each sweep.

    Returns
    -------
    LearnerFit
    """
    d = Z.shape[1]
    start = initial_weights(init, Z, y, groups)
    init_score = mean_average_precision(Z @ start, y, groups)
    best_w, best_score = start, init_score
    curve, n_iter, converged = [], 0, True
    for r in range(n_restarts):
        w = start.copy() if r == 0 else _unit(rng.standard_normal(d))
        a = Z @ w
        score = mean_average_precision(a, y, groups)
        done = False
        for sweep in range(max_iter):
            before = score
            coords = rng.permutation(d) if shuffle else range(d)
            for j in coords:
                t, gain = line_search(a, Z[:, j], y, groups)
                if t != 0.0:
                    w[j] += t
                    a = a + t * Z[:, j]
                    score += gain
            norm = np.linalg.norm(w)
            if norm > 0:
                w, a = w / norm, a / norm
            score = mean_average_precision(a, y, groups)  # exact, no drift
            n_iter += 1
            if r == 0:
                curve.append(1.0 - score)
            if callback is not None and r == 0:
                callback(sweep + 1, w.copy(), None)
            logger.debug("coordinate ascent restart %d sweep %d: MAP %.4f", r, sweep + 1, score)
            if score - before < tol:
                done = True
                break
        converged &= done
        if score > best_score + 1e-12:
            best_w, best_score = w.copy(), score
    if not converged:
        warnings.warn(f"coordinate ascent reached max_iter={max_iter} sweeps while MAP still "
                      f"rose by at least tol={tol}; increase max_iter", ConvergenceWarning,
                      stacklevel=3)
    return LearnerFit(coef=_unit(best_w), n_iter=n_iter, loss_curve=curve,
                      init_score=init_score, converged=converged)
