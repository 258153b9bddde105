"""IBM Model 1: NLTK's results, a plain-loop EM reference, likelihood, pruning, storage."""
import math
import warnings
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.exceptions import ConvergenceWarning, NotFittedError
from cqa_search.translation import IBMModel1, ParallelCorpus

# NLTK's documented toy bitext: (target = German words, source = English mots)
BITEXT = [(["klein", "ist", "das", "haus"], ["the", "house", "is", "small"]),
          (["das", "haus", "ist", "ja", "groß"], ["the", "house", "is", "big"]),
          (["das", "buch", "ist", "ja", "klein"], ["the", "book", "is", "small"]),
          (["das", "haus"], ["the", "house"]),
          (["das", "buch"], ["the", "book"]),
          (["ein", "buch"], ["a", "book"])]


def toy_corpus():
    vocab = {}
    for words, mots in BITEXT:
        for w in mots + words:
            vocab.setdefault(w, len(vocab))
    corpus = ParallelCorpus.from_pairs([([vocab[w] for w in mots], [vocab[w] for w in words])
                                        for words, mots in BITEXT])
    return corpus, vocab


def naive_em(pairs, n_terms, n_iter):
    """IBM Model 1 EM with dicts and loops (the textbook algorithm), NULL = None."""
    targets = {t for _, tgt in pairs for t in tgt}
    p = defaultdict(lambda: 1.0 / len(targets))
    lls = []
    for it in range(n_iter + 1):
        counts, totals, ll = defaultdict(float), defaultdict(float), 0.0
        for src, tgt in pairs:
            sources = [None] + list(src)
            for t in tgt:
                z = sum(p[(s, t)] for s in sources)
                ll += math.log(z / len(sources))
                for s in sources:
                    c = p[(s, t)] / z
                    counts[(s, t)] += c
                    totals[s] += c
        lls.append(ll)
        if it == n_iter:
            break
        p = defaultdict(float, {(s, t): c / totals[s] for (s, t), c in counts.items()})
    return dict(p), lls


def test_matches_nltk_documented_values():
    corpus, v = toy_corpus()
    p = IBMModel1(max_iter=5, tol=None, min_prob=0).fit(corpus).translation_probs_
    # nltk.translate.ibm1 doctest, rounded to 3 places
    assert round(float(p[1 + v["book"], v["buch"]]), 3) == 0.889
    assert round(float(p[1 + v["book"], v["das"]]), 3) == 0.062
    assert round(float(p[0, v["buch"]]), 3) == 0.113
    assert round(float(p[0, v["ja"]]), 3) == 0.073


@pytest.mark.parametrize("n_iter", [1, 2, 5, 10])
def test_matches_nltk_ibm1_to_1e6(n_iter):
    translate = pytest.importorskip("nltk.translate")
    corpus, v = toy_corpus()
    bitext = [translate.AlignedSent(words, mots) for words, mots in BITEXT]
    reference = translate.IBMModel1(bitext, n_iter)
    model = IBMModel1(max_iter=n_iter, tol=None, min_prob=0).fit(corpus)
    p = model.translation_probs_.toarray().astype(np.float64)
    n_checked = 0
    for t, row in reference.translation_table.items():
        for s, value in row.items():
            assert abs(p[0 if s is None else 1 + v[s], v[t]] - value) < 1e-6
            n_checked += 1
    assert n_checked == model.n_cooccurrences_ == 47  # the same support: co-occurring pairs
    # and the Viterbi alignments (eq. 9) are NLTK's, ties included
    positions, _ = model.align(corpus)
    for k, sentence in enumerate(bitext):
        mine = positions[corpus.target_offsets[k]:corpus.target_offsets[k + 1]]
        assert sorted(sentence.alignment) == [(j, None if i < 0 else int(i))
                                              for j, i in enumerate(mine)]


pairs_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 6), min_size=0, max_size=6),
              st.lists(st.integers(0, 6), min_size=1, max_size=6)),
    min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(pairs=pairs_strategy, n_iter=st.integers(1, 4))
def test_vectorised_em_matches_plain_loops(pairs, n_iter):
    corpus = ParallelCorpus.from_pairs(pairs, n_terms=7)
    model = IBMModel1(max_iter=n_iter, tol=None, min_prob=0).fit(corpus)
    expected, lls = naive_em(pairs, 7, n_iter)
    p = model.translation_probs_.toarray()
    for (s, t), value in expected.items():
        assert p[0 if s is None else 1 + s, t] == pytest.approx(value, abs=1e-6)
    np.testing.assert_allclose(model.log_likelihood_, lls, rtol=1e-9, atol=1e-9)
    # log-likelihood never falls; rows are distributions
    assert np.all(np.diff(model.log_likelihood_) >= -1e-9 * np.abs(model.log_likelihood_[1:]))
    np.testing.assert_allclose(np.asarray(model.translation_probs_.sum(axis=1)).ravel(), 1,
                               rtol=1e-6)


def test_unseen_sources_translate_to_themselves_and_rows_sum_to_one():
    corpus = ParallelCorpus.from_pairs([([0, 1], [2, 3]), ([1], [3])], n_terms=5)
    model = IBMModel1(max_iter=3, tol=None).fit(corpus)
    p = model.translation_probs_
    assert p.shape == (6, 5) and model.n_identity_rows_ == 3   # terms 2, 3, 4 never sources
    for s in (2, 3, 4):
        assert p[1 + s, s] == 1.0 and p[1 + s].nnz == 1
    np.testing.assert_allclose(np.asarray(p.sum(axis=1)).ravel(), 1, rtol=1e-6)


def test_pruning_keeps_each_row_maximum_and_renormalises():
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(0, 30, 8), rng.integers(0, 30, 8)) for _ in range(40)]
    full = IBMModel1(max_iter=3, tol=None, min_prob=0).fit(pairs).translation_probs_.toarray()
    pruned = IBMModel1(max_iter=3, tol=None, min_prob=0.05).fit(pairs).translation_probs_
    dense = pruned.toarray()
    assert pruned.nnz < np.count_nonzero(full)
    for r in range(full.shape[0]):
        kept = full[r] >= 0.05
        kept[np.argmax(full[r])] = True
        assert np.array_equal(dense[r] > 0, kept)
        np.testing.assert_allclose(dense[r][kept], full[r][kept] / full[r][kept].sum(),
                                   rtol=1e-5)


def test_convergence_and_warnings():
    corpus, _ = toy_corpus()
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1"):
        IBMModel1(max_iter=1, tol=1e-12).fit(corpus)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = IBMModel1(max_iter=1, tol=None).fit(corpus)          # fixed iterations
        assert model.n_iter_ == 1 and len(model.log_likelihood_) == 2
        model = IBMModel1(max_iter=500, tol=1e-3).fit(corpus)        # converges early
    assert model.n_iter_ < 500
    gains = np.diff(model.log_likelihood_)
    assert gains[-1] <= 1e-3 * abs(model.log_likelihood_[-2]) < gains[-2]


def test_parameter_validation_and_not_fitted():
    corpus, _ = toy_corpus()
    with pytest.raises(ValueError, match=r"max_iter must be an integer in \[1, inf\); got 0"):
        IBMModel1(max_iter=0).fit(corpus)
    with pytest.raises(ValueError, match=r"tol must be \{None\} or a number in \[0, inf\); "
                                         r"got -1"):
        IBMModel1(tol=-1).fit(corpus)
    with pytest.raises(ValueError, match=r"min_prob must be a number in \[0, 1\); got 1"):
        IBMModel1(min_prob=1).fit(corpus)
    with pytest.raises(TypeError, match="X must be a ParallelCorpus"):
        IBMModel1().fit("not a corpus")
    with pytest.raises(NotFittedError, match="not fitted yet"):
        IBMModel1().align(corpus)


def test_state_roundtrip_and_prob():
    corpus, v = toy_corpus()
    model = IBMModel1(max_iter=4, tol=None).fit(corpus)
    meta, arrays = model.state()
    assert all(a.dtype.kind in "if" for a in arrays.values())
    again = IBMModel1.from_state(model.get_params(), meta, arrays)
    assert (again.translation_probs_ != model.translation_probs_).nnz == 0
    assert again.log_likelihood_ == model.log_likelihood_ and again.n_iter_ == 4
    probs = again.prob([v["book"], -1, v["the"]], [v["buch"], v["ja"], v["klein"]])
    dense = model.translation_probs_.toarray()
    np.testing.assert_allclose(probs, [dense[1 + v["book"], v["buch"]], dense[0, v["ja"]],
                                       dense[1 + v["the"], v["klein"]]])


def test_align_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    pairs = [(rng.integers(0, 12, rng.integers(0, 7)), rng.integers(0, 12, rng.integers(1, 7)))
             for _ in range(30)]
    corpus = ParallelCorpus.from_pairs(pairs, n_terms=12)
    model = IBMModel1(max_iter=3, tol=None, min_prob=0.02).fit(corpus)
    p = model.translation_probs_.toarray()
    positions, probs = model.align(corpus)
    at = 0
    for src, tgt in pairs:
        for t in tgt:
            best, best_p = -1, p[0, t]
            for i, s in enumerate(src):
                if p[1 + s, t] > 0 and p[1 + s, t] >= best_p:
                    best, best_p = i, p[1 + s, t]
            assert positions[at] == best and probs[at] == pytest.approx(max(best_p, 0))
            at += 1
