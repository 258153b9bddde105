#!/usr/bin/env python3
"""Build and query throughput of sharded indexes on a local Ray session, beside one index.

For an archive (``bench/synth_archive.py N OUT.jsonl --queries Q QUERIES.jsonl``) this
builds one unsharded index (the baseline, in this process) and one sharded index per
``--shards`` value on a local Ray session (started once, before the timings), then runs
the queries through each engine: BM25 top-``k`` with the default features (6 feature
scores per hit, no ranker), one query at a time after ``--warmup`` queries, then the same
queries from ``--concurrency`` client threads (a server's load). It checks that every
sharded engine returns the baseline's ids for every query.

Reported: build wall seconds and the driver's CPU seconds (the shards' work runs in Ray
worker processes), questions per second; query wall milliseconds (p50, p90), queries per
second, and per shard from the actors' own accounting: questions, bytes on disk,
resident memory, CPU milliseconds per call of each round (candidates, features) over the
timed sequential queries (after the warm-up, whose first calls pay one-time costs). The
load average is printed before and after each step: the machine may be shared.

Usage: scripts/bench_distributed.py ARCHIVE QUERIES [--shards 1 2 4] [--k 10]
       [--queries 200] [--warmup 20] [--work DIR] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cqa_search import SearchEngine, build_index
from cqa_search.distributed._ray import connect
from cqa_search.distributed.build import build_sharded_index

from _common import dir_bytes, load_average, timed


def load():
    return f"load {load_average()}"


def run_queries(engine, texts, k, warmup, concurrency):
    for t in texts[:warmup]:
        engine.search(t, k)
    sharded = getattr(engine.searcher, "shard_stats", None)  # a sharded index's back-end
    warm = sharded() if sharded is not None else None
    lat, ids = [], []
    for t in texts[warmup:]:
        w = time.perf_counter()
        ids.append(engine.search(t, k).doc_ids)
        lat.append(time.perf_counter() - w)
    lat = np.array(lat)
    if warm is not None:  # the shards' CPU per call of the timed queries (not the warm-up's)
        after = sharded()
        for a, b in zip(warm, after):
            b["steady"] = {r: {"calls": b["work"][r]["calls"] - a["work"].get(r, {}).get("calls", 0),
                               "cpu_seconds": b["work"][r]["cpu_seconds"]
                               - a["work"].get(r, {}).get("cpu_seconds", 0.0)}
                           for r in b["work"]}
        engine.steady_stats = after
    # the same queries from `concurrency` client threads (a server's load)
    w = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        same = [r.doc_ids for r in pool.map(lambda t: engine.search(t, k), texts[warmup:])]
    wall = time.perf_counter() - w
    assert same == ids
    return {"queries": len(lat), "qps": len(lat) / lat.sum(),
            "p50_ms": 1e3 * np.median(lat), "p90_ms": 1e3 * np.percentile(lat, 90),
            "qps_concurrent": len(lat) / wall}, ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("queries")
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--queries-n", "--queries-count", dest="n_queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_bench_ray"))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    with open(args.queries, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:args.warmup + args.n_queries]
    os.makedirs(args.work, exist_ok=True)
    name = os.path.splitext(os.path.basename(args.archive))[0]
    report = {"archive": args.archive, "cpus": os.cpu_count(), "rows": []}

    print(load(), "| starting Ray", flush=True)
    print(f"ray.init {timed(connect).wall:.1f} s | {load()}", flush=True)

    base = os.path.join(args.work, f"{name}-one")
    shutil.rmtree(base, ignore_errors=True)
    summary, wall, cpu = timed(lambda: build_index(args.archive, base))
    n = summary.n_questions
    row = {"index": "unsharded", "shards": 0, "build_s": wall, "build_cpu_s": cpu,
           "build_qps": n / wall, "disk_mb": dir_bytes(base) / 1e6, "load_after_build": os.getloadavg()}
    print(f"unsharded build {wall:.1f} s (CPU {cpu:.1f} s), {n / wall:,.0f} questions/s | "
          f"{load()}", flush=True)
    engine = SearchEngine.open(base)
    queries, expected = run_queries(engine, texts, args.k, args.warmup, args.concurrency)
    row.update(queries, load_after_queries=os.getloadavg())
    print(f"unsharded queries {queries['qps']:.0f} q/s, p50 {queries['p50_ms']:.1f} ms, p90 "
          f"{queries['p90_ms']:.1f} ms, {args.concurrency} threads {queries['qps_concurrent']:.0f}"
          f" q/s | {load()}", flush=True)
    report["rows"].append(row)
    del engine

    for n_shards in args.shards:
        path = os.path.join(args.work, f"{name}-s{n_shards}")
        shutil.rmtree(path, ignore_errors=True)
        _, wall, cpu = timed(lambda: build_sharded_index(args.archive, path, n_shards))
        row = {"index": f"{n_shards} shards", "shards": n_shards, "build_s": wall,
               "build_cpu_s": cpu, "build_qps": n / wall, "disk_mb": dir_bytes(path) / 1e6,
               "load_after_build": os.getloadavg()}
        print(f"{n_shards} shards build {wall:.1f} s (driver CPU {cpu:.1f} s), "
              f"{n / wall:,.0f} questions/s | {load()}", flush=True)
        engine, wall, _ = timed(lambda: SearchEngine.open(path))
        row["open_s"] = wall
        queries, ids = run_queries(engine, texts, args.k, args.warmup, args.concurrency)
        row.update(queries, load_after_queries=os.getloadavg(), same_ids=ids == expected)
        stats = engine.steady_stats
        row["shard_stats"] = stats
        per = [{k: 1e3 * v["cpu_seconds"] / v["calls"] for k, v in s["steady"].items()
                if v["calls"]} for s in stats]
        print(f"{n_shards} shards queries {queries['qps']:.0f} q/s, p50 "
              f"{queries['p50_ms']:.1f} ms, p90 {queries['p90_ms']:.1f} ms, "
              f"{args.concurrency} threads {queries['qps_concurrent']:.0f} q/s, same ids as "
              f"unsharded: {ids == expected} | open {wall:.1f} s | {load()}", flush=True)
        for s, p in zip(stats, per):
            print(f"   shard {s['shard']}: {s['n_docs']:,} questions, disk "
                  f"{s['disk_bytes'] / 1e6:.0f} MB, actor RSS {s['rss_bytes'] / 1e6:.0f} MB, "
                  + ", ".join(f"{k} {v:.2f} CPU ms/call" for k, v in p.items()), flush=True)
        report["rows"].append(row)
        engine.close()
        del engine
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=float)


if __name__ == "__main__":
    main()
