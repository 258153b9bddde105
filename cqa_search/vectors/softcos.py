"""Soft-cosine similarity of bags of words (Sidorov et al. 2014; SimBow, Charlet and
Damnati 2017, the best system of SemEval-2017 task 3 subtask B).

The cosine of two tf-idf vectors counts only the words they share. The soft cosine also
counts similar words, through a term-similarity matrix ``M``::

    cos_M(x, y) = x^T M y / sqrt(x^T M x * y^T M y),     M = I + S

``S`` is sparse and symmetric, zero on the diagonal:

* from word vectors (:func:`embedding_neighbours`): ``S_ij = max(0, cos(v_i, v_j))^2``
  for the ``k`` nearest neighbours ``j`` of each word ``i`` (SimBow's ``M``);
* from spelling (:func:`char_neighbours`): the squared cosine of the words' character
  n-gram counts (``#`` marks the word's ends), again over each word's ``k`` nearest; it
  relates the variants and misspellings a forum is full of.

A pair in one word's neighbours but not the other's gets the same value both ways
(``S = max(S, S^T)``), so ``cos_M`` is symmetric. Both matrices are computed when the
model is fitted and stored; :func:`self_similarity` gives ``y^T M y`` of every question
(stored as model rows), :func:`soft_cosines` the scores of a query's candidates.
"""
from __future__ import annotations

import numpy as np

from .. import compiled

__all__ = ["embedding_neighbours", "char_neighbours", "self_similarity", "soft_cosines",
           "spread", "spread_cosines",
           "char_ngrams", "bags", "idf_of"]


def _top_neighbours(sims, rows, k):
    """COO triplets of the ``k`` largest positive entries of each row of a dense block
    (``rows``: the row ids of the block; the diagonal must be masked by the caller)."""
    k = min(k, sims.shape[1])
    if k <= 0:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.float32),)
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(sims, top, axis=1)
    keep = vals > 0
    return (np.repeat(rows, k).reshape(-1, k)[keep], top[keep],
            vals[keep].astype(np.float32))


def _symmetric(i, j, v, n):
    import scipy.sparse as sp

    S = sp.csr_matrix((v, (i, j)), shape=(n, n), dtype=np.float32)
    S = S.maximum(S.T).tocsr()
    S.sort_indices()
    return S


def embedding_neighbours(vectors, k=50, batch=1024):
    """``S`` from word vectors: ``max(0, cos)^2`` over each word's ``k`` nearest words
    (words without a vector have none).

    Parameters
    ----------
    vectors : ndarray of float32, shape (n_terms, dim)

    Returns
    -------
    scipy.sparse.csr_matrix of float32, shape (n_terms, n_terms)
    """
    n = len(vectors)
    has = np.flatnonzero(np.any(vectors != 0, axis=1))
    U = vectors[has].astype(np.float32)
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    parts = []
    for lo in range(0, len(has), batch):
        block = U[lo:lo + batch] @ U.T
        block[np.arange(len(block)), np.arange(lo, lo + len(block))] = -1.0  # not itself
        i, j, v = _top_neighbours(block, np.arange(lo, lo + len(block)), k)
        parts.append((has[i], has[j], v * v))
    i, j, v = (np.concatenate(p) for p in zip(*parts)) if parts else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    return _symmetric(i, j, v, n)


def char_ngrams(term, n=3) -> list:
    """The character n-grams of a word with its ends marked.

    Examples
    --------
    >>> char_ngrams("visa")
    ['#vi', 'vis', 'isa', 'sa#']
    """
    word = f"#{term}#"
    return [word[i:i + n] for i in range(max(len(word) - n + 1, 1))]


def char_neighbours(terms, which, n=3, k=50, batch=1024):
    """``S`` from spelling: the squared cosine of character n-gram counts over each word's
    ``k`` nearest words, among the words ``which`` (term ids; the others have none).

    Returns
    -------
    scipy.sparse.csr_matrix of float32, shape (len(terms), len(terms))
    """
    import scipy.sparse as sp

    which = np.asarray(which, dtype=np.int64)
    grams, rows, cols = {}, [], []
    for r, t in enumerate(which.tolist()):
        for g in char_ngrams(terms[t], n):
            rows.append(r)
            cols.append(grams.setdefault(g, len(grams)))
    G = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)),
                      shape=(len(which), max(len(grams), 1)))
    G.sum_duplicates()
    norms = np.sqrt(np.asarray(G.multiply(G).sum(axis=1)).ravel())
    G = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ G, dtype=np.float32)
    GT = G.T.tocsc()
    parts = []
    for lo in range(0, len(which), batch):
        block = (G[lo:lo + batch] @ GT).toarray()
        block[np.arange(len(block)), np.arange(lo, lo + len(block))] = -1.0
        i, j, v = _top_neighbours(block, np.arange(lo, lo + len(block)), k)
        parts.append((which[i], which[j], v * v))
    i, j, v = (np.concatenate(p) for p in zip(*parts)) if parts else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    return _symmetric(i, j, v, len(terms))


def bags(field, rows, idf):
    """The tf-idf bags of words of ``rows`` of a field: ``(terms, position in rows,
    tf * idf)`` of each distinct (row, term)."""
    terms, pos = field.sequences_of(rows)
    keys, tf = np.unique(pos * (1 << 32) + terms, return_counts=True)
    terms, pos = keys & 0xFFFFFFFF, keys >> 32
    return terms, pos, tf * idf_of(idf, terms)


def idf_of(idf, terms) -> np.ndarray:
    """``idf[terms]``, terms the model does not know getting the largest idf (they were
    rarer than any term it knows)."""
    terms = np.asarray(terms, dtype=np.int64)
    known = terms < len(idf)
    out = np.full(len(terms), float(idf.max()) if len(idf) else 1.0)
    out[known] = idf[terms[known]]
    return out


def self_similarity(field, rows, idf, matrices, batch=1 << 14) -> np.ndarray:
    """``y^T M y`` of the tf-idf vector ``y`` of each of ``rows`` of a field, for ``M = I +
    S`` of each ``S`` of ``matrices`` (float64, shape ``(len(rows), len(matrices))``).

    The bags of words are made once for every matrix; ``y^T S y`` is then one compiled
    pass per bag over its own words' rows of ``S`` once the kernels run
    (:func:`cqa_search.compiled.quadratic_forms`; at a million questions, 3 minutes of
    sparse products before), else the sparse product ``(Y S) . Y``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    out = np.zeros((len(rows), len(matrices)))
    csr = [None] * len(matrices)
    for lo in range(0, len(rows), batch):
        part = rows[lo:lo + batch]
        terms, pos, w = bags(field, part, idf)
        own = np.bincount(pos, weights=w * w, minlength=len(part))
        for j, S in enumerate(matrices):
            known = terms < S.shape[0]
            if compiled.active() == "numba":
                if csr[j] is None:
                    csr[j] = (np.asarray(S.indptr, dtype=np.int64),
                              np.asarray(S.indices, dtype=np.int64),
                              np.asarray(S.data, dtype=np.float32))
                offsets = np.concatenate(
                    ([0], np.cumsum(np.bincount(pos[known], minlength=len(part)))))
                pair = compiled.quadratic_forms(offsets, terms[known], w[known], *csr[j])
            else:
                pair = compiled.timed(_quadratic_forms, pos[known], terms[known], w[known],
                                      len(part), S)
            out[lo:lo + len(part), j] = own + pair
    return out


def _quadratic_forms(pos, terms, w, n, S) -> np.ndarray:
    """``y^T S y`` of ``n`` bags given as (bag, term, weight) entries: the numpy path of
    :func:`cqa_search.compiled.quadratic_forms`."""
    import scipy.sparse as sp

    Y = sp.csr_matrix((w, (pos, terms)), shape=(n, S.shape[0]))
    return np.asarray((Y @ S).multiply(Y).sum(axis=1)).ravel()


def soft_cosines(query_terms, query_weights, query_norm, field, rows, idf, S,
                 row_norms) -> np.ndarray:
    """``cos_M`` of a query's bag of words with each of ``rows`` of a field.

    Parameters
    ----------
    query_terms : ndarray of int, distinct term ids
    query_weights : ndarray of float, their tf-idf
    query_norm : float
        ``x^T M x`` of the query.
    field : FieldIndex
    rows : ndarray of int
    idf : ndarray of float, the model's idf
    S : scipy.sparse.csr_matrix
    row_norms : ndarray of float, ``y^T M y`` of each of ``rows``

    Returns
    -------
    ndarray of float64, shape (len(rows),)
    """
    if len(query_terms) == 0 or query_norm <= 0:
        return np.zeros(len(rows))
    z_terms, z = spread(query_terms, query_weights, S)
    return spread_cosines(z_terms, z, query_norm, field, rows, idf, row_norms)


def spread(query_terms, query_weights, S):
    """``z = M x`` over the query's words and their neighbours: ``(z_terms, z)``, the
    terms sorted (read from ``S``'s arrays: a query's rows, without scipy's indexing).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> S = sp.csr_matrix(np.array([[0, .5], [.5, 0]], dtype=np.float32))
    >>> [v.tolist() for v in spread(np.array([0]), np.array([2.0]), S)]
    [[0, 1], [2.0, 1.0]]
    """
    query_terms = np.asarray(query_terms, dtype=np.int64)
    known = np.flatnonzero(query_terms < S.shape[0])
    starts = S.indptr[query_terms[known]].astype(np.int64)
    lengths = S.indptr[query_terms[known] + 1] - starts
    at = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) \
        + np.arange(int(lengths.sum()))
    z_terms = np.concatenate([query_terms, S.indices[at].astype(np.int64)])
    z_vals = np.concatenate([query_weights, S.data[at] * np.repeat(query_weights[known],
                                                                    lengths)])
    z_terms, inverse = np.unique(z_terms, return_inverse=True)
    return z_terms, np.bincount(inverse.ravel(), weights=z_vals)


def spread_cosines(z_terms, z, query_norm, field, rows, idf, row_norms) -> np.ndarray:
    """:func:`soft_cosines` from the query's :func:`spread` (kept for its candidates)."""
    out = np.zeros(len(rows))
    terms, pos = field.sequences_of(rows)  # each occurrence adds its idf: tf * idf
    w = idf_of(idf, terms)
    # each term's place in z_terms by a table over the term ids (a binary search per
    # occurrence cost more: whole questions as candidates hold tens of thousands)
    size = 1 + max(int(z_terms[-1]) if len(z_terms) else 0, int(terms.max(initial=0)))
    place = np.full(size, -1, dtype=np.int64)
    place[z_terms] = np.arange(len(z_terms))
    at = place[terms]
    hit = at >= 0
    dots = np.bincount(pos[hit], weights=w[hit] * z[at[hit]], minlength=len(rows))
    denom = np.sqrt(query_norm * np.asarray(row_norms, dtype=np.float64))
    np.divide(dots, denom, out=out, where=denom > 0)
    return out
