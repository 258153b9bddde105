"""A LinearRanker stored in a real index: search ranks with it, and the train command."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.cli import train
from cqa_search.training import cv_report
from cqa_search.evaluation import feature_table, read_qrels, read_queries, write_qrels
from cqa_search.exceptions import ConvergenceWarning
from cqa_search.features import GIVEN_FEATURES
from cqa_search.index.models import add_model, model_class
from cqa_search.ranking import LinearRanker
from cqa_search.retrieval import BM25

DATA = Path(__file__).resolve().parents[1] / "data"
QUERIES = read_queries(DATA / "toy_queries.jsonl")
QRELS = read_qrels(DATA / "toy_qrels.txt")


@pytest.fixture
def index(tmp_path, fixtures):
    path = tmp_path / "idx"
    build_index(fixtures / "toy_archive.jsonl", path)
    return path


def table(engine):
    X, qid, docs, names = feature_table(engine, QUERIES, k=None)
    y = np.array([QRELS[q].get(d, 0) >= 1 for q, d in zip(qid, docs)], dtype=float)
    return X, y, qid, names


def test_the_ranker_is_a_registered_model_kind():
    assert model_class("ranker") is LinearRanker


@pytest.mark.parametrize("learner,params", [
    ("ranksvm", None), ("boosting", {"n_thresholds": 4}),
    ("stacking", {"base": ["ranksvm", "boosting", "coordinate-ascent"], "n_splits": 3})])
@pytest.mark.parametrize("mmap", [True, False])
def test_saved_ranker_orders_search_results_with_identical_scores(index, learner, params, mmap):
    engine = SearchEngine.open(index)
    X, y, qid, names = table(engine)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ranker = LinearRanker(learner, params=params, random_state=0).fit(
            X, y, qid=qid, feature_names=names)
    add_model(index, "ranker", ranker)
    reopened = SearchEngine.open(index, mmap=mmap)
    stored = reopened.models["ranker"]
    assert isinstance(stored, LinearRanker) and stored.get_params() == ranker.get_params()
    np.testing.assert_array_equal(stored.predict(X), ranker.predict(X))
    res = reopened.search("car engine will not start", k=None)
    expected = ranker.predict(res.features[:, [res.feature_names.index(f) for f in names]])
    np.testing.assert_array_equal(res.scores, expected)
    assert np.all(np.diff(res.scores) <= 0)
    plain = SearchEngine.open(index, config=SearchConfig(ranker=None)).search(
        "car engine will not start", k=None)
    assert sorted(plain.doc_ids) == sorted(res.doc_ids)


def test_a_ranker_on_a_subset_of_the_features(index):
    engine = SearchEngine.open(index)
    X, y, qid, names = table(engine)
    cols = [names.index("bm25"), names.index("log_length")]
    ranker = LinearRanker("ranksvm").fit(X[:, cols], y, qid=qid,
                                         feature_names=["bm25", "log_length"])
    add_model(index, "ranker", ranker)
    res = SearchEngine.open(index).search("visa", k=None)
    cols = [res.feature_names.index("bm25"), res.feature_names.index("log_length")]
    np.testing.assert_array_equal(res.scores, ranker.predict(res.features[:, cols]))


def test_train_command_stores_a_ranker(index, toy_judged, capsys):
    queries, qrels = toy_judged
    code = train.main([str(index), "--queries", str(queries), "--qrels", str(qrels),
                       "--learner", "coordinate-ascent", "--param", "n_restarts=2",
                       "--no-cv", "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "learner      coordinate-ascent (n_restarts=2)" in out
    assert "queries      6 judged" in out and "training MAP" in out
    assert "-fold MAP   query-grouped" not in out  # no cross-validation chose it
    for name in ("bm25", "lm_jm", "log_length"):
        assert name in out
    assert "given_" not in out  # a full retrieval has no given-run features
    assert "stored as model 'ranker'" in out
    engine = SearchEngine.open(index)
    ranker = engine.models["ranker"]
    assert ranker.learner == "coordinate-ascent" and engine.ranker is ranker
    assert ranker.random_state == 0 and ranker.params == {"n_restarts": 2}
    assert "time         " in out and "cqa-search query" in out


def test_evaluate_and_query_use_the_pipeline_or_the_ranker_asked_for(index, toy_judged,
                                                                     capsys, tmp_path):
    from cqa_search.cli.__main__ import main
    from cqa_search.evaluation import read_run

    queries, qrels = toy_judged
    engine = SearchEngine.open(index, config=SearchConfig(retrieval=BM25()))
    X, y, qid, names = table(engine)  # (features any retrieval model gives)
    add_model(index, "ranker", LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=names))
    args = ["evaluate", str(index), "--queries", str(queries), "--qrels", str(qrels), "-q"]
    assert main(args + ["--run-out", str(tmp_path / "pipeline.run")]) == 0
    assert "bm25f+ranker" in capsys.readouterr().out  # the index's default retrieval model
    assert main(args + ["--ranker", "none", "--model", "bm25", "--run-out",
                        str(tmp_path / "bm25.run")]) == 0
    pipeline, bm25 = read_run(tmp_path / "pipeline.run"), read_run(tmp_path / "bm25.run")
    ranked = SearchEngine.open(index)
    for q in QUERIES:
        expected = ranked.rerank(q["text"], k=100)
        assert list(pipeline[q["id"]]) == [d for d in expected.doc_ids if d != q["id"]]
    assert pipeline != bm25
    assert main(args + ["--ranker", "nope"]) == 1
    assert "this index has no ranker 'nope' (rankers: ranker)" in capsys.readouterr().err
    assert main(["query", str(index), "visa", "--ranker", "none", "--json"]) == 0
    capsys.readouterr()
    # --model SPEC is that model alone (as it says), unless --ranker names one
    assert main(args + ["--model", "bm25", "--run-out", str(tmp_path / "model.run")]) == 0
    out = capsys.readouterr().out
    assert "bm25+ranker" not in out and out.splitlines()[2].split()[0] == "bm25"
    assert read_run(tmp_path / "model.run") == bm25
    assert main(args + ["--model", "bm25", "--ranker", "ranker"]) == 0
    assert "bm25+ranker" in capsys.readouterr().out


def test_train_command_options_and_errors(index, toy_judged, capsys):
    queries, qrels = toy_judged
    base = [str(index), "--queries", str(queries), "--qrels", str(qrels), "-q", "--no-cv"]
    assert train.main(base + ["--learner", "ranksvm", "--exclude", "given_", "lm_",
                              "--name", "svm", "--graded"]) == 0
    out, _ = capsys.readouterr()
    features = [line.split()[0] for line in out.split("weight")[1].splitlines()[1:]
                if line and not line.startswith("(")]
    assert features == ["bm25", "vsm", "answers_bm25", "answers_lm_jm", "bm25f",
                        "category_match", "log_length"]
    assert "cqa-search query" in out and "--ranker svm" in out
    ranker = SearchEngine.open(index).models["svm"]
    assert all(not f.startswith(("given_", "lm_")) for f in ranker.feature_names_in_)

    assert train.main(base + ["--learner", "boosting", "--features", "bm25", "--max-iter",
                              "5", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "dry run" in out and "base score   bm25" in out
    assert re.fullmatch(r"cqa-search: warning: boosting reached max_iter=5 rounds[^\n]*\n", err)
    assert "ranker" not in SearchEngine.open(index).models

    assert train.main(base + ["--learner", "ranksvm", "--param", "gamma=1"]) == 1
    _, err = capsys.readouterr()
    assert "error: params has no option 'gamma' for learner 'ranksvm'" in err
    assert train.main(base + ["--features", "nope"]) == 1
    _, err = capsys.readouterr()
    assert "no feature column is left" in err
    with pytest.raises(SystemExit) as exc:
        train.main(base + ["--learner", "svm"])
    assert exc.value.code == 2
    assert train.main(base[:-1] + ["--cv", "1"]) == 1
    _, err = capsys.readouterr()
    assert "cv must be at least 2 (the folds of the cross-validation" in err


def bm25_judged(index, tmp_path, qrels):
    """The train command's arguments with these qrels of the toy queries."""
    path = tmp_path / "r.txt"
    write_qrels(qrels, path)
    return [str(index), "--queries", str(DATA / "toy_queries.jsonl"), "--qrels", str(path),
            "-k", "10", "--cv", "3", "-q"]


def test_train_stores_nothing_when_nothing_beats_the_retrieval_order(index, tmp_path, capsys,
                                                                      bm25_position_qrels):
    # BM25's first candidate is the relevant one
    argv = bm25_judged(index, tmp_path, bm25_position_qrels(index, 0))
    assert train.main(argv[:-3] + ["--no-cv", "-q"]) == 0  # a ranker stored before
    assert "ranker" in SearchEngine.open(index).models
    capsys.readouterr()
    assert train.main(argv) == 0
    out, _ = capsys.readouterr()
    assert "3-fold MAP   query-grouped cross-validation:" in out
    assert "retrieval order (bm25f)" in out and "100.00" in out
    assert "chosen       the retrieval order (MAP 100.00)" in out
    assert ("warning: the learned ranking (cross-validated MAP" in out
            and "no ranker stored, search keeps the retrieval order (the ranker 'ranker' "
                "stored before is removed)" in out)
    engine = SearchEngine.open(index)
    assert "ranker" not in engine.models and engine.ranker is None


def test_train_stores_a_ranker_that_beats_the_retrieval_order(index, tmp_path, capsys,
                                                               bm25_position_qrels):
    # BM25's last candidate is the relevant one; RankSVM (whose prior is no order) learns
    # to reverse BM25 from 6 queries, where the default anchored at BM25 only moves it
    argv = bm25_judged(index, tmp_path, bm25_position_qrels(index, -1))
    assert train.main(argv + ["--learner", "ranksvm", "--no-all-features"]) == 0
    out, _ = capsys.readouterr()
    assert "best single feature (bm25f)" in out and "stored as model 'ranker'" in out
    chosen = float(out.split("chosen")[1].split("MAP ")[1].split(")")[0])
    baseline = float(out.split("retrieval order (bm25f)")[1].split()[0])
    assert chosen > baseline and "warning" not in out
    engine = SearchEngine.open(index)
    for query in QUERIES:  # the relevant candidate now comes first
        plain = engine.with_config(SearchConfig(ranker=None)).search(query["text"], k=10)
        ranked = engine.search(query["text"], k=len(plain))
        assert ranked.doc_ids[0] == plain.doc_ids[-1]


def test_too_few_queries_for_the_folds_is_a_user_error(index, toy_judged, capsys):
    queries, qrels = toy_judged
    code = train.main([str(index), "--queries", str(queries), "--qrels", str(qrels), "-q",
                       "--cv", "7"])
    _, err = capsys.readouterr()
    assert code == 1 and err == ("cqa-search: error: cross-validation needs at least "
                                 "n_splits=7 queries; got 6 (fewer folds: n_splits, `train "
                                 "--cv N`; none: `train --no-cv`)\n")
    assert "ranker" not in SearchEngine.open(index).models


def test_the_report_says_left_out_only_of_families_the_stored_ranker_lacks():
    from types import SimpleNamespace

    dropped = [{"family": "topics", "features": ["topic_gnmfnc"], "map_with": 0.42,
                "map_without": 0.43, "p_value": 0.81}]
    cv = SimpleNamespace(n_splits=5, baseline="bm25", baseline_score_=0.30, single_feature_="vsm",
                         single_scores_={"vsm": 0.38}, single_score_=0.36,
                         best_params_={"C": 10.0},
                         learned_score_=0.44, best_score_=0.44, chosen_="learned",
                         dropped_=dropped, features_=["bm25", "vsm"])
    text = "\n".join(cv_report(cv))
    assert "left out topics (topic_gnmfnc): MAP 42.00 with it, 43.00 without" in text
    cv.features_ = ["bm25", "vsm", "topic_gnmfnc"]  # the ranker on all features won
    text = "\n".join(cv_report(cv))
    assert "left out" not in text
    assert ("all features beat forward selection (MAP 43.00 without topics): every family is "
            "kept") in text


def test_a_ranker_normalising_per_query_explains_with_feature_values(index, toy_judged,
                                                                     capsys):
    from cqa_search.cli import query
    from cqa_search.presentation import Presenter

    queries, qrels = toy_judged
    assert train.main([str(index), "--queries", str(queries), "--qrels", str(qrels), "-q",
                       "--no-cv", "--normalize", "query"]) == 0
    capsys.readouterr()
    assert query.main([str(index), "renew visa", "-k", "2", "--explain", "--color", "never"]) == 0
    out, err = capsys.readouterr()
    assert "features (the ranker normalises them per query: no contributions): " in out
    assert err == ""
    engine = SearchEngine.open(index)
    assert not engine.ranker.can_explain
    doc = Presenter(engine).results_dict(engine.search("renew visa", k=2), explain=True)
    assert doc["hits"] and all("contributions" not in h and h["features"] for h in doc["hits"])


def test_a_ranker_of_given_scores_never_ranks_a_free_search(index):
    engine = SearchEngine.open(index)
    assert not set(GIVEN_FEATURES) & set(table(engine)[3])  # a full retrieval has none
    given = {q["id"]: {d: float(10 - i) for i, d in enumerate(
        engine.search(q["text"], k=10).doc_ids)} for q in QUERIES}
    X, qid, docs, names = feature_table(engine, QUERIES, candidates=given)
    assert set(GIVEN_FEATURES) <= set(names)
    y = np.array([QRELS[q].get(d, 0) >= 1 for q, d in zip(qid, docs)], dtype=float)
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=names)
    add_model(index, "ranker", ranker)  # stored by hand: no ranker of free searches beside it
    engine = SearchEngine.open(index)
    assert engine.ranker is None and engine.given_ranker is engine.models["ranker"]
    assert engine.ranker_name is None and engine.given_ranker_name == "ranker"
    plain = SearchEngine.open(index, config=SearchConfig(ranker=None))
    found = engine.search("car engine will not start", k=None)
    assert found.doc_ids == plain.search("car engine will not start", k=None).doc_ids
    query = QUERIES[0]
    candidates = given[query["id"]]
    reranked = engine.rerank(query["text"], list(candidates), scores=list(candidates.values()))
    columns = [reranked.feature_names.index(f) for f in names]
    np.testing.assert_array_equal(reranked.scores, ranker.predict(reranked.features[:, columns]))
    add_model(index, "ranker-search", ranker)  # one that reads them too is not used either
    assert SearchEngine.open(index).ranker is None


def test_a_ranker_searches_over_the_retrieval_model_it_was_trained_with(index):
    """`train` records the retrieval model of the candidates it learned from; searches with
    the ranker retrieve with it, whatever the index's default (a ranker fitted outside
    `train` records none: the index's default)."""
    from cqa_search.exceptions import IndexFormatError
    from cqa_search.retrieval import BM25, BM25F
    from cqa_search.training import train_ranker

    train_ranker(index, QUERIES, QRELS, no_cv=True)
    engine = SearchEngine.open(index)
    assert engine.ranker.retrieval_["name"] == "bm25f"
    assert engine.config.retrieval == BM25F(**{k: v for k, v in engine.ranker.retrieval_.items()
                                               if k != "name"})
    default = engine.config.retrieval
    X, y, qid, names = table(engine.with_config(SearchConfig(retrieval=BM25(), ranker=None)))
    assert "bm25f" not in names
    stored = LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=names)
    for spec, expected in [({"name": "bm25", "field": "question", "k1": 1.2, "b": 0.75,
                             "method": "lucene"}, BM25()), (None, default)]:
        stored.retrieval_ = spec
        add_model(index, "ranker", stored)
        assert SearchEngine.open(index).config.retrieval == expected
    stored.retrieval_ = {"name": "bm25", "k1": -1}
    add_model(index, "ranker", stored)
    with pytest.raises(IndexFormatError, match="ranker 'ranker' records a retrieval model "
                                               "that cannot be made"):
        SearchEngine.open(index)
