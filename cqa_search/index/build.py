"""Building an index: archive -> analysis -> term index -> a new generation on disk.

:func:`build_index` writes an index of one segment; :class:`NewIndex` is that recipe (the
questions written and recorded, their postings built, the segment finished, the files the
segments share written, the generation committed), also followed by the shards of a
sharded build (:mod:`cqa_search.distributed.build`) and by a shard a sharded index gains
when questions are added (:mod:`cqa_search.index.sharded_writer`).
"""
from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .._utils import progress_bar
from ..analysis import Analyzer
from ..archive import Question
from ..exceptions import ArchiveError, ParameterError
from ..readers import ReadReport, read_questions
from .layout import SegmentRows, SegmentWriter, write_globals
from .store import IndexWriter
from .term_index import FIELDS, TermIndex, TermIndexBuilder

__all__ = ["build_index", "BuildSummary", "DEFAULT_FIELDS", "NewIndex", "FIRST_SEGMENT"]

logger = logging.getLogger(__name__)

#: Fields indexed by default: the question (title and body), its answers, and the title
#: alone (BM25F weighs the title and the body, the question less its title: the title
#: adds 3 % to an index of synthetic forum questions, BENCHMARKS.md "BM25F").
DEFAULT_FIELDS = ("question", "answers", "title")
#: The segment of an index of one segment (a build, a compaction).
FIRST_SEGMENT = "seg-000001"


@dataclass(frozen=True)
class BuildSummary:
    """What :func:`build_index` did."""

    path: str
    n_questions: int
    n_answers: int
    n_categories: int
    n_terms: int
    n_skipped: int
    seconds: float
    fields: Mapping = field(default_factory=dict)
    skipped_examples: tuple = ()

    def __str__(self):
        lines = [f"index      {self.path}",
                 f"questions  {self.n_questions:,}" + (
                     f" ({self.n_skipped:,} invalid records skipped)" if self.n_skipped else ""),
                 f"answers    {self.n_answers:,}",
                 f"categories {self.n_categories:,}",
                 f"vocabulary {self.n_terms:,} terms"]
        for name, stats in self.fields.items():
            lines.append(f"field      {name}: {stats['total_terms']:,} tokens, "
                         f"{stats['nnz']:,} postings")
        lines.append(f"time       {self.seconds:.1f} s")
        return "\n".join(lines)


def _paths(archive):
    """The list of paths when ``archive`` is a path or a list of paths, else None."""
    if isinstance(archive, (str, os.PathLike)):
        return [os.fspath(archive)]
    if isinstance(archive, (list, tuple)) and archive and all(
            isinstance(p, (str, os.PathLike)) for p in archive):
        return [os.fspath(p) for p in archive]
    return None


def read_archive(archive, *, format=None, skip_invalid=False, reader_options=None):
    """The questions of ``archive`` (paths, read streaming by
    :func:`~cqa_search.readers.read_questions`, or an iterable of Question) for a writer.

    Returns
    -------
    questions : iterator of Question
    report : ReadReport
        Filled while ``questions`` is consumed (records skipped under ``skip_invalid``).
    sources : list of str
        The paths read (empty for an iterable).
    """
    reader_options = reader_options or {}
    report = ReadReport(skip_invalid=skip_invalid)
    sources = _paths(archive)
    if sources is not None:
        questions = read_questions(sources, format=format, report=report, **reader_options)
    elif format is not None or reader_options:
        raise ParameterError("format and reader options apply only when archive is a path")
    elif isinstance(archive, Iterable):
        questions = iter(archive)
    else:
        raise TypeError(f"archive must be a path, a list of paths, an Archive or an iterable "
                        f"of Question; got {type(archive).__name__}")
    return questions, report, sources or []


def check_fields(fields) -> tuple:
    """``fields`` as a tuple; ParameterError unless they are among :data:`FIELDS` and
    include ``question``."""
    fields = tuple(fields)
    if [f for f in fields if f not in FIELDS] or "question" not in fields:
        raise ParameterError(f"fields must include 'question' and be among "
                             f"{{{', '.join(map(repr, FIELDS))}}}; got {fields!r}")
    return fields


def checked_questions(questions, bar, *, check_ids=True,
                      duplicate="duplicate question id {!r}"):
    """``questions`` as a writer takes them, counted on ``bar`` (closed at the end): each
    must be a Question, with an id not met before (``duplicate``: the message of an id met
    again; ``check_ids=False`` when the readers checked the ids of files already)."""
    seen = set()
    for question in questions:
        if not isinstance(question, Question):
            raise TypeError(f"archive items must be Question; got {type(question).__name__}")
        if check_ids:
            if question.id in seen:
                raise ArchiveError(duplicate.format(question.id))
            seen.add(question.id)
        yield question
        bar.update()
    bar.close()


def nothing_read(message, report) -> ArchiveError:
    """The error of a read that gave no question (with the invalid records it skipped)."""
    return ArchiveError(message + (f" ({report.n_skipped} invalid records skipped)"
                                   if report.n_skipped else ""))


class NewIndex:
    """A new index of one segment, written into the generation ``writer`` makes (a build,
    a shard of a sharded build, a shard a sharded index gains): its questions written as
    the segment's archive lines, each recorded in ``rows``, then :meth:`commit`.

    Parameters
    ----------
    writer : IndexWriter
    rows : SegmentRows
        What the segment records of its questions; its builder makes their postings.
    """

    def __init__(self, writer, rows: SegmentRows):
        self.writer, self.rows = writer, rows
        self.segment = SegmentWriter(writer, FIRST_SEGMENT)
        self.surface = None

    def write_questions(self, questions) -> SegmentRows:
        """Write ``questions`` (checked already), each recorded in :attr:`rows`."""
        return self.segment.write_questions(questions, self.rows)

    def write_lines(self, lines: bytes) -> None:
        """Write the archive lines (canonical JSONL) of questions :attr:`rows` recorded
        already."""
        with self.segment.archive() as out:
            out.write(lines)

    def commit(self, *, analyzer, index=None, surface=None, store_weights=False,
               n_skipped=0, sources=(), **manifest) -> TermIndex:
        """Finish the segment, write the files the segments share and commit the
        generation; returns its postings.

        Parameters
        ----------
        analyzer : Analyzer
        index : TermIndex, optional
            The questions' postings (default: built by the rows' builder).
        surface : dict, optional
            Surface word -> term id (default: the builder's).
        store_weights : bool, default False
            Store the posting weights of the collection's statistics (the index is a
            whole collection, not a shard: :meth:`SegmentWriter.finish`).
        n_skipped : int, default 0
            Invalid records skipped by the reader.
        sources : sequence of str
            The archive files read.
        **manifest
            More entries of the manifest.
        """
        rows, writer = self.rows, self.writer
        if index is None:
            logger.info("building postings for %d questions", len(rows))
            index = rows.builder.build()
        self.surface = rows.builder.surface_words() if surface is None else surface
        entry = self.segment.finish(index, doc_ids=rows.doc_ids,
                                    archive_offsets=rows.archive_offsets,
                                    doc_category=rows.doc_category, store_weights=store_weights)
        field_stats = write_globals(
            writer, vocab_terms=index.vocab.terms, categories=list(rows.categories),
            surface=self.surface, doc_ids=rows.doc_ids,
            field_stats={name: fi.stats for name, fi in index.fields.items()})
        stats = {"n_docs": len(rows), "n_rows": len(rows), "n_terms": len(index.vocab),
                 **rows.counts, "n_categories": len(rows.categories), "n_skipped": n_skipped,
                 "fields": field_stats}
        writer.commit({"build_id": secrets.token_hex(8), "rows_id": secrets.token_hex(8),
                       "analyzer": analyzer.to_config(), "segments": [entry], "stats": stats,
                       "counters": {"added": 0, "deleted": 0}, "sources": list(sources),
                       "models": {}, **manifest})
        return index


def build_index(archive, path, *, analyzer=None, fields=DEFAULT_FIELDS, format=None,
                skip_invalid=False, progress=False, n_jobs=-1, **reader_options) -> BuildSummary:
    """Index an archive into the directory ``path`` (atomically).

    Parameters
    ----------
    archive : path, list of paths, Archive or iterable of Question
        The questions; files are read streaming with :func:`cqa_search.readers.read_questions`.
    path : path
        Index directory to create. An index already there gets the new one as its next
        generation (readers switch to it at once; its stored models are not carried
        over); any other non-empty directory is refused.
    analyzer : Analyzer, optional
        Text analysis (default ``Analyzer()``); saved in the index.
    fields : sequence of str, default ("question", "answers", "title")
        Fields to index, among :data:`cqa_search.index.term_index.FIELDS`.
    format : str, optional
        Reader for path input (detected when None).
    skip_invalid : bool, default False
        Skip invalid records (counted in the summary) instead of failing.
    progress : bool, default False
        Show a progress bar on stderr.
    n_jobs : int or None, default -1
        Cores at work (-1: all): threads analyse the text while this one reads and
        stores the questions (1 or None: this thread alone). They start after the first
        8,192 questions, so a small archive never waits for them; the index is the same
        bit for bit (:class:`~cqa_search.index.term_index.TermIndexBuilder`).
    **reader_options
        Options of the reader (e.g. ``columns`` for CSV).

    Returns
    -------
    BuildSummary

    Raises
    ------
    ArchiveError
        Unreadable archive, invalid record (unless skipped), duplicate id, empty archive.
    IndexFormatError
        ``path`` is a non-index directory.

    Examples
    --------
    >>> import tempfile, os
    >>> from cqa_search import Question
    >>> qs = [Question("a", "renew my visa", category="Visas"), Question("b", "cheap sofa")]
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> build_index(qs, out).n_questions
    2
    """
    t0 = time.perf_counter()
    analyzer = Analyzer() if analyzer is None else analyzer
    fields = check_fields(fields)
    questions, report, sources = read_archive(archive, format=format, skip_invalid=skip_invalid,
                                              reader_options=reader_options)
    with IndexWriter(path) as writer:
        new = NewIndex(writer, SegmentRows(TermIndexBuilder(analyzer, fields, n_jobs=n_jobs)))
        rows = new.write_questions(
            checked_questions(questions, progress_bar(progress, "indexing", "questions")))
        if not len(rows):
            raise nothing_read("the archive is empty: no question was read", report)
        index = new.commit(analyzer=analyzer, store_weights=True, n_skipped=report.n_skipped,
                           sources=sources)
    return BuildSummary(
        path=os.fspath(path), n_questions=len(rows), n_answers=rows.counts["n_answers"],
        n_categories=len(rows.categories), n_terms=len(index.vocab), n_skipped=report.n_skipped,
        seconds=time.perf_counter() - t0,
        fields={k: {"nnz": fi.nnz, "total_terms": fi.total_terms}
                for k, fi in index.fields.items()},
        skipped_examples=tuple(report.errors))
