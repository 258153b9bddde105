"""Best-answer selection: which answer of an archived question is shown with it.

The engine returns archived questions "with their best answer". Many archives mark none
(SemEval's Qatar Living threads are ten comments in posting order), so showing the first
answer shows a thank-you or a follow-up question as often as an answer.
:class:`AnswerSelector` scores every answer of every archived question *for that
question* and stores, per question, the index of the answer to show (``choice_``), so
showing it costs nothing at query time (:func:`chosen_answer`).

Features of a question ``q`` (its index terms, title and body) and one of its answers
``a`` (the answer re-analysed with the index's analyzer), with ``P(w|t)`` the IBM Model 1
table trained on the archive's own question-answer pairs (:mod:`cqa_search.translation`;
pooled, so one table serves both directions), ``P(w|C)`` the background model of the
index's ``answers`` field and ``lam`` the smoothing weight:

``translation``
    ``1/|q| sum_{w in q} log[(1 - lam) sum_{t in a} P(w|t) P_ml(t|a) + lam P(w|C)]``:
    how well the answer "translates" into the question (Jeon et al.'s word translation
    model, zhou2011 eqs. 3-4, with the answer as the document).
``translation_inverse``
    ``1/|a| sum_{t in a} log[(1 - lam) sum_{w in q} P(t|w) P_ml(w|q) + lam P(t|C)]``:
    how much of the answer the question explains (chit-chat and off-topic words get
    only their background probability).
``lm``
    ``1/|q| sum_{w in q} log[(1 - lam) P_ml(w|a) + lam P(w|C)]``: query likelihood of
    the question given the answer (Jelinek-Mercer).
``bm25``
    BM25 (lucene form, ``k1``, ``b``) of the question's terms in the answer, idf over the
    ``answers`` field.
``cosine``
    tf-idf cosine of the question and the answer (raw tf, BM25's idf).
``log_length``
    ``log(1 + |a|)`` in index terms.
``log_position``
    ``log(1 + k)`` for the answer at 0-based position ``k`` of the question's answers
    (posting order in forums, score order in StackExchange dumps).
``by_asker``
    1 when the answer's author is the question's author (``extra["answer_user_ids"]``
    and ``extra["user_id"]`` of the archived question, when the archive has them), else 0:
    in a forum thread the asker's own comments are thanks and follow-ups.
``question_mark``
    1 when the answer contains a question mark: it asks rather than answers.

The term scores are those of the retrieval models (:mod:`cqa_search.retrieval`) with the
answer as the document: :func:`~cqa_search.retrieval.lm.jm_log_prob` (``lm``, and the
translation features with translated counts), :func:`~cqa_search.retrieval.bm25.bm25_weight`
and :func:`~cqa_search.retrieval.vsm.tfidf_weight`.

The scores come from a :class:`~cqa_search.ranking.LinearRanker` over these features in
the query-grouped setup (one "query" per archived question, its answers the candidates):

- **supervised** (``fit(view, y)``): trained on labelled answers (e.g. SemEval's
  ``RELC_RELEVANCE2RELQ``: Good = 1) of the archive being fitted;
- **transferred** (``fit(view, ranker=trained.ranker_)``): a ranker trained on another,
  labelled archive applied to this one (the features are per-question normalised
  quantities, so they mean the same thing in any archive);
- **unsupervised** (the default, no labels): the ranker is the fixed prior
  :data:`UNSUPERVISED_WEIGHTS` (see its comment) over the same features.

Only the translation table is trained on the archive itself (never on labels), and only
when the ranker reads a translation feature (the unsupervised default does not, so it
fits in seconds). It is stored with the model so that :meth:`AnswerSelector.score_answers`
can score the answers of any question, also one added after the fit.
"""
from __future__ import annotations

import copy
import logging
import numbers
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from ._utils import RANDOM_STATE, InProcess, Interval, validate_params
from .exceptions import ArchiveError, NotFittedError
from .index.validate import check_array, check_count
from .ranking import LEARNERS, LinearRanker
from .retrieval.bm25 import bm25_idf, bm25_weight
from .retrieval.lm import jm_log_prob
from .retrieval.vsm import tfidf_weight
from .translation import IBMModel1, ParallelCorpus, textrank_filter
from .translation._arrays import csr_lookup, group, offsets_from_lengths, segment_ids

__all__ = ["AnswerSelector", "ChosenAnswer", "FEATURE_NAMES", "UNSUPERVISED_WEIGHTS",
           "answer_features", "chosen_answer", "labels_from_qrels"]

logger = logging.getLogger(__name__)

FEATURE_NAMES = ("translation", "translation_inverse", "lm", "bm25", "cosine", "log_length",
                 "log_position", "by_asker", "question_mark")
_TRANSLATION = ("translation", "translation_inverse")     # need the translation table

#: Weights of the unsupervised scorer over the features z-scored on the archive's answers.
#: No labels: a content score (the question's likelihood given the answer), longer
#: answers, and three priors of community QA: answers by the asker, answers that ask,
#: and later answers are less likely to answer. Unit weights, not fitted; this set is
#: the best on SemEval-2016 dev of the candidates in scripts/semeval2016_answers.py.
UNSUPERVISED_WEIGHTS = {"lm": 1.0, "log_length": 1.0, "by_asker": -1.0,
                        "question_mark": -1.0, "log_position": -1.0}

# Cells (answer term x question term) scored at once: bounds temporaries to ~200 MB.
_CHUNK_CELLS = 1 << 22


# ---------------------------------------------------------------------------------------
# Answers of an archive as flat term-id arrays
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Answers:
    """Every answer of some questions, analysed: flat term ids with offsets.

    ``row[j]`` is the question (index row, or position in a list of new questions) of
    answer ``j``, ``position[j]`` its index among that question's answers.
    """

    terms: np.ndarray          # int32, all answers' term ids one after the other
    offsets: np.ndarray        # int64, (n_answers + 1,)
    row: np.ndarray            # int64, (n_answers,)
    position: np.ndarray       # int64
    by_asker: np.ndarray       # float64 0/1
    question_mark: np.ndarray  # float64 0/1

    @property
    def n(self) -> int:
        return len(self.row)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def _analyse_answers(questions, rows, analyzer, vocab) -> _Answers:
    """Analyse the answers of ``questions`` (Question objects; ``rows`` their ids)."""
    terms, lengths, row, position, asker, qmark = [], [], [], [], [], []
    for r, question in zip(rows, questions):
        authors = question.extra.get("answer_user_ids") or ()
        user = question.extra.get("user_id")
        for k, text in enumerate(question.answers):
            t = analyzer.analyze(text)
            terms.extend(t)
            lengths.append(len(t))
            row.append(r)
            position.append(k)
            author = authors[k] if k < len(authors) else None
            asker.append(user is not None and author is not None and author == user)
            qmark.append("?" in text)
    ids = vocab.ids(terms) if terms else np.zeros(0, np.int32)
    keep = ids >= 0
    seg = np.repeat(np.arange(len(lengths)), lengths)
    kept = np.bincount(seg[keep], minlength=len(lengths)) if len(lengths) else np.zeros(0)
    return _Answers(ids[keep].astype(np.int32), offsets_from_lengths(kept),
                    np.asarray(row, dtype=np.int64), np.asarray(position, dtype=np.int64),
                    np.asarray(asker, dtype=np.float64), np.asarray(qmark, dtype=np.float64))


def _question_terms(view, rows):
    """Index terms (title and body, in text order) of archive rows: flat ids, offsets."""
    field = view.index["question"]
    starts = offsets_from_lengths(field.doc_len)
    rows = np.asarray(rows, dtype=np.int64)
    lo, hi = starts[rows], starts[rows + 1]
    lengths = hi - lo
    offsets = offsets_from_lengths(lengths)
    idx = np.repeat(lo - offsets[:-1], lengths) + np.arange(offsets[-1])
    return np.asarray(field.sequence, dtype=np.int64)[idx], offsets


def _bags(flat, offsets, n_terms):
    """Distinct terms of every sequence: (sequence, term, count), sorted by sequence,
    and the offsets of each sequence's block."""
    seq = segment_ids(offsets)
    keys, _, counts = group(seq * n_terms + np.asarray(flat, dtype=np.int64),
                            max(len(offsets) - 1, 1) * n_terms)
    which = keys // n_terms
    return which, keys % n_terms, counts.astype(np.float64), offsets_from_lengths(
        np.bincount(which, minlength=len(offsets) - 1))


# ---------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Background:
    """Archive statistics the features need: P(t|C), idf, average answer length."""

    prob: np.ndarray       # float64 (n_terms,), never 0
    idf: np.ndarray        # float64 (n_terms,)
    avg_length: float

    @classmethod
    def of(cls, view, avg_length):
        index = view.index
        field = index["answers"] if "answers" in index.fields else index["question"]
        stats = field.stats
        prob = np.asarray(stats.collection_prob, dtype=np.float64)
        # terms the answers never use count as half an occurrence (no log 0)
        prob = np.where(prob > 0, prob, 0.5 / max(stats.total_terms, 1))
        return cls(prob, bm25_idf("lucene", stats.df, stats.n_docs), float(avg_length))


def _features(answers: _Answers, q_flat, q_offsets, table, bg: _Background, *, lam, k1, b):
    """Feature matrix (answers.n, len(FEATURE_NAMES)) of answers against their questions.

    ``q_flat``/``q_offsets`` hold the question of every distinct ``answers.row`` value in
    the order of ``np.unique(answers.row)``. Without a ``table`` the translation columns
    are NaN.
    """
    n_table = 0 if table is None else table.shape[1]
    n_terms = max(n_table, len(bg.prob))
    if answers.n == 0:
        return np.zeros((0, len(FEATURE_NAMES)))
    qrows, q_of_answer = np.unique(answers.row, return_inverse=True)
    q_seq, q_term, q_tf, q_block = _bags(q_flat, q_offsets, n_terms)
    a_seq, a_term, a_tf, a_block = _bags(answers.terms, answers.offsets, n_terms)
    q_len = np.diff(q_offsets).astype(np.float64)
    a_len = answers.lengths.astype(np.float64)
    n_q = np.diff(q_block)[q_of_answer]          # distinct question terms of each answer's q
    n_a = np.diff(a_block)                       # distinct answer terms
    # cells: (answer j, its distinct term ta, its question's distinct term qw)
    cells_per_answer = n_q * n_a
    # per (answer, question term): sum_t c_t P(w|t) and tf(w, a)
    qa_offsets = offsets_from_lengths(n_q)
    s_fwd = np.zeros(int(qa_offsets[-1]))
    tf_qa = np.zeros(int(qa_offsets[-1]))
    # per (answer, answer term): sum_w qtf_w P(t|w)
    s_inv = np.zeros(len(a_term))
    bounds = _chunks(cells_per_answer, _CHUNK_CELLS)
    for j0, j1 in bounds:
        n_cells = cells_per_answer[j0:j1]
        total = int(n_cells.sum())
        if total == 0:
            continue
        j = np.repeat(np.arange(j0, j1), n_cells)
        local = np.arange(total) - np.repeat(offsets_from_lengths(n_cells)[:-1], n_cells)
        ta = local // n_q[j]
        qw = local % n_q[j]
        a_idx = a_block[j] + ta
        q_idx = q_block[q_of_answer[j]] + qw
        t, w = a_term[a_idx], q_term[q_idx]
        c_t, c_w = a_tf[a_idx], q_tf[q_idx]
        key = qa_offsets[j] + qw
        tf_qa += np.bincount(key, weights=c_t * (t == w), minlength=len(tf_qa))
        if table is None:
            continue
        known = (t < n_table) & (w < n_table)    # terms added after the fit: no table
        p_fwd = np.zeros(total)
        p_inv = np.zeros(total)
        p_fwd[known] = csr_lookup(table, t[known] + 1, w[known])      # P(w | t)
        p_inv[known] = csr_lookup(table, w[known] + 1, t[known])      # P(t | w)
        s_fwd += np.bincount(key, weights=c_t * p_fwd, minlength=len(s_fwd))
        s_inv += np.bincount(a_idx, weights=c_w * p_inv, minlength=len(s_inv))
    # per (answer, question term) arrays
    pair_answer = segment_ids(qa_offsets)
    pair_q = q_block[q_of_answer[pair_answer]] + (np.arange(len(pair_answer))
                                                  - qa_offsets[pair_answer])
    w, qtf = q_term[pair_q], q_tf[pair_q]
    n_answers = answers.n
    alen = np.maximum(a_len[pair_answer], 1.0)   # an empty answer: no division by 0
    qlen = np.maximum(q_len[q_of_answer], 1.0)
    p_c, idf = bg.prob[w], bg.idf[w]

    def per_answer(values):  # the sum over each answer's (answer, question term) pairs
        return np.bincount(pair_answer, values, n_answers)

    # The retrieval models' weights (cqa_search.retrieval), the answer as the document.
    q_norm = np.sqrt(np.bincount(q_seq, tfidf_weight(q_tf, bg.idf[q_term]) ** 2, len(qrows)))
    a_norm = np.sqrt(np.bincount(a_seq, tfidf_weight(a_tf, bg.idf[a_term]) ** 2, n_answers))
    denom = q_norm[q_of_answer] * a_norm
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(denom > 0, per_answer(tfidf_weight(qtf, idf)
                                                * tfidf_weight(tf_qa, idf)) / denom, 0.0)
    columns = {
        "lm": per_answer(qtf * jm_log_prob(tf_qa, alen, p_c, lam)) / qlen,
        "bm25": per_answer(qtf * bm25_weight(tf_qa, idf, a_len[pair_answer], bg.avg_length,
                                             k1=k1, b=b, method="lucene")),
        "cosine": cosine,
        "log_length": np.log1p(a_len),
        "log_position": np.log1p(answers.position),
        "by_asker": answers.by_asker,
        "question_mark": answers.question_mark,
    }
    if table is None:
        columns.update(dict.fromkeys(_TRANSLATION, np.full(n_answers, np.nan)))
    else:  # query likelihood with translated counts (P(w|t)-weighted) for tf
        columns["translation"] = per_answer(qtf * jm_log_prob(s_fwd, alen, p_c, lam)) / qlen
        # per distinct answer term, the question as the document
        q_len_a = np.maximum(q_len[q_of_answer[a_seq]], 1.0)
        inverse = a_tf * jm_log_prob(s_inv, q_len_a, bg.prob[a_term], lam)
        floor = np.log(lam * bg.prob.min())      # an empty answer: the least likely word
        columns["translation_inverse"] = np.where(
            a_len > 0, np.bincount(a_seq, inverse, n_answers) / np.maximum(a_len, 1.0), floor)
    return np.column_stack([columns[name] for name in FEATURE_NAMES])


def _chunks(sizes, limit):
    """Consecutive ranges ``(i0, i1)`` of items whose ``sizes`` add up to about ``limit``."""
    ends = np.cumsum(sizes)
    bounds = np.searchsorted(ends, np.arange(limit, ends[-1] if len(ends) else 0, limit),
                             side="right")
    bounds = np.unique(np.concatenate([[0], bounds, [len(sizes)]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def answer_features(view, model, rows=None):
    """Features of the answers of archive rows under a fitted :class:`AnswerSelector`.

    Parameters
    ----------
    view : IndexView
        The index the model was fitted on.
    model : AnswerSelector
        Fitted (its translation table and smoothing parameters are used).
    rows : array-like of int, optional
        Archive rows (default: all).

    Returns
    -------
    X : ndarray of shape (n_answers, len(FEATURE_NAMES))
        The translation columns are NaN when the model has no translation table.
    row : ndarray of int64, shape (n_answers,)
        The archive row of each answer.
    position : ndarray of int64, shape (n_answers,)
        Its index among the question's answers.
    """
    model._check_fitted()
    rows = np.arange(view.n_docs) if rows is None else np.asarray(rows, dtype=np.int64)
    answers = _analyse_answers((view.archive[int(r)] for r in rows), rows.tolist(),
                               view.analyzer, view.index.vocab)
    X = model._features_of(view, answers)
    return X, answers.row, answers.position


# ---------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------
def _labels_of(y, archive, answers: _Answers):
    """Per-answer labels (NaN: unlabelled) from ``{doc_id: labels}`` (or ``{doc_id:
    {answer key: relevance}}``, qrels) for the questions of ``y`` that ``archive`` holds,
    and those questions' ids (the others are another part's)."""
    if not isinstance(y, Mapping):
        raise ValueError(f"y must map question ids to the labels of their answers (a dict); "
                         f"got {type(y).__name__}")
    labels = np.full(answers.n, np.nan)
    starts = np.flatnonzero(np.r_[True, answers.row[1:] != answers.row[:-1]]) \
        if answers.n else np.zeros(0, np.int64)
    first = dict(zip(answers.row[starts].tolist(), starts.tolist()))
    found = []
    for doc_id, values in y.items():
        if doc_id not in archive:
            continue
        found.append(doc_id)
        row = archive.row(doc_id)
        question = archive[row]
        values = _question_labels(doc_id, question, values) if isinstance(values, Mapping) \
            else list(values)
        n = len(question.answers)
        if len(values) != n:
            raise ValueError(f"y gives {len(values)} labels for question {doc_id!r}, which "
                             f"has {n} answers")
        if n:
            labels[first[row]:first[row] + n] = [np.nan if v is None else float(v)
                                                 for v in values]
    return labels, found


def _question_labels(doc_id, question, judged) -> list:
    """A question's labels in answer order (None: not judged) from ``{answer key:
    relevance}`` (an answer's id, ``extra["answer_ids"]``, or its 0-based position)."""
    keys = list(question.extra.get("answer_ids") or ())
    if len(keys) != len(question.answers):
        keys = [str(k) for k in range(len(question.answers))]
    labels = [None] * len(keys)
    for key, relevance in judged.items():
        key = str(key)
        k = keys.index(key) if key in keys else (
            int(key) if key.isdigit() and int(key) < len(keys) else -1)
        if k < 0:
            raise ArchiveError(f"the labels name answer {key!r} of question {doc_id!r}, "
                               f"which has {len(keys)} answers"
                               + (f" ({', '.join(keys[:3])}, ...)" if keys else ""))
        labels[k] = relevance
    return labels


def labels_from_qrels(archive, qrels) -> dict:
    """The ``y`` of :meth:`AnswerSelector.fit` from qrels over answers.

    Parameters
    ----------
    archive : Archive
        The archive (e.g. ``engine.archive``).
    qrels : dict
        ``{question id: {answer key: relevance}}`` (e.g. read by
        :func:`~cqa_search.evaluation.read_qrels`); an answer key is the answer's id
        (``extra["answer_ids"]``, as SemEval's ``RELC_ID``) or its 0-based position.

    Returns
    -------
    dict
        ``{question id: [label or None, ...]}`` in answer order (None: not judged).

    Raises
    ------
    ArchiveError
        A question that is not in the archive, or an answer key it does not have.
    """
    y = {}
    for doc_id, judged in qrels.items():
        if doc_id not in archive:
            raise ArchiveError(f"the labels name question {doc_id!r}, which is not in the "
                               f"archive")
        y[doc_id] = _question_labels(doc_id, archive.get(doc_id), judged)
    return y


def _argmax_per_question(scores, rows, positions, n_rows):
    """Per row: the position of its best-scored answer (ties: the earlier one), -1 if none."""
    choice = np.full(n_rows, -1, dtype=np.int32)
    if len(scores) == 0:
        return choice
    order = np.lexsort((positions, -scores, rows))      # by row, best score, earliest
    first = np.r_[True, rows[order][1:] != rows[order][:-1]]
    choice[rows[order][first]] = positions[order][first]
    return choice


class _Part:
    """The answers of an index's rows, analysed, and the steps of a fit on them: the whole
    archive in this process, or one shard of a sharded index in a Ray actor on the shard
    (:class:`cqa_search.distributed.fitting.ShardParts`), which keeps its answers and their
    features between the steps; the driver holds the model's global part (the table, the
    ranker, the average length) and gets each part's choices.

    Parameters
    ----------
    view : IndexView
        The part's rows (with the whole index's vocabulary and statistics).
    start : int, default 0
        The part's first row in the whole index.
    """

    def __init__(self, view, start=0):
        self.view, self.start = view, start
        self.answers = _analyse_answers(view.archive, range(view.n_docs), view.analyzer,
                                        view.index.vocab)
        self.X = None

    def summary(self) -> tuple:
        """``(answers, their total length in index terms, the index's terms)``."""
        return self.answers.n, int(self.answers.lengths.sum()), len(self.view.index.vocab)

    def corpus(self, textrank):
        """The (question, answer) pairs of the part's answers, pooled both ways (a
        ParallelCorpus), or None when it has none."""
        answers, view = self.answers, self.view
        q_flat, q_off = _question_terms(view, answers.row)
        a_flat, a_off = answers.terms.astype(np.int64), answers.offsets
        if textrank:
            both = np.concatenate([q_flat, a_flat])
            offsets = np.concatenate([q_off, q_off[-1] + a_off[1:]])
            both, offsets = textrank_filter(both, offsets)
            n = answers.n
            q_flat, q_off = both[:offsets[n]], offsets[:n + 1]
            a_flat, a_off = both[offsets[n]:], offsets[n:] - offsets[n]
        corpus = ParallelCorpus(q_flat, q_off, a_flat, a_off, len(view.index.vocab))
        keep = (corpus.source_lengths > 0) & (corpus.target_lengths > 0)
        return corpus.select(keep).pooled() if keep.any() else None

    def features(self, model) -> None:
        """The features of the part's answers under ``model`` (its table, smoothing and
        average length), kept for the next steps."""
        self.X = model._features_of(self.view, self.answers)

    def moments(self, columns, mean=None) -> np.ndarray:
        """Sums of the features' ``columns`` over the part's answers, or with ``mean``
        their squared deviations from it: a z-score's statistics, summed over parts."""
        Z = self.X[:, columns]
        if mean is None:
            return Z.sum(axis=0)
        x = Z - mean
        return (x * x).sum(axis=0)

    def labelled(self, y, columns) -> tuple:
        """The labelled answers of the questions of ``y`` the part holds: ``(features
        columns, labels, question rows in the whole index, the ids found)``."""
        labels, found = _labels_of(y, self.view.archive, self.answers)
        known = ~np.isnan(labels)
        return (self.X[known][:, columns], labels[known],
                self.answers.row[known] + self.start, found)

    def choices(self, model) -> np.ndarray:
        """Per row of the part, the position of the answer ``model`` ranks first (-1:
        none); the features are dropped."""
        scores = model.decision_function(self.X)
        self.X = None
        return _argmax_per_question(scores, self.answers.row, self.answers.position,
                                    self.view.n_docs)


class AnswerSelector(BaseEstimator):
    """Choose the answer to show with every archived question (see the module docstring).

    Parameters
    ----------
    features : tuple of str or None, default None
        The features the ranker uses (None: all of :data:`FEATURE_NAMES`).
    lam : float, default 0.2
        Background weight of the translation and language-model features.
    k1 : float, default 1.2
        BM25's term-frequency saturation in the ``bm25`` feature.
    b : float, default 0.75
        BM25's length normalisation in the ``bm25`` feature.
    textrank : bool, default False
        TextRank-filter the question-answer pairs before training the translation table.
    max_iter : int, default 10
        EM iterations of IBM Model 1 (at most).
    tol : float or None, default 1e-3
        EM stops when the log-likelihood rises by less than this fraction.
    min_prob : float, default 1e-3
        Word translation probabilities below it are pruned.
    learner : {"powell", "coordinate-ascent", "ranksvm", "perceptron", "boosting", \
"lambdarank", "stacking"}, default "ranksvm"
        :class:`~cqa_search.ranking.LinearRanker` learner of the supervised ranker.
    learner_params : dict or None
        Its options (e.g. ``{"C": 0.1}``).
    normalize : {"zscore", "minmax"} or None, default "zscore"
        Feature normalisation of the ranker.
    unsupervised_weights : dict or None
        ``{feature: weight}`` of the unsupervised scorer over z-scored features (None:
        :data:`UNSUPERVISED_WEIGHTS`); used when fitting without labels or ranker.
    random_state : None or int, default 0
        Seeds the ranker (seeded by default: two fits give the same model).

    Attributes
    ----------
    ibm1_ : IBMModel1 or None
        The translation table trained on the archive's question-answer pairs (None when
        the ranker reads no translation feature).
    ranker_ : LinearRanker
        Scores answers from their features (``predict``); learned from labels, given, or
        the unsupervised prior.
    mode_ : {"unsupervised", "supervised", "transferred"}
    choice_ : ndarray of int32, shape (n_docs,)
        Per archive row, the index of the answer to show; -1 for a question without
        answers.
    avg_answer_length_ : float
        Mean answer length in index terms (BM25's avgdl).
    n_answers_ : int
    train_score_ : float or None
        Training MAP of the ranker (supervised).

    Examples
    --------
    >>> import os, tempfile
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> qs = [Question("a", "how to renew my visa", answers=(
    ...           "thanks, any idea?", "go to the immigration office to renew the visa")),
    ...       Question("b", "visa renewal fee", answers=("the immigration office fee is 500",)),
    ...       Question("c", "cheap sofa", answers=("try the furniture souq",))]
    >>> path = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, path)
    >>> engine = SearchEngine.open(path)
    >>> model = AnswerSelector(tol=None, max_iter=3).fit(engine.view)
    >>> model.choice_.tolist()
    [1, 0, 0]
    """

    kind = "answers"
    #: The state arrays with one row per question (see :mod:`cqa_search.index.models`).
    row_arrays = ("choice",)
    _parameter_constraints = {
        "lam": Interval(0, 1, closed="right"),
        "k1": Interval(0, None, closed="neither"),
        "b": Interval(0, 1),
        "textrank": (False, True),
        "max_iter": Interval(1, None, kind=numbers.Integral),
        "tol": [(None,), Interval(0, None)],
        "min_prob": Interval(0, 1, closed="left"),
        "learner": tuple(LEARNERS),
        "normalize": ("zscore", "minmax", None),
        "random_state": RANDOM_STATE,
    }

    def __init__(self, *, features=None, lam=0.2, k1=1.2, b=0.75, textrank=False,
                 max_iter=10, tol=1e-3, min_prob=1e-3, learner="ranksvm",
                 learner_params=None, normalize="zscore", unsupervised_weights=None,
                 random_state=0):
        self.features = features
        self.lam = lam
        self.k1 = k1
        self.b = b
        self.textrank = textrank
        self.max_iter = max_iter
        self.tol = tol
        self.min_prob = min_prob
        self.learner = learner
        self.learner_params = learner_params
        self.normalize = normalize
        self.unsupervised_weights = unsupervised_weights
        self.random_state = random_state

    def _validate(self):
        validate_params(self)
        if self.features is not None:
            names = tuple(self.features)
            unknown = [f for f in names if f not in FEATURE_NAMES]
            if not names or unknown or len(set(names)) != len(names):
                raise ValueError(f"features must be None or distinct names among "
                                 f"{{{', '.join(map(repr, FEATURE_NAMES))}}}; got "
                                 f"{self.features!r}")
        weights = self.unsupervised_weights
        if weights is not None and (
                not isinstance(weights, dict) or not weights
                or any(f not in FEATURE_NAMES for f in weights)
                or not all(isinstance(w, numbers.Real) and np.isfinite(w)
                           for w in weights.values())):
            raise ValueError(f"unsupervised_weights must be None or a non-empty dict of "
                             f"finite weights of features among "
                             f"{{{', '.join(map(repr, FEATURE_NAMES))}}}; got {weights!r}")

    @property
    def feature_names(self) -> tuple:
        """The features the ranker reads, in its column order."""
        return FEATURE_NAMES if self.features is None else tuple(self.features)

    # -- fitting -----------------------------------------------------------------------
    def fit(self, X, y=None, *, ranker=None, translation=None, progress=False):
        """Train the translation table, the ranker, and choose every question's answer.

        Parameters
        ----------
        X : IndexView or ShardedSource
            The index (e.g. ``SearchEngine.open(path).view``), or a sharded index's shards
            where they are (:class:`cqa_search.distributed.fitting.ShardedSource`): each
            shard's answers analysed, scored and chosen by a Ray actor on the shard, this
            process holding the table, the ranker and the choices (4 bytes per question).
        y : dict, optional
            ``{doc_id: labels}``: the labels of a question's answers, in their order
            (>= 1: a good answer, 0: not, None: unknown), or ``{doc_id: {answer key:
            relevance}}`` (qrels; a key as in :func:`labels_from_qrels`). Given, the
            ranker is learned from them (supervised).
        ranker : LinearRanker, optional
            A fitted ranker over :data:`FEATURE_NAMES` columns (e.g. ``ranker_`` of a
            selector trained on a labelled archive) to apply here; exclusive with ``y``.
        translation : IBMModel1 or TranslationModel, optional
            A fitted translation table of this index to use instead of training one
            (e.g. the index's stored translation model).
        progress : bool, default False
            Progress bars on stderr.

        Returns
        -------
        self
        """
        self._validate()
        if y is not None and ranker is not None:
            raise ValueError("give labels y (supervised) or a fitted ranker, not both")
        if y is not None and not isinstance(y, Mapping):
            raise ValueError(f"y must map question ids to the labels of their answers (a "
                             f"dict); got {type(y).__name__}")
        t0 = time.perf_counter()
        # the archive in parts: the whole of it here, or a sharded index's shards where
        # they are (each holding its answers and features; the driver the global part)
        make = getattr(X, "fit_parts", None)
        with (make(_Part) if make is not None else InProcess(_Part(X))) as parts:
            self._fit_parts(parts, X, y, ranker, translation, progress, t0)
        return self

    def _fit_parts(self, parts, X, y, ranker, translation, progress, t0):
        summaries = parts.map("summary")
        t_analysis = time.perf_counter()
        self.n_answers_ = sum(n for n, _, _ in summaries)
        # (integer lengths: their float sum is exact, as the in-process mean's)
        self.avg_answer_length_ = sum(total for _, total, _ in summaries) / self.n_answers_ \
            if self.n_answers_ else 0.0
        if not self.n_answers_:  # asked for with every family (build-index --models ...)
            warnings.warn("the archive has no answers: the answers model has none to "
                          "choose", UserWarning, stacklevel=3)
        if ranker is not None:
            used = [str(f) for f in ranker.feature_names_in_]
        else:
            used = self.feature_names if y is not None else list(self._unsupervised_weights())
        n_terms = max(n for _, _, n in summaries)
        if translation is not None:
            ibm1 = getattr(translation, "ibm1_", translation)
            if not hasattr(ibm1, "translation_probs_"):
                raise ValueError("translation must be a fitted IBMModel1 or TranslationModel")
            if ibm1.n_terms_ > n_terms:
                raise ValueError(f"the translation table has {ibm1.n_terms_} terms; the index "
                                 f"has {n_terms}")
            # a table fitted before `cqa-search add` grew the vocabulary: the new terms
            # translate to themselves
            self.ibm1_ = ibm1.extended(n_terms)
        elif any(f in _TRANSLATION for f in used):
            self.ibm1_ = self._train_translation(parts, progress)
        else:
            self.ibm1_ = None
        t1 = time.perf_counter()
        parts.map("features", self)
        t2 = time.perf_counter()
        self.train_score_ = None
        if y is not None:
            got = parts.map("labelled", y, self._columns())
            found = {doc_id for *_, ids in got for doc_id in ids}
            missing = [doc_id for doc_id in y if doc_id not in found]
            if missing:
                raise ArchiveError(f"the labels name question {missing[0]!r}, which is not "
                                   "in the archive")
            labels = np.concatenate([g[1] for g in got])
            if not len(labels):
                raise ValueError("y labels none of the archive's answers")
            self.ranker_ = LinearRanker(
                self.learner, params=self.learner_params, normalize=self.normalize,
                random_state=self.random_state).fit(
                    np.concatenate([g[0] for g in got]), labels,
                    qid=np.concatenate([g[2] for g in got]),
                    feature_names=list(self.feature_names))
            self.train_score_ = float(self.ranker_.train_score_)
            self.mode_ = "supervised"
        elif ranker is not None:
            missing = [f for f in ranker.feature_names_in_ if f not in FEATURE_NAMES]
            if missing:
                raise ValueError(f"the ranker reads features an AnswerSelector does not "
                                 f"compute: {', '.join(missing)}")
            self.ranker_ = ranker
            self.mode_ = "transferred"
        else:
            self.ranker_ = self._unsupervised_ranker(parts)
            self.mode_ = "unsupervised"
        self.choice_ = np.concatenate(parts.map("choices", self)).astype(np.int32)
        self.seconds_ = {"analysis": t_analysis - t0, "translation": t1 - t_analysis,
                         "features": t2 - t1, "ranking": time.perf_counter() - t2}

    def _columns(self, names=None):
        names = self.feature_names if names is None else names
        return [FEATURE_NAMES.index(f) for f in names]

    def _train_translation(self, parts, progress_bar):
        """IBM Model 1 on the archive's (question, answer) pairs, pooled both ways (each
        part's pairs where the part is: :meth:`_Part.corpus`)."""
        corpus = parts.parallel_corpus("corpus", self.textrank)
        if corpus is None:
            raise ValueError("no question-answer pairs to train the translation table on: "
                             "the archive has no (non-empty) answers")
        logger.info("answer selection: IBM Model 1 on %d pooled pairs", corpus.n_pairs)
        return IBMModel1(max_iter=self.max_iter, tol=self.tol,
                         min_prob=self.min_prob).fit(corpus, progress_bar=progress_bar)

    def _features_of(self, view, answers: _Answers) -> np.ndarray:
        """Features of analysed answers of archive rows (chunked over questions)."""
        q_flat, q_off = _question_terms(view, np.unique(answers.row))
        return self._features_against(view, answers, q_flat, q_off)

    def _features_against(self, view, answers, q_flat, q_offsets):
        # An index may grow after the fit (new terms get new ids at the end); a smaller
        # vocabulary is another index.
        table = None if self.ibm1_ is None else self.ibm1_.translation_probs_
        if table is not None and len(view.index.vocab) < self.ibm1_.n_terms_:
            raise ValueError(f"this answer selector was fitted on a vocabulary of "
                             f"{self.ibm1_.n_terms_} terms; the index has "
                             f"{len(view.index.vocab)}")
        bg = _Background.of(view, self.avg_answer_length_)
        return _features(answers, q_flat, q_offsets, table, bg, lam=self.lam, k1=self.k1,
                         b=self.b)

    def _unsupervised_weights(self) -> dict:
        """The unsupervised weights of the features the selector may use (non-zero)."""
        weights = UNSUPERVISED_WEIGHTS if self.unsupervised_weights is None \
            else self.unsupervised_weights
        used = {f: float(w) for f, w in weights.items() if f in self.feature_names and w}
        if not used:
            raise ValueError(f"the unsupervised scorer needs one of the features "
                             f"{sorted(weights)}; got features={self.features!r}")
        return used

    def _unsupervised_ranker(self, parts):
        """The unsupervised weights as a LinearRanker over this archive's z-scored
        features (no labels), their means and deviations summed over the parts."""
        used = self._unsupervised_weights()
        names = list(used)
        columns = self._columns(names)
        n = self.n_answers_
        if n:
            mean = np.sum(parts.map("moments", columns), axis=0) / n
            scale = np.sqrt(np.sum(parts.map("moments", columns, mean), axis=0) / n)
        else:
            mean, scale = np.zeros(len(names)), np.ones(len(names))
        meta = {"feature_names": names, "n_iter": 0, "loss_curve": [], "init_score": None,
                "train_score": float("nan"), "validation_scores": None,
                "learner_info": {"unsupervised": used}}
        arrays = {"coef": np.array(list(used.values())), "intercept": np.zeros(1),
                  "norm_offset": mean, "norm_scale": np.where(scale > 0, scale, 1.0),
                  "step_feature": np.zeros(0, np.int64), "step_threshold": np.zeros(0),
                  "step_coef": np.zeros(0)}
        return LinearRanker.from_state(LinearRanker(normalize="zscore").get_params(), meta,
                                       arrays)

    def decision_function(self, X) -> np.ndarray:
        """Scores of answers from their features (higher: better).

        Parameters
        ----------
        X : ndarray of shape (n_answers, len(FEATURE_NAMES))
            From :func:`answer_features` (all columns, whatever ``features`` is).

        Returns
        -------
        ndarray of float64, shape (n_answers,)
        """
        if not hasattr(self, "ranker_"):
            raise NotFittedError("this AnswerSelector is not fitted yet; call fit first")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(FEATURE_NAMES):
            raise ValueError(f"X must have shape (n_answers, {len(FEATURE_NAMES)}); got "
                             f"{X.shape}")
        names = [str(f) for f in self.ranker_.feature_names_in_]
        return np.asarray(self.ranker_.predict(X[:, self._columns(names)]), dtype=np.float64)

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit``."""
        self._check_fitted()
        choice = self.choice_
        weights = dict(zip(self.ranker_.feature_names_in_, np.round(self.ranker_.coef_, 3)))
        lines = [f"mode         {self.mode_}; features "
                 f"{', '.join(map(str, self.ranker_.feature_names_in_))}",
                 f"questions    {int((choice >= 0).sum()):,} with answers "
                 f"({int((choice > 0).sum()):,} show an answer other than the first; an "
                 "answer the archive marks as best is shown instead)",
                 f"answers      {self.n_answers_:,} scored"]
        if self.train_score_ is not None:
            lines.append(f"training MAP {100 * self.train_score_:.2f}")
        lines.append("weights      " + ", ".join(f"{k} {v:+g}" for k, v in weights.items()
                                                if v))
        lines.append("time         " + ", ".join(f"{k} {v:.1f} s"
                                                for k, v in self.seconds_.items()))
        return "\n".join(lines)

    def _check_fitted(self):
        if not hasattr(self, "choice_"):
            raise NotFittedError("this AnswerSelector is not fitted yet; call fit first")

    # -- applying ----------------------------------------------------------------------
    def score_answers(self, view, question) -> np.ndarray:
        """Scores of a question's answers (higher: better), in answer order.

        Parameters
        ----------
        view : IndexView
            The index the model was fitted on (its vocabulary and statistics).
        question : Question or int
            An archived row, or any question (e.g. one added after the fit); its
            answers are scored for its own title and body.
        """
        self._check_fitted()
        if isinstance(question, (int, np.integer)):
            q = view.archive[int(question)]
            answers = _analyse_answers([q], [int(question)], view.analyzer, view.index.vocab)
            X = self._features_of(view, answers)
        else:
            answers = _analyse_answers([question], [0], view.analyzer, view.index.vocab)
            q_terms = view.analyzer.analyze(question.text)
            ids = view.index.vocab.ids(q_terms) if q_terms else np.zeros(0, np.int32)
            ids = ids[ids >= 0].astype(np.int64)
            X = self._features_against(view, answers, ids, np.array([0, len(ids)]))
        return self.decision_function(X)

    def select(self, view, question) -> int:
        """Index of the answer to show for ``question`` (a row or a Question); -1 if none."""
        scores = self.score_answers(view, question)
        return int(np.argmax(scores)) if len(scores) else -1

    def choice_of(self, view, row) -> int:
        """Position of the answer chosen for archive row ``row`` of ``view``: the stored
        choice, or computed for a question the fit did not see; -1 without answers."""
        self._check_fitted()
        row = int(row)
        n_answers = len(view.archive[row].answers)
        if n_answers == 0:
            return -1
        stored = int(self.choice_[row]) if len(self.choice_) == view.n_docs else -1
        return stored if 0 <= stored < n_answers else self.select(view, row)

    def select_rows(self, view, rows) -> "AnswerSelector":
        """A copy whose choices are those of ``rows`` of ``view``, in that order (questions
        added since the fit chosen first): what a compaction stores."""
        self._check_fitted()
        n_fit = len(self.choice_)
        extra = [self.select(view, row) for row in range(n_fit, view.n_docs)]
        choice = np.concatenate([np.asarray(self.choice_), np.array(extra, dtype=np.int32)])
        model = copy.copy(self)
        model.choice_ = choice[np.asarray(rows)].astype(np.int32)
        return model

    # -- storage contract (cqa_search.features) -----------------------------------------
    def state(self):
        """``(meta, arrays)``: the choices, the translation table and the ranker."""
        self._check_fitted()
        ibm1_meta, ibm1_arrays = (None, {}) if self.ibm1_ is None else self.ibm1_.state()
        ranker_meta, ranker_arrays = self.ranker_.state()
        meta = {"mode": self.mode_, "n_answers": self.n_answers_,
                "avg_answer_length": self.avg_answer_length_,
                "train_score": self.train_score_, "ibm1": ibm1_meta,
                "ibm1_params": None if self.ibm1_ is None else self.ibm1_.get_params(),
                "ranker": ranker_meta,
                "ranker_params": self.ranker_.get_params(),
                "seconds": getattr(self, "seconds_", {})}
        arrays = {"choice": self.choice_}
        arrays.update({f"ibm1_{k}": v for k, v in ibm1_arrays.items()})
        arrays.update({f"ranker_{k}": v for k, v in ranker_arrays.items()})
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The fitted model stored by :meth:`state`."""
        model = cls(**params)
        model.ibm1_ = None if meta["ibm1"] is None else IBMModel1.from_state(
            meta["ibm1_params"], meta["ibm1"],
            {k[5:]: v for k, v in arrays.items() if k.startswith("ibm1_")})
        model.ranker_ = LinearRanker.from_state(
            meta["ranker_params"], meta["ranker"],
            {k[7:]: v for k, v in arrays.items() if k.startswith("ranker_")})
        model.choice_ = check_array(arrays["choice"], "answer choices", kind="i", low=-1)
        model.mode_ = str(meta["mode"])
        model.n_answers_ = check_count(meta["n_answers"], "answer selector n_answers")
        model.avg_answer_length_ = float(meta["avg_answer_length"])
        model.train_score_ = meta.get("train_score")
        model.seconds_ = dict(meta.get("seconds", {}))
        return model


# ---------------------------------------------------------------------------------------
# The answer shown with a hit
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChosenAnswer:
    """The answer shown with an archived question.

    Attributes
    ----------
    index : int
        Its position among the question's answers.
    text : str
    source : {"marked", "model", "first"}
        The archive marks it as best; the answer selector chose it; or it is simply the
        first answer (no mark, no selector).
    """

    index: int
    text: str
    source: str


def chosen_answer(engine, row, model=None, *, name="answers"):
    """The answer to show with archive row ``row`` of an opened engine, or None.

    An answer the archive marks as best wins; otherwise the answer the selector chose
    (``model``, or the engine's stored model ``name``): read from its stored choices, or
    computed when the index has changed since the fit (a question added later);
    otherwise the first answer.

    Parameters
    ----------
    engine : SearchEngine
    row : int
    model : AnswerSelector, optional
        Default: ``engine.models[name]`` when the index has one.
    name : str, default "answers"

    Returns
    -------
    ChosenAnswer or None
        None for a question without answers.
    """
    question = engine.archive[int(row)]
    if not question.answers:
        return None
    if question.best_answer is not None:
        return ChosenAnswer(question.best_answer, question.best_answer_text, "marked")
    if model is not None:
        index = model.choice_of(engine.view, row)
    elif name in engine.models:  # the back-end's (a sharded index: the shard's choices)
        index = engine.searcher.answer_choice(name, row)
    else:
        return ChosenAnswer(0, question.answers[0], "first")
    return ChosenAnswer(index, question.answers[index], "model")

