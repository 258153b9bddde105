"""Direct MAP maximisation by Powell's method with random restarts (the seeds' learner).

Zhou et al. (2011, §3.4) and Zhou et al. (2013, eq. 20) tune the weights ``w`` of the
linear score ``Score(q, d) = w . phi(q, d)`` "to maximise MAP directly using the Powell
search algorithm". MAP is piecewise constant in ``w``, so Powell's line searches (Brent
on each direction of the direction set, ``scipy.optimize.minimize(method="Powell")``)
stall on plateaus: each restart starts from another point and the best result wins.

Restart 0 starts at ``init`` (the best single feature, or all weights equal); the
others at random directions. A restart's result is kept only if it is at least as good
as its starting point, so the fit never ends below the starting MAP. MAP does not
depend on the scale of ``w``, which is returned with unit Euclidean norm.

References
----------
Powell, M. J. D. (1964). An efficient method for finding the minimum of a function of
several variables without calculating derivatives. The Computer Journal 7(2).
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np
from scipy.optimize import minimize

from .._utils import Interval
from ..exceptions import ConvergenceWarning
from ._utils import LearnerFit, mean_average_precision

logger = logging.getLogger(__name__)

DEFAULTS = {"n_restarts": 10, "init": "best-feature", "xtol": 1e-3}
CONSTRAINTS = {"n_restarts": Interval(1, None, kind=numbers.Integral),
               "init": ("best-feature", "uniform"),
               "xtol": Interval(0, None, closed="neither")}
MAX_ITER = 100  # Powell iterations (sweeps of the direction set) per restart
EARLY_STOPPING = False


def best_feature_start(Z, y, groups):
    """Unit vector on the single feature (with sign) of the best training MAP."""
    d = Z.shape[1]
    best, w0 = -1.0, np.zeros(d)
    for j in range(d):
        for sign in (1.0, -1.0):
            score = mean_average_precision(sign * Z[:, j], y, groups)
            if score > best + 1e-12:
                best, w0 = score, np.eye(d)[j] * sign
    return w0


def initial_weights(init, Z, y, groups):
    d = Z.shape[1]
    if init == "uniform":
        return np.full(d, 1.0 / np.sqrt(d))
    return best_feature_start(Z, y, groups)


def _unit(w):
    norm = np.linalg.norm(w)
    return w / norm if norm > 0 else w


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, n_restarts=10,
        init="best-feature", xtol=1e-3):
    """Maximise training MAP of ``Z @ w`` by Powell's method with restarts.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
    max_iter : int
        Powell iterations per restart (scipy's ``maxiter``).
    tol : float
        Relative tolerance on MAP (scipy's ``ftol``).
    n_restarts : int
        Restarts (the first from ``init``, the others from random directions).
    init : {"best-feature", "uniform"}
    xtol : float
        Tolerance of the line searches on the weights.

    Returns
    -------
    LearnerFit
    """
    d = Z.shape[1]

    def objective(w):
        return -mean_average_precision(Z @ w, y, groups)

    start = initial_weights(init, Z, y, groups)
    init_score = -objective(start)
    best_w, best_score = start, init_score
    curve, n_iter, hit_limit = [], 0, False
    for r in range(n_restarts):
        x0 = start if r == 0 else _unit(rng.standard_normal(d))
        f0 = objective(x0)
        res = minimize(objective, x0, method="Powell",
                       options={"maxiter": max_iter, "xtol": xtol, "ftol": tol})
        n_iter += int(res.nit)
        hit_limit |= int(res.nit) >= max_iter
        w, f = (res.x, float(res.fun)) if res.fun <= f0 else (x0, f0)
        if -f > best_score + 1e-12:
            best_w, best_score = np.asarray(w, dtype=np.float64), -f
        curve.append(1.0 - best_score)
        logger.debug("powell restart %d: MAP %.4f (best %.4f)", r, -f, best_score)
    if hit_limit:
        warnings.warn(f"Powell search reached max_iter={max_iter} iterations in a restart "
                      "before converging; increase max_iter", ConvergenceWarning, stacklevel=3)
    return LearnerFit(coef=_unit(best_w), n_iter=n_iter, loss_curve=curve,
                      init_score=init_score, converged=not hit_limit)
