"""Bi-phrases: extraction from word-aligned pairs, phrase vocabulary, phrase table.

zhou2011 §3.3.3, after Koehn et al. (2003) and Och (2002):

1. every pair of the parallel corpus is word-aligned with IBM Model 1 (Viterbi, eq. 9):
   each target word ``t_j`` gets one source position ``a_j`` (or NULL);
2. **extraction** (Och's heuristic): a source span ``[i1, i2]`` and a target span
   ``[j1, j2]`` (each at most ``max_length`` words) form a bi-phrase when they are
   consistent with the alignment -- no link leaves the box: every link from a target word
   in ``[j1, j2]`` lands in ``[i1, i2]`` and every link into ``[i1, i2]`` comes from
   ``[j1, j2]`` -- and hold at least one link. With ``unaligned_edges`` (Och's
   heuristic in full) unaligned words may sit at the edges of either phrase; without,
   only *tight* bi-phrases are kept, whose edge words are all aligned;
3. **phrase translation probabilities** by relative frequency (eq. 17) in both
   directions: ``phi(w|t) = N(t, w) / N(t)`` and ``phi(t|w) = N(t, w) / N(w)``;
4. **lexical weights** (eq. 18) in both directions, from the IBM 1 table ``p``::

       lex(w|t, A) = prod_{i in w} 1/|{j : (i, j) in A}| sum_{(i, j) in A} p(w_i | t_j)

   with ``p(w_i | NULL)`` for an unaligned ``w_i`` (and ``lex(t|w, A)`` the same way);
   when a bi-phrase was extracted with several alignments, the highest weight is kept
   (Koehn et al., 2003).

Phrases are interned in a :class:`PhraseVocabulary`, a trie over term ids: a phrase of
length 1 is its term id; a longer phrase is identified by (id of its prefix, last term).
The trie maps every n-gram of a token sequence to its phrase id with one sorted search
per length, which is how the scorer finds a document's phrases.

Everything is computed with whole-array operations over the flat corpus (no loop over
pairs or phrases).
"""
from __future__ import annotations

import copy
import logging
import numbers

import numpy as np
from sklearn.base import BaseEstimator

from .._utils import Interval, validate_params
from ..exceptions import NotFittedError
from ..index.validate import INT32_MAX, InvalidArray, check_array, check_count
from ._arrays import csr_lookup, group, search, segment_ids
from .corpus import ParallelCorpus

__all__ = ["extract_phrases", "PhraseVocabulary", "PhraseTable"]

logger = logging.getLogger(__name__)


def _exclusive_cumsum(values, dtype=np.int64):
    out = np.zeros(len(values) + 1, dtype=dtype)
    np.cumsum(values, out=out[1:])
    return out


def extract_phrases(corpus, positions, *, max_length=5, unaligned_edges=True):
    """All bi-phrases consistent with a word alignment (Och's heuristic), as spans.

    Parameters
    ----------
    corpus : ParallelCorpus
    positions : ndarray of int, shape (n_target_tokens,)
        Source position (within its pair) each target word is aligned to, -1 for NULL
        (as returned by :meth:`IBMModel1.align`).
    max_length : int, default 5
        Longest phrase, on either side.
    unaligned_edges : bool, default True
        Och's heuristic in full: unaligned words may sit at the edges of either phrase
        (target spans with unaligned edge words, source spans grown over unaligned
        neighbours). False keeps only *tight* bi-phrases, whose first and last words
        are aligned on both sides.

    Returns
    -------
    source_start, source_length, target_start, target_length : ndarray of int64
        One entry per extracted bi-phrase occurrence; starts index the flat
        ``corpus.source`` and ``corpus.target`` arrays.

    Examples
    --------
    Source ``a b c``, target ``x y z``, links x-a and z-c (y unaligned):

    >>> from cqa_search.translation import ParallelCorpus
    >>> c = ParallelCorpus.from_pairs([([0, 1, 2], [3, 4, 5])])
    >>> ss, sl, ts, tl = extract_phrases(c, np.array([0, -1, 2]))
    >>> sorted(zip(ss.tolist(), sl.tolist(), ts.tolist(), tl.tolist()))[:4]
    [(0, 1, 0, 1), (0, 1, 0, 2), (0, 2, 0, 1), (0, 2, 0, 2)]
    """
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) != len(corpus.target):
        raise ValueError(f"positions has {len(positions)} entries; the corpus has "
                         f"{len(corpus.target)} target words")
    so, to = corpus.source_offsets, corpus.target_offsets
    n_src, n_tgt = len(corpus.source), len(corpus.target)
    tpair = segment_ids(to)
    spair = segment_ids(so)
    aligned = positions >= 0
    link_src = so[tpair] + positions  # global source index of each link (valid if aligned)
    links_per_src = np.bincount(link_src[aligned], minlength=n_src)
    cum_src = _exclusive_cumsum(links_per_src)
    cum_tgt = _exclusive_cumsum(aligned)
    big = np.iinfo(np.int64).max
    lo1 = np.where(aligned, positions, big)
    hi1 = np.where(aligned, positions, -1)
    lo, hi = lo1.copy(), hi1.copy()
    out = ([], [], [], [])
    for length in range(1, max_length + 1):
        if length > 1:
            lo = np.minimum(lo[:-1], lo1[length - 1:])
            hi = np.maximum(hi[:-1], hi1[length - 1:])
        g = np.arange(n_tgt - length + 1)
        n_links = cum_tgt[g + length] - cum_tgt[g]
        ok = (tpair[g] == tpair[g + length - 1]) & (n_links > 0)
        ok &= hi - lo < max_length
        if not unaligned_edges:
            ok &= aligned[g] & aligned[g + length - 1]
        g, i1, i2, n_links = g[ok], lo[ok], hi[ok], n_links[ok]
        base = so[tpair[g]]
        consistent = cum_src[base + i2 + 1] - cum_src[base + i1] == n_links
        g, i1, i2 = g[consistent], i1[consistent], i2[consistent]
        out[0].append(base[consistent] + i1)
        out[1].append(i2 - i1 + 1)
        out[2].append(g)
        out[3].append(np.full(len(g), length))
    src_start, src_len, tgt_start, tgt_len = (np.concatenate(x) for x in out)
    if unaligned_edges and len(src_start):
        # free (unaligned) source words right before / after each position, within a pair
        linked = links_per_src > 0
        idx = np.arange(n_src)
        last_linked = np.maximum.accumulate(np.where(linked, idx, so[spair] - 1))
        next_linked = np.minimum.accumulate(np.where(linked, idx, so[spair + 1])[::-1])[::-1]
        h1, h2 = src_start, src_start + src_len - 1
        prev = np.where(h1 > so[spair[h1]], last_linked[np.maximum(h1 - 1, 0)], h1 - 1)
        prev = np.maximum(prev, so[spair[h1]] - 1)
        left_free = h1 - 1 - prev
        nxt = np.where(h2 + 1 < so[spair[h2] + 1], next_linked[np.minimum(h2 + 1, n_src - 1)],
                       h2 + 1)
        nxt = np.minimum(nxt, so[spair[h2] + 1])
        right_free = nxt - h2 - 1
        ext = ([src_start], [src_len], [tgt_start], [tgt_len])
        for left in range(max_length):
            for right in range(max_length - left):
                if left == right == 0:
                    continue
                ok = (left_free >= left) & (right_free >= right) & (
                    src_len + left + right <= max_length)
                ext[0].append(src_start[ok] - left)
                ext[1].append(src_len[ok] + left + right)
                ext[2].append(tgt_start[ok])
                ext[3].append(tgt_len[ok])
        src_start, src_len, tgt_start, tgt_len = (np.concatenate(x) for x in ext)
    return src_start, src_len, tgt_start, tgt_len


class PhraseVocabulary:
    """Phrase ids: a trie over term ids, one sorted key array per phrase length.

    Ids ``0..n_terms-1`` are the one-word phrases (the term ids); the phrases of length
    ``k >= 2`` come next, level by level. A length-``k`` phrase is stored as the key
    ``(prefix id - first id of level k-1) * n_terms + last term`` in ``keys[level k]``
    (sorted), its id being the first id of level ``k`` plus the key's rank.

    Parameters
    ----------
    n_terms : int
    level_keys : list of ndarray of int64
        Sorted keys of the phrases of length 2, 3, ...
    """

    def __init__(self, n_terms, level_keys=()):
        self.n_terms = int(n_terms)
        self.level_keys = [np.asarray(k, dtype=np.int64) for k in level_keys]
        sizes = [self.n_terms] + [len(k) for k in self.level_keys]
        self.level_base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def max_length(self) -> int:
        return len(self.level_keys) + 1

    def extended(self, n_terms) -> "PhraseVocabulary":
        """The same phrases over a vocabulary grown to ``n_terms`` terms (new terms are
        one-word phrases; the longer phrases' ids move up by the number of new terms)."""
        V = self.n_terms
        return PhraseVocabulary(n_terms, [(k // V) * n_terms + k % V for k in self.level_keys])

    def shift(self, ids, n_terms):
        """Phrase ids of this vocabulary in :meth:`extended` ``(n_terms)``'s numbering."""
        ids = np.asarray(ids, dtype=np.int64)
        return np.where(ids >= self.n_terms, ids + (n_terms - self.n_terms), ids)

    def __len__(self):
        return int(self.level_base[-1])

    @classmethod
    def build(cls, n_terms, pieces):
        """Intern phrases given as (flat tokens, starts, lengths) groups.

        Returns
        -------
        vocabulary : PhraseVocabulary
        ids : list of ndarray of int64
            The phrase id of every phrase of every group.
        """
        V = int(n_terms)
        pieces = [(np.asarray(f), np.asarray(s, np.int64), np.asarray(n, np.int64))
                  for f, s, n in pieces]
        starts = np.concatenate([s for _, s, _ in pieces])
        lengths = np.concatenate([n for _, _, n in pieces])
        sizes = [len(s) for _, s, _ in pieces]

        def word(k, which):
            parts, at = [], 0
            for (flat, s, _), size in zip(pieces, sizes):
                sel = which[(which >= at) & (which < at + size)] - at
                parts.append(flat[s[sel] + k].astype(np.int64))
                at += size
            return np.concatenate(parts)

        ids = word(0, np.arange(len(starts)))
        level_keys, base, prev_base = [], V, 0
        max_len = int(lengths.max(initial=1))
        for k in range(1, max_len):
            active = np.flatnonzero(lengths > k)
            n_prev = (V if k == 1 else len(level_keys[-1]))
            keys = (ids[active] - prev_base) * V + word(k, active)
            uniq, inverse, _ = group(keys, n_prev * V)
            level_keys.append(uniq)
            ids[active] = base + inverse
            prev_base, base = base, base + len(uniq)
        vocab = cls(V, level_keys)
        out, at = [], 0
        for size in sizes:
            out.append(ids[at:at + size])
            at += size
        return vocab, out

    def ngram_ids(self, tokens, offsets, max_length=None) -> np.ndarray:
        """Phrase id of the n-gram starting at each token, for n = 1..max_length.

        Parameters
        ----------
        tokens : ndarray of int, flat sequences
        offsets : ndarray of int64, sequence boundaries (n-grams never cross them)
        max_length : int, optional (default: the longest phrase)

        Returns
        -------
        ndarray of int64, shape (max_length, n_tokens)
            ``[n - 1, p]`` is the id of ``tokens[p:p + n]``, -1 when that n-gram is not
            a known phrase or crosses a sequence boundary.
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        L = self.max_length if max_length is None else max_length
        n = len(tokens)
        out = np.full((L, n), -1, dtype=np.int64)
        if n == 0:
            return out
        out[0] = tokens
        seq = segment_ids(np.asarray(offsets, dtype=np.int64))
        for k in range(1, min(L, self.max_length)):
            keys_k = self.level_keys[k - 1]
            pos = np.flatnonzero(out[k - 1][: n - k] >= 0)
            pos = pos[seq[pos] == seq[pos + k]]
            if len(pos) == 0 or len(keys_k) == 0:
                break
            out[k][pos] = self._extend(k, out[k - 1][pos], tokens[pos + k])
        return out

    def span_ids(self, tokens, starts, lengths) -> np.ndarray:
        """Phrase id of the spans ``tokens[starts[i]:starts[i] + lengths[i]]`` (lengths
        1..max_length, none crossing a sequence boundary), -1 when the span is not a
        known phrase: :meth:`ngram_ids`'s value at those spans, for the few spans a caller
        needs (a phrase's id is found from its prefix's, level by level).

        Examples
        --------
        >>> flat = np.array([0, 1, 2])    # the phrases "0 1 2" and "1 2" (and "0 1")
        >>> v, _ = PhraseVocabulary.build(3, [(flat, np.array([0, 1]), np.array([3, 2]))])
        >>> v.span_ids(np.array([0, 1, 2, 1]), np.array([0, 0, 1, 2, 0]),
        ...            np.array([1, 3, 2, 2, 2])).tolist()
        [0, 5, 4, -1, 3]
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        ids = tokens[starts]
        for k in range(1, int(lengths.max(initial=1))):
            longer = lengths > k
            if k >= self.max_length or len(self.level_keys[k - 1]) == 0:
                ids[longer] = -1
                break
            act = np.flatnonzero(longer & (ids >= 0))
            extended = self._extend(k, ids[act], tokens[starts[act] + k])
            ids[longer] = -1
            ids[act] = extended
        return ids

    def _extend(self, k, ids, next_tokens) -> np.ndarray:
        """Ids of the phrases of ``k + 1`` words made of the phrases ``ids`` (of ``k``
        words) and the tokens ``next_tokens``, -1 where that phrase is not known (level
        ``k`` holds keys)."""
        keys_k = self.level_keys[k - 1]
        keys = (ids - self.level_base[k - 1]) * self.n_terms + next_tokens
        at = np.minimum(search(keys_k, keys), len(keys_k) - 1)
        return np.where(keys_k[at] == keys, self.level_base[k] + at, -1)

    def phrase_id(self, terms) -> int:
        """Id of one phrase given as term ids (-1 if unknown)."""
        terms = np.asarray(terms, dtype=np.int64)
        if len(terms) == 0 or len(terms) > self.max_length:
            return -1
        return int(self.ngram_ids(terms, np.array([0, len(terms)]), len(terms))[-1, 0])

    def spans(self, ids) -> tuple:
        """The phrases ``ids`` as ``(flat term ids, starts, lengths)`` (the pieces
        :meth:`build` takes): :meth:`terms` of many phrases at once.

        Examples
        --------
        >>> flat = np.array([0, 1, 2])
        >>> v, _ = PhraseVocabulary.build(3, [(flat, np.array([0, 1]), np.array([3, 2]))])
        >>> flat, starts, lengths = v.spans([5, 2, 4])
        >>> flat.tolist(), starts.tolist(), lengths.tolist()
        ([0, 1, 2, 2, 1, 2], [0, 3, 4], [3, 1, 2])
        """
        ids = np.asarray(ids, dtype=np.int64)
        level = np.searchsorted(self.level_base, ids, side="right") - 1
        lengths = level + 1
        starts = np.cumsum(lengths) - lengths
        flat = np.empty(int(lengths.sum()), dtype=np.int64)
        current, at = ids.copy(), lengths - 1  # each phrase's last word comes first
        for k in range(self.max_length - 1, 0, -1):  # peel one word off levels >= k
            act = np.flatnonzero(level >= k)
            key = self.level_keys[k - 1][current[act] - self.level_base[k]]
            flat[starts[act] + at[act]] = key % self.n_terms
            current[act] = key // self.n_terms + self.level_base[k - 1]
            at[act] -= 1
        flat[starts] = current  # the first word: a one-word phrase's id is its term
        return flat, starts, lengths

    def terms(self, phrase_id) -> list:
        """Term ids of a phrase (inverse of :meth:`phrase_id`)."""
        phrase_id = int(phrase_id)
        out = []
        while phrase_id >= self.n_terms:
            k = int(np.searchsorted(self.level_base, phrase_id, side="right")) - 1
            key = int(self.level_keys[k - 1][phrase_id - self.level_base[k]])
            out.append(key % self.n_terms)
            phrase_id = key // self.n_terms + int(self.level_base[k - 1])
        out.append(phrase_id)
        return out[::-1]


class PhraseTable(BaseEstimator):
    """Bi-phrase counts, translation probabilities (eq. 17) and lexical weights (eq. 18).

    Source phrases are document phrases ``t`` and target phrases query phrases ``w``:
    ``forward`` is ``phi(w|t)``, ``inverse`` is ``phi(t|w)``.

    Parameters
    ----------
    max_length : int, default 5
        Longest phrase (the paper's l = 5).
    unaligned_edges : bool, default True
        Och's heuristic in full (unaligned edge words allowed); False keeps only tight
        bi-phrases (see :func:`extract_phrases`).

    Attributes
    ----------
    vocabulary_ : PhraseVocabulary
    pair_keys_ : ndarray of int64, shape (n_pairs,)
        Sorted ``source phrase id * n_phrases + target phrase id``.
    counts_ : ndarray of int32, shape (n_pairs,)
        ``N(t, w)``: occurrences extracted from the corpus.
    lex_forward_, lex_inverse_ : ndarray of float32, shape (n_pairs,)
        ``lex(w|t)`` and ``lex(t|w)`` (the highest over the pair's occurrences).
    source_totals_, target_totals_ : ndarray of int32, shape (n_phrases,)
        ``N(t)`` and ``N(w)``.
    n_occurrences_ : int
    """

    kind = "phrases"
    _parameter_constraints = {"max_length": Interval(1, 8, kind=numbers.Integral),
                              "unaligned_edges": (False, True)}

    def __init__(self, *, max_length=5, unaligned_edges=True):
        self.max_length = max_length
        self.unaligned_edges = unaligned_edges

    def fit(self, X, y=None, *, translation):
        """Extract and count the bi-phrases of a parallel corpus.

        Parameters
        ----------
        X : ParallelCorpus
            Or a corpus held in parts elsewhere, which fits each part's table
            (``X.phrase_tables(self, translation)``; e.g.
            :class:`cqa_search.distributed.fitting.ShardedCorpus`): their merge
            (:meth:`merged`).
        y : ignored
        translation : IBMModel1
            A fitted word model (aligns the pairs, gives the lexical weights).

        Returns
        -------
        self
        """
        validate_params(self)
        if not isinstance(X, ParallelCorpus) and hasattr(X, "phrase_tables"):
            whole = PhraseTable.merged(X.phrase_tables(self, translation))
            self._set(whole.vocabulary_, whole.pair_keys_, whole.counts_, whole.lex_forward_,
                      whole.lex_inverse_)
            self.n_occurrences_ = whole.n_occurrences_
            return self
        corpus = X
        positions, probs = translation.align(corpus)
        table = translation.translation_probs_
        floor = 1e-10
        # lexical weight factors: per target word p(t_j | s_{a_j}) (or | NULL), per source
        # word the mean of p(s_i | t_j) over its links (or p(s_i | NULL) if unaligned)
        tpair = segment_ids(corpus.target_offsets)
        aligned = positions >= 0
        link_src = corpus.source_offsets[tpair[aligned]] + positions[aligned]
        rev = csr_lookup(table, corpus.target[aligned].astype(np.int64) + 1,
                         corpus.source[link_src])
        n_src = len(corpus.source)
        n_links = np.bincount(link_src, minlength=n_src)
        rev_sum = np.bincount(link_src, weights=rev, minlength=n_src)
        null_row = np.asarray(table[0].todense()).ravel()
        src_factor = np.where(n_links > 0, rev_sum / np.maximum(n_links, 1),
                              null_row[corpus.source])
        log_t = _exclusive_cumsum(np.log(np.maximum(probs, floor)), np.float64)
        log_s = _exclusive_cumsum(np.log(np.maximum(src_factor, floor)), np.float64)
        ss, sl, ts, tl = extract_phrases(corpus, positions, max_length=self.max_length,
                                         unaligned_edges=self.unaligned_edges)
        lex_fwd = log_t[ts + tl] - log_t[ts]
        lex_inv = log_s[ss + sl] - log_s[ss]
        logger.info("extracted %d bi-phrase occurrences", len(ss))
        vocab, (src_ids, tgt_ids) = PhraseVocabulary.build(
            corpus.n_terms, [(corpus.source, ss, sl), (corpus.target, ts, tl)])
        n_phrases = len(vocab)
        keys, inverse, counts = group(src_ids * n_phrases + tgt_ids, n_phrases * n_phrases)
        best_fwd = np.full(len(keys), -np.inf)
        best_inv = np.full(len(keys), -np.inf)
        np.maximum.at(best_fwd, inverse, lex_fwd)
        np.maximum.at(best_inv, inverse, lex_inv)
        self._set(vocab, keys, counts.astype(np.int32), np.exp(best_fwd).astype(np.float32),
                  np.exp(best_inv).astype(np.float32))
        self.n_occurrences_ = int(len(ss))
        return self

    @classmethod
    def merged(cls, tables) -> "PhraseTable":
        """The table of a corpus from the tables of its parts (fitted with the same
        parameters, vocabulary and word model): the bi-phrases of every part, their counts
        summed, their lexical weights the highest of the parts' (what a sharded index's
        fit gathers from its shards: the table of the whole corpus, the lexical weights to
        rounding).

        Parameters
        ----------
        tables : sequence of PhraseTable
            Fitted; at least one.

        Returns
        -------
        PhraseTable
        """
        tables = list(tables)
        for table in tables:
            table._check_fitted()
        first = tables[0]
        n_terms = first.vocabulary_.n_terms
        if any(t.vocabulary_.n_terms != n_terms or t.get_params() != first.get_params()
               for t in tables):
            raise ValueError("phrase tables to merge must share parameters and vocabulary")
        # one vocabulary of every part's phrases (each part's is closed under prefixes, so
        # their union is the whole corpus's), then each part's ids mapped into it: the
        # phrases decoded once each, not once per bi-phrase
        vocab, ids = PhraseVocabulary.build(n_terms, [
            t.vocabulary_.spans(np.arange(n_terms, len(t.vocabulary_))) for t in tables])
        n_phrases = len(vocab)
        words = np.arange(n_terms, dtype=np.int64)  # a one-word phrase's id is its term's
        keys = []
        for t, own in zip(tables, ids):
            to_merged, n = np.concatenate([words, own]), len(t.vocabulary_)
            keys.append(to_merged[t.pair_keys_ // n] * n_phrases + to_merged[t.pair_keys_ % n])
        keys, inverse, _ = group(np.concatenate(keys), n_phrases * n_phrases)
        counts = np.bincount(inverse, weights=np.concatenate([t.counts_ for t in tables]),
                             minlength=len(keys))
        best_fwd = np.full(len(keys), -np.inf, dtype=np.float32)
        best_inv = np.full(len(keys), -np.inf, dtype=np.float32)
        np.maximum.at(best_fwd, inverse, np.concatenate([t.lex_forward_ for t in tables]))
        np.maximum.at(best_inv, inverse, np.concatenate([t.lex_inverse_ for t in tables]))
        merged = cls(**first.get_params())
        merged._set(vocab, keys, counts.astype(np.int32), best_fwd, best_inv)
        merged.n_occurrences_ = sum(t.n_occurrences_ for t in tables)
        return merged

    def _set(self, vocab, keys, counts, lex_fwd, lex_inv):
        self.vocabulary_ = vocab
        self.pair_keys_ = keys
        self.counts_ = counts
        self.lex_forward_ = lex_fwd
        self.lex_inverse_ = lex_inv
        n = len(vocab)
        src = keys // n
        tgt = keys % n
        self.source_totals_ = np.bincount(src, weights=counts, minlength=n).astype(np.int32)
        self.target_totals_ = np.bincount(tgt, weights=counts, minlength=n).astype(np.int32)
        c = counts.astype(np.float64)
        self.forward_ = (c / np.maximum(self.source_totals_[src], 1)).astype(np.float32)
        self.inverse_ = (c / np.maximum(self.target_totals_[tgt], 1)).astype(np.float32)

    def _check_fitted(self):
        if not hasattr(self, "pair_keys_"):
            raise NotFittedError("this PhraseTable is not fitted yet; call fit first")

    def extended(self, n_terms) -> "PhraseTable":
        """The table over a vocabulary grown to ``n_terms`` terms (an index that gained
        questions since the fit): the same bi-phrases, the new terms in none."""
        self._check_fitted()
        vocab = self.vocabulary_
        if n_terms == vocab.n_terms:
            return self
        n_old = len(vocab)
        wider = vocab.extended(n_terms)
        n_new = len(wider)
        src = vocab.shift(self.pair_keys_ // n_old, n_terms)
        tgt = vocab.shift(self.pair_keys_ % n_old, n_terms)
        table = copy.copy(self)
        table._set(wider, src * n_new + tgt, self.counts_, self.lex_forward_, self.lex_inverse_)
        return table

    @property
    def n_pairs(self) -> int:
        self._check_fitted()
        return len(self.pair_keys_)

    def find(self, source_ids, target_ids) -> np.ndarray:
        """Index of the bi-phrases (source phrase id, target phrase id) in the table, -1
        when absent (or when an id is -1)."""
        self._check_fitted()
        s = np.asarray(source_ids, dtype=np.int64)
        t = np.asarray(target_ids, dtype=np.int64)
        n = len(self.vocabulary_)
        keys = s * n + t
        out = np.full(keys.shape, -1, dtype=np.int64)
        if len(self.pair_keys_) == 0:
            return out
        at = np.minimum(search(self.pair_keys_, keys), len(self.pair_keys_) - 1)
        hit = (self.pair_keys_[at] == keys) & (s >= 0) & (t >= 0)
        out[hit] = at[hit]
        return out

    def translations(self, source_terms, k=5, *, direction="forward"):
        """The ``k`` most probable target phrases of a source phrase (given as term ids).

        Returns a list of (target term ids, phi(w|t)) -- or, with
        ``direction="inverse"``, the source phrases of a target phrase with phi(t|w).
        """
        self._check_fitted()
        pid = self.vocabulary_.phrase_id(source_terms)
        if pid < 0:
            return []
        n = len(self.vocabulary_)
        if direction == "forward":
            lo, hi = np.searchsorted(self.pair_keys_, [pid * n, (pid + 1) * n])
            idx = np.arange(lo, hi)
            other, probs = self.pair_keys_[idx] % n, self.forward_[idx]
        else:
            idx = np.flatnonzero(self.pair_keys_ % n == pid)
            other, probs = self.pair_keys_[idx] // n, self.inverse_[idx]
        order = np.argsort(-probs, kind="stable")[:k]
        return [(self.vocabulary_.terms(other[i]), float(probs[i])) for i in order]

    # -- storage ---------------------------------------------------------------------------
    def state(self):
        self._check_fitted()
        v = self.vocabulary_
        meta = {"n_terms": v.n_terms, "level_sizes": [len(k) for k in v.level_keys],
                "n_occurrences": self.n_occurrences_}
        keys = np.concatenate(v.level_keys) if v.level_keys else np.zeros(0, np.int64)
        return meta, {"phrase_keys": keys, "pair_keys": self.pair_keys_, "counts": self.counts_,
                      "lex_forward": self.lex_forward_, "lex_inverse": self.lex_inverse_}

    @classmethod
    def from_state(cls, params, meta, arrays):
        model = cls(**params)
        if not isinstance(meta["level_sizes"], list):
            raise InvalidArray("phrase table: bad level sizes")
        sizes = np.array([check_count(s, "phrase table level size", high=INT32_MAX)
                          for s in meta["level_sizes"]], dtype=np.int64)
        V = check_count(meta["n_terms"], "phrase table n_terms", high=INT32_MAX)
        keys = arrays["phrase_keys"]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        check_array(keys, "phrase keys", kind="iu", shape=(int(bounds[-1]),))
        n_prev = V
        for level, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]), start=2):
            check_array(keys[a:b], f"phrase keys of length {level}", kind="iu", low=0,
                        high=n_prev * V - 1)
            if b - a > 1 and not (np.diff(keys[a:b]) > 0).all():
                raise InvalidArray(f"phrase keys of length {level} are not sorted")
            n_prev = int(b - a)
        n = V + int(bounds[-1])
        pairs = check_array(arrays["pair_keys"], "bi-phrase keys", kind="iu", low=0,
                            high=n * n - 1)
        check_array(arrays["counts"], "bi-phrase counts", kind="iu", shape=pairs.shape, low=1)
        for name in ("lex_forward", "lex_inverse"):
            check_array(arrays[name], f"phrase table {name}", kind="f", shape=pairs.shape,
                        finite=True)
        vocab = PhraseVocabulary(meta["n_terms"], [keys[a:b] for a, b in zip(bounds[:-1],
                                                                            bounds[1:])])
        model._set(vocab, np.asarray(arrays["pair_keys"]), np.asarray(arrays["counts"]),
                   np.asarray(arrays["lex_forward"]), np.asarray(arrays["lex_inverse"]))
        model.n_occurrences_ = check_count(meta["n_occurrences"], "phrase table n_occurrences")
        return model
