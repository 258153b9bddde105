import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import Archive, Question
from cqa_search.archive import END_OF_DATES, FIRST_DATE, date_seconds
from cqa_search.exceptions import ArchiveError, QueryError
from cqa_search.readers import read_archive


def test_question_normalises_and_validates():
    q = Question(7, "  Title ", None, category=" ", tags=["a"], answers=["x", "y"], best_answer=1)
    assert (q.id, q.title, q.body, q.category, q.tags, q.answers) == ("7", "Title", "", None,
                                                                      ("a",), ("x", "y"))
    assert q.best_answer_text == "y"
    with pytest.raises(ValueError, match="neither a title nor a body"):
        Question("a", " ", "")
    with pytest.raises(ValueError, match="'best_answer' is 2 but question 'a' has 2 answer"):
        Question("a", "t", answers=("x", "y"), best_answer=2)
    with pytest.raises(ValueError, match="field 'answers' must be a list of strings; got str"):
        Question("a", "t", answers="single")
    with pytest.raises(ValueError, match="field 'id' must be a non-empty string"):
        Question("", "t")


@pytest.mark.parametrize("value", [1e30, -1e30, 2 ** 63, float("inf"), float("nan"),
                                   END_OF_DATES, FIRST_DATE - 1, 1470152354947,
                                   "99999999999999999999", "9" * 5000,
                                   "0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_a_date_outside_the_calendar_is_refused(value):
    """Issue 43: one such date broke every tag: and date: filter of its index (no int64
    holds it); its record is refused, naming the field."""
    with pytest.raises(ValueError, match=r"^field 'created_at': .* is not a date from "
                                         r"0001-01-01 to 9999-12-31 \(UTC; a number is read"):
        Question("q", "t", extra={"created_at": value})
    with pytest.raises(ValueError, match="^field 'date': "):
        Question.from_dict({"id": "q", "title": "t", "date": value})


@pytest.mark.parametrize("value,seconds", [
    (FIRST_DATE, FIRST_DATE), (END_OF_DATES - 1, END_OF_DATES - 1),
    ("0001-01-01", FIRST_DATE), ("9999-12-31T23:59:59", END_OF_DATES - 1),
    ("2014-01-01T00:00:00Z", 1388534400), (1388534400.9, 1388534400),
    ("²", None), ("²³", None), ("soon", None), ("", None), (True, None), (None, None),
    ([2014], None), ("1e30", None)])
def test_what_is_a_date(value, seconds):
    """Text that is no date (a superscript two is a digit to str.isdigit, not to int)
    is no date, and its question is kept: only a date out of range is refused."""
    assert date_seconds(value) == seconds
    assert Question("q", "t", extra={"date": value}).extra["date"] == value


def test_from_dict_round_trip_keeps_unknown_fields():
    record = {"id": "q1", "title": "T", "body": "B", "category": "C", "tags": ["x"],
              "answers": ["a1", "a2"], "best_answer": 1, "duplicate_of": ["q0"],
              "translations": {"fr": "t"}, "score": 3}
    q = Question.from_dict(record)
    assert q.extra == {"translations": {"fr": "t"}, "score": 3}
    assert q.to_dict() == record
    assert Question.from_dict(q.to_dict()) == q


def test_from_dict_accepts_best_answer_text_and_scalar_lists():
    q = Question.from_dict({"id": "q", "title": "t", "answers": ["a", "b"], "best_answer": "b",
                            "tags": "x|y", "duplicate_of": 5})
    assert (q.best_answer, q.tags, q.duplicate_of) == (1, ("x", "y"), ("5",))
    q = Question.from_dict({"id": "q", "title": "t", "answers": ["a"], "best_answer": "new"})
    assert q.answers == ("new", "a") and q.best_answer == 0
    with pytest.raises(ValueError, match="missing required field 'id'"):
        Question.from_dict({"title": "t"})


def test_archive_rows_and_errors(toy_archive):
    assert len(toy_archive) == 12 and toy_archive.row("t03") == 2
    assert toy_archive.get("t05").category == "Shopping"
    assert toy_archive.rows(["t02", "t01"]).tolist() == [1, 0]
    with pytest.raises(QueryError, match="unknown question id 'nope'"):
        toy_archive.row("nope")
    with pytest.raises(ArchiveError, match="duplicate question id 'a'"):
        Archive([Question("a", "x"), Question("a", "y")])
    with pytest.raises(ArchiveError, match="the archive is empty"):
        Archive([])


def test_archive_jsonl_round_trip(toy_archive, tmp_path):
    toy_archive.to_jsonl(tmp_path / "a.jsonl")
    assert list(read_archive(tmp_path / "a.jsonl")) == list(toy_archive)


@pytest.mark.parametrize("record, message", [
    ({"answers": {"a": "b"}}, "field 'answers' must be a list of strings; got dict"),
    ({"answers": 0}, "field 'answers' must be a list of strings; got int"),
    ({"answers": {"x"}}, "field 'answers' must be a list of strings; got set"),
    ({"tags": {"a": 1}}, "field 'tags' must be a list of strings; got dict"),
    ({"duplicate_of": 1.5}, "field 'duplicate_of' must be an id or a list of ids; got float"),
    ({"duplicate_of": [1.5]}, "field 'duplicate_of' must be a list of strings; got an item of "
                              "type float"),
    ({"id": True}, "field 'id' must be a non-empty string; got True"),
    ({"id": 1e30}, r"field 'id' must be a non-empty string or an integer; got the number 1e\+30"),
    ({"id": 10 ** 4400}, "field 'id' is an integer of more than 4300 digits"),
    ({"title": 0}, "field 'title' must be a string; got int"),
    ({"nested": json.loads("[" * 300 + "]" * 300)},
     "the value of key 'nested': it is nested too deeply"),
    ({"when": {1, 2}}, "the value of key 'when': it cannot be stored as JSON"),
])
def test_from_dict_refuses_what_it_cannot_store(record, message):
    with pytest.raises(ValueError, match=message):
        Question.from_dict({"id": "q", "title": "t", **record})


def test_ids_given_as_integers_and_extra_checks():
    q = Question.from_dict({"id": 12345678901234567890, "title": "t", "duplicate_of": [3, "x"]})
    assert q.id == "12345678901234567890" and q.duplicate_of == ("3", "x")
    assert Question.from_dict({"id": "q", "title": "t", "duplicate_of": " "}).duplicate_of == ()
    with pytest.raises(ValueError, match="field 'extra' must not hold schema field 'title'"):
        Question("q", "t", extra={"title": "other"})


_texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(qid=st.text(min_size=1, max_size=6), title=_texts, body=_texts,
       category=st.one_of(st.none(), _texts), tags=st.lists(_texts, max_size=3),
       answers=st.lists(_texts, max_size=3), best=st.integers(0, 3),
       extra=st.dictionaries(st.sampled_from(["url", "score", "labels"]),
                             st.one_of(st.integers(-5, 5), _texts, st.none()), max_size=2))
def test_a_stored_record_reads_back_as_from_dict_builds_it(qid, title, body, category, tags,
                                                           answers, best, extra):
    """What an index stores reads back (the lean path of a search's hits) as the question
    that was stored, and a record of the wrong shape is refused as from_dict refuses it."""
    import orjson

    record = {"id": qid, "title": title, "body": body, "category": category, "tags": tags,
              "answers": answers, "best_answer": best if best < len(answers) else None,
              **extra}
    try:
        question = Question.from_dict(record)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            Question._stored(record)
        return
    stored = orjson.loads(question.to_json_bytes())
    back = Question._stored(stored)
    assert back == question and dict(back.extra) == dict(question.extra)
    assert back.to_json_bytes() == question.to_json_bytes()
    # a record without an optional key keeps its other fields
    partial = {k: v for k, v in stored.items() if k != "best_answer"}
    assert Question._stored(partial) == Question.from_dict(partial)
    for key, damaged in [("best_answer", len(answers)), ("answers", {"a": "b"}), ("title", 7)]:
        with pytest.raises(ValueError):
            Question._stored({**stored, key: damaged})
