"""TextRank (eq. 16) against a per-document plain-loop PageRank."""
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.translation import textrank_filter, textrank_scores


def naive_textrank(doc, window, d=0.85, tol=1e-4, max_iter=100):
    """Scores of the distinct words of one document, by eq. 16 with dicts."""
    edges = defaultdict(float)
    for i, a in enumerate(doc):
        for j in range(i + 1, min(i + window, len(doc))):
            if doc[j] != a:
                edges[(a, doc[j])] += 1
                edges[(doc[j], a)] += 1
    words = list(dict.fromkeys(doc))
    out = {w: sum(e for (a, _), e in edges.items() if a == w) for w in words}
    score = dict.fromkeys(words, 1.0)
    for _ in range(max_iter):
        new = {w: (1 - d) + d * sum(e / out[v] * score[v] for (v, x), e in edges.items() if x == w)
               for w in words}
        delta = max((abs(new[w] - score[w]) for w in words), default=0.0)
        score = new
        if delta <= tol:
            break
    return score


docs_strategy = st.lists(st.lists(st.integers(0, 9), min_size=0, max_size=12), min_size=1,
                         max_size=6)


@settings(max_examples=60, deadline=None)
@given(docs=docs_strategy, window=st.integers(2, 4))
def test_scores_and_filter_match_plain_loops(docs, window):
    tokens = np.array([t for d in docs for t in d], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    vertex, scores, vertex_doc = textrank_scores(tokens, offsets, window=window)
    kept, kept_offsets = textrank_filter(tokens, offsets, window=window)
    for k, doc in enumerate(docs):
        ref = naive_textrank(doc, window)
        toks = tokens[offsets[k]:offsets[k + 1]]
        got = scores[vertex[offsets[k]:offsets[k + 1]]]
        # the iteration stops on the global largest change: compare at its tolerance
        np.testing.assert_allclose(got, [ref[t] for t in toks], atol=2e-3)
        mean = np.mean(list(ref.values())) if ref else 0
        expected = [t for t in doc if ref[t] >= mean - 1e-3 or abs(ref[t] - mean) < 2e-3]
        strict = [t for t in doc if ref[t] >= mean + 2e-3]
        got_kept = kept[kept_offsets[k]:kept_offsets[k + 1]].tolist()
        # every clearly-above-average word is kept, every clearly-below one dropped
        assert set(strict) <= set(got_kept) <= set(expected)
        assert got_kept == [t for t in doc if t in set(got_kept)]   # order kept


def test_hub_word_is_kept_and_leaves_dropped():
    kept, off = textrank_filter(np.array([1, 2, 1, 3, 1, 4, 1, 5]), np.array([0, 8]), window=2)
    assert kept.tolist() == [1, 1, 1, 1] and off.tolist() == [0, 4]


def test_uniform_documents_keep_everything():
    # a single word, a repeated word, and a symmetric chain all score the average
    tokens = np.array([7, 3, 3, 3, 5, 6])
    kept, off = textrank_filter(tokens, np.array([0, 1, 4, 6]), window=2)
    assert kept.tolist() == [7, 3, 3, 3, 5, 6] and off.tolist() == [0, 1, 4, 6]


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="window must be an integer >= 2; got 1"):
        textrank_scores(np.array([1, 2]), np.array([0, 2]), window=1)
    with pytest.raises(ValueError, match=r"damping must be in \(0, 1\); got 1"):
        textrank_scores(np.array([1, 2]), np.array([0, 2]), damping=1)
