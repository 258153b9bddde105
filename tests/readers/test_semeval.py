"""SemEval-2016 Task 3 XML reader: real files, repeated threads, layouts, errors."""
import pytest

from cqa_search.exceptions import ArchiveError
from cqa_search.readers import ReadReport, read_questions

SEMEVAL16 = "semeval2016-task3-cqa-ql"
SEMEVAL15 = "semeval2015-task3-reformatted"


@pytest.mark.parametrize("relative, n_questions, n_answers", [
    # One record per pair: every RELQ_ID is a candidate of subtask B (repeats are marked).
    (f"{SEMEVAL16}/SemEval2016-Task3-CQA-QL-train-part2.xml", 670, 6700),
    (f"{SEMEVAL16}/SemEval2016-Task3-CQA-QL-dev.xml", 500, 5000),
    (f"{SEMEVAL16}/SemEval2016-Task3-CQA-QL-test.xml", 700, 7000),
    (f"{SEMEVAL16}/SemEval2016-Task3-CQA-QL-test-input.xml", 700, 7000),
    (f"{SEMEVAL15}/SemEval2015-Task3-CQA-QL-dev-reformatted-excluding-2016-questions-cleansed.xml",
     291, 1529),
    (f"{SEMEVAL15}/SemEval2015-Task3-CQA-QL-test-reformatted-excluding-2016-questions-multiline.xml",
     319, 1876),
])
def test_real_file_counts(shared_data, relative, n_questions, n_answers):
    questions = list(read_questions(shared_data(relative)))
    assert len(questions) == n_questions
    assert len({q.id for q in questions}) == n_questions
    assert sum(len(q.answers) for q in questions) == n_answers
    for q in questions:
        assert len(q.extra["answer_labels"]) == len(q.answers) == len(q.extra["answer_ids"])
        assert q.best_answer is None and q.category


def test_real_dev_fields_and_repeats(shared_data):
    path = shared_data(f"{SEMEVAL16}/SemEval2016-Task3-CQA-QL-dev.xml")
    questions = {q.id: q for q in read_questions(path)}
    first = questions["Q268_R4"]
    assert first.title == "Best Bank"
    assert first.body.startswith("Hi Guys; I need to open a new bank accoount.")
    assert first.category == "Advice and Help"
    assert first.answers[0] == "Commercial bank/IBQ"
    assert first.extra["answer_labels"][:2] == ["Good", "Good"]
    assert first.extra["date"] == "2013-05-02 19:43:00" and first.extra["user_id"] == "U4882"
    # Q270_R62 repeats Q269_R27 of the same file; Q268_R4 repeats Q246_R15 (train-part2).
    assert questions["Q270_R62"].extra["repeat_of"] == "Q269_R27"
    assert questions["Q270_R62"].text == questions["Q269_R27"].text
    assert first.extra["repeat_of"] == "Q246_R15"
    assert sum("repeat_of" in q.extra for q in questions.values()) == 256
    # Original questions are queries, not archive records.
    assert all("_R" in qid for qid in questions)


def test_repeats_are_kept_and_marked(fixtures):
    questions = list(read_questions(fixtures / "semeval" / "sample-2016.xml"))
    # Q2_R3 repeats Q1_R1 (same file), Q1_R2 repeats Q0_R7 (not in the file): both kept.
    assert [q.id for q in questions] == ["Q1_R1", "Q1_R2", "Q2_R3"]
    assert [q.extra.get("repeat_of") for q in questions] == [None, "Q0_R7", "Q1_R1"]
    gym = questions[0]
    assert gym.answers == ("About 300 QR at the small ones.", "Try swimming instead & save money.")
    assert gym.extra["answer_labels"] == ["Good", "PotentiallyUseful"]
    assert gym.extra["answer_ids"] == ["Q1_R1_C1", "Q1_R1_C2"]
    assert gym.extra["answer_user_ids"] == ["U11", "U12"] and gym.extra["user_id"] == "U10"
    assert questions[1].body == "" and questions[1].answers == ()


def test_repeated_relq_id_is_yielded_once(tmp_path):
    thread = ('<Thread THREAD_SEQUENCE="Q5_R1"><RelQuestion RELQ_ID="Q5_R1" RELQ_CATEGORY="Funnies">'
              '<RelQSubject>Joke</RelQSubject><RelQBody>Tell one</RelQBody></RelQuestion></Thread>')
    path = tmp_path / "twice.xml"
    path.write_text(f"<xml>\n{thread}\n{thread}\n</xml>\n", encoding="utf-8")
    report = ReadReport()
    assert [q.id for q in read_questions(path, report=report)] == ["Q5_R1"]
    assert report.n_skipped == 0


def test_multiline_2015_layout(fixtures):
    (q,) = read_questions(fixtures / "semeval" / "sample-2015-multiline.xml")
    assert q.id == "Q9001" and q.category == "Pets and Animals"
    assert q.body == "Looking for a good vet.\nMy cat is 12 years old."
    # RelCBody (uncleansed) is preferred to RelCClean; RelCClean is used when alone.
    assert q.answers == ("The clinic near the zoo\nis very good.", "thanks")
    assert q.extra["answer_labels"] == ["Good", "Bad"]


def _write(tmp_path, body: bytes, name="bad.xml"):
    path = tmp_path / name
    path.write_bytes(b'<?xml version="1.0" encoding="utf-8"?>\n<xml>\n' + body + b"\n</xml>\n")
    return path


GOOD = (b'<Thread THREAD_SEQUENCE="Q1_R1"><RelQuestion RELQ_ID="Q1_R1" RELQ_CATEGORY="Funnies">'
        b"<RelQSubject>a</RelQSubject><RelQBody>b</RelQBody></RelQuestion></Thread>")


def test_malformed_xml_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, GOOD + b'\n<Thread THREAD_SEQUENCE="Q1_R2">\n  <RelQuestion></Thread>')
    read = []
    with pytest.raises(ArchiveError, match=r"bad\.xml:5: malformed XML at column 18: mismatched tag"):
        for q in read_questions(path, format="semeval"):
            read.append(q.id)
    assert read == ["Q1_R1"]  # records before the error are produced


def test_non_utf8_bytes(tmp_path):
    path = _write(tmp_path, GOOD.replace(b">a<", b">caf\xe9<"))
    with pytest.raises(ArchiveError, match=r"bad\.xml:3: not valid UTF-8 \(byte b'\\xe9' at column"):
        list(read_questions(path))


def test_missing_required_fields(tmp_path):
    no_text = GOOD.replace(b"<RelQSubject>a</RelQSubject><RelQBody>b</RelQBody>", b"")
    with pytest.raises(ArchiveError, match=r"bad\.xml:3: question 'Q1_R1' has neither a title nor a body"):
        list(read_questions(_write(tmp_path, no_text)))
    no_question = b'<Thread THREAD_SEQUENCE="Q7_R1"></Thread>'
    with pytest.raises(ArchiveError, match=r"bad\.xml:3: thread 'Q7_R1' has no <RelQuestion>"):
        list(read_questions(_write(tmp_path, no_question)))


def test_skip_invalid_counts(tmp_path):
    no_text = GOOD.replace(b"Q1_R1", b"Q1_R9").replace(b"<RelQSubject>a</RelQSubject>", b"")
    no_text = no_text.replace(b"<RelQBody>b</RelQBody>", b"")
    path = _write(tmp_path, b'<Thread THREAD_SEQUENCE="Q7_R1"></Thread>\n' + no_text + b"\n" + GOOD)
    report = ReadReport(skip_invalid=True)
    assert [q.id for q in read_questions(path, report=report)] == ["Q1_R1"]
    assert report.n_skipped == 2 and report.n_read == 1
    assert "bad.xml:3: thread 'Q7_R1'" in report.errors[0]


def test_file_without_threads(tmp_path):
    path = _write(tmp_path, b"<OrgQuestion/>")
    with pytest.raises(ArchiveError, match="no <Thread> element: not a SemEval-2016 Task 3 file"):
        list(read_questions(path, format="semeval"))


def test_text_inside_markup_is_kept(tmp_path):
    path = tmp_path / "markup.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<root><Thread THREAD_SEQUENCE="t"><RelQuestion RELQ_ID="q">'
        "<RelQSubject>Hi <b>bold</b> there</RelQSubject><RelQBody>" + "<i>" * 3000 + "deep"
        + "</i>" * 3000 + '</RelQBody></RelQuestion><RelComment RELC_ID="c"><RelCText>an '
        "<i>answer</i>.</RelCText></RelComment></Thread></root>\n", encoding="utf-8")
    (q,) = read_questions(path)
    assert (q.title, q.body, q.answers) == ("Hi bold there", "deep", ("an answer.",))
