"""Runs built from scores: run_of_scores, the one home of what the scripts built four ways."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cqa_search.evaluation import evaluate, run_of_scores


def test_pairs_become_a_run_in_their_order():
    run = run_of_scores(np.array(["q1", "q1", "q2"]), np.array(["b", "a", "c"]),
                        np.array([1.0, 2.0, 0.5], dtype=np.float32))
    assert run == {"q1": {"b": 1.0, "a": 2.0}, "q2": {"c": 0.5}}
    assert all(type(s) is float for docs in run.values() for s in docs.values())
    assert all(type(q) is str for q in run)  # numpy strings become str


def test_order_decides_ties_as_the_official_scorer_keeps_them():
    qrels = {"q": {"a": 1}}
    pairs = (["q", "q"], ["b", "a"], [1.0, 1.0])  # a tie; the relevant "a" comes second
    assert evaluate(run_of_scores(*pairs), qrels, metrics=["map"],
                    rerank=True)["map"]["q"] == 0.5
    given_order = {"q": {"a": 9.0, "b": 8.0}}  # the candidates' given order puts "a" first
    assert evaluate(run_of_scores(*pairs, order=given_order), qrels,
                    metrics=["map"], rerank=True)["map"]["q"] == 1.0


@given(st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3"]), st.sampled_from("abcdef"),
                          st.floats(-5, 5)), unique_by=lambda t: t[:2]),
       st.permutations(list("abcdef")))
def test_order_keeps_the_scores_and_leaves_out_what_has_none(pairs, order):
    qid, docs, scores = zip(*pairs) if pairs else ((), (), ())
    candidates = {q: {d: 0.0 for d in order[:4]} for q in ("q1", "q2", "q3")}
    plain = run_of_scores(qid, docs, scores)
    ordered = run_of_scores(qid, docs, scores, order=candidates)
    assert set(ordered) == set(plain)
    for q, scored in ordered.items():
        assert list(scored) == [d for d in order[:4] if d in plain[q]]
        assert all(scored[d] == plain[q][d] for d in scored)
