"""Array kernels shared by the translation modules (flat id arrays with offsets).

Every collection of token sequences in this package is a *flat* int32 array plus int64
offsets (``offsets[k]:offsets[k + 1]`` is sequence ``k``), never a list of lists. The
helpers below work on that layout with whole-array numpy operations.
"""
from __future__ import annotations

import numpy as np

from .. import compiled

__all__ = ["offsets_from_lengths", "segment_ids", "gather_segments", "group",
           "csr_lookup", "search"]


def offsets_from_lengths(lengths) -> np.ndarray:
    """int64 offsets (n + 1,) of consecutive segments of the given lengths."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def segment_ids(offsets) -> np.ndarray:
    """For each element of the flat array, the index of its segment (int64)."""
    lengths = np.diff(offsets)
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def gather_segments(flat, offsets, which):
    """The segments ``which`` of ``(flat, offsets)``, concatenated: ``(flat, offsets)``."""
    which = np.asarray(which, dtype=np.int64)
    starts = offsets[which]
    lengths = offsets[which + 1] - starts
    new_offsets = offsets_from_lengths(lengths)
    idx = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    return flat[idx], new_offsets


def search(sorted_keys, needles) -> np.ndarray:
    """``np.searchsorted(sorted_keys, needles)``, faster for many needles: they are sorted
    first, so each binary search starts where the previous one ended (numpy narrows the
    range for increasing needles) and walks memory in order. In a table of int64 keys,
    once the compiled kernels run: :func:`cqa_search.compiled.search_sorted` (the same
    positions, a few cache lines a search; the needles left unsorted when the table fits
    in the cache)."""
    needles = np.asarray(needles)
    if len(sorted_keys) and sorted_keys.dtype == np.int64 and needles.dtype.kind in "iu" \
            and compiled.active() == "numba":
        return compiled.search_sorted(sorted_keys, needles)
    if len(needles) < 64:
        return np.searchsorted(sorted_keys, needles)
    order = np.argsort(needles)
    out = np.empty(len(needles), dtype=np.intp)
    out[order] = np.searchsorted(sorted_keys, needles[order])
    return out


def _bits(n) -> int:
    return max(int(n - 1).bit_length(), 1) if n > 1 else 1


def sort_with_index(keys, key_bound, payload=None, payload_bound=None):
    """Sort non-negative int64 ``keys`` and carry an integer payload along.

    The payload (default: the original positions, i.e. the sorting permutation) is packed
    into the low bits of one int64, so numpy's fast (SIMD) ``np.sort`` does the work of
    the much slower ``argsort``; when the two do not fit in 63 bits, a stable argsort is
    used instead.

    Returns
    -------
    sorted_keys : ndarray of int64
    payload : ndarray of int64, the payload in sorted order (ties by payload)
    """
    keys = np.asarray(keys, dtype=np.int64)
    payload_is_position = payload is None
    if payload is None:
        payload = np.arange(len(keys), dtype=np.int64)
        payload_bound = len(keys)
    pbits = _bits(payload_bound)
    if _bits(key_bound) + pbits <= 63:
        packed = (keys << pbits) | payload
        packed.sort()
        return packed >> pbits, packed & ((1 << pbits) - 1)
    if payload_is_position:
        order = np.argsort(keys, kind="stable")
    else:
        order = np.lexsort((payload, keys))
    return keys[order], np.asarray(payload)[order]


def group(keys, key_bound):
    """Distinct keys, the group of each key and the group sizes.

    Returns
    -------
    unique : ndarray of int64, sorted distinct keys
    inverse : ndarray of int64, ``unique[inverse] == keys``
    counts : ndarray of int64
    """
    n = len(keys)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    skeys, perm = sort_with_index(keys, key_bound)
    flags = np.empty(n, dtype=bool)
    flags[0] = True
    np.not_equal(skeys[1:], skeys[:-1], out=flags[1:])
    starts = np.flatnonzero(flags)
    gid = np.cumsum(flags) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = gid
    counts = np.diff(np.append(starts, n))
    return skeys[starts], inverse, counts


def csr_lookup(matrix, rows, cols) -> np.ndarray:
    """``matrix[rows[i], cols[i]]`` for many (row, col) pairs of a CSR matrix (0 if absent).

    The pairs are sorted first, so the binary searches walk the table in order (far
    faster than random probes when there are millions of pairs).
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    out = np.zeros(len(rows), dtype=np.float64)
    if len(rows) == 0 or matrix.nnz == 0:
        return out
    n_cols = matrix.shape[1]
    table_keys = segment_ids(matrix.indptr.astype(np.int64)) * n_cols + matrix.indices
    keys = rows * n_cols + cols
    skeys, perm = sort_with_index(keys, matrix.shape[0] * n_cols)
    pos = np.minimum(np.searchsorted(table_keys, skeys), len(table_keys) - 1)
    found = table_keys[pos] == skeys
    out[perm[found]] = matrix.data[pos[found]]
    return out

