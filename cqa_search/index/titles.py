"""Title completion: the archived titles that begin with the words being typed (prefix
completion, as Elasticsearch's completion suggester).

Titles are compared *normalised* (:func:`title_key`: NFKC, case folded, every run of
characters other than letters and digits one space), so "how do I re" completes "How do
I renew my visa?". Each segment keeps its titles' keys sorted, in one UTF-8 buffer with
their offsets: the titles that begin with a typed prefix are one contiguous range of it,
found by two binary searches. Within the range, titles rank by their questions' answers
(more first: the threads most worth opening), then length (shorter first: the closest to
what is typed), then key and doc id; a title several questions share is offered once.

A segment's keys are built from its ``archive.jsonl`` the first time a generation needs
them and kept for the next generations that share the segment
(:func:`~cqa_search.index.attributes.segment_cached`, as the tags and dates): a live
addition builds only its new segment, a deletion hides its rows (the generation's live
rows), and a compaction's segments are built anew.
"""
from __future__ import annotations

import mmap
import re
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
import orjson

from ..exceptions import IndexFormatError, rebuild_hint
from .attributes import segment_archive, segment_cached

__all__ = ["Completion", "TitleIndex", "titles_of", "title_key", "prefix_key",
           "best_completions"]

_SEPARATORS = re.compile(r"[\W_]+")
# (UTF-8 never holds the byte 0xff: every key with the prefix p sorts before p + 0xff)
_AFTER = b"\xff"


def title_key(title: str) -> str:
    """The normalised form titles are compared in.

    Examples
    --------
    >>> title_key("  How do I RENEW my visa?? ")
    'how do i renew my visa'
    >>> title_key("What's the Straße's name")
    'what s the strasse s name'
    """
    return _SEPARATORS.sub(" ", unicodedata.normalize("NFKC", title).casefold()).strip()


def prefix_key(text: str) -> str:
    """The normalised form of typed text (as :func:`title_key`), keeping one trailing space
    when the text ends between words, so that a finished word completes only itself.

    Examples
    --------
    >>> prefix_key("How do I re"), prefix_key("visa "), prefix_key("  ")
    ('how do i re', 'visa ', '')
    """
    key = title_key(text)
    if key and _SEPARATORS.fullmatch(text[-1:] or "a") is None:
        return key
    return key + " " if key else ""


@dataclass(frozen=True)
class Completion:
    """An archived question whose title completes the typed words.

    Attributes
    ----------
    doc_id : str
    title : str
        As the archive has it.
    n_answers : int
    """

    doc_id: str
    title: str
    n_answers: int

    def order_key(self) -> tuple:
        """The rank of the completion among those of one prefix (smaller first)."""
        return (-self.n_answers, len(self.title), title_key(self.title), self.doc_id)


def _read_segment(path, offsets) -> "_SegmentTitles":
    """The sorted title keys of one segment's ``archive.jsonl``."""
    n = len(offsets) - 1
    keys, rows = [], []
    n_answers = np.zeros(n, dtype=np.int32)
    lengths = np.zeros(n, dtype=np.int32)
    bounds = np.asarray(offsets, dtype=np.int64).tolist()
    with open(path, "rb") as f, (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if n
                                 else memoryview(b"")) as data:  # (not the whole file read)
        for row in range(n):
            title, answers = _title_of(data, bounds[row], bounds[row + 1], row, path)
            key = title_key(title)
            if key:  # a question without a title completes nothing
                keys.append(key)
                rows.append(row)
                n_answers[row] = answers
                lengths[row] = len(title)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    encoded = [keys[i].encode("utf-8") for i in order]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
    sorted_rows = np.asarray(rows, dtype=np.int64)[np.asarray(order, dtype=np.int64)] \
        if rows else np.zeros(0, np.int64)
    # rank of each sorted position: answers (more first), length, then key order
    ranked = np.lexsort((np.arange(len(sorted_rows)), lengths[sorted_rows],
                         -n_answers[sorted_rows]))
    rank = np.empty(len(ranked), dtype=np.int64)
    rank[ranked] = np.arange(len(ranked))
    return _SegmentTitles(b"".join(encoded), np.concatenate(([0], ends)), sorted_rows, rank,
                          n_answers)


def _title_of(data, start, stop, row, path) -> tuple:
    """``(title, number of answers)`` of a question's line of the segment's JSONL."""
    try:
        record = orjson.loads(data[start:stop])
    except orjson.JSONDecodeError as exc:
        raise IndexFormatError(f"corrupted index: question {row} of {path} cannot be read "
                               f"({exc}); {rebuild_hint()}") from None
    if not isinstance(record, dict):
        raise IndexFormatError(f"corrupted index: question {row} of {path} is not an object; "
                               f"{rebuild_hint()}")
    title, answers = record.get("title"), record.get("answers")
    return (title if isinstance(title, str) else "",
            len(answers) if isinstance(answers, list) else 0)


@dataclass(frozen=True)
class _SegmentTitles:
    """One segment's title keys: ``buffer[offsets[i]:offsets[i + 1]]`` is the ``i``-th
    key in sorted order, that of row ``rows[i]`` (of the segment), ranked ``rank[i]``
    among them; ``n_answers`` per row."""

    buffer: bytes
    offsets: np.ndarray
    rows: np.ndarray
    rank: np.ndarray
    n_answers: np.ndarray

    def key(self, i) -> bytes:
        return self.buffer[self.offsets[i]:self.offsets[i + 1]]

    def span(self, prefix: bytes) -> tuple:
        """``(lo, hi)``: the sorted positions of the keys that begin with ``prefix``."""
        n = len(self.rows)
        lo = bisect_left(range(n), prefix, key=self.key)
        return lo, bisect_left(range(lo, n), prefix + _AFTER, key=self.key) + lo


class TitleIndex:
    """The title keys of a generation's segments (:func:`titles_of`).

    Parameters
    ----------
    parts : list of (_SegmentTitles, int)
        Each segment's keys and its first row in the generation.
    """

    def __init__(self, parts):
        self._parts = parts

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and arrays held (those of segments another generation shares
        counted in both)."""
        return sum(len(p.buffer) + p.offsets.nbytes + p.rows.nbytes + p.rank.nbytes
                   + p.n_answers.nbytes for p, _ in self._parts)

    def rows(self, prefix: str, k: int, live=None) -> list:
        """Rows of at most ``k`` distinct titles that begin with ``prefix`` (a
        :func:`prefix_key`), best first by each segment's rank, ``live`` (bool per row,
        None: all) leaving out deleted questions; each as ``(row, key)``.

        A segment's best are merged by the caller (:meth:`Completion.order_key`): the
        ranks of two segments are not comparable.
        """
        wanted = prefix.encode("utf-8")
        found = []
        for part, start in self._parts:
            lo, hi = part.span(wanted)
            if hi <= lo:
                continue
            rows = part.rows[lo:hi]
            rank = part.rank[lo:hi]
            positions = np.arange(lo, hi)
            if live is not None:
                keep = np.asarray(live[start + rows])
                rows, rank, positions = rows[keep], rank[keep], positions[keep]
            seen, m = set(), 2 * k
            while True:  # the best 2k first, more only when titles repeat
                best = np.argsort(rank, kind="stable") if m >= len(rank) else \
                    np.argpartition(rank, m)[:m]
                best = best[np.argsort(rank[best], kind="stable")]
                chosen = []
                for j in best.tolist():
                    key = part.key(int(positions[j]))
                    if key not in seen:
                        seen.add(key)
                        chosen.append((int(start + rows[j]), key.decode("utf-8")))
                        if len(chosen) == k:
                            break
                if len(chosen) == k or m >= len(rank):
                    break
                seen, m = set(), 4 * m
            found.extend(chosen)
        return found


def titles_of(data) -> TitleIndex:
    """The :class:`TitleIndex` of an :class:`~cqa_search.index.layout.IndexData` (read
    once per generation; a segment's once while it is kept)."""
    found = data.cache.get("titles")
    if found is None:
        parts, start = [], 0
        for seg in data.stored.manifest["segments"]:
            path, offsets = segment_archive(data.stored, seg)
            parts.append((segment_cached(_read_segment, path, offsets), start))
            start += len(offsets) - 1
        found = data.cache["titles"] = TitleIndex(parts)
    return found


def best_completions(found, k) -> tuple:
    """The best ``k`` of :class:`Completion` s (of several segments or shards), a title
    offered once."""
    out, seen = [], set()
    for c in sorted(found, key=Completion.order_key):
        key = title_key(c.title)
        if key not in seen:
            seen.add(key)
            out.append(c)
            if len(out) == k:
                break
    return tuple(out)
