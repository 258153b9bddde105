"""The write back-end of a sharded index (:class:`ShardedWriter`, see
:mod:`cqa_search.index.writer`): its changes of questions and models.

Each change is one new top-level generation, written under the writers' lock of the
sharded index from its live generation: the shards it touches are changed as any index is
(:class:`~cqa_search.index.changes.SegmentChange`: a new segment, tombstones, a
compaction, a stored model; each a generation of the shard written inside the new
top-level generation by a nested writer,
:meth:`~cqa_search.index.store.IndexWriter.nested`), the other shards' files are kept
(hard links), and what the shards share is written once — the vocabulary, the categories
and their counts, the surface words, and the collection statistics, changed by the sum of
the shards' changes — before the one atomic switch of ``CURRENT``. A crash at any point
leaves the old generation live; readers see the old or the new, never a mix.

- :meth:`~ShardedWriter.add`: each new question goes to the shard with the fewest live
  questions at that point (ties: the lower shard), the shards taking their questions as
  contiguous runs of the input in shard order, so that new terms get their ids in the
  order the questions are read, as in an unsharded index; a shard without questions gets
  a new index (:class:`~cqa_search.index.build.NewIndex`). A replaced question
  (``replace=True``) is deleted in its shard.
- :meth:`~ShardedWriter.delete`: tombstones in the shards holding the questions.
- :meth:`~ShardedWriter.compact`: each shard with deleted rows or more than one segment is
  merged into one segment (its per-question models' rows carried over, computed with the
  global statistics); every shard's posting weights are written again from the current
  statistics; a shard left without questions is dropped. Each shard's new generation is
  written by :func:`compact_shard`: in this process, or, on Ray (``ray``: True or a
  cluster's address; by default when ``RAY_ADDRESS`` names a cluster), by a task per shard
  on the cluster's nodes in turn, the driver writing only the top-level generation.
- :meth:`~ShardedWriter.store_model`: the model at the top level, and, for a model with a
  row per question, in every shard with its own rows (the arrays the shards share linked
  from the top level's files): :func:`write_shard_rows`.

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
from ..exceptions import ArchiveError, ParameterError
from .build import NewIndex, nothing_read
from .changes import (ChangeSummary, SegmentChange, already_in_index, check_deletion,
                      commit_models)
from .layout import SegmentRows, load_index, read_stats, write_globals, write_weights
from .model_files import added_rows, growing_models, model_dir, runs_entry, write_model
from .sharding import as_part, per_question, read_shards, rows_of, shard_dir
from .store import IndexWriter, link_generation, open_index
from .term_index import TermIndexBuilder
from .vocab import Vocabulary

__all__ = ["ShardedWriter", "route", "write_shard_rows", "compact_shard"]


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


def write_shard_rows(writer, name, model, state, shared) -> None:
    """Write model ``name`` into a shard's generation (``writer``): its row arrays from
    ``state`` (the shard's rows only: :func:`~cqa_search.index.sharding.rows_of`),
    its other arrays linked from the top level's files (``shared(relpath)``: the path and
    SHA-256 of one)."""
    rows = per_question(model, name)
    write_model(writer, name, model, state, only=rows)
    prefix = model_dir(name)
    for key in state[1]:
        if key not in rows:
            rel = f"{prefix}/{key}.npy"
            writer.link(rel, *shared(rel))


class _Shards:
    """The shards of a sharded index's live generation ``base``, read under the writers'
    lock, and those rewritten in the generation ``writer`` makes."""

    def __init__(self, writer, base):
        self.writer, self.base = writer, base
        self.shards = [dict(e) for e in read_shards(base)]
        self.rewritten = []

    def shard(self, s):
        """Shard ``s``'s live generation (a StoredIndex)."""
        return open_index(os.path.join(self.base.root, self.shards[s]["dir"]))

    def _top_file(self, rel) -> tuple:
        """The path and SHA-256 of the live top level's file ``rel``."""
        return self.base.file(rel), self.base.manifest["files"][rel]["sha256"]

    def live_shards(self) -> list:
        return [s for s, e in enumerate(self.shards) if e["dir"] is not None]

    @property
    def n_live(self) -> int:
        return sum(e["n_docs"] - e["n_deleted"] for e in self.shards)

    def rewrite(self, s, change, base=None) -> None:
        """Write shard ``s``'s next generation: ``change(shard_writer, shard_base)``
        commits it, from its live generation (``base``, when read already)."""
        with self.writer.nested(shard_dir(s), base=base or self.shard(s)) as w:
            change(w, w.begin())
        self.rewritten.append(shard_dir(s))


class _Top(_Shards):
    """A change of a sharded index's questions: each shard's change, and what the shards
    share, updated."""

    def __init__(self, writer, base):
        super().__init__(writer, base)
        self.manifest = base.manifest
        self.stats = read_stats(base)
        self.vocab = Vocabulary(base.json("vocab.json"))
        self.categories = list(base.json("categories.json"))
        self.category_counts = [int(c) for c in base.array("category_counts.npy")]
        self.surface = base.json("surface.json")
        self.n_terms = len(self.vocab)  # before the change
        self.counts = {}  # n_answers, n_with_best_answer, n_duplicate_links added
        self.added = self.deleted = 0
        self._changes = {}

    def change(self, s) -> SegmentChange:
        """Shard ``s``'s change (read once; its writer given when it is rewritten)."""
        if s not in self._changes:
            self._changes[s] = SegmentChange(None, self.shard(s))
        return self._changes[s]

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

    def added_rows(self, rows, part) -> None:
        """The statistics, categories and counts of a segment of new questions."""
        for name, st in self.stats.items():
            self.stats[name] = (st + part[name].stats).padded(len(part.vocab))
        names = list(rows.categories)
        doc_category = np.asarray(rows.doc_category)
        self.count([names[c] for c in doc_category[doc_category >= 0].tolist()], 1)
        for key, n in rows.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        self.added += len(rows)

    def deleted_rows(self, change, rows, removed) -> None:
        """The statistics and categories of the rows deleted in a shard's change."""
        for name, st in self.stats.items():
            self.stats[name] = st - removed[name]  # (a shard knows fewer terms)
        self.count(change.category_names(rows), -1)
        self.deleted += len(rows)

    def commit(self, *, stats_changed=True, **manifest) -> str:
        """Write what the shards share and commit the new top-level generation."""
        w = self.writer
        n_terms = len(self.vocab)
        fields = write_globals(
            w, field_stats={name: st.padded(n_terms) for name, st in self.stats.items()},
            vocab_terms=self.vocab.terms if n_terms > self.n_terms else None,
            categories=self.categories, surface=self.surface)
        w.array("category_counts.npy", np.asarray(self.category_counts, dtype=np.int64))
        m = self.manifest
        n_rows = sum(e["n_docs"] for e in self.shards)
        old = m["stats"]
        summary = {**{k: v for k, v in old.items() if k != "fields"},
                   **{k: int(old.get(k, 0)) + n for k, n in self.counts.items()},
                   "n_rows": n_rows, "n_docs": self.n_live, "n_terms": len(self.vocab),
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

    # -- the shards' changes ----------------------------------------------------------------
    def change_shard(self, s, chunk, gone) -> None:
        """Shard ``s`` gets the questions ``chunk`` (a new segment) and loses its rows
        ``gone``."""
        change = self.change(s)

        def rewrite(w, shard_base):
            change.writer = w
            if chunk:
                done = change.append(chunk, self.vocab, list(gone))
                self.added_rows(done["rows"], done["part"])
                self.surface.update(done["surface"])
            else:
                change.remove(gone)
            if gone:
                self.deleted_rows(change, gone, change.removed)
        self.rewrite(s, rewrite, change.base)
        entry = self.shards[s]
        entry["n_docs"] += len(chunk)
        entry["n_deleted"] += len(gone)

    def new_shard(self, s, chunk) -> None:
        """A new index for the empty shard ``s``, of the questions ``chunk``; the models
        that compute the rows of questions when they are added store them there."""
        directory = shard_dir(s)
        head = self.change(self.live_shards()[0]).head  # every shard's analyzer and fields
        growing = growing_models(self.base)
        with self.writer.nested(directory) as w:
            new = NewIndex(w, SegmentRows(TermIndexBuilder(head.analyzer, tuple(head.stats),
                                                           vocab=self.vocab)))
            rows = new.write_questions(chunk)
            models = {}
            for name, model in growing.items():  # (the top level's has no rows)
                meta, arrays = model.state()
                write_shard_rows(w, name, model, (meta, {**arrays, **added_rows(
                    name, model, chunk)}), self._top_file)
                models[name] = {"kind": model.kind, "dir": model_dir(name),
                                "rows": len(chunk), "runs": []}
            index = new.commit(analyzer=head.analyzer, shard={"weights": {}, "stats_id": None},
                               models=models)
        self.added_rows(rows, index)
        self.surface.update({word: t for word, t in new.surface.items()
                             if word not in self.surface})
        self.shards[s] = {"dir": directory, "n_docs": len(rows), "n_deleted": 0}

    def compaction(self, s):
        """What compacting shard ``s`` takes: ``"merge"`` (its segments into one without
        its deleted rows), ``"weights"`` (only its posting weights of the current
        statistics), or None (nothing); a shard without live questions is dropped here
        (None)."""
        entry = self.shards[s]
        if entry["n_deleted"] == entry["n_docs"]:  # nothing live left: no shard
            self.rewritten.append(shard_dir(s))
            self.shards[s] = {"dir": None, "n_docs": 0, "n_deleted": 0}
            return None
        manifest = self.shard(s).manifest
        if entry["n_deleted"] or len(manifest["segments"]) > 1:
            return "merge"
        if manifest.get("shard", {}).get("stats_id") != self.manifest.get("stats_id"):
            return "weights"
        return None

    def compacted(self, s, merged) -> None:
        """Shard ``s``'s new generation, written by :func:`compact_shard`, is part of the
        new top-level generation."""
        self.writer.add_index(shard_dir(s))
        self.rewritten.append(shard_dir(s))
        if merged:
            entry = self.shards[s]
            self.shards[s] = {"dir": entry["dir"], "n_docs": entry["n_docs"]
                              - entry["n_deleted"], "n_deleted": 0}


def compact_shard(top, s, target, merge) -> None:
    """Write the next generation of shard ``s`` of the sharded index whose live top-level
    generation is ``top``, at ``target`` (its directory in the new top-level generation
    being written), in any process (this one, or a Ray task on a node that reads the
    index): its segments merged into one without its deleted rows, its per-question
    models' rows carried over, computed with the global statistics (``merge``), or only
    its posting weights of the current statistics."""
    stats, vocab = read_stats(top), Vocabulary(top.json("vocab.json"))
    stats_id = top.manifest.get("stats_id")
    link_generation(open_index(os.path.join(top.root, shard_dir(s))), target)
    with IndexWriter(target, nested=True) as w:
        shard_base = w.begin()
        data = as_part(load_index(shard_base), top, stats=stats, vocab=vocab)
        if merge:
            SegmentChange(w, shard_base).compact(data, after=lambda merged: {"shard": _weights(
                w, {name: fi.with_stats(stats[name]) for name, fi in merged.fields.items()},
                stats_id)})
        else:  # its posting weights: the current statistics
            w.commit({**shard_base.manifest, "shard": _weights(w, data.index.fields, stats_id)},
                     keep=list(shard_base.manifest["files"]))


def _weights(writer, fields, stats_id) -> dict:
    """Write a shard's posting weights of the global statistics (``fields``: its fields
    scored with them); returns its manifest's ``"shard"`` entry."""
    return {"weights": write_weights(writer, fields, "", ".global"), "stats_id": stats_id}


class ShardedWriter:
    """The write back-end of a sharded index (see the module docstring).

    Parameters
    ----------
    path : path
        The sharded index's directory.
    writer : IndexWriter
        Makes its new top-level generation (holding the writers' lock).
    base : StoredIndex
        Its live top-level generation.
    """

    def __init__(self, path, writer, base):
        self.path, self.writer, self.base = path, writer, base

    def add(self, questions, report, *, replace=False, t0) -> ChangeSummary:
        top = _Top(self.writer, self.base)
        questions, replaced = list(questions), {}
        for question in questions:
            found = top.locate(question.id)
            if found is not None:
                if not replace:
                    raise ArchiveError(already_in_index(question.id))
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
                    top.new_shard(s, chunk)
                continue
            gone = replaced.get(s, [])
            if chunk or gone:
                top.change_shard(s, chunk, gone)
        generation = top.commit(rows_id=secrets.token_hex(8))
        n_replaced = sum(map(len, replaced.values()))
        return ChangeSummary("added", os.fspath(self.path), generation, added=len(questions),
                             deleted=n_replaced, n_questions=top.n_live,
                             n_segments=len(top.live_shards()), parts="shard",
                             seconds=time.perf_counter() - t0, n_skipped=report.n_skipped,
                             details={"shards": ", ".join(
                                 f"{shard_dir(s)} +{n}" for s, n in enumerate(counts) if n)}
                             | ({"replaced": counted(n_replaced, "question")} if n_replaced
                                else {}))

    def delete(self, doc_ids, *, missing_ok=False, t0) -> ChangeSummary:
        top = _Top(self.writer, self.base)
        found = {d: top.locate(d) for d in doc_ids}
        missing = [d for d, where in found.items() if where is None]
        n_live = top.n_live
        check_deletion(missing, missing_ok, len(found) - len(missing), n_live)
        by_shard = {}
        for where in found.values():
            if where is not None:
                by_shard.setdefault(where[0], []).append(where[1])
        generation = self.base.generation  # nothing to delete (missing_ok): no new one
        for s, rows in sorted(by_shard.items()):
            top.change_shard(s, [], rows)
        if by_shard:
            generation = top.commit()
        return ChangeSummary("deleted", os.fspath(self.path), generation, deleted=top.deleted,
                             n_questions=n_live - top.deleted,
                             n_segments=len(top.live_shards()), parts="shard",
                             seconds=time.perf_counter() - t0,
                             details={"not found": ", ".join(missing)} if missing else {})

    def compact(self, *, t0, ray=None) -> ChangeSummary:
        top = _Top(self.writer, self.base)
        jobs, dropped, n_deleted = [], [], 0
        for s in top.live_shards():
            directory, deleted = top.shards[s]["dir"], top.shards[s]["n_deleted"]
            kind = top.compaction(s)
            if kind is not None:
                jobs.append((s, kind == "merge"))
            elif top.shards[s]["dir"] is None:
                dropped.append(directory)
            n_deleted += deleted
        calls = [(self.base, s, os.path.join(self.writer.tmp, shard_dir(s)), merge)
                 for s, merge in jobs]
        # on Ray when asked, or when RAY_ADDRESS names a cluster (the shards' nodes); a
        # program's own Ray session does not decide it: its workers know only the model
        # kinds the package registers
        if jobs and (ray not in (None, False) or ray is None and os.environ.get("RAY_ADDRESS")):
            from ..distributed._ray import connect, run_tasks

            connect(None if ray in (None, True) else ray)
            run_tasks(compact_shard, calls, [f"shard {s} ({shard_dir(s)})" for s, _ in jobs],
                      "compacting the shards", "the compaction")
        else:
            for call in calls:
                compact_shard(*call)
        for s, merge in jobs:
            top.compacted(s, merge)
        merged = [shard_dir(s) for s, merge in jobs if merge]
        generation = top.commit(stats_changed=False, rows_id=secrets.token_hex(8))
        return ChangeSummary("compacted", os.fspath(self.path), generation, deleted=n_deleted,
                             n_questions=top.n_live, n_segments=len(top.live_shards()),
                             parts="shard", seconds=time.perf_counter() - t0,
                             details={"shards": ", ".join(merged) + " merged into one segment"
                                      if merged else "none had deleted rows or segments to "
                                                     "merge"}
                             | ({"dropped": ", ".join(dropped) + " (no question left)"}
                                if dropped else {}))

    def store_model(self, name, model, state, models) -> str:
        entry = models(self.base)  # the checks first
        rows = per_question(model, name)
        rewritten = []
        if not rows:
            write_model(self.writer, name, model, state)
        else:
            rewritten = self._store_rows(name, model, state, rows)
        return commit_models(self.writer, self.base, entry,
                             dropped=[model_dir(name), *rewritten])

    def _store_rows(self, name, model, state, rows) -> list:
        """Write a model with a row per question: at the top level without its rows, in
        every shard with its own; returns the shard directories rewritten.

        Raises
        ------
        ParameterError
            The model's rows are not the index's rows.
        """
        writer = self.writer
        top = _Shards(writer, self.base)
        n_rows = sum(entry["n_docs"] for entry in top.shards)
        if len(state[1][rows[0]]) != n_rows:
            raise ParameterError(f"model {name!r} has {len(state[1][rows[0]])} rows of "
                                 f"questions but {self.base.path} has {n_rows}: fit it again")
        write_model(writer, name, model, rows_of(model, 0, 0, state))
        start = 0
        for s, entry in enumerate(top.shards):
            stop = start + entry["n_docs"]
            if entry["dir"] is None:
                continue

            def change(w, shard_base, start=start, stop=stop):
                write_shard_rows(w, name, model, rows_of(model, start, stop, state),
                                 lambda rel: (os.path.join(writer.tmp, rel), writer.digest(rel)))
                models = dict(shard_base.models)
                models[name] = {"kind": model.kind, "dir": model_dir(name),
                                "rows": int(stop - start), **runs_entry(model)}
                commit_models(w, shard_base, models, dropped=[model_dir(name)])
            top.rewrite(s, change)
            start = stop
        return top.rewritten

    def remove_model(self, name, models) -> str:
        prefix = model_dir(name)
        entry = models(self.base)  # the checks first
        top = _Shards(self.writer, self.base)
        for s in top.live_shards():  # the shards' rows of the model go too
            shard = top.shard(s)
            if name in shard.models:
                top.rewrite(s, lambda w, shard_base: commit_models(
                    w, shard_base, {k: v for k, v in shard_base.models.items() if k != name},
                    dropped=[prefix]), shard)
        return commit_models(self.writer, self.base, entry, dropped=[prefix, *top.rewritten])

    @staticmethod
    def info(stored) -> dict:
        return {"categories": int((np.asarray(stored.array("category_counts.npy")) > 0).sum()),
                "shards": [{"dir": s["dir"], "questions": s["n_docs"] - s["n_deleted"],
                            "rows": s["n_docs"], "deleted": s["n_deleted"]}
                           for s in read_shards(stored)]}
