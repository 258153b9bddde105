"""Boosting for reranking: ExpLoss feature selection (Collins & Koo, 2005, §4.4–4.5).

Notation (the paper's, with a query's candidates for a sentence's parses). The ranking
function is ``F(x) = alpha_0 L(x) + sum_k alpha_k h_k(x)`` with ``L`` a base score and
``h_k`` binary features. Here ``L`` is one (normalised) feature column, ``base_feature``
(by default the one of best training MAP), and the binary features are thresholds of
every normalised feature, ``h_k(x) = [z_f(x) > theta_k]`` at ``n_thresholds`` quantiles
of its training values. The examples are the within-query pairs ``(i, j)`` with
``y_i > y_j`` (the paper's best parse vs each other parse, generalised to
relevant vs non-relevant), with margin ``M_ij = F(x_i) - F(x_j)`` and weight ``S_ij``
(1, or ``y_i - y_j`` with ``pair_weight="gain"``, eq. 11). The loss is

    ExpLoss(alpha) = sum_ij S_ij exp(-M_ij)                                   (eq. 10)

``alpha_0`` minimises ExpLoss alone (eq. 12; convex, solved by bounded Brent on
[0, 10] instead of the paper's grid of step 0.001). Each round then picks the feature of
largest gain ``G_k = |sqrt(W_k+) - sqrt(W_k-)|`` and adds the smoothed update

    delta* = 1/2 log((W_k+ + eps Z) / (W_k- + eps Z))                          (eq. 17)

where ``W_k+`` (``W_k-``) sums ``S_ij exp(-M_ij)`` over the pairs where ``h_k`` is on
for the better (worse) candidate only — the sets ``A_k+`` (``A_k-``) — and ``Z`` is the
loss.

``algorithm="naive"`` is Figure 3 (recomputes ``Z``, ``W+``, ``W-`` over all pairs every
round). ``algorithm="efficient"`` is Figure 4: only the margins of the pairs in
``A_k*+`` and ``A_k*-`` change, so ``Z``, ``W+`` and ``W-`` are updated by the changes
``Delta`` of those pairs, through the pair→feature indices ``B_ij+`` / ``B_ij-`` (rows of
sparse matrices). When ``Z`` has fallen below 1e-6 of its value at the last full pass
(nearly separable data), the running sums are recomputed once by a full pass: otherwise
cancellation in ``Z = Z + Delta`` leaves them without correct digits. (Figure 4 as
printed updates ``W_k- = W_k+ + Delta`` for ``k in B_ij+`` in its first loop; the
derivation makes it ``W_k+ = W_k+ + Delta``.)
Both give the same features and weights (a test checks it).

What the engine applies. The model is not linear in the raw features, but its binary
features are a *fixed* transform of them: the thresholds are stored with the weights,
so ``predict`` works on the raw feature matrix like every other learner's model, and a
feature's contribution is ``alpha_0 z`` (for the base feature) plus the weights of its
thresholds that ``z`` exceeds.

References
----------
Collins, M. and Koo, T. (2005). Discriminative reranking for natural language parsing.
Computational Linguistics 31(1), 25-70.
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np
from scipy import sparse
from scipy.optimize import minimize_scalar

from .._utils import Interval
from ..exceptions import ConvergenceWarning, ParameterError
from ._utils import LearnerFit, mean_average_precision

logger = logging.getLogger(__name__)

DEFAULTS = {"epsilon": 0.0025, "n_thresholds": 16, "base_feature": None,
            "pair_weight": "uniform", "algorithm": "efficient"}
CONSTRAINTS = {"epsilon": Interval(0, None, closed="neither"),
               "n_thresholds": Interval(1, None, kind=numbers.Integral),
               "base_feature": [(None,), Interval(0, None, kind=numbers.Integral)],
               "pair_weight": ("uniform", "gain"),
               "algorithm": ("efficient", "naive")}
MAX_ITER = 200  # rounds of feature selection
EARLY_STOPPING = True


def thresholds(Z, n_thresholds):
    """Binary features ``[Z[:, f] > theta]``: ``(feature, theta)`` arrays.

    For every column, thresholds sit halfway between consecutive distinct training
    values at the ``i / (n_thresholds + 1)`` quantiles, so no two thresholds of a column
    split the training rows the same way, and none is constant on them.
    """
    feats, thetas = [], []
    for f in range(Z.shape[1]):
        values = np.unique(Z[:, f])
        if len(values) < 2:
            continue
        qs = np.quantile(Z[:, f], np.arange(1, n_thresholds + 1) / (n_thresholds + 1))
        pos = np.unique(np.clip(np.searchsorted(values, qs, side="right") - 1, 0,
                                len(values) - 2))
        theta = (values[pos] + values[pos + 1]) / 2
        feats.append(np.full(len(theta), f))
        thetas.append(theta)
    if not feats:
        return np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(feats).astype(np.int64), np.concatenate(thetas)


def best_base_feature(Z, y, groups):
    scores = [mean_average_precision(Z[:, j], y, groups) for j in range(Z.shape[1])]
    return int(np.argmax(scores))


def _alpha0(dL, S):
    """argmin_a sum S exp(-a dL) on [0, 10] (eq. 12)."""
    if not np.any(dL):
        return 0.0

    def loss(a):
        e = -a * dL
        m = e.max()
        return m + np.log(np.sum(S * np.exp(e - m)))  # log ExpLoss: same argmin, no overflow

    res = minimize_scalar(loss, bounds=(0.0, 10.0), method="bounded",
                          options={"xatol": 1e-6})
    return float(res.x)


def _gains(Wp, Wm):
    return np.abs(np.sqrt(Wp) - np.sqrt(Wm))


def _select(G):
    """Feature of largest gain; the lowest index among exact ties."""
    return int(np.argmax(G))


def boost(dL, Dp, Dm, S, *, alpha0, epsilon, n_rounds, algorithm, tol, callback=None):
    """The feature-selection rounds of Figure 3 (naive) or Figure 4 (efficient).

    Parameters
    ----------
    dL : ndarray of shape (n_pairs,)
        ``L(x_i) - L(x_j)`` per pair.
    Dp, Dm : scipy.sparse matrix of shape (n_pairs, n_binary)
        Indicator of ``h_k(x_i) - h_k(x_j) = +1`` (``-1``): the sets ``A_k+`` (columns)
        and ``B_ij+`` (rows), and likewise for ``-``.
    S : ndarray of shape (n_pairs,)
    alpha0, epsilon : float
    n_rounds : int
    algorithm : {"efficient", "naive"}
    tol : float
        Stop when a round lowers ExpLoss by less than this fraction.
    callback : callable, optional
        ``callback(round, alpha)`` after every round.

    Returns
    -------
    alpha : ndarray of shape (n_binary,)
    selected : list of int
        The feature chosen at every round.
    curve : list of float
        ExpLoss after every round.
    converged : bool
    """
    m = Dp.shape[1]
    Dp_csc, Dm_csc = sparse.csc_matrix(Dp), sparse.csc_matrix(Dm)
    Dp_csr, Dm_csr = sparse.csr_matrix(Dp), sparse.csr_matrix(Dm)
    M = alpha0 * dL
    alpha = np.zeros(m)
    selected, curve = [], []
    converged = False

    def full_pass():
        e = S * np.exp(-M)
        return e.sum(), Dp_csr.T @ e, Dm_csr.T @ e

    Z, Wp, Wm = full_pass()
    G = _gains(Wp, Wm)
    z_full = Z
    for t in range(1, n_rounds + 1):
        if algorithm == "naive" or Z < 1e-6 * z_full:
            # Figure 3 every round; Figure 4 only when the running sums have lost most of
            # their magnitude (separable data), where cancellation would eat their digits
            Z, Wp, Wm = full_pass()
            G = _gains(Wp, Wm)
            z_full = Z
        if m == 0 or G.max() <= 0 or not Z > np.finfo(float).tiny:
            converged = True
            break
        k = _select(G)
        delta = 0.5 * np.log((Wp[k] + epsilon * Z) / (Wm[k] + epsilon * Z))
        alpha[k] += delta
        selected.append(k)
        before = Z
        plus = Dp_csc.indices[Dp_csc.indptr[k]:Dp_csc.indptr[k + 1]]   # A_k+
        minus = Dm_csc.indices[Dm_csc.indptr[k]:Dm_csc.indptr[k + 1]]  # A_k-
        if algorithm == "naive":
            M[plus] += delta
            M[minus] -= delta
            Z = float(np.sum(S * np.exp(-M)))
        else:
            for rows, step in ((plus, delta), (minus, -delta)):
                if len(rows) == 0:
                    continue
                change = S[rows] * (np.exp(-M[rows] - step) - np.exp(-M[rows]))
                M[rows] += step
                Z += change.sum()
                # for k' in B_ij+: W_k'+ += Delta; for k' in B_ij-: W_k'- += Delta
                Wp = Wp + Dp_csr[rows].T @ change
                Wm = Wm + Dm_csr[rows].T @ change
            touched = np.union1d(Dp_csr[np.concatenate([plus, minus])].indices,
                                 Dm_csr[np.concatenate([plus, minus])].indices)
            # exact zeros keep sqrt defined after rounding
            Wp[touched] = np.maximum(Wp[touched], 0.0)
            Wm[touched] = np.maximum(Wm[touched], 0.0)
            G[touched] = _gains(Wp[touched], Wm[touched])
        curve.append(float(Z))
        if callback is not None:
            callback(t, alpha.copy())
        if before - Z < tol * before:
            converged = True
            break
    return alpha, selected, curve, converged


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, epsilon=0.0025,
        n_thresholds=16, base_feature=None, pair_weight="uniform", algorithm="efficient"):
    """Boosting (ExpLoss) over a base score and thresholded binary features.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
        Unused (the algorithm is deterministic).
    max_iter : int
        Rounds of feature selection (N).
    tol : float
        Stop when a round lowers ExpLoss by less than this fraction.
    callback : callable, optional
        ``callback(round, coef, steps)`` after every round (early stopping).
    epsilon : float
        Smoothing of the update (eq. 17); the paper's best value is 0.0025.
    n_thresholds : int
        Thresholds per feature.
    base_feature : int or None
        Column of the base score ``L``; None: the column of best training MAP.
    pair_weight : {"uniform", "gain"}
        ``S_ij = 1`` or ``y_i - y_j``.
    algorithm : {"efficient", "naive"}
        Figure 4 or Figure 3.

    Returns
    -------
    LearnerFit
        ``coef`` is ``alpha_0`` on the base column; the steps are the selected
        thresholds with their weights.
    """
    d = Z.shape[1]
    base = best_base_feature(Z, y, groups) if base_feature is None else int(base_feature)
    if not 0 <= base < d:
        raise ParameterError(f"base_feature must be a column index in [0, {d}); got {base}")
    hi, lo = groups.pairs(y)
    if len(hi) == 0:
        raise ValueError("boosting needs at least one query with candidates of different "
                         "relevance")
    S = np.ones(len(hi)) if pair_weight == "uniform" else (y[hi] - y[lo]).astype(np.float64)
    dL = Z[hi, base] - Z[lo, base]
    feat, theta = thresholds(Z, n_thresholds)
    H = (Z[:, feat] > theta).astype(np.int8)
    D = H[hi].astype(np.int16) - H[lo]
    Dp = sparse.csr_matrix((D == 1).astype(np.float64))
    Dm = sparse.csr_matrix((D == -1).astype(np.float64))
    alpha0 = _alpha0(dL, S)
    coef = np.zeros(d)
    coef[base] = alpha0

    def steps_of(alpha):
        keep = np.nonzero(alpha)[0]
        return feat[keep], theta[keep], alpha[keep]

    cb = None
    if callback is not None:
        def cb(t, alpha):
            callback(t, coef.copy(), steps_of(alpha))
    alpha, selected, curve, converged = boost(
        dL, Dp, Dm, S, alpha0=alpha0, epsilon=epsilon, n_rounds=max_iter,
        algorithm=algorithm, tol=tol, callback=cb)
    if not converged and max_iter > 0:
        warnings.warn(f"boosting reached max_iter={max_iter} rounds while ExpLoss still fell "
                      f"by more than tol={tol} per round; increase max_iter",
                      ConvergenceWarning, stacklevel=3)
    f, th, a = steps_of(alpha)
    logger.debug("boosting: base column %d, alpha_0 %.4f, %d rounds, %d thresholds used",
                 base, alpha0, len(selected), len(a))
    return LearnerFit(coef=coef, n_iter=len(selected), loss_curve=curve, step_feature=f,
                      step_threshold=th, step_coef=a, converged=converged,
                      info={"base_feature": base, "alpha0": alpha0, "selected": selected,
                            "binary_feature": feat, "binary_threshold": theta})
