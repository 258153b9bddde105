"""Query likelihood language models with Jelinek-Mercer and Dirichlet smoothing.

``score(q, d) = log P(q | d) = sum_t qtf_t * log P(t | d)`` (Zhai & Lafferty, 2001), with
the background model ``P(t|C) = cf_t / |C|`` of the field and

- Jelinek-Mercer (zhou2011 eqs. 1-2): ``P(t|d) = (1 - lam) tf/|d| + lam P(t|C)``
- Dirichlet: ``P(t|d) = (tf + mu P(t|C)) / (|d| + mu)``

Both are computed in the sparse form that touches only the query terms' postings::

    JM:  sum_{t in q, d} qtf log(1 + (1-lam) tf / (lam |d| P(t|C)))  +  sum_t qtf log(lam P(t|C))
    Dir: sum_{t in q, d} qtf log(1 + tf / (mu P(t|C)))  +  |q| log(mu / (|d| + mu))
         + sum_t qtf log P(t|C)

which equals the log-likelihood exactly. Query terms that never occur in the field have
``P(t|C) = 0`` and are left out (they would lower every document by the same -inf).
"""
from __future__ import annotations

import numpy as np

from .._utils import Interval
from .base import TermModel

__all__ = ["LMJelinekMercer", "LMDirichlet", "jm_weight", "jm_log_prob"]


def jm_weight(tf, doc_len, p_c, lam) -> np.ndarray:
    """The posting weight of Jelinek-Mercer smoothing, ``log(1 + (1-lam) tf / (lam |d|
    P(t|C)))``, element-wise (``tf`` may be a fractional count, e.g. a translated one)."""
    return np.log1p((1 - lam) * tf / (lam * doc_len * p_c))


def jm_log_prob(tf, doc_len, p_c, lam) -> np.ndarray:
    """``log P(t|d) = log((1 - lam) tf/|d| + lam P(t|C))`` element-wise, in the sparse
    form's two parts: ``log(lam P(t|C)) + jm_weight(...)``."""
    return np.log(lam * p_c) + jm_weight(tf, doc_len, p_c, lam)


class LMJelinekMercer(TermModel):
    """Query likelihood with Jelinek-Mercer smoothing.

    Parameters
    ----------
    field : str, default "question"
    lam : float, default 0.2
        Weight of the collection model (the papers' lambda = 0.2).
    """

    name = "lm_jm"
    _parameter_constraints = {"lam": Interval(0, 1, closed="right")}

    def __init__(self, *, field="question", lam=0.2):
        super().__init__(field=field)
        self.lam = lam

    def _weight(self, field, tf, rows, terms):
        return jm_weight(tf, field.doc_len[rows], field.stats.collection_prob[terms], self.lam)

    def _constant(self, field, term_ids, qtf):
        return float(qtf @ np.log(self.lam * field.stats.collection_prob[term_ids]))


class LMDirichlet(TermModel):
    """Query likelihood with Dirichlet-prior smoothing.

    Parameters
    ----------
    field : str, default "question"
    mu : float, default 2000
        Dirichlet prior (pseudo-count of the collection model).
    """

    name = "lm_dir"
    _parameter_constraints = {"mu": Interval(0, None, closed="neither")}

    def __init__(self, *, field="question", mu=2000.0):
        super().__init__(field=field)
        self.mu = mu

    def _weight(self, field, tf, rows, terms):
        return np.log1p(tf / (self.mu * field.stats.collection_prob[terms]))

    def _doc_part(self, field, term_ids, qtf, rows=None):
        dl = field.doc_len if rows is None else field.doc_len[rows]
        return qtf.sum() * np.log(self.mu / (dl + self.mu))

    def _constant(self, field, term_ids, qtf):
        return float(qtf @ np.log(field.stats.collection_prob[term_ids]))
