"""Importing Ray on first use and joining (or starting) a Ray session."""
from __future__ import annotations

import logging
import os

from ..exceptions import CQASearchError

__all__ = ["DistributedError", "ShardError", "import_ray", "connect"]

logger = logging.getLogger(__name__)

#: Object store of a local session (bytes): what crosses it is small (queries, candidate
#: lists, statistics and EM counts), and the machine is shared.
_LOCAL_OBJECT_STORE = 512 * 1024 ** 2


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


def connect(address=None):
    """Join the Ray cluster at ``address``, or start a bounded local session.

    Nothing happens when this process is already in a Ray session. Without ``address``
    (and without Ray's ``RAY_ADDRESS`` environment variable) a local session is started
    on this machine's cores, without dashboard, with a small object store, and with the
    workers' logs kept out of this process's output.

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
    ray = import_ray()
    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    options = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        options.update(num_cpus=os.cpu_count() or 1, include_dashboard=False,
                       object_store_memory=_LOCAL_OBJECT_STORE)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise DistributedError(f"cannot join the Ray cluster at {address}: {exc}") from None
    logger.info("Ray session: %s", "local" if address is None else address)
    return ray


def remote(cls, **options):
    """``ray.remote(cls)`` with ``options``, made once per class (Ray imported here)."""
    key = (cls, tuple(sorted(options.items())))
    made = _REMOTE.get(key)
    if made is None:
        made = _REMOTE[key] = import_ray().remote(**options)(cls) if options else \
            import_ray().remote(cls)
    return made


_REMOTE = {}
