"""Yahoo! Answers Webscope L6 reader, on an invented sample in the L6 layout."""
import pytest

from cqa_search.exceptions import ArchiveError
from cqa_search.readers import ReadReport, read_questions


@pytest.fixture
def sample(fixtures):
    return fixtures / "yahoo_l6" / "sample.xml"


def test_sample(sample):
    questions = {q.id: q for q in read_questions(sample)}
    assert list(questions) == ["1001", "1002", "1003", "1004", "1005"]
    basil = questions["1001"]
    assert basil.title == "How do I keep basil alive on a windowsill?"
    assert basil.body == "Mine wilts after a week.\nIt gets morning sun only."  # escaped <br />
    assert basil.category == "Home & Garden"
    # The best answer is among the n-best answers: pointed at, not repeated.
    assert basil.answers == ("Buy a bigger pot.", "Water it from below\nand pinch off the flowers.")
    assert basil.best_answer == 1
    assert basil.extra == {"cat": "Gardening", "subcat": "Gardening", "date": "1150000000",
                           "qlang": "en", "user_id": "u100"}
    bread = questions["1002"]
    # A best answer missing from the n-best list is put first.
    assert bread.answers[0] == "Starch recrystallises fastest just above freezing."
    assert bread.best_answer == 0 and len(bread.answers) == 2
    assert bread.body == "I thought cold keeps food fresh & soft."  # HTML entity decoded
    assert questions["1003"].best_answer is None and questions["1003"].body == ""
    assert questions["1004"].answers == ()
    assert questions["1005"].title == 'Comment dire "cheers" en allemand ?'


@pytest.mark.parametrize("level, expected", [
    ("maincat", "Science & Mathematics"), ("cat", "Astronomy & Space"),
    ("subcat", "Astronomy & Space")])
def test_category_level(sample, level, expected):
    question = next(q for q in read_questions(sample, category_level=level) if q.id == "1004")
    assert question.category == expected
    # The other levels are kept in extra.
    assert set(question.extra) & {"maincat", "cat", "subcat"} == {"maincat", "cat", "subcat"} - {level}


def test_bad_category_level(sample):
    with pytest.raises(ArchiveError, match=r"category_level must be one of \{'maincat', 'cat', "
                                           r"'subcat'\}; got 'topic'"):
        list(read_questions(sample, category_level="topic"))


def _write(tmp_path, documents: bytes):
    path = tmp_path / "l6.xml"
    path.write_bytes(b'<?xml version="1.0" encoding="UTF-8"?>\n<ystfeed>\n' + documents
                     + b"\n</ystfeed>\n")
    return path


def _doc(uri: bytes, subject: bytes = b"A question?"):
    return (b'<vespaadd><document type="wisdom"><uri>' + uri + b"</uri><subject>" + subject
            + b"</subject><maincat>Other</maincat></document></vespaadd>")


def test_missing_required_fields(tmp_path):
    with pytest.raises(ArchiveError, match=r"l6\.xml:4: <document> has no <uri>"):
        list(read_questions(_write(tmp_path, _doc(b"1") + b"\n" + _doc(b""))))
    with pytest.raises(ArchiveError, match=r"l6\.xml:3: question '7' has neither a title nor a body"):
        list(read_questions(_write(tmp_path, _doc(b"7", b""))))


def test_skip_invalid_counts(tmp_path):
    path = _write(tmp_path, b"\n".join([_doc(b""), _doc(b"2"), _doc(b"3", b""), _doc(b"2")]))
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["2"]
    assert report.n_skipped == 3  # no uri, no text, duplicate id


def test_malformed_xml(tmp_path):
    path = _write(tmp_path, _doc(b"1") + b"\n<vespaadd><document><uri>2</uri></vespaadd>")
    with pytest.raises(ArchiveError, match=r"l6\.xml:4: malformed XML at column 35: mismatched tag"):
        list(read_questions(path))


def test_non_utf8_bytes(tmp_path):
    path = _write(tmp_path, _doc(b"1", b"Caf\xe9 au lait?"))
    with pytest.raises(ArchiveError, match=r"l6\.xml:3: not valid UTF-8 \(byte b'\\xe9'"):
        list(read_questions(path))


def test_file_without_documents(tmp_path):
    with pytest.raises(ArchiveError, match="no <document> element: not a Yahoo! Answers L6 file"):
        list(read_questions(_write(tmp_path, b""), format="yahoo-l6"))


def test_text_inside_markup_is_kept(tmp_path):
    path = tmp_path / "markup.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<ystfeed><vespaadd><document><uri>1</uri><subject>Hi '
        "<b>bold</b></subject><content>c</content><bestanswer>the <i>best</i></bestanswer>"
        "<nbestanswers><answer_item>the <i>best</i></answer_item></nbestanswers>"
        "<maincat>X</maincat></document></vespaadd></ystfeed>\n", encoding="utf-8")
    (q,) = read_questions(path)
    assert (q.title, q.answers, q.best_answer) == ("Hi bold", ("the best",), 0)
