"""The first stage of a search: the candidates the ranker reorders (the hits, without one).

Two first stages:

* **term**: the retrieval model's best ``n`` (BM25 by default); it finds only the
  questions that share a word with the query;
* **hybrid** (when the index has word vectors, :mod:`cqa_search.vectors`): the best ``n``
  of the whole archive by ::

      s(q, d) = (1 - a) * T(q, d) / max_d' T(q, d') + a * cos(q, d)

  (``T``: the retrieval model's score, ``cos``: the cosine of the query's and the
  question's SIF vectors), found by :func:`hybrid_candidates`: the union of the term
  model's and the vectors' top lists of depth ``m = depth * n``, merged by
  :func:`~cqa_search.retrieval.hybrid.merge`; while the merge cannot prove its top ``n`` to
  be the whole archive's (:attr:`~cqa_search.retrieval.hybrid.Merged.exact`), the lists are
  deepened (``m`` doubled, up to ``max_depth * n``: the lists are read once at that depth
  and cut at each ``m``).

The stage asks its back-end four narrow questions, each about the rows the query may
return (live, in the category, passing the query-syntax filters)::

    term_top(m)        -> rows, scores    the retrieval model's best m (every match: m None)
    dense_top(m)       -> rows, cosines   the question vectors' best m
    term_scores(rows)  -> scores          the retrieval model's scores of given rows
    cosines(rows)      -> cosines         the cosines of given rows

so a back-end that holds the rows elsewhere (shards) answers each by asking the holders and
merging. ``a`` is chosen by ``cqa-search train`` (:data:`WEIGHT_GRID`, by the training
queries' recall of the candidates) and stored with the ranker
(``LinearRanker.hybrid_weight_``); without one the engine uses :data:`DEFAULT_WEIGHT`.

What the stage ran for a query is a :class:`CandidateContext` (the term model, its best
score over the rows the query may return, ``a``, the merged candidates; for candidates
given with scores, a rerank, their scores and ranks): the engine hands it to the feature
scorers that read it. The first stage's score is such a feature column
(:class:`FirstStageFeature`, ``first_stage``: the baseline that ``train``'s
cross-validation compares a ranker with), and both of its parts are shown by
``--explain`` (:class:`StageParts`, :meth:`CandidateContext.parts`).
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from .candidates import _sums_of_weights
from .hybrid import Merged, hybrid_scores, merge  # noqa: F401 (Merged: the stage's result)

__all__ = ["DEFAULT_WEIGHT", "ENCODER_WEIGHT", "WEIGHT_GRID", "DEPTH", "MAX_DEPTH",
           "hybrid_capable", "check_weight", "weight_of_text", "hybrid_candidates",
           "CandidateContext", "StageParts", "FirstStageFeature"]

#: ``a`` of an engine without a ranker that stores one: small, so that the word vectors
#: add the questions that share no word with the query without reordering the term
#: model's best matches (a question's own title keeps finding it). With the default
#: retrieval model (:data:`~cqa_search.retrieval.bm25f.DEFAULT_WEIGHTS`): the largest ``a``
#: tried whose first stage finds each archived question by its own title first for >= 97 %
#: of the questions and in the top 3 for >= 99.5 % on every archive measured (0.03 and
#: 0.05 do not on one meta site), and is never significantly below BM25 on any collection;
#: 0.05 gave 0.8 MAP more on SemEval-2016 train-part2's queries
#: (``scripts/full_retrieval.py --safe-defaults``; BENCHMARKS.md, "Safe defaults").
DEFAULT_WEIGHT = 0.02
#: ``a`` without a ranker when the dense list is a pretrained sentence encoder's (its
#: ``EncoderScorer.default_weight``): the largest ``a`` of :data:`WEIGHT_GRID` whose first
#: stage is not below BM25 on either of those training sets (``scripts/full_retrieval.py
#: --default-weight --encoder-model DIR``) and finds the archives' own titles as the word
#: vectors' default does (0.7 left cstheory.meta at 99.49 % in the top 3): the encoder is
#: a strong signal of its own.
ENCODER_WEIGHT = 0.6
#: The values of ``a`` that ``cqa-search train`` chooses from.
WEIGHT_GRID = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Depth of the two top lists, in candidates: lists of ``2n`` for ``n`` candidates.
DEPTH = 2
#: The deepest lists (in candidates) the stage reads before it takes the merge as it is.
MAX_DEPTH = 16


def hybrid_capable(model) -> bool:
    """Whether a term model's scores can be the term part of the hybrid score: sums of
    non-negative posting weights (BM25, tf-idf cosine), so that ``T / max T`` is in
    [0, 1]; query likelihood (a log-probability) is not."""
    return _sums_of_weights(model)


def check_weight(a, what="the hybrid weight a") -> float | None:
    """``a`` as a float in [0, 1] (None stays None).

    Raises
    ------
    ValueError
    """
    if a is None:
        return None
    if isinstance(a, bool) or not isinstance(a, numbers.Real) or not 0 <= a <= 1:
        raise ValueError(f"{what} must be a number in [0, 1]; got {a!r}")
    return float(a)


def weight_of_text(text) -> float | str | None:
    """The first stage as a person writes it (``--hybrid``): ``"auto"``, ``"none"`` (or
    ``"off"``: None) or a number in [0, 1] (a float): what :class:`SearchConfig`'s
    ``hybrid`` takes.

    Raises
    ------
    ValueError

    Examples
    --------
    >>> weight_of_text("0.3"), weight_of_text("None"), weight_of_text(" auto")
    (0.3, None, 'auto')
    """
    low = text.strip().lower()
    if low == "auto":
        return "auto"
    if low in ("none", "off"):
        return None
    try:
        return check_weight(float(low))
    except ValueError:
        raise ValueError(f"expected auto, none or a number in [0, 1]; got {text!r}") from None


def hybrid_candidates(n, *, a, term_top, dense_top, term_scores, cosines, depth=DEPTH,
                      max_depth=MAX_DEPTH, fill=None, tie_rank=None) -> Merged:
    """The best ``n`` rows by the hybrid score, from the term and dense top lists.

    Parameters
    ----------
    n : int or None
        How many (None: every row matching a query term, and the vectors' best
        ``max(that many, fill)``).
    a : float in (0, 1]
        Weight of the cosine.
    term_top, dense_top, term_scores, cosines : callable
        The back-end's primitives (see the module docstring).
    depth : int, default 2
        Depth of each list, in ``n``.
    max_depth : int, default 16
        The lists are doubled while the merged top ``n`` is not provably the whole
        archive's, up to this depth (in ``n``): the back-end is asked for lists of this
        depth, which each merge cuts.
    fill : int, optional
        With ``n`` None: the least depth of the dense list.
    tie_rank : ndarray of int or callable, optional
        Secondary sort key of equal scores, per row, or ``tie_rank(rows) -> keys``
        (:func:`~cqa_search.retrieval.hybrid.merge`).

    Returns
    -------
    Merged
        Sorted by (-score, tie rank); ``exact`` says whether the rows are provably the
        whole archive's best.
    """
    if n is None:
        t = term_top(None)
        m = max(len(t[0]), fill or 1)
        d = dense_top(m)
        return merge(t[0], t[1], d[0], d[1], None, a=a, term_of=term_scores,
                     dense_of=cosines, term_complete=True, dense_complete=len(d[0]) < m,
                     tie_rank=tie_rank)
    # The lists are read once, at the deepest, and cut at each depth merged: a term list
    # of 16n costs the compiled kernel less than twice one of 2n (it reads every posting
    # either way), and at a million questions most queries need more than 2n
    # (BENCHMARKS.md, "The hybrid first stage at a million questions"). The rows' missing
    # parts are computed once for all the merges.
    m = max(1, depth * n)
    deepest = max(m, max_depth * n)
    t, d = term_top(deepest), dense_top(deepest)
    term_scores, cosines = _Memo(term_scores), _Memo(cosines)
    while True:
        out = merge(t[0][:m], t[1][:m], d[0][:m], d[1][:m], n, a=a, term_of=term_scores,
                    dense_of=cosines, term_complete=len(t[0]) < m,
                    dense_complete=len(d[0]) < m, tie_rank=tie_rank)
        if out.exact or m >= deepest:
            return out
        m = min(2 * m, deepest)


class _Memo:
    """``of(rows) -> values`` computed once per row (rows asked for in increasing order)."""

    def __init__(self, of):
        self.of, self.rows, self.values = of, np.zeros(0, np.int64), np.zeros(0)

    def __call__(self, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.rows, rows), max(len(self.rows) - 1, 0))
        have = self.rows[pos] == rows if len(self.rows) else np.zeros(len(rows), bool)
        out = np.empty(len(rows))
        out[have] = self.values[pos[have]]
        if not have.all():
            new = rows[~have]
            out[~have] = values = np.asarray(self.of(new), dtype=np.float64)
            order = np.argsort(np.concatenate((self.rows, new)), kind="stable")
            self.rows = np.concatenate((self.rows, new))[order]
            self.values = np.concatenate((self.values, values))[order]
        return out


@dataclass(frozen=True)
class StageParts:
    """Both parts of the first-stage score of some hits (what ``--explain`` shows).

    Attributes
    ----------
    a : float
        Weight of the cosine.
    term_model : str
        Feature name of the retrieval model (``bm25``).
    term_max : float
        Its best score over the rows the query could return (the normaliser).
    term : ndarray of float64
        Its score of each hit.
    cosine : ndarray of float64
        The cosine of each hit's SIF vector with the query's.
    exact : bool
        The stage's candidates are provably the best of the whole archive
        (:attr:`~cqa_search.retrieval.hybrid.Merged.exact`).
    """

    a: float
    term_model: str
    term_max: float
    term: np.ndarray
    cosine: np.ndarray
    exact: bool = True

    @property
    def scores(self) -> np.ndarray:
        """``(1 - a) * term / term_max + a * cosine``."""
        return hybrid_scores(self.term, self.cosine, self.a, self.term_max)

    def take(self, index) -> "StageParts":
        """The parts of the hits at ``index`` (an index array)."""
        return StageParts(self.a, self.term_model, self.term_max, self.term[index],
                          self.cosine[index], self.exact)

    def hit(self, i) -> dict:
        """Hit ``i``'s parts: ``score``, ``a``, ``term_model``, ``term``, ``term_max``,
        ``cosine``, ``term_part`` and ``cosine_part`` (the two terms of the sum)."""
        term_part = (1 - self.a) * self.term[i] / self.term_max if self.term_max > 0 else 0.0
        cosine_part = self.a * self.cosine[i]
        return {"score": float(term_part + cosine_part), "a": self.a,
                "term_model": self.term_model, "term": float(self.term[i]),
                "term_max": self.term_max, "cosine": float(self.cosine[i]),
                "term_part": float(term_part), "cosine_part": float(cosine_part)}


@dataclass(frozen=True)
class CandidateContext:
    """What a query's first stage ran, for the feature scorers that read it: made with
    the candidates, handed with their rows to the back-end's scorers
    (:class:`FirstStageFeature`, the given-run features of
    :class:`~cqa_search.features.ContextFeatures`), never kept on the query.

    A first stage gives its ``term_model``, ``term_max``, ``a`` and (hybrid) ``merged``;
    candidates given with scores (a rerank) give ``given`` and ``given_ranks``, and the
    engine adds the stage's basis (the retrieval model's best score over the live rows,
    its ``a``) when a scorer needs it. An input the stage comes to combine (another
    score in the hybrid sum, another term model) is another field here.

    Attributes
    ----------
    term_model : TermModel or None
        The retrieval model that scored the candidates (None: no first stage ran).
    term_max : float
        Its best score over the rows the query may return (the term part's normaliser;
        0: no such row holds a query term).
    a : float
        Weight of the word-vector cosine in the stage's score (0: the term model alone).
    merged : Merged or None
        The hybrid stage's candidates with both parts of their scores.
    given : mapping of int to float or None
        ``{row: score}`` of candidates given with scores, in their given order.
    given_ranks : mapping of int to int or None
        ``{row: rank}`` of the same, 1 for the best score (equal scores in their given
        order): ranks over all the given candidates, whichever rows a scorer sees.
    """

    term_model: object = None
    term_max: float = 0.0
    a: float = 0.0
    merged: Merged | None = None
    given: Mapping | None = None
    given_ranks: Mapping | None = None

    @classmethod
    def of_given(cls, rows, scores) -> "CandidateContext":
        """The context of candidates ``rows`` given with ``scores`` (a rerank)."""
        given = dict(zip(np.asarray(rows).tolist(), map(float, scores)))
        ordered = sorted(given, key=lambda r: -given[r])  # stable: ties in given order
        return cls(given=given, given_ranks={r: i + 1 for i, r in enumerate(ordered)})

    def with_basis(self, model, term_max, a) -> "CandidateContext":
        """This context with the first-stage basis of candidates no stage found: the
        retrieval ``model``, its best score ``term_max``, the weight ``a``."""
        return replace(self, term_model=model, term_max=float(term_max), a=float(a))

    def parts(self) -> StageParts | None:
        """Both parts of the hybrid stage's candidates' scores (None: no hybrid stage)."""
        merged = self.merged
        if merged is None:
            return None
        return StageParts(self.a, self.term_model.feature_name, merged.term_max,
                          merged.term_scores, merged.dense_scores, merged.exact)

    def local(self, rows, start) -> "CandidateContext":
        """This context for a back-end that holds ``rows`` of the whole index as its rows
        ``rows - start`` (a shard): the merged and given candidates among ``rows``, in
        its rows (ranks stay those over every given candidate)."""
        merged, given, ranks = self.merged, self.given, self.given_ranks
        if merged is not None:
            mine = np.isin(merged.rows, rows)  # in the order of the candidates
            merged = replace(merged, rows=merged.rows[mine] - start,
                             scores=merged.scores[mine], term_scores=merged.term_scores[mine],
                             dense_scores=merged.dense_scores[mine])
        if given:
            held = set(np.asarray(rows).tolist())
            given = {r - start: v for r, v in given.items() if r in held}
            ranks = {r - start: v for r, v in ranks.items() if r in held}
        return replace(self, merged=merged, given=given, given_ranks=ranks)


class FirstStageFeature:
    """The first stage's score of candidates as a feature column, ``first_stage``:
    ``(1 - a) * T / max T + a * cos`` with the engine's ``a`` (0 when its first stage is
    the term model alone: the normalised term score). Made by a back-end whose index has
    word vectors; ``train`` compares its rankers with this column's order.

    ``T``, ``max T`` and ``a`` are the query's :class:`CandidateContext`'s: those its first
    stage ran with or, for candidates that did not come from one (a rerank of given
    candidates), the retrieval model's best score over the live rows and the engine's
    ``a`` (over the whole index: a shard's back-end has only its rows).

    Parameters
    ----------
    index : TermIndex
    dense : EmbeddingScorer
        Gives ``cosines(query, rows)``.
    """

    names = ("first_stage",)
    reads_context = True

    def __init__(self, index, dense):
        self.index, self.dense = index, dense

    def score(self, query, rows, context) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        merged, model, a = context.merged, context.term_model, context.a
        if merged is not None and np.array_equal(merged.rows, rows):
            return merged.scores[:, None]  # the stage's candidates: their scores
        term = model.score_rows(model.field_index(self.index), query.term_ids, query.qtf, rows)
        cosine = self.dense.cosines(query, rows) if a > 0 else np.zeros(len(rows))
        return hybrid_scores(term, cosine, a, context.term_max)[:, None]
