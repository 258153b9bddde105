"""The model registry: the trained models an index can store, storing and removing them.

A stored model is a scikit-learn style estimator (parameters in ``__init__``,
``get_params``, learned state ending in ``_``) that also implements::

    kind: str                                   # class attribute: its key in MODEL_KINDS
    state() -> (meta: dict, arrays: dict)       # learned state: JSON values + ndarrays
    from_state(params, meta, arrays) -> model   # classmethod, the inverse (checks arrays)

and then either gives features or orders candidates::

    scorer(view) -> FeatureScorer               # feature models (see cqa_search.features)
    feature_names_in_, predict(X) -> scores     # rankers

A model with a row per question (topic coefficients, multiview factors, chosen answers,
question vectors) also implements::

    row_arrays: tuple of str                    # the state arrays with one row per
                                                # question (axis 0, in row order; the
                                                # first one a row per question exactly)
    select_rows(view, rows) -> model            # a copy with the rows ``rows`` of ``view``
    rows_state(start, stop) -> (meta, arrays)   # optional: its rows start to stop - 1,
                                                # when they are not slices of row_arrays
    added_rows(questions) -> dict               # optional: the row arrays of questions
                                                # being added (one row each, in order)

so that a compaction carries its rows to the renumbered questions and a sharded index
splits them with its shards (:mod:`cqa_search.index.writer`). The rows of the questions
an index gains after the store the model computes when they are added (``added_rows``,
e.g. an encoder's vectors: stored with their segment), or else itself when it scores them
(folding them in).

A *family* is a kind that :func:`cqa_search.training.fit_family` (``cqa-search fit INDEX
FAMILY``) trains from an index's own archive: its ``fit(view, *, progress=False)`` reads an
:class:`~cqa_search.features.IndexView`, and the command's options are its constructor
parameters (names, defaults and help from its signature and numpydoc docstring).

Kinds are imported on first use, so searching an index without trained models never
imports them (nor scikit-learn). A model's files, and loading the models of a generation,
are :mod:`cqa_search.index.model_files` (its names are public here too);
:func:`add_model` and :func:`remove_model` make their change through the index's write
back-end (:mod:`cqa_search.index.writer`).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..exceptions import IndexFormatError, ParameterError
from .model_files import (MODEL_KINDS, STATE_ERRORS, load_model, load_models, model_class,
                          model_dir, row_arrays, runs_entry, write_model)
from .store import open_index
from .writer import open_writer

__all__ = ["MODEL_KINDS", "FAMILIES", "Family", "model_class", "add_model", "remove_model",
           "load_model", "load_models", "model_dir", "write_model", "row_arrays",
           "stale_inputs", "check_features_free"]

@dataclass(frozen=True)
class Family:
    """A model family trained from an index by ``cqa-search fit INDEX NAME``.

    Attributes
    ----------
    kind : str
        Its model kind.
    summary : str
        One line for ``--help``.
    default_name : str
        Name the model is stored under; ``{param}`` fields are filled from its parameters
        (e.g. ``"topics-{model}"``).
    on_ray : str or None
        What of its fit runs on Ray with ``fit --ray`` (None: nothing, it fits in the
        calling process).
    from_shards : bool
        With ``fit --ray`` on a sharded index, its fit reads the shards where they are
        (:class:`cqa_search.distributed.fitting.ShardedSource`: tasks on the shards build
        its data, the calling process holds the model), not the whole archive read in the
        calling process.

    Fitting one is :func:`cqa_search.training.fit_family`; what a fit reads besides the
    estimator's parameters (labels, another model) is
    :data:`cqa_search.training.FIT_INPUTS`.
    """

    kind: str
    summary: str
    default_name: str
    on_ray: str | None = None
    from_shards: bool = False

    def store_name(self, params) -> str:
        return self.default_name.format(**params)


#: ``cqa-search fit`` family name -> :class:`Family`, in the order they are best fitted
#: (the multiview model's ``ibm1`` view reads the stored translation model).
FAMILIES = {
    "translation": Family("translation", "word and phrase translation models from the "
                          "archive's question-answer pairs (IBM Model 1, TransLM, P-Trans; "
                          "Zhou et al. 2011). Adds the features wt, translm, ptrans_*: "
                          "how likely the query is given the question through word and "
                          "phrase translations (learned from how answers word the "
                          "questions). Costs: about a "
                          "CPU minute and 140 MB of tables per 100,000 questions with "
                          "answers (BENCHMARKS.md, Translation models)", "translation",
                          "the IBM Model 1 E-step, over shards of the pairs; on a sharded "
                          "index, each shard's pairs, EM counts and phrases, by a task on "
                          "the shard (no --duplicates, --similar-questions)",
                          from_shards=True),
    "topics": Family("topics", "topic model of the term-question matrix grouped by category "
                     "(NMF, CNMF, GNMF, GNMFNC; Zhou et al. 2014). Adds the feature "
                     "topic_<model>: the query's and the question's topics compared. Costs: "
                     "about 0.25 s per sweep per 200,000 questions (up to 100 sweeps) and 28 "
                     "coefficients per question (GNMFNC's defaults; BENCHMARKS.md, Topic "
                     "models)", "topics-{model}",
                     "the categories' blocks of the updates, in parallel"),
    "multiview": Family("multiview", "SMT + MF: the questions factorized jointly with their "
                        "translations (dictionaries, IBM Model 1, supplied translations; Zhou "
                        "et al. 2013). Adds one feature mv_<view> per view. Costs: about 0.05 "
                        "CPU s per sweep per 1,000 questions (3 views, 100 factors; up to "
                        "100 sweeps) and 100 factors per question and view (BENCHMARKS.md, "
                        "SMT + MF)", "multiview"),
    "answers": Family("answers", "best-answer selection for archives that mark no best "
                      "answer: scores each answer of a question (translation likelihood, "
                      "term scores, length, position, asker) and stores the one to show. "
                      "Adds no feature: it chooses the answer shown with each hit. Costs: "
                      "about the time of build-index (unsupervised), 8 times that with a "
                      "translation table, and one number per question (BENCHMARKS.md, "
                      "Best-answer selection)", "answers",
                      "the E-step of the IBM Model 1 table it trains (none with "
                      "--translation NAME); on a sharded index, each shard's answers "
                      "analysed, scored and chosen by an actor on the shard",
                      from_shards=True),
    "embeddings": Family("embeddings", "word vectors learned from the archive's own text "
                         "(PPMI-SVD or word2vec) and every question's SIF vector. Adds the "
                         "hybrid first stage (searches also find the questions that share no "
                         "word with the query: on by default once fitted) and the features "
                         "emb_* (SIF and mean-vector cosines), softcos_* (soft cosine over "
                         "similar words by vector and by spelling; SimBow) and field_* (title "
                         "vs title, body vs body). Costs: about 1.5 CPU minutes and 1.1 GB of "
                         "arrays per million questions (each question's vector twice, 800 "
                         "bytes, and its title and body unless the index has them), a few ms "
                         "per search (BENCHMARKS.md, Word vectors)", "embeddings"),
    "encoder": Family("encoder", "a pretrained sentence encoder's vectors of every question "
                      "(--model DIR: a sentence-transformers folder such as "
                      "all-MiniLM-L6-v2; docs/models.md says how to get one). Adds the "
                      "features encoder_* (cosine of the query, and of its title and body "
                      "apart, with each question, its title, body and best answer), and "
                      "its question vectors are the dense first stage's. Questions added "
                      "later are encoded when added. Costs: about 20 questions per "
                      "CPU-second per text encoded, 768 bytes per question and text "
                      "(float16), ~17 ms CPU per short query (~11 with onnxruntime "
                      "installed; BENCHMARKS.md, The pretrained sentence encoder)",
                      "encoder"),
}


def _check_name(name) -> None:
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ParameterError(f"model name must use letters, digits, '-' and '_'; got {name!r}")


def add_model(index, name, model, *, inputs=()) -> str:
    """Store a fitted model in an index under ``name`` (a new generation, atomically).

    A model of the same name is replaced; the index's other models are kept, including
    any stored by another writer meanwhile. Engines opened afterwards compute its
    features (or, for a ranker, rank with it).

    Parameters
    ----------
    index : path or SearchEngine
        The index. Given the engine the model was fitted on, the store is refused if the
        index was rebuilt since (the model would not match its archive).
    name : str
        Letters, digits, ``-`` and ``_``.
    model : estimator of a registered kind, fitted
    inputs : iterable of str, optional
        The stored models whose fitted state its fit read, besides those it names itself
        (its ``inputs_``, e.g. the translation model of a multiview model's ``ibm1`` view)
        and, for a ranker, those whose features it reads: ``cqa-search info`` reports it
        stale once one of them is fitted again (:func:`stale_inputs`).

    Returns
    -------
    str
        The new generation's name.

    Raises
    ------
    ParameterError
        Bad name, unregistered kind, the model gives a feature another stored model
        gives (a second topic model needs its own ``feature_name``), or its fitted state
        would not load (e.g. NaN or infinite values).
    IndexFormatError
        No index at the path, or it was rebuilt or compacted since ``index`` (an engine)
        was opened (its rows changed).
    """
    _check_name(name)
    kind = getattr(model, "kind", None)
    try:
        registered = kind is not None and model_class(kind) is type(model)
    except KeyError:
        registered = False
    if not registered:
        raise ParameterError(f"cannot store {type(model).__name__}: not a registered model kind")
    fitted_on = getattr(index, "manifest", None)
    path = getattr(index, "path", index)
    fitted_on = fitted_on if fitted_on is not None else open_index(path).manifest
    meta, arrays = model.state()
    try:  # what a reader of the index will check: a model it cannot load is not stored
        type(model).from_state(model.get_params(), meta, arrays)
    except STATE_ERRORS as exc:
        raise ParameterError(f"model {name!r} cannot be stored: its fitted state is invalid "
                             f"({exc}); the index is unchanged") from None
    # the feature columns the model adds to every hit (rankers and answer choosers add none)
    produced = list(getattr(model, "feature_names", ())) if hasattr(model, "scorer") else []
    read = [*inputs, *getattr(model, "inputs_", ())]
    uses = set(getattr(model, "feature_names_in_", ())) if hasattr(model, "predict") else set()

    def stored_models(base):  # the manifest's models, from the live generation
        if base.manifest.get("rows_id") != fitted_on.get("rows_id"):
            raise IndexFormatError(f"{path} was rebuilt or compacted while model {name!r} was "
                                   "being fitted: its rows changed; fit it again")
        models = dict(base.models)
        if name in models and models[name]["kind"] != kind:
            raise ParameterError(
                f"{path} has a {models[name]['kind']} model named {name!r}: storing this "
                f"{kind} model under that name would replace it; give it another name "
                "(--name), or remove that one first (cqa_search.index.models.remove_model)")
        _check_features_free(models, name, produced, model.get_params())
        # What the model saw: `cqa-search info` counts the questions added or deleted since,
        # and tells the models it read that were fitted again since (each fit its own id).
        sources = read + [other for other, entry in models.items()
                          if uses.intersection(entry.get("features", ()))]
        models[name] = {"kind": kind, "dir": model_dir(name), "created": _created(),
                        "counters": dict(fitted_on.get("counters", {})),
                        "rows": int(fitted_on.get("stats", {}).get("n_rows", 0)),
                        "features": produced, "fit": uuid.uuid4().hex,
                        "inputs": {n: models[n].get("fit") for n in dict.fromkeys(sources)
                                   if n in models and n != name}, **runs_entry(model)}
        _check_rankers(base, models, f"storing model {name!r}")
        return models

    with open_writer(path) as writer:
        return writer.store_model(name, model, (meta, arrays), stored_models)


#: The parameters that name a model's features, with the option of ``cqa-search fit``.
_FEATURE_NAMING = {"feature_name": "--feature-name", "feature_prefix": "--feature-prefix"}


def _check_features_free(models, name, produced, params, prefix=None) -> None:
    """ParameterError when a stored model other than ``name`` (in the manifest's
    ``models``) gives a feature of ``produced`` (or one named ``<prefix>_...``), naming
    the parameter that renames them when the model has one."""
    for other, entry in models.items():
        shared = [f for f in entry.get("features", ()) if f in produced
                  or (prefix is not None and f.startswith(prefix + "_"))]
        if other == name or not shared:
            continue
        naming = [p for p in _FEATURE_NAMING if p in params]
        how = (f"give its features other names (the {naming[0]} parameter, `cqa-search fit "
               f"... {_FEATURE_NAMING[naming[0]]}`) and the model another --name" if naming
               else "this family's features have fixed names, so an index holds one such "
                    "model")
        raise ParameterError(
            f"model {name!r} gives the feature(s) {', '.join(shared)}, which the stored "
            f"model {other!r} gives already: store it as {other!r} (--name {other}) to "
            f"replace that one, or {how}")


def check_features_free(index, name, model) -> None:
    """Before a fit: ParameterError when the features ``model`` (unfitted, its parameters
    set) will give are given by another stored model of ``index`` (an engine), so that the
    refusal comes before the fitting, not after it (:func:`add_model` checks again)."""
    if not hasattr(model, "scorer"):
        return  # (rankers and answer choosers add no feature)
    params = model.get_params()
    try:
        produced, prefix = list(model.feature_names), None
    except Exception:  # noqa: BLE001 - names known only after the fit (their views)
        produced, prefix = [], params.get("feature_prefix")
    _check_features_free(index.manifest.get("models", {}), name, produced, params, prefix)


def stale_inputs(models, name) -> list:
    """The stored models that model ``name`` was fitted from (see :func:`add_model`) and
    that were fitted again since, in a manifest's ``models``: refitting ``name`` brings it
    up to date with them."""
    return [other for other, fit in models[name].get("inputs", {}).items()
            if other in models and models[other].get("fit") != fit]


def _check_rankers(base, models, change) -> None:
    """Refuse a change of the models that takes away a feature a stored ranker uses (its
    searches would fail: the engine cannot compute the ranker's features)."""
    removed = {f for entry in base.models.values() for f in entry.get("features", ())} \
        - {f for entry in models.values() for f in entry.get("features", ())}
    for other, entry in models.items() if removed else ():
        if base.models.get(other) != entry or entry["kind"] not in MODEL_KINDS:
            continue  # stored by this change, or of an unknown kind
        cls = model_class(entry["kind"])
        if not hasattr(cls, "predict"):
            continue  # not a ranker
        stored = base.model(other)
        try:
            uses = cls.from_state(stored.params, stored.meta, stored.arrays()).feature_names_in_
        except STATE_ERRORS:
            continue  # unreadable: opening the index says so
        lost = sorted(removed.intersection(uses))
        if lost:
            raise ParameterError(
                f"{change} would take away the feature(s) {', '.join(lost)}, which the "
                f"stored ranker {other!r} uses: store the model under another name "
                "(--name), or train the ranker again without them first")


def _created() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def remove_model(path, name) -> str:
    """Remove a model from an index (a new generation without it), also one whose files
    are damaged (they are not read).

    Raises
    ------
    IndexFormatError
        No such index or model.
    ParameterError
        A stored ranker uses the model's features.
    """
    def stored_models(base):  # the manifest's models, from the live generation
        if name not in base.models:
            raise IndexFormatError(f"{path} has no model {name!r} (models: "
                                   f"{', '.join(base.models) or 'none'})")
        models = dict(base.models)
        models.pop(name)
        _check_rankers(base, models, f"removing model {name!r}")
        return models

    # (the model's files are not read: it may be damaged)
    with open_writer(path, unchecked=model_dir(name) + "/") as writer:
        return writer.remove_model(name, stored_models)
