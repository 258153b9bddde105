"""LinearRankerCV: regularisation, family selection and the guard against single features
and the retrieval order, all by query-grouped cross-validation."""
import warnings

import numpy as np
import pytest

from cqa_search.ranking import LinearRankerCV, NoImprovementWarning
from cqa_search.ranking.selection import REGULARISATION, family

NAMES = ["bm25", "lm_jm", "wt", "translm", "topic_a", "topic_b", "topic_c", "log_length"]


def data(rankings, score, seed=0, n_queries=40):
    """Columns named like the engine's; relevance from ``score`` of the columns."""
    return rankings(np.zeros(len(NAMES)), n_queries=n_queries, n_per_query=15, n_relevant=3,
                    noise=0.0, seed=seed, score=score)


def fit(X, y, qid, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoImprovementWarning)
        return LinearRankerCV(random_state=0, **kw).fit(X, y, qid=qid, feature_names=NAMES)


def test_families():
    assert [family(n) for n in NAMES] == ["term", "term", "translation", "translation",
                                          "topics", "topics", "topics", "context"]
    assert family("x", {"mine": ("x",)}) == "mine"


def test_chooses_regularisation_drops_useless_families_and_refits(rankings):
    # relevance mixes the term and translation columns; topics and length are noise
    X, y, qid = data(rankings, lambda X: X[:, 0] + X[:, 2] + 0.8 * X[:, 3])
    cv = fit(X, y, qid, baseline="bm25")
    assert cv.chosen_ == "learned" and cv.improves_
    assert cv.best_params_ in REGULARISATION["ranksvm"]
    dropped = [d["family"] for d in cv.dropped_]
    assert "topics" in dropped and "term" not in dropped and "translation" not in dropped
    for d in cv.dropped_:  # no significant gain with it
        assert d["map_without"] >= d["map_with"] or d["p_value"] > 0.1
    assert set(cv.features_) >= {"bm25", "wt", "translm"}
    assert list(cv.best_estimator_.feature_names_in_) == cv.features_
    assert cv.best_score_ == cv.learned_score_ > cv.baseline_score_
    assert cv.best_score_ >= max(cv.single_scores_.values())
    # every candidate was cross-validated on the same folds, and is in the history
    assert {tuple(h["features"]) for h in cv.history_} >= {tuple(cv.features_)}
    assert all(0 <= h["map"] <= 1 for h in cv.history_)
    cols = [NAMES.index(f) for f in cv.features_]
    np.testing.assert_array_equal(cv.predict(X[:, cols], qid),
                                  cv.best_estimator_.predict(X[:, cols], qid))
    again = fit(X, y, qid, baseline="bm25")
    np.testing.assert_array_equal(again.best_estimator_.coef_, cv.best_estimator_.coef_)


def test_warns_and_keeps_the_retrieval_order_when_nothing_beats_it(rankings):
    X, y, qid = data(rankings, lambda X: X[:, 0])  # the retrieval score is the truth
    with pytest.warns(NoImprovementWarning, match=r"not better than the retrieval order "
                                                  r"alone \(bm25, MAP 100\.00\)"):
        cv = LinearRankerCV(random_state=0).set_params(baseline="bm25").fit(
            X, y, qid=qid, feature_names=NAMES)
    assert cv.chosen_ == "baseline" and not cv.improves_ and cv.baseline_score_ == 1.0
    assert list(cv.best_estimator_.feature_names_in_) == ["bm25"]


def test_a_single_feature_that_wins_is_the_ranker(rankings):
    X, y, qid = data(rankings, lambda X: -X[:, 1])  # lm_jm, reversed, is the truth
    cv = fit(X, y, qid, baseline="bm25", select_features=False)
    assert cv.chosen_ == "single" and cv.single_feature_ == "lm_jm" and cv.improves_
    assert cv.single_scores_["lm_jm"] == 1.0
    assert cv.best_score_ == 1.0 and cv.best_estimator_.coef_[0] < 0
    assert cv.dropped_ == [] and len(cv.features_) == len(NAMES)


def test_constant_columns_and_fixed_parameters(rankings):
    X, y, qid = data(rankings, lambda X: X[:, 0] + X[:, 2])
    X[:, 7] = 1.0
    cv = fit(X, y, qid, param_grid=None, params={"C": 0.5}, select_features=False)
    assert cv.best_params_ == {} and "log_length" not in cv.features_
    assert cv.best_estimator_.get_params()["params"] == {"C": 0.5}
    assert cv.baseline_score_ is None and cv.improves_
    assert "log_length" not in cv.single_scores_


def test_n_relevant_scales_every_score_as_trec_eval(rankings):
    X, y, qid = data(rankings, lambda X: X[:, 0] + X[:, 2])
    per_query = {q: int(y[qid == q].sum()) for q in np.unique(qid)}
    doubled = np.array([2 * per_query[q] for q in qid])  # half the relevant were not found
    a = fit(X, y, qid, baseline="bm25")
    b = LinearRankerCV(random_state=0, baseline="bm25").fit(X, y, qid=qid, feature_names=NAMES,
                                                            n_relevant=doubled)
    assert b.baseline_score_ == pytest.approx(a.baseline_score_ / 2)
    assert b.learned_score_ == pytest.approx(a.learned_score_ / 2)
    assert b.chosen_ == a.chosen_ and b.features_ == a.features_
    with pytest.raises(ValueError, match="n_relevant is below the number of relevant"):
        LinearRankerCV().fit(X, y, qid=qid, feature_names=NAMES, n_relevant=np.zeros(len(y)))


@pytest.mark.parametrize("kwargs, message", [
    ({"param_grid": []}, "param_grid must be 'auto', None or a non-empty list of dicts"),
    ({"baseline": "nope"}, "baseline must be one of the feature names or None; got 'nope'"),
    ({"n_splits": 50}, r"needs at least n_splits=50 queries; got 40"),
    ({"learner": "svm"}, r"learner must be \{.powell., .*\}; got .svm."),
])
def test_errors(rankings, kwargs, message):
    X, y, qid = data(rankings, lambda X: X[:, 0])
    with pytest.raises(ValueError, match=message):
        fit(X, y, qid, **kwargs)


def _ap(scores, y):
    """AP of one query's candidates ranked by ``scores`` (no ties in these data)."""
    rel = y[np.argsort(-scores, kind="stable")] >= 1
    hits = np.cumsum(rel)
    return float(np.sum(hits[rel] / (np.flatnonzero(rel) + 1)) / max(rel.sum(), 1))


def test_the_single_feature_is_chosen_in_each_fold_on_its_training_queries(rankings):
    # relevance is noise: the best of eight features by the held-out scores it is judged
    # by would win by luck; the single-feature score is the per-fold choice's instead
    from cqa_search.ranking import LinearRanker
    from cqa_search.ranking._utils import query_folds

    noise = np.random.default_rng(7)
    X, y, qid = data(rankings, lambda X: noise.normal(size=len(X)))
    cv = fit(X, y, qid, baseline="bm25")
    ids = np.unique(qid)
    expected = {}
    for tr, te in query_folds(len(ids), 5, np.random.default_rng(0)):  # the same folds
        train, test = np.isin(qid, ids[tr]), np.isin(qid, ids[te])

        def train_ap(j):
            return max(np.mean([_ap(s * X[train & (qid == q), j], y[train & (qid == q)])
                                for q in ids[tr]]) for s in (1, -1))

        best = max(range(len(NAMES)), key=train_ap)
        model = LinearRanker("ranksvm", random_state=0).fit(
            X[train][:, [best]], y[train], qid=qid[train], feature_names=[NAMES[best]])
        scores = model.predict(X[test][:, [best]], qid[test])
        expected.update({q: _ap(scores[qid[test] == q], y[test & (qid == q)]) for q in ids[te]})
    assert cv.single_score_ == pytest.approx(np.mean(list(expected.values())))
    # what the chosen system scored on each query, for paired comparisons
    assert list(cv.query_ids_) == list(ids) and len(cv.query_ap_) == len(ids)
    assert cv.query_ap_.mean() == pytest.approx(cv.best_score_)
