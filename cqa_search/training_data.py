"""What a ranker training reads of its judged queries, and the one way a ranker is fitted
on them: shared by :func:`~cqa_search.training.train_ranker` (all the queries) and
:func:`~cqa_search.training.cross_validate_training` (each fold's training queries).

:class:`JudgedQueries` computes each thing once: the first stage's runs at every hybrid
weight ``a`` tried, and the candidates' feature table at each ``a`` used (a query's
candidates and features do not depend on the other queries, so a fold's table is rows of
the whole table). :func:`fit_on` is the training itself on any subset of the queries:
the first stage chosen on them (:func:`choose_hybrid`'s criterion), the feature columns
kept, and the ranker chosen by cross-validation (:class:`~cqa_search.ranking.LinearRankerCV`)
or fitted as given.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ._utils import progress_bar
from .evaluation import evaluate, feature_table, run_queries
from .evaluation.trec import as_qrels, as_queries, as_run
from .exceptions import ConvergenceWarning, QueryError
from .ranking import LinearRanker, LinearRankerCV, NoImprovementWarning
from .ranking.selection import REGULARISATION
from .retrieval import first_stage

__all__ = ["training_table", "HybridChoice", "choose_hybrid", "best_weight", "JudgedQueries",
           "Fitted", "fit_on", "fit_ranker", "order_ranker"]


def _labels(qrels, qid, docs, graded) -> np.ndarray:
    grades = np.array([qrels.get(q, {}).get(d, 0) for q, d in zip(qid, docs)], dtype=np.float64)
    return grades if graded else (grades >= 1).astype(np.float64)


def training_table(engine, queries, qrels, *, candidates=None, k=None, graded=False,
                   progress=False):
    """Features and labels of the candidates a ranker will reorder.

    Full retrieval (``candidates`` None): the top ``k`` of the engine's retrieval model
    (default: its ``n_candidates``, the candidates search reranks), with the queries
    searched as a user searches, without their category (``category_match`` is then as at
    search time). Given candidates (a run): those, with the queries' categories.

    Returns
    -------
    X, y, qid, doc_ids, feature_names
        ``y`` is the relevance grade (``graded``) or 1/0.
    """
    engine = engine.with_config(dataclasses.replace(engine.config, ranker=None))
    if candidates is None:
        queries = [{**q, "category": None} for q in queries]
        k = engine.config.n_candidates if k is None else k
    X, qid, docs, names = feature_table(engine, queries, candidates=candidates,
                                        k=100 if k is None else k, progress=progress)
    return X, _labels(qrels, qid, docs, graded), qid, docs, list(names)


@dataclass(frozen=True)
class HybridChoice:
    """The first stage of a training on an index with word vectors: the weight ``a`` of
    the cosine in the hybrid score (0: the retrieval model alone), chosen from
    :data:`~cqa_search.retrieval.first_stage.WEIGHT_GRID` or given.

    Attributes
    ----------
    a : float
    depth : int
        The candidates per query it was chosen for (``n_candidates``).
    grid : list of (float, float, float)
        ``(a, recall, MAP)`` of every value tried: the training queries' mean recall of
        their relevant questions in the top ``depth`` of the first stage, and the MAP of
        its order (trec convention); empty when ``a`` was given.
    """

    a: float
    depth: int
    grid: list

    def lines(self) -> list:
        if not self.a:
            return ["first stage  the retrieval model alone (hybrid off)"]
        lines = [f"first stage  hybrid, a = {self.a:g} (cosine weight), stored with the "
                 "ranker" + ("" if self.grid else " (given)")]
        if self.grid:
            lines.append(f"  chosen by the training queries' R@{self.depth} (then MAP of the "
                         "first stage's order):")
            lines.extend(f"  a = {a:<4g} R@{self.depth} {100 * r:6.2f}  MAP {100 * m:6.2f}"
                         + ("  <-" if a == self.a else "") for a, r, m in self.grid)
        return lines


def best_weight(grid) -> float:
    """The ``a`` :func:`choose_hybrid` chooses from ``[(a, recall, MAP)]``: the best
    recall of the candidates, then the best MAP of the first stage's order, then the
    smaller ``a``.

    Examples
    --------
    >>> best_weight([(0.1, 0.80, 0.30), (0.3, 0.85, 0.29), (0.5, 0.85, 0.31)])
    0.5
    """
    return max(grid, key=lambda g: (round(g[1], 12), round(g[2], 12), -g[0]))[0]


class JudgedQueries:
    """The judged queries of a training over one index, and what a training reads of them,
    each computed once (and kept in ``cache`` between calls when given).

    Parameters
    ----------
    engine : SearchEngine
        The index's engine (its ranker is not applied; its ``hybrid`` is replaced).
    queries : list of dict
        ``{"id", "text", "category"?, "title"?, "body"?}``; those without judgments are
        left out.
    qrels : dict
        ``{qid: {doc_id: relevance}}`` (relevance >= 1: relevant).
    candidates : dict, optional
        A run: rank these candidates instead of the top ``k`` of full retrieval.
    k : int, optional
        Candidates per query from full retrieval (default: the engine's ``n_candidates``).
    graded : bool, default False
        Labels are relevance grades (else 1/0).
    hybrid : "auto", float in [0, 1] or None, default "auto"
        The first stage of full retrieval on an index with word vectors: "auto" chooses
        ``a`` (:meth:`choose`), a number fixes it, None: the retrieval model alone.
    progress : bool, default False
    cache : path, optional
        A folder where the first stage's runs and the feature tables are kept, under a
        key of the index generation's manifest, the search configuration, the queries,
        the candidates and ``k``: a later training of the same queries reads them.

    Raises
    ------
    QueryError
        No judged query, or a ``hybrid`` the index cannot use.
    """

    def __init__(self, engine, queries, qrels, candidates=None, *, k=None, graded=False,
                 hybrid="auto", progress=False, cache=None):
        # (data or the paths of their files, as the evaluation functions take them)
        queries, qrels = as_queries(queries), as_qrels(qrels)
        candidates = None if candidates is None else as_run(candidates)
        self.queries = [q for q in queries if q["id"] in qrels]
        if not self.queries:
            raise QueryError("none of the queries is judged in the qrels")
        if candidates is not None and hybrid != "auto":
            raise QueryError("hybrid chooses the first stage of full retrieval; a training "
                             "on given candidates (`train --candidates`) has none")
        self.engine = engine.with_config(dataclasses.replace(engine.config, ranker=None,
                                                             hybrid=None))
        self.qrels, self.candidates, self.graded = qrels, candidates, graded
        self.k = self.engine.config.n_candidates if k is None else k
        self.progress, self.cache = progress, cache
        self.metrics = ["map", "p@1", "mrr", f"r@{self.k}"]
        self.usable = candidates is None and self.engine.searcher.has_vectors and \
            first_stage.hybrid_capable(self.engine.config.retrieval)
        self.hybrid = hybrid
        if hybrid != "auto":
            try:
                self.hybrid = first_stage.check_weight(hybrid) or 0.0
            except ValueError:
                raise QueryError(f"hybrid must be 'auto', None or a number in [0, 1]; got "
                                 f"{hybrid!r}") from None
            if self.hybrid:  # raises when the index cannot
                self._engine(self.hybrid)
        self._stages, self._tables = {}, {}

    @property
    def ids(self) -> list:
        """The judged queries' ids."""
        return [q["id"] for q in self.queries]

    def _engine(self, a):
        return self.engine.with_config(dataclasses.replace(self.engine.config, hybrid=a or None))

    def _key(self, what, a) -> str:
        queries = [[q["id"], q["text"], q.get("title"), q.get("body"), q.get("category")]
                   for q in self.queries]
        text = json.dumps([what, a, self.engine.manifest, repr(self.engine.config), self.k,
                           queries, self.candidates], sort_keys=True, default=str)
        return os.path.join(self.cache, f"{what}-{hashlib.sha256(text.encode()).hexdigest()[:24]}")

    def stage(self, a):
        """Per-query metrics (``map``, ``p@1``, ``mrr``, ``r@k``; trec convention) of the
        first stage alone at weight ``a`` (0 or None: the retrieval model alone), the
        queries searched as users search (without their category)."""
        a = a or 0.0
        if a not in self._stages:
            path = None if self.cache is None else self._key("stage", a) + ".json"
            if path is not None and os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    run = {q: dict(docs) for q, docs in json.load(f).items()}
            else:
                run = run_queries(self._engine(a), [{**q, "category": None}
                                                    for q in self.queries], k=self.k)
                if path is not None:
                    _write_atomic(path, lambda f: json.dump(
                        {q: list(docs.items()) for q, docs in run.items()}, f))
            self._stages[a] = evaluate(run, self.qrels, metrics=self.metrics)
        return self._stages[a]

    def choose(self, ids=None) -> HybridChoice | None:
        """The first stage trained over, chosen on the queries ``ids`` (None: all): the
        ``a`` of :data:`~cqa_search.retrieval.first_stage.WEIGHT_GRID` whose top ``k``
        holds most of their relevant questions (ties: the best MAP of its order, then
        the smaller ``a``; :func:`best_weight`), or the given one. None: the index has
        no word vectors, or the retrieval model cannot be the term part of the hybrid
        score, or the candidates are given."""
        if not self.usable:
            return None
        if self.hybrid != "auto":
            return HybridChoice(self.hybrid, self.k, [])
        grid = []
        bar = progress_bar(self.progress and not self._stages, "choosing the first stage",
                           "weights", len(first_stage.WEIGHT_GRID))
        for a in first_stage.WEIGHT_GRID:
            scores = self.stage(a) if ids is None else self.stage(a).loc[list(ids)]
            grid.append((a, float(scores[f"r@{self.k}"].mean()), float(scores["map"].mean())))
            bar.update()
        bar.close()
        return HybridChoice(best_weight(grid), self.k, grid)

    def table(self, a):
        """``(X, y, qid, doc_ids, feature_names)`` of every judged query's candidates
        (:func:`training_table`) at the first stage ``a`` (None: the candidates given or
        the retrieval model's; 0: the retrieval model's on an index with word vectors)."""
        if a not in self._tables:
            path = None if self.cache is None else self._key("table", a) + ".npz"
            if path is not None and os.path.exists(path):
                with np.load(path, allow_pickle=False) as z:
                    X, qid, docs, names = z["X"], z["qid"], z["docs"], [str(n) for n in
                                                                       z["names"]]
            else:
                engine = self.engine if a is None else self._engine(a)
                X, _, qid, docs, names = training_table(
                    engine, self.queries, self.qrels, candidates=self.candidates, k=self.k,
                    progress=self.progress)
                if path is not None:
                    _write_atomic(path, lambda f: np.savez(f, X=X, qid=qid, docs=docs,
                                                           names=np.array(names)), "wb")
            self._tables[a] = (X, _labels(self.qrels, qid, docs, self.graded), qid, docs,
                               names)
        return self._tables[a]


def _write_atomic(path, write, mode="w") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
        write(f)
    os.replace(tmp, path)


def choose_hybrid(engine, queries, qrels, hybrid="auto", *, k=None,
                  progress=False) -> HybridChoice | None:
    """The hybrid first stage a ranker is trained over (None: the index has no word
    vectors, or the retrieval model cannot be the term part of the hybrid score).

    Parameters
    ----------
    engine : SearchEngine
    queries : list of dict
        Judged queries (searched without their category, as users search).
    qrels : dict
    hybrid : "auto", float in [0, 1] or None
        "auto": the ``a`` of :data:`~cqa_search.retrieval.first_stage.WEIGHT_GRID` whose
        top ``k`` holds most of the training queries' relevant questions (ties: the best
        MAP of its order, then the smaller ``a``); a number: that ``a``; None or 0: the
        retrieval model alone.
    k : int, optional
        Candidates per query (default: the engine's ``n_candidates``).

    Raises
    ------
    QueryError
        A given ``a`` on an index that cannot use it, or a bad value.
    """
    return JudgedQueries(engine, queries, qrels, k=k, hybrid=hybrid,
                         progress=progress).choose()


def _columns(names, keep, drop):
    cols = [j for j, n in enumerate(names)
            if (not keep or n.startswith(tuple(keep))) and not (drop and n.startswith(tuple(drop)))]
    if not cols:
        raise QueryError(f"no feature column is left (features: {', '.join(names)})")
    return cols


def _pairs(y, qid):
    """(candidate pairs of different relevance, queries that have some)."""
    total = n_useful = 0
    for q in np.unique(qid):
        yq = y[qid == q]
        n = int(np.sum(yq[:, None] > yq[None, :]))
        total += n
        n_useful += n > 0
    return total, n_useful


def _selection_options(learner, params, max_iter) -> dict:
    """:class:`LinearRankerCV` arguments for learner options fixed by the user: fixing
    what the regularisation grid sets turns the grid off."""
    grid = REGULARISATION.get(learner, [])
    fixed = set(params or {}) | ({"max_iter"} if max_iter is not None else set())
    return {"param_grid": None if any(set(p) & fixed for p in grid) else "auto"}


def fit_ranker(X, y, qid, names, baseline, *, learner, params, normalize, max_iter, tol,
         early_stopping, random_state, cv, all_features, no_cv):
    """``(ranker, selection)``: the ranker of ``cqa-search train`` on these columns
    (``baseline``: the feature whose order it must beat), and the cross-validation that
    chose it (None with ``no_cv``)."""
    if no_cv:
        ranker = LinearRanker(learner, params=params, normalize=normalize, max_iter=max_iter,
                              tol=tol, early_stopping=early_stopping,
                              random_state=random_state)
        return ranker.fit(X, y, qid=qid, feature_names=names), None
    if early_stopping:
        raise QueryError("early_stopping goes with no_cv (`train --early-stopping "
                         "--no-cv`): cross-validation chooses the iterations")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoImprovementWarning)  # the report says it
        selection = LinearRankerCV(learner, params=params, normalize=normalize,
                                   select_features=not all_features,
                                   baseline=baseline if baseline in names else None,
                                   n_splits=cv, max_iter=max_iter, tol=tol,
                                   random_state=random_state,
                                   **_selection_options(learner, params, max_iter))
        selection.fit(X, y, qid=qid, feature_names=names)
    return selection.best_estimator_, selection


def order_ranker(fitted, *, normalize, tol, random_state, **options) -> LinearRanker:
    """The order a training had to beat (``fitted.baseline``) as a ranker of that feature
    alone, made as :class:`~cqa_search.ranking.LinearRankerCV` makes it when that order
    wins, with the first stage's ``a`` and retrieval model (``options``: the rest of
    :func:`fit_ranker`'s)."""
    j = fitted.names.index(fitted.baseline)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ranker = LinearRanker("ranksvm", normalize=normalize, tol=tol,
                              random_state=random_state).fit(
            fitted.X[:, [j]], fitted.y, qid=fitted.qid, feature_names=[fitted.baseline])
    if fitted.hybrid is not None:
        ranker.hybrid_weight_ = fitted.hybrid.a
    ranker.retrieval_ = fitted.ranker.retrieval_  # the same first stage's retrieval model
    return ranker


@dataclass(frozen=True)
class Fitted:
    """A ranker trained by :func:`fit_on`, with what it was trained on.

    Attributes
    ----------
    hybrid : HybridChoice or None
        The first stage chosen (None: the candidates given or the retrieval model's).
    X, y, qid : ndarray
        The training rows, the feature columns kept.
    names : list of str
        Their feature names.
    baseline : str
        The feature whose order is the engine's without a ranker (``first_stage``, the
        retrieval model's, or ``given_rrank`` for given candidates): the order the
        ranker must beat.
    retrieval : str
        The feature whose order search keeps when no ranker is stored (the first
        stage's, or the retrieval model's).
    ranker : LinearRanker
    selection : LinearRankerCV or None
        The cross-validation that chose it (None with ``no_cv``).
    n_pairs, n_useful : int
        Candidate pairs of different relevance, and the queries that have some.
    seconds : dict
        ``{"features": ..., "learning": ...}``.
    """

    hybrid: HybridChoice | None
    X: np.ndarray
    y: np.ndarray
    qid: np.ndarray
    names: list
    baseline: str
    retrieval: str
    ranker: LinearRanker
    selection: LinearRankerCV | None
    n_pairs: int
    n_useful: int
    seconds: dict

    @property
    def improves(self) -> bool:
        """The ranker ranks better than the baseline order (by cross-validation; True
        without it)."""
        return self.selection is None or bool(self.selection.improves_)

    @property
    def kept(self) -> bool:
        """Whether ``train`` stores the ranker: when it improves, or when the first stage
        is hybrid (its order is then stored with its ``a``)."""
        return self.improves or self.hybrid is not None


def fit_on(judged, ids=None, *, features=None, exclude=None, **options) -> Fitted:
    """Train a ranker on the judged queries ``ids`` (None: all) as ``cqa-search train``
    does: the first stage chosen on them (:meth:`JudgedQueries.choose`), their candidates'
    features (the columns named by ``features``, without those of ``exclude``), and the
    ranker chosen by :class:`~cqa_search.ranking.LinearRankerCV` or, with ``no_cv``,
    fitted as given (``options``: the ``learner``, ``params``, ``normalize``,
    ``max_iter``, ``tol``, ``early_stopping``, ``random_state``, ``cv``, ``all_features``
    and ``no_cv`` of :func:`~cqa_search.training.train_ranker`).

    Raises
    ------
    QueryError
        No candidates, no pair to learn from, no feature column left, or inconsistent
        options.
    """
    t0 = time.perf_counter()
    choice = judged.choose(ids)
    X, y, qid, _, names = judged.table(None if choice is None else choice.a)
    if ids is not None:
        rows = np.isin(qid, list(ids))
        X, y, qid = X[rows], y[rows], qid[rows]
    if len(X) == 0:
        raise QueryError("the queries have no candidates to learn from")
    cols = _columns(names, features, exclude)
    X, names = X[:, cols], [names[j] for j in cols]
    t1 = time.perf_counter()
    n_pairs, n_useful = _pairs(y, qid)
    if n_pairs == 0:
        raise QueryError("no query has both relevant and non-relevant candidates: nothing to "
                         "learn")
    retrieval = judged.engine.config.retrieval.feature_name
    if "first_stage" in names:  # the order of the first stage (the retrieval model's when off)
        retrieval = "first_stage"
    baseline = "given_rrank" if judged.candidates is not None else retrieval
    ranker, selection = fit_ranker(X, y, qid, names, baseline, **options)
    if choice is not None:
        ranker.hybrid_weight_ = choice.a
    model = judged.engine.config.retrieval
    ranker.retrieval_ = {"name": model.feature_name, **model.get_params()}
    return Fitted(choice, X, y, qid, names, baseline, retrieval, ranker, selection, n_pairs,
                  n_useful, {"features": t1 - t0, "learning": time.perf_counter() - t1})
