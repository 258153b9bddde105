"""The title and the body of every question as index fields, with or without a rebuild.

Per-field features compare a query's title with a question's title and its body with the
body. An index built with ``--fields question,answers,title,body`` has these fields; one
built with the default fields does not, and a model that needs them analyses the
archive's titles and bodies at fit time (:func:`analyse_parts`) and stores them as its own
per-question rows: :class:`~cqa_search.index.term_index.FieldIndex` arrays over the
index's vocabulary, extended with the questions added since (analysed when an engine
opens the index) and carried over by a compaction (:meth:`FieldIndex.select`).
"""
from __future__ import annotations

import numpy as np

from ..index.term_index import FieldIndex, TermIndexBuilder
from ..index.vocab import Vocabulary

__all__ = ["PARTS", "analyse_parts", "field_arrays", "field_from_arrays", "extend_field"]

#: The parts of a question compared field by field.
PARTS = ("title", "body")
_ARRAYS = ("indptr", "indices", "counts", "doc_len", "sequence")


def analyse_parts(view, start=0, stop=None, parts=PARTS) -> dict:
    """``{part: FieldIndex}`` of rows ``start`` to ``stop`` of ``view``'s archive,
    analysed with the index's analyzer over its vocabulary (rows numbered from 0; a word
    the vocabulary lacks is left out)."""
    stop = view.n_docs if stop is None else stop
    n_terms = len(view.index.vocab)
    # a copy: the builder adds the words it meets to its vocabulary, the index's must not
    builder = TermIndexBuilder(view.analyzer, fields=parts,
                               vocab=Vocabulary(view.index.vocab.terms))
    archive = view.archive
    for row in range(start, stop):
        builder.add(archive[row])
    built = builder.build()
    return {name: _known_terms(built[name], n_terms) for name in parts}


def _known_terms(field, n_terms) -> FieldIndex:
    """``field`` over the first ``n_terms`` term ids (the others dropped)."""
    if field.n_terms == n_terms:
        return field
    keep = field.sequence < n_terms
    rows = np.repeat(np.arange(field.n_docs), field.doc_len)[keep]
    lengths = np.bincount(rows, minlength=field.n_docs).astype(np.int32)
    m = field.matrix()[:, :n_terms].tocsc()
    m.sort_indices()
    return FieldIndex(field.name, m.indptr.astype(np.int64), m.indices.astype(np.int32),
                      m.data.astype(np.int32), lengths,
                      np.asarray(field.sequence)[keep].astype(np.int32))


def field_arrays(field, prefix) -> dict:
    """A field's arrays for a model's state, under ``prefix``."""
    return {f"{prefix}{key}": np.asarray(getattr(field, key)) for key in _ARRAYS}


def field_from_arrays(name, arrays, prefix, n_docs, n_terms) -> FieldIndex:
    """The inverse of :func:`field_arrays`, checked (shapes, bounds); over at least
    ``n_terms`` terms (more when the index grew before a compaction stored it).

    Raises
    ------
    InvalidArray
    """
    from ..index.validate import check_array, check_offsets, check_sparse

    a = {key: arrays[f"{prefix}{key}"] for key in _ARRAYS}
    n_terms = max(n_terms, len(a["indptr"]) - 1)
    check_sparse(a["indptr"], a["indices"], a["counts"], (n_terms, n_docs), f"{name} postings")
    # a posting counts its word at least once (as the index's own fields are checked): a
    # count of 0 gives a question a vector of zeros, and its cosine NaN
    check_array(a["counts"], f"{name} counts", kind="iu", low=1)
    doc_len = check_array(a["doc_len"], f"{name} lengths", kind="iu", shape=(n_docs,), low=0)
    check_offsets(np.concatenate(([0], np.cumsum(doc_len, dtype=np.int64))),
                  f"{name} lengths", length=n_docs + 1, total=len(a["sequence"]))
    check_array(a["sequence"], f"{name} sequence", kind="iu", low=0, high=n_terms - 1)
    return FieldIndex(name, *(a[key] for key in _ARRAYS))


def extend_field(field, view, name) -> FieldIndex:
    """``field`` (a model's stored part, over the first rows of ``view``) extended with
    the rows ``view`` gained since, analysed from its archive, over its vocabulary."""
    n_terms = len(view.index.vocab)
    if field.n_docs == view.n_docs and field.n_terms == n_terms:
        return field
    parts = [field]
    if view.n_docs > field.n_docs:
        parts.append(analyse_parts(view, field.n_docs, view.n_docs, parts=(name,))[name])
    return FieldIndex.concat(parts, n_terms)
