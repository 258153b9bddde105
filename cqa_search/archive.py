"""Questions and archives: the canonical record and the ``doc_id`` <-> ``row`` mapping.

The canonical JSONL schema (one object per line) is::

    {"id": "q1", "title": "...", "body": "...", "category": "Travel", "tags": ["visa"],
     "answers": ["...", "..."], "best_answer": 0, "duplicate_of": ["q0"]}

Only ``id`` and some text (``title`` or ``body``) are required. ``best_answer`` is the
0-based index of the best (accepted) answer, or ``null`` when unknown; a string is also
accepted and taken as the text of the best answer. Keys outside the schema are kept in
:attr:`Question.extra` and written back, so converting an archive never drops data.
Among them, the first of :data:`DATE_KEYS` that holds a date is the question's creation
date (what ``date:`` filters read): an ISO 8601 date or date and time, or a number of
seconds since 1970, from 0001-01-01 to 9999-12-31 (UTC); a date outside these days is
refused (:func:`date_seconds`), and text that is no date is no date.

Readers also take the names other tools give these fields (:data:`FIELD_ALIASES`): BEIR
and pyserini corpora name the id ``_id`` and the text ``text`` or ``contents``.
"""
from __future__ import annotations

import datetime as dt
import math
import mmap
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import orjson

from .exceptions import ArchiveError, IndexFormatError, QueryError, rebuild_hint

__all__ = ["Question", "Archive", "SCHEMA_KEYS", "FIELD_ALIASES", "DATE_KEYS", "FIRST_DATE",
           "END_OF_DATES", "date_seconds", "question_date", "undated_value", "iso_date",
           "did_you_mean"]

SCHEMA_KEYS = ("id", "title", "body", "category", "tags", "answers", "best_answer", "duplicate_of")
_SCHEMA_KEYS = frozenset(SCHEMA_KEYS)
#: Schema field -> the names other tools give it, tried in order when the field itself is
#: absent (BEIR: ``_id``, ``title``, ``text``; pyserini: ``id``, ``contents``).
FIELD_ALIASES = {"id": ("_id",), "body": ("text", "contents")}
_NO_EXTRA = MappingProxyType({})
#: The keys of :attr:`Question.extra` read as a question's creation date, the first that
#: holds one: the StackExchange reader's ``creation_date``, SemEval's (``RELQ_DATE``) and
#: Yahoo! L6's ``date``; in a JSONL or CSV archive any of them.
DATE_KEYS = ("creation_date", "date", "created_at")
#: 0001-01-01T00:00:00 UTC in seconds since 1970: the first second a date may have.
FIRST_DATE = -62_135_596_800
#: The second after 9999-12-31T23:59:59 UTC: dates lie in ``[FIRST_DATE, END_OF_DATES)``
#: (what a ``datetime`` holds, and an int64 with room to spare).
END_OF_DATES = 253_402_300_800
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DATE_RANGE = ("a date from 0001-01-01 to 9999-12-31 (UTC; a number is read as seconds since "
               "1970-01-01)")


def _str_tuple(value, name):
    """``value`` as a tuple of str; None is empty. Refuses strings, mappings and sets (a
    list was meant: a dict would give its keys, a set an arbitrary order)."""
    if type(value) is tuple:
        out = value
    elif type(value) is list:
        out = tuple(value)
    elif value is None:
        return ()
    elif isinstance(value, (str, bytes, Mapping, Set)) or not isinstance(value, Iterable):
        raise ValueError(f"field '{name}' must be a list of strings; got {type(value).__name__}")
    else:
        out = tuple(value)
    if not all(type(item) is str for item in out):
        bad = next(item for item in out if type(item) is not str)
        if not isinstance(bad, str):
            raise ValueError(f"field '{name}' must be a list of strings; got an item of type "
                             f"{type(bad).__name__}")
        out = tuple(str(item) for item in out)  # str subclasses
    return out


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _id_str(value, name):
    """An id given as an integer, as a string."""
    try:
        return str(int(value))
    except ValueError:  # more digits than int -> str converts (sys.get_int_max_str_digits)
        raise ValueError(f"field '{name}' is an integer of more than "
                         f"{sys.get_int_max_str_digits()} digits") from None


def _id_list(value, name):
    """``duplicate_of``: one id or a list of ids (strings or integers)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if _is_int(value):
        return (_id_str(value, name),)
    if type(value) is list or type(value) is tuple:
        return tuple(_id_str(item, name) if _is_int(item) else item for item in value)
    raise ValueError(f"field '{name}' must be an id or a list of ids; got {type(value).__name__}")


def _check_extra(extra):
    """Refuse what cannot be written back: schema keys, values that are not JSON."""
    clash = _SCHEMA_KEYS.intersection(extra)
    if clash:
        raise ValueError(f"field 'extra' must not hold schema field {sorted(clash)[0]!r}")
    try:
        orjson.dumps(extra)
    except orjson.JSONEncodeError:
        for key, value in extra.items():
            if not isinstance(key, str):
                raise ValueError(f"field 'extra': key {key!r} is not a string") from None
            try:
                orjson.dumps(value)
            except orjson.JSONEncodeError as exc:
                reason = ("it is nested too deeply" if "ecursion" in str(exc)
                          else f"it cannot be stored as JSON ({exc})")
                raise ValueError(f"the value of key {key!r}: {reason}") from None
        raise


def _seconds_of(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if not isinstance(value, float) or math.isfinite(value) else \
            END_OF_DATES
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # ("²".isdigit() too, which int() refuses)
        return int(text) if len(text) <= 20 else END_OF_DATES  # (int() stops at 4,300)
    try:
        when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int((when - _EPOCH).total_seconds() // 1)


def date_seconds(value) -> int | None:
    """Seconds since 1970-01-01 UTC of a question's date (a value of one of
    :data:`DATE_KEYS`), None when ``value`` is no date.

    A date is an ISO 8601 date or date and time (UTC unless it says otherwise) or a number
    of seconds since 1970 (a JSON number or a string of digits); other text, a boolean or
    null is no date.

    Raises
    ------
    ValueError
        A date outside 0001-01-01 to 9999-12-31: a number no int64 holds, milliseconds
        taken for seconds, an infinite number. The date filters of every user of an index
        read its questions' dates: one out of range must not enter it.

    Examples
    --------
    >>> date_seconds("2016-08-02T15:39:14.947"), date_seconds("2012-11-12 13:06:59")
    (1470152354, 1352725619)
    >>> date_seconds("1150000000"), date_seconds("2014-01-01"), date_seconds("soon")
    (1150000000, 1388534400, None)
    >>> date_seconds(1e30)
    Traceback (most recent call last):
    ...
    ValueError: 1e+30 is not a date from 0001-01-01 to 9999-12-31 (UTC; a number is read as \
seconds since 1970-01-01)
    """
    seconds = _seconds_of(value)
    if seconds is not None and not FIRST_DATE <= seconds < END_OF_DATES:
        shown = repr(value)
        raise ValueError(f"{shown if len(shown) <= 40 else shown[:36] + '...'} is not "
                         f"{_DATE_RANGE}")
    return seconds


def did_you_mean(options) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the ids (or names) ``options``; empty for
    none."""
    return f"; did you mean {' or '.join(map(repr, options))}?" if options else ""


def question_date(record, out_of_range=None) -> int | None:
    """The creation date of a question's record (or its :attr:`Question.extra`): the
    first of :data:`DATE_KEYS` that holds a date, in seconds since 1970-01-01 UTC; None
    when none does.

    A date out of range (what an index built before dates were checked may hold) is read
    as none, its value appended to ``out_of_range`` when a list is given.

    Examples
    --------
    >>> question_date({"creation_date": "last tuesday", "date": "2014-01-01"})
    1388534400
    >>> question_date({"date": "soon"}) is None
    True
    """
    for key in DATE_KEYS:
        try:
            when = date_seconds(record.get(key))
        except ValueError:
            if out_of_range is not None:
                out_of_range.append(record.get(key))
            continue
        if when is not None:
            return when
    return None


def undated_value(extra):
    """The first value of :data:`DATE_KEYS` in ``extra`` that is given (not null, not
    blank) when none of them is a date, else None: a date the archive meant that the date
    filters cannot read (e.g. ``"last tuesday"``).

    Examples
    --------
    >>> undated_value({"creation_date": "last tuesday"}), undated_value({"date": None})
    ('last tuesday', None)
    """
    given = [extra[key] for key in DATE_KEYS
             if extra.get(key) is not None and str(extra[key]).strip()]
    if not given or question_date(extra) is not None:
        return None
    return given[0]


def iso_date(seconds) -> str | None:
    """A date in seconds since 1970 as ISO 8601 in UTC: ``2014-01-01`` at midnight, else
    ``2016-08-02T15:39:14Z``; None for None.

    Examples
    --------
    >>> iso_date(1388534400), iso_date(1470152354), iso_date(None)
    ('2014-01-01', '2016-08-02T15:39:14Z', None)
    """
    if seconds is None:
        return None
    when = _EPOCH + dt.timedelta(seconds=int(seconds))
    day = f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
    return day if seconds % 86400 == 0 else f"{day}T{when:%H:%M:%S}Z"


@dataclass(frozen=True)
class Question:
    """One archived question with its answers.

    Parameters
    ----------
    id : str
        External identifier, unique in the archive.
    title, body : str
        Question text; at least one of them must be non-empty.
    category : str or None
        Natural category (forum section, site, main category).
    tags : tuple of str
    answers : tuple of str
        Answer texts in archive order.
    best_answer : int or None
        Index into ``answers`` of the best/accepted answer, when known.
    duplicate_of : tuple of str
        Ids of questions this one duplicates.
    extra : mapping
        Any other JSON-serialisable fields of the source record.

    Examples
    --------
    >>> q = Question("q1", "How do I renew my visa?", answers=("Go to the office.",), best_answer=0)
    >>> q.text
    'How do I renew my visa?'
    >>> q.best_answer_text
    'Go to the office.'
    """

    id: str
    title: str = ""
    body: str = ""
    category: str | None = None
    tags: tuple = ()
    answers: tuple = ()
    best_answer: int | None = None
    duplicate_of: tuple = ()
    extra: Mapping = field(default_factory=dict)

    def __post_init__(self):
        # Attributes are only re-set when normalisation changed them: this runs once per
        # archived question, so it is kept cheap.
        set_ = object.__setattr__
        qid = self.id
        if type(qid) is not str:
            if _is_int(qid):
                qid = _id_str(qid, "id")
            elif isinstance(qid, float):
                raise ValueError(f"field 'id' must be a non-empty string or an integer; got the "
                                 f"number {qid!r} (write long numeric ids as strings)")
            elif not isinstance(qid, str):
                raise ValueError(f"field 'id' must be a non-empty string; got {qid!r}")
        stripped = qid.strip()
        if not stripped:
            raise ValueError(f"field 'id' must be a non-empty string; got {self.id!r}")
        if stripped is not self.id:
            set_(self, "id", stripped)
        for name in ("title", "body"):
            value = getattr(self, name)
            if type(value) is not str:
                if value is None:
                    value = ""
                elif not isinstance(value, str):
                    raise ValueError(f"field '{name}' must be a string; got {type(value).__name__}")
            stripped = value.strip()
            if stripped is not getattr(self, name):
                set_(self, name, stripped)
        if not self.title and not self.body:
            raise ValueError(f"question {self.id!r} has neither a title nor a body")
        category = self.category
        if category is not None:
            if not isinstance(category, str):
                raise ValueError(f"field 'category' must be a string or null; got "
                                 f"{type(category).__name__}")
            stripped = category.strip() or None
            if stripped is not category:
                set_(self, "category", stripped)
        for name in ("tags", "answers", "duplicate_of"):
            value = getattr(self, name)
            checked = _str_tuple(value, name)
            if checked is not value:
                set_(self, name, checked)
        best = self.best_answer
        if best is not None:
            if isinstance(best, bool) or not isinstance(best, (int, np.integer)):
                raise ValueError(f"field 'best_answer' must be an integer index or null; got {best!r}")
            if not 0 <= best < len(self.answers):
                raise ValueError(
                    f"field 'best_answer' is {best} but question {self.id!r} has "
                    f"{len(self.answers)} answer(s)")
            if type(best) is not int:
                set_(self, "best_answer", int(best))
        extra = self.extra
        if extra is not _NO_EXTRA:
            if type(extra) is not dict and not isinstance(extra, Mapping):
                raise ValueError("field 'extra' must be a mapping")
            if extra:
                extra = dict(extra)
                _check_extra(extra)
                for key in DATE_KEYS:
                    if key in extra:
                        try:
                            date_seconds(extra[key])
                        except ValueError as exc:
                            raise ValueError(f"field {key!r}: {exc}") from None
            set_(self, "extra", MappingProxyType(extra) if extra else _NO_EXTRA)

    @property
    def text(self) -> str:
        """Title and body joined by a newline (the "question" field of the index)."""
        if self.title and self.body:
            return self.title + "\n" + self.body
        return self.title or self.body

    @property
    def date(self) -> str | None:
        """The question's creation date (:func:`question_date`) in ISO 8601
        (:func:`iso_date`), None when it has none: what the date filters read.

        Examples
        --------
        >>> Question("q1", "visa", extra={"creation_date": "2014-03-05T10:00:00"}).date
        '2014-03-05T10:00:00Z'
        """
        return iso_date(question_date(self.extra))

    @property
    def best_answer_text(self) -> str | None:
        """The best answer's text, or None when no best answer is known."""
        return None if self.best_answer is None else self.answers[self.best_answer]

    @classmethod
    def from_dict(cls, record: Mapping) -> "Question":
        """Build a question from a canonical-schema mapping (a parsed JSONL line).

        Raises
        ------
        ValueError
            When a field is missing or has the wrong type; the message names the field.
        """
        if type(record) is not dict and not isinstance(record, Mapping):
            raise ValueError(f"a record must be a JSON object; got {type(record).__name__}")
        if "id" not in record:
            raise ValueError("missing required field 'id'")
        answers = record.get("answers")
        if isinstance(answers, str):
            answers = (answers,) if answers.strip() else ()
        answers = _str_tuple(answers, "answers")
        best = record.get("best_answer")
        if isinstance(best, str):
            # The text of the best answer: point at it, adding it when it is not listed.
            if best in answers:
                best = answers.index(best)
            else:
                answers = (best,) + answers
                best = 0
        tags = record.get("tags")
        if isinstance(tags, str):
            tags = tuple(t for t in tags.replace("|", " ").split() if t)
        duplicate_of = _id_list(record.get("duplicate_of"), "duplicate_of")
        extra = {k: v for k, v in record.items() if k not in _SCHEMA_KEYS} \
            if len(record.keys() - _SCHEMA_KEYS) else _NO_EXTRA
        return cls(
            id=record["id"], title=record.get("title"), body=record.get("body"),
            category=record.get("category"), tags=tags, answers=answers, best_answer=best,
            duplicate_of=duplicate_of, extra=extra)

    @classmethod
    def _stored(cls, record) -> "Question":
        """The question of a record an index stored (:meth:`to_json_bytes` of a checked
        question, read back by orjson): what :meth:`from_dict` would build, at a third of
        its cost (a search shows ten of them). Only the shape is checked, so that a damaged
        record raises ValueError rather than building a question that fails later."""
        if type(record) is not dict:
            raise ValueError("a record must be a JSON object")
        get = record.get
        qid, title, body, category = get("id"), get("title"), get("body"), get("category")
        answers, tags, dups, best = (get("answers"), get("tags"), get("duplicate_of"),
                                     get("best_answer"))
        if not (type(qid) is str and qid and type(title) is str and type(body) is str
                and (title or body) and (category is None or type(category) is str)
                and type(answers) is list and type(tags) is list and type(dups) is list
                and (best is None or (type(best) is int and 0 <= best < len(answers)))):
            return cls.from_dict(record)  # it raises the error that names the field
        question = object.__new__(cls)
        extra = {k: v for k, v in record.items() if k not in _SCHEMA_KEYS} \
            if len(record.keys() - _SCHEMA_KEYS) else _NO_EXTRA
        question.__dict__.update(
            id=qid, title=title, body=body, category=category, tags=tuple(tags),
            answers=tuple(answers), best_answer=best, duplicate_of=tuple(dups),
            extra=MappingProxyType(extra) if extra else _NO_EXTRA)
        return question

    def to_dict(self) -> dict:
        """The canonical-schema mapping (inverse of :meth:`from_dict`)."""
        out = {
            "id": self.id, "title": self.title, "body": self.body, "category": self.category,
            "tags": list(self.tags), "answers": list(self.answers),
            "best_answer": self.best_answer, "duplicate_of": list(self.duplicate_of),
        }
        out.update(self.extra)
        return out

    def to_json(self) -> str:
        """One canonical JSONL line (without the newline)."""
        return self.to_json_bytes().decode("utf-8")

    def to_json_bytes(self) -> bytes:
        """:meth:`to_json` as UTF-8 bytes (what archive files store)."""
        return orjson.dumps(self.to_dict())


class _JsonlRecords(Sequence):
    """Random access to the lines of a JSONL file through byte offsets (read-only).

    The file is memory-mapped at once, so the records stay readable if the file is
    deleted afterwards (an index generation removed while a server still reads it).
    """

    def __init__(self, path, offsets, doc_ids):
        self._path = os.fspath(path)
        self._offsets = offsets  # int64, n_records + 1 entries
        self._doc_ids = doc_ids
        with open(self._path, "rb") as f:
            self._buffer = (b"" if os.fstat(f.fileno()).st_size == 0
                            else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def __len__(self):
        return len(self._offsets) - 1

    def _buf(self):
        return self._buffer

    def line(self, row) -> bytes:
        """The stored JSONL line of ``row`` (with its newline)."""
        return bytes(self._buffer[int(self._offsets[row]):int(self._offsets[row + 1])])

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        n = len(self)
        row = int(row)
        if row < 0:
            row += n
        if not 0 <= row < n:
            raise IndexError(f"row {row} out of range for {n} questions")
        start, stop = int(self._offsets[row]), int(self._offsets[row + 1])
        try:
            record = self._buf()[start:stop]
            question = Question._stored(orjson.loads(record))
        except (ValueError, TypeError) as exc:  # the index's own file: never an input error
            raise IndexFormatError(f"corrupted index: question {row} of {self._path} cannot "
                                   f"be read ({exc}); {rebuild_hint()}") from None
        if question.id != self._doc_ids[row]:
            raise IndexFormatError(f"corrupted index: question {row} of {self._path} has id "
                                   f"{question.id!r}, expected {self._doc_ids[row]!r}; "
                                   f"{rebuild_hint()}")
        return question


class _Parts(Sequence):
    """Records of several sequences one after the other (the segments of an index)."""

    def __init__(self, parts):
        self._parts = list(parts)
        self._starts = np.cumsum([0] + [len(p) for p in self._parts])

    def __len__(self):
        return int(self._starts[-1])

    def _locate(self, row):
        row = int(row)
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} out of range for {len(self)} questions")
        part = int(np.searchsorted(self._starts, row, side="right")) - 1
        return self._parts[part], row - int(self._starts[part])

    def __getitem__(self, row):
        part, local = self._locate(row)
        return part[local]

    def line(self, row) -> bytes:
        part, local = self._locate(row)
        return part.line(local)


class Archive(Sequence):
    """An ordered collection of :class:`Question` with unique ids.

    The position of a question is its ``row`` (the internal int id used by every index
    matrix); its ``id`` is the external ``doc_id``.

    Parameters
    ----------
    questions : iterable of Question
        The questions, in row order.

    Raises
    ------
    ArchiveError
        When two questions share an id or the archive is empty.

    Examples
    --------
    >>> a = Archive([Question("a", "first"), Question("b", "second", category="x")])
    >>> len(a), a.row("b"), a.get("a").title
    (2, 1, 'first')
    """

    def __init__(self, questions: Iterable[Question] = (), *, _doc_ids=None, _live=None):
        self._row_map = None
        self._live = _live  # rows of deleted questions are False (a live index's tombstones)
        if _doc_ids is not None:  # lazy view built by the index store (ids checked at build)
            self._questions = questions
            self._doc_ids = list(_doc_ids)
        else:
            self._questions = list(questions)
            self._doc_ids = [q.id for q in self._questions]
            if len(self._rows) != len(self._doc_ids):
                seen = set()
                dup = next(d for d in self._doc_ids if d in seen or seen.add(d))
                raise ArchiveError(f"duplicate question id {dup!r}")
        if not self._doc_ids:
            raise ArchiveError("the archive is empty: no question was read")

    @property
    def _rows(self) -> dict:
        """doc_id -> row, built on first use (opening a large index stays fast)."""
        if self._row_map is None:
            if self._live is None:
                self._row_map = {doc_id: row for row, doc_id in enumerate(self._doc_ids)}
            else:
                live = self._live
                self._row_map = {doc_id: row for row, doc_id in enumerate(self._doc_ids)
                                 if live[row]}
        return self._row_map

    @classmethod
    def _lazy(cls, parts, live=None) -> "Archive":
        """The archive of an index: ``parts`` are ``(jsonl_path, offsets, doc_ids)`` of its
        segments; ``live`` masks out deleted rows (their ids are not found)."""
        records = [_JsonlRecords(path, offsets, ids) for path, offsets, ids in parts]
        doc_ids = [d for _, _, ids in parts for d in ids]
        return cls(records[0] if len(records) == 1 else _Parts(records), _doc_ids=doc_ids,
                   _live=live)

    @classmethod
    def _concat(cls, archives) -> "Archive":
        """The archives of an index's parts (the shards of a sharded index) as one, their
        rows one after the other (read lazily, as each part reads its own)."""
        archives = list(archives)
        live = None
        if any(a._live is not None for a in archives):
            live = np.concatenate([np.ones(len(a), dtype=bool) if a._live is None
                                   else np.asarray(a._live, dtype=bool) for a in archives])
        return cls(_Parts([a._questions for a in archives]),
                   _doc_ids=[d for a in archives for d in a.doc_ids], _live=live)

    def __len__(self):
        return len(self._doc_ids)

    def __getitem__(self, row):
        return self._questions[row]

    def __iter__(self) -> Iterator[Question]:
        for row in range(len(self)):
            yield self._questions[row]

    @property
    def doc_ids(self) -> list:
        """External ids in row order."""
        return self._doc_ids

    def row(self, doc_id: str) -> int:
        """Row of ``doc_id``; raises :class:`QueryError` for an unknown id (naming the ids
        it may have meant: :meth:`similar_ids`)."""
        try:
            return self._rows[doc_id]
        except KeyError:
            raise QueryError(f"unknown question id {doc_id!r}"
                             + did_you_mean(self.similar_ids(doc_id))) from None

    def similar_ids(self, doc_id, limit: int = 3) -> list:
        """Ids of the archive that ``doc_id`` may mean: the same but for case, or ending
        in ``:ID`` (a StackExchange index's ids are ``site:ID``). It reads every id: for
        an error message only.

        Examples
        --------
        >>> Archive([Question("ai.stackexchange.com:175", "qubits")]).similar_ids("175")
        ['ai.stackexchange.com:175']
        """
        if not isinstance(doc_id, str) or not doc_id:
            return []
        folded, suffix = doc_id.casefold(), ":" + doc_id.casefold()
        found = []
        for known in self._doc_ids:
            if known.casefold() == folded or known.casefold().endswith(suffix):
                found.append(known)
                if len(found) == limit:
                    break
        return found

    def rows(self, doc_ids) -> np.ndarray:
        """Rows of several ids (int32)."""
        return np.fromiter((self.row(d) for d in doc_ids), dtype=np.int32)

    def __contains__(self, doc_id):
        return doc_id in self._rows

    def line(self, row) -> bytes:
        """The question of ``row`` as one canonical JSONL line (with its newline): the
        stored bytes of an index's archive."""
        line = getattr(self._questions, "line", None)
        return line(row) if line is not None else self[row].to_json_bytes() + b"\n"

    def get(self, doc_id: str) -> Question:
        """The question with external id ``doc_id``."""
        return self[self.row(doc_id)]

    def to_jsonl(self, path) -> None:
        """Write the archive in the canonical JSONL schema."""
        with open(path, "w", encoding="utf-8") as f:
            for q in self:
                f.write(q.to_json() + "\n")
