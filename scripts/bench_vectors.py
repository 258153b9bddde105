#!/usr/bin/env python3
"""Word vectors and the dense first stage at scale: fit time, nearest-neighbour
libraries, and the speed and exactness of the engine's hybrid first stage. (Their quality
on the judged collections is scripts/full_retrieval.py's.)

Usage::

    python scripts/bench_vectors.py fit INDEX [--sample 0.01]
    python scripts/bench_vectors.py fit-model INDEX [--method ppmi-svd]
    python scripts/bench_vectors.py ann INDEX QUERIES.jsonl [--libraries ...] [--n-queries Q]
    python scripts/bench_vectors.py hybrid INDEX QUERIES.jsonl [--n-queries Q] [-a A]
                                   [--depth D]

INDEX is an index with a stored embeddings model (``cqa-search fit INDEX embeddings``;
``fit`` and ``fit-model`` need none); for the scale runs, of ``synth_archive.py 1000000
OUT.jsonl --seed 7 --queries 1000 Q``.

``fit``: CPU and wall seconds of learning the word vectors of INDEX with PPMI-SVD, and
with word2vec (one worker, 20 epochs) extrapolated from one epoch over a sample of the
sentences (word2vec's cost is linear in tokens x epochs); and whether two PPMI-SVD fits
give the same bits.

``fit-model``: the whole fit of ``cqa-search fit INDEX embeddings`` (vectors, SIF rows,
inverted file, similar words, titles and bodies, soft-cosine norms), not stored: wall
seconds per step, the whole fit's wall and CPU seconds, peak RSS.

``ann``: the stored question vectors searched by each library for the SIF vectors of the
queries: build seconds (CPU and wall), index bytes, query latency p50/p95 (one thread,
k = 200, the depth the hybrid stage asks for), recall@100 (the library's top 100 against
the exact top 100) and recall of the exact top 100 in its top 200, determinism (two
builds over the first 100,000 vectors give the same neighbours), and what the index is
on disk. The exact product (numpy, one BLAS thread) is the reference and a row.

``hybrid``: p50/p95 (wall and thread CPU) of the engine's first stage per query,
``engine.search(text, k=100)`` without a ranker or features (analysis, the two top lists
deepened while the merge is not provably exact, the merge, the results), one thread,
interleaved with the same search by BM25 alone; and how often its top 100 is the whole
archive's hybrid top 100 (every row scored by the formula with the exact cosines), and
how often the merge proves it (``results.first_stage.exact``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from cqa_search import SearchConfig, SearchEngine
from cqa_search._blas import one_blas_thread
from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT, MAX_DEPTH
from cqa_search.retrieval.hybrid import hybrid_scores
from cqa_search.vectors import dense, embeddings

from _common import load_average, memory_mb


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentiles(lat):
    lat = np.asarray(lat) * 1000
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 95))


def clock():
    return time.perf_counter(), time.process_time()


def since(t):
    return time.perf_counter() - t[0], time.process_time() - t[1]


def read_texts(path, n=None):
    with open(path, encoding="utf-8") as f:
        out = [json.loads(line)["text"] for line in f if line.strip()]
    return out[:n]


def scorer_of(engine):
    return next(s for s in engine.searcher._scorers if "emb_sif" in s.names)


# -- fit ---------------------------------------------------------------------------------
def fit_main(a):
    engine = SearchEngine.open(a.index, config=SearchConfig(ranker=None))
    corpus = embeddings.training_corpus(engine.view)
    log(f"corpus: {corpus.n_sentences:,} sentences, {corpus.n_tokens:,} tokens")
    t = clock()
    first = embeddings.ppmi_svd(corpus)
    wall, cpu = since(t)
    second = embeddings.ppmi_svd(corpus)
    same = np.array_equal(first, second)
    n = max(1, int(corpus.n_sentences * a.sample))
    sub = embeddings.Corpus(corpus.ids[:corpus.offsets[n]], corpus.offsets[:n + 1],
                            corpus.terms)
    t = clock()
    embeddings.word2vec(sub, epochs=1)
    w_wall, w_cpu = since(t)
    scale = corpus.n_tokens / max(sub.n_tokens, 1) * 20
    print(f"| learner | tokens | CPU s | wall s | same bits on a refit |\n|---|---:|---:|---:|---|\n"
          f"| PPMI-SVD (window 5, 100 dims) | {corpus.n_tokens:,} | {cpu:.0f} | {wall:.0f} | "
          f"{'yes' if same else 'NO'} |\n"
          f"| word2vec skip-gram, 1 worker, 20 epochs (extrapolated from 1 epoch over "
          f"{sub.n_tokens:,} tokens: x{scale:.0f}) | {corpus.n_tokens:,} | {w_cpu * scale:.0f} | "
          f"{w_wall * scale:.0f} | yes (tests/vectors) |")


# -- ann ---------------------------------------------------------------------------------
def query_vectors(engine, texts):
    sc = scorer_of(engine)
    return np.array([sc.query_vector(engine.analyze(t)) for t in texts], dtype=np.float32)


class Exact:
    """The reference: every vector scored."""
    disk = "the vectors (.npy)"

    def build(self, X):
        self.X = X

    def tune(self, param):
        pass

    def name(self, param):
        return "exact (numpy matmul, one BLAS thread)"

    def search(self, q, k):
        return dense.exact_top_k(self.X, q, k)[0]

    def nbytes(self):
        return 0


class IVF(Exact):
    disk = "plain arrays (.npy): centroids, a list id per question, the vectors by list"

    def __init__(self, n_lists):
        self.n_lists = n_lists

    def build(self, X):
        self.X = X
        self.ivf = dense.InvertedFile.fit(X, n_lists=self.n_lists)

    def tune(self, n_probe):
        self.ivf.n_probe = n_probe

    def name(self, n_probe):
        return f"numpy IVF (ours), {len(self.ivf.centroids)} lists, {n_probe} probed"

    def search(self, q, k):
        return self.ivf.top_k(self.X, q, k)[0]

    def nbytes(self):
        return (self.ivf.centroids.nbytes + self.ivf.doc_list.nbytes
                + self.ivf.list_vectors.nbytes)


class FaissIVF(IVF):
    disk = "faiss's own binary format (read by faiss's C++ reader)"

    def build(self, X):
        import faiss

        self.index = faiss.IndexIVFFlat(faiss.IndexFlatIP(X.shape[1]), X.shape[1],
                                        self.n_lists, faiss.METRIC_INNER_PRODUCT)
        self.index.cp.seed = 0
        self.index.train(X)
        self.index.add(X)

    def tune(self, n_probe):
        self.index.nprobe = n_probe

    def name(self, n_probe):
        return f"faiss IndexIVFFlat, {self.n_lists} lists, {n_probe} probed"

    def search(self, q, k):
        return self.index.search(q[None], k)[1][0]

    def nbytes(self):
        import faiss

        return len(faiss.serialize_index(self.index))


class FaissIVFSQ8(FaissIVF):
    """faiss's inverted file over 8-bit codes (a quarter of float32's bytes read per
    list), its top ``2k`` re-scored exactly on a float32 copy (``IndexRefineFlat``)."""

    def build(self, X):
        import faiss

        base = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(X.shape[1]), X.shape[1],
                                             self.n_lists, faiss.ScalarQuantizer.QT_8bit,
                                             faiss.METRIC_INNER_PRODUCT)
        base.cp.seed = 0
        self.index = faiss.IndexRefineFlat(base)
        self.index.k_factor = 2
        self.index.train(X)
        self.index.add(X)

    def tune(self, n_probe):
        import faiss

        faiss.extract_index_ivf(self.index).nprobe = n_probe

    def name(self, n_probe):
        return (f"faiss IndexIVFScalarQuantizer 8-bit, {self.n_lists} lists, {n_probe} "
                f"probed, top 2k re-scored in float32")


class FaissHNSW(FaissIVF):
    def __init__(self, m):
        self.m = m

    def build(self, X):
        import faiss

        self.index = faiss.IndexHNSWFlat(X.shape[1], self.m, faiss.METRIC_INNER_PRODUCT)
        self.index.add(X)

    def tune(self, ef):
        self.index.hnsw.efSearch = ef

    def name(self, ef):
        return f"faiss IndexHNSWFlat, M={self.m}, efSearch={ef}"


class Hnswlib(Exact):
    disk = "hnswlib's own binary file (read by its C++ loader)"

    def __init__(self, m):
        self.m = m

    def build(self, X):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=X.shape[1])
        self.index.init_index(max_elements=len(X), M=self.m, ef_construction=200,
                              random_seed=0)
        self.index.add_items(X, np.arange(len(X)), num_threads=2)
        self.index.set_num_threads(1)

    def tune(self, ef):
        self.index.set_ef(ef)

    def name(self, ef):
        return f"hnswlib, M={self.m}, ef={ef}"

    def search(self, q, k):
        return self.index.knn_query(q[None], k=k)[0][0].astype(np.int64)

    def nbytes(self):
        return self.index.index_file_size()


class Usearch(Hnswlib):
    disk = "usearch's own binary file (read by its C++ loader)"

    def build(self, X):
        from usearch.index import Index

        self.index = Index(ndim=X.shape[1], metric="ip", dtype="f32", connectivity=self.m,
                           expansion_add=128)
        self.index.add(np.arange(len(X)), X, threads=2)

    def tune(self, ef):
        self.index.expansion_search = ef

    def name(self, ef):
        return f"usearch HNSW, connectivity={self.m}, expansion_search={ef}"

    def search(self, q, k):
        return np.asarray(self.index.search(q, k, threads=1).keys, dtype=np.int64)

    def nbytes(self):
        return self.index.serialized_length


class Annoy(Exact):
    disk = "annoy's own binary file (memory-mapped by annoy)"

    def __init__(self, n_trees):
        self.n_trees = n_trees

    def build(self, X):
        from annoy import AnnoyIndex

        self.index = AnnoyIndex(X.shape[1], "dot")
        self.index.set_seed(0)
        for i, x in enumerate(X):
            self.index.add_item(i, x)
        self.index.build(self.n_trees, n_jobs=2)

    def tune(self, search_k):
        self.search_k = search_k

    def name(self, search_k):
        return f"annoy, {self.n_trees} trees, search_k={search_k}"

    def search(self, q, k):
        return np.asarray(self.index.get_nns_by_vector(q, k, search_k=self.search_k),
                          dtype=np.int64)

    def nbytes(self):
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".ann") as f:
            self.index.save(f.name)
            return os.path.getsize(f.name)


class PyNNDescent(Exact):
    disk = "pickle only (it has no other format)"

    def __init__(self, n_neighbors):
        self.n_neighbors = n_neighbors

    def build(self, X):
        from pynndescent import NNDescent

        self.index = NNDescent(X, metric="dot", n_neighbors=self.n_neighbors, random_state=0,
                               n_jobs=2)
        self.index.prepare()

    def tune(self, epsilon):
        self.epsilon = epsilon

    def name(self, epsilon):
        return f"pynndescent, n_neighbors={self.n_neighbors}, epsilon={epsilon}"

    def search(self, q, k):
        return self.index.query(q[None], k=k, epsilon=self.epsilon)[0][0].astype(np.int64)

    def nbytes(self):
        import pickle

        return len(pickle.dumps(self.index))


#: library -> [(make a build, query-time settings)]
LIBRARIES = {
    "exact": [(Exact, [None])],
    "ivf": [(lambda: IVF(1000), [32, 64, 96, 128]), (lambda: IVF(2000), [64, 128, 160, 200])],
    "faiss-ivf": [(lambda: FaissIVF(1000), [16, 32, 64])],
    "faiss-ivf-sq8": [(lambda: FaissIVFSQ8(1000), [50, 100, 200])],
    "faiss-hnsw": [(lambda: FaissHNSW(32), [128, 256])],
    "hnswlib": [(lambda: Hnswlib(16), [200, 400])],
    "usearch": [(lambda: Usearch(16), [200, 400])],
    "annoy": [(lambda: Annoy(50), [20_000, 50_000])],
    "pynndescent": [(lambda: PyNNDescent(30), [0.1, 0.2])],
}


def _same_build(make, param, X, Q):
    """Two builds over ``X`` give the same neighbours for ``Q``."""
    a, b = make(), make()
    a.build(X)
    b.build(X)
    a.tune(param)
    b.tune(param)
    with one_blas_thread():
        return all(np.array_equal(a.search(q, 100), b.search(q, 100)) for q in Q)


def ann_main(a):
    if any(lib.startswith("faiss") for lib in a.libraries):  # a peer: pip install faiss-cpu
        import faiss

        faiss.omp_set_num_threads(1)  # queries in one thread (builds: 2 where they can)
    engine = SearchEngine.open(a.index, config=SearchConfig(ranker=None))
    X = np.ascontiguousarray(engine.models["embeddings"].doc_vectors_, dtype=np.float32)
    Q = query_vectors(engine, read_texts(a.queries, a.n_queries))
    Q = Q[np.any(Q, axis=1)]
    log(f"{len(X):,} vectors, {len(Q)} queries")
    with one_blas_thread():
        truth = [dense.exact_top_k(X, q, 100)[0] for q in Q]
    print(f"{len(X):,} question vectors ({X.shape[1]} dimensions), {len(Q)} queries; k = 200 "
          "per query, one thread\n")
    print("| library, settings | build CPU s | build wall s | index MB (with its copy of the "
          "vectors) "
          "| p50 ms | p95 ms | CPU p50 ms | CPU p95 ms | recall@100 | exact top 100 in top "
          "200 | same on a rebuild (100k) | on disk |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for lib in a.libraries:
        for make, params in LIBRARIES[lib]:
            log(f"building {lib}")
            s = make()
            t = clock()
            s.build(X)
            b_wall, b_cpu = since(t)
            same = "–" if lib == "exact" or a.no_determinism else \
                ("yes" if _same_build(make, params[0], X[:100_000], Q[:50]) else "no")
            for param in params:
                s.tune(param)
                lat, cpu, rec100, rec200 = [], [], [], []
                with one_blas_thread():
                    s.search(Q[0], 200)
                    for q, true in zip(Q, truth):
                        t0, c0 = time.perf_counter(), time.thread_time()
                        got = s.search(q, 200)
                        cpu.append(time.thread_time() - c0)
                        lat.append(time.perf_counter() - t0)
                        rec100.append(len(np.intersect1d(got[:100], true)) / 100)
                        rec200.append(len(np.intersect1d(got, true)) / 100)
                p50, p95 = percentiles(lat)
                c50, c95 = percentiles(cpu)
                print(f"| {s.name(param)} | {b_cpu:.0f} | {b_wall:.0f} | "
                      f"{s.nbytes() / 2**20:.0f} | {p50:.2f} | {p95:.2f} | {c50:.2f} | {c95:.2f} | "
                      f"{np.mean(rec100):.4f} | {np.mean(rec200):.4f} | {same} | {s.disk} |",
                      flush=True)
            del s


# -- hybrid ------------------------------------------------------------------------------
def hybrid_main(a):
    from cqa_search import compiled

    compiled.load()  # the BM25 top k by MaxScore, as a server runs it
    engine = SearchEngine.open(a.index, config=SearchConfig(features=(), ranker=None,
                                                            hybrid=a.a, hybrid_depth=a.depth))
    term = engine.with_config(SearchConfig(features=(), models=(), ranker=None, hybrid=None))
    dense = engine.searcher._dense
    model = engine.config.retrieval  # the index's (BM25F on an index with titles)
    field = model.field_index(engine.index)
    texts = read_texts(a.queries, a.n_queries)
    tie = engine.searcher.data.doc_id_rank
    n = 100
    lat_h, lat_b, cpu_h, cpu_b, same, proven, overlap = [], [], [], [], [], [], []
    for rep in range(2):  # the first pass warms the caches; the second is timed
        for text in texts:  # interleaved: the term stage, then the hybrid stage
            c0, t0 = time.thread_time(), time.perf_counter()
            term.search(text, k=n)
            c1, t1 = time.thread_time(), time.perf_counter()
            got = engine.search(text, k=n)
            c2, t2 = time.thread_time(), time.perf_counter()
            if not rep:
                continue
            lat_b.append(t1 - t0)
            lat_h.append(t2 - t1)
            cpu_b.append(c1 - c0)
            cpu_h.append(c2 - c1)
            if len(same) < a.n_check and got.first_stage is not None:
                q = engine.analyze(got.query)
                scores, _ = model.score_all(field, q.term_ids, q.qtf)
                with one_blas_thread():
                    cos = dense.vectors @ dense.query_vector(q)
                s = hybrid_scores(scores, cos, a.a, scores.max())
                whole = np.lexsort((tie, -s))[:n]
                rows = engine.archive.rows(got.doc_ids)
                same.append(set(whole.tolist()) == set(rows.tolist()))
                overlap.append(len(np.intersect1d(whole, rows)) / n)
                proven.append(got.first_stage.exact)
    (b50, b95), (h50, h95) = percentiles(lat_b), percentiles(lat_h)
    (cb50, cb95), (ch50, ch95) = percentiles(cpu_b), percentiles(cpu_h)
    print(f"{engine.n_docs:,} questions, {len(texts)} queries, the top {n} of the engine's "
          f"first stage (`engine.search(text, k={n})`, no ranker, no features), a = {a.a}, "
          f"lists of depth {a.depth}n deepened up to {MAX_DEPTH}n while not exact, one thread "
          f"({'inverted file' if dense.ivf else 'exact'} dense search); load average "
          f"{load_average()}\n")
    print("| first stage | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---:|---:|---:|---:|")
    print(f"| {model.feature_name} top {n} (hybrid off) | {b50:.2f} | {b95:.2f} | {cb50:.2f} "
          f"| {cb95:.2f} |")
    print(f"| hybrid top {n} | {h50:.2f} | {h95:.2f} | {ch50:.2f} | {ch95:.2f} |")
    print(f"\nThe hybrid top {n} is the whole archive's top {n} (every question scored by the "
          f"formula, the exact cosines) for {100 * np.mean(same):.1f} % of {len(same)} queries "
          f"(those with a word that has a vector); the bound proves it for "
          f"{100 * np.mean(proven):.1f} %; the two share {100 * np.mean(overlap):.2f} % of "
          "their rows on average.")


# -- the whole model ----------------------------------------------------------------------
def fit_model_main(a):
    """``cqa-search fit INDEX embeddings`` without storing: wall and CPU seconds per step."""
    from cqa_search.vectors import EmbeddingModel

    engine = SearchEngine.open(a.index, config=SearchConfig(ranker=None))
    load = load_average()
    t = clock()
    model = EmbeddingModel(method=a.method).fit(engine.view)
    wall, cpu = since(t)
    print(f"{engine.n_docs:,} questions; load average before / after: {load} / "
          f"{load_average()}\n")
    print("| step | wall s |\n|---|---:|")
    for step, seconds in model.fit_seconds_.items():
        print(f"| {step} | {seconds:.1f} |")
    print(f"| **the whole fit** ({a.method}) | **{wall:.1f}** (CPU {cpu:.1f} s, all threads) |")
    print(f"\npeak RSS {memory_mb()[0]:,.0f} MB")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fit")
    p.add_argument("index")
    p.add_argument("--sample", type=float, default=0.01)
    p = sub.add_parser("ann")
    p.add_argument("index")
    p.add_argument("queries")
    p.add_argument("--n-queries", type=int, default=1000)
    p.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=list(LIBRARIES))
    p.add_argument("--no-determinism", action="store_true")
    p = sub.add_parser("hybrid")
    p.add_argument("index")
    p.add_argument("queries")
    p.add_argument("--n-queries", type=int, default=1000)
    p.add_argument("--n-check", type=int, default=200)
    p.add_argument("-a", type=float, default=DEFAULT_WEIGHT)
    p.add_argument("--depth", type=int, default=2, help="each list's depth, in n")
    p = sub.add_parser("fit-model")
    p.add_argument("index")
    p.add_argument("--method", default="ppmi-svd", choices=["ppmi-svd", "word2vec"])
    a = ap.parse_args(argv)
    print(f"`python scripts/bench_vectors.py {' '.join(argv or sys.argv[1:])}`\n")
    {"fit": fit_main, "fit-model": fit_model_main, "ann": ann_main,
     "hybrid": hybrid_main}[a.cmd](a)


if __name__ == "__main__":
    main()
