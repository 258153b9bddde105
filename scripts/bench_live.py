#!/usr/bin/env python3
"""A live archive at scale: adding questions to a large index against a full rebuild,
query speed with many segments against after a compaction, and size on disk.

1. builds an index of the first N questions of a synthetic archive
   (``../shared/bench/synth_archive.py``), then adds the next ``--batch`` questions with
   ``cqa-search add`` semantics (:func:`cqa_search.add_questions` reading a JSONL file) and
   rebuilds the N + batch questions from scratch (:func:`cqa_search.build_index` reading
   theirs): the ratio of the two times (best of ``--repeats``; CPU and wall time, each
   call timed in a process of its own, without the start-up of Python);
2. adds batches until the index has ``--segments`` segments, then times opening the index
   and BM25 top-10 queries (``--queries``), compacts it and times both again;
3. reports the live generation's size on disk (a file shared by several generations
   through a hard link counts once) before and after compaction, beside the rebuild's.

Usage: scripts/bench_live.py [--n 200000] [--batch 1000] [--segments 10] [--queries 500]
       [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _common import SYNTH, dir_bytes, timed


def du(path) -> int:
    """Bytes of the live generation's files (hard links counted once)."""
    from cqa_search.index.store import current_generation

    return dir_bytes(os.path.join(path, current_generation(path)))


def timed_in_process(call):
    """(CPU s, wall s) of ``call`` (a call of cqa_search's API, as text) in a new process,
    once the modules it uses are imported."""
    code = ("import json, time\nimport scipy.sparse\n"  # imported by both, before the clock
            "from cqa_search import add_questions, build_index\n"
            "c0, w0 = time.process_time(), time.perf_counter()\n"
            f"{call}\n"
            "print(json.dumps([time.process_time() - c0, time.perf_counter() - w0]))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


def timed_command(args):
    """Wall seconds of ``cqa-search ARGS`` (a new process: Python's start-up included)."""
    w0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cqa_search", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - w0


def query_speed(path, queries, repeats=3):
    from cqa_search import SearchConfig, SearchEngine

    engine, w_open, c_open = timed(lambda: SearchEngine.open(
        path, config=SearchConfig(features=(), ranker=None)))
    engine.search(queries[0], k=10)  # posting weights, computed once per open
    best = None
    for _ in range(repeats):
        cpu = timed(lambda: [engine.search(q, k=10) for q in queries]).cpu
        best = cpu if best is None else min(best, cpu)
    return {"open_cpu_s": c_open, "open_wall_s": w_open,
            "queries_per_s_cpu": len(queries) / best}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--n", type=int, default=200_000,
                    help="questions in the index before adding (default %(default)s)")
    ap.add_argument("--batch", type=int, default=1_000,
                    help="questions per add (default %(default)s)")
    ap.add_argument("--segments", type=int, default=10,
                    help="adds until the index has this many segments (default %(default)s)")
    ap.add_argument("--queries", type=int, default=500,
                    help="BM25 queries timed before and after compaction (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timings repeated, the best kept (default %(default)s)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_bench_live"),
                    help="where the synthetic archive and indexes go (default %(default)s)")
    args = ap.parse_args(argv)
    from cqa_search import Question, add_questions, build_index, compact

    os.makedirs(args.work, exist_ok=True)
    total = args.n + args.batch * args.segments
    archive = os.path.join(args.work, f"synth{total}.jsonl")
    queries_file = os.path.join(args.work, f"synth{total}_queries.jsonl")
    if not os.path.exists(archive):
        subprocess.run([sys.executable, SYNTH, str(total), archive, "--queries",
                        str(args.queries), queries_file], check=True)
    with open(archive, encoding="utf-8") as f:
        questions = [Question.from_dict(json.loads(line)) for line in f]
    with open(queries_file, encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f][:args.queries]
    first, batches = questions[:args.n], [
        questions[args.n + i * args.batch: args.n + (i + 1) * args.batch]
        for i in range(args.segments)]
    live = os.path.join(args.work, "live")
    rebuilt = os.path.join(args.work, "rebuilt")
    report = {"n": args.n, "batch": args.batch}
    adds, rebuilds, cli_adds, cli_rebuilds = [], [], [], []
    # Each timed change runs in a process of its own, reading its questions from a file as
    # `cqa-search add` and `build-index` do (this process holds every question in memory:
    # its garbage collector would slow a change timed here), on an index built from scratch
    # (no earlier generation left for the change's commit to remove), after os.sync() (no
    # write-back of the build pending in the change's fsyncs).
    batch_file = os.path.join(args.work, "batch.jsonl")
    rebuild_file = os.path.join(args.work, "rebuild.jsonl")
    with open(archive, "rb") as f:
        lines = [next(f) for _ in range(args.n + args.batch)]
    with open(batch_file, "wb") as f:
        f.writelines(lines[args.n:])
    with open(rebuild_file, "wb") as f:
        f.writelines(lines)
    del lines
    for _ in range(args.repeats):
        for path in (live, rebuilt):
            shutil.rmtree(path, ignore_errors=True)
        build_index(first, live)
        os.sync()
        adds.append(timed_in_process(f"add_questions({live!r}, {batch_file!r})"))
        os.sync()
        rebuilds.append(timed_in_process(f"build_index({rebuild_file!r}, {rebuilt!r})"))
        # the commands a user types, start-up of Python included (wall time)
        build_index(first, live)
        os.sync()
        cli_adds.append(timed_command(["add", "-q", live, batch_file]))
        os.sync()
        cli_rebuilds.append(timed_command(["build-index", "-q", rebuild_file, "-o", rebuilt]))
    add_cpu, add_wall = min(a[0] for a in adds), min(a[1] for a in adds)
    re_cpu, re_wall = min(r[0] for r in rebuilds), min(r[1] for r in rebuilds)
    report.update(add_cpu_s=add_cpu, add_wall_s=add_wall, rebuild_cpu_s=re_cpu,
                  rebuild_wall_s=re_wall, speedup_cpu=re_cpu / add_cpu,
                  speedup_wall=re_wall / add_wall, cli_add_wall_s=min(cli_adds),
                  cli_rebuild_wall_s=min(cli_rebuilds),
                  speedup_cli_wall=min(cli_rebuilds) / min(cli_adds))
    for batch in batches[1:]:
        add_questions(live, batch)
    report["segments"] = args.segments + 1
    report["segmented"] = query_speed(live, queries)
    report["segmented"]["bytes"] = du(live)
    _, wall, cpu = timed(lambda: compact(live))
    report["compact_cpu_s"], report["compact_wall_s"] = cpu, wall
    report["compacted"] = query_speed(live, queries)
    report["compacted"]["bytes"] = du(live)
    build_index(first + [q for b in batches for q in b], rebuilt)
    report["rebuilt"] = query_speed(rebuilt, queries)
    report["rebuilt"]["bytes"] = du(rebuilt)
    print(json.dumps(report, indent=1))
    s, c, r = report["segmented"], report["compacted"], report["rebuilt"]
    print(f"\n| | time (CPU s) | wall s |\n|---|---:|---:|\n"
          f"| add {args.batch:,} questions to {args.n:,} | {add_cpu:.2f} | {add_wall:.2f} |\n"
          f"| rebuild all {args.n + args.batch:,} | {re_cpu:.1f} | {re_wall:.1f} |\n"
          f"| ratio | {re_cpu / add_cpu:.0f}x | {re_wall / add_wall:.0f}x |\n"
          f"| `cqa-search add` / `build-index` (start-up included) | | "
          f"{min(cli_adds):.2f} / {min(cli_rebuilds):.1f} "
          f"({min(cli_rebuilds) / min(cli_adds):.0f}x) |\n"
          f"| compact {report['segments']} segments | {report['compact_cpu_s']:.1f} | "
          f"{report['compact_wall_s']:.1f} |\n")
    print("| index | open (CPU s) | BM25 top-10 q/s (CPU) | size on disk (MB) |\n"
          "|---|---:|---:|---:|")
    for label, x in ((f"{report['segments']} segments", s), ("after compact", c),
                     ("fresh build", r)):
        print(f"| {label} | {x['open_cpu_s']:.2f} | {x['queries_per_s_cpu']:,.0f} | "
              f"{x['bytes'] / 2**20:,.1f} |")


if __name__ == "__main__":
    main()
