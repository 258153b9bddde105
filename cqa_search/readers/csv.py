"""Reader for CSV and TSV archives with a header row.

Column rules
------------
The first row is the header (its names must be unique); every other non-blank row is one
question. ``columns`` (``--columns`` on the command line) maps a schema field (see
:mod:`cqa_search.archive`) to the column holding it; a field not in ``columns`` is read
from the column named like the field, or else like one of its
:data:`~cqa_search.archive.FIELD_ALIASES` (``_id``; ``text``, ``contents``):

- ``id``: when there is no id column, ``auto_id=True`` (``--auto-id``) makes ids
  ``<file stem>:<line>`` (the row's first physical line); otherwise the file is rejected.
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

Malformed rows
--------------
Quoting is read strictly: a quote after a closing quote, a quoted cell never closed, or
a cell over :data:`FIELD_LIMIT` characters makes the row invalid (named by the line where
it starts). The row is taken to be that one line, and reading goes on from the next line,
so that a missing quote costs one row and not the rest of the file. Rows with the wrong
number of cells are invalid too.
"""
from __future__ import annotations

import codecs
import csv
import os
import re

from ..archive import FIELD_ALIASES, SCHEMA_KEYS, Question
from ..exceptions import ArchiveError
from ._base import (LIST_FIELDS, ReadReport, check_columns, check_encoding, check_file,
                    read_line, too_large)

__all__ = ["read"]

_ANSWER_COLUMN = re.compile(r"answer(\d*)")
#: Longest cell, in characters. The csv module's default (131,072) refuses real cells
#: (a long thread's answers in one cell); the limit still stops a cell whose closing quote
#: is missing from taking the rest of a large file into memory.
FIELD_LIMIT = 1 << 24
_UTF8 = codecs.getdecoder("utf-8")


class _Lines:
    """The decoded lines of a binary file for :func:`csv.reader`, numbered, with the byte
    offsets of the current row's lines so that reading can start again inside it.

    A line that is not valid UTF-8 is reported (raised, unless invalid records are
    skipped) and its number kept in :attr:`bad`.
    """

    def __init__(self, f, path, report):
        self._f, self._path, self._report = f, path, report
        self.lineno = 0  # the last line read
        self.bad = set()
        self._offset = 0
        self._row = []  # byte offsets of the lines read since the current row started
        self._decode = codecs.getdecoder("utf-8-sig")  # the first line may carry a BOM

    def __iter__(self):
        return self

    def __next__(self) -> str:
        raw = read_line(self._f)
        if raw is None:  # a line too large: its row is dropped, like a line not UTF-8
            self.lineno += 1
            self._row.append(self._offset)
            if self._f.seekable():
                self._offset = self._f.tell()
            if self.lineno not in self.bad:  # not when the line is read again
                self.bad.add(self.lineno)
                self._report.invalid(too_large(self._path, self.lineno))
            return ""
        if not raw:
            raise StopIteration
        self.lineno += 1
        self._row.append(self._offset)
        self._offset += len(raw)
        decode, self._decode = self._decode, _UTF8
        try:
            return decode(raw)[0]
        except UnicodeDecodeError as exc:
            if self.lineno not in self.bad:  # not when the line is read again
                self.bad.add(self.lineno)
                self._report.invalid(ArchiveError(
                    f"not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r})",
                    self._path, self.lineno))
            return raw.decode("utf-8", errors="replace")

    def end_row(self) -> None:
        """The lines read so far form a row: the next line starts a new one."""
        self._row.clear()

    def restart(self, line) -> None:
        """Read again from ``line``, a line of the current row."""
        first = self.lineno - len(self._row) + 1
        if not self._f.seekable():
            raise ArchiveError(f"cannot read a pipe again from line {line} after a malformed "
                               "row; give a file", self._path, first)
        offset = self._row[line - first]
        self._f.seek(offset)
        self._offset, self.lineno = offset, line - 1
        self._row.clear()


def _csv_error(exc: csv.Error, first: int, last: int) -> str:
    """The csv module's error, said for the row starting at ``first`` (the error is on
    line ``last``)."""
    text = str(exc)
    at = f" (at line {last})" if last != first else ""
    if "field larger than field limit" in text:
        return (f"a cell longer than {FIELD_LIMIT:,} characters{at}: is the closing quote of a "
                "cell missing?")
    if "unexpected end of data" in text:
        return ("a quoted cell starting in this row is never closed (the file ends inside it): "
                "is a quote missing or not doubled?")
    if "expected after" in text:
        return (f"malformed CSV{at}: {text} (a quote inside a quoted cell must be doubled, "
                'as "")')
    return f"malformed CSV{at}: {text}"


def _resolve(header, columns, auto_id, path, line):
    """Map each field to column indices: an int (one cell) or a list (one item per cell)."""
    index = {name: i for i, name in enumerate(header)}

    def column(name, field):
        if name not in index:
            raise ArchiveError(
                f"column {name!r} (for field {field!r}) is not in the header; available "
                f"columns: {', '.join(repr(h) for h in header)}", path, line)
        return index[name]

    repeated = sorted({h for h in header if h and header.count(h) > 1})
    if repeated:
        raise ArchiveError(
            f"the header names column {repeated[0]!r} more than once; rename the columns so "
            "that each name is unique", path, line)
    spec = {}
    for field in SCHEMA_KEYS:
        name = columns.get(field, field if field in index else None)
        if name is None and field in FIELD_ALIASES:
            name = next((a for a in FIELD_ALIASES[field] if a in index), None)
        if isinstance(name, (list, tuple)) and field in LIST_FIELDS:
            spec[field] = [column(n, field) for n in name]
        elif name is not None:
            spec[field] = column(name, field)
    if "answers" not in spec:
        numbered = sorted((int(m.group(1) or 0), i) for i, h in enumerate(header)
                          if (m := _ANSWER_COLUMN.fullmatch(h)))
        if numbered:
            spec["answers"] = [i for _, i in numbered]
    names = ", ".join(repr(h) for h in header)
    if "id" not in spec and not auto_id:
        raise ArchiveError(
            "no id column: name one with --columns id=COLUMN or use --auto-id "
            f"(in Python: columns={{'id': ...}} or auto_id=True); the header is {names}",
            path, line)
    if "title" not in spec and "body" not in spec:
        raise ArchiveError(
            "no title or body column: map one with --columns title=COLUMN,body=COLUMN "
            f"(in Python: columns={{'title': ..., 'body': ...}}); the header is {names}",
            path, line)
    used = {i for v in spec.values() for i in (v if isinstance(v, list) else [v])}
    extra = [(h, i) for i, h in enumerate(header)
             if i not in used and h and h not in SCHEMA_KEYS]
    return spec, extra


def _record(row, spec, extra, separator):
    record = {}
    for field, where in spec.items():
        if isinstance(where, list):
            record[field] = [row[i].strip() for i in where if row[i].strip()]
        elif field in LIST_FIELDS:
            record[field] = [item.strip() for item in row[where].split(separator) if item.strip()]
        else:
            record[field] = row[where]
    best = record.get("best_answer", "").strip()
    # A number is an index (a long one cannot be: it is text).
    index = best.isascii() and best.isdigit() and len(best) < 10
    record["best_answer"] = int(best) if index else (best or None)
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
    columns = check_columns(columns)
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)  # process-wide: raised, never lowered
    stem = os.path.splitext(os.path.basename(path))[0]
    with open(path, "rb") as f:
        check_encoding(f, path)
        lines = _Lines(f, path, report)
        rows = csv.reader(lines, delimiter=delimiter, strict=True)
        header, spec, extra = None, None, None
        while True:
            first = lines.lineno + 1  # physical line where this row starts
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:
                error = ArchiveError(_csv_error(exc, first, lines.lineno), path, first)
                if header is None:
                    raise error from None
                report.invalid(error)
                # The row is its first line; what the error swallowed is read again.
                if lines.lineno > first:
                    lines.restart(first + 1)
                else:
                    lines.end_row()
                rows = csv.reader(lines, delimiter=delimiter, strict=True)
                continue
            last = lines.lineno
            lines.end_row()
            if len(row) <= 1 and not "".join(row).strip():
                continue  # blank line
            if lines.bad.intersection(range(first, last + 1)):
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
            yield question, path, first
    if header is None:
        raise ArchiveError("empty file: a header row is required", path)
