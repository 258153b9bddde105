"""Parallel corpora for the translation models, built from an index's archive.

Questions and their answers are the "bitext" of a Q&A archive (zhou2011 §3.3.1): a
question and an answer (or a title and a body, or two duplicate questions, or two
questions whose answers are alike: Jeon et al. 2005) say related things in different
words. :class:`ParallelCorpus` keeps the (source, target) pairs as two
flat int32 arrays of index term ids with int64 offsets; :func:`build_parallel_corpus` makes
one from an :class:`~cqa_search.features.IndexView`:

- questions are read from the index's ``question`` field (title and body, analysed at
  indexing time); answers, titles and bodies are re-analysed with the index's analyzer
  and mapped to the index's term ids (one vocabulary; words the index lacks are dropped);
- optional TextRank filtering of every document (:mod:`.textrank`);
- **pooling**: every (q, a) pair is also added as (a, q), so one table learns both
  directions (P_pool of §3.3.1);
- pairs with an empty side are dropped.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np

from .. import _utils
from ..exceptions import ParameterError
from ._arrays import gather_segments, offsets_from_lengths
from .textrank import textrank_filter

__all__ = ["ParallelCorpus", "CorpusStats", "build_parallel_corpus", "similar_question_pairs",
           "ANSWER_PAIRS"]

logger = logging.getLogger(__name__)

#: Values of ``answers``: every answer of a question, only its best answer, or none.
ANSWER_PAIRS = ("all", "best", None)


@dataclass(frozen=True)
class ParallelCorpus:
    """Sentence pairs over one vocabulary of term ids.

    Pair ``k`` translates ``source[source_offsets[k]:source_offsets[k + 1]]`` into
    ``target[target_offsets[k]:target_offsets[k + 1]]``.

    Attributes
    ----------
    source, target : ndarray of int32
        Term ids of all source (target) sentences, one after the other.
    source_offsets, target_offsets : ndarray of int64, shape (n_pairs + 1,)
    n_terms : int
        Size of the vocabulary (term ids are in ``[0, n_terms)``).
    """

    source: np.ndarray
    source_offsets: np.ndarray
    target: np.ndarray
    target_offsets: np.ndarray
    n_terms: int

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "source", np.ascontiguousarray(self.source, dtype=np.int32))
        set_(self, "target", np.ascontiguousarray(self.target, dtype=np.int32))
        set_(self, "source_offsets", np.ascontiguousarray(self.source_offsets, dtype=np.int64))
        set_(self, "target_offsets", np.ascontiguousarray(self.target_offsets, dtype=np.int64))
        if len(self.source_offsets) != len(self.target_offsets) or len(self.source_offsets) < 1:
            raise ValueError("source_offsets and target_offsets must have the same length "
                             "(n_pairs + 1)")
        for name, arr, off in (("source", self.source, self.source_offsets),
                               ("target", self.target, self.target_offsets)):
            if off[0] != 0 or off[-1] != len(arr) or np.any(np.diff(off) < 0):
                raise ValueError(f"{name}_offsets must rise from 0 to len({name})")
            if len(arr) and (arr.min() < 0 or arr.max() >= self.n_terms):
                raise ValueError(f"{name} term ids must be in [0, n_terms={self.n_terms})")

    @classmethod
    def from_pairs(cls, pairs, n_terms=None) -> "ParallelCorpus":
        """A corpus from a sequence of ``(source_ids, target_ids)``.

        Examples
        --------
        >>> c = ParallelCorpus.from_pairs([([0, 1], [2]), ([1], [2, 3])])
        >>> c.n_pairs, c.n_terms, c.pair(1)
        (2, 4, ([1], [2, 3]))
        """
        pairs = [(np.asarray(s, dtype=np.int64), np.asarray(t, dtype=np.int64))
                 for s, t in pairs]
        src = [s for s, _ in pairs]
        tgt = [t for _, t in pairs]
        flat_s = np.concatenate(src) if src else np.zeros(0, np.int64)
        flat_t = np.concatenate(tgt) if tgt else np.zeros(0, np.int64)
        if n_terms is None:
            n_terms = int(max(flat_s.max(initial=-1), flat_t.max(initial=-1))) + 1
        return cls(flat_s, offsets_from_lengths([len(s) for s in src]), flat_t,
                   offsets_from_lengths([len(t) for t in tgt]), n_terms)

    @property
    def n_pairs(self) -> int:
        return len(self.source_offsets) - 1

    @property
    def source_lengths(self) -> np.ndarray:
        return np.diff(self.source_offsets)

    @property
    def target_lengths(self) -> np.ndarray:
        return np.diff(self.target_offsets)

    def pair(self, k):
        """Pair ``k`` as two lists of term ids."""
        s = self.source[self.source_offsets[k]:self.source_offsets[k + 1]]
        t = self.target[self.target_offsets[k]:self.target_offsets[k + 1]]
        return s.tolist(), t.tolist()

    def select(self, which) -> "ParallelCorpus":
        """The pairs ``which`` (indices or a boolean mask), in that order."""
        which = np.asarray(which)
        if which.dtype == bool:
            which = np.flatnonzero(which)
        src, src_off = gather_segments(self.source, self.source_offsets, which)
        tgt, tgt_off = gather_segments(self.target, self.target_offsets, which)
        return ParallelCorpus(src, src_off, tgt, tgt_off, self.n_terms)

    def head(self, n) -> "ParallelCorpus":
        """The first ``n`` pairs."""
        return self.select(np.arange(min(n, self.n_pairs)))

    def swapped(self) -> "ParallelCorpus":
        """Sources and targets exchanged."""
        return ParallelCorpus(self.target, self.target_offsets, self.source,
                              self.source_offsets, self.n_terms)

    def pooled(self) -> "ParallelCorpus":
        """These pairs followed by the same pairs swapped (the pooling of §3.3.1)."""
        return concatenate([self, self.swapped()])


def concatenate(corpora) -> ParallelCorpus:
    """One corpus with the pairs of several (same vocabulary), in order."""
    corpora = list(corpora)
    n_terms = corpora[0].n_terms
    if any(c.n_terms != n_terms for c in corpora):
        raise ValueError("corpora must share one vocabulary (n_terms)")

    def cat(flats, offs):
        flat = np.concatenate(flats)
        lengths = np.concatenate([np.diff(o) for o in offs])
        return flat, offsets_from_lengths(lengths)

    src, src_off = cat([c.source for c in corpora], [c.source_offsets for c in corpora])
    tgt, tgt_off = cat([c.target for c in corpora], [c.target_offsets for c in corpora])
    return ParallelCorpus(src, src_off, tgt, tgt_off, n_terms)


@dataclass(frozen=True)
class CorpusStats:
    """What :func:`build_parallel_corpus` made (JSON-friendly)."""

    n_questions: int
    n_qa_pairs: int
    n_title_body_pairs: int
    n_duplicate_pairs: int
    n_similar_pairs: int
    n_pairs: int
    n_dropped_empty: int
    pooled: bool
    textrank: bool
    tokens_before_textrank: int
    tokens_after_textrank: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _analyse(texts, analyzer, vocab):
    """Flat term ids (unknown terms dropped) and offsets of texts."""
    lengths = np.zeros(len(texts), dtype=np.int64)
    terms = []
    for i, text in enumerate(texts):
        t = analyzer.analyze(text)
        lengths[i] = len(t)
        terms.extend(t)
    ids = vocab.ids(terms) if terms else np.zeros(0, np.int32)
    keep = ids >= 0
    seg = np.repeat(np.arange(len(texts)), lengths)
    lengths = np.bincount(seg[keep], minlength=len(texts))
    return ids[keep].astype(np.int32), offsets_from_lengths(lengths)


def similar_question_pairs(view, *, k=5, min_similarity=0.5, batch=2048) -> np.ndarray:
    """Pairs of archive questions whose answers are alike (Jeon, Croft and Lee 2005).

    Two questions answered alike ask the same thing, often in different words: Jeon et al.
    learn their word translation probabilities from such pairs instead of
    question-answer pairs. Here each question is paired with the (at most) ``k``
    questions whose answers (all of them together, the index's ``answers`` field) have the
    highest tf-idf cosine with its own, when it is at least ``min_similarity``; each
    unordered pair once, and never two copies of one question (the same terms in the same
    order: they teach only that a word translates into itself). Only the archive is read,
    never relevance labels.

    Returns
    -------
    ndarray of int64, shape (n_pairs, 2)
        Rows ``(a, b)`` with ``a < b``.
    """
    from sklearn.feature_extraction.text import TfidfTransformer

    if "answers" not in view.index.fields:
        raise ValueError("similar questions are found by their answers: the index has no "
                         "answers field")
    X = TfidfTransformer(sublinear_tf=True).fit_transform(
        view.index["answers"].rows_matrix().astype(np.float64)).tocsr()
    XT = X.T.tocsc()
    pairs = []
    for start in range(0, X.shape[0], batch):
        sim = (X[start:start + batch] @ XT).toarray()
        rows = np.arange(start, start + sim.shape[0])
        sim[rows - start, rows] = 0.0  # not a question with itself
        top = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        good = np.take_along_axis(sim, top, axis=1) >= min_similarity
        a, b = np.repeat(rows, k)[good.ravel()], top.ravel()[good.ravel()]
        pairs.append(np.column_stack([np.minimum(a, b), np.maximum(a, b)]))
    pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    pairs = np.unique(pairs, axis=0).astype(np.int64)
    question = view.index["question"]
    copies = np.array([np.array_equal(question.terms_of(a), question.terms_of(b))
                       for a, b in pairs.tolist()], dtype=bool)
    return pairs[~copies] if len(pairs) else pairs


def _read_pairs(view, texts, pairs, *, answers, title_body, duplicates, progress_bar):
    """Append the archive's pairs of the requested kinds to ``pairs`` (their texts, re-
    analysed later, to ``texts``; see :func:`build_parallel_corpus`)."""
    n_docs = view.n_docs
    bar = _utils.progress_bar(progress_bar, "reading archive", "questions", n_docs, leave=False)
    archive = view.archive
    for row in range(n_docs):
        question = archive[row]
        if answers == "all":
            chosen = question.answers
        elif answers == "best":
            best = question.best_answer_text
            chosen = () if best is None else (best,)
        else:
            chosen = ()
        for text in chosen:
            pairs.append((row, n_docs + len(texts), 0))
            texts.append(text)
        if title_body and question.title and question.body:
            pairs.append((n_docs + len(texts), n_docs + len(texts) + 1, 1))
            texts.extend((question.title, question.body))
        if duplicates:
            for dup in question.duplicate_of:
                if dup in archive:
                    pairs.append((row, archive.row(dup), 2))
        bar.update()
    bar.close()


def build_parallel_corpus(view, *, answers="all", title_body=False, duplicates=False,
                          similar_questions=None, min_similarity=0.5, pooling=True,
                          textrank=True, window=3, damping=0.85, progress_bar=False):
    """The parallel corpus of an index's archive.

    Parameters
    ----------
    view : IndexView
    answers : {"all", "best"} or None, default "all"
        (question, answer) pairs for every answer, only for the best answer (questions
        without a marked best answer give none), or no question-answer pairs.
    title_body : bool, default False
        Add (title, body) pairs of questions that have both.
    duplicates : bool, default False
        Add (question, question it duplicates) pairs, for ``duplicate_of`` links to
        questions of the archive. (Duplicate links are judgments: never use them when the
        links of evaluation queries are in the archive.)
    similar_questions : int or None, default None
        Add pairs of questions whose answers are alike (:func:`similar_question_pairs`):
        each question with up to this many others.
    min_similarity : float, default 0.5
        The least tf-idf cosine of two questions' answers for ``similar_questions``.
    pooling : bool, default True
        Add every pair again with source and target exchanged (§3.3.1).
    textrank : bool, default True
        Remove the words below their document's average TextRank score (§3.3.2) from
        every question, answer, title and body before pairing them.
    window, damping : TextRank parameters (see :func:`.textrank.textrank_scores`).
    progress_bar : bool, default False
        Show a progress bar on stderr while reading the archive.

    Returns
    -------
    corpus : ParallelCorpus
    stats : CorpusStats

    An archive without (best) answers, asked for question-answer pairs only, gives its
    title-body pairs instead, with a warning: every archive that has titles and bodies
    supports a translation model.

    Raises
    ------
    ValueError
        Bad parameter values, or no pair at all (an archive without answers whose
        questions lack a title or a body).
    """
    if answers not in ANSWER_PAIRS:
        raise ParameterError(f"answers must be one of {{'all', 'best', None}}; got {answers!r}")
    index = view.index
    vocab = index.vocab
    n_terms = len(vocab)
    qfield = index["question"]
    n_docs = qfield.n_docs
    # documents: 0..n_docs-1 are the questions (from the index), then the re-analysed texts
    q_tokens = np.asarray(qfield.sequence, dtype=np.int32)
    q_offsets = offsets_from_lengths(qfield.doc_len)
    texts, pairs = [], []   # pairs: (source document, target document, kind)
    if similar_questions is not None:
        for a, b in similar_question_pairs(view, k=similar_questions,
                                           min_similarity=min_similarity).tolist():
            pairs.append((a, b, 3))
    if answers is not None or title_body or duplicates:
        _read_pairs(view, texts, pairs, answers=answers, title_body=title_body,
                    duplicates=duplicates, progress_bar=progress_bar)
    if not pairs and answers is not None and not title_body:
        # An archive without answers (a duplicate-question site, say) still has titles
        # and bodies: the user asked for a translation model, this is the one it supports.
        _read_pairs(view, texts, pairs, answers=None, title_body=True, duplicates=False,
                    progress_bar=progress_bar)
        if pairs:
            warnings.warn(f"the archive has no {'best ' * (answers == 'best')}answers: the "
                          "translation model learns from its title-body pairs instead (as "
                          "with --title-body --answers none)", UserWarning, stacklevel=2)
    if not pairs:
        lacks = ("answers" if answers == "all" else "best answers" if answers == "best"
                 else "pairs of the requested kinds")
        if answers is not None or title_body:
            lacks += " and no question with both a title and a body"
        raise ParameterError(f"no parallel pairs: the archive has no {lacks}; use "
                             "answers='all', title_body=True or duplicates=True (on the "
                             "command line: --answers all, --title-body, --duplicates)")
    logger.info("analysing %d answers/titles/bodies", len(texts))
    t_tokens, t_offsets = _analyse(texts, view.analyzer, vocab)
    tokens = np.concatenate([q_tokens, t_tokens])
    offsets = np.concatenate([q_offsets, q_offsets[-1] + t_offsets[1:]])
    before = len(tokens)
    if textrank:
        logger.info("TextRank over %d documents (%d tokens)", len(offsets) - 1, before)
        tokens, offsets = textrank_filter(tokens, offsets, window=window, damping=damping)
    pairs = np.asarray(pairs, dtype=np.int64)
    src, src_off = gather_segments(tokens, offsets, pairs[:, 0])
    tgt, tgt_off = gather_segments(tokens, offsets, pairs[:, 1])
    corpus = ParallelCorpus(src, src_off, tgt, tgt_off, n_terms)
    nonempty = (corpus.source_lengths > 0) & (corpus.target_lengths > 0)
    n_dropped = int((~nonempty).sum())
    if n_dropped:
        corpus = corpus.select(nonempty)
    if corpus.n_pairs == 0:
        raise ParameterError("no parallel pairs left: every pair has an empty side after analysis")
    if pooling:
        corpus = corpus.pooled()
    kinds = np.bincount(pairs[:, 2], minlength=4)
    stats = CorpusStats(n_questions=n_docs, n_qa_pairs=int(kinds[0]),
                        n_title_body_pairs=int(kinds[1]), n_duplicate_pairs=int(kinds[2]),
                        n_similar_pairs=int(kinds[3]),
                        n_pairs=corpus.n_pairs, n_dropped_empty=n_dropped, pooled=bool(pooling),
                        textrank=bool(textrank), tokens_before_textrank=int(before),
                        tokens_after_textrank=int(len(tokens)))
    return corpus, stats
