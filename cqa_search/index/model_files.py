"""A stored model's files in a generation: its kind's class, its state written and read
back.

A model is stored as ``models/<name>/model.json`` (kind, parameters, metadata, array
names) and an ``.npy`` per array of its ``state()`` (:func:`write_model`), and read back
by its kind's ``from_state`` (:func:`load_models`). What a stored model implements (a
model with a row per question names the arrays that hold them: :func:`row_arrays`), and
the families trained from an index, are :mod:`cqa_search.index.models`; where its rows
go when an index changes is its write back-end's (:mod:`cqa_search.index.writer`). A
model that computes the rows of questions when they are added keeps those of each
segment added after its store apart, a *run* (:func:`write_added_rows`), appended to its
rows when it is loaded (:func:`load_model`).
"""
from __future__ import annotations

import numpy as np

from .._utils import imported, validate_params
from ..exceptions import IndexFormatError, ParameterError
from .store import damage_advice
from .validate import InvalidArray

__all__ = ["MODEL_KINDS", "STATE_ERRORS", "model_class", "model_dir", "write_model",
           "load_models", "load_model", "row_arrays", "rows_dir", "runs_entry",
           "growing_models", "added_rows", "write_added_rows"]

#: Model kind -> estimator class, or ``"module:Class"`` imported on first use.
MODEL_KINDS = {
    "translation": "cqa_search.translation.model:TranslationModel",
    "ibm1": "cqa_search.translation.ibm1:IBMModel1",
    "topics": "cqa_search.factorization.topics:TopicModel",
    "topic-interpolation": "cqa_search.factorization.topics:TopicInterpolation",
    "multiview": "cqa_search.factorization.multiview:MultiViewModel",
    "ranker": "cqa_search.ranking.linear:LinearRanker",
    "answers": "cqa_search.answers:AnswerSelector",
    "embeddings": "cqa_search.vectors.model:EmbeddingModel",
    "encoder": "cqa_search.vectors.encoded:EncoderModel",
}

#: What ``from_state`` raises on a malformed stored state (a forged count that overflows
#: an array's dtype in a computation: ArithmeticError).
STATE_ERRORS = (KeyError, TypeError, ValueError, IndexError, InvalidArray, ArithmeticError)


def model_class(kind) -> type:
    """The estimator class of a model kind (imported on first use).

    Raises
    ------
    KeyError
        Unknown kind.
    """
    cls = MODEL_KINDS[kind]
    return imported(cls) if isinstance(cls, str) else cls


def model_dir(name) -> str:
    """The directory of model ``name`` in a generation."""
    return f"models/{name}"


def write_model(writer, name, model, state=None, *, only=None) -> None:
    """Write a fitted model's files into the generation ``writer`` makes:
    ``models/<name>/model.json`` (kind, parameters, metadata, array names) and an ``.npy``
    per array of its ``state()`` (``state``: that state, when computed already; ``only``:
    the arrays written, the others being the same files as before, kept or linked by the
    caller)."""
    meta, arrays = model.state() if state is None else state
    prefix = model_dir(name)
    for key, arr in arrays.items():
        if only is None or key in only:
            writer.array(f"{prefix}/{key}.npy", arr)
    writer.json(f"{prefix}/model.json", {"kind": model.kind, "params": model.get_params(),
                                          "meta": meta, "arrays": list(arrays)})


def rows_dir(name, segment) -> str:
    """The directory of the rows of model ``name`` for the questions of ``segment``, added
    after the model was stored (a model that computes them when they are added)."""
    return f"{model_dir(name)}/rows/{segment}"


def load_models(stored) -> dict:
    """Every model of a generation: name -> fitted estimator.

    Raises
    ------
    IndexFormatError
        A model of an unknown kind, or one whose stored state is malformed.
    """
    return {name: load_model(stored, name) for name in stored.models}


def load_model(stored, name):
    """Model ``name`` of a generation, with the rows of the questions added since it was
    stored when it computes them then (its entry's ``runs``: see
    :func:`write_added_rows`).

    Raises
    ------
    IndexFormatError
        A model of an unknown kind, or one whose stored state is malformed.
    """
    entry = stored.models[name]
    try:
        cls = model_class(entry["kind"])
    except KeyError:
        raise IndexFormatError(f"{stored.path}: model {name!r} is of kind {entry['kind']!r}, "
                               f"which this cqa_search cannot read") from None
    stored_model = stored.model(name)
    try:
        arrays = stored_model.arrays()
        for run in entry.get("runs", ()):
            for key in run["arrays"]:
                arrays[key] = np.concatenate([arrays[key], stored.array(
                    f"{rows_dir(name, run['segment'])}/{key}.npy")])
        model = cls.from_state(stored_model.params, stored_model.meta, arrays)
        if hasattr(model, "_parameter_constraints"):  # what a fit would refuse
            validate_params(model)
        return model
    except STATE_ERRORS as exc:
        raise IndexFormatError(f"corrupted index {stored.path}: model {name!r} cannot be "
                               f"loaded ({exc}); "
                               f"{damage_advice(stored.path, entry['dir'] + '/')}") from None


def runs_entry(model) -> dict:
    """The part of a model's manifest entry that marks a model computing the rows of
    questions when they are added (``added_rows``): its ``runs``, none yet; ``{}`` for the
    others."""
    return {"runs": []} if hasattr(model, "added_rows") else {}


def growing_models(stored) -> dict:
    """The models of a generation that compute the rows of questions when they are added
    (those with ``runs``: :func:`runs_entry`), loaded: name -> model."""
    return {name: load_model(stored, name) for name, entry in stored.models.items()
            if "runs" in entry}


def added_rows(name, model, questions) -> dict:
    """The row arrays of model ``name`` for ``questions``, being added (its
    ``added_rows``).

    Raises
    ------
    ParameterError
        The model gave another number of rows than of questions.
    """
    arrays = model.added_rows(questions)
    for key, arr in arrays.items():
        if len(arr) != len(questions):
            raise ParameterError(f"model {name!r} gave {len(arr)} rows of {key} for "
                                 f"{len(questions)} added questions")
    return arrays


def write_added_rows(writer, name, model, segment, questions) -> dict:
    """Write the rows of model ``name`` for ``questions``, the new ``segment``'s
    (:func:`added_rows`), into the generation ``writer`` makes; returns the run to append
    to the ``runs`` of its manifest entry."""
    arrays = added_rows(name, model, questions)
    for key, arr in arrays.items():
        writer.array(f"{rows_dir(name, segment)}/{key}.npy", arr)
    return {"segment": segment, "arrays": list(arrays)}


def row_arrays(model) -> tuple:
    """The names of a model's state arrays with one row per question (none: ``()``)."""
    return tuple(getattr(model, "row_arrays", ()) or ())
