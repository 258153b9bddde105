"""The files of one index generation: what each holds, how it is written and read back.

Paths are relative to the generation directory (see :mod:`cqa_search.index.store`)::

    manifest.json          format, analyzer config, fields (nnz, total terms, stored
                           weights), stats, sources, models, files (bytes + sha256)
    vocab.json             terms in term-id order (one vocabulary for every field)
    doc_ids.json           external question ids in row order
    categories.json        category names in category-id order (first seen at build)
    surface.json           surface word -> document frequency of its term ("did you mean")
    archive.jsonl          the questions, canonical JSONL, in row order
    archive_offsets.npy    int64 (n_docs + 1,): byte offset of each line of archive.jsonl
    doc_category.npy       int32 (n_docs,): category id of each row, -1 for none
    doc_id_rank.npy        int32 (n_docs,): rank of each row's doc id in sorted order
                           (ties of equal scores break by doc id)
    fields/<field>/indptr.npy    int64 (n_terms + 1,)  postings of term t:
    fields/<field>/indices.npy   int32 (nnz,)            indices[indptr[t]:indptr[t+1]]
    fields/<field>/counts.npy    int32 (nnz,)          term counts of those postings
    fields/<field>/doc_len.npy   int32 (n_docs,)       terms per document
    fields/<field>/sequence.npy  int32 (total_terms,)  every document's terms in order
    fields/question/bm25.npy     float32 (nnz,)        precomputed BM25 posting weights
    models/<name>/         model.json (kind, params, meta, array names) + <array>.npy

:func:`write_index` writes all but the models and the archive lines (streamed by the
builder); :func:`load_index` reads a generation back into an :class:`IndexData`, checking
every array (shape, bounds, offsets) and the statistics against the manifest.
"""
from __future__ import annotations

import difflib
import os
import secrets
from dataclasses import dataclass

import numpy as np

from ..analysis import Analyzer
from ..archive import Archive
from ..exceptions import ArchiveError, IndexFormatError, QueryError
from .store import StoredIndex
from .term_index import FieldIndex, TermIndex
from .validate import InvalidArray, check_array, check_offsets
from .vocab import Vocabulary

__all__ = ["Categories", "IndexData", "write_index", "load_index"]


class Categories:
    """The natural categories of an index, fixed when it is built.

    Category ids are positions in :attr:`names`, in the order the build first met each
    category; ``doc_category[row]`` is a row's category id (-1: none). Name lookups are
    case-insensitive.

    Examples
    --------
    >>> c = Categories(["Visas", "Cars"], np.array([0, 1, 1, -1], dtype=np.int32))
    >>> c.id("cars"), c.counts().tolist(), list(c)
    (1, [1, 2], ['Visas', 'Cars'])
    """

    def __init__(self, names, doc_category):
        self.names = tuple(names)
        self.doc_category = doc_category
        self._folded = {n.casefold(): i for i, n in reversed(list(enumerate(self.names)))}

    def __len__(self):
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __getitem__(self, i):
        return self.names[i]

    def __contains__(self, name):
        return name in self.names

    def index(self, name) -> int:
        """Id of an exact category name (ValueError when absent), like ``list.index``."""
        return self.names.index(name)

    def counts(self) -> np.ndarray:
        """Questions per category id."""
        doc_category = np.asarray(self.doc_category)
        return np.bincount(doc_category[doc_category >= 0], minlength=len(self.names))

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
        found = self._folded.get(name.strip().casefold())
        if found is not None:
            return found
        folded = list(self._folded)
        wanted = name.strip().casefold()
        words = wanted.split()
        # "Sightseeing" for "Sightseeing and Tourist attractions": a prefix, or every word
        close = [f for f in folded if f.startswith(wanted)
                 or all(any(w2.startswith(w) for w2 in f.split()) for w in words)][:3]
        close += [c for c in difflib.get_close_matches(wanted, folded, n=3, cutoff=0.5)
                  if c not in close][:3 - len(close)]
        hint = (f"; did you mean {' or '.join(repr(self.names[self._folded[c]]) for c in close)}?"
                if close else f" (categories: {', '.join(sorted(self.names)[:20])}"
                              + (", ..." if len(self.names) > 20 else "") + ")")
        raise QueryError(f"unknown category {name!r}{hint}")


@dataclass(frozen=True)
class IndexData:
    """Everything one generation stores except the models.

    Attributes
    ----------
    stored : StoredIndex
        The generation's files and manifest.
    analyzer : Analyzer
    index : TermIndex
    archive : Archive
        Lazy: questions are read from ``archive.jsonl`` on access.
    categories : Categories
    doc_id_rank : ndarray of int32, shape (n_docs,)
    """

    stored: StoredIndex
    analyzer: Analyzer
    index: TermIndex
    archive: Archive
    categories: Categories
    doc_id_rank: np.ndarray

    def surface_words(self) -> dict:
        """Surface word -> document frequency of its term (read on first use)."""
        return self.stored.json("surface.json")


def write_index(writer, index: TermIndex, *, analyzer, doc_ids, archive_offsets, categories,
                doc_category, surface, stats, sources, precomputed=(), extra=None) -> str:
    """Write every file but the archive lines (already written) and commit the generation.

    The manifest gets a new ``build_id``: models fitted on an earlier build of the index
    are not carried over (:func:`~cqa_search.index.models.add_model` refuses them).

    Parameters
    ----------
    writer : IndexWriter
    index : TermIndex
    analyzer : Analyzer
    doc_ids : list of str
    archive_offsets : ndarray of int64, shape (n_docs + 1,)
    categories : list of str
    doc_category : ndarray of int32, shape (n_docs,)
    surface : dict
        Surface word -> document frequency.
    stats : dict
        Counts for the manifest (``n_docs``, ``n_terms``, ...).
    sources : list of str
        Archive files the index was built from.
    precomputed : sequence of (field, TermModel)
        Term models whose posting weights are stored (e.g. BM25 on the questions: the
        hot path of search).
    extra : dict, optional
        More manifest entries (e.g. ``"shard"``: what a shard of a sharded index is).

    Returns
    -------
    str
        The new generation's name.
    """
    fields = {}
    for name, fi in index.fields.items():
        base = f"fields/{name}"
        for key in ("indptr", "indices", "counts", "doc_len", "sequence"):
            writer.array(f"{base}/{key}.npy", getattr(fi, key))
        fields[name] = {"nnz": fi.nnz, "total_terms": fi.total_terms, "weights": {}}
    for field_name, model in precomputed:
        rel = f"fields/{field_name}/{model.name}.npy"
        writer.array(rel, model.posting_weights(index[field_name]))
        fields[field_name]["weights"][model.cache_key()] = rel
    writer.json("vocab.json", index.vocab.terms)
    writer.json("doc_ids.json", doc_ids)
    writer.json("categories.json", list(categories))
    writer.json("surface.json", surface)
    writer.array("archive_offsets.npy", archive_offsets)
    writer.array("doc_category.npy", doc_category)
    order = np.array(sorted(range(len(doc_ids)), key=doc_ids.__getitem__), dtype=np.int64)
    rank = np.empty(len(doc_ids), dtype=np.int32)
    rank[order] = np.arange(len(doc_ids), dtype=np.int32)
    writer.array("doc_id_rank.npy", rank)
    return writer.commit({"build_id": secrets.token_hex(8), "analyzer": analyzer.to_config(),
                          "fields": fields, "stats": stats, "sources": list(sources),
                          "models": {}, **(extra or {})})


def _manifest_parts(stored):
    m = stored.manifest
    try:
        stats = m["stats"]
        n_docs, n_terms = int(stats["n_docs"]), int(stats["n_terms"])
        analyzer = Analyzer.from_config(m["analyzer"])
        field_meta = dict(m["fields"])
        for meta in field_meta.values():
            int(meta["nnz"]), int(meta["total_terms"]), dict(meta.get("weights", {}))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: bad manifest ({exc!r}); "
                               "rebuild it with `cqa-search build-index`") from None
    if n_docs < 1 or n_terms < 0 or "question" not in field_meta:
        raise IndexFormatError(f"corrupted index {stored.path}: bad manifest statistics; "
                               "rebuild it with `cqa-search build-index`")
    return n_docs, n_terms, analyzer, field_meta


def _strings(value, what, length, stored) -> list:
    stored.check(isinstance(value, list) and len(value) == length
                 and all(isinstance(v, str) for v in value),
                 f"{what} is not a list of {length} strings")
    return value


def _field(stored, name, meta, n_docs, n_terms) -> FieldIndex:
    base = f"fields/{name}"
    nnz, total = int(meta["nnz"]), int(meta["total_terms"])
    arrays = {key: stored.array(f"{base}/{key}.npy")
              for key in ("indptr", "indices", "counts", "doc_len", "sequence")}
    check_offsets(arrays["indptr"], f"{base}/indptr.npy", length=n_terms + 1, total=nnz)
    check_array(arrays["indices"], f"{base}/indices.npy", kind="iu", shape=(nnz,), low=0,
                high=n_docs - 1)
    check_array(arrays["counts"], f"{base}/counts.npy", kind="iu", shape=(nnz,), low=1)
    check_array(arrays["doc_len"], f"{base}/doc_len.npy", kind="iu", shape=(n_docs,), low=0)
    check_array(arrays["sequence"], f"{base}/sequence.npy", kind="iu", shape=(total,), low=0,
                high=max(n_terms - 1, 0))
    fi = FieldIndex(name, **arrays)
    stored.check(fi.total_terms == total, f"field {name} document lengths do not match the "
                                          "manifest")
    for key, rel in meta.get("weights", {}).items():
        weights = check_array(stored.array(rel), rel, kind="f", shape=(nnz,), finite=True)
        fi.store_weights(key, weights)
    return fi


def load_index(stored: StoredIndex) -> IndexData:
    """Read a generation's term index, archive and categories, checking them.

    Raises
    ------
    IndexFormatError
        A file is missing or unreadable, an array is malformed or out of range, or a
        statistic disagrees with the manifest.
    """
    n_docs, n_terms, analyzer, field_meta = _manifest_parts(stored)
    terms = _strings(stored.json("vocab.json"), "vocab.json", n_terms, stored)
    doc_ids = _strings(stored.json("doc_ids.json"), "doc_ids.json", n_docs, stored)
    names = stored.json("categories.json")
    stored.check(isinstance(names, list) and all(isinstance(n, str) for n in names),
                 "categories.json is not a list of strings")
    try:
        fields = {name: _field(stored, name, meta, n_docs, n_terms)
                  for name, meta in field_meta.items()}
        offsets = check_offsets(stored.array("archive_offsets.npy"), "archive_offsets.npy",
                                length=n_docs + 1,
                                total=os.path.getsize(stored.file("archive.jsonl")))
        doc_category = check_array(stored.array("doc_category.npy"), "doc_category.npy",
                                   kind="iu", shape=(n_docs,), low=-1, high=len(names) - 1)
        doc_id_rank = check_array(stored.array("doc_id_rank.npy"), "doc_id_rank.npy",
                                  kind="iu", shape=(n_docs,), low=0, high=n_docs - 1)
    except InvalidArray as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}; rebuild it with "
                               "`cqa-search build-index`") from None
    try:
        archive = Archive._lazy(stored.file("archive.jsonl"), offsets, doc_ids)
    except ArchiveError as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: {exc}") from None
    return IndexData(stored, analyzer, TermIndex(Vocabulary(terms), fields), archive,
                     Categories(names, doc_category), doc_id_rank)
