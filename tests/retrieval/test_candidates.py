import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.retrieval import top_k


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
