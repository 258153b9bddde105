"""Each learner on synthetic data generated from a known model, and the learners' oracles."""
import warnings

import numpy as np
import pytest
from scipy import stats

from cqa_search.exceptions import ConvergenceWarning
from cqa_search.ranking import LinearRanker, boosting, coordinate_ascent, lambdarank, stacking
from cqa_search.ranking._utils import QueryGroups, average_precision, mean_average_precision
from cqa_search.ranking.linear import _fit_learner

W_TRUE = np.array([1.5, -1.0, 0.5, 0.0])

LINEAR = [("powell", None), ("coordinate-ascent", None), ("ranksvm", None),
          ("perceptron", {"algorithm": "fast"}), ("perceptron", {"algorithm": "full"}),
          ("perceptron", {"algorithm": "fast", "margin": "even"}),
          ("lambdarank", None),
          ("stacking", {"base": ["coordinate-ascent", "ranksvm", "perceptron"], "n_splits": 3})]


@pytest.mark.parametrize("learner,params", LINEAR)
def test_linear_learners_recover_the_generating_weights(learner, params, rankings, cosine):
    X, y, qid = rankings(W_TRUE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # separable data: some learners never "converge"
        ranker = LinearRanker(learner, params=params, normalize=None, random_state=0).fit(
            X, y, qid=qid)
    assert cosine(ranker.coef_, W_TRUE) > 0.995
    assert abs(ranker.coef_[3]) < 0.05 * np.abs(ranker.coef_).max()
    assert ranker.train_score_ > 0.98


def test_boosting_recovers_the_generating_steps(rankings):
    """Data from F = x0 + 2 [x1 > 0.5] - 1.5 [x2 > -0.3]; x3 is noise."""
    def true(X):
        return X[:, 0] + 2.0 * (X[:, 1] > 0.5) - 1.5 * (X[:, 2] > -0.3)

    X, y, qid = rankings(np.zeros(4), score=true, n_queries=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranker = LinearRanker("boosting", params={"base_feature": 0}, normalize=None,
                              max_iter=300, random_state=0).fit(X, y, qid=qid)
    assert ranker.coef_[0] > 0 and np.all(ranker.coef_[1:] == 0)
    assert ranker.learner_info_["base_feature"] == "x0"

    def strongest(j, sign):
        k = np.nonzero(ranker.step_feature_ == j)[0]
        return ranker.step_threshold_[k[np.argmax(sign * ranker.step_coef_[k])]]

    assert 0.3 < strongest(1, +1) < 0.7
    assert -0.5 < strongest(2, -1) < -0.1
    grid = np.zeros((41, 4))
    spans = []
    for j in range(1, 4):
        g = grid.copy()
        g[:, j] = np.linspace(-2, 2, 41)
        c = ranker.contributions(g)[:, j]
        spans.append(c.max() - c.min())
    assert spans[2] < 0.5 * min(spans[0], spans[1])
    X_new, _, _ = rankings(np.zeros(4), score=true, seed=1)
    assert stats.spearmanr(ranker.predict(X_new), true(X_new)).statistic > 0.9


@pytest.mark.parametrize("learner", ["powell", "coordinate-ascent"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("init", ["best-feature", "uniform"])
def test_map_search_never_ends_below_its_start(learner, seed, init, rankings):
    X, y, qid = rankings(np.array([1.0, 1.0, -1.0, 0.5, 0.0]), noise=1.5, n_queries=30,
                         seed=seed)
    X = np.round(X)  # ties between candidates
    params = {"init": init, "n_restarts": 2}
    ranker = LinearRanker(learner, params=params, random_state=seed).fit(X, y, qid=qid)
    assert ranker.init_score_ is not None
    assert ranker.train_score_ >= ranker.init_score_ - 1e-12
    assert ranker.train_score_ == pytest.approx(ranker.score(X, y, qid=qid))


def test_coordinate_line_search_is_exact(rankings):
    """Oracle: MAP on a fine grid of steps never beats the line search's step."""
    X, y, qid = rankings(np.array([1.0, -0.5, 0.3]), noise=1.0, n_queries=25, seed=3)
    g = QueryGroups(qid, X, y)
    Z, yc = X[g.order], y[g.order]
    a = Z @ np.array([0.2, 0.1, 0.0])
    for j in range(3):
        t, gain = coordinate_ascent.line_search(a, Z[:, j], yc, g)
        best = mean_average_precision(a + t * Z[:, j], yc, g)
        assert best == pytest.approx(mean_average_precision(a, yc, g) + gain)
        grid = np.concatenate([np.linspace(-5, 5, 2001), [0.0]])
        on_grid = max(mean_average_precision(a + s * Z[:, j], yc, g) for s in grid)
        assert best >= on_grid - 1e-12


def _expfit(algorithm, X, y, qid, **params):
    g = QueryGroups(qid, X, y)
    return boosting.fit(X[g.order], y[g.order], g, rng=np.random.default_rng(0), max_iter=60,
                        tol=0.0, algorithm=algorithm, **params)


@pytest.mark.parametrize("params", [{}, {"pair_weight": "gain", "epsilon": 0.05,
                                         "n_thresholds": 5}])
def test_efficient_boosting_equals_the_naive_algorithm(params, rankings):
    """Figure 4 selects the same features with the same weights as Figure 3."""
    X, y, qid = rankings(np.array([1.0, -0.7, 0.4, 0.2, 0.0, 0.1]), noise=1.0,
                         n_queries=40, seed=5)
    y = y + (X[:, 0] > 1.0) * y  # graded labels for the "gain" weights
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        naive = _expfit("naive", X, y, qid, **params)
        fast = _expfit("efficient", X, y, qid, **params)
    assert len(naive.info["selected"]) == 60
    assert naive.info["selected"] == fast.info["selected"]
    np.testing.assert_array_equal(naive.step_feature, fast.step_feature)
    np.testing.assert_array_equal(naive.step_threshold, fast.step_threshold)
    np.testing.assert_allclose(naive.step_coef, fast.step_coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(naive.loss_curve, fast.loss_curve, rtol=1e-9)
    assert naive.coef[naive.info["base_feature"]] == fast.coef[fast.info["base_feature"]]


def test_boosting_exploss_falls_and_alpha0_is_optimal(rankings):
    X, y, qid = rankings(np.array([1.0, -0.7, 0.4]), noise=1.0, n_queries=40, seed=2)
    with pytest.warns(ConvergenceWarning, match="boosting reached max_iter=60 rounds"):
        fit = _expfit("efficient", X, y, qid, base_feature=0)
    assert np.all(np.diff(fit.loss_curve) <= 1e-12)
    g = QueryGroups(qid, X, y)
    Z, yc = X[g.order], y[g.order]
    hi, lo = g.pairs(yc)
    dL = Z[hi, 0] - Z[lo, 0]
    grid = np.arange(0.001, 10, 0.001)  # the paper's brute-force search (eq. 12)
    losses = np.exp(-np.outer(grid, dL)).sum(axis=1)
    assert fit.info["alpha0"] == pytest.approx(grid[np.argmin(losses)], abs=2e-3)


def test_delta_ap_matches_swapping_by_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 12))
        rel = rng.random(n) < 0.4
        if rel.all() or not rel.any():
            continue
        scores = rng.integers(0, 4, size=n).astype(float)  # ties
        i, j = np.nonzero(rel[:, None] & ~rel[None, :])
        got = lambdarank.delta_ap(scores, rel, i, j)
        g = QueryGroups._from_group(np.zeros(n))
        order = np.lexsort((rel, -scores))
        rank_score = np.empty(n)
        rank_score[order] = -np.arange(n)  # the same ranking without ties
        base = average_precision(rank_score, rel, g)[0]
        for p in range(len(i)):
            swapped = rank_score.copy()
            swapped[[i[p], j[p]]] = swapped[[j[p], i[p]]]
            assert got[p] == pytest.approx(abs(average_precision(swapped, rel, g)[0] - base))


def test_stacking_collapses_to_the_meta_ranker_over_base_rankers(rankings):
    """The stored single model equals the meta-ranker applied to the base rankers' scores."""
    X, y, qid = rankings(np.array([1.0, -0.5, 0.3, 0.0]), noise=0.7, n_queries=40, seed=4)
    g = QueryGroups(qid, X, y)
    Z, yc = X[g.order], y[g.order]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = stacking.fit(Z, yc, g, rng=np.random.default_rng(0), max_iter=None, tol=1e-4,
                           fit_learner=_fit_learner,
                           base=["ranksvm", "boosting", "perceptron"], n_splits=3,
                           meta="ranksvm")
    beta = fit.info["meta_coef"]
    base_scores = np.column_stack([(f.decision(Z) - mu) / sd for f, (mu, sd) in
                                   zip(fit.info["base_fits"], fit.info["base_scale"])])
    np.testing.assert_allclose(fit.decision(Z), base_scores @ beta, atol=1e-9)
    assert len(fit.step_coef) > 0  # the boosting base ranker's steps, scaled
    assert fit.info["oof_scores"].shape == (len(Z), 3)


def test_stacking_base_learners_take_their_own_options(rankings):
    X, y, qid = rankings(np.array([1.0, -0.5, 0.3]), noise=0.7, n_queries=20, seed=6)
    g = QueryGroups(qid, X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = stacking.fit(X[g.order], y[g.order], g, rng=np.random.default_rng(0),
                           max_iter=None, tol=0.0, fit_learner=_fit_learner,
                           base=["boosting", "perceptron"], n_splits=2,
                           base_params={"boosting": {"max_iter": 3, "n_thresholds": 2},
                                        "perceptron": {"margin": "even"}})
    boosted, perceptron = fit.info["base_fits"]
    assert boosted.n_iter == 3 and len(boosted.info["binary_feature"]) <= 6
    assert perceptron.n_iter > 3
