"""Fixtures of the translation tests: a small synthetic Q&A archive with real lexical gaps,
its index, and a translation model fitted on it (once per session)."""
import random

import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.translation import TranslationModel

# Topics: question words and the (different) words their answers use.
TOPICS = [
    ("stuffy nose cold", "steam inhale eucalyptus rest"),
    ("visa renewal residence permit", "immigration office passport sponsor letter"),
    ("cheap sofa furniture", "souq market secondhand shop"),
    ("car battery engine", "garage mechanic jump starter"),
    ("internet explorer browser", "firefox chrome download install"),
    ("bank account salary", "branch manager transfer loan"),
]


def _archive(seed=0, n=60):
    rng = random.Random(seed)
    questions = []
    for i in range(n):
        qwords, awords = TOPICS[i % len(TOPICS)]
        q = qwords.split()
        a = awords.split()
        title = " ".join(rng.sample(q, rng.randint(2, len(q))))
        body = " ".join(rng.choice(q + a[:1]) for _ in range(rng.randint(2, 6)))
        answers = tuple(" ".join(rng.choice(a + q[:1]) for _ in range(rng.randint(3, 8)))
                        for _ in range(rng.randint(0, 3)))
        questions.append(Question(f"q{i}", title, body, category=f"c{i % 3}", answers=answers,
                                  best_answer=0 if answers and i % 2 else None,
                                  duplicate_of=(f"q{i - 6}",) if i >= 6 and i % 5 == 0 else ()))
    return questions


@pytest.fixture(scope="session")
def gap_index(tmp_path_factory):
    """Index of the synthetic archive (tests must not add models to it)."""
    path = tmp_path_factory.mktemp("gap") / "index"
    build_index(_archive(), path)
    return path


@pytest.fixture(scope="session")
def gap_engine(gap_index):
    return SearchEngine.open(gap_index)


@pytest.fixture(scope="session")
def gap_model(gap_engine):
    """A translation model of the synthetic archive (unpruned, no TextRank, fixed EM)."""
    return TranslationModel(textrank=False, max_iter=5, tol=None, min_prob=0.0,
                            title_body=True).fit(gap_engine.view)
