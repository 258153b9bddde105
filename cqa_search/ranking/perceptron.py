"""Perceptron ranking with uneven margins (Shen & Joshi, 2005, Algorithms 1 and 2).

Notation: a query's candidates ("cluster") ``x_j`` with labels ``y_j``; the partial order
``T`` holds the pairs ``(j, l)`` with ``y_j > y_l`` (with binary labels: every relevant
candidate above every non-relevant one, Shen & Joshi's r-splitting; with graded labels
also the grades among themselves). A pair is violated when
``w . (x_j - x_l) <= g(j, l) * tau`` for the learning margin ``tau``.

- ``algorithm="full"`` (Algorithm 1, pairwise classification with uneven margins):
  every violated pair updates ``w <- w + g(j, l) (x_j - x_l)`` at once.
- ``algorithm="fast"`` (Algorithm 2): the violations of a whole cluster are checked
  against the same ``w``, collected per candidate in ``u`` (``u_j += g``, ``u_l -= g``),
  and applied once: ``w <- w + sum_j u_j x_j`` — O(k^2 + kd) per cluster instead of
  O(k^2 d).

Margin function: ``margin="uneven"`` uses eq. (2), ``g(j, l) = 1/r_j - 1/r_l`` with
``r`` the candidate's rank in the ideal order of its cluster (candidates of equal label
share their mean rank, so ``g`` does not depend on the row order); ``"even"`` uses
``g = 1``.

The result is the averaged weight vector (the mean of ``w`` after every cluster visit),
the standard remedy for the perceptron's instability (Collins, 2002). Training stops
when an epoch makes no update (the paper's criterion: the data are separated), or when
the fraction of violated pairs has not improved by ``tol`` for ``n_iter_no_change``
epochs (the data are not separable: scikit-learn's ``Perceptron`` rule).

References
----------
Shen, L. and Joshi, A. K. (2005). Ranking and reranking with perceptron. Machine
Learning 60, 73-96.
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np

from .._utils import Interval
from ..exceptions import ConvergenceWarning
from ._utils import LearnerFit

logger = logging.getLogger(__name__)

DEFAULTS = {"algorithm": "fast", "margin": "uneven", "tau": 1.0, "average": True,
            "shuffle": True, "n_iter_no_change": 5}
CONSTRAINTS = {"algorithm": ("fast", "full"),
               "margin": ("uneven", "even"),
               "tau": Interval(0, None, closed="neither"),
               "average": (True, False),
               "shuffle": (True, False),
               "n_iter_no_change": Interval(1, None, kind=numbers.Integral)}
MAX_ITER = 100  # epochs
EARLY_STOPPING = True


def ideal_ranks(y):
    """1-based rank of each candidate in the ideal order (label descending), ties at
    their mean rank.

    Examples
    --------
    >>> ideal_ranks(np.array([0, 1, 1, 0, 2])).tolist()
    [4.5, 2.5, 2.5, 4.5, 1.0]
    """
    y = np.asarray(y)
    order = np.argsort(-y, kind="stable")
    ranks = np.empty(len(y))
    ranks[order] = np.arange(1, len(y) + 1)
    for v in np.unique(y):
        mask = y == v
        ranks[mask] = ranks[mask].mean()
    return ranks


def cluster_pairs(y, groups, margin="uneven"):
    """Per query: ``(slice, hi, lo, g)`` with local indices and margin weights."""
    out = []
    for s in groups.slices():
        yq = np.asarray(y[s])
        hi, lo = np.nonzero(yq[:, None] > yq[None, :])
        if len(hi) == 0:
            out.append((s, hi, lo, np.zeros(0)))
            continue
        if margin == "uneven":
            r = ideal_ranks(yq)
            g = 1.0 / r[hi] - 1.0 / r[lo]
        else:
            g = np.ones(len(hi))
        out.append((s, hi, lo, g))
    return out


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, algorithm="fast",
        margin="uneven", tau=1.0, average=True, shuffle=True, n_iter_no_change=5):
    """Perceptron with uneven margins over within-query pairs.

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
        Minimum improvement of the fraction of violated pairs.
    callback : callable, optional
        ``callback(epoch, coef, None)`` after every epoch (early stopping).
    algorithm : {"fast", "full"}
        Algorithm 2 or Algorithm 1.
    margin : {"uneven", "even"}
    tau : float
        Learning margin.
    average : bool
        Return the averaged weights.
    shuffle : bool
    n_iter_no_change : int

    Returns
    -------
    LearnerFit
    """
    d = Z.shape[1]
    clusters = [c for c in cluster_pairs(y, groups, margin) if len(c[1])]
    n_pairs = sum(len(c[1]) for c in clusters)
    w = np.zeros(d)
    w_sum = np.zeros(d)
    n_visits = 0
    curve = []
    best_loss, no_change = np.inf, 0
    converged = False
    epoch = 0
    for epoch in range(1, max_iter + 1):
        violated = 0
        order = rng.permutation(len(clusters)) if shuffle else range(len(clusters))
        for c in order:
            s, hi, lo, g = clusters[c]
            Zq = Z[s]
            if algorithm == "fast":
                sq = Zq @ w
                bad = sq[hi] - sq[lo] <= g * tau
                if bad.any():
                    violated += int(bad.sum())
                    u = np.zeros(len(sq))
                    np.add.at(u, hi[bad], g[bad])
                    np.add.at(u, lo[bad], -g[bad])
                    w = w + u @ Zq
            else:
                diff = Zq[hi] - Zq[lo]
                for p in range(len(hi)):
                    if diff[p] @ w <= g[p] * tau:
                        w = w + g[p] * diff[p]
                        violated += 1
            w_sum += w
            n_visits += 1
        coef = w_sum / n_visits if average else w.copy()
        loss = violated / max(n_pairs, 1)
        curve.append(loss)
        logger.debug("perceptron epoch %d: %.4f of pairs violated", epoch, loss)
        if callback is not None:
            callback(epoch, coef.copy(), None)
        if violated == 0:
            converged = True
            break
        if loss > best_loss - tol:
            no_change += 1
            if no_change >= n_iter_no_change:
                converged = True
                break
        else:
            no_change = 0
        best_loss = min(best_loss, loss)
    if not converged and max_iter > 0:
        warnings.warn(f"perceptron reached max_iter={max_iter} epochs with violated pairs "
                      "still decreasing; increase max_iter", ConvergenceWarning, stacklevel=3)
    coef = (w_sum / n_visits if average else w) if n_visits else w
    return LearnerFit(coef=np.asarray(coef, dtype=np.float64), n_iter=epoch, loss_curve=curve,
                      converged=converged)
