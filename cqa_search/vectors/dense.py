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
  compaction carry it.

A query reads the ``n_probe`` lists whose centroids are closest to it and scores their
questions exactly; rows added after the lists were made (``doc_list`` shorter than the
vectors) are scored exactly too. Both steps are numpy only: the index opens as arrays
(memory-mapped, never code), and the exact cosines of the rows it reads are those of
:func:`exact_top_k`. BENCHMARKS.md ("Word vectors and the dense first stage") compares it
with hnswlib, faiss, usearch and annoy on a million synthetic questions.
"""
from __future__ import annotations

import numpy as np

from ..factorization._blas import one_blas_thread

__all__ = ["exact_top_k", "InvertedFile", "spherical_kmeans", "EXACT_LIMIT"]

#: Rows up to which the exact product is used (above: the inverted file, when fitted).
EXACT_LIMIT = 200_000


def _top(scores, rows, k, tie_rank):
    """The ``k`` best of ``scores`` (of ``rows``), sorted by (-score, tie rank)."""
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
    query = np.asarray(query, dtype=np.float32)
    with one_blas_thread():
        if allowed is None:
            scores = vectors @ query
            rows = np.arange(len(scores))
        else:
            rows = np.flatnonzero(allowed)
            scores = vectors[rows] @ query
    return _top(scores, rows, k, tie_rank)


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
    """

    def __init__(self, centroids, doc_list, n_probe):
        self.centroids = centroids
        self.doc_list = doc_list
        self.n_probe = int(n_probe)
        order = np.argsort(doc_list, kind="stable")
        self.list_rows = order.astype(np.int64)
        self.list_offsets = np.concatenate(
            ([0], np.cumsum(np.bincount(doc_list, minlength=len(centroids))))).astype(np.int64)

    @classmethod
    def fit(cls, vectors, *, n_lists=None, n_probe=None, max_iter=20, random_state=0):
        """Learn the lists of ``vectors`` (unit rows): ``n_lists`` default ``4 sqrt(n)``,
        k-means on at most 64 rows per list; ``n_probe`` default ``n_lists / 32``."""
        n = len(vectors)
        n_lists = n_lists or max(1, min(n, int(4 * np.sqrt(n))))
        centroids = spherical_kmeans(vectors, n_lists, max_iter=max_iter,
                                     sample=min(n, 64 * n_lists), random_state=random_state)
        return cls(centroids, assign(vectors, centroids),
                   n_probe or max(1, n_lists // 32))

    def candidates(self, query) -> np.ndarray:
        """Rows of the ``n_probe`` lists closest to ``query`` (sorted)."""
        sims = self.centroids @ query
        p = min(self.n_probe, len(sims))
        lists = np.argpartition(-sims, p - 1)[:p] if p < len(sims) else np.arange(len(sims))
        starts, stops = self.list_offsets[lists], self.list_offsets[lists + 1]
        rows = np.concatenate([self.list_rows[a:b] for a, b in zip(starts.tolist(),
                                                                   stops.tolist())])
        rows.sort()
        return rows

    def top_k(self, vectors, query, k, *, allowed=None, tie_rank=None):
        """As :func:`exact_top_k`, over the rows of the probed lists and the rows beyond
        the lists (added since they were made)."""
        query = np.asarray(query, dtype=np.float32)
        with one_blas_thread():
            rows = self.candidates(query)
            n_indexed = len(self.doc_list)
            if len(vectors) > n_indexed:
                rows = np.concatenate([rows, np.arange(n_indexed, len(vectors))])
            if allowed is not None:
                rows = rows[allowed[rows]]
            scores = vectors[rows] @ query
        return _top(scores, rows, k, tie_rank)
