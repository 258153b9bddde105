"""The search engine: the one module that wires the stages together.

``SearchEngine`` opens a stored index (:mod:`cqa_search.index`) and answers queries::

    typed query -> parsing (filters) -> analysis -> candidate retrieval (top-k by a term
    model) -> feature scores of the candidates -> ranker -> :class:`Results`

The engine does what a query needs before and after the questions' rows: parsing and
the filters (:class:`~cqa_search.query_parser.Filters`), analysis (the vocabulary and the
collection statistics), the first stage's orchestration and what it ran (the candidates'
:class:`~cqa_search.retrieval.first_stage.CandidateContext`, handed to the scorers that
read it), the ranker, the order and the assembly of the results. What reads the rows is
its *search back-end* (:class:`~cqa_search.searcher.Searcher`): a
:class:`~cqa_search.searcher.LocalSearcher` reads the segments of one generation in this
process; a
:class:`~cqa_search.distributed.search.ShardedSearcher` holds a sharded index, every shard
a local back-end in a Ray actor, and merges their answers. Both answer the same calls, so
everything the engine offers works on both; :func:`searcher_class` chooses the back-end
of a generation from its manifest.

Building an index is :func:`cqa_search.index.build.build_index`; evaluating a system on
judged queries is :mod:`cqa_search.evaluation.runs`; showing results to a person is
:mod:`cqa_search.presentation`.
"""
from __future__ import annotations

import dataclasses
import functools
import logging

import numpy as np

from ._utils import imported, progress_bar
from .exceptions import IndexFormatError, QueryError
from .features import AnalyzedQuery, analyze, boosted, search_ranker_name, uses_given
from .index.layout import IndexData
from .index.store import is_live, read_consistent
from .index.titles import best_completions, prefix_key
from .parallel import map_queries, n_workers
from .query_parser import (MAX_QUERY_CHARS, Filters, ParsedQuery, parse_query,
                           unknown_tags_noted, without_empty_units)
from .results import Results
from .retrieval import first_stage
from .retrieval.first_stage import CandidateContext
from .searcher import _REFIT, Candidates, LocalSearcher, SearchConfig, implausible

__all__ = ["SearchConfig", "SearchEngine", "searcher_class", "SEARCHERS"]

logger = logging.getLogger(__name__)

#: Back-end of a generation: a manifest key that selects it -> ``"module:Class"``
#: (imported on first use, so a local index never imports the others' dependencies).
SEARCHERS = {"shards": "cqa_search.distributed.search:ShardedSearcher"}


def searcher_class(stored) -> type:
    """The back-end class of a generation (:data:`SEARCHERS`; else :class:`LocalSearcher`)."""
    return next((imported(target) for key, target in SEARCHERS.items()
                 if key in stored.manifest), LocalSearcher)


class SearchEngine:
    """Searches a stored index. Create with :meth:`open`.

    The surface, the same over a local and a sharded index:

    - :meth:`search` a query typed in the query syntax (or a question's title and body),
      :meth:`similar` the questions like an archived one, :meth:`batch_search` many
      queries; each takes the filters as parameters (``category``, ``tags``,
      ``not_tags``, ``after``, ``before``), combined with those of the query text;
    - :meth:`complete`: the archived titles that begin with the words being typed;
    - :meth:`rerank`: a question taken as plain text, its category a feature (the
      protocol of judged collections), over given candidates or the whole archive;
    - :meth:`analyze`: a text as the engine analyses it;
    - read-only: the index (:attr:`index`, :attr:`archive`, :attr:`analyzer`,
      :attr:`categories`, :attr:`models`, :attr:`view`, :attr:`path`, :attr:`manifest`,
      :attr:`generation`, :attr:`n_docs`, :attr:`n_questions`, :meth:`category_counts`,
      :meth:`tag_counts`, :meth:`surface_words`) and how it ranks (:attr:`config`,
      :attr:`feature_names`, :attr:`ranker`, :attr:`given_ranker`, their names,
      :attr:`hybrid_weight`, :attr:`searcher`: the back-end);
    - :meth:`open`, :meth:`reopen`, :meth:`with_config`, :meth:`close`.

    Parameters
    ----------
    searcher : Searcher
        The search back-end (:class:`~cqa_search.searcher.LocalSearcher` for a generation
        read in this process, e.g. ``LocalSearcher(data, models, config)``, or
        :class:`~cqa_search.distributed.search.ShardedSearcher`).

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
    >>> engine.search("sofa visa", category="Visas").doc_ids
    ('a',)
    """

    def __init__(self, searcher):
        if isinstance(searcher, IndexData):
            raise TypeError("SearchEngine takes a search back-end: "
                            "SearchEngine(LocalSearcher(data, models, config)) for an "
                            "IndexData, or SearchEngine.open(path)")
        self._searcher = searcher
        self._ranker, self._given_ranker = self._make_rankers()
        self._a = self._hybrid_weight()

    # -- what the engine reads -------------------------------------------------------
    @property
    def searcher(self):
        """The search back-end (:class:`~cqa_search.searcher.Searcher`)."""
        return self._searcher

    @property
    def config(self) -> SearchConfig:
        """How this engine ranks (the back-end's checked configuration)."""
        return self._searcher.config

    @property
    def index(self):
        """The term index (:class:`~cqa_search.index.term_index.TermIndex`): vocabulary and
        collection statistics (and the postings, with a local back-end)."""
        return self._searcher.index

    @property
    def archive(self):
        """The archived questions (:class:`~cqa_search.archive.Archive`, or what reads
        them from the shards)."""
        return self._searcher.archive

    @property
    def analyzer(self):
        """The index's text analysis (:class:`~cqa_search.analysis.Analyzer`)."""
        return self._searcher.analyzer

    @property
    def categories(self):
        """The index's categories (:class:`~cqa_search.index.layout.Categories`)."""
        return self._searcher.categories

    @property
    def models(self):
        """The stored models, by name."""
        return self._searcher.models

    @property
    def view(self):
        """What models read of the index to be fitted (:class:`IndexView`)."""
        return self._searcher.view

    @property
    def path(self) -> str:
        """The index directory."""
        return self._searcher.stored.path

    @property
    def manifest(self) -> dict:
        """The manifest of the generation this engine reads (what a writer checks a model
        fitted on it against: :func:`~cqa_search.index.models.add_model`)."""
        return self._searcher.stored.manifest

    @property
    def generation(self) -> str:
        """The index generation this engine reads (see :mod:`cqa_search.index.store`)."""
        return self._searcher.stored.generation

    @property
    def n_docs(self) -> int:
        """Rows of the index, deleted questions' included (the length of row masks)."""
        return self._searcher.n_docs

    @property
    def n_questions(self) -> int:
        """Questions in the archive: rows less deleted questions."""
        return self._searcher.n_questions

    def category_counts(self) -> dict:
        """Questions per category name, deleted ones left out, most questions first (then
        by name; a category without questions left out), as :meth:`tag_counts`."""
        names, counts = self.categories, self._searcher.category_counts().tolist()
        order = sorted((i for i, n in enumerate(counts) if n),
                       key=lambda i: (-counts[i], names[i].casefold()))
        return {names[i]: counts[i] for i in order}

    def tag_counts(self) -> dict:
        """Questions per tag, deleted ones left out, most questions first (then by tag)."""
        return self._searcher.tag_counts()

    def surface_words(self) -> dict:
        """Surface word -> document frequency of its term over the fields (the candidates
        of "did you mean")."""
        return self._searcher.surface_words()

    @property
    def feature_names(self) -> tuple:
        """Names of the feature columns, in order."""
        return self._searcher.feature_names

    @property
    def ranker(self):
        """The stored ranker of free searches (None: the first stage's order)."""
        return self._ranker

    @property
    def given_ranker(self):
        """The stored ranker of candidates given with scores (:meth:`rerank` with
        ``scores``; None: their first-stage order)."""
        return self._given_ranker

    @property
    def hybrid_weight(self) -> float:
        """``a`` of the hybrid first stage (0: the retrieval model alone): from the
        configuration (:attr:`SearchConfig.hybrid`), the ranker and the index's word
        vectors."""
        return self._a

    def close(self) -> None:
        """Release the back-end's resources (a sharded index's shard actors); the engine is
        unusable afterwards."""
        self._searcher.close()

    # -- set-up ----------------------------------------------------------------------
    def _hybrid_weight(self) -> float:
        """``a`` of the hybrid first stage (0: the retrieval model alone), from the
        configuration (see :attr:`SearchConfig.hybrid`) and the back-end's word vectors."""
        wanted = self.config.hybrid
        vectors = self._searcher.has_vectors
        usable = vectors and first_stage.hybrid_capable(self.config.retrieval)
        if wanted == "auto":
            stored = getattr(self._ranker, "hybrid_weight_", None)
            default = self._searcher.default_weight
            return (default if stored is None else stored) if usable else 0.0
        if not wanted:
            return 0.0
        if not vectors:
            raise QueryError("the hybrid first stage needs the index's word vectors (or an "
                             "encoder's): this index has no embeddings model (`cqa-search "
                             "fit INDEX embeddings`), or the configuration leaves it out")
        if not usable:
            raise QueryError(f"the hybrid first stage needs a BM25-like retrieval model "
                             f"(scores that are sums of non-negative weights); got "
                             f"{self.config.retrieval.feature_name}")
        return wanted

    @property
    def ranker_name(self) -> str | None:
        """The name of :attr:`ranker`, the stored ranker of free searches (None: none)."""
        return self._name_of(self._ranker)

    @property
    def given_ranker_name(self) -> str | None:
        """The name of :attr:`given_ranker`, the stored ranker of candidates given with
        scores (None: none)."""
        return self._name_of(self._given_ranker)

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
    def open(cls, path, *, mmap=True, verify=False, config=None,
             ray=None) -> "SearchEngine":
        """Open the live generation of an index built by :func:`~cqa_search.build_index`.

        Everything is read from one generation: a writer switching the index to a new one
        meanwhile never mixes two. The back-end is the generation's
        (:func:`searcher_class`): a sharded index (``build-index --shards``) is searched
        by Ray actors holding its shards, or with its shards read in this process, with
        the same API and the same results.

        Parameters
        ----------
        path : path
        mmap : bool, default True
            Memory-map the arrays (fast open, shared pages) instead of reading them.
        verify : bool, default False
            Check every file's SHA-256 (reads the whole index).
        config : SearchConfig, optional
        ray : bool or str, optional
            A sharded index's shards searched by Ray actors: ``True`` (the Ray session of
            this process, of ``RAY_ADDRESS``, or a local one), a cluster's ``HOST:PORT``,
            or ``False``: read in this process (no Ray session started). Default: Ray when
            this process is in a Ray session already or ``RAY_ADDRESS`` is set, else this
            process (:func:`~cqa_search.distributed._ray.runs_on_ray`). Unused by an
            unsharded index.

        Raises
        ------
        IndexFormatError
            Missing, foreign, corrupted or other-version index.
        DistributedError
            A sharded index searched on Ray, and Ray is missing or its cluster cannot be
            joined.
        """
        return read_consistent(
            path, lambda stored: cls(searcher_class(stored).open(stored, config, ray=ray)),
            mmap=mmap, verify=verify)

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
        stored = self._searcher.stored
        if is_live(stored):
            return self
        engine = SearchEngine.open(self.path, mmap=stored.mmap, verify=stored.verified,
                                   config=self.config, ray=self._searcher.ray)
        engine.analyzer.share_cache(self.analyzer)  # the words analysed so far stay analysed
        return engine

    def with_config(self, config: SearchConfig) -> "SearchEngine":
        """A new engine over the same (shared) index and models with another configuration."""
        return SearchEngine(self._searcher.with_config(config))

    # -- queries ---------------------------------------------------------------------
    def analyze(self, text, category=None, *, title=None, body=None) -> AnalyzedQuery:
        """The query ``text`` analysed like the archive (its terms, their ids and counts).

        Parameters
        ----------
        text : str
            Plain text (no query syntax).
        category : str, optional
            The query's category when known (a feature, not a filter).
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
        return analyze(self.index, self.analyzer, text, category, title=title, body=body)

    @staticmethod
    def _check_k(k):
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
            raise QueryError(f"k must be a positive integer or None (all); got {k!r}")

    def _name(self, category_id):
        return None if category_id is None else self.categories[category_id]

    def search(self, query=None, k: int = 10, *, category: str | None = None, tags=None,
               not_tags=None, after=None, before=None, title: str | None = None,
               body: str | None = None) -> Results:
        """The ``k`` archived questions most similar to ``query``.

        Parameters
        ----------
        query : str or ParsedQuery
            The new question, in the query syntax of :mod:`cqa_search.query_parser`
            (``category:NAME``, ``+word``, ``-word``, ``"a phrase"``, ``title:word``,
            ``tag:NAME``, ``date:2014``, ...; plain text is taken as it is), at most
            :data:`~cqa_search.query_parser.MAX_QUERY_CHARS` characters; None with
            ``title`` or ``body``: their text, taken as it is.
        k : int or None, default 10
            Number of results (None: every matching question).
        category : str, optional
            Return only questions of this category (case-insensitive name); a
            ``category:`` in the query takes precedence.
        tags, not_tags : sequence of str, optional
            Return only questions with every one of ``tags``, and none of ``not_tags``
            (exact tags, any case: ``tag:NAME``, ``-tag:NAME``).
        after, before : str or datetime.date, optional
            Return only questions created on or after the day, month or year ``after``
            (``YYYY[-MM[-DD]]``, UTC; ``date:>=AFTER``) and before ``before``
            (``date:<BEFORE``). The filters of the query text apply too.
        title, body : str, optional
            The question's subject and body, when it is asked in these two parts (plain
            text): the per-field features compare each with the archived questions'.

        Returns
        -------
        Results
            When no question holds any of the words but some answers do, the questions
            whose answers match (``results.field == "answers"``); when none has every
            required word or phrase, the hits of the words without these requirements
            (``results.relaxed``). ``results.parsed.filters()``: every filter applied.

        Raises
        ------
        QueryError
            Empty or too long query, unknown category, bad filter, bad ``k``.
        """
        filters = Filters(category=category, tags=tags, not_tags=not_tags, after=after,
                          before=before)
        return self._search(query, k, filters, title, body)[0]

    def complete(self, text: str, k: int = 5) -> tuple:
        """The archived titles that begin with the words being typed (prefix completion,
        as a search box offers while a question is typed).

        The text is taken as plain words, never as query syntax, and compared with the
        titles normalised (case, accents' forms and punctuation aside: "how do i re"
        completes "How do I renew my visa?"; text ending in a space or a mark completes
        its last word only by itself). Questions with more answers come first, then
        shorter titles; a title several questions share is offered once; deleted
        questions never. See :mod:`cqa_search.index.titles`.

        Parameters
        ----------
        text : str
            What has been typed (at most
            :data:`~cqa_search.query_parser.MAX_QUERY_CHARS` characters).
        k : int, default 5

        Returns
        -------
        tuple of Completion
            Each with ``doc_id``, ``title`` and ``n_answers``; empty when nothing matches
            or the text has no letter or digit.

        Raises
        ------
        QueryError
            ``text`` not a string or too long, bad ``k``.

        Examples
        --------
        >>> import tempfile, os
        >>> from cqa_search import Question, build_index
        >>> out = os.path.join(tempfile.mkdtemp(), "idx")
        >>> _ = build_index([Question("a", "How to renew my visa?", answers=("At the office.",)),
        ...                  Question("b", "How to return a sofa?")], out)
        >>> [c.title for c in SearchEngine.open(out).complete("how to re")]
        ['How to renew my visa?', 'How to return a sofa?']
        >>> [c.doc_id for c in SearchEngine.open(out).complete("HOW TO RET")]
        ['b']
        """
        if k is None:
            raise QueryError("k must be a positive integer; got None")
        self._check_k(k)
        if not isinstance(text, str):
            raise QueryError(f"the text to complete must be a string; got "
                             f"{type(text).__name__}")
        if len(text) > MAX_QUERY_CHARS:
            raise QueryError(f"the text to complete is {len(text):,} characters long; at most "
                             f"{MAX_QUERY_CHARS:,} are taken")
        prefix = prefix_key(text)
        if not prefix:
            return ()
        return best_completions(self._searcher.completions(prefix, k), k)

    def prepare_completion(self) -> None:
        """Read the title keys of :meth:`complete` now rather than on its first call
        (what a server does before it serves a generation: seconds per million questions,
        once; the segments a later generation shares are not read again)."""
        self._searcher.prepare_titles()

    def _search(self, query, k, filters, title, body) -> tuple:
        """(:class:`Results`, :class:`CandidateContext`) of :meth:`search`, its filters
        checked (:class:`Filters`)."""
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
        return self._search_parsed(filters.apply(query), k, title, body)

    def _search_parsed(self, query, k, title, body) -> tuple:
        """:meth:`_search` of a parsed query with every filter."""
        query = without_empty_units(query, self.analyzer.analyze)
        cid = self.categories.id(query.category)
        name = self._name(cid)
        if query.not_categories:  # -category:travel: the exact names, checked once here
            query = dataclasses.replace(query, not_categories=tuple(
                self.categories[self.categories.id(n)] for n in query.not_categories))
        if not query.text.strip():
            raise QueryError("empty query: type some words to search for (-word and NOT "
                             "only leave words out)"
                             + "".join(f"; {notice}" for notice in query.notices))
        q = boosted(self.analyze(query.text, name, title=title, body=body), query.boosts,
                    self.index, self.analyzer)
        if query.category != name:  # what the results say was applied: the name searched
            query = dataclasses.replace(query, category=name)
        results, context = self._retrieve(q, k, cid, query)
        if not context.term_max > 0 and len(q.term_ids) \
                and self._answers_retrieval is not None:
            # No question holds the words: look for them (required words too) in the answers
            # (the hits of the question vectors alone, if none does).
            in_answers = dataclasses.replace(query, must=tuple(
                tuple(dataclasses.replace(u, field="answers") if u.field == "question" else u
                      for u in alternatives) for alternatives in query.must))
            # (analysed afresh: the vectors' lists read for the question field not reused)
            again = dataclasses.replace(q, cache={})
            fallback, in_context = self._retrieve(again, k, cid, in_answers,
                                                  self._answers_retrieval)
            if in_context.term_max > 0:
                results, context = fallback, in_context
        kept = tuple(units for units in query.must if any(u.field == "tag" for u in units))
        if not len(results) and len(kept) < len(query.must):
            # Nothing has every required word or phrase (a quotation pasted with a question,
            # say): the words without the requirements (a tag: is a filter, it stays), and
            # the results say so.
            relaxed, relaxed_context = self._search_parsed(
                dataclasses.replace(query, must=kept), k, title, body)
            if len(relaxed):
                results, context = relaxed.replace(relaxed=True), relaxed_context
        if not len(results) and kept:  # say which tag no question has
            results = results.replace(parsed=unknown_tags_noted(results.parsed,
                                                                self.tag_counts()))
        return results, context

    @functools.cached_property
    def _answers_retrieval(self):
        """The retrieval model on the answers field (made once: what a search whose words
        no question holds looks in), or None when there is none."""
        retrieval = self.config.retrieval
        if retrieval.field != "question" or "answers" not in self.index.fields:
            return None
        return retrieval.on_field("answers")

    def similar(self, doc_id: str, k: int = 10, *, category: str | None = None, tags=None,
                not_tags=None, after=None, before=None) -> Results:
        """The ``k`` archived questions most similar to the archived question ``doc_id``
        ("more like this", "asked before"): its title and body searched as a new question,
        taken as plain text, through the same retrieval, features and ranker as
        :meth:`search`; the question itself is left out. As a search's query, the text
        searched has at most :data:`~cqa_search.query_parser.MAX_QUERY_CHARS` characters:
        the title, then the start of the body (an archived question of megabytes would
        hold a server's worker for seconds).

        Parameters
        ----------
        doc_id : str
            A question of the index.
        k : int or None, default 10
        category, tags, not_tags, after, before : optional
            The filters of :meth:`search`.

        Raises
        ------
        QueryError
            Unknown (or deleted) question id, unknown category, bad filter, bad ``k``.
        """
        self._check_k(k)
        filters = Filters(category=category, tags=tags, not_tags=not_tags, after=after,
                          before=before)
        if not isinstance(doc_id, str):
            raise QueryError(f"a question id must be a string; got {type(doc_id).__name__}")
        row = int(self._searcher.rows([doc_id])[0])
        cid = self.categories.id(category)
        question = self.archive[row]
        title = question.title[:MAX_QUERY_CHARS]
        body = question.body[:max(MAX_QUERY_CHARS - len(title) - 1, 0)]
        text = "\n".join(part for part in (title, body) if part)
        parsed = filters.apply(ParsedQuery(text, self._name(cid)))
        q = self.analyze(text, self._name(cid), title=title, body=body)
        q.cache.update(self._searcher.archived_query(row))  # e.g. its stored encoder vector
        found, _ = self._retrieve(q, None if k is None else k + 1, cid, parsed)
        return found._excluding(row, k)

    def _retrieve(self, q: AnalyzedQuery, k, category_id, parsed,
                  retrieval=None) -> tuple:
        """(:class:`Results`, :class:`CandidateContext`): the ``k`` best hits of an analysed
        query (None: all) in the category (an id, or None) passing the filters of
        ``parsed`` (None: none), the first stage's candidates (by the config's retrieval
        model, or ``retrieval``) reordered by the ranker when there is one, and what the
        first stage ran."""
        model = self.config.retrieval if retrieval is None else retrieval
        if len(q.term_ids) == 0:
            empty = np.zeros(0, np.int64)
            context = CandidateContext(model)
            found = Candidates(empty, np.zeros(0), empty)
            return self._ranked(q, found, k, context, parsed), context
        if self._ranker is None:
            depth = k
        else:  # the ranker reorders the top n_candidates, and never returns fewer than k
            depth = None if k is None else max(k, self.config.n_candidates)
        found, context = self._first_stage(q, depth, category_id, parsed, model)
        return self._ranked(q, found, k, context, parsed, field=model.field), context

    def _first_stage(self, q, depth, category_id, parsed, model) -> tuple:
        """The first stage (:mod:`~cqa_search.retrieval.first_stage`): the ``depth`` best
        rows (None: all) by the term model, or by the hybrid score when this engine has a
        hybrid weight, as :class:`Candidates`, and what it ran (its
        :class:`CandidateContext`). The hybrid stage asks the back-end its four
        primitives (the term and the vector top lists, the term scores and the cosines of
        given rows), so it runs alike over local segments and over shards."""
        a = self._a if first_stage.hybrid_capable(model) else 0.0
        searcher = self._searcher
        if not a:
            # without a ranker the hits are the candidates: their features come with them
            # when the back-end computes them in the same pass (not the first-stage
            # feature's: it reads the best score of all the shards, known after it)
            found = searcher.candidates(
                q, depth, category_id, parsed, model,
                features=self._ranker is None and "first_stage" not in self.feature_names)
            term_max = float(found.scores[0]) if len(found.rows) else 0.0
            return found, CandidateContext(model, term_max)

        def term_top(m):
            found = searcher.candidates(q, m, category_id, parsed, model)
            return found.rows, found.scores

        def dense_top(m):
            found = searcher.nearest(q, m, category_id, parsed)
            return found.rows, found.scores

        with implausible(self.path, "the embeddings model"):
            merged = first_stage.hybrid_candidates(
                depth, a=a, term_top=term_top, dense_top=dense_top,
                term_scores=lambda rows: searcher.retrieval_scores(q, rows, model),
                cosines=lambda rows: searcher.cosines(q, rows),
                depth=self.config.hybrid_depth, fill=self.config.n_candidates,
                tie_rank=searcher.tie_ranks)
        found = Candidates(merged.rows, merged.scores, searcher.tie_ranks(merged.rows))
        return found, CandidateContext(model, float(merged.term_max), float(a), merged)

    def _features(self, q, rows, context) -> np.ndarray:
        """Feature matrix of candidate ``rows``: shape (len(rows), len(feature_names)).
        Candidates no first stage found (given ones: a rerank) get its basis first when
        the ``first_stage`` feature needs it: the retrieval model's best score over the
        live rows and this engine's ``a`` (over the whole index, whichever rows a
        back-end holds)."""
        if context.term_model is None and "first_stage" in self.feature_names:
            model = self.config.retrieval
            best = self._searcher.candidates(q, 1, None, None, model).scores
            context = context.with_basis(model, best[0] if len(best) else 0.0, self._a)
        return self._searcher.features(q, np.asarray(rows, dtype=np.int64), context)

    def _ranked(self, q, found: Candidates, k, context, parsed=None,
                field="question") -> Results:
        """Score candidates with the ranker (if any; of given candidates when the context
        has their scores), sort by (-score, tie), keep ``k``. Without a ranker the
        features of the hits kept are computed when first read (unless they came with the
        candidates). The hits keep the hybrid stage's parts of their scores."""
        rows = found.rows
        ranker = self._given_ranker if context.given else self._ranker
        if ranker is None:
            scores = np.asarray(found.scores, dtype=np.float64)
            order = np.arange(len(rows) if k is None else min(k, len(rows))) \
                if found.ordered else np.lexsort((found.tie, -scores))[:k]
            kept = rows[order]
            features = (lambda: self._features(q, kept, context)) \
                if found.features is None else found.features[order]  # noqa: E731
        else:
            all_features = found.features if found.features is not None else \
                self._features(q, rows, context)
            names = self.feature_names
            columns = [names.index(f) for f in ranker.feature_names_in_]
            read = all_features[:, columns]
            finite = np.isfinite(read).all(axis=0)
            if not finite.all():  # (the ranker refuses them: a stored model is damaged)
                raise IndexFormatError(
                    f"corrupted index {self.path}: feature "
                    f"{ranker.feature_names_in_[int(np.argmin(finite))]!r} is not a finite "
                    f"number (NaN or infinite) for some candidates; {_REFIT}")
            with np.errstate(over="ignore", invalid="ignore"):  # checked below
                scores = np.asarray(ranker.predict(read), dtype=np.float64)
            order = np.lexsort((found.tie, -scores))[:k]
            kept, features = rows[order], all_features[order]
        if not np.isfinite(scores).all():  # the one place every hit's score goes through
            what = "the retrieval model" if ranker is None else \
                f"ranker {self._name_of(ranker)!r}"
            raise IndexFormatError(f"corrupted index {self.path}: {what} gives scores that "
                                   f"are not finite numbers (NaN or infinite); {_REFIT}")
        doc_ids = self._searcher.doc_ids(kept) if found.doc_ids is None else \
            [found.doc_ids[i] for i in order.tolist()]
        parts = context.parts()
        return Results(q.text, kept, doc_ids, scores[order], self.feature_names, features,
                       q.terms, q.unknown_words, self.archive, field, q.category,
                       first_stage=None if parts is None else parts.take(order),
                       parsed=parsed)

    def batch_search(self, queries, qids=None, *, k=100, category=None, tags=None,
                     not_tags=None, after=None, before=None, n_jobs=None,
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
        category, tags, not_tags, after, before : optional
            The filters of :meth:`search`, for every query (a query's own are in its
            text: ``category:NAME``, ``tag:NAME``, ``date:...``).
        n_jobs : int or None, default None
            Worker processes (-1: one per core; None or 1: this process). See
            :mod:`cqa_search.parallel`.
        progress : bool
            Show a progress bar on stderr (this process only).
        """
        self._check_k(k)
        filters = Filters(category=category, tags=tags, not_tags=not_tags, after=after,
                          before=before)
        if isinstance(queries, str):
            raise QueryError("queries must be a sequence of query texts, not one string "
                             "(search() searches one)")
        queries = [(q.get("text") or None, q.get("title"), q.get("body"))
                   if isinstance(q, dict) else (q, None, None) for q in queries]
        qids = [str(i) for i in range(len(queries))] if qids is None else [str(q) for q in qids]
        if len(qids) != len(queries):
            raise QueryError(f"got {len(queries)} queries and {len(qids)} qids; they must "
                             "match")
        if len(set(qids)) != len(qids):
            raise QueryError("qids must be distinct")
        if self._searcher.forks and n_workers(n_jobs, len(queries)) > 1:
            parts = map_queries(_search_parts, queries, state=(self, k, filters),
                                n_jobs=n_jobs)
            return {qid: self._results_of(part) for qid, part in zip(qids, parts)}
        out = {}
        bar = progress_bar(progress, "searching", "queries")
        for qid, (text, title, body) in zip(qids, queries):
            out[qid] = self._search(text, k, filters, title, body)[0]
            bar.update()
        bar.close()
        return out

    def _results_of(self, parts) -> Results:
        """:class:`Results` from :func:`_search_parts` (computed in another process; the
        features that ranking did not need are computed here when first read, as in
        :meth:`search`)."""
        (text, title, body, rows, scores, features, terms, unknown, field, category, relaxed,
         stage, parsed, context) = parts
        if features is None:
            features = lambda: self._features(  # noqa: E731
                self.analyze(text, category, title=title, body=body), rows, context)
        return Results(text, rows, self._searcher.doc_ids(rows), scores,
                       self.feature_names, features, terms, unknown, self.archive, field,
                       category, relaxed, stage, parsed)

    def rerank(self, text: str, doc_ids=None, *, k=None, scores=None, category=None,
               title=None, body=None) -> Results:
        """Rank for a question taken as plain text, its category a feature (the protocol
        of judged collections, as evaluation and training run it): the given candidates
        (``doc_ids``), or, without them, the ``k`` best of the whole archive (full
        retrieval: the first stage's candidates reordered by the ranker, without the
        conveniences of :meth:`search`: no syntax, filter, answers fallback).

        Parameters
        ----------
        text : str
            The question, taken as plain text (no query syntax).
        doc_ids : sequence of str, optional
            The candidates, in their given order (ties keep it, as the SemEval scorer
            does); None: the whole archive's.
        k : int or None, default None
            How many to return (None: every candidate, or every matching question).
        scores : sequence of float, optional
            The candidates' initial scores (e.g. a search engine's), the features
            ``given_score`` and ``given_rrank``; then :attr:`given_ranker` orders them.
        category : str, optional
            The query's category when known (a feature; not a filter).
        title, body : str, optional
            The query's two parts (see :meth:`search`).

        Raises
        ------
        QueryError
            Empty query, unknown category, bad ``k``, scores without candidates, or a
            candidate id that is not in the archive.
        """
        self._check_k(k)
        cid = self.categories.id(category)
        if doc_ids is None:
            if scores is not None:
                raise QueryError("scores are those of given candidates: give their doc_ids "
                                 "too")
            q = self.analyze(text, self._name(cid), title=title, body=body)
            return self._retrieve(q, k, None, None)[0]
        if isinstance(doc_ids, str):
            raise QueryError("doc_ids must be a sequence of ids, not one string")
        rows = self._searcher.rows(doc_ids).astype(np.int64)
        context = CandidateContext()
        if scores is not None:
            if len(scores) != len(rows):
                raise QueryError(f"got {len(rows)} candidates but {len(scores)} scores")
            try:
                context = CandidateContext.of_given(rows, scores)
            except (TypeError, ValueError):
                raise QueryError(f"scores must be numbers; got {list(scores)!r}") from None
        q = self.analyze(text, self._name(cid), title=title, body=body)
        base = self._searcher.retrieval_scores(q, rows, self.config.retrieval)
        return self._ranked(q, Candidates(rows, base, np.arange(len(rows)), list(doc_ids)),
                            k, context)


def _search_parts(state, item):
    """One query of :meth:`SearchEngine.batch_search` as plain arrays (a worker's result)."""
    engine, k, filters = state
    text, title, body = item
    res, context = engine._search(text, k, filters, title, body)
    features = None if callable(res._features) else res.features  # None: not computed yet
    return (res.query, title, body, res._rows, res.scores, features, res.query_terms,
            res.unknown_words, res.field, res.category, res.relaxed, res.first_stage,
            res.parsed, context)
