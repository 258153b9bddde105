"""The stored translation model: corpus -> IBM Model 1 -> phrase table, and its features.

:class:`TranslationModel` (kind ``"translation"``) bundles everything the translation
features need, so a single ``cqa-search fit INDEX translation`` (or
``TranslationModel().fit(engine.view)`` + :func:`cqa_search.index.models.add_model`)
produces them all:

1. the parallel corpus of the index's archive (:func:`.corpus.build_parallel_corpus`:
   question-answer pairs, pooling, TextRank);
2. IBM Model 1 by EM (:class:`.ibm1.IBMModel1`);
3. the phrase table from the Viterbi alignments (:class:`.phrases.PhraseTable`);

and gives the features ``wt``, ``translm``, ``ptrans_pt``, ``ptrans_ipt``, ``ptrans_lw``,
``ptrans_ilw``, ``ptrans_pa``, ``ptrans_uwp`` (:mod:`.scoring`).
"""
from __future__ import annotations

import copy
import functools
import logging
import numbers
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator

from .._utils import FEATURE_PREFIX, Interval, prefixed, progress_bar, validate_params
from ..exceptions import NotFittedError
from .corpus import ANSWER_PAIRS, build_parallel_corpus
from .ibm1 import IBMModel1
from .phrases import PhraseTable
from .scoring import FEATURE_NAMES, TranslationScorer

__all__ = ["TranslationModel", "TrainingSummary"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingSummary:
    """What a fit of :class:`TranslationModel` did (printed by ``cqa-search fit``)."""

    corpus: dict
    n_terms: int
    log_likelihood: list
    n_iter: int
    ibm1_entries: int
    cooccurrences: int
    translations_per_word: float
    cooccurrences_per_word: float
    phrase_pairs: int
    phrases: int
    phrase_occurrences: int
    nbytes: dict
    seconds: dict = field(default_factory=dict)

    def __str__(self):
        c = self.corpus
        kinds = [f"{c['n_qa_pairs']:,} question-answer"]
        if c["n_title_body_pairs"]:
            kinds.append(f"{c['n_title_body_pairs']:,} title-body")
        if c["n_duplicate_pairs"]:
            kinds.append(f"{c['n_duplicate_pairs']:,} duplicate")
        if c.get("n_similar_pairs"):
            kinds.append(f"{c['n_similar_pairs']:,} similar-question")
        n_tok = c["tokens_after_textrank"]
        lines = [
            f"pairs        {c['n_pairs']:,} ({', '.join(kinds)}"
            + (", pooled both ways" if c["pooled"] else "") + ")"
            + (f"; {c['n_dropped_empty']:,} empty pairs dropped" if c["n_dropped_empty"] else ""),
            f"vocabulary   {self.n_terms:,} terms",
            "textrank     " + (f"kept {n_tok:,} of {c['tokens_before_textrank']:,} words "
                               f"({100 * n_tok / max(c['tokens_before_textrank'], 1):.0f}%)"
                               if c["textrank"] else "off"),
            f"EM           {self.n_iter} iterations, log-likelihood "
            + " -> ".join(f"{v:.4g}" for v in self.log_likelihood),
            f"word table   {self.ibm1_entries:,} entries (of {self.cooccurrences:,} "
            f"co-occurrences); {self.translations_per_word:.1f} translations per word "
            f"({self.cooccurrences_per_word:.1f} before pruning)",
            f"phrase table {self.phrase_pairs:,} bi-phrases over {self.phrases:,} phrases "
            f"({self.phrase_occurrences:,} extracted)",
            f"memory       {sum(self.nbytes.values()) / 2**20:.1f} MiB of arrays",
            "time         " + ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items()),
        ]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _per_word(ibm1) -> tuple:
    """Mean number of translations per seen source word, after and before pruning."""
    m = ibm1.translation_probs_
    counts = np.diff(m.indptr)[1:]
    seen = m.shape[0] - 1 - ibm1.n_identity_rows_
    after = (counts.sum() - ibm1.n_identity_rows_) / max(seen, 1)
    before = (ibm1.n_cooccurrences_ - int(m.indptr[1] - m.indptr[0])) / max(seen, 1)
    return float(after), float(before)


class TranslationModel(BaseEstimator):
    """Word and phrase translation models learned from an index's archive.

    Parameters
    ----------
    answers : {"all", "best"} or None, default "all"
        Question-answer pairs: every answer, best answers only, or none.
    title_body : bool, default False
        Also (title, body) pairs.
    duplicates : bool, default False
        Also (question, duplicated question) pairs.
    similar_questions : int or None, default None
        Also pairs of questions whose answers are alike (Jeon et al. 2005), each question
        with up to this many (:func:`.corpus.similar_question_pairs`).
    min_similarity : float, default 0.5
        The least tf-idf cosine of their answers for two questions to pair.
    pooling : bool, default True
        Train on (q, a) and (a, q) pairs together (§3.3.1).
    textrank : bool, default True
        TextRank-filter every document first (§3.3.2).
    window : int, default 3
        TextRank co-occurrence window (in index terms, stopwords already removed).
    damping : float, default 0.85
        TextRank damping factor.
    max_iter : int, default 10
        EM iterations of IBM Model 1 (at most).
    tol : float or None, default 1e-3
        EM stops when the log-likelihood rises by less than this fraction.
    min_prob : float, default 1e-3
        Word translation probabilities below it are pruned (rows renormalised).
    max_phrase_length : int, default 5
        Longest phrase (the paper's l).
    unaligned_edges : bool, default True
        Och's phrase extraction in full: unaligned words may sit at the edges of a
        bi-phrase. False keeps only *tight* bi-phrases (edge words aligned), in training
        and scoring: a table several times smaller and faster scoring.
    lam : float, default 0.2
        Weight of the background collection model (lambda of eqs. 1, 3, 5; also the
        weight of a background word in the P-Trans DP).
    beta : float, default 0.8
        Weight of the translation part in TransLM (eq. 6).
    question_weight : float, default 0.8
        mu1 of eq. 15 (mu2 = 1 - mu1 weighs the answer part).
    segmentation : {"sum", "max"}, default "sum"
        Sum over phrase segmentations (eq. 13) or keep the best one.
    feature_prefix : str or None, default None
        Prefix of its features' names (None: wt, translm, ptrans_*; "dup": dup_wt,
        dup_translm, ...): a second translation model of one index (e.g. one learned from
        duplicate pairs) needs one.

    Attributes
    ----------
    ibm1_ : IBMModel1
    phrase_table_ : PhraseTable
    summary_ : TrainingSummary

    Examples
    --------
    >>> import os, tempfile
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> from cqa_search.index.models import add_model
    >>> qs = [Question("a", "renew visa", answers=("go to immigration office",)),
    ...       Question("b", "visa renewal fee", answers=("immigration office takes the fee",)),
    ...       Question("c", "cheap sofa", answers=("try the furniture souq",))]
    >>> path = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, path)
    >>> model = TranslationModel(textrank=False, tol=None, max_iter=3).fit(
    ...     SearchEngine.open(path).view)
    >>> _ = add_model(path, "translation", model)
    >>> res = SearchEngine.open(path).search("immigration office", k=2)
    >>> "ptrans_pt" in res.feature_names
    True
    """

    kind = "translation"
    _parameter_constraints = {
        "answers": ANSWER_PAIRS,
        "title_body": (False, True),
        "duplicates": (False, True),
        "similar_questions": [(None,), Interval(1, None, kind=numbers.Integral)],
        "min_similarity": Interval(0, 1),
        "pooling": (False, True),
        "textrank": (False, True),
        "window": Interval(2, None, kind=numbers.Integral),
        "damping": Interval(0, 1, closed="neither"),
        "max_iter": Interval(1, None, kind=numbers.Integral),
        "tol": [(None,), Interval(0, None)],
        "min_prob": Interval(0, 1, closed="left"),
        "max_phrase_length": Interval(1, 8, kind=numbers.Integral),
        "unaligned_edges": (False, True),
        "lam": Interval(0, 1, closed="right"),
        "beta": Interval(0, 1),
        "question_weight": Interval(0, 1),
        "segmentation": ("sum", "max"),
        "feature_prefix": FEATURE_PREFIX,
    }

    def __init__(self, *, answers="all", title_body=False, duplicates=False,
                 similar_questions=None, min_similarity=0.5, pooling=True, textrank=True,
                 window=3, damping=0.85, max_iter=10, tol=1e-3, min_prob=1e-3,
                 max_phrase_length=5, unaligned_edges=True, lam=0.2, beta=0.8,
                 question_weight=0.8, segmentation="sum", feature_prefix=None):
        self.answers = answers
        self.title_body = title_body
        self.duplicates = duplicates
        self.similar_questions = similar_questions
        self.min_similarity = min_similarity
        self.pooling = pooling
        self.textrank = textrank
        self.window = window
        self.damping = damping
        self.max_iter = max_iter
        self.tol = tol
        self.min_prob = min_prob
        self.max_phrase_length = max_phrase_length
        self.unaligned_edges = unaligned_edges
        self.lam = lam
        self.beta = beta
        self.question_weight = question_weight
        self.segmentation = segmentation
        self.feature_prefix = feature_prefix

    def _ibm1(self):
        return IBMModel1(max_iter=self.max_iter, tol=self.tol, min_prob=self.min_prob)

    def _phrases(self):
        return PhraseTable(max_length=self.max_phrase_length,
                           unaligned_edges=self.unaligned_edges)

    def fit(self, X, y=None, *, progress=False):
        """Build the parallel corpus of an index and train the word and phrase models.

        Parameters
        ----------
        X : IndexView
            The index (e.g. ``SearchEngine.open(path).view``), or what has a
            ``parallel_corpus(**params)`` (a sharded index's shards building theirs:
            :class:`cqa_search.distributed.fitting.ShardedSource`).
        y : ignored
        progress : bool, default False
            Progress bars on stderr.

        Returns
        -------
        self
        """
        validate_params(self)
        seconds = {}
        t0 = time.perf_counter()
        # the steps' bar says which one runs: the corpus's analysis and TextRank and the
        # phrase extraction have no bar of their own (a third of the time at 60,000
        # questions); the reading and the EM iterations show theirs under it
        steps = progress_bar(progress, "fitting translation", "steps", total=3)
        try:
            steps.set_postfix_str("parallel corpus (analysis, TextRank)")
            # an index read in this process, or one whose shards build their parts
            # (cqa_search.distributed.fitting.ShardedSource)
            make = getattr(X, "parallel_corpus", None)
            corpus, stats = (make or functools.partial(build_parallel_corpus, X))(
                answers=self.answers, title_body=self.title_body,
                duplicates=self.duplicates, similar_questions=self.similar_questions,
                min_similarity=self.min_similarity, pooling=self.pooling,
                textrank=self.textrank, window=self.window, damping=self.damping,
                progress_bar=progress)
            seconds["corpus"] = time.perf_counter() - t0
            logger.info("parallel corpus: %d pairs (%.1f s)", corpus.n_pairs,
                        seconds["corpus"])
            steps.update()
            steps.set_postfix_str("IBM Model 1")
            t1 = time.perf_counter()
            ibm1 = self._ibm1().fit(corpus, progress_bar=progress)
            seconds["ibm1"] = time.perf_counter() - t1
            steps.update()
            steps.set_postfix_str("phrase table")
            t2 = time.perf_counter()
            phrases = self._phrases().fit(corpus, translation=ibm1)
            seconds["phrases"] = time.perf_counter() - t2
            steps.update()
        finally:
            steps.close()
        seconds["total"] = time.perf_counter() - t0
        self.ibm1_ = ibm1
        self.phrase_table_ = phrases
        self.corpus_stats_ = stats.as_dict()
        self.summary_ = self._summary(seconds)
        return self

    def _summary(self, seconds, arrays=None):
        after, before = _per_word(self.ibm1_)
        if arrays is None:
            _, arrays = self.state()
        return TrainingSummary(
            corpus=self.corpus_stats_, n_terms=self.ibm1_.n_terms_,
            log_likelihood=list(self.ibm1_.log_likelihood_), n_iter=self.ibm1_.n_iter_,
            ibm1_entries=int(self.ibm1_.translation_probs_.nnz),
            cooccurrences=int(self.ibm1_.n_cooccurrences_), translations_per_word=after,
            cooccurrences_per_word=before, phrase_pairs=self.phrase_table_.n_pairs,
            phrases=len(self.phrase_table_.vocabulary_),
            phrase_occurrences=self.phrase_table_.n_occurrences_,
            nbytes={k: int(np.asarray(v).nbytes) for k, v in arrays.items()},
            seconds=dict(seconds))

    def _check_fitted(self):
        if not hasattr(self, "ibm1_"):
            raise NotFittedError("this TranslationModel is not fitted yet; call fit first")

    @property
    def translation_probs_(self):
        """The word table of :attr:`ibm1_` (see :attr:`IBMModel1.translation_probs_`)."""
        self._check_fitted()
        return self.ibm1_.translation_probs_

    @property
    def feature_names(self) -> tuple:
        return prefixed(FEATURE_NAMES, self.feature_prefix)

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit`` (the features, then :attr:`summary_`)."""
        self._check_fitted()
        lines = [f"features     {', '.join(self.feature_names)}", str(self.summary_)]
        if self.tol is not None and self.ibm1_.n_iter_ >= self.max_iter:
            lines.append(f"note         EM stopped at max_iter={self.max_iter} before "
                         f"tol={self.tol}")
        return "\n".join(lines)

    def scorer(self, view) -> TranslationScorer:
        """The feature scorer of this model over an index (its vocabulary, or one it grew
        to since the fit: see :meth:`extended`)."""
        self._check_fitted()
        n_terms = len(view.index.vocab)
        if n_terms < self.ibm1_.n_terms_:
            raise ValueError(f"this translation model was trained on a vocabulary of "
                             f"{self.ibm1_.n_terms_} terms; the index has {n_terms}")
        validate_params(self)
        return TranslationScorer(self.extended(n_terms), view)

    def extended(self, n_terms) -> "TranslationModel":
        """The model over a vocabulary grown to ``n_terms`` terms (an index that gained
        questions since the fit): new terms translate to themselves and are in no
        bi-phrase, as words the training pairs never had."""
        self._check_fitted()
        if n_terms == self.ibm1_.n_terms_:
            return self
        model = copy.copy(self)
        model.ibm1_ = self.ibm1_.extended(n_terms)
        model.phrase_table_ = self.phrase_table_.extended(n_terms)
        return model

    # -- storage ---------------------------------------------------------------------------
    def state(self):
        """(meta, arrays): the word table and the phrase table as .npy arrays."""
        self._check_fitted()
        ibm1_meta, ibm1_arrays = self.ibm1_.state()
        phrase_meta, phrase_arrays = self.phrase_table_.state()
        meta = {"ibm1": ibm1_meta, "phrases": phrase_meta, "corpus": self.corpus_stats_}
        if hasattr(self, "summary_"):
            meta["seconds"] = self.summary_.seconds
        arrays = {f"ibm1_{k}": v for k, v in ibm1_arrays.items()}
        arrays.update({f"phrases_{k}": v for k, v in phrase_arrays.items()})
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The fitted model stored by :meth:`state`."""
        model = cls(**params)
        model.ibm1_ = IBMModel1.from_state(
            model._ibm1().get_params(), meta["ibm1"],
            {k[5:]: v for k, v in arrays.items() if k.startswith("ibm1_")})
        model.phrase_table_ = PhraseTable.from_state(
            model._phrases().get_params(), meta["phrases"],
            {k[8:]: v for k, v in arrays.items() if k.startswith("phrases_")})
        if model.phrase_table_.vocabulary_.n_terms != model.ibm1_.n_terms_:
            raise ValueError("translation model: the phrase table and the word table have "
                             "different vocabularies")
        model.corpus_stats_ = dict(meta["corpus"])
        model.summary_ = model._summary(dict(meta.get("seconds", {})), arrays)
        return model
