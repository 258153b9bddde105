"""SemEval-2016 Task 3 subtask A (comment ranking): the threads, labels and the official
chronological baseline."""
import pytest

from cqa_search.evaluation import evaluate, summarize
from cqa_search.evaluation.datasets import semeval_comment_ranking
from cqa_search.exceptions import ArchiveError

SEMEVAL = "semeval2016-task3-cqa-ql"


def test_sample_threads(fixtures):
    qrels, run = semeval_comment_ranking([fixtures / "semeval" / "sample-2016.xml"])
    # Q1_R2 repeats another thread (and has no comments), Q2_R3 repeats Q1_R1: skipped
    assert qrels == {"Q1_R1": {"Q1_R1_C1": 1, "Q1_R1_C2": 0}}
    assert run == {"Q1_R1": {"Q1_R1_C1": 1.0, "Q1_R1_C2": 0.5}}


def test_unlabelled_comments_are_refused(tmp_path):
    path = tmp_path / "input.xml"
    path.write_text(
        '<xml><Thread THREAD_SEQUENCE="Q1_R1"><RelQuestion RELQ_ID="Q1_R1"><RelQSubject>gym'
        '</RelQSubject></RelQuestion><RelComment RELC_ID="Q1_R1_C1" RELC_RELEVANCE2RELQ="?">'
        '<RelCText>300 QR</RelCText></RelComment></Thread></xml>', encoding="utf-8")
    with pytest.raises(ArchiveError, match="thread Q1_R1: comment label '\\?' is not one of"):
        semeval_comment_ranking([path])


@pytest.mark.parametrize("split, n_threads, n_good, chronological_map", [
    ("test", 327, 1329, 59.53),          # the task paper's chronological baseline
    ("dev", 244, 818, 53.84),
    ("train-part2", 379, 1364, 58.06),
])
def test_chronological_order_scores_the_official_baseline(shared_data, split, n_threads,
                                                          n_good, chronological_map):
    path = shared_data(f"{SEMEVAL}/SemEval2016-Task3-CQA-QL-{split}.xml")
    qrels, run = semeval_comment_ranking([path])
    assert len(qrels) == n_threads
    assert sum(len(c) for c in qrels.values()) == 10 * n_threads
    assert sum(sum(c.values()) for c in qrels.values()) == n_good
    scores = summarize(evaluate(run, qrels, metrics=["map"], rerank=True), percent=True)
    assert round(scores["map"], 2) == chronological_map
