"""Significance of the difference between two systems evaluated on the same queries."""
from __future__ import annotations

import numpy as np

from ..exceptions import QueryError

__all__ = ["paired_ttest", "paired_interval", "randomization_test", "compare", "N_RESAMPLES"]

#: Resamples of the randomization test by default.
N_RESAMPLES = 10_000


def _paired(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores must be two 1-d arrays of the same length; got "
                         f"{a.shape} and {b.shape}")
    return a, b


def paired_ttest(a, b) -> float:
    """Two-sided p-value of the paired t-test (the papers' test); 1.0 when a == b."""
    a, b = _paired(a, b)
    if np.allclose(a, b):
        return 1.0
    from scipy import stats

    return float(stats.ttest_rel(a, b).pvalue)


def paired_interval(a, b, *, confidence=0.95) -> tuple:
    """The mean of ``a - b`` and its confidence interval (Student's t over the pairs).

    Returns
    -------
    mean, low, high : float
        ``low == high == mean`` when every difference is the same (or there is one pair).

    Examples
    --------
    >>> [round(v, 3) for v in paired_interval([0.5, 0.7, 0.9], [0.4, 0.5, 0.6])]
    [0.2, -0.048, 0.448]
    """
    a, b = _paired(a, b)
    d = a - b
    mean = float(d.mean()) if len(d) else float("nan")
    spread = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    if spread == 0.0:
        return mean, mean, mean
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, len(d) - 1)) * spread / np.sqrt(len(d))
    return mean, float(mean - half), float(mean + half)


def randomization_test(a, b, *, n_resamples=N_RESAMPLES, random_state=0) -> float:
    """Two-sided p-value of the paired randomization (permutation) test on the mean.

    Each query's two scores are swapped at random (``scipy.stats.permutation_test`` with
    ``permutation_type="samples"``); seeded, so the same inputs give the same p-value.
    """
    a, b = _paired(a, b)
    if np.allclose(a, b):
        return 1.0
    from scipy import stats

    res = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", n_resamples=n_resamples,
                                 alternative="two-sided", vectorized=True,
                                 random_state=np.random.default_rng(random_state))
    return float(res.pvalue)


def compare(per_query_a, per_query_b, *, metrics=None, n_resamples=N_RESAMPLES,
            random_state=0):
    """Means, difference and both p-values of system A vs B, per metric.

    The two per-query tables (from :func:`~cqa_search.evaluation.metrics.evaluate`) are
    aligned on their query ids; only shared queries are compared.

    Raises
    ------
    QueryError
        The tables share no query.
    """
    import pandas as pd

    shared = per_query_a.index.intersection(per_query_b.index)
    if not len(shared):
        raise QueryError("the two runs have no query in common: nothing to compare")
    metrics = list(per_query_a.columns) if metrics is None else list(metrics)
    rows = []
    for m in metrics:
        a, b = per_query_a.loc[shared, m].to_numpy(), per_query_b.loc[shared, m].to_numpy()
        rows.append({"metric": m, "a": a.mean(), "b": b.mean(), "diff": a.mean() - b.mean(),
                     "p_ttest": paired_ttest(a, b),
                     "p_randomization": randomization_test(a, b, n_resamples=n_resamples,
                                                           random_state=random_state),
                     "n_queries": len(shared)})
    return pd.DataFrame(rows).set_index("metric")
