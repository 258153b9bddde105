"""Synthetic judged rankings generated from known models, for the ranking tests."""
import numpy as np
import pytest


def make_rankings(w, *, n_queries=80, n_per_query=12, n_relevant=4, noise=0.05, seed=0,
                  score=None):
    """Queries of candidates with N(0, 1) features; in each query the ``n_relevant``
    candidates of highest ``score(X)`` (default ``X @ w``) plus noise are relevant."""
    rng = np.random.default_rng(seed)
    n = n_queries * n_per_query
    X = rng.normal(size=(n, len(w)))
    qid = np.repeat([f"q{i:03d}" for i in range(n_queries)], n_per_query)
    s = (X @ np.asarray(w, dtype=float) if score is None else score(X)) \
        + noise * rng.normal(size=n)
    y = np.zeros(n)
    for i in range(n_queries):
        block = slice(i * n_per_query, (i + 1) * n_per_query)
        top = np.argsort(-s[block])[:n_relevant]
        y[block][top] = 1.0
    return X, y, qid


@pytest.fixture
def rankings():
    """:func:`make_rankings`."""
    return make_rankings


@pytest.fixture
def cosine():
    return lambda a, b: float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
