"""Metrics: hand-computed cases, the official SemEval figures, and pytrec_eval equality."""
import numpy as np
import pytest

from cqa_search.evaluation import (evaluate, parse_metric, read_qrels, read_run, summarize,
                                   write_run)
from cqa_search.evaluation.datasets import convert_semeval

SEMEVAL = "semeval2016-task3-cqa-ql"


def test_semeval_convention_by_hand():
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5, **{f"x{i}": 0.1 for i in range(10)}, "z": 2.0}}
    qrels = {"q": {"b": 1, "c": 2, "z": 0, "x9": 1}, "none": {"a": 0}}
    df = evaluate(run, qrels, metrics=["map", "mrr", "p@1", "p@5", "r@5"], rerank=True)
    # ranking: z a b c x0..x5 (ties keep run order; x9 falls outside the top 10)
    assert df.loc["q", "map"] == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert df.loc["q", "mrr"] == pytest.approx(1 / 3)
    assert df.loc["q", "p@1"] == 0 and df.loc["q", "p@5"] == pytest.approx(2 / 5)
    assert df.loc["none"].tolist() == [0.0] * 5  # judged, nothing relevant: 0, and counted
    assert summarize(df)["map"] == pytest.approx(df.loc["q", "map"] / 2)


def test_trec_convention_by_hand():
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}, "unjudged": {"a": 1.0}}
    qrels = {"q": {"a": 1, "d": 1}, "missing": {"a": 1}}
    df = evaluate(run, qrels, metrics=["map", "mrr", "ndcg@2", "success@1", "success@2"])
    assert list(df.index) == ["q"]  # only queries in both run and qrels
    # ties by doc id descending: b a c; a at rank 2; 2 relevant in the qrels
    assert df.loc["q", "map"] == pytest.approx(0.5 / 2)
    assert df.loc["q", "mrr"] == pytest.approx(0.5)
    assert df.loc["q", "ndcg@2"] == pytest.approx((1 / np.log2(3)) / (1 + 1 / np.log2(3)))
    assert (df.loc["q", "success@1"], df.loc["q", "success@2"]) == (0.0, 1.0)


def test_metric_names():
    assert parse_metric("NDCG@10") == ("ndcg", 10)
    assert parse_metric("success@3") == ("success", 3)
    for bad in ["p@0", "p@", "map@5", "precision", "p@²"]:
        with pytest.raises(ValueError, match="metric must be map, mrr, p@K, r@K, success@K or "
                                             "ndcg@K"):
            parse_metric(bad)
    with pytest.raises(ValueError, match="convention must be one of"):
        evaluate({}, {}, convention="official")


def test_one_rule_picks_the_convention_for_the_api_and_the_cli():
    """Issue 40: the Python API and `cqa-search evaluate` default to one convention, the
    protocol's: trec_eval's for a search of the whole archive (or a run), SemEval's for a
    rerank of given candidates; an explicit convention wins over the protocol."""
    from argparse import Namespace

    from cqa_search.cli.evaluate import _protocol
    from cqa_search.evaluation import protocol_convention

    run = {"q": {"a": 1.0, "b": 0.5}}
    qrels = {"q": {"b": 1, "x": 1}, "other": {"y": 1}}
    for rerank in (False, True):
        convention = protocol_convention(rerank)
        args = Namespace(candidates="given.run" if rerank else None, convention=None,
                         metrics=["map"], run=None)
        assert _protocol(args)[0] == convention == ("semeval" if rerank else "trec")
        assert evaluate(run, qrels, metrics=["map"], rerank=rerank).equals(
            evaluate(run, qrels, metrics=["map"], convention=convention))
    # full retrieval: AP over both relevant questions, the unsearched query left out
    assert evaluate(run, qrels, metrics=["map"])["map"].to_dict() == {"q": 0.25}
    # rerank: AP over the relevant candidates given, every judged query counted
    assert evaluate(run, qrels, metrics=["map"], rerank=True)["map"].to_dict() == \
        {"other": 0.0, "q": 0.5}
    assert evaluate(run, qrels, metrics=["map"], rerank=True,
                    convention="trec")["map"].to_dict() == {"q": 0.25}


@pytest.fixture(scope="module")
def semeval_runs(tmp_path_factory, shared_data_session):
    folder = shared_data_session(SEMEVAL)
    out = {}
    for split in ("dev", "test"):
        path = tmp_path_factory.mktemp(split)
        convert_semeval([folder / f"SemEval2016-Task3-CQA-QL-{split}.xml"], path)
        out[split] = (read_run(path / "candidates.run"), read_qrels(path / "qrels.txt"))
    return folder, out


def test_search_engine_order_scores_the_official_figures(semeval_runs):
    _, runs = semeval_runs
    test = summarize(evaluate(*runs["test"], metrics=["map", "mrr", "p@1"], rerank=True),
                     percent=True)
    assert test.round(2).tolist() == [74.75, 83.79, 81.43]
    dev = summarize(evaluate(*runs["dev"], metrics=["map"], rerank=True), percent=True)
    assert round(dev["map"], 2) == 71.35


def test_official_random_baseline_scores_its_official_figures(semeval_runs):
    folder, runs = semeval_runs
    run = {}
    with open(folder / "results" / "subtask_B_baseline_random.txt", encoding="utf-8") as f:
        for line in f:
            qid, doc, _, score, _ = line.rstrip("\n").split("\t")
            run.setdefault(qid, {})[doc] = float(score)
    scores = summarize(evaluate(run, runs["test"][1], metrics=["map", "mrr", "p@1", "p@5"],
                                rerank=True), percent=True)
    # results/subtask_B_baseline_random.txt.score: MAP 0.4698, MRR 50.96, ACC@01 34.29, ACC@05 34.86
    assert scores.round(2).tolist() == [46.98, 50.96, 34.29, 34.86]


def test_trec_convention_equals_pytrec_eval_on_random_runs():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(0)
    measures = {"map": "map", "recip_rank": "mrr", "P_5": "p@5", "P_10": "p@10",
                "ndcg_cut_10": "ndcg@10", "recall_10": "r@10", "success_5": "success@5"}
    for trial in range(300):
        docs = [f"d{i}" for i in range(rng.integers(1, 30))]
        qrels, run = {}, {}
        for q in range(rng.integers(1, 6)):
            judged = rng.choice(docs, size=rng.integers(1, len(docs) + 1), replace=False)
            qrels[f"q{q}"] = {d: int(rng.integers(0, 3)) for d in judged}
            if rng.random() < 0.9:
                retrieved = rng.choice(docs, size=rng.integers(1, len(docs) + 1), replace=False)
                # few distinct scores, so that ties (broken by doc id) are common
                run[f"q{q}"] = {d: float(rng.integers(0, 4)) for d in retrieved}
        expected = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
        ours = evaluate(run, qrels, metrics=list(measures.values()), convention="trec")
        assert sorted(expected) == list(ours.index), trial
        for qid, values in expected.items():
            for measure, name in measures.items():
                assert ours.loc[qid, name] == pytest.approx(values[measure], abs=1e-9), \
                    (trial, qid, measure)


def _tied_runs(rng, n_trials):
    """Random qrels and runs whose scores tie exactly, tie in single precision only
    (1e-12 apart), or tie only when rounded to six decimals."""
    values = [0.25, 0.25 + 1e-12, 0.1234561, 0.1234564, 3.0, 3.0 * (1 + 1e-9), 7.5]
    for _ in range(n_trials):
        docs = [f"d{i}" for i in range(rng.integers(1, 30))]
        qrels, run = {}, {}
        for q in range(rng.integers(1, 6)):
            judged = rng.choice(docs, size=rng.integers(1, len(docs) + 1), replace=False)
            qrels[f"q{q}"] = {d: int(rng.integers(0, 3)) for d in judged}
            retrieved = rng.choice(docs, size=rng.integers(1, len(docs) + 1), replace=False)
            run[f"q{q}"] = {d: float(rng.choice(values)) for d in retrieved}
        yield qrels, run


def test_a_written_run_gives_the_printed_figures_to_pytrec_eval(tmp_path):
    """What ``evaluate --run-out`` promises: pytrec_eval (trec_eval's code) on the file
    gives exactly the figures of the run in memory, ties and near-ties included."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    measures = {"map": "map", "recip_rank": "mrr", "P_5": "p@5", "ndcg_cut_10": "ndcg@10"}
    for trial, (qrels, run) in enumerate(_tied_runs(np.random.default_rng(1), 200)):
        write_run(run, tmp_path / "r.run")
        from_file = read_run(tmp_path / "r.run")
        expected = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(from_file)
        printed = evaluate(run, qrels, metrics=list(measures.values()), convention="trec")
        again = evaluate(from_file, qrels, metrics=list(measures.values()), convention="trec")
        assert printed.equals(again), trial
        for qid, values in expected.items():
            for measure, name in measures.items():
                # the same order: equal up to the last bit of pytrec_eval's arithmetic
                assert printed.loc[qid, name] == pytest.approx(values[measure], abs=1e-12), \
                    (trial, qid, measure)


def test_a_written_rerank_run_keeps_its_ties_in_run_order(tmp_path):
    for trial, (qrels, run) in enumerate(_tied_runs(np.random.default_rng(2), 50)):
        write_run(run, tmp_path / "r.run", convention="semeval")
        printed = evaluate(run, qrels, convention="semeval")
        assert printed.equals(evaluate(read_run(tmp_path / "r.run"), qrels,
                                       convention="semeval")), trial
