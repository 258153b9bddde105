"""Topic models of an index: training, folding in, the topic score and eq. 14.

:class:`TopicModel` is what an index stores (kind ``"topics"``): one of NMF, CNMF, GNMF
or GNMFNC fitted on the tf-idf term–question matrix of the index's ``question`` field
(:func:`term_question_matrix`), grouped by the questions' categories. It gives one
feature, ``topic_<variant>`` by default: the cosine between the query and a candidate in
the full topic space (eq. 13)::

    s_topic(q, d) = <v_q, v_d> / (||v_q|| ||v_d||)

where ``v_d`` is the stored column of ``V`` and ``v_q`` the query folded in by
non-negative least squares against its category's topics ``[U_s, U_p]`` (eq. 12). In the
full space (``K_s + P K_p`` dimensions) a question only has coefficients on the shared
topics and its own category's, so the inner product is ``h_q . h_d`` plus ``w_q . w_d``
when both are in the same category.

A query without a category is folded in (``category_inference``):

* ``"all"`` (default): against every category's topics at once (``[U_s, U_1, ..., U_P]``,
  one NNLS in ``K_s + P K_p`` dimensions), so its vector may use several categories'
  blocks; no category is chosen;
* ``"hits"``: against the topics of the category with the largest sum of BM25 scores
  among the query's top 10 BM25 hits in the archive;
* ``"reconstruction"``: against those of the category that reconstructs its tf-idf
  vector best (least NNLS residual).

On SemEval-2016 (29 categories, queries without one) ``"all"`` gave the best MAP on dev
and test for every variant; BM25 hits named the right category more often than
reconstruction (held-out SemEval questions: 32% against 25%; synthetic queries: 82%
against 36%); see BENCHMARKS.md. Questions folded in without a category by
:meth:`TopicModel.fold_in` (e.g. archive questions added later, :meth:`TopicModel.extend`)
need one: the category of their BM25 hits when an index is at hand (unless
``"reconstruction"`` is asked for), else reconstruction.

Questions without a category form one more group (with its own topics); its name is
None. :func:`interpolate` is eq. 14, ``s = alpha s_topic + (1 - alpha) s_term`` with the
term score min–max normalised per query; :class:`TopicInterpolation` applies it as an
engine ranker (kind ``"topic-interpolation"``).
"""
from __future__ import annotations

import copy
import logging
import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import TfidfTransformer

from .._utils import RANDOM_STATE, InstanceOf, Interval, progress_bar, validate_params
from ..exceptions import IndexFormatError, ParameterError
from ..index.validate import INT32_MAX, InvalidArray, check_array, check_count, check_sparse
from ..retrieval import BM25, top_k
from .gnmf import CNMF, GNMF, GNMFNC
from .nmf import NMF, _best_groups, _fold, _projections, _topic_grams
from .._blas import one_blas_thread
from .nnls import GramFactor

__all__ = ["TopicModel", "TopicScorer", "TopicInterpolation", "interpolate",
           "term_question_matrix", "VARIANTS"]

logger = logging.getLogger(__name__)

#: Model variants of :class:`TopicModel`.
VARIANTS = ("nmf", "cnmf", "gnmf", "gnmfnc")
#: BM25 hits that vote for a query's category (``category_inference="hits"``).
N_HITS = 10


def term_question_matrix(view, field="question"):
    """The tf-idf term–question matrix of an index field, and its idf.

    Counts of the field's postings weighted by scikit-learn's ``TfidfTransformer``
    (``tf * idf``, smoothed idf, each question L2-normalised), transposed to the paper's
    orientation.

    Parameters
    ----------
    view : IndexView
    field : str, default "question"

    Returns
    -------
    D : scipy.sparse.csc_matrix of shape (n_terms, n_docs)
    idf : ndarray of shape (n_terms,)
    """
    fi = view.index[field]
    if fi.n_terms == 0 or fi.nnz == 0:
        raise ParameterError(f"the {field!r} field of this index has no terms: nothing to "
                             "factorize")
    tfidf = TfidfTransformer()
    X = tfidf.fit_transform(fi.matrix())
    return sp.csc_matrix(X.T), tfidf.idf_


def _tfidf_rows(counts, idf):
    """L2-normalised tf-idf rows of a count matrix (terms beyond ``idf`` dropped)."""
    counts = sp.csr_matrix(counts, dtype=np.float64)
    if counts.shape[1] > len(idf):
        counts = counts[:, :len(idf)]
    elif counts.shape[1] < len(idf):
        counts = sp.csr_matrix((counts.data, counts.indices, counts.indptr),
                               shape=(counts.shape[0], len(idf)))
    X = counts @ sp.diags(idf)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ X)


class TopicModel(BaseEstimator):
    """A topic model of an index (NMF, CNMF, GNMF or GNMFNC) and its topic-score feature.

    Parameters
    ----------
    model : {"nmf", "cnmf", "gnmf", "gnmfnc"}, default "gnmfnc"
        The factorization (:mod:`cqa_search.factorization`). NMF has
        ``n_shared + n_category`` topics (the per-question dimension of GNMF and GNMFNC);
        CNMF has ``n_category`` per category and no shared topics.
    n_shared : int, default 20
        Shared topics ``K_s``.
    n_category : int, default 8
        Topics per category ``K_p``.
    a : float, default 100
        Regularisation factor of GNMFNC (ignored by the others).
    max_iter : int, default 100
        Sweeps of the multiplicative updates, at most (the paper's 100).
    tol : float, default 1e-4
        Stop when a sweep improves the objective by less than this fraction.
    random_state : None, int or numpy Generator, default 0
        Seed of the initial factors: seeded by default, so that two fits of one index
        give the same model (None: a random start).
    category_inference : {"all", "hits", "reconstruction"}, default "all"
        How a query without a category is folded in (see the module docstring).
    feature_name : str or None, default None
        Name of the feature; None for ``"topic_" + model``. Give each stored topic model
        of an index its own.

    Attributes
    ----------
    idf_ : ndarray of shape (n_terms,)
    categories_ : list
        Category name of each group (None: questions without a category, or the single
        group of NMF).
    shared_topics_ : ndarray of shape (n_terms, K_s)
    category_topics_ : scipy.sparse.csr_matrix of shape (n_terms, n_groups * K_p)
    doc_topics_ : ndarray of float32, shape (n_docs, K_s + K_p)
        ``V^T``: the coefficients of every archived question (one row per question).
    doc_group_ : ndarray of int32, shape (n_docs,)
        Group of every question (index into ``categories_``).
    loss_curve_, initial_loss_, n_iter_, n_partial_rescalings_
        From the factorization.

    Examples
    --------
    >>> import tempfile, os
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> qs = [Question(f"q{i}", t, category=c) for i, (t, c) in enumerate([
    ...     ("renew visa permit", "Visas"), ("visa office hours", "Visas"),
    ...     ("cheap sofa shop", "Shopping"), ("buy used sofa", "Shopping")])]
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, out)
    >>> view = SearchEngine.open(out).view
    >>> model = TopicModel("gnmfnc", n_shared=1, n_category=1, max_iter=20, tol=0,
    ...                    random_state=0).fit(view)
    >>> model.doc_topics_.shape, model.feature_name_
    ((4, 2), 'topic_gnmfnc')
    """

    kind = "topics"
    #: The state arrays with one row per question (see :mod:`cqa_search.index.models`).
    row_arrays = ("doc_topics", "doc_group")
    _parameter_constraints = {
        "model": VARIANTS,
        "n_shared": Interval(0, None, kind=numbers.Integral),
        "n_category": Interval(1, None, kind=numbers.Integral),
        "a": Interval(0, None),
        "max_iter": Interval(1, None, kind=numbers.Integral),
        "tol": Interval(0, None),
        "random_state": RANDOM_STATE,
        "category_inference": ("all", "hits", "reconstruction"),
        "feature_name": [(None,), InstanceOf(str, name="a string")],
    }

    def __init__(self, model="gnmfnc", *, n_shared=20, n_category=8, a=100.0, max_iter=100,
                 tol=1e-4, random_state=0, category_inference="all",
                 feature_name=None):
        self.model = model
        self.n_shared = n_shared
        self.n_category = n_category
        self.a = a
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.category_inference = category_inference
        self.feature_name = feature_name

    @property
    def feature_name_(self) -> str:
        return self.feature_name or f"topic_{self.model}"

    @property
    def feature_names(self) -> tuple:
        """The features the model gives (one: :attr:`feature_name_`)."""
        return (self.feature_name_,)

    def _estimator(self):
        common = dict(max_iter=self.max_iter, tol=self.tol, random_state=self.random_state)
        if self.model == "nmf":
            return NMF(self.n_shared + self.n_category, **common)
        if self.model == "cnmf":
            return CNMF(self.n_category, **common)
        if self.model == "gnmf":
            return GNMF(self.n_shared, self.n_category, **common)
        return GNMFNC(self.n_shared, self.n_category, a=self.a, **common)

    # -- training --------------------------------------------------------------------
    def fit(self, view, y=None, *, progress=False, callback=None):
        """Factorize the index's term–question matrix, grouped by category.

        Parameters
        ----------
        view : IndexView
            E.g. ``SearchEngine.open(path).view``.
        y : ignored
        progress : bool, default False
            Show a progress bar (sweeps, objective) on stderr.
        callback : callable, optional
            ``callback(iteration, objective)`` after each sweep.

        Returns
        -------
        self
            ``fit_seconds_`` holds the training time.
        """
        validate_params(self)
        bar = progress_bar(progress, f"fitting {self.model}", "sweeps", self.max_iter)

        def on_sweep(iteration, objective):
            bar.update()
            bar.set_postfix(objective=f"{objective:.6g}", refresh=False)
            if callback is not None:
                callback(iteration, objective)

        t0 = time.perf_counter()
        try:
            self._fit(view, on_sweep)
        finally:
            bar.close()
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _fit(self, view, callback):
        if isinstance(self.feature_name, str) and not self.feature_name.strip():
            raise ParameterError("feature_name must be a non-empty string or None; got ''")
        D, idf = term_question_matrix(view)
        # Term ids follow the order in which the index met the terms, which can change
        # between two builds of the same archive; fitting with the terms in their own
        # (alphabetical) order makes the model depend only on the archive and the seed.
        order = np.argsort(np.asarray(view.index.vocab.terms, dtype=str), kind="stable")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        D = sp.csr_matrix(D)[order]
        est = self._estimator()
        if self.model == "nmf":
            est.fit(D, callback=callback)
            self.categories_ = [None]
        else:
            est.fit(D, np.asarray(view.doc_category), callback=callback)
            self.categories_ = [None if g < 0 else view.categories[g] for g in est.groups_]
        self.idf_ = idf
        self.shared_topics_ = np.ascontiguousarray(est.shared_topics_[back])
        self.category_topics_ = sp.csr_matrix(est.category_topics_[back])
        self.doc_topics_ = np.ascontiguousarray(est.coefficients_.T, dtype=np.float32)
        self.doc_group_ = est.doc_group_.astype(np.int32)
        self.loss_curve_ = est.loss_curve_
        self.initial_loss_ = est.initial_loss_
        self.n_iter_ = est.n_iter_
        self.n_partial_rescalings_ = est.n_partial_rescalings_
        self._grams = self._category_index = self._factors = None

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit``."""
        self._check_fitted()
        groups = len(self.categories_)
        n_topics = self.shared_topics_.shape[1] + self.category_topics_.shape[1]
        converged = self.n_iter_ < self.max_iter
        lines = [f"feature    {self.feature_name_}",
                 f"data       {self.n_docs_:,} questions, {groups} group{'s' * (groups != 1)}, "
                 f"vocabulary of {len(self.idf_):,} terms",
                 f"topics     {n_topics} in all ({self.shared_topics_.shape[1]} shared, "
                 f"{self.category_topics_.shape[1] // max(groups, 1)} per category)",
                 f"iterations {self.n_iter_}" + ("" if converged else
                                                 f" (max_iter reached before tol={self.tol})"),
                 f"objective  {self.initial_loss_:.6g} -> {self.loss_curve_[-1]:.6g}"]
        seconds = getattr(self, "fit_seconds_", None)
        if seconds is not None:
            lines.append(f"time       {seconds:.1f} s ({seconds / max(self.n_iter_, 1):.2f} s "
                         "per iteration incl. set-up)")
        return "\n".join(lines)

    # -- storage contract ------------------------------------------------------------
    def state(self):
        """Learned state for :func:`cqa_search.index.models.add_model`: (meta, arrays)."""
        self._check_fitted()
        U = self.category_topics_
        meta = {"categories": list(self.categories_), "n_iter": int(self.n_iter_),
                "initial_loss": float(self.initial_loss_),
                "n_partial_rescalings": int(self.n_partial_rescalings_),
                "category_topics_shape": list(U.shape)}
        arrays = {"idf": self.idf_, "shared_topics": self.shared_topics_,
                  "category_topics_indptr": U.indptr.astype(np.int64),
                  "category_topics_indices": U.indices.astype(np.int32),
                  "category_topics_data": U.data, "doc_topics": self.doc_topics_,
                  "doc_group": self.doc_group_, "loss_curve": self.loss_curve_}
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The inverse of :meth:`state`."""
        model = cls(**params)
        cats = meta["categories"]
        if not isinstance(cats, list) or not all(c is None or isinstance(c, str) for c in cats):
            raise InvalidArray("topic model: categories must be a list of names")
        n_terms = len(check_array(arrays["idf"], "topic idf", kind="f", finite=True))
        shared = check_array(arrays["shared_topics"], "shared topics", kind="f", ndim=2,
                             shape=(n_terms, None), finite=True)
        shape = meta["category_topics_shape"]
        if not (isinstance(shape, list) and len(shape) == 2 and shape[0] == n_terms
                and type(shape[1]) is int and 0 <= shape[1] <= INT32_MAX):
            raise InvalidArray("topic model: bad category topics shape")
        check_sparse(arrays["category_topics_indptr"], arrays["category_topics_indices"],
                     arrays["category_topics_data"], tuple(shape), "category topics")
        K = shared.shape[1] + shape[1] // max(len(cats), 1)
        doc_topics = check_array(arrays["doc_topics"], "question topics", kind="f", ndim=2,
                                 shape=(None, K), finite=True)
        check_array(arrays["doc_group"], "question groups", kind="iu",
                    shape=(len(doc_topics),), low=0, high=max(len(cats) - 1, 0))
        model.categories_ = list(cats)
        model.n_iter_ = check_count(meta["n_iter"], "topic model n_iter")
        model.initial_loss_ = float(meta["initial_loss"])
        model.n_partial_rescalings_ = check_count(meta["n_partial_rescalings"],
                                                  "topic model n_partial_rescalings")
        model.idf_ = arrays["idf"]
        model.shared_topics_ = arrays["shared_topics"]
        model.category_topics_ = sp.csr_matrix(
            (arrays["category_topics_data"], arrays["category_topics_indices"],
             arrays["category_topics_indptr"]), shape=tuple(meta["category_topics_shape"]))
        model.doc_topics_ = arrays["doc_topics"]
        model.doc_group_ = arrays["doc_group"]
        model.loss_curve_ = arrays["loss_curve"]
        n_groups, K = len(model.categories_), model.doc_topics_.shape[1]
        if (model.shared_topics_.shape[0] != len(model.idf_)
                or model.category_topics_.shape[0] != len(model.idf_)
                or model.shared_topics_.shape[1] + model.category_topics_.shape[1] // max(
                    n_groups, 1) != K
                or len(model.doc_group_) != len(model.doc_topics_)):
            raise ValueError("topic model arrays have inconsistent shapes")
        model._grams = model._category_index = model._factors = None
        return model

    # -- folding in ------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "doc_topics_"):
            raise NotFittedError("this TopicModel is not fitted yet; call fit first")

    @property
    def n_docs_(self) -> int:
        return len(self.doc_topics_)

    @property
    def n_terms_(self) -> int:
        return len(self.idf_)

    def _group_grams(self):
        if getattr(self, "_grams", None) is None:
            self._grams = _topic_grams(self.shared_topics_, self.category_topics_,
                                       len(self.categories_))
        return self._grams

    def _group_of(self, category):
        """Group index of a category name, or None (unknown or no category)."""
        if category is None:
            return None
        index = getattr(self, "_category_index", None)
        if index is None:
            index = self._category_index = {c: i for i, c in enumerate(self.categories_)
                                            if c is not None}
        return index.get(category)

    def fold_in(self, counts, categories=None, *, view=None):
        """Topic coefficients of new questions or queries (eq. 12), batched.

        Parameters
        ----------
        counts : sparse matrix of shape (n, n_terms)
            Term counts (index term ids; columns beyond the model's terms are ignored),
            weighted with the model's idf and L2-normalised like the archive.
        categories : sequence of (str or None), optional
            Each one's category; None (or a category the model does not know) is
            inferred: by BM25 hits in ``view`` (unless ``category_inference`` is
            ``"reconstruction"``), else (no view, no hit) by reconstruction.
        view : IndexView, optional
            The index to search for BM25 hits.

        Returns
        -------
        coefficients : ndarray of shape (n, K_s + K_p)
        groups : ndarray of int64, shape (n,)
            Group of each (index into ``categories_``).
        """
        self._check_fitted()
        counts = sp.csr_matrix(counts)
        n = counts.shape[0]
        categories = [None] * n if categories is None else list(categories)
        if len(categories) != n:
            raise ValueError(f"got {n} rows of counts but {len(categories)} categories")
        groups = np.array([-1 if (g := self._group_of(c)) is None else g for c in categories],
                          dtype=np.int64)
        if self.category_inference != "reconstruction" and view is not None:
            for i in np.flatnonzero(groups < 0).tolist():
                row = counts[i]
                groups[i] = self._hits_group(view, row.indices.astype(np.int64),
                                             row.data.astype(np.float64))
        Q = _tfidf_rows(counts, self.idf_)
        proj = _projections(Q, self.shared_topics_, self.category_topics_,
                            len(self.categories_))
        grams = self._group_grams()
        unknown = np.flatnonzero(groups < 0)
        if len(unknown):
            groups[unknown] = _best_groups(grams, proj[:, :, unknown])[0]
        return _fold(grams, proj, groups).T, groups

    def _hits_group(self, view, term_ids, qtf):
        """Category with the largest BM25 mass among the query's top hits (-1: no hit)."""
        if len(term_ids) == 0:
            return -1
        scores, matched = BM25().score_all(view.index["question"], term_ids, qtf)
        rows = top_k(scores, N_HITS, allowed=matched)
        rows = rows[rows < self.n_docs_]
        if len(rows) == 0:
            return -1
        votes = np.bincount(self.doc_group_[rows], weights=scores[rows],
                            minlength=len(self.categories_))
        return int(np.argmax(votes))

    def fold_query(self, query, view=None):
        """One analysed query (:class:`~cqa_search.features.AnalyzedQuery`) in topic space.

        Single queries use :class:`~cqa_search.factorization.nnls.GramFactor` (scipy's
        NNLS on a factor of each group's Gram matrix, cached).

        Returns
        -------
        v : ndarray of shape (K_s + n_groups * K_p,)
            The query in the full topic space (eq. 12): shared coefficients, then one
            block per group, zero outside its group's block unless it was folded in
            against every category (``category_inference="all"``).
        group : int
            Its group (index into ``categories_``), -1 for ``"all"``.
        """
        self._check_fitted()
        Ks = self.shared_topics_.shape[1]
        P = len(self.categories_)
        Kp = self.category_topics_.shape[1] // P
        keep = query.term_ids < self.n_terms_
        ids, qtf = query.term_ids[keep], query.qtf[keep]
        w = qtf * self.idf_[ids]
        norm = np.sqrt(w @ w)
        v = np.zeros(Ks + P * Kp)
        if norm == 0:
            return v, max(self._group_of(query.category) or 0, 0)
        w /= norm
        shared = w @ self.shared_topics_[ids]                     # U_s^T q
        cat = self.category_topics_[ids].T @ w                     # [U_1 .. U_P]^T q
        group = self._group_of(query.category)
        if group is None and self.category_inference == "all":
            return self._factor(-1).solve(np.concatenate([shared, cat])), -1
        if group is None and self.category_inference == "hits" and view is not None:
            group = self._hits_group(view, query.term_ids, query.qtf)
            group = None if group < 0 else group
        if group is None:  # least reconstruction error: max b^T v over the groups
            best = -np.inf
            for p in range(P):
                rhs = np.concatenate([shared, cat[p * Kp:(p + 1) * Kp]])
                fit = rhs @ self._factor(p).solve(rhs)
                if fit > best:
                    best, group = fit, p
        coef = self._factor(group).solve(np.concatenate([shared,
                                                         cat[group * Kp:(group + 1) * Kp]]))
        v[:Ks] = coef[:Ks]
        v[Ks + group * Kp:Ks + (group + 1) * Kp] = coef[Ks:]
        return v, group

    def _factor(self, group):
        """:class:`GramFactor` of a group's topics (-1: all topics), cached."""
        cache = getattr(self, "_factors", None)
        if cache is None:
            cache = self._factors = {}
        if group not in cache:
            cache[group] = GramFactor(self._full_gram() if group < 0
                                      else self._group_grams()[group])
        return cache[group]

    def _full_gram(self):
        """``U^T U`` of all topics ``[U_s, U_1, ..., U_P]``."""
        Us, Uc = self.shared_topics_, sp.csc_matrix(self.category_topics_)
        cross = np.asarray((Uc.T @ Us)).T
        return np.block([[Us.T @ Us, cross], [cross.T, (Uc.T @ Uc).toarray()]])

    def extend(self, view):
        """Fold in the questions an index gained since the fit, without retraining.

        Rows ``n_docs_`` to ``view.n_docs - 1`` of ``view`` (an index whose first rows
        and term ids are those the model was fitted on) get coefficients by folding in;
        their categories are used when the model knows them, inferred otherwise.

        Returns
        -------
        self
        """
        coef, groups = self._new_rows(view)
        self.doc_topics_ = np.vstack([self.doc_topics_, coef.astype(np.float32)])
        self.doc_group_ = np.concatenate([self.doc_group_, groups.astype(np.int32)])
        return self

    def _new_rows(self, view):
        self._check_fitted()
        if view.n_docs < self.n_docs_:
            raise IndexFormatError(f"the topic model covers {self.n_docs_} questions but the "
                                   f"index has only {view.n_docs}: refit it")
        start = self.n_docs_
        if view.n_docs == start:
            return np.zeros((0, self.doc_topics_.shape[1])), np.zeros(0, dtype=np.int64)
        counts = view.index["question"].rows_matrix()[start:]
        cats = [None if c < 0 else view.categories[c] for c in view.doc_category[start:]]
        logger.info("folding in %d questions added since the topic model was fitted",
                    view.n_docs - start)
        return self.fold_in(counts, cats, view=view)

    def scorer(self, view):
        """The feature scorer (one column, :attr:`feature_name_`)."""
        return TopicScorer(self, view)

    def select_rows(self, view, rows) -> "TopicModel":
        """A copy whose question coefficients are those of ``rows`` of ``view``, in that
        order (questions added since the fit folded in first): what a compaction stores."""
        coef, groups = self._new_rows(view)
        rows = np.asarray(rows)
        model = copy.copy(self)
        model.doc_topics_ = np.ascontiguousarray(
            np.vstack([self.doc_topics_, coef.astype(np.float32)])[rows])
        model.doc_group_ = np.concatenate([self.doc_group_, groups.astype(np.int32)])[rows]
        return model


class TopicScorer:
    """``s_topic`` (eq. 13) of candidate rows; the query is folded in once per query.

    Questions the index gained after the fit (see :meth:`TopicModel.extend`) are folded
    in when the scorer is made.
    """

    def __init__(self, model: TopicModel, view):
        model._check_fitted()
        self.model, self.view = model, view
        self.names = (model.feature_name_,)
        coef, groups = model._new_rows(view)
        if len(groups):
            doc_topics = np.vstack([model.doc_topics_, coef.astype(np.float32)])
            doc_group = np.concatenate([model.doc_group_, groups.astype(np.int32)])
        else:
            doc_topics, doc_group = model.doc_topics_, model.doc_group_
        self._Ks = model.shared_topics_.shape[1]
        self._doc_topics, self._doc_group = np.asarray(doc_topics), np.asarray(doc_group)
        self._norms = np.sqrt(np.einsum("ij,ij->i", doc_topics, doc_topics, dtype=np.float64))

    def query_vector(self, query):
        """``(v_q, group, ||v_q||)`` (see :meth:`TopicModel.fold_query`), cached in
        ``query.cache``."""
        key = ("topics", self.names[0])
        entry = query.cache.get(key)
        if entry is None:
            v, group = self.model.fold_query(query, self.view)
            entry = query.cache[key] = (v, group, float(np.sqrt(v @ v)))
        return entry

    def score(self, query, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), 1))
        if len(rows) == 0 or len(query.term_ids) == 0:
            return out
        with one_blas_thread():
            return self._score(query, rows, out)

    def _score(self, query, rows, out):
        v, group, vnorm = self.query_vector(query)
        if vnorm == 0:
            return out
        Ks = self._Ks
        topics = self._doc_topics[rows].astype(np.float64)
        dots = topics[:, :Ks] @ v[:Ks]
        if topics.shape[1] > Ks:                              # category topics (not NMF)
            blocks = v[Ks:].reshape(-1, topics.shape[1] - Ks)  # the query's block per group
            dots += np.einsum("ij,ij->i", topics[:, Ks:], blocks[self._doc_group[rows]])
        denom = self._norms[rows] * vnorm
        np.divide(dots, denom, out=out[:, 0], where=denom > 0)
        return out


# ---------------------------------------------------------------------------------------
# Eq. 14
# ---------------------------------------------------------------------------------------
def interpolate(term_scores, topic_scores, alpha=0.6, *, qid=None):
    """Eq. 14: ``alpha * s_topic + (1 - alpha) * s_term``, the term score normalised per query.

    The term scores of each query's candidates are min–max normalised to [0, 1] (all 0
    when they are equal), so that they are on the scale of the cosine ``s_topic``.

    Parameters
    ----------
    term_scores, topic_scores : array-like of shape (n,)
    alpha : float in [0, 1], default 0.6
    qid : array-like of shape (n,), optional
        Query of each candidate (default: all one query).

    Returns
    -------
    scores : ndarray of shape (n,)

    Examples
    --------
    >>> interpolate([10.0, 5.0, 0.0], [0.0, 0.5, 1.0], 0.6).round(3).tolist()
    [0.4, 0.5, 0.6]
    """
    term = np.asarray(term_scores, dtype=np.float64)
    topic = np.asarray(topic_scores, dtype=np.float64)
    if term.shape != topic.shape or term.ndim != 1:
        raise ValueError(f"term and topic scores must be 1-d of the same length; got "
                         f"{term.shape} and {topic.shape}")
    if not 0 <= alpha <= 1:
        raise ParameterError(f"alpha must be in [0, 1]; got {alpha!r}")
    if qid is None:
        inverse, n_q = np.zeros(len(term), dtype=np.int64), 1
    else:
        _, inverse = np.unique(np.asarray(qid), return_inverse=True)
        inverse = inverse.ravel()
        n_q = int(inverse.max()) + 1 if len(inverse) else 0
    lo = np.full(n_q, np.inf)
    hi = np.full(n_q, -np.inf)
    np.minimum.at(lo, inverse, term)
    np.maximum.at(hi, inverse, term)
    span = (hi - lo)[inverse]
    norm = np.zeros_like(term)
    np.divide(term - lo[inverse], span, out=norm, where=span > 0)
    return alpha * topic + (1.0 - alpha) * norm


class TopicInterpolation(BaseEstimator):
    """Eq. 14 as an engine ranker: orders candidates by :func:`interpolate`.

    Stored in an index under the name the engine's ``SearchConfig.ranker`` names (default
    ``"ranker"``), it ranks every query's candidates by
    ``alpha * <topic_feature> + (1 - alpha) * normalised <term_feature>``; the engine calls
    :meth:`predict` with one query's candidates at a time, which the per-query
    normalisation needs.

    Parameters
    ----------
    term_feature : str, default "bm25"
    topic_feature : str, default "topic_gnmfnc"
    alpha : float, default 0.6
    """

    kind = "topic-interpolation"
    _parameter_constraints = {"alpha": Interval(0, 1),
                              "term_feature": InstanceOf(str, name="a string"),
                              "topic_feature": InstanceOf(str, name="a string")}

    def __init__(self, term_feature="bm25", topic_feature="topic_gnmfnc", alpha=0.6):
        self.term_feature = term_feature
        self.topic_feature = topic_feature
        self.alpha = alpha

    @property
    def feature_names_in_(self):
        return (self.term_feature, self.topic_feature)

    def predict(self, X, qid=None):
        """Scores of candidates: ``X`` has the columns of ``feature_names_in_``."""
        validate_params(self)
        X = np.asarray(X, dtype=np.float64)
        return interpolate(X[:, 0], X[:, 1], self.alpha, qid=qid)

    def state(self):
        return {}, {}

    @classmethod
    def from_state(cls, params, meta, arrays):
        return cls(**params)
