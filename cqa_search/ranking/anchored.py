"""A learned correction to a base score, regularised towards zero (pairwise logistic loss).

The ranker keeps the order of a base score (the first stage's, which search uses without
a ranker) unless the judged queries show, against a Gaussian prior, that other features
should move it. The score of a candidate with normalised features ``z`` is

    f(z) = theta . z = z_b + w . z          (b: the ``base_feature`` column, theta = e_b + w)

and for the pairs ``(i, j)`` of a query with ``y_i > y_j`` (the set ``P_q``) the fit
minimises the mean pairwise logistic loss of each query (RankNet's, Burges et al. 2005),
summed over the queries, plus an L2 penalty on the correction ``w``:

    L(theta) = sum_q 1/|P_q| sum_{(i,j) in P_q} log(1 + exp(-(f(z_i) - f(z_j))))
               + alpha / 2 ||theta - e_b||^2.

``alpha`` is the precision of a Gaussian prior on ``theta`` centred at the base score
alone: the larger it is, the more judged queries a feature needs before it moves the
ranking; as ``alpha -> inf``, ``theta -> e_b`` and the ranking is exactly the base
score's own order. The prior is the first stage, not "no order": with few judged queries
a ranker can at worst stay close to what search does without it, where a plain linear
ranker (RankSVM, with the penalty centred at zero) shrinks towards a ranking by nothing.
The base's own weight is in the correction too (``w_b``: the training queries may sharpen
or soften the base against the other features, never for free). Every query weighs the
same (its pairs share one unit), so queries with many relevant candidates do not dominate
(Cao et al. 2006).

The objective is convex and smooth (strictly convex for ``alpha > 0``); it is minimised
by L-BFGS (scipy's L-BFGS-B, without bounds) from ``theta = e_b``, deterministically,
until no entry of the gradient exceeds ``tol`` per query. ``loss_curve_`` records ``L``
per iteration.

References
----------
Burges, C. et al. (2005). Learning to rank using gradient descent. ICML.
Cao, Y. et al. (2006). Adapting ranking SVM to document retrieval. SIGIR.
Chapelle, O. and Keerthi, S. S. (2010). Efficient algorithms for ranking with SVMs.
Information Retrieval 13(3) (pairwise losses with a query-level weighting).
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
from scipy.optimize import minimize

from .._utils import Interval
from ..exceptions import ConvergenceWarning, ParameterError
from ._utils import LearnerFit, mean_average_precision

logger = logging.getLogger(__name__)

DEFAULTS = {"alpha": 10.0, "base_feature": None}
CONSTRAINTS = {"alpha": Interval(0, None),
               "base_feature": [(None,), Interval(0, None, kind=int)]}
MAX_ITER = 500  # L-BFGS-B iterations
EARLY_STOPPING = False


def best_base_feature(Z, y, groups) -> int:
    """The column of best training MAP (the first on ties): the base when none is given."""
    scores = [mean_average_precision(Z[:, j], y, groups) for j in range(Z.shape[1])]
    return int(np.argmax(scores))


def _pairs(Z, y, groups):
    """Pair differences ``Z[i] - Z[j]`` (``y_i > y_j``, same query) and each pair's weight
    ``1 / |P_q|`` (a query's pairs weigh 1 together)."""
    hi, lo = groups.pairs(y)
    q = groups.group[hi]
    per_query = np.bincount(q, minlength=groups.n_queries)
    return Z[hi] - Z[lo], 1.0 / per_query[q]


def objective(theta, D, weights, base, alpha) -> tuple:
    """``(L, dL/dtheta)`` at ``theta`` for the pair differences ``D`` and their weights
    (``base``: the column of the prior's centre ``e_b``)."""
    margin = D @ theta
    loss = float(weights @ np.logaddexp(0.0, -margin))
    # d/dm log(1 + e^-m) = -1 / (1 + e^m), computed without overflow
    slope = -weights * np.exp(-np.logaddexp(0.0, margin))
    grad = D.T @ slope
    w = theta.copy()
    w[base] -= 1.0
    return loss + 0.5 * alpha * float(w @ w), grad + alpha * w


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, alpha=10.0,
        base_feature=None):
    """Fit the correction to the base column.

    Parameters
    ----------
    Z, y, groups, rng, max_iter, callback
        As every learner of :data:`~cqa_search.ranking.linear.LEARNERS` takes them
        (normalised features and labels in canonical order, their query groups; ``rng``
        is unused: the fit is deterministic; ``max_iter``: L-BFGS iterations;
        ``callback(iteration, coef, None)`` after every iteration).
    tol : float
        L-BFGS stops when no entry of the gradient of ``L`` exceeds ``tol`` per query
        (``L`` sums the queries' losses).
    alpha : float
        L2 penalty of the correction ``theta - e_b`` (0: none).
    base_feature : int or None
        The base column (None: the one of best training MAP).

    Returns
    -------
    LearnerFit
        ``coef`` is ``theta``; ``info["base_feature"]`` the base column.

    Raises
    ------
    ParameterError
        A base column out of range.
    ValueError
        No query with candidates of different relevance.
    """
    d = Z.shape[1]
    base = best_base_feature(Z, y, groups) if base_feature is None else int(base_feature)
    if not 0 <= base < d:
        raise ParameterError(f"base_feature must be a column index in [0, {d}); got {base}")
    D, weights = _pairs(Z, y, groups)
    if len(D) == 0:
        raise ValueError("anchored needs at least one query with candidates of different "
                         "relevance")
    theta0 = np.zeros(d)
    theta0[base] = 1.0
    curve = []

    def step(theta):
        curve.append(objective(theta, D, weights, base, alpha)[0])
        if callback is not None:
            callback(len(curve), theta.copy(), None)

    res = minimize(objective, theta0, args=(D, weights, base, alpha), jac=True,
                   method="L-BFGS-B", callback=step,
                   options={"maxiter": max_iter, "gtol": tol * groups.n_queries,
                            "ftol": 1e-12})
    converged = res.nit < max_iter
    if not converged:
        warnings.warn(f"anchored reached max_iter={max_iter} L-BFGS-B iterations; increase "
                      "max_iter", ConvergenceWarning, stacklevel=3)
    logger.debug("anchored: %d iterations, loss %.6f (%s)", res.nit, res.fun, res.message)
    return LearnerFit(coef=np.asarray(res.x, dtype=np.float64), n_iter=int(res.nit),
                      loss_curve=curve, converged=converged, info={"base_feature": base})
