"""The training library: fit_family and train_ranker, and the commands that print their
reports."""
import re

import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.evaluation import read_qrels, read_queries
from cqa_search.exceptions import ParameterError, QueryError
from cqa_search.ranking import LinearRanker, LinearRankerCV
from cqa_search.training import FitReport, TrainReport, fit_family, train_ranker

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
