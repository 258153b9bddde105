"""Candidate selection: the top k of a term model over the archive, exact, with
deterministic tie-breaking and filters."""
from __future__ import annotations

import numpy as np

from .. import compiled
from .base import TermModel, postings

__all__ = ["top_k", "top_k_of_model"]


def top_k(scores, k, *, allowed=None, tie_rank=None) -> np.ndarray:
    """Rows of the ``k`` best scores, sorted by ``(-score, tie_rank)``.

    Parameters
    ----------
    scores : ndarray of float, shape (n_docs,)
    k : int or None
        How many; None for all allowed rows.
    allowed : ndarray of bool, shape (n_docs,), or ndarray of int rows, optional
        Only these rows can be returned (e.g. documents matching the query in the wanted
        category).
    tie_rank : ndarray of int, shape (n_docs,), optional
        Secondary key for equal scores (the rank of each row's doc id in sorted order,
        so ties are broken by doc id); the row itself when None.

    Returns
    -------
    rows : ndarray of int64

    Examples
    --------
    >>> top_k(np.array([0.5, 2.0, 0.5, 1.0]), 3).tolist()
    [1, 3, 0]
    >>> top_k(np.array([0.5, 2.0, 0.5, 1.0]), 2, allowed=np.array([True, False, True, False])).tolist()
    [0, 2]
    """
    if allowed is None:
        rows = np.arange(len(scores))
    elif allowed.dtype == bool:
        rows = np.flatnonzero(allowed)
    else:
        rows = np.asarray(allowed, dtype=np.int64)
    sub = scores[rows]
    if k is not None and k < len(rows):
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        # Keep every row tied with the k-th score so the tie-break below sees them all.
        kth = np.partition(sub, len(sub) - k)[len(sub) - k]
        keep = sub >= kth
        rows, sub = rows[keep], sub[keep]
    secondary = rows if tie_rank is None else tie_rank[rows]
    order = np.lexsort((secondary, -sub))
    out = rows[order]
    return out if k is None else out[:k]


def top_k_of_model(model, field, term_ids, qtf, k, *, doc_category=None, category=None,
                   allowed=None, tie_rank=None, prune=True):
    """The ``k`` best documents of a term model and their scores.

    The result is that of scoring every document (:meth:`TermModel.score_all`) and
    keeping the top ``k`` of those matching a query term (and of the category, and
    allowed): ``top_k(scores, k, allowed=matched, tie_rank=tie_rank)``, with identical
    scores and order. When scores are sums of positive posting weights (no document part
    nor constant: BM25), the top ``k`` is chosen among the query terms' postings rather
    than among every document, which saves two passes over all documents, and, with the
    compiled kernels (:mod:`~cqa_search.compiled`), the postings are summed a window of
    rows at a time in the CPU cache.

    Parameters
    ----------
    model : TermModel
    field : FieldIndex
        The field the model scores.
    term_ids : ndarray of int, distinct ids of the query terms
    qtf : ndarray of float, their frequencies in the query
    k : int or None
        How many (None: every matching document).
    doc_category : ndarray of int, shape (n_docs,), optional
    category : int, optional
        Keep only documents with ``doc_category == category``.
    allowed : ndarray of bool, shape (n_docs,), optional
        Keep only these documents (e.g. not deleted, passing a query's filters).
    tie_rank : ndarray of int, shape (n_docs,), optional
        Secondary key for equal scores (default: the row).
    prune : bool, default True
        False: always select among every document (the reference path).

    Returns
    -------
    rows : ndarray of int64, sorted by ``(-score, tie_rank)``
    scores : ndarray of float64
    """
    term_ids = np.asarray(term_ids, dtype=np.int64)
    qtf = np.asarray(qtf, dtype=np.float64)
    usable, uqtf = model._usable(field, term_ids, qtf)
    if prune and k is not None and len(usable) and _sums_of_weights(model) \
            and not model._weights_can_be_zero():
        coef = model._query_weights(field, usable, uqtf)
        weights = model.posting_weights(field)
        if compiled.active() == "numba":
            return compiled.top_k_of_postings(
                field.indptr, field.indices, weights, usable, coef, k, n_docs=field.n_docs,
                doc_category=doc_category, category=category, allowed=allowed,
                tie_rank=tie_rank, largest=model.largest_weights(field))
        return compiled.timed(_postings_top_k, field, usable, coef, weights, k, doc_category,
                              category, allowed, tie_rank)
    scores, matched = model.score_all(field, term_ids, qtf)
    if category is not None:
        matched &= doc_category == category
    if allowed is not None:
        matched &= allowed
    rows = top_k(scores, k, allowed=matched, tie_rank=tie_rank)
    return rows, scores[rows]


def _postings_top_k(field, term_ids, coef, weights, k, doc_category, category, allowed,
                    tie_rank):
    """Exhaustive scores (:func:`~cqa_search.retrieval.base.accumulate`), but the top
    ``k`` chosen among few documents rather than among all of them.

    Each of the documents holding one query term has its full score, so the k-th best
    score among the (wanted) documents of the rarest term with at least ``k`` of them
    bounds the overall k-th best from below: only documents reaching that bound can be in
    the top ``k`` or tied with its last. When no term has ``k`` wanted documents, the
    bound is the ``k * n_terms``-th largest score read at every posting instead (a
    document occurs at most once per term, so those postings hold ``k`` documents).
    """
    idx, w = postings(field, term_ids, coef, weights)
    scores = np.bincount(idx, weights=w, minlength=field.n_docs)  # = accumulate()

    def wanted(rows):  # mask of the rows passing the filters
        keep = np.ones(len(rows), dtype=bool)
        if category is not None:
            keep &= doc_category[rows] == category
        if allowed is not None:
            keep &= allowed[rows]
        return keep

    filtered = category is not None or allowed is not None
    indptr, indices = field.indptr, field.indices
    lengths = indptr[term_ids + 1] - indptr[term_ids]
    for j in np.argsort(lengths, kind="stable").tolist():
        if lengths[j] < k:
            continue
        t = term_ids[j]
        rows = indices[indptr[t]:indptr[t + 1]]
        values = scores[rows[wanted(rows)] if filtered else rows]
        if len(values) >= k:
            theta = np.partition(values, len(values) - k)[len(values) - k]
            rows = np.flatnonzero(scores >= theta)
            break
    else:
        values = scores[idx]
        if filtered:
            values[~wanted(idx)] = 0.0
        m = k * len(term_ids)
        keep = values > 0
        if len(values) > m:
            keep &= values >= np.partition(values, len(values) - m)[len(values) - m]
        rows = np.unique(idx[keep]).astype(np.int64)
    if filtered:
        rows = rows[wanted(rows)]
    top = top_k(scores[rows], k, tie_rank=rows if tie_rank is None else tie_rank[rows])
    return rows[top], scores[rows[top]]


def _sums_of_weights(model):
    """Scores are sums of posting weights only (no document part, no constant)."""
    cls = type(model)
    return cls._doc_part is TermModel._doc_part and cls._constant is TermModel._constant

