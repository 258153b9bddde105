"""Fit a model family, train and store a ranker: the library behind ``cqa-search fit`` and
``cqa-search train``.

:func:`fit_family` fits one of the model families of the registry
(:data:`cqa_search.index.models.FAMILIES`) on an index's own archive and stores it there;
:func:`train_ranker` learns a ranker from judged queries and stores it unless it loses to
the retrieval model. Each returns a report (:class:`FitReport`, :class:`TrainReport`)
whose text is what the command prints (the commands that use what was stored are the
command's to say). :func:`cross_validate_training` scores exactly what
:func:`train_ranker` does on held-out queries (each fold ranked by a training on the
others), from the same pieces (:mod:`cqa_search.training_data`): what ``train`` prints as
the MAP to expect on new queries, and what the benchmarks report.

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
import numbers
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .engine import SearchConfig, SearchEngine
from .evaluation import evaluate, paired_interval, read_qrels, run_of_scores
from .exceptions import ParameterError, QueryError
from .features import GIVEN_FEATURES, search_ranker_name, uses_given
from .index.models import (FAMILIES, add_model, check_features_free, load_model,
                           model_class, remove_model)
from .index.sharding import is_sharded, shard_models, sharded_data
from .index.store import open_index
from .ranking import LinearRanker, LinearRankerCV
from .ranking._utils import query_folds
from .searcher import LocalSearcher
from .training_data import (Fitted, HybridChoice, JudgedQueries, fit_on, fit_ranker,
                            order_ranker)

__all__ = ["FitReport", "TrainReport", "CrossValidation", "Fold", "fit_family",
           "train_ranker", "cross_validate_training", "query_splits", "cv_report",
           "FIT_INPUTS"]


# ---------------------------------------------------------------------------------------
# Fitting a model family
# ---------------------------------------------------------------------------------------
def _stored(engine, name, what):
    """The model ``name`` of an engine (or of a sharded index's top-level generation: its
    shared part), which must be a ``what``."""
    if name not in engine.models:
        raise QueryError(f"{engine.path} has no model {name!r} "
                         f"(models: {', '.join(engine.models) or 'none'})")
    model = engine.models[name] if hasattr(engine, "view") else load_model(engine, name)
    if not isinstance(model, what):
        raise QueryError(f"model {name!r} of {engine.path} is of kind {model.kind!r}")
    return model


def _answers_inputs(engine, *, labels=None, ranker_from=None, ranker_name="answers",
                    translation=None) -> tuple:
    """Keyword arguments of :meth:`~cqa_search.answers.AnswerSelector.fit`, and the
    stored model they read.

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
    from .answers import AnswerSelector

    inputs = {}
    if labels is not None:  # (matched to the answers by the fit, where they are)
        inputs["y"] = read_qrels(labels) if isinstance(labels, (str, os.PathLike)) \
            else labels
    if ranker_from is not None:
        inputs["ranker"] = _stored(SearchEngine.open(ranker_from), ranker_name,
                                   AnswerSelector).ranker_
    if translation is not None:
        from .translation import TranslationModel

        inputs["translation"] = _stored(engine, translation, TranslationModel)
    return inputs, [translation] if translation is not None else []


def _encoder_inputs(engine) -> tuple:
    """Keyword arguments of :meth:`~cqa_search.vectors.encoded.EncoderModel.fit`: the
    folder beside the index where the encoded chunks are kept until the fit ends
    (``INDEX.encoder-fit``: an interrupted fit resumes); it reads no stored model."""
    return {"checkpoint": os.fspath(engine.path).rstrip(os.sep) + ".encoder-fit"}, []


#: Family -> ``function(engine, **inputs) -> (dict, list)``: what a fit of the family reads
#: besides its parameters (labels, another model), from keyword arguments of
#: :func:`fit_family`, as keyword arguments of the estimator's ``fit``, and the names of
#: the stored models among them. Its keyword parameters are the inputs. ``engine`` is an
#: opened engine, or the top-level generation of a sharded index whose fit reads the
#: shards where they are (the family's ``from_shards``).
FIT_INPUTS = {"answers": _answers_inputs, "encoder": _encoder_inputs}


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
    # the data of the fit: the whole archive read here, or built where the shards are
    # (the index's generation stands for the engine: its manifest and path)
    stored = open_index(index)
    from_shards = ray is not None and spec.from_shards and is_sharded(stored)
    engine = stored if from_shards else _fit_engine(index)
    unfitted = cls(**params)
    name = name or spec.store_name(unfitted.get_params())
    check_features_free(engine, name, unfitted)  # before the fit, not after it
    fit_inputs, read = FIT_INPUTS[family](engine, **inputs) if family in FIT_INPUTS \
        else ({}, [])
    if ray is not None and spec.on_ray is None:
        warnings.warn(f"nothing of the {family} family runs on Ray: it is fitted in this "
                      "process", UserWarning, stacklevel=2)
        ray = None
    if ray is None:
        model = cls(**params).fit(engine.view, progress=progress, **fit_inputs)
    else:
        from .distributed.fitting import ShardedSource, ray_fits

        with ray_fits(address=None if ray == "local" else ray):
            model = cls(**params).fit(ShardedSource(stored) if from_shards else engine.view,
                                      progress=progress, **fit_inputs)
    add_model(engine, name, model, inputs=read)
    return FitReport(family, name, engine.path, model, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# Training a ranker
# ---------------------------------------------------------------------------------------
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
        The ranker ranks better than the retrieval order (by cross-validation, and not
        worse on held-out queries by the assessment; True with ``no_cv``).
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
    assessment : CrossValidation or None
        The cross-validation of the whole training (``assess``): what to expect on new
        queries, against the first stage's order and the retrieval model alone.
    assessment_note : str or None
        Why there is no assessment although one was asked for (e.g. too few queries).
    overruled : tuple or None
        ``(mean, low, high)``: the assessment's gain over the baseline order when the
        cross-validation chose a learned ranking but the whole training, cross-validated,
        does not beat that order on held-out queries (mean gain <= 0): the order itself
        is then what is stored (a first stage with its ``a``) or kept (the retrieval
        order), not the learned ranking. None otherwise.
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
    assessment: "CrossValidation | None" = None
    assessment_note: str | None = None
    overruled: tuple | None = None

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
            base = info["base_feature"]
            weight = info.get("alpha0", ranker.coef_[list(ranker.feature_names_in_).index(base)])
            lines.append(f"base score   {base} (weight {weight:.3f})")
        lines.append("")
        # (thresholds: only a boosting ranker's steps, a column of its own only then)
        steps = len(ranker.step_feature_) > 0
        lines.append(f"{'feature':<22} {'weight':>9} {'mean':>10} {'scale':>10}"
                     + ("  thresholds" if steps else ""))
        n_steps = np.bincount(ranker.step_feature_, minlength=ranker.n_features_in_)
        for j, name in enumerate(ranker.feature_names_in_):
            lines.append(f"{name:<22} {ranker.coef_[j]:>9.4f} {ranker.norm_offset_[j]:>10.4g} "
                         f"{ranker.norm_scale_[j]:>10.4g}"
                         + (f"  {n_steps[j] or ''}" if steps else ""))
        lines.append("(weights of the normalised features: (value - mean) / scale)"
                     if ranker.normalize != "query" else
                     "(weights of the features min-max scaled among each query's candidates)")
        if steps:
            lines.append("(thresholds: the boosting steps on the feature, each adding its own "
                         "weight when the normalised feature exceeds its threshold)")
        return "\n".join(lines)

    def _not_better(self) -> str:
        cv = self.selection
        order = "the first stage's order" if cv.baseline == "first_stage" else \
            "the retrieval order"
        if self.overruled is not None:
            mean, low, high = (100 * v for v in self.overruled)
            return (f"the learned ranking beat {order} on the cross-validation that chose it, "
                    f"but the whole training, cross-validated, does not on new queries (MAP "
                    f"{mean:+.2f}, 95% interval {low:+.2f} to {high:+.2f})")
        return (f"the learned ranking (cross-validated MAP {100 * cv.learned_score_:.2f}) is "
                f"not better than {order} alone ({cv.baseline}, "
                f"{100 * cv.baseline_score_:.2f})")

    def __str__(self) -> str:
        features, learning = self.seconds["features"], self.seconds["learning"]
        lines = [self.summary(),
                 f"time         {features + learning:.1f} s (candidates and features "
                 f"{features:.1f} s, learning {learning:.1f} s)", ""]
        if self.assessment is not None:
            lines += self.assessment.lines() + [""]
        elif self.assessment_note is not None:
            lines += [f"on new queries: not assessed ({self.assessment_note})", ""]
        index, name, search = self.index, self.name, self.search
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
            lines.append(f"stored as model {name!r} in {index}"
                         + (": searches now rank with it" if name == "ranker" else ""))
        else:
            lines.append(f"stored as model {name!r} in {index}: it ranks candidates given "
                         "with their scores (a rerank of a run)")
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
                lines.append(f"stored as model {companion!r} in {index}: free searches"
                             + ("" if self.stored else " and reranks")
                             + (" now rank with it" if name == "ranker" else
                                f" with the ranker {name!r} rank with it"))
        elif uses_given(self.ranker) and self.improves:
            lines.append("free searches keep the retrieval order: the ranker reads no feature "
                         "but the given-run ones, which they do not have")
        if self.search_removed:
            lines.append(f"(the ranker {search_ranker_name(name)!r} stored before for free "
                         "searches is removed)")
        return "\n".join(lines)


def _options(learner, params, normalize, max_iter, tol, early_stopping, random_state, cv,
             all_features, no_cv) -> dict:
    if not no_cv and cv < 2:
        raise QueryError(f"cv must be at least 2 (the folds of the cross-validation, `train "
                         f"--cv N`; none: no_cv, `train --no-cv`); got {cv}")
    return dict(learner=learner, params=dict(params) if params else None, normalize=normalize,
                max_iter=max_iter, tol=tol, early_stopping=early_stopping,
                random_state=random_state, cv=cv, all_features=all_features, no_cv=no_cv)


def train_ranker(index, queries, qrels, candidates=None, *, k=None, learner="anchored",
                 params=None, normalize="zscore", max_iter=None, tol=1e-4,
                 early_stopping=False, random_state=0, features=None, exclude=None,
                 graded=False, cv=5, all_features=True, no_cv=False, name="ranker",
                 hybrid="auto", assess=True, dry_run=False, progress=False) -> TrainReport:
    """Train a ranker on judged queries and store it in the index unless it loses to the
    retrieval model (what ``cqa-search train`` does).

    By default the ranker is a correction to the first stage's score regularised towards
    it (the ``anchored`` learner over every feature: what measured best on dev data,
    BENCHMARKS.md "A ranker that generalises"), chosen by query-grouped cross-validation
    (:class:`~cqa_search.ranking.LinearRankerCV`): its regularisation (and with
    ``all_features=False`` the model families that earn their place), and whether it
    ranks the candidates better than the retrieval model alone on the training queries; when it does not, nothing is stored (and a
    ranker stored before under the same name is removed). That choice is made on the
    training queries, so it can be wrong on new ones: with ``assess`` the whole training
    is also cross-validated (:func:`cross_validate_training`), and the report gives the
    MAP to expect on new queries against the first stage's order and the retrieval model
    alone, with intervals; when by that assessment the training does not beat the first
    stage's order on held-out queries (a mean gain <= 0), the learned ranking is not
    stored even though the cross-validation on all the queries chose it: that order is
    (:attr:`TrainReport.overruled`).

    A ranker of given candidates that reads their scores (the given-run features
    :data:`~cqa_search.features.GIVEN_FEATURES`) ranks only candidates given with scores
    (:meth:`~cqa_search.SearchEngine.rerank`, ``evaluate --candidates``): free searches
    have no such features. A second ranker is then trained the same way on the same
    candidates without them (against the retrieval model's order), and stored as
    ``<name>-search`` when it beats that order: the engine ranks free searches with it
    (:attr:`TrainReport.search`).

    When the index has word vectors (``cqa-search fit INDEX embeddings``), the candidates
    of full retrieval come from the hybrid first stage (:mod:`~cqa_search.retrieval.first_stage`)
    whose weight ``a`` :func:`~cqa_search.training_data.choose_hybrid` chooses on the
    training queries; the ranker stores it (``hybrid_weight_``) and searches with it use
    it. The first stage's score is a feature (``first_stage``) and the order the ranker
    must beat; when no learned ranker beats it, that order itself is stored (a ranker of
    ``first_stage`` alone), with its ``a``.

    Parameters
    ----------
    index : path
    queries : list of dict, or path
        ``{"id", "text", "category"}`` (as :func:`~cqa_search.evaluation.read_queries`
        reads them), or a queries file; the queries without judgments are left out.
    qrels : dict or path
        ``{qid: {doc_id: relevance}}`` (relevance >= 1: relevant), or a qrels file.
    candidates : dict or path, optional
        A run ``{qid: {doc_id: score}}`` (or a TREC run file): rank these (their scores are the ``given_*``
        features) instead of the top ``k`` of full retrieval.
    k : int, optional
        Candidates per query from full retrieval (default: the engine's
        ``n_candidates``, the candidates search reranks).
    learner : str, default "anchored"
        A :class:`~cqa_search.ranking.LinearRanker` learner.
    params : dict, optional
        Learner options; fixing the one cross-validation would choose (``alpha``, ``C``)
        turns that choice off.
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
        Folds of the cross-validation (and of the assessment).
    all_features : bool, default True
        No family selection (False: forward selection of the model families by
        cross-validation, see :class:`~cqa_search.ranking.LinearRankerCV`).
    no_cv : bool, default False
        No cross-validation: fit the learner with its options on all the features and
        store it.
    name : str, default "ranker"
        Model name in the index (``ranker``: the one search uses). A ``<name>-search``
        stored before is replaced or removed: it belongs to ``name``.
    hybrid : "auto", float in [0, 1] or None, default "auto"
        The first stage of full retrieval on an index with word vectors (see
        :func:`~cqa_search.training_data.choose_hybrid`): "auto" chooses ``a``; a number
        fixes it; None: the retrieval model alone.
    assess : bool, default True
        Also cross-validate the whole training (``cv`` folds of the queries; ``cv``
        times the learning, the features computed once): :attr:`TrainReport.assessment`.
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
    options = _options(learner, params, normalize, max_iter, tol, early_stopping,
                       random_state, cv, all_features, no_cv)
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=None))
    judged = JudgedQueries(engine, queries, qrels, candidates, k=k, graded=graded,
                           hybrid=hybrid, progress=progress)
    fitted = fit_on(judged, features=features, exclude=exclude, **options)
    search = None
    free = [j for j, n in enumerate(fitted.names) if n not in GIVEN_FEATURES]
    if uses_given(fitted.ranker) and free:  # and the ranker of free searches, without them
        names = [fitted.names[j] for j in free]
        search = fit_ranker(fitted.X[:, free], fitted.y, fitted.qid, names, fitted.retrieval,
                      **options)
    assessment = note = None
    if assess:
        try:
            assessment = _cross_validate(judged, cv, features, exclude, options)
        except (QueryError, ParameterError) as exc:  # too few queries for the folds, ...
            note = str(exc)

    ranker, improves, overruled = fitted.ranker, fitted.improves, None
    if improves and fitted.selection is not None and assessment is not None \
            and assessment.gain("baseline")[0] <= 0:
        # the training loses to the order it had to beat on held-out queries: keep that
        ranker, improves, overruled = order_ranker(fitted, **options), False, \
            assessment.gain("baseline")

    def report(fitted_ranker, improves, name, **more):
        """The report of ``fitted_ranker`` (ranker, selection), stored as ``name`` when
        it improves or has a hybrid first stage (its order is then stored with its
        ``a``); otherwise a ranker of that name stored before is removed."""
        ranker, selection = fitted_ranker
        keep = improves or more.get("hybrid") is not None
        removed = not dry_run and not keep and name in engine.models
        if removed:
            remove_model(index, name)
        elif keep and not dry_run:
            add_model(engine, name, ranker)
        return TrainReport(ranker, selection, os.fspath(index), name, len(judged.queries),
                           fitted.n_useful, len(fitted.X), fitted.n_pairs, fitted.seconds,
                           improves, keep and not dry_run, removed, dry_run, **more)

    if search is not None:  # stored first: a reader meanwhile finds the new ranker with it
        search = report(search, search[1] is None or bool(search[1].improves_),
                        search_ranker_name(name))
    out = report((ranker, fitted.selection), improves, name, search=search,
                 hybrid=fitted.hybrid, assessment=assessment, assessment_note=note,
                 overruled=overruled)
    if search is None and not dry_run and search_ranker_name(name) in engine.models:
        # an earlier training's, which would rank free searches in place of this one
        remove_model(index, search_ranker_name(name))
        out = dataclasses.replace(out, search_removed=True)
    return out


# ---------------------------------------------------------------------------------------
# Cross-validating a training
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fold:
    """One fold of :func:`cross_validate_training`: the training on ``train_ids`` that
    ranked ``test_ids``.

    Attributes
    ----------
    train_ids, test_ids : list of str
    fitted : Fitted
        The training (its first stage, ranker and cross-validation).
    """

    train_ids: list
    test_ids: list
    fitted: Fitted

    def describe(self) -> str:
        """The fold's choices in one line: the first stage, and the ranker stored."""
        f = self.fitted
        parts = [] if f.hybrid is None else [f"a {f.hybrid.a:g}"]
        cv = f.selection
        if not f.kept:
            parts.append(f"no ranker ({f.retrieval} order)")
        elif cv is None:
            parts.append("the learner as given")
        elif cv.chosen_ == "baseline" or not cv.improves_:
            parts.append(f"{cv.baseline} order")
        elif cv.chosen_ == "single":
            parts.append(f"single {cv.single_feature_}")
        else:
            point = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in cv.best_params_.items())
            left = [d["family"] for d in cv.dropped_ if not set(d["features"]) <= set(
                cv.features_)]
            parts.append(point + (f" without {', '.join(left)}" if left else ""))
        return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class CrossValidation:
    """Held-out scores of a training (:func:`cross_validate_training`): each query ranked
    by the training of the fold that held it out, as search would rank it with what that
    training stores.

    Attributes
    ----------
    run : dict
        ``{qid: {doc_id: score}}``: the held-out rankings (the top ``k`` of each query).
    metrics : pandas.DataFrame
        Per query (index ``qid``): ``map``, ``p@1``, ``mrr``, ``r@k`` of ``run`` (trec
        convention: AP over every relevant question of the qrels).
    baseline : pandas.DataFrame
        The same of the order the training had to beat on the same candidates (the first
        stage's at each fold's ``a``; for given candidates, their given order).
    retrieval : pandas.DataFrame or None
        The same of the retrieval model alone over the whole archive (None for given
        candidates).
    retrieval_name : str
        The retrieval model's feature name (e.g. ``bm25``).
    folds : list of Fold
    """

    run: dict
    metrics: object
    baseline: object
    retrieval: object
    retrieval_name: str
    folds: list

    def gain(self, against="baseline", metric="map", confidence=0.95) -> tuple:
        """``(mean, low, high)``: the mean per-query gain in ``metric`` of the trained
        search over ``against`` (``"baseline"`` or ``"retrieval"``) and its interval
        (paired t; :func:`~cqa_search.evaluation.paired_interval`)."""
        other = getattr(self, against)
        ids = self.metrics.index
        return paired_interval(self.metrics.loc[ids, metric], other.loc[ids, metric],
                               confidence=confidence)

    def lines(self) -> list:
        """What the assessment says, for :class:`TrainReport`."""
        n, k = len(self.metrics), len(self.folds)
        out = [f"on new queries: MAP by {k}-fold cross-validation of this whole training "
               f"(each of the {n} queries ranked by the training on the others)"]
        rows = [("trained search", self.metrics, None)]
        order = self.folds[0].fitted.baseline
        what = {"first_stage": "first stage order", "given_rrank": "given order"}.get(
            order, "retrieval order")
        rows.append((f"{what} ({order})", self.baseline, "baseline"))
        if self.retrieval is not None and order == "first_stage":
            rows.append((f"retrieval model alone ({self.retrieval_name})", self.retrieval,
                         "retrieval"))
        for label, table, against in rows:
            line = f"  {label:<34} {100 * table['map'].mean():6.2f}"
            if against is not None:
                mean, low, high = self.gain(against)
                line += (f"  trained search {100 * mean:+.2f} (95% interval "
                         f"{100 * low:+.2f} to {100 * high:+.2f})")
            out.append(line)
        mean, low, _ = self.gain("baseline")
        order = f"the {what} ({order})"
        out.append("  on new queries the trained search " + (
            f"ranks better than {order}" if low > 0 else
            f"is not better than {order}" if mean <= 0 else
            f"is not shown to be better than {order}: the interval includes 0 (more judged "
            "queries narrow it)"))
        out.extend(f"  fold {i}: {f.describe()}" for i, f in enumerate(self.folds, 1))
        return out


def query_splits(ids, folds=5, random_state=0) -> list:
    """``[(training ids, held-out ids), ...]``: the query-grouped folds of
    :func:`cross_validate_training` (the sorted ids shuffled with ``random_state`` and
    dealt into ``folds`` folds), or ``folds`` itself when it is a list of splits.

    Raises
    ------
    QueryError
        Fewer than 2 folds, more folds than queries, or a query in both parts of a split.

    Examples
    --------
    >>> [test for _, test in query_splits(["a", "b", "c", "d"], 2)]
    [['a', 'c'], ['b', 'd']]
    """
    ids = sorted(ids)
    if isinstance(folds, numbers.Integral):
        if not 2 <= folds <= len(ids):
            raise QueryError(f"cross-validation needs 2 to {len(ids)} folds (one query "
                             f"each at least); got {folds}")
        folds = [([ids[i] for i in tr], [ids[i] for i in te]) for tr, te in
                 query_folds(len(ids), folds, np.random.default_rng(random_state))]
    for train_ids, test_ids in folds:
        if set(train_ids) & set(test_ids):
            raise QueryError("a query is both a training and a held-out query of a fold")
    return [(list(tr), list(te)) for tr, te in folds]


def _cross_validate(judged, folds, features, exclude, options) -> CrossValidation:
    import pandas as pd

    folds = query_splits(judged.ids, folds, options["random_state"])
    out, run, metrics, baseline, retrieval = [], {}, [], [], []
    for train_ids, test_ids in folds:
        fitted = fit_on(judged, train_ids, features=features, exclude=exclude, **options)
        X, _, qid, docs, names = judged.table(None if fitted.hybrid is None else
                                              fitted.hybrid.a)
        rows = np.isin(qid, list(test_ids))
        if fitted.kept:
            cols = [names.index(f) for f in fitted.ranker.feature_names_in_]
            scores = fitted.ranker.predict(X[np.ix_(rows, cols)], qid[rows])
        else:  # nothing stored: search keeps the first stage's order
            scores = X[rows, names.index(fitted.retrieval)]
        held = {q: {} for q in test_ids}  # a query without candidates scores 0
        held.update(run_of_scores(qid[rows], docs[rows], scores))
        base = {q: {} for q in test_ids}
        base.update(run_of_scores(qid[rows], docs[rows], X[rows, names.index(fitted.baseline)]))
        metrics.append(evaluate(held, judged.qrels, metrics=judged.metrics))
        baseline.append(evaluate(base, judged.qrels, metrics=judged.metrics))
        if judged.candidates is None:
            retrieval.append(judged.stage(0.0).loc[list(test_ids)])
        run.update(held)
        out.append(Fold(list(train_ids), list(test_ids), fitted))
    return CrossValidation(run, pd.concat(metrics).sort_index(),
                           pd.concat(baseline).sort_index(),
                           pd.concat(retrieval).sort_index() if retrieval else None,
                           judged.engine.config.retrieval.feature_name, out)


def cross_validate_training(index, queries, qrels, candidates=None, *, folds=5, k=None,
                            learner="anchored", params=None, normalize="zscore", max_iter=None,
                            tol=1e-4, early_stopping=False, random_state=0, features=None,
                            exclude=None, graded=False, cv=5, all_features=True,
                            no_cv=False, hybrid="auto", cache=None,
                            progress=False) -> CrossValidation:
    """Held-out scores of :func:`train_ranker`: each query ranked by a ranker trained
    exactly as ``cqa-search train`` trains it (first stage, features, cross-validated
    choices) on the other folds' queries only, as search would rank it with what that
    training stores; nothing is stored.

    The candidates and their features are computed once for all the queries (a query's
    do not depend on the others) and shared by the folds.

    Parameters
    ----------
    index, queries, qrels, candidates, k, learner, params, normalize, max_iter, tol,
    early_stopping, random_state, features, exclude, graded, cv, all_features, no_cv,
    hybrid
        As :func:`train_ranker` (``cv``: the folds of each training's own
        cross-validation).
    folds : int or list of (list, list), default 5
        Query-grouped folds of the judged queries (shuffled with ``random_state``), or
        the ``(training ids, held-out ids)`` of each fold (e.g. one split: train on dev,
        score test).
    cache : path, optional
        A folder that keeps the first stage's runs and the feature tables between calls
        (:class:`~cqa_search.training_data.JudgedQueries`).
    progress : bool, default False

    Returns
    -------
    CrossValidation

    Raises
    ------
    QueryError
        As :func:`train_ranker`, or folds that do not fit the queries.
    """
    options = _options(learner, params, normalize, max_iter, tol, early_stopping,
                       random_state, cv, all_features, no_cv)
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=None))
    judged = JudgedQueries(engine, queries, qrels, candidates, k=k, graded=graded,
                           hybrid=hybrid, progress=progress, cache=cache)
    return _cross_validate(judged, folds, features, exclude, options)
