"""Importing Ray on first use and joining (or starting) a Ray session."""
from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading

from ..exceptions import CQASearchError

__all__ = ["DistributedError", "ShardError", "import_ray", "connect", "runs_on_ray",
           "alive_nodes", "on_node", "gather", "run_tasks"]

logger = logging.getLogger(__name__)

#: Object store of a local session (bytes): it holds the shards' postings between the two
#: phases of a build (about the size of the index; Ray spills the excess to disk), and
#: little else (queries, candidate lists, statistics, EM counts). Bounded: the machine may
#: be shared.
_LOCAL_OBJECT_STORE = 2 * 1024 ** 3
# Ray's switch for single-machine sessions (named for the platforms where it is the default).
_LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class DistributedError(CQASearchError):
    """Ray is missing, or a Ray session cannot be joined."""


class ShardError(CQASearchError):
    """A shard did not answer: the search (or fit) fails rather than miss its part."""


def import_ray():
    """The ``ray`` module, or DistributedError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise DistributedError("sharded indexes and distributed fits need Ray: "
                               "pip install 'cqa-search[distributed]'") from None
    return ray


def runs_on_ray(ray=None) -> bool:
    """Whether a sharded index opened with ``ray`` is searched by Ray actors.

    ``True`` or a cluster's address: yes. ``False``: no, its shards are read in this
    process (no Ray session is started: a one-shot command answers as fast as on one
    index). ``None`` (the default): yes when this process is in a Ray session already
    (a server, a Ray program) or the ``RAY_ADDRESS`` environment variable names a cluster,
    else no. Ray is not imported to decide.

    Examples
    --------
    >>> runs_on_ray(False), runs_on_ray(True), runs_on_ray("10.0.0.1:6379")
    (False, True, True)
    """
    if ray is None:
        module = sys.modules.get("ray")
        in_session = module is not None and getattr(module, "is_initialized", bool)()
        return bool(in_session or os.environ.get("RAY_ADDRESS"))
    return ray is not False


def connect(address=None):
    """Join the Ray cluster at ``address``, or start a bounded local session.

    Nothing happens when this process is already in a Ray session. Without ``address``
    (and without Ray's ``RAY_ADDRESS`` environment variable) a local session is started
    on this machine's cores, on the loopback interface, without dashboard, with a bounded
    object store, and with the workers' logs kept out of this process's output (and Ray's
    own notices too, unless ``cqa_search`` logs at the INFO level: the command line's -v).

    Parameters
    ----------
    address : str, optional
        ``HOST:PORT`` of a running cluster's head (``ray start --head``), or ``"auto"``.

    Returns
    -------
    module
        ``ray``.

    Raises
    ------
    DistributedError
        Ray is not installed, or the cluster cannot be joined.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None and "ray" not in sys.modules:
        # A local session on the loopback interface only (Ray otherwise binds the
        # machine's network address): read by Ray when imported, and by its workers.
        os.environ.setdefault(_LOOPBACK_ONLY, "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if not logger.isEnabledFor(logging.INFO):
        # Ray's own notices (token authentication, ...) are not this program's output;
        # they show with cqa_search's progress details (the command line's -v)
        logging.getLogger("ray").setLevel(logging.ERROR)
    options = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        options.update(num_cpus=os.cpu_count() or 1, include_dashboard=False,
                       object_store_memory=_LOCAL_OBJECT_STORE)
    if address is not None:
        _reachable(address)
    stop = _own_sigterm_handler()
    try:  # "local": a new session even when `ray start` left one running on this machine
        ray.init(address=address or "local", **options)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = "start a local Ray session" if address is None else \
            f"join the Ray cluster at {address}"
        raise DistributedError(f"cannot {where}: {exc}") from None
    finally:
        if stop is not None:
            signal.signal(signal.SIGTERM, stop)
    _route_notices(sys.modules.get("ray._private.worker"))
    logger.info("Ray session: %s", "local" if address is None else address)
    return ray


def _own_sigterm_handler():
    """The SIGTERM handler this process set itself (a server's graceful stop), which
    ``ray.init`` replaces, or None. Ray's handler exits from wherever the process is (a
    server: two tracebacks from its event loop) and its core worker's dumps a C stack
    (``*** SIGTERM received ...``); setting the process's own back after ``ray.init``
    replaces both. Without one (a one-shot command), Ray's stays: it ends the process
    with Ray's clean-up."""
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGTERM)
    return handler if callable(handler) else None


def _route_notices(worker_module) -> None:
    """Send the notices the Ray driver prints on standard output for its raylet (e.g.
    "N worker processes have been started ... maximum expected startup concurrency" on a
    loaded machine) to the ``ray`` logger instead: on stdout they land inside a command's
    results (``query --json``); as log records they show with ``-v`` only, like Ray's other
    notices. Ray's function is looked up when it prints: replaced here once, if present."""
    original = getattr(worker_module, "print_to_stdstream", None)
    if original is None or getattr(original, "routed_by_cqa_search", False):
        return

    def routed(data, *args, **kwargs):
        if isinstance(data, dict) and data.get("pid") == "raylet":
            for line in data.get("lines", ()):
                logging.getLogger("ray").warning("(raylet) %s", line)
            return None
        return original(data, *args, **kwargs)

    routed.routed_by_cqa_search = True
    worker_module.print_to_stdstream = routed


def _reachable(address, timeout=5.0) -> None:
    """DistributedError unless something listens at ``HOST:PORT`` (Ray itself waits for
    minutes, deaf to Ctrl-C, for a head that is not there)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or address.startswith(("ray://", "auto")):
        return  # "auto", a client URL: Ray's own checks
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                 timeout=timeout).close()
    except OSError as exc:
        raise DistributedError(f"cannot join the Ray cluster at {address}: "
                               f"{exc.strerror or exc} (start its head with `ray start "
                               "--head`)") from None


def alive_nodes() -> list:
    """The ids of the cluster's nodes alive, sorted: the shards' actors are dealt to them
    in turn (each node's share of the shards, so of their memory, known in advance)."""
    return sorted(n["NodeID"] for n in connect().nodes() if n["Alive"])


def on_node(node) -> dict:
    """The options that start an actor on ``node`` (a node id), and nowhere else."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}


def gather(refs, what, names=None, change="the fit"):
    """``ray.get(refs)``, or ShardError naming the task that failed (``names``: what each
    ref is the part of, e.g. ``"shard 3 (shards/00003)"``; ``change``: what stopped)."""
    ray = connect()
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as exc:
        where = ""
        for ref, name in zip(refs, names or ()):
            try:
                ray.get(ref)
            except ray.exceptions.RayError as failed:
                where, exc = f" on {name}", failed
                break
        cause = getattr(exc, "cause", None)  # a task's own error, not Ray's wrapper
        cause = cause if isinstance(cause, Exception) else exc
        text = str(cause).splitlines()[0] if str(cause) else ""
        raise ShardError(f"{what} failed{where} ({type(cause).__name__}: {text}); {change} "
                         "stopped and the index is unchanged") from None


def run_tasks(function, calls, names, what, change) -> list:
    """``function(*args)`` for each ``args`` of ``calls`` as Ray tasks, dealt to the
    cluster's nodes in turn (one CPU each), their results in order; ShardError naming the
    one that failed (``names``: what each call works on; ``change``: what stops then)."""
    task = remote(function, max_retries=0)
    nodes = alive_nodes()
    return gather([task.options(**on_node(nodes[k % len(nodes)])).remote(*args)
                   for k, args in enumerate(calls)], what, names, change)


def remote(cls, **options):
    """``ray.remote(cls)`` with ``options``, made once per class (Ray imported here)."""
    key = (cls, tuple(sorted(options.items())))
    made = _REMOTE.get(key)
    if made is None:
        made = _REMOTE[key] = import_ray().remote(**options)(cls) if options else \
            import_ray().remote(cls)
    return made


_REMOTE = {}
