"""The hybrid first stage: merging a term top list and a dense top list, against scoring
the whole archive."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.retrieval import BM25, top_k
from cqa_search.retrieval.hybrid import hybrid_scores, merge


def whole_archive(term, dense, a, n, tie_rank, allowed=None):
    """The oracle: every row scored by the hybrid formula, top n."""
    s = hybrid_scores(term, dense, a, term[allowed].max() if allowed is not None
                      else term.max())
    return top_k(s, n, allowed=allowed, tie_rank=tie_rank), s


def lists(term, dense, m, tie_rank, allowed=None):
    """The two top-m lists a first stage gives: term rows that match (score > 0)."""
    matched = term > 0 if allowed is None else (term > 0) & allowed
    t_rows = top_k(term, m, allowed=matched, tie_rank=tie_rank)
    d_rows = top_k(dense, m, allowed=allowed, tie_rank=tie_rank)
    return t_rows, d_rows, len(t_rows) == matched.sum(), \
        len(d_rows) == (len(dense) if allowed is None else allowed.sum())


@settings(max_examples=300, deadline=None)
@given(n_docs=st.integers(1, 60), n=st.integers(1, 12), m_factor=st.integers(1, 3),
       a=st.sampled_from([0.0, 0.2, 0.35, 0.5, 1.0]), seed=st.integers(0, 10_000),
       filtered=st.booleans())
def test_merge_is_the_whole_archive_top_when_it_says_exact(n_docs, n, m_factor, a, seed,
                                                           filtered):
    rng = np.random.default_rng(seed)
    # few distinct values: ties are frequent
    term = np.where(rng.random(n_docs) < 0.5, rng.integers(0, 4, n_docs) * 1.5, 0.0)
    dense = rng.integers(-2, 6, n_docs) / 5.0
    tie_rank = rng.permutation(n_docs)
    allowed = rng.random(n_docs) < 0.7 if filtered else None
    if allowed is not None and not allowed.any():
        allowed[0] = True
    m = n * m_factor
    t_rows, d_rows, t_complete, d_complete = lists(term, dense, m, tie_rank, allowed)
    got = merge(t_rows, term[t_rows], d_rows, dense[d_rows], n, a=a,
                term_of=lambda r: term[r], dense_of=lambda r: dense[r],
                term_complete=t_complete, dense_complete=d_complete, tie_rank=tie_rank)
    # the scores are the formula's, the rows sorted by (-score, tie rank)
    term_max = term[t_rows[0]] if len(t_rows) else 0.0
    np.testing.assert_allclose(got.scores, hybrid_scores(term[got.rows], dense[got.rows], a,
                                                         term_max))
    np.testing.assert_array_equal(got.term_scores, term[got.rows])
    np.testing.assert_array_equal(got.dense_scores, dense[got.rows])
    keys = list(zip(-got.scores, tie_rank[got.rows]))
    assert keys == sorted(keys)
    assert len(got.rows) == min(n, len(np.union1d(t_rows, d_rows)))
    if got.exact:
        expected, _ = whole_archive(term, dense, a, n, tie_rank, allowed)
        if not len(t_rows):  # no row matches: the term part is 0 everywhere
            expected = top_k(a * dense, n, allowed=allowed, tie_rank=tie_rank)
        assert got.rows.tolist() == expected.tolist()
    # lists as deep as the archive: always exact
    if m >= n_docs:
        assert got.exact


def test_merge_computes_the_missing_parts_and_fills_to_n():
    term = np.array([5.0, 0.0, 2.5, 0.0, 1.0])
    dense = np.array([0.1, 0.9, 0.2, 0.8, 0.0])
    asked = []

    def term_of(rows):
        asked.append(("term", rows.tolist()))
        return term[rows]

    def dense_of(rows):
        asked.append(("dense", rows.tolist()))
        return dense[rows]

    got = merge([0, 2], term[[0, 2]], [1, 3], dense[[1, 3]], 3, a=0.5, term_of=term_of,
                dense_of=dense_of)
    assert sorted(asked) == [("dense", [0, 2]), ("term", [1, 3])]
    # s = 0.5 * T / 5 + 0.5 * cos: rows 0 (0.55), 1 (0.45), 3 (0.4), 2 (0.35)
    assert got.rows.tolist() == [0, 1, 3]
    np.testing.assert_allclose(got.scores, [0.55, 0.45, 0.4])
    assert got.term_max == 5.0
    with pytest.raises(ValueError, match="a must be in"):
        merge([0], [1.0], [1], [0.5], 1, a=1.5, term_of=term_of, dense_of=dense_of)


def test_merge_with_bm25_over_an_index(toy_engine):
    """The term scores a merge computes are BM25's own over the index (score_rows)."""
    field = toy_engine.index["question"]
    q = toy_engine.analyze("visa renewal office")
    model = BM25()
    scores, matched = model.score_all(field, q.term_ids, q.qtf)
    rng = np.random.default_rng(0)
    dense = rng.random(field.n_docs)
    t_rows = top_k(scores, 2, allowed=matched)
    d_rows = top_k(dense, 2)
    got = merge(t_rows, scores[t_rows], d_rows, dense[d_rows], None, a=0.3,
                term_of=lambda r: model.score_rows(field, q.term_ids, q.qtf, r),
                dense_of=lambda r: dense[r])
    np.testing.assert_allclose(got.term_scores, scores[got.rows])
