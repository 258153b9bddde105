"""Okapi BM25 (Robertson et al.) with the idf/tf variants compared by Kamphuis et al. (2020).

For a query term ``t`` with document frequency ``df`` among ``N`` documents and a document
``d`` of length ``|d|`` where ``t`` occurs ``tf`` times::

    w(t, d) = idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))          (robertson, lucene)
    w(t, d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))   (atire)

    idf(t) = log(max(1, (N - df + 0.5) / (df + 0.5)))   robertson (clipped at 0)
             log(1 + (N - df + 0.5) / (df + 0.5))        lucene
             log(N / df)                                  atire

and ``score(q, d) = sum_t qtf_t * w(t, d)``. These are the definitions of bm25s, so the
scores are equal for equal tokens.
"""
from __future__ import annotations

import numpy as np

from .._utils import Interval
from .base import TermModel

__all__ = ["BM25", "bm25_idf", "bm25_weight"]


def bm25_idf(method, df, n_docs) -> np.ndarray:
    """idf of every term for a BM25 ``method`` (0 where ``df`` is 0)."""
    df = np.asarray(df, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "robertson":
            idf = np.log(np.maximum(1.0, (n_docs - df + 0.5) / (df + 0.5)))
        elif method == "lucene":
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        else:  # atire
            idf = np.log(n_docs / df)
    return np.where(df > 0, idf, 0.0)


def bm25_weight(tf, idf, doc_len, avg_doc_len, *, k1, b, method) -> np.ndarray:
    """``w(t, d)`` of the module docstring, element-wise over arrays of term counts ``tf``
    in documents of lengths ``doc_len``, the terms' ``idf`` (:func:`bm25_idf`) and the
    collection's ``avg_doc_len``."""
    tf = np.asarray(tf, dtype=np.float64)
    norm = k1 * (1 - b + b * doc_len / max(avg_doc_len, 1e-12))
    tfc = tf * (k1 + 1) / (tf + norm) if method == "atire" else tf / (tf + norm)
    return idf * tfc


class BM25(TermModel):
    """BM25 ranking function.

    Parameters
    ----------
    field : str, default "question"
    k1 : float, default 1.2
        Term-frequency saturation.
    b : float, default 0.75
        Length normalisation.
    method : {"lucene", "robertson", "atire"}, default "lucene"
        idf/tf variant (see the module docstring); "lucene" never gives negative scores.

    Examples
    --------
    >>> BM25(k1=1.5).cache_key()
    'bm25(b=0.75,k1=1.5,method=lucene)'
    """

    name = "bm25"
    _parameter_constraints = {"k1": Interval(0, None, closed="neither"), "b": Interval(0, 1),
                              "method": ("lucene", "robertson", "atire")}

    def __init__(self, *, field="question", k1=1.2, b=0.75, method="lucene"):
        super().__init__(field=field)
        self.k1 = k1
        self.b = b
        self.method = method

    def _weights_can_be_zero(self) -> bool:
        return self.method != "lucene"  # robertson clips idf at 0; atire's is 0 at df = N

    def _weight(self, field, tf, rows, terms):
        stats = field.stats
        return bm25_weight(tf, bm25_idf(self.method, stats.df[terms], stats.n_docs),
                           field.doc_len[rows], stats.avg_doc_len, k1=self.k1, b=self.b,
                           method=self.method)
