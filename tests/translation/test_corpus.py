"""Parallel corpora from an index: pairs, pooling, TextRank, validation."""
import numpy as np
import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.translation import ParallelCorpus, build_parallel_corpus
from cqa_search.translation.corpus import concatenate, similar_question_pairs


def terms(engine, text):
    ids = engine.index.vocab.ids(engine.analyzer.analyze(text))
    return ids[ids >= 0].tolist()


def test_question_answer_pairs_match_the_archive(gap_engine):
    corpus, stats = build_parallel_corpus(gap_engine.view, pooling=False, textrank=False)
    archive = gap_engine.archive
    expected = [(terms(gap_engine, q.text), terms(gap_engine, a)) for q in archive
                for a in q.answers]
    expected = [(s, t) for s, t in expected if s and t]
    assert [corpus.pair(k) for k in range(corpus.n_pairs)] == expected
    assert stats.n_qa_pairs == sum(len(q.answers) for q in archive)
    assert stats.n_pairs == corpus.n_pairs and not stats.pooled
    assert corpus.n_terms == len(gap_engine.index.vocab)


def test_pooling_best_answers_title_body_and_duplicates(gap_engine):
    view = gap_engine.view
    plain, _ = build_parallel_corpus(view, pooling=False, textrank=False)
    pooled, stats = build_parallel_corpus(view, pooling=True, textrank=False)
    n = plain.n_pairs
    assert pooled.n_pairs == 2 * n and stats.pooled
    assert all(pooled.pair(n + k) == plain.pair(k)[::-1] for k in range(n))
    best, stats = build_parallel_corpus(view, answers="best", pooling=False, textrank=False)
    assert stats.n_qa_pairs == sum(q.best_answer is not None for q in gap_engine.archive)
    both, stats = build_parallel_corpus(view, answers=None, title_body=True, duplicates=True,
                                        pooling=False, textrank=False)
    archive = gap_engine.archive
    assert stats.n_title_body_pairs == sum(bool(q.title and q.body) for q in archive)
    assert stats.n_duplicate_pairs == sum(len(q.duplicate_of) for q in archive) > 0
    dup = next(q for q in archive if q.duplicate_of)
    pair = (terms(gap_engine, dup.text), terms(gap_engine, archive.get(dup.duplicate_of[0]).text))
    assert pair in [both.pair(k) for k in range(both.n_pairs)]


def test_similar_question_pairs_are_found_by_their_answers(tmp_path):
    """Jeon et al.: questions answered alike pair up; copies of a question do not."""
    office = "go to the immigration office with your passport and two photos"
    qs = [Question("a", "how to renew my visa", answers=(office,)),
          Question("b", "residence permit extension", answers=(office + " early",)),
          Question("c", "cheap sofa in town", answers=("try the furniture souq",)),
          Question("d", "how to renew my visa", answers=(office,)),  # a copy of a
          Question("e", "no answer here")]
    build_index(qs, tmp_path / "idx")
    view = SearchEngine.open(tmp_path / "idx").view
    pairs = similar_question_pairs(view, k=3, min_similarity=0.5).tolist()
    assert pairs == [[0, 1], [1, 3]]
    assert similar_question_pairs(view, k=3, min_similarity=0.999).tolist() == []
    corpus, stats = build_parallel_corpus(view, answers=None, similar_questions=3,
                                          pooling=False, textrank=False)
    assert stats.n_similar_pairs == 2 and corpus.n_pairs == 2
    assert corpus.pair(0) == (terms_of(view, 0), terms_of(view, 1))
    build_index(qs, tmp_path / "q-only", fields=("question",))
    with pytest.raises(ValueError, match="the index has no answers field"):
        similar_question_pairs(SearchEngine.open(tmp_path / "q-only").view)


def terms_of(view, row):
    return view.index["question"].terms_of(row).tolist()


def test_textrank_shrinks_the_corpus(gap_engine):
    full, s1 = build_parallel_corpus(gap_engine.view, textrank=False)
    ranked, s2 = build_parallel_corpus(gap_engine.view, textrank=True)
    assert s2.tokens_after_textrank < s2.tokens_before_textrank == s1.tokens_before_textrank
    assert len(ranked.source) < len(full.source)


def test_unknown_words_are_dropped_and_empty_pairs_removed(tmp_path):
    qs = [Question("a", "visa office", answers=("zzzunknownword", "office hours")),
          Question("b", "sofa", answers=())]
    path = tmp_path / "idx"
    build_index(qs, path, fields=("question",))
    engine = SearchEngine.open(path)
    # "zzzunknownword" is not in the index (answers were not indexed): that pair is empty
    corpus, stats = build_parallel_corpus(engine.view, pooling=False, textrank=False)
    assert corpus.n_pairs == 1 and stats.n_dropped_empty == 1
    assert corpus.pair(0) == (terms(engine, "visa office"), terms(engine, "office"))
    with pytest.raises(ValueError, match="no parallel pairs: the archive has no best answers"):
        build_parallel_corpus(engine.view, answers="best")
    with pytest.raises(ValueError, match=r"answers must be one of \{'all', 'best', None\}; "
                                         r"got 'some'"):
        build_parallel_corpus(engine.view, answers="some")


def test_an_archive_without_answers_gives_its_title_body_pairs_with_a_warning(tmp_path):
    qs = [Question("a", "renew visa", "how do I renew my residence visa"),
          Question("b", "cheap sofa", "where can I buy a cheap sofa"),
          Question("c", "no body here")]
    path = tmp_path / "idx"
    build_index(qs, path)
    engine = SearchEngine.open(path)
    with pytest.warns(UserWarning, match="the archive has no answers: the translation model "
                                         "learns from its title-body pairs instead"):
        corpus, stats = build_parallel_corpus(engine.view, pooling=False, textrank=False)
    expected, _ = build_parallel_corpus(engine.view, answers=None, title_body=True,
                                        pooling=False, textrank=False)
    assert stats.n_title_body_pairs == 2 and stats.n_qa_pairs == 0
    assert [corpus.pair(k) for k in range(corpus.n_pairs)] == \
        [expected.pair(k) for k in range(expected.n_pairs)]
    assert corpus.pair(0) == (terms(engine, "renew visa"),
                              terms(engine, "how do I renew my residence visa"))
    with pytest.warns(UserWarning, match="has no best answers"):
        build_parallel_corpus(engine.view, answers="best", textrank=False)
    # titles only: nothing to pair
    bare = tmp_path / "bare"
    build_index([Question("a", "renew visa"), Question("b", "cheap sofa")], bare)
    with pytest.raises(ValueError, match="the archive has no answers and no question with "
                                         "both a title and a body"):
        build_parallel_corpus(SearchEngine.open(bare).view)


def test_corpus_validation_and_helpers():
    c = ParallelCorpus.from_pairs([([0, 1], [2]), ([1], [2, 3]), ([3], [0])])
    assert c.select([2, 0]).pair(0) == ([3], [0]) and c.head(1).n_pairs == 1
    assert c.select(np.array([True, False, True])).n_pairs == 2
    assert concatenate([c, c.swapped()]).pair(3) == ([2], [0, 1])
    with pytest.raises(ValueError, match=r"term ids must be in \[0, n_terms=2\)"):
        ParallelCorpus.from_pairs([([0, 1], [2])], n_terms=2)
    with pytest.raises(ValueError, match="source_offsets must rise from 0"):
        ParallelCorpus(np.array([1]), np.array([0, 2]), np.array([1]), np.array([0, 1]), 3)
