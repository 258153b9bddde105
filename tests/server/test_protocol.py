"""The request deadlines of ``cqa-search serve`` (RequestTimeoutProtocol), in-process: a
client that trickles its head is dropped, one that sent a request is answered; a write
whose body stalls is dropped, and a body that does not come whole is one line in the log,
not a traceback."""
import asyncio
import contextlib
import logging
import shutil
import socket
import threading
import time

import pytest

pytest.importorskip("uvicorn")

from cqa_search.server.app import create_app  # noqa: E402
from cqa_search.server.protocol import RequestTimeoutProtocol  # noqa: E402

TOKEN = "0123456789abcdef0123"


class QuickTimeout(RequestTimeoutProtocol):
    head_timeout = 0.5
    body_timeout = 0.5
    min_body_rate = 50  # bytes a second: each 50 bytes of a body give it a second more


@contextlib.contextmanager
def serving(app):
    """``app`` served by uvicorn with :class:`QuickTimeout` in a thread: its port. Its
    logging left to the root logger (caplog sees every record)."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=QuickTimeout,
                            log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_trickling_client_is_dropped_and_a_whole_request_is_answered(ranked_index):
    with serving(create_app(ranked_index)) as port:
        slow = socket.create_connection(("127.0.0.1", port), timeout=5)
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # no blank line: not complete
        fast = socket.create_connection(("127.0.0.1", port), timeout=5)
        fast.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := fast.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        slow.sendall(b"X-Slow: a")
        assert slow.recv(1024) == b""  # closed by the server ...
        assert time.monotonic() - t0 < 5  # ... at its deadline, not when the client stops
        slow.close()
        fast.close()


def _write_head(length) -> bytes:
    return (f"POST /api/questions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def test_a_stalled_or_cut_body_is_dropped_in_one_line(ranked_index, tmp_path, caplog):
    """A body that stops coming is dropped at its deadline (it was held 50 s and more), one
    cut by its client is one warning line, not a ClientDisconnect traceback; a body that
    takes longer than the deadline but comes at the least rate is taken."""
    path = tmp_path / "index"
    shutil.copytree(ranked_index, path)
    caplog.set_level(logging.DEBUG)
    body = b'{"id": "w1", "title": "a question written slowly", "body": "about visas"}'
    with serving(create_app(path, write_token=TOKEN)) as port:
        stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
        stalled.sendall(_write_head(1000) + body[:10])
        t0 = time.monotonic()
        assert stalled.recv(1024) == b""  # closed by the server at the body's deadline
        assert time.monotonic() - t0 < 5
        stalled.close()
        cut = socket.create_connection(("127.0.0.1", port), timeout=10)
        cut.sendall(_write_head(1000) + body[:10])
        time.sleep(0.1)
        cut.close()
        steady = socket.create_connection(("127.0.0.1", port), timeout=10)
        steady.sendall(_write_head(len(body)))
        for i in range(0, len(body), 20):  # 0.8 s in all: more than body_timeout, less
            time.sleep(0.2)                # than body_timeout + len(body) / min_body_rate
            steady.sendall(body[i:i + 20])
        assert steady.recv(65536).startswith(b"HTTP/1.1 201")
        steady.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(
                "did not come whole" in r.getMessage() for r in caplog.records) < 2:
            time.sleep(0.05)
    said = [r for r in caplog.records if "did not come whole" in r.getMessage()]
    assert len(said) == 2 and all(r.levelno == logging.WARNING for r in said)
    assert said[0].getMessage().startswith("POST /api/questions from 127.0.0.1:")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
            or r.exc_info] == []
