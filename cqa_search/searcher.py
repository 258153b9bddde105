"""The search back-ends of :class:`~cqa_search.engine.SearchEngine`: what reads an index's rows.

A :class:`SearchEngine <cqa_search.engine.SearchEngine>` parses and analyses a query,
applies the ranker and assembles the results; everything that reads the questions' rows
is its back-end's (:class:`Searcher`): candidate selection by a term model under the
category and query-syntax filters, the feature scores of given rows, the questions and
ids of rows, and the counts. :class:`LocalSearcher` reads one generation in this process;
:class:`~cqa_search.distributed.search.ShardedSearcher` sends each call to Ray actors,
each holding one shard of a sharded index as a :class:`LocalSearcher`, and merges their
answers. Both are bound to one :class:`SearchConfig`, checked against the index
(:func:`checked_config`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

import numpy as np

from .exceptions import CQASearchError, IndexFormatError, ParameterError, QueryError
from .features import ContextFeatures, IndexView, TermFeatures, search_ranker_name
from .index.attributes import attributes_of
from .index.layout import IndexData, load_index
from .index.models import load_models
from .index.titles import Completion, titles_of
from .retrieval import (BM25, BM25F, VSM, LMDirichlet, LMJelinekMercer, TermModel, first_stage,
                        make_model, top_k)
from .retrieval.bm25f import DEFAULT_WEIGHTS
from .retrieval.candidates import top_k_of_model
from .retrieval.filters import apply_filters

__all__ = ["SearchConfig", "Searcher", "LocalSearcher", "Candidates", "checked_config"]

_REFIT = ("a stored model or statistic is implausible: fit the models again, or rebuild the "
          "index with `cqa-search build-index`")


def _default_features():
    return (BM25(), LMJelinekMercer(), LMDirichlet(), VSM(),
            BM25(field="answers"), LMJelinekMercer(field="answers"))


@dataclass(frozen=True)
class SearchConfig:
    """How an engine ranks (frozen; make a new one to change it).

    Parameters
    ----------
    retrieval : TermModel or "auto", default "auto"
        Selects and scores the candidates over the whole archive (its score is a feature
        too, unless ``features`` is empty). "auto": the model the ranker was trained with
        (``LinearRanker.retrieval_``, which ``train`` records); otherwise (no ranker, one
        fitted outside ``train`` or stored before rankers recorded it)
        :func:`default_retrieval`: BM25F with
        :data:`~cqa_search.retrieval.bm25f.DEFAULT_WEIGHTS` on an index with titles, else
        BM25.
    features : tuple of TermModel
        Term models whose scores are features of every candidate; models on fields the
        index lacks are left out.
    models : tuple of str or None, default None
        Names of the stored models (translation, topics, ...) whose features are
        computed; None for all of them.
    ranker : str or None, default "ranker"
        Name of the stored ranker that orders the candidates; None (or no such model)
        keeps the retrieval model's order. A ranker of the given-run features
        (:data:`~cqa_search.features.GIVEN_FEATURES`) orders only candidates given with
        scores; free searches use ``<name>-search`` instead (stored beside it by
        ``train --candidates``), or the retrieval model's order.
    n_candidates : int, default 100
        How many candidates of the first stage the ranker reorders (at least ``k``).
    hybrid : "auto", float in [0, 1] or None, default "auto"
        The first stage (:mod:`~cqa_search.retrieval.first_stage`): the weight ``a`` of
        the word-vector cosine in the hybrid score ``(1 - a) * T / max T + a * cos``
        (``T``: the retrieval model's score); "auto": the ``a`` stored with the ranker
        (``train`` chooses it), or :data:`~cqa_search.retrieval.first_stage.DEFAULT_WEIGHT`
        without one, when the index has word vectors (``cqa-search fit INDEX
        embeddings``) and the retrieval model is BM25-like, else the retrieval model
        alone; None or 0: the retrieval model alone.
    hybrid_depth : int, default 2
        Depth of the term and vector top lists the hybrid stage merges first, in
        candidates (doubled while the merge cannot prove its candidates to be the
        archive's best, up to :data:`~cqa_search.retrieval.first_stage.MAX_DEPTH`; the
        lists are read once at that depth and cut).
    """

    retrieval: TermModel | str = "auto"
    features: tuple = field(default_factory=_default_features)
    models: tuple | None = None
    ranker: str | None = "ranker"
    n_candidates: int = 100
    hybrid: float | str | None = "auto"
    hybrid_depth: int = first_stage.DEPTH

    def __post_init__(self):
        if not isinstance(self.retrieval, TermModel) and self.retrieval != "auto":
            raise QueryError(f"retrieval must be a TermModel or 'auto'; got {self.retrieval!r}")
        object.__setattr__(self, "features", tuple(self.features))
        if self.models is not None:
            object.__setattr__(self, "models", tuple(self.models))
        if not all(isinstance(m, TermModel) for m in self.features):
            raise QueryError("features must be TermModel instances")
        for model in (*([self.retrieval] if self.retrieval != "auto" else []), *self.features):
            model.cache_key()  # checks the model's parameters
        names = [m.feature_name for m in self.features]
        if len(set(names)) != len(names):
            raise QueryError(f"feature names must be distinct; got {names}")
        if isinstance(self.n_candidates, bool) or \
                not isinstance(self.n_candidates, numbers.Integral) or self.n_candidates < 1:
            raise QueryError(f"n_candidates must be a positive integer; got {self.n_candidates!r}")
        object.__setattr__(self, "n_candidates", int(self.n_candidates))
        if self.hybrid != "auto":
            try:
                object.__setattr__(self, "hybrid", first_stage.check_weight(self.hybrid))
            except ValueError:
                raise QueryError(f"hybrid must be 'auto', None or a number in [0, 1]; got "
                                 f"{self.hybrid!r}") from None
        if isinstance(self.hybrid_depth, bool) or \
                not isinstance(self.hybrid_depth, numbers.Integral) or self.hybrid_depth < 1:
            raise QueryError(f"hybrid_depth must be a positive integer; got "
                             f"{self.hybrid_depth!r}")


def default_retrieval(fields) -> TermModel:
    """The retrieval model of an index's searches without a ranker: BM25F with
    :data:`~cqa_search.retrieval.bm25f.DEFAULT_WEIGHTS` when the index has the titles as a
    field (``build-index`` indexes them by default: a query that is a question's title
    finds it first), else BM25."""
    return BM25F(**DEFAULT_WEIGHTS) if "title" in fields else BM25()


def _resolved_retrieval(config, fields, models) -> TermModel:
    """``config.retrieval``, "auto" resolved: the configured ranker's own (or its
    ``-search`` ranker's), else :func:`default_retrieval`."""
    if config.retrieval != "auto":
        return config.retrieval
    for name in () if config.ranker is None else (config.ranker,
                                                  search_ranker_name(config.ranker)):
        ranker = models.get(name)
        if not hasattr(ranker, "predict"):
            continue
        spec = getattr(ranker, "retrieval_", None)
        if spec is None:  # fitted outside `train`, or stored before rankers recorded it
            break
        params = {k: v for k, v in spec.items() if k != "name"}
        try:
            return make_model(spec["name"], **params)
        except (ParameterError, TypeError) as exc:
            raise IndexFormatError(f"corrupted index: ranker {name!r} records a retrieval "
                                   f"model that cannot be made ({exc})") from None
    return default_retrieval(fields)


def checked_config(config, fields, models) -> SearchConfig:
    """``config`` checked against an index's fields and models, the term features on
    fields it lacks left out, and ``retrieval="auto"`` resolved (what every back-end
    searches with)."""
    config = dataclasses.replace(config, retrieval=_resolved_retrieval(config, fields, models))
    missing = [f for f in config.retrieval.index_fields if f not in fields]
    if missing:
        raise QueryError(f"the retrieval model uses field {missing[0]!r}, which this index "
                         f"lacks (fields: {', '.join(fields)}): build it again with that field "
                         "(`cqa-search build-index` indexes the titles by default, --fields "
                         "others)")
    unknown = [n for n in config.models or () if n not in models]
    if unknown:
        raise QueryError(f"this index has no model {unknown[0]!r} "
                         f"(models: {', '.join(models) or 'none'})")
    kept = tuple(m for m in config.features if all(f in fields for f in m.index_fields))
    if kept and config.retrieval.feature_name not in {m.feature_name for m in kept}:
        kept += (config.retrieval,)  # the first stage's score is a feature too
    return dataclasses.replace(config, features=kept)


@dataclass(frozen=True)
class Candidates:
    """The candidates a back-end selected for a query, best first.

    Attributes
    ----------
    rows : ndarray of int64
    scores : ndarray of float64
        The retrieval model's.
    tie : ndarray of int64
        Ranks of their doc ids (ties of equal scores break by doc id; only their order
        among these candidates matters).
    doc_ids : list of str or None
        Their ids, when the back-end has them at hand.
    features : ndarray of shape (len(rows), n_features) or None
        Their feature scores, when asked for (``features=True``: candidates of a search,
        none given with scores) and computed in the same pass (a back-end whose rows are
        remote); None: computed on demand.
    ordered : bool
        True when they come sorted by ``(-score, tie)`` already (a top k's order), so
        that a search without a ranker does not sort them again.
    """

    rows: np.ndarray
    scores: np.ndarray
    tie: np.ndarray
    doc_ids: list | None = None
    features: np.ndarray | None = None
    ordered: bool = False


class Searcher(Protocol):
    """What a :class:`SearchEngine` asks of its search back-end.

    Rows are the back-end's (``0`` to ``n_docs - 1``; a deleted question keeps its row
    but never matches). A back-end is bound to one checked configuration
    (:func:`checked_config`) and one generation.

    Attributes
    ----------
    stored : StoredIndex
        The generation read (its manifest; the engine follows rebuilds by it).
    analyzer : Analyzer
    index : TermIndex
        The vocabulary and every field's collection statistics (what query analysis
        reads); the postings too when they are local.
    archive : Archive-like
        ``archive[row]`` (a Question), ``doc_id in archive``, ``archive.get(doc_id)``.
    categories : Categories
        Names, and counts of the live questions.
    models : mapping
        The stored models the engine reads (rankers, names, feature names).
    config : SearchConfig
    view : IndexView or None
        What the models read of the whole archive to be fitted (None: no such view).
    n_docs, n_questions : int
        Rows, and live questions.
    feature_names : tuple of str
    has_vectors : bool
        Whether the features include an embeddings model's (question vectors: the dense
        half of the hybrid first stage).
    default_weight : float
        ``a`` of the hybrid first stage without a ranker that stores one: its dense list's
        (:data:`~cqa_search.retrieval.first_stage.DEFAULT_WEIGHT` for the word vectors,
        :data:`~cqa_search.retrieval.first_stage.ENCODER_WEIGHT` for an encoder's).
    forks : bool
        Whether forked worker processes may share it (:mod:`cqa_search.parallel`).
    ray : bool, str or None
        Where a sharded back-end searches its shards, as its ``open`` took it (False:
        this process; True or an address: Ray actors); None for a local one.

    The hybrid first stage (:mod:`~cqa_search.retrieval.first_stage`) asks four
    primitives: :meth:`candidates` (the term model's best ``n``), :meth:`nearest` (the
    question vectors' best ``n``), :meth:`retrieval_scores` and :meth:`cosines` (of given
    rows), and breaks ties by :meth:`tie_ranks`: every back-end method takes a query and
    rows and returns arrays, so a sharded back-end sends it to the shards holding the
    rows and merges. The features of rows read the candidates' context
    (:class:`~cqa_search.retrieval.first_stage.CandidateContext`), which a sharded
    back-end maps to each shard's rows (:meth:`CandidateContext.local
    <cqa_search.retrieval.first_stage.CandidateContext.local>`).
    """

    def with_config(self, config) -> "Searcher":
        """The same back-end (sharing what it holds) with another configuration."""

    def candidates(self, q, depth, category_id=None, parsed=None, retrieval=None, *,
                   features=False) -> Candidates:
        """The ``depth`` best live rows by the retrieval model (None: every match) in the
        category (an id, or None) that pass the filters of ``parsed``."""

    def nearest(self, q, depth, category_id=None, parsed=None) -> Candidates:
        """The ``depth`` live rows whose question vectors have the largest cosine with the
        query's (scores: the cosines), in the category that pass the filters; none when
        the query has no word with a vector."""

    def features(self, q, rows, context) -> np.ndarray:
        """Feature matrix of ``rows`` (candidates of ``context``): shape (len(rows),
        len(feature_names))."""

    def retrieval_scores(self, q, rows, model) -> np.ndarray:
        """The term model ``model``'s scores of ``rows``."""

    def cosines(self, q, rows) -> np.ndarray:
        """The cosines of the query's vector with the question vectors of ``rows``."""

    def tie_ranks(self, rows) -> np.ndarray:
        """Ranks of the doc ids of ``rows`` (equal scores break ties by doc id: only their
        order among these rows matters)."""

    def rows(self, doc_ids) -> np.ndarray:
        """Rows of live questions by id (QueryError for an unknown id)."""

    def doc_ids(self, rows) -> list:
        """Ids of rows."""

    def category_counts(self) -> np.ndarray:
        """Live questions per category id."""

    def tag_counts(self) -> dict:
        """Live questions per tag, most first (then by tag)."""

    def surface_words(self) -> dict:
        """Surface word -> document frequency of its term (for "did you mean")."""

    def completions(self, prefix, k) -> list:
        """Up to ``k`` :class:`~cqa_search.index.titles.Completion` s of live questions
        whose titles begin with ``prefix`` (a
        :func:`~cqa_search.index.titles.prefix_key`); the engine merges and cuts them
        (:func:`~cqa_search.index.titles.best_completions`)."""

    def prepare_titles(self) -> None:
        """Read the title keys of :meth:`completions` now (else on the first)."""

    def answer_choice(self, name, row) -> int:
        """Position of the answer the answer model ``name`` chooses for ``row``."""

    def archived_query(self, row) -> dict:
        """What the scorers keep of the archived question ``row`` for a query that is its
        text (more like this): entries of the query's ``cache`` (an encoder's stored
        vector), so that the question is not encoded again."""

    def close(self) -> None:
        """Release what the back-end holds (its processes, for a remote one)."""


class LocalSearcher:
    """The search back-end of one generation read in this process (its segments as one
    index), or of a shard of a sharded index (see :mod:`cqa_search.distributed`).

    Parameters
    ----------
    data : IndexData
    models : mapping of str to estimator, optional
    config : SearchConfig, optional
    """

    forks = True
    ray = None

    def __init__(self, data: IndexData, models=None, config=None):
        self.data = data
        self.stored, self.analyzer, self.index = data.stored, data.analyzer, data.index
        self.archive, self.categories = data.archive, data.categories
        self.models = models if isinstance(models, MappingProxyType) else \
            MappingProxyType(dict(models or {}))
        self.view = IndexView(data.index, data.archive, data.analyzer, data.categories,
                              self.models)
        self.config = checked_config(config or SearchConfig(), data.index.fields, self.models)
        self._stats = None
        self._scorers = self._make_scorers()
        self.feature_names = tuple(n for s in self._scorers for n in s.names)

    @classmethod
    def open(cls, stored, config=None, *, ray=None) -> "LocalSearcher":
        """The back-end of a generation (a :class:`~cqa_search.index.store.StoredIndex`;
        ``ray``: unused, a local generation is read in this process)."""
        return cls(load_index(stored), load_models(stored), config)

    def with_config(self, config) -> "LocalSearcher":
        searcher = LocalSearcher(self.data, self.models, config)
        if self._stats is not None:
            searcher.use_stats(self._stats)
        return searcher

    @property
    def n_docs(self) -> int:
        return self.data.index.n_docs

    @property
    def n_questions(self) -> int:
        return self.data.n_questions

    @property
    def attributes(self):
        return attributes_of(self.data)

    @property
    def has_vectors(self) -> bool:
        return self._dense is not None

    @property
    def default_weight(self) -> float:
        return getattr(self._dense, "default_weight", first_stage.DEFAULT_WEIGHT)

    def _make_scorers(self):
        scorers = [TermFeatures(self.config.features, self.index), ContextFeatures(self.view)]
        names = self.config.models
        for name, model in self.models.items():
            if (names is None or name in names) and hasattr(model, "scorer"):
                with implausible(self.stored.path, f"model {name!r}"):
                    scorers.append(model.scorer(self.view))
        # the question vectors of the dense first stage: the scorer's of the model that
        # ranks first by its `dense_preference` (an encoder's before an embeddings model's)
        self._dense = max((s for s in scorers if hasattr(s, "nearest")), default=None,
                          key=lambda s: getattr(s, "dense_preference", 0))
        if self._dense is not None and first_stage.hybrid_capable(self.config.retrieval):
            scorers.append(first_stage.FirstStageFeature(self.index, self._dense))
        return scorers

    def row_stats(self) -> dict:
        """The collection statistics its scorers compute over this back-end's rows alone
        (``{key: CollectionStats}``: an embeddings model's title and body, when it stores
        them), which a shard's scorers must take over the whole index instead
        (:meth:`use_stats`)."""
        return {key: st for s in self._scorers for key, st in
                getattr(s, "row_stats", dict)().items()}

    def use_stats(self, stats) -> None:
        """Score with these statistics (the sums of every shard's :meth:`row_stats`)."""
        self._stats = stats
        for s in self._scorers:
            if hasattr(s, "use_stats"):
                s.use_stats(stats)

    def _allowed(self, category_id, parsed):
        """``(allowed, category)``: the mask of the rows a query may return (None: every
        row) and the category id still to be applied (None when none is, or the mask
        has it)."""
        allowed = self.data.live  # deleted questions never match
        if parsed is None or not parsed.has_filters:
            return allowed, category_id
        mask = np.ones(self.n_docs, dtype=bool) if allowed is None else allowed.copy()
        if category_id is not None:
            mask &= self.view.doc_category == category_id
        for name in parsed.not_categories:  # -category:Travel (exact names: the engine's)
            if name in self.categories:  # (a shard may have none of its questions)
                mask &= self.view.doc_category != self.categories.index(name)
        return apply_filters(parsed, mask, self.index, self.archive, self.analyzer,
                             lambda: self.attributes), None

    def candidates(self, q, depth, category_id=None, parsed=None, retrieval=None, *,
                   features=False) -> Candidates:
        model = self.config.retrieval if retrieval is None else retrieval
        field = model.field_index(self.index)
        must = parsed is not None and bool(parsed.must)
        allowed, category_id = self._allowed(category_id, parsed)
        tie = self.data.doc_id_rank
        if must:  # required words choose the hits; the query's words only rank them
            scores, _ = model.score_all(field, q.term_ids, q.qtf)
            rows = top_k(scores, depth, allowed=allowed, tie_rank=tie)
            scores = scores[rows]
        else:
            rows, scores = top_k_of_model(model, field, q.term_ids, q.qtf, depth,
                                          doc_category=self.view.doc_category,
                                          category=category_id, allowed=allowed, tie_rank=tie)
        rows = np.asarray(rows, dtype=np.int64)
        return Candidates(rows, np.asarray(scores, dtype=np.float64), tie[rows],
                          ordered=True)  # (top_k's order: by score, then tie rank)

    def nearest(self, q, depth, category_id=None, parsed=None) -> Candidates:
        allowed, category_id = self._allowed(category_id, parsed)
        if category_id is not None:  # the vectors read a mask only
            in_category = self.view.doc_category == category_id
            allowed = in_category if allowed is None else allowed & in_category
        tie = self.data.doc_id_rank
        with implausible(self.stored.path, "the embeddings model"):
            rows, cosines = self._dense.nearest(q, depth, allowed=allowed, tie_rank=tie)
        rows = np.asarray(rows, dtype=np.int64)
        return Candidates(rows, np.asarray(cosines, dtype=np.float64), tie[rows])

    def cosines(self, q, rows) -> np.ndarray:
        with implausible(self.stored.path, "the embeddings model"):
            return self._dense.cosines(q, rows)

    def tie_ranks(self, rows) -> np.ndarray:
        return self.data.doc_id_rank[np.asarray(rows, dtype=np.int64)]

    def features(self, q, rows, context) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        with implausible(self.stored.path, "a stored model"):
            return np.hstack([s.score(q, rows, context) if getattr(s, "reads_context", False)
                              else s.score(q, rows) for s in self._scorers]) \
                if len(self._scorers) else np.zeros((len(rows), 0))

    def retrieval_scores(self, q, rows, model) -> np.ndarray:
        return model.score_rows(model.field_index(self.index), q.term_ids, q.qtf, rows)

    def rows(self, doc_ids) -> np.ndarray:
        return self.archive.rows(doc_ids).astype(np.int64)

    def doc_ids(self, rows) -> list:
        doc_ids = self.archive.doc_ids
        return [doc_ids[r] for r in np.asarray(rows).tolist()]

    def category_counts(self) -> np.ndarray:
        return self.categories.counts(self.data.live)

    def tag_counts(self) -> dict:
        attributes = self.attributes
        counts = attributes.tag_counts(self.data.live).tolist()
        order = sorted((i for i, c in enumerate(counts) if c),
                       key=lambda i: (-counts[i], attributes.tags[i].casefold()))
        return {attributes.tags[i]: counts[i] for i in order}

    def surface_words(self) -> dict:
        return self.data.surface_words()

    def prepare_titles(self) -> None:
        titles_of(self.data)

    def completions(self, prefix, k) -> list:
        out = []
        for row, _ in titles_of(self.data).rows(prefix, k, self.data.live):
            question = self.archive[row]
            out.append(Completion(question.id, question.title, len(question.answers)))
        return out

    def answer_choice(self, name, row) -> int:
        return self.models[name].choice_of(self.view, int(row))

    def archived_query(self, row) -> dict:
        return {key: value for scorer in self._scorers if hasattr(scorer, "archived_query")
                for key, value in scorer.archived_query(int(row)).items()}

    def close(self) -> None:
        pass


@contextlib.contextmanager
def implausible(path, what):
    """A numerical failure of stored values (a forged weight that overflows, a matrix
    that cannot be factored) is a corrupted index, never a wrong answer or a bug."""
    try:
        yield
    except CQASearchError:
        raise
    except (ArithmeticError, ValueError) as exc:  # LinAlgError is a ValueError
        raise IndexFormatError(
            f"corrupted index {path}: {what} cannot score with its stored values "
            f"({type(exc).__name__}: {exc}); {_REFIT}") from None
