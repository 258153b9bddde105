"""Title completion (issue 40): the archived titles that begin with the words typed, kept
current by live additions, deletions and compaction."""
import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.exceptions import QueryError
from cqa_search.index.live import add_questions, compact, delete_questions
from cqa_search.index.titles import prefix_key, title_key
from cqa_search.query_parser import MAX_QUERY_CHARS


def _titles(engine, text, k=5):
    return [(c.doc_id, c.title) for c in engine.complete(text, k=k)]


@pytest.fixture
def index(tmp_path):
    path = tmp_path / "idx"
    build_index([
        Question("a", "How do I renew my visa?", answers=("x",)),
        Question("b", "How do I return a sofa?", answers=("x", "y")),
        Question("c", "how do i renew my VISA", answers=()),  # the same title as a's
        Question("d", "How do I re-register a car (quickly)?", answers=("x", "y")),
        Question("e", "Visa fees", answers=("x",)),
        Question("f", "Visas for students", answers=("x",)),
        Question("g", "", body="a question without a title"),
        Question("h", "Straße names in Doha", answers=()),
    ], path)
    return path


def test_titles_that_begin_with_the_words_typed(index):
    engine = SearchEngine.open(index)
    # more answers first, then the shorter title; a title several questions share once
    assert _titles(engine, "how do i re") == [
        ("b", "How do I return a sofa?"), ("d", "How do I re-register a car (quickly)?"),
        ("a", "How do I renew my visa?")]
    assert _titles(engine, "how do i re", k=1) == [("b", "How do I return a sofa?")]
    # case, punctuation and Unicode forms aside; the text is words, never query syntax
    assert _titles(engine, "HOW  do I re-") == _titles(engine, "how do i re ") == [
        ("d", "How do I re-register a car (quickly)?")]
    assert _titles(engine, "strasse") == [("h", "Straße names in Doha")]
    assert _titles(engine, "title:visa") == []  # no title begins "title visa"
    assert _titles(engine, '+"how do i ret') == [("b", "How do I return a sofa?")]
    # a finished word completes only itself
    assert [d for d, _ in _titles(engine, "visa")] == ["e", "f"]
    assert [d for d, _ in _titles(engine, "visa ")] == ["e"]
    assert engine.complete("?!") == engine.complete("") == engine.complete("zzz") == ()
    assert engine.complete("visa")[0].n_answers == 1


def test_bad_input_is_refused(index):
    engine = SearchEngine.open(index)
    for bad in (0, -1, True, 2.5, None):
        with pytest.raises(QueryError, match="k must be a positive integer"):
            engine.complete("visa", k=bad)
    with pytest.raises(QueryError, match="must be a string; got int"):
        engine.complete(42)
    with pytest.raises(QueryError, match="at most"):
        engine.complete("a" * (MAX_QUERY_CHARS + 1))


def test_live_additions_deletions_and_compaction(index):
    add_questions(index, [Question("i", "Visa on arrival", answers=("x", "y", "z"))])
    engine = SearchEngine.open(index)
    assert [d for d, _ in _titles(engine, "visa")] == ["i", "e", "f"]
    delete_questions(index, ["i", "b"])
    engine = SearchEngine.open(index)
    assert [d for d, _ in _titles(engine, "visa")] == ["e", "f"]
    assert [d for d, _ in _titles(engine, "how do i re")] == ["d", "a"]
    delete_questions(index, ["a"])  # c has the same title: it is offered now
    assert [d for d, _ in _titles(SearchEngine.open(index), "how do i ren")] == ["c"]
    compact(index)
    engine = SearchEngine.open(index)
    assert [d for d, _ in _titles(engine, "how do i re")] == ["d", "c"]
    assert [d for d, _ in _titles(engine, "visa")] == ["e", "f"]


def test_keys():
    assert title_key("Ｖｉｓａ　FEES!") == "visa fees"  # NFKC: full-width forms
    assert prefix_key("visa,") == "visa " and prefix_key("visa") == "visa"
    assert prefix_key("") == ""
