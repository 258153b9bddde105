"""A Ray cluster of several nodes on this machine, and a sharded index searched on it while a
node dies and comes back.

:class:`LocalCluster` starts a head (``ray start --head --node-ip-address 127.0.0.1``) and
worker nodes joined to it (``ray start --address HEAD``), each a process group of its own
with its own ports, temporary directory, bounded object store and a resource ``node<i>``
naming it, on the loopback interface; :meth:`~LocalCluster.kill` kills a node's process
group (its ``ray start --block`` process and the raylet, object store and workers it
started: the node dies as a machine that fails), :meth:`~LocalCluster.start` starts it
again; leaving the ``with`` block (or the process) stops every node started.

:func:`node_failure` is the scenario of ``tests/distributed/test_cluster.py`` (small) and
``scripts/ray_cluster.py`` (full): a sharded index built on the cluster (the index
directory on storage every node reads: here, this machine's), searched by shard actors
spread over the nodes; every result equals one unsharded index's; a node killed in the
middle of a query fails that query with a ``ShardError`` naming a shard it held, never a
partial result; once the node is back, queries succeed again (the shard's actor restarted
by Ray, on a node alive).
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["LocalCluster", "node_failure", "check_node_failure", "descendants"]

# Bytes of object store per node (bounded: the machine is shared).
_OBJECT_STORE = 150 * 1024 ** 2
_ENVIRONMENT = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# The nodes' health checks: a lost node is found in seconds (Ray's defaults: tens of
# seconds), and its actors restarted elsewhere.
_HEALTH_CHECKS = {"RAY_health_check_initial_delay_ms": "1000",
                  "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                  "RAY_health_check_failure_threshold": "3"}
# Ray's switch for single-machine sessions: on for the driver (addresses on the loopback
# interface), off for the nodes (a node joining another one would be refused).
_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_START_SECONDS = 120.0


def descendants(pid) -> list:
    """The processes descended from ``pid`` (from /proc: parent of each process)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read().decode("ascii", "replace")
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def _free_ports(n) -> list:
    """``n`` ports free on the loopback interface now."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


#: ``ray start`` on the loopback interface: Ray swaps 127.0.0.1 for the machine's address
#: when it may join other machines (and a node joining another one must be allowed to),
#: so the node's command line keeps the address given.
_RAY_START = (
    "import sys\n"
    "import ray._private.services as services\n"
    "services.resolve_ip_for_localhost = lambda host: host\n"
    "services.get_node_ip_address = lambda address=None: '127.0.0.1'\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(main())\n")


class LocalCluster:
    """``n_nodes`` Ray nodes on this machine (node 0 the head), on the loopback interface.

    Parameters
    ----------
    n_nodes : int, default 2
    cpus : int, default 1
        CPUs each node offers.
    root : path, optional
        Where the nodes' temporary directories go (default: a new directory under /tmp:
        Ray's socket paths must stay short).
    """

    def __init__(self, n_nodes=2, *, cpus=1, root=None):
        self.n_nodes, self.cpus = n_nodes, cpus
        self.root = root or tempfile.mkdtemp(prefix="rayc-", dir="/tmp")
        self.port = _free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self._procs = {}
        self.ray = None
        # Every process of the cluster, this driver included (read when Ray is imported or
        # initialised): addresses on the loopback interface, and no token authentication
        # (nothing leaves the machine; the token file of ~/.ray is the user's).
        os.environ.update(_ENVIRONMENT, **{_SINGLE_MACHINE: "0"})
        atexit.register(self.stop)

    def __enter__(self):
        """Start the head, join it (this process is the driver), then the other nodes."""
        from ..distributed._ray import connect

        try:
            self.start(0)
            self.ray = connect(self.address)
            for i in range(1, self.n_nodes):
                self.start(i)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _command(self, i) -> list:
        agent, grpc, runtime, metrics, manager, objects = _free_ports(6)
        command = [sys.executable, "-c", _RAY_START, "start", "--block",
                   "--node-ip-address", "127.0.0.1",
                   f"--num-cpus={self.cpus}", f"--resources={json.dumps({f'node{i}': 1})}",
                   f"--object-store-memory={_OBJECT_STORE}",
                   f"--temp-dir={os.path.join(self.root, f'n{i}')}",
                   f"--dashboard-agent-listen-port={agent}",
                   f"--dashboard-agent-grpc-port={grpc}",
                   f"--runtime-env-agent-port={runtime}", f"--metrics-export-port={metrics}",
                   f"--node-manager-port={manager}", f"--object-manager-port={objects}",
                   "--disable-usage-stats"]
        if i == 0:
            command += ["--head", f"--port={self.port}", "--include-dashboard=false"]
        else:
            command += [f"--address={self.address}"]
        return command

    def start(self, i, timeout=_START_SECONDS) -> None:
        """Start node ``i`` (a process group of its own) and wait until it is up: the head
        accepting connections, another node alive in the cluster (a new one: a node
        started again is a new node to Ray)."""
        known = self._node_ids(i) if i else set()
        log = open(os.path.join(self.root, f"node{i}.log"), "ab")
        env = {**os.environ, **_ENVIRONMENT, **_HEALTH_CHECKS, _SINGLE_MACHINE: "1"}
        env.pop("RAY_ADDRESS", None)
        self._procs[i] = subprocess.Popen(self._command(i), stdout=log, stderr=log,
                                          stdin=subprocess.DEVNULL, env=env,
                                          start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not (self._listening() if i == 0 else self._node_ids(i) - known):
            if self._procs[i].poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(self.root, f"node{i}.log"), "rb") as f:
                    tail = f.read()[-2000:].decode("utf-8", "replace")
                raise TimeoutError(f"node {i} did not start; its output ends with:\n{tail}")
            time.sleep(0.5)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def _node_ids(self, i) -> set:
        """Ids of the nodes alive with the resource ``node<i>`` (the cluster's view)."""
        return {n["NodeID"] for n in self.ray.nodes()
                if n["Alive"] and f"node{i}" in n["Resources"]}

    def node_names(self) -> dict:
        """Node id -> ``node<i>`` of every node the cluster knows."""
        return {n["NodeID"]: next((r for r in n["Resources"] if re.fullmatch(r"node\d+", r)),
                                  "?") for n in self.ray.nodes()}

    def kill(self, i) -> None:
        """Kill node ``i`` at once, as a machine that fails: SIGKILL to every process it
        started (its ``ray start`` process and their descendants: the raylet, the object
        store, the workers, which Ray starts in sessions of their own)."""
        proc = self._procs.pop(i, None)
        if proc is None:
            return
        for pid in descendants(proc.pid) + [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Leave the cluster, stop every node started (workers first, the head last) and
        remove their files."""
        if getattr(self, "ray", None) is not None:
            self.ray.shutdown()
            self.ray = None
        for i in sorted(self._procs, reverse=True):
            proc = self._procs[i]
            started = descendants(proc.pid)
            if proc.poll() is None:
                try:  # ray start --block stops what it started
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=20)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            for pid in started + [proc.pid]:  # and what is left of it goes
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait(timeout=20)
        self._procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def node_failure(archive, work, *, n_shards=2, queries=(), n_nodes=2, timeout=1.0,
                 log=print) -> dict:
    """Build ``archive`` whole and in ``n_shards`` shards on a :class:`LocalCluster` of
    ``n_nodes``, fit a model from the shards while node 1 dies (then start it again),
    train one ranker, and search both while node 1 dies and comes back.

    Returns a report: the nodes of the shards' actors in the fit, its error and whether
    the index's files are unchanged; the nodes of the shards, how many queries equal the
    whole index's before the failure, the error of the query in flight when the node died (``timeout``:
    seconds a shard may take to answer, shorter than the time the cluster takes to find
    the node lost and start its shards elsewhere), and the results after the node is back
    (a shard may then take two minutes to answer).
    """
    import numpy as np

    from .. import SearchEngine, build_index
    from ..distributed._ray import ShardError
    from ..distributed.build import build_sharded_index
    from ..distributed.search import ShardedSearcher
    from ..features import GIVEN_FEATURES
    from ..index.models import add_model
    from ..index.store import open_index
    from ..ranking.linear import LinearRanker

    report = {"n_nodes": n_nodes, "n_shards": n_shards}
    whole, sharded = os.path.join(work, "whole"), os.path.join(work, "sharded")
    with LocalCluster(n_nodes) as cluster:
        log(f"cluster of {n_nodes} nodes at {cluster.address}")
        build_index(archive, whole)
        t0 = time.perf_counter()
        build_sharded_index(archive, sharded, n_shards)
        report["build_seconds"] = time.perf_counter() - t0
        report.update(_fit_with_node_lost(cluster, sharded))
        log(f"fit while node 1 died: {report['failed_fit']} (the index unchanged: "
            f"{report['fit_index_unchanged']})")
        cluster.start(1)
        one = SearchEngine.open(whole)
        texts = list(queries) or [one.archive[r].title for r in range(0, one.n_docs, 3)][:30]
        results = [one.search(t, 10) for t in texts[:10]]
        free = [j for j, f in enumerate(one.feature_names) if f not in GIVEN_FEATURES]
        X = np.vstack([r.features for r in results])[:, free]
        qid = np.repeat(np.arange(len(results)), [len(r) for r in results])
        y = np.concatenate([np.arange(len(r)) < 3 for r in results]).astype(int)
        ranker = LinearRanker("ranksvm").fit(  # (a ranker of free searches)
            X, y, qid=qid, feature_names=[one.feature_names[j] for j in free])
        for path in (whole, sharded):
            add_model(path, "ranker", ranker)
        one = SearchEngine.open(whole)
        engine = SearchEngine(ShardedSearcher(open_index(sharded), timeout=timeout))
        names = cluster.node_names()
        report["shards"] = {s["shard"]: names.get(s["node"], "?")
                            for s in engine.searcher.shard_stats()}
        log(f"shards on nodes: {report['shards']}")
        on_node1 = [s for s, node in report["shards"].items() if node == "node1"]
        if not on_node1:
            raise RuntimeError(f"no shard was placed on node 1: {report['shards']}")
        same = sum(engine.search(t, 10).doc_ids == one.search(t, 10).doc_ids for t in texts)
        report["equal_before"] = f"{same}/{len(texts)}"
        # node 1 dies in the middle of a query (parsed and analysed, its candidates asked
        # of the back-end: every shard's)
        searcher = engine.searcher
        real = searcher.candidates

        def dying(*args, **kwargs):
            cluster.kill(1)
            return real(*args, **kwargs)
        searcher.candidates = dying
        try:
            engine.search(texts[0], 10)
            report["failed_query"] = None
        except ShardError as exc:
            report["failed_query"] = str(exc)
        finally:
            searcher.candidates = real
        log(f"query while node 1 died: {report['failed_query']}")
        cluster.start(1)
        engine.searcher.timeout = 120.0  # the shard's actor restarts (on some node)
        report["shards_after"] = {s["shard"]: cluster.node_names().get(s["node"], "?")
                                  for s in engine.searcher.shard_stats()}
        t0 = time.perf_counter()
        after = [engine.search(t, 10).doc_ids == one.search(t, 10).doc_ids for t in texts]
        report["recovery_seconds"] = time.perf_counter() - t0
        report["equal_after"] = f"{sum(after)}/{len(texts)}"
        log(f"after node 1 is back: {report['equal_after']} queries equal to the whole "
            f"index ({report['recovery_seconds']:.1f} s)")
        engine.close()
    return report


def _files(path) -> dict:
    """Every file under ``path``, relative path -> SHA-256."""
    from .._utils import file_sha256

    return {os.path.relpath(os.path.join(d, name), path): file_sha256(os.path.join(d, name))
            for d, _, names in os.walk(path) for name in names}


def _fit_with_node_lost(cluster, path) -> dict:
    """Fit the answers model on the sharded index at ``path`` from its shards (an actor
    per shard, dealt to the nodes in turn), node 1 killed in the middle of the fit
    (between the shards' analysis of their answers and their features): the fit's error,
    the nodes of the shards' actors, and whether every file of the index is as before."""
    from ..distributed import fitting
    from ..distributed._ray import ShardError
    from ..training import fit_family

    before = _files(path)
    real, nodes = fitting.ShardParts.map, {}

    def dying(parts, method, *args):
        if method == "features":
            names = cluster.node_names()
            nodes.update({int(name.split()[1]): names.get(node, "?")
                          for name, node in zip(parts.names, parts.nodes)})
            cluster.kill(1)
        return real(parts, method, *args)

    fitting.ShardParts.map = dying
    try:
        fit_family(path, "answers", ray=cluster.address)
        failed = None
    except ShardError as exc:
        failed = str(exc)
    finally:
        fitting.ShardParts.map = real
    return {"fit_shards": nodes, "failed_fit": failed,
            "fit_index_unchanged": _files(path) == before}


def check_node_failure(report) -> list:
    """What went wrong in a :func:`node_failure` report (empty: nothing)."""
    problems = []
    for key in ("equal_before", "equal_after"):
        same, total = report[key].split("/")
        if same != total:
            problems.append(f"{key}: only {report[key]} queries equal to the whole index")
    error = report["failed_query"] or ""
    named = [s for s, node in report["shards"].items() if node == "node1"
             and f"shard {s} of {report['n_shards']}" in error]
    if not named or "no partial result is returned" not in error:
        problems.append(f"the query during node 1's death did not fail naming a shard of "
                        f"node 1: {report['failed_query']!r}")
    error = report["failed_fit"] or ""
    named = [s for s, node in report["fit_shards"].items() if node == "node1"
             and f"failed on shard {s} (" in error]
    if not named or "the index is unchanged" not in error:
        problems.append(f"the fit during node 1's death did not fail naming a shard of node "
                        f"1: {report['failed_fit']!r}")
    if not report["fit_index_unchanged"]:
        problems.append("the fit that failed changed the index's files")
    return problems

