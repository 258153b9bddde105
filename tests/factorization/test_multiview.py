"""SMT + MF: the coupled factorization, the fold-in, the stored model, its features and CLI."""
import os
import warnings

import numpy as np
import pytest
import scipy.optimize as sopt
import scipy.sparse as sp

import dataclasses

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.cli.__main__ import main as cli
from cqa_search.exceptions import (ConvergenceWarning, IndexFormatError, NotFittedError,
                                   ParameterError)
from cqa_search.factorization.multiview import (MultiViewModel, MultiViewNMF, _cd_pass,
                                                _fold_in, _init_factors)
from cqa_search.factorization.views import (DummyTranslator, Translator, make_translator,
                                            parse_views)
from cqa_search.index.models import add_model
from cqa_search.index.store import open_index
from cqa_search.retrieval import VSM

DICTD = os.path.join(os.path.dirname(__file__), "..", "data", "dictd")


def _views(seed=0, n=40, sizes=(15, 10, 12), density=0.3):
    rng = np.random.default_rng(seed)
    return [sp.random(n, m, density=density, random_state=rng, format="csr") for m in sizes]


def _objective(Xs, nmf):
    lam = nmf.lambdas_
    Ws, Hs = nmf.doc_factors_, nmf.components_
    out = sum(np.sum((X.toarray() - W @ H) ** 2) for X, W, H in zip(Xs, Ws, Hs))
    out += lam[0] * np.sum(Ws[0] ** 2)
    out += sum(lam[p] * np.sum((Ws[p] - Ws[0]) ** 2) for p in range(1, len(Xs)))
    return out


# -- the factorization --------------------------------------------------------------------
def test_objective_never_increases_and_is_the_recorded_one():
    Xs = _views()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        nmf = MultiViewNMF(4, lambdap=[0.25, 0.5], max_iter=60, tol=0, random_state=0).fit(Xs)
    curve = np.array(nmf.loss_curve_)
    assert nmf.n_iter_ == 60 == len(curve)
    assert np.all(np.diff(curve) <= 1e-10 * curve[0])
    assert curve[-1] < curve[0]
    np.testing.assert_allclose(curve[-1], _objective(Xs, nmf), rtol=1e-9)
    assert all((H >= 0).all() for H in nmf.components_)
    assert all((W >= 0).all() for W in nmf.doc_factors_)
    np.testing.assert_allclose(nmf.lambdas_, [1.0, 0.25, 0.5])


def test_one_view_is_ridge_nmf_by_alternating_direct_least_squares():
    """With P = 1, O = ||X - W H||^2 + lambda_1 ||W||^2 (ridge NMF). With K = 1 every block
    update is exact, so the sweeps are those of a direct implementation that solves each
    block by non-negative least squares (scipy's NNLS): eq. 7 for H, eq. 15 for W."""
    X = _views(1, n=25, sizes=(12,), density=0.5)[0]
    Xd, lam = X.toarray(), 0.3
    for sweeps in (1, 2, 7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            nmf = MultiViewNMF(1, lambda1=lam, max_iter=sweeps, tol=0, random_state=5).fit([X])
        (U,), (W,) = _init_factors([X], 1, np.random.default_rng(5))
        A = lambda H: np.vstack([H.T, np.sqrt(lam) * np.eye(1)])  # noqa: E731
        for _ in range(sweeps):
            U = np.array([sopt.nnls(W, Xd[:, j])[0] for j in range(Xd.shape[1])])
            W = np.array([sopt.nnls(A(U.T), np.r_[Xd[i], 0.0])[0] for i in range(Xd.shape[0])])
        np.testing.assert_allclose(nmf.components_[0], U.T, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nmf.doc_factors_[0], W, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nmf.loss_curve_[-1],
                                   np.sum((Xd - W @ U.T) ** 2) + lam * np.sum(W ** 2), rtol=1e-10)


def test_one_view_fold_in_gives_back_the_fitted_factors():
    """At convergence, folding the training questions in (eq. 17) gives their factors."""
    X = _views(1, n=25, sizes=(12,), density=0.5)[0]
    nmf = MultiViewNMF(3, max_iter=800, tol=1e-13, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W = nmf.fit_transform([X])[0]
    np.testing.assert_allclose(nmf.transform([X])[0], W, rtol=1e-3, atol=1e-4)


def test_fold_in_is_the_closed_form_of_eqs_17_and_19_when_no_bound_is_active():
    rng = np.random.default_rng(3)
    H1, H2 = rng.random((3, 8)) + 0.5, rng.random((3, 6)) + 0.5
    v = np.array([0.7, 1.1, 0.9])
    x1, x2 = v @ H1, 1.2 * v @ H2       # data explained by positive factors
    lam1, lam2 = 1.0, 0.25
    v1, v2 = _fold_in([H1, H2], [lam1, lam2], [x1[None], x2[None]])
    eq17 = np.linalg.solve(H1 @ H1.T + lam1 * np.eye(3), H1 @ x1)
    eq19 = np.linalg.solve(H2 @ H2.T + lam2 * np.eye(3), H2 @ x2 + lam2 * eq17)
    assert (eq17 > 0).all() and (eq19 > 0).all()
    np.testing.assert_allclose(v1[0], eq17, rtol=1e-9)
    np.testing.assert_allclose(v2[0], eq19, rtol=1e-9)
    # a query with no words in a view stays close to its view-1 factors (q_p = 0)
    _, v2_empty = _fold_in([H1, H2], [lam1, lam2], [x1[None], np.zeros((1, 6))])
    oracle = sopt.nnls(np.vstack([H2.T, np.sqrt(lam2) * np.eye(3)]),
                       np.r_[np.zeros(6), np.sqrt(lam2) * eq17])[0]
    np.testing.assert_allclose(v2_empty[0], oracle, atol=1e-10)
    assert v2_empty[0] @ eq17 > 0


def test_cd_pass_matches_an_nnls_oracle_after_many_passes():
    rng = np.random.default_rng(0)
    A = rng.random((20, 5))
    G = A.T @ A + 0.1 * np.eye(5)
    B = rng.standard_normal((7, 5))
    X = np.zeros((7, 5))
    for _ in range(2000):
        _cd_pass(X, G, B, chunk=3)
    L = np.linalg.cholesky(G)
    for i in range(7):
        expected = sopt.nnls(L.T, np.linalg.solve(L, B[i]))[0]
        np.testing.assert_allclose(X[i], expected, atol=1e-8)


def test_recovers_an_exact_nonnegative_low_rank_matrix():
    rng = np.random.default_rng(0)
    X = rng.random((30, 3)) @ rng.random((3, 20))
    nmf = MultiViewNMF(3, lambda1=1e-8, max_iter=3000, tol=1e-12, random_state=0).fit([X])
    W, H = nmf.doc_factors_[0], nmf.components_[0]
    assert np.linalg.norm(X - W @ H) / np.linalg.norm(X) < 1e-3


def test_dense_equals_sparse_and_seeds_are_reproducible():
    Xs = _views(2)
    kw = dict(max_iter=15, tol=0, random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = MultiViewNMF(3, **kw).fit(Xs)
        b = MultiViewNMF(3, **kw).fit([X.toarray() for X in Xs])
        c = MultiViewNMF(3, **{**kw, "random_state": np.random.default_rng(7)}).fit(Xs)
        d = MultiViewNMF(3, **{**kw, "random_state": 8}).fit(Xs)
    for x, y in zip(a.doc_factors_ + a.components_, b.doc_factors_ + b.components_):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.doc_factors_, c.doc_factors_):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a.doc_factors_[0], d.doc_factors_[0])


def test_dummy_view_couples_to_an_identical_copy():
    X = _views(4, sizes=(15,))[0]
    nmf = MultiViewNMF(3, max_iter=500, random_state=0).fit([X, X.copy()])
    W1, W2 = nmf.doc_factors_
    # the copy's factors are the original's, shrunk towards them: same directions
    cos = np.sum(W1 * W2, axis=1) / (np.linalg.norm(W1, axis=1) * np.linalg.norm(W2, axis=1))
    assert np.median(cos) > 0.95


def test_validation_messages_and_warnings():
    Xs = _views()
    with pytest.raises(ValueError, match=r"n_components must be an integer in \[1, inf\); got 0"):
        MultiViewNMF(0).fit(Xs)
    with pytest.raises(ValueError, match=r"lambda1 must be a number in \(0, inf\); got 0"):
        MultiViewNMF(2, lambda1=0).fit(Xs)
    with pytest.raises(ValueError, match="lambdap must be a number or one number per translated "
                                         r"view \(2\); got 3 values"):
        MultiViewNMF(2, lambdap=[0.1, 0.2, 0.3]).fit(Xs)
    with pytest.raises(ValueError, match="lambdap must be non-negative"):
        MultiViewNMF(2, lambdap=[0.1, -0.2]).fit(Xs)
    with pytest.raises(ValueError, match=r"Xs\[1\] must be non-negative and finite"):
        MultiViewNMF(2).fit([Xs[0], -Xs[1]])
    with pytest.raises(ValueError, match="every view must have the same number of rows"):
        MultiViewNMF(2).fit([Xs[0], Xs[1][:5]])
    with pytest.raises(ValueError, match="Xs must be a non-empty list of matrices"):
        MultiViewNMF(2).fit(Xs[0])
    with pytest.warns(ConvergenceWarning, match=r"maximum number of iterations \(1\)"):
        MultiViewNMF(2, max_iter=1).fit(Xs)
    with pytest.raises(NotFittedError):
        MultiViewNMF(2).transform(Xs)
    nmf = MultiViewNMF(2, max_iter=200).fit(Xs)
    with pytest.raises(ValueError, match=r"Xs must have 3 views with \[15, 10, 12\] features"):
        nmf.transform(Xs[:2])


# -- the model in an index ---------------------------------------------------------------
ARCHIVE = [
    Question("a", "How to renew my visa", "The visa office in Doha is open on Sunday"),
    Question("b", "Visa renewal office hours", "When does the visa office open"),
    Question("c", "Cheap sofa in Doha", "Where to buy a cheap sofa or a couch"),
    Question("d", "Houses for rent", "Looking for a cheap house near the bank"),
    Question("e", "Bank account for work", "Which bank is good for a work account"),
    Question("f", "Buy a used couch", "Any cheap furniture shop for a sofa"),
    Question("g", "Work visa documents", "Papers for a work visa renewal"),
    Question("h", "Open a bank account", "Documents to open an account at the bank"),
]


@pytest.fixture
def index(tmp_path):
    path = tmp_path / "idx"
    build_index(ARCHIVE, path)
    return path


def _fit(source, views=("dict:tst", "dummy"), **kw):
    params = dict(n_components=3, max_iter=300, random_state=0, dict_dir=DICTD)
    params.update(kw)
    view = getattr(source, "view", source)
    specs = parse_views(views)
    if any(isinstance(v, Translator) for v in specs):
        translators = [make_translator(v, dict_dir=params["dict_dir"]) for v in specs]
        return MultiViewModel(**params).fit(view, translators=translators)
    return MultiViewModel(",".join(specs), **params).fit(view)


def test_fit_is_deterministic_by_default(index):
    engine = SearchEngine.open(index)
    a, b = (MultiViewModel("dummy", n_components=3, max_iter=300).fit(engine.view)
            for _ in range(2))
    for x, y in zip(a.doc_factors_ + a.components_, b.doc_factors_ + b.components_):
        np.testing.assert_array_equal(x, y)


def _naive_features(model, engine, text, rows):
    """Oracle: fold-in by NNLS on the stacked system of eqs. 17 / 19, then cosines."""
    q = engine.analyze(text)
    n_terms = len(engine.index.vocab)
    out = np.zeros((len(rows), len(model.view_names_)))
    v1 = None
    for p, (enc, H, W) in enumerate(zip(model.encoders_, model.components_,
                                        model.doc_factors_)):
        x = enc.encode_query(q, engine.analyzer, n_terms).toarray()[0]
        H = H.astype(np.float64)
        lam = model.lambdas_[p]
        K = H.shape[0]
        A = np.vstack([H.T, np.sqrt(lam) * np.eye(K)])
        target = np.r_[x, np.sqrt(lam) * (v1 if p else np.zeros(K))]
        v = sopt.nnls(A, target)[0]
        v1 = v if p == 0 else v1
        for i, r in enumerate(rows):
            d = W[r].astype(np.float64)
            den = np.linalg.norm(d) * np.linalg.norm(v)
            out[i, p] = d @ v / den if den > 0 else 0.0
    return out


def test_features_match_a_naive_oracle_and_survive_storage(index):
    engine = SearchEngine.open(index)
    model = _fit(engine)
    assert model.feature_names == ("mv_orig", "mv_tst", "mv_dummy")
    assert [e.source for e in model.encoders_] == ["terms", "tokens", "terms"]
    add_model(index, "mv", model)
    for mmap in (True, False):
        stored = SearchEngine.open(index, mmap=mmap,
                                   config=SearchConfig(features=(VSM(),), ranker=None))
        assert stored.models["mv"].get_params() == model.get_params()
        res = stored.search("cheap couch in Doha", k=None)
        rows = stored.archive.rows(res.doc_ids)
        cols = [res.feature_names.index(n) for n in model.feature_names]
        np.testing.assert_allclose(res.features[:, cols],
                                   _naive_features(model, stored, "cheap couch in Doha", rows),
                                   atol=1e-6)
    # rerank computes the same features for the given candidates only
    rr = stored.rerank("renew my work visa", ["g", "a", "e"])
    direct = model.scorer(stored.view).score(stored.analyze("renew my work visa"),
                                             stored.archive.rows(rr.doc_ids))
    np.testing.assert_allclose(rr.features[:, cols], direct, atol=1e-12)


def test_query_is_folded_in_once(index, monkeypatch):
    engine = SearchEngine.open(index)
    model = _fit(engine, views=())
    calls = []
    original = model.transform_query
    monkeypatch.setattr(model, "transform_query", lambda *a: calls.append(1) or original(*a))
    scorer = model.scorer(engine.view)
    q = engine.analyze("visa office")
    first = scorer.score(q, np.array([0, 1]))
    second = scorer.score(q, np.array([2, 3, 1]))
    assert len(calls) == 1 and first[1, 0] == second[2, 0]
    assert scorer.score(q, np.array([], dtype=int)).shape == (0, 1)


def test_one_view_model_is_vsm_plus_mf_and_dt_ablation_runs(index):
    engine = SearchEngine.open(index)
    one = _fit(engine, views=[])
    dt = _fit(engine, views=["dummy"])
    assert one.feature_names == ("mv_orig",) and dt.feature_names == ("mv_orig", "mv_dummy")
    np.testing.assert_allclose(np.diff(dt.loss_curve_) <= 1e-10 * dt.loss_curve_[0], True)
    add_model(index, "dt", dt)
    res = SearchEngine.open(index, config=SearchConfig(ranker=None)).search("visa", k=3)
    assert {"mv_orig", "mv_dummy", "vsm"} <= set(res.feature_names)


def test_archive_translations_and_an_ibm1_table_found_in_the_index(tmp_path):
    qs = [Question(q.id, q.title, q.body, extra={"translations": {"fr": f"question {i} visa"}})
          for i, q in enumerate(ARCHIVE)]
    path = tmp_path / "idx"
    build_index(qs, path)
    engine = SearchEngine.open(path)
    n = len(engine.index.vocab)
    probs = sp.vstack([sp.csr_matrix(np.full((1, n), 1.0 / n)), sp.identity(n, format="csr")])

    class StoredIBM1:  # what the stored translation model exposes
        translation_probs_ = probs.tocsr()
    with_table = dataclasses.replace(engine.view, models={"ibm": StoredIBM1()})
    model = _fit(with_table, views="archive:fr,ibm1")
    assert model.view_names_ == ["orig", "fr", "ibm1"]
    q = engine.analyze("visa office")
    feats = model.scorer(engine.view).score(q, np.arange(len(qs)))
    assert np.isfinite(feats).all() and feats.shape == (len(qs), 3)
    with pytest.raises(ValueError, match="view 'ibm1' needs an IBM Model 1 translation table"):
        _fit(engine.view, views="ibm1")   # a bare IndexView has no stored models


def test_model_errors(index):
    engine = SearchEngine.open(index)
    with pytest.raises(ValueError, match="two views are named 'dummy'"):
        _fit(engine, views=["dummy", DummyTranslator()])
    with pytest.raises(ValueError, match="two views are named 'orig'"):
        _fit(engine, views=[DummyTranslator(name="orig")])
    with pytest.raises(ValueError, match="min_df must be an integer in"):
        _fit(engine, views=[], min_df=0)
    with pytest.raises(ValueError, match="apt-get install dict-freedict-eng-fra"):
        _fit(engine, views=["dict:fra"], dict_dir=os.path.join(DICTD, "missing"))
    model = _fit(engine, views=[])
    other = tmp = os.path.join(os.path.dirname(index), "other")
    build_index(ARCHIVE[:4], tmp)
    with pytest.raises(IndexFormatError, match="covers 8 questions but the index has only 4"):
        model.scorer(SearchEngine.open(other).view)


def test_more_components_than_questions_are_capped_and_the_model_stays_finite(index):
    # K = 100 on 8 questions: the directions no question needs had factors growing without
    # bound (past float32's range on a 20-question archive; the stored model did not load)
    engine = SearchEngine.open(index)
    model = MultiViewModel("dummy", n_components=100).fit(engine.view)
    assert model.n_components == 100 and model.n_components_ == len(ARCHIVE)
    assert all(H.shape[0] == len(ARCHIVE) and np.isfinite(H).all() for H in model.components_)
    assert "K          8 (n_components 100 capped" in model.describe()
    add_model(index, "mv", model)
    stored = SearchEngine.open(index).models["mv"]
    assert stored.n_components_ == len(ARCHIVE) and stored.n_components == 100
    res = SearchEngine.open(index, config=SearchConfig(ranker=None)).search("visa", k=3)
    assert np.isfinite(res.features).all()


def test_a_model_that_would_not_load_is_not_stored(index):
    engine = SearchEngine.open(index)
    model = _fit(engine, views=[])
    model.components_[0][0, 0] = np.inf
    before = open_index(index).generation
    with pytest.raises(ParameterError, match=r"model 'mv' cannot be stored: its fitted state is "
                                             r"invalid \(view 0 components holds NaN or "
                                             r"infinite values\); the index is unchanged"):
        add_model(index, "mv", model)
    assert open_index(index).generation == before and not SearchEngine.open(index).models


# -- command line ----------------------------------------------------------------------------
def test_cli_fits_and_stores_a_model(index, capsys):
    status = cli(["fit", str(index), "multiview", "--views", "dict:tst,dummy", "--dict-dir",
                   DICTD, "--n-components", "2", "--max-iter", "20", "--random-state", "0",
                   "--name", "smt", "-q"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "smt" in out.out and "mv_tst" in out.out
    model = SearchEngine.open(index).models["smt"]
    assert model.view_names_ == ["orig", "tst", "dummy"] and model.n_components == 2
    status = cli(["fit", str(index), "multiview", "--views", "dict:fra", "--dict-dir",
                   os.path.join(DICTD, "missing"), "--name", "smt", "-q"])
    err = capsys.readouterr().err
    assert status == 1
    assert "does not exist" in err and "apt-get install dict-freedict-eng-fra" in err
    assert cli(["fit", str(index), "multiview", "--name", "smt", "-q"]) == 1  # view: ibm1
    assert "needs an IBM Model 1 translation table" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_single_query_fold_in_equals_the_batched_solver(tmp_path):
    """transform_query (one GramFactor NNLS per view) == _fold_in (block pivoting)."""
    from cqa_search import Question, SearchEngine, build_index
    from cqa_search.factorization.multiview import MultiViewModel, _fold_in
    from cqa_search.factorization.views import DummyTranslator

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    qs = [Question(f"q{i}", " ".join(rng.choice(words, 8))) for i in range(60)]
    build_index(qs, tmp_path / "idx", fields=("question",))
    engine = SearchEngine.open(tmp_path / "idx")
    model = MultiViewModel(n_components=6, max_iter=20, tol=0, random_state=0).fit(
        engine.view, translators=[DummyTranslator(name="copy")])
    n_terms = len(engine.index.vocab)
    for text in ("w1 w2 w3", "w5 w5 w30 w39 w0", "w7"):
        q = engine.analyze(text)
        xs = [enc.encode_query(q, engine.analyzer, n_terms) for enc in model.encoders_]
        batched = _fold_in(model.components_, model.lambdas_, xs)
        for got, ref in zip(model.transform_query(q, engine.view), batched):
            np.testing.assert_allclose(got, ref[0], rtol=1e-9, atol=1e-12)
