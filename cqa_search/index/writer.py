"""The write back-ends of an index: what a change of its questions or its models writes.

The public changes (:func:`~cqa_search.index.live.add_questions`,
:func:`~cqa_search.index.live.delete_questions`, :func:`~cqa_search.index.live.compact`,
:func:`~cqa_search.index.models.add_model`, :func:`~cqa_search.index.models.remove_model`)
read and check their input, then make their change through the index's back-end
(:class:`Writer`, :func:`open_writer`). Every change is one new generation, written under
the writers' lock from the generation live at that moment
(:class:`~cqa_search.index.store.IndexWriter`, which alone owns the lock), so that it is
atomic, survives a crash at any point and never races another writer; the back-end is
that of this generation, chosen from its manifest (:func:`writer_class`).

- :class:`LocalWriter` changes the segments of one generation
  (:class:`~cqa_search.index.changes.SegmentChange`);
- :class:`~cqa_search.index.sharded_writer.ShardedWriter` changes the shards a change
  touches, each a whole index changed as a local one is, in a nested generation of the
  shard written inside the new top-level generation, and writes once what the shards
  share.

A back-end, made for one change of the generation ``base`` by the
:class:`~cqa_search.index.store.IndexWriter` ``writer``, answers one of::

    add(questions, report, *, replace, t0) -> ChangeSummary    # a new segment
    delete(doc_ids, *, missing_ok, t0) -> ChangeSummary        # tombstones
    compact(*, t0) -> ChangeSummary                            # one segment, no deleted rows
    store_model(name, model, state, models) -> generation      # a fitted model, stored
    remove_model(name, models) -> generation

and, of any generation, ``info(stored) -> dict`` (what ``cqa-search info`` adds).

(``t0``: when the change began, ``time.perf_counter()``; ``models(base)``: the new
``models`` entry of the manifest, computed and checked from the live generation under
the lock.)

A model with a row per question (its ``row_arrays``: :mod:`cqa_search.index.models`) keeps
its rows where the questions are, by one mechanism:

- storing it, a local index stores it whole (the rows of its segments then); a sharded
  index stores the arrays the shards share at its top level, and in every shard the model
  with the shard's own rows (:func:`~cqa_search.index.sharding.rows_of`,
  :func:`~cqa_search.index.sharded_writer.write_shard_rows`), as the shard, an index,
  stores any model;
- adding questions, a model that computes their rows then (``added_rows``) stores those
  of the new segment beside it, a *run* (``models/<name>/rows/<segment>/``, its manifest
  entry's ``runs``), in the index or the shard that gets the segment (a new shard stores
  the model with the rows of its questions); the others fold the questions in when an
  engine opens the index;
- compacting, the rows are carried to the merged segment (``select_rows``), the runs
  merged into them;
- a model is loaded with its runs appended (:func:`~cqa_search.index.model_files.load_model`).
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Protocol

from .._utils import counted, imported
from ..exceptions import ArchiveError
from .build import nothing_read
from .changes import (ChangeSummary, SegmentChange, already_in_index, check_deletion,
                      commit_models)
from .layout import load_index, read_head
from .model_files import model_dir, write_model
from .store import IndexWriter, current_generation, open_index
from .vocab import Vocabulary

__all__ = ["Writer", "LocalWriter", "writer_class", "open_writer", "WRITERS"]

#: Back-end of a generation: a manifest key that selects it -> ``"module:Class"``
#: (imported on first use).
WRITERS = {"shards": "cqa_search.index.sharded_writer:ShardedWriter"}


def writer_class(stored) -> type:
    """The write back-end of a generation (:data:`WRITERS`; else :class:`LocalWriter`)."""
    return next((imported(target) for key, target in WRITERS.items()
                 if key in stored.manifest), LocalWriter)


@contextlib.contextmanager
def open_writer(path, *, unchecked=None):
    """The write back-end of the index at ``path`` for one change (a context): its
    :class:`~cqa_search.index.store.IndexWriter` holds the writers' lock from here to the
    commit, and the back-end is that of the generation live then.

    Parameters
    ----------
    path : path
    unchecked : str, optional
        Files of the live generation not checked (those of a damaged model the change
        removes: :class:`~cqa_search.index.store.IndexWriter`).

    Raises
    ------
    IndexFormatError
        No index at ``path``, or its live generation is damaged.
    """
    if current_generation(path) is None:
        open_index(path)  # says what is there instead
    with IndexWriter(path, unchecked=unchecked) as writer:
        base = writer.begin()
        if base is None:
            open_index(path)  # says what is wrong with it
        yield writer_class(base)(path, writer, base)


class Writer(Protocol):
    """What changes an index (see the module docstring)."""

    def __init__(self, path, writer, base):
        """The change of ``base``, the live generation of the index at ``path``, that
        ``writer`` makes (holding the writers' lock)."""

    def add(self, questions, report, *, replace=False, t0) -> ChangeSummary:
        """Add ``questions`` (checked; ``report``: their reader's) as a new segment."""

    def delete(self, doc_ids, *, missing_ok=False, t0) -> ChangeSummary:
        """Delete the questions ``doc_ids`` (distinct ids)."""

    def compact(self, *, t0, ray=None) -> ChangeSummary:
        """Merge the segments into one without the deleted rows (a sharded index's shards
        on Ray with ``ray``: :func:`cqa_search.index.live.compact`)."""

    def store_model(self, name, model, state, models) -> str:
        """Store the fitted ``model`` (its ``state()``) as ``name``."""

    def remove_model(self, name, models) -> str:
        """Remove the model ``name`` (its files are not read)."""

    @staticmethod
    def info(stored) -> dict:
        """``categories`` (how many have live questions) and ``shards`` (each one's
        ``dir``, ``questions``, ``rows``, ``deleted``) of a generation."""


class LocalWriter:
    """The write back-end of an index of segments (see the module docstring).

    Parameters
    ----------
    path : path
        The index directory.
    writer : IndexWriter
        Makes the new generation (holding the writers' lock).
    base : StoredIndex
        The live generation.
    """

    def __init__(self, path, writer, base):
        self.path, self.writer, self.base = path, writer, base

    def add(self, questions, report, *, replace=False, t0) -> ChangeSummary:
        change = SegmentChange(self.writer, self.base)
        replaced = []

        def replacing(questions):
            for question in questions:
                row = change.row(question.id)
                if row is not None:
                    if not replace:
                        raise ArchiveError(already_in_index(question.id))
                    replaced.append(row)
                yield question

        done = change.append(replacing(questions), Vocabulary(change.head.terms), replaced)
        if done is None:
            raise nothing_read("no question to add", report)
        return ChangeSummary("added", os.fspath(self.path), done["generation"],
                             added=done["added"], deleted=len(replaced),
                             n_questions=done["n_questions"],
                             n_segments=len(change.segments) + 1, seconds=time.perf_counter() - t0,
                             n_skipped=report.n_skipped,
                             details={"replaced": counted(len(replaced), "question")}
                             if replaced else {})

    def delete(self, doc_ids, *, missing_ok=False, t0) -> ChangeSummary:
        change = SegmentChange(self.writer, self.base)
        found = {d: change.row(d) for d in doc_ids}
        missing = [d for d, row in found.items() if row is None]
        check_deletion(missing, missing_ok, len(found) - len(missing), change.n_live)
        rows = [row for row in found.values() if row is not None]
        generation = self.base.generation  # nothing to delete (missing_ok): no new one
        if rows:
            generation = change.remove(rows)
        return ChangeSummary("deleted", os.fspath(self.path), generation, deleted=len(rows),
                             n_questions=change.n_live, n_segments=len(change.segments),
                             seconds=time.perf_counter() - t0,
                             details={"not found": ", ".join(missing)} if missing else {})

    def compact(self, *, t0, ray=None) -> ChangeSummary:
        change = SegmentChange(self.writer, self.base)
        n_segments = len(change.segments)
        generation, carried = change.compact(load_index(self.base))
        return ChangeSummary("compacted", os.fspath(self.path), generation,
                             deleted=int(len(change.live) - change.n_live),
                             n_questions=change.n_live, n_segments=1,
                             seconds=time.perf_counter() - t0,
                             details={"segments": f"{n_segments} merged into 1"}
                             | ({"models": f"{', '.join(carried)} carried over to the new rows"}
                                if carried else {}))

    def store_model(self, name, model, state, models) -> str:
        entry = models(self.base)  # the checks first
        write_model(self.writer, name, model, state)
        return commit_models(self.writer, self.base, entry, dropped=[model_dir(name)])

    def remove_model(self, name, models) -> str:
        return commit_models(self.writer, self.base, models(self.base),
                             dropped=[model_dir(name)])

    @staticmethod
    def info(stored) -> dict:
        return {"categories": int((read_head(stored).category_counts() > 0).sum()),
                "shards": []}
