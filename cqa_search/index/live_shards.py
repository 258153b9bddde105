"""Live changes of a sharded index: questions added and deleted, shards compacted.

Each change is one new top-level generation, written under the writers' lock of the
sharded index from its live generation: the shards it touches are changed as any index is
(:mod:`.live`: a new segment, tombstones, a compaction, each in a generation of the shard
written inside the new top-level generation, :func:`~.sharding.rewrite_shard`), the other
shards' files are kept (hard links), and what the shards share is written once — the
vocabulary, the categories and their counts, the surface words, and the collection
statistics, changed by the sum of the shards' changes — before the one atomic switch of
``CURRENT``. A crash at any point leaves the old generation live; readers see the old or
the new, never a mix.

- :func:`add_questions`: each new question goes to the shard with the fewest live
  questions at that point (ties: the lower shard), the shards taking their questions as
  contiguous runs of the input in shard order, so that new terms get their ids in the
  order the questions are read, as in an unsharded index; a shard without questions gets
  a new index. A replaced question (``replace=True``) is deleted in its shard.
- :func:`delete_questions`: tombstones in the shards holding the questions.
- :func:`compact`: each shard with deleted rows or more than one segment is merged into
  one segment (its per-question models' rows carried over, computed with the global
  statistics); every shard's posting weights are written again from the current
  statistics; a shard left without questions is dropped.

The rows of the sharded index (the shards' rows one after the other) change with an
addition (a shard before the last may grow), so an addition renumbers them, as a
compaction does: a per-question model fitted before it is refused when stored after it.
A shard's stored posting weights are those of the statistics at its last build or
compaction: after a change of the statistics, a shard opening computes them (as an
unsharded index does after a live change).
"""
from __future__ import annotations

import heapq
import os
import secrets
import time

import numpy as np

from .._utils import counted
from ..exceptions import ArchiveError
from .build import commit_new, nothing_read
from .layout import (SegmentRows, SegmentWriter, load_index, read_stats, segment_dir,
                     write_globals, write_weights)
from .live import (ChangeSummary, _Change, _minus, _plus, already, append, check_deletion,
                   compacted, remove)
from .sharding import as_part, read_shards, register_shard, rewrite_shard, shard_dir
from .store import IndexWriter, open_index
from .term_index import CollectionStats, TermIndexBuilder
from .vocab import Vocabulary

__all__ = ["add_questions", "delete_questions", "compact", "route"]


def route(live, n) -> np.ndarray:
    """How many of ``n`` new questions each shard gets: each in turn to the shard with the
    fewest live questions (``live``, per shard), the lower shard on ties.

    Examples
    --------
    >>> route([5, 2, 4], 4).tolist()
    [0, 3, 1]
    """
    heap = [(int(c), s) for s, c in enumerate(live)]
    heapq.heapify(heap)
    out = np.zeros(len(live), dtype=np.int64)
    for _ in range(n):
        count, s = heapq.heappop(heap)
        out[s] += 1
        heapq.heappush(heap, (count + 1, s))
    return out


class _Top:
    """A change of a sharded index's top level: its live generation read under the
    writers' lock, each shard's change, and what the shards share, updated."""

    def __init__(self, writer, base):
        self.writer, self.base = writer, base
        self.manifest = base.manifest
        self.shards = [dict(e) for e in read_shards(base)]
        self.stats = read_stats(base)
        self.vocab = Vocabulary(base.json("vocab.json"))
        self.categories = list(base.json("categories.json"))
        self.category_counts = [int(c) for c in base.array("category_counts.npy")]
        self.surface = base.json("surface.json")
        self.n_terms = len(self.vocab)  # before the change
        self.rewritten = []
        self.counts = {}  # n_answers, n_with_best_answer, n_duplicate_links added
        self.added = self.deleted = 0
        self._changes = {}

    def change(self, s) -> _Change:
        """Shard ``s``'s change (read once; its writer given when it is rewritten)."""
        if s not in self._changes:
            stored = open_index(os.path.join(self.base.root, self.shards[s]["dir"]))
            self._changes[s] = _Change(None, stored)
        return self._changes[s]

    def live_shards(self) -> list:
        return [s for s, e in enumerate(self.shards) if e["dir"] is not None]

    def locate(self, doc_id):
        """``(shard, row in the shard)`` of the live question ``doc_id``, or None."""
        for s in self.live_shards():
            row = self.change(s).row(doc_id)
            if row is not None:
                return s, row
        return None

    def count(self, names, sign) -> None:
        """Add ``sign`` to the live questions of each category of ``names``."""
        for name in names:
            if name is None:
                continue
            if name not in self.categories:
                self.categories.append(name)
                self.category_counts.append(0)
            self.category_counts[self.categories.index(name)] += sign

    def rewrite(self, s, change) -> None:
        rewrite_shard(self.writer, self.base, s, change)
        self.rewritten.append(shard_dir(s))

    def added_rows(self, rows, part) -> None:
        """The statistics, categories and counts of a segment of new questions."""
        for name, st in self.stats.items():
            self.stats[name] = _plus(st, part[name].stats, len(part.vocab))
        names = list(rows.categories)
        doc_category = np.asarray(rows.doc_category)
        self.count([names[c] for c in doc_category[doc_category >= 0].tolist()], 1)
        for key, n in rows.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        self.added += len(rows)

    def deleted_rows(self, change, rows, removed) -> None:
        """The statistics and categories of the rows deleted in a shard's change."""
        for name, st in self.stats.items():
            self.stats[name] = _minus(st, removed[name])  # (a shard knows fewer terms)
        self.count(_category_names(change, rows), -1)
        self.deleted += len(rows)

    def commit(self, *, stats_changed=True, **manifest) -> str:
        """Write what the shards share and commit the new top-level generation."""
        w = self.writer
        n_terms = len(self.vocab)
        none = CollectionStats(0, np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
        fields = write_globals(
            w, field_stats={name: _plus(st, none, n_terms) for name, st in self.stats.items()},
            vocab_terms=self.vocab.terms if n_terms > self.n_terms else None,
            categories=self.categories, surface=self.surface)
        w.array("category_counts.npy", np.asarray(self.category_counts, dtype=np.int64))
        m = self.manifest
        n_rows = sum(e["n_docs"] for e in self.shards)
        n_live = n_rows - sum(e["n_deleted"] for e in self.shards)
        old = m["stats"]
        summary = {**{k: v for k, v in old.items() if k != "fields"},
                   **{k: int(old.get(k, 0)) + n for k, n in self.counts.items()},
                   "n_rows": n_rows, "n_docs": n_live, "n_terms": len(self.vocab),
                   "n_categories": len(self.categories), "fields": fields}
        counters = dict(m.get("counters", {}))
        counters["added"] = int(counters.get("added", 0)) + self.added
        counters["deleted"] = int(counters.get("deleted", 0)) + self.deleted
        out = {**m, "stats": summary, "counters": counters, "shards": self.shards, **manifest}
        if stats_changed:
            out["stats_id"] = secrets.token_hex(8)
        rewritten = tuple(d + "/" for d in self.rewritten)
        return w.commit(out, keep=[rel for rel in self.base.manifest["files"]
                                   if not rel.startswith(rewritten)])


def _category_names(change, rows) -> list:
    """The category names of rows of a shard (None: no category)."""
    names, out = change.head.categories, []
    for row in rows:
        k = int(np.searchsorted(change.starts, row, side="right")) - 1
        seg = change.segments[k]
        cid = int(change.base.array(f"{segment_dir(seg['name'])}/doc_category.npy")[
            int(row) - int(change.starts[k])])
        out.append(None if cid < 0 else names[cid])
    return out


def add_questions(path, questions, report, *, replace=False, t0=None) -> ChangeSummary:
    """:func:`cqa_search.index.live.add_questions` on a sharded index (``questions``:
    checked; ``report``: their reader's)."""
    t0 = time.perf_counter() if t0 is None else t0
    with IndexWriter(path) as writer:
        top = _Top(writer, writer.begin())
        questions, replaced = list(questions), {}
        for question in questions:
            found = top.locate(question.id)
            if found is not None:
                if not replace:
                    raise ArchiveError(already(question.id))
                replaced.setdefault(found[0], []).append(found[1])
        if not questions:
            raise nothing_read("no question to add", report)
        live = [e["n_docs"] - e["n_deleted"] - len(replaced.get(s, ()))
                for s, e in enumerate(top.shards)]
        counts = route(live, len(questions))
        starts = np.concatenate(([0], np.cumsum(counts)))
        for s in range(len(top.shards)):  # in shard order: the input's order
            chunk = questions[starts[s]:starts[s + 1]]
            if top.shards[s]["dir"] is None:
                if chunk:
                    _new_shard(top, s, chunk)
                continue
            gone = replaced.get(s, [])
            if chunk or gone:
                _change_shard(top, s, chunk, gone)
        generation = top.commit(rows_id=secrets.token_hex(8))
    n_replaced = sum(map(len, replaced.values()))
    return ChangeSummary("added", os.fspath(path), generation, added=len(questions),
                         deleted=n_replaced,
                         n_questions=sum(e["n_docs"] - e["n_deleted"] for e in top.shards),
                         n_segments=len(top.live_shards()), parts="shard",
                         seconds=time.perf_counter() - t0, n_skipped=report.n_skipped,
                         details={"shards": ", ".join(
                             f"{shard_dir(s)} +{n}" for s, n in enumerate(counts) if n)}
                         | ({"replaced": counted(n_replaced, "question")} if n_replaced
                            else {}))


def _change_shard(top, s, chunk, gone) -> None:
    """Shard ``s`` gets the questions ``chunk`` (a new segment) and loses its rows
    ``gone``."""
    change = top.change(s)

    def rewrite(w, shard_base):
        change.writer = w
        if chunk:
            done = append(change, chunk, top.vocab, list(gone))
            top.added_rows(done["rows"], done["part"])
            top.surface.update(done["surface"])
            removed = done["removed"]
        else:
            remove(change, gone)
            removed = change.removed
        if gone:
            top.deleted_rows(change, gone, removed)
    top.rewrite(s, rewrite)
    entry = top.shards[s]
    entry["n_docs"] += len(chunk)
    entry["n_deleted"] += len(gone)


def _new_shard(top, s, chunk) -> None:
    """A new index for the empty shard ``s``, of the questions ``chunk``."""
    directory = shard_dir(s)
    base = top.base
    shard0 = open_index(os.path.join(base.root, top.shards[top.live_shards()[0]]["dir"]))
    head = _Change(None, shard0).head  # the analyzer and the fields of every shard
    with IndexWriter(os.path.join(top.writer.tmp, directory)) as w:
        segment = SegmentWriter(w, "seg-000001")
        rows = segment.write_questions(chunk, SegmentRows(
            TermIndexBuilder(head.analyzer, tuple(head.stats), vocab=top.vocab)))
        index = rows.builder.build()
        entry = segment.finish(index, doc_ids=rows.doc_ids,
                               archive_offsets=rows.archive_offsets,
                               doc_category=rows.doc_category)
        surface = rows.builder.surface_words()
        commit_new(w, index, entry, analyzer=head.analyzer, doc_ids=rows.doc_ids,
                   categories=rows.categories, surface=surface, counts=rows.counts,
                   n_skipped=0, sources=[], shard={"weights": {}, "stats_id": None})
    os.unlink(os.path.join(top.writer.tmp, directory, ".lock"))
    register_shard(top.writer, directory)
    top.added_rows(rows, index)
    top.surface.update({w: t for w, t in surface.items() if w not in top.surface})
    top.shards[s] = {"dir": directory, "n_docs": len(rows), "n_deleted": 0}


def delete_questions(path, doc_ids, *, missing_ok=False, t0=None) -> ChangeSummary:
    """:func:`cqa_search.index.live.delete_questions` on a sharded index."""
    t0 = time.perf_counter() if t0 is None else t0
    with IndexWriter(path) as writer:
        top = _Top(writer, writer.begin())
        found = {d: top.locate(d) for d in doc_ids}
        missing = [d for d, where in found.items() if where is None]
        n_live = sum(e["n_docs"] - e["n_deleted"] for e in top.shards)
        check_deletion(missing, missing_ok, len(found) - len(missing), n_live)
        by_shard = {}
        for where in found.values():
            if where is not None:
                by_shard.setdefault(where[0], []).append(where[1])
        generation = top.base.generation  # nothing to delete (missing_ok): no new one
        for s, rows in sorted(by_shard.items()):
            _change_shard(top, s, [], rows)
        if by_shard:
            generation = top.commit()
    return ChangeSummary("deleted", os.fspath(path), generation, deleted=top.deleted,
                         n_questions=n_live - top.deleted,
                         n_segments=len(top.live_shards()), parts="shard",
                         seconds=time.perf_counter() - t0,
                         details={"not found": ", ".join(missing)} if missing else {})


def compact(path, *, t0=None) -> ChangeSummary:
    """:func:`cqa_search.index.live.compact` on a sharded index."""
    t0 = time.perf_counter() if t0 is None else t0
    with IndexWriter(path) as writer:
        top = _Top(writer, writer.begin())
        stats_id = top.manifest.get("stats_id")
        merged, dropped, n_deleted = [], [], 0
        for s in top.live_shards():
            entry = top.shards[s]
            change = top.change(s)
            if entry["n_deleted"] == entry["n_docs"]:  # nothing live left: no shard
                n_deleted += entry["n_deleted"]
                top.rewritten.append(shard_dir(s))
                top.shards[s] = {"dir": None, "n_docs": 0, "n_deleted": 0}
                dropped.append(shard_dir(s))
                continue
            if entry["n_deleted"] or len(change.segments) > 1:
                def rewrite(w, shard_base, change=change):
                    change.writer = w
                    data = as_part(load_index(shard_base), top.base, stats=top.stats,
                                   vocab=top.vocab)
                    compacted(change, data, after=lambda merged: {"shard": _weights(
                        w, {name: fi.with_stats(top.stats[name])
                            for name, fi in merged.fields.items()}, stats_id)})
                top.rewrite(s, rewrite)
                merged.append(shard_dir(s))
                n_deleted += entry["n_deleted"]
                top.shards[s] = {"dir": entry["dir"], "n_docs": entry["n_docs"]
                                 - entry["n_deleted"], "n_deleted": 0}
            elif change.manifest.get("shard", {}).get("stats_id") != stats_id:
                def rewrite(w, shard_base):  # its posting weights: the current statistics
                    data = as_part(load_index(shard_base), top.base, stats=top.stats,
                                   vocab=top.vocab)
                    w.commit({**shard_base.manifest,
                              "shard": _weights(w, data.index.fields, stats_id)},
                             keep=list(shard_base.manifest["files"]))
                top.rewrite(s, rewrite)
        generation = top.commit(stats_changed=False, rows_id=secrets.token_hex(8))
    n_live = sum(e["n_docs"] for e in top.shards)
    return ChangeSummary("compacted", os.fspath(path), generation, deleted=n_deleted,
                         n_questions=n_live, n_segments=len(top.live_shards()),
                         parts="shard",
                         seconds=time.perf_counter() - t0,
                         details={"shards": ", ".join(merged) + " merged into one segment"
                                  if merged else "none had deleted rows or segments to merge"}
                         | ({"dropped": ", ".join(dropped) + " (no question left)"}
                            if dropped else {}))


def _weights(writer, fields, stats_id) -> dict:
    """Write a shard's posting weights of the global statistics (``fields``: its fields
    scored with them); returns its manifest's ``"shard"`` entry."""
    return {"weights": write_weights(writer, fields, "", ".global"), "stats_id": stats_id}
