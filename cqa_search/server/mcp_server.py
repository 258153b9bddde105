"""An MCP server over an index (``cqa-search mcp INDEX``): the archive as tools an
assistant can call, over stdio, with the official ``mcp`` package (the ``mcp`` extra).

Tools:

- ``search(query, k, category, after, before, tags, not_tags)``: the query syntax of the
  CLI;
- ``similar(question_id, k, category, after, before, tags, not_tags)``: the questions most
  similar to an archived one;
- ``get_question(question_id)``: a question with all its answers.

Hits are compact (id, title, category, tags, date, score, link, a snippet of the body and of
the answer shown), as structured content with the tools' output schemas
(:class:`~cqa_search.server.schema.CompactResults`) and as compact JSON text. Requests in
flight when standard input closes are answered before the server ends
(:func:`serve_stdio`). The engine follows the index's generations as the HTTP server does
(:class:`~cqa_search.server.live.LiveIndex`). An input error is a tool error with the
message the command line would print.
"""
import anyio
import orjson

from .._version import __version__
from ..archive import did_you_mean
from ..exceptions import CQASearchError
from ..presentation import MAX_K, source_url
from .live import LiveIndex

__all__ = ["create_mcp_server", "serve_stdio", "MAX_K", "DRAIN_SECONDS"]

#: Longest wait, once standard input is closed, for the answers of the requests in flight.
DRAIN_SECONDS = 60.0

_HIT_KEYS = ("rank", "id", "score", "title", "category", "tags", "date", "url", "n_answers",
             "snippet")


def _compact(presenter, results) -> dict:
    terms = frozenset(results.query_terms)
    hits = []
    for hit in results:
        full = presenter.hit_dict(hit, terms)
        compact = {key: full[key] for key in _HIT_KEYS}
        compact["answer"] = None if full["answer"] is None else {
            "label": full["answer"]["label"], "snippet": full["answer"]["snippet"]}
        hits.append(compact)
    parsed = results.parsed  # how the query was read (the API's filters and notices)
    return {"category": results.category, "filters": list(parsed.filters()),
            "notices": list(parsed.notices), "relaxed": results.relaxed,
            "unknown_words": list(results.unknown_words), "hits": hits}


def create_mcp_server(index, *, interval: float = 0.5):
    """The :class:`mcp.server.mcpserver.MCPServer` of the index at ``index``.

    Returns
    -------
    (server, live)
        The MCP server, and the :class:`~cqa_search.server.live.LiveIndex` it reads
        (``live.start()`` follows new generations in the background; without it, each
        call opens the last one once).
    """
    from typing import Annotated

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    from . import schema

    live = LiveIndex(index, interval=interval)
    server = MCPServer(
        "cqa-search", version=__version__,
        instructions="Search a community question-answering archive for questions already "
                     "asked and answered: search(query) first, similar(question_id) for "
                     "more like a hit, get_question(question_id) for all its answers.")

    def current():
        try:
            return live.current()
        except CQASearchError as exc:
            raise ToolError(str(exc)) from None

    def checked_k(k):
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be between 1 and {MAX_K}; got {k}")
        return k

    def result(doc) -> CallToolResult:
        """``doc`` as structured content, and as compact JSON text (for the clients that
        read only text)."""
        return CallToolResult(content=[TextContent(type="text",
                                                   text=orjson.dumps(doc).decode())],
                              structured_content=doc)

    Results = Annotated[CallToolResult, schema.CompactResults]  # the tools' outputSchema

    @server.tool()
    def search(query: str, k: int = 10, category: str | None = None, after: str | None = None,
               before: str | None = None, tags: list[str] | None = None,
               not_tags: list[str] | None = None) -> Results:
        """Search the archive for questions like `query` (plain words, or the query syntax:
        +word, -word, "a phrase", title:word, tag:name, category:Name, date:>=2014-01-01).
        `after`/`before`: only questions created on or after / before a day, month or
        year (YYYY[-MM[-DD]]); `tags`: only questions with all these tags; `not_tags`:
        none of these. Returns the best `k` hits with their best answers and dates."""
        engine, presenter = current()
        try:
            results = engine.search(query, k=checked_k(k), category=category or None,
                                    after=after, before=before, tags=tags, not_tags=not_tags)
        except CQASearchError as exc:
            raise ToolError(str(exc)) from None
        return result({"query": query, **_compact(presenter, results),
                       "generation": engine.generation})

    @server.tool()
    def similar(question_id: str, k: int = 10, category: str | None = None,
                after: str | None = None, before: str | None = None,
                tags: list[str] | None = None, not_tags: list[str] | None = None) -> Results:
        """The archived questions most similar to the question `question_id` (its title
        and body searched, the question itself left out). `category`, `after`, `before`,
        `tags`, `not_tags`: as in search."""
        engine, presenter = current()
        try:
            results = engine.similar(question_id, k=checked_k(k), category=category or None,
                                     after=after, before=before, tags=tags,
                                     not_tags=not_tags)
        except CQASearchError as exc:
            raise ToolError(str(exc)) from None
        return result({"like": question_id, **_compact(presenter, results),
                       "generation": engine.generation})

    @server.tool()
    def get_question(question_id: str) -> Annotated[CallToolResult, schema.Question]:
        """An archived question with all its answers (best_answer: the index of the best
        one, when the archive marks it)."""
        engine, _ = current()
        if question_id not in engine.archive:
            raise ToolError(f"no question {question_id!r} in the archive"
                            + did_you_mean(engine.archive.similar_ids(question_id)))
        question = engine.archive.get(question_id)
        return result({**question.to_dict(), "url": source_url(question),
                       "generation": engine.generation})

    return server, live


class _InFlight:
    """The ids of the requests read and not yet answered."""

    def __init__(self):
        self.ids = set()
        self.idle = anyio.Event()
        self.idle.set()

    def read(self, message) -> None:
        if getattr(message, "method", None) is not None and getattr(message, "id", None) \
                is not None:
            self.ids.add(message.id)
            self.idle = anyio.Event() if self.idle.is_set() else self.idle

    def answered(self, message) -> None:
        if getattr(message, "method", None) is None and getattr(message, "id", None) \
                in self.ids:
            self.ids.discard(message.id)
            if not self.ids:
                self.idle.set()


class _Wrapped:
    """A stream of the SDK's loop, wrapped: closing and the context manager pass through."""

    def __init__(self, stream, in_flight: _InFlight):
        self._stream, self._in_flight = stream, in_flight

    async def aclose(self):
        await self._stream.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()


class _Drained(_Wrapped):
    """A read stream that ends only once the requests read from it are answered (the SDK's
    loop cancels those in flight when its read stream ends)."""

    @property
    def last_context(self):
        return getattr(self._stream, "last_context", None)

    async def receive(self):
        try:
            item = await self._stream.receive()
        except anyio.EndOfStream:
            with anyio.move_on_after(DRAIN_SECONDS):
                await self._in_flight.idle.wait()
            raise
        self._in_flight.read(getattr(item, "message", None))
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class _Answering(_Wrapped):
    """A write stream that notes the requests it answers (see :class:`_Drained`)."""

    async def send(self, item):
        await self._stream.send(item)
        self._in_flight.answered(getattr(item, "message", None))


async def serve_stdio(server) -> None:
    """Serve ``server`` (:func:`create_mcp_server`) over standard input and output until
    standard input closes; the requests still in flight then are answered first (for at
    most :data:`DRAIN_SECONDS`), where the SDK's ``run("stdio")`` drops them."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # (the SDK's loop over given streams)
    in_flight = _InFlight()
    async with stdio_server() as (read, write):
        await lowlevel.run(_Drained(read, in_flight), _Answering(write, in_flight),
                           lowlevel.create_initialization_options())
