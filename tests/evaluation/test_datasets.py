import json

import pytest

from cqa_search.evaluation import read_qrels, read_queries, read_run
from cqa_search.archive import Question
from cqa_search.evaluation.datasets import (convert_semeval, convert_stackexchange,
                                            convert_stackfaq, self_candidates)
from cqa_search.exceptions import ArchiveError


def test_convert_semeval_fixture(fixtures, tmp_path):
    summary = convert_semeval([fixtures / "semeval" / "sample-2016.xml"], tmp_path)
    queries = read_queries(tmp_path / "queries.jsonl")
    run = read_run(tmp_path / "candidates.run")
    qrels = read_qrels(tmp_path / "qrels.txt")
    archive = [json.loads(line)["id"] for line in open(tmp_path / "archive.jsonl")]
    assert summary.n_questions == len(archive) == 3 and summary.candidates
    assert [q["id"] for q in queries] == list(run) and set(qrels) <= set(run)
    for qid, docs in run.items():  # candidates in search-engine order, all in the archive
        assert set(docs) <= set(archive)
        assert list(docs.values()) == sorted(docs.values(), reverse=True)


def test_convert_semeval_refuses_an_original_question_without_text(fixtures, tmp_path):
    xml = (fixtures / "semeval" / "sample-2016.xml").read_text(encoding="utf-8")
    empty = tmp_path / "empty.xml"
    empty.write_text(xml.replace("<OrgQSubject>Cheap gym</OrgQSubject>", "<OrgQSubject/>", 1)
                     .replace("<OrgQBody>Where is a cheap gym near the corniche?</OrgQBody>",
                              "<OrgQBody> </OrgQBody>", 1), encoding="utf-8")
    with pytest.raises(ArchiveError, match="original question 'Q1' has neither a subject nor "
                                           "a body: it cannot be a query"):
        convert_semeval([empty], tmp_path / "out")


def test_convert_semeval_drops_comment_labels_unless_kept(fixtures, tmp_path):
    """The comment labels of the converted split never reach the archive (an index) unless
    explicitly kept for a training archive."""
    xml = fixtures / "semeval" / "sample-2016.xml"
    extra = fixtures / "semeval" / "sample-2015-multiline.xml"

    def archive(out):
        return [json.loads(line) for line in open(out / "archive.jsonl", encoding="utf-8")]

    convert_semeval([xml], tmp_path / "eval", extra_archive=[extra])
    records = archive(tmp_path / "eval")
    assert records and not any("answer_labels" in r for r in records)
    assert all("answer_ids" in r for r in records)  # other extras are kept
    convert_semeval([xml], tmp_path / "train", extra_archive=[extra], keep_labels=True)
    kept = archive(tmp_path / "train")
    assert [r["id"] for r in kept] == [r["id"] for r in records]
    assert all(len(r["answer_labels"]) == len(r["answers"]) for r in kept)
    assert {"Good", "Bad"} <= {label for r in kept for label in r["answer_labels"]}


SELF = """<xml>
<OrgQuestion ORGQ_ID="Q9"><OrgQSubject>"Gym fees</OrgQSubject><OrgQBody>""Are fees high?"
</OrgQBody><Thread THREAD_SEQUENCE="Q9_R1"><RelQuestion RELQ_ID="Q9_R1" RELQ_RANKING_ORDER="1"
RELQ_RELEVANCE2ORGQ="PerfectMatch"><RelQSubject>Gym fees</RelQSubject><RelQBody>Are fees high?
</RelQBody></RelQuestion></Thread></OrgQuestion>
<OrgQuestion ORGQ_ID="Q9"><OrgQSubject>"Gym fees</OrgQSubject><OrgQBody>""Are fees high?"
</OrgQBody><Thread THREAD_SEQUENCE="Q9_R2"><RelQuestion RELQ_ID="Q9_R2" RELQ_RANKING_ORDER="4"
RELQ_RELEVANCE2ORGQ="Relevant"><RelQSubject>Gym prices</RelQSubject><RelQBody>Cost?
</RelQBody></RelQuestion></Thread></OrgQuestion>
</xml>"""


def test_convert_semeval_for_full_retrieval(fixtures, tmp_path):
    xml = tmp_path / "self.xml"
    xml.write_text(SELF)
    summary = convert_semeval([fixtures / "semeval" / "sample-2016.xml", xml], tmp_path / "fr",
                              full_retrieval=True)
    assert not summary.candidates and not (tmp_path / "fr" / "candidates.run").exists()
    ids = [json.loads(line)["id"] for line in open(tmp_path / "fr" / "archive.jsonl")]
    # Q2_R3 is a copy of Q1_R1 (merged); Q9_R1 is the query Q9 itself (renamed)
    assert ids == ["Q1_R1", "Q1_R2", "Q9", "Q9_R2"]
    assert read_qrels(tmp_path / "fr" / "qrels.txt") == {
        "Q1": {"Q1_R1": 2, "Q1_R2": 0}, "Q2": {"Q1_R1": 1}, "Q9": {"Q9_R2": 1}}


def test_convert_semeval_real_test_with_relevancy(shared_data, tmp_path):
    folder = shared_data("semeval2016-task3-cqa-ql")
    summary = convert_semeval(
        [folder / "SemEval2016-Task3-CQA-QL-test-input.xml"], tmp_path,
        relevancy=[folder / "SemEval2016-Task3-CQA-QL-test.xml.subtaskB.relevancy"])
    assert (summary.n_questions, summary.n_queries, summary.n_judged, summary.n_relevant) == \
        (700, 70, 700, 233)


def test_self_candidates():
    archive = {"a": Question("a", "Gold loan in Qatar", "Can any body advice where?"),
               "b": Question("b", "Gold loan", "Can any body advice where?"),
               "c": Question("c", "Gold loan in Qatar", "")}
    queries = [{"id": "q1", "text": '"Gold loan in Qatar\n""Can any body advice where?"'},
               {"id": "q2", "text": "Gold loan in Qatar"}, {"id": "q3", "text": "nothing"}]
    candidates = {"q1": {"b": 1.0, "a": 0.5}, "q2": {"a": 1.0, "c": 0.5}, "q3": {"a": 1.0}}
    assert self_candidates(queries, candidates, archive) == {"q1": "a", "q2": "c"}


def test_semeval_2016_test_queries_with_themselves_as_candidate(shared_data, tmp_path):
    """41 of the 70 test queries have themselves among their candidates, always
    PerfectMatch; train-part2 and dev have none."""
    folder = shared_data("semeval2016-task3-cqa-ql")
    found = {}
    for split in ("train-part2", "dev", "test"):
        convert_semeval([folder / f"SemEval2016-Task3-CQA-QL-{split}.xml"], tmp_path / split)
        archive = {q["id"]: Question.from_dict(q) for q in map(
            json.loads, open(tmp_path / split / "archive.jsonl", encoding="utf-8"))}
        found[split] = self_candidates(read_queries(tmp_path / split / "queries.jsonl"),
                                       read_run(tmp_path / split / "candidates.run"), archive)
    assert (len(found["train-part2"]), len(found["dev"]), len(found["test"])) == (0, 0, 41)
    qrels = read_qrels(tmp_path / "test" / "qrels.txt")
    assert all(qrels[q][d] == 2 for q, d in found["test"].items())


def test_convert_stackexchange_fixture(fixtures, tmp_path):
    summary = convert_stackexchange([fixtures / "stackexchange" / "tinysite"], tmp_path)
    qrels = read_qrels(tmp_path / "qrels.txt")
    archive = {json.loads(line)["id"] for line in open(tmp_path / "archive.jsonl")}
    assert summary.n_queries == len(qrels) >= 1
    for qid, docs in qrels.items():  # duplicates are queries and stay in the archive
        assert qid in archive and set(docs) <= archive


def test_convert_stackexchange_real(shared_data, tmp_path):
    folder = shared_data("stackexchange")
    dumps = sorted(p for p in folder.iterdir() if p.is_dir())
    summary = convert_stackexchange(dumps, tmp_path)
    # 51 duplicate links with both ends present (README), from 50 duplicate questions
    assert (summary.n_questions, summary.n_queries, summary.n_relevant) == (4634, 50, 51)


def test_convert_stackfaq(tmp_path):
    xml = tmp_path / "faq.xml"
    xml.write_text("<root><qapair><rephr>how do i a</rephr><rephr>*</rephr><rephr> </rephr>"
                   "<rephr>doing a</rephr><question>How to do A?</question><answer>Like this."
                   "</answer></qapair><qapair><rephr>b?</rephr><question>B</question></qapair>"
                   "</root>")
    summary = convert_stackfaq(xml, tmp_path / "out")
    assert (summary.n_questions, summary.n_queries) == (2, 3)
    assert read_qrels(tmp_path / "out" / "qrels.txt") == {
        "faq-1-p1": {"faq-1": 1}, "faq-1-p2": {"faq-1": 1}, "faq-2-p1": {"faq-2": 1}}
    with pytest.raises(ArchiveError, match="no such file"):
        convert_stackfaq(tmp_path / "none.xml", tmp_path / "x")
    xml.write_text("<root><qapair><question> </question><rephr>b?</rephr></qapair></root>")
    with pytest.raises(ArchiveError, match="faq.xml: <qapair> 1 has an empty <question>"):
        convert_stackfaq(xml, tmp_path / "y")


def test_convert_stackfaq_real(shared_data, tmp_path):
    summary = convert_stackfaq(shared_data("stackfaq/stackExchange-FAQ.xml"), tmp_path)
    assert (summary.n_questions, summary.n_queries) == (125, 1249)
