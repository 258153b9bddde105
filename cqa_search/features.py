"""Feature scorers: every model's score of (query, candidate) pairs, as named columns.

A :class:`FeatureScorer` has ``names`` (its columns) and ``score(query, rows)``, which
returns an array of shape ``(len(rows), len(names))`` for the candidate rows of one query.
The engine concatenates the columns of all its scorers into the feature matrix the ranker
reads; a model that is not in the index simply contributes no columns.

An :class:`AnalyzedQuery` carries what scorers need about the query, analysed once: its
distinct term ids with frequencies, its term sequence in text order, its category, and a
``cache`` where a scorer may keep what it derives from the query alone (e.g. a folded-in
topic vector). What the query's first stage ran, and the scores of candidates given with
it, are not the query's: a scorer that reads them (``reads_context = True``) is called as
``score(query, rows, context)`` with the candidates'
:class:`~cqa_search.retrieval.first_stage.CandidateContext`.

Trained models (translation tables, topic models, rankers) give their features through
``scorer(view)``; what else a stored model implements is the registry's contract
(:mod:`cqa_search.index.models`). Models see the index through an :class:`IndexView`
(term index, archive, analyzer, categories, the other stored models), both to train and
to score.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from .analysis import Analyzer
from .archive import Archive
from .index.layout import Categories
from .index.term_index import TermIndex

__all__ = ["IndexView", "AnalyzedQuery", "FeatureScorer", "TermFeatures", "ContextFeatures",
           "analyze", "boosted", "GIVEN_FEATURES", "uses_given", "search_ranker_name"]

#: The features of candidates given with scores (a run reranked: ``engine.rerank(...,
#: scores=...)``, ``evaluate --candidates``): a free search has none of them.
GIVEN_FEATURES = ("given_score", "given_rrank")


def uses_given(ranker) -> bool:
    """Whether ``ranker`` reads a feature of :data:`GIVEN_FEATURES` (then it ranks only
    candidates given with scores)."""
    return any(f in GIVEN_FEATURES for f in ranker.feature_names_in_)


def search_ranker_name(name) -> str:
    """The name of the ranker that ranks free searches for the ranker ``name`` when that
    one reads the given-run features: ``cqa-search train --candidates`` stores it beside
    ``name``, trained without them."""
    return f"{name}-search"


@dataclass(frozen=True)
class IndexView:
    """What a model may read of an index, to train or to score.

    Attributes
    ----------
    index : TermIndex
        Vocabulary and fields (postings, document lengths, term sequences).
    archive : Archive
        The questions (lazy: read from the index on access).
    analyzer : Analyzer
        The index's text analysis.
    categories : Categories
        Category names (a sequence); ``doc_category[row]`` indexes it (-1: no category).
    models : mapping of str to estimator
        The other models stored in the index (e.g. a translation table a multiview
        model translates with), by name.
    """

    index: TermIndex
    archive: Archive
    analyzer: Analyzer
    categories: Categories
    models: Mapping = field(default_factory=lambda: MappingProxyType({}))

    @property
    def n_docs(self) -> int:
        return self.index.n_docs

    @property
    def doc_category(self) -> np.ndarray:
        """Category id of every row (-1: none), shape (n_docs,)."""
        return self.categories.doc_category


@dataclass(frozen=True)
class AnalyzedQuery:
    """One analysed query.

    Attributes
    ----------
    text : str
    terms : tuple of str
        Distinct index terms of the query (in first-occurrence order).
    term_ids : ndarray of int64
        Distinct term ids, sorted.
    qtf : ndarray of float64
        Frequency in the query of each of ``term_ids``.
    sequence : ndarray of int64
        Term ids of the query in text order (repeats kept, unknown words left out).
    unknown_words : tuple of str
        Query words whose term is not in the index.
    category : str or None
        The query's category when known.
    cache : dict
        Per-query scratch space for scorers: what they derive from the query alone.
    title, body : ndarray of int64 or None
        Term ids of the query's title and body in text order, when the query comes in
        these two parts (a query of a queries file, a question asked with a subject);
        None for a query of one text. Per-field features compare them with the
        archived questions' titles and bodies.
    parts : tuple of (str, str) or None
        The query's title and body as written (``""`` for a part not given), when it
        comes in two parts (None otherwise): what a sentence encoder reads of them.
    """

    text: str
    terms: tuple
    term_ids: np.ndarray
    qtf: np.ndarray
    sequence: np.ndarray
    unknown_words: tuple = ()
    category: str | None = None
    cache: dict = field(default_factory=dict, compare=False)
    title: np.ndarray | None = None
    body: np.ndarray | None = None
    parts: tuple | None = None


def analyze(index, analyzer, text, category=None, *, title=None, body=None) -> AnalyzedQuery:
    """``text`` analysed like the archive of ``index`` (a TermIndex): its known terms, their
    ids and counts, and the words the archive lacks. ``title`` and ``body`` (strings,
    optional): the query's two parts, analysed into :attr:`AnalyzedQuery.title` and
    ``.body`` when either is given (``text`` is then usually ``title + "\\n" + body``)."""
    pairs = analyzer.pairs(text)
    sequence, terms, unknown, counts = [], [], [], {}  # (np.unique: ~40 us on a few ids)
    for (token, term), i in zip(pairs, index.known_id_list([t for _, t in pairs])):
        if i < 0:
            unknown.append(token)
        else:
            sequence.append(i)
            terms.append(term)
            counts[i] = counts.get(i, 0) + 1
    ids = sorted(counts)
    qtf = np.array([counts[i] for i in ids], dtype=np.float64)
    ids = np.array(ids, dtype=np.int64)
    sequence = np.array(sequence, dtype=np.int64)
    parts = {}
    if title is not None or body is not None:
        for name, part in (("title", title), ("body", body)):
            part_ids = index.known_ids(analyzer.analyze(part or ""))
            parts[name] = part_ids[part_ids >= 0].astype(np.int64)
        parts["parts"] = (title or "", body or "")
    return AnalyzedQuery(text, tuple(dict.fromkeys(terms)), ids, qtf,
                         sequence, tuple(dict.fromkeys(unknown)), category, **parts)


def boosted(query: AnalyzedQuery, boosts, index, analyzer) -> AnalyzedQuery:
    """``query`` with its boosted words weighing more: each ``(word, boost)`` (a word of
    ``query.text`` and its boost, :attr:`ParsedQuery.boosts
    <cqa_search.query_parser.ParsedQuery.boosts>`) counts ``boost`` instead of 1 in the
    query frequency (``qtf``) of each of its terms; a term left with none is dropped."""
    if not boosts:
        return query
    qtf = dict(zip(query.term_ids.tolist(), query.qtf.tolist()))
    for word, boost in boosts:
        for t in index.known_ids(analyzer.analyze(word)).tolist():
            if t in qtf:
                qtf[t] += boost - 1.0
    ids = np.array([t for t in query.term_ids.tolist() if qtf[t] > 0], dtype=np.int64)
    return dataclasses.replace(query, term_ids=ids,
                               qtf=np.array([qtf[t] for t in ids.tolist()], dtype=np.float64))


@runtime_checkable
class FeatureScorer(Protocol):
    """Named feature columns for the candidates of a query.

    A scorer of what the query's first stage ran or was given (its candidates' context)
    sets ``reads_context = True`` and takes it: ``score(query, rows, context)``, with a
    :class:`~cqa_search.retrieval.first_stage.CandidateContext`.
    """

    names: tuple

    def score(self, query: AnalyzedQuery, rows: np.ndarray) -> np.ndarray:
        """Features of ``rows``: shape ``(len(rows), len(self.names))``."""


class TermFeatures:
    """Term-model scores (BM25, LM, VSM on any field) as features.

    Parameters
    ----------
    models : sequence of TermModel
    index : TermIndex
    """

    def __init__(self, models, index):
        self.models = tuple(models)
        self.index = index
        self.names = tuple(m.feature_name for m in self.models)

    def score(self, query: AnalyzedQuery, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), len(self.models)))
        gathered = {}  # the postings of the rows are looked up once per field and terms
        for j, m in enumerate(self.models):
            field = m.field_index(self.index)
            # (the query terms a model scores: models of different types may share them)
            key = (id(field), m._usable(field, query.term_ids, query.qtf)[0].tobytes())
            if key not in gathered:
                gathered[key] = m.gather_rows(field, query.term_ids, query.qtf, rows)
            out[:, j] = m.score_rows(field, query.term_ids, query.qtf, rows, gathered[key])
        return out


class ContextFeatures:
    """Features of a candidate's context: given initial score/rank, category match, length.

    ``given_score`` and ``given_rrank`` (1/rank by the given scores) come with reranked
    candidates (e.g. the search-engine order of SemEval; the candidates' context's
    ``given`` and ``given_ranks``) and are 0 when none are given;
    ``category_match`` is 1 when the candidate's category is the query's (0 when either
    is unknown); ``log_length`` is ``log(1 + |question|)`` in index terms.
    """

    names = (*GIVEN_FEATURES, "category_match", "log_length")
    reads_context = True

    def __init__(self, view: IndexView):
        self.view = view
        self._doc_len = view.index["question"].doc_len

    def score(self, query: AnalyzedQuery, rows, context) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), len(self.names)))
        given, rank = context.given, context.given_ranks
        if given:
            out[:, 0] = [given.get(r, 0.0) for r in rows.tolist()]
            out[:, 1] = [1.0 / rank[r] if r in rank else 0.0 for r in rows.tolist()]
        categories = self.view.categories
        if query.category is not None and query.category in categories:
            out[:, 2] = self.view.doc_category[rows] == categories.index(query.category)
        out[:, 3] = np.log1p(self._doc_len[rows])
        return out
