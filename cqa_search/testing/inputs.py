"""The reliability loops of issue 43: hostile input through every face of the engine (the
command line, the HTTP server with its write API, MCP over stdio). Shared by the tests
(small N) and ``scripts/reliability.py``.

- :func:`date_archives`: archives and a Python caller giving questions dates no int64
  holds, milliseconds for seconds, the second after 9999-12-31, text of digits that are
  no ASCII digits ("²"): build-index and add refuse the record by its line (skipped and
  counted with ``--skip-invalid``), text that is no date is built undated, and the
  filters of the index work after.
- :func:`calendar_filters`: ``date:`` filters and ``--after``/``--before`` at both ends
  of the calendar, on an index holding a question of 0001-01-01 and one of 9999-12-31:
  the expected questions, or one line and exit 1.
- :func:`closed_streams`: commands with standard output, error or input closed
  (``>&-``, ``2>&-``, ``<&-``).
- :func:`control_characters`: an archive whose every field holds terminal control
  sequences, through every printer of the command line and the interactive session (on a
  pseudo-terminal): never one raw.
- :func:`token_files`: ``serve --token-file`` on /dev/zero, a FIFO, a directory, a large
  file, a link to a device, a token that is not ASCII.
- :func:`mcp_session`: the filters and a question of every field as MCP tool calls over
  stdio, then SIGINT or SIGTERM after the handshake.
- :func:`write_server`: a server taking writes: bad dates posted (then its tags and
  filters), the calendar filters over HTTP, bodies that stall or are cut, and the
  questions like a question of megabytes (timed, with another client answered meanwhile).
"""
from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .environment import CLI, TIMEOUT, Server, free_port, one_line_error, run_cli

__all__ = ["BAD_DATES", "NOT_DATES", "CALENDAR_FILTERS", "PAYLOAD", "date_archives",
           "calendar_filters", "closed_streams", "control_characters", "token_files",
           "mcp_session", "write_server", "edge_index", "MCPSession"]

#: Dates a question may not have (each refused with its field named).
BAD_DATES = [1e30, -1e30, 2 ** 63, 1e19, 253402300800, -62135596801,
             "99999999999999999999", "0001-01-01T00:00:00+01:00", 1470152354947]
#: Values of a date field that are no date (the question is built, undated).
NOT_DATES = ["²", "²³⁴", "soon", "", True, None, "1e30"]
#: The two questions of :func:`edge_index`: dated on the first and the last day.
FIRST, LAST = "edge-first", "edge-last"
#: ``(query or option pair, the edge questions it finds; None: refused)``.
CALENDAR_FILTERS = [
    ("date:9999-12-31", {LAST}), ("date:9999-12", {LAST}), ("date:9999", {LAST}),
    ("date:>9999", None), ("date:>=9999", {LAST}), ("date:>9999-12-31", None),
    ("date:<=9999-12-31", {FIRST, LAST}), ("date:<=9999", {FIRST, LAST}),
    ("date:9999-12..", {LAST}), ("date:..9999-12", {FIRST, LAST}),
    ("date:9999-12-31..", {LAST}), ("date:0001", {FIRST}), ("date:<0001", None),
    ("date:<=0001-01-01", {FIRST}), ("date:0000", None), ("date:>=0001-01-01", {FIRST, LAST}),
    (("--after", "9999-12"), {LAST}), (("--before", "9999-12-31"), {FIRST}),
    (("--after", "9999-12-31"), {LAST}), (("--before", "0001"), None),
    (("--after", "9999"), {LAST}), (("--before", "10000"), None),
]
#: Terminal control sequences: clear the screen, retitle the window, a bell, a CSI of C1,
#: an OSC 8 hyperlink, a carriage return and a backspace that rewrite the line, a NUL.
PAYLOAD = ("\x1b[2J\x1b]0;owned\x07\x9b2J\x1b]8;;http://example.invalid/\x1b\\link"
           "\x1b]8;;\x1b\\\rX\x08\x00")
_RAW = ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\x1b]8;", "\x08", "\x00", "\rX")
_ARGUMENT = PAYLOAD.replace("\x00", "")  # (no NUL in a command line)


def _clean(result) -> bool:
    """Exit 0, or one line and exit 1; never a traceback, an internal error or a hang."""
    return result["code"] == 0 and "Traceback" not in result["stderr"] \
        and "internal error" not in result["stderr"] or one_line_error(result)


def _jsonl(path, records) -> Path:
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in records))
    return Path(path)


def _n_questions(index) -> int:
    from cqa_search import SearchEngine

    return SearchEngine.open(index).n_questions


# ---------------------------------------------------------------------------------------
# Dates
# ---------------------------------------------------------------------------------------
def date_archives(index, work, values=None) -> list:
    """Each date of :data:`BAD_DATES` and :data:`NOT_DATES` (``values``: those) in a JSONL
    archive between two good records (build-index without and with ``--skip-invalid``,
    then a tag and a date filter on what was built), in a CSV cell (when text), and added
    to a copy of ``index`` (``add``); then from Python."""
    from cqa_search import Question

    work = Path(work)
    out = []
    for value in BAD_DATES + NOT_DATES if values is None else values:
        bad = value in BAD_DATES
        archive = _jsonl(work / "dates.jsonl", [
            {"id": "a", "title": "visa renewal", "tags": ["t"], "date": "2014-05-01"},
            {"id": "b", "title": "visa office", "tags": ["t"], "date": value},
            {"id": "c", "title": "visa photo", "tags": ["t"]}])
        target = work / "dates-index"
        shutil.rmtree(target, ignore_errors=True)
        r = run_cli(["build-index", archive, "-o", target, "-q"])
        said = "dates.jsonl:2: field 'date': " in r["stderr"]
        out.append({"case": f"build-index, date {value!r}", "code": r["code"],
                    "stderr": r["stderr"][-300:],
                    "ok": one_line_error(r) and said if bad else r["code"] == 0})
        if bad:
            r = run_cli(["build-index", archive, "-o", target, "-q", "--skip-invalid"])
            out.append({"case": f"build-index --skip-invalid, date {value!r}",
                        "code": r["code"], "stderr": r["stderr"][-300:],
                        "ok": r["code"] == 0 and _n_questions(target) == 2
                        and "1 invalid record(s) were skipped" in r["stderr"]})
        filtered = [run_cli(["query", target, f"visa {f}"]) for f in ("tag:t", "date:2014")]
        out.append({"case": f"tag: and date: filters after date {value!r}",
                    "code": [f["code"] for f in filtered],
                    "stderr": " | ".join(f["stderr"][-200:] for f in filtered),
                    "ok": all(f["code"] == 0 and f["stderr"] == "" for f in filtered)})
        if isinstance(value, str):
            csv = work / "dates.csv"
            csv.write_text(f"id,title,date\na,visa renewal,2014-05-01\nb,visa office,{value}\n")
            r = run_cli(["build-index", csv, "-o", work / "dates-csv", "-q"])
            out.append({"case": f"build-index of a CSV, date {value!r}", "code": r["code"],
                        "stderr": r["stderr"][-300:],
                        "ok": one_line_error(r) and "dates.csv:3: field 'date': " in
                        r["stderr"] if bad else r["code"] == 0})
        if bad:
            copy = work / "dates-add"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(index, copy, symlinks=True)
            before = _n_questions(copy)
            added = _jsonl(work / "added.jsonl", [{"id": "new", "title": "x", "date": value}])
            r = run_cli(["add", copy, added, "-q"])
            out.append({"case": f"add, date {value!r}", "code": r["code"],
                        "stderr": r["stderr"][-300:],
                        "ok": one_line_error(r) and "field 'date'" in r["stderr"]
                        and _n_questions(copy) == before})
            try:
                Question("p", "x", extra={"date": value})
                refused = False
            except ValueError as exc:
                refused = str(exc).startswith("field 'date': ")
            out.append({"case": f"Question(extra={{'date': {value!r}}})", "ok": refused})
    return out


def edge_index(index, work) -> Path:
    """A copy of ``index`` with a question dated 0001-01-01 and one 9999-12-31T23:59:59
    (both titled "calendar edge")."""
    copy = Path(work) / "edge"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(index, copy, symlinks=True)
    added = _jsonl(Path(work) / "edge.jsonl", [
        {"id": FIRST, "title": "calendar edge first", "date": "0001-01-01"},
        {"id": LAST, "title": "calendar edge last", "creation_date": "9999-12-31T23:59:59"}])
    r = run_cli(["add", copy, added, "-q"])
    if r["code"] != 0:
        raise RuntimeError(f"cannot add the edge questions: {r['stderr']}")
    return copy


def _filter_args(expr) -> list:
    return ["calendar edge", *expr] if isinstance(expr, tuple) else [f"calendar edge {expr}"]


def _found(expected, ids) -> bool:
    return {FIRST, LAST}.intersection(ids) == expected


def calendar_filters(edge, filters=None) -> list:
    """Each of :data:`CALENDAR_FILTERS` (``filters``: those) through ``cqa-search query
    --json`` on ``edge`` (:func:`edge_index`)."""
    out = []
    for expr, expected in filters or CALENDAR_FILTERS:
        r = run_cli(["query", edge, *_filter_args(expr), "--json"])
        if expected is None:
            ok = one_line_error(r) and "bad date filter" in r["stderr"]
        else:
            ok = r["code"] == 0 and _found(expected, [h["id"] for h in json.loads(
                r["stdout"])["hits"]])
        out.append({"case": f"query {expr}", "code": r["code"], "stderr": r["stderr"][-300:],
                    "ok": ok})
    return out


# ---------------------------------------------------------------------------------------
# Closed standard streams
# ---------------------------------------------------------------------------------------
def closed_streams(index, work, labels=None) -> list:
    """Commands with a standard stream closed by the shell: exit 0 (or 1 for a refused
    query), no traceback, nothing but results on standard output."""
    work = Path(work)
    cases = [("query", ["query", index, "visa renewal"], 0),
             ("query --json", ["query", index, "visa renewal", "--json"], 0),
             ("query, a refused filter", ["query", index, "visa date:>9999"], 1),
             ("info", ["info", index], 0),
             ("export-ranker", ["export-ranker", index], 0),
             ("build-index", ["build-index", work / "closed.jsonl", "-o", work / "closed",
                              "-q"], 0),
             ("piped queries", ["query", index], 0)]
    _jsonl(work / "closed.jsonl", [{"id": "a", "title": "visa renewal"}])
    out = []
    for label, argv, status in cases:
        if labels is not None and label not in labels:
            continue
        for closing in (">&-", "2>&-", "<&-"):
            shutil.rmtree(work / "closed", ignore_errors=True)
            try:
                proc = subprocess.run(["sh", "-c", f'exec "$@" {closing}', "sh", *CLI,
                                       *map(str, argv)], input="visa\n", capture_output=True,
                                      text=True, timeout=TIMEOUT)
                code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
            except subprocess.TimeoutExpired:
                code, stdout, stderr = "hang", "", ""
            said = stdout + stderr  # (what a closed stream was given is not here)
            ok = code == status and "Traceback" not in said and "internal error" not in said \
                and "cqa-search:" not in stdout and (status == 1 or "error" not in stderr)
            out.append({"case": f"{label} {closing}", "code": code,
                        "stderr": stderr[-300:], "stdout": stdout[-200:], "ok": ok})
    return out


# ---------------------------------------------------------------------------------------
# Control characters
# ---------------------------------------------------------------------------------------
def _laced_archive(path) -> Path:
    """Questions whose every field holds :data:`PAYLOAD`."""
    return _jsonl(path, [
        {"id": "laced" + PAYLOAD, "title": "visa renewal laced " + PAYLOAD,
         "body": "how to renew " + PAYLOAD, "category": "Travel" + PAYLOAD,
         "tags": ["visa" + PAYLOAD], "answers": ["at the office " + PAYLOAD]},
        {"id": "plain", "title": "visa renewal office hours", "body": "when is it open",
         "category": "Travel" + PAYLOAD, "answers": ["nine to five"], "best_answer": 0}])


def _raw(text) -> list:
    return [seq for seq in _RAW if seq in text]


def _read(fd, until, deadline) -> bytes:
    """What ``fd`` gives until ``until(data)``, its end or ``deadline``."""
    data = b""
    while time.monotonic() < deadline and not until(data):
        if select.select([fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # (the other side closed: EIO)
                break
            if not chunk:
                break
            data += chunk
    return data


def _repl(index, lines, seconds=TIMEOUT) -> str:
    """What the interactive session writes to a pseudo-terminal given ``lines`` (each
    after its prompt), then ``:quit``."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(CLI + ["query", str(index), "--color", "never"], stdin=slave,
                            stdout=slave, stderr=slave, close_fds=True,
                            env={**os.environ, "TERM": "dumb", "HOME": str(Path(index).parent)})
    os.close(slave)
    deadline = time.monotonic() + seconds
    prompt = lambda data: data.endswith(b"> ")  # noqa: E731
    output = _read(master, prompt, deadline)
    for line in [*lines, ":quit"]:
        os.write(master, line.encode() + b"\n")
        output += _read(master, prompt, deadline)
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    os.close(master)
    return output.decode("utf-8", "replace")


def control_characters(work, labels=None) -> list:
    """An archive laced with :data:`PAYLOAD` built, then shown by every printer: no
    control sequence of the archive reaches the output raw."""
    work = Path(work)
    index = work / "laced"
    shutil.rmtree(index, ignore_errors=True)
    r = run_cli(["build-index", _laced_archive(work / "laced.jsonl"), "-o", index, "-q"])
    if r["code"] != 0:
        raise RuntimeError(f"cannot build the laced archive: {r['stderr']}")
    # (label, argv, whether the laced question's text is shown)
    cases = [("query", ["query", index, "visa renewal"], True),
             ("query --color always --explain", ["query", index, "visa renewal", "--color",
                                                 "always", "--explain"], True),
             ("query --like", ["query", index, "--like", "plain"], True),
             ("query, a query of control characters", ["query", index, "visa" + _ARGUMENT],
              False),
             ("query --like, an unknown id", ["query", index, "--like", "x" + _ARGUMENT], False),
             ("query --category, an unknown name", ["query", index, "visa", "--category",
                                                     "Trave" + _ARGUMENT], False),
             ("info", ["info", index], False)]
    out = []
    for label, argv, shown in cases:
        if labels is None or label in labels:
            r = run_cli(argv)
            said = r["stdout"] + r["stderr"]
            out.append({"case": label, "code": r["code"], "raw": _raw(said),
                        "ok": _clean(r) and not _raw(said)
                        and (not shown or "\\x1b]0;owned" in said)})
    if labels is None or "piped queries" in labels:
        proc = subprocess.run(CLI + ["query", str(index)], input=f"q1\tvisa{PAYLOAD}\nvisa\n",
                              capture_output=True, text=True, timeout=TIMEOUT)
        said = proc.stdout + proc.stderr
        out.append({"case": "piped queries", "code": proc.returncode, "raw": _raw(said),
                    "ok": proc.returncode == 0 and not _raw(said)})
    if labels is None or "interactive session" in labels:
        said = _repl(index, ["visa renewal", ":show 1", ":show 2", ":like 1", ":categories",
                             ":category Trave"])
        out.append({"case": "interactive session (:show, :like, :categories, :category)",
                    "raw": _raw(said), "ok": not _raw(said) and "\\x1b]0;owned" in said})
    return out


# ---------------------------------------------------------------------------------------
# Token files
# ---------------------------------------------------------------------------------------
def token_files(index, work, labels=None) -> list:
    """``serve --allow-writes --token-file F`` with F no token file: one line and exit 1,
    at once (never reading without end, waiting on a FIFO, or starting); ``labels``: only
    those cases."""
    work = Path(work)
    files = work / "tokens"
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir()
    os.mkfifo(files / "fifo")
    (files / "big").write_bytes(b"a" * (1 << 20))
    os.symlink("/dev/zero", files / "zero-link")
    (files / "latin1").write_bytes(b"caf\xe9" * 8)
    (files / "utf8").write_text("é" * 20)
    (files / "empty").write_text("")
    (files / "short").write_text("abc\n")
    (files / "spaced").write_text("0123456789 abcdef0123\n")
    out = []
    for label, path in [("/dev/zero", "/dev/zero"), ("a FIFO", files / "fifo"),
                        ("a directory", files), ("1 MiB", files / "big"),
                        ("a link to /dev/zero", files / "zero-link"),
                        ("not UTF-8", files / "latin1"), ("a non-ASCII token", files / "utf8"),
                        ("empty", files / "empty"), ("a short token", files / "short"),
                        ("a token with a space", files / "spaced")]:
        if labels is not None and label not in labels:
            continue
        t0 = time.monotonic()
        r = run_cli(["serve", index, "--allow-writes", "--token-file", path, "--port",
                     free_port()], timeout=TIMEOUT)
        out.append({"case": f"--token-file {label}", "code": r["code"],
                    "stderr": r["stderr"][-300:], "seconds": time.monotonic() - t0,
                    "ok": one_line_error(r) and ("--token-file" in r["stderr"]
                                                 or "write token" in r["stderr"])})
    return out


# ---------------------------------------------------------------------------------------
# MCP over stdio
# ---------------------------------------------------------------------------------------
class MCPSession:
    """``cqa-search mcp INDEX`` over pipes, speaking JSON-RPC (a line each way)."""

    def __init__(self, index):
        self.proc = subprocess.Popen(CLI + ["mcp", str(index)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.n = 0

    def call(self, method, params=None, notify=False):
        message = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.n += 1
            message["id"] = self.n
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        if notify:
            return None
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        return json.loads(self.proc.stdout.readline()) if ready else None

    def handshake(self):
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "reliability", "version": "1"}})
        self.call("notifications/initialized", notify=True)

    def tool(self, name, arguments) -> tuple:
        """``(is_error, text)`` of a tool call (``(None, None)``: no answer)."""
        answer = self.call("tools/call", {"name": name, "arguments": arguments})
        if answer is None or "result" not in answer:
            return None, json.dumps(answer)
        result = answer["result"]
        return bool(result.get("isError")), result["content"][0]["text"]

    def stop(self, sig):
        """Send ``sig``: ``(seconds to exit or None, exit status, stderr)``."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=20)
            took = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            took = None
        return took, self.proc.returncode, self.proc.stderr.read().decode("utf-8", "replace")


def mcp_session(edge, filters=None) -> list:
    """The calendar filters (as query syntax and as ``after``/``before``), a laced query
    and a missing question as tool calls; SIGINT after the handshake and after a call,
    SIGTERM: the server ends in seconds, without a traceback."""
    out = []
    session = MCPSession(edge)
    session.handshake()
    for expr, expected in filters or CALENDAR_FILTERS:
        if isinstance(expr, tuple):
            arguments = {"query": "calendar edge", expr[0][2:]: expr[1]}
        else:
            arguments = {"query": f"calendar edge {expr}"}
        error, text = session.tool("search", arguments)
        if expected is None:
            ok = error is True and "bad date filter" in text
        else:
            ok = error is False and _found(expected, [h["id"] for h in json.loads(text)["hits"]])
        out.append({"case": f"mcp search {expr}", "error": error, "text": (text or "")[:300],
                    "ok": ok})
    for name, arguments in [("search", {"query": "visa" + PAYLOAD}),
                            ("get_question", {"question_id": "x" + PAYLOAD}),
                            ("similar", {"question_id": LAST})]:
        error, text = session.tool(name, arguments)
        out.append({"case": f"mcp {name} {json.dumps(arguments)[:40]}", "error": error,
                    "ok": error is not None and text != f"Error executing tool {name}"})
    for label, sig, calls in [("SIGINT after a call", signal.SIGINT, session),
                              ("SIGINT after the handshake", signal.SIGINT, None),
                              ("SIGTERM after the handshake", signal.SIGTERM, None)]:
        if calls is None:
            session = MCPSession(edge)
            session.handshake()
        took, code, err = session.stop(sig)
        out.append({"case": f"mcp: {label}", "seconds": took, "code": code,
                    "stderr": err[-300:], "ok": took is not None and took < 10
                    and "Traceback" not in err})
    return out


# ---------------------------------------------------------------------------------------
# A server that takes writes
# ---------------------------------------------------------------------------------------
TOKEN = "reliability-token-0123456789"


def _http(url, method="GET", body=None, timeout=TIMEOUT) -> tuple:
    """``(status, JSON document)`` of a request (with the token); status ``"hang"`` when
    no answer came in ``timeout`` seconds."""
    request = urllib.request.Request(url, method=method, data=body, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
    except (TimeoutError, urllib.error.URLError) as exc:
        if isinstance(exc, TimeoutError) or isinstance(exc.reason, TimeoutError):
            return "hang", {}
        raise


def _big_question(path, megabytes) -> Path:
    """A question of ``megabytes`` MB of the demo archive's words."""
    from ..data import DEMO_ARCHIVE, demo_dir

    words = " ".join(json.loads(line)["title"] for line in
                     (demo_dir() / DEMO_ARCHIVE).read_text().splitlines())
    body = (words + " ") * (megabytes * (1 << 20) // (len(words) + 1) + 1)
    return _jsonl(path, [{"id": "huge", "title": "a question of megabytes", "body": body}])


def _stalled_bodies(port, n, cut) -> dict:
    """``n`` writes that send their head and 10 bytes of 1,000, then stall (``cut``: or
    close the connection): seconds until the server closed each."""
    from ..server.protocol import BODY_TIMEOUT

    head = (f"POST /api/questions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT + 30)
             for _ in range(n)]
    t0 = time.monotonic()
    for s in socks:
        s.sendall(head + b'{"id": "z"')
    if cut:
        for s in socks:
            s.close()
        return {"clients": n, "closed": n}
    closed = []
    for s in socks:
        try:
            closed.append(time.monotonic() - t0 if s.recv(1024) == b"" else None)
        except OSError:
            closed.append(None)
        s.close()
    return {"clients": n, "closed": sum(c is not None for c in closed),
            "last closed after": max((c for c in closed if c is not None), default=None)}


def write_server(edge, work, *, n_bodies=20, megabytes=4, filters=None) -> list:
    """A server with writes on a copy of ``edge`` (:func:`edge_index`) holding a question
    of ``megabytes`` MB: see the module docstring. One result per step."""
    work = Path(work)
    copy = work / "served-writes"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(edge, copy, symlinks=True)
    r = run_cli(["add", copy, _big_question(work / "huge.jsonl", megabytes), "-q"],
                timeout=TIMEOUT * 30)
    if r["code"] != 0:
        raise RuntimeError(f"cannot add the huge question: {r['stderr']}")
    (work / "token").write_text(TOKEN + "\n")
    out = []
    with Server(copy, "--allow-writes", "--token-file", str(work / "token")) as server:
        api = server.url + "/api/questions"
        for value in BAD_DATES + NOT_DATES:
            status, doc = _http(api, "POST", json.dumps(
                {"id": f"posted-{len(out)}", "title": "posted visa", "date": value}).encode())
            bad = value in BAD_DATES
            out.append({"case": f"POST a question dated {value!r}", "status": status,
                        "ok": status == 400 and "field 'date'" in doc.get("detail", "")
                        if bad else status == 201})
        for path in ["/api/tags", "/api/search?q=visa+tag:eyes", "/api/search?q=visa&after=2000",
                     "/api/search?q=posted+visa+date:>=2000"]:
            status, _ = _http(server.url + path)
            out.append({"case": f"GET {path} after the posts", "status": status,
                        "ok": status == 200})
        for expr, expected in filters or CALENDAR_FILTERS:
            query = {"q": "calendar edge" + ("" if isinstance(expr, tuple) else " " + expr)}
            if isinstance(expr, tuple):
                query[expr[0][2:]] = expr[1]
            status, doc = _http(server.url + "/api/search?" + urllib.parse.urlencode(query))
            ok = status == 400 and "bad date filter" in doc.get("detail", "") \
                if expected is None else status == 200 and _found(
                    expected, [h["id"] for h in doc["hits"]])
            out.append({"case": f"GET /api/search {expr}", "status": status, "ok": ok})
        answered = []

        def health():  # another client meanwhile: its slowest answer
            end = time.monotonic() + 3
            while time.monotonic() < end:
                t = time.monotonic()
                try:
                    server.get("/health")
                except OSError:  # (not answered in 5 s)
                    pass
                answered.append(time.monotonic() - t)

        other = threading.Thread(target=health)
        other.start()
        t0 = time.monotonic()
        status, doc = _http(server.url + "/api/questions/huge/similar?k=10")
        took = time.monotonic() - t0
        other.join()
        out.append({"case": f"GET /api/questions/huge/similar ({megabytes} MB question)",
                    "status": status, "seconds": took,
                    "slowest other answer": max(answered, default=None),
                    "ok": status == 200 and len(doc.get("hits", ())) == 10})
        stalled = _stalled_bodies(server.port, n_bodies, cut=False)
        out.append({"case": f"{n_bodies} writes whose body stalls", **stalled,
                    "ok": stalled["closed"] == n_bodies})
        cut = _stalled_bodies(server.port, n_bodies, cut=True)
        time.sleep(1)
        status, _ = _http(server.url + "/api/search?q=visa")
        out.append({"case": f"{n_bodies} writes cut mid-body", **cut, "status": status,
                    "ok": status == 200})
        took, log = server.stop()
    lines = [line for line in log.splitlines() if "did not come whole" in line]
    out.append({"case": "the server's log", "lines about bodies": len(lines),
                "tracebacks": log.count("Traceback"), "log": log[-500:],
                "ok": "Traceback" not in log and len(lines) == 2 * n_bodies})
    return out
