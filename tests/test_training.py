"""The training library: fit_family and train_ranker, and the commands that print their
reports."""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.cli.train import next_steps
from cqa_search.evaluation import read_qrels, read_queries, write_qrels, write_run
from cqa_search.exceptions import ParameterError, QueryError
from cqa_search.features import GIVEN_FEATURES, uses_given
from cqa_search.ranking import LinearRanker, LinearRankerCV
from cqa_search.training import (CrossValidation, FitReport, TrainReport, cross_validate_training,
                                 fit_family, train_ranker)

DATA = Path(__file__).resolve().parent / "data"

ANSWERED = [
    Question("q1", "How do I renew my residence visa?", "It expires next month.",
             answers=("thanks for the help", "Go to the immigration office with your passport "
                      "to renew the residence visa.", "Why not ask your company?"),
             extra={"answer_ids": ["q1_C1", "q1_C2", "q1_C3"]}),
    Question("q2", "Cheap second hand sofa", "Where can I buy furniture on a budget?",
             answers=("The Friday market sells used furniture and sofas cheap.", "lol")),
    Question("q3", "Best beach near Doha", answers=("Fuwairit beach, 75 km north of Doha.",)),
]


@pytest.fixture
def index(tmp_path, fixtures):
    path = tmp_path / "idx"
    build_index(fixtures / "toy_archive.jsonl", path)
    return path


@pytest.fixture
def judged(toy_judged):
    """The toy queries (and one nobody judged) and their qrels."""
    queries, qrels = toy_judged
    return read_queries(queries) + [{"id": "unjudged", "text": "a query nobody judged"}], \
        read_qrels(qrels)


def _without_times(text):
    return re.sub(r"time .*", "time", text)


def test_train_ranker_reports_what_the_command_prints(index, judged, toy_judged, capsys):
    queries, qrels = judged
    report = train_ranker(index, queries, qrels, learner="coordinate-ascent",
                          params={"n_restarts": 2}, no_cv=True, dry_run=True)
    assert isinstance(report, TrainReport) and isinstance(report.ranker, LinearRanker)
    assert report.selection is None and report.improves and not report.stored
    assert report.n_queries == 6  # the unjudged query is left out
    assert "ranker" not in SearchEngine.open(index).models
    files = [str(f) for f in toy_judged]
    assert main(["train", str(index), "--queries", files[0], "--qrels", files[1], "-q",
                 "--learner", "coordinate-ascent", "--param", "n_restarts=2", "--no-cv",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert _without_times(out) == _without_times(str(report)) + "\n"
    assert "(dry run: nothing stored)" in out


def test_train_ranker_takes_the_paths_of_the_files(index, toy_judged):
    """As the evaluation functions do: queries, qrels (and candidates) as data or paths."""
    queries, qrels = toy_judged
    options = dict(learner="coordinate-ascent", params={"n_restarts": 2}, no_cv=True,
                   dry_run=True)
    from_files = train_ranker(index, str(queries), Path(qrels), **options)
    from_data = train_ranker(index, read_queries(queries), read_qrels(qrels), **options)
    assert from_files.ranker.coef_.tolist() == from_data.ranker.coef_.tolist()
    with pytest.raises(ParameterError, match="queries must be a path or a list of dicts"):
        train_ranker(index, 42, qrels, **options)


def test_the_thresholds_column_is_a_boosting_rankers_and_explained(index, judged):
    queries, qrels = judged
    linear = str(train_ranker(index, queries, qrels, no_cv=True, dry_run=True, assess=False))
    assert "thresholds" not in linear
    boosted = str(train_ranker(index, queries, qrels, learner="boosting", no_cv=True,
                               params={"n_thresholds": 3}, max_iter=5, dry_run=True,
                               assess=False))
    assert "  thresholds\n" in boosted and "(thresholds: the boosting steps on the feature, " \
        "each adding its own weight when the normalised feature exceeds its threshold)" in boosted


def test_train_ranker_stores_it_unless_it_loses_to_the_retrieval_model(index, judged,
                                                                       bm25_position_qrels):
    queries = judged[0]
    wins = train_ranker(index, queries, bm25_position_qrels(index, -1), k=10, cv=3)
    assert isinstance(wins.selection, LinearRankerCV) and wins.improves and wins.stored
    assert wins.ranker is wins.selection.best_estimator_
    assert SearchEngine.open(index).models["ranker"].get_params() == wins.ranker.get_params()
    assert "stored as model 'ranker' in " + str(index) in str(wins)

    first = bm25_position_qrels(index, 0)
    loses = train_ranker(index, queries, first, k=10, cv=3, dry_run=True)
    assert not loses.improves and not loses.stored and not loses.removed
    assert "ranker" in SearchEngine.open(index).models  # a dry run removes nothing
    loses = train_ranker(index, queries, first, k=10, cv=3)
    assert not loses.improves and not loses.stored and loses.removed
    assert "ranker" not in SearchEngine.open(index).models
    assert str(loses).endswith("(the ranker 'ranker' stored before is removed)")


@pytest.mark.parametrize("options, message", [
    ({"cv": 1}, "cv must be at least 2"),
    ({"early_stopping": True}, "early_stopping goes with no_cv"),
    ({"features": ["nope"]}, "no feature column is left"),
])
def test_train_ranker_errors(index, judged, options, message):
    queries, qrels = judged
    with pytest.raises(QueryError, match=message):
        train_ranker(index, queries, qrels, **options)
    with pytest.raises(QueryError, match="none of the queries is judged"):
        train_ranker(index, queries, {"other": {"t01": 1}})


def test_fit_family_with_parameters_and_inputs(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    build_index(ANSWERED, source)
    build_index(ANSWERED[:2], target)
    report = fit_family(source, "answers", max_iter=2)
    assert isinstance(report, FitReport) and report.name == "answers"
    assert report.model.mode_ == "unsupervised" and report.model.max_iter == 2
    assert str(report).startswith(f"model      answers (answers) stored in {source}\n")
    qrels = {"q1": {"q1_C2": 1, "q1_C1": 0}, "q2": {"0": 1, "1": 0}}
    trained = fit_family(source, "answers", labels=qrels, name="trained",
                         learner_params={"C": 0.5})
    assert trained.model.mode_ == "supervised"
    assert SearchEngine.open(source).models["trained"].learner_params == {"C": 0.5}
    moved = fit_family(target, "answers", ranker_from=source, ranker_name="trained")
    assert moved.model.mode_ == "transferred"
    assert moved.model.ranker_.coef_.tolist() == trained.model.ranker_.coef_.tolist()
    with pytest.raises(ParameterError, match="the answers family has no parameter 'nope'"):
        fit_family(source, "answers", nope=1)
    with pytest.raises(ParameterError, match="unknown model family 'nope'"):
        fit_family(source, "nope")
    with pytest.raises(ParameterError, match="the topics family has no parameter 'labels'"):
        fit_family(source, "topics", labels=qrels)


def test_the_families_that_read_the_translation_model_fit_after_add(tmp_path):
    """`cqa-search add` grows the vocabulary past the stored translation table: multiview's
    ibm1 view and `fit answers --translation` read it extended (a new term translates to
    itself), as the translation features do, instead of failing with an internal error."""
    from cqa_search import add_questions

    path = tmp_path / "idx"
    build_index(ANSWERED, path)
    fit_family(path, "translation", max_iter=2, tol=None)
    add_questions(path, [Question("q4", "zebra crossing rules", "kangaroo",
                                  answers=("zebra stripes",))])
    engine = SearchEngine.open(path)
    assert len(engine.index.vocab) > engine.models["translation"].ibm1_.n_terms_
    with warnings.catch_warnings():  # (four questions: a short factorization)
        warnings.simplefilter("ignore")
        mv = fit_family(path, "multiview", views="ibm1", n_components=2, max_iter=3).model
    assert mv.view_names_ == ["orig", "ibm1"]
    answers = fit_family(path, "answers", translation="translation").model
    assert answers.ibm1_.n_terms_ == len(engine.index.vocab)
    res = SearchEngine.open(path, config=SearchConfig(ranker=None)).search("zebra", k=2)
    assert res.doc_ids[0] == "q4" and np.isfinite(res.features).all()


def test_a_family_with_nothing_on_ray_fits_here_and_says_so(tmp_path, monkeypatch):
    """``ray=`` (``fit --ray``) on a family none of whose steps runs on Ray warns and fits
    in this process, without starting a Ray session; its --help says so."""
    from cqa_search.distributed import fitting
    from cqa_search.index.models import FAMILIES

    def no_ray(*args, **kwargs):
        raise AssertionError("a Ray session was started")

    monkeypatch.setattr(fitting, "ray_fits", no_ray)
    build_index(ANSWERED, tmp_path / "idx")
    with pytest.warns(UserWarning, match="nothing of the multiview family runs on Ray: it is "
                                         "fitted in this process"):
        report = fit_family(tmp_path / "idx", "multiview", views="", ray="local",
                            n_components=2, max_iter=2)
    assert report.name in SearchEngine.open(tmp_path / "idx").models
    assert [name for name, family in FAMILIES.items() if family.on_ray] == \
        ["translation", "topics", "answers"]


def _scores_of(ranker, results):
    """What ``ranker`` gives the hits of ``results`` (from their feature columns)."""
    columns = [results.feature_names.index(f) for f in ranker.feature_names_in_]
    return ranker.predict(results.features[:, columns])


def test_a_ranker_of_given_scores_gets_one_for_free_searches_beside_it(
        index, judged, bm25_position_qrels, given_run):
    queries, qrels = judged[0], bm25_position_qrels(index, -1)
    run = given_run(qrels)
    report = train_ranker(index, queries, qrels, run, no_cv=True)
    assert uses_given(report.ranker) and report.stored and not report.search_removed
    search = report.search
    assert search.name == "ranker-search" and search.stored and search.selection is None
    assert list(search.ranker.feature_names_in_) == [
        f for f in report.ranker.feature_names_in_ if f not in GIVEN_FEATURES]
    text = str(report)
    assert f"stored as model 'ranker' in {index}: it ranks candidates given with their " \
           "scores" in text and "cqa-search" not in text  # the command says its commands
    assert any("--candidates RUN" in line for line in next_steps(report))
    assert "free searches have no given-run features (given_score, given_rrank)" in text
    assert f"stored as model 'ranker-search' in {index}: free searches now rank with it" in text

    engine = SearchEngine.open(index)
    assert engine.ranker is engine.models["ranker-search"] and engine.ranker_name == "ranker-search"
    assert engine.given_ranker is engine.models["ranker"] and engine.given_ranker_name == "ranker"
    found = engine.search("car engine will not start", k=None)
    assert len(found) > 1
    np.testing.assert_array_equal(found.scores, _scores_of(engine.ranker, found))
    for hit in found:  # no constant contribution of features a free search does not have
        assert not set(GIVEN_FEATURES) & set(engine.ranker.explain(hit.features))
    assert engine.similar("t07", k=3).scores.tolist() == \
        _scores_of(engine.ranker, engine.similar("t07", k=3)).tolist()
    query = queries[0]
    given = run[query["id"]]
    with_scores = engine.rerank(query["text"], list(given), scores=list(given.values()))
    np.testing.assert_array_equal(with_scores.scores, _scores_of(engine.given_ranker, with_scores))
    without = engine.rerank(query["text"], list(given))  # no given scores: a free ranking
    np.testing.assert_array_equal(without.scores, _scores_of(engine.ranker, without))

    again = train_ranker(index, queries, qrels, no_cv=True)  # full retrieval: one ranker
    assert again.search is None and again.search_removed
    assert str(again).endswith("(the ranker 'ranker-search' stored before for free searches "
                               "is removed)")
    engine = SearchEngine.open(index)
    assert "ranker-search" not in engine.models
    assert engine.ranker is engine.given_ranker is engine.models["ranker"]


def test_the_ranker_of_free_searches_also_reranks_when_it_alone_wins(
        index, judged, bm25_position_qrels, given_run):
    # the given order is perfect (nothing beats it), BM25's is reversed (a ranker beats it)
    queries, qrels = judged[0], bm25_position_qrels(index, -1)
    train_ranker(index, queries, qrels, no_cv=True)  # a ranker stored before
    report = train_ranker(index, queries, qrels, given_run(qrels), cv=3)
    assert not report.improves and not report.stored and report.removed
    assert report.selection.baseline == "given_rrank" and uses_given(report.ranker)
    assert report.search.improves and report.search.stored
    assert report.search.selection.baseline == "bm25f"  # the index's retrieval model
    text = str(report)
    assert "no ranker stored for candidates given with scores (the ranker 'ranker' stored " \
           "before is removed)" in text
    assert "stored as model 'ranker-search' in " + str(index) + ": free searches and " \
           "reranks now rank with it" in text
    engine = SearchEngine.open(index)
    assert "ranker" not in engine.models
    assert engine.ranker is engine.given_ranker is engine.models["ranker-search"]


def test_a_ranker_of_the_given_run_features_alone_leaves_free_searches_alone(
        index, judged, bm25_position_qrels, given_run, tmp_path, capsys):
    queries, qrels = judged[0], bm25_position_qrels(index, -1)
    report = train_ranker(index, queries, qrels, given_run(qrels), features=["given_"],
                          no_cv=True, name="svm")
    assert report.stored and report.search is None
    assert "free searches keep the retrieval order: the ranker reads no feature but the " \
           "given-run ones, which they do not have" in str(report)
    engine = SearchEngine.open(index, config=SearchConfig(ranker="svm"))
    assert engine.ranker is None and engine.given_ranker is engine.models["svm"]
    assert main(["query", str(index), "visa", "--ranker", "svm"]) == 1
    assert "error: ranker 'svm' reads the given-run features (given_score, given_rrank), " \
           "which only candidates given with scores have (`evaluate --candidates RUN`), and " \
           "this index has no 'svm-search' for free searches" in capsys.readouterr().err
    assert main(["info", str(index)]) == 0
    assert "ranks candidates given with their scores (free searches: the retrieval order)" \
        in capsys.readouterr().out


def test_train_with_candidates_from_the_command_line(index, judged, bm25_position_qrels,
                                                      given_run, tmp_path, capsys):
    queries, qrels = judged[0], bm25_position_qrels(index, -1)
    write_qrels(qrels, tmp_path / "qrels.txt")
    write_run(given_run(qrels), tmp_path / "given.run")
    files = ["--queries", str(DATA / "toy_queries.jsonl"), "--qrels", str(tmp_path / "qrels.txt")]
    assert main(["train", str(index), *files, "--candidates", str(tmp_path / "given.run"),
                 "--no-cv", "-q"]) == 0
    out = capsys.readouterr().out
    assert "stored as model 'ranker-search'" in out and "free searches now rank with it" in out
    assert f"evaluate it:      cqa-search evaluate {index} --candidates RUN" in out
    assert f"search with it:   cqa-search query {index} \"your question\"" in out

    assert main(["query", str(index), "car engine will not start", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "score = " in out and "given_" not in out
    assert main(["query", str(index), "car engine will not start", "--explain", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranker = doc["ranking"]["ranker"]
    assert ranker["name"] == "ranker-search" and not set(GIVEN_FEATURES) & set(ranker["features"])
    assert doc["hits"] and all(not set(GIVEN_FEATURES) & set(h["contributions"])
                               for h in doc["hits"])

    evaluate = ["evaluate", str(index), *files, "-q"]
    assert main(evaluate + ["--candidates", str(tmp_path / "given.run")]) == 0
    assert "bm25f+ranker " in capsys.readouterr().out  # the ranker of given scores reranks
    assert main(evaluate) == 0
    assert "bm25f+ranker-search " in capsys.readouterr().out
    assert main(["info", str(index)]) == 0
    assert "ranks candidates given with their scores (free searches: ranker-search)" \
        in capsys.readouterr().out
    assert main(["export-ranker", str(index)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["candidates"].startswith("cqa-search ranks candidates given with their "
                                             "scores with it")
    assert exported["candidates"].endswith("its free searches use the ranker 'ranker-search'")
    assert main(["export-ranker", str(index), "--name", "ranker-search"]) == 0
    assert "reranks the top n_candidates" in capsys.readouterr().out


# -- the hybrid first stage: train chooses its weight and stores it with the ranker ---------
@pytest.fixture(scope="module")
def demo_judged():
    from cqa_search.data import DEMO_QRELS, DEMO_QUERIES, demo_dir, demo_split

    training, _ = demo_split(read_queries(demo_dir() / DEMO_QUERIES))
    return training, read_qrels(demo_dir() / DEMO_QRELS)


def test_train_chooses_the_hybrid_weight_and_stores_it(vectors_copy, demo_judged):
    from cqa_search.evaluation import evaluate, run_queries
    from cqa_search.retrieval.first_stage import WEIGHT_GRID

    queries, qrels = demo_judged
    report = train_ranker(vectors_copy, queries, qrels, cv=3)
    choice = report.hybrid
    assert choice.depth == 100 and [g[0] for g in choice.grid] == list(WEIGHT_GRID)
    # the grid's figures are those of the first stage alone at each a
    engine = SearchEngine.open(vectors_copy, config=SearchConfig(ranker=None))
    a, recall, map_ = choice.grid[3]
    scores = evaluate(run_queries(engine.with_config(SearchConfig(ranker=None, hybrid=a)),
                                  [{**q, "category": None} for q in queries], k=100), qrels,
                      metrics=["map", "r@100"])
    assert recall == pytest.approx(scores["r@100"].mean()) and \
        map_ == pytest.approx(scores["map"].mean())
    best = max(choice.grid, key=lambda g: (g[1], g[2], -g[0]))  # recall, MAP, smaller a
    assert choice.a == best[0]
    assert report.stored and report.selection.baseline == "first_stage"
    stored = SearchEngine.open(vectors_copy)
    assert stored.models["ranker"].hybrid_weight_ == choice.a == stored.hybrid_weight
    assert "first_stage" in stored.feature_names
    text = str(report)
    assert f"first stage  hybrid, a = {choice.a:g}" in text and "first stage order" in text


def test_train_with_a_given_or_no_hybrid_weight(vectors_copy, demo_judged, toy_judged,
                                                capsys):
    queries, qrels = demo_judged
    fixed = train_ranker(vectors_copy, queries, qrels, cv=3, hybrid=0.6)
    assert fixed.hybrid.a == 0.6 and fixed.hybrid.grid == []
    assert SearchEngine.open(vectors_copy).hybrid_weight == 0.6
    off = train_ranker(vectors_copy, queries, qrels, cv=3, hybrid=None)
    assert off.hybrid.a == 0 and "hybrid off" in str(off)
    engine = SearchEngine.open(vectors_copy)
    assert engine.models["ranker"].hybrid_weight_ == 0 and engine.hybrid_weight == 0
    with pytest.raises(QueryError, match="hybrid must be 'auto', None or a number"):
        train_ranker(vectors_copy, queries, qrels, hybrid=1.5)
    with pytest.raises(QueryError, match="a training on given candidates"):
        train_ranker(vectors_copy, queries, qrels, {"dq01": {"health-001": 1.0}}, hybrid=0.3)
    files = [str(f) for f in toy_judged]
    with pytest.raises(SystemExit):
        main(["train", str(vectors_copy), "--queries", files[0], "--qrels", files[1],
              "--hybrid", "lots"])
    assert "expected auto, none or a number in [0, 1]; got 'lots'" in capsys.readouterr().err


def test_the_first_stage_order_is_kept_when_no_ranker_beats_it(vectors_copy, demo_judged):
    """When cross-validation finds no learned ranker better than the first stage's order,
    that order is stored (with the chosen a), so searches keep what train measured."""
    queries, _ = demo_judged
    engine = SearchEngine.open(vectors_copy, config=SearchConfig(ranker=None, hybrid=0.5))
    qrels = {}
    for q in queries:  # the first stage's own top 3 are the relevant questions
        top = engine.search(q["text"], k=3).doc_ids
        qrels[q["id"]] = {d: 1 for d in top}
    report = train_ranker(vectors_copy, queries, qrels, cv=3, hybrid=0.5)
    assert not report.improves and report.stored
    assert "stored as model 'ranker'" in str(report) and "a = 0.5" in str(report)
    stored = SearchEngine.open(vectors_copy)
    assert stored.hybrid_weight == 0.5
    assert list(stored.models["ranker"].feature_names_in_) == ["first_stage"]
    for q in queries[:5]:
        assert stored.search(q["text"], k=3).doc_ids == engine.search(q["text"], k=3).doc_ids


# -- cross-validation of a whole training --------------------------------------------------
def test_cross_validation_scores_each_fold_as_train_ranker_would(vectors_index, demo_judged,
                                                                 tmp_path):
    """Oracle: each fold's held-out ranking is what search returns after `train_ranker` on
    that fold's training queries (the same first stage, ranker and stored order)."""
    import shutil

    from cqa_search.evaluation import run_queries

    queries, qrels = demo_judged
    cv = cross_validate_training(vectors_index, queries, qrels, folds=3, cv=3)
    assert isinstance(cv, CrossValidation) and len(cv.folds) == 3
    assert sorted(cv.run) == sorted(q["id"] for q in queries) == list(cv.metrics.index)
    for fold in cv.folds:
        copy = tmp_path / fold.test_ids[0]
        shutil.copytree(vectors_index, copy)
        train = [q for q in queries if q["id"] in fold.train_ids]
        report = train_ranker(copy, train, qrels, cv=3, assess=False)
        assert report.hybrid.a == fold.fitted.hybrid.a
        assert report.stored == fold.fitted.kept
        np.testing.assert_array_equal(report.ranker.coef_, fold.fitted.ranker.coef_)
        held = [{**q, "category": None} for q in queries if q["id"] in fold.test_ids]
        # k=99: run_queries retrieves one more (a query may be archived), so the ranker
        # reorders the same 100 candidates as the training's table
        run = run_queries(SearchEngine.open(copy), held, k=99)
        for q in fold.test_ids:
            ours = sorted(cv.run[q].items(), key=lambda x: -x[1])[:99]
            assert list(run[q]) == [d for d, _ in ours]
            np.testing.assert_allclose(list(run[q].values()), [s for _, s in ours], rtol=1e-9)
    mean, low, high = cv.gain("retrieval")
    assert low <= mean <= high
    assert mean == pytest.approx(cv.metrics["map"].mean() - cv.retrieval["map"].mean())
    text = "\n".join(cv.lines())
    assert "on new queries: MAP by 3-fold cross-validation" in text
    assert "first stage order (first_stage)" in text and "retrieval model alone (bm25f)" in text
    assert text.count("  fold ") == 3


def test_cross_validation_on_one_given_split_and_from_its_cache(vectors_index, demo_judged,
                                                                tmp_path, monkeypatch):
    queries, qrels = demo_judged
    ids = sorted(q["id"] for q in queries)
    split = [(ids[:20], ids[20:])]
    first = cross_validate_training(vectors_index, queries, qrels, folds=split, cv=3,
                                    cache=tmp_path / "cache")
    assert sorted(first.run) == ids[20:] and first.folds[0].train_ids == ids[:20]
    import cqa_search.training_data as td

    def no_search(*args, **kwargs):
        raise AssertionError("the cache was not read")

    monkeypatch.setattr(td, "feature_table", no_search)
    monkeypatch.setattr(td, "run_queries", no_search)
    again = cross_validate_training(vectors_index, queries, qrels, folds=split, cv=3,
                                    cache=tmp_path / "cache")
    assert again.run == first.run and again.metrics.equals(first.metrics)
    with pytest.raises(QueryError, match="both a training and a held-out query"):
        cross_validate_training(vectors_index, queries, qrels, folds=[(ids, ids[:3])], cv=3,
                                cache=tmp_path / "cache")
    with pytest.raises(QueryError, match="cross-validation needs 2 to 28 folds"):
        cross_validate_training(vectors_index, queries, qrels, folds=29,
                                cache=tmp_path / "cache")


def test_train_reports_what_to_expect_on_new_queries(index, judged, bm25_position_qrels,
                                                     capsys, tmp_path):
    queries = judged[0]
    qrels = bm25_position_qrels(index, -1)
    report = train_ranker(index, queries, qrels, k=10, cv=3, dry_run=True)
    cv = report.assessment
    assert len(cv.folds) == 3 and len(cv.metrics) == 6
    text = str(report)
    mean, low, high = cv.gain("baseline")
    assert f"  {'retrieval order (bm25f)':<34} {100 * cv.baseline['map'].mean():6.2f}  " \
           f"trained search {100 * mean:+.2f} (95% interval {100 * low:+.2f} to " \
           f"{100 * high:+.2f})" in text
    small = train_ranker(index, queries[:2], qrels, k=10, cv=3, dry_run=True,
                         no_cv=True)
    assert small.assessment is None and "on new queries: not assessed (" in str(small)
    write_qrels(qrels, tmp_path / "qrels.txt")
    assert main(["train", str(index), "--queries", str(DATA / "toy_queries.jsonl"), "--qrels",
                 str(tmp_path / "qrels.txt"), "-k", "10", "--cv", "3", "--no-assess",
                 "--dry-run", "-q"]) == 0
    assert "on new queries" not in capsys.readouterr().out


def test_a_training_that_loses_on_held_out_queries_is_not_stored(index, judged,
                                                                  bm25_position_qrels,
                                                                  monkeypatch):
    """The cross-validation on all the queries chooses a learned ranking; when the
    assessment of the whole training says it does not beat the retrieval order on
    held-out queries, that order is kept and the report says why."""
    queries = judged[0]
    qrels = bm25_position_qrels(index, -1)  # a learned ranking wins: see the test above
    train_ranker(index, queries, qrels, k=10, cv=3, no_cv=True, assess=False)  # stored
    assert "ranker" in SearchEngine.open(index).models
    monkeypatch.setattr(CrossValidation, "gain", lambda self, against="baseline", **kw:
                        (-0.01, -0.05, 0.03))
    report = train_ranker(index, queries, qrels, k=10, cv=3)
    assert report.selection.improves_ and not report.improves
    assert report.overruled == (-0.01, -0.05, 0.03)
    assert not report.stored and report.removed
    assert "ranker" not in SearchEngine.open(index).models
    text = str(report)
    assert ("warning: the learned ranking beat the retrieval order on the cross-validation "
            "that chose it, but the whole training, cross-validated, does not on new queries "
            "(MAP -1.00, 95% interval -5.00 to +3.00): no ranker stored, search keeps the "
            "retrieval order") in text
    order = report.selection.baseline
    assert f"on new queries the trained search is not better than the retrieval order " \
           f"({order})" in text
    assert list(report.ranker.feature_names_in_) == [order]
    assert report.ranker.retrieval_ == report.selection.best_estimator_.retrieval_ is not None


@pytest.mark.parametrize("family, first, second, option", [
    ("topics", {"n_shared": 2, "n_category": 1, "max_iter": 5}, {"model": "nmf"},
     None),  # topic_nmf beside topic_gnmfnc: its own feature already
    ("topics", {"model": "nmf", "n_shared": 2, "max_iter": 5},
     {"model": "nmf", "n_shared": 3}, "the feature_name parameter, `cqa-search fit ... "
                                      "--feature-name`"),
    ("multiview", {"n_components": 2, "max_iter": 3, "views": ""},
     {"n_components": 3, "views": ""},
     "the feature_prefix parameter, `cqa-search fit ... --feature-prefix`"),
    ("translation", {"max_iter": 1}, {"max_iter": 2},
     "the feature_prefix parameter, `cqa-search fit ... --feature-prefix`"),
    ("embeddings", {"dim": 4, "min_count": 1, "neighbours": 3}, {"dim": 5},
     "the feature_prefix parameter, `cqa-search fit ... --feature-prefix`"),
])
def test_a_second_model_of_a_family_is_refused_before_its_fit(index, monkeypatch, family,
                                                               first, second, option):
    """Issue 40: the refusal came after the whole fit (46 s) and named a parameter the
    family's options lacked; now it comes first and names the option that works."""
    from cqa_search.index.models import FAMILIES, model_class

    fit_family(index, family, **first)
    cls = model_class(FAMILIES[family].kind)

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the check")

    monkeypatch.setattr(cls, "fit", no_fit)
    if option is None:
        with pytest.raises(AssertionError, match="fitted before the check"):
            fit_family(index, family, name="second", **second)
        return
    with pytest.raises(ParameterError, match=re.escape(option)) as refused:
        fit_family(index, family, name="second", **second)
    assert "which the stored model" in str(refused.value)
    if family == "multiview":  # with its own prefix it is fitted (and stored)
        monkeypatch.undo()
        fit_family(index, family, name="second", feature_prefix="mv3", **second)
        assert "mv3_orig" in SearchEngine.open(index).feature_names


def test_word_vectors_of_two_methods_in_one_index(index, capsys):
    """Issue 40: word2vec beside PPMI-SVD, by the command line: the second needs its own
    feature prefix, is refused before its fit without one, and with one both are stored,
    each giving its features as it gives them alone."""
    from cqa_search.index.models import remove_model

    cli = main
    common = ["--dim", "6", "--min-count", "1", "--neighbours", "3", "-q"]
    assert cli(["fit", str(index), "embeddings", *common]) == 0
    capsys.readouterr()
    assert cli(["fit", str(index), "embeddings", "--name", "w2v", "--method", "word2vec",
                "--epochs", "2", *common]) == 1
    err = capsys.readouterr().err
    assert "store it as 'embeddings' (--name embeddings) to replace that one, or give its " \
           "features other names (the feature_prefix parameter, `cqa-search fit ... " \
           "--feature-prefix`)" in err and "fitting" not in err
    assert cli(["fit", str(index), "embeddings", "--name", "w2v", "--method", "word2vec",
                "--epochs", "2", "--feature-prefix", "w2v", *common]) == 0
    assert cli(["fit", str(index), "embeddings", "--name", "bad", "--feature-prefix",
                "2-x", *common]) == 1
    assert "feature_prefix must be {None} or letters, digits and '_' (a letter first); " \
           "got '2-x'" in capsys.readouterr().err
    both = SearchEngine.open(index)
    assert {"emb_sif", "softcos_title", "w2v_emb_sif", "w2v_softcos_title",
            "w2v_field_title_bm25"} <= set(both.feature_names)
    assert both.models["w2v"].method == "word2vec"
    ids = ["t01", "t02", "t04", "t07", "t11"]
    text = "renew my visa quickly"
    together = both.rerank(text, ids).to_dataframe().set_index("doc_id")
    for name, prefix in (("embeddings", ""), ("w2v", "w2v_")):
        other = "w2v" if name == "embeddings" else "embeddings"
        alone_path = index.parent / f"alone-{name}"
        shutil.copytree(index, alone_path)
        remove_model(alone_path, other)
        alone = SearchEngine.open(alone_path).rerank(text, ids).to_dataframe().set_index(
            "doc_id")
        columns = [f"{prefix}{n}" for n in ("emb_sif", "emb_mean", "softcos_question",
                                            "field_title_bm25")]
        assert set(columns) <= set(alone.columns)
        np.testing.assert_allclose(together.loc[ids, columns], alone.loc[ids, columns])
    assert not np.allclose(together["emb_sif"], together["w2v_emb_sif"])
