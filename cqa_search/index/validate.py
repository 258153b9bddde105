"""Checks of arrays read from an index, before they reach numpy indexing or scipy.

A flipped bit in a stored offset or index array must give "corrupted index", never a
wrong answer, a huge allocation or a segmentation fault inside scipy. Every loader (the
term index, each model's ``from_state``) passes its arrays through these checks; they
raise :class:`InvalidArray` (a ``ValueError``) naming the array and what is wrong, which
the loaders report as a corrupted index.
"""
from __future__ import annotations

import numpy as np

__all__ = ["InvalidArray", "check_array", "check_offsets", "check_sparse", "check_count",
           "INT32_MAX", "INT64_MAX"]

INT32_MAX = int(np.iinfo(np.int32).max)
INT64_MAX = int(np.iinfo(np.int64).max)


class InvalidArray(ValueError):
    """A stored array is not what its reader expects."""


_KINDS = {"i": "integers", "u": "integers", "f": "floats", "U": "strings", "b": "booleans"}


def check_array(a, name, *, kind, ndim=1, shape=None, low=None, high=None,
                finite=False) -> np.ndarray:
    """``a`` after checking its dtype kind, shape and (for numbers) range.

    Parameters
    ----------
    a : ndarray
    name : str
        What the array is (used in the message).
    kind : str
        Allowed ``dtype.kind`` letters: ``"iu"`` integers, ``"f"`` floats, ``"U"`` strings.
    ndim : int
    shape : tuple, optional
        Expected shape; ``None`` entries match any length.
    low, high : number, optional
        Inclusive bounds of every element.
    finite : bool
        Refuse NaN and infinities (floats).

    Examples
    --------
    >>> check_array(np.arange(3), "rows", kind="iu", high=2).tolist()
    [0, 1, 2]
    >>> check_array(np.arange(3), "rows", kind="iu", high=1)
    Traceback (most recent call last):
    ...
    cqa_search.index.validate.InvalidArray: rows holds 2, above its bound 1
    """
    if not isinstance(a, np.ndarray):
        raise InvalidArray(f"{name} is not an array")
    if a.dtype.kind not in kind:
        wanted = " or ".join(dict.fromkeys(_KINDS.get(k, k) for k in kind))
        raise InvalidArray(f"{name} holds {a.dtype} values, expected {wanted}")
    if a.ndim != ndim:
        raise InvalidArray(f"{name} has {a.ndim} dimensions, expected {ndim}")
    if shape is not None and any(e is not None and e != s for e, s in zip(shape, a.shape)):
        want = "(" + ", ".join("*" if e is None else str(e) for e in shape) + ")"
        raise InvalidArray(f"{name} has shape {a.shape}, expected {want}")
    if a.size and a.dtype.kind in "iuf":
        if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
            raise InvalidArray(f"{name} holds NaN or infinite values")
        if low is not None:
            lo = a.min()
            if lo < low:
                raise InvalidArray(f"{name} holds {lo}, below its bound {low}")
        if high is not None:
            hi = a.max()
            if hi > high:
                raise InvalidArray(f"{name} holds {hi}, above its bound {high}")
    return a


def check_count(value, name, *, low=0, high=INT64_MAX) -> int:
    """A count read from a JSON document (a manifest, a model's metadata): an integer, not a
    bool or a float, in ``[low, high]`` (by default what an int64 holds: the arrays it
    sizes or is compared with).

    Examples
    --------
    >>> check_count(3, "n_iter")
    3
    >>> check_count(99999999999, "n_terms", high=INT32_MAX)
    Traceback (most recent call last):
    ...
    cqa_search.index.validate.InvalidArray: n_terms is 99,999,999,999, outside [0, 2,147,483,647]
    """
    if type(value) is not int:
        raise InvalidArray(f"{name} is {value!r}, not an integer")
    if not low <= value <= high:
        raise InvalidArray(f"{name} is {value:,}, outside [{low:,}, {high:,}]")
    return value


def check_offsets(indptr, name, *, length, total=None) -> np.ndarray:
    """Offsets into a flat array: integers, ``length`` entries, from 0, non-decreasing,
    ending at ``total`` (when given)."""
    check_array(indptr, name, kind="iu", shape=(length,))
    if length and int(indptr[0]) != 0:
        raise InvalidArray(f"{name} starts at {int(indptr[0])}, not 0")
    if length > 1 and bool((np.diff(indptr.astype(np.int64)) < 0).any()):
        raise InvalidArray(f"{name} is not non-decreasing")
    if total is not None and length and int(indptr[-1]) != total:
        raise InvalidArray(f"{name} ends at {int(indptr[-1])}, expected {total}")
    return indptr


def check_sparse(indptr, indices, data, shape, name, *, finite=True):
    """The three arrays of a CSR (or, transposed, CSC) matrix of ``shape``: offsets over
    the rows, column indices in range, data as long as the indices (finite floats)."""
    n_rows, n_cols = shape
    check_offsets(indptr, f"{name} offsets", length=n_rows + 1)
    nnz = int(indptr[-1]) if len(indptr) else 0
    check_array(indices, f"{name} indices", kind="iu", shape=(nnz,), low=0, high=n_cols - 1)
    check_array(data, f"{name} values", kind="fiu", shape=(nnz,), finite=finite)
    return indptr, indices, data
