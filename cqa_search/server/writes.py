"""The write API of ``cqa-search serve --allow-writes``: questions added and deleted.

=====================================  ======================================================
``POST /api/questions``                questions to add: a JSON list of records of the
                                       archive schema, one record, or JSONL (one per line);
                                       ``?replace=true`` replaces questions of the same id
``DELETE /api/questions/{id}``         deletes a question
=====================================  ======================================================

Both need the token the server was started with, ``Authorization: Bearer TOKEN`` (401
without it, 403 with another; compared in constant time). They change the index as
``cqa-search add`` and ``delete`` do (:func:`~cqa_search.index.live.add_questions`,
:func:`~cqa_search.index.live.delete_questions`: a new generation, atomically), and the
server serves the new generation at once (its other processes within their interval).
"""
from __future__ import annotations

import errno
import hmac
from typing import Annotated

import orjson
from fastapi import Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..archive import Question
from ..exceptions import ArchiveError
from ..index.live import add_questions, delete_questions
from . import schema

__all__ = ["add_write_routes", "parse_questions"]

_AUTH = {401: {"model": schema.Error, "description": "no token"},
         403: {"model": schema.Error, "description": "a wrong token"},
         503: {"model": schema.Error, "description": "the index cannot be written (a "
                                                    "read-only file system, no permission)"},
         507: {"model": schema.Error, "description": "no space to write the index"}}
#: OSError numbers of a write the machine refuses -> the status that says so.
_REFUSED = {errno.ENOSPC: 507, errno.EDQUOT: 507, errno.EFBIG: 507,
            errno.EROFS: 503, errno.EACCES: 503, errno.EPERM: 503}


def parse_questions(body: bytes) -> list:
    """The questions of a request body: a JSON list of records, one record, or JSONL.

    Raises
    ------
    ArchiveError
        Not JSON, or a record that is not a question (its number named).
    """
    try:
        records = orjson.loads(body)
        records = [records] if isinstance(records, dict) else records
    except orjson.JSONDecodeError:
        records = []
        for number, line in enumerate(body.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise ArchiveError(f"line {number} of the body is not JSON ({exc}); send a JSON "
                                   "list of questions, or one JSON object per line") from None
    if not isinstance(records, list) or not records:
        raise ArchiveError("send a JSON list of questions, one question, or one JSON object "
                           "per line")
    questions = []
    for number, record in enumerate(records, start=1):
        try:
            questions.append(Question.from_dict(record))
        except ValueError as exc:
            raise ArchiveError(f"question {number} of the body: {exc}") from None
    return questions


def add_write_routes(app, live, token: str) -> None:
    """Add the write endpoints to ``app`` (serving ``live``, a
    :class:`~cqa_search.server.live.LiveIndex`), allowed with ``token``."""
    expected = token.encode("utf-8")

    def authorize(request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise HTTPException(401, "this request needs the server's token: "
                                     "Authorization: Bearer TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(given.strip().encode("utf-8"), expected):
            raise HTTPException(403, "wrong token")

    async def change(function, *args, **kwargs):
        """``function`` (add or delete) in a thread; the machine refusing the write (a full
        disk, a read-only file system) is an error of the service, not a traceback."""
        try:
            return await run_in_threadpool(function, *args, **kwargs)
        except OSError as exc:
            if exc.errno not in _REFUSED:
                raise
            raise HTTPException(_REFUSED[exc.errno], f"cannot write the index: "
                                f"{exc.strerror or exc} (it is unchanged)") from None

    def changed(summary) -> dict:
        live.refresh()  # serve the new generation now (it opens it)
        return {"added": summary.added, "deleted": summary.deleted,
                "n_questions": summary.n_questions, "generation": summary.generation}

    @app.post("/api/questions", status_code=201, response_model=schema.Change,
              responses={**_AUTH, 400: {"model": schema.Error, "description": "bad questions"},
                         411: {"model": schema.Error, "description": "no Content-Length"},
                         413: {"model": schema.Error, "description": "too large a body"}},
              summary="Add questions (serve --allow-writes)")
    async def add(request: Request, replace: Annotated[bool, Query(description=(
            "replace the questions whose id the index has (else such a question is "
            "refused)"))] = False):
        authorize(request)
        questions = parse_questions(await request.body())
        try:
            summary = await change(add_questions, live.path, questions, replace=replace)
        except ArchiveError as exc:  # (its advice names the command line's option)
            raise ArchiveError(str(exc).replace("with --replace", "with ?replace=true")) \
                from None
        return await run_in_threadpool(changed, summary)

    @app.delete("/api/questions/{doc_id:path}", response_model=schema.Change,
                responses={**_AUTH, 404: {"model": schema.Error,
                                          "description": "no such question"}},
                summary="Delete a question (serve --allow-writes)")
    async def delete(doc_id: str, request: Request):
        authorize(request)
        # The index on disk decides, not this process's engine: another process of the
        # server may have added the question since this one last followed the index.
        summary = await change(delete_questions, live.path, [doc_id], missing_ok=True)
        if not summary.deleted:
            raise HTTPException(404, f"no question {doc_id!r} in the archive")
        return await run_in_threadpool(changed, summary)
