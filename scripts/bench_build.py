#!/usr/bin/env python3
"""Building an index on one core and on every core: wall and CPU time, the same index.

Usage: scripts/bench_build.py ARCHIVE.jsonl --work-dir DIR [--jobs 1,-1] [--repeat 3]
    [--fields question,answers] [--baseline-src DIR] [--tantivy THREADS]

Each build is ``cqa_search.build_index`` (what ``cqa-search build-index`` runs: reading,
storing and analysis included) in a process of its own, the ``--jobs`` values interleaved
``--repeat`` times. Reported per value, best and worst of the rounds: wall seconds, CPU
seconds of the process (every thread), of its main thread (which reads and stores the
questions; the others analyse text and order postings), and its peak RSS. The main
thread's CPU time is what the wall time comes down to on an otherwise idle machine; on a
shared one the wall time also waits for the other jobs. Last line: whether every build
wrote the same files (the SHA-256 of each in the manifests), as it must.
``--baseline-src DIR`` adds a build with the package imported from DIR (e.g. ``git archive
COMMIT cqa_search | tar -x -C DIR``, an older version: its ``build_index`` default), in
the same rounds. ``--tantivy THREADS`` adds tantivy (PyPI) in the same rounds, building from
the same raw text with its own English analysis (the built-in ``en_stem`` tokenizer) and
THREADS indexing threads (a 256 MB heap each, merges waited for): every record's ``title +
"\\n" + body`` read from the archive file (``json.loads`` per line) and added, what our
``fields=("question",)`` build indexes (ours also stores every record, its document
store); its row says CPU and wall like ours (its "main thread" is the one reading the file).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _child(archive, out, n_jobs, fields) -> dict:
    import cqa_search
    from cqa_search.index.store import open_index

    shutil.rmtree(out, ignore_errors=True)
    wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    options = {} if n_jobs == 0 else {"n_jobs": n_jobs}  # 0: the version's own default
    cqa_search.build_index(archive, out, fields=fields, **options)
    wall, cpu, main = (time.perf_counter() - wall, time.process_time() - cpu,
                       time.thread_time() - main)
    rss = next(int(line.split()[1]) / 1024 for line in
               Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    files = {k: v["sha256"] for k, v in open_index(out).manifest["files"].items()}
    return {"wall": wall, "cpu": cpu, "main": main, "rss_mb": rss, "files": files}


def _tantivy_child(archive, out, threads) -> dict:
    from _peers import tantivy_build

    shutil.rmtree(out, ignore_errors=True)
    Path(out).mkdir(parents=True)
    wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    tantivy_build(archive, out, "tantivy-en_stem", (), threads=threads)
    wall, cpu, main = (time.perf_counter() - wall, time.process_time() - cpu,
                       time.thread_time() - main)
    rss = next(int(line.split()[1]) / 1024 for line in
               Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return {"wall": wall, "cpu": cpu, "main": main, "rss_mb": rss}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("archive", help="archive file (JSONL or any format build-index reads)")
    ap.add_argument("--work-dir", required=True, help="where the indexes are built")
    ap.add_argument("--jobs", default="1,-1",
                    help="comma-separated n_jobs values (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default %(default)s)")
    ap.add_argument("--fields", default="question,answers",
                    help="indexed fields (default %(default)s, build-index's)")
    ap.add_argument("--baseline-src", metavar="DIR",
                    help="also build with the package imported from DIR")
    ap.add_argument("--tantivy", type=int, metavar="THREADS",
                    help="also build tantivy with en_stem on THREADS indexing threads")
    ap.add_argument("--child", nargs=2, metavar=("OUT", "N_JOBS"), help=argparse.SUPPRESS)
    ap.add_argument("--tantivy-child", nargs=2, metavar=("OUT", "THREADS"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    fields = tuple(a.fields.split(","))
    if a.child:
        print(json.dumps(_child(a.archive, a.child[0], int(a.child[1]), fields)))
        return 0
    if a.tantivy_child:
        print(json.dumps(_tantivy_child(a.archive, a.tantivy_child[0],
                                        int(a.tantivy_child[1]))))
        return 0
    if a.tantivy is not None and a.tantivy < 1:
        ap.error(f"--tantivy takes a number of threads >= 1; got {a.tantivy}")
    ways = {f"n_jobs={j}": (int(j), None) for j in a.jobs.split(",")}
    if a.baseline_src:
        ways[f"baseline ({a.baseline_src})"] = (0, os.fspath(Path(a.baseline_src).resolve()))
    if a.tantivy:
        ways[f"tantivy en_stem, {a.tantivy} thread(s)"] = (a.tantivy, "tantivy")
    work = Path(a.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    runs = {way: [] for way in ways}
    load = os.getloadavg()
    for rnd in range(a.repeat):
        for way, (j, src) in ways.items():
            out = work / "build"
            print(f"[bench_build] round {rnd + 1}, {way} ...", file=sys.stderr, flush=True)
            peer = src == "tantivy"
            env = dict(os.environ, **({"PYTHONPATH": src} if src and not peer else {}))
            done = subprocess.run([sys.executable, __file__, a.archive, "--work-dir", a.work_dir,
                                   "--fields", a.fields,
                                   "--tantivy-child" if peer else "--child", str(out), str(j)],
                                  check=True, capture_output=True, text=True, env=env)
            runs[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
            shutil.rmtree(out, ignore_errors=True)
    print(f"Command: `python scripts/bench_build.py {' '.join(argv or sys.argv[1:])}`; "
          f"{os.cpu_count()} CPUs; load average before / after: "
          f"{'/'.join(f'{x:.1f}' for x in load)} / "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| build | wall s | CPU s | main thread CPU s | other threads CPU s | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for way, rs in runs.items():
        def span(key, rs=rs):
            values = sorted(r[key] for r in rs)
            return f"{values[0]:.1f}" + (f"–{values[-1]:.1f}" if len(values) > 1 else "")
        others = sorted(r["cpu"] - r["main"] for r in rs)
        print(f"| {way} | {span('wall')} | {span('cpu')} | {span('main')} | "
              f"{others[0]:.1f}–{others[-1]:.1f} | {span('rss_mb')} |")
    digests = [r["files"] for rs in runs.values() for r in rs if "files" in r]
    same = all(d == digests[0] for d in digests)
    print(f"\nEvery build wrote the same files: {'yes' if same else 'NO'} "
          f"({len(digests[0])} files, {len(digests)} builds)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
