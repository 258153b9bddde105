"""The batched posting look-up against a search per term."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import compiled
from cqa_search.retrieval.postings import _locate, locate

from .test_candidates import random_field


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 300), n_terms=st.integers(1, 8))
def test_locate_equals_a_search_per_term(seed, n_docs, n_terms):
    """Rows in any order, repeated or absent, posting lists long enough for the compiled
    search to gallop."""
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
    twins = [_locate(field.indptr, field.indices, terms, rows)]          # both paths
    if compiled.load():
        twins.append(compiled.locate(field.indptr, field.indices, terms, rows))
    for twin in twins:
        assert list(zip(*[a.tolist() for a in twin])) == expected
    again = locate(field.indptr, field.indices, terms, rows)      # the kept result
    assert [a.tolist() for a in again] == [a.tolist() for a in got]
