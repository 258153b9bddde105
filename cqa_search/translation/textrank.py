"""TextRank word filtering of the parallel corpus (zhou2011 §3.3.2, eq. 16).

Questions and answers of a Q&A archive are noisy; Lee et al. (2008) and Zhou et al. (2011)
drop the words that matter little *in their own document* before training translation
models, which removes most "unnecessary" translations. Per document:

1. every distinct word is a vertex; two words are linked when they occur within a window
   of ``window`` consecutive terms, the edge weight being how often they do;
2. PageRank with damping ``d`` (eq. 16)::

       R(w) = (1 - d) + d * sum_{v linked to w} e(v, w) / (sum_u e(v, u)) * R(v)

   iterated from R = 1 until no score moves by more than ``tol``;
3. the words scoring below the document's average score (over its distinct words) are
   removed, every occurrence of them.

All documents are processed at once: their graphs form one block-diagonal sparse matrix,
so each PageRank step is a single sparse matrix-vector product.
"""
from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ._arrays import group, segment_ids

__all__ = ["textrank_scores", "textrank_filter"]

logger = logging.getLogger(__name__)


def textrank_scores(tokens, offsets, *, window=3, damping=0.85, tol=1e-4, max_iter=100):
    """TextRank score of every distinct word of every document.

    Parameters
    ----------
    tokens : ndarray of int, shape (n_tokens,)
        Term ids of all documents, one after the other.
    offsets : ndarray of int64, shape (n_docs + 1,)
        Document ``k`` is ``tokens[offsets[k]:offsets[k + 1]]``.
    window : int, default 3
        Two words are linked when their positions differ by less than ``window``
        (2: adjacent words only).
    damping : float, default 0.85
        The damping factor ``d`` of eq. 16.
    tol : float, default 1e-4
        Stop when no score changes by more than ``tol`` (Mihalcea & Tarau's threshold).
    max_iter : int, default 100

    Returns
    -------
    vertex : ndarray of int64, shape (n_tokens,)
        The vertex (document, word) of each token.
    scores : ndarray of float64, shape (n_vertices,)
    vertex_doc : ndarray of int64, shape (n_vertices,)
        The document of each vertex.
    """
    if window < 2:
        raise ValueError(f"window must be an integer >= 2; got {window!r}")
    if not 0 < damping < 1:
        raise ValueError(f"damping must be in (0, 1); got {damping!r}")
    tokens = np.asarray(tokens, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    doc = segment_ids(offsets)
    bound = int(tokens.max()) + 1 if len(tokens) else 1
    keys, vertex, _ = group(doc * bound + tokens, (len(offsets) - 1) * bound)
    vertex_doc = keys // bound
    n_vertices = len(keys)
    rows, cols = [], []
    for dist in range(1, window):
        a = np.arange(len(tokens) - dist)
        ok = (doc[a] == doc[a + dist]) & (vertex[a] != vertex[a + dist])
        rows.append(vertex[a[ok]])
        cols.append(vertex[a[ok] + dist])
    rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    # Undirected graph: each co-occurrence adds weight 1 to both directions.
    edges = sp.coo_matrix((np.ones(2 * len(rows)), (np.concatenate([rows, cols]),
                                                   np.concatenate([cols, rows]))),
                          shape=(n_vertices, n_vertices)).tocsr()
    edges.sum_duplicates()
    out_weight = np.asarray(edges.sum(axis=1)).ravel()
    inv_out = np.divide(1.0, out_weight, out=np.zeros(n_vertices), where=out_weight > 0)
    scores = np.ones(n_vertices)
    for it in range(max_iter):
        new = (1 - damping) + damping * (edges @ (scores * inv_out))
        delta = np.max(np.abs(new - scores)) if n_vertices else 0.0
        scores = new
        if delta <= tol:
            break
    logger.debug("TextRank converged after %d iterations (%d vertices)", it + 1, n_vertices)
    return vertex, scores, vertex_doc


def textrank_filter(tokens, offsets, *, window=3, damping=0.85, tol=1e-4, max_iter=100):
    """Remove the words scoring below their document's average TextRank score.

    Parameters are those of :func:`textrank_scores`.

    Returns
    -------
    tokens : ndarray of int32
        The kept tokens, in their original order.
    offsets : ndarray of int64, shape (n_docs + 1,)

    Examples
    --------
    A word linked to many others outranks words seen once at the edge:

    >>> import numpy as np
    >>> tokens = np.array([1, 2, 1, 3, 1, 4])
    >>> kept, off = textrank_filter(tokens, np.array([0, 6]), window=2)
    >>> kept.tolist(), off.tolist()
    ([1, 1, 1], [0, 3])
    """
    tokens = np.asarray(tokens)
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(tokens) == 0:
        return tokens.astype(np.int32), offsets.copy()
    vertex, scores, vertex_doc = textrank_scores(tokens, offsets, window=window,
                                                 damping=damping, tol=tol, max_iter=max_iter)
    n_docs = len(offsets) - 1
    mean = (np.bincount(vertex_doc, weights=scores, minlength=n_docs)
            / np.maximum(np.bincount(vertex_doc, minlength=n_docs), 1))
    # "lower than the average": equal scores (e.g. a document of one repeated word) stay;
    # the slack absorbs rounding in the iteration.
    keep_vertex = scores >= mean[vertex_doc] - 1e-9
    keep = keep_vertex[vertex]
    lengths = np.bincount(segment_ids(offsets)[keep], minlength=n_docs)
    new_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    return tokens[keep].astype(np.int32), new_offsets
