"""A sharded index: a generation whose shards are whole indexes, and what they share.

The top-level generation of a sharded index (built by :mod:`cqa_search.distributed.build`)
holds what every shard scores with, in the files an unsharded generation has
(:mod:`.layout`), and its shards::

    manifest.json          "shards": [{dir, n_docs, n_deleted}, ...] (rows of each shard,
                           deleted ones included; the rows of the index are the shards'
                           rows one after the other), "stats" (the whole collection's, as
                           unsharded), "stats_id" (changes whenever they change), models
    vocab.json  categories.json  surface.json       the whole archive's
    category_counts.npy    int64 (n_categories,): live questions per category
    stats/<field>/{df,term_freq}.npy                the collection statistics of every
                                                    shard's live questions
    models/<name>/         every stored model (see below)
    shards/00000/ ...      each shard a whole index directory of the layout of
                           :mod:`.layout` (its own CURRENT and generation)

A shard's term ids are those of the one vocabulary (its ``vocab.json`` is a prefix of it:
a shard knows the terms up to its last change); its category ids are its own (the
categories are matched by name); its generation stores, beside its own statistics (a
shard opened alone is an index of its part), the posting weights of the global
statistics, ``fields/question/bm25.global.npy``, named in its manifest's ``"shard"``
entry with the ``stats_id`` they were computed from (after a live change of the
statistics they are computed again when a shard opens, as an unsharded index computes
its weights after a live change).

Models: the top level stores every model (``models/<name>/``), but a model with a row per
question (its ``row_arrays``, :mod:`.models`) without its rows; each shard stores that model
whole, with its own rows (:func:`rows_of`), in its generation's ``models/<name>/``: the
arrays the shards share are hard links of the top level's files (one copy on disk and in
the page cache), the rows its own. A shard opened alone is an index of its part with these
models; a live change or a compaction of a shard carries its rows as it does for any
index. Writing a sharded index is :mod:`cqa_search.index.sharded_writer`.

:func:`load_shard` reads a shard as one part of the whole: its postings with the global
vocabulary and statistics; :func:`shard_models` its models; :func:`sharded_data` the
whole archive over the shards, read in this process (what the model fits read).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..analysis import Analyzer
from ..archive import Archive
from ..exceptions import IndexFormatError, ParameterError, rebuild_hint
from .layout import Categories, IndexData, doc_id_ranks, load_index, read_stats
from .model_files import load_models, row_arrays
from .store import open_index
from .term_index import FieldIndex, TermIndex
from .validate import InvalidArray, check_array, check_count
from .vocab import Vocabulary

__all__ = ["read_shards", "load_shard", "shard_models", "shard_dir", "is_sharded",
           "sharded_data", "as_part", "rows_of", "per_question"]


def shard_dir(s) -> str:
    """Directory of shard ``s``, relative to a generation of the sharded index."""
    return f"shards/{s:05d}"


def is_sharded(stored) -> bool:
    """Whether a generation is a sharded index's top level."""
    return "shards" in stored.manifest


def read_shards(stored) -> list:
    """The shard entries of a sharded index's manifest, checked: ``{"dir", "n_docs",
    "n_deleted"}`` per shard (``dir`` None for a shard without questions).

    Raises
    ------
    IndexFormatError
        A malformed shard list.
    """
    try:
        shards = []
        for s, entry in enumerate(stored.manifest["shards"]):
            n = check_count(entry["n_docs"], "shard n_docs")
            deleted = check_count(entry.get("n_deleted", 0), "shard n_deleted", high=n)
            directory = entry["dir"]
            if not (directory is None and n == 0 or directory == shard_dir(s)):
                raise ValueError(f"shard {s} has directory {directory!r}")
            shards.append({"dir": directory, "n_docs": n, "n_deleted": deleted})
        n_rows = sum(s["n_docs"] for s in shards)
        n_live = n_rows - sum(s["n_deleted"] for s in shards)
        consistent = (shards and n_rows == int(stored.manifest["stats"]["n_rows"])
                      and n_live == int(stored.manifest["stats"]["n_docs"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: bad shard list ({exc!r}); "
                               f"{rebuild_hint()}") from None
    stored.check(consistent, "its shards do not hold the questions its manifest counts")
    return shards


def _padded(field: FieldIndex, n_terms) -> FieldIndex:
    """``field`` over a vocabulary of ``n_terms`` (terms beyond its own have no postings)."""
    if field.n_terms == n_terms:
        return field
    indptr = np.concatenate([field.indptr, np.full(n_terms - field.n_terms, field.indptr[-1],
                                                   dtype=np.int64)])
    return FieldIndex(field.name, indptr, field.indices, field.counts, field.doc_len,
                      field.sequence)


def load_shard(top, s, *, stats=None, vocab=None):
    """Shard ``s`` of the sharded index whose top-level generation is ``top``, as one part
    of the whole (:func:`as_part`; ``stats``, ``vocab``: those of ``top``, when read
    already).

    Raises
    ------
    IndexFormatError
        A shard without questions, or one that does not match the top level.
    """
    entry = read_shards(top)[s]
    if entry["dir"] is None:
        raise IndexFormatError(f"shard {s} of {top.path} has no questions")
    data = load_index(open_index(os.path.join(top.root, entry["dir"]), mmap=top.mmap))
    top.check(data.index.n_docs == entry["n_docs"], f"shard {s} does not match the top level")
    return as_part(data, top, stats=stats, vocab=vocab)


def as_part(data, top, *, stats=None, vocab=None):
    """A shard's :class:`~.layout.IndexData` as one part of the sharded index ``top``: its
    rows with the global vocabulary and statistics, and the posting weights it stores for
    them when they are current (computed when first needed otherwise)."""
    stats = read_stats(top) if stats is None else stats
    vocab = Vocabulary(top.json("vocab.json")) if vocab is None else vocab
    n_terms = len(vocab)
    info = data.stored.manifest.get("shard", {})
    top.check(set(stats) == set(data.index.fields) and len(data.index.vocab) <= n_terms
              and isinstance(info, dict), f"shard {data.stored.path} does not match the top "
                                          "level")
    current = info.get("stats_id") == top.manifest.get("stats_id")
    fields = {}
    try:
        for name, fi in data.index.fields.items():
            fields[name] = fi = _padded(fi, n_terms).with_stats(stats[name])
            for key, rel in (info.get("weights", {}).get(name, {}).items() if current else ()):
                fi.store_weights(key, check_array(data.stored.array(rel), rel, kind="f",
                                                  shape=(fi.nnz,), finite=True))
    except InvalidArray as exc:
        raise IndexFormatError(f"corrupted index {data.stored.path}: {exc}; "
                               f"{rebuild_hint()}") from None
    return dataclasses.replace(data, index=TermIndex(vocab, fields))


def shard_models(top, s) -> dict:
    """The models of shard ``s`` (None: every model's shared part, with no rows: what the
    driver of a sharded search holds)."""
    models = load_models(top)
    entry = None if s is None else read_shards(top)[s]
    if entry is not None and entry["dir"] is not None:
        shard = open_index(os.path.join(top.root, entry["dir"]), mmap=top.mmap)
        models.update((name, model) for name, model in load_models(shard).items()
                      if name in models)
    return models


def sharded_data(top) -> IndexData:
    """The whole archive of a sharded index as one :class:`~.layout.IndexData`, read in
    this process from the shards' files (their rows one after the other, the global
    vocabulary, statistics and category ids): what a model fit reads, equal to the data
    of one unsharded index of the same archive."""
    stats, vocab = read_stats(top), Vocabulary(top.json("vocab.json"))
    names = top.json("categories.json")
    top.check(isinstance(names, list), "categories.json is not a list")
    ids = {name: i for i, name in enumerate(names)}
    parts = [load_shard(top, s, stats=stats, vocab=vocab)
             for s, entry in enumerate(read_shards(top)) if entry["dir"] is not None]
    fields = {name: FieldIndex.concat([p.index[name] for p in parts], len(vocab))
              .with_stats(stats[name]) for name in stats}
    doc_category = []
    for part in parts:
        own = np.asarray(part.categories.doc_category)
        top.check(all(n in ids for n in part.categories.names),
                  "a shard has a category the top level lacks")
        mapping = np.array([ids[n] for n in part.categories.names] + [-1], dtype=np.int32)
        doc_category.append(mapping[own])  # -1 (no category) -> the last entry: -1
    archive = Archive._concat(p.archive for p in parts)
    live = None if all(p.live is None for p in parts) else np.concatenate(
        [np.ones(p.index.n_docs, dtype=bool) if p.live is None else p.live for p in parts])
    try:
        analyzer = Analyzer.from_config(top.manifest["analyzer"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexFormatError(f"corrupted index {top.path}: bad analyzer ({exc!r}); "
                               f"{rebuild_hint()}") from None
    return IndexData(top, analyzer, TermIndex(vocab, fields), archive,
                     Categories(names, np.concatenate(doc_category), live),
                     doc_id_ranks(archive.doc_ids), live)


# ---------------------------------------------------------------------------------------
# The rows of a model with a row per question
# ---------------------------------------------------------------------------------------
def per_question(model, name) -> tuple:
    """The row arrays of a model with a row per question (ParameterError when it has rows
    but does not name them); () for the others."""
    if not hasattr(model, "select_rows"):
        return ()
    rows = row_arrays(model)
    if not rows:
        raise ParameterError(f"model {name!r} ({model.kind}) has a row per question but does "
                             "not name the arrays that hold them (row_arrays): a sharded "
                             "index cannot split it")
    return rows


def rows_of(model, start, stop, state=None) -> tuple:
    """The state ``(meta, arrays)`` of a model with a row per question holding only its
    rows ``start`` to ``stop - 1`` (what the shard of those rows stores): its row arrays
    sliced, or its own ``rows_state(start, stop)`` when they are not plain slices
    (``state``: ``model.state()``, when made already)."""
    if hasattr(model, "rows_state"):
        return model.rows_state(start, stop)
    meta, arrays = model.state() if state is None else state
    rows = row_arrays(model)
    return meta, {k: arrays[k][start:stop] if k in rows else v for k, v in arrays.items()}
