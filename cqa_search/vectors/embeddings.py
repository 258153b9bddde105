"""Word vectors learned from an archive's own text: the training corpus and the learners.

The corpus is what the index holds already, analysed: the term-id sequences of every
question (``question`` field) and of its answers (``answers`` field), one sentence each
(:func:`training_corpus`). Two learners map it to one vector per index term:

* :func:`word2vec` -- skip-gram with negative sampling (Mikolov et al. 2013) by gensim,
  one worker thread and a seed, so a refit gives the same bits;
* :func:`ppmi_svd` -- the count-based counterpart (Levy, Goldberg and Dagan 2015):
  co-occurrence counts in a window weighted like word2vec's dynamic window, positive PMI
  with context-distribution smoothing (alpha = 0.75), truncated SVD, the left singular
  vectors ``U`` without the singular values (eigenvalue weighting 0: on dev data, averaged
  over seeds, the learned pipeline scored 0.9 MAP higher than with ``U * sqrt(S)``, on
  three dev sets of four; BENCHMARKS.md, "Learning the word vectors").

Terms enter a learner in their own (alphabetical) order rather than by term id, which
follows the order the index met them in and may differ between two builds of one
archive: the vectors depend only on the archive and the seed.
"""
from __future__ import annotations

import logging

import numpy as np

__all__ = ["Corpus", "training_corpus", "word2vec", "ppmi_svd"]

logger = logging.getLogger(__name__)


class Corpus:
    """Sentences of term ids: ``ids[offsets[i]:offsets[i + 1]]`` is sentence ``i``.

    Parameters
    ----------
    ids : ndarray of int32
    offsets : ndarray of int64, shape (n_sentences + 1,)
    terms : sequence of str
        The index's terms (``terms[id]``).
    """

    def __init__(self, ids, offsets, terms):
        self.ids = np.asarray(ids, dtype=np.int32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.terms = terms

    @property
    def n_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    def counts(self) -> np.ndarray:
        """Occurrences of every term, shape (n_terms,)."""
        return np.bincount(self.ids, minlength=len(self.terms))

    def sentence_ids(self) -> np.ndarray:
        """The sentence of every token, shape (n_tokens,)."""
        return np.repeat(np.arange(self.n_sentences, dtype=np.int64), np.diff(self.offsets))


def training_corpus(view, fields=("question", "answers")) -> Corpus:
    """The analysed text of an index as sentences: per question, one sentence per field.

    Parameters
    ----------
    view : IndexView
    fields : sequence of str
        Index fields read (those the index lacks are skipped).
    """
    parts, lengths = [], []
    for name in fields:
        if name not in view.index.fields:
            continue
        fi = view.index[name]
        parts.append(np.asarray(fi.sequence, dtype=np.int32))
        lengths.append(np.asarray(fi.doc_len, dtype=np.int64))
    if not parts:
        return Corpus(np.zeros(0, np.int32), np.zeros(1, np.int64), view.index.vocab.terms)
    lengths = np.concatenate(lengths)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return Corpus(np.concatenate(parts), offsets, view.index.vocab.terms)


def _alphabetical(corpus, min_count):
    """Kept terms (count >= min_count) in alphabetical order: ``(order, rank)`` where
    ``order[k]`` is the term id of rank ``k`` and ``rank[id]`` its rank (-1: dropped)."""
    counts = corpus.counts()
    kept = np.flatnonzero(counts >= min_count)
    names = np.asarray([corpus.terms[i] for i in kept.tolist()], dtype=str)
    order = kept[np.argsort(names, kind="stable")] if len(kept) else kept
    rank = np.full(len(corpus.terms), -1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    return order, rank


def word2vec(corpus, *, dim=100, window=5, epochs=20, min_count=2, negative=5,
             sample=1e-3, seed=0, progress=None) -> np.ndarray:
    """Skip-gram word vectors by gensim (imported here only: never on the query path).

    One worker thread: gensim's threads take sentences in the order the OS schedules them,
    so only one thread gives the same vectors on every fit. The initial vectors come from
    a generator seeded by ``seed`` (gensim >= 4), not from Python's string hash, so the
    result does not depend on ``PYTHONHASHSEED`` either.

    Returns
    -------
    vectors : ndarray of float32, shape (n_terms, dim)
        Zero rows for terms seen fewer than ``min_count`` times.
    """
    try:
        from gensim.models import Word2Vec
    except ImportError:
        from ..exceptions import ParameterError

        raise ParameterError("method 'word2vec' needs gensim: pip install "
                             "'cqa-search[word2vec]' (or use method 'ppmi-svd')") from None

    order, rank = _alphabetical(corpus, min_count)
    vectors = np.zeros((len(corpus.terms), dim), dtype=np.float32)
    if len(order) == 0:
        return vectors
    tokens = [str(r) for r in range(len(order))]  # the rank as the word: alphabetical ids
    ids = rank[corpus.ids]
    offsets = corpus.offsets

    class Sentences:  # re-iterable: one pass per epoch
        def __iter__(self):
            for i in range(len(offsets) - 1):
                s = ids[offsets[i]:offsets[i + 1]]
                s = s[s >= 0]
                if len(s) > 1:
                    yield [tokens[r] for r in s.tolist()]

    model = Word2Vec(vector_size=dim, window=window, min_count=1, sg=1, negative=negative,
                     sample=sample, workers=1, seed=seed, epochs=epochs)
    # the vocabulary in rank order with its counts: gensim sorts it by count (stable)
    counts = corpus.counts()[order]
    model.build_vocab_from_freq({tokens[r]: int(c) for r, c in enumerate(counts.tolist())})
    model.train(Sentences(), total_examples=corpus.n_sentences, epochs=epochs,
                callbacks=() if progress is None else (progress,))
    learned = np.asarray(model.wv.vectors, dtype=np.float32)
    where = np.array([model.wv.key_to_index[t] for t in tokens], dtype=np.int64)
    vectors[order] = learned[where]
    return vectors


def _cooccurrences(corpus, rank, n_kept, window, batch=1 << 24):
    """Symmetric window co-occurrence counts of the kept terms, each pair at distance
    ``d`` weighted ``(window - d + 1) / window`` (word2vec's dynamic window in
    expectation), as a CSR matrix over term ranks."""
    import scipy.sparse as sp

    ids = rank[corpus.ids]
    sent = corpus.sentence_ids()
    keep = ids >= 0
    ids, sent = ids[keep], sent[keep]  # rare words leave the sentence (as in word2vec)
    total = sp.csr_matrix((n_kept, n_kept), dtype=np.float64)
    for d in range(1, window + 1):
        weight = (window - d + 1) / window
        for start in range(0, max(len(ids) - d, 0), batch):
            stop = min(start + batch, len(ids) - d)
            a, b = ids[start:stop], ids[start + d:stop + d]
            same = sent[start:stop] == sent[start + d:stop + d]
            a, b = a[same], b[same]
            m = sp.csr_matrix((np.full(len(a), weight), (a, b)), shape=(n_kept, n_kept))
            total = total + m + m.T
    total.sum_duplicates()
    return total


def ppmi_svd(corpus, *, dim=100, window=5, min_count=2, alpha=0.75, eig=0.0,
             context=False, shift=1.0, seed=0) -> np.ndarray:
    """Word vectors from the truncated SVD of the positive PMI matrix of window
    co-occurrences (Levy, Goldberg and Dagan 2015).

    Parameters
    ----------
    corpus : Corpus
    dim, window, min_count : int
    alpha : float, default 0.75
        Context distribution smoothing: contexts counted ``count ** alpha``.
    eig : float, default 0.0
        Eigenvalue weighting: the vectors are ``U * S ** eig`` (1: the SVD's own scale,
        0.5: symmetric, 0: every direction equal, the default).
    context : bool, default False
        Add the context vectors ``V * S ** eig`` to the word vectors (``W + C``).
    shift : float, default 1.0
        Shifted PPMI: ``max(0, PMI - log(shift))`` (word2vec's ``k`` negative samples).
    seed : int

    Returns
    -------
    vectors : ndarray of float32, shape (n_terms, dim)
        Zero rows for terms seen fewer than ``min_count`` times.
    """
    import scipy.sparse as sp
    from sklearn.utils.extmath import randomized_svd  # fit time only

    order, rank = _alphabetical(corpus, min_count)
    vectors = np.zeros((len(corpus.terms), dim), dtype=np.float32)
    n = len(order)
    if n < 2:
        return vectors
    C = _cooccurrences(corpus, rank, n, window)
    row_sum = np.asarray(C.sum(axis=1)).ravel()
    ctx = row_sum ** alpha
    ctx_total = ctx.sum()
    C = C.tocoo()
    # log(p(w, c) / (p(w) p_alpha(c))), the corpus size cancelling out
    pmi = np.log(C.data * ctx_total / (row_sum[C.row] * ctx[C.col])) - np.log(shift)
    positive = pmi > 0
    P = sp.csr_matrix((pmi[positive], (C.row[positive], C.col[positive])), shape=(n, n))
    k = min(dim, n - 1)
    # Randomized SVD (Halko et al. 2011) with power iterations: the top singular vectors
    # of the sparse matrix, 15x faster than ARPACK here; seeded, signs fixed (svd_flip).
    U, S, Vt = randomized_svd(P, k, n_iter=7, random_state=seed)
    W = U * S ** eig
    if context:
        W = W + Vt.T * S ** eig
    vectors[order, :k] = W.astype(np.float32)
    return vectors
