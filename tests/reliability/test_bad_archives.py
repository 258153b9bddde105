"""A corpus of bad archives through `cqa-search build-index` (issue 12, item 6).

Every case is built here, in every format (JSONL, CSV/TSV, SemEval XML, StackExchange
dump, Yahoo! L6), and run through the command line in-process, twice:

- as given: exit 1 with one line ``cqa-search: error: FILE[:LINE]: ...`` and no traceback
  (or exit 0 for the hard but valid cases);
- with ``--skip-invalid``: exit 0, and no question silently lost: the questions indexed
  plus the records skipped are the records of the archive. A problem with the file as a
  whole (malformed XML, an unreadable file) still exits 1 with its one line.

The outputs that cannot be written (a path under a file, a full disk, stdout on
/dev/full) are the last tests.
"""
from __future__ import annotations

import os
import re
import resource
import socket
import stat
from dataclasses import dataclass

import pytest

from cqa_search.cli.__main__ import main

ERROR = "cqa-search: error: "


@dataclass
class Case:
    """An archive and what build-index must say about it.

    ``files`` maps names (under the test's folder) to their bytes; ``archive`` is the
    argument given to build-index. ``n_in`` counts the archive's records (what a perfect
    reader yields), ``n_skipped`` the invalid ones. ``error`` is a regex the one error
    line must match (None: the archive is valid); ``fatal`` means --skip-invalid cannot go
    past it. ``n_out`` overrides ``n_in - n_skipped`` where an invalid record is not a
    question (a StackExchange answer).
    """

    name: str
    files: dict
    archive: str
    n_in: int
    n_skipped: int = 0
    error: str | None = None
    fatal: bool = False
    args: tuple = ()
    n_out: int | None = None


def _lines(*lines) -> bytes:
    return b"".join((line.encode() if isinstance(line, str) else line) + b"\n"
                    for line in lines)


# --------------------------------------------------------------------------- JSONL
G1 = '{"id": "g1", "title": "How do I renew my visa?", "answers": ["At the office."]}'
G2 = '{"id": "g2", "title": "Where to buy a cheap sofa?", "body": "In town."}'


def jsonl(name, bad, error, *, n_skipped=1, fatal=False):
    """g1, the bad line(s) from line 2, g2."""
    bad = [bad] if isinstance(bad, (str, bytes)) else list(bad)
    return Case(f"jsonl-{name}", {"a.jsonl": _lines(G1, *bad, G2)}, "a.jsonl",
                2 + len(bad), n_skipped, error and r"a\.jsonl:2: " + error, fatal)


DEEP = "[" * 5000 + "]" * 5000
CASES = [
    jsonl("nested-5000", f'{{"id": "b", "title": "t", "x": {DEEP}}}',
          "JSON nested more than 1,024 levels deep"),
    jsonl("nested-300", '{"id": "b", "title": "t", "x": ' + "[" * 300 + "]" * 300 + "}",
          "the value of key 'x': it is nested too deeply"),
    jsonl("malformed", '{"id": "b", "title": }', r"malformed JSON: Expecting value \(column 22\)"),
    jsonl("truncated", '{"id": "b", "title": "cut', "malformed JSON: Unterminated string"),
    jsonl("latin1", b'{"id": "b", "title": "caf\xe9"}', r"not valid UTF-8 \(byte 25: b'\\xe9'\)"),
    jsonl("answers-object", '{"id": "b", "title": "t", "answers": {"a": "b"}}',
          "field 'answers' must be a list of strings; got dict"),
    jsonl("answers-number", '{"id": "b", "title": "t", "answers": 0}',
          "field 'answers' must be a list of strings; got int"),
    jsonl("answers-item", '{"id": "b", "title": "t", "answers": ["a", 2]}',
          "field 'answers' must be a list of strings; got an item of type int"),
    jsonl("tags-object", '{"id": "b", "title": "t", "tags": {"x": 1}}',
          "field 'tags' must be a list of strings; got dict"),
    jsonl("duplicate-of-float", '{"id": "b", "title": "t", "duplicate_of": 1.5}',
          "field 'duplicate_of' must be an id or a list of ids; got float"),
    jsonl("duplicate-of-bool", '{"id": "b", "title": "t", "duplicate_of": true}',
          "field 'duplicate_of' must be an id or a list of ids; got bool"),
    jsonl("duplicate-of-object", '{"id": "b", "title": "t", "duplicate_of": {"a": 1}}',
          "field 'duplicate_of' must be an id or a list of ids; got dict"),
    jsonl("id-5000-digits", '{"id": ' + "9" * 5000 + ', "title": "t"}',
          r"a number too large to read \(column 8\) \(write long numeric ids as strings\)"),
    jsonl("id-30-digits", '{"id": ' + "9" * 30 + ', "title": "t"}',
          r"field 'id' must be a non-empty string or an integer; got the number 1e\+30"),
    jsonl("id-true", '{"id": true, "title": "t"}', "field 'id' must be a non-empty string; got True"),
    jsonl("id-blank", '{"id": "  ", "title": "t"}', "field 'id' must be a non-empty string"),
    jsonl("id-null", '{"id": null, "title": "t"}', "field 'id' must be a non-empty string; got None"),
    jsonl("id-missing", '{"title": "t", "text": "words"}',
          r"missing required field 'id' \(the keys are 'title', 'body'; map one with "
          r"--columns id=KEY, in Python columns=\{'id': 'KEY'\}\)"),
    jsonl("title-number", '{"id": "b", "title": 0}', "field 'title' must be a string; got int"),
    jsonl("category-list", '{"id": "b", "title": "t", "category": ["x"]}',
          "field 'category' must be a string or null; got list"),
    jsonl("best-answer-range", '{"id": "b", "title": "t", "answers": ["a"], "best_answer": 5}',
          "field 'best_answer' is 5 but question 'b' has 1 answer"),
    jsonl("best-answer-float", '{"id": "b", "title": "t", "answers": ["a"], "best_answer": 0.0}',
          "field 'best_answer' must be an integer index or null; got 0.0"),
    jsonl("not-an-object", "[1, 2]", "a record must be a JSON object; got list"),
    jsonl("nan", '{"id": "b", "title": "t", "score": NaN}', "unsupported JSON: "),
    jsonl("lone-surrogate", r'{"id": "b", "title": "\ud800"}',
          "unsupported JSON: no low surrogate in string"),
    jsonl("no-text", '{"id": "b", "title": " ", "body": ""}',
          "question 'b' has neither a title nor a body"),
    jsonl("two-bad", ['{"id": "b"}', "{"], "question 'b' has neither a title nor a body",
          n_skipped=2),
    Case("jsonl-duplicate-id", {"a.jsonl": _lines(G1, G2, G1)}, "a.jsonl", 3, 1,
         r"a\.jsonl:3: duplicate question id 'g1'"),
    Case("jsonl-beir", {"corpus.jsonl": _lines(
        '{"_id": "d1", "title": "Renew a visa", "text": "My visa expires soon.", '
        '"metadata": {"tags": ["visa"]}}',
        '{"_id": "d2", "title": "", "text": "Where can I buy a cheap sofa?"}',
        '{"id": "d3", "contents": "pyserini keeps its text in contents"}')}, "corpus.jsonl", 3),
    Case("jsonl-long-line", {"a.jsonl": _lines(
        G1, '{"id": "long", "title": "t", "body": "' + "word " * 30_000 + '"}')}, "a.jsonl", 2),
    Case("jsonl-bom", {"a.jsonl": b"\xef\xbb\xbf" + _lines(G1, G2)}, "a.jsonl", 2),
    Case("jsonl-empty", {"a.jsonl": b"\n\n"}, "a.jsonl", 0, 0,
         "the archive is empty: no question was read", fatal=True),
]

# --------------------------------------------------------------------------- CSV / TSV
HEAD = "id,title,body"


def csv_case(name, rows, error, *, n_in, n_skipped=1, fatal=False, ext="csv", sep=","):
    text = "\n".join([HEAD.replace(",", sep), *rows]) + "\n"
    return Case(f"{ext}-{name}", {f"a.{ext}": text.encode("utf-8", "surrogateescape")},
                f"a.{ext}", n_in, n_skipped, error and rf"a\.{ext}:" + error, fatal)


UNCLOSED = ['1,"a quote that is never closed,x'] + [f"{i},question {i},body" for i in range(2, 1001)]
CASES += [
    csv_case("unclosed-quote-row-2-of-1000", UNCLOSED,
             "2: a quoted cell starting in this row is never closed", n_in=1000),
    csv_case("unclosed-quote-tsv", ['1\t"never closed\tx', "2\tsecond\tb", "3\tthird\tb"],
             "2: a quoted cell starting in this row is never closed", n_in=3, ext="tsv",
             sep="\t"),
    # The quote opened on line 3 is closed on line 5 by a stray quote: rows 4 and 5 are
    # read again, and row 5's own error is reported too.
    csv_case("quote-closed-late", ["g1,first,b", 'b1,"opens,x', "g2,second,b", 'g3,"q"w,x',
                                   "g4,fourth,b"],
             r"3: malformed CSV \(at line 5\): ',' expected after '\"'", n_in=5, n_skipped=2),
    csv_case("text-after-quote", ['g1,"a"b,c', "g2,second,b"],
             r"2: malformed CSV: ',' expected after '\"' \(a quote inside a quoted cell must "
             r"be doubled", n_in=2),
    csv_case("bare-cr", ["g1,a\rb,c", "g2,second,b"],
             "2: malformed CSV: new-line character seen in unquoted field", n_in=2),
    csv_case("cells", ["g1,first,b,extra", "g2,second,b"],
             "2: row has 4 cells but the header has 3", n_in=2),
    csv_case("latin1", ["g1,caf\udce9,b", "g2,second,b"], r"2: not valid UTF-8 \(byte b'\\xe9'\)",
             n_in=2),
    csv_case("no-text", ["g1,,", "g2,second,b"], "2: question 'g1' has neither a title nor a body",
             n_in=2),
    csv_case("duplicate-id", ["g1,first,b", "g1,again,b"], "3: duplicate question id 'g1'",
             n_in=2),
    csv_case("cell-200kb", ["g1,first," + "w " * 100_000, "g2,second,b"], None, n_in=2,
             n_skipped=0),
    csv_case("nul-byte", ["g1,a\x00b,c", "g2,second,b"], None, n_in=2, n_skipped=0),
    csv_case("quoted-multiline", ['g1,"two\nlines",b', "g2,second,b"], None, n_in=2, n_skipped=0),
    Case("csv-beir-header", {"a.csv": _lines("_id,title,text", "d1,Renew a visa,It expires.")},
         "a.csv", 1),
    Case("csv-best-answer-digits", {"a.csv": _lines("id,title,answers,best_answer",
                                                    "g1,t,a|b," + "9" * 5000)}, "a.csv", 1),
    Case("csv-no-id-column", {"a.csv": _lines("title,body", "t,b")}, "a.csv", 1, 0,
         r"a\.csv:1: no id column: name one with --columns id=COLUMN or use --auto-id \(in "
         r"Python: columns=\{'id': \.\.\.\} or auto_id=True\)", fatal=True),
    Case("csv-repeated-header", {"a.csv": _lines("id,title,title", "g1,a,b")}, "a.csv", 1, 0,
         r"a\.csv:1: the header names column 'title' more than once", fatal=True),
    Case("csv-header-quote", {"a.csv": _lines('id,"title', "g1,a")}, "a.csv", 1, 0,
         r"a\.csv:1: a quoted cell starting in this row is never closed", fatal=True),
    Case("csv-empty", {"a.csv": b""}, "a.csv", 0, 0,
         r"a\.csv: empty file: a header row is required", fatal=True),
    Case("csv-header-only", {"a.csv": _lines(HEAD)}, "a.csv", 0, 0,
         "the archive is empty: no question was read", fatal=True),
]

# --------------------------------------------------------------------------- SemEval XML


def thread(qid, subject="How do I renew my visa?", body="It expires soon.", *, rel=True):
    question = (f'<RelQuestion RELQ_ID="{qid}"><RelQSubject>{subject}</RelQSubject>'
                f'<RelQBody>{body}</RelQBody></RelQuestion>' if rel else "")
    return f'<Thread THREAD_SEQUENCE="{qid}">{question}<RelComment RELC_ID="{qid}_C1">' \
           f'<RelCText>An answer.</RelCText></RelComment></Thread>'


def semeval(name, threads, error=None, *, n_skipped=0, fatal=False, prolog="", n_in=None,
            args=()):
    text = f'<?xml version="1.0" encoding="UTF-8"?>\n{prolog}<root>\n' + "\n".join(threads) \
        + "\n</root>\n"
    return Case(f"semeval-{name}", {"s.xml": text.encode("utf-8", "surrogateescape")}, "s.xml",
                len(threads) if n_in is None else n_in, n_skipped,
                error and r"s\.xml:" + error, fatal, args)


LAUGHS = "<!DOCTYPE root [<!ENTITY a0 \"lol\">" + "".join(
    f'<!ENTITY a{i} "{("&a%d;" % (i - 1)) * 10}">' for i in range(1, 10)) + "]>\n"
CASES += [
    semeval("no-relquestion", [thread("Q1_R1"), thread("Q1_R2", rel=False)],
            "4: thread 'Q1_R2' has no <RelQuestion>", n_skipped=1),
    semeval("no-id", [thread("Q1_R1"), thread("Q1_R2").replace(' RELQ_ID="Q1_R2"', "")
                      .replace(' THREAD_SEQUENCE="Q1_R2"', "")],
            "4: <RelQuestion> has no RELQ_ID", n_skipped=1),
    semeval("no-text", [thread("Q1_R1"), thread("Q1_R2", subject="", body="")],
            "4: question 'Q1_R2' has neither a title nor a body", n_skipped=1),
    semeval("malformed", [thread("Q1_R1"), thread("Q1_R2") + "</Oops>"],
            "4: malformed XML at column", fatal=True),
    semeval("latin1", [thread("Q1_R1"), thread("Q1_R2", subject="caf\udce9")],
            r"4: not valid UTF-8 \(byte b'\\xe9'", fatal=True),
    semeval("billion-laughs", [thread("Q1_R1", subject="&a9;")],
            "4: malformed XML at column .*amplification", fatal=True, prolog=LAUGHS),
    semeval("external-entity", [thread("Q1_R1", subject="&x;")],
            "4: malformed XML at column .*undefined entity", fatal=True,
            prolog='<!DOCTYPE root [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'),
    semeval("no-thread", [], r" no <Thread> element", fatal=True, n_in=0,
            args=("--format", "semeval")),
    semeval("deep-markup", [thread("Q1_R1"), thread("Q1_R2", body="<b>" * 5000 + "</b>" * 5000)]),
]

# --------------------------------------------------------------------------- StackExchange


def posts(*rows, root="posts"):
    return _lines('<?xml version="1.0" encoding="utf-8"?>', f"<{root}>", *rows, f"</{root}>")


Q1 = '<row Id="1" PostTypeId="1" Title="How do I renew my visa?" Body="&lt;p&gt;Soon&lt;/p&gt;" Score="2" />'
A1 = '<row Id="2" PostTypeId="2" ParentId="1" Body="At the office." Score="1" />'
Q3 = '<row Id="3" PostTypeId="1" Title="Where to buy a sofa?" Body="Cheap." Score="0" />'


def dump(name, rows, error=None, *, n_in, n_skipped=0, fatal=False, n_out=None, links=None):
    files = {"site.example/Posts.xml": posts(*rows)}
    if links is not None:
        files["site.example/PostLinks.xml"] = links
    return Case(f"stackexchange-{name}", files, "site.example", n_in, n_skipped,
                error and r"site\.example/" + error, fatal, n_out=n_out)


CASES += [
    dump("answer-id-superscript", [Q1, A1.replace('Id="2"', 'Id="²"'), Q3], n_in=2),
    dump("question-id-superscript", [Q1.replace('<row Id="1"', '<row Id="²"'), Q3], n_in=2),
    dump("no-title", [Q1, Q3.replace(' Title="Where to buy a sofa?"', "")],
         "Posts.xml:4: question Id=3 has no Title", n_in=2, n_skipped=1),
    dump("no-id", [Q1, Q3.replace('Id="3" ', "")], "Posts.xml:4: question row has no Id",
         n_in=2, n_skipped=1),
    dump("question-score", [Q1, Q3.replace('Score="0"', 'Score="²"')],
         "Posts.xml:4: question Id=3: Score is not an integer: '²'", n_in=2, n_skipped=1),
    dump("answer-score", [Q1, A1.replace('Score="1"', 'Score="x"'), Q3],
         "Posts.xml:4: answer Id=2: Score is not an integer: 'x'", n_in=2, n_skipped=1, n_out=2),
    dump("duplicate-id", [Q1, Q3, Q3], "Posts.xml:5: duplicate question id 'site.example:3'",
         n_in=3, n_skipped=1),
    dump("orphan-answer", [Q1, A1.replace('ParentId="1"', 'ParentId="99"'), Q3], n_in=2),
    dump("malformed", [Q1, Q3 + "<row"], "Posts.xml:5: malformed XML at column 1", n_in=2,
         fatal=True),
    dump("bad-links", [Q1, Q3], "PostLinks.xml:1: malformed XML at column", n_in=2, fatal=True,
         links=b"<postlinks><row></postlinks>\n"),
    Case("stackexchange-wrong-root", {"d/Posts.xml": posts(Q1, root="users")}, "d", 1, 0,
         r"d/Posts\.xml:2: expected the root element to be <posts>; found <users>", fatal=True),
    Case("stackexchange-no-posts", {"d/Users.xml": b"<users/>"}, "d", 0, 0,
         "is a folder without Posts.xml", fatal=True),
]

# --------------------------------------------------------------------------- Yahoo! L6


def document(uri="1", subject="How do I renew my visa?", content="It expires."):
    uri = f"<uri>{uri}</uri>" if uri is not None else ""
    return (f'<vespaadd><document type="wisdom">{uri}<subject>{subject}</subject>'
            f"<content>{content}</content><bestanswer>At the office.</bestanswer>"
            "<nbestanswers><answer_item>At the office.</answer_item></nbestanswers>"
            "<maincat>Travel</maincat></document></vespaadd>")


def yahoo(name, documents, error=None, *, n_skipped=0, fatal=False, n_in=None):
    text = _lines('<?xml version="1.0" encoding="UTF-8"?>', "<ystfeed>",
                  *(d.encode("utf-8", "surrogateescape") for d in documents), "</ystfeed>")
    return Case(f"yahoo-{name}", {"y.xml": text}, "y.xml",
                len(documents) if n_in is None else n_in, n_skipped,
                error and r"y\.xml:" + error, fatal)


CASES += [
    yahoo("no-uri", [document("1"), document(None)], "4: <document> has no <uri>", n_skipped=1),
    yahoo("no-text", [document("1"), document("2", "", "")],
          "4: question '2' has neither a title nor a body", n_skipped=1),
    yahoo("malformed", [document("1"), document("2", "a < b")], "4: malformed XML at column",
          fatal=True),
    yahoo("latin1", [document("1"), document("2", "caf\udce9")],
          r"4: not valid UTF-8 \(byte b'\\xe9'", fatal=True),
    yahoo("no-document", ["<other/>"], r" no <document> element", fatal=True, n_in=0),
    yahoo("deep-markup", [document("1"), document("2", content="<b>" * 5000 + "</b>" * 5000)]),
]


# --------------------------------------------------------------------------- the run
def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith(ERROR)]
    assert len(errors) == (code == 1), err  # one error line exactly when it fails
    return code, out, errors[0][len(ERROR):] if errors else None


def _counts(out):
    match = re.search(r"^questions  ([\d,]+)(?: \(([\d,]+) invalid records skipped\))?$", out,
                      re.MULTILINE)
    assert match, out
    return int(match.group(1).replace(",", "")), int((match.group(2) or "0").replace(",", ""))


def _write(folder, files):
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_bad_archive(capsys, tmp_path, case):
    _write(tmp_path, case.files)
    archive = tmp_path / case.archive
    argv = ["build-index", archive, "-o", tmp_path / "idx", "-q", *case.args]
    code, out, error = _run(capsys, *argv)
    if case.error is None and not case.fatal:
        assert code == 0, error
        assert _counts(out) == (case.n_in, 0)
    else:
        assert code == 1 and re.search(case.error, error), error
    code, out, skip_error = _run(capsys, *argv, "--skip-invalid")
    if case.fatal:
        assert code == 1 and re.search(case.error, skip_error), skip_error
        return
    assert code == 0, skip_error
    n_out, n_skipped = _counts(out)
    assert n_skipped == case.n_skipped
    expected = case.n_in - case.n_skipped if case.n_out is None else case.n_out
    assert n_out == expected  # every record is indexed or counted: none lost silently


def test_the_corpus_covers_every_format():
    families = {case.name.split("-")[0] for case in CASES}
    assert families == {"jsonl", "csv", "tsv", "semeval", "stackexchange", "yahoo"}
    assert len(CASES) >= 75


# --------------------------------------------------------------------------- odd files
@pytest.mark.parametrize("make, args, error", [
    ("socket", (), r"sock\.jsonl is a socket, not an archive file"),
    ("/proc/self/mem", (), r"/proc/self/mem: cannot read: Input/output error"),
    ("/proc/self/mem", ("--format", "jsonl"), r"/proc/self/mem: cannot read: Input/output error"),
    ("/dev/zero", ("--format", "jsonl"), "/dev/zero is a device, not an archive file"),
    ("fifo", (), r"cannot tell the format of .*pipe\.txt \(a pipe\) without reading it; pass "
                 r"--format"),
    ("missing", (), r"no such file: .*missing\.jsonl"),
    ("folder", (), "is a folder without Posts.xml"),
])
def test_unreadable_archive(capsys, tmp_path, make, args, error):
    if make == "socket":
        archive = tmp_path / "sock.jsonl"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(archive))
    elif make == "fifo":
        archive = tmp_path / "pipe.txt"
        os.mkfifo(archive)
    elif make == "missing":
        archive = tmp_path / "missing.jsonl"
    elif make == "folder":
        archive = tmp_path
    else:
        archive = make
    try:
        for skip in ((), ("--skip-invalid",)):
            code, _, message = _run(capsys, "build-index", archive, "-o", tmp_path / "idx", "-q",
                                    *args, *skip)
            assert code == 1 and re.search(error, message), message
    finally:
        if make == "socket":
            sock.close()


# --------------------------------------------------------------------------- odd outputs
def test_output_under_a_file_and_on_a_foreign_folder(capsys, tmp_path, fixtures):
    archive = fixtures / "toy_archive.jsonl"
    code, _, error = _run(capsys, "build-index", archive, "-o", "/dev/null/idx", "-q")
    assert code == 1 and error == "cannot write the index /dev/null/idx: /dev/null is not a directory"
    (tmp_path / "file").write_text("x")
    code, _, error = _run(capsys, "build-index", archive, "-o", tmp_path / "file", "-q")
    assert code == 1 and error.endswith("file exists and is not a directory")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    code, _, error = _run(capsys, "build-index", archive, "-o", tmp_path / "mine", "-q")
    assert code == 1 and "is not a cqa_search index; refusing to replace it" in error


def test_full_disk_keeps_the_previous_index(capsys, tmp_path, fixtures):
    """A file size limit (``ulimit -f``) stands for a full disk: writes fail with EFBIG."""
    archive = tmp_path / "big.jsonl"
    archive.write_text("".join(
        f'{{"id": "q{i}", "title": "question number {i} about {i % 97} things", '
        f'"answers": ["{"an answer " * 20}"]}}\n' for i in range(3000)))
    out = tmp_path / "idx"
    assert _run(capsys, "build-index", fixtures / "toy_archive.jsonl", "-o", out, "-q")[0] == 0
    before = sorted(os.listdir(out))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    try:
        code = main(["build-index", str(archive), "-o", str(out), "-q"])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    _, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert err.strip() == (f"{ERROR}cannot write the index {out}: File too large "
                           "(the index already there is unchanged)")
    assert sorted(os.listdir(out)) == before
    assert [p for p in os.listdir(tmp_path) if ".tmp-" in p] == []  # the temporary folder is gone


def test_stdout_on_a_full_device(capsys, monkeypatch, tmp_path, fixtures):
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        monkeypatch.setattr("sys.stdout", full)
        code = main(["build-index", str(fixtures / "toy_archive.jsonl"), "-o",
                     str(tmp_path / "idx"), "-q"])
        full.flush()  # what Python does at exit: nothing is left to fail there
    _, err = capsys.readouterr()
    assert code == 1
    assert err.strip() == f"{ERROR}cannot write to standard output: No space left on device"


def test_convert_reports_unreadable_inputs_and_unwritable_outputs(capsys, tmp_path, fixtures):
    semeval = fixtures / "semeval" / "sample-2016.xml"
    for argv, error in [
        (["convert", "stackfaq", "/proc/self/mem", "-o", tmp_path / "o"],
         "/proc/self/mem: cannot read: Input/output error"),
        (["convert", "semeval", "/proc/self/mem", "-o", tmp_path / "o"],
         "/proc/self/mem:1: cannot read: Input/output error"),
        (["convert", "semeval", semeval, "-o", "/dev/null/o"],
         "cannot write to /dev/null/o: /dev/null is not a directory"),
    ]:
        code, _, message = _run(capsys, *argv)
        assert code == 1 and message == error
