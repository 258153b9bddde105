"""``cqa-search serve``: options, the missing extra, lazy imports, and a real server."""
import builtins
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from cqa_search.cli.__main__ import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,message", [
    (["--port", "0"], "--port must be between 1 and 65535; got 0"),
    (["--port", "70000"], "--port must be between 1 and 65535; got 70000"),
    (["--workers", "0"], "--workers must be a positive integer; got 0"),
])
def test_bad_options(capsys, toy_index, args, message):
    assert main(["serve", str(toy_index), *args]) == 1
    assert capsys.readouterr().err.strip() == f"cqa-search: error: {message}"


def test_without_the_server_extra(capsys, toy_index, monkeypatch):
    real_import = builtins.__import__

    def no_uvicorn(name, *args, **kwargs):
        if name == "uvicorn":
            raise ImportError("No module named 'uvicorn'", name="uvicorn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvicorn)
    assert main(["serve", str(toy_index)]) == 1
    assert capsys.readouterr().err.strip() == (
        "cqa-search: error: serve needs the server extra (uvicorn is not installed): "
        "pip install 'cqa-search[server]'")


def test_other_commands_do_not_import_the_server_stack(toy_index):
    code = ("import sys, contextlib, io\n"
            "from cqa_search.cli.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "    try:\n"
            "        main(['--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"    main(['query', {str(toy_index)!r}, 'visa'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'fastapi', 'starlette', 'uvicorn', 'pydantic', 'anyio'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("workers", [1, 2])
def test_serves_until_interrupted(toy_index, workers):
    """The real command, one process or several on the same port (SO_REUSEPORT: each new
    connection goes to one of them); SIGINT stops them all."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "cqa_search", "serve", str(toy_index),
                             "--port", str(port), "--workers", str(workers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        # the address is printed once it answers (not while the index and the kernels
        # load): the first request after the line succeeds, without a retry
        deadline = time.monotonic() + 60
        said = ""
        while "serving" not in said:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(said)
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                said += proc.stderr.readline()
        assert said.strip() == f"serving {toy_index} on {url}/ (Ctrl-C stops)"
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            health = json.load(r)
        assert health["status"] == "ok" and health["n_docs"] == 12
        for _ in range(2 * workers):  # new connections, whichever process takes them
            with urllib.request.urlopen(url + "/api/search?q=renew+visa&k=2", timeout=30) as r:
                assert {h["id"] for h in json.load(r)["hits"]} == {"t01", "t02"}
        if workers > 1:
            busy = socket.socket()
            try:  # another program cannot take the port meanwhile
                with pytest.raises(OSError):
                    busy.bind(("127.0.0.1", port))
            finally:
                busy.close()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use(toy_index, capsys, workers):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        assert main(["serve", str(toy_index), "--port", str(port), "--workers", workers]) == 1
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in err
    assert "serving" not in err


def test_worker_processes_make_the_app_from_the_environment(toy_index, monkeypatch):
    from fastapi.testclient import TestClient

    from cqa_search.exceptions import CQASearchError
    from cqa_search.server.app import INDEX_VARIABLE, app_from_environment

    monkeypatch.delenv(INDEX_VARIABLE, raising=False)
    with pytest.raises(CQASearchError, match="set CQA_SEARCH_INDEX to the index directory"):
        app_from_environment()
    monkeypatch.setenv(INDEX_VARIABLE, str(toy_index))
    with TestClient(app_from_environment()) as http:
        assert http.get("/health").json()["n_docs"] == 12


@pytest.mark.parametrize("args,env,message", [
    (["--allow-writes"], {}, "--allow-writes needs a token: --token-file FILE, or the "
                             "environment variable CQA_SEARCH_WRITE_TOKEN"),
    (["--allow-writes"], {"CQA_SEARCH_WRITE_TOKEN": "short"},
     "the write token must have at least 16 characters, all printable ASCII, and no white "
     "space"),
    (["--allow-writes", "--token-file", "/nonexistent/token"], {},
     "cannot read --token-file /nonexistent/token: No such file or directory"),
    (["--token-file", "/nonexistent/token"], {}, "--token-file applies with --allow-writes"),
])
def test_write_token_options(capsys, toy_index, monkeypatch, args, env, message):
    monkeypatch.delenv("CQA_SEARCH_WRITE_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["serve", str(toy_index), *args]) == 1
    assert capsys.readouterr().err.strip().startswith(f"cqa-search: error: {message}")


@pytest.mark.parametrize("make,message", [
    (lambda d: "/dev/zero", "it is a device, not a regular file"),  # read without end
    (lambda d: os.mkfifo(d / "t") or d / "t", "it is a FIFO, not a regular file"),  # waited
    (lambda d: d, "it is a directory, not a regular file"),
    (lambda d: (d / "t").write_bytes(b"a" * 5000) and d / "t",
     "it has more than 4,096 bytes (a token file holds the token alone)"),
    (lambda d: (d / "t").write_bytes(b"\xff" * 20) and d / "t", "it is not UTF-8 text"),
    (lambda d: (d / "t").write_text("é" * 20) and d / "t",  # accepted, but never matched
     "the write token must have at least 16 characters, all printable ASCII"),
])
def test_a_token_file_that_is_no_token_file(capsys, toy_index, tmp_path, monkeypatch, make,
                                            message):
    """Issue 43: serve --token-file read /dev/zero without bound and blocked on a FIFO."""
    monkeypatch.delenv("CQA_SEARCH_WRITE_TOKEN", raising=False)
    path = make(tmp_path)
    assert main(["serve", str(toy_index), "--allow-writes", "--token-file", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("cqa-search: error: ") and message in err and "\n" not in err


def test_writes_through_several_processes(tmp_path, toy_questions):
    """serve --allow-writes --workers 2: an addition and a deletion by one process are
    served by both (each follows the index's generations)."""
    from cqa_search import build_index

    build_index(toy_questions, tmp_path / "idx")
    (tmp_path / "token").write_text("0123456789abcdef0123456789abcdef\n")
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("CQA_SEARCH_WRITE_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "cqa_search", "serve", str(tmp_path / "idx"),
                             "--port", str(port), "--workers", "2", "--allow-writes",
                             "--token-file", str(tmp_path / "token")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"

    def call(method, path, body=None, token="0123456789abcdef0123456789abcdef"):
        request = urllib.request.Request(url + path, data=body, method=method,
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    def everywhere(condition, what):
        deadline = time.monotonic() + 30
        while not all(condition() for _ in range(6)):  # new connections: either process
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.1)

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.communicate()[1]) from None
                time.sleep(0.1)
        status, doc = call("POST", "/api/questions",
                           b'{"id": "n1", "title": "Where to rent a kayak in Doha?"}\n')
        assert status == 201 and doc["added"] == 1 and doc["n_questions"] == 13
        assert call("POST", "/api/questions", b'{"id": "n2", "title": "x"}', token="w" * 32)[0] \
            == 403
        everywhere(lambda: [h["id"] for h in call("GET", "/api/search?q=kayak")[1]["hits"]]
                   == ["n1"], "the addition")
        status, doc = call("DELETE", "/api/questions/n1")
        assert status == 200 and doc["deleted"] == 1 and doc["n_questions"] == 12
        everywhere(lambda: call("GET", "/api/search?q=kayak")[1]["hits"] == [], "the deletion")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "(writes allowed with the token)" in err
    assert "Traceback" not in err
