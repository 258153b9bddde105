"""The reliability loops of issue 29: what the machine and other programs do to an index,
a command or a server. Shared by the tests (small N) and ``scripts/reliability.py``.

- :func:`hostile_files`: a FIFO, a device, a symbolic link out of the index (a generation
  directory too), a directory or an endless file where an index file should be; each
  case runs ``cqa-search query`` with a time and a memory limit: it must say "corrupted
  index" in one line and exit 1, never hang, eat memory or fail otherwise.
- :func:`full_disk`: every command that writes (build-index, fit, train, add, delete,
  compact, convert) under a file-size limit (``ulimit -f``: EFBIG) or on a full file system
  (a small tmpfs, where it can be mounted: ENOSPC): one line, exit 1, the index unchanged.
- :func:`terminal`: standard output on ``/dev/full``, in ASCII, or a pipe closed early.
- :func:`watcher` and :func:`slow_clients`: a server whose index gets a FIFO manifest, an
  endless one or a model that cannot load, then a good generation; clients that trickle
  their request heads.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir
from ..index.store import CURRENT, MANIFEST, current_generation

CLI = [sys.executable, "-m", "cqa_search"]
#: A command that takes longer is counted as a hang.
TIMEOUT = 60
#: Address space of a command (bytes): more is "eats memory" (the library and numpy map
#: a few hundred MB).
MEMORY = 3 << 30


def _limits(fsize=None):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return apply


def run_cli(args, *, fsize=None, env=None, stdout=subprocess.PIPE, timeout=TIMEOUT) -> dict:
    """``cqa-search ARGS`` in a child process with a memory limit (and a file-size limit):
    ``{"code", "stdout", "stderr"}``, code ``"hang"`` after ``timeout`` seconds or
    ``"signal N"`` for a crash."""
    try:
        proc = subprocess.run(CLI + [str(a) for a in args], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=timeout,
                              preexec_fn=_limits(fsize), env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"code": "hang", "stdout": "", "stderr": ""}
    code = proc.returncode if proc.returncode >= 0 else f"signal {-proc.returncode}"
    return {"code": code, "stdout": proc.stdout or "", "stderr": proc.stderr}


def one_line_error(result) -> bool:
    """Exit 1 with one line ``cqa-search: error: ...`` on stderr, after warnings if any."""
    lines = result["stderr"].strip().splitlines()
    return result["code"] == 1 and bool(lines) and lines[-1].startswith("cqa-search: error: ") \
        and all(line.startswith("cqa-search: warning: ") for line in lines[:-1])


# ---------------------------------------------------------------------------------------
# Files that are not regular files inside the index
# ---------------------------------------------------------------------------------------
def _replace(path, make):
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def _fifo(path):
    os.mkfifo(path)


def _link(target):
    return lambda path: os.symlink(target, path)


def _big(path):
    with open(path, "wb") as f:
        f.truncate(1 << 34)  # 16 GiB of zeros (sparse: no disk space)


def hostile_file_cases():
    """``(label, alter(copy, generation dir, foreign dir))``: what replaces an index file."""
    def foreign_generation(copy, gen, foreign):
        shutil.copytree(gen, foreign / "gen", symlinks=True)
        _replace(gen, _link(foreign / "gen"))

    cases = []
    for what, rel in [("CURRENT", CURRENT), ("the manifest", f"@/{MANIFEST}"),
                      ("vocab.json", "@/vocab.json"),
                      ("an array", "@/doc_id_rank.npy"),
                      ("a model's model.json", "@/models/ranker/model.json"),
                      ("the archive", "@/segments/seg-000001/archive.jsonl")]:
        def target(copy, gen, rel=rel):
            return gen / rel[2:] if rel.startswith("@/") else copy / rel
        cases += [
            (f"{what}: a FIFO", lambda c, g, f, t=target: _replace(t(c, g), _fifo)),
            (f"{what}: /dev/zero", lambda c, g, f, t=target: _replace(t(c, g), _link("/dev/zero"))),
            (f"{what}: a link out of the index", lambda c, g, f, t=target: (
                shutil.copy(t(c, g), f / "copied"), _replace(t(c, g), _link(f / "copied")))),
            (f"{what}: a directory", lambda c, g, f, t=target: _replace(t(c, g), os.mkdir)),
        ]
    cases += [
        ("CURRENT: 16 GiB of zeros", lambda c, g, f: _replace(c / CURRENT, _big)),
        ("the manifest: 16 GiB of zeros", lambda c, g, f: _replace(g / MANIFEST, _big)),
        ("the generation: a link to a foreign copy", foreign_generation),
        ("the generation: a link to an empty directory",
         lambda c, g, f: _replace(g, _link(f))),
        ("the models: a link to another index's", lambda c, g, f: (
            shutil.copytree(g / "models", f / "models"), _replace(g / "models", _link(f / "models")))),
    ]
    return cases


def hostile_files(index, work, cases=None) -> list:
    """Each case of :func:`hostile_file_cases` on a fresh copy of ``index``: one result
    per case, ``ok`` when the query said "corrupted index" in one line and exited 1."""
    out = []
    for label, alter in cases or hostile_file_cases():
        copy, foreign = Path(work) / "hostile", Path(work) / "foreign"
        for d in (copy, foreign):
            shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(index, copy, symlinks=True)
        foreign.mkdir()
        alter(copy, copy / current_generation(index), foreign)
        r = run_cli(["query", copy, "visa renewal"])
        out.append({"case": label, "code": r["code"], "stderr": r["stderr"][-500:],
                    "ok": one_line_error(r) and "corrupted index" in r["stderr"]})
    return out


# ---------------------------------------------------------------------------------------
# A full disk, a file-size limit
# ---------------------------------------------------------------------------------------
def writer_commands(index, out, inputs):
    """``(name, argv)`` of every command that writes: on the index at ``index``, or into
    the new folder ``out`` (what ``add`` and ``convert`` read is written into ``inputs``)."""
    demo = demo_dir()
    return [
        ("build-index (a new index)", ["build-index", demo / DEMO_ARCHIVE, "-o", out, "-q"]),
        ("build-index (over the index)", ["build-index", demo / DEMO_ARCHIVE, "-o", index,
                                          "-q"]),
        ("fit", ["fit", index, "topics", "--n-shared", "2", "--n-category", "1",
                 "--max-iter", "3", "-q"]),
        ("train", ["train", index, "--queries", demo / DEMO_QUERIES, "--qrels",
                   demo / DEMO_QRELS, "--learner", "ranksvm", "--name", "ranker2", "-q"]),
        ("add", ["add", index, _added_archive(inputs), "-q"]),
        ("delete", ["delete", index, "travel-021"]),
        ("compact", ["compact", index]),
        ("convert", ["convert", "stackfaq", _stackfaq(inputs), "-o", out]),
    ]


def _added_archive(inputs) -> Path:
    path = Path(inputs) / "added.jsonl"
    path.write_text("".join(json.dumps({"id": f"new-{i}", "title": f"added question {i} about "
                                        "visas and cars", "answers": ["an answer " * 20]}) + "\n"
                            for i in range(300)))
    return path


def _stackfaq(inputs) -> Path:
    path = Path(inputs) / "stackfaq.xml"
    pairs = "".join(f"<qapair><question>how to renew visa {i}</question><answer>at the office "
                    f"{i}</answer><rephr>renewing a visa {i}</rephr></qapair>"
                    for i in range(300))
    path.write_text(f"<root>{pairs}</root>")
    return path


def _state(index):
    """What an index holds, to see that a failed command left it as it was."""
    from cqa_search import SearchEngine

    engine = SearchEngine.open(index)
    return {"generation": engine.generation, "n_questions": engine.n_questions,
            "models": sorted(engine.models),
            "hits": [engine.search(q, k=3).doc_ids for q in ("visa", "car battery")]}


def full_disk(index, work, *, fsize=4096, commands=None) -> list:
    """Every writer command on a fresh copy of ``index`` under a file-size limit of
    ``fsize`` bytes (EFBIG): ``ok`` when it said so in one line, exited 1 and left the
    index as it was, with no temporary directory behind."""
    out = []
    for name, argv in commands or writer_commands(Path(work) / "copy", Path(work) / "new", work):
        copy, new = Path(work) / "copy", Path(work) / "new"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.rmtree(new, ignore_errors=True)
        shutil.copytree(index, copy, symlinks=True)
        before = _state(copy)
        r = run_cli(argv, fsize=fsize)
        after = _state(copy)
        left = [n for n in os.listdir(copy) if n.startswith(".tmp-")]
        out.append({"command": name, "code": r["code"], "stderr": r["stderr"][-500:],
                    "unchanged": before == after, "leftovers": left,
                    "ok": one_line_error(r) and "File too large" in r["stderr"]
                    and before == after and not left})
    return out


def tmpfs_available() -> bool:
    """Whether a small tmpfs can be mounted here in a private mount namespace (root)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as d:
        return subprocess.run(["unshare", "-m", "sh", "-c",
                               f"mount -t tmpfs -o size=64k tmpfs {d}"],
                              capture_output=True).returncode == 0


_ON_FULL_DISK = r"""
import json, os, shutil, subprocess, sys
from cqa_search.testing import environment
mnt, index, argv = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
copy = os.path.join(mnt, "index")
shutil.copytree(index, copy, symlinks=True)
before = environment._state(copy)
with open(os.path.join(mnt, "filler"), "wb") as f:  # fill the file system
    try:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    except OSError:
        pass
r = environment.run_cli([a.replace("@INDEX", copy).replace("@OUT", os.path.join(mnt, "new"))
                         for a in argv])
os.unlink(os.path.join(mnt, "filler"))
after = environment._state(copy)
print(json.dumps({{"result": r, "unchanged": before == after,
                   "leftovers": [n for n in os.listdir(copy) if n.startswith(".tmp-")]}}))
"""


def full_file_system(index, work, commands=None) -> list:
    """Every writer command on a copy of ``index`` in a tmpfs filled to the last byte
    (ENOSPC), mounted in a private mount namespace (nothing else sees it)."""
    out = []
    mnt = Path(work) / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    size = sum(f.stat().st_size for f in Path(index).rglob("*") if f.is_file())
    for name, argv in commands or writer_commands("@INDEX", "@OUT", work):
        argv = [str(a) for a in argv]
        script = _ON_FULL_DISK.format()
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             f'mount -t tmpfs -o size={size * 2 + (1 << 20)} tmpfs "$1" && exec "$2" -c "$3" '
             f'"$1" "$4" "$5"', "sh", str(mnt), sys.executable, script, str(index),
             json.dumps(argv)], capture_output=True, text=True, timeout=TIMEOUT * 3)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        if not lines:
            out.append({"command": name, "code": "harness failed", "stderr": proc.stderr[-800:],
                        "ok": False})
            continue
        r = lines[-1]
        out.append({"command": name, "code": r["result"]["code"],
                    "stderr": r["result"]["stderr"][-500:], "unchanged": r["unchanged"],
                    "leftovers": r["leftovers"],
                    "ok": one_line_error(r["result"]) and "No space left on device"
                    in r["result"]["stderr"] and r["unchanged"] and not r["leftovers"]})
    return out


# ---------------------------------------------------------------------------------------
# The terminal
# ---------------------------------------------------------------------------------------
def terminal(index, labels=None) -> list:
    """Output errors are the user's environment: one line and exit 1 on a full device,
    characters the output's encoding lacks replaced, a quiet exit 0 on a closed pipe
    (``labels``: only those commands)."""
    out = []
    for label, argv in [("query", ["query", index, "eye twitching"]),
                        ("query --json", ["query", index, "eye twitching", "--json"]),
                        ("info", ["info", index]),
                        ("query, a non-ASCII word", ["query", index, "café visa"])]:
        if labels is not None and label not in labels:
            continue
        with open("/dev/full", "w") as full:
            r = run_cli(argv, stdout=full)
        out.append({"case": f"{label} > /dev/full", "code": r["code"],
                    "stderr": r["stderr"][-300:],
                    "ok": one_line_error(r) and "No space left on device" in r["stderr"]})
        r = run_cli(argv, env={"PYTHONIOENCODING": "ascii"})
        out.append({"case": f"PYTHONIOENCODING=ascii {label}", "code": r["code"],
                    "stderr": r["stderr"][-300:],
                    "ok": r["code"] == 0 and r["stdout"].strip() != "" and r["stderr"] in (
                        "", *[line + "\n" for line in r["stderr"].splitlines()
                              if "warning" in line])})
        proc = subprocess.Popen(CLI + [str(a) for a in argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        proc.stdout.read(1)  # then the pipe is closed: `| head -c 1`
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=TIMEOUT)
        out.append({"case": f"{label} | head -c 1", "code": code, "stderr": err[-300:],
                    "ok": code == 0 and err == ""})
    return out


# ---------------------------------------------------------------------------------------
# A server
# ---------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


class Server:
    """``cqa-search serve INDEX`` in a child process (a context manager)."""

    def __init__(self, index, *args):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(CLI + ["serve", str(index), "--port", str(self.port),
                                            *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 3 * TIMEOUT  # (a start on a loaded machine is no hang)
        while True:
            try:
                self.get("/health")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start: {self.stop()}") from None
                time.sleep(0.2)

    def get(self, path):
        return _get(self.url + path)

    def wait_for(self, predicate, seconds=20):
        """The first /health answer that satisfies ``predicate``, None after ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            answer = self.get("/health")
            if predicate(*answer):
                return answer
            time.sleep(0.2)
        return None

    def stop(self, sig=signal.SIGTERM, seconds=20):
        """Send ``sig``; the seconds it took to stop (None: killed after ``seconds``) and
        what the server wrote on stderr."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=seconds)
            took = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            took = None
        return took, self.proc.stderr.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()


def _switch(index, generation) -> None:
    """Make ``generation`` (a directory of ``index``) the live one, as a writer does."""
    tmp = Path(index) / f"{CURRENT}.tmp-test"
    tmp.write_text(generation + "\n")
    os.replace(tmp, Path(index) / CURRENT)


def _new_generation(index, source, number, alter=None, origin=None) -> str:
    """A copy of generation ``source`` (of ``origin``, by default ``index``) as generation
    ``number`` of ``index``, altered by ``alter(directory)``."""
    name = f"gen-{number:06d}"
    shutil.copytree(Path(origin or index) / source, Path(index) / name, symlinks=True)
    if alter is not None:
        alter(Path(index) / name)
    return name


def watcher(index, work, sig=signal.SIGTERM) -> list:
    """A server follows generations that cannot be opened (a FIFO manifest, an endless
    one, a model whose forged count overflows), says so on /health, serves the next good
    one, and stops on ``sig`` in a bounded time. One result per step."""
    from .forgery import forge

    copy = Path(work) / "served"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(index, copy, symlinks=True)
    good = current_generation(copy)
    number = int(good[4:]) + 1
    steps = []

    def bad_model(gen):
        forge(gen, ("models/translation/model.json", ["meta", "ibm1", "n_cooccurrences"],
                    99999999999))

    with Server(copy) as server:
        for label, alter in [("a FIFO manifest", lambda g: _replace(g / MANIFEST, _fifo)),
                             ("the manifest a link to /dev/zero",
                              lambda g: _replace(g / MANIFEST, _link("/dev/zero"))),
                             ("a model that cannot load", bad_model)]:
            bad = _new_generation(copy, good, number, alter)
            _switch(copy, bad)
            stale = server.wait_for(lambda s, h: h.get("status") == "stale")
            fine = _new_generation(copy, good, number + 1)
            _switch(copy, fine)
            served = server.wait_for(lambda s, h, fine=fine: h.get("status") == "ok"
                                     and h.get("generation") == fine)
            steps.append({"case": f"serving: {label}, then a good generation",
                          "stale": stale is not None and "corrupted index" in stale[1]["error"],
                          "served next": served is not None, "error": (stale or [0, {}])[1]
                          .get("error"),
                          "ok": stale is not None and served is not None
                          and "corrupted index" in stale[1]["error"]})
            shutil.rmtree(copy / bad, ignore_errors=True)
            good, number = fine, number + 2
        # a FIFO left live while the server stops: the stop must not wait for it
        _switch(copy, _new_generation(copy, good, number,
                                      lambda g: _replace(g / MANIFEST, _fifo)))
        server.wait_for(lambda s, h: h.get("status") == "stale")
        took, log = server.stop(sig)
    steps.append({"case": f"stopping ({signal.Signals(sig).name}) with a FIFO manifest live",
                  "seconds": took, "ok": took is not None and took < 15
                  and "Traceback" not in log, "log": log[-500:]})
    bad_start = Path(work) / "bad-start"
    shutil.rmtree(bad_start, ignore_errors=True)
    shutil.copytree(index, bad_start, symlinks=True)
    bad_model(bad_start / current_generation(bad_start))
    with Server(bad_start) as server:
        status, body = server.get("/api/search?q=visa")
        alive = server.proc.poll() is None
        _switch(bad_start, _new_generation(bad_start, current_generation(index), number + 9,
                                           origin=index))
        served = server.wait_for(lambda s, h: s == 200 and h.get("status") == "ok")
    steps.append({"case": "starting on a model that cannot load, then a good generation",
                  "status": status, "ok": status == 503 and "corrupted index" in
                  body.get("detail", "") and alive and served is not None})
    return steps


def slow_clients(index, n_clients=200, seconds=None) -> dict:
    """``n_clients`` connections that send their request head a byte a second: the server
    drops each within its head timeout (plus a margin) and answers others meanwhile."""
    from cqa_search.server.protocol import HEAD_TIMEOUT

    seconds = HEAD_TIMEOUT + 10 if seconds is None else seconds
    with Server(index) as server:
        socks = []
        for _ in range(n_clients):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.setblocking(False)
            socks.append(s)
        head = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100
        t0, served, closed_at = time.monotonic(), 0, {}
        i = 0
        while time.monotonic() - t0 < seconds and len(closed_at) < n_clients:
            for k, s in enumerate(socks):
                if k in closed_at:
                    continue
                try:
                    s.send(head[i % len(head):i % len(head) + 1])
                    if s.recv(1024) == b"":
                        closed_at[k] = time.monotonic() - t0
                except BlockingIOError:
                    pass
                except OSError:  # reset, broken pipe: closed by the server
                    closed_at[k] = time.monotonic() - t0
            i += 1
            served += server.get("/health")[0] == 200
            time.sleep(1.0)
        for s in socks:
            s.close()
    return {"clients": n_clients, "dropped": len(closed_at),
            "last dropped after": max(closed_at.values(), default=None),
            "answered meanwhile": served,
            "ok": len(closed_at) == n_clients and served > 0}
