"""The HTTP protocol of ``cqa-search serve``: uvicorn's h11 protocol with deadlines on the
request head and the request body.

uvicorn closes a keep-alive connection left idle, but every byte received restarts that
timer, and a connection that has not sent a complete request yet has no timer at all: a
client that trickles its request line and headers a byte at a time holds a connection (and
its memory) for as long as it likes; a few hundred such clients starve the server. Here a
client has :data:`HEAD_TIMEOUT` seconds, from the connection or from the end of the
previous response, to send a whole request head; then the connection is closed.

A request with a body (``POST /api/questions`` of ``serve --allow-writes``; the others are
refused before their body is read, :class:`~cqa_search.server.app._Guard`) has
:data:`BODY_TIMEOUT` seconds from its head to send its body, and a second more for every
:data:`MIN_BODY_RATE` bytes that came: a client that stalls, or trickles its body, is
dropped (a 64 MiB body is taken at 64 KiB/s or faster), as Apache's ``mod_reqtimeout``
does. The request itself (a search: milliseconds) has no deadline.
"""
from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["RequestTimeoutProtocol", "HEAD_TIMEOUT", "BODY_TIMEOUT", "MIN_BODY_RATE"]

#: Seconds a client has to send a request's line and headers.
HEAD_TIMEOUT = 10.0
#: Seconds a client has to send a request's body, after its head ...
BODY_TIMEOUT = 10.0
#: ... and one more for every this many bytes of the body that came (bytes a second).
MIN_BODY_RATE = 64 * 1024


class RequestTimeoutProtocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` that closes a connection whose
    request head is not complete :attr:`head_timeout` seconds after the connection was
    made or the previous response was sent, or whose request body stalls (see the module
    docstring); uvicorn's ``http=`` option."""

    head_timeout = HEAD_TIMEOUT
    body_timeout = BODY_TIMEOUT
    min_body_rate = MIN_BODY_RATE
    _head_timer = None
    _body_timer = None
    _body_deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.SEND_BODY:  # no body, or all of it came
            self._body_deadline = None
            return
        if self._body_deadline is None:  # the head has just come
            self._body_deadline = self.loop.time() + self.body_timeout
        self._body_deadline += len(data) / self.min_body_rate
        if self._body_timer is None:
            self._body_timer = self.loop.call_at(self._body_deadline, self._body_late)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request's head (a pipelined one may be complete already)

    def connection_lost(self, exc) -> None:
        self._disarm()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.debug("closing a connection that sent no complete request head in "
                              "%.0f s", self.head_timeout)
            self.transport.close()

    def _body_late(self) -> None:
        self._body_timer = None
        if self._body_deadline is None or self.transport.is_closing() \
                or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.loop.time() < self._body_deadline:  # more of the body came meanwhile
            self._body_timer = self.loop.call_at(self._body_deadline, self._body_late)
            return
        # (the application's request, which was reading the body, says so in one line)
        self.logger.debug("closing a connection whose request body stalled")
        self.transport.close()
