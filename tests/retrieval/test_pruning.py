"""Candidate selection shortcuts against exhaustive scoring: the same rows, scores and
order (ties included), with and without a category filter."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.index.term_index import FieldIndex
from cqa_search.retrieval import BM25, LMDirichlet, top_k
from cqa_search.retrieval import candidates, pruning
from cqa_search.retrieval.base import accumulate
from cqa_search.retrieval.postings import locate


def random_field(rng, n_docs, n_terms, density):
    """A field with few distinct (tf, length) values, so scores tie often."""
    present = rng.random((n_docs, n_terms)) < density
    counts = np.where(present, rng.integers(1, 3, (n_docs, n_terms)), 0)
    indptr = np.concatenate([[0], np.cumsum(present.sum(axis=0))]).astype(np.int64)
    indices = np.concatenate([np.flatnonzero(present[:, t]) for t in range(n_terms)]
                             ).astype(np.int32)
    data = np.concatenate([counts[present[:, t], t] for t in range(n_terms)]).astype(np.int32)
    doc_len = np.maximum(counts.sum(axis=1), rng.integers(1, 4, n_docs)).astype(np.int32)
    sequence = np.zeros(int(doc_len.sum()), dtype=np.int32)
    return FieldIndex("question", indptr, indices, data, doc_len, sequence)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 400), n_terms=st.integers(1, 6),
       density=st.sampled_from([0.02, 0.2, 0.6]), k=st.integers(1, 25),
       filtered=st.booleans(), block_size=st.sampled_from([1, 4, 32]),
       first_round=st.sampled_from([1, 3, 64]), max_fraction=st.sampled_from([0.25, 1.0]))
def test_retrieve_equals_exhaustive_top_k(seed, n_docs, n_terms, density, k, filtered,
                                          block_size, first_round, max_fraction):
    rng = np.random.default_rng(seed)
    field = random_field(rng, n_docs, n_terms, density)
    model = BM25()
    term_ids = np.sort(rng.choice(n_terms, rng.integers(1, n_terms + 1), replace=False))
    qtf = rng.integers(1, 3, len(term_ids)).astype(float)
    doc_category = rng.integers(-1, 3, n_docs).astype(np.int32)
    category = int(rng.integers(0, 3)) if filtered else None
    tie_rank = rng.permutation(n_docs).astype(np.int32)
    scores, matched = model.score_all(field, term_ids, qtf)
    if filtered:
        matched &= doc_category == category
    expected = top_k(scores, k, allowed=matched, tie_rank=tie_rank)
    weights = model.posting_weights(field)
    pruning.register_block_max(field, model.cache_key(), pruning.block_max_arrays(
        field.indptr, field.indices, weights, block_size))
    for min_docs in (0, 1 << 62):            # block-max pruning, then postings only
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(pruning, "_FIRST_ROUND", first_round)
            mp.setattr(pruning, "_MAX_FRACTION", max_fraction)
            mp.setattr(candidates, "_PRUNE_MIN_DOCS", min_docs)
            rows, got = candidates.retrieve(model, field, term_ids, qtf, k,
                                            doc_category=doc_category, category=category,
                                            tie_rank=tie_rank)
        assert rows.tolist() == expected.tolist()
        assert got.tolist() == scores[expected].tolist()      # bit for bit


def test_pruned_top_k_prunes_and_breaks_ties_by_row(monkeypatch):
    """A term in every document and a rarer one in the first 16, all scores tied within
    each group: the pruned search scores a few blocks and returns rows 0-4."""
    n = 1000
    rows0, rows1 = np.arange(n), np.arange(16)
    field = FieldIndex("question", np.array([0, n, n + 16], dtype=np.int64),
                       np.concatenate([rows0, rows1]).astype(np.int32),
                       np.ones(n + 16, dtype=np.int32), np.full(n, 2, dtype=np.int32),
                       np.zeros(2 * n, dtype=np.int32))
    model = BM25()
    weights = model.posting_weights(field)
    bm = pruning.BlockMax.from_arrays(pruning.block_max_arrays(field.indptr, field.indices,
                                                               weights, 8))
    monkeypatch.setattr(pruning, "_FIRST_ROUND", 1)
    terms, coef = np.array([0, 1]), np.array([1.0, 1.0])
    found = pruning.pruned_top_k(bm, field.indices, weights, terms, coef, n, 5)
    assert found is not None
    rows, scores = found
    assert rows.tolist() == [0, 1, 2, 3, 4]
    assert scores.tolist() == accumulate(field, terms, coef, weights)[:5].tolist()
    # the frequent term alone: every block ties, nothing to prune, the caller scores
    # every posting
    assert pruning.pruned_top_k(bm, field.indices, weights, terms[:1], coef[:1], n, 5) is None


def test_retrieve_without_pruning_models_and_k_none():
    rng = np.random.default_rng(0)
    field = random_field(rng, 50, 4, 0.3)
    for model in (BM25(), LMDirichlet()):      # LM has a document part: never pruned
        scores, matched = model.score_all(field, np.array([0, 2]), np.array([1.0, 2.0]))
        for k in (3, None):
            rows, got = candidates.retrieve(model, field, np.array([0, 2]),
                                            np.array([1.0, 2.0]), k)
            assert rows.tolist() == top_k(scores, k, allowed=matched).tolist()
            assert got.tolist() == scores[rows].tolist()


def test_block_max_arrays_rejects_a_block_size_not_a_power_of_two():
    with pytest.raises(ValueError, match="block_size must be a power of two; got 3"):
        pruning.block_max_arrays(np.array([0, 1]), np.array([0]), np.ones(1, np.float32), 3)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 60), n_terms=st.integers(1, 8))
def test_locate_equals_a_search_per_term(seed, n_docs, n_terms):
    rng = np.random.default_rng(seed)
    field = random_field(rng, n_docs, n_terms, rng.random())
    terms = rng.choice(n_terms, rng.integers(1, n_terms + 1), replace=False)
    rows = rng.integers(0, n_docs, rng.integers(0, 2 * n_docs + 1))
    expected = []
    for j, t in enumerate(terms):
        postings = field.indices[field.indptr[t]:field.indptr[t + 1]].tolist()
        expected += [(field.indptr[t] + postings.index(r), i, j)
                     for i, r in enumerate(rows) if r in postings]
    got = locate(field.indptr, field.indices, terms, rows)
    assert list(zip(*[a.tolist() for a in got])) == expected
