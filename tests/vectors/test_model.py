"""The stored embeddings model: fit, storage, features, dense search, live additions,
compaction, the command line."""
import json
import shutil

import numpy as np
import pytest

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.data import DEMO_ARCHIVE, demo_dir
from cqa_search.exceptions import ParameterError
from cqa_search.features import analyze
from cqa_search.index.live import add_questions, compact, delete_questions
from cqa_search.index.models import add_model
from cqa_search.index.store import open_index
from cqa_search.retrieval import BM25, VSM
from cqa_search.vectors import FEATURE_NAMES, EmbeddingModel, sif

PARAMS = dict(dim=16, neighbours=10)


def demo_questions():
    lines = (demo_dir() / DEMO_ARCHIVE).read_text(encoding="utf-8").splitlines()
    return [Question.from_dict(json.loads(x)) for x in lines]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory):
    path = tmp_path_factory.mktemp("vectors") / "index"
    build_index(demo_questions(), path)
    engine = SearchEngine.open(path)
    add_model(engine, "embeddings", EmbeddingModel(**PARAMS).fit(engine.view))
    return path


@pytest.fixture(scope="module")
def engine(demo_index):
    return SearchEngine.open(demo_index, config=SearchConfig(ranker=None))


@pytest.fixture
def index_copy(demo_index, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(demo_index, path)
    return path


def scorer_of(engine):
    return next(s for s in engine.searcher._scorers if s.names == FEATURE_NAMES)


def query(engine, title, body=None):
    text = title if body is None else f"{title}\n{body}"
    return analyze(engine.index, engine.analyzer, text,
                   title=None if body is None else title, body=body)


def test_fit_is_deterministic_and_stored_as_arrays(engine, demo_index):
    fitted = engine.models["embeddings"]
    again = EmbeddingModel(**PARAMS).fit(engine.view)
    for (key, a), (_, b) in zip(fitted.state()[1].items(), again.state()[1].items()):
        np.testing.assert_array_equal(a, b, err_msg=key)
    manifest = open_index(demo_index).manifest
    files = [f for f in manifest["files"] if f.startswith("models/embeddings/")]
    assert files and all(f.endswith((".npy", "model.json")) for f in files)
    assert manifest["models"]["embeddings"]["features"] == list(FEATURE_NAMES)
    n = engine.n_docs
    assert fitted.doc_vectors_.shape == (n, 16) and fitted.doc_norms_.shape == (n, 6)
    np.testing.assert_allclose(np.linalg.norm(fitted.doc_vectors_, axis=1)[
        np.any(fitted.doc_vectors_, axis=1)], 1, rtol=1e-5)
    assert "vectors" in fitted.describe() and "dense search exact" in fitted.describe()


def test_features_against_their_definitions(engine, tmp_path):
    model = engine.models["embeddings"]
    sc = scorer_of(engine)
    q = query(engine, "how can I stop my nose from running", "I have a cold and a fever")
    rows = np.arange(0, engine.n_docs, 7)
    F = sc.score(q, rows)
    assert F.shape == (len(rows), len(FEATURE_NAMES)) and np.isfinite(F).all()
    col = {name: F[:, j] for j, name in enumerate(FEATURE_NAMES)}
    v = sif.sentence_vector(q.sequence, model.word_vectors_, model.sif_weights_,
                            model.component_)
    np.testing.assert_allclose(col["emb_sif"], model.doc_vectors_[rows] @ v, rtol=1e-5,
                               atol=1e-6)
    mean = sif.sentence_vector(q.sequence, model.word_vectors_)
    question = engine.index["question"]
    for i, r in enumerate(rows[:10]):
        d = sif.sentence_vector(question.terms_of(r), model.word_vectors_)
        assert col["emb_mean"][i] == pytest.approx(float(d @ mean), abs=1e-5)
    for name in FEATURE_NAMES[2:8]:
        assert (col[name] >= -1e-9).all() and (col[name] <= 1 + 1e-6).all()
    # per-field scores: those of an index built with title and body fields
    fielded = tmp_path / "fielded"
    build_index(demo_questions(), fielded, fields=("question", "answers", "title", "body"))
    other = SearchEngine.open(fielded)
    assert other.index.vocab.terms[:len(engine.index.vocab)] == engine.index.vocab.terms
    for part in ("title", "body"):
        ids, qtf = np.unique(getattr(q, part), return_counts=True)
        for name, m in (("bm25", BM25(field=part)), ("vsm", VSM(field=part))):
            want = m.score_rows(other.index[part], ids, qtf.astype(float), rows)
            np.testing.assert_allclose(col[f"field_{part}_{name}"], want, rtol=1e-6)
    # a model fitted on that index reads its fields (and stores none)
    on_fielded = EmbeddingModel(**PARAMS).fit(other.view)
    assert on_fielded.parts_ is None and "title_indptr" not in on_fielded.state()[1]
    np.testing.assert_allclose(on_fielded.scorer(other.view).score(q, rows), F, rtol=1e-5,
                               atol=1e-6)


def test_soft_cosine_columns_are_the_formula(engine):
    sc = scorer_of(engine)
    model = engine.models["embeddings"]
    q = query(engine, "sinuses plugged up", "my head feels heavy and my nose is stuffy")
    rows = np.arange(60)
    F = sc.score(q, rows)
    n = len(engine.index.vocab)
    idf = np.concatenate([model.idf_, [model.idf_.max()] * (n - len(model.idf_))])
    texts = {"title": sc.fields["title"], "body": sc.fields["body"],
             "question": engine.index["question"]}
    for matrix, S in (("", model.emb_similarity_), ("char_", model.char_similarity_)):
        M = np.eye(n)
        M[:S.shape[0], :S.shape[0]] += S.toarray()
        for text, field in texts.items():
            ids = q.sequence if text == "question" else getattr(q, text)
            x = np.bincount(ids, minlength=n) * idf
            terms, pos = field.sequences_of(rows)
            for i in range(len(rows)):
                y = np.bincount(terms[pos == i], minlength=n) * idf
                want = (x @ M @ y) / np.sqrt((x @ M @ x) * (y @ M @ y)) if y.any() else 0.0
                assert F[i, FEATURE_NAMES.index(f"softcos_{matrix}{text}")] == \
                    pytest.approx(want, rel=1e-5, abs=1e-9)


def test_a_free_text_query_is_its_own_title(engine):
    sc = scorer_of(engine)
    rows = np.arange(40)
    one = sc.score(analyze(engine.index, engine.analyzer, "stuffy nose"), rows)
    titled = sc.score(query(engine, "stuffy nose", ""), rows)
    np.testing.assert_allclose(one, titled)
    body = [FEATURE_NAMES.index(n) for n in ("softcos_body", "softcos_char_body",
                                              "field_body_bm25", "field_body_vsm")]
    assert not one[:, body].any()


def test_nearest_exact_and_by_inverted_file(engine):
    model = engine.models["embeddings"]
    sc = scorer_of(engine)
    q = analyze(engine.index, engine.analyzer, "cheap flights to europe")
    rows, cos = sc.nearest(q, 10)
    everything = model.doc_vectors_ @ sc.query_vector(q)
    assert rows.tolist() == np.lexsort((engine.searcher.data.doc_id_rank * 0 + np.arange(len(
        everything)), -everything))[:10].tolist()
    np.testing.assert_allclose(sc.cosines(q, rows), cos, rtol=1e-6)
    allowed = np.arange(engine.n_docs) % 2 == 0
    rows2, _ = sc.nearest(q, 10, allowed=allowed)
    assert (rows2 % 2 == 0).all()
    # an inverted file read whole gives the exact neighbours
    ivf_model = EmbeddingModel(**PARAMS, exact_limit=0, n_lists=8, n_probe=8).fit(engine.view)
    assert ivf_model.centroids_.shape == (8, 16)
    ivf = ivf_model.scorer(engine.view)
    assert ivf.ivf is not None
    np.testing.assert_array_equal(ivf.nearest(q, 10)[0], rows)
    np.testing.assert_array_equal(ivf.nearest(q, 10, allowed=allowed)[0], rows2)
    # a query without any word that has a vector has no neighbours
    assert len(sc.nearest(analyze(engine.index, engine.analyzer, "zzzzqx"), 5)[0]) == 0


def test_added_questions_get_rows_and_compaction_keeps_them(tmp_path):
    questions = demo_questions()
    path = tmp_path / "idx"
    build_index(questions[:300], path)
    engine = SearchEngine.open(path)
    model = EmbeddingModel(**PARAMS, exact_limit=0, n_lists=4, n_probe=1).fit(engine.view)
    add_model(engine, "embeddings", model)
    add_questions(path, questions[300:])
    grown = SearchEngine.open(path, config=SearchConfig(ranker=None))
    sc = scorer_of(grown)
    assert sc.vectors.shape == (327, 16) and sc.norms.shape == (327, 6)
    # the new rows are what the stored vectors and weights give those questions
    question = grown.index["question"]
    for r in (300, 313, 326):
        np.testing.assert_allclose(
            sc.vectors[r], sif.sentence_vector(question.terms_of(r), model.word_vectors_,
                                               model.sif_weights_, model.component_),
            atol=1e-5)
    fresh = tmp_path / "fresh"  # the same archive built at once: the same rows
    build_index(questions, fresh)
    whole = model.extended_rows(SearchEngine.open(fresh).view)
    np.testing.assert_allclose(sc.vectors, whole.vectors, atol=1e-6)
    np.testing.assert_allclose(sc.norms, whole.norms, rtol=1e-5)
    for part in ("title", "body"):
        np.testing.assert_array_equal(sc.fields[part].sequence, whole.fields[part].sequence)
    q = analyze(grown.index, grown.analyzer, "where can I buy cheap rice")
    rows = np.arange(grown.n_docs)
    before = sc.score(q, rows)
    by_id = dict(zip(grown.archive.doc_ids, before))
    # new rows are scanned exactly by the dense search (not in the lists yet)
    best = np.argmax(sc.vectors @ sc.query_vector(q))
    assert sc.nearest(q, 1)[0][0] == best
    delete_questions(path, [grown.archive.doc_ids[5], grown.archive.doc_ids[310]])
    compact(path)
    after = SearchEngine.open(path, config=SearchConfig(ranker=None))
    stored = after.models["embeddings"]
    assert stored.doc_vectors_.shape == (325, 16) and stored.doc_list_.shape == (325,)
    assert stored.parts_["title"].n_docs == 325
    sc_after = scorer_of(after)
    scored = sc_after.score(q, np.arange(after.n_docs))
    kept = np.array([by_id[d] for d in after.archive.doc_ids])
    # the same features, but the per-field BM25 and cosine, whose collection statistics
    # counted the deleted questions until the compaction (the index's own fields' do not)
    fields = [j for j, n in enumerate(FEATURE_NAMES) if n.startswith("field_")]
    others = [j for j in range(len(FEATURE_NAMES)) if j not in fields]
    np.testing.assert_allclose(scored[:, others], kept[:, others], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scored[:, fields], kept[:, fields], rtol=1e-2)
    # every row is now in the list of its nearest centroid
    np.testing.assert_array_equal(stored.doc_list_, np.argmax(
        stored.doc_vectors_ @ stored.centroids_.T, axis=1))


def test_validation_and_errors(engine, tmp_path):
    with pytest.raises(ParameterError, match="method must be .'ppmi-svd', 'word2vec'.; got 'glove'"):
        EmbeddingModel("glove").fit(engine.view)
    with pytest.raises(ParameterError, match="dim must be an integer"):
        EmbeddingModel(dim=0).fit(engine.view)
    path = tmp_path / "tiny"
    build_index([Question("a", "one word"), Question("b", "other text")], path)
    with pytest.raises(ParameterError, match="no word of this archive occurs 2 times"):
        EmbeddingModel().fit(SearchEngine.open(path).view)
    model = engine.models["embeddings"]
    meta, arrays = model.state()
    arrays = dict(arrays, doc_norms=arrays["doc_norms"][:-1])
    from cqa_search.index.validate import InvalidArray

    with pytest.raises(InvalidArray, match="soft-cosine norms has shape"):
        EmbeddingModel.from_state(model.get_params(), meta, arrays)
    for part in ("title", "body"):  # issue 43: a zeroed count gave NaN in every query
        zeroed = dict(model.state()[1])
        zeroed[f"{part}_counts"] = np.zeros_like(zeroed[f"{part}_counts"])
        with pytest.raises(InvalidArray, match=f"{part} counts holds 0, below its bound 1"):
            EmbeddingModel.from_state(model.get_params(), meta, zeroed)


def test_cli_fit_and_build_index_models(index_copy, tmp_path, capsys):
    from cqa_search.cli.__main__ import main

    assert main(["fit", str(index_copy), "embeddings", "--dim", "8", "--neighbours", "5",
                 "-q"]) == 0
    out = capsys.readouterr().out
    assert "embeddings (embeddings)" in out and "8 dimensions" in out
    assert SearchEngine.open(index_copy).models["embeddings"].dim == 8
    with pytest.raises(SystemExit):
        main(["fit", str(index_copy), "embeddings", "--method", "glove"])
    assert "must be one of ppmi-svd, word2vec" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", str(index_copy), "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "word vectors learned from the archive" in help_text and "Costs:" in help_text
    archive = tmp_path / "a.jsonl"
    archive.write_text("\n".join(q.to_json() for q in demo_questions()[:60]) + "\n")
    assert main(["build-index", str(archive), "-o", str(tmp_path / "b"), "--models",
                 "embeddings", "-q"]) == 0
    engine = SearchEngine.open(tmp_path / "b")
    assert "emb_sif" in engine.feature_names
    res = engine.search(demo_questions()[0].title, k=3)
    assert len(res) and np.isfinite(res.features).all()


def test_the_query_path_imports_neither_scikit_learn_nor_gensim(demo_index):
    """Opening an index with an embeddings model and searching it needs numpy and scipy
    only (scikit-learn costs ~1.5 s of start-up; gensim is for fitting)."""
    import subprocess
    import sys

    code = ("import sys; from cqa_search import SearchEngine, SearchConfig; "
            f"e = SearchEngine.open({str(demo_index)!r}); "
            "q = e.analyze('stuffy nose'); s = [x for x in e.searcher._scorers if 'emb_sif' in x.names][0]; "
            "rows, _ = s.nearest(q, 5); e.rerank('stuffy nose', e.searcher.doc_ids(rows)); "
            "e.search('stuffy nose'); "
            "print(sorted(m for m in ('sklearn', 'gensim') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.strip() == "[]"


def test_the_fit_bar_names_the_step_running(engine, shown_bars):
    """The bar shows the step under way (the first, the word vectors, is most of the time:
    it showed no name until it was done)."""
    import cqa_search.vectors.model as model_module

    shown = shown_bars(model_module)
    model = EmbeddingModel(**PARAMS).fit(engine.view, progress=True)
    steps = list(model.fit_seconds_)
    assert len(steps) == 6 and shown == [("fitting embeddings", 6), steps[0],
                                         *[x for s in steps[1:] for x in (1, s)], 1, "closed"]
