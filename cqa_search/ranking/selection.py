"""Choosing a ranker by query-grouped cross-validation: its regularisation, its features,
and whether it ranks better than no ranker at all (what ``cqa-search train`` does).

A learned ranker is worth storing only when it orders the candidates better than the
engine does without it (the retrieval model's order) and better than any one of its
features alone. :class:`LinearRankerCV` decides this by k-fold cross-validation with the
queries as groups, on the same folds for every comparison (differences between choices
are then paired):

1. **Regularisation.** The learner's regularisation is chosen from a small grid
   (:data:`REGULARISATION`: RankSVM's ``C``, LambdaRank's ``alpha``, the prior of the
   anchored correction (its ``alpha``; it corrects the baseline's score), the rounds of
   boosting, the epochs of the perceptron) with all features.
2. **Features.** Forward selection of model families (:data:`FAMILIES`, by feature-name
   prefix: term, context, translation, topics, multiview, embeddings, soft-cosine,
   fields, first-stage; a column that matches none is a family of its own), from the
   family of the baseline feature. A family earns its place when the queries' cross-validated AP is higher with it than without it,
   significantly (one-sided paired t-test over the queries, p <= ``alpha``); the most
   significant one joins first, and so on while one does. The regularisation is then
   chosen again. The selected ranker and the one on all features are both candidates.
3. **Against single features.** The learned rankers compete with the best feature alone (a
   one-feature ranker, in its order or the reverse) and with the retrieval order (the
   ``baseline`` feature as it is). The best feature is chosen in each fold on that fold's
   training queries alone: chosen by the held-out scores it is judged by, the best of
   some thirty features would win by luck on a few dozen queries. The best cross-validated MAP wins; on ties the simpler
   system (the retrieval order, then a single feature, then the selected families). When
   the retrieval order wins, no learned ranker is better than none: :attr:`LinearRankerCV.improves_` is False and a
   :class:`NoImprovementWarning` is issued.

Cross-validated AP here is the learners' own (:func:`~._utils.average_precision`: AP over
the relevant candidates, a query without any scores 0, ties pessimistic), every query
scored by the model of the fold that held it out; MAP is its mean over the queries.
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator

from .._utils import RANDOM_STATE, Interval, validate_params
from ..exceptions import ConvergenceWarning, ParameterError
from ._utils import QueryGroups, average_precision, query_folds
from .linear import LEARNERS, LinearRanker

__all__ = ["LinearRankerCV", "FAMILIES", "REGULARISATION", "NoImprovementWarning", "family"]

logger = logging.getLogger(__name__)

#: Model family -> feature-name prefixes (the engine's term features, context features, and
#: the features of the translation, topic, multiview and embeddings models: the embeddings
#: model gives three families, its vector cosines, its soft cosines and its per-field
#: scores; and the hybrid first stage's score, ``first_stage``).
FAMILIES = {"term": ("bm25", "lm_", "vsm", "answers_"),
            "context": ("given_", "category_match", "log_length"),
            "translation": ("wt", "translm", "ptrans_"),
            "topics": ("topic_",),
            "multiview": ("mv_",),
            "embeddings": ("emb_",),
            "soft-cosine": ("softcos_",),
            "fields": ("field_",),
            "first-stage": ("first_stage",)}

#: Learner -> the grid of its regularisation (learner options; ``max_iter`` is the
#: LinearRanker argument). Learners without one (the MAP optimisers) get no grid.
#: RankSVM's loss is summed over the candidate pairs, so its best ``C`` falls as they get
#: fewer: on the demo's 28 training queries all 32 features want ``C = 1e-4``, the
#: grid's strongest point (at 0.001 they lose to the first stage's order).
REGULARISATION = {
    "ranksvm": [{"C": c} for c in (1e-4, 0.001, 0.01, 0.1, 1.0, 10.0)],
    "lambdarank": [{"alpha": a} for a in (1e-4, 1e-3, 1e-2, 1e-1)],
    "perceptron": [{"max_iter": n} for n in (5, 20, 100)],
    "boosting": [{"max_iter": n} for n in (10, 30, 100, 300)],
    "anchored": [{"alpha": a} for a in (100.0, 30.0, 10.0, 3.0, 1.0)],
}


class NoImprovementWarning(UserWarning):
    """The cross-validated learned ranking is not better than the retrieval order."""


def family(name, families=None) -> str:
    """The model family of a feature column (the name itself when no prefix matches).

    Examples
    --------
    >>> family("ptrans_ilw"), family("lm_jm"), family("my_feature")
    ('translation', 'term', 'my_feature')
    """
    for fam, prefixes in (FAMILIES if families is None else families).items():
        if name.startswith(tuple(prefixes)):
            return fam
    return name


class LinearRankerCV(BaseEstimator):
    """A :class:`LinearRanker` whose regularisation, features and very use are chosen by
    query-grouped cross-validation (see the module docstring).

    Parameters
    ----------
    learner : str, default "ranksvm"
        The learner of :class:`LinearRanker`.
    params : dict, optional
        Fixed learner options (a grid point overrides the option it sets).
    param_grid : "auto", list of dict or None, default "auto"
        Grid points of learner options (and ``max_iter``) tried by cross-validation;
        "auto": :data:`REGULARISATION` of the learner; None: no grid (``params`` only).
    normalize : {"zscore", "minmax", "query", None}, default "zscore"
        As in :class:`LinearRanker`.
    select_features : bool, default True
        Also try a ranker without the model families that do not earn their place
        (forward selection, see ``alpha``).
    alpha : float in (0, 1], default 0.1
        A family stays only when the cross-validated AP of its queries is higher with it
        than without it, with a one-sided paired t-test p-value at most ``alpha`` (1: any
        gain is enough).
    families : dict or None
        Family -> feature-name prefixes (default :data:`FAMILIES`).
    baseline : str or None
        The feature column whose order is the engine's order without a ranker (the
        retrieval model's score in full retrieval, ``given_rrank`` for given
        candidates); None when there is none among the columns.
    n_splits : int, default 5
        Folds of the query-grouped cross-validation.
    max_iter, tol
        As in :class:`LinearRanker` (a grid point may set ``max_iter``).
    random_state : None or int
        Seeds the folds and the learner.

    Attributes
    ----------
    best_estimator_ : LinearRanker
        The chosen ranker refitted on all queries (a one-feature ranker when a single
        feature or the baseline won).
    chosen_ : {"baseline", "single", "learned"}
        What won: the retrieval order (no ranker is better than none), the best single
        feature (:attr:`single_feature_`), or the learned ranker.
    single_feature_ : str
        The feature whose one-feature ranker has the best cross-validated MAP.
    single_score_ : float
        Cross-validated MAP of the best single feature chosen in each fold on its training
        queries (what the single feature competes with).
    improves_ : bool
        Whether the chosen ranker's cross-validated MAP is above the baseline's (True
        when there is no baseline).
    best_score_ : float
        Cross-validated MAP of the chosen system.
    learned_score_ : float
        Cross-validated MAP of the best learned ranker (selected families or all).
    baseline_score_ : float or None
        Cross-validated MAP of the baseline order.
    single_scores_ : dict
        Feature -> cross-validated MAP of the one-feature ranker.
    query_ids_ : ndarray
        The distinct query ids, sorted.
    query_ap_ : ndarray
        Cross-validated AP of each query of :attr:`query_ids_` under the chosen system
        (for paired comparisons with other systems on the same queries).
    best_params_ : dict
        The chosen grid point (empty without a grid).
    features_ : list of str
        Columns of the (chosen, or best) learned ranker.
    dropped_ : list of dict
        The families forward selection left out: ``family``, ``features``,
        ``map_with`` (MAP with it added last), ``map_without``, ``p_value`` (of the gain).
    history_ : list of dict
        Every cross-validated candidate: ``step``, ``features``, ``params``, ``map``.
    """

    _parameter_constraints = {
        "learner": tuple(LEARNERS),
        "normalize": ("zscore", "minmax", "query", None),
        "select_features": (False, True),
        "alpha": Interval(0, 1, closed="right"),
        "n_splits": Interval(2, None, kind=numbers.Integral),
        "max_iter": [(None,), Interval(1, None, kind=numbers.Integral)],
        "tol": Interval(0, None),
        "random_state": RANDOM_STATE,
    }

    def __init__(self, learner="ranksvm", *, params=None, param_grid="auto", normalize="zscore",
                 select_features=True, alpha=0.1, families=None, baseline=None, n_splits=5,
                 max_iter=None, tol=1e-4, random_state=None):
        self.learner = learner
        self.params = params
        self.param_grid = param_grid
        self.normalize = normalize
        self.select_features = select_features
        self.alpha = alpha
        self.families = families
        self.baseline = baseline
        self.n_splits = n_splits
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    # -- the candidates -----------------------------------------------------------------
    def _grid(self):
        if self.param_grid is None:
            return [{}]
        grid = REGULARISATION.get(self.learner, [{}]) if self.param_grid == "auto" \
            else list(self.param_grid)
        if not grid or not all(isinstance(p, dict) for p in grid):
            raise ValueError(f"param_grid must be 'auto', None or a non-empty list of dicts; "
                             f"got {self.param_grid!r}")
        return grid

    def _ranker(self, point, learner=None, columns=()) -> LinearRanker:
        """The learner at a grid point on ``columns``; ``learner`` (the one-feature
        rankers): that learner with its defaults. A learner of a correction to a base
        score (``anchored``) corrects the baseline's when it is among the columns."""
        if learner is not None:
            return LinearRanker(learner, normalize=self.normalize, tol=self.tol,
                                random_state=self.random_state)
        options = {**(self.params or {}), **{k: v for k, v in point.items() if k != "max_iter"}}
        if (self.learner == "anchored" and "base_feature" not in options
                and self.baseline in [self._names[j] for j in columns]):
            options["base_feature"] = self.baseline
        return LinearRanker(self.learner, params=options or None, normalize=self.normalize,
                            max_iter=point.get("max_iter", self.max_iter), tol=self.tol,
                            random_state=self.random_state)

    def _cv(self, step, columns, point, learner=None) -> np.ndarray:
        """Out-of-fold AP of every query for a ranker on ``columns`` (cached; the same
        folds throughout, so that two candidates' APs are paired)."""
        key = (tuple(columns), tuple(sorted(point.items())), learner)
        if key not in self._cache:
            ap = np.zeros(self._n_queries)
            for train, test, test_queries in self._folds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model = self._ranker(point, learner, columns).fit(
                        self._X[np.ix_(train, columns)], self._y[train], qid=self._qid[train],
                        feature_names=[self._names[j] for j in columns])
                rows = test[0]
                ap[test_queries] = self._ap(model.predict(self._X[np.ix_(rows, columns)],
                                                          self._qid[rows]), test) \
                    * self._scale[test_queries]
            self._cache[key] = ap
            self.history_.append({"step": step, "features": [self._names[j] for j in columns],
                                  "params": dict(point), "map": float(ap.mean())})
            logger.info("%s: %s %s: cross-validated MAP %.4f", step,
                        ",".join(self._names[j] for j in columns), point, ap.mean())
        return self._cache[key]

    def _ap(self, scores, test) -> np.ndarray:
        """AP of the queries of a fold's ``test`` rows (rows, their groups) ranked by
        ``scores`` (ties pessimistic: the rows' order does not matter)."""
        rows, groups = test
        return average_precision(scores, self._y[rows], groups)

    def _order_score(self, column) -> np.ndarray:
        """Per-query AP of ranking by one column as it is (no fitting)."""
        ap = np.zeros(self._n_queries)
        for _, test, test_queries in self._folds:
            ap[test_queries] = self._ap(self._X[test[0], column], test) \
                * self._scale[test_queries]
        return ap

    def _nested_single(self, columns) -> np.ndarray:
        """Out-of-fold AP of each query under the best single feature of ``columns``
        chosen in its fold on the training queries alone (by the mean AP of the feature's
        order, either way, on them), scored by that feature's one-feature ranker."""
        ap = np.zeros(self._n_queries)
        for train, test, test_queries in self._folds:
            groups = QueryGroups(self._qid[train], np.zeros((len(train), 0)), self._y[train])
            y = self._y[train][groups.order]
            scale = self._scale[np.searchsorted(self.query_ids_, groups.qids)]

            def fit_ap(j):
                x = self._X[train, j][groups.order]
                return max(float(np.dot(average_precision(s, y, groups), scale))
                           for s in (x, -x))

            best = max(columns, key=fit_ap)  # first on ties: the columns' order
            ap[test_queries] = self._cv("single feature", [best], {}, "ranksvm")[test_queries]
        return ap

    def _best_point(self, step, columns, grid):
        scores = [self._cv(step, columns, point).mean() for point in grid]
        best = int(np.argmax(scores))  # first on ties: the grids go from strong to weak
        return grid[best], self._cv(step, columns, grid[best])

    def _forward(self, columns, point, grid):
        """Forward selection of families from the baseline's (or the best single
        feature's): a family joins when it raises the queries' cross-validated AP
        significantly (one-sided paired t-test, p <= alpha), the most significant first.
        Returns the columns, the grid point chosen for them and their per-query AP."""
        names = self._names
        fams = {}
        for j in columns:
            fams.setdefault(family(names[j], self.families), []).append(j)
        start = family(self.baseline if self.baseline is not None else self.single_feature_,
                       self.families)
        start = start if start in fams else family(self.single_feature_, self.families)
        chosen = sorted(fams.pop(start))
        ap = self._cv("features", chosen, point)
        trials = {}
        while fams:
            for f, cols in fams.items():
                with_f = self._cv("features", sorted(chosen + cols), point)
                trials[f] = (*self._gain(with_f, ap), with_f)
            best = min(fams, key=lambda f: (trials[f][0] <= 0, trials[f][1], -trials[f][0]))
            gain, p_value, with_best = trials[best]
            if gain <= 0 or p_value > self.alpha:
                break
            chosen = sorted(chosen + fams.pop(best))
            ap = with_best
            trials.pop(best)
        self.dropped_ = [{"family": f, "features": [names[j] for j in cols],
                          "map_with": float(trials[f][2].mean()), "map_without": float(ap.mean()),
                          "p_value": trials[f][1]} for f, cols in fams.items()]
        if len(chosen) < len(columns):
            point, ap = self._best_point("regularisation", chosen, grid)
        return chosen, point, ap

    def _gain(self, with_, without) -> tuple:
        """Mean AP gain of ``with_`` over ``without`` and its one-sided paired p-value."""
        d = with_ - without
        if not np.any(d):
            return 0.0, 1.0
        from scipy.stats import ttest_rel

        return float(d.mean()), float(ttest_rel(with_, without, alternative="greater").pvalue)

    # -- fitting ------------------------------------------------------------------------
    def fit(self, X, y, *, qid, feature_names, n_relevant=None):
        """Choose and fit the ranker.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Relevance labels (>= 1: relevant).
        qid : array-like of shape (n_samples,)
        feature_names : sequence of str
        n_relevant : array-like of shape (n_samples,), optional
            The number of relevant documents of each row's query, counting those that are
            not among its candidates (full retrieval): AP then divides by it, as
            trec_eval's does, so that the scores of rankers over different candidate sets
            (e.g. indexes with different text analysis) can be compared. Default: the
            relevant candidates.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters, fewer queries than folds, an unknown baseline.
        """
        validate_params(self)
        grid = self._grid()
        X = LinearRanker._check_X(X)
        y = np.asarray(y, dtype=np.float64).ravel()
        qid = np.asarray(qid).ravel()
        names = [str(f) for f in feature_names]
        if len(names) != X.shape[1]:
            raise ValueError(f"feature_names must be {X.shape[1]} names; got {len(names)}")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline must be one of the feature names or None; got "
                             f"{self.baseline!r}")
        groups = QueryGroups(qid, X, y)
        if groups.n_queries < self.n_splits:
            raise ParameterError(f"cross-validation needs at least n_splits={self.n_splits} "
                                 f"queries; got {groups.n_queries} (fewer folds: n_splits, "
                                 "`train --cv N`; none: `train --no-cv`)")
        rng = np.random.default_rng(self.random_state)
        self._X, self._y, self._qid, self._names = X, y, qid, names
        self.query_ids_ = groups.qids
        self._n_queries = groups.n_queries
        in_list = np.bincount(groups.group, weights=(y[groups.order] >= 1).astype(float),
                              minlength=groups.n_queries)
        if n_relevant is None:
            self._scale = np.ones(groups.n_queries)
        else:
            total = np.zeros(groups.n_queries)
            total[groups.group] = np.asarray(n_relevant, dtype=np.float64).ravel()[groups.order]
            if np.any(total < in_list):
                raise ValueError("n_relevant is below the number of relevant candidates of "
                                 "a query")
            self._scale = np.divide(in_list, total, out=np.zeros_like(total), where=total > 0)
        # each fold: its training rows, its test rows (canonical order) with their groups
        self._folds = []
        for tr, te in query_folds(groups.n_queries, self.n_splits, rng):
            rows, test_groups = groups.subset(te)
            self._folds.append((groups.order[groups.subset(tr)[0]], (groups.order[rows],
                                                                     test_groups), te))
        self._cache, self.history_, self.dropped_ = {}, [], []
        try:
            self._select(grid)
        finally:
            del self._X, self._y, self._qid, self._folds, self._cache, self._scale
        return self

    def _select(self, grid):
        names = self._names
        # Constant columns cannot rank; they never enter a model.
        informative = [j for j in range(len(names))
                       if np.ptp(self._X[:, j]) > 0]
        if not informative:
            raise ParameterError("every feature column is constant: nothing to rank by")
        self.single_scores_ = {names[j]: float(self._cv("single feature", [j], {},
                                                        "ranksvm").mean())
                               for j in informative}
        self.single_feature_ = max(self.single_scores_, key=self.single_scores_.get)
        single = self._nested_single(informative)
        self.single_score_ = float(single.mean())
        baseline = None if self.baseline is None else \
            self._order_score(names.index(self.baseline))
        self.baseline_score_ = None if baseline is None else float(baseline.mean())

        point, ap = self._best_point("regularisation", informative, grid)
        learned = [(informative, point, ap)]  # the learned candidates, all features last
        if self.select_features:
            learned.insert(0, self._forward(informative, point, grid))
        # candidates, simplest first: ties go to the earlier one
        candidates = [] if baseline is None else [(baseline, "baseline", None)]
        candidates.append((single, "single", None))
        candidates += [(a, "learned", (c, p)) for c, p, a in learned]
        best = max(range(len(candidates)), key=lambda i: (candidates[i][0].mean(), -i))
        self.query_ap_, self.chosen_, chosen = candidates[best]
        self.best_score_ = float(self.query_ap_.mean())
        self.improves_ = self.baseline is None or self.best_score_ > self.baseline_score_
        top = max(range(len(learned)), key=lambda i: (learned[i][2].mean(), -i))
        columns, point = chosen if chosen is not None else learned[top][:2]
        self.best_params_ = dict(point)
        self.learned_score_ = float(learned[top][2].mean())
        self.features_ = [names[j] for j in columns]

        X, y, qid = self._X, self._y, self._qid
        if self.chosen_ == "learned":
            model, cols = self._ranker(point, columns=columns), columns
        else:
            one = self.baseline if self.chosen_ == "baseline" else self.single_feature_
            model, cols = self._ranker({}, "ranksvm"), [names.index(one)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.best_estimator_ = model.fit(X[:, cols], y, qid=qid,
                                             feature_names=[names[j] for j in cols])
        if not self.improves_:
            warnings.warn(
                f"the cross-validated learned ranking (MAP {100 * self.learned_score_:.2f}) is "
                f"not better than the retrieval order alone ({self.baseline}, MAP "
                f"{100 * self.baseline_score_:.2f})", NoImprovementWarning, stacklevel=3)

    # -- applying -----------------------------------------------------------------------
    def predict(self, X, qid=None) -> np.ndarray:
        """Scores of the chosen ranker; ``X`` has the columns of ``feature_names_in_``."""
        return self.best_estimator_.predict(X, qid)

    @property
    def feature_names_in_(self):
        return self.best_estimator_.feature_names_in_
