"""LinearRanker: one weight vector over named feature scores, learned by a chosen learner.

The engine computes named feature columns for every (query, candidate) pair (term,
context, translation, topic, ... scores) and orders the candidates by what the stored
ranker's ``predict`` returns. Every learner of this package produces the same kind of
model over the same columns:

    z     = (x - norm_offset_) / norm_scale_             (normalisation fitted on training,
                                                          or per query: see ``normalize``)
    score = z . coef_ + intercept_
            + sum_k step_coef_[k] * [z[step_feature_[k]] > step_threshold_[k]]

The step terms are empty except for ``boosting`` (thresholded binary features: a fixed
transform stored in the model) and for ``stacking`` over boosting; ``stacking`` over
linear base rankers collapses to ``coef_`` alone (see :mod:`.stacking`).

Learners (``learner=``; options in ``params``, defaults in each module's ``DEFAULTS``):

=====================  ==================================================  ==============
learner                what it optimises                                   max_iter means
=====================  ==================================================  ==============
``powell``             training MAP, Powell's method + random restarts     iterations per
                       (Zhou et al. 2011 §3.4, 2013 eq. 20)                restart (100)
``coordinate-ascent``  training MAP, one weight at a time, exact line      sweeps (100)
                       search (Metzler & Croft 2007)
``ranksvm``            pairwise (squared) hinge loss, linear SVM           liblinear (1000)
                       (Joachims 2002)
``perceptron``         pairwise perceptron with uneven margins (Shen &     epochs (100)
                       Joshi 2005, Algorithms 1 and 2), averaged
``boosting``           ExpLoss over a base score + thresholded features    rounds (200)
                       (Collins & Koo 2005, Figures 3 and 4)
``lambdarank``         RankNet loss with delta-MAP-scaled gradients        epochs (200)
                       (Burges et al. 2006; Gillenwater et al. 2013)
``anchored``           pairwise logistic loss of a base score (the first   L-BFGS (500)
                       stage's) plus a correction, L2 on the correction:
                       strong regularisation keeps the base's order
``stacking``           a linear meta-ranker over base rankers' held-out    (each learner's)
                       scores (Tomeh et al. 2013 §2.2)
=====================  ==================================================  ==============

Row order. ``fit`` sorts the rows into a canonical order (query id, then feature values,
then label) before anything else, so the model does not depend on the order of the
rows; randomness comes only from ``random_state``.
"""
from __future__ import annotations

import logging
import numbers
import warnings
from collections.abc import Mapping
from types import SimpleNamespace

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from .._utils import RANDOM_STATE, Interval, validate_params
from ..exceptions import ConvergenceWarning, ParameterError
from ..index.validate import InvalidArray, check_array, check_count
from . import (anchored, boosting, coordinate_ascent, lambdarank, perceptron, powell, ranksvm,
               stacking)
from ._utils import (LearnerFit, QueryGroups, mean_average_precision, query_folds,
                     query_minmax)

__all__ = ["LinearRanker", "LEARNERS", "cross_validate", "cross_val_predict"]

logger = logging.getLogger(__name__)

#: Learner name -> module (``fit``, ``DEFAULTS``, ``CONSTRAINTS``, ``MAX_ITER``,
#: ``EARLY_STOPPING``).
LEARNERS = {"powell": powell, "coordinate-ascent": coordinate_ascent, "ranksvm": ranksvm,
            "perceptron": perceptron, "boosting": boosting, "lambdarank": lambdarank,
            "anchored": anchored, "stacking": stacking}


def _options(learner, params, feature_names) -> dict:
    """Validated learner options: the module's defaults updated by ``params``."""
    module = LEARNERS[learner]
    params = {} if params is None else dict(params)
    unknown = sorted(set(params) - set(module.DEFAULTS))
    if unknown:
        raise ParameterError(f"params has no option {unknown[0]!r} for learner {learner!r}; "
                         f"options: {{{', '.join(map(repr, module.DEFAULTS))}}}")
    opts = {**module.DEFAULTS, **params}
    if isinstance(opts.get("base_feature"), str):  # a learner over a base score, by name
        names = list(feature_names)
        if opts["base_feature"] not in names:
            raise ParameterError(f"base_feature must be None, a column index or a feature name "
                             f"among {{{', '.join(map(repr, names))}}}; got "
                             f"{opts['base_feature']!r}")
        opts["base_feature"] = names.index(opts["base_feature"])
    validate_params(SimpleNamespace(**opts), module.CONSTRAINTS)
    if learner == "stacking":
        stacking.check_params(opts["base"], opts["base_params"], opts["meta_params"])
        for name, p in (opts["base_params"] or {}).items():
            _options(name, {k: v for k, v in p.items() if k != "max_iter"}, feature_names)
        _options(opts["meta"], opts["meta_params"], ())
    return opts


def _fit_learner(learner, Z, y, groups, params, rng, max_iter, tol, callback=None,
                 feature_names=()) -> LearnerFit:
    module = LEARNERS[learner]
    opts = _options(learner, params, feature_names)
    if learner == "stacking":
        def fit_learner(name, Zs, ys, gs, p, r, mi, t):
            return _fit_learner(name, Zs, ys, gs, p, r, mi, t, feature_names=feature_names)
        opts["fit_learner"] = fit_learner
    max_iter = module.MAX_ITER if max_iter is None else max_iter
    return module.fit(Z, y, groups, rng=rng, max_iter=max_iter, tol=tol, callback=callback,
                      **opts)


def _json(value):
    """Learner diagnostics as JSON scalars/lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value


class LinearRanker(BaseEstimator):
    """Rank candidates by a learned weighted sum of their (normalised) feature scores.

    Parameters
    ----------
    learner : {"powell", "coordinate-ascent", "ranksvm", "perceptron", "boosting", \
"lambdarank", "anchored", "stacking"}, default "powell"
        How the weights are learned (see the module docstring).
    params : dict, optional
        The learner's options, e.g. ``{"C": 0.1}`` for ranksvm or
        ``{"base": ["powell", "ranksvm"], "meta": "ranksvm"}`` for stacking; unknown
        options are refused. Defaults: ``LEARNERS[learner].DEFAULTS``.
    normalize : {"zscore", "minmax", "query", None}, default "zscore"
        Feature normalisation: fitted on the training rows (``"zscore"``: mean and
        standard deviation; ``"minmax"``: minimum and range; a constant column is left
        unscaled), or ``"query"``: each query's candidates min-max scaled to [0, 1]
        among themselves (LETOR's query-level normalisation), in training and when
        ranking, so that a score's spread in one query (long queries have large BM25
        scores) does not set its weight in another. A candidate's score then depends on
        the other candidates of its query: ``predict`` takes their ``qid``, and
        :meth:`explain` cannot score one candidate alone.
    max_iter : int or None, default None
        Iteration limit of the learner (its meaning and default — used when None — are
        in the module docstring's table).
    tol : float, default 1e-4
        Convergence tolerance of the learner.
    early_stopping : bool, default False
        For the iterative learners (perceptron, boosting, lambdarank): choose the number
        of iterations that maximises MAP on ``validation_fraction`` of the training
        queries, then refit on all training queries with that many iterations.
    validation_fraction : float, default 0.2
    random_state : None, int or numpy.random.Generator
        Seeds every random choice (restarts, query shuffling, folds); an int gives the
        same model bit for bit. (A stored ranker needs None or an int.)

    Attributes
    ----------
    feature_names_in_ : ndarray of str, shape (n_features,)
        The feature columns, in the order ``predict`` expects them.
    n_features_in_ : int
    norm_offset_, norm_scale_ : ndarray of shape (n_features,)
    coef_ : ndarray of shape (n_features,)
        Weights of the normalised features.
    intercept_ : float
    step_feature_, step_threshold_, step_coef_ : ndarray of shape (n_steps,)
        Threshold terms (boosting): feature column, threshold on the normalised value,
        weight.
    n_iter_ : int
    loss_curve_ : list of float
        The learner's objective per iteration (1 - MAP for the MAP learners, violated
        pair fraction for the perceptron, ExpLoss for boosting, the lambda-weighted
        RankNet loss for lambdarank, the meta-ranker's for stacking).
    init_score_ : float or None
        Training MAP at the starting point (powell, coordinate-ascent).
    train_score_ : float
        Training MAP of the fitted model.
    validation_scores_ : list of float or None
        Validation MAP per iteration (early stopping).
    hybrid_weight_ : float or None
        The weight ``a`` of the word-vector cosine in the hybrid first stage whose
        candidates the ranker was trained on (0: the retrieval model's alone), which an
        engine searching with this ranker uses (``SearchConfig(hybrid="auto")``); None
        (``fit`` leaves it so; ``cqa-search train`` sets it): the engine's default.
    retrieval_ : dict or None
        The retrieval model of the first stage the ranker was trained on, as ``{"name":
        feature name, parameter: value, ...}``
        (:func:`~cqa_search.retrieval.make_model`), which an engine searching with this
        ranker uses (``SearchConfig(retrieval="auto")``); None (``fit`` leaves it so;
        ``cqa-search train`` sets it; rankers stored before it existed): the index's
        default (``SearchConfig.retrieval``).
    learner_info_ : dict
        Learner details (boosting: base feature and alpha_0; stacking: base learners
        and the meta-ranker's weights).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> qid = np.repeat(np.arange(20), 10)
    >>> y = (X @ [2.0, -1.0, 0.0] + 0.1 * rng.normal(size=200) > 1).astype(int)
    >>> ranker = LinearRanker("ranksvm", random_state=0).fit(X, y, qid=qid,
    ...                                                       feature_names=["a", "b", "c"])
    >>> np.round(ranker.coef_ / np.abs(ranker.coef_).max(), 1)
    array([ 1. , -0.5, -0. ])
    >>> round(ranker.train_score_, 2)
    0.95
    """

    kind = "ranker"

    _parameter_constraints = {
        "learner": tuple(LEARNERS),
        "normalize": ("zscore", "minmax", "query", None),
        "max_iter": [(None,), Interval(1, None, kind=numbers.Integral)],
        "tol": Interval(0, None),
        "early_stopping": (False, True),
        "validation_fraction": Interval(0, 1, closed="neither"),
        "random_state": RANDOM_STATE,
    }

    def __init__(self, learner="powell", *, params=None, normalize="zscore", max_iter=None,
                 tol=1e-4, early_stopping=False, validation_fraction=0.2, random_state=None):
        self.learner = learner
        self.params = params
        self.normalize = normalize
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    # -- validation --------------------------------------------------------------------
    def _validate(self, feature_names):
        validate_params(self)
        if self.params is not None and not isinstance(self.params, Mapping):
            raise ParameterError(f"params must be a dict of learner options or None; got "
                             f"{self.params!r}")
        if self.early_stopping and not LEARNERS[self.learner].EARLY_STOPPING:
            allowed = [n for n, m in LEARNERS.items() if m.EARLY_STOPPING]
            raise ParameterError(f"early_stopping applies to the learners "
                             f"{{{', '.join(map(repr, allowed))}}}; got learner "
                             f"{self.learner!r}")
        return _options(self.learner, self.params, feature_names)

    @staticmethod
    def _check_X(X, n_features=None) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-d array (n_samples, n_features); got shape "
                             f"{X.shape}")
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"X has {X.shape[1]} features, but the ranker was fitted with "
                             f"{n_features}")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        return X

    # -- fitting -----------------------------------------------------------------------
    def fit(self, X, y, *, qid, feature_names=None):
        """Learn the weights from judged candidates.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Feature scores of (query, candidate) pairs (a DataFrame gives its column
            names).
        y : array-like of shape (n_samples,)
            Relevance labels (>= 1: relevant; pairwise learners also use grades).
        qid : array-like of shape (n_samples,)
            Query id of each row; the rows may come in any order.
        feature_names : sequence of str, optional
            Column names (default: the DataFrame's, else ``x0, x1, ...``).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters or inputs.
        """
        if feature_names is None and hasattr(X, "columns"):
            feature_names = [str(c) for c in X.columns]
        X = self._check_X(X)
        n, d = X.shape
        if n == 0 or d == 0:
            raise ValueError(f"X must have at least one row and one column; got shape {X.shape}")
        if feature_names is None:
            feature_names = [f"x{j}" for j in range(d)]
        feature_names = [str(f) for f in feature_names]
        if len(feature_names) != d or len(set(feature_names)) != d:
            raise ParameterError(f"feature_names must be {d} distinct names; got {feature_names!r}")
        y = np.asarray(y, dtype=np.float64).ravel()
        qid = np.asarray(qid).ravel()
        if len(y) != n or len(qid) != n:
            raise ValueError(f"X, y and qid must have the same number of rows; got {n}, "
                             f"{len(y)} and {len(qid)}")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite values")
        opts = self._validate(feature_names)

        groups = QueryGroups(qid, X, y)
        Xc, yc = X[groups.order], y[groups.order]
        if self.normalize == "zscore":
            offset, scale = Xc.mean(axis=0), Xc.std(axis=0)
        elif self.normalize == "minmax":
            offset, scale = Xc.min(axis=0), Xc.max(axis=0) - Xc.min(axis=0)
        else:  # None, or "query": per query, below
            offset, scale = np.zeros(d), np.ones(d)
        scale = np.where(scale > 0, scale, 1.0)
        Z = query_minmax(Xc, qid[groups.order]) if self.normalize == "query" \
            else (Xc - offset) / scale
        rng = np.random.default_rng(self.random_state)

        self.validation_scores_ = None
        if self.early_stopping:
            result = self._fit_early_stopped(Z, yc, groups, opts, rng, feature_names)
        else:
            result = _fit_learner(self.learner, Z, yc, groups, opts, rng, self.max_iter,
                                  self.tol, feature_names=feature_names)

        self.feature_names_in_ = np.array(feature_names, dtype=object)
        self.n_features_in_ = d
        self.norm_offset_, self.norm_scale_ = offset, scale
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.intercept_ = float(result.intercept)
        self.step_feature_ = np.asarray(result.step_feature, dtype=np.int64)
        self.step_threshold_ = np.asarray(result.step_threshold, dtype=np.float64)
        self.step_coef_ = np.asarray(result.step_coef, dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.loss_curve_ = [float(v) for v in result.loss_curve]
        self.init_score_ = None if result.init_score is None else float(result.init_score)
        self.learner_info_ = self._info(result, feature_names)
        self.hybrid_weight_ = None
        self.retrieval_ = None
        self.train_score_ = mean_average_precision(result.decision(Z), yc, groups)
        logger.info("%s: training MAP %.4f after %d iterations", self.learner,
                    self.train_score_, self.n_iter_)
        return self

    def _info(self, result, feature_names) -> dict:
        info = result.info
        if self.learner == "boosting":
            return {"base_feature": feature_names[info["base_feature"]],
                    "alpha0": float(info["alpha0"]), "n_selected": len(info["selected"])}
        if self.learner == "anchored":
            return {"base_feature": feature_names[info["base_feature"]]}
        if self.learner == "stacking":
            return {"base": list(info["base"]), "meta": _options("stacking", self.params,
                                                                 feature_names)["meta"],
                    "meta_coef": _json(info["meta_coef"])}
        return {}

    def _fit_early_stopped(self, Z, y, groups, opts, rng, feature_names):
        n_q = groups.n_queries
        if n_q < 2:
            raise ParameterError("early_stopping needs at least 2 training queries")
        n_val = min(max(1, int(round(self.validation_fraction * n_q))), n_q - 1)
        perm = rng.permutation(n_q)
        tr, g_tr = groups.subset(perm[n_val:])
        va, g_va = groups.subset(perm[:n_val])
        scores = []

        def monitor(iteration, coef, steps):
            f = LearnerFit(coef=coef, n_iter=iteration)
            if steps is not None:
                f.step_feature, f.step_threshold, f.step_coef = steps
            scores.append(mean_average_precision(f.decision(Z[va]), y[va], g_va))

        max_iter = LEARNERS[self.learner].MAX_ITER if self.max_iter is None else self.max_iter
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _fit_learner(self.learner, Z[tr], y[tr], g_tr, opts, rng, max_iter, self.tol,
                         callback=monitor, feature_names=feature_names)
        best = int(np.argmax(scores)) + 1 if scores else 1
        if best == max_iter:
            warnings.warn(f"early stopping: validation MAP was still rising at "
                          f"max_iter={max_iter}; increase max_iter", ConvergenceWarning,
                          stacklevel=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = _fit_learner(self.learner, Z, y, groups, opts, rng, best, self.tol,
                                  feature_names=feature_names)
        self.validation_scores_ = [float(s) for s in scores]
        logger.info("early stopping: %d iterations (validation MAP %.4f)", best,
                    scores[best - 1] if scores else float("nan"))
        return result

    # -- applying ----------------------------------------------------------------------
    def _normalised(self, X, qid=None):
        check_is_fitted(self, "coef_")
        X = self._check_X(X, self.n_features_in_)
        if self.normalize == "query":
            if qid is not None and len(qid) != len(X):
                raise ValueError(f"qid has {len(qid)} rows but X has {len(X)}")
            return query_minmax(X, qid)
        return (X - self.norm_offset_) / self.norm_scale_

    def predict(self, X, qid=None) -> np.ndarray:
        """Scores of candidates (higher ranks first).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Columns in the order of ``feature_names_in_``.
        qid : array-like of shape (n_samples,), optional
            Query id of each row; used only by ``normalize="query"``, where None means
            that all rows are the candidates of one query.

        Returns
        -------
        ndarray of float64, shape (n_samples,)

        Raises
        ------
        NotFittedError
            Before ``fit``.
        """
        Z = self._normalised(X, qid)
        s = Z @ self.coef_ + self.intercept_
        if len(self.step_coef_):
            s = s + (Z[:, self.step_feature_] > self.step_threshold_) @ self.step_coef_
        return s

    def contributions(self, X, qid=None) -> np.ndarray:
        """Each feature's part of the score: ``predict(X, qid) == contributions(X,
        qid).sum(1) + intercept_``.

        A feature contributes its weight times its normalised value, plus (boosting)
        the weights of its thresholds that the value exceeds.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        Z = self._normalised(X, qid)
        out = Z * self.coef_
        if len(self.step_coef_):
            on = (Z[:, self.step_feature_] > self.step_threshold_) * self.step_coef_
            for k, f in enumerate(self.step_feature_):
                out[:, f] += on[:, k]
        return out

    @property
    def can_explain(self) -> bool:
        """Whether :meth:`explain` can score one candidate alone (not with
        ``normalize="query"``, where it depends on the other candidates of its query)."""
        return self.normalize != "query"

    def explain(self, x) -> dict:
        """``{feature: contribution}`` of one candidate, largest magnitude first.

        Parameters
        ----------
        x : mapping or array-like of shape (n_features,)
            The candidate's features: a ``{name: value}`` mapping holding at least the
            ranker's features (e.g. ``Hit.features``), or the values in the order of
            ``feature_names_in_``.

        Examples
        --------
        >>> import numpy as np
        >>> r = LinearRanker(normalize=None).fit(np.array([[1.0, 0.0], [0.0, 1.0]]), [1, 0],
        ...                                      qid=[0, 0], feature_names=["bm25", "len"])
        >>> {k: round(v, 3) for k, v in r.explain({"bm25": 2.0, "len": 0.0}).items()}
        {'bm25': 2.0, 'len': 0.0}
        """
        check_is_fitted(self, "coef_")
        if not self.can_explain:
            raise ValueError("this ranker normalises the features per query "
                             "(normalize='query'): a candidate's contributions depend on the "
                             "other candidates of its query; use contributions(X) on all "
                             "of them")
        names = list(self.feature_names_in_)
        if isinstance(x, Mapping):
            missing = [f for f in names if f not in x]
            if missing:
                raise ValueError(f"explain needs the features {missing!r}")
            row = np.array([[float(x[f]) for f in names]])
        else:
            row = np.asarray(x, dtype=np.float64).reshape(1, -1)
        c = self.contributions(row)[0]
        order = np.argsort(-np.abs(c), kind="stable")
        return {names[j]: float(c[j]) for j in order}

    def score(self, X, y, *, qid) -> float:
        """MAP of the ranking of ``X`` by ``predict`` (ties pessimistic; queries without
        relevant rows count 0)."""
        X = self._check_X(X)
        y = np.asarray(y, dtype=np.float64)
        qid = np.asarray(qid)
        groups = QueryGroups(qid, X, y)
        return mean_average_precision(self.predict(X, qid)[groups.order], y[groups.order],
                                      groups)

    # -- storage contract (cqa_search.features) -----------------------------------------
    def state(self):
        """``(meta, arrays)``: the learned state as JSON scalars and arrays."""
        check_is_fitted(self, "coef_")
        meta = {"feature_names": [str(f) for f in self.feature_names_in_],
                "n_iter": self.n_iter_, "loss_curve": self.loss_curve_,
                "init_score": self.init_score_, "train_score": self.train_score_,
                "validation_scores": self.validation_scores_,
                "learner_info": self.learner_info_,
                "hybrid_weight": getattr(self, "hybrid_weight_", None),
                "retrieval": getattr(self, "retrieval_", None)}
        arrays = {"coef": self.coef_, "intercept": np.array([self.intercept_]),
                  "norm_offset": self.norm_offset_, "norm_scale": self.norm_scale_,
                  "step_feature": self.step_feature_, "step_threshold": self.step_threshold_,
                  "step_coef": self.step_coef_}
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The ranker stored by :meth:`state` (inverse of ``get_params()`` + ``state()``)."""
        model = cls(**params)
        names = meta["feature_names"]
        if not isinstance(names, list) or not all(type(n) is str for n in names):
            raise InvalidArray("ranker feature names are not a list of strings")
        d = len(names)
        get = {k: np.array(arrays[k]) for k in ("coef", "intercept", "norm_offset",
                                                "norm_scale", "step_feature",
                                                "step_threshold", "step_coef")}
        n_steps = len(get["step_coef"])
        if (get["coef"].shape != (d,) or get["norm_offset"].shape != (d,)
                or get["norm_scale"].shape != (d,) or get["intercept"].shape != (1,)
                or get["step_feature"].shape != (n_steps,)
                or get["step_threshold"].shape != (n_steps,)
                or (n_steps and not 0 <= get["step_feature"].min()
                    <= get["step_feature"].max() < d)):
            raise ValueError("ranker arrays do not match its features")
        for key in ("coef", "intercept", "norm_offset", "norm_scale", "step_threshold",
                    "step_coef"):
            check_array(get[key], f"ranker {key}", kind="fiu", finite=True)
        model.feature_names_in_ = np.array(names, dtype=object)
        model.n_features_in_ = d
        model.coef_ = get["coef"].astype(np.float64)
        model.intercept_ = float(get["intercept"][0])
        model.norm_offset_ = get["norm_offset"].astype(np.float64)
        model.norm_scale_ = get["norm_scale"].astype(np.float64)
        model.step_feature_ = get["step_feature"].astype(np.int64)
        model.step_threshold_ = get["step_threshold"].astype(np.float64)
        model.step_coef_ = get["step_coef"].astype(np.float64)
        model.n_iter_ = check_count(meta["n_iter"], "ranker n_iter")
        model.loss_curve_ = list(meta.get("loss_curve", []))
        model.init_score_ = meta.get("init_score")
        model.train_score_ = float(meta["train_score"])
        model.validation_scores_ = meta.get("validation_scores")
        model.learner_info_ = dict(meta.get("learner_info") or {})
        a = meta.get("hybrid_weight")  # absent from rankers stored before it existed
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float))
                              or not 0 <= a <= 1):
            raise InvalidArray(f"ranker hybrid_weight must be a number in [0, 1]; got {a!r}")
        model.hybrid_weight_ = None if a is None else float(a)
        spec = meta.get("retrieval")  # (checked as a model by the engine that reads it)
        if spec is not None and not (isinstance(spec, dict) and type(spec.get("name")) is str):
            raise InvalidArray(f"ranker retrieval must be a model's name and parameters; got "
                               f"{spec!r}")
        model.retrieval_ = spec
        return model


def _fold_models(ranker, X, y, qid, n_splits, random_state, feature_names):
    """``(model, held-out rows)`` of each fold of a query-grouped k-fold split."""
    groups = QueryGroups(qid, X, y)
    rng = np.random.default_rng(random_state)
    for train_q, test_q in query_folds(groups.n_queries, n_splits, rng):
        tr = groups.order[groups.subset(train_q)[0]]
        te = groups.order[groups.subset(test_q)[0]]
        yield clone(ranker).fit(X[tr], y[tr], qid=qid[tr], feature_names=feature_names), te


def cross_validate(ranker, X, y, *, qid, n_splits=5, random_state=None, feature_names=None):
    """MAP of ``ranker`` on each fold of a query-grouped k-fold cross-validation.

    Parameters
    ----------
    ranker : LinearRanker
        Cloned (unfitted) for every fold.
    X, y, qid, feature_names
        As in :meth:`LinearRanker.fit`.
    n_splits : int, default 5
        Folds (the papers use 5).
    random_state : None, int or Generator
        Shuffles the queries into folds.

    Returns
    -------
    ndarray of shape (n_splits,)
        Held-out MAP of every fold.
    """
    X, y, qid = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(qid)
    return np.array([model.score(X[te], y[te], qid=qid[te]) for model, te in _fold_models(
        ranker, X, y, qid, n_splits, random_state, feature_names)])


def cross_val_predict(ranker, X, y, *, qid, n_splits=5, random_state=None,
                      feature_names=None):
    """Out-of-fold scores: every row scored by the ranker of the fold that held its query out.

    The folds are those of :func:`cross_validate` (same ``random_state``, same folds), so
    the scores make a run that no query was trained on, for any metric.

    Parameters
    ----------
    ranker, X, y, qid, n_splits, random_state, feature_names
        As in :func:`cross_validate`.

    Returns
    -------
    ndarray of shape (n_samples,)
        The held-out score of every row of ``X``.
    """
    X, y, qid = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64), np.asarray(qid)
    scores = np.empty(len(X))
    for model, te in _fold_models(ranker, X, y, qid, n_splits, random_state, feature_names):
        scores[te] = model.predict(X[te], qid[te])
    return scores
