#!/usr/bin/env python3
"""Speed and memory of the topic models: GNMFNC beside scikit-learn's NMF, and folding in.

Usage::

    python scripts/bench_topics.py ARCHIVE.jsonl [QUERIES.jsonl] [--work-dir DIR]
        [--iterations 10] [--repeats 2] [--ks 20] [--kp 8]

``ARCHIVE.jsonl`` is indexed once into ``--work-dir`` (e.g. the output of
``../shared/bench/synth_archive.py 200000 OUT.jsonl --queries 1000 QUERIES.jsonl``, whose
records carry categories). Prints a Markdown report on stdout; progress goes to stderr.

What is measured
----------------
* The same matrix: the tf-idf term–question matrix of the index's question field
  (:func:`cqa_search.factorization.term_question_matrix`), saved once as ``.npz`` and loaded
  by every child process; scikit-learn gets its transpose (CSR, ``n_docs x n_terms``).
* GNMFNC (``K_s``, ``K_p``, a=100, paper settings) and ``sklearn.decomposition.NMF(
  solver="mu", beta_loss="frobenius", n_components=K_s + K_p, init="random", tol=0)``.
  GNMFNC: seconds per sweep = median of the intervals between its per-sweep callbacks
  (each sweep includes the objective, which it records every sweep); set-up (grouping the
  matrix, initialisation) reported apart. scikit-learn has no callback: seconds per
  iteration = (time of ``max_iter = 2 + n``) - (time of ``max_iter = 2``), divided by
  ``n``, which removes its fixed costs (input checks, initialisation); with ``tol=0`` it
  computes no loss. Both run under the process's BLAS settings (GNMFNC limits BLAS to one
  thread during its fit, see nmf.py).
* Peak memory: each fit runs in its own child process (``--child``), which reports its
  ``VmHWM`` (peak RSS) and its RSS just before the fit; the table gives both and their
  difference (what the fit added). Children run alternately, ``--repeats`` times each;
  the table gives medians.
* Folding in (a GNMFNC of ``--iterations`` sweeps is enough: the cost does not depend on
  convergence): queries of ``QUERIES.jsonl`` (or titles of archive questions) analysed with
  the index's analyzer, then (a) batched :meth:`TopicModel.fold_in` with their category,
  (b) batched with the category inferred by reconstruction, (c) one query at a time
  through the feature scorer (fold-in and the cosines of 100 candidates) for each
  inference; queries per second. With QUERIES.jsonl carrying categories, the accuracy of
  the inferred categories is reported too.

All figures come from one run on one machine: compare them as ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from _common import memory_mb

SCRIPT = os.path.abspath(__file__)


def _load(work):
    D = sp.load_npz(os.path.join(work, "tfidf.npz")).tocsc()
    labels = np.load(os.path.join(work, "labels.npy"))
    return D, labels


def child_gnmfnc(args):
    from cqa_search.exceptions import ConvergenceWarning
    from cqa_search.factorization import GNMFNC

    D, labels = _load(args.work_dir)
    _, rss0 = memory_mb()
    stamps = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        GNMFNC(args.ks, args.kp, a=100.0, max_iter=args.iterations, tol=0, random_state=0).fit(
            D, labels, callback=lambda i, o: stamps.append(time.perf_counter()))
    total = time.perf_counter() - t0
    per = float(np.median(np.diff([t0] + stamps)[1:]))
    peak, _ = memory_mb()
    return {"per_iter": per, "setup": total - per * len(stamps), "total": total,
            "peak_mb": peak, "rss_before_mb": rss0}


def child_sklearn(args):
    from sklearn.decomposition import NMF
    from sklearn.exceptions import ConvergenceWarning

    D, _ = _load(args.work_dir)
    X = sp.csr_matrix(D.T)
    _, rss0 = memory_mb()
    times = {}
    for n in (2, 2 + args.iterations):
        model = NMF(args.ks + args.kp, solver="mu", beta_loss="frobenius", init="random",
                    max_iter=n, tol=0, random_state=0)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X)
        times[n] = time.perf_counter() - t0
    per = (times[2 + args.iterations] - times[2]) / args.iterations
    peak, _ = memory_mb()
    return {"per_iter": per, "setup": times[2] - 2 * per, "total": times[2 + args.iterations],
            "peak_mb": peak, "rss_before_mb": rss0}


def child_foldin(args):
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.exceptions import ConvergenceWarning
    from cqa_search.factorization import TopicModel
    from cqa_search.searcher import LocalSearcher

    engine = SearchEngine.open(os.path.join(args.work_dir, "index"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = TopicModel("gnmfnc", n_shared=args.ks, n_category=args.kp,
                           max_iter=args.iterations, tol=0, random_state=0).fit(engine.view)
    texts, cats = _queries(args, engine)
    vocab, analyzer = engine.index.vocab, engine.analyzer
    rows, cols, vals = [], [], []
    for i, text in enumerate(texts):
        ids = vocab.ids(analyzer.analyze(text))
        ids, cnt = np.unique(ids[ids >= 0], return_counts=True)
        rows.extend([i] * len(ids))
        cols.extend(ids.tolist())
        vals.extend(cnt.tolist())
    counts = sp.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(vocab)))
    out = {"n_queries": len(texts)}
    known = [c if c in model.categories_ else None for c in cats]
    t0 = time.perf_counter()
    model.fold_in(counts, known)
    out["batch_given"] = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    _, inferred = model.fold_in(counts)
    out["batch_reconstruction"] = len(texts) / (time.perf_counter() - t0)
    truth = np.array([-1 if c is None else model.categories_.index(c) for c in known])
    has = truth >= 0
    if has.any():
        out["accuracy_reconstruction"] = float(np.mean(inferred[has] == truth[has]))
    engine = SearchEngine(LocalSearcher(engine.searcher.data,
                                        {**engine.models, "topics": model}, engine.config))
    for inference in ("given", "reconstruction", "hits", "all"):
        model.set_params(category_inference="reconstruction" if inference == "given"
                         else inference)
        eng = engine.with_config(SearchConfig(features=(), models=("topics",), ranker=None))
        scorer = next(s for s in eng.searcher._scorers if getattr(s, "names", ()) == ("topic_gnmfnc",))
        groups = []
        t_fold = 0.0
        for text, cat in zip(texts, known):
            q = eng.analyze(text, cat if inference == "given" else None)
            cand = np.arange(100)  # 100 candidates, as the engine reranks by default
            t0 = time.perf_counter()
            scorer.score(q, cand)
            t_fold += time.perf_counter() - t0
            groups.append(scorer.query_vector(q)[1])
        out[f"scorer_{inference}"] = len(texts) / t_fold
        if inference == "hits" and has.any():
            out["accuracy_hits"] = float(np.mean(np.array(groups)[has] == truth[has]))
    return out


def _queries(args, engine, n=1000):
    if args.queries:
        texts, cats = [], []
        with open(args.queries, encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                texts.append(rec["text"])
                cats.append(rec.get("category"))
        return texts[:n], cats[:n]
    rows = np.random.default_rng(0).choice(engine.n_docs, n, replace=False)
    qs = [engine.archive[int(r)] for r in rows]
    return [q.title or q.body for q in qs], [q.category for q in qs]


CHILDREN = {"gnmfnc": child_gnmfnc, "sklearn": child_sklearn, "foldin": child_foldin}


def run_child(name, args):
    cmd = [sys.executable, SCRIPT, args.archive, "--child", name, "--work-dir", args.work_dir,
           "--iterations", str(args.iterations), "--ks", str(args.ks), "--kp", str(args.kp)]
    if args.queries:
        cmd.insert(3, args.queries)
    print(f"[bench] {name} ...", file=sys.stderr, flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def prepare(args):
    from cqa_search import SearchEngine, build_index
    from cqa_search.factorization import term_question_matrix
    from cqa_search.index.store import is_compatible

    os.makedirs(args.work_dir, exist_ok=True)
    index = os.path.join(args.work_dir, "index")
    if not is_compatible(index):
        print(f"[bench] indexing {args.archive}", file=sys.stderr, flush=True)
        build_index(args.archive, index, progress=True)
    engine = SearchEngine.open(index)
    D, _ = term_question_matrix(engine.view)
    sp.save_npz(os.path.join(args.work_dir, "tfidf.npz"), D.tocsr(), compressed=False)
    np.save(os.path.join(args.work_dir, "labels.npy"), np.asarray(engine.view.doc_category))
    active = int((np.diff(D.tocsr().indptr) > 0).sum())
    return {"n_docs": D.shape[1], "n_terms": active, "nnz": D.nnz,
            "n_categories": len(engine.view.categories),
            "uncategorised": int((engine.view.doc_category < 0).sum())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("queries", nargs="?")
    ap.add_argument("--work-dir", default="bench_topics_work")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--ks", type=int, default=20)
    ap.add_argument("--kp", type=int, default=8)
    ap.add_argument("--child", choices=list(CHILDREN))
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return
    stats = prepare(args)
    runs = {"gnmfnc": [], "sklearn": []}
    for _ in range(args.repeats):
        for name in runs:
            runs[name].append(run_child(name, args))
    fold = run_child("foldin", args)

    def med(name, key):
        return float(np.median([r[key] for r in runs[name]]))

    K = args.ks + args.kp
    lines = ["## Topic models: speed and memory", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"Python {platform.python_version()}, numpy {np.__version__}, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
             f"load average {os.getloadavg()[0]:.1f} at the end.", "",
             f"Command: `python scripts/bench_topics.py {' '.join(sys.argv[1:])}`", "",
             f"Matrix: {stats['n_docs']:,} questions x {stats['n_terms']:,} terms (tf-idf, "
             f"{stats['nnz']:,} non-zeros), {stats['n_categories']} categories"
             + (f" + {stats['uncategorised']:,} questions without one" if stats["uncategorised"]
                else "") + ".", "",
             "| fit | s / iteration | set-up s | peak RSS MB | RSS before fit MB | "
             "added by the fit MB |", "|---|---:|---:|---:|---:|---:|"]
    labels = {"gnmfnc": f"GNMFNC K_s={args.ks}, K_p={args.kp}, a=100 "
                        f"({args.ks + (stats['n_categories']) * args.kp}+ topics in all)",
              "sklearn": f"scikit-learn NMF solver=mu, n_components={K}"}
    for name in runs:
        lines.append(f"| {labels[name]} | {med(name, 'per_iter'):.3f} | {med(name, 'setup'):.2f}"
                     f" | {med(name, 'peak_mb'):.0f} | {med(name, 'rss_before_mb'):.0f} | "
                     f"{med(name, 'peak_mb') - med(name, 'rss_before_mb'):.0f} |")
    ratio = med("gnmfnc", "per_iter") / med("sklearn", "per_iter")
    lines += ["", f"GNMFNC / scikit-learn NMF, time per iteration: **{ratio:.2f}x** "
                  f"(target <= 1.5x); memory added by the fit: "
                  f"{(med('gnmfnc', 'peak_mb') - med('gnmfnc', 'rss_before_mb')) / max(med('sklearn', 'peak_mb') - med('sklearn', 'rss_before_mb'), 1e-9):.2f}x.",
              f"Per-run s/iteration: GNMFNC {[round(r['per_iter'], 3) for r in runs['gnmfnc']]}, "
              f"scikit-learn {[round(r['per_iter'], 3) for r in runs['sklearn']]}.", "",
              f"Folding in ({fold['n_queries']} queries, GNMFNC of {args.iterations} sweeps), "
              "queries per second:", "",
              "| how | queries/s |", "|---|---:|",
              f"| batched `fold_in`, category given | {fold['batch_given']:,.0f} |",
              f"| batched `fold_in`, category by reconstruction | "
              f"{fold['batch_reconstruction']:,.0f} |"]
    for inference in ("given", "reconstruction", "hits", "all"):
        lines.append(f"| feature scorer, one query at a time (fold-in + 100 cosines), "
                     f"category {inference} | {fold['scorer_' + inference]:,.0f} |")
    if "accuracy_reconstruction" in fold:
        lines += ["", f"Category inference accuracy on these queries: reconstruction "
                      f"{100 * fold['accuracy_reconstruction']:.1f}%, BM25 hits "
                      f"{100 * fold['accuracy_hits']:.1f}%."]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
