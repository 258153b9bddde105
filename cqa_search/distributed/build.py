"""Building a sharded index: N shard indexes built in parallel by Ray actors.

The files are those of :mod:`cqa_search.index.sharding` (the top-level generation holds
the shared vocabulary, categories and global statistics as an unsharded generation does,
and every shard under ``shards/NNNNN/`` is a whole one-segment index); the commit is that
of any index (:mod:`cqa_search.index.store`), so the sharded index is made live by one
atomic switch.

Shards are contiguous parts of the archive in order (the rows of the index are the
shards' rows one after the other), each balanced to within one question; a
shard left without questions (more shards than questions) has no directory. Because the
parts are contiguous, merging their vocabularies in shard order gives term ids in order
of first occurrence in the archive: the vocabulary of the unsharded build, term for term.

The build:

1. the driver reads the archive once (any format, with the readers' checks: invalid
   records, duplicate ids across files) into a spool of canonical JSONL lines;
2. one Ray task per shard analyses its lines (TermIndexBuilder, a vocabulary of its own)
   and returns its terms and statistics, keeping its postings in Ray's object store; the
   driver merges the vocabularies in shard order and sums the statistics, renumbered
   (:class:`~cqa_search.index.term_index.CollectionStats`);
3. one task per shard renumbers its postings to the global term ids and writes its shard
   index as an unsharded build writes one (:class:`~cqa_search.index.build.NewIndex`: the
   same files, byte for byte, for the same questions and term ids), in the top level's
   temporary directory (a nested writer), plus the posting weights of the global
   statistics (:func:`~cqa_search.index.layout.write_weights`);
4. the driver writes the shared files and commits the top-level generation.

The output directory must be on storage every Ray node sees (a local disk for a local
session, a shared file system for a cluster).
"""
from __future__ import annotations

import logging
import os
import secrets
import time
from array import array

import numpy as np

from .._utils import progress_bar
from ..analysis import Analyzer
from ..archive import Question
from ..exceptions import ParameterError
from ..index.build import (DEFAULT_FIELDS, BuildSummary, NewIndex, check_fields,
                           checked_questions, nothing_read, read_archive)
from ..index.layout import SegmentRows, write_globals, write_weights
from ..index.sharding import shard_dir
from ..index.store import IndexWriter
from ..index.term_index import CollectionStats, FieldIndex, TermIndex, TermIndexBuilder
from ..index.vocab import Vocabulary
from ._ray import ShardError, connect, remote

__all__ = ["build_sharded_index"]

logger = logging.getLogger(__name__)

_SPOOL = "spool.jsonl"


def _remap(field: FieldIndex, mapping, n_terms) -> FieldIndex:
    """The field with local term ids renumbered by ``mapping`` (local -> global)."""
    local_terms = np.repeat(np.arange(field.n_terms, dtype=np.int64), np.diff(field.indptr))
    terms = mapping[local_terms]
    order = np.argsort(terms, kind="stable")  # rows stay sorted within a term
    indptr = np.concatenate(([0], np.cumsum(np.bincount(terms, minlength=n_terms))))
    return FieldIndex(field.name, indptr.astype(np.int64), field.indices[order],
                      field.counts[order], field.doc_len,
                      mapping[field.sequence].astype(np.int32))


def _analyse(spool, start, stop, analyzer_config, fields):
    """Index one shard's questions (bytes ``start:stop`` of the spool) with a vocabulary
    of its own (a Ray task).

    Returns
    -------
    terms : list of str
        The shard's terms in local term-id order.
    stats : dict
        Field -> (n_docs, df, term_freq, total_terms) over the local term ids.
    part : dict
        What :func:`_write` needs (kept in Ray's object store meanwhile): the postings,
        the surface words and the :class:`~cqa_search.index.layout.SegmentRows` of the
        questions (without their builder).
    """
    import orjson

    with open(spool, "rb") as f:
        f.seek(start)
        lines = f.read(stop - start)
    rows = SegmentRows(TermIndexBuilder(Analyzer.from_config(analyzer_config), fields))
    for line in lines.splitlines(keepends=True):
        rows.add(Question.from_dict(orjson.loads(line)), line)
    index = rows.builder.build()
    stats = {}
    for name, fi in index.fields.items():
        st = CollectionStats.of(fi)
        stats[name] = (st.n_docs, st.df, st.term_freq, st.total_terms)
    surface = rows.builder.surface_words()
    rows.builder = None  # (analysed: its postings go on, not its state)
    part = {"fields": {name: (fi.indptr, fi.indices, fi.counts, fi.doc_len, fi.sequence)
                       for name, fi in index.fields.items()},
            "surface": surface, "rows": rows}
    return index.vocab.terms, stats, part


def _write(part, spool, start, stop, path, terms, mapping, stats, stats_id, analyzer_config,
           sources) -> dict:
    """Renumber a shard to the global term ids and write its index at ``path`` (a Ray
    task); returns what the top level records."""
    analyzer = Analyzer.from_config(analyzer_config)
    mapping = np.asarray(mapping, dtype=np.int64)
    vocab = Vocabulary(terms)
    stats = {name: CollectionStats(*parts) for name, parts in stats.items()}
    index = TermIndex(vocab, {name: _remap(FieldIndex(name, *arrays), mapping, len(vocab))
                              for name, arrays in part["fields"].items()})
    with open(spool, "rb") as f:
        f.seek(start)
        lines = f.read(stop - start)
    rows = part["rows"]
    surface = {tok: int(mapping[t]) for tok, t in part["surface"].items()}  # global ids
    with IndexWriter(path, nested=True) as writer:  # (registered by the driver)
        new = NewIndex(writer, rows)
        new.write_lines(lines)
        weights = write_weights(writer, {name: fi.with_stats(stats[name])
                                         for name, fi in index.fields.items()}, "", ".global")
        new.commit(analyzer=analyzer, index=index, surface=surface, sources=sources,
                   shard={"weights": weights, "stats_id": stats_id})
    categories = list(rows.categories)
    doc_category = rows.doc_category
    category_counts = np.bincount(doc_category[doc_category >= 0], minlength=len(categories))
    return {"counts": {"n_docs": len(rows), **rows.counts}, "categories": categories,
            "category_counts": category_counts.tolist(), "surface": surface}


def _spool(archive, out, *, format, skip_invalid, progress, reader_options):
    """Write the archive's questions as canonical JSONL; returns (line offsets, report)."""
    questions, report, sources = read_archive(archive, format=format, skip_invalid=skip_invalid,
                                              reader_options=reader_options)
    offsets = array("q", [0])
    bar = progress_bar(progress, "reading", "questions")
    with open(out, "wb") as f:
        # the readers check ids across files themselves
        for question in checked_questions(questions, bar, check_ids=not sources):
            line = question.to_json_bytes() + b"\n"
            f.write(line)
            offsets.append(offsets[-1] + len(line))
    if len(offsets) == 1:
        raise nothing_read("the archive is empty: no question was read", report)
    return np.frombuffer(offsets, dtype=np.int64), report, sources or []


def _scatter(values, mapping) -> np.ndarray:
    """Local per-term values placed at their global term ids."""
    out = np.zeros(int(mapping.max(initial=-1)) + 1, dtype=np.int64)
    out[mapping] = values
    return out


def _get(ray, refs, what):
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None) or exc
        raise ShardError(f"{what} failed: {type(cause).__name__}: {cause}") from None


def build_sharded_index(archive, path, n_shards, *, address=None, analyzer=None,
                        fields=DEFAULT_FIELDS, format=None, skip_invalid=False, progress=False,
                        **reader_options) -> BuildSummary:
    """Index an archive into ``n_shards`` shard indexes built in parallel on Ray.

    Parameters are those of :func:`cqa_search.build_index`, plus:

    n_shards : int
        Number of shards (contiguous parts of the archive, in order).
    address : str, optional
        A Ray cluster to build on; a local Ray session by default (see
        :func:`cqa_search.distributed._ray.connect`).

    Returns
    -------
    BuildSummary

    Raises
    ------
    ArchiveError, IndexFormatError, ParameterError
        As :func:`cqa_search.build_index`.
    ShardError
        A shard's build failed (nothing is committed).
    """
    t0 = time.perf_counter()
    if isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1:
        raise ParameterError(f"n_shards must be a positive integer; got {n_shards!r}")
    analyzer = Analyzer() if analyzer is None else analyzer
    fields = check_fields(fields)
    with IndexWriter(path) as writer:
        spool = os.path.join(writer.tmp, _SPOOL)
        offsets, report, sources = _spool(archive, spool, format=format,
                                          skip_invalid=skip_invalid, progress=progress,
                                          reader_options=reader_options)
        n_docs = len(offsets) - 1
        bounds = [n_docs * s // n_shards for s in range(n_shards + 1)]
        parts = [s for s in range(n_shards) if bounds[s + 1] > bounds[s]]
        # after the reading, the shards' work on Ray: its steps named as they run
        bar = progress_bar(progress, "building shards", "steps", total=2 * len(parts))
        bar.set_postfix_str("starting Ray")
        ray = connect(address)
        bar.set_postfix_str("analysing")
        ranges = {s: (int(offsets[bounds[s]]), int(offsets[bounds[s + 1]])) for s in parts}
        logger.info("analysing %d questions in %d shards", n_docs, len(parts))
        analyse = remote(_analyse, num_returns=3)
        refs = {s: analyse.remote(spool, *ranges[s], analyzer.to_config(), fields)
                for s in parts}
        vocab, stats, mappings = Vocabulary(), {}, {}
        for s in parts:  # in shard order: term ids in order of first occurrence
            terms, local_stats = _get(ray, refs[s][:2], f"analysing shard {s}")
            bar.update()
            mapping = mappings[s] = np.asarray(vocab.add_many(terms), dtype=np.int64)
            for name, (n, df, tf, total) in local_stats.items():
                st = CollectionStats(n, _scatter(df, mapping), _scatter(tf, mapping), total)
                stats[name] = st if name not in stats else stats[name] + st
        n_terms = len(vocab)
        stats = {name: CollectionStats(st.n_docs, np.pad(st.df, (0, n_terms - len(st.df))),
                                       np.pad(st.term_freq, (0, n_terms - len(st.term_freq))),
                                       st.total_terms) for name, st in stats.items()}
        stats_ref = ray.put({name: (st.n_docs, st.df, st.term_freq, st.total_terms)
                             for name, st in stats.items()})
        terms_ref = ray.put(vocab.terms)
        stats_id = secrets.token_hex(8)
        write = remote(_write)
        bar.set_postfix_str("writing")
        written = _get(ray, [write.remote(
            refs[s][2], spool, *ranges[s], os.path.join(writer.tmp, shard_dir(s)), terms_ref,
            mappings[s], stats_ref, stats_id, analyzer.to_config(), sources)
            for s in parts], "writing the shards")
        bar.update(len(parts))
        bar.close()
        del refs
        os.unlink(spool)
        return _commit(writer, path, t0, analyzer, vocab, stats, stats_id, parts, bounds,
                       written, report, sources, n_shards)


def _commit(writer, path, t0, analyzer, vocab, stats, stats_id, parts, bounds, written,
            report, sources, n_shards) -> BuildSummary:
    """Write the files the shards share, register the shards' files, commit."""
    categories, category_counts, surface = {}, [], {}
    totals = {"n_answers": 0, "n_with_best_answer": 0, "n_duplicate_links": 0}
    shards = [{"dir": None, "n_docs": 0, "n_deleted": 0} for _ in range(n_shards)]
    for s, info in zip(parts, written):
        for name, count in zip(info["categories"], info["category_counts"]):
            cid = categories.setdefault(name, len(categories))
            if cid == len(category_counts):
                category_counts.append(0)
            category_counts[cid] += count
        surface.update(info["surface"])
        for key in totals:
            totals[key] += info["counts"][key]
        writer.add_index(shard_dir(s))
        shards[s] = {"dir": shard_dir(s), "n_docs": info["counts"]["n_docs"], "n_deleted": 0}
    writer.array("category_counts.npy", np.asarray(category_counts, dtype=np.int64))
    field_meta = write_globals(writer, vocab_terms=vocab.terms, categories=list(categories),
                               surface=surface, field_stats=stats)
    n_docs = bounds[-1]
    summary_stats = {"n_docs": n_docs, "n_rows": n_docs, "n_terms": len(vocab), **totals,
                     "n_categories": len(categories), "n_skipped": report.n_skipped,
                     "n_shards": n_shards, "fields": field_meta}
    writer.commit({"build_id": secrets.token_hex(8), "rows_id": secrets.token_hex(8),
                   "stats_id": stats_id, "analyzer": analyzer.to_config(),
                   "stats": summary_stats, "counters": {"added": 0, "deleted": 0},
                   "sources": list(sources), "models": {}, "shards": shards})
    return BuildSummary(
        path=os.fspath(path), n_questions=n_docs, n_answers=totals["n_answers"],
        n_categories=len(categories), n_terms=len(vocab), n_skipped=report.n_skipped,
        seconds=time.perf_counter() - t0,
        fields={name: {"nnz": int(np.sum(st.df)), "total_terms": st.total_terms}
                for name, st in stats.items()},
        skipped_examples=tuple(report.errors))
