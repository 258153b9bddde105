"""Sentence vectors from word vectors: smooth inverse frequency (SIF) and the plain mean.

SIF (Arora, Liang and Ma 2017, "A simple but tough-to-beat baseline for sentence
embeddings"): a sentence ``s`` is the weighted mean of its words' vectors, each word
weighted ``a / (a + p(w))`` (``p(w)``: its frequency in the training text, ``a`` = 1e-3),
less its projection on the first principal component ``u`` of the archive's weighted
means (what most sentences share: frequent-word and syntax directions)::

    v_s = (1 / |s|) sum_{w in s} a / (a + p(w)) v_w,        SIF(s) = v_s - u u^T v_s

Here every vector is then L2-normalised, so that a dot product is the cosine. Words
without a vector (rarer than the learner's ``min_count``, or unknown to the model) are
left out of ``s``; a sentence without any has the zero vector (cosine 0 with anything).
The functions take sentences as term-id arrays: one query, or many as a flat array with
offsets (a CSR product, a few seconds per million questions).
"""
from __future__ import annotations

import numpy as np

__all__ = ["A0", "sif_weights", "weighted_means", "principal_component", "sif_rows",
           "mean_rows", "sentence_vector", "normalize_rows", "has_vector"]

#: Arora et al.'s ``a``: weights ``a / (a + p(w))``.
A0 = 1e-3
#: Rows per batch of the CSR products (bounds the temporaries).
_BATCH = 1 << 16


def sif_weights(counts, a0=A0) -> np.ndarray:
    """``a0 / (a0 + p(w))`` of every term from its occurrences in the training text."""
    counts = np.asarray(counts, dtype=np.float64)
    p = counts / max(counts.sum(), 1.0)
    return (a0 / (a0 + p)).astype(np.float32)


def normalize_rows(X) -> np.ndarray:
    """Rows divided by their L2 norm (zero rows stay zero), in place for float32 input."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64)).astype(np.float32)
    np.divide(X, norms[:, None], out=X, where=norms[:, None] > 0)
    return X


def weighted_means(ids, offsets, vectors, weights, has=None) -> np.ndarray:
    """``(1 / |s|) sum_{w in s} weight_w v_w`` of every sentence (words without a vector
    left out).

    Parameters
    ----------
    ids : ndarray of int, flat term ids
    offsets : ndarray of int64, shape (n + 1,)
    vectors : ndarray of float32, shape (n_terms, dim)
        Zero rows: terms without a vector. Ids beyond ``n_terms`` have none.
    weights : ndarray of float32, shape (n_terms,)
    has : ndarray of bool, shape (n_terms,), optional
        :func:`has_vector` of ``vectors``, when the caller keeps it (it reads the whole
        matrix: more than a query's few sentences cost).

    Returns
    -------
    ndarray of float32, shape (n, dim)
    """
    import scipy.sparse as sp

    n_terms, dim = vectors.shape
    if has is None:
        has = has_vector(vectors)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    out = np.zeros((n, dim), dtype=np.float32)
    for lo in range(0, n, _BATCH):
        hi = min(lo + _BATCH, n)
        seg = np.asarray(ids[offsets[lo]:offsets[hi]], dtype=np.int64)
        row = np.repeat(np.arange(hi - lo), np.diff(offsets[lo:hi + 1]))
        ok = seg < n_terms
        ok[ok] = has[seg[ok]]
        seg, row = seg[ok], row[ok]
        size = np.bincount(row, minlength=hi - lo).astype(np.float32)
        data = weights[seg] / size[row]
        W = sp.csr_matrix((data, (row, seg)), shape=(hi - lo, n_terms))
        out[lo:hi] = W @ vectors
    return out


def has_vector(vectors) -> np.ndarray:
    """Which terms have a word vector (a row not all zero), shape (n_terms,)."""
    return np.any(vectors != 0, axis=1)


def principal_component(X) -> np.ndarray:
    """First principal component (uncentred, as TruncatedSVD) of the rows of ``X``:
    the top eigenvector of ``X^T X``, its sign fixed (largest entry positive)."""
    X = np.asarray(X, dtype=np.float32)
    gram = np.zeros((X.shape[1], X.shape[1]))
    for lo in range(0, len(X), _BATCH):
        part = X[lo:lo + _BATCH].astype(np.float64)
        gram += part.T @ part
    _, vecs = np.linalg.eigh(gram)
    u = vecs[:, -1]
    return (u * np.sign(u[np.argmax(np.abs(u))] or 1.0)).astype(np.float32)


def sif_rows(ids, offsets, vectors, weights, component) -> np.ndarray:
    """L2-normalised SIF vectors of many sentences (``component``: ``u``, or None to keep
    the weighted means as they are)."""
    X = weighted_means(ids, offsets, vectors, weights)
    if component is not None:
        # the projection in float64: a row's vector is then the same whatever rows it is
        # computed with (questions added to an index, or to one of its shards)
        u = np.asarray(component, dtype=np.float64)
        X -= np.outer((X.astype(np.float64) * u).sum(axis=1), u).astype(np.float32)
    return normalize_rows(X)


def mean_rows(ids, offsets, vectors, has=None) -> np.ndarray:
    """L2-normalised plain means of the word vectors of many sentences (``has``: as
    :func:`weighted_means` reads it)."""
    return normalize_rows(weighted_means(ids, offsets, vectors,
                                         np.ones(len(vectors), dtype=np.float32), has))


def sentence_vector(ids, vectors, weights=None, component=None) -> np.ndarray:
    """The L2-normalised SIF vector of one sentence (``weights`` None: the plain mean),
    in numpy only: what a query costs.

    Examples
    --------
    >>> V = np.array([[1, 0], [0, 1], [0, 0]], dtype=np.float32)
    >>> [round(float(x), 3) for x in sentence_vector(np.array([0, 1, 1, 2, 7]), V)]
    [0.447, 0.894]
    """
    ids = np.asarray(ids, dtype=np.int64)
    ids = ids[ids < len(vectors)]
    rows = vectors[ids]
    ok = np.any(rows != 0, axis=1)
    v = np.zeros(vectors.shape[1], dtype=np.float64)
    if ok.any():
        rows = rows[ok].astype(np.float64)
        w = np.ones(len(rows)) if weights is None else weights[ids[ok]].astype(np.float64)
        v = (w @ rows) / len(rows)
        if component is not None:
            u = component.astype(np.float64)
            v -= (v @ u) * u
    norm = np.sqrt(v @ v)
    return (v / norm if norm > 0 else v).astype(np.float32)
