#!/usr/bin/env python3
"""A sharded index against one index of the same archive, in one run: build, the fit of
every model family, live changes, and queries with every model's features.

Each step runs in a process of its own (so that its peak memory is its own), one after
the other, each a pair: the unsharded index in that process (no Ray), then the sharded one
(``--shards`` shards) on a local Ray session started by that process (the build, the fits,
which read their inputs from the shards and run their heavy steps on Ray as ``fit --ray``
does, the compaction, a Ray task per shard as ``compact --ray``, and the queries; adding
and deleting need no Ray). Reported per
step: wall seconds; CPU seconds of the step's process (the driver) and of its Ray
processes (the workers: tasks and shard actors; Ray's own: raylet, GCS, agents); peak
resident memory (VmHWM) of the driver and of the largest Ray worker (a fit's shard
actors, which end with the fit, report their own: ``shard_actors``); and, after the fits,
the largest difference between the two indexes' models (every array, the per-question
rows of each shard against those rows of the unsharded model), and after the queries
whether every hit is the same (the hybrid first stage runs once the word vectors are
fitted).

Steps: ``build``; ``fit FAMILY`` for each of ``--families`` (with ``--params
FAMILY:NAME=VALUE`` overriding a parameter); ``add`` (the questions of ``--add``),
``delete`` (the first ``--delete`` of them again) and ``compact``; ``query`` (the first
``--queries`` lines of QUERIES, top 10 with every model's features, one at a time).

Usage: scripts/bench_sharded.py ARCHIVE QUERIES --work DIR [--shards 2]
       [--families translation topics multiview answers embeddings]
       [--params topics:max_iter=50]
       [--add NEW.jsonl] [--delete 100] [--queries 100] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np

from _common import dir_bytes, load_average

FAMILIES = ("translation", "topics", "multiview", "answers", "embeddings")


def _descendants(pid) -> list:
    from cqa_search.testing.cluster import descendants

    return descendants(pid)


def _proc(pid) -> dict:
    """CPU seconds, peak and current RSS (MB) and the command of a process (or None)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            status = {key: value.split()[0] for key, _, value in
                      (line.partition(":") for line in f) if value.split()}
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return {"cpu": (int(fields[11]) + int(fields[12])) / tick,
            "peak_mb": int(status.get("VmHWM", 0)) / 1024, "command": command}


def _measure(step):
    """Run ``step()`` and measure it: wall, this process's CPU and peak memory, and its
    descendants' (Ray's processes, read just before they stop)."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = step()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    workers = [p for p in map(_proc, _descendants(os.getpid())) if p is not None]
    ray_workers = [p for p in workers if p["command"].startswith("ray::")]
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
    return value, {"wall_s": wall, "driver_cpu_s": cpu, "driver_peak_mb": peak,
                   "workers": len(ray_workers),
                   "workers_cpu_s": sum(p["cpu"] for p in ray_workers),
                   "ray_system_cpu_s": sum(p["cpu"] for p in workers if p not in ray_workers),
                   "worker_peak_mb": max((p["peak_mb"] for p in ray_workers), default=0.0)}


def _params(specs, family) -> dict:
    out = {}
    for spec in specs:
        fam, _, assignment = spec.partition(":")
        if fam == family:
            key, _, value = assignment.partition("=")
            out[key] = json.loads(value) if value[:1] in "0123456789-[{tn" else value
    return out


def run_step(args) -> dict:
    """One step on one index (in this process): what the parent measures."""
    from cqa_search import SearchEngine, add_questions, build_index, compact, delete_questions
    from cqa_search.training import fit_family

    sharded = args.index == "sharded"
    path = os.path.join(args.work, "sharded" if sharded else "one")
    step, extra = args.step, {}
    if sharded and (step in ("build", "query", "compact") or step.startswith("fit-")):
        from cqa_search.distributed._ray import connect

        connect()  # a fresh local session: its workers' memory is this step's
    if step == "build":
        if sharded:
            from cqa_search.distributed.build import build_sharded_index
            _, report = _measure(lambda: build_sharded_index(args.archive, path, args.shards))
        else:
            _, report = _measure(lambda: build_index(args.archive, path))
        extra["disk_mb"] = dir_bytes(path) / 1e6
    elif step.startswith("fit-"):
        family = step[4:]
        params = _params(args.params, family)
        parts = []  # what each shard's actor of a fit from the parts used (it logs it)
        handler = logging.Handler(logging.INFO)
        handler.emit = lambda record: parts.append(
            {"shard": record.args[0], "peak_mb": record.args[1], "cpu_s": record.args[2]})
        source = logging.getLogger("cqa_search.distributed.fitting")
        source.addHandler(handler)
        source.setLevel(logging.INFO)
        _, report = _measure(lambda: fit_family(path, family, ray="local" if sharded else None,
                                                progress=False, **params))
        if parts:
            extra["shard_actors"] = parts
    elif step == "add":
        _, report = _measure(lambda: add_questions(path, args.add))
    elif step == "delete":
        with open(args.add, encoding="utf-8") as f:
            ids = [json.loads(line)["id"] for _, line in zip(range(args.delete), f)]
        _, report = _measure(lambda: delete_questions(path, ids))
    elif step == "compact":  # a sharded index's shards by Ray tasks
        _, report = _measure(lambda: compact(path, ray=True if sharded else None))
    elif step == "query":
        with open(args.queries_file, encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f][:args.queries]
        engine = SearchEngine.open(path)
        engine.search(texts[0], 10)  # (the first query pays one-time costs)
        latencies, hits = [], []

        def queries():
            for text in texts:
                t = time.perf_counter()
                res = engine.search(text, 10)
                hits.append([list(res.doc_ids), res.features.tolist()])
                latencies.append(time.perf_counter() - t)
        _, report = _measure(queries)
        extra.update(p50_ms=1e3 * float(np.median(latencies)),
                     p90_ms=1e3 * float(np.percentile(latencies, 90)),
                     features=list(engine.feature_names))
        if sharded:
            extra["shards"] = [{k: s[k] for k in ("shard", "n_docs", "rss_bytes", "work")}
                               for s in engine.searcher.shard_stats()]
        with open(os.path.join(args.work, f"hits-{args.index}.json"), "w") as f:
            json.dump(hits, f)
    else:
        raise SystemExit(f"unknown step {step!r}")
    return {**report, **extra}


def compare_models(work) -> dict:
    """The largest absolute difference between the two indexes' models, per model (a
    per-question model: each shard's rows against those rows of the unsharded one)."""
    from cqa_search.index.models import load_models
    from cqa_search.index.sharding import read_shards, rows_of, shard_models
    from cqa_search.index.store import open_index

    one, top = open_index(os.path.join(work, "one")), open_index(os.path.join(work, "sharded"))
    sharded, out = load_models(top), {}
    for name, model in load_models(one).items():
        pairs, start = [], 0
        if hasattr(model, "select_rows"):
            for s, entry in enumerate(read_shards(top)):
                stop = start + entry["n_docs"]
                if entry["dir"] is not None:
                    pairs.append((rows_of(model, start, stop)[1],
                                  shard_models(top, s)[name].state()[1]))
                start = stop
        else:
            pairs.append((model.state()[1], sharded[name].state()[1]))
        worst = 0.0
        for expected, got in pairs:
            for key, value in expected.items():
                a, b = np.asarray(value, np.float64), np.asarray(got[key], np.float64)
                worst = max(worst, float(np.max(np.abs(a - b))) if a.size else 0.0)
        out[name] = worst
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("archive", help="the archive to index (JSONL or any format build-index reads)")
    ap.add_argument("queries_file", metavar="QUERIES", help="JSONL queries (the query step's)")
    ap.add_argument("--work", required=True, help="directory of the two indexes and outputs")
    ap.add_argument("--shards", type=int, default=2, help="shards of the sharded index "
                    "(default: %(default)s)")
    ap.add_argument("--families", nargs="*", default=list(FAMILIES), choices=FAMILIES,
                    help="model families to fit (in the order of the default, whatever "
                         "the order given; default: all)")
    ap.add_argument("--params", nargs="*", default=[], metavar="FAMILY:NAME=VALUE",
                    help="a fit parameter, e.g. multiview:max_iter=5")
    ap.add_argument("--add", help="JSONL of questions to add (new ids)")
    ap.add_argument("--delete", type=int, default=100,
                    help="delete this many of the added questions (default: %(default)s)")
    ap.add_argument("--queries", type=int, default=100,
                    help="run the first N queries (default: %(default)s)")
    ap.add_argument("--steps", nargs="*", help="only these steps (default: all)")
    ap.add_argument("--json", help="write the report here (JSON)")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.step:  # a step in a process of its own (see run_step)
        print(json.dumps(run_step(args)))
        return 0
    os.makedirs(args.work, exist_ok=True)
    # in the families' order whatever the order given: multiview's ibm1 view reads the
    # translation table
    steps = ["build"] + [f"fit-{f}" for f in FAMILIES if f in args.families]
    if args.add:
        steps += ["add", "delete", "compact"]
    steps += ["query"]
    steps = [s for s in steps if not args.steps or s in args.steps]
    forwarded = [args.archive, args.queries_file, "--work", args.work, "--shards",
                 str(args.shards), "--delete", str(args.delete), "--queries", str(args.queries),
                 *(["--add", args.add] if args.add else []),
                 *(["--params", *args.params] if args.params else [])]
    report = {"archive": args.archive, "shards": args.shards, "steps": []}
    for step in steps:
        for index in ("one", "sharded"):
            load = load_average()
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *forwarded,
                                  "--step", step, "--index", index],
                                 capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            row = {"step": step, "index": index, "load_before": load,
                   **json.loads(out.stdout.strip().splitlines()[-1])}
            report["steps"].append(row)
            print(json.dumps(row), flush=True)
        if step.startswith("fit-") and len(report["steps"]) >= 2:
            report.setdefault("model_differences", {}).update(compare_models(args.work))
        if step == "query":
            with open(os.path.join(args.work, "hits-one.json")) as f:
                a = json.load(f)
            with open(os.path.join(args.work, "hits-sharded.json")) as f:
                b = json.load(f)
            report["same_hits"] = all(x[0] == y[0] for x, y in zip(a, b))
            report["max_feature_difference"] = max(
                (float(np.max(np.abs(np.asarray(x[1]) - np.asarray(y[1])), initial=0.0))
                 for x, y in zip(a, b)), default=0.0)
    print(json.dumps({k: v for k, v in report.items() if k != "steps"}, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
