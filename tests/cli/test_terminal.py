"""The command line and the terminal (issue 43): archived control characters are escaped by
every printer, and a standard stream closed by the shell is the null device."""
import io
import re
import subprocess
import sys
from argparse import Namespace

import pytest

from cqa_search import Question, SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.cli._common import Style, printable

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b2J\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\\rX\x08\x00"
# any control character but tab and newline (and the colours the CLI writes itself)
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def laced(tmp_path_factory):
    """Questions whose every field holds control sequences."""
    path = tmp_path_factory.mktemp("laced") / "index"
    build_index([Question("a" + ESCAPES, "visa renewal " + ESCAPES, "how to renew " + ESCAPES,
                          category="Travel" + ESCAPES, tags=("visa" + ESCAPES,),
                          answers=("at the office " + ESCAPES,)),
                 Question("b", "visa office hours", "when", category="Travel" + ESCAPES,
                          answers=("nine to five",), best_answer=0)], path)
    return path


def test_printable_escapes_control_characters_but_tab_and_newline():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b[2J\x07\x9b\x7f\r\x00") == "\\x1b[2J\\x07\\x9b\\x7f\\x0d\\x00"
    assert printable("café ²") == "café ²"


@pytest.mark.parametrize("argv", [
    ["visa renewal"], ["visa renewal", "--explain"], ["visa renewal", "--json"],
    ["--like", "b"], ["visa", "--category", "Trave"], ["--like", "x" + ESCAPES[:-1]],
])
def test_no_printer_writes_an_archived_control_character(capsys, laced, argv):
    """`query` piped or on a terminal (--color always: the CLI's own colours only),
    its errors too; --json escapes them as JSON does."""
    for color in ("never", "always"):
        main(["query", str(laced), *argv, "--color", color])
        out, err = capsys.readouterr()
        said = out + err
        if color == "always":
            said = re.sub(r"\x1b\[[0-9;]*m", "", said)  # the CLI's own colours
        assert RAW.search(said) is None, said
        assert "Traceback" not in said


def test_the_interactive_session_and_info_escape_them(laced, capsys):
    from cqa_search.cli.query import _Session

    args = Namespace(k=10, category=None, answers=True, explain=True, facets=False, after=None,
                     before=None, tag=None, not_tag=None)
    out = io.StringIO()
    session = _Session(SearchEngine.open(laced), args, Style("never"), out=out)
    session.loop(io.StringIO("visa renewal\n:show 1\n:show 2\n:like 1\n:categories\n"
                             ":category Trave\n:quit\n"))
    said = out.getvalue()
    assert RAW.search(said) is None and "\\x1b]0;owned" in said
    assert "answer 1:" in said and "tags: visa\\x1b[2J" in said
    assert main(["info", str(laced)]) == 0
    assert RAW.search(capsys.readouterr().out) is None
    assert session.complete(":category Tr") == []  # readline would list them raw
    session.handle(":category " + session.engine.categories[0])
    assert RAW.search(session.prompt) is None and session.prompt.startswith("cqa [Travel\\x1b")


def _closed(closing, *argv, stdin=""):
    """``cqa-search ARGV`` with a standard stream closed by the shell."""
    return subprocess.run(["sh", "-c", f'exec "$@" {closing}', "sh", sys.executable, "-m",
                           "cqa_search", *map(str, argv)], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_a_closed_standard_stream_is_the_null_device(toy_index, tmp_path):
    """>&- made every command exit 70 (AttributeError on None), 2>&- put the error
    message on standard output, <&- failed the piped mode (exit 70)."""
    done = _closed(">&-", "query", toy_index, "renew visa")
    assert (done.returncode, done.stderr) == (0, "")
    done = _closed(">&-", "build-index", tmp_path / "none.jsonl", "-o", tmp_path / "i")
    assert done.returncode == 1 and done.stderr.startswith("cqa-search: error: no such file")
    done = _closed("2>&-", "query", toy_index, "visa date:>9999")
    assert (done.returncode, done.stdout) == (1, "")
    done = _closed("<&-", "query", toy_index, "--json")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "0 queries searched\n")
