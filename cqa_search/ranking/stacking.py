"""Stacked meta-ranker over base rankers (Tomeh et al., 2013, §2.2).

The base rankers (any learners of this package but stacking) are trained on k-1 folds
of the training queries and score the held-out fold; the held-out scores of all folds
are the meta-ranker's training features, one column per base ranker ("each base-ranker
computes one feature for each hypothesis"). The meta-ranker (RankSVM, as in the paper,
or another linear learner) learns how to weigh them. The base rankers are then refit on
all training queries.

Scales. A base ranker's scores are standardised with the mean and standard deviation of
its scores on its own training rows, for the fold models and the final models alike, so
the meta-ranker's weights apply to the final models as they were learned on the fold
models' held-out scores.

What the engine applies. The meta-ranker is linear in the standardised base scores and
each base ranker is linear in the normalised features (boosting adds threshold steps),
so the stack collapses exactly into one model of the same form:

    score = sum_m beta_m (f_m(z) - mu_m) / sigma_m
          = z . sum_m (beta_m / sigma_m) w_m  +  steps of every m scaled by beta_m / sigma_m
            + const

which is what :class:`~cqa_search.ranking.LinearRanker` stores; a test checks that it
equals the meta-ranker applied to the base rankers' scores.

References
----------
Tomeh, N., Habash, N., Roth, R., Farra, N., Dasigi, P. and Diab, M. (2013). Reranking
with linguistic and semantic features for Arabic optical character recognition. ACL.
Wolpert, D. H. (1992). Stacked generalization. Neural Networks 5(2).
"""
from __future__ import annotations

import logging
import numbers

import numpy as np

from .._utils import Interval
from ..exceptions import ParameterError
from ._utils import LearnerFit, query_folds

logger = logging.getLogger(__name__)

DEFAULTS = {"base": ("powell", "coordinate-ascent", "ranksvm", "perceptron", "boosting",
                     "lambdarank"),
            "base_params": None, "meta": "ranksvm", "meta_params": None, "n_splits": 5}
CONSTRAINTS = {"meta": ("powell", "coordinate-ascent", "ranksvm", "perceptron", "lambdarank"),
               "n_splits": Interval(2, None, kind=numbers.Integral)}
BASE_LEARNERS = ("powell", "coordinate-ascent", "ranksvm", "perceptron", "boosting",
                 "lambdarank")
MAX_ITER = None  # each learner uses its own default
EARLY_STOPPING = False


def check_params(base, base_params, meta_params):
    """Validate the list-valued parameters (the tuple constraints cannot express them)."""
    if isinstance(base, str) or not isinstance(base, (list, tuple)) or not base:
        raise ParameterError(f"base must be a non-empty list of learner names among "
                         f"{{{', '.join(map(repr, BASE_LEARNERS))}}}; got {base!r}")
    for name in base:
        if name not in BASE_LEARNERS:
            raise ParameterError(f"base must list learners among "
                             f"{{{', '.join(map(repr, BASE_LEARNERS))}}}; got {name!r}")
    if len(set(base)) != len(base):
        raise ParameterError(f"base must not repeat a learner; got {list(base)!r}")
    if base_params is not None:
        if not isinstance(base_params, dict) or any(k not in base for k in base_params) \
                or not all(isinstance(p, dict) for p in base_params.values()):
            raise ParameterError(f"base_params must be a dict of dicts keyed by base learners "
                             f"{list(base)!r}; got {base_params!r}")
        for name, p in base_params.items():
            it = p.get("max_iter")
            if it is not None and not Interval(1, None, kind=numbers.Integral).check(it):
                raise ParameterError(f"max_iter must be None or an integer in [1, inf); got "
                                 f"{it!r} (base_params of {name!r})")
    if meta_params is not None and not isinstance(meta_params, dict):
        raise ParameterError(f"meta_params must be a dict or None; got {meta_params!r}")


def _own(base_params, name, max_iter):
    """A base learner's options and iteration limit (its own ``max_iter`` if given)."""
    params = dict(base_params.get(name) or {})
    return params, params.pop("max_iter", max_iter)


def _standardised(f: LearnerFit, Z):
    """(mu, sigma) of a fit's scores on its training rows ``Z``."""
    s = f.decision(Z)
    sd = float(s.std())
    return float(s.mean()), sd if sd > 0 else 1.0


def fit(Z, y, groups, *, rng, max_iter=None, tol=1e-4, callback=None, fit_learner,
        base=DEFAULTS["base"], base_params=None, meta="ranksvm", meta_params=None,
        n_splits=5):
    """Stack base rankers with a linear meta-ranker; return the collapsed model.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_features)
        Normalised features, canonical order.
    y : ndarray of shape (n_samples,)
    groups : QueryGroups
    rng : numpy.random.Generator
        Draws the folds and the learners' seeds.
    max_iter, tol : int or None, float
        Passed to every learner (None: each learner's default).
    fit_learner : callable
        ``fit_learner(name, Z, y, groups, params, rng, max_iter, tol) -> LearnerFit``.
    base : list of str
        Base learners.
    base_params : dict, optional
        ``{learner: params}``; a learner's params may also hold its own ``max_iter``
        (e.g. boosting's number of rounds).
    meta : str
        The meta-ranker's learner (linear: not boosting).
    meta_params : dict, optional
    n_splits : int
        Folds of the held-out predictions (Tomeh et al. hold out a separate set; k-fold
        uses every training query once).

    Returns
    -------
    LearnerFit
        ``info["base"]``: the base learners, ``info["meta_coef"]``: their weights
        ``beta``, ``info["base_fits"]`` and ``info["base_scale"]``: the final base models
        with their ``(mu, sigma)``.
    """
    check_params(base, base_params, meta_params)
    base_params = base_params or {}
    n = len(groups)
    oof = np.zeros((n, len(base)))
    for train_q, test_q in query_folds(groups.n_queries, n_splits, rng):
        tr, g_tr = groups.subset(train_q)
        te, _ = groups.subset(test_q)
        for m, name in enumerate(base):
            params, iters = _own(base_params, name, max_iter)
            f = fit_learner(name, Z[tr], y[tr], g_tr, params, rng, iters, tol)
            mu, sd = _standardised(f, Z[tr])
            oof[te, m] = (f.decision(Z[te]) - mu) / sd
    meta_fit = fit_learner(meta, oof, y, groups, meta_params or {}, rng, max_iter, tol)
    beta = meta_fit.coef
    coef = np.zeros(Z.shape[1])
    intercept = meta_fit.intercept
    sf, st, sc = [], [], []
    fits, scales = [], []
    for m, name in enumerate(base):
        params, iters = _own(base_params, name, max_iter)
        f = fit_learner(name, Z, y, groups, params, rng, iters, tol)
        mu, sd = _standardised(f, Z)
        fits.append(f)
        scales.append((mu, sd))
        k = beta[m] / sd
        coef += k * f.coef
        intercept += k * (f.intercept - mu)
        sf.append(f.step_feature)
        st.append(f.step_threshold)
        sc.append(k * f.step_coef)
        logger.debug("stacking: %s weight %.4f", name, beta[m])
    return LearnerFit(coef=coef, intercept=float(intercept), n_iter=meta_fit.n_iter,
                      loss_curve=meta_fit.loss_curve,
                      step_feature=np.concatenate(sf).astype(np.int64),
                      step_threshold=np.concatenate(st), step_coef=np.concatenate(sc),
                      info={"base": list(base), "meta_coef": beta, "base_fits": fits,
                            "base_scale": scales, "oof_scores": oof})

