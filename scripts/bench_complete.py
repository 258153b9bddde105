#!/usr/bin/env python3
"""Latency of title completion (``SearchEngine.complete``, ``GET /api/complete``) on an index.

Usage::

    python scripts/bench_complete.py INDEX [--n-prefixes 1000] [--k 5] [--seed 7]
        [--json-out FILE]

What is measured: the prefixes a person types, taken from the index's own titles (what
finds completions: the worst case, every prefix matches): ``--n-prefixes`` titles drawn at
random (``--seed``), each cut after a random number of its characters, at least 3 (the
page asks from 3 characters on), so that short prefixes (3 to 5 characters, matching up
to a large part of the archive) are among them as often as a typist passes through them.
Each prefix is completed once, one at a time in one thread, the clock running from the
typed text to the ``k`` completions (normalising, the binary searches in every segment,
ranking the matching range, reading the chosen questions' titles).

Each latency is taken twice: on the wall clock and as the thread's CPU time (which other
processes on a shared machine inflate far less); both are reported. The first completion
of a generation builds the title keys of its segments (read from their ``archive.jsonl``,
then kept): that cold start is reported apart (wall and CPU seconds), with the bytes of the
keys kept. Prints a Markdown report on stdout (command, machine load, the table);
``--json-out`` also saves every latency.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import numpy as np

from cqa_search import SearchEngine
from cqa_search.index.titles import titles_of


def _prefixes(engine, n, seed) -> list:
    rng = random.Random(seed)
    archive, n_docs = engine.archive, engine.n_docs
    out, tries = [], 0
    while len(out) < n and tries < 20 * n:
        tries += 1
        title = archive[rng.randrange(n_docs)].title.strip()
        if len(title) >= 3:
            out.append(title[:rng.randint(3, len(title))])
    return out


def _kept_mb(engine) -> float:
    """Megabytes of the title keys an unsharded index keeps (buffers and arrays)."""
    return titles_of(engine.searcher.data).nbytes / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index")
    parser.add_argument("--n-prefixes", type=int, default=1000)
    parser.add_argument("-k", "--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)

    engine = SearchEngine.open(args.index)
    prefixes = _prefixes(engine, args.n_prefixes, args.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    engine.prepare_completion()
    cold, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"cold start {cold:.1f} s, {len(prefixes)} prefixes", file=sys.stderr)
    times, cpu, found = [], [], []
    for text in prefixes:
        t0, c0 = time.perf_counter(), time.thread_time()
        got = engine.complete(text, k=args.k)
        cpu.append(1000 * (time.thread_time() - c0))
        times.append(1000 * (time.perf_counter() - t0))
        found.append(len(got))
    times, cpu = np.asarray(times), np.asarray(cpu)
    lengths = np.asarray([len(p) for p in prefixes])
    load = os.getloadavg()
    print(f"`python scripts/bench_complete.py {' '.join(sys.argv[1:] if argv is None else argv)}`"
          f" — {engine.n_questions:,} questions, {len(engine.manifest['segments'])} "
          f"segment(s), k = {args.k}; load average {load[0]:.1f} / {load[1]:.1f} "
          f"(1 / 5 min) on {os.cpu_count()} cores\n")
    print(f"Cold start (the title keys read, once per generation; a server does it before "
          f"serving): {cold:.1f} s wall, {cold_cpu:.1f} CPU s; the keys kept: "
          f"{_kept_mb(engine):,.0f} MB\n")
    print("| prefixes | n | with a completion | wall p50 ms | wall p95 ms | wall max ms | "
          "CPU p50 ms | CPU p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mask in (("all", lengths > 0), ("3-5 characters", lengths <= 5),
                       ("6-15 characters", (lengths > 5) & (lengths <= 15)),
                       ("16+ characters", lengths > 15)):
        if mask.any():
            t, c = times[mask], cpu[mask]
            print(f"| {name} | {int(mask.sum())} | "
                  f"{int(np.count_nonzero(np.asarray(found)[mask]))} | "
                  f"{np.percentile(t, 50):.2f} | {np.percentile(t, 95):.2f} | "
                  f"{t.max():.2f} | {np.percentile(c, 50):.2f} | {np.percentile(c, 95):.2f} |")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"cold_s": cold, "cold_cpu_s": cold_cpu, "prefixes": prefixes,
                       "ms": times.tolist(), "cpu_ms": cpu.tolist(), "found": found}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
