"""The stored translation model: fit, add_model/open, the engine's features, CLI."""
import shutil

import numpy as np
import pytest

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.cli.__main__ import main
from cqa_search.exceptions import NotFittedError
from cqa_search.index.models import add_model, model_class
from cqa_search.index.store import verify_index
from cqa_search.translation import FEATURE_NAMES, IBMModel1, TranslationModel


@pytest.fixture
def index_copy(gap_index, tmp_path):
    path = tmp_path / "idx"
    shutil.copytree(gap_index, path)
    return path


def test_kinds_are_registered():
    assert model_class("translation") is TranslationModel and model_class("ibm1") is IBMModel1


def test_fit_with_defaults_store_and_reopen(index_copy):
    engine = SearchEngine.open(index_copy)
    model = TranslationModel().fit(engine.view)
    assert model.get_params() == TranslationModel().get_params()
    s = model.summary_
    assert s.corpus["pooled"] and s.corpus["textrank"] and s.n_iter == model.ibm1_.n_iter_
    text = str(s)
    for word in ("pairs", "vocabulary", "textrank", "EM", "word table", "phrase table",
                 "memory", "time"):
        assert word in text
    add_model(index_copy, "translation", model)
    verify_index(index_copy)
    before = model.scorer(engine.view).score(engine.analyze("visa office renewal"),
                                             np.arange(engine.n_docs))
    for mmap in (True, False):
        reopened = SearchEngine.open(index_copy, mmap=mmap)
        stored = reopened.models["translation"]
        assert (stored.translation_probs_ != model.translation_probs_).nnz == 0
        assert str(stored.summary_).splitlines()[:6] == text.splitlines()[:6]
        res = reopened.with_config(SearchConfig(ranker=None)).search("visa office renewal",
                                                                      k=None)
        assert set(FEATURE_NAMES) <= set(res.feature_names)
        cols = [res.feature_names.index(f) for f in FEATURE_NAMES]
        rows = reopened.archive.rows(res.doc_ids)
        np.testing.assert_allclose(res.features[:, cols], before[rows], rtol=1e-12)


def test_the_fit_shows_which_step_runs(index_copy, shown_bars):
    """The corpus's analysis and TextRank and the phrase extraction have no bar of their
    own: a bar of the three steps names the one running."""
    import cqa_search.translation.model as model_module

    shown = shown_bars(model_module)
    TranslationModel(max_iter=2, tol=None).fit(SearchEngine.open(index_copy).view, progress=True)
    assert shown == [("fitting translation", 3), "parallel corpus (analysis, TextRank)", 1,
                     "IBM Model 1", 1, "phrase table", 1, "closed"]


def test_ibm1_alone_can_be_stored(index_copy):
    engine = SearchEngine.open(index_copy)
    model = TranslationModel(textrank=False, tol=None).fit(engine.view)
    add_model(index_copy, "words", model.ibm1_)
    stored = SearchEngine.open(index_copy).models["words"]
    assert isinstance(stored, IBMModel1)
    assert (stored.translation_probs_ != model.translation_probs_).nnz == 0


def test_errors(gap_engine, tmp_path):
    with pytest.raises(NotFittedError, match="not fitted yet"):
        TranslationModel().scorer(gap_engine.view)
    with pytest.raises(ValueError, match=r"segmentation must be \{'sum', 'max'\}; "
                                         r"got 'mean'"):
        TranslationModel(segmentation="mean").fit(gap_engine.view)
    with pytest.raises(ValueError, match=r"question_weight must be a number in \[0, 1\]"):
        TranslationModel(question_weight=2).fit(gap_engine.view)
    model = TranslationModel(max_iter=2, tol=None).fit(gap_engine.view)
    other = tmp_path / "other"
    from cqa_search import Question
    build_index([Question("a", "a different archive"), Question("b", "tiny")], other)
    with pytest.raises(ValueError, match="trained on a vocabulary of"):
        model.scorer(SearchEngine.open(other).view)


def test_cli_fit_translation(index_copy, capsys):
    code = main(["fit", str(index_copy), "translation", "-q", "--no-textrank", "--max-iter",
                 "3", "--tol", "none", "--no-unaligned-edges", "--title-body", "--name", "tm"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "model      tm (translation)" in out and "EM           3 iterations" in out
    model = SearchEngine.open(index_copy).models["tm"]
    assert not model.textrank and not model.unaligned_edges and model.title_body
    code = main(["fit", str(index_copy), "translation", "-q", "--answers", "none", "--name",
                 "tm"])
    out, err = capsys.readouterr()
    assert code == 1 and "error: no parallel pairs" in err and "Traceback" not in err


def test_build_index_models_translation_on_an_archive_without_answers(tmp_path, capsys):
    from cqa_search import Question

    archive = tmp_path / "a.jsonl"
    archive.write_text("".join(Question(f"q{i}", t, b).to_json() + "\n" for i, (t, b) in
                               enumerate([("renew visa", "how to renew a residence visa"),
                                          ("visa fee", "what is the fee to renew a visa"),
                                          ("cheap sofa", "where to buy a cheap sofa")])))
    code = main(["build-index", str(archive), "-o", str(tmp_path / "idx"), "--models",
                 "translation", "-q"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "cqa-search: warning: the archive has no answers: the translation model learns " \
           "from its title-body pairs instead" in err
    assert "3 title-body" in out
    assert "wt" in SearchEngine.open(tmp_path / "idx").feature_names


def test_a_model_extended_to_a_grown_vocabulary_scores_the_old_terms_as_before(index_copy):
    """An index that gained questions has more terms than the model: the extended model
    (new terms translate to themselves, are in no bi-phrase) gives the old terms' features
    unchanged."""
    from cqa_search.translation.scoring import TranslationScorer

    engine = SearchEngine.open(index_copy)
    model = TranslationModel(textrank=False, tol=None, max_iter=3).fit(engine.view)
    n = len(engine.index.vocab)
    wider = model.extended(n + 50)
    assert wider.ibm1_.translation_probs_.shape == (n + 51, n + 50)
    np.testing.assert_allclose(wider.ibm1_.translation_probs_.sum(axis=1), 1.0, rtol=1e-6)
    assert wider.ibm1_.translation_probs_[n + 10, n + 9] == 1.0  # a new term: itself
    assert model.extended(n) is model
    rows = np.arange(engine.n_docs)
    for text in ("visa office renewal", "cheap sofa furniture shop", "the car will not start"):
        q = engine.analyze(text)
        np.testing.assert_allclose(TranslationScorer(wider, engine.view).score(q, rows),
                                   TranslationScorer(model, engine.view).score(q, rows),
                                   rtol=1e-12, atol=1e-12)
    old = model.phrase_table_
    new = wider.phrase_table_
    pairs = old.pair_keys_[:50]
    n_old = len(old.vocabulary_)
    src, tgt = pairs // n_old, pairs % n_old
    idx = new.find(old.vocabulary_.shift(src, n + 50), old.vocabulary_.shift(tgt, n + 50))
    np.testing.assert_array_equal(new.forward_[idx], old.forward_[np.arange(50)])
