"""The ASGI application: a JSON API over one index (read-only unless writes are enabled),
and the search page.

=====================================  ====================================================
``GET /``                              the search page (``static/``: plain HTML, CSS, JS)
``GET /api/search``                    ``q`` (the query syntax of the CLI), ``k``,
                                       ``category``, ``explain``, ``after``, ``before``,
                                       ``tag`` and ``not_tag`` (repeatable),
                                       ``title`` and ``body`` (the question's two parts):
                                       the hits of :meth:`SearchEngine.search` as
                                       :meth:`Presenter.results_dict` gives them
``GET /api/questions/{id}``            an archived question with all its answers
``GET /api/questions/{id}/similar``    ``k``, ``category``, ``explain``, ``after``,
                                       ``before``, ``tag``, ``not_tag``: the questions
                                       most like it
                                       (:meth:`SearchEngine.similar`)
``GET /api/categories``                the categories with their numbers of questions
``GET /api/tags``                      ``limit``: the most frequent tags, with theirs
``GET /health``                        the generation served and its number of questions
``GET /openapi.json``                  the OpenAPI schema of all of these
``POST``, ``DELETE /api/questions``    with a write token only: :mod:`.writes`
=====================================  ====================================================

Errors are JSON (:class:`~cqa_search.server.schema.Error`): 400 for a bad query or
parameter (also one the endpoint does not take: none is ignored silently), 404, 405, 413/414 for a request too large, 503 while no index can be opened,
500 (no traceback: it is logged) for a bug. A request whose body does not come whole (the
client went away, or stalled: :mod:`.protocol`) is one line in the log. The engine
follows the index's generations (:class:`~cqa_search.server.live.LiveIndex`). Requests run
on the event loop, one at a time, with one BLAS thread: Python runs one thread at a time
anyway, and handing each search to a worker thread cost ~1.3 ms of CPU per request (a
third of a SemEval query's; 217 instead of 307 requests/s from 16 clients). A search holds the loop for its few milliseconds (a query
of MAX_QUERY_CHARS characters with k = 100 for ~0.1 s); more processes: ``--workers``.
"""
from __future__ import annotations

import itertools
import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from .._version import __version__
from ..engine import SearchConfig
from ..archive import did_you_mean
from ..exceptions import CQASearchError, IndexFormatError, QueryError
from ..presentation import MAX_K, source_url
from ..query_parser import MAX_QUERY_CHARS
from ..retrieval.first_stage import weight_of_text
from . import schema
from .live import LiveIndex

__all__ = ["create_app", "app_from_environment", "MAX_K", "MAX_TARGET_BYTES"]

logger = logging.getLogger(__name__)

#: Longest request target (path and query string) in bytes: a query of MAX_QUERY_CHARS
#: characters fits, percent-encoded, when they take at most two UTF-8 bytes (as Latin,
#: Greek, Cyrillic, Arabic or Hebrew letters do).
MAX_TARGET_BYTES = 64_000
#: The environment variable naming the index of :func:`app_from_environment`.
INDEX_VARIABLE = "CQA_SEARCH_INDEX"
#: Set (to anything) for worker processes of ``cqa-search serve --verify``.
VERIFY_VARIABLE = "CQA_SEARCH_VERIFY"
#: The token of ``cqa-search serve --allow-writes`` (an environment variable, not an
#: option: a command line is visible to every user of the machine).
WRITE_TOKEN_VARIABLE = "CQA_SEARCH_WRITE_TOKEN"
#: The first stage of uvicorn's worker processes (``serve --hybrid`` as written: "auto",
#: "none" or a number).
HYBRID_VARIABLE = "CQA_SEARCH_HYBRID"
#: Where questions are added and deleted (``serve --allow-writes``).
WRITE_PATH = "/api/questions"
#: The methods of a write: refused by a read-only server with :data:`READ_ONLY` (405).
_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
READ_ONLY = (f"this API is read-only; `cqa-search serve --allow-writes` takes POST "
             f"{WRITE_PATH} and DELETE {WRITE_PATH}/ID with a token")
#: Largest body of a write (questions added at once).
MAX_BODY_BYTES = 64 << 20

STATIC = Path(__file__).resolve().parent / "static"
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
]
_ERRORS = {status: {"model": schema.Error, "description": text} for status, text in
           [(400, "bad query or parameter"), (503, "no index can be opened")]}


def _query_names(dependant) -> set:
    """The query parameters a route (its dependencies' too) reads."""
    return {p.alias for p in dependant.query_params}.union(
        *(_query_names(d) for d in dependant.dependencies))


def _known_parameters(request: Request) -> None:
    """Refuse a query parameter the endpoint does not take (400): a filter misspelt or
    not taken there must not be answered, unfiltered, with 200."""
    route = request.scope.get("route")
    if not getattr(route, "include_in_schema", False):  # the page keeps its own state
        return
    known = _query_names(route.dependant)
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        raise QueryError(f"unknown parameter {unknown[0]!r}; this endpoint takes: "
                         + (", ".join(sorted(known)) or "none"))


#: The tag filters of a search and of more-like-this (each may be given several times).
_TAG = Query(max_length=500, description="only questions with this tag (exactly, ignoring "
                                         "case; several: all of them)")
_NOT_TAG = Query(max_length=500, description="leave out questions with this tag")


def _missing(engine, doc_id) -> HTTPException:
    """The 404 of an id the archive lacks, with the ids it may mean."""
    return HTTPException(404, f"no question {doc_id!r} in the archive"
                         + did_you_mean(engine.archive.similar_ids(doc_id)))


class _JSON(JSONResponse):
    def render(self, content) -> bytes:
        return orjson.dumps(content)


def _error(status: int, detail: str, headers=None) -> _JSON:
    from http import HTTPStatus

    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    return _JSON({"status": status, "error": phrase, "detail": detail}, status_code=status,
                 headers=headers)


class _Guard:
    """ASGI middleware: refuses request bodies (413) and long targets (414) before any
    parsing, answers HEAD as GET without the body, adds the security headers to every
    response, and ``Connection: close`` to those the ``balancer``
    (:class:`~cqa_search.server.balance.ConnectionBalancer`) picks. With ``writes``, a
    ``POST /api/questions`` may have a body of at most :data:`MAX_BODY_BYTES` bytes, its
    length given (411 without it)."""

    def __init__(self, app, balancer=None, writes=False):
        self.app = app
        self.balancer = balancer
        self.writes = writes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = _SECURITY_HEADERS
        if self.balancer is not None and scope.get("http_version") == "1.1" and \
                self.balancer.should_close(scope.get("client")):
            extra = _SECURITY_HEADERS + [(b"connection", b"close")]
        target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        refusal = None
        if target > MAX_TARGET_BYTES:
            refusal = _error(414, f"the request target has {target:,} "
                             f"bytes; at most {MAX_TARGET_BYTES:,} are taken")
        elif self.writes and scope["method"] == "POST" and scope["path"] == WRITE_PATH:
            refusal = _body_refusal(scope["headers"])
        elif not self.writes and scope["method"] in _WRITE_METHODS and \
                (scope["path"] + "/").startswith(WRITE_PATH + "/"):
            # a write sent to a read-only server, with a body or not: the method is what
            # is refused (before any body is read, and before a route's slash redirect)
            refusal = _error(405, READ_ONLY, headers={"Allow": "GET, HEAD"})
        else:
            for name, value in scope["headers"]:
                if (name == b"content-length" and value.strip() not in (b"", b"0")) or \
                        name == b"transfer-encoding":
                    refusal = _error(413, "requests have no body" if self.writes else
                                     "this API is read-only: requests have no body "
                                     "(`cqa-search serve --allow-writes` takes questions "
                                     f"at POST {WRITE_PATH})")
                    break

        head = scope["method"] == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}

        async def secured(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        if refusal is not None:
            return await refusal(scope, receive, secured)
        return await self.app(scope, receive, secured)


def _body_refusal(headers):
    """The refusal of a write whose body is too large or of unknown length, or None."""
    found = dict(headers)
    if b"transfer-encoding" in found or b"content-length" not in found:
        return _error(411, "give the body's length (Content-Length); chunked bodies are "
                      "not taken")
    try:
        length = int(found[b"content-length"])
    except ValueError:
        return _error(400, "bad Content-Length")
    if length > MAX_BODY_BYTES:
        return _error(413, f"the body has {length:,} bytes; at most {MAX_BODY_BYTES:,} are "
                      "taken (send the questions in several requests)")
    return None


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("query", "path")]
        parts.append(f"{'.'.join(loc) or 'request'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(IndexFormatError)
    async def no_index(request, exc):
        return _error(503, f"no index to search: {exc}", headers={"Retry-After": "5"})

    @app.exception_handler(CQASearchError)
    async def bad_input(request, exc):
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request, exc):
        return _error(400, _validation_message(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(ClientDisconnect)
    async def gone(request, exc):  # the client's doing, not a bug: no traceback
        client = request.client
        logger.warning("%s %s%s: the request body did not come whole (the client closed the "
                       "connection, or its body stalled); nothing was changed", request.method,
                       request.url.path, f" from {client.host}:{client.port}" if client else "")
        return _error(400, "the request body did not come whole")  # (nobody to read it)

    @app.exception_handler(Exception)
    async def bug(request, exc):  # the ASGI server logs the traceback
        return _error(500, "internal error (logged by the server)")


def create_app(index, *, interval: float = 0.5, verify: bool = False,
               balancer=None, write_token: str | None = None, hybrid="auto") -> FastAPI:
    """The ASGI application serving the index at ``index``.

    Parameters
    ----------
    index : path
        An index directory (from ``cqa-search build-index``); it may not exist yet: the
        API answers 503 until it does.
    interval : float, default 0.5
        Seconds between two checks for a new generation of the index.
    verify : bool, default False
        Check every file's SHA-256 when a generation is opened (see
        :meth:`SearchEngine.open <cqa_search.SearchEngine.open>`).
    balancer : ConnectionBalancer, optional
        For one of several server processes on a port: closes a connection now and then
        to keep their numbers even (:mod:`cqa_search.server.balance`).
    write_token : str, optional
        Enables ``POST /api/questions`` and ``DELETE /api/questions/{id}`` for requests
        that give this token (``Authorization: Bearer TOKEN``; see
        :mod:`cqa_search.server.writes`). None: a read-only API.
    hybrid : "auto", float in [0, 1] or None, default "auto"
        The first stage (:attr:`SearchConfig.hybrid <cqa_search.SearchConfig.hybrid>`).

    Examples
    --------
    >>> import os, tempfile
    >>> from fastapi.testclient import TestClient
    >>> from cqa_search import Question, build_index
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index([Question("a", "How to renew my visa?", category="Visas")], out)
    >>> with TestClient(create_app(out)) as client:
    ...     client.get("/api/search", params={"q": "visa renewal"}).json()["hits"][0]["id"]
    'a'
    """
    live = LiveIndex(index, interval=interval, verify=verify, titles=True,
                     config=None if hybrid == "auto" else SearchConfig(hybrid=hybrid))

    @asynccontextmanager
    async def lifespan(app):
        from threadpoolctl import threadpool_limits

        from .. import compiled

        # One BLAS thread: more would only compete with the other worker processes.
        limits = threadpool_limits(limits=1)
        compiled.load()  # before serving, not in the middle of a request (when installed)
        live.start()
        try:
            yield
        finally:
            live.stop()
            limits.restore_original_limits()

    app = FastAPI(title="cqa_search", version=__version__, lifespan=lifespan,
                  description="Question retrieval over a community-QA archive: search it, "
                              "read its questions" + (", add and delete questions (with a "
                                                      "token)." if write_token else
                                                      ". Read-only."),
                  default_response_class=_JSON, docs_url=None, redoc_url=None,
                  dependencies=[Depends(_known_parameters)])
    app.state.live = live
    app.add_middleware(_Guard, balancer=balancer, writes=write_token is not None)
    _handlers(app)
    if write_token is not None:
        from .writes import add_write_routes

        add_write_routes(app, live, write_token)  # before GET /api/questions/{id} is routed

    @app.get("/api/search", response_model=schema.SearchResults, responses=_ERRORS,
             summary="Search the archive")
    async def search(
        q: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS,
                                       description="the new question, in the query syntax: "
                                                   "+word, -word, \"a phrase\", title:word, "
                                                   "category:Name, ... (may be left out when "
                                                   "title or body is given)")] = None,
        k: Annotated[int, Query(ge=1, le=MAX_K, description="number of hits")] = 10,
        category: Annotated[str | None, Query(max_length=500, description=(
            "only this category (case-insensitive; a category: in q wins)"))] = None,
        explain: Annotated[bool, Query(description="add each hit's feature contributions "
                                                   "(with a ranker)")] = False,
        after: Annotated[str | None, Query(max_length=40, description=(
            "only questions created on or after this day, month or year (YYYY[-MM[-DD]]; "
            "date:>=AFTER in q)"))] = None,
        before: Annotated[str | None, Query(max_length=40, description=(
            "only questions created before it (date:<BEFORE in q)"))] = None,
        title: Annotated[str | None, Query(max_length=MAX_QUERY_CHARS, description=(
            "the question's subject, when it is asked in two parts (plain text; without q, "
            "title and body are the query): the per-field features compare it with the "
            "archived titles"))] = None,
        body: Annotated[str | None, Query(max_length=MAX_QUERY_CHARS, description=(
            "the question's body (plain text), compared with the archived bodies"))] = None,
        tag: Annotated[list[str] | None, _TAG] = None,
        not_tag: Annotated[list[str] | None, _NOT_TAG] = None,
    ):
        engine, presenter = live.current()
        if q is None and not (title or body):
            raise QueryError("give the question: q, or its title and body")
        # (without q, the two parts are the query, as plain text)
        typed = q if q is not None else "\n".join(t for t in (title, body) if t)
        results = engine.search(q, k=k, category=category or None, after=after, before=before,
                                tags=tag, not_tags=not_tag, title=title, body=body)
        doc = presenter.results_dict(results, typed=typed, explain=explain)
        doc["generation"] = engine.generation
        return _JSON(doc)

    @app.get("/api/questions/{doc_id:path}/similar", response_model=schema.SearchResults,
             responses={404: {"model": schema.Error, "description": "no such question"},
                        **_ERRORS}, summary="The questions most similar to a question")
    async def similar(
        doc_id: str,
        k: Annotated[int, Query(ge=1, le=MAX_K, description="number of hits")] = 10,
        category: Annotated[str | None, Query(max_length=500, description=(
            "only this category (case-insensitive)"))] = None,
        explain: Annotated[bool, Query(description="add each hit's feature contributions "
                                                   "(with a ranker)")] = False,
        after: Annotated[str | None, Query(max_length=40, description=(
            "only questions created on or after this day, month or year "
            "(YYYY[-MM[-DD]])"))] = None,
        before: Annotated[str | None, Query(max_length=40, description=(
            "only questions created before it"))] = None,
        tag: Annotated[list[str] | None, _TAG] = None,
        not_tag: Annotated[list[str] | None, _NOT_TAG] = None,
    ):
        engine, presenter = live.current()
        if doc_id not in engine.archive:
            raise _missing(engine, doc_id)
        results = engine.similar(doc_id, k=k, category=category or None, after=after,
                                 before=before, tags=tag, not_tags=not_tag)
        body = presenter.results_dict(results, explain=explain)
        body["generation"] = engine.generation
        return _JSON(body)

    @app.get("/api/complete", response_model=schema.Completions, responses=_ERRORS,
             summary="Archived titles that begin with the words being typed")
    async def complete(
        q: Annotated[str, Query(max_length=MAX_QUERY_CHARS, description=(
            "the words typed so far (plain text, never query syntax; case and "
            "punctuation aside)"))],
        k: Annotated[int, Query(ge=1, le=MAX_K, description="number of titles")] = 5,
    ):
        engine, _ = live.current()
        found = engine.complete(q, k=k)
        return _JSON({"query": q, "completions": [
            {"id": c.doc_id, "title": c.title, "answers": c.n_answers} for c in found],
            "generation": engine.generation})

    @app.get("/api/questions/{doc_id:path}", response_model=schema.Question,
             responses={404: {"model": schema.Error, "description": "no such question"},
                        503: _ERRORS[503]}, summary="An archived question with its answers")
    async def question(doc_id: str):
        engine, _ = live.current()
        if doc_id not in engine.archive:
            raise _missing(engine, doc_id)
        found = engine.archive.get(doc_id)
        return _JSON({**found.to_dict(), "url": source_url(found),
                      "generation": engine.generation})

    @app.get("/api/categories", response_model=schema.Categories,
             responses={503: _ERRORS[503]}, summary="The categories and their sizes")
    async def categories():
        engine, _ = live.current()
        found = [{"name": n, "count": c} for n, c in engine.category_counts().items()]
        return _JSON({"categories": found, "n_docs": engine.n_questions,
                      "generation": engine.generation})

    @app.get("/api/tags", response_model=schema.Tags, responses={503: _ERRORS[503]},
             summary="The most frequent tags and their numbers of questions")
    async def tags(limit: Annotated[int, Query(ge=1, le=1000, description="how many tags "
                                                                         "(most questions "
                                                                         "first)")] = 30):
        engine, _ = live.current()
        counts = engine.tag_counts()
        return _JSON({"tags": [{"name": n, "count": c} for n, c in
                               itertools.islice(counts.items(), limit)],
                      "n_tags": len(counts), "generation": engine.generation})

    @app.get("/health", response_model=schema.Health, responses={503: _ERRORS[503]},
             summary="The generation served")
    async def health():
        engine, _ = live.current()
        return _JSON({"status": "ok" if live.error is None else "stale",
                      "generation": engine.generation, "n_docs": engine.n_questions,
                      "error": live.error, "version": __version__})

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def app_from_environment() -> FastAPI:
    """:func:`create_app` for the index named by ``$CQA_SEARCH_INDEX`` (the factory that
    uvicorn's worker processes call, where a platform has no ``SO_REUSEPORT``;
    ``$CQA_SEARCH_VERIFY`` set: ``verify=True``; ``$CQA_SEARCH_WRITE_TOKEN`` set: writes
    with this token; ``$CQA_SEARCH_HYBRID``: ``serve --hybrid`` as it was written)."""
    index = os.environ.get(INDEX_VARIABLE)
    if not index:
        raise CQASearchError(f"set {INDEX_VARIABLE} to the index directory to serve")
    try:
        hybrid = weight_of_text(os.environ.get(HYBRID_VARIABLE) or "auto")
    except ValueError as exc:
        raise CQASearchError(f"{HYBRID_VARIABLE}: {exc}") from None
    return create_app(index, verify=bool(os.environ.get(VERIFY_VARIABLE)),
                      write_token=os.environ.get(WRITE_TOKEN_VARIABLE) or None,
                      hybrid=hybrid)
