"""A trained :class:`~cqa_search.ranking.linear.LinearRanker` written for other search
engines: as JSON (everything: the weights of the normalised features, the normalisation,
and both folded into one weight per raw feature), or in RankLib's linear model format,
which the learning-to-rank plugins of Elasticsearch and OpenSearch load (``model/ranklib``).

A ranker scores a candidate with raw feature values ``x`` as::

    score = sum_j coef_j * (x_j - offset_j) / scale_j + intercept      (+ threshold terms)
          = sum_j (coef_j / scale_j) * x_j + (intercept - sum_j coef_j * offset_j / scale_j)

the second line being the *folded* weights and intercept. RankLib's file holds the folded
weights of features ``1..n`` in the order of the ranker's feature names (its header lists
them: the feature set of the other engine must compute them in that order); RankLib's
linear format has no intercept, which changes no order (it is written as a comment).
A ranker that normalises per query (``normalize="query"``) or has threshold terms
(boosting) has no folded form: only JSON states it. Every number written is finite (JSON
has no infinity): a ranker whose weights or normalisation overflow once folded (a damaged
one) is refused.
"""
from __future__ import annotations

import json
import math

import numpy as np

from ..exceptions import ParameterError

__all__ = ["export_ranker", "folded_weights", "FORMATS"]

FORMATS = ("json", "ranklib")


def folded_weights(ranker) -> tuple:
    """``(weights, intercept)`` over the raw features (the normalisation folded in).

    Raises
    ------
    ParameterError
        The ranker normalises per query or has threshold terms.
    """
    if ranker.normalize == "query":
        raise ParameterError("this ranker min-max scales the features among each query's "
                             "candidates: its weights cannot be folded into one linear "
                             "function of the raw features (export it as json, which states "
                             "the normalisation)")
    if len(ranker.step_coef_):
        raise ParameterError(f"this ranker ({ranker.learner}) has {len(ranker.step_coef_)} "
                             "threshold terms, which a linear model cannot hold (export it "
                             "as json)")
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # see _finite
        weights = ranker.coef_ / ranker.norm_scale_
        intercept = float(ranker.intercept_ - np.dot(weights, ranker.norm_offset_))
    return weights, intercept


def _finite(named) -> None:
    """Refuse to export a number that is not finite (``named``: ``(what, value)`` pairs).

    Raises
    ------
    ParameterError
        Naming the first such number.
    """
    for what, value in named:
        if value is not None and not math.isfinite(value):
            raise ParameterError(f"the ranker cannot be exported: {what} is {value} (its "
                                 "weights or normalisation hold extreme values: a damaged "
                                 "ranker; train it again)")


def _json(ranker, context) -> str:
    names = [str(f) for f in ranker.feature_names_in_]
    try:
        weights, intercept = folded_weights(ranker)
    except ParameterError:
        weights, intercept = None, None
    with np.errstate(over="ignore", invalid="ignore"):  # see _finite
        steps = [{"feature": names[int(f)], "threshold": float(ranker.norm_offset_[int(f)]
                                                               + t * ranker.norm_scale_[int(f)]),
                  "weight": float(w)}
                 for f, t, w in zip(ranker.step_feature_, ranker.step_threshold_,
                                    ranker.step_coef_)]
    doc = {
        "format": "cqa_search linear ranker", "version": 1, **context,
        "learner": ranker.learner, "normalize": ranker.normalize,
        "score": ("sum over features of weight * (value - offset) / scale, plus intercept"
                  + (", plus each step's weight when value > its threshold" if steps else "")
                  + ("; with normalize 'query', offset and scale are the minimum and range "
                     "of the value among the query's candidates" if ranker.normalize == "query"
                     else "; equal to the sum of folded_weight * value, plus "
                          "folded_intercept")),
        "features": [{"name": n, "weight": float(c)}
                     | ({} if ranker.normalize == "query" else
                        {"offset": float(o), "scale": float(s)})
                     | ({} if weights is None else {"folded_weight": float(w)})
                     for n, c, o, s, w in zip(names, ranker.coef_, ranker.norm_offset_,
                                              ranker.norm_scale_,
                                              weights if weights is not None
                                              else [None] * len(names))],
        "intercept": float(ranker.intercept_),
        "folded_intercept": intercept,
        "steps": steps,
    }
    _finite([(f"the {key.replace('_', ' ')} of feature {f['name']!r}", value)
             for f in doc["features"] for key, value in f.items() if key != "name"]
            + [(f"the threshold of a step on feature {step['feature']!r}", step["threshold"])
               for step in steps] + [("the folded intercept", intercept)])
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _ranklib(ranker, context) -> str:
    weights, intercept = folded_weights(ranker)
    names = [str(f) for f in ranker.feature_names_in_]
    _finite([*((f"the folded weight of feature {n!r}", float(w)) for n, w in zip(names, weights)),
             ("the folded intercept", intercept)])
    lines = ["## Coordinate Ascent",  # RankLib's header of a linear model (what LTR reads)
             f"## cqa_search LinearRanker ({ranker.learner}; normalize={ranker.normalize}, "
             "folded into the weights)",
             *(f"## {key} = {value}" for key, value in context.items()),
             "## features: " + " ".join(f"{i}={n}" for i, n in enumerate(names, 1)),
             f"## intercept = {intercept!r} (not part of RankLib's linear model: it changes "
             "no order)",
             " ".join(f"{i}:{float(w)!r}" for i, w in enumerate(weights, 1))]
    return "\n".join(lines) + "\n"


def export_ranker(ranker, format="json", **context) -> str:
    """The text of ``ranker`` in ``format`` (``"json"`` or ``"ranklib"``); ``context``
    (e.g. the retrieval model it reranks) is written with it.

    Examples
    --------
    >>> from cqa_search.ranking import LinearRanker
    >>> X = np.array([[1.0, 10.0], [0.0, 30.0], [2.0, 20.0], [1.0, 0.0]])
    >>> r = LinearRanker("ranksvm", random_state=0).fit(X, [1, 0, 1, 0], qid=[0, 0, 1, 1],
    ...                                                  feature_names=["bm25", "log_length"])
    >>> print(export_ranker(r, "ranklib").splitlines()[0])
    ## Coordinate Ascent
    >>> w, b = folded_weights(r)
    >>> np.allclose(X @ w + b, r.predict(X))
    True
    """
    if format not in FORMATS:
        raise ParameterError(f"format must be one of {{'json', 'ranklib'}}; got {format!r}")
    return (_json if format == "json" else _ranklib)(ranker, context)
