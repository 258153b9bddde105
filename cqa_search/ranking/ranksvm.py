"""RankSVM (Joachims, 2002): a linear SVM on within-query pair differences.

For every pair of candidates of the same query with ``y_i > y_j`` the difference
``z_i - z_j`` is a training example of class +1; the SVM without intercept minimises
``0.5 ||w||^2 + C sum_p s_p loss(w . (z_i - z_j))`` (scikit-learn's ``LinearSVC``,
liblinear). The default loss is the squared hinge ``max(0, 1 - m)^2``, solved in the
primal by liblinear's trust-region Newton method (as Chapelle & Keerthi's primal
RankSVM): it converges in a few iterations, where the dual coordinate descent of the
plain hinge (``loss="hinge"``, Joachims' formulation) may need thousands. Since
``(x, +1)`` and ``(-x, -1)`` give the same loss without an intercept, every other pair is
negated so that both classes are present; the solution is unchanged.

``pair_weight="query"`` gives every query the same total weight (the pairs of a query
share it), which removes the bias toward queries with many pairs noted by Cao et al.
(2006); ``"uniform"`` weighs pairs equally.

References
----------
Joachims, T. (2002). Optimizing search engines using clickthrough data. KDD.
Chapelle, O. and Keerthi, S. S. (2010). Efficient algorithms for ranking with SVMs.
Information Retrieval 13(3), 201-215.
Tomeh et al. (2013), §2.1 (RankSVM as base ranker and as meta-ranker).
"""
from __future__ import annotations

import numpy as np
from sklearn.svm import LinearSVC

from .._utils import Interval
from ._utils import LearnerFit

DEFAULTS = {"C": 1.0, "loss": "squared_hinge", "pair_weight": "query"}
CONSTRAINTS = {"C": Interval(0, None, closed="neither"),
               "loss": ("squared_hinge", "hinge"),
               "pair_weight": ("query", "uniform")}
MAX_ITER = 1000  # liblinear iterations
EARLY_STOPPING = False


def pair_differences(Z, y, groups, pair_weight="query"):
    """Pair differences ``Z[hi] - Z[lo]`` and their weights (mean weight 1)."""
    hi, lo = groups.pairs(y)
    D = Z[hi] - Z[lo]
    if pair_weight == "query" and len(hi):
        q = groups.group[hi]
        per_query = np.bincount(q, minlength=groups.n_queries)
        n_with_pairs = np.count_nonzero(per_query)
        weights = len(hi) / (n_with_pairs * per_query[q])
    else:
        weights = np.ones(len(hi))
    return D, weights


def fit(Z, y, groups, *, rng, max_iter=MAX_ITER, tol=1e-4, callback=None, C=1.0,
        loss="squared_hinge", pair_weight="query"):
    """Fit RankSVM weights.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
        Seeds liblinear.
    max_iter, tol : int, float
        liblinear's ``max_iter`` and ``tol`` (it warns ``ConvergenceWarning`` itself).
    C : float
        Inverse regularisation strength.
    loss : {"squared_hinge", "hinge"}
    pair_weight : {"query", "uniform"}

    Returns
    -------
    LearnerFit
    """
    D, weights = pair_differences(Z, y, groups, pair_weight)
    if len(D) == 0:
        raise ValueError("ranksvm needs at least one query with candidates of different "
                         "relevance")
    sign = np.where(np.arange(len(D)) % 2 == 0, 1.0, -1.0)
    svm = LinearSVC(C=C, loss=loss, fit_intercept=False, dual=loss == "hinge",
                    max_iter=max_iter, tol=max(tol, 1e-12),  # liblinear needs tol > 0
                    random_state=int(rng.integers(2**31 - 1)))
    if len(D) == 1:  # one pair: add its mirror so both classes exist
        D, sign, weights = np.vstack([D, -D]), np.array([1.0, -1.0]), np.repeat(weights, 2)
    svm.fit(D * sign[:, None], sign, sample_weight=weights)
    n_iter = int(np.max(svm.n_iter_))
    return LearnerFit(coef=svm.coef_.ravel().astype(np.float64), n_iter=n_iter,
                      converged=n_iter < max_iter)
