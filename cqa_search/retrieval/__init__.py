"""Term retrieval models (BM25, query likelihood, VSM) and top-k candidate selection."""
from __future__ import annotations

from .base import TermModel
from .bm25 import BM25
from .candidates import top_k
from .lm import LMDirichlet, LMJelinekMercer
from .vsm import VSM

__all__ = ["MODELS", "TermModel", "BM25", "LMJelinekMercer", "LMDirichlet", "VSM", "top_k",
           "make_model"]

#: Model name -> class.
MODELS = {cls.name: cls for cls in (BM25, LMJelinekMercer, LMDirichlet, VSM)}


def make_model(name: str, **params) -> TermModel:
    """A term model from its feature name: ``bm25``, ``lm-jm``, ``answers_bm25``, ...

    A ``<field>_`` prefix selects the field (default ``question``); dashes and
    underscores are interchangeable.

    Examples
    --------
    >>> make_model("lm-dir", mu=500)
    LMDirichlet(field='question', mu=500)
    >>> make_model("answers_bm25").field
    'answers'
    """
    key = name.strip().lower().replace("-", "_")
    field = params.pop("field", "question")
    if key not in MODELS:
        for model in MODELS:
            if key.endswith("_" + model):
                field, key = key[: -len(model) - 1], model
                break
    if key not in MODELS:
        names = ", ".join(n.replace("_", "-") for n in MODELS)
        raise ValueError(f"model must be one of {{{names}}} (optionally prefixed by a field, "
                         f"e.g. answers-bm25); got {name!r}")
    return MODELS[key](field=field, **params)
