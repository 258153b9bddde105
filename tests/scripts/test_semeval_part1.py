"""SemEval-2016 train-part1's original questions as training queries of the full-retrieval
benchmark (scripts/full_retrieval.py ``train_part1``): the subject recovered from the
derived CSV's ``feature`` cells, the related questions mapped onto the archive's ids, and
a query whose own text is archived never retrieving itself."""
import csv
import json

import pytest

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.evaluation import run_queries


@pytest.fixture
def fr(monkeypatch):
    """scripts/full_retrieval.py as a module (the scripts import their _common)."""
    import importlib
    import os

    scripts = os.path.join(os.path.dirname(__file__), "..", "..", "scripts")
    monkeypatch.syspath_prepend(os.path.abspath(scripts))
    return importlib.import_module("full_retrieval")


def write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(["feature", "question", "rel_question", "labels"])
        out.writerows(rows)


def write_archive(folder, records):
    folder.mkdir()
    with open(folder / "archive.jsonl", "w", encoding="utf-8") as f:
        for rid, title, body in records:
            f.write(json.dumps({"id": rid, "title": title, "body": body}) + "\n")


# Two original questions. "Visa renewal" has related subjects that all start with "Visa":
# the common prefix "Visa renewal Visa " allows the splits "Visa", "Visa renewal" and
# "Visa renewal Visa"; the archive's subject of the first related question says which.
# Its body is also archived on its own (as a related question of another question):
# the query takes that record's id. "Sofa" has only irrelevant related questions.
ROWS = [["Visa renewal Visa fees", "How do I renew my visa?", "What are the visa fees?",
         "PerfectMatch"],
        ["Visa renewal Visa office hours", "How do I renew my visa?",
         "When does the visa office open?", "Relevant"],
        ["Visa renewal Visa for my wife", "How do I renew my visa?",
         "Can my wife get a visa?", "Irrelevant"],
        ["Sofa Best bakery", "Where can I buy a cheap sofa?", "Any good bakery?",
         "Irrelevant"],
        ["Sofa Used cars", "Where can I buy a cheap sofa?", "Where are used cars?",
         "Irrelevant"]]
ARCHIVE = [("P1:2", "", "What are the visa fees?"),      # part-1 copies: no subject
           ("P1:3", "", "When does the visa office open?"),
           ("P1:4", "", "Can my wife get a visa?"),
           ("P1:5", "", "Any good bakery?"),
           ("P1:6", "", "Where are used cars?"),
           ("T1", "Visa fees", "What are the visa fees?"),   # the same thread, a subject
           ("T2", "Fees of schools", "What are the visa fees?"),  # another thread
           ("P1:9", "", "How do I renew my visa?"),          # the first original question
           ("T3", "Nothing", "..."),                          # bodies without words
           ("P1:10", "", "?")]


def test_part1_subject(fr):
    features = [r[0] for r in ROWS[:3]]
    # without evidence: the longest split ("every related subject starts with Visa")
    assert fr.part1_subject(features) == ("Visa renewal Visa", 3, 0)
    # the archive's subject of a related question decides
    subjects = [{("visa", "fees")}, set(), set()]
    assert fr.part1_subject(features, subjects) == ("Visa renewal", 3, 1)
    assert fr.part1_subject(["Oil Massage center", "Oil Bakery"]) == ("Oil", 1, 0)
    assert fr.part1_subject(["ab", "ac"]) == ("", 0, 0)


def test_train_part1_maps_onto_the_archive(fr, tmp_path):
    write_csv(tmp_path / "P1.csv", ROWS)
    write_archive(tmp_path / "c", ARCHIVE)
    queries, qrels, report = fr.train_part1(tmp_path / "P1.csv", tmp_path / "c")
    # the query is the subject and body only (never a related subject: its answer), and
    # takes the id of its archived copy; "Sofa" has no relevant question
    assert queries == [{"id": "P1:9", "text": "Visa renewal\nHow do I renew my visa?",
                        "title": "Visa renewal", "body": "How do I renew my visa?",
                        "category": None}]
    # a related question goes to every copy of its text: the one without a subject and
    # the one with its subject (not T2, another subject; the labels are the CSV's)
    assert qrels == {"P1:9": {"P1:2": 2, "T1": 2, "P1:3": 1, "P1:4": 0}}
    assert report == {"originals": 2, "confirmed": 1, "one_split": 1, "self_archived": 1,
                      "relevant_pairs": 2, "relevant_mapped": 2, "relevant_records": 3,
                      "queries": 1}


def test_two_archived_copies_leave_a_query_out(fr, tmp_path):
    write_csv(tmp_path / "P1.csv", ROWS)
    write_archive(tmp_path / "c", ARCHIVE + [("T4", "Visa renewal",
                                              "How do I renew my visa")])
    queries, qrels, report = fr.train_part1(tmp_path / "P1.csv", tmp_path / "c")
    assert queries == [] and qrels == {} and report["left_out"] == 1


def test_a_part1_query_never_retrieves_itself(fr, tmp_path):
    write_csv(tmp_path / "P1.csv", ROWS)
    write_archive(tmp_path / "c", ARCHIVE)
    queries, qrels, _ = fr.train_part1(tmp_path / "P1.csv", tmp_path / "c")
    build_index(str(tmp_path / "c" / "archive.jsonl"), str(tmp_path / "idx"))
    engine = SearchEngine.open(str(tmp_path / "idx"), config=SearchConfig(ranker=None))
    run = run_queries(engine, queries, k=5)
    assert "P1:9" not in run["P1:9"]
    assert {"P1:2", "T1"} <= set(run["P1:9"])  # its relevant questions are found


def test_distinct_queries(fr):
    scored = [{"id": "Q1", "title": "Visa", "body": "How do I renew my visa?"}]
    fr.distinct_queries([{"id": "p1", "title": "Sofa", "body": "A sofa?"}], scored)
    with pytest.raises(RuntimeError, match="id"):
        fr.distinct_queries([{"id": "Q1", "title": "Sofa", "body": "A sofa?"}], scored)
    with pytest.raises(RuntimeError, match="text"):  # the same words, other punctuation
        fr.distinct_queries([{"id": "p1", "title": "", "body": "how do I renew my visa"}],
                            scored)
