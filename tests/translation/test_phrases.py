"""Bi-phrase extraction (Och), the phrase vocabulary and the phrase table (eqs. 17-18)."""
import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.exceptions import NotFittedError
from cqa_search.translation import (IBMModel1, ParallelCorpus, PhraseTable, PhraseVocabulary,
                                    extract_phrases)


def spans(corpus, positions, **kw):
    ss, sl, ts, tl = extract_phrases(corpus, positions, **kw)
    return sorted(zip(ss.tolist(), sl.tolist(), ts.tolist(), tl.tolist()))


def test_hand_worked_example():
    # document t0 t1 t2 t3 (source), query w0 w1 w2 (target); links w0-t1 and w2-t3,
    # w1 unaligned, t0 and t2 unaligned
    corpus = ParallelCorpus.from_pairs([([10, 11, 12, 13], [20, 21, 22])])
    a = np.array([1, -1, 3])
    full = [  # (source start, length, target start, length), worked out by hand
        (0, 2, 0, 1), (0, 2, 0, 2), (0, 3, 0, 1), (0, 3, 0, 2), (0, 4, 0, 3),
        (1, 1, 0, 1), (1, 1, 0, 2), (1, 2, 0, 1), (1, 2, 0, 2), (1, 3, 0, 3),
        (2, 2, 1, 2), (2, 2, 2, 1), (3, 1, 1, 2), (3, 1, 2, 1)]
    assert spans(corpus, a) == full
    # tight phrases: every edge word aligned
    assert spans(corpus, a, unaligned_edges=False) == [(1, 1, 0, 1), (1, 3, 0, 3),
                                                       (3, 1, 2, 1)]
    # max length 2 drops the 3- and 4-word phrases
    assert spans(corpus, a, max_length=2) == [s for s in full if s[1] <= 2 and s[3] <= 2]


def naive_extract(src_len, tgt_len, links, max_length, unaligned_edges):
    """All consistent boxes by brute force (Och & Ney 2004's definition)."""
    out = []
    src_linked = {i for _, i in links}
    tgt_linked = {j for j, _ in links}
    for i1 in range(src_len):
        for i2 in range(i1, min(src_len, i1 + max_length)):
            for j1 in range(tgt_len):
                for j2 in range(j1, min(tgt_len, j1 + max_length)):
                    inside = [(j, i) for j, i in links if j1 <= j <= j2 and i1 <= i <= i2]
                    crossing = [(j, i) for j, i in links
                                if (j1 <= j <= j2) != (i1 <= i <= i2)]
                    if not inside or crossing:
                        continue
                    if not unaligned_edges and not ({i1, i2} <= src_linked
                                                    and {j1, j2} <= tgt_linked):
                        continue
                    out.append((i1, i2 - i1 + 1, j1, j2 - j1 + 1))
    return out


@settings(max_examples=80, deadline=None)
@given(data=st.data(), max_length=st.integers(1, 4), unaligned_edges=st.booleans())
def test_extraction_matches_brute_force(data, max_length, unaligned_edges):
    n_pairs = data.draw(st.integers(1, 3))
    pairs, alignment, expected, so, to = [], [], [], 0, 0
    for _ in range(n_pairs):
        ls = data.draw(st.integers(1, 6))
        lt = data.draw(st.integers(1, 6))
        a = data.draw(st.lists(st.integers(-1, ls - 1), min_size=lt, max_size=lt))
        pairs.append((list(range(ls)), list(range(lt))))
        alignment.extend(a)
        links = [(j, i) for j, i in enumerate(a) if i >= 0]
        expected += [(so + i, n, to + j, m) for i, n, j, m in
                     naive_extract(ls, lt, links, max_length, unaligned_edges)]
        so, to = so + ls, to + lt
    corpus = ParallelCorpus.from_pairs(pairs, n_terms=6)
    assert spans(corpus, np.array(alignment), max_length=max_length,
                 unaligned_edges=unaligned_edges) == sorted(expected)


@settings(max_examples=40, deadline=None)
@given(seqs=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=7), min_size=1,
                     max_size=4))
def test_phrase_vocabulary_ids_and_ngrams(seqs):
    flat = np.array([t for s in seqs for t in s])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    # intern every n-gram up to length 3 of the first sequence
    first = seqs[0]
    grams = [(i, n) for i in range(len(first)) for n in range(1, 4) if i + n <= len(first)]
    vocab, (ids,) = PhraseVocabulary.build(5, [(flat, np.array([i for i, _ in grams]),
                                                np.array([n for _, n in grams]))])
    by_phrase = {}
    for (i, n), pid in zip(grams, ids.tolist()):
        phrase = tuple(first[i:i + n])
        assert by_phrase.setdefault(phrase, pid) == pid        # one id per phrase
        assert vocab.terms(pid) == list(phrase) and vocab.phrase_id(phrase) == pid
    assert len(set(by_phrase.values())) == len(by_phrase)
    table = vocab.ngram_ids(flat, offsets, 3)
    for k, s in enumerate(seqs):
        for i in range(len(s)):
            for n in range(1, 4):
                got = table[n - 1, offsets[k] + i]
                if i + n > len(s):
                    assert got == -1
                else:
                    assert got == by_phrase.get(tuple(s[i:i + n]), -1 if n > 1 else s[i])


def test_phrase_table_counts_and_lexical_weights():
    rng = np.random.default_rng(1)
    pairs = [(rng.integers(0, 8, rng.integers(1, 6)).tolist(),
              rng.integers(0, 8, rng.integers(1, 6)).tolist()) for _ in range(25)]
    corpus = ParallelCorpus.from_pairs(pairs, n_terms=8)
    ibm1 = IBMModel1(max_iter=3, tol=None, min_prob=0.01).fit(corpus)
    table = PhraseTable(max_length=3).fit(corpus, translation=ibm1)
    p = ibm1.translation_probs_.toarray()
    positions, _ = ibm1.align(corpus)
    counts, lex_f, lex_i = Counter(), defaultdict(float), defaultdict(float)
    at = 0
    for k, (src, tgt) in enumerate(pairs):
        a = positions[at:at + len(tgt)].tolist()
        at += len(tgt)
        links = [(j, i) for j, i in enumerate(a) if i >= 0]
        for i1, n, j1, m in naive_extract(len(src), len(tgt), links, 3, True):
            t, w = tuple(src[i1:i1 + n]), tuple(tgt[j1:j1 + m])
            counts[(t, w)] += 1
            # eq. 18, both directions, unaligned words to NULL
            fwd = math.prod(max(
                np.mean([p[1 + src[i], tgt[j]] for jj, i in links if jj == j])
                if a[j] >= 0 else p[0, tgt[j]], 1e-10) for j in range(j1, j1 + m))
            inv = math.prod(max(
                np.mean([p[1 + tgt[j], src[i]] for j, ii in links if ii == i])
                if any(ii == i for _, ii in links) else p[0, src[i]], 1e-10)
                for i in range(i1, i1 + n))
            lex_f[(t, w)] = max(lex_f[(t, w)], fwd)
            lex_i[(t, w)] = max(lex_i[(t, w)], inv)
    assert table.n_pairs == len(counts) and table.n_occurrences_ == sum(counts.values())
    n_t, n_w = Counter(), Counter()
    for (t, w), c in counts.items():
        n_t[t] += c
        n_w[w] += c
    vocab = table.vocabulary_
    for (t, w), c in counts.items():
        idx = table.find([vocab.phrase_id(t)], [vocab.phrase_id(w)])[0]
        assert idx >= 0 and table.counts_[idx] == c
        assert table.forward_[idx] == pytest.approx(c / n_t[t], rel=1e-6)      # eq. 17
        assert table.inverse_[idx] == pytest.approx(c / n_w[w], rel=1e-6)
        assert table.lex_forward_[idx] == pytest.approx(lex_f[(t, w)], rel=1e-5)
        assert table.lex_inverse_[idx] == pytest.approx(lex_i[(t, w)], rel=1e-5)
    assert table.find([0, -1], [99999, 0]).tolist() == [-1, -1]
    # translations() lists the most probable target phrases first
    src = max(n_t, key=n_t.get)
    best = table.translations(list(src), k=3)
    probs = [pr for _, pr in best]
    assert probs == sorted(probs, reverse=True)
    assert best[0][1] == pytest.approx(max(c / n_t[src] for (t, _), c in counts.items()
                                           if t == src), rel=1e-6)


@pytest.mark.parametrize("n_parts", [2, 3, 7])
def test_the_tables_of_a_corpus_parts_merge_into_the_corpus_table(n_parts):
    """What a sharded index's translation fit gathers: each shard's table of its pairs,
    merged, is the table of all the pairs (counts exact, lexical weights to rounding: each
    part sums its own log-weights)."""
    rng = np.random.default_rng(n_parts)
    pairs = [(rng.integers(0, 30, rng.integers(1, 9)).tolist(),
              rng.integers(0, 30, rng.integers(1, 9)).tolist()) for _ in range(120)]
    corpus = ParallelCorpus.from_pairs(pairs, n_terms=30)
    ibm1 = IBMModel1(max_iter=4, tol=None).fit(corpus)
    whole = PhraseTable(max_length=4).fit(corpus, translation=ibm1)
    cuts = np.linspace(0, len(pairs), n_parts + 1).astype(int)
    parts = [PhraseTable(max_length=4).fit(corpus.select(np.arange(a, b)), translation=ibm1)
             for a, b in zip(cuts[:-1], cuts[1:])]
    merged = PhraseTable.merged(parts)
    for a, b in zip(merged.vocabulary_.level_keys, whole.vocabulary_.level_keys):
        np.testing.assert_array_equal(a, b)
    for name in ("pair_keys_", "counts_", "source_totals_", "target_totals_", "forward_",
                 "inverse_"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(whole, name))
    np.testing.assert_allclose(merged.lex_forward_, whole.lex_forward_, rtol=1e-5)
    np.testing.assert_allclose(merged.lex_inverse_, whole.lex_inverse_, rtol=1e-5)
    assert merged.n_occurrences_ == whole.n_occurrences_
    assert merged.get_params() == whole.get_params()
    vocab = whole.vocabulary_
    flat, starts, lengths = vocab.spans(np.arange(len(vocab)))
    assert [flat[a:a + n].tolist() for a, n in zip(starts, lengths)] == [
        vocab.terms(i) for i in range(len(vocab))]
    with pytest.raises(ValueError, match="share parameters and vocabulary"):
        PhraseTable.merged([whole, PhraseTable(max_length=3).fit(corpus, translation=ibm1)])


def test_phrase_table_state_roundtrip_and_errors():
    corpus = ParallelCorpus.from_pairs([([0, 1, 2], [1, 2]), ([2, 1], [0, 1, 2])])
    ibm1 = IBMModel1(max_iter=2, tol=None).fit(corpus)
    with pytest.raises(NotFittedError):
        PhraseTable().find([0], [0])
    with pytest.raises(ValueError, match=r"max_length must be an integer in \[1, 8\]; got 9"):
        PhraseTable(max_length=9).fit(corpus, translation=ibm1)
    table = PhraseTable().fit(corpus, translation=ibm1)
    meta, arrays = table.state()
    again = PhraseTable.from_state(table.get_params(), meta, arrays)
    for name in ("pair_keys_", "counts_", "forward_", "inverse_", "lex_forward_",
                 "lex_inverse_"):
        np.testing.assert_array_equal(getattr(again, name), getattr(table, name))
    assert again.vocabulary_.terms(len(again.vocabulary_) - 1) == \
        table.vocabulary_.terms(len(table.vocabulary_) - 1)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), n_terms=st.integers(1, 4), n_seq=st.integers(1, 6))
def test_span_ids_are_the_ngram_ids_of_those_spans(seed, n_terms, n_seq):
    """The phrase id of given spans (what the translation features look up now) is
    ngram_ids' value at each span, known or not, for every length up to the longest
    phrase and beyond it."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, n_seq)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = rng.integers(0, n_terms, int(offsets[-1]))
    # phrases: random spans of half the sequences (up to 3 words)
    starts, sizes = [], []
    for k in range(0, n_seq, 2):
        size = int(rng.integers(1, min(3, lengths[k]) + 1))
        starts.append(int(offsets[k] + rng.integers(0, lengths[k] - size + 1)))
        sizes.append(size)
    vocab, _ = PhraseVocabulary.build(n_terms, [(flat, np.array(starts), np.array(sizes))])
    L = vocab.max_length + 1
    table = vocab.ngram_ids(flat, offsets, L)
    spans = [(int(offsets[k] + p), n) for k in range(n_seq) for p in range(lengths[k])
             for n in range(1, min(L, lengths[k] - p) + 1)]
    got = vocab.span_ids(flat, np.array([p for p, _ in spans]), np.array([n for _, n in spans]))
    assert got.tolist() == [int(table[n - 1, p]) for p, n in spans]
