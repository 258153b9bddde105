"""Search results: an immutable ranked list of hits with their feature scores."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .archive import Question

__all__ = ["Hit", "Results"]


@dataclass(frozen=True)
class Hit:
    """One result: an archived question, its score and its feature scores."""

    rank: int
    doc_id: str
    score: float
    question: Question
    features: Mapping
    row: int = -1
    first_stage: dict | None = None

    @property
    def title(self) -> str:
        return self.question.title

    @property
    def category(self):
        return self.question.category

    @property
    def best_answer(self):
        """The best answer's text, or None when the archive does not mark one."""
        return self.question.best_answer_text


def _frozen(a, dtype):
    a = np.array(a, dtype=dtype)
    a.setflags(write=False)
    return a


@functools.cache
def _arguments() -> tuple:
    """The names of :class:`Results`' constructor arguments (read once: a search must not
    pay for reflection)."""
    return tuple(inspect.signature(Results).parameters)


class Results:
    """Ranked results of one query, sorted by ``(-score, doc_id)``; immutable.

    Attributes
    ----------
    query : str
    doc_ids : tuple of str
    scores : ndarray of float64, shape (n,)
    feature_names : tuple of str
    features : ndarray of float64, shape (n, n_features)
        (Given as an array, or as a function computing it on first use.)
    query_terms : tuple of str
        The analysed query terms found in the index (what matched).
    unknown_words : tuple of str
        Query words whose term the index does not have.
    field : str
        The index field the hits matched in: ``"question"``, or ``"answers"`` when no
        question held the words and the search looked in the answers instead.
    category : str or None
        The category the search was restricted to (``category=`` or ``category:``).
    relaxed : bool
        True when no question had every required word or phrase of the query, and the
        hits are those of its words without these requirements (exclusions kept).
    first_stage : StageParts or None
        The two parts of the hits' first-stage scores (the retrieval model's score and
        the word-vector cosine, :class:`~cqa_search.retrieval.first_stage.StageParts`)
        when the hybrid first stage found them; None after the retrieval model alone.
        A hit's are ``hit.first_stage`` (a dict).
    parsed : ParsedQuery or None
        How the query was read (:func:`~cqa_search.query_parser.parse_query`): its
        requirements and filters as applied (:meth:`ParsedQuery.filters
        <cqa_search.query_parser.ParsedQuery.filters>`, the category the search kept
        included) and its notices (after :meth:`~cqa_search.SearchEngine.similar`: the
        question's text as plain text, and the category).

    Iterating gives :class:`Hit` objects (the questions are read from the index lazily).
    """

    __slots__ = ("query", "doc_ids", "scores", "feature_names", "_features", "query_terms",
                 "unknown_words", "field", "category", "relaxed", "_archive", "_rows",
                 "first_stage", "parsed")

    def __init__(self, query, rows, doc_ids, scores, feature_names, features, query_terms,
                 unknown_words, archive, field="question", category=None, relaxed=False,
                 first_stage=None, parsed=None):
        set_ = object.__setattr__
        set_(self, "query", query)
        set_(self, "doc_ids", tuple(doc_ids))
        set_(self, "scores", _frozen(scores, np.float64))
        set_(self, "feature_names", tuple(feature_names))
        set_(self, "_features", features)
        set_(self, "query_terms", tuple(query_terms))
        set_(self, "unknown_words", tuple(unknown_words))
        set_(self, "field", field)
        set_(self, "category", category)
        set_(self, "relaxed", bool(relaxed))
        set_(self, "_archive", archive)
        set_(self, "_rows", _frozen(rows, np.int64))
        set_(self, "first_stage", first_stage)
        set_(self, "parsed", parsed)

    @property
    def features(self) -> np.ndarray:
        """Feature scores of the hits, shape ``(n, n_features)`` (computed on first use
        when nothing needed them to rank)."""
        features = self._features
        if callable(features):
            features = features()
        if not (isinstance(features, np.ndarray) and not features.flags.writeable):
            features = _frozen(np.reshape(features, (len(self.doc_ids),
                                                     len(self.feature_names))), np.float64)
            object.__setattr__(self, "_features", features)
        return features

    def __setattr__(self, name, value):
        raise AttributeError("Results is immutable")

    def replace(self, **changes) -> "Results":
        """New results with the given constructor arguments changed (as
        :func:`dataclasses.replace`), e.g. ``results.replace(relaxed=True)``.

        Raises
        ------
        TypeError
            A name that is not an argument of the constructor.
        """
        names = _arguments()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"Results has no argument {unknown[0]!r} (arguments: "
                            f"{', '.join(names)})")
        # each argument is kept under its name, or under _name when a property reads it
        current = {n: getattr(self, n if n in self.__slots__ else "_" + n) for n in names}
        return Results(**{**current, **changes})

    def __len__(self):
        return len(self.doc_ids)

    def __getitem__(self, i):
        """The hit at rank ``i + 1``, or a list of hits for a slice (``results[:3]``)."""
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"results are indexed by int or slice; got {type(i).__name__}")
        if not -len(self) <= i < len(self):
            raise IndexError(f"result {i} out of range for {len(self)} results")
        i %= len(self)
        row = int(self._rows[i])
        return Hit(rank=i + 1, doc_id=self.doc_ids[i], score=float(self.scores[i]),
                   question=self._archive[row],
                   features=dict(zip(self.feature_names, self.features[i].tolist())), row=row,
                   first_stage=None if self.first_stage is None else self.first_stage.hit(i))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __contains__(self, doc_id) -> bool:
        """Whether the question ``doc_id`` is among the hits."""
        return doc_id in self.doc_ids

    def __repr__(self):
        top = ", ".join(f"{d!r}: {s:.3f}" for d, s in zip(self.doc_ids[:3], self.scores[:3]))
        more = ", ..." if len(self) > 3 else ""
        return f"Results({self.query!r}, {len(self)} hits: {{{top}{more}}})"

    def _excluding(self, row, k=None) -> "Results":
        """These results without the hit of ``row``, the first ``k`` (None: all) kept."""
        keep = np.flatnonzero(self._rows != row)[:k]
        out = object.__new__(Results)
        for name in self.__slots__:
            object.__setattr__(out, name, getattr(self, name))
        features = self._features
        set_ = object.__setattr__
        set_(out, "doc_ids", tuple(self.doc_ids[i] for i in keep.tolist()))
        set_(out, "scores", _frozen(self.scores[keep], np.float64))
        set_(out, "_rows", _frozen(self._rows[keep], np.int64))
        set_(out, "first_stage", None if self.first_stage is None else
             self.first_stage.take(keep))
        set_(out, "_features", (lambda: self.features[keep]) if callable(features)
             else np.asarray(features)[keep])
        return out

    def to_dataframe(self):
        """The hits as a pandas DataFrame: rank, doc_id, score, title, category,
        best_answer (its text, None when the archive marks none), then one column per
        feature."""
        import pandas as pd

        questions = [self._archive[int(row)] for row in self._rows]
        df = pd.DataFrame(self.features, columns=list(self.feature_names))
        for column, values in reversed((
                ("rank", np.arange(1, len(self) + 1)), ("doc_id", list(self.doc_ids)),
                ("score", self.scores), ("title", [q.title for q in questions]),
                ("category", [q.category for q in questions]),
                ("best_answer", [q.best_answer_text for q in questions]))):
            df.insert(0, column, values)
        return df
