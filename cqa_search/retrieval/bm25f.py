"""BM25F: BM25 over several weighted fields with one saturation (Robertson, Zaragoza & Taylor
2004; Zaragoza et al. 2004; Lucene's ``combined_fields`` query is the same model).

A question has parts ``f`` (title, body and, optionally, its answers), each with a weight
``w_f`` and a length normalisation ``b_f``. The count of a term ``t`` in a document ``d`` is
the weighted sum over the parts of their normalised counts, and one saturation ``k1``
applies to that sum::

    tf~(t, d) = sum_f w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avglen_f)

    w(t, d)   = idf(t) * tf~(t, d) / (k1 + tf~(t, d))
    idf(t)    = log(1 + (N - df + 0.5) / (df + 0.5))          (Lucene's: never negative)

and ``score(q, d) = sum_t qtf_t * w(t, d)``. ``df`` counts the documents holding ``t`` in any
weighted part (:func:`~cqa_search.index.term_index.combine_fields`: exact for the title and
the body, the question field's; with the answers, the larger of the question's and the
answers' df, as Lucene does). Saturating once, rather than per field as a sum of BM25
scores would, keeps a term repeated in the body from outweighing the same term once in a
short title: the title's weight counts each of its occurrences ``w_title`` times.

The scores are sums of positive posting weights over the postings of a
:class:`~cqa_search.index.term_index.CombinedField` (the question field's own postings for
the title and the body), so the compiled top-k kernel, the candidates' filters and the
hybrid first stage serve BM25F as they serve BM25.

References
----------
S. Robertson, H. Zaragoza, M. Taylor. Simple BM25 extension to multiple weighted fields.
CIKM 2004.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .._utils import Interval, validate_params
from ..exceptions import ParameterError
from ..index.term_index import PARTS, combine_fields, part_fields
from .base import TermModel
from .bm25 import BM25, bm25_idf

__all__ = ["BM25F", "DEFAULT_WEIGHTS", "parse_field_weights"]

#: The weights of an index's search without a ranker when the index has titles
#: (``SearchConfig(retrieval="auto")``): chosen without a ranker on the training queries no
#: benchmark scores, among those that keep a question's own title finding it first
#: (BENCHMARKS.md, "Safe defaults").
DEFAULT_WEIGHTS = {"title": 5.0}


def parse_field_weights(text) -> dict:
    """The weights of :class:`BM25F` from a ``title=2,body=1,answers=0.5`` option (the
    command line's ``--field-weights``): parts among title, body and answers, each once,
    weights numbers >= 0, at least one above 0; a part not listed weighs 0 (is not
    searched).

    Raises
    ------
    ParameterError

    Examples
    --------
    >>> parse_field_weights("title=3, body=1")
    {'title': 3.0, 'body': 1.0, 'answers': 0.0}
    """
    weights = {}
    for item in filter(None, (p.strip() for p in str(text).split(","))):
        part, sep, value = (s.strip() for s in item.partition("="))
        try:
            weight = float(value) if sep else math.nan
        except ValueError:
            weight = math.nan
        if part not in PARTS or part in weights or not 0 <= weight < math.inf:
            raise ParameterError(f"field weights are part=weight, parts among "
                                 f"{{{', '.join(PARTS)}}} (each once), weights numbers >= 0, "
                                 f"e.g. title=2,body=1,answers=0.5; got {text!r}")
        weights[part] = weight
    if not any(weights.values()):
        raise ParameterError(f"at least one field weight must be above 0 (e.g. "
                             f"title=2,body=1,answers=0.5); got {text!r}")
    return {p: weights.get(p, 0.0) for p in PARTS}


class BM25F(TermModel):
    """BM25F ranking function over the title, the body and the answers of questions.

    Needs an index with a ``title`` field (``cqa-search build-index`` indexes the titles by
    default; the body is the question field less the title). Its ``field`` is
    ``"question"`` (or ``"answers"`` when only the answers weigh): what it matches.

    Parameters
    ----------
    title, body, answers : float, default 2.0, 1.0, 0.0
        Weight of each part (0: not searched; at least one positive).
    k1 : float, default 1.2
        Saturation of the combined term frequency.
    b_title, b_body, b_answers : float, default 0.75
        Length normalisation of each part, in [0, 1].

    Examples
    --------
    >>> BM25F(answers=0.5).parts
    ('title', 'body', 'answers')
    >>> BM25F(title=1, body=0).index_fields
    ('title',)
    """

    name = "bm25f"
    _parameter_constraints = {
        **dict.fromkeys(PARTS, Interval(0, None)),
        "k1": Interval(0, None, closed="neither"),
        **dict.fromkeys((f"b_{p}" for p in PARTS), Interval(0, 1)),
    }

    # (no ``field`` parameter: the fields are the weights'; TermModel.__init__ not called)
    def __init__(self, *, title=2.0, body=1.0, answers=0.0, k1=1.2, b_title=0.75,
                 b_body=0.75, b_answers=0.75):
        self.title = title
        self.body = body
        self.answers = answers
        self.k1 = k1
        self.b_title = b_title
        self.b_body = b_body
        self.b_answers = b_answers

    @property
    def parts(self) -> tuple:
        """The parts of positive weight, in :data:`~cqa_search.index.term_index.PARTS`
        order."""
        return tuple(p for p in PARTS if _positive(getattr(self, p)))

    @property
    def field(self) -> str:
        return "answers" if self.parts == ("answers",) else "question"

    @property
    def index_fields(self) -> tuple:
        return part_fields(self.parts)

    def cache_key(self) -> str:
        if "_cache_key" not in self.__dict__:
            validate_params(self)
            weights = [getattr(self, p) for p in PARTS]
            if not all(map(math.isfinite, weights)) or not self.parts:
                raise ParameterError(f"the weights {', '.join(PARTS)} must be finite and at "
                                     f"least one above 0; got {', '.join(map(repr, weights))}")
        return super().cache_key()

    def field_index(self, index):
        return combine_fields(index, self.parts)

    def on_field(self, field):
        """The answers alone when they weigh nothing here (the engine's search of the
        answers when no question holds the words): BM25 with this ``k1`` and ``b_answers``,
        which equals BM25F of the answers alone; None for any other field."""
        if field != "answers" or "answers" in self.parts:
            return None
        return BM25(field="answers", k1=self.k1, b=self.b_answers)

    def _weight(self, field, tf, rows, terms):
        stats = field.stats
        scale = self._scales(field)
        tf = np.asarray(tf, dtype=np.float64)  # (postings, parts)
        norm = (1.0 - scale[1]) + scale[1] * (field.part_len[rows] / scale[2])
        # (a part of length 0 with b = 1 has norm 0, and no occurrence there)
        combined = np.divide(tf * scale[0], norm, out=np.zeros_like(tf), where=tf > 0)
        combined = combined.sum(axis=1)
        return bm25_idf("lucene", stats.df[terms], stats.n_docs) * combined / (self.k1 + combined)

    def _scales(self, field):
        """(weights, b, average lengths) of ``field``'s parts, as float64 arrays."""
        return (np.array([float(getattr(self, p)) for p in field.parts]),
                np.array([float(getattr(self, f"b_{p}")) for p in field.parts]),
                np.maximum(np.asarray(field.part_avg_len, dtype=np.float64), 1e-12))


def _positive(weight) -> bool:
    return isinstance(weight, numbers.Real) and not isinstance(weight, bool) and weight > 0
