"""Even keep-alive connections over the server processes of one port.

The kernel hands each new connection to one process of the port's ``SO_REUSEPORT`` group by
a hash of its addresses (:mod:`~cqa_search.server.processes`), and a keep-alive connection
then stays with it. Sixteen connections over two processes split 8/8 one time in five, 10/6
or worse two times in five; each process answers its own connections in turn, so the clients
of the busier one wait that much longer: with a 9/7 split the 95th percentile of their
latency was 47 ms against 35 ms for the others (SemEval archive, ``scripts/load_server.py``).

So each process counts its busy connections (those that sent a request within the last
``window`` seconds: one closed or idle soon stops counting) into its slot of an array the
processes share, and a process with at least two more than the least busy one answers one
request with ``Connection: close`` (at most one every ``pause`` seconds). Its client opens
a new connection, which the kernel hands to any process: the counts even out within a
second or so, and then no connection is closed. HTTP/1.1 clients honour ``Connection:
close`` (browsers, curl, wrk, urllib, httpx do).
"""
from __future__ import annotations

import time

__all__ = ["ConnectionBalancer"]


class ConnectionBalancer:
    """Decides which responses of one server process close their connection.

    Parameters
    ----------
    loads : sequence of int, shared and writable
        One slot per server process of the port (e.g. a ``multiprocessing`` RawArray).
    slot : int
        This process's slot.
    window : float, default 0.5
        A connection that sent no request for this many seconds no longer counts (it is
        idle, or closed: the application does not see connections close).
    pause : float, default 0.1
        Seconds between two counts (and at least between two closed connections).
    clock : callable, default time.monotonic

    Examples
    --------
    >>> now = [0.0]
    >>> loads = [0, 0]
    >>> mine = ConnectionBalancer(loads, 0, clock=lambda: now[0])
    >>> [mine.should_close(("127.0.0.1", port)) for port in (1, 2, 3)]
    [False, False, False]
    >>> now[0] = 0.2  # counted now: three connections here, none in the other process
    >>> mine.should_close(("127.0.0.1", 1)), loads
    (True, [2, 0])
    """

    def __init__(self, loads, slot: int, *, window: float = 0.5, pause: float = 0.1,
                 clock=time.monotonic):
        self.loads, self.slot = loads, slot
        self.window, self.pause, self.clock = window, pause, clock
        self._seen = {}  # client address -> when it last sent a request
        self._counted = clock()

    def should_close(self, client) -> bool:
        """Note a request of the connection ``client`` (its address); True when its
        response should close it (``Connection: close``)."""
        if client is None:
            return False
        now = self.clock()
        seen = self._seen
        seen[client] = now
        if now - self._counted < self.pause:
            return False
        self._counted = now
        cutoff = now - self.window
        for gone in [c for c, t in seen.items() if t < cutoff]:
            del seen[gone]
        loads, slot = self.loads, self.slot
        others = [n for i, n in enumerate(loads) if i != slot]
        close = bool(others) and len(seen) >= min(others) + 2
        if close:
            del seen[client]
        loads[slot] = len(seen)
        return close
