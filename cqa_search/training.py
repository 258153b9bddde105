"""Fit a model family, train and store a ranker: the library behind ``cqa-search fit`` and
``cqa-search train``.

:func:`fit_family` fits one of the model families of the registry
(:data:`cqa_search.index.models.FAMILIES`) on an index's own archive and stores it there;
:func:`train_ranker` learns a ranker from judged queries and stores it unless it loses to
the retrieval model. Each returns a report (:class:`FitReport`, :class:`TrainReport`)
whose text is what the command prints.

Examples
--------
>>> import os, tempfile
>>> from cqa_search import build_index
>>> from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir
>>> from cqa_search.evaluation import read_qrels, read_queries
>>> path = os.path.join(tempfile.mkdtemp(), "demo")
>>> _ = build_index(demo_dir() / DEMO_ARCHIVE, path)
>>> fit_family(path, "answers").name
'answers'
>>> report = train_ranker(path, read_queries(demo_dir() / DEMO_QUERIES),
...                       read_qrels(demo_dir() / DEMO_QRELS), cv=3)
>>> report.stored == report.improves
True
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ._utils import progress_bar
from .engine import SearchConfig, SearchEngine
from .evaluation import evaluate, feature_table, read_qrels, run_queries
from .exceptions import ParameterError, QueryError
from .features import GIVEN_FEATURES, search_ranker_name, uses_given
from .index.models import FAMILIES, add_model, model_class, remove_model
from .index.sharding import is_sharded, shard_models, sharded_data
from .index.store import open_index
from .ranking import LinearRanker, LinearRankerCV, NoImprovementWarning
from .ranking.selection import REGULARISATION
from .retrieval import first_stage
from .searcher import LocalSearcher

__all__ = ["FitReport", "TrainReport", "HybridChoice", "fit_family", "train_ranker",
           "training_table", "choose_hybrid", "best_weight", "cv_report", "FIT_INPUTS"]


# ---------------------------------------------------------------------------------------
# Fitting a model family
# ---------------------------------------------------------------------------------------
def _stored(engine, name, what):
    """The model ``name`` of an engine, which must be a ``what``."""
    if name not in engine.models:
        raise QueryError(f"{engine.path} has no model {name!r} "
                         f"(models: {', '.join(engine.models) or 'none'})")
    model = engine.models[name]
    if not isinstance(model, what):
        raise QueryError(f"model {name!r} of {engine.path} is of kind {model.kind!r}")
    return model


def _answers_inputs(engine, *, labels=None, ranker_from=None, ranker_name="answers",
                    translation=None) -> dict:
    """Keyword arguments of :meth:`~cqa_search.answers.AnswerSelector.fit`.

    Parameters
    ----------
    labels : path or dict, optional
        Judged answers of this index to learn the ranker from: qrels (a file, or
        ``{question id: {answer: relevance}}``), an answer being its id (e.g. SemEval's
        ``RELC_ID``) or its 0-based position.
    ranker_from : path, optional
        Another index whose stored answers model's ranker is applied here.
    ranker_name : str, default "answers"
        That model's name there.
    translation : str, optional
        The name of a translation model stored in this index, used instead of training a
        table.
    """
    from .answers import AnswerSelector, labels_from_qrels

    inputs = {}
    if labels is not None:
        qrels = read_qrels(labels) if isinstance(labels, (str, os.PathLike)) else labels
        inputs["y"] = labels_from_qrels(engine.archive, qrels)
    if ranker_from is not None:
        inputs["ranker"] = _stored(SearchEngine.open(ranker_from), ranker_name,
                                   AnswerSelector).ranker_
    if translation is not None:
        from .translation import TranslationModel

        inputs["translation"] = _stored(engine, translation, TranslationModel)
    return inputs


#: Family -> ``function(engine, **inputs) -> dict``: what a fit of the family reads besides
#: its parameters (labels, another model), from keyword arguments of :func:`fit_family`,
#: as keyword arguments of the estimator's ``fit``. Its keyword parameters are the inputs.
FIT_INPUTS = {"answers": _answers_inputs}


def _inputs_of(family) -> list:
    function = FIT_INPUTS.get(family)
    return [] if function is None else [
        p.name for p in inspect.signature(function).parameters.values()
        if p.kind is p.KEYWORD_ONLY]


@dataclass(frozen=True)
class FitReport:
    """What :func:`fit_family` did; its text is what ``cqa-search fit`` prints.

    Attributes
    ----------
    family : str
    name : str
        The name the model is stored under.
    path : str
        The index.
    model : estimator
        The fitted model.
    seconds : float
        Time of the fit and the store.
    """

    family: str
    name: str
    path: str
    model: object
    seconds: float

    def __str__(self) -> str:
        return (f"model      {self.name} ({self.family}) stored in {self.path}\n"
                f"{self.model.describe()}\ntotal      {self.seconds:.1f} s")


def _fit_engine(index) -> SearchEngine:
    """An engine over the whole archive of ``index`` read in this process, without the
    features of its stored models: what a fit reads (``engine.view``). A sharded index is
    read from its shards' files (no Ray: a fit on Ray runs its own tasks); the model fitted
    equals that of one unsharded index of the same archive."""
    stored = open_index(index)
    if not is_sharded(stored):
        return SearchEngine.open(index, config=SearchConfig(ranker=None))
    return SearchEngine(LocalSearcher(sharded_data(stored), shard_models(stored, None),
                                      SearchConfig(ranker=None, models=())))


def fit_family(index, family, *, name=None, progress=False, ray=None, **params) -> FitReport:
    """Fit a model family on the archive of an index and store the model there.

    Parameters
    ----------
    index : path
        An index (a sharded one is read from its shards, and the model stored with its
        rows split with them).
    family : str
        A family of :data:`~cqa_search.index.models.FAMILIES` (``"translation"``,
        ``"topics"``, ``"multiview"``, ``"answers"``, ``"embeddings"``).
    name : str, optional
        The name to store the model under (default: the family's, e.g.
        ``topics-gnmfnc``); a model of that name is replaced.
    progress : bool, default False
        Progress bars on stderr.
    ray : str, optional
        Fit on Ray: ``"local"`` (a local Ray session) or a cluster address; what runs
        there is the family's :attr:`~cqa_search.index.models.Family.on_ray` (a family
        with nothing on Ray warns and fits here).
    **params
        The estimator's constructor parameters (e.g. ``model="gnmf"`` for topics), and the
        family's other inputs (:data:`FIT_INPUTS`: for ``answers``, ``labels``,
        ``ranker_from``, ``ranker_name``, ``translation``).

    Returns
    -------
    FitReport

    Raises
    ------
    ParameterError
        Unknown family or parameter.
    """
    if family not in FAMILIES:
        raise ParameterError(f"unknown model family {family!r}; families: "
                             f"{', '.join(FAMILIES)}")
    spec = FAMILIES[family]
    cls = model_class(spec.kind)
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    input_names = _inputs_of(family)
    unknown = [p for p in params if p not in accepted and p not in input_names]
    if unknown:
        raise ParameterError(f"the {family} family has no parameter {unknown[0]!r} "
                             f"(parameters: {', '.join(accepted + input_names)})")
    inputs = {p: params.pop(p) for p in input_names if p in params}
    t0 = time.perf_counter()
    engine = _fit_engine(index)
    fit_inputs = FIT_INPUTS[family](engine, **inputs) if family in FIT_INPUTS else {}
    if ray is not None and spec.on_ray is None:
        warnings.warn(f"nothing of the {family} family runs on Ray: it is fitted in this "
                      "process", UserWarning, stacklevel=2)
        ray = None
    if ray is None:
        model = cls(**params).fit(engine.view, progress=progress, **fit_inputs)
    else:
        from .distributed.fitting import ray_fits

        with ray_fits(address=None if ray == "local" else ray):
            model = cls(**params).fit(engine.view, progress=progress, **fit_inputs)
    name = name or spec.store_name(model.get_params())
    # the stored models given to the fit (answers --translation NAME) are what it read
    read = [n for n, m in engine.models.items() if any(m is v for v in fit_inputs.values())]
    add_model(engine, name, model, inputs=read)
    return FitReport(family, name, engine.path, model, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# Training a ranker
# ---------------------------------------------------------------------------------------
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
    grades = np.array([qrels.get(q, {}).get(d, 0) for q, d in zip(qid, docs)], dtype=np.float64)
    return X, (grades if graded else (grades >= 1).astype(np.float64)), qid, docs, list(names)


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


def cv_report(cv) -> list:
    """Lines on what cross-validation chose (a fitted :class:`LinearRankerCV`)."""
    best_single = cv.single_feature_
    lines = [f"{cv.n_splits}-fold MAP   query-grouped cross-validation:"]
    if cv.baseline is not None:
        what = "first stage" if cv.baseline == "first_stage" else "retrieval"
        lines.append(f"  {what + ' order (' + cv.baseline + ')':<34} "
                     f"{100 * cv.baseline_score_:6.2f}")
    lines.append(f"  {'best single feature (' + best_single + ')':<34} "
                 f"{100 * cv.single_scores_[best_single]:6.2f}  (picked on each fold's "
                 f"training queries: {100 * cv.single_score_:.2f})")
    point = ", ".join(f"{k}={v!r}" for k, v in cv.best_params_.items())
    lines.append(f"  {'learned ranker' + (' (' + point + ')' if point else ''):<34} "
                 f"{100 * cv.learned_score_:6.2f}")
    if cv.dropped_ and all(set(d["features"]) <= set(cv.features_) for d in cv.dropped_):
        # forward selection left families out, but the ranker on all features won
        lines.append(f"  all features beat forward selection (MAP "
                     f"{100 * cv.dropped_[0]['map_without']:.2f} without "
                     f"{', '.join(d['family'] for d in cv.dropped_)}): every family is kept")
    else:
        lines.extend(f"  left out {d['family']} ({', '.join(d['features'])}): MAP "
                     f"{100 * d['map_with']:.2f} with it, {100 * d['map_without']:.2f} without "
                     f"(gain p = {d['p_value']:.2f})" for d in cv.dropped_)
    chosen = {"learned": "the learned ranker",
              "baseline": "the first stage's order" if cv.baseline == "first_stage" else
              "the retrieval order",
              "single": f"the single feature {cv.single_feature_}"}[cv.chosen_]
    lines.append(f"chosen       {chosen} (MAP {100 * cv.best_score_:.2f})")
    return lines


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
    k = engine.config.n_candidates if k is None else k
    probe = engine.with_config(dataclasses.replace(engine.config, ranker=None, hybrid=None))
    usable = probe.searcher.has_vectors and \
        first_stage.hybrid_capable(probe.config.retrieval)
    if hybrid != "auto":
        try:
            a = first_stage.check_weight(hybrid) or 0.0
        except ValueError:
            raise QueryError(f"hybrid must be 'auto', None or a number in [0, 1]; got "
                             f"{hybrid!r}") from None
        if a:  # raises when the index cannot
            probe.with_config(dataclasses.replace(probe.config, hybrid=a))
        return HybridChoice(a, k, []) if usable else None
    if not usable:
        return None
    queries = [{**q, "category": None} for q in queries]
    grid = []
    bar = progress_bar(progress, "choosing the first stage", "weights",
                       len(first_stage.WEIGHT_GRID))
    for a in first_stage.WEIGHT_GRID:
        trial = probe.with_config(dataclasses.replace(probe.config, hybrid=a))
        scores = evaluate(run_queries(trial, queries, k=k), qrels, metrics=["map", f"r@{k}"],
                          convention="trec")
        grid.append((a, float(scores[f"r@{k}"].mean()), float(scores["map"].mean())))
        bar.update()
    bar.close()
    return HybridChoice(best_weight(grid), k, grid)


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


@dataclass(frozen=True)
class TrainReport:
    """What :func:`train_ranker` did; its text is what ``cqa-search train`` prints.

    Attributes
    ----------
    ranker : LinearRanker
        The chosen ranker, fitted on all the queries.
    selection : LinearRankerCV or None
        The cross-validation that chose it (None with ``no_cv``).
    index : str
    name : str
        The model name the ranker is (or would be) stored under.
    n_queries : int
        Judged queries.
    n_useful : int
        Queries with candidates of different relevance.
    n_candidates : int
    n_pairs : int
        Candidate pairs of different relevance.
    seconds : dict
        ``{"features": ..., "learning": ...}``.
    improves : bool
        The ranker ranks better than the retrieval order (by cross-validation; True with
        ``no_cv``).
    stored : bool
        The ranker was stored in the index.
    removed : bool
        It did not improve, and a ranker of that name stored before was removed.
    dry_run : bool
    search : TrainReport or None
        When the ranker reads the given-run features
        (:data:`~cqa_search.features.GIVEN_FEATURES`), which free searches do not have:
        the ranker of free searches, trained the same way on the same candidates without
        them, and stored (if it beats the retrieval model) as ``<name>-search``, which
        the engine uses for free searches (see
        :attr:`~cqa_search.SearchEngine.ranker`). None otherwise: the ranker itself
        ranks free searches.
    search_removed : bool
        No ranker of free searches was trained (``search`` None), and a
        ``<name>-search`` of an earlier training was removed.
    hybrid : HybridChoice or None
        The first stage whose candidates the ranker was trained on, when the index has
        word vectors (its ``a`` is stored with the ranker); None: the retrieval model's.
    """

    ranker: LinearRanker
    selection: LinearRankerCV | None
    index: str
    name: str
    n_queries: int
    n_useful: int
    n_candidates: int
    n_pairs: int
    seconds: dict
    improves: bool
    stored: bool
    removed: bool
    dry_run: bool
    search: "TrainReport | None" = None
    search_removed: bool = False
    hybrid: "HybridChoice | None" = None

    def summary(self) -> str:
        """The training figures: learner, data, MAP, and the weight of every feature."""
        ranker = self.ranker
        params = ranker.params or {}
        lines = [f"learner      {ranker.learner}"
                 + (" (" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")"
                    if params else ""),
                 f"queries      {self.n_queries} judged, {self.n_useful} with candidates of "
                 "different relevance",
                 f"candidates   {self.n_candidates}",
                 f"pairs        {self.n_pairs} (candidate pairs of different relevance)",
                 f"iterations   {ranker.n_iter_}",
                 f"training MAP {100 * ranker.train_score_:.2f}"]
        if ranker.init_score_ is not None:
            lines[-1] += f" (from {100 * ranker.init_score_:.2f} at the start)"
        if self.hybrid is not None:
            lines.extend(self.hybrid.lines())
        if self.selection is not None:
            lines.extend(cv_report(self.selection))
        info = ranker.learner_info_
        if info.get("base") is not None:
            lines.append("base rankers " + ", ".join(
                f"{b} {w:+.3f}" for b, w in zip(info["base"], info["meta_coef"])))
        if info.get("base_feature") is not None:
            lines.append(f"base score   {info['base_feature']} (alpha_0 {info['alpha0']:.3f})")
        lines.append("")
        lines.append(f"{'feature':<22} {'weight':>9} {'mean':>10} {'scale':>10}  thresholds")
        n_steps = np.bincount(ranker.step_feature_, minlength=ranker.n_features_in_)
        for j, name in enumerate(ranker.feature_names_in_):
            lines.append(f"{name:<22} {ranker.coef_[j]:>9.4f} {ranker.norm_offset_[j]:>10.4g} "
                         f"{ranker.norm_scale_[j]:>10.4g}  {n_steps[j] or ''}")
        lines.append("(weights of the normalised features: (value - mean) / scale)"
                     if ranker.normalize != "query" else
                     "(weights of the features min-max scaled among each query's candidates)")
        return "\n".join(lines)

    def _not_better(self) -> str:
        cv = self.selection
        order = "the first stage's order" if cv.baseline == "first_stage" else \
            "the retrieval order"
        return (f"the learned ranking (cross-validated MAP {100 * cv.learned_score_:.2f}) is "
                f"not better than {order} alone ({cv.baseline}, "
                f"{100 * cv.baseline_score_:.2f})")

    def __str__(self) -> str:
        features, learning = self.seconds["features"], self.seconds["learning"]
        lines = [self.summary(),
                 f"time         {features + learning:.1f} s (candidates and features "
                 f"{features:.1f} s, learning {learning:.1f} s)", ""]
        index, name, search = self.index, self.name, self.search
        use = "" if name == "ranker" else f" --ranker {name}"
        removed = f" (the ranker {name!r} stored before is removed)" if self.removed else ""
        if not self.improves and self.hybrid is not None:  # the first stage's order, kept
            lines.append(f"warning: {self._not_better()}: "
                         + (f"stored as model {name!r} in {index}: that order (a ranker of "
                            f"first_stage alone) with its a = {self.hybrid.a:g}, which "
                            "searches with it use" if self.stored else
                            "(dry run: nothing stored)"))
        elif not self.improves:
            lines.append(f"warning: {self._not_better()}: no ranker stored"
                         + (", search keeps the retrieval order" if search is None else
                            " for candidates given with scores")
                         + removed)
        elif self.dry_run:
            lines.append("(dry run: nothing stored)")
        elif search is None:
            lines += [f"stored as model {name!r} in {index}"
                      + (": searches now rank with it" if name == "ranker" else ""),
                      f"search with it:   cqa-search query {index}{use} \"your question\"",
                      f"evaluate it:      cqa-search evaluate {index}{use} --queries Q "
                      "--qrels R"]
        else:
            lines += [f"stored as model {name!r} in {index}: it ranks candidates given with "
                      "their scores (a rerank of a run)",
                      f"evaluate it:      cqa-search evaluate {index}{use} --candidates RUN "
                      "--queries Q --qrels R"]
        if search is not None:
            companion = search.name
            lines += ["", f"free searches have no given-run features ("
                      f"{', '.join(GIVEN_FEATURES)}): the same training without them, on the "
                      "same candidates, for the ranker of free searches",
                      search.summary(), ""]
            if not search.improves:
                lines.append(f"{search._not_better()}: free searches keep the retrieval order"
                             + (f" (the ranker {companion!r} stored before is removed)"
                                if search.removed else ""))
            elif search.dry_run:
                lines.append("(dry run: nothing stored)")
            else:
                lines += [f"stored as model {companion!r} in {index}: free searches"
                          + ("" if self.stored else " and reranks")
                          + (" now rank with it" if name == "ranker" else
                             f" with --ranker {name} rank with it"),
                          f"search with it:   cqa-search query {index}{use} \"your question\""]
        elif uses_given(self.ranker) and self.improves:
            lines.append("free searches keep the retrieval order: the ranker reads no feature "
                         "but the given-run ones, which they do not have")
        if self.search_removed:
            lines.append(f"(the ranker {search_ranker_name(name)!r} stored before for free "
                         "searches is removed)")
        return "\n".join(lines)


def _fit(X, y, qid, names, baseline, *, learner, params, normalize, max_iter, tol,
         early_stopping, random_state, cv, all_features, no_cv):
    """``(ranker, selection)``: the ranker of :func:`train_ranker` on these columns, and the
    cross-validation that chose it (None with ``no_cv``)."""
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


def train_ranker(index, queries, qrels, candidates=None, *, k=None, learner="ranksvm",
                 params=None, normalize="zscore", max_iter=None, tol=1e-4,
                 early_stopping=False, random_state=0, features=None, exclude=None,
                 graded=False, cv=5, all_features=False, no_cv=False, name="ranker",
                 hybrid="auto", dry_run=False, progress=False) -> TrainReport:
    """Train a ranker on judged queries and store it in the index unless it loses to the
    retrieval model (what ``cqa-search train`` does).

    By default the ranker is chosen by query-grouped cross-validation
    (:class:`~cqa_search.ranking.LinearRankerCV`): its regularisation, the model families
    that earn their place, and whether it ranks the candidates better than the retrieval
    model alone; when it does not, nothing is stored (and a ranker stored before under the
    same name is removed), so training never makes search worse.

    A ranker of given candidates that reads their scores (the given-run features
    :data:`~cqa_search.features.GIVEN_FEATURES`) ranks only candidates given with scores
    (:meth:`~cqa_search.SearchEngine.rerank`, ``evaluate --candidates``): free searches
    have no such features. A second ranker is then trained the same way on the same
    candidates without them (against the retrieval model's order), and stored as
    ``<name>-search`` when it beats that order: the engine ranks free searches with it
    (:attr:`TrainReport.search`).

    When the index has word vectors (``cqa-search fit INDEX embeddings``), the candidates
    of full retrieval come from the hybrid first stage (:mod:`~cqa_search.retrieval.first_stage`)
    whose weight ``a`` :func:`choose_hybrid` chooses on the training queries; the ranker
    stores it (``hybrid_weight_``) and searches with it use it. The first stage's score is
    a feature (``first_stage``) and the order the ranker must beat; when no learned ranker
    beats it, that order itself is stored (a ranker of ``first_stage`` alone), with its
    ``a``.

    Parameters
    ----------
    index : path
    queries : list of dict
        ``{"id", "text", "category"}`` (as :func:`~cqa_search.evaluation.read_queries`
        reads them); the queries without judgments are left out.
    qrels : dict
        ``{qid: {doc_id: relevance}}`` (relevance >= 1: relevant).
    candidates : dict, optional
        A run ``{qid: {doc_id: score}}``: rank these (their scores are the ``given_*``
        features) instead of the top ``k`` of full retrieval.
    k : int, optional
        Candidates per query from full retrieval (default: the engine's
        ``n_candidates``, the candidates search reranks).
    learner : str, default "ranksvm"
        A :class:`~cqa_search.ranking.LinearRanker` learner.
    params : dict, optional
        Learner options; fixing the one cross-validation would choose (``C``,
        ``alpha``) turns that choice off.
    normalize : {"zscore", "minmax", "query"} or None, default "zscore"
    max_iter : int, optional
        Iteration limit of the learner (default: the learner's, or chosen by
        cross-validation for perceptron and boosting).
    tol : float, default 1e-4
    early_stopping : bool, default False
        Choose the iterations on held-out training queries (with ``no_cv``).
    random_state : int, default 0
    features, exclude : sequence of str, optional
        Keep only the feature columns whose names start with one of ``features``; leave
        out those starting with one of ``exclude``.
    graded : bool, default False
        Pairwise learners also order the relevance grades.
    cv : int, default 5
        Folds of the cross-validation.
    all_features : bool, default False
        No family selection.
    no_cv : bool, default False
        No cross-validation: fit the learner with its options on all the features and
        store it.
    name : str, default "ranker"
        Model name in the index (``ranker``: the one search uses). A ``<name>-search``
        stored before is replaced or removed: it belongs to ``name``.
    hybrid : "auto", float in [0, 1] or None, default "auto"
        The first stage of full retrieval on an index with word vectors (see
        :func:`choose_hybrid`): "auto" chooses ``a``; a number fixes it; None: the
        retrieval model alone.
    dry_run : bool, default False
        Train and report, store (and remove) nothing.
    progress : bool, default False
        A progress bar on stderr.

    Returns
    -------
    TrainReport

    Raises
    ------
    QueryError
        No judged query, no candidates, no pair to learn from, no feature column left, or
        inconsistent options.
    """
    if not no_cv and cv < 2:
        raise QueryError(f"cv must be at least 2 (the folds of the cross-validation, `train "
                         f"--cv N`; none: no_cv, `train --no-cv`); got {cv}")
    queries = [q for q in queries if q["id"] in qrels]
    if not queries:
        raise QueryError("none of the queries is judged in the qrels")
    if candidates is not None and hybrid != "auto":
        raise QueryError("hybrid chooses the first stage of full retrieval; a training on "
                         "given candidates (`train --candidates`) has none")
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=None))
    t0 = time.perf_counter()
    choice = None if candidates is not None else \
        choose_hybrid(engine, queries, qrels, hybrid, k=k, progress=progress)
    if choice is not None:
        engine = engine.with_config(dataclasses.replace(engine.config, hybrid=choice.a))
    X, y, qid, docs, names = training_table(engine, queries, qrels, candidates=candidates,
                                            k=k, graded=graded, progress=progress)
    if len(X) == 0:
        raise QueryError("the queries have no candidates to learn from")
    cols = _columns(names, features, exclude)
    X, names = X[:, cols], [names[j] for j in cols]
    t1 = time.perf_counter()
    n_pairs, n_useful = _pairs(y, qid)
    if n_pairs == 0:
        raise QueryError("no query has both relevant and non-relevant candidates: nothing to "
                         "learn")
    options = dict(learner=learner, params=dict(params) if params else None,
                   normalize=normalize, max_iter=max_iter, tol=tol,
                   early_stopping=early_stopping, random_state=random_state, cv=cv,
                   all_features=all_features, no_cv=no_cv)
    retrieval = engine.config.retrieval.feature_name
    if "first_stage" in names:  # the order of the first stage (the retrieval model's when off)
        retrieval = "first_stage"
    ranker, selection = _fit(X, y, qid, names,
                             "given_rrank" if candidates is not None else retrieval, **options)
    if choice is not None:
        ranker.hybrid_weight_ = choice.a
    free = [j for j, n in enumerate(names) if n not in GIVEN_FEATURES]
    search = None
    if uses_given(ranker) and free:  # and the ranker of free searches, without them
        search = _fit(X[:, free], y, qid, [names[j] for j in free], retrieval, **options)
    seconds = {"features": t1 - t0, "learning": time.perf_counter() - t1}

    def report(fitted, name, **more):
        """The report of ``fitted`` (ranker, selection), stored as ``name`` unless it does
        not beat the retrieval order (a ranker of that name stored before is then
        removed); the first stage's order with its chosen ``a`` is stored then."""
        ranker, selection = fitted
        improves = selection is None or bool(selection.improves_)
        keep = improves or more.get("hybrid") is not None
        removed = not dry_run and not keep and name in engine.models
        if removed:
            remove_model(index, name)
        elif keep and not dry_run:
            add_model(engine, name, ranker)
        return TrainReport(ranker, selection, os.fspath(index), name, len(queries), n_useful,
                           len(X), n_pairs, seconds, improves, keep and not dry_run,
                           removed, dry_run, **more)

    if search is not None:  # stored first: a reader meanwhile finds the new ranker with it
        search = report(search, search_ranker_name(name))
    out = report((ranker, selection), name, search=search, hybrid=choice)
    if search is None and not dry_run and search_ranker_name(name) in engine.models:
        # an earlier training's, which would rank free searches in place of this one
        remove_model(index, search_ranker_name(name))
        out = dataclasses.replace(out, search_removed=True)
    return out
