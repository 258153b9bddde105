#!/usr/bin/env python3
"""A sharded index on a Ray cluster of several nodes on this machine; a node killed in the
middle of a fit, and in the middle of queries and started again.

Starts a head (``ray start --head --node-ip-address 127.0.0.1``) and ``--nodes - 1`` worker
nodes joined to it (each its own ports, temporary directory, bounded object store, on the
loopback interface only), builds ARCHIVE whole (in this process) and in ``--shards``
shards on the cluster (the index directory on this machine's disk, which every node
reads), fits the answers model from the shards (an actor per shard, the nodes in turn)
with node 1 killed in the middle of the fit, checks that the fit fails naming a shard of
node 1 and that no file of the index changed, starts node 1 again, trains one ranker, and
checks with a ranked query per ``--queries`` line (default: titles of the archive) that:
every result equals the whole index's; a query during which
node 1 dies (between its two rounds) fails with a ShardError naming a shard of node 1,
never a partial result; once node 1 is started again, every query succeeds again, equal to
the whole index's. Prints the report as JSON; exit 1 when a check fails. Every node is
stopped at the end (also on an error); the run is bounded by Ray's timeouts and ours.

The small version runs in CI (``tests/distributed/test_cluster.py``); see
docs/distributed.md.

Usage: scripts/ray_cluster.py ARCHIVE [--shards 4] [--nodes 2] [--queries FILE]
       [--work DIR] [--timeout 1] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile

from cqa_search.testing.cluster import check_node_failure, node_failure


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--queries", help="JSONL of queries ({'text': ...}); default: titles")
    ap.add_argument("--work", help="where the indexes go (default: a temporary directory)")
    ap.add_argument("--timeout", type=float, default=1.0,
                    help="seconds a shard may take to answer during the failure (shorter "
                         "than the cluster takes to find the node lost: seconds)")
    ap.add_argument("--json", help="write the report here too")
    args = ap.parse_args(argv)
    queries = ()
    if args.queries:
        with open(args.queries, encoding="utf-8") as f:
            queries = [json.loads(line)["text"] for line in f if line.strip()]
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        report = node_failure(args.archive, work, n_shards=args.shards, n_nodes=args.nodes,
                              queries=queries, timeout=args.timeout,
                              log=lambda m: print(m, file=sys.stderr, flush=True))
    problems = check_node_failure(report)
    report["problems"] = problems
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
