"""Several server processes on one port, the connections spread over them by the kernel.

uvicorn's own worker processes share one listening socket, and the first to wake up at a
burst of new connections accepts all that are waiting (asyncio accepts every pending
connection at once); with keep-alive they then stay with it. Measured with 16 clients and
two workers: one process served nine requests in ten, and two workers were no faster than
one. Here each process listens on a socket of its own in a ``SO_REUSEPORT`` group, and the
kernel hands each new connection to one of them by a hash of its addresses (Linux; macOS
and the BSDs accept ``SO_REUSEPORT`` without spreading the connections, so there and on
Windows uvicorn's own workers serve).

The kernel spreads new connections, not requests, and keep-alive connections stay where they
landed: the processes keep their numbers even by closing one now and then
(:mod:`~cqa_search.server.balance`).

The parent process only watches: it starts ``n`` processes, starts a new one when one dies
(and gives up when they die as fast as they start), and stops them all on SIGINT or SIGTERM.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import time

__all__ = ["REUSE_PORT", "listening_socket", "serve_processes"]

logger = logging.getLogger(__name__)

#: Whether this system spreads connections over a group of sockets.
REUSE_PORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
# A process that dies within this many seconds of its start failed to start.
_START_SECONDS = 10.0
_MAX_QUICK_DEATHS = 3


def listening_socket(host: str, port: int, reuse_port=True) -> socket.socket:
    """A TCP socket bound to ``host:port``, in the port's ``SO_REUSEPORT`` group unless
    ``reuse_port`` is False.

    Raises
    ------
    OSError
        The address cannot be bound (in use by another program, not an address here).
    """
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _serve_one(index, verify, hybrid, host, port, options, loads, slot) -> None:
    """One server process (the target of each child), ``loads[slot]`` its open connections
    (:class:`~cqa_search.server.balance.ConnectionBalancer`)."""
    import uvicorn

    from .app import WRITE_TOKEN_VARIABLE, create_app
    from .balance import ConnectionBalancer

    sock = listening_socket(host, port)
    config = uvicorn.Config(create_app(index, verify=verify,
                                       balancer=ConnectionBalancer(loads, slot),
                                       write_token=os.environ.get(WRITE_TOKEN_VARIABLE),
                                       hybrid=hybrid),
                            **options)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the terminal's group
        pass  # (uvicorn re-raises it once it has stopped; uvicorn.run() ignores it too)


def serve_processes(n: int, index, *, verify: bool, host: str, port: int, options: dict,
                    hybrid="auto") -> int:
    """Run ``n`` server processes on ``host:port`` until SIGINT or SIGTERM; returns the exit
    status (0, or 1 when the processes keep dying as they start). A port that cannot be
    bound makes each process die as it starts: check it first (:func:`listening_socket`).
    ``hybrid``: their first stage (:attr:`SearchConfig.hybrid
    <cqa_search.SearchConfig.hybrid>`)."""
    context = multiprocessing.get_context("spawn")
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    loads = context.RawArray("i", n)  # each process's open connections

    def start(slot):
        loads[slot] = 0
        proc = context.Process(target=_serve_one, name="cqa-search-serve", daemon=False,
                               args=(index, verify, hybrid, host, port, options, loads,
                                     slot))
        proc.start()
        return proc, time.monotonic()

    status, quick_deaths = 0, 0
    procs = [start(slot) for slot in range(n)]
    try:
        while not stopping:
            for i, (proc, started) in enumerate(procs):
                if proc.is_alive() or stopping:
                    continue
                quick = time.monotonic() - started < _START_SECONDS
                quick_deaths = quick_deaths + 1 if quick else 0
                if quick_deaths >= _MAX_QUICK_DEATHS:
                    logger.error("server processes die as they start (exit status %s); "
                                 "stopping", proc.exitcode)
                    stopping.append(None)
                    status = 1
                    break
                logger.warning("server process %s ended (exit status %s); starting another",
                               proc.pid, proc.exitcode)
                procs[i] = start(i)
            time.sleep(0.2)
    finally:
        for proc, _ in procs:  # (a Ctrl-C reached them too; a second signal is harmless)
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc, _ in procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
