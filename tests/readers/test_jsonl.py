"""JSONL reader: the canonical schema, BEIR and pyserini corpora, key mapping, diagnostics,
and the warning for text kept but not indexed."""
import logging

import pytest

from cqa_search.exceptions import ArchiveError
from cqa_search.readers import ReadReport, read_questions


def write(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_beir_and_pyserini_corpora_read_as_they_are(tmp_path, caplog):
    path = write(tmp_path / "corpus.jsonl",
                 '{"_id": "d1", "title": "Renew a visa", "text": "My visa expires soon.", '
                 '"metadata": {"url": "x"}}',
                 '{"id": "d2", "contents": "pyserini keeps its text in contents"}')
    with caplog.at_level(logging.WARNING):
        d1, d2 = read_questions(path)
    assert (d1.id, d1.title, d1.body, dict(d1.extra)) == (
        "d1", "Renew a visa", "My visa expires soon.", {"metadata": {"url": "x"}})
    assert (d2.id, d2.body, dict(d2.extra)) == ("d2", "pyserini keeps its text in contents", {})
    assert caplog.records == []  # every text is indexed: nothing to warn about


def test_canonical_keys_win_over_aliases(tmp_path):
    (q,) = read_questions(write(tmp_path / "a.jsonl",
                                '{"id": "a", "_id": "b", "body": "B", "text": "T"}'))
    assert (q.id, q.body, dict(q.extra)) == ("a", "B", {"_id": "b", "text": "T"})


def test_columns_map_keys(tmp_path):
    path = write(tmp_path / "a.jsonl",
                 '{"qid": 7, "question_text": "How do I descale a kettle?", "body": "old", '
                 '"a1": "Vinegar.", "a2": ["Citric acid.", "Lemon."], "topic": "Home"}')
    (q,) = read_questions(path, columns={"id": "qid", "body": "question_text",
                                         "answers": ["a1", "a2", "a3"], "category": "topic"})
    assert (q.id, q.body, q.category) == ("7", "How do I descale a kettle?", "Home")
    assert q.answers == ("Vinegar.", "Citric acid.", "Lemon.")
    assert dict(q.extra) == {}  # the replaced 'body' is dropped, as a mapped-away CSV column
    with pytest.raises(ArchiveError, match=r"--columns \(columns=\): unknown field 'text'"):
        list(read_questions(path, columns={"text": "question_text"}))
    with pytest.raises(ArchiveError, match=r"columns\['id'\] must be a key name; got \['a'\]"):
        list(read_questions(path, columns={"id": ["a"]}))


def test_text_kept_but_not_indexed_is_warned_once_with_a_count(tmp_path, caplog):
    path = write(tmp_path / "a.jsonl", *(
        f'{{"id": "q{i}", "title": "Title {i}", "body": "B", "date": "Mon, 01 Jan 2024", '
        f'"notes": "this one has a long note that is really text {i}"}}' for i in range(3)))
    with caplog.at_level(logging.WARNING, logger="cqa_search.readers"):
        questions = list(read_questions(path))
    assert len(questions) == 3 and questions[0].extra["notes"].startswith("this one")
    record, undated = caplog.records  # (the date is no date: test_undated_questions_...)
    assert record.getMessage() == (
        f"{path}: key 'notes' holds text in 3 record(s); it is kept with the question but not "
        "indexed (to index it, map it to a field: --columns body=notes, in Python "
        "columns={'body': 'notes'})")


@pytest.mark.parametrize("line, message", [
    ('{"id": "a", "title": "t", "x": ' + "[" * 2000 + "]" * 2000 + "}",
     "JSON nested more than 1,024 levels deep"),
    ('{"id": "a", "title": "t", "x": ' + "[" * 300 + "]" * 300 + "}",
     "the value of key 'x': it is nested too deeply"),
    ('{"id": ' + "1" * 5000 + ', "title": "t"}', "a number too large to read"),
    ('{"id": "a", "title": "cut', r"malformed JSON: Unterminated string starting at \(column 22\)"),
    ('{"id": "a", "title": "\\ud800"}', "unsupported JSON: no low surrogate in string"),
    ('{"title": "t"}', r"missing required field 'id' \(the keys are 'title'; map one with "
                       r"--columns id=KEY"),
])
def test_diagnostics_name_the_line_and_are_skippable(tmp_path, line, message):
    path = write(tmp_path / "a.jsonl", '{"id": "ok", "title": "fine"}', line)
    with pytest.raises(ArchiveError, match=r"a\.jsonl:2: " + message):
        list(read_questions(path))
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["ok"]
    assert report.n_skipped == 1


def test_duplicate_ids_name_their_line(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"id": "a", "title": "x"}', "",
                 '{"id": "a", "title": "y"}')
    with pytest.raises(ArchiveError, match=r"a\.jsonl:3: duplicate question id 'a'"):
        list(read_questions(path))


def test_an_io_error_is_an_archive_error(tmp_path):
    with pytest.raises(ArchiveError, match=r"/proc/self/mem: cannot read: Input/output error"):
        list(read_questions("/proc/self/mem", format="jsonl"))


def test_a_record_too_large_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A line longer than the bound is skipped a chunk at a time (never held in memory)
    and named with its line; the records around it are read."""
    monkeypatch.setattr("cqa_search.readers._base.MAX_RECORD_BYTES", 1000)
    monkeypatch.setattr("cqa_search.readers._base._SKIP_CHUNK", 64)
    path = write(tmp_path / "big.jsonl", '{"id": "a", "title": "visa"}',
                 '{"id": "b", "title": "' + "x" * 5000 + '"}', '{"id": "c", "title": "car"}')
    with pytest.raises(ArchiveError, match=r"big.jsonl:2: record too large: the line has more "
                                           r"than 1,000 bytes"):
        list(read_questions(path))
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["a", "c"]
    assert report.n_skipped == 1
    # exactly the bound is a record (the newline not counted)
    line = '{"id": "d", "title": "' + "y" * (1000 - 24) + '"}'
    assert len(line) == 1000
    assert [q.id for q in read_questions(write(tmp_path / "edge.jsonl", line))] == ["d"]


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16-LE"), ("utf-16-le", "UTF-16-LE"),
                                           ("utf-16-be", "UTF-16-BE"), ("utf-32", "UTF-32-LE"),
                                           ("utf-32-le", "UTF-32-LE"),
                                           ("utf-32-be", "UTF-32-BE")])
def test_utf16_and_utf32_files_are_named(tmp_path, encoding, name):
    path = tmp_path / "a.jsonl"
    path.write_bytes('{"id": "a", "title": "visa"}\n'.encode(encoding))
    with pytest.raises(ArchiveError, match=f"a.jsonl: the file is encoded in {name}, not "
                                           "UTF-8: re-encode it as UTF-8"):
        list(read_questions(path, skip_invalid=True))  # the whole file: never skipped


def test_undated_questions_are_counted_and_warned_once_per_file(tmp_path, caplog):
    """A date the archive gives that is no date ("last tuesday") leaves the question
    undated, out of every date-filtered search: the read says how many, and the first."""
    path = write(tmp_path / "a.jsonl",
                 '{"id": "a", "title": "visa", "creation_date": "last tuesday"}',
                 '{"id": "b", "title": "visa", "creation_date": "2014-03-05"}',
                 '{"id": "c", "title": "visa", "date": "soon", "created_at": null}',
                 '{"id": "d", "title": "visa", "creation_date": "", "date": null}',
                 '{"id": "e", "title": "visa", "creation_date": "never", "date": 1388534400}')
    report = ReadReport()
    with caplog.at_level(logging.WARNING, logger="cqa_search.readers"):
        questions = list(read_questions(path, report=report))
    assert [q.date for q in questions] == [None, "2014-03-05", None, None, "2014-01-01"]
    assert report.n_undated == 2
    (record,) = caplog.records
    assert record.getMessage() == (
        f"{path}: 2 question(s) have a date that is no date (the first: question 'a', "
        "'last tuesday'); they are indexed without a date, and date filters leave them out "
        "(a date is ISO 8601, e.g. 2014-03-05 or 2014-03-05T10:00:00, or seconds since 1970)")
