"""The training library: fit_family and train_ranker, and the commands that print their
reports."""
import json
import re

import pytest

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.exceptions import ParameterError, QueryError
from cqa_search.ranking import LinearRanker, LinearRankerCV
from cqa_search.training import FitReport, TrainReport, fit_family, train_ranker

QUERIES = [
    {"id": "v1", "text": "which office renews a residence visa"},
    {"id": "v2", "text": "my wife has a family visa, can she work"},
    {"id": "s1", "text": "cheap sofa and furniture shops"},
    {"id": "s2", "text": "where to buy a laptop"},
    {"id": "c1", "text": "the car engine will not start in the cold morning"},
    {"id": "c2", "text": "how do I transfer my car to the buyer"},
    {"id": "unjudged", "text": "a query nobody judged"},
]
ANSWERED = [
    Question("q1", "How do I renew my residence visa?", "It expires next month.",
             answers=("thanks for the help", "Go to the immigration office with your passport "
                      "to renew the residence visa.", "Why not ask your company?"),
             extra={"answer_ids": ["q1_C1", "q1_C2", "q1_C3"]}),
    Question("q2", "Cheap second hand sofa", "Where can I buy furniture on a budget?",
             answers=("The Friday market sells used furniture and sofas cheap.", "lol")),
    Question("q3", "Best beach near Doha", answers=("Fuwairit beach, 75 km north of Doha.",)),
]
QRELS = {"v1": {"t01": 2, "t02": 1}, "v2": {"t03": 1}, "s1": {"t04": 1, "t06": 1},
         "s2": {"t05": 1}, "c1": {"t07": 1, "t08": 2}, "c2": {"t09": 1}}


@pytest.fixture
def index(tmp_path, fixtures):
    path = tmp_path / "idx"
    build_index(fixtures / "toy_archive.jsonl", path)
    return path


def _files(tmp_path, queries, qrels):
    q, r = tmp_path / "queries.jsonl", tmp_path / "qrels.txt"
    q.write_text("".join(json.dumps(x) + "\n" for x in queries))
    r.write_text("".join(f"{qid} 0 {d} {g}\n" for qid, docs in qrels.items()
                         for d, g in docs.items()))
    return str(q), str(r)


def _without_times(text):
    return re.sub(r"time .*", "time", text)


def test_train_ranker_reports_what_the_command_prints(index, tmp_path, capsys):
    report = train_ranker(index, QUERIES, QRELS, learner="coordinate-ascent",
                          params={"n_restarts": 2}, no_cv=True, dry_run=True)
    assert isinstance(report, TrainReport) and isinstance(report.ranker, LinearRanker)
    assert report.selection is None and report.improves and not report.stored
    assert report.n_queries == 6  # the unjudged query is left out
    assert "ranker" not in SearchEngine.open(index).models
    queries, qrels = _files(tmp_path, QUERIES, QRELS)
    assert main(["train", str(index), "--queries", queries, "--qrels", qrels, "-q",
                 "--learner", "coordinate-ascent", "--param", "n_restarts=2", "--no-cv",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert _without_times(out) == _without_times(str(report)) + "\n"
    assert "(dry run: nothing stored)" in out


def _bm25_qrels(index, position):
    """Qrels making the candidate at ``position`` of each query's BM25 top 10 relevant."""
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    qrels = {}
    for query in QUERIES:
        ranked = engine.search(query["text"], k=10).doc_ids
        qrels[query["id"]] = {d: int(i == position % len(ranked)) for i, d in enumerate(ranked)}
    return qrels


def test_train_ranker_stores_it_unless_it_loses_to_the_retrieval_model(index):
    wins = train_ranker(index, QUERIES, _bm25_qrels(index, -1), k=10, cv=3)
    assert isinstance(wins.selection, LinearRankerCV) and wins.improves and wins.stored
    assert wins.ranker is wins.selection.best_estimator_
    assert SearchEngine.open(index).models["ranker"].get_params() == wins.ranker.get_params()
    assert "stored as model 'ranker' in " + str(index) in str(wins)

    loses = train_ranker(index, QUERIES, _bm25_qrels(index, 0), k=10, cv=3, dry_run=True)
    assert not loses.improves and not loses.stored and not loses.removed
    assert "ranker" in SearchEngine.open(index).models  # a dry run removes nothing
    loses = train_ranker(index, QUERIES, _bm25_qrels(index, 0), k=10, cv=3)
    assert not loses.improves and not loses.stored and loses.removed
    assert "ranker" not in SearchEngine.open(index).models
    assert str(loses).endswith("(the ranker 'ranker' stored before is removed)")


@pytest.mark.parametrize("options, message", [
    ({"cv": 1}, "cv must be at least 2"),
    ({"early_stopping": True}, "early_stopping goes with no_cv"),
    ({"features": ["nope"]}, "no feature column is left"),
])
def test_train_ranker_errors(index, options, message):
    with pytest.raises(QueryError, match=message):
        train_ranker(index, QUERIES, QRELS, **options)
    with pytest.raises(QueryError, match="none of the queries is judged"):
        train_ranker(index, QUERIES, {"other": {"t01": 1}})


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
