"""The stored word-vector model of an index: :class:`EmbeddingModel` (kind ``"embeddings"``).

``cqa-search fit INDEX embeddings`` learns, from the index's own analysed text only:

1. word vectors (:mod:`.embeddings`: PPMI-SVD by default, or gensim's word2vec), one per
   index term seen at least ``min_count`` times;
2. the SIF weights ``a / (a + p(w))`` and the first principal component of the archive's
   weighted means (:mod:`.sif`), and every question's SIF vector (a per-question row);
3. above ``exact_limit`` questions, an inverted file over those vectors (:mod:`.dense`)
   for the dense first stage;
4. the two term-similarity matrices of the soft cosine (:mod:`.softcos`: nearest words by
   vector and by spelling) and every question's ``y^T M y`` for its title, body and
   whole text (per-question rows);
5. the title and body of every question as fields (:mod:`.parts`) when the index was
   built without them.

Everything is stored as ``.npy`` arrays. Opening the index needs numpy (and scipy for the
sparse matrices) only: never gensim nor scikit-learn. Questions added to the index after
the fit get their rows when an engine opens it (:meth:`EmbeddingModel.extended_rows`:
their SIF vectors and soft-cosine norms are computed with the stored vectors and
weights, exactly as for the questions of the fit); a compaction carries the rows over
(:meth:`EmbeddingModel.select_rows`).
"""
from __future__ import annotations

import copy
import logging
import numbers
import time
from dataclasses import dataclass

import numpy as np

from .._utils import FEATURE_PREFIX, Estimator, Interval, prefixed, progress_bar, validate_params
from ..exceptions import IndexFormatError, ParameterError
from ..index.validate import check_array, check_sparse
from . import dense, embeddings, parts, sif, softcos
from .scoring import FEATURE_NAMES, TEXTS, EmbeddingScorer

__all__ = ["EmbeddingModel", "METHODS", "Rows"]

logger = logging.getLogger(__name__)

METHODS = ("ppmi-svd", "word2vec")


@dataclass(frozen=True)
class Rows:
    """The per-question rows of an :class:`EmbeddingModel` over every row of an index.

    Attributes
    ----------
    vectors : ndarray of float32, shape (n_docs, dim)
        SIF vectors (unit length, or zero).
    norms : ndarray of float32, shape (n_docs, 6)
        ``y^T M y`` of each question's title, body and text, for ``M`` from word vectors
        then from spelling.
    fields : dict
        ``{"title": FieldIndex, "body": FieldIndex}``.
    doc_list : ndarray of int32 or None
        Inverted-file list of the first rows (None: no inverted file).
    """

    vectors: np.ndarray
    norms: np.ndarray
    fields: dict
    doc_list: np.ndarray | None


def _csr_arrays(S, name) -> dict:
    return {f"{name}_indptr": S.indptr.astype(np.int64), f"{name}_indices":
            S.indices.astype(np.int32), f"{name}_data": S.data.astype(np.float32)}


def _csr_from(arrays, name, n):
    import scipy.sparse as sp

    indptr, indices, data = (arrays[f"{name}_{k}"] for k in ("indptr", "indices", "data"))
    check_sparse(indptr, indices, data, (n, n), f"{name} similarities")
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))


#: The steps of :meth:`EmbeddingModel.fit`, in order (its progress bar names the running one).
_FIT_STEPS = ("word vectors", "question vectors", "inverted file", "similar words",
              "titles and bodies", "soft-cosine norms")


class EmbeddingModel(Estimator):
    """Word vectors learned from an index's archive; question vectors for the dense first
    stage; embedding, soft-cosine and per-field features.

    Features (:data:`~.scoring.FEATURE_NAMES`): ``emb_sif`` and ``emb_mean`` (cosine of
    the query's and the question's SIF vectors, and of their plain mean word vectors);
    ``softcos_{title,body,question}`` and ``softcos_char_...`` (soft cosine of the
    query's title, body and whole text with the question's, over similar words by vector
    and by spelling); ``field_{title,body}_{bm25,vsm}`` (BM25 and tf-idf cosine of the
    query's title against the question's title, and body against body).

    Parameters
    ----------
    method : {"ppmi-svd", "word2vec"}, default "ppmi-svd"
        How word vectors are learned: truncated SVD of the positive PMI matrix of window
        co-occurrences, its left singular vectors (scipy; counted once, so fast on large
        archives), or skip-gram
        word2vec by gensim (``pip install 'cqa-search[word2vec]'``; one thread and a seed,
        so a refit gives the same vectors, but about ten times slower).
    dim : int, default 100
        Dimensions of the word and question vectors.
    window : int, default 5
        Words on each side that count as context.
    min_count : int, default 2
        Words seen fewer times in the archive get no vector.
    epochs : int, default 20
        Passes over the text (word2vec only).
    neighbours : int, default 50
        Similar words per word in the soft-cosine matrices.
    char_ngram : int, default 3
        Length of the character n-grams that compare spellings.
    n_lists : int or None, default None
        Lists of the inverted file (None: the square root of the number of questions).
    n_probe : int or None, default None
        Lists read per query (None: a tenth of the lists; more: higher recall, slower).
    exact_limit : int, default 200000
        Up to this many questions, dense search scores every question (no inverted file
        is made).
    random_state : int, default 0
        Seed of the learner and of the inverted file's k-means: a refit gives the same
        model.
    feature_prefix : str or None, default None
        Prefix of its features' names (None: emb_sif, softcos_title, ...; "w2v":
        w2v_emb_sif, w2v_softcos_title, ...): a second embeddings model of one index (e.g.
        word2vec beside PPMI-SVD) needs one.

    Attributes
    ----------
    word_vectors_ : ndarray of float32, shape (n_terms, dim)
        Zero rows for terms without a vector.
    sif_weights_ : ndarray of float32, shape (n_terms,)
    component_ : ndarray of float32, shape (dim,)
    idf_ : ndarray of float32, shape (n_terms,)
        The idf of the soft-cosine bags of words (the question field's, smoothed).
    emb_similarity_, char_similarity_ : scipy.sparse.csr_matrix, shape (n_terms, n_terms)
        ``S`` of the soft cosine (:mod:`.softcos`).
    doc_vectors_ : ndarray of float32, shape (n_docs, dim)
    doc_norms_ : ndarray of float32, shape (n_docs, 6)
    centroids_ : ndarray of float32, shape (n_lists, dim)
        Empty when no inverted file was made.
    doc_list_ : ndarray of int32, shape (n_docs,) or (0,)
    list_vectors_ : ndarray of float32, shape (n_docs, dim) or (0, dim)
        The question vectors in the order of the inverted lists.
    parts_ : dict or None
        ``{"title": FieldIndex, "body": FieldIndex}``, or None when the index has these
        fields.
    fit_seconds_ : dict
        Seconds per step of the fit.

    Examples
    --------
    >>> import os, tempfile
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> qs = [Question(f"q{i}", t, b) for i, (t, b) in enumerate([
    ...     ("renew visa", "how do I renew my visa"), ("visa office", "visa office hours"),
    ...     ("cheap sofa", "where to buy a sofa"), ("used sofa", "buy a used sofa cheap")])]
    >>> path = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, path)
    >>> model = EmbeddingModel(dim=2, min_count=1).fit(SearchEngine.open(path).view)
    >>> model.doc_vectors_.shape
    (4, 2)
    """

    kind = "embeddings"
    _parameter_constraints = {
        "method": METHODS,
        "dim": Interval(1, None, kind=numbers.Integral),
        "window": Interval(1, None, kind=numbers.Integral),
        "min_count": Interval(1, None, kind=numbers.Integral),
        "epochs": Interval(1, None, kind=numbers.Integral),
        "neighbours": Interval(0, None, kind=numbers.Integral),
        "char_ngram": Interval(2, None, kind=numbers.Integral),
        "n_lists": [(None,), Interval(1, None, kind=numbers.Integral)],
        "n_probe": [(None,), Interval(1, None, kind=numbers.Integral)],
        "exact_limit": Interval(0, None, kind=numbers.Integral),
        "random_state": Interval(0, None, kind=numbers.Integral),
        "feature_prefix": FEATURE_PREFIX,
    }

    def __init__(self, method="ppmi-svd", *, dim=100, window=5, min_count=2, epochs=20,
                 neighbours=50, char_ngram=3, n_lists=None, n_probe=None,
                 exact_limit=200_000, random_state=0, feature_prefix=None):
        self.method = method
        self.dim = dim
        self.window = window
        self.min_count = min_count
        self.epochs = epochs
        self.neighbours = neighbours
        self.char_ngram = char_ngram
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.exact_limit = exact_limit
        self.random_state = random_state
        self.feature_prefix = feature_prefix

    # -- training ----------------------------------------------------------------------
    def fit(self, view, y=None, *, progress=False):
        """Learn the word vectors from ``view``'s text and compute every question's rows.

        Parameters
        ----------
        view : IndexView
        y : ignored
        progress : bool, default False
            Show a progress bar (the steps) on stderr.

        Returns
        -------
        self
        """
        validate_params(self)
        seconds = {}
        t0 = time.perf_counter()
        bar = progress_bar(progress, "fitting embeddings", "steps", total=len(_FIT_STEPS))
        bar.set_postfix_str(_FIT_STEPS[0])  # the step running (the first takes longest)

        def step(name):
            nonlocal t0
            now = time.perf_counter()
            seconds[name] = now - t0
            t0 = now
            logger.info("embeddings: %s in %.1f s", name, seconds[name])
            bar.update()
            if len(seconds) < len(_FIT_STEPS):
                bar.set_postfix_str(_FIT_STEPS[len(seconds)])

        try:
            self._fit(view, step)
        finally:
            bar.close()
        self.fit_seconds_ = seconds
        return self

    def _fit(self, view, step):
        corpus = embeddings.training_corpus(view)
        if self.method == "word2vec":
            vectors = embeddings.word2vec(corpus, dim=self.dim, window=self.window,
                                          epochs=self.epochs, min_count=self.min_count,
                                          seed=self.random_state)
        else:
            vectors = embeddings.ppmi_svd(corpus, dim=self.dim, window=self.window,
                                          min_count=self.min_count, seed=self.random_state)
        if not np.any(vectors):
            raise ParameterError(f"no word of this archive occurs {self.min_count} times or "
                                 "more: nothing to learn vectors from (lower min_count)")
        self.word_vectors_ = vectors
        self.n_tokens_ = corpus.n_tokens
        step("word vectors")
        self.sif_weights_ = sif.sif_weights(corpus.counts())
        question = view.index["question"]
        means = sif.weighted_means(question.sequence, question.offsets, vectors,
                                   self.sif_weights_)
        self.component_ = sif.principal_component(means)
        means -= np.outer(means @ self.component_, self.component_)
        self.doc_vectors_ = sif.normalize_rows(means)
        step("question vectors")
        n = len(self.doc_vectors_)
        if n > self.exact_limit:
            ivf = dense.InvertedFile.fit(self.doc_vectors_, n_lists=self.n_lists,
                                         n_probe=self.n_probe, random_state=self.random_state)
            self.centroids_, self.doc_list_ = ivf.centroids, ivf.doc_list
            self.list_vectors_, self.n_probe_ = ivf.list_vectors, ivf.n_probe
        else:
            self.centroids_ = np.zeros((0, self.dim), dtype=np.float32)
            self.doc_list_ = np.zeros(0, dtype=np.int32)
            self.list_vectors_ = np.zeros((0, self.dim), dtype=np.float32)
            self.n_probe_ = 0
        step("inverted file")
        stats = question.stats
        self.idf_ = (np.log((1.0 + stats.n_docs) / (1.0 + np.asarray(stats.df))) + 1.0
                     ).astype(np.float32)
        terms = view.index.vocab.terms
        self.emb_similarity_ = softcos.embedding_neighbours(vectors, self.neighbours)
        self.char_similarity_ = softcos.char_neighbours(
            terms, np.flatnonzero(np.any(vectors != 0, axis=1)), self.char_ngram,
            self.neighbours)
        step("similar words")
        have = all(p in view.index.fields for p in parts.PARTS)
        self.parts_ = None if have else parts.analyse_parts(view)
        step("titles and bodies")
        self.doc_norms_ = self._norms(self._fields(view), question, np.arange(n))
        step("soft-cosine norms")

    def _fields(self, view) -> dict:
        """The title and body fields over every row of ``view``."""
        if self.parts_ is None:
            missing = [p for p in parts.PARTS if p not in view.index.fields]
            if missing:
                raise IndexFormatError(f"the embeddings model reads the index's {missing[0]} "
                                       "field, which this index lacks: fit it again")
            return {p: view.index[p] for p in parts.PARTS}
        return {p: parts.extend_field(f, view, p) for p, f in self.parts_.items()}

    def _norms(self, fields, question, rows) -> np.ndarray:
        """``y^T M y`` of ``rows`` for each matrix and text (float32, (len(rows), 6)); the
        three texts in two threads (the question, then the body and the title: the
        compiled kernel and scipy's sparse products release the GIL)."""
        if not len(rows):
            return np.zeros((0, 6), np.float32)
        from concurrent.futures import ThreadPoolExecutor

        texts = {**fields, "question": question}
        matrices = (self.emb_similarity_, self.char_similarity_)
        order = ("question", "body", "title")  # the longest first
        with ThreadPoolExecutor(max_workers=2) as pool:
            done = dict(zip(order, pool.map(
                lambda t: softcos.self_similarity(texts[t], rows, self.idf_, matrices), order)))
        return np.column_stack([done[t][:, j] for j in range(len(matrices))
                                for t in TEXTS]).astype(np.float32)

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit``."""
        self._check_fitted()
        n_vec = int(np.any(self.word_vectors_ != 0, axis=1).sum())
        lines = [f"features   {', '.join(self.feature_names)}",
                 f"vectors    {n_vec:,} words of {len(self.word_vectors_):,} ({self.method}, "
                 f"{self.dim} dimensions, from {self.n_tokens_:,} tokens)",
                 f"questions  {len(self.doc_vectors_):,} SIF vectors; dense search "
                 + (f"by an inverted file of {len(self.centroids_):,} lists ({self.n_probe_} "
                    "read per query)" if len(self.centroids_) else "exact"),
                 f"similar    {self.emb_similarity_.nnz:,} word pairs by vector, "
                 f"{self.char_similarity_.nnz:,} by spelling",
                 "fields     title and body " + ("of the index" if self.parts_ is None else
                                                  "analysed from the archive")]
        seconds = getattr(self, "fit_seconds_", None)
        if seconds:
            lines.append("time       " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
        return "\n".join(lines)

    def _check_fitted(self):
        if not hasattr(self, "doc_vectors_"):
            from ..exceptions import NotFittedError

            raise NotFittedError("this EmbeddingModel is not fitted yet; call fit first")

    # -- storage -------------------------------------------------------------------------
    @property
    def row_arrays(self) -> tuple:
        """The state arrays with a row per question (see :mod:`cqa_search.index.models`),
        the question vectors first: the vectors, soft-cosine norms and inverted lists, and
        the title and body fields when the model stores them. The vectors by list and the
        fields are not slices of the rows: :meth:`rows_state` takes a run of them."""
        self._check_fitted()
        fields = () if self.parts_ is None else tuple(
            key for p in parts.PARTS for key in parts.field_arrays(self.parts_[p], f"{p}_"))
        return ("doc_vectors", "doc_norms", "doc_list", "list_vectors") + fields

    def rows_state(self, start, stop):
        """The state of a copy holding rows ``start`` to ``stop - 1`` of the fit (what the
        shard holding those rows of a sharded index stores)."""
        return self.select_rows(None, np.arange(start, stop)).state()

    def state(self):
        """(meta, arrays) for :func:`cqa_search.index.models.add_model`."""
        self._check_fitted()
        meta = {"n_tokens": int(self.n_tokens_), "n_probe": int(self.n_probe_),
                "parts_in_index": self.parts_ is None,
                "seconds": dict(getattr(self, "fit_seconds_", {}))}
        arrays = {"word_vectors": self.word_vectors_, "sif_weights": self.sif_weights_,
                  "component": self.component_, "idf": self.idf_,
                  "doc_vectors": self.doc_vectors_, "doc_norms": self.doc_norms_,
                  "centroids": self.centroids_, "doc_list": self.doc_list_,
                  "list_vectors": self.list_vectors_,
                  **_csr_arrays(self.emb_similarity_, "emb"),
                  **_csr_arrays(self.char_similarity_, "char")}
        for name, field in (self.parts_ or {}).items():
            arrays.update(parts.field_arrays(field, f"{name}_"))
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The inverse of :meth:`state` (every array checked)."""
        model = cls(**params)
        vectors = check_array(arrays["word_vectors"], "word vectors", kind="f", ndim=2,
                              finite=True)
        n_terms, dim = vectors.shape
        model.word_vectors_ = vectors
        model.sif_weights_ = check_array(arrays["sif_weights"], "SIF weights", kind="f",
                                         shape=(n_terms,), low=0, high=1, finite=True)
        model.component_ = check_array(arrays["component"], "principal component", kind="f",
                                       shape=(dim,), finite=True)
        model.idf_ = check_array(arrays["idf"], "idf", kind="f", shape=(n_terms,), low=0,
                                 finite=True)
        docs = check_array(arrays["doc_vectors"], "question vectors", kind="f", ndim=2,
                           shape=(None, dim), finite=True)
        n_docs = len(docs)
        model.doc_vectors_ = docs
        model.doc_norms_ = check_array(arrays["doc_norms"], "soft-cosine norms", kind="f",
                                       ndim=2, shape=(n_docs, 6), low=0, finite=True)
        model.centroids_ = check_array(arrays["centroids"], "centroids", kind="f", ndim=2,
                                       shape=(None, dim), finite=True)
        n_lists = len(model.centroids_)
        model.doc_list_ = check_array(arrays["doc_list"], "inverted lists", kind="iu",
                                      shape=(n_docs if n_lists else 0,), low=0,
                                      high=max(n_lists - 1, 0))
        model.list_vectors_ = check_array(arrays["list_vectors"], "vectors by list", kind="f",
                                          ndim=2, shape=(len(model.doc_list_), dim),
                                          finite=True)
        model.n_probe_ = int(meta["n_probe"])
        model.n_tokens_ = int(meta["n_tokens"])
        model.emb_similarity_ = _csr_from(arrays, "emb", n_terms)
        model.char_similarity_ = _csr_from(arrays, "char", n_terms)
        model.parts_ = None if meta["parts_in_index"] else {
            p: parts.field_from_arrays(p, arrays, f"{p}_", n_docs, n_terms) for p in parts.PARTS}
        model.fit_seconds_ = dict(meta.get("seconds", {}))
        return model

    # -- the rows of an index that grew --------------------------------------------------
    def extended_rows(self, view) -> Rows:
        """The per-question rows over every row of ``view`` (an index whose first rows and
        term ids are those of the fit): the stored rows, then those of the questions added
        since, computed with the stored vectors and weights (``view`` None: the stored
        rows)."""
        self._check_fitted()
        if view is None:
            return Rows(self.doc_vectors_, self.doc_norms_, self.parts_ or {},
                        self.doc_list_ if len(self.centroids_) else None)
        n_fit, n = len(self.doc_vectors_), view.n_docs
        if n < n_fit:
            raise IndexFormatError(f"the embeddings model covers {n_fit} questions but the "
                                   f"index has only {n}: fit it again")
        fields = self._fields(view)
        doc_list = self.doc_list_ if len(self.centroids_) else None
        if n == n_fit:
            return Rows(self.doc_vectors_, self.doc_norms_, fields, doc_list)
        logger.info("computing the vectors of %d questions added since the embeddings "
                    "model was fitted", n - n_fit)
        new = np.arange(n_fit, n)
        question = view.index["question"]
        terms, pos = question.sequences_of(new)
        offsets = np.concatenate(([0], np.cumsum(np.bincount(pos, minlength=len(new)))))
        vectors = sif.sif_rows(terms, offsets, self.word_vectors_, self.sif_weights_,
                               self.component_)
        norms = self._norms(fields, question, new)
        return Rows(np.vstack([self.doc_vectors_, vectors]),
                    np.vstack([self.doc_norms_, norms]), fields, doc_list)

    def select_rows(self, view, rows) -> "EmbeddingModel":
        """A copy whose per-question rows are those of ``rows`` of ``view``, in that order
        (questions added since the fit computed first, and put in their nearest list):
        what a compaction stores (``view`` None: of the stored rows)."""
        full = self.extended_rows(view)
        rows = np.asarray(rows, dtype=np.int64)
        model = copy.copy(self)
        model.doc_vectors_ = np.ascontiguousarray(full.vectors[rows])
        model.doc_norms_ = np.ascontiguousarray(full.norms[rows])
        if len(self.centroids_):
            lists = np.concatenate([self.doc_list_, dense.assign(
                full.vectors[len(self.doc_list_):], self.centroids_)])
            ivf = dense.InvertedFile(self.centroids_, lists[rows].astype(np.int32),
                                     self.n_probe_)
            model.doc_list_ = ivf.doc_list
            model.list_vectors_ = np.ascontiguousarray(model.doc_vectors_[ivf.list_rows])
        if self.parts_ is not None:
            model.parts_ = {p: f.select(rows) for p, f in full.fields.items()}
        return model

    @property
    def feature_names(self) -> tuple:
        return prefixed(FEATURE_NAMES, self.feature_prefix)

    def scorer(self, view):
        """The feature scorer and dense searcher over ``view``
        (:class:`~.scoring.EmbeddingScorer`)."""
        return EmbeddingScorer(self, view)
