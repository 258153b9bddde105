"""Fixtures of the server tests: an index with a trained ranker, and the toy archive."""
import warnings
from pathlib import Path

import numpy as np
import pytest

from cqa_search import SearchEngine, build_index
from cqa_search.archive import Question
from cqa_search.evaluation import feature_table, read_qrels, read_queries
from cqa_search.exceptions import ConvergenceWarning
from cqa_search.index.models import add_model
from cqa_search.ranking import LinearRanker
from cqa_search.readers import read_archive

pytest.importorskip("fastapi", reason="the server extra is not installed "
                                      "(pip install 'cqa-search[server]')")

TOY_ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "toy_archive.jsonl"
QUERIES = read_queries(TOY_ARCHIVE.parent / "toy_queries.jsonl")
QRELS = read_qrels(TOY_ARCHIVE.parent / "toy_qrels.txt")


def add_ranker(path) -> None:
    """Train a RankSVM ranker on the toy queries and store it in the index at ``path``."""
    engine = SearchEngine.open(path)
    X, qid, docs, names = feature_table(engine, QUERIES, k=None)
    y = np.array([QRELS[q].get(d, 0) >= 1 for q, d in zip(qid, docs)], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ranker = LinearRanker("ranksvm", random_state=0).fit(X, y, qid=qid, feature_names=names)
    add_model(path, "ranker", ranker)


@pytest.fixture(scope="session")
def ranked_index(tmp_path_factory):
    """The toy archive with a trained ranker (tests must not modify it)."""
    path = tmp_path_factory.mktemp("ranked") / "index"
    build_index(TOY_ARCHIVE, path)
    add_ranker(path)
    return path


@pytest.fixture
def toy_questions():
    return list(read_archive(TOY_ARCHIVE))


@pytest.fixture
def extra_question():
    return Question("z1", "Zebra crossing near the visa office",
                    "Is there a zebra crossing in front of the immigration office?",
                    category="Visas", answers=("Yes, a new one.",), best_answer=0)


@pytest.fixture(scope="session")
def train_ranker():
    """:func:`add_ranker`: stores a trained ranker in an index (a new generation)."""
    return add_ranker
