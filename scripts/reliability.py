#!/usr/bin/env python3
"""The reliability loops of stored indexes at full N (the tests run them with a small N).

Builds the demo index with a model of every family and a ranker, then:

1. flips bits in every stored file (``--flips`` per file: an .npy header byte, then random
   bytes), opening and searching after each flip, with and without checksum verification,
   in a child process (a crash would be reported with its case);
2. kills writers (rebuilds, fits, a training run) with SIGKILL at random moments
   (``--kills``), opening and searching after each kill;
3. runs ``--readers`` reader processes for ``--seconds`` while this process rebuilds (with
   another analyzer) and refits the index in a loop.

Prints one Markdown table (what BENCHMARKS.md shows). The loops live in
cqa_search/evaluation/reliability.py, shared with the tests.

Usage: scripts/reliability.py [--flips 10] [--kills 50] [--readers 8] [--seconds 60]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from cqa_search import build_index
from cqa_search.evaluation import reliability


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=10, help="bit flips per stored file")
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cqa_reliability_")
    t0 = time.time()
    index = reliability.make_index(os.path.join(work, "index"))
    rows = []
    cases = reliability.corruption_cases(index, args.flips, seed=args.seed)
    n_files = len({c[0] for c in cases})
    for verify in (False, True):
        r = reliability.run_corruptions(index, cases, verify=verify)
        if "crashed" in r:
            rows.append((f"bit flips, verify={verify}", f"CRASH on {r['crashed']} "
                         f"(exit {r['returncode']})", ""))
            continue
        o = r["outcomes"]
        rows.append((f"bit flips in {n_files} files ({args.flips} per file), "
                     f"{'with' if verify else 'without'} --verify",
                     f"{r['cases']} cases: {o['corrupted index']} 'corrupted index', "
                     f"{o['other clear error']} other one-line errors, "
                     f"{o['ok']} harmless (still a correct index)",
                     f"{len(r['unexpected'])} tracebacks, 0 crashes"))
        for u in r["unexpected"][:5]:
            print("unexpected:", u, file=sys.stderr)
    copy = reliability.fresh_copy(index, os.path.join(work, "kill"))
    k = reliability.kill_loop(copy, args.kills, seed=args.seed)
    rows.append((f"kill -9 of build-index / fit / train ({args.kills} runs)",
                 f"{k['kills']} killed mid-write, {k['finished_before_kill']} finished; "
                 f"{len(k['open_failures'])} failed opens after a kill",
                 f"leftovers after the next write: {len(k['leftovers_after_next_write'])}; "
                 f"generation dirs: {len(k['generation_dirs'])}"))
    for f in k["open_failures"][:5]:
        print("open failure:", f, file=sys.stderr)
    path = os.path.join(work, "rw")
    build_index(reliability.demo_questions(), path)
    rw = reliability.readers_against_writer(path, args.readers, args.seconds)
    rows.append((f"{args.readers} reader processes x {args.seconds:.0f} s against a writer",
                 f"{rw['opens']:,} opens + searches, {rw['failed_opens']} failed",
                 f"{rw['writes']} rebuilds/refits meanwhile"))
    for e in rw["errors"][:5]:
        print("reader error:", e, file=sys.stderr)
    print(f"\n(seed {args.seed}, {time.time() - t0:.0f} s, work dir {work})\n")
    print("| loop | outcome | also |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
