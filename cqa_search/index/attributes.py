"""The tags and creation dates of an index's questions, as arrays: what the exact filters
(``tag:``, ``date:``) and the tag facet read.

They are read from the questions an index stores (its segments' ``archive.jsonl``), the
first time a generation needs them: a tag is one of a question's ``tags`` (compared
exactly, ignoring case: ``tag:gaming`` never finds ``game-theory``), and its date is the
first of :data:`~cqa_search.archive.DATE_KEYS` among the fields its reader kept that holds
a date (:func:`~cqa_search.archive.date_seconds`: the StackExchange reader's
``creation_date``, SemEval's ``date`` (``RELQ_DATE``), Yahoo! L6's ``date`` in Unix
seconds; in a JSONL archive any of these keys). A date outside 0001-01-01 to 9999-12-31,
which an index built before dates were checked may hold, is read as none, with a warning.
A segment's questions never change, so the arrays of a segment are kept for the next
generations that share it (a server following live additions reads only the new segment).
"""
from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict

import numpy as np
import orjson

from ..archive import question_date
from ..exceptions import IndexFormatError, rebuild_hint
from .layout import segment_dir

__all__ = ["QuestionAttributes", "attributes_of", "NO_DATE", "segment_cached",
           "segment_archive"]

logger = logging.getLogger(__name__)
#: The date of a question without one (no date filter keeps it).
NO_DATE = np.iinfo(np.int64).min
_SEGMENTS_KEPT = 256  # segments whose arrays are kept between generations
_cache = OrderedDict()
_lock = threading.Lock()


def _segment(path, offsets):
    """``(tags, first, indptr, ids, dates)`` of one segment's archive: its distinct tags
    (without case) with each one's first spelling, its rows' tag ids (CSR) into them, and
    its rows' dates."""
    n = len(offsets) - 1
    dates = np.full(n, NO_DATE, dtype=np.int64)
    known, first, indptr, ids, out_of_range = {}, [], [0], [], []
    with open(path, "rb") as f:
        data = f.read()
    for row in range(n):
        try:
            record = orjson.loads(data[int(offsets[row]):int(offsets[row + 1])])
        except orjson.JSONDecodeError as exc:
            raise IndexFormatError(f"corrupted index: question {row} of {path} cannot be read "
                                   f"({exc}); rebuild it with `cqa-search build-index`") from None
        tags = record.get("tags")
        for tag in dict.fromkeys(t for t in tags if isinstance(t, str) and t.strip()) \
                if isinstance(tags, list) else ():
            key = tag.strip().casefold()
            if key not in known:
                known[key] = len(first)
                first.append(tag)
            ids.append(known[key])
        indptr.append(len(ids))
        refused = []  # stored before dates were checked: no date
        when = question_date(record, refused)
        if refused:
            out_of_range.append(record.get("id"))
        if when is not None:
            dates[row] = when
    if out_of_range:
        logger.warning("%s: %d date(s) outside 0001-01-01 to 9999-12-31 (the first of question "
                       "%r) read as no date; the index was built before dates were checked: "
                       "%s", path, len(out_of_range), out_of_range[0], rebuild_hint())
    return (list(known), first, np.asarray(indptr, dtype=np.int64),
            np.asarray(ids, dtype=np.int64), dates)


def segment_cached(read, path, offsets):
    """``read(path, offsets)`` of a segment's ``archive.jsonl``, kept for the next
    generations that share the segment (the same file: a segment never changes) while
    it is among the :data:`_SEGMENTS_KEPT` last read (of every ``read``)."""
    info = os.stat(path)
    key = (read.__module__, read.__qualname__, info.st_dev, info.st_ino, info.st_size,
           info.st_mtime_ns)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    found = read(path, offsets)
    with _lock:
        _cache[key] = found
        while len(_cache) > _SEGMENTS_KEPT:
            _cache.popitem(last=False)
    return found


def segment_archive(stored, segment) -> tuple:
    """``(path, offsets)`` of the ``archive.jsonl`` of a segment (a manifest entry)."""
    folder = segment_dir(segment["name"])
    return (stored.file(f"{folder}/archive.jsonl"),
            stored.array(f"{folder}/archive_offsets.npy"))


class QuestionAttributes:
    """Each row's tags and creation date (the segments' parts, one after the other).

    Attributes
    ----------
    tags : tuple of str
        The distinct tags (compared without case; each as first met), in id order.
    tag_indptr, tag_ids : ndarray
        Row ``r``'s tag ids are ``tag_ids[tag_indptr[r]:tag_indptr[r + 1]]`` (CSR).
    dates : ndarray of int64, shape (n_rows,)
        Seconds since 1970-01-01 UTC; :data:`NO_DATE` for a question without a date.
    """

    def __init__(self, parts):
        ids, names, indptrs, id_parts, dates, start = {}, [], [np.zeros(1, np.int64)], [], [], 0
        for keys, first, indptr, local, when in parts:
            for key, name in zip(keys, first):
                if key not in ids:
                    ids[key] = len(names)
                    names.append(name)
            remap = np.array([ids[key] for key in keys], dtype=np.int64)
            id_parts.append(remap[local] if len(local) else local)
            indptrs.append(indptr[1:] + start)
            start += int(indptr[-1])
            dates.append(when)
        self.tags = tuple(names)
        self._ids = ids
        self.tag_indptr = np.concatenate(indptrs)
        self.tag_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
        self.dates = np.concatenate(dates) if dates else np.zeros(0, np.int64)
        self._tag_rows = np.repeat(np.arange(len(self.dates)), np.diff(self.tag_indptr))

    def tag_mask(self, tag) -> np.ndarray:
        """Rows having ``tag`` (ignoring case)."""
        mask = np.zeros(len(self.dates), dtype=bool)
        tid = self._ids.get(tag.strip().casefold())
        if tid is not None:
            mask[self._tag_rows[self.tag_ids == tid]] = True
        return mask

    def date_mask(self, low=None, high=None) -> np.ndarray:
        """Rows dated in ``[low, high)`` (seconds; None: unbounded); undated rows never."""
        mask = self.dates != NO_DATE
        if low is not None:
            mask &= self.dates >= low
        if high is not None:
            mask &= self.dates < high
        return mask

    def tag_counts(self, live=None) -> np.ndarray:
        """Questions per tag id (``live``: bool per row, deleted rows False)."""
        ids = self.tag_ids if live is None else self.tag_ids[np.asarray(live)[self._tag_rows]]
        return np.bincount(ids, minlength=len(self.tags))


def attributes_of(data) -> QuestionAttributes:
    """The :class:`QuestionAttributes` of an :class:`~cqa_search.index.layout.IndexData`
    (read once per generation; a segment's once while it is kept)."""
    found = data.cache.get("attributes")
    if found is None:
        stored = data.stored
        found = data.cache["attributes"] = QuestionAttributes([
            segment_cached(_segment, *segment_archive(stored, seg))
            for seg in stored.manifest["segments"]])
    return found
