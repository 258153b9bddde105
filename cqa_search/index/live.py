"""A live archive: questions added and deleted without a rebuild, and compaction.

Each change is one new generation (:class:`~cqa_search.index.store.IndexWriter`), written
under the writers' lock from the generation live at that moment, so that it is atomic,
survives a crash at any point (the previous generation stays live) and never races
another writer:

- :func:`add_questions` writes the new questions as one more *segment*: its postings use
  the index's vocabulary, extended with the new terms (term ids only grow);
- :func:`delete_questions` marks rows as deleted (*tombstones*, ``deleted.npy`` of their
  segment); a question replaced by ``add_questions(..., replace=True)`` is deleted and
  added again;
- :func:`compact` merges the segments into one without the deleted rows, renumbering the
  rows; stored models with a row per question follow (``select_rows``).

Collection statistics (document frequencies, lengths, term frequencies) are those of the
live rows, kept up to date by each change, so every score after a change equals that of a
fresh build of the same live archive. Stored models stay usable: new questions are folded
into the topic and multiview models when an engine opens the index, get translation
features from the existing tables, and the ranker is unchanged; ``cqa-search info``
says how many questions each model has not seen.

A sharded index changes its shards with the same functions, all in one new top-level
generation (:mod:`cqa_search.index.live_shards`).
"""
from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import time
from array import array
from dataclasses import dataclass, field

import numpy as np

from .._utils import counted, progress_bar
from ..exceptions import ArchiveError, IndexFormatError
from .build import checked_questions, nothing_read, read_archive
from .layout import (SegmentRows, SegmentWriter, SortedIds, load_index, read_head,
                     segment_dir, write_globals)
from .models import load_models, row_arrays, stale_inputs, write_model
from .sharding import is_sharded, read_shards
from .store import IndexWriter, open_index
from .term_index import CollectionStats, FieldIndex, TermIndex, TermIndexBuilder
from .vocab import Vocabulary

__all__ = ["add_questions", "delete_questions", "compact", "ChangeSummary", "index_info"]

logger = logging.getLogger(__name__)

_SEGMENT = re.compile(r"seg-(\d+)\Z")


@dataclass(frozen=True)
class ChangeSummary:
    """What :func:`add_questions`, :func:`delete_questions` or :func:`compact` did."""

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


def _minus(a: CollectionStats, b: CollectionStats) -> CollectionStats:
    n = len(a.df)
    df = np.asarray(a.df, dtype=np.int64) - np.pad(np.asarray(b.df, np.int64), (0, n - len(b.df)))
    tf = np.asarray(a.term_freq, dtype=np.int64) - np.pad(np.asarray(b.term_freq, np.int64),
                                                          (0, n - len(b.term_freq)))
    return CollectionStats(a.n_docs - b.n_docs, df, tf, a.total_terms - b.total_terms)


def _plus(a: CollectionStats, b: CollectionStats, n_terms) -> CollectionStats:
    """``a + b`` over a vocabulary of ``n_terms`` (both may know fewer terms)."""
    pad = CollectionStats(0, np.zeros(n_terms, np.int64), np.zeros(n_terms, np.int64), 0)
    return pad + a + b


class _Change:
    """A change of the live generation, prepared under the writers' lock from its
    :class:`~cqa_search.index.layout.IndexHead` (the postings are not read)."""

    def __init__(self, writer, base):
        self.writer, self.base = writer, base
        self.head = read_head(base)
        m = self.manifest = base.manifest
        self.segments = [dict(s) for s in m["segments"]]
        self.starts = np.cumsum([0] + [int(s["n_docs"]) for s in self.segments])
        self.live = ~self.head.deleted
        self.changed = set()  # segments whose deleted mask changes

    @functools.cached_property
    def ids(self) -> SortedIds:
        return SortedIds(self.head.doc_ids, self.head.doc_id_rank())

    def row(self, doc_id) -> int | None:
        """The live row of question ``doc_id`` (None: not in the index)."""
        for row in self.ids.rows(doc_id):
            if self.live[row]:
                return row
        return None

    def delete_rows(self, rows) -> dict:
        """Mark ``rows`` deleted; returns each field's statistics of those rows (to take
        them out of the collection's)."""
        n_terms = len(self.head.terms)
        removed = {name: CollectionStats(0, np.zeros(n_terms, np.int64),
                                         np.zeros(n_terms, np.int64), 0)
                   for name in self.head.stats}
        by_segment = {}
        for row in rows:
            k = int(np.searchsorted(self.starts, row, side="right")) - 1
            by_segment.setdefault(k, []).append(int(row) - int(self.starts[k]))
            self.live[int(row)] = False
        for k, local in by_segment.items():
            for name in self.head.stats:
                field = self.head.segment_field(k, name)
                stats = removed[name]
                for r in local:
                    terms, counts = np.unique(np.asarray(field.terms_of(r)), return_counts=True)
                    stats.df[terms] += 1
                    stats.term_freq[terms] += counts
                    stats.n_docs += 1
                    stats.total_terms += len(field.terms_of(r))
            self.changed.add(k)
        for k in self.changed:
            seg = self.segments[k]
            seg["n_deleted"] = int((~self.live[self.starts[k]:self.starts[k + 1]]).sum())
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

    def commit(self, *, field_stats, stats, counters, new_segment=None, **changed) -> str:
        """Write the deleted masks that changed, the statistics, and the shared files in
        ``changed`` (:func:`~cqa_search.index.layout.write_globals`' parts: those not
        given are kept as they are), then commit."""
        w = self.writer
        for k in self.changed:
            mask = ~self.live[self.starts[k]:self.starts[k + 1]]
            w.array(f"{segment_dir(self.segments[k]['name'])}/deleted.npy", mask)
        segments = self.segments + ([new_segment] if new_segment else [])
        fields = write_globals(w, field_stats=field_stats, **changed)
        manifest = dict(self.manifest)
        manifest.update(segments=segments, counters=counters,
                        stats={**stats, "fields": fields})
        # the live generation's files, but for those written here (IndexWriter.commit)
        return w.commit(manifest, keep=list(self.base.manifest["files"]))


def _sharded(path):
    """The module of a sharded index's live changes when ``path`` is one (None otherwise;
    imported only then)."""
    if not is_sharded(open_index(path)):
        return None
    from . import live_shards

    return live_shards


def add_questions(path, archive, *, replace=False, format=None, skip_invalid=False,
                  progress=False, **reader_options) -> ChangeSummary:
    """Add questions to the index at ``path`` as a new segment (atomically).

    On a sharded index, the new questions go to the shards with the fewest live questions
    (:mod:`cqa_search.index.live_shards`), in one new top-level generation.

    Parameters
    ----------
    path : path
        An index (built by :func:`~cqa_search.build_index`).
    archive : path, list of paths, or iterable of Question
        The new questions (files are read as :func:`~cqa_search.build_index` reads them).
    replace : bool, default False
        A question whose id the index has replaces it (e.g. with new answers); without
        it such a question is refused, naming its id.
    format, skip_invalid, progress, **reader_options
        As :func:`~cqa_search.build_index`.

    Returns
    -------
    ChangeSummary

    Raises
    ------
    ArchiveError
        A question id the index already has (without ``replace``), twice in the new
        questions, an invalid record, no question at all.
    IndexFormatError
        No index at ``path``.
    """
    t0 = time.perf_counter()
    sharded = _sharded(path)  # (a clear error for a missing index before reading)
    questions, report, _ = read_archive(archive, format=format, skip_invalid=skip_invalid,
                                        reader_options=reader_options)
    questions = checked_questions(questions, progress_bar(progress, "adding", "questions"),
                                  duplicate="question id {!r} is twice in the new questions")
    if sharded is not None:
        return sharded.add_questions(path, questions, report, replace=replace, t0=t0)
    with IndexWriter(path) as writer:
        change = _Change(writer, writer.begin())
        replaced = []

        def replacing(questions):
            for question in questions:
                row = change.row(question.id)
                if row is not None:
                    if not replace:
                        raise ArchiveError(already(question.id))
                    replaced.append(row)
                yield question

        done = append(change, replacing(questions), Vocabulary(change.head.terms), replaced)
        if done is None:
            raise nothing_read("no question to add", report)
    return ChangeSummary("added", os.fspath(path), done["generation"], added=done["added"],
                         deleted=len(replaced), n_questions=done["n_questions"],
                         n_segments=len(change.segments) + 1,
                         seconds=time.perf_counter() - t0, n_skipped=report.n_skipped,
                         details={"replaced": counted(len(replaced), "question")} if replaced
                         else {})


def already(doc_id) -> str:
    """The message of a question id an index has already."""
    return (f"question id {doc_id!r} is already in the index (add it with --replace to "
            "replace it)")


def append(change, questions, vocab, replaced) -> dict | None:
    """Write ``questions`` (checked already) as a new segment of the generation ``change``
    makes, their terms extending ``vocab`` (the index's vocabulary, or a sharded index's
    whole one), with the rows ``replaced`` deleted (a list ``questions`` may fill while
    they are read), and commit it.

    Returns
    -------
    dict or None
        None when there was no question; else ``generation``, ``added``, ``n_questions``
        (live after), ``rows`` (the new segment's
        :class:`~cqa_search.index.layout.SegmentRows`), ``part`` (its TermIndex),
        ``removed`` (field -> CollectionStats of the deleted rows, empty without),
        ``surface`` (the surface words the index did not have).
    """
    head, writer = change.head, change.writer
    number = max(int(_SEGMENT.match(s["name"]).group(1)) for s in change.segments) + 1
    segment = SegmentWriter(writer, f"seg-{number:06d}")
    rows = segment.write_questions(
        questions, SegmentRows(TermIndexBuilder(head.analyzer, tuple(head.stats), vocab=vocab),
                               categories={name: i for i, name in enumerate(head.categories)}))
    if not len(rows):
        return None
    part = rows.builder.build()
    n_terms = len(part.vocab)
    removed = change.delete_rows(replaced) if replaced else {}
    new_segment = segment.finish(part, doc_ids=rows.doc_ids,
                                 archive_offsets=rows.archive_offsets,
                                 doc_category=rows.doc_category)
    field_stats = {}
    for name, stats in head.stats.items():
        stats = _plus(stats, part[name].stats, n_terms)
        field_stats[name] = _minus(stats, removed[name]) if removed else stats
    doc_ids, categories = rows.doc_ids, rows.categories
    live = np.concatenate([change.live, np.ones(len(doc_ids), dtype=bool)])
    surface = head.stored.json("surface.json")
    new_words = {w: t for w, t in rows.builder.surface_words().items() if w not in surface}
    old = change.manifest["stats"]
    stats = change.stats_entry(live, n_terms, {
        **{key: int(old.get(key, 0)) + n for key, n in rows.counts.items()},
        "n_categories": len(categories)})
    ranks = change.ids.extended_ranks(doc_ids)
    generation = change.commit(
        field_stats=field_stats, stats=stats,
        counters=change.counters(len(doc_ids), len(replaced)), new_segment=new_segment,
        vocab_terms=part.vocab.terms if n_terms > len(head.terms) else None,
        categories=list(categories) if len(categories) > len(head.categories) else None,
        surface={**surface, **new_words} if new_words else None, doc_id_rank=ranks)
    return {"generation": generation, "added": len(doc_ids), "n_questions": int(live.sum()),
            "rows": rows, "part": part, "removed": removed, "surface": new_words}


def delete_questions(path, doc_ids, *, missing_ok=False) -> ChangeSummary:
    """Delete questions from the index at ``path`` by id (atomically; tombstones).

    Raises
    ------
    ArchiveError
        An id the index does not have (unless ``missing_ok``), or no id.
    """
    t0 = time.perf_counter()
    if isinstance(doc_ids, str):  # its characters are not the ids meant
        raise ArchiveError(f"doc_ids must be a list of ids, not one string; got {doc_ids!r}")
    doc_ids = list(dict.fromkeys(str(d) for d in doc_ids))
    if not doc_ids:
        raise ArchiveError("no question id to delete")
    sharded = _sharded(path)
    if sharded is not None:
        return sharded.delete_questions(path, doc_ids, missing_ok=missing_ok, t0=t0)
    with IndexWriter(path) as writer:
        change = _Change(writer, writer.begin())
        found = {d: change.row(d) for d in doc_ids}
        missing = [d for d, row in found.items() if row is None]
        check_deletion(missing, missing_ok, len(found) - len(missing), int(change.live.sum()))
        rows = [row for row in found.values() if row is not None]
        generation = change.base.generation  # nothing to delete (missing_ok): no new one
        if rows:
            generation = remove(change, rows)
    return ChangeSummary("deleted", os.fspath(path), generation, deleted=len(rows),
                         n_questions=int(change.live.sum()), n_segments=len(change.segments),
                         seconds=time.perf_counter() - t0,
                         details={"not found": ", ".join(missing)} if missing else {})


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


def remove(change, rows) -> str:
    """Delete the live ``rows`` in the generation ``change`` makes, and commit it; the
    statistics of the rows are left in ``change.removed``."""
    head = change.head
    change.removed = removed = change.delete_rows(rows)
    field_stats = {name: _minus(stats, removed[name]) for name, stats in head.stats.items()}
    return change.commit(field_stats=field_stats,
                         stats=change.stats_entry(change.live, len(head.terms), {}),
                         counters=change.counters(deleted=len(rows)))


def compact(path, *, progress=False) -> ChangeSummary:
    """Merge the segments of the index at ``path`` into one, without its deleted rows.

    Rows are renumbered: stored models with a row per question are carried over to the new
    rows (``select_rows``; questions added since their fit are folded in first); the
    others are kept as they are. Models fitted before the compaction and stored after it
    are refused (they would address the old rows). A sharded index compacts each shard
    that has deleted rows or more than one segment
    (:mod:`cqa_search.index.live_shards`).
    """
    t0 = time.perf_counter()
    sharded = _sharded(path)
    if sharded is not None:
        return sharded.compact(path, t0=t0)
    with IndexWriter(path) as writer:
        base = writer.begin()
        change = _Change(writer, base)
        n_segments = len(change.segments)
        generation, carried = compacted(change, load_index(base))
    return ChangeSummary("compacted", os.fspath(path), generation,
                         deleted=int(len(change.live) - change.live.sum()),
                         n_questions=int(change.live.sum()), n_segments=1,
                         seconds=time.perf_counter() - t0,
                         details={"segments": f"{n_segments} merged into 1"}
                         | ({"models": ", ".join(carried) + " carried over to the new rows"}
                            if carried else {}))


def compacted(change, data, after=None) -> tuple:
    """Merge the segments of the generation ``change`` reads (its data ``data``: its term
    index scored with the statistics its models are computed with) into one without the
    deleted rows, carry the per-question models' rows over, and commit (``after(merged)``:
    writes more files of the merged TermIndex and returns entries of the new manifest).
    Returns the generation and the models carried."""
    from ..features import IndexView

    writer, base = change.writer, change.base
    index = data.index
    keep_rows = np.flatnonzero(change.live)
    n_terms = len(index.vocab)
    segment = SegmentWriter(writer, "seg-000001")
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
    stats = change.stats_entry(np.ones(len(keep_rows), dtype=bool), n_terms, {})
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
    out = dict(change.manifest)
    out.update(segments=[entry], stats={**stats, "fields": field_stats},
               rows_id=secrets.token_hex(8), models=dict(base.models),
               **({} if after is None else after(merged)))
    keep = [rel for rel in base.manifest["files"] if rel.startswith("models/")]
    return writer.commit(out, keep=keep), carried  # (the files written here win)


def _select(field: FieldIndex, rows, n_terms) -> FieldIndex:
    """The field over ``rows`` only (in their order), with its own statistics."""
    out = field.select(rows)
    if out.n_terms != n_terms:
        raise AssertionError("compaction changed the vocabulary")  # pragma: no cover
    return out


def _category_counts(stored) -> np.ndarray:
    """Live questions per category id of a generation."""
    if is_sharded(stored):
        return np.asarray(stored.array("category_counts.npy"))
    return read_head(stored).category_counts()


def _ranker_meta(stored, name):
    """The feature names a stored ranker reads and its hybrid weight (None when its model
    file is damaged: opening the index says so)."""
    try:
        meta = stored.model(name).meta
    except IndexFormatError:
        return None, None
    names, a = meta.get("feature_names"), meta.get("hybrid_weight")
    return (names if isinstance(names, list) else None,
            a if isinstance(a, (int, float)) and not isinstance(a, bool) else None)


def index_info(path) -> dict:
    """What ``cqa-search info`` shows: generation, segments, questions, and for every stored
    model how many questions were added and deleted since its fit, the stored models it
    was fitted from that were fitted again since (``refitted_since``:
    :func:`~cqa_search.index.models.stale_inputs`; for a ranker, the models of its
    features), and for a ranker the ``features`` it reads and its ``hybrid_weight``."""
    stored = open_index(path)
    m = stored.manifest
    counters = m.get("counters", {})
    stats = m.get("stats", {})
    models = {}
    for name, entry in stored.models.items():
        fitted = entry.get("counters", {})
        models[name] = {"kind": entry["kind"], "created": entry.get("created"),
                        "added_since": int(counters.get("added", 0))
                        - int(fitted.get("added", 0)),
                        "deleted_since": int(counters.get("deleted", 0))
                        - int(fitted.get("deleted", 0)),
                        "refitted_since": stale_inputs(stored.models, name)}
        if entry["kind"] == "ranker":
            models[name]["features"], models[name]["hybrid_weight"] = \
                _ranker_meta(stored, name)
    return {"path": stored.path, "generation": stored.generation,
            "created": m.get("created"), "format_version": m.get("format_version"),
            "questions": int(stats.get("n_docs", 0)), "rows": int(stats.get("n_rows", 0)),
            "segments": [{"name": s["name"], "rows": int(s["n_docs"]),
                          "deleted": int(s["n_deleted"])} for s in m.get("segments", [])],
            "terms": int(stats.get("n_terms", 0)),
            "categories": int((_category_counts(stored) > 0).sum()),  # deleted ones left out
            "fields": list(stats.get("fields", {})), "models": models,
            "shards": [{"dir": s["dir"], "questions": s["n_docs"] - s["n_deleted"],
                        "rows": s["n_docs"], "deleted": s["n_deleted"]}
                       for s in (read_shards(stored) if is_sharded(stored) else ())],
            "analyzer": m.get("analyzer"), "sources": m.get("sources", [])}
