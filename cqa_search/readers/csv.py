"""Reader for CSV and TSV archives with a header row.

Column rules
------------
The first row is the header; every other non-blank row is one question. ``columns``
maps a schema field (see :mod:`cqa_search.archive`) to the column holding it; a field
not in ``columns`` is read from the column named like the field, when there is one:

- ``id``: when there is no id column, ``auto_id=True`` makes ids ``<file stem>:<line>``
  (the row's first physical line); otherwise the file is rejected.
- ``title``, ``body``, ``category``: the cell text (an empty category is no category).
- ``tags``, ``duplicate_of``, ``answers``: one column whose cell is split on
  ``list_separator`` (default ``"|"``), or a list of columns, one item per non-empty
  cell. The default for ``answers`` is a column named ``answers``, else the columns
  ``answer``, ``answer1``, ``answer2``, ... in that order (one answer per cell).
- ``best_answer``: a 0-based index into ``answers`` when the cell is a number, else the
  text of the best answer (added as the first answer when it is not among them).

Columns used by no field are kept in :attr:`~cqa_search.archive.Question.extra` under
their header name, except columns without a name and columns named like a schema field
(those are deliberately mapped away). Empty cells are empty strings.
"""
from __future__ import annotations

import codecs
import csv
import os
import re
from collections.abc import Mapping

from ..archive import SCHEMA_KEYS, Question
from ..exceptions import ArchiveError
from ._base import ReadReport, check_file

__all__ = ["read"]

_LIST_FIELDS = ("tags", "answers", "duplicate_of")
_ANSWER_COLUMN = re.compile(r"answer(\d*)")


def _decoded_lines(f, path, report, bad_lines):
    """Decode binary lines as UTF-8; a bad line is reported and its number remembered."""
    decoder = codecs.getdecoder("utf-8-sig")  # the first line may carry a BOM
    for lineno, raw in enumerate(f, 1):
        try:
            yield decoder(raw)[0]
        except UnicodeDecodeError as exc:
            report.invalid(ArchiveError(
                f"not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r})", path, lineno))
            bad_lines.add(lineno)
            yield raw.decode("utf-8", errors="replace")
        decoder = codecs.getdecoder("utf-8")


def _resolve(header, columns, auto_id, path, line):
    """Map each field to column indices: an int (one cell) or a list (one item per cell)."""
    index = {name: i for i, name in enumerate(header)}

    def column(name, field):
        if not isinstance(name, str):
            raise ArchiveError(f"columns[{field!r}] must be a column name; got {name!r}", path)
        if name not in index:
            raise ArchiveError(
                f"column {name!r} (for field {field!r}) is not in the header; available "
                f"columns: {', '.join(repr(h) for h in header)}", path, line)
        return index[name]

    unknown = sorted(set(columns) - set(SCHEMA_KEYS))
    if unknown:
        raise ArchiveError(f"columns: unknown field {unknown[0]!r}; fields are "
                           f"{', '.join(SCHEMA_KEYS)}", path)
    spec = {}
    for field in SCHEMA_KEYS:
        name = columns.get(field, field if field in index else None)
        if isinstance(name, (list, tuple)) and field in _LIST_FIELDS:
            spec[field] = [column(n, field) for n in name]
        elif name is not None:
            spec[field] = column(name, field)
    if "answers" not in spec:
        numbered = sorted((int(m.group(1) or 0), i) for i, h in enumerate(header)
                          if (m := _ANSWER_COLUMN.fullmatch(h)))
        if numbered:
            spec["answers"] = [i for _, i in numbered]
    if "id" not in spec and not auto_id:
        raise ArchiveError(
            "no id column: name one with columns={'id': ...} or pass auto_id=True; "
            f"the header is {', '.join(repr(h) for h in header)}", path, line)
    if "title" not in spec and "body" not in spec:
        raise ArchiveError(
            "no title or body column: map one with columns={'title': ..., 'body': ...}; "
            f"the header is {', '.join(repr(h) for h in header)}", path, line)
    used = {i for v in spec.values() for i in (v if isinstance(v, list) else [v])}
    extra = [(h, i) for i, h in enumerate(header)
             if i not in used and h and h not in SCHEMA_KEYS]
    return spec, extra


def _record(row, spec, extra, separator):
    record = {}
    for field, where in spec.items():
        if isinstance(where, list):
            record[field] = [row[i].strip() for i in where if row[i].strip()]
        elif field in _LIST_FIELDS:
            record[field] = [item.strip() for item in row[where].split(separator) if item.strip()]
        else:
            record[field] = row[where]
    best = record.get("best_answer", "").strip()
    record["best_answer"] = int(best) if best.isascii() and best.isdigit() else (best or None)
    record.update((name, row[i]) for name, i in extra)
    return record


def read(path, *, report: ReadReport, delimiter=",", columns=None, list_separator="|",
         auto_id=False):
    """Yield one :class:`~cqa_search.archive.Question` per row of a CSV/TSV file.

    See the module docstring for how columns map to fields.

    Parameters
    ----------
    path : str or path-like
        A UTF-8 text file (a BOM is allowed) whose first row is a header.
    report : ReadReport
        Receives invalid rows.
    delimiter : str
        One character; ``","`` for format ``csv``, ``"\\t"`` for ``tsv``.
    columns : mapping or None
        Field -> column name, or for ``tags``, ``answers`` and ``duplicate_of`` a list
        of column names. None uses the default names.
    list_separator : str
        Separator of the items of a list-valued cell.
    auto_id : bool
        Without an id column: when True, make ids ``<file stem>:<line>``; when False,
        raise.

    Raises
    ------
    ArchiveError
        Bad options, an empty file, a mapped column missing from the header (the message
        lists the available columns), no id column without ``auto_id``, no title/body
        column; and, unless invalid records are skipped, rows with the wrong number of
        cells, bytes that are not UTF-8, or invalid fields (with the physical line).
    """
    path = check_file(path)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ArchiveError(f"delimiter must be a 1-character string; got {delimiter!r}")
    if not isinstance(list_separator, str) or not list_separator:
        raise ArchiveError(f"list_separator must be a non-empty string; got {list_separator!r}")
    if columns is None:
        columns = {}
    elif not isinstance(columns, Mapping):
        raise ArchiveError(f"columns must be a mapping of field -> column; got {columns!r}")
    stem = os.path.splitext(os.path.basename(path))[0]
    bad_lines = set()
    with open(path, "rb") as f:
        rows = csv.reader(_decoded_lines(f, path, report, bad_lines), delimiter=delimiter)
        header, spec, extra = None, None, None
        last = 0  # physical line where the previous row ended
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:
                # The csv module cannot resynchronise after an error: the file is unusable.
                raise ArchiveError(f"malformed CSV: {exc}", path, rows.line_num) from None
            first, last = last + 1, rows.line_num
            if len(row) <= 1 and not "".join(row).strip():
                continue  # blank line
            if bad_lines.intersection(range(first, last + 1)):
                if header is None:
                    raise ArchiveError("the header row is not valid UTF-8", path, first)
                continue  # the decoding error is reported already
            if header is None:
                header = [name.strip() for name in row]
                spec, extra = _resolve(header, columns, auto_id, path, first)
                continue
            if len(row) != len(header):
                report.invalid(ArchiveError(
                    f"row has {len(row)} cells but the header has {len(header)}", path, first))
                continue
            record = _record(row, spec, extra, list_separator)
            record.setdefault("id", f"{stem}:{first}")
            try:
                question = Question.from_dict(record)
            except ValueError as exc:
                report.invalid(ArchiveError(str(exc), path, first))
                continue
            yield question
    if header is None:
        raise ArchiveError("empty file: a header row is required", path)
