"""The kernels of the word-vector model against naive loops: SIF, dense search, soft
cosine, co-occurrence counts."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.index.term_index import FieldIndex
from cqa_search.vectors import dense, embeddings, sif, softcos


def random_sentences(rng, n, n_terms, max_len=8):
    lengths = rng.integers(0, max_len, n)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return rng.integers(0, n_terms, offsets[-1]), offsets


def field_of(sentences, n_terms):
    """A FieldIndex over documents given as lists of term ids."""
    rows = [r for r, s in enumerate(sentences) for _ in s]
    terms = [t for s in sentences for t in s]
    m = sp.csc_matrix((np.ones(len(terms), np.int32), (rows, terms)),
                      shape=(len(sentences), n_terms))
    m.sum_duplicates()
    m.sort_indices()
    return FieldIndex("f", m.indptr.astype(np.int64), m.indices.astype(np.int32),
                      m.data.astype(np.int32), np.array([len(s) for s in sentences], np.int32),
                      np.array(terms, dtype=np.int32))


# -- SIF ---------------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(5, 30))
def test_sif_rows_match_a_loop_and_the_one_query_path(seed, n):
    rng = np.random.default_rng(seed)
    n_terms, dim = 12, 4
    V = rng.standard_normal((n_terms, dim)).astype(np.float32)
    V[rng.random(n_terms) < 0.3] = 0  # words without a vector
    w = sif.sif_weights(rng.integers(0, 50, n_terms))
    ids, offsets = random_sentences(rng, n, n_terms + 2)  # ids beyond n_terms: unknown
    u = sif.principal_component(sif.weighted_means(ids, offsets, V, w))
    assert abs(np.linalg.norm(u) - 1) < 1e-5
    X = sif.sif_rows(ids, offsets, V, w, u)
    for i in range(n):
        s = [t for t in ids[offsets[i]:offsets[i + 1]] if t < n_terms and V[t].any()]
        expected = np.zeros(dim)
        if s:
            v = sum(w[t] * V[t].astype(np.float64) for t in s) / len(s)
            before = np.linalg.norm(v)
            v -= (v @ u) * u
            if np.linalg.norm(v) < 0.05 * before:  # (nearly) the component: float32 noise
                continue
            expected = v / np.linalg.norm(v)
        np.testing.assert_allclose(X[i], expected, atol=1e-4)
        np.testing.assert_allclose(sif.sentence_vector(ids[offsets[i]:offsets[i + 1]], V, w, u),
                                   expected, atol=1e-4)


def test_sif_weights_and_principal_component():
    w = sif.sif_weights(np.array([0, 1000, 1, 0]))
    np.testing.assert_allclose(w, [1.0, 1e-3 / (1e-3 + 1000 / 1001), 1e-3 / (1e-3 + 1 / 1001),
                                   1.0], rtol=1e-6)
    X = np.array([[3, 0.1], [-2, 0.0], [4, -0.1]], dtype=np.float32)
    np.testing.assert_allclose(np.abs(sif.principal_component(X)), [1, 0], atol=1e-2)


# -- dense search ------------------------------------------------------------------------
def unit_rows(rng, n, dim):
    X = rng.standard_normal((n, dim)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(1, 80), k=st.integers(1, 90))
def test_exact_top_k_is_a_full_sort(seed, n, k):
    rng = np.random.default_rng(seed)
    X = np.round(unit_rows(rng, n, 3), 1)  # rounded: ties
    q = unit_rows(rng, 1, 3)[0]
    tie = rng.permutation(n)
    allowed = rng.random(n) < 0.8
    rows, scores = dense.exact_top_k(X, q, k, allowed=allowed, tie_rank=tie)
    assert_top_k(rows, scores, X.astype(np.float64) @ q, k, allowed=allowed, tie_rank=tie)


def assert_top_k(rows, scores, exact, k, *, allowed, tie_rank, atol=1e-5):
    """``rows`` and their float32 ``scores`` are the ``k`` best allowed rows by
    (-score, tie rank) when the ``exact`` (float64) scores are known to ``atol``: BLAS
    kernels sum in different orders (OpenBLAS's SkylakeX and Haswell gemv differ by an ulp),
    so rows whose scores are that close may come in either order, and only rows that
    equal scores tie are ordered by their tie rank."""
    candidates = np.flatnonzero(allowed)
    assert len(rows) == min(k, len(candidates)) and len(set(rows.tolist())) == len(rows)
    assert allowed[rows].all()
    np.testing.assert_allclose(scores, exact[rows], atol=atol)
    # sorted by (-score, tie rank) on the scores returned
    for (r, s), (r2, s2) in zip(zip(rows, scores), zip(rows[1:], scores[1:])):
        assert s > s2 or (s == s2 and tie_rank[r] < tie_rank[r2])
    # no row left out is better than the last row taken
    if len(rows):
        left_out = np.setdiff1d(candidates, rows)
        assert (exact[left_out] <= exact[rows[-1]] + atol).all()
    # the order agrees with the exact scores wherever they are apart
    assert (np.diff(exact[rows]) <= atol).all()


def test_inverted_file_reading_every_list_is_exact_and_reads_new_rows():
    rng = np.random.default_rng(0)
    X = unit_rows(rng, 500, 8)
    ivf = dense.InvertedFile.fit(X[:400], n_lists=10, n_probe=10, random_state=0)
    assert ivf.doc_list.shape == (400,) and ivf.centroids.shape == (10, 8)
    np.testing.assert_allclose(np.linalg.norm(ivf.centroids, axis=1), 1, rtol=1e-5)
    # every row is in the list of its nearest centroid
    assert (ivf.doc_list == np.argmax(X[:400] @ ivf.centroids.T, axis=1)).all()
    allowed = rng.random(500) < 0.9
    for q in unit_rows(rng, 5, 8):
        got = ivf.top_k(X, q, 20, allowed=allowed)  # rows 400..499: beyond the lists
        want = dense.exact_top_k(X, q, 20, allowed=allowed)
        np.testing.assert_array_equal(got[0], want[0])
    # fewer lists read: a subset of the rows, the best of them
    few = dense.InvertedFile(ivf.centroids, ivf.doc_list, 2)
    rows, scores = few.top_k(X[:400], X[0], 400)
    assert set(ivf.doc_list[rows].tolist()) == set(few.probed(X[0]).tolist())
    assert rows[0] == 0 and len(rows) < 400
    np.testing.assert_allclose(scores, X[rows] @ X[0], rtol=1e-5)


def test_spherical_kmeans_is_seeded():
    X = unit_rows(np.random.default_rng(1), 300, 5)
    a = dense.spherical_kmeans(X, 7, random_state=3)
    np.testing.assert_array_equal(a, dense.spherical_kmeans(X, 7, random_state=3))


# -- soft cosine -------------------------------------------------------------------------
def test_neighbour_matrices_are_symmetric_squared_cosines():
    rng = np.random.default_rng(0)
    V = rng.standard_normal((30, 5)).astype(np.float32)
    V[3] = 0
    S = softcos.embedding_neighbours(V, k=4).toarray()
    np.testing.assert_array_equal(S, S.T)
    assert (np.diag(S) == 0).all() and not S[3].any()
    U = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    C = U @ U.T
    for i in range(30):
        if i == 3:
            continue
        c = C[i].copy()
        c[[i, 3]] = -np.inf
        top = np.argsort(-c)[:4]
        for j in top[c[top] > 0]:  # each word's 4 nearest are there, squared
            assert S[i, j] == pytest.approx(C[i, j] ** 2, rel=1e-5)
        # anything else is a pair where the other word has i among its nearest
        for j in np.flatnonzero(S[i]):
            assert S[i, j] == pytest.approx(max(C[i, j], 0) ** 2, rel=1e-5)
    terms = ["visa", "visas", "vista", "sofa", "sofas"]
    Sc = softcos.char_neighbours(terms, [0, 1, 2, 3, 4], k=2).toarray()
    np.testing.assert_array_equal(Sc, Sc.T)
    assert Sc[0, 1] > Sc[0, 2] > 0 and Sc[0, 3] == 0 and Sc[3, 4] > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 1000))
def test_soft_cosines_match_the_formula(seed):
    rng = np.random.default_rng(seed)
    n_terms = 15
    A = np.where(rng.random((n_terms, n_terms)) < 0.2, rng.random((n_terms, n_terms)), 0)
    A = np.maximum(A, A.T)
    np.fill_diagonal(A, 0)
    S = sp.csr_matrix(A[:12, :12].astype(np.float32))  # terms 12..14: unknown to the model
    M = np.eye(n_terms)
    M[:12, :12] += A[:12, :12]
    idf = rng.random(12) + 1
    full_idf = np.concatenate([idf, [idf.max()] * 3])
    docs = [list(rng.integers(0, n_terms, rng.integers(0, 6))) for _ in range(20)]
    field = field_of(docs, n_terms)
    rows = rng.permutation(20)[:8]
    norms = softcos.self_similarity(field, rows, idf, [S])[:, 0]
    query = rng.integers(0, n_terms, 4)
    qt, qtf = np.unique(query, return_counts=True)
    x = np.zeros(n_terms)
    x[qt] = qtf * full_idf[qt]
    got = softcos.soft_cosines(qt, x[qt], x @ M @ x, field, rows, idf, S, norms)
    for i, r in enumerate(rows):
        y = np.bincount(docs[r], minlength=n_terms) * full_idf
        assert norms[i] == pytest.approx(y @ M @ y)
        want = (x @ M @ y) / np.sqrt((x @ M @ x) * (y @ M @ y)) if y.any() else 0.0
        assert got[i] == pytest.approx(want)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), batch=st.sampled_from([3, 7, 1 << 14]))
def test_self_similarity_compiled_is_the_sparse_product(seed, batch):
    pytest.importorskip("numba")
    from cqa_search import compiled

    rng = np.random.default_rng(seed)
    n_terms = 20
    matrices = []
    for density in (0.1, 0.4):  # two matrices at once, terms 16..19 unknown to both
        A = np.where(rng.random((16, 16)) < density, rng.random((16, 16)), 0)
        A = np.maximum(A, A.T)
        np.fill_diagonal(A, 0)
        matrices.append(sp.csr_matrix(A.astype(np.float32)))
    idf = rng.random(16) + 1
    docs = [list(rng.integers(0, n_terms, rng.integers(0, 9))) for _ in range(25)]
    field = field_of(docs, n_terms)
    rows = rng.permutation(25)[:17]
    before = compiled._chosen
    try:
        compiled.use("numpy")
        reference = softcos.self_similarity(field, rows, idf, matrices, batch=batch)
        assert compiled.use("numba") == "numba"
        got = softcos.self_similarity(field, rows, idf, matrices, batch=batch)
    finally:
        compiled._chosen = before
    np.testing.assert_allclose(got, reference, rtol=1e-12, atol=0)
    full_idf = np.concatenate([idf, [idf.max()] * 4])
    for j, S in enumerate(matrices):
        M = np.eye(n_terms)
        M[:16, :16] += S.toarray()
        for i, r in enumerate(rows):
            y = np.bincount(docs[r], minlength=n_terms) * full_idf
            assert got[i, j] == pytest.approx(y @ M @ y)


def test_soft_cosine_with_no_similar_words_is_the_cosine():
    field = field_of([[0, 1, 1], [2], [1, 3]], 4)
    idf = np.ones(4)
    S = sp.csr_matrix((4, 4), dtype=np.float32)
    rows = np.arange(3)
    norms = softcos.self_similarity(field, rows, idf, [S])[:, 0]
    x = np.array([1.0, 1.0])
    got = softcos.soft_cosines(np.array([1, 3]), x, 2.0, field, rows, idf, S, norms)
    np.testing.assert_allclose(got, [2 / np.sqrt(2 * 5), 0, 2 / np.sqrt(2 * 2)])


# -- the learners ------------------------------------------------------------------------
def corpus_of(sentences, terms):
    ids = np.concatenate([np.asarray(s, dtype=np.int32) for s in sentences])
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in sentences])))
    return embeddings.Corpus(ids, offsets, terms)


def test_cooccurrences_match_a_loop():
    rng = np.random.default_rng(0)
    sentences = [list(rng.integers(0, 6, rng.integers(0, 9))) for _ in range(40)]
    terms = [f"w{i}" for i in range(6)]
    corpus = corpus_of(sentences, terms)
    order, rank = embeddings._alphabetical(corpus, 1)
    C = embeddings._cooccurrences(corpus, rank, len(order), 3, batch=7).toarray()
    want = np.zeros((6, 6))
    for s in sentences:
        for i in range(len(s)):
            for d in range(1, 4):
                if i + d < len(s):
                    a, b = rank[s[i]], rank[s[i + d]]
                    want[a, b] += (3 - d + 1) / 3
                    want[b, a] += (3 - d + 1) / 3
    np.testing.assert_allclose(C, want)


def test_ppmi_svd_is_seeded_and_ignores_term_ids_order():
    rng = np.random.default_rng(0)
    terms = [f"w{i:02d}" for i in range(30)]
    sentences = [list(rng.integers(0, 30, 8)) for _ in range(300)]
    a = embeddings.ppmi_svd(corpus_of(sentences, terms), dim=5, seed=1)
    b = embeddings.ppmi_svd(corpus_of(sentences, terms), dim=5, seed=1)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (30, 5) and np.abs(a).sum() > 0
    # the same text with the term ids permuted: the same vector for every word
    perm = rng.permutation(30)
    renamed = [terms[i] for i in np.argsort(perm)]  # new id perm[t] is the old term t
    c = embeddings.ppmi_svd(corpus_of([[perm[t] for t in s] for s in sentences], renamed),
                            dim=5, seed=1)
    np.testing.assert_allclose(c[perm], a, atol=1e-5)
    # a word seen once has no vector with min_count 2
    few = embeddings.ppmi_svd(corpus_of([[0, 1, 2], [1, 2, 3], [1, 2]], terms[:4]), dim=2)
    assert not few[0].any() and not few[3].any() and few[1].any()


@pytest.mark.parametrize("eig,context,shift", [(0.5, False, 1.0), (0.0, False, 1.0),
                                               (1.0, True, 1.0), (0.5, False, 1.5)])
def test_ppmi_svd_variants_match_a_dense_oracle(eig, context, shift):
    """Every variant of Levy, Goldberg and Dagan (2015) against numpy: the PPMI matrix
    from the co-occurrence counts (smoothed contexts, shifted), its full SVD, and the
    vectors' Gram matrix (free of the SVD's signs) of ``U S^eig`` (+ ``V S^eig``)."""
    rng = np.random.default_rng(3)
    terms = [f"w{i:02d}" for i in range(12)]
    # two topics of six words each: PMI about log 2 within a topic, more than the shift
    sentences = [list(rng.integers(0, 6, 7) + 6 * (i % 2)) for i in range(200)]
    corpus = corpus_of(sentences, terms)
    got = embeddings.ppmi_svd(corpus, dim=11, window=2, eig=eig, context=context,
                              shift=shift, seed=0)
    order, rank = embeddings._alphabetical(corpus, 2)
    C = embeddings._cooccurrences(corpus, rank, len(order), 2).toarray()
    ctx = C.sum(axis=0) ** 0.75
    with np.errstate(divide="ignore"):
        pmi = np.log(C * ctx.sum() / np.outer(C.sum(axis=1), ctx)) - np.log(shift)
    U, S, Vt = np.linalg.svd(np.maximum(pmi, 0))
    W = U[:, :11] * S[:11] ** eig + (Vt[:11].T * S[:11] ** eig if context else 0)
    assert np.abs(W).max() > 0.1
    v = got[order].astype(np.float64)
    np.testing.assert_allclose(v @ v.T, W @ W.T, atol=1e-3 * np.abs(W @ W.T).max())


def test_ppmi_svd_default_is_the_singular_vectors_alone():
    """The default eigenvalue weighting is 0 (chosen on dev data, BENCHMARKS.md): the
    vectors of the kept words are the orthonormal columns of ``U``, and the default is
    ``eig=0`` given explicitly, not ``U * sqrt(S)``."""
    rng = np.random.default_rng(4)
    terms = [f"w{i:02d}" for i in range(20)]
    corpus = corpus_of([list(rng.integers(0, 5, 6) + 5 * (i % 4)) for i in range(300)],
                       terms)
    v = embeddings.ppmi_svd(corpus, dim=6, seed=2)
    order, _ = embeddings._alphabetical(corpus, 2)
    np.testing.assert_allclose(v[order].T @ v[order], np.eye(6), atol=1e-5)
    np.testing.assert_array_equal(v, embeddings.ppmi_svd(corpus, dim=6, eig=0.0, seed=2))
    assert not np.allclose(v, embeddings.ppmi_svd(corpus, dim=6, eig=0.5, seed=2))


_W2V = """
import sys, numpy as np
from cqa_search.vectors import embeddings
rng = np.random.default_rng(0)
sentences = [rng.integers(0, 40, 10) for _ in range(200)]
ids = np.concatenate(sentences).astype(np.int32)
offsets = np.arange(0, 10 * 201, 10)
corpus = embeddings.Corpus(ids, offsets, [f"w{i:02d}" for i in range(40)])
v = embeddings.word2vec(corpus, dim=8, epochs=2, seed=3)
sys.stdout.write(v.tobytes().hex())
"""


def test_word2vec_gives_the_same_vectors_whatever_the_string_hash_seed():
    """One worker and a seed: the same bits in two processes of different
    PYTHONHASHSEED (gensim >= 4 seeds its initial vectors from the seed, not from
    hash())."""
    import os
    import subprocess
    import sys

    out = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _W2V], env=env, capture_output=True,
                              text=True, timeout=300, check=True)
        out.append(done.stdout)
    assert out[0] == out[1] and len(out[0]) == 40 * 8 * 4 * 2
    v = np.frombuffer(bytes.fromhex(out[0]), dtype=np.float32).reshape(40, 8)
    assert np.abs(v).sum() > 0
