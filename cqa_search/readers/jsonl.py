"""Reader for JSONL archives: the canonical schema (see :mod:`cqa_search.archive`), BEIR and
pyserini corpora, and any other one object per line with a key mapping.

Keys
----
A schema field is read from the key of its name; when that key is absent, from the
aliases of :data:`~cqa_search.archive.FIELD_ALIASES` (``_id`` for ``id``; ``text``, then
``contents``, for ``body``), so that a BEIR corpus (``_id``, ``title``, ``text``,
``metadata``) or a pyserini one (``id``, ``contents``) reads as it is. ``columns`` maps a
field to another key (``{"body": "question_text"}``; for ``tags``, ``answers`` and
``duplicate_of`` a list of keys, whose items are concatenated). A mapped key replaces the
key named like the field, which is then dropped. Other keys are kept in
:attr:`~cqa_search.archive.Question.extra`; those holding text are counted and logged
once per file, since they are not indexed.
"""
from __future__ import annotations

import json
import re

import orjson

from ..archive import FIELD_ALIASES, Question
from ..exceptions import ArchiveError
from ._base import (ReadReport, check_columns, check_encoding, check_file, read_line,
                    too_large)

__all__ = ["read"]

_POSITION = re.compile(r": line \d+ column (\d+) \(char \d+\)$")


def _diagnose(raw: bytes, error: orjson.JSONDecodeError) -> str:
    """Why a line cannot be read, in the standard library's words where it sees a syntax
    error (the fast parser's messages are terser), else in the fast parser's (it also
    refuses what the standard library takes: numbers beyond a double, nesting deeper
    than 1,024 levels)."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"malformed JSON: {exc.msg} (column {exc.colno})"
    except (ValueError, RecursionError):
        pass  # too many digits, too deep: the fast parser's message says which
    message = str(error)
    column = _POSITION.search(message)
    where = f" (column {column.group(1)})" if column else ""
    if "depth limit" in message:
        return f"JSON nested more than 1,024 levels deep{where}"
    if "infinity" in message:
        return f"a number too large to read{where} (write long numeric ids as strings)"
    return f"unsupported JSON: {_POSITION.sub('', message)}{where}"


def _map_keys(record: dict, columns: dict) -> dict:
    """The record with its keys renamed to schema fields (see the module docstring)."""
    if not columns and "id" in record and "body" in record:
        return record  # the canonical schema: nothing to rename
    record = dict(record)
    for field, key in columns.items():
        if isinstance(key, (list, tuple)):
            items = []
            for name in key:
                value = record.pop(name, None)
                if value is not None:
                    items.extend(value if isinstance(value, list) else [value])
            record[field] = items
        elif key in record:
            record[field] = record.pop(key)
        else:
            record.pop(field, None)  # mapped to an absent key: the field is absent
    for field, aliases in FIELD_ALIASES.items():
        if field not in record and field not in columns:
            for alias in aliases:
                if alias in record:
                    record[field] = record.pop(alias)
                    break
    return record


def _missing_id(record) -> str:
    keys = ", ".join(repr(k) for k in list(record)[:8]) + (", ..." if len(record) > 8 else "")
    return (f"missing required field 'id' (the keys are {keys or 'none'}; map one with "
            "--columns id=KEY, in Python columns={'id': 'KEY'})")


def read(path, *, report: ReadReport, columns=None):
    """Yield one :class:`Question` per non-blank line of a JSONL file, with its line.

    Lines are decoded one at a time, so memory is constant per record and errors name
    their line (malformed JSON, non-UTF-8 bytes, missing or mistyped fields, a line over
    :data:`~cqa_search.readers._base.MAX_RECORD_BYTES`). A file in UTF-16 or UTF-32 is
    refused as a whole, naming its encoding.

    Parameters
    ----------
    path : str or path-like
    report : ReadReport
        Receives invalid lines.
    columns : mapping or None
        Field -> key of the records (see the module docstring); None reads the schema's
        keys and their aliases.
    """
    path = check_file(path)
    columns = check_columns(columns, "key")
    with open(path, "rb") as f:
        check_encoding(f, path)
        lineno = 0
        while True:
            lineno += 1
            raw = read_line(f)
            if raw is None:
                report.invalid(too_large(path, lineno))
                continue
            if not raw:
                break
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                report.invalid(ArchiveError(_diagnose(raw, exc), path, lineno))
                continue
            try:
                if type(record) is dict:
                    record = _map_keys(record, columns)
                    if "id" not in record:
                        raise ValueError(_missing_id(record))
                question = Question.from_dict(record)
            except ValueError as exc:
                report.invalid(ArchiveError(str(exc), path, lineno))
                continue
            yield question, path, lineno
