"""``cqa-search serve``: options, the missing extra, lazy imports, and a real server."""
import builtins
import json
import os
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
        deadline = time.monotonic() + 60
        while True:  # a bounded wait for the server to listen
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    health = json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.communicate()[1]) from None
                time.sleep(0.1)
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
    assert f"serving {toy_index} on http://127.0.0.1:{port}/" in err
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
