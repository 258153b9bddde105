"""LinearRanker: the estimator contract, validation, determinism, row order, storage."""
import json
import warnings

import numpy as np
import pytest

from cqa_search.exceptions import ConvergenceWarning, NotFittedError
from cqa_search.ranking import LEARNERS, LinearRanker, cross_val_predict, cross_validate
from cqa_search.ranking._utils import query_folds

W = np.array([1.0, -0.6, 0.3, 0.0])
FAST = {"stacking": {"base": ["ranksvm", "perceptron", "boosting"], "n_splits": 3},
        "powell": {"n_restarts": 3}}


def noisy(rankings, seed=0):
    X, y, qid = rankings(W, noise=1.0, n_queries=30, seed=seed)
    X[:, 3] = np.round(X[:, 3])  # a column with ties
    return X, y, qid


def fitted(learner, X, y, qid, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LinearRanker(learner, params=FAST.get(learner), random_state=0, **kw).fit(
            X, y, qid=qid, feature_names=["a", "b", "c", "d"])


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_same_seed_same_model_and_row_order_does_not_matter(learner, rankings):
    X, y, qid = noisy(rankings)
    a = fitted(learner, X, y, qid)
    b = fitted(learner, X, y, qid)
    perm = np.random.default_rng(7).permutation(len(y))
    c = fitted(learner, X[perm], y[perm], qid[perm])
    for other in (b, c):
        np.testing.assert_array_equal(a.coef_, other.coef_)
        np.testing.assert_array_equal(a.step_coef_, other.step_coef_)
        np.testing.assert_array_equal(a.step_threshold_, other.step_threshold_)
        np.testing.assert_array_equal(a.norm_offset_, other.norm_offset_)
        np.testing.assert_array_equal(a.predict(X), other.predict(X))
        assert a.intercept_ == other.intercept_ and a.n_iter_ == other.n_iter_


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_contributions_add_up_and_storage_round_trips(learner, rankings):
    X, y, qid = noisy(rankings)
    ranker = fitted(learner, X, y, qid)
    np.testing.assert_allclose(ranker.contributions(X).sum(axis=1) + ranker.intercept_,
                               ranker.predict(X), atol=1e-10)
    explained = ranker.explain(dict(zip(["d", "c", "b", "a", "extra"], X[0, ::-1].tolist()
                                        + [9.0])))
    assert set(explained) == {"a", "b", "c", "d"}
    assert sum(explained.values()) + ranker.intercept_ == pytest.approx(ranker.predict(X[:1])[0])
    assert list(explained) == sorted(explained, key=lambda f: -abs(explained[f]))
    meta, arrays = ranker.state()
    params = json.loads(json.dumps(ranker.get_params()))
    meta = json.loads(json.dumps(meta))
    back = LinearRanker.from_state(params, meta, {k: np.asarray(v) for k, v in arrays.items()})
    np.testing.assert_array_equal(back.predict(X), ranker.predict(X))
    assert list(back.feature_names_in_) == ["a", "b", "c", "d"]
    assert back.train_score_ == ranker.train_score_ and back.get_params() == params
    assert back.learner_info_ == ranker.learner_info_


@pytest.mark.parametrize("learner", ["powell", "coordinate-ascent", "ranksvm", "perceptron",
                                     "boosting", "lambdarank", "anchored"])
def test_max_iter_1_warns(learner, rankings):
    X, y, qid = noisy(rankings)
    with pytest.warns(ConvergenceWarning):
        LinearRanker(learner, max_iter=1, random_state=0).fit(X, y, qid=qid)


def test_not_fitted():
    ranker = LinearRanker()
    for call in (lambda: ranker.predict(np.zeros((2, 3))), lambda: ranker.explain([0.0]),
                 ranker.state, lambda: ranker.contributions(np.zeros((1, 1)))):
        with pytest.raises(NotFittedError):
            call()


@pytest.mark.parametrize("kwargs,message", [
    ({"learner": "svm"}, r"learner must be \{'powell', 'coordinate-ascent', 'ranksvm', "
                         r"'perceptron', 'boosting', 'lambdarank', 'anchored', 'stacking'\}; "
                         r"got 'svm'"),
    ({"normalize": "l2"}, r"normalize must be \{'zscore', 'minmax', 'query', None\}; got 'l2'"),
    ({"max_iter": 0}, r"max_iter must be \{None\} or an integer in \[1, inf\); got 0"),
    ({"tol": -1.0}, r"tol must be a number in \[0, inf\); got -1.0"),
    ({"validation_fraction": 1.0}, r"validation_fraction must be a number in \(0, 1\); got 1.0"),
    ({"random_state": "seed"}, r"random_state must be \{None\} or an integer in \[0, inf\) or a "
                               r"numpy Generator; got 'seed'"),
    ({"params": ["C", 1]}, r"params must be a dict of learner options or None; got \['C', 1\]"),
    ({"learner": "ranksvm", "params": {"C": -1}}, r"C must be a number in \(0, inf\); got -1"),
    ({"learner": "ranksvm", "params": {"c": 1}},
     r"params has no option 'c' for learner 'ranksvm'; options: \{'C', 'loss', 'pair_weight'\}"),
    ({"learner": "perceptron", "params": {"margin": "odd"}},
     r"margin must be \{'uneven', 'even'\}; got 'odd'"),
    ({"learner": "boosting", "params": {"base_feature": "bm25"}},
     r"base_feature must be None, a column index or a feature name among \{'a', 'b', 'c', "
     r"'d'\}; got 'bm25'"),
    ({"learner": "stacking", "params": {"base": ["ranksvm", "stacking"]}},
     r"base must list learners among \{.*\}; got 'stacking'"),
    ({"learner": "stacking", "params": {"meta": "boosting"}},
     r"meta must be \{'powell', 'coordinate-ascent', 'ranksvm', 'perceptron', "
     r"'lambdarank'\}; got 'boosting'"),
    ({"learner": "stacking", "params": {"base_params": {"ranksvm": {"C": 0}}}},
     r"C must be a number in \(0, inf\); got 0"),
    ({"learner": "stacking", "params": {"base": ["boosting"],
                                        "base_params": {"boosting": {"max_iter": 0}}}},
     r"max_iter must be None or an integer in \[1, inf\); got 0 \(base_params of "
     r"'boosting'\)"),
    ({"learner": "powell", "early_stopping": True},
     r"early_stopping applies to the learners \{'perceptron', 'boosting', 'lambdarank'\}; "
     r"got learner 'powell'"),
])
def test_parameter_validation_messages(kwargs, message, rankings):
    X, y, qid = noisy(rankings)
    with pytest.raises(ValueError, match=message):
        LinearRanker(**kwargs).fit(X, y, qid=qid, feature_names=["a", "b", "c", "d"])


def test_input_validation(rankings):
    X, y, qid = noisy(rankings)
    with pytest.raises(ValueError, match="same number of rows"):
        LinearRanker().fit(X, y[:-1], qid=qid)
    with pytest.raises(ValueError, match="feature_names must be 4 distinct names"):
        LinearRanker().fit(X, y, qid=qid, feature_names=["a", "a", "b", "c"])
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        LinearRanker().fit(bad, y, qid=qid)
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="X has 3 features, but the ranker was fitted with 4"):
        ranker.predict(X[:, :3])
    with pytest.raises(ValueError, match="explain needs the features"):
        ranker.explain({"x0": 1.0})
    assert list(ranker.feature_names_in_) == ["x0", "x1", "x2", "x3"]


def test_dataframe_columns_are_the_feature_names(rankings):
    pd = pytest.importorskip("pandas")
    X, y, qid = noisy(rankings)
    ranker = LinearRanker("ranksvm").fit(pd.DataFrame(X, columns=list("pqrs")), y, qid=qid)
    assert list(ranker.feature_names_in_) == list("pqrs")


def test_normalisation_is_fitted_on_training_data(rankings):
    X, y, qid = noisy(rankings)
    X = X * [1.0, 100.0, 0.01, 1.0] + [0.0, 50.0, 0.0, 0.0]
    z = LinearRanker("ranksvm", normalize="zscore").fit(X, y, qid=qid)
    np.testing.assert_allclose(z.norm_offset_, X.mean(axis=0))
    np.testing.assert_allclose(z.norm_scale_, X.std(axis=0))
    m = LinearRanker("ranksvm", normalize="minmax").fit(X, y, qid=qid)
    np.testing.assert_allclose(m.norm_offset_, X.min(axis=0))
    np.testing.assert_allclose(m.norm_scale_, X.max(axis=0) - X.min(axis=0))
    const = X.copy()
    const[:, 1] = 3.0
    c = LinearRanker("ranksvm").fit(const, y, qid=qid)
    assert c.norm_scale_[1] == 1.0 and np.all(np.isfinite(c.predict(const)))


def test_query_normalisation(rankings):
    """normalize="query": each query's candidates min-max scaled among themselves, in
    fitting and in predicting, so that a query's scale and offset do not matter."""
    X, y, qid = noisy(rankings)
    Xq = X.copy()
    for i, q in enumerate(np.unique(qid)):  # every query on its own scale
        Xq[qid == q] = X[qid == q] * (1.0 + i) + 10.0 * i
    ranker = LinearRanker("ranksvm", normalize="query", random_state=0).fit(Xq, y, qid=qid)
    same = LinearRanker("ranksvm", normalize="query", random_state=0).fit(X, y, qid=qid)
    np.testing.assert_allclose(ranker.coef_, same.coef_)
    # oracle: per-query min-max by hand, then no normalisation
    Z = np.zeros_like(X)
    for q in np.unique(qid):
        block = X[qid == q]
        Z[qid == q] = (block - block.min(0)) / (block.max(0) - block.min(0))
    plain = LinearRanker("ranksvm", normalize=None, random_state=0).fit(Z, y, qid=qid)
    np.testing.assert_allclose(ranker.coef_, plain.coef_)
    np.testing.assert_allclose(ranker.predict(Xq, qid), plain.predict(Z))
    first = qid == qid[0]  # qid=None: the rows are one query's candidates
    np.testing.assert_allclose(ranker.predict(Xq[first]), plain.predict(Z[first]))
    np.testing.assert_allclose(ranker.contributions(Xq, qid).sum(1) + ranker.intercept_,
                               ranker.predict(Xq, qid))
    assert ranker.score(Xq, y, qid=qid) == pytest.approx(plain.score(Z, y, qid=qid))
    with pytest.raises(ValueError, match="normalises the features per query"):
        ranker.explain(Xq[0])


@pytest.mark.parametrize("learner", ["perceptron", "boosting", "lambdarank"])
def test_early_stopping_picks_the_best_validation_iteration(learner, rankings):
    X, y, qid = noisy(rankings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ranker = LinearRanker(learner, early_stopping=True, max_iter=30,
                              random_state=0).fit(X, y, qid=qid)
    scores = ranker.validation_scores_
    assert 1 <= len(scores) <= 30
    best = int(np.argmax(scores)) + 1
    assert ranker.n_iter_ <= best


def test_cross_validate_holds_out_whole_queries(rankings):
    X, y, qid = noisy(rankings)
    maps = cross_validate(LinearRanker("ranksvm"), X, y, qid=qid, n_splits=5, random_state=0)
    assert maps.shape == (5,) and np.all((0 <= maps) & (maps <= 1))
    again = cross_validate(LinearRanker("ranksvm"), X, y, qid=qid, n_splits=5, random_state=0)
    np.testing.assert_array_equal(maps, again)


def test_cross_val_predict_scores_each_query_with_the_ranker_that_held_it_out(rankings):
    X, y, qid = noisy(rankings)
    scores = cross_val_predict(LinearRanker("ranksvm"), X, y, qid=qid, n_splits=5,
                               random_state=0)
    maps = cross_validate(LinearRanker("ranksvm"), X, y, qid=qid, n_splits=5, random_state=0)
    # oracle: the folds dealt by hand (queries in sorted-id order, shuffled by the seed)
    queries = np.unique(qid)
    for k, (train_q, test_q) in enumerate(query_folds(len(queries), 5,
                                                      np.random.default_rng(0))):
        train, test = np.isin(qid, queries[train_q]), np.isin(qid, queries[test_q])
        ranker = LinearRanker("ranksvm").fit(X[train], y[train], qid=qid[train])
        np.testing.assert_allclose(scores[test], ranker.predict(X[test]))
        assert ranker.score(X[test], y[test], qid=qid[test]) == pytest.approx(maps[k])
