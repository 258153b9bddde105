"""Dense top-k by cosine over the question vectors: exact, or through an inverted file.

The question vectors are L2-normalised, so the cosine is a dot product. :func:`exact_top_k`
scores every (allowed) row with one matrix-vector product. Above
:data:`EXACT_LIMIT` rows that product alone misses the speed target (it reads the whole
matrix: 400 MB at a million questions), and :class:`InvertedFile` answers instead: an
IVF-Flat index (Jegou et al. 2011; faiss's ``IndexIVFFlat``) kept as plain arrays:

* ``centroids`` (``n_lists`` x dim, unit length), learned by spherical k-means on a
  sample of the vectors, seeded;
* ``doc_list`` (one int32 per question): the list of every question (its nearest
  centroid), a per-question row like the vectors themselves, so live additions and
  compaction carry it;
* ``list_vectors``: the vectors again, ordered by list, so that a list is one contiguous
  block (scoring a block is five times faster than gathering its rows).

A query reads the ``n_probe`` lists whose centroids are closest to it and scores their
questions exactly; rows added after the lists were made (``doc_list`` shorter than the
vectors) are scored exactly too. Both steps are numpy only: the index opens as arrays
(memory-mapped, never code), and the exact cosines of the rows it reads are those of
:func:`exact_top_k`. BENCHMARKS.md ("Word vectors and the dense first stage") compares it
with hnswlib, faiss, usearch and annoy on a million synthetic questions.
"""
from __future__ import annotations

import numpy as np

from .._blas import one_blas_thread

__all__ = ["exact_top_k", "exact_scores", "best_of", "InvertedFile", "spherical_kmeans",
           "EXACT_LIMIT"]

#: Rows up to which the exact product is used (above: the inverted file, when fitted).
EXACT_LIMIT = 200_000


def best_of(rows, scores, k, tie_rank=None):
    """The ``k`` best of ``rows`` by ``scores``, sorted by (-score, tie rank): their rows
    and scores."""
    if k < len(scores):
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        scores, rows = scores[keep], rows[keep]
    secondary = rows if tie_rank is None else tie_rank[rows]
    order = np.lexsort((secondary, -scores))[:k]
    return rows[order], scores[order]


def exact_top_k(vectors, query, k, *, allowed=None, tie_rank=None):
    """The ``k`` rows of ``vectors`` with the largest dot product with ``query``.

    Parameters
    ----------
    vectors : ndarray of float32, shape (n, dim)
    query : ndarray of float32, shape (dim,)
    k : int
    allowed : ndarray of bool, shape (n,), optional
        Only these rows.
    tie_rank : ndarray of int, shape (n,), optional
        Secondary sort key (default: the row).

    Returns
    -------
    rows : ndarray of int64, sorted by (-score, tie rank)
    scores : ndarray of float32
    """
    return best_of(*exact_scores(vectors, query, allowed=allowed), k, tie_rank)


def exact_scores(vectors, query, *, allowed=None):
    """``(rows, scores)``: every (allowed) row and its dot product with ``query`` (what
    :func:`exact_top_k` selects from; a caller keeps them to select again at another
    ``k``)."""
    query = np.asarray(query, dtype=np.float32)
    with one_blas_thread():
        if allowed is None:
            scores = vectors @ query
            rows = np.arange(len(scores))
        else:
            rows = np.flatnonzero(allowed)
            scores = vectors[rows] @ query
    return rows, scores


def spherical_kmeans(X, n_clusters, *, max_iter=20, sample=None, random_state=0):
    """Unit-length centroids of the rows of ``X`` (unit length) by spherical k-means:
    assign each row to the centroid of largest dot product, re-estimate each centroid as
    the normalised sum of its rows; a centroid left empty takes a random row.

    Parameters
    ----------
    X : ndarray of float32, shape (n, dim)
    n_clusters : int
    max_iter : int, default 20
    sample : int or None
        Fit on this many rows drawn at random (None: all).
    random_state : int

    Returns
    -------
    ndarray of float32, shape (n_clusters, dim)
    """
    rng = np.random.default_rng(random_state)
    n = len(X)
    if sample is not None and sample < n:
        X = X[np.sort(rng.choice(n, sample, replace=False))]
    X = np.ascontiguousarray(X, dtype=np.float32)
    C = X[np.sort(rng.choice(len(X), n_clusters, replace=False))].copy()
    import scipy.sparse as sp  # fit time only

    for _ in range(max_iter):
        labels = assign(X, C)
        members = sp.csr_matrix((np.ones(len(X), np.float32), (labels, np.arange(len(X)))),
                                shape=(n_clusters, len(X)))
        sums = np.asarray(members @ X, dtype=np.float64)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        sums[empty] = X[rng.choice(len(X), int(empty.sum()), replace=False)]
        norms[empty] = np.linalg.norm(sums[empty], axis=1)
        C_new = (sums / np.where(norms > 0, norms, 1.0)[:, None]).astype(np.float32)
        if np.array_equal(C_new, C):
            break
        C = C_new
    return C


def assign(X, centroids, batch=1 << 15) -> np.ndarray:
    """The centroid of largest dot product of every row of ``X`` (int32)."""
    out = np.empty(len(X), dtype=np.int32)
    for lo in range(0, len(X), batch):
        out[lo:lo + batch] = np.argmax(np.asarray(X[lo:lo + batch]) @ centroids.T, axis=1)
    return out


class InvertedFile:
    """An IVF-Flat index over the rows of a vector matrix (see the module docstring).

    Parameters
    ----------
    centroids : ndarray of float32, shape (n_lists, dim)
    doc_list : ndarray of int32, shape (n_indexed,)
        The list of each of the first ``n_indexed`` rows.
    n_probe : int
        Lists read per query.
    list_vectors : ndarray of float32, shape (n_indexed, dim), optional
        The vectors of those rows ordered by list (stable): each list is then one
        contiguous block, scored by one matrix-vector product (five times faster than
        gathering its rows). Made from the vectors on first use when not given.
    """

    def __init__(self, centroids, doc_list, n_probe, list_vectors=None):
        self.centroids = centroids
        self.doc_list = doc_list
        self.n_probe = int(n_probe)
        self.list_rows = np.argsort(doc_list, kind="stable").astype(np.int64)
        self.list_offsets = np.concatenate(
            ([0], np.cumsum(np.bincount(doc_list, minlength=len(centroids))))).astype(np.int64)
        self.list_vectors = list_vectors

    @classmethod
    def fit(cls, vectors, *, n_lists=None, n_probe=None, max_iter=20, random_state=0):
        """Learn the lists of ``vectors`` (unit rows): ``n_lists`` default ``sqrt(n)``,
        k-means on at most 64 rows per list; ``n_probe`` default ``n_lists / 10`` (at a
        million synthetic questions: recall@100 0.992 against the exact search,
        BENCHMARKS.md)."""
        n = len(vectors)
        n_lists = min(n_lists or max(1, int(np.sqrt(n))), n)  # no more lists than rows
        centroids = spherical_kmeans(vectors, n_lists, max_iter=max_iter,
                                     sample=min(n, 64 * n_lists), random_state=random_state)
        out = cls(centroids, assign(vectors, centroids), n_probe or max(1, n_lists // 10))
        out.list_vectors = np.ascontiguousarray(vectors[out.list_rows])
        return out

    def probed(self, query) -> np.ndarray:
        """The ``n_probe`` lists whose centroids are closest to ``query``."""
        sims = self.centroids @ query
        p = min(self.n_probe, len(sims))
        return np.argpartition(-sims, p - 1)[:p] if p < len(sims) else np.arange(len(sims))

    def top_k(self, vectors, query, k, *, allowed=None, tie_rank=None):
        """As :func:`exact_top_k`, over the rows of the probed lists and the rows beyond
        the lists (added since they were made)."""
        return best_of(*self.scores(vectors, query, allowed=allowed), k, tie_rank)

    def scores(self, vectors, query, *, allowed=None):
        """``(rows, scores)``: the (allowed) rows of the probed lists and beyond the
        lists, and their dot products with ``query`` (what :meth:`top_k` selects from)."""
        query = np.asarray(query, dtype=np.float32)
        if self.list_vectors is None:
            self.list_vectors = np.ascontiguousarray(vectors[self.list_rows])
        offsets, by_list = self.list_offsets, self.list_vectors
        with one_blas_thread():
            lists = self.probed(query)
            spans = [(a, b) for a, b in zip(offsets[lists].tolist(),
                                            offsets[lists + 1].tolist()) if b > a]
            rows = [self.list_rows[a:b] for a, b in spans]
            scores = [by_list[a:b] @ query for a, b in spans]
            n_indexed = len(self.doc_list)
            if len(vectors) > n_indexed:
                rows.append(np.arange(n_indexed, len(vectors)))
                scores.append(vectors[n_indexed:] @ query)
        rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        scores = np.concatenate(scores) if scores else np.zeros(0, np.float32)
        if allowed is not None:
            keep = allowed[rows]
            rows, scores = rows[keep], scores[keep]
        return rows, scores
