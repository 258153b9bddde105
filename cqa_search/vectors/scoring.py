"""The features and the dense search of an :class:`~.model.EmbeddingModel` over an index.

:class:`EmbeddingScorer` is the model's :class:`~cqa_search.features.FeatureScorer` (the
columns of :data:`FEATURE_NAMES`) and the dense half of the hybrid first stage
(:meth:`EmbeddingScorer.nearest`, :meth:`EmbeddingScorer.cosines`; merged with the term
model's top list by :func:`cqa_search.retrieval.hybrid.merge`).

A query's parts: its title and body when the query has them (``AnalyzedQuery.title`` and
``.body``, term ids in text order), else its whole text is its title and it has no body;
a feature of a part the query lacks is 0 (the same for every candidate of the query, so
it does not change a linear ranker's order).
"""
from __future__ import annotations

import numpy as np

from .._blas import one_blas_thread
from ..retrieval import BM25, VSM
from . import dense, parts, sif, softcos

__all__ = ["EmbeddingScorer", "query_parts", "FEATURE_NAMES"]

#: The soft-cosine similarity matrices and the parts of a question they compare.
MATRICES = ("emb", "char")
TEXTS = ("title", "body", "question")
#: The features of the model, in column order.
FEATURE_NAMES = (
    ("emb_sif", "emb_mean")
    + tuple(f"softcos_{t}" for t in TEXTS)
    + tuple(f"softcos_char_{t}" for t in TEXTS)
    + tuple(f"field_{p}_{m}" for m in ("bm25", "vsm") for p in parts.PARTS))


def query_parts(query) -> dict:
    """``{"title", "body", "question"}`` -> term ids (text order) of an analysed query."""
    title = getattr(query, "title", None)
    body = getattr(query, "body", None)
    if title is None and body is None:
        title, body = query.sequence, None
    empty = np.zeros(0, dtype=np.int64)
    return {"title": empty if title is None else np.asarray(title, dtype=np.int64),
            "body": empty if body is None else np.asarray(body, dtype=np.int64),
            "question": np.asarray(query.sequence, dtype=np.int64)}


def _dot(matrix, vector) -> np.ndarray:
    """``matrix @ vector`` in float64, each row's sum by numpy's reduction: the same
    whatever other rows are scored with it (BLAS rounds a row's product differently with
    the number of rows), so the shards of a sharded index score as one index."""
    return (np.asarray(matrix, dtype=np.float64) * np.asarray(vector, dtype=np.float64)
            ).sum(axis=1)


def _bag(ids):
    """Distinct term ids and their counts."""
    return np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)


class EmbeddingScorer:
    """Features of candidates and dense search, for one engine (see the module docstring).

    Rows the index gained after the fit get theirs when the scorer is made
    (:meth:`EmbeddingModel.extended_rows`).
    """

    def __init__(self, model, view):
        self.model, self.view = model, view
        self.names = model.feature_names
        # what it keeps of a query (and its statistics' keys) apart from those of another
        # embeddings model of the index (its features have another prefix)
        prefix = model.feature_prefix
        self._key = (lambda name: name) if prefix is None else (lambda name: (prefix, name))
        rows = model.extended_rows(view)
        self.vectors, self.norms, self.fields = rows.vectors, rows.norms, rows.fields
        self.ivf = None if rows.doc_list is None else dense.InvertedFile(
            model.centroids_, rows.doc_list, model.n_probe_, model.list_vectors_)
        self.question = view.index["question"]
        self.matrices = {"emb": model.emb_similarity_, "char": model.char_similarity_}
        self._bm25, self._vsm = BM25(), VSM()
        self._has_vector = sif.has_vector(model.word_vectors_)  # read once, not per query

    # -- a shard's statistics -------------------------------------------------------------
    def row_stats(self) -> dict:
        """The statistics of the title and body fields the model stores (computed over
        these rows alone; {} when they are the index's fields, whose statistics a shard
        already reads over the whole index): see
        :meth:`~cqa_search.searcher.LocalSearcher.row_stats`."""
        if self.model.parts_ is None:
            return {}
        return {self._stats_key(p): f.stats for p, f in self.fields.items()}

    def _stats_key(self, part) -> str:
        prefix = self.model.feature_prefix
        return f"embeddings:{part}" if prefix is None else f"embeddings:{prefix}:{part}"

    def use_stats(self, stats) -> None:
        """Score the title and body fields with ``stats`` (the whole index's)."""
        self.fields = {p: f.with_stats(stats[self._stats_key(p)])
                       if self._stats_key(p) in stats else f for p, f in self.fields.items()}

    # -- the query ----------------------------------------------------------------------
    def query_vector(self, query) -> np.ndarray:
        """The query's SIF vector (unit length, or zero), cached in ``query.cache``."""
        v = query.cache.get(self._key("sif"))
        if v is None:
            m = self.model
            v = query.cache[self._key("sif")] = sif.sentence_vector(query.sequence, m.word_vectors_,
                                                         m.sif_weights_, m.component_)
        return v

    # -- dense search ---------------------------------------------------------------------
    def nearest(self, query, k, *, allowed=None, tie_rank=None):
        """The ``k`` rows of largest cosine with the query's SIF vector.

        Exact up to the model's ``exact_limit`` allowed rows, through the inverted file
        above it (when the model has one), exact again when the probed lists hold fewer
        than ``k`` allowed rows (a narrow filter).

        Parameters
        ----------
        query : AnalyzedQuery
        k : int
        allowed : ndarray of bool, shape (n_docs,), optional
            Only these rows (not deleted, passing the filters).
        tie_rank : ndarray of int, optional
            Secondary sort key of equal cosines (default: the row).

        Returns
        -------
        rows : ndarray of int64, sorted by (-cosine, tie rank)
        cosines : ndarray of float64
            As :meth:`cosines` gives them (the float32 products choose the rows).
        """
        q = self.query_vector(query)
        if not np.any(q):  # no word with a vector: every cosine is 0
            return np.zeros(0, np.int64), np.zeros(0)
        # The rows read and their float32 products are kept for the query: a deeper list
        # (the first stage deepens its lists) is a selection from them, not a second read
        # of the vectors (40 MB for the inverted file's 100 lists at a million questions).
        key = ("dense_scores", id(self))
        cached = query.cache.get(key)
        if cached is None or cached[0] is not allowed:
            n_allowed = len(self.vectors) if allowed is None else int(np.count_nonzero(allowed))
            exact = self.ivf is None or n_allowed <= self.model.exact_limit
            scored = (dense.exact_scores if exact else self.ivf.scores)(
                self.vectors, q, allowed=allowed)
            cached = query.cache[key] = (allowed, n_allowed, exact, scored)
        _, n_allowed, exact, scored = cached
        if not exact and len(scored[0]) < min(k, n_allowed):  # too few in the probed lists
            scored = dense.exact_scores(self.vectors, q, allowed=allowed)
            query.cache[key] = (allowed, n_allowed, True, scored)
        rows, _ = dense.best_of(*scored, k, tie_rank)
        cosines = self.cosines(query, rows)  # in float64: the same on every shard
        order = np.lexsort((rows if tie_rank is None else tie_rank[rows], -cosines))
        return rows[order], cosines[order]

    def cosines(self, query, rows) -> np.ndarray:
        """Cosine of the query's SIF vector with each of ``rows`` (float64, computed in
        float64: the same whatever other rows are scored with them, as on the shards of
        a sharded index)."""
        rows = np.asarray(rows, dtype=np.int64)
        with one_blas_thread():
            return _dot(self.vectors[rows], self.query_vector(query))

    # -- features -------------------------------------------------------------------------
    def score(self, query, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), len(self.names)))
        if len(rows) == 0:
            return out
        with one_blas_thread():
            out[:, 0] = self.cosines(query, rows)
            out[:, 1] = self._mean_cosines(query, rows)
            qparts = query_parts(query)
            texts = {**self.fields, "question": self.question}
            col = 2
            for j, name in enumerate(MATRICES):
                for i, text in enumerate(TEXTS):
                    out[:, col] = self._soft_cosines(query, name, text, qparts[text],
                                                     texts[text], rows,
                                                     self.norms[rows, j * len(TEXTS) + i])
                    col += 1
            for model in (self._bm25, self._vsm):
                for part in ("title", "body"):
                    ids, qtf = _bag(qparts[part])
                    if len(ids):
                        out[:, col] = model.score_rows(self.fields[part], ids,
                                                       qtf.astype(np.float64), rows)
                    col += 1
        return out

    def _mean_cosines(self, query, rows):
        m = self.model
        q = query.cache.get(self._key("mean"))
        if q is None:
            q = query.cache[self._key("mean")] = sif.sentence_vector(query.sequence,
                                                                     m.word_vectors_)
        if not np.any(q):
            return np.zeros(len(rows))
        terms, pos = self.question.sequences_of(rows)
        offsets = np.concatenate(([0], np.cumsum(np.bincount(pos, minlength=len(rows)))))
        return _dot(sif.mean_rows(terms, offsets, m.word_vectors_, self._has_vector), q)

    def _soft_cosines(self, query, matrix, text, ids, field, rows, row_norms):
        if len(ids) == 0:
            return np.zeros(len(rows))
        key = self._key(("softcos", matrix, text))
        entry = query.cache.get(key)
        S = self.matrices[matrix]
        if entry is None:  # the query's M x and x^T M x, once per query
            terms, tf = _bag(ids)
            w = tf * softcos.idf_of(self.model.idf_, terms)
            z_terms, z = softcos.spread(terms, w, S)
            norm = float(w @ z[np.searchsorted(z_terms, terms)])
            entry = query.cache[key] = (z_terms, z, norm)
        z_terms, z, norm = entry
        if norm <= 0:
            return np.zeros(len(rows))
        return softcos.spread_cosines(z_terms, z, norm, field, rows, self.model.idf_,
                                      row_norms)
