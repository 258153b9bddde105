"""Learned rankers: one weight vector over the engine's named feature scores.

:class:`LinearRanker` learns it with one of the learners of the reranking papers
(``powell``, ``coordinate-ascent``, ``ranksvm``, ``perceptron``, ``boosting``,
``lambdarank``, ``stacking``); stored in an index under the name ``"ranker"``
(:func:`cqa_search.index.models.add_model`), it orders the engine's candidates.
"""
from .linear import LEARNERS, LinearRanker, cross_val_predict, cross_validate

__all__ = ["LinearRanker", "LEARNERS", "cross_validate", "cross_val_predict"]

