"""Reader for the canonical JSONL schema (see :mod:`cqa_search.archive`)."""
from __future__ import annotations

import json

import orjson

from ..archive import Question
from ..exceptions import ArchiveError
from ._base import ReadReport, check_file

__all__ = ["read", "sniff"]


def sniff(path, head: bytes) -> bool:
    """True when the first non-blank line of the file looks like a JSON object."""
    for line in head.splitlines():
        line = line.strip()
        if line:
            return line.startswith(b"{")
    return False


def _diagnose(raw: bytes) -> str:
    """Why a line is not a JSON document, in the standard library's words (the fast
    parser's messages are terser)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"malformed JSON: {exc.msg} (column {exc.colno})"
    return "malformed JSON"


def read(path, *, report: ReadReport):
    """Yield one :class:`Question` per non-blank line of a JSONL file.

    Lines are decoded one at a time, so memory is constant per record and errors name
    their line (malformed JSON, non-UTF-8 bytes, missing or mistyped fields).
    """
    path = check_file(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                report.invalid(ArchiveError(_diagnose(raw), path, lineno))
                continue
            try:
                question = Question.from_dict(record)
            except ValueError as exc:
                report.invalid(ArchiveError(str(exc), path, lineno))
                continue
            yield question
