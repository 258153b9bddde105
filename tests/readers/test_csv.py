"""CSV/TSV reader: column rules, lists, ids, line numbers, errors, the derived SemEval CSV."""
import pytest

from cqa_search.exceptions import ArchiveError
from cqa_search.readers import ReadReport, read_questions
from cqa_search.readers import csv as csv_reader


def test_default_columns(fixtures):
    questions = list(read_questions(fixtures / "csv" / "sample.csv"))
    assert [q.id for q in questions] == ["c1", "c2", "c3", "c4"]
    kettle, herbs, body_only, title_only = questions
    assert kettle.title == "How do I descale a kettle?" and kettle.category == "Home"
    assert kettle.tags == ("kitchen", "cleaning")
    # answer, answer1, answer2 in that order, one answer per non-empty cell.
    assert kettle.answers == ("Boil vinegar in it.", "Use citric acid.")
    assert kettle.best_answer == 1 and kettle.best_answer_text == "Use citric acid."
    assert kettle.extra == {"source": "forum"}
    assert herbs.title == 'Best way to store "fresh" herbs?'
    assert herbs.body == "In a jar of water,\nlike flowers."  # quoted multi-line cell
    assert herbs.best_answer is None and herbs.extra == {"source": ""}  # empty cell is empty
    assert body_only.title == "" and body_only.category is None and body_only.tags == ()
    # A best answer given as text, not among the answers, becomes the first answer.
    assert title_only.answers == ("Buy a new kettle.",) and title_only.best_answer == 0


def test_tsv_with_mapping_and_auto_id(fixtures):
    (q,) = read_questions(fixtures / "csv" / "sample.tsv", columns={"title": "question"},
                          auto_id=True)
    assert q.id == "sample:2"  # <file stem>:<line>
    assert q.title == "How long to boil an egg?" and q.category == "Food"
    assert q.answers == ("Seven minutes.", "Ten for hard.")  # one cell split on "|"


def test_list_columns_and_separator(tmp_path):
    path = tmp_path / "lists.csv"
    path.write_text("key,text,good,other,labels,dups\n"
                    "k1,Why is the sky blue?,Rayleigh scattering.,,physics;optics,k0;k9\n",
                    encoding="utf-8")
    (q,) = read_questions(path, columns={"id": "key", "title": "text", "answers": ["good", "other"],
                                         "tags": "labels", "duplicate_of": "dups"},
                          list_separator=";")
    assert q.id == "k1" and q.answers == ("Rayleigh scattering.",)
    assert q.tags == ("physics", "optics") and q.duplicate_of == ("k0", "k9")
    assert q.extra == {}


def test_auto_id_uses_physical_line_numbers(tmp_path):
    path = tmp_path / "lines.csv"
    path.write_text('title\n"two\nlines"\n\nthird row\n', encoding="utf-8")
    assert [q.id for q in read_questions(path, auto_id=True)] == ["lines:2", "lines:5"]


def test_bom_is_ignored(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfid,title\nb1,With a BOM\n")
    assert [q.id for q in read_questions(path)] == ["b1"]


def test_unknown_column_lists_the_header(fixtures):
    with pytest.raises(ArchiveError, match=r"sample\.csv:1: column 'subject' \(for field 'title'\) "
                                           r"is not in the header; available columns: 'id', 'title'"):
        list(read_questions(fixtures / "csv" / "sample.csv", columns={"title": "subject"}))


def test_unknown_field_in_columns(fixtures):
    with pytest.raises(ArchiveError, match=r"--columns \(columns=\): unknown field 'subject'; fields are id, title"):
        list(read_questions(fixtures / "csv" / "sample.csv", columns={"subject": "title"}))


def test_no_id_column_without_auto_id(fixtures):
    with pytest.raises(ArchiveError, match=r"sample\.tsv:1: no id column: name one with --columns "
                                           r"id=COLUMN or use --auto-id \(in Python: "
                                           r"columns=\{'id': \.\.\.\} or auto_id=True\); the header is 'question', 'answers', 'category'"):
        list(read_questions(fixtures / "csv" / "sample.tsv", columns={"title": "question"}))


def test_no_text_column(tmp_path):
    path = tmp_path / "notext.csv"
    path.write_text("id,category\nx,y\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match="no title or body column"):
        list(read_questions(path))


def test_missing_required_field_names_the_line(tmp_path):
    path = tmp_path / "empty_text.csv"
    path.write_text("id,title,body\nok,A title,\n\nbad,,\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"empty_text\.csv:4: question 'bad' has neither a title nor a body"):
        list(read_questions(path))


def test_wrong_number_of_cells(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("id,title\nr1,one,extra\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"ragged\.csv:2: row has 3 cells but the header has 2"):
        list(read_questions(path))


def test_non_utf8_bytes(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"id,title\nl1,caf\xe9\n")
    with pytest.raises(ArchiveError, match=r"latin1\.csv:2: not valid UTF-8 \(byte b'\\xe9'\)"):
        list(read_questions(path))


def test_skip_invalid_counts(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"id,title\nm1,good\nm2,caf\xe9\nm3\nm4,\nm5,also good\n")
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["m1", "m5"]
    assert report.n_skipped == 3 and report.n_read == 2
    assert [error.split(": ")[0].rsplit("/", 1)[-1] for error in report.errors] == [
        "mixed.csv:3", "mixed.csv:4", "mixed.csv:5"]


def test_empty_file_and_bad_options(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"empty\.csv: empty file: a header row is required"):
        list(read_questions(path))
    with pytest.raises(ArchiveError, match="list_separator must be a non-empty string; got ''"):
        list(read_questions(path, list_separator=""))
    with pytest.raises(ArchiveError, match=r"option 'delimiter' does not apply to format 'csv' \(it takes: "
                       r"'columns' \(--columns\), 'list_separator' \(--list-separator\), "
                       r"'auto_id' \(--auto-id\)\)"):
        list(read_questions(path, delimiter=";"))
    with pytest.raises(ArchiveError, match="delimiter must be a 1-character string; got ';;'"):
        list(csv_reader.read(path, report=ReadReport(), delimiter=";;"))


def test_semeval_derived_train_part1(shared_data):
    path = shared_data("semeval2016-task3-cqa-ql/train-part1-derived/TRAIN-BASE.csv")
    questions = list(read_questions(path, columns={"body": "rel_question"}, auto_id=True))
    assert len(questions) == 1958
    first = questions[0]
    assert first.id == "TRAIN-BASE:2"
    assert first.body == "is there any place i can find scented massage oils in qatar?"
    assert first.extra == {"feature": "Massage oil massage oil",
                           "question": "Where I can buy good oil for massage?",
                           "labels": "PerfectMatch"}


def test_an_unclosed_quote_costs_one_row(tmp_path):
    rows = ['1,"a quote never closed'] + [f"{i},question {i}" for i in range(2, 1001)]
    path = tmp_path / "quote.csv"
    path.write_text("id,title\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"quote\.csv:2: a quoted cell starting in this row is "
                                           r"never closed \(the file ends inside it\)"):
        list(read_questions(path))
    report = ReadReport(skip_invalid=True)
    questions = list(read_questions(path, report=report))
    assert len(questions) == 999 and questions[0].id == "2" and questions[-1].id == "1000"
    assert report.n_skipped == 1


def test_reading_goes_on_after_a_malformed_row(tmp_path):
    path = tmp_path / "quotes.csv"
    path.write_text('id,title\ng1,one\nb1,"opens\ng2,two\ng3,"q"w\ng4,four\n', encoding="utf-8")
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["g1", "g2", "g4"]
    assert [e.split(": ", 1)[0].rsplit("/", 1)[1] for e in report.errors] == [
        "quotes.csv:3", "quotes.csv:5"]
    assert "malformed CSV (at line 5): ',' expected after '\"'" in report.errors[0]


def test_long_cells_are_read_and_runaway_cells_refused(tmp_path, monkeypatch):
    import csv

    path = tmp_path / "long.csv"
    path.write_text(f"id,title\nl1,{'w' * 200_000}\n", encoding="utf-8")
    (q,) = read_questions(path)
    assert len(q.title) == 200_000
    limit = csv.field_size_limit()
    monkeypatch.setattr(csv_reader, "FIELD_LIMIT", 1000)
    try:
        csv.field_size_limit(1000)
        path.write_text(f'id,title\nl1,"{"w" * 2000}\nl2,ok\n', encoding="utf-8")
        with pytest.raises(ArchiveError, match=r"long\.csv:2: a cell longer than 1,000 characters: "
                                               r"is the closing quote of a cell missing\?"):
            list(read_questions(path))
    finally:
        csv.field_size_limit(limit)


def test_aliases_and_repeated_header_names(tmp_path):
    path = tmp_path / "beir.csv"
    path.write_text("_id,title,text\nd1,Renew a visa,It expires soon.\n", encoding="utf-8")
    (q,) = read_questions(path)
    assert (q.id, q.title, q.body) == ("d1", "Renew a visa", "It expires soon.")
    path.write_text("id,title,note,note\nd1,t,a,b\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"beir\.csv:1: the header names column 'note' more "
                                           "than once"):
        list(read_questions(path))


def test_a_row_too_large_and_utf16(tmp_path, monkeypatch):
    monkeypatch.setattr("cqa_search.readers._base.MAX_RECORD_BYTES", 100)
    path = tmp_path / "a.csv"
    path.write_text(f"id,title\na,visa\nb,{'x' * 500}\nc,car\n", encoding="utf-8")
    with pytest.raises(ArchiveError, match="a.csv:3: record too large: the line has more "
                                           "than 100 bytes"):
        list(read_questions(path))
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["a", "c"]
    assert report.n_skipped == 1
    path.write_bytes("id,title\na,visa\n".encode("utf-16"))
    with pytest.raises(ArchiveError, match="the file is encoded in UTF-16-LE, not UTF-8"):
        list(read_questions(path, skip_invalid=True))
