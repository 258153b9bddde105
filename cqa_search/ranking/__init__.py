"""Learned rankers: one weight vector over the engine's named feature scores.

:class:`LinearRanker` learns it with one of the learners of the reranking papers
(``powell``, ``coordinate-ascent``, ``ranksvm``, ``perceptron``, ``boosting``,
``lambdarank``, ``stacking``); stored in an index under the name ``"ranker"``
(:func:`cqa_search.index.models.add_model`), it orders the engine's candidates.
:class:`LinearRankerCV` chooses its regularisation and features by query-grouped
cross-validation, and whether it beats the retrieval order at all.
"""
from .linear import LEARNERS, LinearRanker, cross_val_predict, cross_validate
from .selection import LinearRankerCV, NoImprovementWarning

__all__ = ["LinearRanker", "LinearRankerCV", "NoImprovementWarning", "LEARNERS",
           "cross_validate", "cross_val_predict"]

