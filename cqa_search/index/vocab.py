"""Vocabulary: index term <-> ``term_id`` (int32), one per index, shared by all fields."""
from __future__ import annotations

import numpy as np

__all__ = ["Vocabulary"]


class Vocabulary:
    """Mapping between terms and contiguous int ids in first-seen order.

    Examples
    --------
    >>> v = Vocabulary(["visa", "renew"])
    >>> v.add("doha"), v.id("visa"), v.term(2), len(v)
    (2, 0, 'doha', 3)
    >>> v.ids(["renew", "nope"]).tolist()
    [1, -1]
    """

    def __init__(self, terms=()):
        self._terms = list(terms)
        self._ids = dict(zip(self._terms, range(len(self._terms))))
        if len(self._ids) != len(self._terms):  # repeated terms: the first keeps its id
            terms, self._terms, self._ids = self._terms, [], {}
            for term in terms:
                self.add(term)

    def add(self, term: str) -> int:
        """Id of ``term``, adding it when new."""
        tid = self._ids.get(term)
        if tid is None:
            tid = self._ids[term] = len(self._terms)
            self._terms.append(term)
        return tid

    def add_many(self, terms) -> list:
        """Ids of ``terms`` (a list), adding the new ones."""
        ids = self._ids
        get = ids.get
        out = [get(t) for t in terms]
        if None in out:
            out = [self.add(t) if i is None else i for t, i in zip(terms, out)]
        return out

    @property
    def id_map(self) -> dict:
        """term -> id (read-only by convention: :meth:`add` extends it)."""
        return self._ids

    def id(self, term: str) -> int:
        """Id of ``term``, or -1 when it is not in the vocabulary."""
        return self._ids.get(term, -1)

    def ids(self, terms) -> np.ndarray:
        """int32 ids of ``terms``; -1 for unknown terms."""
        get = self._ids.get
        return np.fromiter((get(t, -1) for t in terms), dtype=np.int32, count=len(terms))

    def term(self, term_id: int) -> str:
        return self._terms[term_id]

    @property
    def terms(self) -> list:
        """Terms in id order."""
        return self._terms

    def __contains__(self, term):
        return term in self._ids

    def __len__(self):
        return len(self._terms)
