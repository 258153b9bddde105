import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import compiled
from cqa_search.retrieval import top_k
from cqa_search.retrieval.candidates import _postings_top_k


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0]), min_size=1, max_size=30),
       k=st.integers(1, 35), seed=st.integers(0, 10))
def test_top_k_equals_full_sort_with_ties_by_rank(scores, k, seed):
    scores = np.array(scores)
    rng = np.random.default_rng(seed)
    tie_rank = rng.permutation(len(scores))
    allowed = rng.random(len(scores)) < 0.7
    expected = sorted(np.flatnonzero(allowed), key=lambda r: (-scores[r], tie_rank[r]))[:k]
    assert top_k(scores, k, allowed=allowed, tie_rank=tie_rank).tolist() == expected
    assert top_k(scores, None, allowed=np.flatnonzero(allowed), tie_rank=tie_rank).tolist() == \
        sorted(np.flatnonzero(allowed), key=lambda r: (-scores[r], tie_rank[r]))


# -- top_k_of_model: the top k chosen among the postings, against exhaustive top_k -----
def random_field(rng, n_docs, n_terms, density):
    """A field with few distinct (tf, length) values, so scores tie often."""
    from cqa_search.index.term_index import FieldIndex

    present = rng.random((n_docs, n_terms)) < density
    counts = np.where(present, rng.integers(1, 3, (n_docs, n_terms)), 0)
    indptr = np.concatenate([[0], np.cumsum(present.sum(axis=0))]).astype(np.int64)
    indices = np.concatenate([np.flatnonzero(present[:, t]) for t in range(n_terms)]
                             ).astype(np.int32)
    data = np.concatenate([counts[present[:, t], t] for t in range(n_terms)]).astype(np.int32)
    doc_len = np.maximum(counts.sum(axis=1), rng.integers(1, 4, n_docs)).astype(np.int32)
    return FieldIndex("question", indptr, indices, data, doc_len,
                      np.zeros(int(doc_len.sum()), dtype=np.int32))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 400), n_terms=st.integers(1, 30),
       density=st.sampled_from([0.02, 0.2, 0.6]), k=st.integers(1, 25),
       filtered=st.booleans(), deleted=st.sampled_from([None, 0.1, 0.9]),
       window=st.sampled_from([1, 2, 3, 16, 64, compiled.WINDOW]))
def test_top_k_of_model_equals_exhaustive_top_k(seed, n_docs, n_terms, density, k, filtered,
                                                deleted, window):
    from cqa_search.retrieval import BM25
    from cqa_search.retrieval.candidates import top_k_of_model

    rng = np.random.default_rng(seed)
    field = random_field(rng, n_docs, n_terms, density)
    model = BM25()
    term_ids = rng.choice(n_terms, rng.integers(1, n_terms + 1), replace=False)  # query order
    qtf = rng.integers(1, 3, len(term_ids)).astype(float)
    doc_category = rng.integers(-1, 3, n_docs).astype(np.int32)
    category = int(rng.integers(0, 3)) if filtered else None
    tie_rank = rng.permutation(n_docs).astype(np.int32)
    allowed = None if deleted is None else rng.random(n_docs) >= deleted
    scores, matched = model.score_all(field, term_ids, qtf)
    if filtered:
        matched &= doc_category == category
    if allowed is not None:
        matched &= allowed
    expected = top_k(scores, k, allowed=matched, tie_rank=tie_rank)
    rows, got = top_k_of_model(model, field, term_ids, qtf, k, doc_category=doc_category,
                               category=category, allowed=allowed, tie_rank=tie_rank)
    assert rows.tolist() == expected.tolist()
    assert got.tolist() == scores[expected].tolist()            # bit for bit
    # both twins of the pruned path, whichever top_k_of_model() took
    args = (term_ids, model._query_weights(field, term_ids, qtf), model.posting_weights(field))
    rows, got = _postings_top_k(field, *args, k, doc_category, category, allowed, tie_rank)
    assert rows.tolist() == expected.tolist() and got.tolist() == scores[expected].tolist()
    if compiled.load():  # the compiled twin, its rows summed `window` at a time
        filters = dict(doc_category=doc_category, category=category, allowed=allowed)
        saved, compiled.WINDOW = compiled.WINDOW, window
        try:
            for ties in (tie_rank, None):
                want = top_k(scores, k, allowed=matched, tie_rank=ties)
                rows, got = compiled.top_k_of_postings(field.indptr, field.indices, args[2],
                                                       term_ids, args[1], k, n_docs=n_docs,
                                                       tie_rank=ties, **filters)
                assert rows.tolist() == want.tolist()
                assert got.tolist() == scores[want].tolist()
            # query weights that float32 rounds, some far apart: the same products and
            # sums as numpy's
            coef = rng.random(len(term_ids)) * 3 + 0.1
            coef[rng.random(len(coef)) < 0.3] *= 50
            want = _postings_top_k(field, term_ids, coef, args[2], k, doc_category, category,
                                   allowed, tie_rank)
            got = compiled.top_k_of_postings(field.indptr, field.indices, args[2], term_ids,
                                             coef, k, n_docs=n_docs, tie_rank=tie_rank,
                                             **filters)
            assert [a.tolist() for a in got] == [a.tolist() for a in want]
            assert not compiled._workspace.acc.any()  # left zeroed for the next query
        finally:
            compiled.WINDOW = saved


def test_top_k_of_model_of_other_models_and_of_every_match():
    from cqa_search.retrieval import BM25, LMDirichlet
    from cqa_search.retrieval.candidates import top_k_of_model

    field = random_field(np.random.default_rng(0), 50, 4, 0.3)
    terms, qtf = np.array([0, 2]), np.array([1.0, 2.0])
    for model in (BM25(), LMDirichlet()):      # LM has a document part: the reference path
        scores, matched = model.score_all(field, terms, qtf)
        for k in (3, None):
            rows, got = top_k_of_model(model, field, terms, qtf, k)
            assert rows.tolist() == top_k(scores, k, allowed=matched).tolist()
            assert got.tolist() == scores[rows].tolist()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(50, 3000), k=st.integers(1, 12),
       window=st.sampled_from([16, 64, 256, compiled.WINDOW]), qtf2=st.booleans())
def test_compiled_top_k_pruning_common_terms_equals_exhaustive(seed, n_docs, k, window, qtf2):
    """Queries of rare terms and common ones (the MaxScore case: the common terms go out of
    the sums once k hits are kept): the kernel's hits, scores and tie order are exhaustive
    scoring's, and it leaves the largest weight of each query term in ``largest``."""
    from cqa_search.index.term_index import FieldIndex
    from cqa_search.retrieval import BM25
    from cqa_search.retrieval.candidates import top_k_of_model

    if not compiled.load():
        return
    rng = np.random.default_rng(seed)
    density = np.array([0.01, 0.03, 0.1, 0.5, 0.9, 0.95])
    present = rng.random((n_docs, len(density))) < density
    counts = np.where(present, rng.integers(1, 4, present.shape), 0)
    indptr = np.concatenate([[0], np.cumsum(present.sum(axis=0))]).astype(np.int64)
    indices = np.concatenate([np.flatnonzero(present[:, t]) for t in range(len(density))]
                             ).astype(np.int32)
    data = np.concatenate([counts[present[:, t], t] for t in range(len(density))]
                          ).astype(np.int32)
    doc_len = (counts.sum(axis=1) + rng.integers(0, 3, n_docs)).astype(np.int32)
    field = FieldIndex("question", indptr, indices, data, np.maximum(doc_len, 1),
                       np.zeros(int(np.maximum(doc_len, 1).sum()), dtype=np.int32))
    model = BM25()
    term_ids = rng.permutation(len(density))[:rng.integers(2, len(density) + 1)]
    qtf = (rng.integers(1, 3, len(term_ids)) if qtf2 else np.ones(len(term_ids))).astype(float)
    usable, uqtf = model._usable(field, term_ids, qtf)
    df = field.df[usable]
    assert (np.diff(df) >= 0).all()  # rarest first: the order of every sum
    tie_rank = rng.permutation(n_docs).astype(np.int32)
    scores, matched = model.score_all(field, term_ids, qtf)
    weights = model.posting_weights(field)
    saved, compiled.WINDOW = compiled.WINDOW, window
    try:
        for ties in (tie_rank, None):
            largest = np.full(field.n_terms, -1.0, dtype=np.float32)
            want = top_k(scores, k, allowed=matched, tie_rank=ties)
            rows, got = compiled.top_k_of_postings(
                field.indptr, field.indices, weights, usable, uqtf, k, n_docs=n_docs,
                tie_rank=ties, largest=largest)
            assert rows.tolist() == want.tolist()
            assert got.tolist() == scores[want].tolist()  # bit for bit
            for t in range(field.n_terms):
                part = weights[indptr[t]:indptr[t + 1]]
                assert largest[t] == ((part.max() if len(part) else 0.0) if t in usable
                                      else -1.0)
        rows, got = top_k_of_model(model, field, term_ids, qtf, k, tie_rank=tie_rank)
        want = top_k(scores, k, allowed=matched, tie_rank=tie_rank)
        assert rows.tolist() == want.tolist() and got.tolist() == scores[want].tolist()
        assert not compiled._workspace.acc.any()
    finally:
        compiled.WINDOW = saved
