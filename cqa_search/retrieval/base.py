"""The shared form of every term model and its two kernels.

Each term model scores a query ``q`` (distinct term ids with query weights) against a
document ``d`` of one field as::

    score(q, d) = constant(q) + doc_part(q)[d] + sum_{t in q} qw_t * w(t, d)

where ``w(t, d)`` is a *posting weight*, non-zero only where ``t`` occurs in ``d``. BM25,
VSM and query likelihood (in its rank-equivalent sparse form, plus the parts that make it
the exact log-likelihood) all fit this form, so one kernel scores the whole archive by
summing the posting slices of the query terms (:func:`accumulate`) and another scores a
few candidate rows by binary search in those slices (:func:`gather`).
"""
from __future__ import annotations

import numpy as np

from .._utils import Estimator, validate_params
from ..exceptions import ParameterError
from ..index.term_index import FieldIndex
from .postings import locate

__all__ = ["TermModel", "accumulate", "postings", "gather", "matching", "posting_terms"]

# Postings processed at once when computing posting weights: bounds the float64
# temporaries (a few arrays of this length) without slowing the vectorised arithmetic.
_CHUNK = 1 << 18
#: Up to this many query terms, :meth:`TermModel._usable` orders them in Python (a few
#: microseconds less than numpy's calls on a short query).
_FEW_TERMS = 16


def posting_terms(field: FieldIndex, start: int, stop: int) -> np.ndarray:
    """Term id of each posting in ``[start, stop)``."""
    return np.searchsorted(field.indptr, np.arange(start, stop), side="right") - 1


def matching(field: FieldIndex, term_ids) -> np.ndarray:
    """Mask of the documents holding at least one of ``term_ids`` (from the postings)."""
    mask = np.zeros(field.n_docs, dtype=bool)
    indptr, indices = field.indptr, field.indices
    for t in term_ids.tolist():
        mask[indices[indptr[t]:indptr[t + 1]]] = True
    return mask


def postings(field: FieldIndex, term_ids, coef, weights):
    """The postings of ``term_ids`` one term after the other: their rows and their weights
    times the term's ``coef``."""
    indptr, indices = field.indptr, field.indices
    parts_idx, parts_w = [], []
    for t, c in zip(term_ids.tolist(), coef.tolist()):
        lo, hi = indptr[t], indptr[t + 1]
        parts_idx.append(indices[lo:hi])
        w = weights[lo:hi]
        parts_w.append(w if c == 1.0 else w * c)
    if not parts_idx:
        return np.zeros(0, dtype=np.int32), np.zeros(0)
    idx = parts_idx[0] if len(parts_idx) == 1 else np.concatenate(parts_idx)
    w = parts_w[0] if len(parts_w) == 1 else np.concatenate(parts_w)
    return idx, w


def accumulate(field: FieldIndex, term_ids, coef, weights) -> np.ndarray:
    """``sum_t coef_t * weights[postings of t]`` for every document (dense float64)."""
    idx, w = postings(field, term_ids, coef, weights)
    if not len(idx):  # numpy's bincount of nothing is int64 whatever the weights
        return np.zeros(field.n_docs)
    return np.bincount(idx, weights=w, minlength=field.n_docs)


def gather(field: FieldIndex, term_ids, rows):
    """Locate the postings of ``term_ids`` in ``rows``.

    Returns
    -------
    positions : ndarray of int64
        Posting positions (into ``field.indices``/``counts``) that were found.
    i, j : ndarray of int64
        Their row index into ``rows`` and term index into ``term_ids``.
    """
    return locate(field.indptr, field.indices, term_ids, rows)


class TermModel(Estimator):
    """Base class of the term models (BM25, query likelihood, VSM).

    Subclasses set ``name`` and implement :meth:`_weight`, the posting weight as an
    element-wise function of (tf, row, term); they may override :meth:`_query_weights`,
    :meth:`_doc_part` and :meth:`_constant`, and :meth:`_weights_can_be_zero` when a
    posting may weigh 0. As scikit-learn's estimators, a model stores its parameters as
    given (keyword-only) in ``__init__`` and checks them when it is first used (here:
    :meth:`cache_key`, which every scoring method calls, and a :class:`SearchConfig`);
    ``get_params``/``set_params`` read and change them. Term models do not import
    scikit-learn (searching with the term index never needs it), so that interface is
    :class:`cqa_search._utils.Estimator` and the check
    :func:`cqa_search._utils.validate_params`.

    Parameters
    ----------
    field : str, default "question"
        The index field the model scores.
    """

    name = None
    _parameter_constraints = {}

    def __init__(self, *, field="question"):
        self.field = field

    # -- parameters ------------------------------------------------------------------
    def set_params(self, **params) -> "TermModel":
        """Change parameters (scikit-learn's ``set_params``); checked on next use."""
        super().set_params(**params)
        self.__dict__.pop("_cache_key", None)
        return self

    @property
    def index_fields(self) -> tuple:
        """The index fields the model reads (an index lacking one cannot use it)."""
        return (self.field,)

    def field_index(self, index) -> FieldIndex:
        """The postings the model scores, from an index's fields (a
        :class:`~cqa_search.index.term_index.TermIndex`, or a mapping of field names to
        :class:`FieldIndex`): ``index[self.field]``; a model of several fields combines
        them (:class:`~cqa_search.retrieval.bm25f.BM25F`)."""
        return index[self.field]

    def on_field(self, field) -> "TermModel | None":
        """The same model scoring ``field`` instead (the engine searches the answers so
        when no question holds the query's words), or None when it has no such form."""
        return type(self)(**{**self.get_params(), "field": field})

    @property
    def feature_name(self) -> str:
        """Name of this model's score as a feature: ``bm25``, ``answers_bm25``, ..."""
        return self.name if self.field == "question" else f"{self.field}_{self.name}"

    def cache_key(self) -> str:
        """Identifies the posting weights (the model and the parameters they depend on).

        Raises
        ------
        ParameterError
            A parameter is invalid (checked here, on first use).
        """
        key = self.__dict__.get("_cache_key")
        if key is None:  # computed once per set of parameters (set_params resets it)
            validate_params(self)
            if not isinstance(self.field, str) or not self.field:
                raise ParameterError(f"field must be a non-empty string; got {self.field!r}")
            params = {k: v for k, v in sorted(self.get_params().items()) if k != "field"}
            key = self._cache_key = (self.name + "(" + ",".join(f"{k}={v}" for k, v in
                                                                params.items()) + ")")
        return key

    def __eq__(self, other):
        return type(self) is type(other) and self.get_params() == other.get_params()

    def __hash__(self):
        return hash((type(self).__name__, self.cache_key(), self.field))

    # -- the model -------------------------------------------------------------------
    def posting_weights(self, field: FieldIndex) -> np.ndarray:
        """float32 weight of every posting of ``field`` (computed once, then kept by the
        field; see :meth:`FieldIndex.derived`)."""
        def compute():
            weights = np.empty(field.nnz, dtype=np.float32)
            for start in range(0, field.nnz, _CHUNK):
                stop = min(start + _CHUNK, field.nnz)
                weights[start:stop] = self._weight(field, field.counts[start:stop],
                                                   field.indices[start:stop],
                                                   posting_terms(field, start, stop))
            return weights
        return field.derived(self.cache_key(), compute)

    def largest_weights(self, field: FieldIndex) -> np.ndarray:
        """float32 array of the largest posting weight of each term of ``field``, -1 where
        not known yet: the compiled top k fills in its query terms' as it meets them (one
        pass over a term's postings, once per field) and prunes with them."""
        return field.derived(f"largest:{self.cache_key()}",
                             lambda: np.full(field.n_terms, -1.0, dtype=np.float32))

    def _weight(self, field, tf, rows, terms):
        """Posting weight ``w(t, d)`` for arrays of counts, rows and term ids."""
        raise NotImplementedError

    def _query_weights(self, field, term_ids, qtf):
        return qtf

    def _doc_part(self, field, term_ids, qtf, rows=None):
        return None

    def _constant(self, field, term_ids, qtf):
        return 0.0

    def _usable(self, field, term_ids, qtf):
        """The query terms that score, rarest first (then by id): the order of every sum
        over them (the compiled top k prunes the last, most common ones; see
        ``_numba_kernels.top_k``), and their frequencies."""
        df = field.stats.df[term_ids]
        if len(term_ids) <= _FEW_TERMS:  # (a short query: fewer numpy calls)
            keep = [i for _, _, i in sorted((d, t, i) for i, (d, t) in
                                            enumerate(zip(df.tolist(), term_ids.tolist())) if d)]
        else:
            keep = np.flatnonzero(df > 0)
            keep = keep[np.argsort(df[keep] * np.int64(field.n_terms) + term_ids[keep])]
        return term_ids[keep], qtf[keep]

    def gather_rows(self, field: FieldIndex, term_ids, qtf, rows) -> tuple:
        """The query terms of ``field`` that score (:meth:`_usable`), their frequencies and
        their postings in ``rows`` (:func:`gather`): the same for every model of a field."""
        term_ids, qtf = self._usable(field, term_ids, qtf)
        return term_ids, qtf, gather(field, term_ids, np.asarray(rows, dtype=np.int64))

    def _weights_can_be_zero(self) -> bool:
        """True when a posting may weigh 0 (e.g. an idf clipped at 0): a document's
        score then does not tell whether it holds a query term."""
        return False

    def score_all(self, field: FieldIndex, term_ids, qtf):
        """Scores of every document and the mask of documents matching a query term.

        Parameters
        ----------
        field : FieldIndex
        term_ids : ndarray of int, distinct ids of the query terms
        qtf : ndarray of float, their frequencies in the query

        Returns
        -------
        scores : ndarray of float64, shape (n_docs,)
        matched : ndarray of bool, shape (n_docs,)
            Documents holding at least one query term (whatever their score).
        """
        term_ids, qtf = self._usable(field, term_ids, qtf)
        sparse = accumulate(field, term_ids, self._query_weights(field, term_ids, qtf),
                            self.posting_weights(field))
        # Query and posting weights are positive, except where a model says a posting
        # may weigh 0: the sum is then no test of holding a term, the postings are.
        matched = matching(field, term_ids) if self._weights_can_be_zero() else sparse > 0
        doc_part = self._doc_part(field, term_ids, qtf)
        if doc_part is not None:
            sparse += doc_part
        constant = self._constant(field, term_ids, qtf)
        if constant:
            sparse += constant  # in place: a fresh array, and n_docs long
        return sparse, matched

    def score_rows(self, field: FieldIndex, term_ids, qtf, rows, gathered=None) -> np.ndarray:
        """Scores of the documents ``rows`` only (same values as :meth:`score_all`).

        ``gathered``: the ``(term_ids, qtf, (pos, i, j))`` of :meth:`gather_rows` for these
        arguments, when the models of one field share it
        (:class:`~cqa_search.features.TermFeatures`).
        """
        rows = np.asarray(rows, dtype=np.int64)
        term_ids, qtf, (pos, i, j) = gathered or self.gather_rows(field, term_ids, qtf, rows)
        # computed, never read from float32 posting weights: a few postings, and the same
        # values whether or not the field has its weights stored or derived already
        w = self._weight(field, field.counts[pos], rows[i], term_ids[j])
        qw = self._query_weights(field, term_ids, qtf)
        scores = np.bincount(i, weights=w * qw[j], minlength=len(rows))
        doc_part = self._doc_part(field, term_ids, qtf, rows)
        if doc_part is not None:
            scores = scores + doc_part
        return scores + self._constant(field, term_ids, qtf)
