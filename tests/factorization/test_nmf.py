"""NMF and the batched NNLS: monotone objective, exact recovery, scikit-learn agreement, fold-in."""
import warnings

import numpy as np
import pytest
import scipy.optimize as sopt
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import NMF as SklearnNMF

from cqa_search.exceptions import ConvergenceWarning, NotFittedError
from cqa_search.factorization import NMF, nnls_gram
from cqa_search.factorization.nnls import GramFactor


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fn(*args, **kwargs)


def _low_rank(seed, n_terms=40, n_docs=60, k=4):
    rng = np.random.default_rng(seed)
    U = rng.random((n_terms, k)) * (rng.random((n_terms, k)) < 0.5)
    V = rng.random((k, n_docs)) * (rng.random((k, n_docs)) < 0.6)
    return U @ V


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("density", [0.05, 0.3])
def test_objective_never_increases_and_matches_a_dense_recomputation(seed, density):
    D = sp.random(50, 80, density=density, random_state=seed, format="csc")
    model = NMF(6, max_iter=60, tol=0, random_state=seed).fit(D)
    curve = np.concatenate([[model.initial_loss_], model.loss_curve_])
    assert np.all(np.diff(curve) <= 1e-12 * curve[0])
    dense = D.toarray()
    expected = np.sum((dense - model.U_ @ model.V_) ** 2) / np.sum(dense ** 2)
    assert model.loss_curve_[-1] == pytest.approx(expected, rel=1e-9)
    assert model.n_iter_ == 60 and model.U_.min() >= 0 and model.V_.min() >= 0
    np.testing.assert_allclose(np.linalg.norm(model.U_, axis=0), 1.0)


def test_recovers_an_exact_non_negative_low_rank_matrix():
    D = _low_rank(0)
    model = NMF(4, max_iter=3000, tol=0, random_state=0).fit(sp.csc_matrix(D))
    assert np.linalg.norm(D - model.U_ @ model.V_) / np.linalg.norm(D) < 2e-3
    assert model.loss_curve_[-1] < 1e-5


@pytest.mark.parametrize("n_iter", [1, 10, 100])
def test_objective_within_one_percent_of_scikit_learn_mu(n_iter):
    D = sp.random(300, 500, density=0.05, random_state=2, format="csc")
    rng = np.random.default_rng(0)
    U0, V0 = rng.random((300, 10)), rng.random((10, 500))
    ours = NMF(10, init="custom", max_iter=n_iter, tol=0).fit(D, U=U0, V=V0)
    ref = SklearnNMF(10, solver="mu", beta_loss="frobenius", init="custom", max_iter=n_iter,
                     tol=0)
    W = _quiet(ref.fit_transform, sp.csr_matrix(D.T), W=V0.T.copy(), H=U0.T.copy())
    theirs = np.sum((D.T.toarray() - W @ ref.components_) ** 2) / np.sum(D.data ** 2)
    assert abs(ours.loss_curve_[-1] - theirs) <= 0.01 * theirs


def test_folding_a_training_column_in_reproduces_its_coefficients():
    D = sp.csc_matrix(_low_rank(1))
    model = NMF(4, max_iter=3000, tol=0, random_state=0).fit(D)
    V = model.transform(D[:, :10])
    np.testing.assert_allclose(V, model.V_[:, :10], atol=0.02 * model.V_.max())


def test_dense_and_sparse_input_and_seeds():
    D = sp.random(30, 40, density=0.3, random_state=0, format="csr")
    a = _quiet(NMF(3, max_iter=20, random_state=7).fit, D)
    b = _quiet(NMF(3, max_iter=20, random_state=7).fit, D.toarray())
    c = _quiet(NMF(3, max_iter=20, random_state=np.random.default_rng(7)).fit, D)
    np.testing.assert_array_equal(a.U_, b.U_)
    np.testing.assert_array_equal(a.V_, c.V_)
    d = _quiet(NMF(3, max_iter=20, random_state=8).fit, D)
    assert not np.array_equal(a.U_, d.U_)
    np.testing.assert_array_equal(a.components_, a.U_.T)


def test_stops_on_tolerance_and_warns_at_max_iter():
    D = sp.random(30, 40, density=0.3, random_state=0, format="csc")
    with pytest.warns(ConvergenceWarning, match="NMF stopped at max_iter=1"):
        NMF(3, max_iter=1, random_state=0).fit(D)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = NMF(3, max_iter=1000, tol=1e-3, random_state=0).fit(D)
    assert model.n_iter_ < 1000
    rel = (model.loss_curve_[-2] - model.loss_curve_[-1]) / model.loss_curve_[-2]
    assert rel < 1e-3


def test_parameter_validation_and_not_fitted():
    D = sp.random(10, 10, density=0.5, random_state=0, format="csc")
    with pytest.raises(ValueError, match=r"n_components must be an integer in \[1, inf\); got 0"):
        NMF(0).fit(D)
    with pytest.raises(ValueError, match=r"init must be \{'random', 'custom'\}; got 'nndsvd2'"):
        NMF(2, init="nndsvd2").fit(D)
    with pytest.raises(ValueError, match="random_state must be"):
        NMF(2, random_state="seed").fit(D)
    with pytest.raises(ValueError, match="non-negative"):
        NMF(2).fit(-D)
    with pytest.raises(ValueError, match="init='custom' needs"):
        NMF(2, init="custom").fit(D)
    with pytest.raises(ValueError, match=r"V must have shape \(2, 10\)"):
        NMF(2, init="custom").fit(D, U=np.ones((10, 2)), V=np.ones((3, 10)))
    with pytest.raises(NotFittedError):
        NMF(2).transform(D)


# -- non-negative least squares -----------------------------------------------------------
def _check_nnls(U, Q):
    X = nnls_gram(U.T @ U, U.T @ Q)
    for j in range(Q.shape[1]):
        ref, _ = sopt.nnls(U, Q[:, j])
        # compare objective values (unique minimiser only for full column rank)
        ours = np.sum((U @ X[:, j] - Q[:, j]) ** 2)
        best = np.sum((U @ ref - Q[:, j]) ** 2)
        assert ours <= best + 1e-9 * max(1.0, best)
    assert X.min() >= 0
    return X


def test_nnls_matches_scipy():
    rng = np.random.default_rng(0)
    U = rng.random((50, 8))
    Q = rng.random((50, 40)) - 0.3
    X = _check_nnls(U, Q)
    ref = np.column_stack([sopt.nnls(U, Q[:, j])[0] for j in range(Q.shape[1])])
    np.testing.assert_allclose(X, ref, atol=1e-10)


def test_nnls_degenerate_columns():
    rng = np.random.default_rng(1)
    U = rng.random((30, 6))
    U[:, 2] = 0.0                     # a dead topic
    U[:, 4] = U[:, 3]                 # two identical topics
    Q = rng.random((30, 25))
    X = _check_nnls(U, Q)
    assert np.all(X[2] == 0)
    assert np.all(nnls_gram(U.T @ U, -np.abs(U.T @ Q)) == 0)  # nothing positive to explain


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(1, 30))
def test_nnls_property(seed, k, n):
    rng = np.random.default_rng(seed)
    U = rng.random((k + 10, k)) * (rng.random((k + 10, k)) < 0.7)
    Q = rng.normal(size=(k + 10, n))
    _check_nnls(U, Q)


def test_gram_factor_matches_scipy_nnls():
    rng = np.random.default_rng(3)
    U = rng.random((40, 9)) * (rng.random((40, 9)) < 0.4)
    U[:, 1] = 0.0                     # a dead topic
    U[:, 5] = U[:, 4]                 # collinear topics
    factor = GramFactor(U.T @ U)
    for _ in range(20):
        q = rng.random(40) * (rng.random(40) < 0.3)
        x = factor.solve(U.T @ q)
        ref, _ = sopt.nnls(U, q)
        assert x.min() >= 0 and x[1] == 0
        assert np.sum((U @ x - q) ** 2) <= np.sum((U @ ref - q) ** 2) + 1e-10
