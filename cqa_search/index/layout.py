"""The files of one index generation: what each holds, how it is written and read back.

A generation holds one or more *segments* (a build writes one; each live addition of
questions writes one more; a compaction merges them into one), and the files every
segment shares. Paths are relative to the generation directory (see
:mod:`cqa_search.index.store`)::

    manifest.json          format, analyzer config, segments (rows, deleted rows, fields:
                           nnz, total terms, stored weights), stats, models, files
    vocab.json             terms in term-id order (one vocabulary for every field and
                           segment; append-only: a new segment's terms come after)
    categories.json        category names in category-id order (first seen)
    surface.json           surface word -> term id, the words of "did you mean"
    doc_id_rank.npy        int32 (n_rows,): rank of each row's doc id in sorted order
                           (ties of equal scores break by doc id)
    stats/<field>/df.npy         int64 (n_terms,)  documents holding each term } over the
    stats/<field>/term_freq.npy  int64 (n_terms,)  occurrences of each term    } live rows
    segments/<seg>/archive.jsonl        the questions, canonical JSONL, in row order
    segments/<seg>/archive_offsets.npy  int64 (n + 1,): byte offset of each line
    segments/<seg>/doc_ids.json         external question ids in row order
    segments/<seg>/doc_category.npy     int32 (n,): category id of each row, -1 for none
    segments/<seg>/deleted.npy          bool (n,): rows deleted since (tombstones), if any
    segments/<seg>/fields/<field>/indptr.npy    int64 (n_terms_seg + 1,)  postings of t:
    segments/<seg>/fields/<field>/indices.npy   int32 (nnz,)   indices[indptr[t]:indptr[t+1]]
    segments/<seg>/fields/<field>/counts.npy    int32 (nnz,)   term counts of those postings
    segments/<seg>/fields/<field>/doc_len.npy   int32 (n,)     terms per document
    segments/<seg>/fields/<field>/sequence.npy  int32 (total,) every document's terms in order
    segments/<seg>/fields/question/bm25.npy     float32 (nnz,) precomputed BM25 weights (a
                                                one-segment generation without deletions)
    models/<name>/         model.json (kind, params, meta, array names) + <array>.npy
    models/<name>/rows/<seg>/<array>.npy    the rows of a segment's questions, computed
                                            when they were added (a model's ``runs``)

A segment's rows follow those of the segments before it. In memory, the segments of a
generation are one index (:meth:`FieldIndex.concat`), scored with the stored statistics of
the live rows, so that scores equal those of a fresh build of the live archive; deleted
rows never match. :func:`load_index` reads a generation back into an :class:`IndexData`,
checking every array (shape, bounds, offsets) and the statistics against the manifest.

A *sharded* index is one generation whose shards are whole indexes of the layout above
(``shards/00000/``, ...); instead of segments, its top level holds what the shards share,
its statistics in ``stats/<field>/`` as above: :mod:`cqa_search.index.sharding`.
"""
from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

import numpy as np

from .._utils import close_names
from ..analysis import Analyzer
from ..archive import Archive
from ..exceptions import ArchiveError, IndexFormatError, QueryError, rebuild_hint
from ..retrieval.bm25 import BM25
from .store import StoredIndex
from .term_index import CollectionStats, FieldIndex, TermIndex
from .validate import INT32_MAX, InvalidArray, check_array, check_count, check_offsets
from .vocab import Vocabulary

__all__ = ["Categories", "IndexData", "IndexHead", "SegmentRows", "SegmentWriter",
           "write_globals", "write_weights", "read_head", "read_stats", "load_index",
           "segment_dir",
           "doc_id_ranks", "SortedIds", "FIELD_FILES", "STORED_WEIGHTS"]

#: The arrays of a field in a segment.
FIELD_FILES = ("indptr", "indices", "counts", "doc_len", "sequence")
#: The term models whose posting weights are stored beside the postings (read when the
#: index opens instead of computed): the first stage's default, BM25 on the question field.
#: They depend on the collection's statistics, so only a segment that is the whole live
#: collection stores them (a build, a compaction), and every shard of a sharded index stores
#: them computed from the global statistics.
STORED_WEIGHTS = (("question", BM25()),)


def segment_dir(name) -> str:
    return f"segments/{name}"


class Categories:
    """The natural categories of an index, fixed when it is built.

    Category ids are positions in :attr:`names`, in the order the build first met each
    category; ``doc_category[row]`` is a row's category id (-1: none). A category none of
    whose questions is live (all deleted) keeps its id but is unknown otherwise: it is not
    counted, listed (:meth:`present`) nor found by name. Name lookups are
    case-insensitive when the case does not matter (an exact name wins; two names that
    differ only in case must be given exactly).

    Parameters
    ----------
    names : sequence of str
    doc_category : ndarray of int32, shape (n_rows,)
    live : ndarray of bool, shape (n_rows,), optional
        False for the rows of deleted questions (None: every row is live).

    Examples
    --------
    >>> c = Categories(["Visas", "Cars", "Pets"], np.array([0, 1, 1, -1, 2], dtype=np.int32),
    ...                live=np.array([True, True, True, True, False]))
    >>> c.id("cars"), c.counts().tolist(), c.present()
    (1, [1, 2, 0], ['Visas', 'Cars'])
    >>> c
    Categories(3: Visas, Cars, Pets)
    >>> c.id("Pets")
    Traceback (most recent call last):
    ...
    cqa_search.exceptions.QueryError: unknown category 'Pets': its questions were all deleted
    """

    def __init__(self, names, doc_category, live=None):
        self.names = tuple(names)
        self.doc_category = doc_category
        self._live = live
        self._folded = {n.casefold() for n in self.names}
        self._live_counts = self._present = None

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        shown = list(self.names[:10]) + (["..."] if len(self.names) > 10 else [])
        return f"Categories({len(self.names)}: {', '.join(shown)})"

    def __iter__(self):
        return iter(self.names)

    def __getitem__(self, i):
        return self.names[i]

    def __contains__(self, name):
        return name in self.names

    def index(self, name) -> int:
        """Id of an exact category name (ValueError when absent), like ``list.index``."""
        return self.names.index(name)

    def counts(self, live=None) -> np.ndarray:
        """Questions per category id, deleted ones left out; with ``live`` (bool per row),
        of those rows only."""
        if live is None:
            if self._live_counts is None:  # (read at every search with a category)
                self._live_counts = self._counted(self._live)
            return self._live_counts
        return self._counted(live)

    def _counted(self, live) -> np.ndarray:
        doc_category = np.asarray(self.doc_category)
        if live is not None:
            doc_category = doc_category[np.asarray(live, dtype=bool)]
        return np.bincount(doc_category[doc_category >= 0], minlength=len(self.names))

    def present(self) -> list:
        """The names of the categories that have questions, in id order."""
        return list(self._lookup()[0])

    def id(self, name) -> int | None:
        """Id of a category name (case-insensitive); None for None.

        Raises
        ------
        QueryError
            Unknown name, with the closest names suggested.
        """
        if name is None:
            return None
        if not isinstance(name, str) or not name.strip():
            raise QueryError(f"category must be a non-empty string; got {name!r}")
        if not self.names:
            raise QueryError("this index has no categories, so it cannot filter by category")
        key = name.strip()
        exact, folded = self._lookup()
        found = exact.get(key)
        if found is not None:
            return found
        twins = folded.get(key.casefold(), ())
        if len(twins) > 1:
            raise QueryError(f"category {name!r} is ambiguous: the index has "
                             f"{' and '.join(repr(self.names[i]) for i in twins)}; give one "
                             "exactly")
        if twins:
            return twins[0]
        if key.casefold() in self._folded:
            raise QueryError(f"unknown category {name!r}: its questions were all deleted")
        if not exact:
            raise QueryError("no question of this index has a category now, so it cannot "
                             "filter by category")
        close = close_names(key, [self.names[ids[0]] for ids in folded.values()])
        hint = (f"; did you mean {' or '.join(map(repr, close))}?"
                if close else f" (categories: {', '.join(sorted(exact)[:20])}"
                              + (", ..." if len(exact) > 20 else "") + ")")
        raise QueryError(f"unknown category {name!r}{hint}")

    def _lookup(self):
        """``(name -> id, folded name -> ids)`` of the categories that have questions."""
        if self._present is None:
            exact = {n: i for i, n in enumerate(self.names) if self.counts()[i]}
            folded = {}
            for n, i in exact.items():
                folded.setdefault(n.casefold(), []).append(i)
            self._present = exact, folded
        return self._present


@dataclass(frozen=True)
class IndexData:
    """Everything one generation stores except the models.

    Attributes
    ----------
    stored : StoredIndex
        The generation's files and manifest.
    analyzer : Analyzer
    index : TermIndex
        Its segments as one index, scored with the statistics of the live rows.
    archive : Archive
        Lazy: questions are read from the segments' ``archive.jsonl`` on access.
    categories : Categories
    doc_id_rank : ndarray of int32, shape (n_rows,)
    live : ndarray of bool, shape (n_rows,), or None
        False for the rows of deleted questions; None when none was deleted.
    cache : dict
        What is derived from these files when first needed (e.g. the questions' tags
        and dates, :func:`~cqa_search.index.attributes.attributes_of`).
    """

    stored: StoredIndex
    analyzer: Analyzer
    index: TermIndex
    archive: Archive
    categories: Categories
    doc_id_rank: np.ndarray
    live: np.ndarray | None = None
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_questions(self) -> int:
        """Questions searched (rows less deleted ones)."""
        n = self.index.n_docs
        return n if self.live is None else int(self.live.sum())

    def surface_words(self) -> dict:
        """Surface word -> document frequency of its term over the fields (the candidates
        of "did you mean"; read on first use)."""
        words = self.stored.json("surface.json")
        self.stored.check(isinstance(words, dict), "surface.json is not a mapping")
        df = sum(np.asarray(f.stats.df, dtype=np.int64) for f in self.index.fields.values())
        n = len(df)
        # (a server reads this at every new generation: one pass in numpy, not a lookup per word)
        ids = np.fromiter((t if type(t) is int and 0 <= t < n else n for t in words.values()),
                          dtype=np.int64, count=len(words))
        counts = np.append(df, 0)[ids].tolist()
        return {w: c for w, c in zip(words, counts) if c > 0}


def doc_id_ranks(doc_ids) -> np.ndarray:
    """int32 rank of each row's doc id in sorted order (equal ids: in row order)."""
    order = np.array(sorted(range(len(doc_ids)), key=doc_ids.__getitem__), dtype=np.int64)
    rank = np.empty(len(doc_ids), dtype=np.int32)
    rank[order] = np.arange(len(doc_ids), dtype=np.int32)
    return rank


class SortedIds:
    """Rows in the sorted order of their doc ids (from ``doc_id_rank.npy``): ids found by
    binary search, without a mapping of every id (what a live change needs).

    Examples
    --------
    >>> ids = SortedIds(["b", "d", "b"], doc_id_ranks(["b", "d", "b"]))
    >>> ids.rows("b"), ids.rows("c")
    ([0, 2], [])
    >>> ids.extended_ranks(["c", "a", "d"]).tolist()   # doc_id_ranks of all six ids
    [1, 4, 2, 3, 0, 5]
    """

    def __init__(self, doc_ids, ranks):
        self.doc_ids = doc_ids
        ranks = np.asarray(ranks, dtype=np.int64)
        order = np.empty(len(ranks), dtype=np.int64)
        order[ranks] = np.arange(len(ranks))
        self.ranks, self.order = ranks, order.tolist()

    def rows(self, doc_id) -> list:
        """The rows of ``doc_id``, in row order."""
        key = self.doc_ids.__getitem__
        lo = bisect_left(self.order, doc_id, key=key)
        return self.order[lo:bisect_right(self.order, doc_id, lo=lo, key=key)]

    def extended_ranks(self, new_ids) -> np.ndarray:
        """``doc_id_ranks(doc_ids + new_ids)``: the new ids placed among the old ones."""
        old = self.ranks
        new_order = sorted(range(len(new_ids)), key=new_ids.__getitem__)
        # where each new id goes among the old ones (after equal ids: rows keep their order)
        at = np.array([bisect_right(self.order, new_ids[j], key=self.doc_ids.__getitem__)
                       for j in new_order], dtype=np.int64)
        rank = np.empty(len(old) + len(new_ids), dtype=np.int32)
        rank[:len(old)] = old + np.searchsorted(at, old, side="right")
        rank[len(old) + np.asarray(new_order, dtype=np.int64)] = at + np.arange(len(new_ids))
        return rank


class SegmentRows:
    """What a segment records of each question written into it: its archive line's
    offset, id and category id, counts for the statistics, and its terms (``builder``, a
    :class:`~cqa_search.index.term_index.TermIndexBuilder`).

    Parameters
    ----------
    builder : TermIndexBuilder
    categories : dict, optional
        Category name -> id of the index the segment joins (new names get the next ids;
        the dict is extended in place). A new index by default.
    """

    def __init__(self, builder, categories=None):
        self.builder = builder
        self.categories = {} if categories is None else categories
        self.doc_ids = []
        self._offsets, self._category = array("q", [0]), array("i")
        self.counts = {"n_answers": 0, "n_with_best_answer": 0, "n_duplicate_links": 0}

    def __len__(self):
        return len(self.doc_ids)

    def add(self, question, line: bytes) -> None:
        """Record ``question``, whose archive line (canonical JSONL) is ``line``."""
        self._offsets.append(self._offsets[-1] + len(line))
        self.doc_ids.append(question.id)
        category = question.category
        self._category.append(-1 if category is None
                              else self.categories.setdefault(category, len(self.categories)))
        self.counts["n_answers"] += len(question.answers)
        self.counts["n_with_best_answer"] += question.best_answer is not None
        self.counts["n_duplicate_links"] += len(question.duplicate_of)
        self.builder.add(question)

    @property
    def archive_offsets(self) -> np.ndarray:
        """int64 (n + 1,): byte offset of each archive line."""
        return np.frombuffer(self._offsets, dtype=np.int64)

    @property
    def doc_category(self) -> np.ndarray:
        """int32 (n,): category id of each row, -1 for none."""
        return np.frombuffer(self._category, dtype=np.int32)


class SegmentWriter:
    """Writes one segment of a generation (its archive lines, ids, categories, postings).

    Parameters
    ----------
    writer : IndexWriter
    name : str
        E.g. ``"seg-000001"``.
    """

    def __init__(self, writer, name):
        self.writer, self.name = writer, name
        self.base = segment_dir(name)

    def archive(self):
        """The segment's ``archive.jsonl``, open for writing (binary, hashed)."""
        return self.writer.open(f"{self.base}/archive.jsonl", "wb")

    def write_questions(self, questions, rows: SegmentRows) -> SegmentRows:
        """Write ``questions`` (checked already) as the segment's archive lines, each
        recorded in ``rows``; returns ``rows``."""
        with self.archive() as out:
            for question in questions:
                line = question.to_json_bytes() + b"\n"
                out.write(line)
                rows.add(question, line)
        return rows

    def finish(self, index: TermIndex, *, doc_ids, archive_offsets, doc_category,
               deleted=None, store_weights=False) -> dict:
        """Write everything but the archive lines; returns the segment's manifest entry.

        ``store_weights``: store the posting weights of :data:`STORED_WEIGHTS` (only for
        a segment that is the whole live collection: they depend on its statistics).
        """
        w, base = self.writer, self.base
        fields = {}
        for name, fi in index.fields.items():
            for key in FIELD_FILES:
                w.array(f"{base}/fields/{name}/{key}.npy", getattr(fi, key))
            fields[name] = {"nnz": fi.nnz, "total_terms": fi.total_terms, "n_terms": fi.n_terms,
                            "weights": {}}
        if store_weights:
            for name, weights in write_weights(w, index.fields, f"{base}/").items():
                fields[name]["weights"].update(weights)
        w.json(f"{base}/doc_ids.json", list(doc_ids))
        w.array(f"{base}/archive_offsets.npy", np.asarray(archive_offsets, dtype=np.int64))
        w.array(f"{base}/doc_category.npy", np.asarray(doc_category, dtype=np.int32))
        n_deleted = 0
        if deleted is not None and deleted.any():
            w.array(f"{base}/deleted.npy", np.asarray(deleted, dtype=bool))
            n_deleted = int(deleted.sum())
        return {"name": self.name, "n_docs": len(doc_ids), "n_deleted": n_deleted,
                "fields": fields}


def write_weights(writer, fields, prefix, suffix="") -> dict:
    """Write the posting weights of :data:`STORED_WEIGHTS` for ``fields`` (name ->
    FieldIndex, with the statistics they are scored with) as
    ``{prefix}fields/<field>/<model><suffix>.npy``; returns field -> {model cache key: path}
    (what a reader registers with :meth:`FieldIndex.store_weights`)."""
    out = {}
    for field_name, model in STORED_WEIGHTS:
        if all(f in fields for f in model.index_fields):
            rel = f"{prefix}fields/{field_name}/{model.name}{suffix}.npy"
            writer.array(rel, model.posting_weights(model.field_index(fields)))
            out.setdefault(field_name, {})[model.cache_key()] = rel
    return out


def write_globals(writer, *, field_stats, vocab_terms=None, categories=None, surface=None,
                  doc_ids=None, doc_id_rank=None) -> dict:
    """Write the files a generation's segments share; returns the manifest's ``stats``
    entries of the fields (``field_stats``: name -> CollectionStats of the live rows).

    A part given as None is not written (a live change keeps the live generation's file);
    the doc-id ranks are ``doc_id_rank``, else computed from ``doc_ids``.
    """
    if vocab_terms is not None:
        writer.json("vocab.json", list(vocab_terms))
    if categories is not None:
        writer.json("categories.json", list(categories))
    if surface is not None:
        writer.json("surface.json", surface)
    if doc_id_rank is None and doc_ids is not None:
        doc_id_rank = doc_id_ranks(doc_ids)
    if doc_id_rank is not None:
        writer.array("doc_id_rank.npy", doc_id_rank)
    out = {}
    for name, stats in field_stats.items():
        writer.array(f"stats/{name}/df.npy", np.asarray(stats.df, dtype=np.int64))
        writer.array(f"stats/{name}/term_freq.npy", np.asarray(stats.term_freq, dtype=np.int64))
        out[name] = {"n_docs": stats.n_docs, "total_terms": stats.total_terms}
    return out


def _totals(stored):
    """``(n_rows, n_terms, {field: (n_docs, total_terms)})`` of a generation's manifest
    (rows and terms are int32 in the arrays, the other counts int64)."""
    try:
        stats = stored.manifest["stats"]
        n_rows = check_count(stats["n_rows"], "n_rows", high=INT32_MAX)
        n_terms = check_count(stats["n_terms"], "n_terms", high=INT32_MAX)
        field_stats = {name: (check_count(v["n_docs"], f"{name} n_docs", high=n_rows),
                              check_count(v["total_terms"], f"{name} total_terms"))
                       for name, v in dict(stats["fields"]).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: bad manifest ({exc!r}); "
                               f"{rebuild_hint()}") from None
    stored.check(n_rows >= 1 and "question" in field_stats, "bad manifest statistics")
    return n_rows, n_terms, field_stats


def read_stats(stored) -> dict:
    """Each field's collection statistics of a generation (``stats/<field>/`` and the
    manifest's totals), checked: field -> CollectionStats. A sharded index stores those
    of the whole collection at its top level, as an unsharded one does.

    Raises
    ------
    IndexFormatError
        A file is missing, unreadable or disagrees with the manifest.
    """
    _, n_terms, field_stats = _totals(stored)
    try:
        return {name: _stats(stored, name, n_docs, total, n_terms)
                for name, (n_docs, total) in field_stats.items()}
    except InvalidArray as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}; {rebuild_hint()}") from None


def _manifest_parts(stored):
    m = stored.manifest
    n_rows, n_terms, field_stats = _totals(stored)
    try:
        analyzer = Analyzer.from_config(m["analyzer"])
        segments = list(m["segments"])
        for seg in segments:
            str(seg["name"])
            check_count(seg["n_docs"], "segment n_docs", high=n_rows)
            check_count(seg["n_deleted"], "segment n_deleted", high=seg["n_docs"])
            for meta in dict(seg["fields"]).values():
                check_count(meta["nnz"], "segment nnz")
                check_count(meta["total_terms"], "segment total_terms")
                check_count(meta["n_terms"], "segment n_terms", high=n_terms)
                if not all(type(rel) is str and rel in m["files"]
                           for rel in dict(meta.get("weights", {})).values()):
                    raise ValueError("segment weights name no stored file")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: bad manifest ({exc!r}); "
                               f"{rebuild_hint()}") from None
    stored.check(n_rows >= 1 and n_terms >= 0 and "question" in field_stats and segments
                 and sum(int(s["n_docs"]) for s in segments) == n_rows
                 and all(set(s["fields"]) == set(field_stats) for s in segments)
                 and all(".." not in str(s["name"]) and "/" not in str(s["name"])
                         for s in segments),
                 "bad manifest statistics")
    return n_rows, n_terms, analyzer, field_stats, segments


def _strings(value, what, length, stored) -> list:
    stored.check(isinstance(value, list) and len(value) == length
                 and set(map(type, value)) <= {str},
                 f"{what} is not a list of {length} strings")
    return value


def _field(stored, base, name, meta, n_docs, n_terms) -> FieldIndex:
    nnz, total, seg_terms = int(meta["nnz"]), int(meta["total_terms"]), int(meta["n_terms"])
    stored.check(0 <= seg_terms <= n_terms, f"{base}: field {name} has more terms than the "
                                            "vocabulary")
    arrays = {key: stored.array(f"{base}/fields/{name}/{key}.npy") for key in FIELD_FILES}
    where = f"{base}/fields/{name}"
    check_offsets(arrays["indptr"], f"{where}/indptr.npy", length=seg_terms + 1, total=nnz)
    check_array(arrays["indices"], f"{where}/indices.npy", kind="iu", shape=(nnz,), low=0,
                high=n_docs - 1)
    check_array(arrays["counts"], f"{where}/counts.npy", kind="iu", shape=(nnz,), low=1)
    check_array(arrays["doc_len"], f"{where}/doc_len.npy", kind="iu", shape=(n_docs,), low=0)
    check_array(arrays["sequence"], f"{where}/sequence.npy", kind="iu", shape=(total,), low=0,
                high=max(seg_terms - 1, 0))
    fi = FieldIndex(name, **arrays)
    stored.check(fi.total_terms == total, f"field {name} document lengths do not match the "
                                          "manifest")
    return fi


def _stats(stored, name, n_docs, total_terms, n_terms) -> CollectionStats:
    df = check_array(stored.array(f"stats/{name}/df.npy"), f"stats/{name}/df.npy", kind="iu",
                     shape=(n_terms,), low=0, high=n_docs)
    tf = check_array(stored.array(f"stats/{name}/term_freq.npy"),
                     f"stats/{name}/term_freq.npy", kind="iu", shape=(n_terms,), low=0)
    return CollectionStats(n_docs, df, tf, total_terms)


@dataclass
class IndexHead:
    """What a generation stores besides its postings and questions: enough to change it
    (add or delete questions) without reading the postings.

    Attributes
    ----------
    stored : StoredIndex
    analyzer : Analyzer
    terms : list of str
        The vocabulary, in term-id order.
    categories : list of str
    segments : list of dict
        The manifest's segment entries.
    doc_ids : list of str
        Every row's question id (deleted rows included).
    deleted : ndarray of bool, shape (n_rows,)
    stats : dict of str to CollectionStats
        Each field's statistics over the live rows.
    """

    stored: StoredIndex
    analyzer: Analyzer
    terms: list
    categories: list
    segments: list
    doc_ids: list
    deleted: np.ndarray
    stats: dict

    def doc_id_rank(self) -> np.ndarray:
        """``doc_id_rank.npy``, checked (IndexFormatError when it is not sound)."""
        n_rows = len(self.doc_ids)
        try:
            return check_array(self.stored.array("doc_id_rank.npy"), "doc_id_rank.npy",
                               kind="iu", shape=(n_rows,), low=0, high=n_rows - 1)
        except InvalidArray as exc:
            raise IndexFormatError(f"corrupted index {self.stored.path}: {exc}; "
                                   f"{rebuild_hint()}") from None

    def category_counts(self) -> np.ndarray:
        """Live questions per category id (:meth:`Categories.counts`), from the segments'
        ``doc_category.npy``."""
        try:
            doc_category = np.concatenate([
                check_array(self.stored.array(f"{segment_dir(s['name'])}/doc_category.npy"),
                            f"{segment_dir(s['name'])}/doc_category.npy", kind="iu",
                            shape=(int(s["n_docs"]),), low=-1, high=len(self.categories) - 1)
                for s in self.segments])
        except InvalidArray as exc:
            raise IndexFormatError(f"corrupted index {self.stored.path}: {exc}; "
                                   f"{rebuild_hint()}") from None
        return Categories(self.categories, doc_category, ~self.deleted).counts()

    def segment_field(self, k, name) -> FieldIndex:
        """Field ``name`` of segment ``k`` alone (its own rows from 0)."""
        seg = self.segments[k]
        return _field(self.stored, segment_dir(seg["name"]), name, seg["fields"][name],
                      int(seg["n_docs"]), len(self.terms))


def read_head(stored: StoredIndex) -> IndexHead:
    """A generation's :class:`IndexHead` (checked like :func:`load_index` checks it).

    Raises
    ------
    IndexFormatError
        A file is missing, unreadable or disagrees with the manifest.
    """
    n_rows, n_terms, analyzer, field_stats, segments = _manifest_parts(stored)
    terms = _strings(stored.json("vocab.json"), "vocab.json", n_terms, stored)
    names = stored.json("categories.json")
    stored.check(isinstance(names, list) and all(isinstance(n, str) for n in names),
                 "categories.json is not a list of strings")
    doc_ids, deleted = [], []
    try:
        for seg in segments:
            base, n = segment_dir(seg["name"]), int(seg["n_docs"])
            doc_ids += _strings(stored.json(f"{base}/doc_ids.json"), f"{base}/doc_ids.json",
                                n, stored)
            if int(seg["n_deleted"]):
                mask = check_array(stored.array(f"{base}/deleted.npy"), f"{base}/deleted.npy",
                                   kind="b", shape=(n,))
                stored.check(int(mask.sum()) == int(seg["n_deleted"]),
                             f"{base}/deleted.npy does not match the manifest")
            else:
                mask = np.zeros(n, dtype=bool)
            deleted.append(mask)
        deleted = np.concatenate(deleted)
    except InvalidArray as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}; {rebuild_hint()}") from None
    n_live = n_rows - int(deleted.sum())
    for name, (n_docs, total) in field_stats.items():
        stored.check(n_docs == n_live, f"field {name} counts {n_docs} questions, the "
                                       f"segments {n_live}")
    stats = read_stats(stored)
    return IndexHead(stored, analyzer, terms, names, segments, doc_ids, deleted, stats)


def load_index(stored: StoredIndex) -> IndexData:
    """Read a generation's term index, archive and categories, checking them.

    Raises
    ------
    IndexFormatError
        A file is missing or unreadable, an array is malformed or out of range, or a
        statistic disagrees with the manifest.
    """
    head = read_head(stored)
    n_terms, names = len(head.terms), head.categories
    parts, fields, categories = [], {name: [] for name in head.stats}, []
    start = 0
    try:
        for k, seg in enumerate(head.segments):
            base, n = segment_dir(seg["name"]), int(seg["n_docs"])
            offsets = check_offsets(stored.array(f"{base}/archive_offsets.npy"),
                                    f"{base}/archive_offsets.npy", length=n + 1,
                                    total=os.path.getsize(stored.file(f"{base}/archive.jsonl")))
            parts.append((stored.file(f"{base}/archive.jsonl"), offsets,
                          head.doc_ids[start:start + n]))
            start += n
            categories.append(check_array(stored.array(f"{base}/doc_category.npy"),
                                          f"{base}/doc_category.npy", kind="iu", shape=(n,),
                                          low=-1, high=len(names) - 1))
            for name in head.stats:
                fields[name].append((head.segment_field(k, name), seg["fields"][name]))
        doc_id_rank = head.doc_id_rank()
        deleted = head.deleted
        index_fields = {}
        for name, segs in fields.items():
            merged = FieldIndex.concat([fi for fi, _ in segs], n_terms).with_stats(
                head.stats[name])
            if len(segs) == 1 and not deleted.any():
                for key, rel in segs[0][1].get("weights", {}).items():
                    merged.store_weights(key, check_array(stored.array(rel), rel, kind="f",
                                                          shape=(merged.nnz,), finite=True))
            index_fields[name] = merged
    except InvalidArray as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}; {rebuild_hint()}") from None
    live = None if not deleted.any() else ~deleted
    try:
        archive = Archive._lazy(parts, live)
    except ArchiveError as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}") from None
    doc_category = categories[0] if len(categories) == 1 else np.concatenate(categories)
    return IndexData(stored, head.analyzer, TermIndex(Vocabulary(head.terms), index_fields),
                     archive, Categories(names, doc_category, live), doc_id_rank, live)
