"""Vector space model: cosine between tf-idf vectors (Salton et al., 1975).

Documents and queries are weighted like scikit-learn's ``TfidfTransformer`` (which fits
the idf): ``tf * idf`` with ``idf = ln((1 + N) / (1 + df)) + 1`` (``smooth_idf``) or
``ln(N / df) + 1``, optionally ``1 + ln(tf)`` (``sublinear_tf``), then L2-normalised; the
score is their dot product, the cosine.
"""
from __future__ import annotations

import numpy as np

from .base import _CHUNK, TermModel, posting_terms

__all__ = ["VSM", "tfidf_weight"]


def tfidf_weight(counts, idf, *, sublinear_tf=False) -> np.ndarray:
    """The unnormalised tf-idf weight of term counts, element-wise: ``tf * idf``, or
    ``(1 + ln tf) * idf`` (``sublinear_tf``)."""
    counts = np.asarray(counts, dtype=np.float64)
    return (1.0 + np.log(counts) if sublinear_tf else counts) * idf


class VSM(TermModel):
    """tf-idf cosine similarity.

    Parameters
    ----------
    field : str, default "question"
    sublinear_tf : bool, default False
        Use ``1 + ln(tf)`` instead of ``tf``.
    smooth_idf : bool, default True
        scikit-learn's smoothed idf.
    """

    name = "vsm"
    _parameter_constraints = {"sublinear_tf": (False, True), "smooth_idf": (False, True)}

    def __init__(self, *, field="question", sublinear_tf=False, smooth_idf=True):
        super().__init__(field=field)
        self.sublinear_tf = sublinear_tf
        self.smooth_idf = smooth_idf

    def idf(self, field) -> np.ndarray:
        """idf of every term of ``field`` (cached), as scikit-learn's ``TfidfTransformer``
        fits it on float32 counts, bit for bit, from the field's collection statistics."""
        def compute():
            stats = field.stats
            df = np.asarray(stats.df, dtype=np.float32) + np.float32(self.smooth_idf)
            idf = np.full_like(df, stats.n_docs + int(self.smooth_idf), dtype=np.float32)
            with np.errstate(divide="ignore"):
                idf /= df
            np.log(idf, out=idf)
            idf += 1.0
            return idf
        return field.derived(f"idf:{self.cache_key()}", compute)

    def _doc_norms(self, field) -> np.ndarray:
        """L2 norm of every document's tf-idf vector (cached)."""
        def compute():
            idf = self.idf(field)
            sq = np.zeros(field.n_docs)
            for start in range(0, field.nnz, _CHUNK):
                stop = min(start + _CHUNK, field.nnz)
                w = tfidf_weight(field.counts[start:stop], idf[posting_terms(field, start, stop)],
                                 sublinear_tf=self.sublinear_tf)
                sq += np.bincount(field.indices[start:stop], weights=w * w, minlength=field.n_docs)
            return np.sqrt(sq)
        return field.derived(f"norms:{self.cache_key()}", compute)

    def _weight(self, field, tf, rows, terms):
        return tfidf_weight(tf, self.idf(field)[terms], sublinear_tf=self.sublinear_tf) \
            / self._doc_norms(field)[rows]

    def _usable(self, field, term_ids, qtf):
        # The query vector spans every vocabulary term, as scikit-learn's transform would.
        return term_ids, qtf

    def _query_weights(self, field, term_ids, qtf):
        w = tfidf_weight(qtf, self.idf(field)[term_ids], sublinear_tf=self.sublinear_tf)
        norm = np.sqrt(w @ w)
        return w / norm if norm > 0 else w
