"""The search engine: the one module that wires the stages together.

``build_index`` reads an archive, analyses it, builds the term index and stores it;
``SearchEngine`` opens a stored index and answers queries:

    query text -> analysis -> candidate retrieval (top-k by a term model)
               -> feature scores of the hits -> :class:`Results`
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import logging
import os
import sys
import time
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .analysis import Analyzer
from .archive import Archive, Question
from .exceptions import ArchiveError, IndexFormatError, QueryError
from .features import ContextFeatures, IndexView, QueryContext, TermFeatures
from .index.store import IndexWriter, open_index, save_model
from .index.term_index import FIELDS, FieldIndex, TermIndex, TermIndexBuilder
from .index.vocab import Vocabulary
from .query import Suggester, highlight
from .readers import ReadReport, read_questions
from .results import Hit, Results
from .retrieval import BM25, VSM, LMDirichlet, LMJelinekMercer, TermModel
from .retrieval.candidates import retrieve

__all__ = ["build_index", "BuildSummary", "SearchConfig", "SearchEngine", "Results", "Hit",
           "add_model", "MODEL_KINDS"]

logger = logging.getLogger(__name__)

DEFAULT_FIELDS = ("question", "answers")


def _default_features():
    return (BM25(), LMJelinekMercer(), LMDirichlet(), VSM(),
            BM25(field="answers"), LMJelinekMercer(field="answers"))


# ---------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildSummary:
    """What :func:`build_index` did."""

    path: str
    n_questions: int
    n_answers: int
    n_categories: int
    n_terms: int
    n_skipped: int
    seconds: float
    fields: Mapping = field(default_factory=dict)
    skipped_examples: tuple = ()

    def __str__(self):
        lines = [f"index      {self.path}",
                 f"questions  {self.n_questions:,}" + (
                     f" ({self.n_skipped:,} invalid records skipped)" if self.n_skipped else ""),
                 f"answers    {self.n_answers:,}",
                 f"categories {self.n_categories:,}",
                 f"vocabulary {self.n_terms:,} terms"]
        for name, stats in self.fields.items():
            lines.append(f"field      {name}: {stats['total_terms']:,} tokens, "
                         f"{stats['nnz']:,} postings")
        lines.append(f"time       {self.seconds:.1f} s")
        return "\n".join(lines)


def _paths(archive):
    """The list of paths when ``archive`` is a path or a list of paths, else None."""
    if isinstance(archive, (str, os.PathLike)):
        return [os.fspath(archive)]
    if isinstance(archive, (list, tuple)) and archive and all(
            isinstance(p, (str, os.PathLike)) for p in archive):
        return [os.fspath(p) for p in archive]
    return None


def build_index(archive, path, *, analyzer=None, fields=DEFAULT_FIELDS, format=None,
                skip_invalid=False, progress=False, **reader_options) -> BuildSummary:
    """Index an archive into the directory ``path`` (atomically).

    Parameters
    ----------
    archive : path, list of paths, Archive or iterable of Question
        The questions; files are read streaming with :func:`cqa_search.readers.read_questions`.
    path : path
        Index directory to create (an existing index there is replaced; any other
        non-empty directory is refused).
    analyzer : Analyzer, optional
        Text analysis (default ``Analyzer()``); saved in the index.
    fields : sequence of str, default ("question", "answers")
        Fields to index, among :data:`cqa_search.index.term_index.FIELDS`.
    format : str, optional
        Reader for path input (detected when None).
    skip_invalid : bool, default False
        Skip invalid records (counted in the summary) instead of failing.
    progress : bool, default False
        Show a progress bar on stderr.
    **reader_options
        Options of the reader (e.g. ``columns`` for CSV).

    Returns
    -------
    BuildSummary

    Raises
    ------
    ArchiveError
        Unreadable archive, invalid record (unless skipped), duplicate id, empty archive.
    IndexFormatError
        ``path`` is a non-index directory.

    Examples
    --------
    >>> import tempfile, os
    >>> from cqa_search import Question
    >>> qs = [Question("a", "renew my visa", category="Visas"), Question("b", "cheap sofa")]
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> build_index(qs, out).n_questions
    2
    """
    t0 = time.perf_counter()
    analyzer = Analyzer() if analyzer is None else analyzer
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or not fields or "question" not in fields:
        raise ValueError(f"fields must include 'question' and be among "
                         f"{{{', '.join(map(repr, FIELDS))}}}; got {tuple(fields)!r}")
    report = ReadReport(skip_invalid=skip_invalid)
    sources = _paths(archive)
    if sources is not None:
        questions = read_questions(sources, format=format, report=report, **reader_options)
    elif format is not None or reader_options:
        raise ValueError("format and reader options apply only when archive is a path")
    elif isinstance(archive, Iterable):
        questions = iter(archive)
    else:
        raise TypeError(f"archive must be a path, a list of paths, an Archive or an iterable "
                        f"of Question; got {type(archive).__name__}")
    with IndexWriter(path) as writer:
        builder = TermIndexBuilder(analyzer, fields)
        offsets = array("q", [0])
        doc_ids, seen = [], set()
        categories, doc_category = {}, array("i")
        n_answers = n_best = n_dup_links = 0
        bar = _progress(progress, "indexing", "questions")
        with writer.open("archive.jsonl", "wb") as out:
            for question in questions:
                if not isinstance(question, Question):
                    raise TypeError(f"archive items must be Question; got "
                                    f"{type(question).__name__}")
                if question.id in seen:
                    raise ArchiveError(f"duplicate question id {question.id!r}")
                seen.add(question.id)
                line = question.to_json_bytes() + b"\n"
                out.write(line)
                offsets.append(offsets[-1] + len(line))
                doc_ids.append(question.id)
                cat = question.category
                doc_category.append(-1 if cat is None else categories.setdefault(cat, len(categories)))
                n_answers += len(question.answers)
                n_best += question.best_answer is not None
                n_dup_links += len(question.duplicate_of)
                builder.add(question)
                bar.update()
        bar.close()
        if not doc_ids:
            raise ArchiveError("the archive is empty: no question was read"
                               + (f" ({report.n_skipped} invalid records skipped)"
                                  if report.n_skipped else ""))
        logger.info("building postings for %d questions", len(doc_ids))
        index = builder.build()
        manifest_fields = {}
        for name, fi in index.fields.items():
            base = f"fields/{name}"
            writer.array(f"{base}/indptr.npy", fi.indptr)
            writer.array(f"{base}/indices.npy", fi.indices)
            writer.array(f"{base}/counts.npy", fi.counts)
            writer.array(f"{base}/doc_len.npy", fi.doc_len)
            writer.array(f"{base}/sequence.npy", fi.sequence)
            stats = {"nnz": fi.nnz, "total_terms": fi.total_terms, "weights": {}}
            if name == "question":  # precomputed BM25 weights: the hot path of search
                bm25 = BM25()
                writer.array(f"{base}/bm25.npy", bm25.posting_weights(fi))
                stats["weights"][bm25.cache_key()] = f"{base}/bm25.npy"
            manifest_fields[name] = stats
        # Candidate words for "did you mean", with the document frequency of their term.
        df = sum(fi.df for fi in index.fields.values())
        vocab = index.vocab
        surface = {tok: int(df[vocab.id(term)]) for tok, term in
                   analyzer.surface_forms().items() if vocab.id(term) >= 0}
        category_names = list(categories)
        writer.json("vocab.json", vocab.terms)
        writer.json("doc_ids.json", doc_ids)
        writer.json("categories.json", category_names)
        writer.json("surface.json", surface)
        writer.array("archive_offsets.npy", np.frombuffer(offsets, dtype=np.int64))
        writer.array("doc_category.npy", np.frombuffer(doc_category, dtype=np.int32))
        rank = np.empty(len(doc_ids), dtype=np.int32)
        rank[np.array(sorted(range(len(doc_ids)), key=doc_ids.__getitem__), dtype=np.int64)] = \
            np.arange(len(doc_ids), dtype=np.int32)
        writer.array("doc_id_rank.npy", rank)
        stats = {"n_docs": len(doc_ids), "n_terms": len(vocab), "n_answers": n_answers,
                 "n_with_best_answer": n_best, "n_categories": len(category_names),
                 "n_duplicate_links": n_dup_links, "n_skipped": report.n_skipped}
        writer.commit({"analyzer": analyzer.to_config(), "fields": manifest_fields,
                       "stats": stats, "sources": sources or [], "models": {}})
    return BuildSummary(
        path=os.fspath(path), n_questions=len(doc_ids), n_answers=n_answers,
        n_categories=len(category_names), n_terms=len(vocab), n_skipped=report.n_skipped,
        seconds=time.perf_counter() - t0,
        fields={k: {"nnz": v["nnz"], "total_terms": v["total_terms"]}
                for k, v in manifest_fields.items()},
        skipped_examples=tuple(report.errors))


def _progress(enabled, desc, unit):
    from tqdm import tqdm

    return tqdm(desc=desc, unit=" " + unit, disable=None if enabled else True, file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)


# ---------------------------------------------------------------------------------------
# Trained models stored in an index
# ---------------------------------------------------------------------------------------
#: Model kind -> estimator class (with ``from_state``); see :mod:`cqa_search.features`.
#: Filled from the ``MODEL_KINDS`` of the model packages on first use, so that searching
#: an index without trained models never imports them (nor scikit-learn).
MODEL_KINDS = {}
_MODEL_PACKAGES = ("translation", "factorization", "ranking")
_packages_loaded = False


def model_kinds() -> dict:
    """:data:`MODEL_KINDS`, after importing the model packages once."""
    global _packages_loaded
    if not _packages_loaded:
        for package in _MODEL_PACKAGES:
            module = importlib.import_module(f"{__package__}.{package}")
            for kind, cls in module.MODEL_KINDS.items():
                MODEL_KINDS.setdefault(kind, cls)
        _packages_loaded = True
    return MODEL_KINDS


def add_model(path, name, model) -> None:
    """Store a fitted model in the index at ``path`` under ``name`` (atomically).

    The engine opened afterwards computes its features (or, for a ranker, ranks with it).
    """
    if model_kinds().get(getattr(model, "kind", None)) is not type(model):
        raise ValueError(f"cannot store {type(model).__name__}: not a registered model kind")
    meta, arrays = model.state()
    save_model(path, name, kind=model.kind, params=model.get_params(), meta=meta, arrays=arrays)


def _load_models(stored) -> dict:
    models = {}
    for name in stored.models:
        entry = stored.model(name)
        cls = model_kinds().get(entry.kind)
        if cls is None:
            raise IndexFormatError(f"{stored.path}: model {name!r} is of kind {entry.kind!r}, "
                                   f"which this cqa_search cannot read")
        try:
            models[name] = cls.from_state(entry.params, entry.meta, entry.arrays())
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: model {name!r} cannot be "
                                   f"loaded ({exc})") from None
    return models


# ---------------------------------------------------------------------------------------
# Searching
# ---------------------------------------------------------------------------------------
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
        keeps the retrieval model's order.
    n_candidates : int, default 100
        How many candidates of the retrieval model the ranker reorders.
    """

    retrieval: TermModel = field(default_factory=BM25)
    features: tuple = field(default_factory=_default_features)
    models: tuple | None = None
    ranker: str | None = "ranker"
    n_candidates: int = 100

    def __post_init__(self):
        if not isinstance(self.retrieval, TermModel):
            raise ValueError(f"retrieval must be a TermModel; got {self.retrieval!r}")
        object.__setattr__(self, "features", tuple(self.features))
        if self.models is not None:
            object.__setattr__(self, "models", tuple(self.models))
        names = [m.feature_name for m in self.features]
        if not all(isinstance(m, TermModel) for m in self.features):
            raise ValueError("features must be TermModel instances")
        if len(set(names)) != len(names):
            raise ValueError(f"feature names must be distinct; got {names}")
        if isinstance(self.n_candidates, bool) or not isinstance(self.n_candidates, int) \
                or self.n_candidates < 1:
            raise ValueError(f"n_candidates must be a positive integer; got {self.n_candidates!r}")


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
    """

    def __init__(self, view: IndexView, *, doc_id_rank, surface, models=None, config=None,
                 manifest=None, path=None):
        self.view = view
        self.index, self.archive, self.analyzer = view.index, view.archive, view.analyzer
        self.categories = view.categories
        self._doc_id_rank = doc_id_rank
        self._surface = surface
        self._suggester = None
        self.models = dict(models or {})
        self.manifest = manifest or {}
        self.path = path
        self.config = self._checked_config(config or SearchConfig())
        self._scorers = self._make_scorers()
        self.ranker = self._make_ranker()

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
                scorers.append(model.scorer(self.view))
        return scorers

    def _make_ranker(self):
        name = self.config.ranker
        if name is None or name not in self.models:
            return None
        ranker = self.models[name]
        if not hasattr(ranker, "predict"):
            raise QueryError(f"model {name!r} is not a ranker (it is of kind {ranker.kind!r})")
        missing = [f for f in ranker.feature_names_in_ if f not in self.feature_names]
        if missing:
            raise QueryError(f"ranker {name!r} uses features this engine does not compute: "
                             f"{', '.join(missing)} (add the models or term features it was "
                             "trained with, or search with SearchConfig(ranker=None))")
        return ranker

    @property
    def feature_names(self) -> tuple:
        """Names of the feature columns, in order."""
        return tuple(n for s in self._scorers for n in s.names)

    # -- opening ---------------------------------------------------------------------
    @classmethod
    def open(cls, path, *, mmap=True, verify=False, config=None) -> "SearchEngine":
        """Open an index built by :func:`build_index`.

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
        stored = open_index(path, mmap=mmap, verify=verify)
        m = stored.manifest
        try:
            stats = m["stats"]
            n_docs, n_terms = int(stats["n_docs"]), int(stats["n_terms"])
            analyzer = Analyzer.from_config(m["analyzer"])
            field_meta = dict(m["fields"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: bad manifest ({exc}); "
                                   "rebuild it with `cqa-search build-index`") from None
        terms = stored.json("vocab.json")
        stored.check(len(terms) == n_terms, f"vocab.json has {len(terms)} terms, expected {n_terms}")
        fields = {}
        for name, meta in field_meta.items():
            base = f"fields/{name}"
            fi = FieldIndex(name, stored.array(f"{base}/indptr.npy"),
                            stored.array(f"{base}/indices.npy"), stored.array(f"{base}/counts.npy"),
                            stored.array(f"{base}/doc_len.npy"), stored.array(f"{base}/sequence.npy"))
            stored.check(fi.n_terms == n_terms and fi.n_docs == n_docs,
                         f"field {name} has shape ({fi.n_docs}, {fi.n_terms}), expected "
                         f"({n_docs}, {n_terms})")
            stored.check(fi.nnz == meta["nnz"] == len(fi.indices) == len(fi.counts),
                         f"field {name} postings do not match the manifest")
            stored.check(fi.total_terms == meta["total_terms"] == len(fi.sequence),
                         f"field {name} document lengths do not match the manifest")
            for key, rel in meta.get("weights", {}).items():
                weights = stored.array(rel)
                stored.check(weights.shape == (fi.nnz,), f"{rel} has the wrong shape")
                fi.weights[key] = weights
            fields[name] = fi
        doc_ids = stored.json("doc_ids.json")
        offsets = stored.array("archive_offsets.npy")
        stored.check(len(doc_ids) == n_docs and len(offsets) == n_docs + 1
                     and int(offsets[-1]) == os.path.getsize(stored.file("archive.jsonl")),
                     "archive.jsonl does not match doc_ids.json and its offsets")
        categories = stored.json("categories.json")
        doc_category = stored.array("doc_category.npy")
        doc_id_rank = stored.array("doc_id_rank.npy")
        stored.check(len(doc_category) == n_docs and len(doc_id_rank) == n_docs,
                     "doc_category.npy or doc_id_rank.npy has the wrong length")
        try:
            archive = Archive._lazy(stored.file("archive.jsonl"), offsets, doc_ids)
        except ArchiveError as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: {exc}") from None
        view = IndexView(TermIndex(Vocabulary(terms), fields), archive, analyzer, categories,
                         doc_category)
        return cls(view, doc_id_rank=doc_id_rank, surface=lambda: stored.json("surface.json"),
                   models=_load_models(stored), config=config, manifest=m, path=stored.path)

    def with_config(self, config: SearchConfig) -> "SearchEngine":
        """A new engine over the same (shared) index and models with another configuration."""
        return SearchEngine(self.view, doc_id_rank=self._doc_id_rank, surface=self._surface,
                            models=self.models, config=config, manifest=self.manifest,
                            path=self.path)

    @property
    def n_docs(self) -> int:
        return self.index.n_docs

    # -- queries ---------------------------------------------------------------------
    def _query(self, text, category=None, given=None) -> QueryContext:
        if not isinstance(text, str):
            raise QueryError(f"a query must be a string; got {type(text).__name__}")
        if not text.strip():
            raise QueryError("empty query: type some words to search for")
        vocab = self.index.vocab
        terms, unknown = [], []
        for token, term in self.analyzer.pairs(text):
            (terms if term in vocab else unknown).append(term if term in vocab else token)
        sequence = vocab.ids(terms).astype(np.int64)
        ids, qtf = np.unique(sequence, return_counts=True)
        return QueryContext(text, tuple(dict.fromkeys(terms)), ids, qtf.astype(np.float64),
                            sequence, tuple(dict.fromkeys(unknown)), category, given)

    def category_id(self, category) -> int | None:
        """Index of a category name (case-insensitive); QueryError with suggestions if unknown."""
        if category is None:
            return None
        if not isinstance(category, str) or not category.strip():
            raise QueryError(f"category must be a non-empty string; got {category!r}")
        if not self.categories:
            raise QueryError("this index has no categories, so it cannot filter by category")
        if category in self.categories:
            return self.categories.index(category)
        folded = [c.casefold() for c in self.categories]
        if category.strip().casefold() in folded:
            return folded.index(category.strip().casefold())
        close = difflib.get_close_matches(category.casefold(), folded, n=3, cutoff=0.5)
        hint = (f"; did you mean {' or '.join(repr(self.categories[folded.index(c)]) for c in close)}?"
                if close else f" (categories: {', '.join(sorted(self.categories)[:20])}"
                              + (", ..." if len(self.categories) > 20 else "") + ")")
        raise QueryError(f"unknown category {category!r}{hint}")

    @staticmethod
    def _check_k(k):
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
            raise QueryError(f"k must be a positive integer or None (all); got {k!r}")

    def search(self, text: str, k: int = 10, *, category: str | None = None) -> Results:
        """The ``k`` archived questions most similar to ``text``.

        Parameters
        ----------
        text : str
            The new question.
        k : int or None, default 10
            Number of results (None: every matching question).
        category : str, optional
            Return only questions of this category (case-insensitive name).

        Returns
        -------
        Results

        Raises
        ------
        QueryError
            Empty query, unknown category, bad ``k``.
        """
        self._check_k(k)
        cid = self.category_id(category)
        return self._search(self._query(text, self._name(cid)), k, cid)

    def _name(self, category_id):
        return None if category_id is None else self.categories[category_id]

    def _search(self, q: QueryContext, k, category_id) -> Results:
        model = self.config.retrieval
        if len(q.term_ids) == 0:
            empty = np.zeros(0, np.int64)
            return self._ranked(q, empty, np.zeros(0), empty, k)
        depth = k if self.ranker is None else self.config.n_candidates
        if k is None and self.ranker is not None:
            depth = None
        rows, scores = retrieve(model, self.index[model.field], q.term_ids, q.qtf, depth,
                                doc_category=self.view.doc_category, category=category_id,
                                tie_rank=self._doc_id_rank)
        return self._ranked(q, rows, scores, self._doc_id_rank[rows], k)

    def feature_scores(self, q: QueryContext, rows) -> np.ndarray:
        """Feature matrix of candidate ``rows``: shape (len(rows), len(feature_names))."""
        rows = np.asarray(rows, dtype=np.int64)
        return np.hstack([s.score(q, rows) for s in self._scorers]) if len(self._scorers) else \
            np.zeros((len(rows), 0))

    def _ranked(self, q, rows, base_scores, tie, k) -> Results:
        """Score candidates with the ranker (if any), sort by (-score, tie), keep ``k``."""
        features = self.feature_scores(q, rows)
        if self.ranker is None:
            scores = np.asarray(base_scores, dtype=np.float64)
        else:
            names = self.feature_names
            columns = [names.index(f) for f in self.ranker.feature_names_in_]
            scores = np.asarray(self.ranker.predict(features[:, columns]), dtype=np.float64)
        order = np.lexsort((tie, -scores))[:k]
        doc_ids = self.archive.doc_ids
        return Results(q.text, rows[order], [doc_ids[r] for r in rows[order]], scores[order],
                       self.feature_names, features[order], q.terms, q.unknown_words,
                       self.archive)

    def batch_search(self, queries, qids=None, *, k=100, categories=None,
                     progress=False) -> dict:
        """Search many queries: ``{qid: Results}`` in query order.

        Parameters
        ----------
        queries : sequence of str
        qids : sequence of str, optional
            Query ids (default "0", "1", ...); must be distinct.
        k : int or None, default 100
        categories : sequence of (str or None), optional
            A category filter per query.
        progress : bool
            Show a progress bar on stderr.
        """
        self._check_k(k)
        queries = list(queries)
        qids = [str(i) for i in range(len(queries))] if qids is None else [str(q) for q in qids]
        categories = [None] * len(queries) if categories is None else list(categories)
        if not len(qids) == len(queries) == len(categories):
            raise QueryError(f"got {len(queries)} queries, {len(qids)} qids and "
                             f"{len(categories)} categories; they must match")
        if len(set(qids)) != len(qids):
            raise QueryError("qids must be distinct")
        out = {}
        bar = _progress(progress, "searching", "queries")
        for qid, text, cat in zip(qids, queries, categories):
            cid = self.category_id(cat)
            out[qid] = self._search(self._query(text, self._name(cid)), k, cid)
            bar.update()
        bar.close()
        return out

    def rerank(self, text: str, doc_ids, *, scores=None, category=None) -> Results:
        """Order only the given candidates (the rerank protocol).

        Parameters
        ----------
        text : str
        doc_ids : sequence of str
            The candidates, in their given order (ties keep it, as the SemEval scorer does).
        scores : sequence of float, optional
            Their initial scores (e.g. a search engine's), the features ``given_score``
            and ``given_rrank``.
        category : str, optional
            The query's category when known (a feature; not a filter).

        Raises
        ------
        QueryError
            Empty query, unknown category, or a candidate id that is not in the archive.
        """
        cid = self.category_id(category)
        rows = self.archive.rows(doc_ids).astype(np.int64)
        given = None
        if scores is not None:
            if len(scores) != len(rows):
                raise QueryError(f"got {len(rows)} candidates but {len(scores)} scores")
            given = dict(zip(rows.tolist(), map(float, scores)))
        q = self._query(text, self._name(cid), given)
        model = self.config.retrieval
        base = model.score_rows(self.index[model.field], q.term_ids, q.qtf, rows)
        return self._ranked(q, rows, base, np.arange(len(rows)), None)

    def run(self, queries, *, candidates=None, k=100, progress=False) -> dict:
        """A run ``{qid: {doc_id: score}}`` for evaluation.

        Parameters
        ----------
        queries : list of dict
            ``{"id", "text", "category"?}`` (see :func:`cqa_search.evaluation.read_queries`);
            the category is the query's (a feature), not a filter.
        candidates : dict, optional
            ``{qid: {doc_id: score}}`` (a run): rerank these candidates only (their scores
            are the ``given_*`` features); a query without candidates gets an empty
            ranking. Without candidates, the whole archive is searched (full retrieval,
            top ``k``); a query whose id is also an archived question's (e.g. a duplicate
            question used as a query) never retrieves itself.
        k : int or None
            Depth of full retrieval.
        """
        if candidates is None:
            self._check_k(k)
        out = {}
        bar = _progress(progress, "evaluating", "queries")
        for query in queries:
            qid, text, category = query["id"], query["text"], query.get("category")
            if candidates is not None:
                given = candidates.get(qid, {})
                res = self.rerank(text, list(given), scores=list(given.values()),
                                  category=category) if given else None
            else:
                cid = self.category_id(category)
                res = self._search(self._query(text, self._name(cid)),
                                   None if k is None else k + 1, None)
            ranked = [] if res is None else [
                (d, s) for d, s in zip(res.doc_ids, res.scores.tolist()) if d != qid]
            out[qid] = dict(ranked[:k] if candidates is None else ranked)
            bar.update()
        bar.close()
        return out

    def feature_table(self, queries, *, candidates=None, k=100, progress=False):
        """Features of (query, candidate) pairs, for training and analysing rankers.

        Candidates are the given ones (``candidates``, a run) or the top ``k`` of the
        retrieval model (full retrieval; a query never gets itself). The active ranker is
        not applied.

        Returns
        -------
        X : ndarray of shape (n_pairs, n_features)
        qid : ndarray of str, shape (n_pairs,)
        doc_ids : ndarray of str, shape (n_pairs,)
        feature_names : tuple of str
        """
        unranked = self if self.ranker is None else self.with_config(
            dataclasses.replace(self.config, ranker=None))
        run = unranked.run(queries, candidates=candidates, k=k, progress=progress)
        blocks, qids, docs = [], [], []
        for query in queries:
            ranked = list(run[query["id"]])
            if not ranked:
                continue
            given = candidates.get(query["id"], {}) if candidates is not None else None
            rows = self.archive.rows(ranked).astype(np.int64)
            cid = self.category_id(query.get("category"))
            q = self._query(query["text"], self._name(cid), None if given is None else {
                self.archive.row(d): float(v) for d, v in given.items()})
            blocks.append(self.feature_scores(q, rows))
            qids.extend([query["id"]] * len(ranked))
            docs.extend(ranked)
        X = np.vstack(blocks) if blocks else np.zeros((0, len(self.feature_names)))
        return X, np.array(qids, dtype=str), np.array(docs, dtype=str), self.feature_names

    # -- presentation helpers ----------------------------------------------------------
    def suggest(self, word: str, limit: int = 3) -> list:
        """Archive words close to ``word`` (for "did you mean")."""
        if self._suggester is None:
            surface = self._surface() if callable(self._surface) else self._surface
            self._suggester = Suggester(surface)
        return self._suggester.suggest(word, limit=limit)

    def highlight(self, text: str, terms, **kwargs) -> str:
        """``text`` with the words of ``terms`` (index terms) marked; see :func:`highlight`."""
        return highlight(text, terms, self.analyzer, **kwargs)
