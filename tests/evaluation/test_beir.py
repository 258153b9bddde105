"""BEIR / pyserini inputs from end to end: corpus.jsonl as an archive, queries.jsonl (``_id``)
or queries.tsv, and qrels/test.tsv, through `cqa-search build-index` and `evaluate`."""
import pytest

from cqa_search.cli.__main__ import main
from cqa_search.evaluation import read_qrels, read_queries
from cqa_search.exceptions import ArchiveError

CORPUS = [
    '{"_id": "d1", "title": "Renew a visa", "text": "My work visa expires next month.", '
    '"metadata": {}}',
    '{"_id": "d2", "title": "Cheap sofa", "text": "Where can I buy a cheap used sofa?"}',
    '{"_id": "d3", "title": "Car battery", "text": "The car battery dies every winter."}',
]


@pytest.fixture
def beir(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("\n".join(CORPUS) + "\n")
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "how to renew my visa", "metadata": {}}\n'
        '{"_id": "q2", "text": "battery dead in winter"}\n')
    (tmp_path / "queries.tsv").write_text("q1\thow to renew my visa\nq2\tbattery dead in winter\n")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n"
                                                 "q2\td3\t1\n")
    return tmp_path


def test_readers(beir):
    assert read_queries(beir / "queries.jsonl") == [
        {"id": "q1", "text": "how to renew my visa", "category": None, "title": None,
         "body": None},
        {"id": "q2", "text": "battery dead in winter", "category": None, "title": None,
         "body": None}]
    assert read_queries(beir / "queries.tsv") == read_queries(beir / "queries.jsonl")
    assert read_qrels(beir / "qrels" / "test.tsv") == {"q1": {"d1": 1}, "q2": {"d3": 1}}


@pytest.mark.parametrize("queries", ["queries.jsonl", "queries.tsv"])
def test_build_and_evaluate(capsys, beir, queries):
    assert main(["build-index", str(beir / "corpus.jsonl"), "-o", str(beir / "idx"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert "questions  3" in out and err == ""  # `text` indexed: no warning
    assert main(["evaluate", str(beir / "idx"), "--queries", str(beir / queries), "--qrels",
                 str(beir / "qrels" / "test.tsv"), "--metrics", "map", "p@1", "-q"]) == 0
    out, _ = capsys.readouterr()
    assert "2 queries evaluated" in out
    assert out.splitlines()[-1].split()[1:] == ["100.00", "100.00"]


def test_full_retrieval_counts_relevant_documents_never_retrieved(capsys, beir):
    """Full retrieval defaults to trec_eval's convention: a relevant document that no
    search finds lowers AP and recall (the rerank convention ignored it: 100.00)."""
    corpus = beir / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + '{"_id": "d4", "text": "Immigration paperwork '
                                           'at the embassy."}\n')
    qrels = beir / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q1\td4\t1\n")
    assert main(["build-index", str(corpus), "-o", str(beir / "idx"), "-q"]) == 0
    capsys.readouterr()
    argv = ["evaluate", str(beir / "idx"), "--queries", str(beir / "queries.jsonl"), "--qrels",
            str(qrels), "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 queries evaluated (trec convention, full retrieval of the archive)" in out
    header, row = out.splitlines()[1].split(), out.splitlines()[2].split()
    assert header == ["MAP", "MRR", "P@1", "P@5", "P@10", "NDCG@10"]
    scores = dict(zip(header, map(float, row[1:])))
    assert scores["MAP"] == 75.0 and scores["MRR"] == 100.0  # q1: AP (1 + 0) / 2
    assert main(argv + ["--metrics", "map", "r@10", "--convention", "semeval"]) == 0
    out = capsys.readouterr().out
    assert "(semeval convention, full retrieval of the archive)" in out
    assert out.splitlines()[-1].split()[1:] == ["100.00", "100.00"]  # what it hid


@pytest.mark.parametrize("content, message", [
    ('{"_id": null, "text": "x"}\n', r"q\.jsonl:1: a query needs an 'id' \(or '_id'\)"),
    ('{"_id": true, "text": "x"}\n', r"q\.jsonl:1: a query id must be a string or an integer"),
    ('{"_id": "a", "text": ["x"]}\n', r"q\.jsonl:1: the query's 'text' must be a string; got list"),
    ('[1]\n', r"q\.jsonl:1: a query must be a JSON object; got list"),
    ('{"_id": "a", "x": ' + "[" * 5000 + "]" * 5000 + "}\n",
     r"q\.jsonl:1: unsupported JSON: a number too long or nesting too deep"),
])
def test_bad_queries(tmp_path, content, message):
    (tmp_path / "q.jsonl").write_text(content)
    with pytest.raises(ArchiveError, match=message):
        read_queries(tmp_path / "q.jsonl")
