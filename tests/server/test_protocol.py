"""The request-head deadline of ``cqa-search serve`` (HeadTimeoutProtocol), in-process:
a client that trickles its head is dropped, one that sent a request is answered."""
import asyncio
import socket
import threading
import time

import pytest

pytest.importorskip("uvicorn")

from cqa_search.server.app import create_app  # noqa: E402
from cqa_search.server.protocol import HeadTimeoutProtocol  # noqa: E402


class QuickTimeout(HeadTimeoutProtocol):
    head_timeout = 0.5


def test_a_trickling_client_is_dropped_and_a_whole_request_is_answered(ranked_index):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(create_app(ranked_index), host="127.0.0.1", port=port,
                            http=QuickTimeout, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
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
    finally:
        server.should_exit = True
        thread.join(10)
