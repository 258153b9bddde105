"""The HTTP protocol of ``cqa-search serve``: uvicorn's h11 protocol with a deadline on the
request head.

uvicorn closes a keep-alive connection left idle, but every byte received restarts that
timer, and a connection that has not sent a complete request yet has no timer at all: a
client that trickles its request line and headers a byte at a time holds a connection (and
its memory) for as long as it likes; a few hundred such clients starve the server. Here a
client has :data:`HEAD_TIMEOUT` seconds, from the connection or from the end of the
previous response, to send a whole request head; then the connection is closed. The
request itself (a search: milliseconds) has no deadline: this API takes no bodies
(:class:`~cqa_search.server.app._Guard` refuses them before reading).
"""
from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeadTimeoutProtocol", "HEAD_TIMEOUT"]

#: Seconds a client has to send a request's line and headers.
HEAD_TIMEOUT = 10.0


class HeadTimeoutProtocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` that closes a connection whose
    request head is not complete :attr:`head_timeout` seconds after the connection was
    made or the previous response was sent (uvicorn's ``http=`` option)."""

    head_timeout = HEAD_TIMEOUT
    _head_timer = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request's head (a pipelined one may be complete already)

    def connection_lost(self, exc) -> None:
        self._disarm()
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
