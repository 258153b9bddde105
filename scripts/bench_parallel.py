#!/usr/bin/env python3
"""batch_search, run_queries and feature_table on one and on two worker processes: wall
time, speed-up.

Usage: scripts/bench_parallel.py INDEX QUERIES.jsonl [--k 10] [--bm25-only] [--repeats 3]

QUERIES.jsonl: one {"id", "text"} per line (e.g. synth_archive.py --queries, or a
converted collection's queries.jsonl). Runs each way ``--repeats`` times and keeps the
best wall time (the machine may be shared); the two workers share the engine by fork.
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("index", help="index directory")
    ap.add_argument("queries", help='JSONL, one {"id", "text"} per line')
    ap.add_argument("--k", type=int, default=10, help="hits per query (default %(default)s)")
    ap.add_argument("--bm25-only", action="store_true",
                    help="no features, no ranker (the retrieval model alone)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each way, the best wall time kept (default %(default)s)")
    args = ap.parse_args(argv)
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.evaluation import feature_table, run_queries

    config = SearchConfig(features=(), models=(), ranker=None) if args.bm25_only else None
    engine = SearchEngine.open(args.index, config=config)
    with open(args.queries, encoding="utf-8") as f:
        queries = [json.loads(line) for line in f if line.strip()]
    for q in queries:
        q.setdefault("id", str(len(q)))
    texts = [q["text"] for q in queries]
    engine.batch_search(texts[:5], k=args.k)  # warm: posting weights, folded-in rows
    print(f"{len(queries)} queries, {os.cpu_count()} cores, "
          f"{'BM25 alone' if args.bm25_only else 'the index pipeline'}: "
          f"{', '.join(engine.feature_names) or 'no features'}")
    for label, call in (
            ("batch_search", lambda n: engine.batch_search(texts, k=args.k, n_jobs=n)),
            ("run_queries", lambda n: run_queries(engine, queries, k=args.k, n_jobs=n)),
            ("feature_table", lambda n: feature_table(engine, queries, k=args.k, n_jobs=n))):
        best = {}
        for n in (1, 2):
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                call(n)
                wall = time.perf_counter() - t0
                best[n] = min(best.get(n, wall), wall)
        print(f"{label:<14}1 process {best[1]:.2f} s ({len(queries) / best[1]:,.0f} q/s), "
              f"2 processes {best[2]:.2f} s ({len(queries) / best[2]:,.0f} q/s): "
              f"{best[1] / best[2]:.2f}x")


if __name__ == "__main__":
    main()
