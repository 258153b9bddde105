"""The anchored learner: a correction to a base score, regularised towards zero."""
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from cqa_search.exceptions import ConvergenceWarning, ParameterError
from cqa_search.ranking import LinearRanker, LinearRankerCV, NoImprovementWarning, anchored
from cqa_search.ranking._utils import QueryGroups

W = np.array([1.0, 0.6, -0.4, 0.0])


def naive_loss(theta, Z, y, qid, base, alpha):
    """The objective by loops over queries and pairs (the oracle)."""
    loss = 0.0
    for q in np.unique(qid):
        rows = np.nonzero(qid == q)[0]
        pairs = [(i, j) for i in rows for j in rows if y[i] > y[j]]
        for i, j in pairs:
            loss += np.log1p(np.exp(-(Z[i] - Z[j]) @ theta)) / len(pairs)
    w = theta - np.eye(len(theta))[base]
    return loss + 0.5 * alpha * w @ w


def canonical(X, y, qid):
    g = QueryGroups(qid, X, y)
    return X[g.order], y[g.order], qid[g.order], g


def test_objective_and_gradient_match_the_naive_loops(rankings):
    X, y, qid = rankings(W, noise=1.0, n_queries=6, n_per_query=5, n_relevant=2, seed=1)
    y[:5] = [2, 1, 1, 0, 0]  # graded labels in one query
    Z, yc, qc, g = canonical(X, y, qid)
    D, weights = anchored._pairs(Z, yc, g)
    theta = np.random.default_rng(0).normal(size=4)
    loss, grad = anchored.objective(theta, D, weights, 1, 3.0)
    assert loss == pytest.approx(naive_loss(theta, Z, yc, qc, 1, 3.0), rel=1e-12)
    eps = 1e-6
    numeric = [(naive_loss(theta + eps * e, Z, yc, qc, 1, 3.0)
                - naive_loss(theta - eps * e, Z, yc, qc, 1, 3.0)) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_the_fit_is_the_minimum_of_the_naive_objective(rankings):
    """Oracle: a derivative-free minimisation of the naive loss finds the same point."""
    X, y, qid = rankings(W, noise=1.0, n_queries=8, n_per_query=5, n_relevant=2, seed=2)
    Z, yc, qc, g = canonical(X, y, qid)
    fit = anchored.fit(Z, yc, g, rng=None, tol=1e-10, alpha=2.0, base_feature=0)
    best = minimize(naive_loss, np.eye(4)[0], args=(Z, yc, qc, 0, 2.0), method="Nelder-Mead",
                    options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000, "maxfev": 20000})
    np.testing.assert_allclose(fit.coef, best.x, atol=1e-4)
    assert fit.info["base_feature"] == 0 and fit.coef[0] > 0
    assert np.all(np.diff(fit.loss_curve) <= 1e-12)  # the objective never rises


def test_a_strong_prior_keeps_the_base_scores_order(rankings):
    """alpha -> inf: the correction vanishes, and the ranking is the base column's own,
    whatever the other features say (even a base that ranks badly is not reversed)."""
    X, y, qid = rankings(W, noise=0.3, n_queries=30, seed=3)
    base = 2  # a column that ranks badly (its true weight is negative)
    norms = []
    for alpha in (1.0, 100.0, 1e4, 1e8):
        r = LinearRanker("anchored", params={"alpha": alpha, "base_feature": base},
                         normalize=None).fit(X, y, qid=qid)
        norms.append(np.linalg.norm(r.coef_ - np.eye(4)[base]))
    assert all(a > b for a, b in zip(norms, norms[1:]))  # the correction shrinks
    assert norms[-1] < 1e-6
    s = r.predict(X)
    for q in np.unique(qid):
        rows = qid == q
        np.testing.assert_array_equal(np.argsort(-s[rows]), np.argsort(-X[rows, base]))
    assert r.learner_info_ == {"base_feature": "x2"}


def test_a_weak_prior_learns_the_correction(rankings, cosine):
    X, y, qid = rankings(W, noise=0.05, n_queries=80, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # nearly separable
        r = LinearRanker("anchored", params={"alpha": 1e-3, "base_feature": "x0"},
                         normalize=None).fit(X, y, qid=qid)
    assert cosine(r.coef_, W) > 0.99 and r.train_score_ > 0.95


def test_the_base_is_the_column_of_best_training_map_unless_named(rankings):
    X, y, qid = rankings(W, noise=0.5, n_queries=20, seed=5)
    r = LinearRanker("anchored", random_state=0).fit(X, y, qid=qid, feature_names=list("abcd"))
    assert r.learner_info_ == {"base_feature": "a"}
    r = LinearRanker("anchored", params={"base_feature": "b"}).fit(
        X, y, qid=qid, feature_names=list("abcd"))
    assert r.learner_info_ == {"base_feature": "b"}


def test_same_data_same_bits_in_any_row_order(rankings):
    X, y, qid = rankings(W, noise=1.0, n_queries=25, seed=6)
    perm = np.random.default_rng(0).permutation(len(y))
    a = LinearRanker("anchored", random_state=0).fit(X, y, qid=qid)
    b = LinearRanker("anchored", random_state=1).fit(X[perm], y[perm], qid=qid[perm])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.loss_curve_ == b.loss_curve_


def test_errors(rankings):
    X, y, qid = rankings(W, n_queries=5, seed=7)
    with pytest.raises(ParameterError, match=r"base_feature must be a column index in "
                                             r"\[0, 4\); got 9"):
        LinearRanker("anchored", params={"base_feature": 9}).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match=r"alpha must be a number in \[0, inf\); got -1"):
        LinearRanker("anchored", params={"alpha": -1}).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="anchored needs at least one query with candidates "
                                         "of different relevance"):
        LinearRanker("anchored").fit(X, np.zeros(len(y)), qid=qid)


def test_cross_validation_anchors_on_the_baseline(rankings):
    names = ["bm25", "wt", "topic_a", "log_length"]
    X, y, qid = rankings(W, noise=0.5, n_queries=30, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoImprovementWarning)
        cv = LinearRankerCV("anchored", baseline="wt", random_state=0).fit(
            X, y, qid=qid, feature_names=names)
    assert cv.chosen_ == "learned"
    assert cv.best_estimator_.learner_info_ == {"base_feature": "wt"}
    assert cv.best_params_ in [{"alpha": a} for a in (100.0, 30.0, 10.0, 3.0, 1.0)]
