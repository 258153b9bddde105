"""CNMF, GNMF and GNMFNC: the kernels against a dense transcription of the update equations."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from cqa_search.exceptions import ConvergenceWarning
from cqa_search.factorization import CNMF, GNMF, GNMFNC, NMF

EPS = np.finfo(np.float32).eps


def _data(seed, n_terms=40, n_groups=3, per_group=20, density=0.15, labels=None):
    D = sp.random(n_terms, n_groups * per_group, density=density, random_state=seed,
                  format="csc")
    groups = np.repeat(np.arange(n_groups), per_group) if labels is None else labels
    return D, groups


def _objective(D, groups, Us, Ucat, V, a):
    """The objective with every pair of categories counted once (see nmf.py)."""
    D = D.toarray()
    labels = np.unique(groups)
    Ks, Kp = Us.shape[1], Ucat.shape[1] // len(labels)
    beta = a / (Ks * Kp) if Ks else 0.0
    gamma = a / (Kp * Kp)
    blocks = [Ucat[:, p * Kp:(p + 1) * Kp] for p in range(len(labels))]
    total = 0.0
    for p, label in enumerate(labels):
        cols = groups == label
        U = np.hstack([Us, blocks[p]])
        total += np.sum((D[:, cols] - U @ V[:, cols]) ** 2) / np.sum(D[:, cols] ** 2)
        total += beta * np.sum((Us.T @ blocks[p]) ** 2)
        for q in range(p + 1, len(labels)):
            total += gamma * np.sum((blocks[p].T @ blocks[q]) ** 2)
    return total


def _oracle(D, groups, Us, Ucat, V, a, n_iter):
    """MISSION.md's equations (4)-(6) with dense matrices, one category after the other,
    then the columns of U rescaled to unit norm (V compensating), or only the fraction
    t of the way (in log scale) that keeps the objective from increasing."""
    Dd = D.toarray()
    labels = np.unique(groups)
    P = len(labels)
    Ks, Kp = Us.shape[1], Ucat.shape[1] // P
    beta, gamma = (a / (Ks * Kp) if Ks else 0.0), a / (Kp * Kp)
    cols = [groups == label for label in labels]
    Dp = [Dd[:, c] for c in cols]
    alpha = [1 / np.sum(d ** 2) for d in Dp]
    Us = Us.copy()
    Up = [Ucat[:, p * Kp:(p + 1) * Kp].copy() for p in range(P)]
    for p in range(P):  # a category's topics live on its terms only
        Up[p][~Dp[p].any(axis=1)] = 0.0
    Vp = [V[:, c].copy() for c in cols]

    def fix(x):
        x[x == 0] = EPS
        return x

    def assemble(Us, Up, Vp):
        V = np.zeros((Ks + Kp, Dd.shape[1]))
        for p in range(P):
            V[:, cols[p]] = Vp[p]
        return Us, np.hstack(Up), V

    def rescaled(t):
        norms = lambda U: np.where(np.linalg.norm(U, axis=0) > 0, np.linalg.norm(U, axis=0), 1)
        s = norms(Us) ** t
        Up2, Vp2 = [], []
        for p in range(P):
            sp_ = norms(Up[p]) ** t
            Up2.append(Up[p] / sp_)
            Vp2.append(Vp[p] * np.concatenate([s, sp_])[:, None])
        return Us / s, Up2, Vp2

    def objective(factors):
        return _objective(D, groups, *assemble(*factors), a)

    Us, Up, Vp = rescaled(1.0)
    previous = objective((Us, Up, Vp))
    for _ in range(n_iter):
        H = [v[:Ks] for v in Vp]
        W = [v[Ks:] for v in Vp]
        if Ks:
            num = sum(alpha[p] * Dp[p] @ H[p].T for p in range(P))
            den = sum(alpha[p] * np.hstack([Us, Up[p]]) @ Vp[p] @ H[p].T
                      + beta * Up[p] @ Up[p].T @ Us for p in range(P))
            Us = Us * num / fix(den)
        for p in range(P):
            num = alpha[p] * Dp[p] @ W[p].T
            den = (alpha[p] * np.hstack([Us, Up[p]]) @ Vp[p] @ W[p].T
                   + beta * Us @ Us.T @ Up[p]
                   + sum(gamma * Up[q] @ Up[q].T @ Up[p] for q in range(P) if q != p))
            Up[p] = Up[p] * num / fix(den)
        for p in range(P):
            U = np.hstack([Us, Up[p]])
            Vp[p] = Vp[p] * (U.T @ Dp[p]) / fix(U.T @ U @ Vp[p])
        t = 1.0
        if objective(rescaled(1.0)) > previous and objective(rescaled(0.0)) <= previous:
            lo, hi = 0.0, 1.0
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if objective(rescaled(mid)) <= previous else (lo, mid)
            t = lo
        Us, Up, Vp = rescaled(t)
        previous = objective((Us, Up, Vp))
    return assemble(Us, Up, Vp)


@pytest.mark.parametrize("model", [
    CNMF(3, max_iter=60, tol=0, random_state=0),
    GNMF(4, 2, max_iter=60, tol=0, random_state=0),
    GNMFNC(4, 2, a=100.0, max_iter=60, tol=0, random_state=0),
    GNMFNC(4, 2, a=1e4, max_iter=60, tol=0, random_state=0),
    GNMFNC(0, 3, a=10.0, max_iter=60, tol=0, random_state=0),
], ids=["cnmf", "gnmf", "gnmfnc", "gnmfnc-a1e4", "gnmfnc-no-shared"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("density", [0.03, 0.3])
def test_objective_never_increases(model, seed, density):
    D, groups = _data(seed, density=density)
    rng = np.random.default_rng(seed)
    groups = rng.integers(-1, 3, size=len(groups))  # -1: questions without a category
    model.fit(D, groups)
    curve = np.concatenate([[model.initial_loss_], model.loss_curve_])
    assert np.all(np.diff(curve) <= 1e-12 * curve[0])
    a = getattr(model, "a", 0.0)
    expected = _objective(D, groups, model.shared_topics_, model.category_topics_.toarray(),
                          model.coefficients_, a)
    assert model.loss_curve_[-1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("a", [0.0, 1.0, 100.0, 1e4])
def test_kernels_match_the_dense_update_equations(a):
    D, groups = _data(3, density=0.3)
    rng = np.random.default_rng(0)
    Ks, Kp, P = 4, 2, 3
    Us0, Ucat0, V0 = rng.random((40, Ks)), rng.random((40, P * Kp)), rng.random((Ks + Kp, 60))
    model = GNMFNC(Ks, Kp, a=a, init="custom", max_iter=15, tol=0)
    model.fit(D, groups, U_shared=Us0, U_category=Ucat0, V=V0)
    Us, Ucat, V = _oracle(D, groups, Us0, Ucat0, V0, a, 15)
    np.testing.assert_allclose(model.shared_topics_, Us, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(model.category_topics_.toarray(), Ucat, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(model.coefficients_, V, rtol=1e-6, atol=1e-12)
    if a == 100:  # the partial rescaling is exercised with these data
        assert model.n_partial_rescalings_ > 0


def test_gnmfnc_without_regularisers_is_gnmf():
    D, groups = _data(5)
    g = GNMF(4, 2, max_iter=40, tol=0, random_state=3).fit(D, groups)
    nc = GNMFNC(4, 2, a=0.0, max_iter=40, tol=0, random_state=3).fit(D, groups)
    np.testing.assert_array_equal(g.shared_topics_, nc.shared_topics_)
    np.testing.assert_array_equal(g.category_topics_.toarray(), nc.category_topics_.toarray())
    np.testing.assert_array_equal(g.coefficients_, nc.coefficients_)
    np.testing.assert_array_equal(g.loss_curve_, nc.loss_curve_)
    # and the regularisers change the solution
    reg = GNMFNC(4, 2, a=100.0, max_iter=40, tol=0, random_state=3).fit(D, groups)
    assert not np.allclose(reg.coefficients_, g.coefficients_)


def test_cnmf_is_one_nmf_per_category():
    D, groups = _data(6, density=0.3)
    rng = np.random.default_rng(1)
    Ucat0, V0 = rng.random((40, 3 * 3)), rng.random((3, 60))
    model = CNMF(3, init="custom", max_iter=30, tol=0).fit(D, groups, U_category=Ucat0, V=V0)
    for p in range(3):
        cols = groups == p
        one = NMF(3, init="custom", max_iter=30, tol=0).fit(
            D[:, cols], U=Ucat0[:, 3 * p:3 * p + 3], V=V0[:, cols])
        used = np.asarray(D[:, cols].sum(axis=1)).ravel() > 0
        np.testing.assert_allclose(model.category_topics_[:, 3 * p:3 * p + 3].toarray()[used],
                                   one.U_[used], rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(model.coefficients_[:, cols], one.V_, rtol=1e-9, atol=1e-14)
    assert model.shared_topics_.shape == (40, 0)


def test_category_topics_live_on_their_category_terms_and_uncategorised_questions():
    # three categories with disjoint vocabularies plus questions without a category
    blocks = [sp.random(10, 15, density=0.4, random_state=i, format="csc") for i in range(3)]
    D = sp.block_diag(blocks, format="csc")
    extra = sp.random(30, 5, density=0.2, random_state=9, format="csc")
    D = sp.hstack([D, extra], format="csc")
    groups = np.concatenate([np.repeat(["b", "a", "c"], 15), ["~"] * 5])
    model = GNMFNC(2, 2, max_iter=30, tol=0, random_state=0).fit(D, groups)
    assert model.groups_.tolist() == ["a", "b", "c", "~"]
    U = model.category_topics_.toarray()
    for p, rows in enumerate([slice(10, 20), slice(0, 10), slice(20, 30)]):
        mask = np.ones(30, dtype=bool)
        mask[rows] = False
        assert np.all(U[mask, 2 * p:2 * p + 2] == 0)
    assert model.doc_group_.tolist() == [1] * 15 + [0] * 15 + [2] * 15 + [3] * 5


def test_fold_in_and_group_inference():
    # disjoint vocabularies: each training question is best reconstructed by its own group
    blocks = [sp.random(12, 20, density=0.35, random_state=i, format="csc") for i in range(3)]
    D = sp.block_diag(blocks, format="csc")
    groups = np.repeat([10, 20, 30], 20)
    model = GNMF(2, 3, max_iter=2000, tol=1e-9, random_state=0).fit(D, groups)
    nonzero = np.asarray(D.sum(axis=0)).ravel() > 0
    inferred = model.infer_groups(D)
    assert np.mean(inferred[nonzero] == groups[nonzero]) > 0.9
    V = model.fold_in(D, groups)
    err = np.linalg.norm(V - model.coefficients_) / np.linalg.norm(model.coefficients_)
    assert err < 0.05
    with pytest.raises(ValueError, match="unknown group 40"):
        model.fold_in(D[:, :1], [40])


def test_validation_messages():
    D, groups = _data(0)
    with pytest.raises(ValueError, match=r"a must be a number in \[0, inf\); got -1"):
        GNMFNC(a=-1).fit(D, groups)
    with pytest.raises(ValueError, match=r"n_category must be an integer in \[1, inf\)"):
        GNMF(2, 0).fit(D, groups)
    with pytest.raises(ValueError, match="one label per question"):
        CNMF(2).fit(D, groups[:-1])
    with pytest.warns(ConvergenceWarning, match="GNMFNC stopped at max_iter=1"):
        GNMFNC(2, 2, max_iter=1, random_state=0).fit(D, groups)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = GNMFNC(2, 2, max_iter=5, random_state=4).fit(D, groups)
        b = GNMFNC(2, 2, max_iter=5, random_state=4).fit(D.toarray(), groups)
    np.testing.assert_array_equal(a.coefficients_, b.coefficients_)


def test_decayed_entries_do_not_overflow():
    # A term whose topic weights have decayed to denormals: num / den alone overflows.
    D, groups = _data(2, density=0.4)
    D = sp.csc_matrix(D.multiply(10.0))
    rng = np.random.default_rng(0)
    Us0, Ucat0, V0 = rng.random((40, 4)), rng.random((40, 6)), rng.random((6, 60))
    Us0[D.nonzero()[0][0]] = Ucat0[D.nonzero()[0][0]] = 1e-318
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        model = GNMFNC(4, 2, init="custom", max_iter=5, tol=0).fit(
            D, groups, U_shared=Us0, U_category=Ucat0, V=V0)
    assert np.all(np.isfinite(model.coefficients_)) and np.all(np.isfinite(model.loss_curve_))
