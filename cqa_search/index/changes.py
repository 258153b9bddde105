"""A change of an index's questions or models: the parts the write back-ends of a local
and of a sharded index share (:mod:`cqa_search.index.writer`).

:class:`SegmentChange` changes one generation of segments (an index's, or a shard's within
the change of a sharded index) from the generation live when the writers' lock was taken,
without reading its postings: a new segment of questions (:meth:`~SegmentChange.append`),
tombstones (:meth:`~SegmentChange.remove`), and the segments merged into one without the
deleted rows, the rows of the models with a row per question carried over to the new rows
(:meth:`~SegmentChange.compact`). The collection statistics of the live rows follow every
change by the arithmetic of :class:`~cqa_search.index.term_index.CollectionStats`, so that
scores equal those of a fresh build of the live archive. :func:`commit_models` commits a
change of the stored models; :class:`ChangeSummary` is what a change of the questions
reports.
"""
from __future__ import annotations

import functools
import re
import secrets
from array import array
from dataclasses import dataclass, field

import numpy as np

from .._utils import counted
from ..exceptions import ArchiveError
from .build import FIRST_SEGMENT
from .layout import SegmentRows, SegmentWriter, SortedIds, read_head, segment_dir, write_globals
from .model_files import (growing_models, load_models, row_arrays, rows_dir,
                          write_added_rows, write_model)
from .term_index import CollectionStats, FieldIndex, TermIndex, TermIndexBuilder

__all__ = ["ChangeSummary", "SegmentChange", "check_deletion", "already_in_index",
           "commit_models"]

_SEGMENT = re.compile(r"seg-(\d+)\Z")


@dataclass(frozen=True)
class ChangeSummary:
    """What :func:`~cqa_search.index.live.add_questions`,
    :func:`~cqa_search.index.live.delete_questions` or
    :func:`~cqa_search.index.live.compact` did."""

    action: str
    path: str
    generation: str
    added: int = 0
    deleted: int = 0
    n_questions: int = 0
    n_segments: int = 0
    seconds: float = 0.0
    n_skipped: int = 0
    details: dict = field(default_factory=dict)
    parts: str = "segment"  # what n_segments counts (a sharded index's: its shards)

    def __str__(self):
        lines = [f"{self.action:<10} {self.path} (generation {self.generation})"]
        if self.added:
            lines.append(f"added      {counted(self.added, 'question')}")
        if self.deleted:
            lines.append(f"deleted    {counted(self.deleted, 'question')}")
        if self.n_skipped:
            lines.append(f"skipped    {counted(self.n_skipped, 'invalid record')}")
        for key, value in self.details.items():
            lines.append(f"{key:<10} {value}")
        lines.append(f"questions  {self.n_questions:,} in "
                     f"{counted(self.n_segments, self.parts)}")
        lines.append(f"time       {self.seconds:.2f} s")
        return "\n".join(lines)


def already_in_index(doc_id) -> str:
    """The message of a question id an index has already."""
    return (f"question id {doc_id!r} is already in the index (add it with --replace to "
            "replace it)")


def check_deletion(missing, missing_ok, n_found, n_live) -> None:
    """ArchiveError for ids an index lacks (unless ``missing_ok``), or a deletion of every
    question."""
    if missing and not missing_ok:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ArchiveError(f"the index has no question {', '.join(map(repr, missing[:5]))}"
                           f"{more}")
    if n_found == n_live:
        raise ArchiveError("deleting every question would leave an empty index; build a "
                           "new one instead")


def commit_models(writer, base, models, *, dropped=()) -> str:
    """Commit the generation ``writer`` makes from ``base`` (its live generation, under the
    writers' lock) with the stored models ``models`` (the manifest's entry), keeping every
    file of ``base`` but those under the directories ``dropped`` (a model's, written again
    or removed; a shard's, rewritten)."""
    dropped = tuple(d + "/" for d in dropped)
    return writer.commit({**base.manifest, "models": models},
                         keep=[rel for rel in base.manifest["files"]
                               if not rel.startswith(dropped)])


class SegmentChange:
    """A change of a generation of segments, prepared from its
    :class:`~cqa_search.index.layout.IndexHead` (the postings are not read).

    Parameters
    ----------
    writer : IndexWriter or None
        Writes the changed generation (None until the change writes: a shard of a sharded
        index is read first, then rewritten).
    base : StoredIndex
        The generation changed.
    """

    def __init__(self, writer, base):
        self.writer, self.base = writer, base
        self.head = read_head(base)
        m = self.manifest = base.manifest
        self.segments = [dict(s) for s in m["segments"]]
        self.starts = np.cumsum([0] + [int(s["n_docs"]) for s in self.segments])
        self.live = ~self.head.deleted
        self.changed = set()  # segments whose deleted mask changes
        self.removed = {}  # field -> CollectionStats of the rows deleted

    @functools.cached_property
    def ids(self) -> SortedIds:
        return SortedIds(self.head.doc_ids, self.head.doc_id_rank())

    @property
    def n_live(self) -> int:
        return int(self.live.sum())

    def row(self, doc_id) -> int | None:
        """The live row of question ``doc_id`` (None: not in the index)."""
        for row in self.ids.rows(doc_id):
            if self.live[row]:
                return row
        return None

    def category_names(self, rows) -> list:
        """The category names of ``rows`` (None: no category)."""
        names, out = self.head.categories, []
        for row in rows:
            k = self._segment_of(row)
            cid = int(self.base.array(
                f"{segment_dir(self.segments[k]['name'])}/doc_category.npy")[
                int(row) - int(self.starts[k])])
            out.append(None if cid < 0 else names[cid])
        return out

    def _segment_of(self, row) -> int:
        return int(np.searchsorted(self.starts, row, side="right")) - 1

    def delete_rows(self, rows) -> dict:
        """Mark ``rows`` deleted; returns each field's statistics of those rows (to take
        them out of the collection's)."""
        n_terms = len(self.head.terms)
        removed = {name: CollectionStats(0, np.zeros(n_terms, np.int64),
                                         np.zeros(n_terms, np.int64), 0)
                   for name in self.head.stats}
        by_segment = {}
        for row in rows:
            k = self._segment_of(row)
            by_segment.setdefault(k, []).append(int(row) - int(self.starts[k]))
            self.live[int(row)] = False
        for k, local in by_segment.items():
            for name in self.head.stats:
                terms_of = self.head.segment_field(k, name).terms_of
                stats = removed[name]
                for r in local:
                    terms, counts = np.unique(np.asarray(terms_of(r)), return_counts=True)
                    stats.df[terms] += 1
                    stats.term_freq[terms] += counts
                    stats.n_docs += 1
                    stats.total_terms += len(terms_of(r))
            self.changed.add(k)
        for k in self.changed:
            seg = self.segments[k]
            seg["n_deleted"] = int((~self.live[self.starts[k]:self.starts[k + 1]]).sum())
        self.removed = removed
        return removed

    def counters(self, added=0, deleted=0) -> dict:
        counters = dict(self.manifest.get("counters", {}))
        counters["added"] = int(counters.get("added", 0)) + added
        counters["deleted"] = int(counters.get("deleted", 0)) + deleted
        return counters

    def stats_entry(self, live, n_terms, extra) -> dict:
        out = {k: v for k, v in self.manifest["stats"].items() if k != "fields"}
        out.update(n_rows=int(len(live)), n_docs=int(live.sum()), n_terms=int(n_terms),
                   **extra)
        return out

    def commit(self, *, field_stats, stats, counters, new_segment=None, models=None,
               **changed) -> str:
        """Write the deleted masks that changed, the statistics, and the shared files in
        ``changed`` (:func:`~cqa_search.index.layout.write_globals`' parts: those not
        given are kept as they are), then commit (``models``: the manifest's models entry,
        when it changes)."""
        w = self.writer
        for k in self.changed:
            mask = ~self.live[self.starts[k]:self.starts[k + 1]]
            w.array(f"{segment_dir(self.segments[k]['name'])}/deleted.npy", mask)
        segments = self.segments + ([new_segment] if new_segment else [])
        fields = write_globals(w, field_stats=field_stats, **changed)
        manifest = dict(self.manifest)
        manifest.update(segments=segments, counters=counters,
                        stats={**stats, "fields": fields})
        if models is not None:
            manifest["models"] = models
        # the live generation's files, but for those written here (IndexWriter.commit)
        return w.commit(manifest, keep=list(self.base.manifest["files"]))

    # -- the changes ----------------------------------------------------------------------
    def append(self, questions, vocab, replaced) -> dict | None:
        """Write ``questions`` (checked already) as a new segment, their terms extending
        ``vocab`` (the index's vocabulary, or a sharded index's whole one), with the rows
        ``replaced`` deleted (a list ``questions`` may fill while they are read), and
        commit.

        The models that compute the rows of questions when they are added
        (:func:`~cqa_search.index.model_files.growing_models`) store those of the new
        segment (its ``runs``); the others fold them in when an engine opens the index.

        Returns
        -------
        dict or None
            None when there was no question; else ``generation``, ``added``,
            ``n_questions`` (live after), ``rows`` (the new segment's
            :class:`~cqa_search.index.layout.SegmentRows`), ``part`` (its TermIndex),
            ``removed`` (field -> CollectionStats of the deleted rows, empty without),
            ``surface`` (the surface words the index did not have).
        """
        head = self.head
        growing = growing_models(self.base)
        if growing:
            questions = list(questions)  # (read twice: written, then their rows computed)
        number = max(int(_SEGMENT.match(s["name"]).group(1)) for s in self.segments) + 1
        segment = SegmentWriter(self.writer, f"seg-{number:06d}")
        rows = segment.write_questions(
            questions, SegmentRows(TermIndexBuilder(head.analyzer, tuple(head.stats),
                                                    vocab=vocab),
                                   categories={name: i for i, name
                                               in enumerate(head.categories)}))
        if not len(rows):
            return None
        part = rows.builder.build()
        n_terms = len(part.vocab)
        removed = self.delete_rows(replaced) if replaced else {}
        new_segment = segment.finish(part, doc_ids=rows.doc_ids,
                                     archive_offsets=rows.archive_offsets,
                                     doc_category=rows.doc_category)
        field_stats = {}
        for name, stats in head.stats.items():
            stats = (stats + part[name].stats).padded(n_terms)
            field_stats[name] = stats - removed[name] if removed else stats
        doc_ids, categories = rows.doc_ids, rows.categories
        live = np.concatenate([self.live, np.ones(len(doc_ids), dtype=bool)])
        surface = head.stored.json("surface.json")
        new_words = {w: t for w, t in rows.builder.surface_words().items() if w not in surface}
        old = self.manifest["stats"]
        stats = self.stats_entry(live, n_terms, {
            **{key: int(old.get(key, 0)) + n for key, n in rows.counts.items()},
            "n_categories": len(categories)})
        ranks = self.ids.extended_ranks(doc_ids)
        models = dict(self.base.models) if growing else None
        for name, model in growing.items():
            run = write_added_rows(self.writer, name, model, segment.name, questions)
            models[name] = {**models[name], "runs": [*models[name].get("runs", ()), run]}
        generation = self.commit(
            field_stats=field_stats, stats=stats, models=models,
            counters=self.counters(len(doc_ids), len(replaced)), new_segment=new_segment,
            vocab_terms=part.vocab.terms if n_terms > len(head.terms) else None,
            categories=list(categories) if len(categories) > len(head.categories) else None,
            surface={**surface, **new_words} if new_words else None, doc_id_rank=ranks)
        return {"generation": generation, "added": len(doc_ids),
                "n_questions": int(live.sum()), "rows": rows, "part": part,
                "removed": removed, "surface": new_words}

    def remove(self, rows) -> str:
        """Delete the live ``rows`` and commit; the statistics of the rows are left in
        :attr:`removed`."""
        head = self.head
        removed = self.delete_rows(rows)
        field_stats = {name: stats - removed[name] for name, stats in head.stats.items()}
        return self.commit(field_stats=field_stats,
                           stats=self.stats_entry(self.live, len(head.terms), {}),
                           counters=self.counters(deleted=len(rows)))

    def compact(self, data, after=None) -> tuple:
        """Merge the segments into one without the deleted rows (``data``: the
        generation's data, its term index scored with the statistics its models are
        computed with), carry the per-question models' rows over (their runs merged into
        them), and commit (``after(merged)``: writes more files of the merged TermIndex
        and returns entries of the new manifest). Returns the generation and the models
        carried."""
        from ..features import IndexView

        writer, base = self.writer, self.base
        index = data.index
        keep_rows = np.flatnonzero(self.live)
        n_terms = len(index.vocab)
        segment = SegmentWriter(writer, FIRST_SEGMENT)
        offsets = array("q", [0])
        with segment.archive() as out:
            for row in keep_rows.tolist():
                line = data.archive.line(row)
                out.write(line)
                offsets.append(offsets[-1] + len(line))
        fields = {name: _select(fi, keep_rows, n_terms) for name, fi in index.fields.items()}
        merged = TermIndex(index.vocab, fields)
        doc_ids = [data.archive.doc_ids[r] for r in keep_rows.tolist()]
        entry = segment.finish(merged, doc_ids=doc_ids,
                               archive_offsets=np.frombuffer(offsets, dtype=np.int64),
                               doc_category=np.asarray(data.categories.doc_category)[keep_rows],
                               store_weights=True)
        stats = self.stats_entry(np.ones(len(keep_rows), dtype=bool), n_terms, {})
        field_stats = write_globals(
            writer, vocab_terms=index.vocab.terms, categories=list(data.categories.names),
            surface=base.json("surface.json"), doc_ids=doc_ids,
            field_stats={name: fi.stats for name, fi in fields.items()})
        models = load_models(base)
        view = IndexView(index, data.archive, data.analyzer, data.categories, models)
        carried = []
        for name, model in models.items():
            if hasattr(model, "select_rows"):  # its rows written, its other arrays kept
                selected = model.select_rows(view, keep_rows)
                write_model(writer, name, selected, only=row_arrays(selected) or None)
                carried.append(name)
        # the rows stored apart (runs) are in the rows written
        runs = tuple(rows_dir(name, run["segment"]) + "/" for name, entry
                     in base.models.items() for run in entry.get("runs", ()))
        out = dict(self.manifest)
        out.update(segments=[entry], stats={**stats, "fields": field_stats},
                   rows_id=secrets.token_hex(8),
                   models={name: {**e, "runs": []} if "runs" in e else e
                           for name, e in base.models.items()},
                   **({} if after is None else after(merged)))
        keep = [rel for rel in base.manifest["files"]
                if rel.startswith("models/") and not rel.startswith(runs)]
        return writer.commit(out, keep=keep), carried  # (the files written here win)


def _select(field: FieldIndex, rows, n_terms) -> FieldIndex:
    """The field over ``rows`` only (in their order), with its own statistics."""
    out = field.select(rows)
    if out.n_terms != n_terms:
        raise AssertionError("compaction changed the vocabulary")  # pragma: no cover
    return out
