#!/usr/bin/env python3
"""The reliability loops of issues 12, 29 and 43 at full N (the tests run them with a small N).

Builds the demo index with a model of every family (the word vectors too) and a ranker,
then:

1. flips bits in every stored file (``--flips`` per file: an .npy header byte, then random
   bytes), opening and searching after each flip, with and without checksum verification,
   in a child process (a crash would be reported with its case); a search that is not
   refused is compared with the pristine index's (same hits, scores and questions);
2. forges values with their checksums (every JSON leaf of the manifest and of every
   model.json with 13 implausible values, every stored array with extreme elements):
   refused or finite results, never another exception or NaN; the results of each
   forgery not refused are compared with the pristine index's; the ranker's forgeries
   are exported too (refused, or finite numbers in strict JSON);
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
   another analyzer) and refits the index in a loop;
10. gives every face hostile input (issue 43): dates no int64 holds and filters at the
    ends of the calendar (archives, add, Python, the command line, the write API, MCP),
    closed standard streams, archived terminal control sequences (every printer, the
    interactive session on a pseudo-terminal), token files that are no files, SIGINT to
    MCP, ``--bodies`` request bodies that stall or are cut, more-like-this of a question
    of ``--similar-mb`` MB.

Prints one Markdown table (what BENCHMARKS.md shows). The loops live in
cqa_search/testing/{harness,forgery,environment}.py, shared with the tests.

Usage: scripts/reliability.py [--flips 10] [--kills 50] [--readers 8] [--seconds 60]
                              [--bodies 50] [--similar-mb 49]
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

from cqa_search import build_index
from cqa_search.testing import environment, forgery, harness, inputs


def _failed(results, key="case"):
    bad = [r for r in results if not r["ok"]]
    for r in bad[:5]:
        print("failed:", r, file=sys.stderr)
    return f"{len(bad)} failed" + (f" ({', '.join(str(r[key]) for r in bad[:3])})" if bad else "")


def flips(index, args, rows):
    cases = harness.corruption_cases(index, args.flips, seed=args.seed)
    n_files = len({c[0] for c in cases})
    for verify in (False, True):
        r = harness.run_corruptions(index, cases, verify=verify)
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
    by_file = Counter()
    for rel, n in r["different"].items():
        by_file[_kind(rel)] += n
    differ = ", ".join(f"{n} in {k}" for k, n in by_file.most_common()) or "none"
    rows.append((f"forged values with their checksums ({len(cases)}: JSON leaves of the "
                 "manifest and the models x 13 values, array elements at extremes), "
                 "`--verify`",
                 f"{o['corrupted index']} 'corrupted index', {o['other clear error']} other "
                 f"one-line errors, {o['same results']} results identical to the pristine "
                 f"index's, {o['different results']} different results with finite scores "
                 f"({differ})",
                 f"{len(r['unexpected']) - nan} tracebacks, {nan} NaN/infinite results"))
    for u in r["unexpected"][:5]:
        print("unexpected:", u, file=sys.stderr)
    cases = forgery.ranker_cases(copy)
    r = forgery.run_exports(copy, cases)
    if "crashed" in r:
        rows.append(("forged rankers exported", f"CRASH on {r['crashed']}", ""))
        return
    rows.append((f"the ranker's {len(cases)} forgeries exported by `export-ranker` (JSON and "
                 "RankLib)", f"{r['outcomes']['refused']} refused in one line, "
                 f"{r['outcomes']['written']} written with finite numbers (strict JSON)",
                 f"{len(r['unexpected'])} tracebacks or non-finite numbers written"))
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


def _expected(results) -> str:
    return f"{sum(r['ok'] for r in results)} of {len(results)} as expected"


def input_loops(index, work, args, rows):
    """Issue 43: hostile input through every face."""
    results = inputs.date_archives(index, work)
    rows.append((f"dates no int64 holds, milliseconds, the second after 9999-12-31, "
                 f"digits that are not ASCII ({len(inputs.BAD_DATES)} bad, "
                 f"{len(inputs.NOT_DATES)} no date) in JSONL and CSV archives, `add`, "
                 f"Python ({len(results)} cases)",
                 f"{_expected(results)}: a bad date refused by its line (skipped and counted "
                 "with `--skip-invalid`), text built undated, `tag:`/`date:` filters "
                 "working after", _failed(results)))
    edge = inputs.edge_index(index, work)
    results = inputs.calendar_filters(edge)
    rows.append((f"`date:` filters and `--after`/`--before` at both ends of the calendar "
                 f"({len(results)}), `cqa-search query`",
                 f"{_expected(results)}: the questions of 0001-01-01 / 9999-12-31 they "
                 "keep, or one line and exit 1", _failed(results)))
    results = inputs.mcp_session(edge)
    signals = [r for r in results if r["case"].startswith("mcp: ")]
    rows.append((f"MCP over stdio: the same filters, a laced query and ids "
                 f"({len(results) - len(signals)} tool calls), then SIGINT/SIGTERM "
                 f"({len(signals)})",
                 f"{_expected(results)}: hits or a tool error saying why",
                 "stopped in " + ", ".join(f"{r['seconds']:.1f} s" if r["seconds"] is not None
                                           else "never" for r in signals)
                 + f"; {_failed(results)}"))
    results = inputs.write_server(edge, work, n_bodies=args.bodies,
                                  megabytes=args.similar_mb)
    for label, pick in [("POST /api/questions with each date, then /api/tags and filtered "
                         "searches", lambda c: c.startswith(("POST", "GET /api/tags",
                                                             "GET /api/search?"))),
                        ("the calendar filters over HTTP (`q`, `after`, `before`)",
                         lambda c: c.startswith("GET /api/search ")),
                        (f"{args.bodies} write bodies stalled and {args.bodies} cut "
                         "mid-body, then the server's log",
                         lambda c: "writes" in c or "log" in c)]:
        part = [r for r in results if pick(r["case"])]
        rows.append((f"{label} ({len(part)} steps)", _expected(part), _failed(part)))
    similar = next(r for r in results if "similar" in r["case"])
    rows.append((f"`/api/questions/ID/similar` of a question of {args.similar_mb} MB",
                 f"status {similar['status']} in {similar['seconds']:.1f} s",
                 f"another client's slowest answer meanwhile "
                 f"{similar['slowest other answer'] or 0:.1f} s"))
    results = inputs.closed_streams(index, work)
    rows.append((f"query, query --json, info, export-ranker, build-index, piped queries with "
                 f"`>&-`, `2>&-`, `<&-` ({len(results)})",
                 f"{_expected(results)}: exit 0 (1 for a refused filter), no traceback, no "
                 "message on standard output", _failed(results)))
    results = inputs.control_characters(work)
    rows.append((f"an archive whose every field holds terminal control sequences, through "
                 f"every printer and the interactive session on a pseudo-terminal "
                 f"({len(results)})", f"{_expected(results)}: escaped (`\\x1b`), none raw",
                 _failed(results)))
    results = inputs.token_files(index, work)
    rows.append((f"`serve --token-file` on /dev/zero, a FIFO, a directory, 1 MiB, a link to "
                 f"a device, not UTF-8, a token not ASCII ({len(results)})",
                 f"{_expected(results)}: one line and exit 1",
                 f"slowest {max(r['seconds'] for r in results):.1f} s; {_failed(results)}"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=10, help="bit flips per stored file")
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--slow-clients", type=int, default=200)
    ap.add_argument("--record-mb", type=int, default=1024, help="size of the huge record")
    ap.add_argument("--bodies", type=int, default=50,
                    help="write requests whose body stalls (and as many cut)")
    ap.add_argument("--similar-mb", type=int, default=49,
                    help="size of the question more-like-this reads")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cqa_reliability_")
    t0 = time.time()
    index = harness.make_index(os.path.join(work, "index"))
    rows = []
    flips(index, args, rows)
    forgeries(index, work, args, rows)
    environment_loops(index, work, args, rows)
    input_loops(index, work, args, rows)
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
    build_index(harness.demo_questions(), path)
    rw = harness.readers_against_writer(path, args.readers, args.seconds)
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
