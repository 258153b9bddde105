#!/usr/bin/env python3
"""The reliability loops of issues 12 and 29 at full N (the tests run them with a small N).

Builds the demo index with a model of every family and a ranker, then:

1. flips bits in every stored file (``--flips`` per file: an .npy header byte, then random
   bytes), opening and searching after each flip, with and without checksum verification,
   in a child process (a crash would be reported with its case); a search that is not
   refused is compared with the pristine index's (same hits, scores and questions);
2. forges values with their checksums (every JSON leaf of the manifest and of every
   model.json with 13 implausible values, every stored array with extreme elements):
   refused or finite results, never another exception or NaN;
3. puts a FIFO, /dev/zero, a link out of the index, a directory or a 16 GiB file where
   index files should be (CURRENT, the manifest, arrays, a model, the archive, the
   generation directory): ``cqa-search query`` in bounded time and memory;
4. runs every command that writes under a file-size limit (EFBIG) and, where a tmpfs can
   be mounted (root), on a full file system (ENOSPC);
5. writes the results of query and info to /dev/full, in ASCII, to a pipe closed early;
6. serves the index while its generations go bad (FIFO manifest, /dev/zero, a model that
   cannot load) and good again, stops it (SIGTERM, SIGINT) with a FIFO live, starts it on
   a bad model; holds ``--slow-clients`` connections that trickle their request heads;
7. reads a JSONL record of ``--record-mb`` MB, and archives in UTF-16 and UTF-32;
8. kills writers (rebuilds, fits, a training run) with SIGKILL at random moments
   (``--kills``), opening and searching after each kill;
9. runs ``--readers`` reader processes for ``--seconds`` while this process rebuilds (with
   another analyzer) and refits the index in a loop.

Prints one Markdown table (what BENCHMARKS.md shows). The loops live in
cqa_search/testing/{harness,forgery,environment}.py, shared with the tests.

Usage: scripts/reliability.py [--flips 10] [--kills 50] [--readers 8] [--seconds 60]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

from cqa_search.testing import environment, forgery, harness


def _failed(results, key="case"):
    bad = [r for r in results if not r["ok"]]
    for r in bad[:5]:
        print("failed:", r, file=sys.stderr)
    return f"{len(bad)} failed" + (f" ({', '.join(str(r[key]) for r in bad[:3])})" if bad else "")


def flips(index, args, rows):
    cases = harness.corruption_cases(index, args.flips, seed=args.seed)
    n_files = len({c[0] for c in cases})
    for verify in (False, True):
        r = reliability.run_corruptions(index, cases, verify=verify)
        if "crashed" in r:
            rows.append((f"bit flips, verify={verify}", f"CRASH on {r['crashed']} "
                         f"(exit {r['returncode']})", ""))
            continue
        o = r["outcomes"]
        by_file = Counter()
        for rel, n in r["different"].items():
            by_file[_kind(rel)] += n
        differ = ", ".join(f"{n} in {k}" for k, n in by_file.most_common()) or "none"
        rows.append((f"bit flips in {n_files} files ({args.flips} per file), "
                     f"{'with' if verify else 'without'} `--verify`",
                     f"{r['cases']} cases: {o['corrupted index']} 'corrupted index', "
                     f"{o['other clear error']} other one-line errors, "
                     f"{o['same results']} results identical to the pristine index's, "
                     f"{o['different results']} different results ({differ})",
                     f"{len(r['unexpected'])} tracebacks, 0 crashes"))
        for u in r["unexpected"][:5]:
            print("unexpected:", u, file=sys.stderr)


def _kind(rel) -> str:
    """A stored file without its segment's directory, for the table."""
    parts = rel.split("/")
    return "/".join(parts[2:]) if parts[0] == "segments" else rel


def forgeries(index, work, args, rows):
    copy = harness.fresh_copy(index, os.path.join(work, "forged"))
    cases = forgery.forgery_cases(copy)
    r = forgery.run_forgeries(copy, cases, harness.QUERIES)
    if "crashed" in r:
        rows.append(("forged values with their checksums", f"CRASH on {r['crashed']}", ""))
        return
    o = r["outcomes"]
    nan = sum(u["error"] == "AssertionError" for u in r["unexpected"])
    rows.append((f"forged values with their checksums ({len(cases)}: JSON leaves of the "
                 "manifest and the models x 13 values, array elements at extremes), "
                 "`--verify`",
                 f"{o['corrupted index']} 'corrupted index', {o['other clear error']} other "
                 f"one-line errors, {o['results']} results with finite scores",
                 f"{len(r['unexpected']) - nan} tracebacks, {nan} NaN/infinite results"))
    for u in r["unexpected"][:5]:
        print("unexpected:", u, file=sys.stderr)


def _record(work, args, rows):
    """A JSONL record of --record-mb MB between two good ones: refused by its line, in
    bounded memory; UTF-16/32 archives named."""
    path = os.path.join(work, "big.jsonl")
    with open(path, "w") as f:
        f.write('{"id": "a", "title": "visa"}\n{"id": "b", "title": "')
        chunk = "x" * (1 << 20)
        for _ in range(args.record_mb):
            f.write(chunk)
        f.write('"}\n{"id": "c", "title": "car"}\n')
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], "
            "capture_output=True, text=True); print(p.returncode); print(p.stderr.strip()); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, *environment.CLI, "build-index", path,
                          "-o", os.path.join(work, "big-index"), "-q", "--skip-invalid"],
                         capture_output=True, text=True).stdout.splitlines()
    os.unlink(path)
    rows.append((f"a JSONL record of {args.record_mb:,} MB between two good ones, "
                 "`--skip-invalid`",
                 f"exit {out[0]}, 2 questions indexed; {out[-2].strip()}",
                 f"peak memory {int(out[-1]) / 1024:.0f} MB"))
    named = 0
    encodings = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]
    for enc in encodings:
        for name, text in [("a.jsonl", '{"id": "a", "title": "visa"}\n'),
                           ("a.csv", "id,title\na,visa\n")]:
            p = os.path.join(work, name)
            with open(p, "wb") as f:
                f.write(text.encode(enc))
            r = environment.run_cli(["build-index", p, "-o", os.path.join(work, "u"), "-q"])
            named += environment.one_line_error(r) and "UTF-" in r["stderr"] \
                and "not UTF-8" in r["stderr"]
    rows.append(("JSONL and CSV archives in UTF-16 and UTF-32 (BOM and without: "
                 f"{len(encodings) * 2} files)", f"{named} refused naming their encoding", ""))


def environment_loops(index, work, args, rows):
    results = environment.hostile_files(index, work)
    rows.append((f"FIFO, /dev/zero, links out of the index, directories, 16 GiB files in "
                 f"place of index files ({len(results)} cases), `cqa-search query`",
                 f"{sum(r['ok'] for r in results)} one-line 'corrupted index', exit 1",
                 f"{_failed(results)}; 0 hangs (limit {environment.TIMEOUT} s), "
                 f"memory limit {environment.MEMORY >> 30} GiB"))
    results = environment.full_disk(index, work)
    rows.append((f"every command that writes ({len(results)}) under a file-size limit "
                 "(EFBIG)", f"{sum(r['ok'] for r in results)} one line + exit 1, the index "
                 "unchanged, no temporary directory left", _failed(results, "command")))
    if environment.tmpfs_available():
        results = environment.full_file_system(index, work)
        rows.append((f"every command that writes ({len(results)}) on a full tmpfs (ENOSPC)",
                     f"{sum(r['ok'] for r in results)} one line + exit 1, the index "
                     "unchanged, no temporary directory left", _failed(results, "command")))
    results = environment.terminal(index)
    rows.append((f"query / query --json / info / a non-ASCII query: stdout on /dev/full, "
                 f"PYTHONIOENCODING=ascii, a pipe closed after one byte ({len(results)})",
                 f"{sum(r['ok'] for r in results)} as expected (one line + exit 1; "
                 "replaced characters + exit 0; quiet exit 0)", _failed(results)))
    for sig in (signal.SIGTERM, signal.SIGINT):
        steps = environment.watcher(index, work, sig=sig)
        stop = next(s for s in steps if s["case"].startswith("stopping"))
        rows.append((f"a server while its generations go bad and good again, stopped by "
                     f"{sig.name} with a FIFO live ({len(steps)} steps)",
                     f"{sum(s['ok'] for s in steps)} as expected: /health 'stale' with the "
                     "reason, the next good generation served, 503 then served after a "
                     "start on a bad model",
                     f"stopped in {stop['seconds']:.1f} s" if stop["seconds"] is not None
                     else "did not stop (killed)"))
        _failed(steps)
    slow = environment.slow_clients(index, n_clients=args.slow_clients)
    rows.append((f"{slow['clients']} connections trickling their request heads (a byte a "
                 "second)", f"{slow['dropped']} dropped by the server, the last after "
                 f"{slow['last dropped after']:.1f} s",
                 f"{slow['answered meanwhile']} other requests answered meanwhile"))
    _record(work, args, rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=10, help="bit flips per stored file")
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--slow-clients", type=int, default=200)
    ap.add_argument("--record-mb", type=int, default=1024, help="size of the huge record")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cqa_reliability_")
    t0 = time.time()
    index = harness.make_index(os.path.join(work, "index"))
    rows = []
    flips(index, args, rows)
    forgeries(index, work, args, rows)
    environment_loops(index, work, args, rows)
    copy = harness.fresh_copy(index, os.path.join(work, "kill"))
    k = harness.kill_loop(copy, args.kills, seed=args.seed)
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
    print(json.dumps({"rows": rows}), file=sys.stderr)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is reported, not dumped
    main()
