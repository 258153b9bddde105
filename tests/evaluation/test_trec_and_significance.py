import numpy as np
import pytest
from scipy import stats

from cqa_search.evaluation import (compare, evaluate, paired_ttest, randomization_test, read_qrels,
                                   read_queries, read_run, write_qrels, write_run, write_svmrank)
from cqa_search.exceptions import ArchiveError, ParameterError, QueryError


def test_run_and_qrels_round_trip_keep_order(tmp_path):
    run = {"q2": {"a": 0.5, "b": 0.5, "c": 0.9}, "q1": {"x": 1.0}}
    write_run(run, tmp_path / "r.run", tag="t")  # trec_eval's order: ties by doc id, descending
    lines = (tmp_path / "r.run").read_text().splitlines()
    assert lines[:3] == ["q2 Q0 c 1 0.9 t", "q2 Q0 b 2 0.5 t", "q2 Q0 a 3 0.5 t"]
    assert list(read_run(tmp_path / "r.run")["q2"]) == ["c", "b", "a"]
    write_run(run, tmp_path / "s.run", tag="t", convention="semeval")  # ties in run order
    assert list(read_run(tmp_path / "s.run")["q2"]) == ["c", "a", "b"]
    qrels = {"q1": {"x": 2, "y": 0}}
    write_qrels(qrels, tmp_path / "q.txt")
    assert read_qrels(tmp_path / "q.txt") == qrels


@pytest.mark.parametrize("reader, content, message", [
    (read_run, "q Q0 d 1 0.5\n", r"r.txt:1: a run line has 6 columns"),
    (read_run, "q Q0 d 1 high t\n", r"r.txt:1: score must be a number"),
    (read_run, "q Q0 d 1 1 t\nq Q0 d 2 0 t\n", r"r.txt:2: document 'd' is listed twice"),
    (read_qrels, "q 0\n", r"r.txt:1: a qrels line has 4 columns"),
    (read_qrels, "q 0 d yes\n", r"r.txt:1: relevance must be an integer"),
    (read_qrels, "q 0 d 1\nq 0 d 0\n", r"r.txt:2: document 'd' of query 'q' is judged twice, "
                                       r"1 and 0"),
    (read_queries, "q1 no tab\n", r"r.txt:1: a TSV query line is 'qid<TAB>text'"),
    (read_queries, '{"text": "x"}\n', r"r.txt:1: a query needs an 'id'"),
    (read_queries, "a\tx\na\ty\n", r"r.txt:2: duplicate query id 'a'"),
])
def test_malformed_files(tmp_path, reader, content, message):
    (tmp_path / "r.txt").write_text(content)
    with pytest.raises(ArchiveError, match=message):
        reader(tmp_path / "r.txt")
    with pytest.raises(ArchiveError, match="no such"):
        reader(tmp_path / "absent.txt")


def test_write_run_refuses_ids_a_run_line_cannot_hold_and_bad_paths(tmp_path):
    for run in ({"my id": {"d": 1.0}}, {"q": {"": 1.0}}, {"q": {"a\tb": 1.0}}):
        with pytest.raises(ParameterError, match="a TREC run cannot hold the id"):
            write_run(run, tmp_path / "r.run")
    assert not (tmp_path / "r.run").exists()
    with pytest.raises(ParameterError, match="cannot write .*: it is a directory"):
        write_run({"q": {"d": 1.0}}, tmp_path)
    with pytest.raises(ParameterError, match="cannot write .*: there is no directory"):
        write_run({"q": {"d": 1.0}}, tmp_path / "none" / "r.run")


def test_a_byte_order_mark_is_not_part_of_the_first_id(tmp_path):
    (tmp_path / "q.txt").write_bytes("\ufeffq1 0 d 1\nq1 0 d 1\n".encode("utf-8"))
    assert read_qrels(tmp_path / "q.txt") == {"q1": {"d": 1}}  # the same judgment twice: fine
    (tmp_path / "r.run").write_bytes("\ufeffq1 Q0 d 1 0.5 t\n".encode("utf-8"))
    assert read_run(tmp_path / "r.run") == {"q1": {"d": 0.5}}


def test_read_queries_formats(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"id": 1, "title": "T", "body": "B", "category": "C"}\n'
                                      '{"id": "2", "text": "plain"}\n')
    none = {"title": None, "body": None}
    assert read_queries(tmp_path / "q.jsonl") == [  # the two parts kept: per-field features
        {"id": "1", "text": "T\nB", "category": "C", "title": "T", "body": "B"},
        {"id": "2", "text": "plain", "category": None, **none}]
    (tmp_path / "q.tsv").write_text("# comment\nq1\thow to renew\n")
    assert read_queries(tmp_path / "q.tsv") == [{"id": "q1", "text": "how to renew",
                                                 "category": None, **none}]


def test_svmrank_file(tmp_path):
    write_svmrank(tmp_path / "f.txt", [[1.0, 0.5], [0.25, 2.0], [3, 4]], [1, 0, 1],
                  ["Q9", "Q9", "Q3"], doc_ids=["a", "b", "c"], feature_names=["bm25", "vsm"])
    assert (tmp_path / "f.txt").read_text().splitlines() == [
        "# 1:bm25 2:vsm", "1 qid:1 1:1 2:0.5 # Q9 a", "0 qid:1 1:0.25 2:2 # Q9 b",
        "1 qid:2 1:3 2:4 # Q3 c"]


def test_significance_tests():
    rng = np.random.default_rng(1)
    a = rng.random(40)
    b = a - 0.05 + rng.normal(0, 0.05, 40)
    assert paired_ttest(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue)
    p1 = randomization_test(a, b, random_state=3)
    assert p1 == randomization_test(a, b, random_state=3) and p1 < 0.01
    assert paired_ttest(a, a) == 1.0 and randomization_test(a, a) == 1.0
    c = a + rng.normal(0, 0.2, 40)
    assert randomization_test(a, c, n_resamples=20000) == pytest.approx(paired_ttest(a, c), abs=0.05)
    with pytest.raises(ValueError, match="two 1-d arrays of the same length"):
        paired_ttest(a, b[:3])


def test_compare_aligns_queries():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    good = evaluate({"q1": {"a": 1.0}, "q2": {"b": 1.0}, "q3": {"c": 1.0}}, qrels, rerank=True)
    bad = evaluate({"q1": {"x": 1.0, "a": 0.5}, "q2": {"b": 1.0}, "q3": {}}, qrels, rerank=True)
    table = compare(good, bad, metrics=["map"])
    assert table.loc["map", "diff"] == pytest.approx((0.5 + 1) / 3)
    assert table.loc["map", "n_queries"] == 3 and 0 < table.loc["map", "p_ttest"] < 1
    with pytest.raises(QueryError, match="the two runs have no query in common"):
        compare(good.loc[["q1"]], bad.loc[["q2", "q3"]])


def test_files_given_by_path(tmp_path):
    """run_queries, feature_table and evaluate take the files' paths, as the CLI does, and
    say what they expect of anything else (it was a TypeError deep inside)."""
    from cqa_search import Question, SearchEngine, build_index
    from cqa_search.evaluation import feature_table, run_queries

    build_index([Question("a", "renew visa"), Question("b", "visa fees"),
                 Question("c", "cheap sofa")], tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "text": "visa renewal"}\n')
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\n")
    (tmp_path / "c.run").write_text("q1 Q0 b 1 2.0 x\nq1 Q0 a 2 1.0 x\n")
    queries = read_queries(tmp_path / "q.jsonl")
    assert run_queries(engine, str(tmp_path / "q.jsonl")) == run_queries(engine, queries)
    reranked = run_queries(engine, tmp_path / "q.jsonl", candidates=tmp_path / "c.run")
    assert set(reranked["q1"]) == {"a", "b"}
    assert feature_table(engine, tmp_path / "q.jsonl", candidates=str(tmp_path / "c.run"))[0] \
        .shape == (2, len(engine.feature_names))
    by_path = evaluate(str(tmp_path / "c.run"), tmp_path / "qrels.txt")
    assert by_path.equals(evaluate(read_run(tmp_path / "c.run"), read_qrels(tmp_path / "qrels.txt")))
    with pytest.raises(ParameterError, match="queries must be a path or a list of dicts .* as "
                                             "read_queries returns"):
        run_queries(engine, ["visa"])
    with pytest.raises(ParameterError, match=r"a run must be a path or a dict .* as read_run"):
        evaluate([("q1", "a")], tmp_path / "qrels.txt")
    with pytest.raises(ParameterError, match=r"qrels must be a path or a dict .* as read_qrels"):
        evaluate({"q1": {"a": 1.0}}, {"q1": ["a"]})


def test_qrels_runs_and_queries_are_read_from_a_pipe(tmp_path):
    """A shell's ``--qrels <(grep ...)`` is a pipe, read like a file (as archives are);
    a directory or a device is named as what it is, not as missing."""
    import os
    import threading

    def piped(name, text):
        path = tmp_path / name
        os.mkfifo(path)

        def write():
            with open(path, "w") as f:
                f.write(text)
        threading.Thread(target=write, daemon=True).start()
        return path

    assert read_qrels(piped("qrels", "q1 0 d1 1\nq1 0 d2 0\n")) == {"q1": {"d1": 1, "d2": 0}}
    assert [q["id"] for q in read_queries(piped("queries.tsv", "q1\tdead battery\n"))] == ["q1"]
    with pytest.raises(ArchiveError, match="expected a qrels file but got a directory"):
        read_qrels(tmp_path)
    with pytest.raises(ArchiveError, match="/dev/null is a device, not a queries file"):
        read_queries("/dev/null")
    with pytest.raises(ArchiveError, match="no such run file"):
        read_run(tmp_path / "none.run")
