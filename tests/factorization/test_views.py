"""Views for SMT + MF: the translators, and tf-idf views with their encoders."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer

from cqa_search import Analyzer, Question, SearchEngine, build_index
from cqa_search.factorization.views import (
    ArchiveTranslator, DictionaryTranslator, DummyTranslator, IBM1Translator, SourceBags,
    ViewEncoder, build_view, find_translation_table, make_translator, parse_views, top_per_row)

DICTD = os.path.join(os.path.dirname(__file__), "..", "data", "dictd")
PLAIN = os.path.join(DICTD, "freedict-eng-tst.index")
DZ = os.path.join(DICTD, "freedict-eng-tsz.index")


# -- translators ------------------------------------------------------------------------
def test_dictionary_translator_from_dir_errors(tmp_path):
    with pytest.raises(ValueError, match=r"dictionary directory .*nowhere does not exist: "
                                                r"install it with `apt-get install "
                                                r"dict-freedict-eng-fra`"):
        DictionaryTranslator.from_dir("fra", tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"no dictd dictionary for 'fra' in .*found: "
                                                r"freedict-eng-tst, freedict-eng-tsz\): install "
                                                r"it with `apt-get install dict-freedict-eng-fra`"):
        DictionaryTranslator.from_dir("fra", DICTD)
    t = DictionaryTranslator.from_dir("tst", DICTD)
    assert t.name == "tst" and t.source == "tokens"
    assert DictionaryTranslator(DZ).name == "tsz"


def test_dictionary_token_table_shares_weight_between_translations():
    t = DictionaryTranslator(PLAIN, n_translations=3)
    table, vocab = t.token_table(["bank", "cheap", "houses", "zebra"], Analyzer())
    dense = table.toarray()
    col = {w: i for i, w in enumerate(vocab)}
    np.testing.assert_allclose(dense[0, [col["banque"], col["rive"], col["berge"]]], 1 / 3)
    # two translations, each split into its words (foreign text: lowercase, no stopwords)
    np.testing.assert_allclose(dense[1, [col["bon"], col["marché"], col["pas"], col["cher"]]], 0.5)
    assert dense[2, col["maison"]] == 1.0           # found by stem
    assert dense[3].sum() == 0                       # not in the dictionary
    assert "déposer" not in col                      # fourth translation of bank: not kept


def test_ibm1_translator_keeps_top_translations_of_a_hand_built_table():
    # 3 terms; row 0 = NULL (ignored); row 1 + s = p(. | s)
    probs = sp.csr_matrix(np.array([[0.9, 0.05, 0.05],
                                    [0.6, 0.3, 0.1],
                                    [0.0, 1.0, 0.0],
                                    [0.2, 0.2, 0.6]]))

    class View:
        class index:
            vocab = ["a", "b", "c"]
    t = IBM1Translator(probs, n_translations=2)
    table, vocab = t.term_table(View)
    assert vocab is None
    np.testing.assert_allclose(table.toarray(), [[2 / 3, 1 / 3, 0], [0, 1, 0], [0.25, 0, 0.75]])
    np.testing.assert_allclose(IBM1Translator(probs, n_translations=3, min_prob=0.15)
                               .term_table(View)[0].toarray(),
                               [[2 / 3, 1 / 3, 0], [0, 1, 0], [0.2, 0.2, 0.6]])
    with pytest.raises(ValueError, match=r"shape \(n_terms \+ 1, n_terms\) = \(4, 3\) for this "
                                         r"index; got \(3, 3\)"):
        IBM1Translator(probs[1:]).term_table(View)
    with pytest.raises(ValueError, match="n_translations must be a positive integer; got 0"):
        IBM1Translator(probs, n_translations=0)


def test_top_per_row_ties_and_empty_rows():
    m = sp.csr_matrix(np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(top_per_row(m, 1).toarray(), [[1.0, 0, 0], [0, 0, 0]])


# -- views of an index ---------------------------------------------------------------------
QUESTIONS = [
    Question("a", "How to renew my visa", "The visa office in Doha",
             extra={"translations": {"fr": "Comment renouveler mon visa"}}),
    Question("b", "Visa renewal office hours", "When does the office open",
             extra={"translations": {"fr": {"title": "Heures du bureau", "body": "des visas"}}}),
    Question("c", "Cheap sofa in Doha", "Where to buy a cheap sofa",
             extra={"translations": {"fr": "Canapé pas cher à Doha"}}),
    Question("d", "Houses for rent", "Looking for a house near the bank"),
    Question("e", "Bank account for work", "Which bank is good for a work account"),
]


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "idx"
    build_index(QUESTIONS, path)
    return SearchEngine.open(path).view


def _query(view, text):
    from cqa_search.features import AnalyzedQuery
    vocab = view.index.vocab
    terms = view.analyzer.analyze(text)
    seq = np.array([vocab.id(t) for t in terms if vocab.id(t) >= 0], dtype=np.int64)
    ids, qtf = np.unique(seq, return_counts=True)
    return AnalyzedQuery(text, tuple(terms), ids, qtf.astype(float), seq)


def test_dummy_view_is_the_tfidf_of_the_question_field(view):
    X, enc = build_view(DummyTranslator(), view)
    counts = view.index["question"].rows_matrix()
    expected = TfidfTransformer().fit_transform(counts)
    np.testing.assert_allclose(X.toarray(), expected.toarray(), atol=1e-12)
    assert enc.source == "terms" and list(enc.terms) == list(range(len(view.index.vocab)))


@pytest.mark.parametrize("make", [lambda: DummyTranslator(),
                                  lambda: DictionaryTranslator(PLAIN)], ids=["terms", "tokens"])
def test_a_question_asked_as_a_query_encodes_like_the_archived_question(view, make):
    X, enc = build_view(make(), view, bags=SourceBags(view))
    n_terms = len(view.index.vocab)
    for row, q in enumerate(QUESTIONS):
        got = enc.encode_query(_query(view, q.text), view.analyzer, n_terms).toarray()[0]
        np.testing.assert_allclose(got, X[row].toarray()[0], atol=1e-12)


def test_dictionary_view_of_the_archive(view):
    X, enc = build_view(DictionaryTranslator(PLAIN), view)
    vocab = enc.vocabulary
    assert {"visa", "renouveler", "bureau", "canapé", "maison", "banque"} <= set(vocab)
    # only tokens that have a translation are kept as sources
    assert "renew" in enc.tokens and "hours" not in enc.tokens
    assert X.shape == (5, len(vocab))
    np.testing.assert_allclose(np.sqrt(X.multiply(X).sum(axis=1)).A.ravel(), 1.0)


def test_min_df_drops_rare_words(view):
    X1, enc1 = build_view(DictionaryTranslator(PLAIN), view)
    X2, enc2 = build_view(DictionaryTranslator(PLAIN), view, min_df=2)
    assert set(enc2.vocabulary) < set(enc1.vocabulary)
    assert "visa" in enc2.vocabulary and "maison" not in enc2.vocabulary
    with pytest.raises(ValueError, match="view 'tst' is empty: no word of it occurs in 9 or more"):
        build_view(DictionaryTranslator(PLAIN), view, min_df=9)


def test_archive_translations_make_a_view_and_queries_get_an_empty_bag(view):
    X, enc = build_view(ArchiveTranslator("fr"), view)
    assert enc.name == "fr" and enc.source == "texts"
    assert {"renouveler", "heures", "canapé", "cher"} <= set(enc.vocabulary)
    assert X[3].nnz == 0 and X[4].nnz == 0          # no translation given
    q = enc.encode_query(_query(view, "renew visa"), view.analyzer, len(view.index.vocab))
    assert q.nnz == 0
    with pytest.raises(ValueError, match=r"no archived question has a translation 'de' "
                                         r"\(looked for question.extra\['translations'\]\['de'\]"):
        build_view(ArchiveTranslator("de"), view)


def test_ibm1_view_over_index_terms(view):
    n = len(view.index.vocab)
    vocab = view.index.vocab
    probs = sp.lil_matrix((n + 1, n))
    probs[0, :] = 1.0 / n
    for t in range(n):
        probs[1 + t, t] = 1.0
    probs[1 + vocab.id("sofa"), vocab.id("hous")] = 1.0  # sofa -> house
    X, enc = build_view(IBM1Translator(probs.tocsr(), n_translations=2), view)
    assert enc.source == "terms" and enc.vocabulary is None
    house = list(enc.terms).index(vocab.id("hous"))
    assert X[2, house] > 0                        # the sofa question now mentions houses


def test_encoder_state_round_trip(view):
    for make in (DummyTranslator, lambda: DictionaryTranslator(PLAIN),
                 lambda: ArchiveTranslator("fr")):
        X, enc = build_view(make(), view)
        meta, arrays = enc.state("v1_")
        assert all(k.startswith("v1_") for k in arrays)
        back = ViewEncoder.from_state(meta, arrays, "v1_")
        q = _query(view, "cheap house near the visa office")
        n = len(view.index.vocab)
        np.testing.assert_array_equal(back.encode_query(q, view.analyzer, n).toarray(),
                                      enc.encode_query(q, view.analyzer, n).toarray())


def test_make_translator_and_view_specs(tmp_path):
    assert parse_views("dict:fra, ibm1,,dummy") == ["dict:fra", "ibm1", "dummy"]
    assert isinstance(make_translator("dummy"), DummyTranslator)
    assert make_translator("archive:de").name == "de"
    assert make_translator("dict:tst", dict_dir=DICTD, n_translations=1).n_translations == 1
    with pytest.raises(ValueError, match="unknown view 'google:fr': use dict:LANG, ibm1, "
                                         "archive:LANG or dummy"):
        make_translator("google:fr")
    with pytest.raises(ValueError, match="view 'ibm1' needs an IBM Model 1 translation table"):
        make_translator("ibm1")
    with pytest.raises(ValueError, match="apt-get install dict-freedict-eng-deu"):
        make_translator("dict:deu", dict_dir=tmp_path)


def test_find_translation_table():
    class M:
        def __init__(self, t):
            self.translation_probs_ = t
    a, b = sp.csr_matrix((2, 1)), sp.csr_matrix((2, 1))
    assert find_translation_table({"x": object()}) is None
    assert find_translation_table({"x": object(), "t": M(a)}) is a
    with pytest.raises(ValueError, match=r"several models have a translation table \(t, u\)"):
        find_translation_table({"t": M(a), "u": M(b)})
    assert find_translation_table({"t": M(a), "u": M(b)}, "u") is b
    with pytest.raises(ValueError, match="model 'x' has no IBM Model 1 table"):
        find_translation_table({"x": object(), "t": M(a)}, "x")


def test_real_freedict_dictionary_when_installed():
    path = "/usr/share/dictd/freedict-eng-fra.index"
    if not os.path.exists(path):
        pytest.skip("dict-freedict-eng-fra is not installed")
    t = DictionaryTranslator.from_dir("fra")
    assert "maison" in t.translate("house")
    assert t.translate("houses", Analyzer().stem_word) == t.translate("house")
