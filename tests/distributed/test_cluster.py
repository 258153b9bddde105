"""A real Ray cluster of two nodes on this machine (a head and a node joined to it, each
its own processes, on the loopback interface): a model fitted from a sharded index's
shards with a node killed in the middle of the fit, the index searched on it, a node
killed in the middle of a query, and queries after it is back (``scripts/ray_cluster.py``
on the toy archive, in a process of its own: bounded, and every node stopped at the end).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_node_killed_mid_fit_or_mid_query_fails_it_naming_the_shard(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "ray_cluster.py"),
                          str(ROOT / "tests" / "data" / "toy_archive.jsonl"), "--shards", "3",
                          "--work", str(tmp_path), "--json", str(tmp_path / "report.json")],
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["problems"] == []
    # the shards were spread over both nodes; one of node 1's failed the query, by name
    assert set(report["shards"].values()) == {"node0", "node1"}
    lost = [s for s, node in report["shards"].items() if node == "node1"]
    assert any(f"shard {s} of 3 (shards/0000{s}) did not answer" in report["failed_query"]
               for s in lost)
    assert report["failed_query"].endswith("no partial result is returned")
    # every result equals the whole index's, before the failure and once the node is back
    assert report["equal_before"] == report["equal_after"] == "4/4"
    # a fit from the shards (an actor per shard, the nodes in turn) with node 1 killed in
    # the middle: it failed naming a shard of node 1, and no file of the index changed
    assert set(report["fit_shards"].values()) == {"node0", "node1"}
    lost = [s for s, node in report["fit_shards"].items() if node == "node1"]
    assert any(f"failed on shard {s} (shards/0000{s})" in report["failed_fit"] for s in lost)
    assert report["failed_fit"].endswith("the fit stopped and the index is unchanged")
    assert report["fit_index_unchanged"] is True
