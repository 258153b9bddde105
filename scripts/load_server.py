#!/usr/bin/env python3
"""Bounded loopback load on `cqa-search serve`, with a rebuild of the index mid-run.

Starts `cqa-search serve INDEX` on a free 127.0.0.1 port (a subprocess: the real command),
then CLIENTS concurrent clients (keep-alive HTTP/1.1 connections, asyncio; a response with
`Connection: close` makes a client connect again for its next request) send REQUESTS
`GET /api/search` requests in all, each a question of the SemEval-2016 queries (title and
body, k=10: what the search page asks). When half of them are answered, `cqa-search
build-index` rebuilds the served index from the same archive (a new generation, which the
server must pick up without failing a request). Reports throughput, latency percentiles
(all requests, those answered while the rebuild ran and the others), errors, the server's
CPU time per request and the machine's load average. Only loopback traffic; the run stops
by itself after REQUESTS requests or TIMEOUT seconds.

The index is BM25-only (the archive of scripts/semeval2016.py, _common.prepare(): no trained
models, so no ranker); ``--archive`` and ``--queries`` serve another collection instead
(the tests run it on the demo archive). Usage:

    scripts/load_server.py [--data ../shared/data] [--work DIR] [--clients 16]
                           [--requests 4000] [--workers 1] [--field text|title]
                           [--rebuild-nice N]
                           [--archive ARCHIVE.jsonl --queries QUERIES.jsonl]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import numpy as np

from cqa_search import build_index
from cqa_search.index.store import current_generation, is_compatible

from _common import DATA, prepare


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def cpu_seconds(pid) -> float:
    """User + system CPU time of a process and its reaped children (Linux /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid) -> float:
    """CPU time of ``pid`` and its live child processes (uvicorn's workers)."""
    total = cpu_seconds(pid)
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            continue
        total += sum(children_cpu_seconds(int(c)) for c in children)
    return total


async def client(port, targets, results, budget, deadline, reconnects):
    """One keep-alive connection sending requests until the shared budget is spent; a
    response with ``Connection: close`` makes it open a new connection for its next request
    (as HTTP/1.1 requires; the time to connect counts in that request's latency)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    closed = False
    try:
        while budget[0] > 0 and time.monotonic() < deadline:
            budget[0] -= 1
            target = targets[budget[0] % len(targets)]
            started = time.perf_counter()
            try:
                if closed:
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    reconnects[0] += 1
                    closed = False
                writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Accept: application/json\r\n\r\n".encode())
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                status = int(head.split(b" ", 2)[1])
                headers = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:]
                               if b":" in line)
                length = int(headers[b"content-length"])
                closed = headers.get(b"connection", b"").strip() == b"close"
                body = await asyncio.wait_for(reader.readexactly(length), 30)
                ok = status == 200 and body.startswith(b'{"query"')
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError,
                    KeyError) as exc:
                status, ok, closed = repr(exc), False, True
            results.append((started, time.perf_counter(), status, ok))
    finally:
        writer.close()


async def load(port, targets, n_requests, n_clients, timeout, on_half, reconnects=None):
    results = []
    budget = [n_requests]
    reconnects = [0] if reconnects is None else reconnects
    deadline = time.monotonic() + timeout

    async def watch():
        while len(results) < n_requests // 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        on_half()

    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(client(port, targets, results, budget, deadline, reconnects)
                           for _ in range(n_clients)))
    await watcher
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA,
                    help="the judged collections (SemEval-2016 under it; default %(default)s)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_semeval2016"),
                    help="where the converted SemEval data and the index go "
                         "(default %(default)s)")
    ap.add_argument("--clients", type=int, default=16,
                    help="concurrent clients (default %(default)s)")
    ap.add_argument("--requests", type=int, default=4000,
                    help="requests measured in all (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=1000,
                    help="requests sent first, not measured (while every server process "
                         "comes up and the connections spread over them; default %(default)s)")
    ap.add_argument("--workers", type=int, default=1, help="cqa-search serve --workers")
    ap.add_argument("--field", choices=["text", "title"], default="text",
                    help="what of each SemEval query (train-part2, dev, test) is searched "
                         "(default: its title and body)")
    ap.add_argument("--rebuild-nice", type=int, default=0, metavar="N",
                    help="run the rebuild with `nice -n N` (what the README advises on a "
                         "machine that serves; default %(default)s: as any command)")
    ap.add_argument("--timeout", type=float, default=600.0, help="stop after this many seconds")
    ap.add_argument("--archive", help="serve this JSONL archive instead of SemEval's (with "
                                      "--queries; e.g. the demo archive for a quick run)")
    ap.add_argument("--queries", help="the JSONL queries ({\"text\"} per line) of --archive")
    args = ap.parse_args(argv)

    if bool(args.archive) != bool(args.queries):
        ap.error("--archive and --queries go together")
    if args.archive:
        archive, queries_file = args.archive, args.queries
    else:
        prepare(args.data, args.work)  # converts the splits and builds the archive once
        archive = os.path.join(args.work, "all", "archive.jsonl")
        queries_file = os.path.join(args.work, "all", "queries.jsonl")
    index = os.path.join(args.work, "served")
    if not is_compatible(index):
        build_index(archive, index)
    with open(queries_file, encoding="utf-8") as f:
        queries = [json.loads(line) for line in f if line.strip()]
    texts = [q.get(args.field) or q["text"] for q in queries]
    targets = ["/api/search?" + urllib.parse.urlencode({"q": t, "k": 10}) for t in texts]

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "cqa_search", "serve", index, "--port",
                               str(port), "--workers", str(args.workers)],
                              stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                before = get_json(base + "/health")
                if args.workers > 1:  # every worker process up
                    for _ in range(4 * args.workers):
                        get_json(base + "/health")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start: {server.communicate()[1]}")
                time.sleep(0.2)
        asyncio.run(load(port, targets, args.warmup, args.clients, args.timeout, lambda: None))

        rebuild = {}

        def rebuild_index():
            rebuild["start"] = time.perf_counter()
            nice = ["nice", "-n", str(args.rebuild_nice)] if args.rebuild_nice else []
            subprocess.run([*nice, sys.executable, "-m", "cqa_search", "build-index", archive,
                            "-o", index, "-q"], check=True, stdout=subprocess.DEVNULL)
            rebuild["end"] = time.perf_counter()

        thread = threading.Thread(target=rebuild_index)
        load0, cpu0, wall0 = os.getloadavg(), children_cpu_seconds(server.pid), time.perf_counter()
        own0 = time.process_time()
        reconnects = [0]
        results = asyncio.run(load(port, targets, args.requests, args.clients, args.timeout,
                                   thread.start, reconnects))
        wall = time.perf_counter() - wall0
        cpu = children_cpu_seconds(server.pid) - cpu0
        own = time.process_time() - own0
        load1 = os.getloadavg()
        thread.join()
        rebuilt = current_generation(index)
        deadline = time.monotonic() + 30  # the server follows within its check interval
        while get_json(base + "/health")["generation"] != rebuilt:
            if time.monotonic() > deadline:
                raise SystemExit("the server did not pick up the rebuilt index")
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=60)

    lat = np.array([(end - start) * 1e3 for start, end, _, _ in results])
    errors = [status for _, _, status, ok in results if not ok]
    overlaps = np.array([start <= rebuild.get("end", 0) and end >= rebuild.get("start", 1)
                         for start, end, _, _ in results], dtype=bool)
    during, steady = lat[overlaps], lat[~overlaps]
    pct = lambda a, q: float(np.percentile(a, q)) if len(a) else float("nan")  # noqa: E731
    print(f"index: {index} ({before['n_docs']:,} questions, BM25 only), generation "
          f"{before['generation']} -> {rebuilt} (rebuilt in "
          f"{rebuild['end'] - rebuild['start']:.1f} s during the run"
          + (f", at nice {args.rebuild_nice})" if args.rebuild_nice else ")"))
    print(f"{len(results)} requests, {args.clients} clients, {args.workers} worker(s), "
          f"query field {args.field!r}, k=10; {reconnects[0]} connections closed by the "
          "server and opened again")
    print("| requests | errors | throughput (req/s) | p50 ms | p95 ms | p99 ms | max ms "
          "| p95 ms during rebuild | p95 ms outside it | server CPU ms/req | client CPU ms/req "
          "| load avg before -> after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(results)} | {len(errors)} | {len(results) / wall:.0f} | {pct(lat, 50):.1f} "
          f"| {pct(lat, 95):.1f} | {pct(lat, 99):.1f} | {lat.max():.1f} "
          f"| {pct(during, 95):.1f} ({len(during)} req) | {pct(steady, 95):.1f} "
          f"| {1e3 * cpu / len(results):.2f} "
          f"| {1e3 * own / len(results):.2f} "
          f"| {load0[0]:.1f} -> {load1[0]:.1f} |")
    if errors:
        print("errors:", sorted(set(map(str, errors)))[:5])
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
