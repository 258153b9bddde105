"""Term retrieval models (BM25, BM25F, query likelihood, VSM) and top-k candidate selection."""
from __future__ import annotations

import inspect

from ..exceptions import ParameterError
from .base import TermModel
from .bm25 import BM25
from .bm25f import BM25F, parse_field_weights
from .candidates import top_k
from .lm import LMDirichlet, LMJelinekMercer
from .vsm import VSM

__all__ = ["MODELS", "TermModel", "BM25", "BM25F", "LMJelinekMercer", "LMDirichlet", "VSM",
           "top_k", "make_model", "parse_model", "parse_field_weights"]

#: Model name -> class.
MODELS = {cls.name: cls for cls in (BM25, BM25F, LMJelinekMercer, LMDirichlet, VSM)}


def make_model(name: str, **params) -> TermModel:
    """A term model from its feature name: ``bm25``, ``lm-jm``, ``answers_bm25``, ...

    A ``<field>_`` prefix selects the field (default ``question``) of a one-field model;
    dashes and underscores are interchangeable. BM25F weighs its fields itself
    (``title=``, ``body=``, ``answers=``).

    Examples
    --------
    >>> make_model("lm-dir", mu=500)
    LMDirichlet(field='question', mu=500)
    >>> make_model("answers_bm25").field
    'answers'
    >>> make_model("bm25f", title=3.0).title
    3.0
    """
    key = name.strip().lower().replace("-", "_")
    field = params.pop("field", None)
    if key not in MODELS:
        # the longest name first: answers_bm25f is no field "answers_" of bm25
        for model in sorted(MODELS, key=len, reverse=True):
            if key.endswith("_" + model):
                field, key = key[: -len(model) - 1], model
                break
    if key not in MODELS:
        names = ", ".join(n.replace("_", "-") for n in MODELS)
        raise ParameterError(f"model must be one of {{{names}}} (optionally prefixed by a field, "
                         f"e.g. answers-bm25); got {name!r}")
    cls = MODELS[key]
    if "field" in inspect.signature(cls).parameters:
        params["field"] = "question" if field is None else field
    elif field is not None:
        raise ParameterError(f"{key} weighs its fields itself (e.g. {key}:title=2,body=1,"
                             f"answers=0.5) and takes no field; got field {field!r}")
    model = cls(**params)
    model.cache_key()  # checks the parameters now: they come from the user
    return model


def parse_model(spec: str) -> TermModel:
    """A term model from ``NAME`` or ``NAME:param=value,param=value`` (command-line form).

    Examples
    --------
    >>> parse_model("bm25:k1=1.5,b=0.6,method=robertson")
    BM25(field='question', k1=1.5, b=0.6, method='robertson')
    """
    name, _, params = spec.partition(":")
    kwargs = {}
    for item in filter(None, (p.strip() for p in params.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ParameterError(f"model parameters are key=value; got {item!r} in {spec!r}")
        for convert in (int, float):
            try:
                value = convert(value)
                break
            except ValueError:
                continue
        else:
            value = {"true": True, "false": False}.get(value.lower(), value)
        kwargs[key.strip()] = value
    try:
        return make_model(name, **kwargs)
    except TypeError as exc:  # unknown parameter name
        raise ParameterError(f"bad parameters for model {name!r}: {exc}") from None
