"""What every reader shares: the invalid-record policy, line-aware decoding, XML streaming."""
from __future__ import annotations

import itertools
import logging
import os
import re
import stat
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from pyexpat import ErrorString
from pyexpat import errors as expat_errors

from ..archive import SCHEMA_KEYS, Question, undated_value
from ..exceptions import ArchiveError

logger = logging.getLogger("cqa_search.readers")

__all__ = ["ReadReport", "make_question", "check_file", "check_columns", "iter_xml",
           "child_text", "LIST_FIELDS", "MAX_RECORD_BYTES", "read_line", "too_large", "check_encoding"]

#: Fields that hold a list: a mapping may give them several columns (or keys).
LIST_FIELDS = ("tags", "answers", "duplicate_of")
#: Longest line of a JSONL or CSV file, in bytes: a longer record is refused ("record too
#: large") before it is read into memory (decoded, a record takes several times its size).
MAX_RECORD_BYTES = 1 << 26
_SKIP_CHUNK = 1 << 20
# Six words in a row: a value that reads as text rather than as a date, a name or a code.
_TEXT_LIKE = re.compile(r"\b(?:[^\W\d_]+[\W_]+){5}[^\W\d_]")


class ReadReport:
    """Counts what a read produced and applies the invalid-record policy.

    Readers call :meth:`invalid` for every record they cannot turn into a
    :class:`~cqa_search.archive.Question`: with ``skip_invalid=False`` the error is
    raised (naming file and line), otherwise it is counted and the reader goes on.

    Attributes
    ----------
    n_read : int
        Questions produced.
    n_skipped : int
        Invalid records skipped.
    errors : list of str
        The first ``max_examples`` skipped errors, for the summary.
    n_undated : int
        Questions read whose date (a key of :data:`~cqa_search.archive.DATE_KEYS`) is
        given but no date (``"last tuesday"``): indexed without a date, so that every date
        filter leaves them out; said in a warning per file.
    """

    def __init__(self, skip_invalid: bool = False, max_examples: int = 5):
        self.skip_invalid = skip_invalid
        self.max_examples = max_examples
        self.n_read = 0
        self.n_skipped = 0
        self.errors = []
        self.unindexed = Counter()  # extra key holding text -> questions, for the file read
        self.n_undated = 0
        self._undated = []  # (id, value) of the file read's undated questions: count, first

    def note_unindexed(self, question: Question) -> None:
        """Count the keys of ``question.extra`` whose value reads as text: they are kept but
        not indexed, which a user mapping a foreign schema wants to hear about."""
        for key, value in question.extra.items():
            if type(value) is str and value.count(" ") >= 5 and _TEXT_LIKE.search(value):
                self.unindexed[key] += 1

    def warn_unindexed(self, path) -> None:
        """Log (once per key) the text-like keys counted since the last call, and reset."""
        for key, count in sorted(self.unindexed.items()):
            logger.warning(
                "%s: key %r holds text in %d record(s); it is kept with the question but not "
                "indexed (to index it, map it to a field: --columns body=%s, in Python "
                "columns={'body': %r})", path, key, count, key, key)
        self.unindexed.clear()

    def note_undated(self, question: Question) -> None:
        """Count ``question`` when its date is given but is no date."""
        value = undated_value(question.extra)
        if value is not None:
            self.n_undated += 1
            self._undated.append((question.id, value))

    def warn_undated(self, path) -> None:
        """Log the undated questions counted since the last call (how many, the first), and
        reset."""
        if self._undated:
            (qid, value), n = self._undated[0], len(self._undated)
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:36] + "..."
            logger.warning(
                "%s: %d question(s) have a date that is no date (the first: question %r, %s); "
                "they are indexed without a date, and date filters leave them out (a date is "
                "ISO 8601, e.g. 2014-03-05 or 2014-03-05T10:00:00, or seconds since 1970)",
                path, n, qid, shown)
            self._undated = []

    def invalid(self, error: ArchiveError) -> None:
        """Raise ``error``, or count it when invalid records are skipped."""
        if not self.skip_invalid:
            raise error
        self.n_skipped += 1
        if len(self.errors) < self.max_examples:
            self.errors.append(str(error))
        logger.debug("skipped invalid record: %s", error)


def make_question(report: ReadReport, path, line, **fields):
    """``Question(**fields)``, or None after reporting a ``ValueError`` as invalid."""
    try:
        return Question(**fields)
    except ValueError as exc:
        report.invalid(ArchiveError(str(exc), path, line))
        return None


def check_file(path, what=None) -> str:
    """Return ``os.fspath(path)`` when it names a file (or a pipe: a shell's ``<(...)``)
    that can be read; ``what`` names its kind in the messages (e.g. ``"qrels"``; default:
    an archive).

    Raises
    ------
    ArchiveError
        When it does not exist, or is a directory, a socket or a device.
    """
    path = os.fspath(path)
    noun = f"{what} file" if what else "file"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ArchiveError(f"no such {noun}: {path}") from None
    except OSError as exc:
        raise ArchiveError(f"cannot read: {exc.strerror}", path) from None
    if stat.S_ISDIR(mode):
        raise ArchiveError(f"expected a {noun} but got a directory: {path}")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        kind = "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise ArchiveError(f"{path} is {kind}, not {'an archive' if what is None else 'a ' + what}"
                           " file")
    return path


def read_line(f):
    """The next line of the binary file ``f`` (b"" at the end), read with a bound: a line
    longer than :data:`MAX_RECORD_BYTES` is skipped without being kept in memory, and
    None returned in its place (the caller reports :func:`too_large`)."""
    limit = MAX_RECORD_BYTES
    raw = f.readline(limit + 1)
    if len(raw) <= limit or raw.endswith(b"\n"):
        return raw
    while raw and not raw.endswith(b"\n"):  # the rest of the line, a chunk at a time
        raw = f.readline(_SKIP_CHUNK)
    return None


def too_large(path, lineno) -> ArchiveError:
    """The error of a line that :func:`read_line` skipped."""
    return ArchiveError(f"record too large: the line has more than {MAX_RECORD_BYTES:,} "
                        "bytes", path, lineno)


#: Byte order marks of the encodings a file must be re-encoded from.
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
         (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))


def check_encoding(f, path) -> None:
    """Refuse a text file in UTF-16 or UTF-32, named by its byte order mark or by the NUL
    bytes of its first (ASCII) characters, before a line is read: every line would be
    "not valid UTF-8" (``f``: a binary file whose position stays where it was)."""
    head = f.peek(4)[:4] if hasattr(f, "peek") else b""
    found = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if found is None and len(head) == 4:
        nul = tuple(b == 0 for b in head)
        found = {(True, True, True, False): "UTF-32-BE", (False, True, True, True): "UTF-32-LE",
                 (True, False, True, False): "UTF-16-BE",
                 (False, True, False, True): "UTF-16-LE"}.get(nul)
    if found is not None:
        raise ArchiveError(f"the file is encoded in {found}, not UTF-8: re-encode it as UTF-8 "
                           f"(e.g. iconv -f {found} -t UTF-8)", path)


def check_columns(columns, what="column") -> dict:
    """Validate a field -> source mapping (``columns`` of the CSV and JSONL readers).

    A value is a source name, or for :data:`LIST_FIELDS` a list of names (one item per
    source). Returns a dict; raises ArchiveError naming the bad entry.
    """
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise ArchiveError(f"columns must be a mapping of field -> {what}; got {columns!r}")
    for field, name in columns.items():
        if field not in SCHEMA_KEYS:
            raise ArchiveError(f"--columns (columns=): unknown field {field!r}; fields are "
                               f"{', '.join(SCHEMA_KEYS)}")
        names = name if isinstance(name, (list, tuple)) and field in LIST_FIELDS else [name]
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ArchiveError(
                f"columns[{field!r}] must be a {what} name"
                + (f" or a list of {what} names" if field in LIST_FIELDS else "")
                + f"; got {name!r}")
    return dict(columns)


_XML_CHUNK = 1 << 16  # longest piece of a line fed to the parser at once
# Parse errors that bytes outside the declared encoding (usually UTF-8) cause.
_ENCODING_ERRORS = {expat_errors.codes[expat_errors.XML_ERROR_INVALID_TOKEN],
                    expat_errors.codes[expat_errors.XML_ERROR_PARTIAL_CHAR]}


def _xml_error(exc: ET.ParseError, path) -> ArchiveError:
    """An ArchiveError naming file, line and column for a parse error (UTF-8 errors named)."""
    line, column = exc.position
    if exc.code in _ENCODING_ERRORS:
        with open(path, "rb") as f:
            raw = next(itertools.islice(f, line - 1, None), b"")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            return ArchiveError(
                f"not valid UTF-8 (byte {raw[bad.start:bad.start + 1]!r} at column "
                f"{bad.start + 1}); re-encode the file as UTF-8 or declare its encoding",
                path, line)
    return ArchiveError(f"malformed XML at column {column + 1}: {ErrorString(exc.code)}",
                        path, line)


def iter_xml(path, tags, *, root_tags=None):
    """Stream the elements named in ``tags`` from an XML file, with their line numbers.

    The file is fed to :class:`xml.etree.ElementTree.XMLPullParser` (the parser behind
    ``iterparse``) one line at a time, so each element is known with the line where its
    start tag ends. Every yielded element is cleared after the consumer resumes, and each
    child of the root is dropped when it ends: memory stays constant per record.

    Parameters
    ----------
    path : str
        The XML file.
    tags : collection of str
        Names of the elements to yield (on their end tag, complete with children).
    root_tags : collection of str or None
        When given, the root element must have one of these names.

    Yields
    ------
    element : xml.etree.ElementTree.Element
        Valid only until the next element is requested.
    line : int
        1-based line where the element's start tag ends.

    Raises
    ------
    ArchiveError
        Malformed XML or bytes that are not valid UTF-8 (file, line and column), an
        unexpected root element, or an I/O error. Records before the error have been
        yielded already.
    """
    parser = ET.XMLPullParser(events=("start", "end"))
    root = None
    depth = 0
    starts = []  # lines of the wanted elements currently open
    lineno = 1
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise ArchiveError(f"cannot read: {exc.strerror or exc}", path) from None
    with f:
        while True:
            try:
                chunk = f.readline(_XML_CHUNK)
            except OSError as exc:
                raise ArchiveError(f"cannot read: {exc.strerror or exc}", path, lineno) from None
            events, error = _pull(parser, chunk)
            for event, elem in events:
                if event == "start":
                    if root is None:
                        root = elem
                        if root_tags is not None and elem.tag not in root_tags:
                            raise ArchiveError(
                                f"expected the root element to be <{'> or <'.join(root_tags)}>; "
                                f"found <{elem.tag}>", path, lineno)
                    depth += 1
                    if elem.tag in tags:
                        starts.append(lineno)
                    continue
                depth -= 1
                if elem.tag in tags:
                    yield elem, starts.pop()
                    elem.clear()
                if depth == 1:
                    del root[:]
            if error is not None:
                raise _xml_error(error, path) from None
            if not chunk:
                return
            if chunk.endswith(b"\n"):
                lineno += 1


def child_text(parent, path) -> str:
    """All the text of the first element at ``path`` under ``parent``, markup inside it
    included (``findtext`` would stop at the first child element); "" when absent."""
    child = parent.find(path)
    if child is None:
        return ""
    return "".join(child.itertext()) if len(child) else (child.text or "")


def _pull(parser, chunk):
    """Feed ``chunk`` (close the parser when empty); return the events and any parse error.

    The events parsed before an error are returned with it, so that the records before a
    malformed spot are still produced.
    """
    events, error = [], None
    try:
        if chunk:
            parser.feed(chunk)
        else:
            parser.close()
    except ET.ParseError as exc:
        error = exc
    try:
        for event in parser.read_events():
            events.append(event)
    except ET.ParseError as exc:
        error = exc
    return events, error
