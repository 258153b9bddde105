"""A stored model's files in a generation: its kind's class, its state written and read
back.

A model is stored as ``models/<name>/model.json`` (kind, parameters, metadata, array
names) and an ``.npy`` per array of its ``state()`` (:func:`write_model`), and read back
by its kind's ``from_state`` (:func:`load_models`). What a stored model implements (a
model with a row per question names the arrays that hold them: :func:`row_arrays`), and
the families trained from an index, are :mod:`cqa_search.index.models`; where its rows
go when an index changes is its write back-end's (:mod:`cqa_search.index.writer`).
"""
from __future__ import annotations

from .._utils import imported, validate_params
from ..exceptions import IndexFormatError
from .store import damage_advice
from .validate import InvalidArray

__all__ = ["MODEL_KINDS", "STATE_ERRORS", "model_class", "model_dir", "write_model",
           "load_models", "row_arrays"]

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


def load_models(stored) -> dict:
    """Every model of a generation: name -> fitted estimator.

    Raises
    ------
    IndexFormatError
        A model of an unknown kind, or one whose stored state is malformed.
    """
    models = {}
    for name, entry in stored.models.items():
        try:
            cls = model_class(entry["kind"])
        except KeyError:
            raise IndexFormatError(f"{stored.path}: model {name!r} is of kind {entry['kind']!r}, "
                                   f"which this cqa_search cannot read") from None
        stored_model = stored.model(name)
        try:
            model = cls.from_state(stored_model.params, stored_model.meta, stored_model.arrays())
            if hasattr(model, "_parameter_constraints"):  # what a fit would refuse
                validate_params(model)
            models[name] = model
        except STATE_ERRORS as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: model {name!r} cannot be "
                                   f"loaded ({exc}); "
                                   f"{damage_advice(stored.path, entry['dir'] + '/')}") from None
    return models


def row_arrays(model) -> tuple:
    """The names of a model's state arrays with one row per question (none: ``()``)."""
    return tuple(getattr(model, "row_arrays", ()) or ())
