#!/usr/bin/env python3
"""SMT + MF speed and memory: seconds per ALS sweep and peak memory against archive size.

For each size N, a synthetic archive (../shared/bench/synth_archive.py N, made when
missing) is indexed, its P views are built (default: the original plus the FreeDict
French and German dictionaries, P = 3) and MultiViewNMF runs a fixed number of sweeps
(tol = 0). Each size runs in a fresh process so that its peak memory is its own.
Reported: the views' sizes, the time to build them, the median seconds per sweep, the
peak of memory allocated during the sweeps (tracemalloc, which numpy reports to) and
the process's peak resident memory (index, views and sweeps).

Usage: scripts/bench_multiview.py 50000 100000 200000 [--work /work/tmp] [--views
       dict:fra,dict:deu] [-k 100] [--sweeps 3] [--threads 1] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings

from _common import SYNTH, write_report


def archive_path(work, n):
    name = f"synth{n // 1000}k" if n % 1000 == 0 else f"synth{n}"
    return os.path.join(work, f"{name}.jsonl")


def one(args) -> dict:
    """Measure one size (run in its own process)."""
    from threadpoolctl import threadpool_limits

    from cqa_search import SearchEngine, build_index
    from cqa_search.index.store import is_compatible
    from cqa_search.exceptions import ConvergenceWarning
    from cqa_search.factorization.multiview import MultiViewNMF
    from cqa_search.factorization.views import (DummyTranslator, SourceBags, build_view,
                                                make_translator, parse_views)

    n = args.one
    archive = archive_path(args.work, n)
    if not os.path.exists(archive):
        subprocess.run([sys.executable, SYNTH, str(n), archive], check=True)
    index = os.path.join(args.work, f"mv_bench_index_{n}")
    t0 = time.perf_counter()
    if not is_compatible(index):
        build_index(archive, index)
    t_index = time.perf_counter() - t0
    engine = SearchEngine.open(index)
    t0 = time.perf_counter()
    bags = SourceBags(engine.view)
    translators = [DummyTranslator(name="orig")] + [
        make_translator(s, dict_dir=args.dict_dir) for s in parse_views(args.views)]
    Xs = [build_view(t, engine.view, bags=bags)[0] for t in translators]
    del bags
    t_views = time.perf_counter() - t0
    with threadpool_limits(args.threads):
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            nmf = MultiViewNMF(args.n_components, max_iter=args.sweeps, tol=0,
                               random_state=0).fit(Xs)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    load = os.getloadavg()[0]
    sweeps = sorted(nmf.timings_["sweeps"])
    cpu = sorted(nmf.timings_["sweeps_cpu"])
    return {"n_docs": n, "views": [t.name for t in translators],
            "n_features": [X.shape[1] for X in Xs], "nnz": [X.nnz for X in Xs],
            "index_s": t_index, "views_s": t_views, "setup_s": nmf.timings_["setup"],
            "sweep_s": sweeps[len(sweeps) // 2], "sweeps": nmf.timings_["sweeps"],
            "sweep_cpu_s": cpu[len(cpu) // 2], "sweeps_cpu": nmf.timings_["sweeps_cpu"],
            "als_peak_mb": peak / 2**20, "load_avg_1min": load, "cpus": os.cpu_count(),
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[50000, 100000, 200000])
    ap.add_argument("--work", default="/work/tmp")
    ap.add_argument("--views", default="dict:fra,dict:deu")
    ap.add_argument("--dict-dir", default="/usr/share/dictd")
    ap.add_argument("-k", "--n-components", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default: 1)")
    ap.add_argument("--out", help="also write the Markdown table to this file")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args)))
        return
    rows = []
    for n in args.sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(n), "--work", args.work,
               "--views", args.views, "--dict-dir", args.dict_dir, "-k",
               str(args.n_components), "--sweeps", str(args.sweeps), "--threads",
               str(args.threads)]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    first = rows[0]
    lines = ["| questions | views (words) | nnz (all views) | build views s | s / ALS sweep "
             "(wall) | CPU s / sweep | CPU s per 1k questions | ALS peak MB (tracemalloc) "
             "| process peak RSS MB | load avg |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        views = ", ".join(f"{v} {m:,}" for v, m in zip(r["views"], r["n_features"]))
        lines.append(f"| {r['n_docs']:,} | {views} | {sum(r['nnz']):,} | {r['views_s']:.1f} | "
                     f"{r['sweep_s']:.2f} | {r['sweep_cpu_s']:.2f} | "
                     f"{1000 * r['sweep_cpu_s'] / r['n_docs']:.4f} | "
                     f"{r['als_peak_mb']:.0f} | {r['max_rss_mb']:.0f} | "
                     f"{r['load_avg_1min']:.1f} / {r['cpus']} cores |")
    text = "\n".join(lines)
    if len(rows) > 1:
        ratios = ", ".join(f"{r['n_docs'] / first['n_docs']:.0f}x questions -> "
                           f"{r['sweep_s'] / first['sweep_s']:.2f}x wall time, "
                           f"{r['sweep_cpu_s'] / first['sweep_cpu_s']:.2f}x CPU time, "
                           f"{r['als_peak_mb'] / first['als_peak_mb']:.2f}x ALS memory"
                           for r in rows[1:])
        text += f"\n\nGrowth from {first['n_docs']:,} questions: {ratios}."
    text += (f"\n\n(K = {args.n_components}, P = {len(first['views'])} views: "
             f"{', '.join(first['views'])}; medians of {args.sweeps} sweeps; {args.threads} BLAS "
             f"thread(s); `{' '.join(['scripts/bench_multiview.py', *map(str, args.sizes)])}"
             f" --views {args.views} --sweeps {args.sweeps} --threads {args.threads}`)")
    print(text)
    write_report(args.out, text)


if __name__ == "__main__":
    main()
