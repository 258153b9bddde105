"""Archive readers, one module per format, and format detection.

Every reader is a generator ``read(path, *, report, **options)`` that yields
``(question, file, line)``: a :class:`~cqa_search.archive.Question` one record at a time
(constant memory per record) with the file and line where its record starts. It sends invalid
records to ``report`` (:class:`ReadReport`), which raises or counts them.

Nothing is lost silently: a record is either a question, or an invalid record (raised,
or counted when invalid records are skipped), and a file that cannot be read as a whole
(malformed XML, an I/O error) raises :class:`~cqa_search.exceptions.ArchiveError` naming
the file, and the line where it is known. Keys outside the schema that hold text are kept
but not indexed; they are logged once per file with a count (see
:meth:`ReadReport.note_unindexed`).
"""
from __future__ import annotations

import importlib
import inspect
import os

from ..archive import Archive
from ..exceptions import ArchiveError
from ._base import ReadReport, check_file

__all__ = ["FORMATS", "ReadReport", "detect_format", "read_questions", "read_archive",
           "reader_options"]

#: Reader name -> (module, fixed keyword options).
FORMATS = {
    "jsonl": ("jsonl", {}),
    "csv": ("csv", {"delimiter": ","}),
    "tsv": ("csv", {"delimiter": "\t"}),
    "semeval": ("semeval", {}),
    "stackexchange": ("stackexchange", {}),
    "yahoo-l6": ("yahoo_l6", {}),
}

_EXTENSIONS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
}


def _module(format):
    if format not in FORMATS:
        raise ArchiveError(
            f"format must be one of {{{', '.join(repr(f) for f in FORMATS)}}}; got {format!r}")
    name, fixed = FORMATS[format]
    return importlib.import_module(f"{__name__}.{name}"), fixed


def reader_options(format) -> list:
    """Names of the options a format's reader accepts (beyond ``path`` and ``report``)."""
    module, fixed = _module(format)
    params = inspect.signature(module.read).parameters
    return [p for p in params if p not in ("path", "report") and p not in fixed]


def detect_format(path) -> str:
    """Guess the format of an archive file or folder.

    A folder (or a file named ``Posts.xml``) is a StackExchange dump; otherwise the
    extension decides, and for ``.xml`` or unknown extensions the first bytes do.

    Raises
    ------
    ArchiveError
        When the path does not exist or the format cannot be recognised.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "Posts.xml")):
            return "stackexchange"
        raise ArchiveError(
            f"{path} is a folder without Posts.xml; only StackExchange dump folders can be "
            "read as a whole (give the archive files instead)")
    check_file(path)
    if os.path.basename(path) == "Posts.xml":
        return "stackexchange"
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if not os.path.isfile(path):  # a pipe: what is read to guess would be lost
        raise ArchiveError(f"cannot tell the format of {path} (a pipe) without reading it; "
                           f"pass --format (one of {', '.join(FORMATS)})")
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as exc:
        raise ArchiveError(f"cannot read: {exc.strerror or exc}", path) from None
    if ext == ".xml" or head.lstrip().startswith(b"<"):
        if b"<OrgQuestion" in head or b"<Thread" in head or b"<RelQuestion" in head:
            return "semeval"
        if b"<posts" in head and b"<row" in head:
            return "stackexchange"
        if b"<ystfeed" in head or (b"<document" in head and b"<subject" in head):
            return "yahoo-l6"
        raise ArchiveError(
            f"cannot tell the format of {path}: XML that is neither SemEval-2016 Task 3, "
            "StackExchange Posts.xml nor Yahoo! Answers L6; pass --format")
    for line in head.splitlines():
        if line.strip():
            if line.lstrip(b"\xef\xbb\xbf \t").startswith(b"{"):
                return "jsonl"
            break
    raise ArchiveError(
        f"cannot tell the format of {path}; pass --format (one of {', '.join(FORMATS)})")


def read_questions(paths, *, format=None, skip_invalid=False, report=None, **options):
    """Yield the questions of one or more archive files, checking ids across all of them.

    Parameters
    ----------
    paths : path or list of paths
    format : str or None
        One of :data:`FORMATS`; detected per path when None.
    skip_invalid : bool
        Skip (and count in ``report``) invalid records instead of raising.
    report : ReadReport or None
        Receives counts; a new one is used when None.
    **options
        Reader options; an option the reader does not take is an error.

    Raises
    ------
    ArchiveError
        Unknown format or option, unreadable file (including an I/O error while
        reading), invalid record (unless skipped), duplicate id (unless skipped).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise ArchiveError("no archive file given")
    if report is None:
        report = ReadReport(skip_invalid=skip_invalid)
    seen = set()
    for path in paths:
        fmt = format or detect_format(path)
        module, fixed = _module(fmt)
        allowed = reader_options(fmt)
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise ArchiveError(
                f"option {_option(unknown[0])} does not apply to format {fmt!r}"
                + (f" (it takes: {', '.join(map(_option, allowed))})" if allowed
                   else " (it takes no options)"))
        try:
            for question, source, line in module.read(path, report=report, **fixed,
                                                      **options):
                if question.id in seen:
                    report.invalid(ArchiveError(f"duplicate question id {question.id!r}",
                                                source, line))
                    continue
                seen.add(question.id)
                report.n_read += 1
                if question.extra:
                    report.note_unindexed(question)
                    report.note_undated(question)
                yield question
        except OSError as exc:  # an I/O error, or a file that cannot be read at all
            raise ArchiveError(f"cannot read: {exc.strerror or exc}", exc.filename or path) \
                from None
        report.warn_unindexed(path)
        report.warn_undated(path)


def _option(name) -> str:
    """A reader option named for both interfaces: ``'auto_id' (--auto-id)`` (every option
    of a reader is an option of ``cqa-search build-index``)."""
    known = any(name in reader_options(fmt) for fmt in FORMATS)
    return repr(name) + (f" (--{name.replace('_', '-')})" if known else "")


def read_archive(paths, *, format=None, skip_invalid=False, **options) -> Archive:
    """Read one or more archive files into an in-memory :class:`~cqa_search.archive.Archive`.

    Parameters are those of :func:`read_questions`.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> _ = open(path, "w").write('{"id": "q1", "title": "renew my visa"}\\n')
    >>> read_archive(path).doc_ids
    ['q1']
    """
    return Archive(read_questions(paths, format=format, skip_invalid=skip_invalid, **options))
