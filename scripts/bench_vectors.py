#!/usr/bin/env python3
"""Word vectors and the dense first stage: fit time, nearest-neighbour libraries, the
hybrid first stage's speed and exactness, and its quality on the judged collections.

Usage::

    python scripts/bench_vectors.py fit INDEX [--sample 0.01]
    python scripts/bench_vectors.py ann INDEX QUERIES.jsonl [--libraries ...] [--n-queries Q]
    python scripts/bench_vectors.py hybrid INDEX QUERIES.jsonl [--n-queries Q]
    python scripts/bench_vectors.py quality [--data ../shared/data] [--work DIR]
                                            [--collections semeval stackfaq demo stackexchange]

INDEX is an index with a stored embeddings model (``cqa-search fit INDEX embeddings``);
for the scale runs, of ``synth_archive.py 1000000 OUT.jsonl --seed 7 --queries 1000 Q``.

``fit``: CPU and wall seconds of learning the word vectors of INDEX with PPMI-SVD, and
with word2vec (one worker, 20 epochs) extrapolated from one epoch over a sample of the
sentences (word2vec's cost is linear in tokens x epochs); and whether two PPMI-SVD fits
give the same bits.

``ann``: the stored question vectors searched by each library for the SIF vectors of the
queries: build seconds (CPU and wall), index bytes, query latency p50/p95 (one thread,
k = 200, the depth the hybrid stage asks for), recall@100 (the library's top 100 against
the exact top 100) and recall of the exact top 100 in its top 200, determinism (two
builds over the first 100,000 vectors give the same neighbours), and what the index is
on disk. The exact product (numpy, one BLAS thread) is the reference and a row.

``hybrid``: p50/p95 of the hybrid first stage per query (analysis, BM25 top 200, dense
top 200, the union scored by :func:`cqa_search.retrieval.hybrid.merge`), one thread, next
to BM25's top 200 alone in the same run; and how often the merged top 100 is the whole
archive's top 100 (every row scored by the hybrid formula), and how often
:attr:`Merged.exact` proves it.

``quality``: on the collections of scripts/full_retrieval.py (5-fold query
cross-validation, every choice on the training folds, paired t-tests against today's
pipeline): BM25; the hybrid first stage (``a`` chosen per fold); today's learned pipeline
(``cqa-search train`` defaults over BM25's top 100 with the translation, topic and
multiview models); the same with the embeddings model's feature families; and over the
hybrid candidates. The word vectors are PPMI-SVD (the default) and, for the first stage,
word2vec with three seeds.
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
from cqa_search.retrieval import BM25
from cqa_search.retrieval.candidates import top_k_of_model
from cqa_search.retrieval.hybrid import hybrid_scores, merge
from cqa_search.vectors import dense, embeddings, sif


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
    return next(s for s in engine._scorers if "emb_sif" in s.names)


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
    engine = SearchEngine.open(a.index, config=SearchConfig(ranker=None))
    sc = scorer_of(engine)
    field = engine.index["question"]
    bm25 = BM25()
    texts = read_texts(a.queries, a.n_queries)
    tie = engine.data.doc_id_rank
    n, m = 100, 100 * a.depth
    lat_h, lat_b, cpu_h, cpu_b, same, proven, overlap = [], [], [], [], [], [], []
    for rep in range(2):  # the first pass warms the caches; the second is timed
        for text in texts:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            q = engine.analyze(text)
            b_rows, b_scores = top_k_of_model(bm25, field, q.term_ids, q.qtf, m, tie_rank=tie)
            t1, c1 = time.perf_counter(), time.thread_time()
            d_rows, d_cos = sc.nearest(q, m, tie_rank=tie)
            got = merge(b_rows, b_scores, d_rows, d_cos, n, a=a.a,
                        term_of=lambda r: bm25.score_rows(field, q.term_ids, q.qtf, r),
                        dense_of=lambda r: sc.cosines(q, r),
                        term_complete=len(b_rows) < m, tie_rank=tie)
            t2, c2 = time.perf_counter(), time.thread_time()
            if rep:
                lat_b.append(t1 - t0)
                lat_h.append(t2 - t0)
                cpu_b.append(c1 - c0)
                cpu_h.append(c2 - c0)
                if len(same) < a.n_check:
                    scores, _ = bm25.score_all(field, q.term_ids, q.qtf)
                    with one_blas_thread():
                        cos = sc.vectors @ sc.query_vector(q)
                    s = hybrid_scores(scores, cos, a.a, scores.max())
                    whole = np.lexsort((tie, -s))[:n]
                    if s[whole[-1]] <= 0:  # no word of the query is known: nothing found
                        continue
                    same.append(set(whole.tolist()) == set(got.rows.tolist()))
                    overlap.append(len(np.intersect1d(whole, got.rows)) / n)
                    proven.append(got.exact)
    (b50, b95), (h50, h95) = percentiles(lat_b), percentiles(lat_h)
    (cb50, cb95), (ch50, ch95) = percentiles(cpu_b), percentiles(cpu_h)
    print(f"{engine.n_docs:,} questions, {len(texts)} queries, n = {n} candidates from the "
          f"top {m} of each list, a = {a.a}, one thread ({'inverted file' if sc.ivf else 'exact'})\n")
    print("| stage | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---:|---:|---:|---:|")
    print(f"| BM25 top {m} (analysis included) | {b50:.2f} | {b95:.2f} | {cb50:.2f} | "
          f"{cb95:.2f} |")
    print(f"| hybrid first stage (BM25 top {m} + dense top {m} + merge) | {h50:.2f} | "
          f"{h95:.2f} | {ch50:.2f} | {ch95:.2f} |")
    print(f"\nThe merged top {n} is the whole archive's top {n} (every question scored by the "
          f"formula) for {100 * np.mean(same):.1f} % of {len(same)} queries (those with a known "
          f"word); the bound proves "
          f"it for {100 * np.mean(proven):.1f} %; the two share {100 * np.mean(overlap):.2f} % "
          f"of their rows on average.")


# -- quality -----------------------------------------------------------------------------
A_GRID = (0.2, 0.3, 0.4, 0.5)
NEW_FAMILIES = ("emb_", "softcos_", "field_")
QUALITY_METRICS = ["map", "p@1", "r@100"]


def _collection(fr, key, a, log):
    """Converted collection, queries with a relevant question, folds, and an engine over an
    index with today's models and the embeddings model."""
    from cqa_search.evaluation import read_qrels, read_queries
    from cqa_search.index.models import add_model
    from cqa_search.index.store import CURRENT
    from cqa_search import build_index
    from cqa_search.vectors import EmbeddingModel

    title, convert = fr.COLLECTIONS[key]
    out = os.path.join(a.work, key)
    converted, split = convert(a.data, os.path.join(out, "data"))
    folder = converted if isinstance(converted, str) else converted.path
    path = os.path.join(out, "index")
    if not os.path.exists(os.path.join(path, CURRENT)):
        build_index(os.path.join(folder, "archive.jsonl"), path)
    fr.fit_models(path, log)
    engine = SearchEngine.open(path)
    if "embeddings" not in engine.models:
        t = clock()
        add_model(engine, "embeddings", EmbeddingModel().fit(engine.view))
        log(f"  embeddings fitted in {since(t)[0]:.0f} s")
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as f:
        raw = {q["id"]: q for q in map(json.loads, f)}
    qrels = read_qrels(os.path.join(folder, "qrels.txt"))
    queries = [{**q, "category": None, "title": raw[q["id"]].get("title"),
                "body": raw[q["id"]].get("body")}
               for q in read_queries(os.path.join(folder, "queries.jsonl"))
               if any(g >= 1 for g in qrels.get(q["id"], {}).values())]
    return title, SearchEngine.open(path, config=SearchConfig(ranker=None)), queries, qrels, \
        fr.folds(queries, split), split


def _analysed(engine, q):
    from cqa_search.features import analyze

    title, body = q.get("title"), q.get("body")
    both = title is not None and body is not None and (title or "").strip() and \
        (body or "").strip()
    return analyze(engine.index, engine.analyzer, q["text"],
                   title=title if both else None, body=body if both else None)


def _first_stages(engine, queries, vectors_of=None, n=100):
    """Per query: BM25's top n, and the hybrid top n for each ``a`` of :data:`A_GRID` (by
    :func:`merge` of the top 2n lists), as {name: (rows, scores)}; the share of queries
    whose merged top n is the whole archive's top n."""
    sc = scorer_of(engine)
    field = engine.index["question"]
    bm25 = BM25()
    tie = engine.data.doc_id_rank
    out, same = {}, []
    for q in queries:
        aq = _analysed(engine, q)
        allowed = np.ones(engine.n_docs, dtype=bool)
        if q["id"] in engine.archive:  # a query never retrieves itself
            allowed[engine.archive.row(q["id"])] = False
        qv = sc.query_vector(aq) if vectors_of is None else vectors_of(aq)
        cos_all = (sc.vectors if vectors_of is None else vectors_of.rows) @ qv
        scores, matched = bm25.score_all(field, aq.term_ids, aq.qtf)
        b_rows = top_k_rows(scores, 2 * n, matched & allowed, tie)
        d_rows = top_k_rows(cos_all, 2 * n, allowed, tie)
        lists = {"bm25": (b_rows[:n], scores[b_rows[:n]])}
        for a in A_GRID:
            got = merge(b_rows, scores[b_rows], d_rows, cos_all[d_rows], n, a=a,
                        term_of=lambda r: bm25.score_rows(field, aq.term_ids, aq.qtf, r),
                        dense_of=lambda r: cos_all[r], tie_rank=tie,
                        term_complete=len(b_rows) < 2 * n)
            lists[a] = (got.rows, got.scores)
            whole = hybrid_scores(scores, cos_all, a, scores[b_rows[0]] if len(b_rows) else 0)
            same.append(set(top_k_rows(whole, n, allowed, tie).tolist()) ==
                        set(got.rows.tolist()))
        out[q["id"]] = (aq, lists)
    return out, float(np.mean(same))


def top_k_rows(scores, k, allowed, tie):
    from cqa_search.retrieval import top_k

    return top_k(scores, k, allowed=allowed, tie_rank=tie)


def _run(stage, qids, which, engine):
    doc_ids = engine.archive.doc_ids
    return {q: {doc_ids[r]: float(s) for r, s in zip(*stage[q][1][which[q]])} for q in qids}


def _choose_a(stages, qrels, train_ids, fr, queries, engine):
    """The ``a`` of the best mean R@100 on the training queries (ties: the smaller)."""
    train = [q for q in queries if q["id"] in set(train_ids)]
    best, best_r = None, -1.0
    for a in A_GRID:
        r = fr.per_query(_run(stages, train_ids, {q: a for q in train_ids}, engine), qrels,
                         train)["r@100"].mean()
        if r > best_r + 1e-12:
            best, best_r = a, r
    return best


def _table(engine, stages, qrels, which, qids):
    """Features of every query's candidates (``which[q]``: the first stage), the hybrid
    score as a column ``first_stage``."""
    X, y, qid, docs = [], [], [], []
    names = None
    doc_ids = engine.archive.doc_ids
    for q in qids:
        aq, lists = stages[q]
        rows, first = lists[which[q]]
        F = engine.feature_scores(aq, rows)
        X.append(np.column_stack([F, first]))
        y.extend(1.0 if qrels.get(q, {}).get(doc_ids[r], 0) >= 1 else 0.0 for r in rows)
        qid.extend([q] * len(rows))
        docs.extend(doc_ids[r] for r in rows)
    names = list(engine.feature_names) + ["first_stage"]
    qid = np.array(qid)
    n_relevant = np.array([sum(g >= 1 for g in qrels[q].values()) for q in qid])
    return (np.vstack(X), np.array(y), qid, np.array(docs), names, n_relevant)


def quality_main(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import full_retrieval as fr

    for key in a.collections:
        title, engine, queries, qrels, splits, split = _collection(fr, key, a, log)
        scored = [q for q in queries if split is None or q["id"] in split[1]]
        ids = [q["id"] for q in scored]
        log(f"{title}: {len(queries)} queries")
        t = clock()
        stages, same = _first_stages(engine, queries)
        log(f"  first stages in {since(t)[0]:.0f} s")
        chosen = {}
        for train_ids, test_ids in splits:
            a_fold = _choose_a(stages, qrels, train_ids, fr, queries, engine)
            chosen.update({q: a_fold for q in test_ids})
        all_ids = [q["id"] for q in queries]
        rows = {"BM25 (top 100)": fr.per_query(_run(stages, ids, {q: "bm25" for q in ids},
                                                    engine), qrels, scored),
                "hybrid first stage (a per fold)": fr.per_query(
                    _run(stages, ids, chosen, engine), qrels, scored)}
        tables = {"bm25": _table(engine, stages, qrels, {q: "bm25" for q in all_ids}, all_ids),
                  "hybrid": _table(engine, stages, qrels,
                                   {q: chosen.get(q, A_GRID[0]) for q in all_ids}, all_ids)}
        names = tables["bm25"][4]
        today = [j for j, n in enumerate(names) if not n.startswith(NEW_FAMILIES)
                 and n != "first_stage"]
        new = [j for j, n in enumerate(names) if n != "first_stage"]
        systems = {"pipeline today (BM25 candidates, today's features)": ("bm25", today),
                   "pipeline + embeddings, soft-cosine, field families (BM25 candidates)":
                       ("bm25", new),
                   "pipeline today's features, hybrid candidates": (
                       "hybrid", today + [len(names) - 1]),
                   "pipeline + new families, hybrid candidates": (
                       "hybrid", new + [len(names) - 1])}
        choices = {}
        for label, (cand, columns) in systems.items():
            run, choices[label] = {}, []
            for train_ids, test_ids in splits:
                cv, part = fr.fit_predict(tables[cand], train_ids, test_ids, columns)
                run.update(part)
                choices[label].append(fr.describe(cv))
            rows[label] = fr.per_query(run, qrels, scored)
            log(f"  {label}: MAP {100 * rows[label]['map'].mean():.2f}")
        base = rows["pipeline today (BM25 candidates, today's features)"]
        print(f"\n#### {title}: {engine.n_docs:,} questions, {len(scored)} queries scored\n")
        print("| system | MAP | P@1 | R@100 | MAP vs pipeline today: p (t / rand.) | "
              "R@100 vs BM25: p (t) |\n|---|---:|---:|---:|---|---|")
        from cqa_search.evaluation import compare

        for label, table in rows.items():
            vals = [100 * table[m].mean() for m in QUALITY_METRICS]
            p_map = fr._p(table, base) if table is not base else "–"
            c = compare(table, rows["BM25 (top 100)"], metrics=["r@100"]).loc["r@100"]
            print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {p_map} | "
                  f"{c['p_ttest']:.3g} |")
        print(f"\na per fold: {', '.join(str(chosen[te[0]]) for _, te in splits)}; the merged "
              f"top 100 (of the top-200 lists) is the whole archive's top 100 in "
              f"{100 * same:.1f} % of (query, a). Rankers per fold: " + "; ".join(
                  f"{label}: {', '.join(c)}" for label, c in choices.items()) + ".")
        _learners(engine, queries, qrels, scored, ids, splits, fr)


def _learners(engine, queries, qrels, scored, ids, splits, fr):
    """R@100 of the hybrid first stage with PPMI-SVD and word2vec vectors, three seeds
    each (``a`` per fold)."""
    from cqa_search.vectors import embeddings as E

    corpus = E.training_corpus(engine.view)
    model = engine.models["embeddings"]
    question = engine.index["question"]
    out = []
    for method in ("ppmi-svd", "word2vec"):
        for seed in (0, 1, 2):
            t = clock()
            V = E.ppmi_svd(corpus, seed=seed) if method == "ppmi-svd" else \
                E.word2vec(corpus, seed=seed)
            cpu = since(t)[1]
            w = sif.sif_weights(corpus.counts())
            means = sif.weighted_means(question.sequence, question.offsets, V, w)
            u = sif.principal_component(means)
            rows = sif.sif_rows(question.sequence, question.offsets, V, w, u)

            def vectors_of(aq, V=V, w=w, u=u):
                return sif.sentence_vector(aq.sequence, V, w, u)
            vectors_of.rows = rows
            stages, _ = _first_stages(engine, queries, vectors_of)
            chosen = {}
            for train_ids, test_ids in splits:
                a_fold = _choose_a(stages, qrels, train_ids, fr, queries, engine)
                chosen.update({q: a_fold for q in test_ids})
            table = fr.per_query(_run(stages, ids, chosen, engine), qrels, scored)
            out.append(f"| {method}, seed {seed} | {100 * table['r@100'].mean():.2f} | "
                       f"{100 * table['map'].mean():.2f} | {cpu:.0f} |")
    del model
    print("\n| word vectors of the hybrid first stage | R@100 | MAP of its order | fit CPU s "
          "|\n|---|---:|---:|---:|\n" + "\n".join(out))


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
    p.add_argument("-a", type=float, default=0.3)
    p.add_argument("--depth", type=int, default=2, help="each list's depth, in n")
    p = sub.add_parser("quality")
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    p.add_argument("--work", default="/tmp/cqa_bench_vectors")
    p.add_argument("--collections", nargs="+",
                   default=["semeval", "stackfaq", "demo", "stackexchange"])
    a = ap.parse_args(argv)
    print(f"`python scripts/bench_vectors.py {' '.join(argv or sys.argv[1:])}`\n")
    {"fit": fit_main, "ann": ann_main, "hybrid": hybrid_main,
     "quality": quality_main}[a.cmd](a)


if __name__ == "__main__":
    main()
