"""Term models against naive reference implementations (plain loops over the definitions)."""
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cqa_search import SearchConfig
from cqa_search.analysis import Analyzer
from cqa_search.index.term_index import TermIndexBuilder
from cqa_search.archive import Question
from cqa_search.retrieval import (BM25, VSM, LMDirichlet, LMJelinekMercer, make_model,
                                  parse_model)


def make_field(docs):
    """A FieldIndex over token lists (no analysis: each token is a term)."""
    # "-" stands for an empty document (a question needs some text) and is a stopword.
    analyzer = Analyzer(stopwords=["-"], stem=None, token_pattern=r"\S+")
    builder = TermIndexBuilder(analyzer, fields=("question",))
    for i, tokens in enumerate(docs):
        builder.add(Question(f"d{i}", " ".join(tokens) or "-"))
    index = builder.build()
    return index, index["question"]


def query_arrays(index, query_tokens):
    ids = [index.vocab.id(t) for t in query_tokens if index.vocab.id(t) >= 0]
    uniq, counts = np.unique(np.array(ids, dtype=np.int64), return_counts=True)
    return uniq, counts.astype(float)


# -- naive references ----------------------------------------------------------------------
def naive_bm25(docs, query, k1, b, method):
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            df = sum(1 for x in docs if t in x)
            if df == 0 or t not in tf:
                continue
            if method == "robertson":
                idf = math.log(max(1.0, (n - df + 0.5) / (df + 0.5)))
            elif method == "lucene":
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            else:
                idf = math.log(n / df)
            denom = tf[t] + k1 * (1 - b + b * len(d) / avgdl)
            num = tf[t] * (k1 + 1) if method == "atire" else tf[t]
            s += idf * num / denom
        out.append(s)
    return np.array(out)


def collection(docs):
    cf = Counter(t for d in docs for t in d)
    return cf, sum(cf.values())


def naive_jm(docs, query, lam):
    cf, total = collection(docs)
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if cf[t] == 0:
                continue
            p_ml = tf[t] / len(d) if d else 0.0
            s += math.log((1 - lam) * p_ml + lam * cf[t] / total)
        out.append(s)
    return np.array(out)


def naive_dirichlet(docs, query, mu):
    cf, total = collection(docs)
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if cf[t] == 0:
                continue
            s += math.log((tf[t] + mu * cf[t] / total) / (len(d) + mu))
        out.append(s)
    return np.array(out)


def naive_vsm(docs, query, sublinear, smooth):
    n = len(docs)
    vocab = sorted({t for d in docs for t in d})
    df = {t: sum(1 for d in docs if t in d) for t in vocab}
    idf = {t: math.log((1 + n) / (1 + df[t])) + 1 if smooth else math.log(n / df[t]) + 1
           for t in vocab}

    def vec(tokens):
        tf = Counter(t for t in tokens if t in idf)
        v = {t: (1 + math.log(c) if sublinear else c) * idf[t] for t, c in tf.items()}
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {t: x / norm for t, x in v.items()} if norm else v

    q = vec(query)
    return np.array([sum(q[t] * w for t, w in vec(d).items() if t in q) for d in docs])


DOCS = [
    "visa renewal office visa passport".split(),
    "renew residence visa online".split(),
    "cheap sofa furniture market".split(),
    "furniture shop cheap beds cheap tables".split(),
    "car battery alternator".split(),
    "".split(),
    "battery".split(),
]
QUERIES = [["visa", "renew"], ["cheap", "furniture", "cheap"], ["battery", "unknownword"],
           ["zzz"], ["visa", "visa", "office", "car"]]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0), (1.5, 0.0)])
def test_bm25_matches_naive(method, k1, b):
    index, field = make_field(DOCS)
    model = BM25(k1=k1, b=b, method=method)
    for q in QUERIES:
        ids, qtf = query_arrays(index, q)
        scores, matched = model.score_all(field, ids, qtf)
        np.testing.assert_allclose(scores, naive_bm25(DOCS, q, k1, b, method), atol=1e-6)


@pytest.mark.parametrize("lam", [0.2, 0.5, 0.9, 1.0])
def test_jelinek_mercer_matches_naive(lam):
    index, field = make_field(DOCS)
    for q in QUERIES:
        ids, qtf = query_arrays(index, q)
        scores, _ = LMJelinekMercer(lam=lam).score_all(field, ids, qtf)
        np.testing.assert_allclose(scores, naive_jm(DOCS, q, lam), atol=1e-6)


@pytest.mark.parametrize("mu", [1.0, 10.0, 2000.0])
def test_dirichlet_matches_naive(mu):
    index, field = make_field(DOCS)
    for q in QUERIES:
        ids, qtf = query_arrays(index, q)
        scores, _ = LMDirichlet(mu=mu).score_all(field, ids, qtf)
        np.testing.assert_allclose(scores, naive_dirichlet(DOCS, q, mu), atol=1e-6)


@pytest.mark.parametrize("sublinear", [False, True])
@pytest.mark.parametrize("smooth", [False, True])
def test_vsm_matches_naive(sublinear, smooth):
    index, field = make_field(DOCS)
    for q in QUERIES:
        ids, qtf = query_arrays(index, q)
        scores, _ = VSM(sublinear_tf=sublinear, smooth_idf=smooth).score_all(field, ids, qtf)
        np.testing.assert_allclose(scores, naive_vsm(DOCS, q, sublinear, smooth), atol=1e-6)


def test_vsm_equals_scikit_learn_cosine():
    from sklearn.feature_extraction.text import TfidfVectorizer

    index, field = make_field(DOCS)
    vec = TfidfVectorizer(analyzer=lambda s: s.split(), vocabulary=index.vocab.terms)
    X = vec.fit_transform([" ".join(d) for d in DOCS])
    for q in QUERIES:
        ids, qtf = query_arrays(index, q)
        expected = (X @ vec.transform([" ".join(q)]).T).toarray().ravel()
        np.testing.assert_allclose(VSM().score_all(field, ids, qtf)[0], expected, atol=1e-6)


def test_bm25_equals_bm25s_robertson():
    bm25s = pytest.importorskip("bm25s")
    index, field = make_field(DOCS)
    retriever = bm25s.BM25(method="robertson", k1=1.5, b=0.75)
    vocab = {t: i for i, t in enumerate(index.vocab.terms)}
    retriever.index(bm25s.tokenization.Tokenized(
        ids=[[vocab[t] for t in d] for d in DOCS], vocab=vocab), show_progress=False)
    model = BM25(k1=1.5, b=0.75, method="robertson")
    for q in [["visa", "renew"], ["cheap", "furniture"], ["battery", "car", "visa"]]:
        ids, qtf = query_arrays(index, q)
        expected = retriever.get_scores([vocab[t] for t in q])
        np.testing.assert_allclose(model.score_all(field, ids, qtf)[0], expected, atol=1e-5)


words = st.sampled_from("abcdefgh")


@settings(max_examples=60, deadline=None)
@example(docs=[[]], query=["a"], name="vsm")  # an index without a single term
@given(docs=st.lists(st.lists(words, max_size=8), min_size=1, max_size=8),
       query=st.lists(words, min_size=1, max_size=5),
       name=st.sampled_from(["bm25", "bm25:method=robertson", "bm25:method=atire", "lm_jm",
                             "lm_dir", "vsm"]))
def test_score_rows_equals_score_all_and_naive(docs, query, name):
    """Property: candidate scoring (binary search in postings) == full scoring == naive, and
    "matched" means holding a query term, whatever the score (0 for a robertson or atire
    idf of 0)."""
    index, field = make_field(docs)
    model = parse_model(name)
    ids, qtf = query_arrays(index, query)
    full, matched = model.score_all(field, ids, qtf)
    rows = np.arange(len(docs))[::-1]
    # full scores use the float32 posting weights, candidate scores float64: 1e-6 relative
    # (absolute near 0, where a score cancels out: lm_jm of a one-document collection)
    np.testing.assert_allclose(model.score_rows(field, ids, qtf, rows), full[rows], rtol=1e-6,
                               atol=1e-6)
    naive = {"bm25": lambda: naive_bm25(docs, query, 1.2, 0.75, "lucene"),
             "bm25:method=robertson": lambda: naive_bm25(docs, query, 1.2, 0.75, "robertson"),
             "bm25:method=atire": lambda: naive_bm25(docs, query, 1.2, 0.75, "atire"),
             "lm_jm": lambda: naive_jm(docs, query, 0.2),
             "lm_dir": lambda: naive_dirichlet(docs, query, 2000.0),
             "vsm": lambda: naive_vsm(docs, query, False, True)}[name]()
    np.testing.assert_allclose(full, naive, rtol=1e-6, atol=1e-6)
    assert matched.tolist() == [any(t in d for t in query) for d in docs]


def test_cached_weights_give_the_same_candidate_scores():
    index, field = make_field(DOCS)
    ids, qtf = query_arrays(index, ["visa", "cheap", "battery"])
    rows = np.array([0, 3, 4, 5])
    for model in (BM25(), LMJelinekMercer(), LMDirichlet(), VSM()):
        fresh = model.score_rows(field, ids, qtf, rows)
        model.posting_weights(field)  # now cached
        np.testing.assert_allclose(model.score_rows(field, ids, qtf, rows), fresh, atol=1e-6)


def test_make_model_and_parameter_errors():
    assert make_model("answers-lm-jm", lam=0.5) == LMJelinekMercer(field="answers", lam=0.5)
    with pytest.raises(ValueError, match=r"model must be one of \{bm25, bm25f, lm-jm, lm-dir, "
                                          r"vsm\}"):
        make_model("bm26")
    with pytest.raises(ValueError, match=r"method must be \{'lucene', 'robertson', 'atire'\}; "
                                          r"got 'okapi'"):
        make_model("bm25", method="okapi")
    # as scikit-learn's estimators: stored as given, checked on first use
    model = BM25(k1=-1)
    with pytest.raises(ValueError, match=r"k1 must be a number in \(0, inf\); got -1"):
        model.cache_key()
    assert model.set_params(k1=1.5).cache_key() == "bm25(b=0.75,k1=1.5,method=lucene)"
    with pytest.raises(ValueError, match="BM25 has no parameter 'k3'"):
        model.set_params(k3=1)
    with pytest.raises(ValueError, match=r"lam must be a number in \(0, 1\]; got 0"):
        SearchConfig(features=(LMJelinekMercer(lam=0),))
