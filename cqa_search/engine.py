"""The search engine: the one module that wires the stages together.

``SearchEngine`` opens a stored index (:mod:`cqa_search.index`) and answers queries::

    typed query -> parsing (filters) -> analysis -> candidate retrieval (top-k by a term
    model) -> feature scores of the candidates -> ranker -> :class:`Results`

Building an index is :func:`cqa_search.index.build.build_index`; evaluating a system on
judged queries is :mod:`cqa_search.evaluation.runs`; showing results to a person is
:mod:`cqa_search.presentation`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ._utils import progress_bar
from .exceptions import CQASearchError, IndexFormatError, QueryError
from .features import (AnalyzedQuery, ContextFeatures, IndexView, TermFeatures, analyze,
                       search_ranker_name, uses_given)
from .index.attributes import attributes_of
from .index.layout import IndexData, load_index
from .index.models import load_models
from .index.store import is_live, read_consistent
from .parallel import map_queries, n_workers
from .query_parser import MAX_QUERY_CHARS, ParsedQuery, parse_query
from .results import Results
from .retrieval import BM25, VSM, LMDirichlet, LMJelinekMercer, TermModel, top_k
from .retrieval import first_stage
from .retrieval.candidates import top_k_of_model
from .retrieval.filters import apply_filters

__all__ = ["SearchConfig", "SearchEngine"]

logger = logging.getLogger(__name__)

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
    retrieval : TermModel, default BM25()
        Selects and scores the candidates over the whole archive.
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

    retrieval: TermModel = field(default_factory=BM25)
    features: tuple = field(default_factory=_default_features)
    models: tuple | None = None
    ranker: str | None = "ranker"
    n_candidates: int = 100
    hybrid: float | str | None = "auto"
    hybrid_depth: int = first_stage.DEPTH

    def __post_init__(self):
        if not isinstance(self.retrieval, TermModel):
            raise QueryError(f"retrieval must be a TermModel; got {self.retrieval!r}")
        object.__setattr__(self, "features", tuple(self.features))
        if self.models is not None:
            object.__setattr__(self, "models", tuple(self.models))
        if not all(isinstance(m, TermModel) for m in self.features):
            raise QueryError("features must be TermModel instances")
        for model in (self.retrieval, *self.features):
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


class SearchEngine:
    """Searches a stored index. Create with :meth:`open`.

    Examples
    --------
    >>> import tempfile, os
    >>> from cqa_search import Question, build_index
    >>> qs = [Question("a", "How to renew my visa?", category="Visas", answers=("At the office.",),
    ...                best_answer=0),
    ...       Question("b", "Where to buy a cheap sofa?", category="Shopping")]
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, out)
    >>> engine = SearchEngine.open(out)
    >>> res = engine.search("visa renewal", k=5)
    >>> res.doc_ids, res[0].best_answer
    (('a',), 'At the office.')
    >>> engine.search("category:shopping sofa").doc_ids
    ('b',)
    """

    #: ``a`` of the hybrid first stage (0: the retrieval model alone chooses the
    #: candidates; see :attr:`SearchConfig.hybrid`).
    hybrid_weight = 0.0

    def __init__(self, data: IndexData, *, models=None, config=None):
        self.data = data
        self.models = MappingProxyType(dict(models or {}))
        self.view = IndexView(data.index, data.archive, data.analyzer, data.categories,
                              self.models)
        self.config = self._checked_config(config or SearchConfig())
        self._scorers = self._make_scorers()
        self.ranker, self.given_ranker = self._make_rankers()
        self.hybrid_weight = self._hybrid_weight()

    # -- what the engine reads -------------------------------------------------------
    @property
    def index(self):
        """The term index (:class:`~cqa_search.index.term_index.TermIndex`)."""
        return self.data.index

    @property
    def archive(self):
        """The archived questions (:class:`~cqa_search.archive.Archive`)."""
        return self.data.archive

    @property
    def analyzer(self):
        return self.data.analyzer

    @property
    def categories(self):
        """The index's categories (:class:`~cqa_search.index.layout.Categories`)."""
        return self.data.categories

    @property
    def path(self) -> str:
        return self.data.stored.path

    @property
    def manifest(self) -> dict:
        return self.data.stored.manifest

    @property
    def generation(self) -> str:
        """The index generation this engine reads (see :mod:`cqa_search.index.store`)."""
        return self.data.stored.generation

    @property
    def n_docs(self) -> int:
        """Rows of the index, deleted questions' included (the length of row masks)."""
        return self.index.n_docs

    @property
    def n_questions(self) -> int:
        """Questions in the archive: rows less deleted questions."""
        return self.data.n_questions

    def category_counts(self) -> np.ndarray:
        """Questions per category id (in the order of ``categories``), deleted ones left
        out."""
        return self.categories.counts(self.data.live)

    @property
    def attributes(self):
        """The questions' tags and dates
        (:class:`~cqa_search.index.attributes.QuestionAttributes`, read on first use)."""
        return attributes_of(self.data)

    def tag_counts(self) -> dict:
        """Questions per tag, deleted ones left out, most questions first (then by tag);
        empty for a sharded index (its shards filter by tag, but do not count them)."""
        if "shards" in self.manifest:
            return {}
        attributes = self.attributes
        counts = attributes.tag_counts(self.data.live).tolist()
        order = sorted((i for i, c in enumerate(counts) if c),
                       key=lambda i: (-counts[i], attributes.tags[i].casefold()))
        return {attributes.tags[i]: counts[i] for i in order}

    @property
    def feature_names(self) -> tuple:
        """Names of the feature columns, in order."""
        return tuple(n for s in self._scorers for n in s.names)

    # -- set-up ----------------------------------------------------------------------
    def _checked_config(self, config):
        if config.retrieval.field not in self.index.fields:
            raise QueryError(f"the retrieval model uses field {config.retrieval.field!r}, which "
                             f"this index lacks (fields: {', '.join(self.index.fields)})")
        unknown = [n for n in config.models or () if n not in self.models]
        if unknown:
            raise QueryError(f"this index has no model {unknown[0]!r} "
                             f"(models: {', '.join(self.models) or 'none'})")
        kept = tuple(m for m in config.features if m.field in self.index.fields)
        return dataclasses.replace(config, features=kept)

    def _make_scorers(self):
        scorers = [TermFeatures(self.config.features, self.index), ContextFeatures(self.view)]
        names = self.config.models
        for name, model in self.models.items():
            if (names is None or name in names) and hasattr(model, "scorer"):
                with self._implausible(f"model {name!r}"):
                    scorers.append(model.scorer(self.view))
        # the question vectors of the dense first stage (an embeddings model's scorer)
        self._dense = next((s for s in scorers if hasattr(s, "nearest")), None)
        if self._dense is not None and first_stage.hybrid_capable(self.config.retrieval):
            scorers.append(first_stage.FirstStageFeature(self.config.retrieval, self.index,
                                                         self._dense, self.data.live))
        return scorers

    def _hybrid_weight(self) -> float:
        """``a`` of the hybrid first stage (0: the retrieval model alone), from the
        configuration (see :attr:`SearchConfig.hybrid`)."""
        wanted = self.config.hybrid
        usable = self._dense is not None and \
            first_stage.hybrid_capable(self.config.retrieval)
        if wanted == "auto":
            stored = getattr(self.ranker, "hybrid_weight_", None)
            a = (first_stage.DEFAULT_WEIGHT if stored is None else stored) if usable else 0.0
        elif wanted:
            if self._dense is None:
                raise QueryError("the hybrid first stage needs the index's word vectors: "
                                 "this index has no embeddings model (`cqa-search fit INDEX "
                                 "embeddings`), or the configuration leaves it out")
            if not usable:
                raise QueryError(f"the hybrid first stage needs a BM25-like retrieval model "
                                 f"(scores that are sums of non-negative weights); got "
                                 f"{self.config.retrieval.feature_name}")
            a = wanted
        else:
            a = 0.0
        for s in self._scorers:
            if isinstance(s, first_stage.FirstStageFeature):
                s.a = a
        return a

    @contextlib.contextmanager
    def _implausible(self, what):
        """A numerical failure of stored values (a forged weight that overflows, a matrix
        that cannot be factored) is a corrupted index, never a wrong answer or a bug."""
        try:
            yield
        except CQASearchError:
            raise
        except (ArithmeticError, ValueError) as exc:  # LinAlgError is a ValueError
            raise IndexFormatError(
                f"corrupted index {self.path}: {what} cannot score with its stored values "
                f"({type(exc).__name__}: {exc}); {_REFIT}") from None

    @property
    def ranker_name(self) -> str | None:
        """The name of :attr:`ranker`, the stored ranker of free searches (None: none)."""
        return self._name_of(self.ranker)

    @property
    def given_ranker_name(self) -> str | None:
        """The name of :attr:`given_ranker`, the stored ranker of candidates given with
        scores (None: none)."""
        return self._name_of(self.given_ranker)

    def _name_of(self, model):
        return next((n for n, m in self.models.items() if m is model), None)

    def _make_rankers(self):
        """(``ranker``: of free searches, ``given_ranker``: of candidates given with scores,
        :meth:`rerank` with ``scores``): the configured ranker, except that one reading
        given-run features never ranks a free search, where they do not exist: its
        ``<name>-search`` does (or none), and reranks too when it alone is stored."""
        name = self.config.ranker
        named = self._stored_ranker(name)
        if named is not None and not uses_given(named):
            return named, named
        free = None if name is None else self._stored_ranker(search_ranker_name(name))
        free = None if free is None or uses_given(free) else free
        return free, (free if named is None else named)

    def _stored_ranker(self, name):
        if name is None or name not in self.models:
            return None
        ranker = self.models[name]
        if not hasattr(ranker, "predict"):
            raise QueryError(f"model {name!r} is not a ranker (it is of kind {ranker.kind!r})")
        missing = [f for f in ranker.feature_names_in_ if f not in self.feature_names]
        if missing:
            raise QueryError(f"ranker {name!r} uses features this engine does not compute: "
                             f"{', '.join(missing)} (add the models or term features it was "
                             "trained with, or search without it: SearchConfig(ranker=None), "
                             "on the command line --ranker none)")
        return ranker

    @classmethod
    def open(cls, path, *, mmap=True, verify=False, config=None) -> "SearchEngine":
        """Open the live generation of an index built by :func:`~cqa_search.build_index`.

        Everything is read from one generation: a writer switching the index to a new one
        meanwhile never mixes two. A sharded index (``build-index --shards``) opens as a
        :class:`~cqa_search.distributed.search.ShardedEngine`: the same API, each query
        sent to Ray actors holding the shards.

        Parameters
        ----------
        path : path
        mmap : bool, default True
            Memory-map the arrays (fast open, shared pages) instead of reading them.
        verify : bool, default False
            Check every file's SHA-256 (reads the whole index).
        config : SearchConfig, optional

        Raises
        ------
        IndexFormatError
            Missing, foreign, corrupted or other-version index.
        """
        def load(stored):
            if "shards" in stored.manifest:  # a sharded index: searched by Ray actors
                from .distributed.search import ShardedEngine
                return ShardedEngine(stored, config=config)
            return cls(load_index(stored), models=load_models(stored), config=config)
        return read_consistent(path, load, mmap=mmap, verify=verify)

    def reopen(self) -> "SearchEngine":
        """This engine if its generation is still the live one, else a new engine on the
        live generation (same options and configuration): what a long-running reader (a
        server) calls to follow rebuilds and refits without a restart.

        Raises
        ------
        IndexFormatError
            The index can no longer be opened (this engine stays usable: its files are
            kept open).
        """
        if is_live(self.data.stored):
            return self
        stored = self.data.stored
        engine = SearchEngine.open(self.path, mmap=stored.mmap, verify=stored.verified,
                                   config=self.config)
        engine.analyzer.share_cache(self.analyzer)  # the words analysed so far stay analysed
        return engine

    def with_config(self, config: SearchConfig) -> "SearchEngine":
        """A new engine over the same (shared) index and models with another configuration."""
        return SearchEngine(self.data, models=self.models, config=config)

    # -- queries ---------------------------------------------------------------------
    def analyze(self, text, category=None, given=None, *, title=None,
                body=None) -> AnalyzedQuery:
        """The query ``text`` analysed like the archive (its terms, their ids and counts).

        Parameters
        ----------
        text : str
            Plain text (no query syntax).
        category : str, optional
            The query's category when known (a feature, not a filter).
        given : dict, optional
            ``{row: score}`` of reranked candidates.
        title, body : str, optional
            The query's subject and body, when it has these two parts (plain text): the
            per-field features compare them with the archived questions' titles and
            bodies; a query of one text is its own title.
        """
        if not isinstance(text, str):
            raise QueryError(f"a query must be a string; got {type(text).__name__}")
        if not text.strip():
            raise QueryError("empty query: type some words to search for")
        for name, part in (("title", title), ("body", body)):
            if part is not None and not isinstance(part, str):
                raise QueryError(f"a query's {name} must be a string; got "
                                 f"{type(part).__name__}")
        if not (title or "").strip() and not (body or "").strip():
            title = body = None  # no parts: the text is the query's title
        return analyze(self.index, self.analyzer, text, category, given, title=title,
                       body=body)

    @staticmethod
    def _check_k(k):
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
            raise QueryError(f"k must be a positive integer or None (all); got {k!r}")

    def _name(self, category_id):
        return None if category_id is None else self.categories[category_id]

    def search(self, query=None, k: int = 10, *, category: str | None = None,
               title: str | None = None, body: str | None = None) -> Results:
        """The ``k`` archived questions most similar to ``query``.

        Parameters
        ----------
        query : str or ParsedQuery
            The new question, in the query syntax of :mod:`cqa_search.query_parser`
            (``category:NAME``, ``+word``, ``-word``, ``"a phrase"``, ``title:word``, ...;
            plain text is taken as it is), at most
            :data:`~cqa_search.query_parser.MAX_QUERY_CHARS` characters; None with
            ``title`` or ``body``: their text, taken as it is.
        k : int or None, default 10
            Number of results (None: every matching question).
        category : str, optional
            Return only questions of this category (case-insensitive name); a
            ``category:`` in the query takes precedence.
        title, body : str, optional
            The question's subject and body, when it is asked in these two parts (plain
            text): the per-field features compare each with the archived questions'.

        Returns
        -------
        Results
            When no question holds any of the words but some answers do, the questions
            whose answers match (``results.field == "answers"``); when none has every
            required word or phrase, the hits of the words without these requirements
            (``results.relaxed``).

        Raises
        ------
        QueryError
            Empty or too long query, unknown category, bad ``k``.
        """
        self._check_k(k)
        if query is None and (title or body):
            query = ParsedQuery("\n".join(t for t in (title, body) if t))
        if not isinstance(query, (str, ParsedQuery)):
            raise QueryError(f"a query must be a string; got {type(query).__name__}")
        if isinstance(query, str):
            if len(query) > MAX_QUERY_CHARS:
                raise QueryError(f"the query has {len(query):,} characters; at most "
                                 f"{MAX_QUERY_CHARS:,} are taken")
            query = parse_query(query)
        cid = self.categories.id(query.category or category)
        if not query.text.strip():
            raise QueryError("empty query: type some words to search for (NOT and - only "
                             "leave words out)")
        q = self.analyze(query.text, self._name(cid), title=title, body=body)
        results = self._retrieve(q, k, cid, query)
        retrieval = self.config.retrieval
        if not first_stage.term_matched(q, results) and len(q.term_ids) \
                and retrieval.field == "question" and "answers" in self.index.fields:
            # No question holds the words: look for them (required words too) in the answers
            # (the hits of the question vectors alone, if none does).
            answers = type(retrieval)(**{**retrieval.get_params(), "field": "answers"})
            in_answers = dataclasses.replace(query, must=tuple(
                tuple(dataclasses.replace(u, field="answers") if u.field == "question" else u
                      for u in alternatives) for alternatives in query.must))
            again = dataclasses.replace(q, cache={})
            fallback = self._retrieve(again, k, cid, in_answers, retrieval=answers)
            if first_stage.term_matched(again, fallback):
                results = fallback
        kept = tuple(units for units in query.must if any(u.field == "tag" for u in units))
        if not len(results) and len(kept) < len(query.must):
            # Nothing has every required word or phrase (a quotation pasted with a question,
            # say): the words without the requirements (a tag: is a filter, it stays), and
            # the results say so.
            relaxed = self.search(dataclasses.replace(query, must=kept), k, category=category,
                                  title=title, body=body)
            if len(relaxed):
                results = relaxed.replace(relaxed=True)
        return results

    def similar(self, doc_id: str, k: int = 10, *, category: str | None = None) -> Results:
        """The ``k`` archived questions most similar to the archived question ``doc_id``
        ("more like this", "asked before"): its title and body searched as a new question,
        taken as plain text, through the same retrieval, features and ranker as
        :meth:`search`; the question itself is left out.

        Parameters
        ----------
        doc_id : str
            A question of the index.
        k : int or None, default 10
        category : str, optional
            Return only questions of this category (as :meth:`search`).

        Raises
        ------
        QueryError
            Unknown (or deleted) question id, unknown category, bad ``k``.
        """
        self._check_k(k)
        if not isinstance(doc_id, str):
            raise QueryError(f"a question id must be a string; got {type(doc_id).__name__}")
        row = int(self.archive.rows([doc_id])[0])
        cid = self.categories.id(category)
        question = self.archive[row]
        q = self.analyze(question.text, self._name(cid), title=question.title,
                         body=question.body)
        return self._retrieve(q, None if k is None else k + 1, cid)._excluding(row, k)

    def _retrieve(self, q: AnalyzedQuery, k, category_id, parsed=None,
                  retrieval=None) -> Results:
        """The ``k`` best hits of an analysed query (None: all) in the category (an id, or
        None) passing the filters of ``parsed``: the retrieval model's candidates (the
        config's, or ``retrieval``), reordered by the ranker when there is one. What
        :meth:`search` and :meth:`retrieve` run once the query is analysed."""
        model = self.config.retrieval if retrieval is None else retrieval
        if len(q.term_ids) == 0:
            empty = np.zeros(0, np.int64)
            return self._ranked(q, empty, np.zeros(0), empty, k)
        if self.ranker is None:
            depth = k
        else:  # the ranker reorders the top n_candidates, and never returns fewer than k
            depth = None if k is None else max(k, self.config.n_candidates)
        rows, scores, parts = self._first_stage(q, depth, category_id, parsed, model)
        return self._ranked(q, rows, scores, self.data.doc_id_rank[rows], k, field=model.field,
                            parts=parts)

    def _first_stage(self, q, depth, category_id, parsed, model):
        """The first stage (:mod:`~cqa_search.retrieval.first_stage`): the ``depth`` best
        rows (None: all) by the term model, or by the hybrid score when this engine has a
        hybrid weight, their scores and (hybrid) the two parts of their scores."""
        allowed, category = self._allowed(category_id, parsed)
        must = parsed is not None and bool(parsed.must)
        tie = self.data.doc_id_rank

        def term_top(m):
            return self._term_top(q, m, model, allowed, category, must)
        a = self.hybrid_weight if first_stage.hybrid_capable(model) else 0.0
        if not a:
            rows, scores = term_top(depth)
            first_stage.remember_basis(q, model, scores[0] if len(scores) else 0.0, 0.0)
            return rows, scores, None
        dense_allowed = allowed
        if category is not None:  # the vectors read a mask only
            dense_allowed = self.view.doc_category == category
            if allowed is not None:
                dense_allowed &= allowed
        field = self.index[model.field]
        with self._implausible("the embeddings model"):
            merged = first_stage.hybrid_candidates(
                depth, a=a, term_top=term_top,
                dense_top=lambda m: self._dense.nearest(q, m, allowed=dense_allowed,
                                                        tie_rank=tie),
                term_scores=lambda r: model.score_rows(field, q.term_ids, q.qtf, r),
                cosines=lambda r: self._dense.cosines(q, r), depth=self.config.hybrid_depth,
                fill=self.config.n_candidates, tie_rank=tie)
        first_stage.remember_basis(q, model, merged.term_max, a, merged)
        return merged.rows, merged.scores, first_stage.StageParts(
            a, model.feature_name, merged.term_max, merged.term_scores, merged.dense_scores,
            merged.exact)

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
        for name in parsed.not_categories:  # -category:Travel
            mask &= self.view.doc_category != self.categories.id(name)
        return apply_filters(parsed, mask, self.index, self.archive, self.analyzer,
                             lambda: self.attributes), None

    def _term_top(self, q, depth, model, allowed, category, must):
        """The ``depth`` best rows by the term ``model`` among ``allowed`` (and of
        ``category``), sorted by (-score, doc id), and their scores."""
        field = self.index[model.field]
        tie = self.data.doc_id_rank
        if must:  # required words choose the hits; the query's words only rank them
            scores, _ = model.score_all(field, q.term_ids, q.qtf)
            rows = top_k(scores, depth, allowed=allowed, tie_rank=tie)
            return rows, scores[rows]
        return top_k_of_model(model, field, q.term_ids, q.qtf, depth,
                              doc_category=self.view.doc_category, category=category,
                              allowed=allowed, tie_rank=tie)

    def candidates(self, q: AnalyzedQuery, depth, category_id=None, parsed=None,
                   retrieval=None):
        """The ``depth`` best rows by the retrieval model (None: every matching row) and
        their scores, sorted by (-score, doc id): the term model's part of the first stage
        (what each shard of a sharded index answers)."""
        model = self.config.retrieval if retrieval is None else retrieval
        allowed, category = self._allowed(category_id, parsed)
        return self._term_top(q, depth, model, allowed, category,
                              parsed is not None and bool(parsed.must))

    def feature_scores(self, q: AnalyzedQuery, rows) -> np.ndarray:
        """Feature matrix of candidate ``rows``: shape (len(rows), len(feature_names))."""
        rows = np.asarray(rows, dtype=np.int64)
        with self._implausible("a stored model"):
            return np.hstack([s.score(q, rows) for s in self._scorers]) \
                if len(self._scorers) else np.zeros((len(rows), 0))

    def _ranked(self, q, rows, base_scores, tie, k, field="question", parts=None) -> Results:
        """Score candidates with the ranker (if any; of given candidates when ``q`` has
        their scores), sort by (-score, tie), keep ``k``. Without a ranker the features
        of the hits kept are computed when first read. ``parts``: the first stage's
        parts of the candidates' scores (a hybrid stage's), kept for the hits."""
        ranker = self.given_ranker if q.given else self.ranker
        if ranker is None:
            scores = np.asarray(base_scores, dtype=np.float64)
            order = np.lexsort((tie, -scores))[:k]
            kept = rows[order]
            features = lambda: self.feature_scores(q, kept)  # noqa: E731
        else:
            all_features = self.feature_scores(q, rows)
            names = self.feature_names
            columns = [names.index(f) for f in ranker.feature_names_in_]
            with np.errstate(over="ignore", invalid="ignore"):  # checked below
                scores = np.asarray(ranker.predict(all_features[:, columns]),
                                    dtype=np.float64)
            order = np.lexsort((tie, -scores))[:k]
            kept, features = rows[order], all_features[order]
        if not np.isfinite(scores).all():  # the one place every hit's score goes through
            what = "the retrieval model" if ranker is None else \
                f"ranker {self._name_of(ranker)!r}"
            raise IndexFormatError(f"corrupted index {self.path}: {what} gives scores that "
                                   f"are not finite numbers (NaN or infinite); {_REFIT}")
        doc_ids = self.archive.doc_ids
        return Results(q.text, kept, [doc_ids[r] for r in kept.tolist()], scores[order],
                       self.feature_names, features, q.terms, q.unknown_words,
                       self.archive, field, q.category,
                       first_stage=None if parts is None else parts.take(order))

    def batch_search(self, queries, qids=None, *, k=100, categories=None, n_jobs=None,
                     progress=False) -> dict:
        """Search many queries: ``{qid: Results}`` in query order.

        Parameters
        ----------
        queries : sequence of str or dict
            In the query syntax, as :meth:`search`; or dicts ``{"text", "title"?,
            "body"?}`` (as :func:`~cqa_search.evaluation.read_queries` gives them): the
            text and the query's two parts (see :meth:`search`).
        qids : sequence of str, optional
            Query ids (default "0", "1", ...); must be distinct.
        k : int or None, default 100
        categories : sequence of (str or None), optional
            A category filter per query.
        n_jobs : int or None, default None
            Worker processes (-1: one per core; None or 1: this process). See
            :mod:`cqa_search.parallel`.
        progress : bool
            Show a progress bar on stderr (this process only).
        """
        self._check_k(k)
        if isinstance(queries, str):
            raise QueryError("queries must be a sequence of query texts, not one string "
                             "(search() searches one)")
        queries = [(q.get("text") or None, q.get("title"), q.get("body"))
                   if isinstance(q, dict) else (q, None, None) for q in queries]
        qids = [str(i) for i in range(len(queries))] if qids is None else [str(q) for q in qids]
        categories = [None] * len(queries) if categories is None else list(categories)
        if not len(qids) == len(queries) == len(categories):
            raise QueryError(f"got {len(queries)} queries, {len(qids)} qids and "
                             f"{len(categories)} categories; they must match")
        if len(set(qids)) != len(qids):
            raise QueryError("qids must be distinct")
        if n_workers(n_jobs, len(queries)) > 1:
            parts = map_queries(_search_parts, zip(queries, categories), state=(self, k),
                                n_jobs=n_jobs)
            return {qid: self._results_of(part) for qid, part in zip(qids, parts)}
        out = {}
        bar = progress_bar(progress, "searching", "queries")
        for qid, (text, title, body), cat in zip(qids, queries, categories):
            out[qid] = self.search(text, k, category=cat, title=title, body=body)
            bar.update()
        bar.close()
        return out

    def _results_of(self, parts) -> Results:
        """:class:`Results` from :func:`_search_parts` (computed in another process; the
        features that ranking did not need are computed here when first read, as in
        :meth:`search`)."""
        (text, title, body, rows, scores, features, terms, unknown, field, category, relaxed,
         stage) = parts
        if features is None:
            features = lambda: self.feature_scores(  # noqa: E731
                self.analyze(text, category, title=title, body=body), rows)
        doc_ids = self.archive.doc_ids
        return Results(text, rows, [doc_ids[r] for r in rows.tolist()], scores,
                       self.feature_names, features, terms, unknown, self.archive, field,
                       category, relaxed, stage)

    def rerank(self, text: str, doc_ids, *, scores=None, category=None, title=None,
               body=None) -> Results:
        """Order only the given candidates (the rerank protocol).

        Parameters
        ----------
        text : str
            The query, taken as plain text (no query syntax).
        doc_ids : sequence of str
            The candidates, in their given order (ties keep it, as the SemEval scorer does).
        scores : sequence of float, optional
            Their initial scores (e.g. a search engine's), the features ``given_score``
            and ``given_rrank``.
        category : str, optional
            The query's category when known (a feature; not a filter).
        title, body : str, optional
            The query's two parts (see :meth:`search`).

        Raises
        ------
        QueryError
            Empty query, unknown category, or a candidate id that is not in the archive.
        """
        cid = self.categories.id(category)
        if isinstance(doc_ids, str):
            raise QueryError("doc_ids must be a sequence of ids, not one string")
        rows = self.archive.rows(doc_ids).astype(np.int64)
        given = None
        if scores is not None:
            if len(scores) != len(rows):
                raise QueryError(f"got {len(rows)} candidates but {len(scores)} scores")
            try:
                given = dict(zip(rows.tolist(), map(float, scores)))
            except (TypeError, ValueError):
                raise QueryError(f"scores must be numbers; got {list(scores)!r}") from None
        q = self.analyze(text, self._name(cid), given, title=title, body=body)
        return self._ranked(q, rows, self._retrieval_scores(q, rows), np.arange(len(rows)),
                            None)

    def _retrieval_scores(self, q: AnalyzedQuery, rows) -> np.ndarray:
        """The retrieval model's scores of ``rows`` for ``q`` (a sharded engine asks the
        shards holding them)."""
        model = self.config.retrieval
        return model.score_rows(self.index[model.field], q.term_ids, q.qtf, rows)

    def retrieve(self, text: str, k, *, category=None, title=None, body=None) -> Results:
        """Full retrieval of ``text`` taken as plain text (no query syntax), as evaluation
        runs it: the top ``k`` of the whole archive, ``category`` being the query's
        category (a feature, not a filter); ``title`` and ``body``: the query's two parts
        (see :meth:`search`)."""
        self._check_k(k)
        cid = self.categories.id(category)
        return self._retrieve(self.analyze(text, self._name(cid), title=title, body=body),
                              k, None)


def _search_parts(state, item):
    """One query of :meth:`SearchEngine.batch_search` as plain arrays (a worker's result)."""
    engine, k = state
    (text, title, body), category = item
    res = engine.search(text, k, category=category, title=title, body=body)
    features = None if callable(res._features) else res.features  # None: not computed yet
    return (res.query, title, body, res._rows, res.scores, features, res.query_terms,
            res.unknown_words, res.field, res.category, res.relaxed, res.first_stage)
