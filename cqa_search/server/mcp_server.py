"""An MCP server over an index (``cqa-search mcp INDEX``): the archive as tools an
assistant can call, over stdio, with the official ``mcp`` package (the ``mcp`` extra).

Tools:

- ``search(query, k, category, after, before, tags, not_tags)``: the query syntax of the
  CLI;
- ``similar(question_id, k, category, after, before, tags, not_tags)``: the questions most
  similar to an archived one;
- ``get_question(question_id)``: a question with all its answers.

Hits are compact (id, title, category, tags, date, score, link, a snippet of the body and of the
answer shown); the engine follows the index's generations as the HTTP server does
(:class:`~cqa_search.server.live.LiveIndex`). An input error is a tool error with the
message the command line would print.
"""
from __future__ import annotations

from ..archive import did_you_mean
from ..exceptions import CQASearchError
from ..presentation import MAX_K, source_url
from .live import LiveIndex

__all__ = ["create_mcp_server", "MAX_K"]

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
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    live = LiveIndex(index, interval=interval)
    server = MCPServer(
        "cqa-search",
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

    @server.tool()
    def search(query: str, k: int = 10, category: str | None = None, after: str | None = None,
               before: str | None = None, tags: list[str] | None = None,
               not_tags: list[str] | None = None) -> dict:
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
        return {"query": query, **_compact(presenter, results), "generation": engine.generation}

    @server.tool()
    def similar(question_id: str, k: int = 10, category: str | None = None,
                after: str | None = None, before: str | None = None,
                tags: list[str] | None = None, not_tags: list[str] | None = None) -> dict:
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
        return {"like": question_id, **_compact(presenter, results),
                "generation": engine.generation}

    @server.tool()
    def get_question(question_id: str) -> dict:
        """An archived question with all its answers (best_answer: the index of the best
        one, when the archive marks it)."""
        engine, _ = current()
        if question_id not in engine.archive:
            raise ToolError(f"no question {question_id!r} in the archive"
                            + did_you_mean(engine.archive.similar_ids(question_id)))
        question = engine.archive.get(question_id)
        return {**question.to_dict(), "url": source_url(question),
                "generation": engine.generation}

    return server, live
