"""Exact top-k by block-max pruning: score only the documents that can make the top k.

Documents are cut into blocks of ``block_size`` consecutive rows. For every term and every
block the term occurs in, :class:`BlockMax` keeps the largest posting weight of the term
in the block (and where the block's postings start), a "block-max" index in the spirit
of block-max WAND (Ding and Suel, 2011) with the blocks on a grid shared by all terms, so
that one ``bincount`` gives the bound of every block:

    bound(block) = sum_{t in q, t occurs in block} qw_t * max_{d in block} w(t, d)

No document of a block scores more than its bound. A query is answered in two rounds:
the few blocks with the largest bounds are scored exactly, and the k-th best score found
there, ``theta``, is a lower bound of the final k-th score; then every other block whose
bound reaches ``theta`` is scored exactly. Blocks below ``theta`` hold no document of the
top k (nor one tied with the k-th), so the result is that of exhaustive scoring.

Exactness. Scores are summed exactly as :func:`cqa_search.retrieval.base.accumulate` does
(float32 contributions ``w * qw_t``, added in float64 in the order of the query's term
ids, from 0), so they are bit-identical to exhaustive scores, ties included. Rounding
is monotone, so a bound summed the same way is never below the score of a document of
its block; a relative margin of 1e-12 guards the comparison with ``theta`` anyway.
Requires non-negative posting weights, no document part and no constant (BM25; see
:func:`cqa_search.retrieval.candidates.retrieve`).

Storage. :func:`block_max_arrays` computes the arrays of a field's weights (what an
index may store next to them); :func:`block_max` returns the :class:`BlockMax` of a
field and model, from arrays registered with :func:`register_block_max` or computed
on first use (then kept for the field's lifetime).
"""
from __future__ import annotations

import weakref

import numpy as np

__all__ = ["BLOCK_SIZE", "BlockMax", "block_max_arrays", "block_max", "register_block_max",
           "pruned_top_k"]

#: Rows per block (a power of two).
BLOCK_SIZE = 32
# Blocks scored in the first round (their k-th best score is theta).
_FIRST_ROUND = 64
_MARGIN = 1.0 + 1e-12
# Past this fraction of the blocks left to score, scoring every posting is faster.
_MAX_FRACTION = 0.25

_CACHE = weakref.WeakKeyDictionary()   # FieldIndex -> {weights key: BlockMax}


class BlockMax:
    """Block maxima of one field's posting weights.

    Attributes
    ----------
    block_size : int
    indptr : ndarray of int64, shape (n_terms + 1,)
        Entries of term ``t``: ``indptr[t]:indptr[t + 1]`` (one per block it occurs in,
        by increasing block).
    blocks : ndarray of int32, shape (n_entries,)
    maxima : ndarray of float32, shape (n_entries,)
        Largest posting weight of the term in the block.
    starts : ndarray of int32 (int64 past 2^31 postings), shape (n_entries + 1,)
        Position of the entry's first posting; the entry's postings end where the next
        entry's start (``starts[-1] = nnz``).
    min_weight : float
        The smallest posting weight (pruning needs >= 0).
    """

    def __init__(self, block_size, indptr, blocks, maxima, starts, min_weight):
        self.block_size = int(block_size)
        self.min_weight = float(min_weight)
        self.indptr, self.blocks, self.maxima, self.starts = indptr, blocks, maxima, starts
        self.shift = self.block_size.bit_length() - 1

    @classmethod
    def from_arrays(cls, arrays) -> "BlockMax":
        """From the dict of :func:`block_max_arrays` (e.g. loaded from an index)."""
        return cls(int(arrays["block_size"]), np.asarray(arrays["indptr"]),
                   np.asarray(arrays["blocks"]), np.asarray(arrays["maxima"]),
                   np.asarray(arrays["starts"]), float(arrays["min_weight"]))


def block_max_arrays(indptr, indices, weights, block_size=BLOCK_SIZE) -> dict:
    """The block-max arrays of one field's posting ``weights`` (what an index stores).

    Parameters
    ----------
    indptr, indices : the field's postings (CSC: rows of each term, sorted)
    weights : ndarray of float32, shape (nnz,)
        Non-negative posting weights of the model.
    block_size : int, a power of two

    Returns
    -------
    dict of ndarray
        ``block_size`` (0-d int64), ``indptr`` (int64), ``blocks`` (int32), ``maxima``
        (float32), ``starts`` (int32, or int64 past 2^31 postings), ``min_weight`` (0-d
        float64): see
        :class:`BlockMax`.

    Examples
    --------
    >>> a = block_max_arrays(np.array([0, 3, 4]), np.array([0, 1, 5, 4]),
    ...                      np.array([1.0, 3.0, 2.0, 5.0], np.float32), block_size=4)
    >>> a["blocks"].tolist(), a["maxima"].tolist(), a["starts"].tolist(), a["indptr"].tolist()
    ([0, 1, 1], [3.0, 2.0, 5.0], [0, 2, 3, 4], [0, 2, 3])
    """
    if block_size < 1 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two; got {block_size}")
    indptr = np.asarray(indptr, dtype=np.int64)
    nnz = int(indptr[-1])
    block = np.asarray(indices[:nnz]) >> (int(block_size).bit_length() - 1)
    first = np.zeros(nnz, dtype=bool)
    first[indptr[:-1][np.diff(indptr) > 0]] = True             # a term's first posting
    first[1:] |= block[1:] != block[:-1]
    starts = np.flatnonzero(first)
    weights = np.asarray(weights[:nnz])
    maxima = np.maximum.reduceat(weights, starts) if len(starts) else np.zeros(0, np.float32)
    return {"block_size": np.array(block_size, dtype=np.int64),
            "indptr": np.searchsorted(starts, indptr).astype(np.int64),
            "blocks": block[starts].astype(np.int32),
            "maxima": maxima.astype(np.float32),
            "starts": np.append(starts, nnz).astype(np.int32 if nnz < 2 ** 31 else np.int64),
            "min_weight": np.array(weights.min(initial=0.0), dtype=np.float64)}


def register_block_max(field, key, arrays) -> None:
    """Use stored block-max ``arrays`` for the weights ``key`` of ``field``."""
    _CACHE.setdefault(field, {})[key] = BlockMax.from_arrays(arrays)


def block_max(field, key, weights) -> BlockMax:
    """The :class:`BlockMax` of ``field``'s weights ``key``: registered, or computed once."""
    per_field = _CACHE.setdefault(field, {})
    bm = per_field.get(key)
    if bm is None:
        bm = per_field[key] = BlockMax.from_arrays(
            block_max_arrays(field.indptr, field.indices, weights))
    return bm


def _ranges(starts, lengths):
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])``."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(ends[-1] if len(ends) else 0)


def pruned_top_k(bm, indices, weights, term_ids, coef, n_docs, k, *, doc_category=None,
                 category=None, tie_rank=None):
    """Exact top ``k`` of ``score(d) = sum_t coef_t w(t, d)`` over documents with a
    positive score (and, with ``category``, ``doc_category[d] == category``).

    Parameters
    ----------
    bm : BlockMax
    indices, weights : the field's posting rows and (non-negative float32) weights
    term_ids : ndarray of int64, distinct term ids with postings, sorted
    coef : ndarray of float, positive query weights of ``term_ids``
    n_docs : int
    k : int, >= 1
    doc_category : ndarray of int, shape (n_docs,), optional
    category : int, optional
    tie_rank : ndarray of int, shape (n_docs,), optional
        Secondary sort key (default: the row).

    Returns
    -------
    rows : ndarray of int64, sorted by ``(-score, tie_rank)``
    scores : ndarray of float64
        Equal to :func:`~cqa_search.retrieval.base.accumulate`'s scores of these rows.
    None
        When the bounds prune too little (fewer than k documents in the first blocks,
        or more than a quarter of the blocks left to score after them): the caller
        scores every posting instead.
    """
    from .candidates import top_k

    indices, weights = np.asarray(indices), np.asarray(weights)   # not memory maps: faster
    shift, B = bm.shift, bm.block_size
    n_blocks = (n_docs + B - 1) >> shift
    lo = bm.indptr[term_ids]
    hi = bm.indptr[term_ids + 1]
    # float32 like accumulate's contributions (w * qw in float32), so bounds dominate them
    c32 = np.asarray(coef, dtype=np.float64).astype(np.float32)
    ent = _ranges(lo, hi - lo)
    bound = np.bincount(bm.blocks[ent], weights=bm.maxima[ent] * np.repeat(c32, hi - lo),
                        minlength=n_blocks) * _MARGIN
    live = np.flatnonzero(bound)
    spans = list(zip(lo.tolist(), hi.tolist(), c32))
    where = np.empty(n_blocks, dtype=np.int64)       # block -> its index in ``chosen``

    def score_blocks(chosen):
        """Rows (positive score, wanted category) and exact scores of blocks ``chosen``
        (sorted)."""
        pos, contrib = [], []
        for e_lo, e_hi, c in spans:           # term by term, in term id order
            term_blocks = bm.blocks[e_lo:e_hi]
            at = np.searchsorted(term_blocks, chosen)
            ok = at < len(term_blocks)
            ok[ok] = term_blocks[at[ok]] == chosen[ok]
            e = e_lo + at[ok]
            first = bm.starts[e]
            p = _ranges(first, bm.starts[e + 1] - first)
            pos.append(p)
            w = weights[p]
            contrib.append(w if c == 1.0 else w * c)
        pos = np.concatenate(pos)
        rows = indices[pos].astype(np.int64)
        where[chosen] = np.arange(len(chosen))
        local = (where[rows >> shift] << shift) | (rows & (B - 1))
        scores = np.bincount(local, weights=np.concatenate(contrib),
                             minlength=len(chosen) << shift)
        hit = np.flatnonzero(scores > 0)
        rows = (chosen[hit >> shift].astype(np.int64) << shift) | (hit & (B - 1))
        scores = scores[hit]
        if category is not None:
            keep = doc_category[rows] == category
            rows, scores = rows[keep], scores[keep]
        return rows, scores

    if len(live) <= _FIRST_ROUND:
        rows, scores = score_blocks(live)
    else:
        first = live[np.argpartition(-bound[live], _FIRST_ROUND - 1)[:_FIRST_ROUND]]
        first.sort()
        rows, scores = score_blocks(first)
        if len(scores) < k:
            return None
        theta = np.partition(scores, len(scores) - k)[len(scores) - k]
        bound[first] = 0.0                                 # done
        rest = live[bound[live] >= theta]
        if len(rest) > _MAX_FRACTION * len(live):
            return None                 # the bounds prune too little: score every posting
        if len(rest):
            more_rows, more_scores = score_blocks(rest)
            keep = more_scores >= theta
            rows = np.concatenate([rows, more_rows[keep]])
            scores = np.concatenate([scores, more_scores[keep]])
    top = top_k(scores, k, tie_rank=rows if tie_rank is None else tie_rank[rows])
    return rows[top], scores[top]
