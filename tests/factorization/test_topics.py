"""The stored topic model: tf-idf matrix, storage, topic score, category inference, eq. 14, CLI."""
import copy
import shutil
import warnings

import numpy as np
import pytest
import scipy.optimize as sopt
from sklearn.feature_extraction.text import TfidfTransformer

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.cli.__main__ import main as cli
from cqa_search.data import DEMO_ARCHIVE, demo_dir
from cqa_search.exceptions import ConvergenceWarning, IndexFormatError, NotFittedError
from cqa_search.factorization import (TopicInterpolation, TopicModel, interpolate,
                                      term_question_matrix)
from cqa_search.index.models import add_model
from cqa_search.index.store import open_index
from cqa_search.retrieval import BM25


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "index"
    build_index(demo_dir() / DEMO_ARCHIVE, path)
    return path


@pytest.fixture(scope="module")
def demo_model(demo_index):
    view = SearchEngine.open(demo_index).view
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return TopicModel("gnmfnc", n_shared=6, n_category=3, max_iter=40,
                          random_state=0).fit(view)


@pytest.fixture
def index_copy(demo_index, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(demo_index, path)
    return path


def _query(engine, text, category=None):
    return engine.analyze(text, category)


def test_term_question_matrix_is_scikit_learn_tfidf(toy_engine):
    D, idf = term_question_matrix(toy_engine.view)
    counts = toy_engine.index["question"].matrix()
    expected = TfidfTransformer().fit_transform(counts)
    assert D.shape == (toy_engine.index.vocab.__len__(), toy_engine.n_docs)
    np.testing.assert_allclose(D.T.toarray(), expected.toarray())
    np.testing.assert_allclose(idf, TfidfTransformer().fit(counts).idf_)


def test_fit_attributes_and_uncategorised_group(toy_engine):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = TopicModel("gnmfnc", n_shared=2, n_category=2, max_iter=20,
                           random_state=0).fit(toy_engine.view)
    # toy archive: Visas, Cars, Shopping and one question without a category
    assert sorted(model.categories_, key=str) == sorted(["Visas", "Cars", "Shopping", None],
                                                        key=str)
    assert model.doc_topics_.shape == (12, 4) and model.doc_topics_.dtype == np.float32
    names = [model.categories_[g] for g in model.doc_group_]
    assert names == [q.category for q in toy_engine.archive]
    assert np.all(np.diff(model.loss_curve_) <= 1e-12 * model.initial_loss_)
    nmf = TopicModel("nmf", n_shared=2, n_category=1, max_iter=5, tol=0,
                     random_state=0).fit(toy_engine.view)
    assert nmf.categories_ == [None] and nmf.doc_topics_.shape == (12, 3)
    cnmf = TopicModel("cnmf", n_category=2, max_iter=5, tol=0, random_state=0).fit(
        toy_engine.view)
    assert cnmf.doc_topics_.shape == (12, 2) and cnmf.shared_topics_.shape[1] == 0
    q = toy_engine.analyze("renew my visa")
    for m in (model, nmf, cnmf):  # every variant scores
        scores = m.scorer(toy_engine.view).score(q, np.arange(12))[:, 0]
        assert scores.shape == (12,) and np.all((scores >= 0) & (scores <= 1 + 1e-6))


def test_random_state_gives_the_same_bits(toy_engine):
    a = TopicModel("gnmf", n_shared=2, n_category=2, max_iter=5, tol=0).fit(toy_engine.view)
    b = TopicModel("gnmf", n_shared=2, n_category=2, max_iter=5, tol=0).fit(toy_engine.view)
    np.testing.assert_array_equal(a.doc_topics_, b.doc_topics_)
    assert a.fit_seconds_ >= 0


def test_validation_and_not_fitted(toy_engine):
    with pytest.raises(ValueError, match=r"model must be \{'nmf', 'cnmf', 'gnmf', 'gnmfnc'\}; "
                                         r"got 'lda'"):
        TopicModel("lda").fit(toy_engine.view)
    with pytest.raises(ValueError, match="category_inference must be"):
        TopicModel(category_inference="vote").fit(toy_engine.view)
    with pytest.raises(ValueError, match=r"feature_name must be \{None\} or a string; got 3"):
        TopicModel(feature_name=3).fit(toy_engine.view)
    with pytest.raises(NotFittedError):
        TopicModel().scorer(toy_engine.view)


def _full(model, coef, group):
    """A question's vector in the K_s + P K_p space."""
    Ks = model.shared_topics_.shape[1]
    Kp = model.category_topics_.shape[1] // len(model.categories_)
    out = np.zeros(Ks + len(model.categories_) * Kp)
    out[:Ks] = coef[:Ks]
    out[Ks + group * Kp:Ks + (group + 1) * Kp] = coef[Ks:]
    return out


@pytest.mark.parametrize("category", ["Health", None])
@pytest.mark.parametrize("inference", ["reconstruction", "all"])
def test_topic_score_is_the_cosine_in_the_full_topic_space(demo_index, demo_model, category,
                                                           inference):
    engine = SearchEngine.open(demo_index)
    model = copy.copy(demo_model).set_params(category_inference=inference)
    scorer = model.scorer(engine.view)
    q = _query(engine, "my nose is blocked and my head hurts", category)
    rows = np.arange(engine.n_docs)
    got = scorer.score(q, rows)[:, 0]
    vq, group, _ = scorer.query_vector(q)
    if category is not None:
        assert model.categories_[group] == "Health"
    elif inference == "all":
        assert group == -1
    for r in [0, 5, 17, 100, 250, 326]:
        vd = _full(model, model.doc_topics_[r].astype(float), model.doc_group_[r])
        expected = vq @ vd / (np.linalg.norm(vq) * np.linalg.norm(vd))
        assert got[r] == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert q.cache  # folded once, kept for the other candidates
    assert 0 <= got.min() and got.max() <= 1 + 1e-6


@pytest.mark.parametrize("category", ["Travel", None])
def test_query_fold_in_is_nnls_against_its_category_topics(demo_index, demo_model, category):
    engine = SearchEngine.open(demo_index)
    demo_model = copy.copy(demo_model).set_params(category_inference="reconstruction")
    q = _query(engine, "cheap flights to europe in summer", category)
    qvec = np.zeros(demo_model.n_terms_)
    qvec[q.term_ids] = q.qtf * demo_model.idf_[q.term_ids]
    qvec /= np.linalg.norm(qvec)
    Ks = demo_model.shared_topics_.shape[1]
    Kp = demo_model.category_topics_.shape[1] // len(demo_model.categories_)
    v, group = demo_model.fold_query(q)
    U = np.hstack([demo_model.shared_topics_,
                   demo_model.category_topics_[:, group * Kp:(group + 1) * Kp].toarray()])
    ref, _ = sopt.nnls(U, qvec)
    np.testing.assert_allclose(v, _full(demo_model, ref, group), atol=1e-8)
    if category is None:  # the inferred group reconstructs best
        residual = np.linalg.norm(U @ ref - qvec)
        for p in range(len(demo_model.categories_)):
            Up = np.hstack([demo_model.shared_topics_,
                            demo_model.category_topics_[:, p * Kp:(p + 1) * Kp].toarray()])
            assert residual <= np.linalg.norm(Up @ sopt.nnls(Up, qvec)[0] - qvec) + 1e-9
    # "all": one NNLS against every topic
    every = copy.copy(demo_model).set_params(category_inference="all")
    v_all, g_all = every.fold_query(_query(engine, "cheap flights to europe in summer"))
    U_all = np.hstack([demo_model.shared_topics_, demo_model.category_topics_.toarray()])
    np.testing.assert_allclose(v_all, sopt.nnls(U_all, qvec)[0], atol=1e-8)
    assert g_all == -1 and Ks < len(v_all)


def test_training_question_folds_back_to_its_coefficients(toy_engine):
    view = toy_engine.view
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = TopicModel("gnmf", n_shared=2, n_category=2, max_iter=3000, tol=1e-10,
                           random_state=0).fit(view)
    counts = view.index["question"].rows_matrix()
    cats = [q.category for q in view.archive]
    coef, groups = model.fold_in(counts, cats)
    np.testing.assert_array_equal(groups, model.doc_group_)
    err = np.linalg.norm(coef - model.doc_topics_) / np.linalg.norm(model.doc_topics_)
    assert err < 0.05


def test_category_inference_methods(demo_index, demo_model):
    engine = SearchEngine.open(demo_index)
    view = engine.view
    counts = view.index["question"].rows_matrix()[:60]
    truth = np.array([demo_model.categories_.index(view.archive[r].category)
                      for r in range(60)])
    _, by_reconstruction = demo_model.fold_in(counts)
    assert np.mean(by_reconstruction == truth) > 0.4  # 10 categories
    hits = TopicModel(**{**demo_model.get_params(), "category_inference": "hits"})
    hits.__dict__.update({k: v for k, v in demo_model.__dict__.items() if k.endswith("_")})
    _, by_hits = hits.fold_in(counts, view=view)
    assert np.mean(by_hits == truth) > 0.8  # its own question is its top hit
    # hits: the category with the largest BM25 mass among the top hits
    q = _query(engine, "visa renewal office")
    scores, matched = BM25().score_all(view.index["question"], q.term_ids, q.qtf)
    top = np.argsort(-np.where(matched, scores, -np.inf), kind="stable")[:10]
    votes = np.bincount(demo_model.doc_group_[top], weights=scores[top],
                        minlength=len(demo_model.categories_))
    assert hits.fold_query(q, view)[1] == int(np.argmax(votes))
    # a given category is used as is, an unknown one is inferred
    assert demo_model.fold_query(_query(engine, "visa renewal office", "Health"))[1] == \
        demo_model.categories_.index("Health")


def test_stored_models_give_named_features_and_survive_reopening(index_copy, demo_model):
    add_model(index_copy, "topics-gnmfnc", demo_model)
    other = TopicModel(**{**demo_model.get_params(), "feature_name": "topic_gnmfnc_b"})
    other.__dict__.update({k: v for k, v in demo_model.__dict__.items() if k.endswith("_")})
    add_model(index_copy, "topics-gnmfnc-b", other)
    for mmap in (True, False):
        engine = SearchEngine.open(index_copy, mmap=mmap, verify=True)
        assert {"topic_gnmfnc", "topic_gnmfnc_b"} <= set(engine.feature_names)
        res = engine.search("my nose is blocked", k=5)
        fresh = demo_model.scorer(engine.view).score(
            _query(engine, "my nose is blocked"), engine.archive.rows(res.doc_ids))[:, 0]
        column = res.features[:, res.feature_names.index("topic_gnmfnc")]
        np.testing.assert_allclose(column, fresh, rtol=1e-6)
        np.testing.assert_allclose(column, res.features[:, res.feature_names.index(
            "topic_gnmfnc_b")])
        loaded = engine.models["topics-gnmfnc"]
        np.testing.assert_array_equal(loaded.doc_topics_, demo_model.doc_topics_)
        assert loaded.categories_ == demo_model.categories_


def test_interpolation_eq14():
    out = interpolate([3.0, 1.0, 2.0, 7.0, 7.0], [0.2, 0.9, 0.5, 0.1, 0.3], 0.6,
                      qid=["a", "a", "a", "b", "b"])
    expected = [0.6 * 0.2 + 0.4 * 1.0, 0.6 * 0.9 + 0.0, 0.6 * 0.5 + 0.4 * 0.5, 0.06, 0.18]
    np.testing.assert_allclose(out, expected)
    np.testing.assert_allclose(interpolate([1.0, 2.0], [0.5, 0.1], 0.0), [0.0, 1.0])
    with pytest.raises(ValueError, match="alpha must be in"):
        interpolate([1.0], [1.0], 1.5)


def test_interpolation_as_a_stored_ranker(index_copy, demo_model):
    add_model(index_copy, "topics-gnmfnc", demo_model)
    plain = SearchEngine.open(index_copy, config=SearchConfig(ranker=None))
    res = plain.search("my nose is blocked and my head hurts", k=None)
    names = res.feature_names
    expected = interpolate(res.features[:, names.index("bm25")],
                           res.features[:, names.index("topic_gnmfnc")], 0.6)
    order = np.lexsort((np.arange(len(expected)), -expected))
    add_model(index_copy, "ranker", TopicInterpolation("bm25", "topic_gnmfnc", 0.6))
    ranked = SearchEngine.open(index_copy).search("my nose is blocked and my head hurts", k=5)
    assert list(ranked.doc_ids) == [res.doc_ids[i] for i in order[:5]]


def test_questions_added_later_are_folded_in(tmp_path):
    lines = (demo_dir() / DEMO_ARCHIVE).read_text(encoding="utf-8").splitlines()
    first, everything = tmp_path / "first.jsonl", tmp_path / "all.jsonl"
    first.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    everything.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index(first, tmp_path / "a")
    build_index(everything, tmp_path / "b")
    small, big = SearchEngine.open(tmp_path / "a"), SearchEngine.open(tmp_path / "b")
    assert big.index.vocab.terms[:len(small.index.vocab)] == small.index.vocab.terms
    model = TopicModel("gnmfnc", n_shared=4, n_category=2, max_iter=10, tol=0).fit(small.view)
    scorer = model.scorer(big.view)  # folds the 27 new questions in
    q = _query(big, "renew my visa")
    assert scorer.score(q, np.arange(big.n_docs)).shape == (327, 1)
    extended = TopicModel("gnmfnc", n_shared=4, n_category=2, max_iter=10,
                          tol=0).fit(small.view).extend(big.view)
    assert extended.n_docs_ == 327
    counts = big.index["question"].rows_matrix()[300:]
    cats = [big.archive[r].category for r in range(300, 327)]
    coef, groups = model.fold_in(counts, cats)
    np.testing.assert_allclose(extended.doc_topics_[300:], coef.astype(np.float32))
    with pytest.raises(IndexFormatError, match="covers 327 questions"):
        extended.scorer(small.view)


def test_cli_fit_topics(index_copy, capsys):
    assert cli(["fit", str(index_copy), "topics", "--model", "cnmf", "--n-category", "2",
                 "--max-iter", "5", "--name", "topics-small", "--feature-name",
                 "topic_small", "-q"]) == 0
    out = capsys.readouterr().out
    assert "topics-small (topics)" in out and "feature    topic_small" in out
    assert "iterations 5" in out
    assert "objective" in out and "time" in out
    engine = SearchEngine.open(index_copy)
    assert "topic_small" in engine.feature_names
    manifest = open_index(index_copy).manifest
    assert manifest["models"]["topics-small"]["kind"] == "topics"
    assert cli(["fit", str(index_copy), "topics", "--model", "gnmf", "--max-iter", "0",
                 "-q"]) == 1
    assert "max_iter must be an integer" in capsys.readouterr().err


def test_fit_does_not_depend_on_the_order_of_term_ids(toy_engine):
    """Two builds of one archive may number the terms differently: same model."""
    from cqa_search.features import IndexView
    from cqa_search.index.term_index import FieldIndex, TermIndex
    from cqa_search.index.vocab import Vocabulary

    view = toy_engine.view
    n_terms = len(view.index.vocab)
    perm = np.random.default_rng(0).permutation(n_terms)      # new id -> old id
    new_id = np.empty(n_terms, dtype=np.int64)
    new_id[perm] = np.arange(n_terms)
    fields = {}
    for name, fi in view.index.fields.items():
        m = fi.matrix()[:, perm].tocsc()
        m.sort_indices()
        fields[name] = FieldIndex(name, m.indptr.astype(np.int64), m.indices.astype(np.int32),
                                  m.data.astype(np.int32), fi.doc_len,
                                  new_id[fi.sequence].astype(np.int32))
    vocab = Vocabulary([view.index.vocab.terms[i] for i in perm])
    other = IndexView(TermIndex(vocab, fields), view.archive, view.analyzer, view.categories)
    a = TopicModel("gnmfnc", n_shared=2, n_category=2, max_iter=10, tol=0).fit(view)
    b = TopicModel("gnmfnc", n_shared=2, n_category=2, max_iter=10, tol=0).fit(other)
    np.testing.assert_array_equal(a.doc_topics_, b.doc_topics_)
    np.testing.assert_array_equal(a.shared_topics_[perm], b.shared_topics_)
