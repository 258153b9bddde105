"""Query groups, per-query average precision, pairs and folds."""
import numpy as np
import pytest

from cqa_search.evaluation import evaluate
from cqa_search.ranking._utils import (QueryGroups, average_precision, mean_average_precision,
                                       query_folds)


def test_canonical_order_ignores_row_order():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(40, 2)).astype(float)  # many equal rows
    y = rng.integers(0, 2, size=40).astype(float)
    qid = rng.choice(["a", "b", "c"], size=40)
    g = QueryGroups(qid, X, y)
    perm = rng.permutation(40)
    h = QueryGroups(qid[perm], X[perm], y[perm])
    np.testing.assert_array_equal(X[g.order], X[perm][h.order])
    np.testing.assert_array_equal(y[g.order], y[perm][h.order])
    assert g.qids.tolist() == ["a", "b", "c"]
    assert np.all(np.diff(g.group) >= 0) and g.bounds[-1] == 40


def test_average_precision_matches_the_evaluation_module():
    """Oracle: cqa_search.evaluation (SemEval convention, k >= list length, no ties)."""
    rng = np.random.default_rng(1)
    n_q, n = 30, 8
    qid = np.repeat([f"q{i:02d}" for i in range(n_q)], n)
    scores = rng.permutation(n_q * n).astype(float)  # distinct: no ties
    y = rng.integers(0, 3, size=n_q * n).astype(float)
    X = scores[:, None]
    g = QueryGroups(qid, X, y)
    ap = average_precision(scores[g.order], y[g.order], g)
    run, qrels = {}, {}
    for q, d, s, label in zip(qid, range(n_q * n), scores, y):
        run.setdefault(q, {})[str(d)] = s
        qrels.setdefault(q, {})[str(d)] = int(label)
    expected = evaluate(run, qrels, metrics=["map"], rerank=True)["map"]
    np.testing.assert_allclose(ap, expected.loc[g.qids].to_numpy())
    assert mean_average_precision(scores[g.order], y[g.order], g) == pytest.approx(expected.mean())


def test_average_precision_by_hand_and_pessimistic_ties():
    g = QueryGroups._from_group([0, 0, 0, 0, 1, 1, 2])
    scores = np.array([4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 7.0])
    y = np.array([1, 0, 1, 0, 1, 0, 0])
    # q0: relevant at ranks 1 and 3 -> (1 + 2/3) / 2; q1 tied: non-relevant first -> 1/2;
    # q2: no relevant candidate -> 0
    np.testing.assert_allclose(average_precision(scores, y, g), [5 / 6, 0.5, 0.0])


def test_pairs_within_queries():
    g = QueryGroups._from_group([0, 0, 0, 1, 1])
    hi, lo = g.pairs(np.array([2, 1, 0, 0, 0]))
    assert sorted(zip(hi.tolist(), lo.tolist())) == [(0, 1), (0, 2), (1, 2)]


def test_query_folds_partition_the_queries():
    folds = query_folds(23, 5, np.random.default_rng(0))
    tests = np.concatenate([t for _, t in folds])
    assert sorted(tests.tolist()) == list(range(23))
    for train, test in folds:
        assert not set(train) & set(test) and len(train) + len(test) == 23
        assert len(test) in (4, 5)
    with pytest.raises(ValueError, match="n_splits must be in"):
        query_folds(3, 5, np.random.default_rng(0))
