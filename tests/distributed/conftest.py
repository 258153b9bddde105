"""One local Ray session for all the tests of this folder (starting one takes seconds)."""
import os

import pytest

# A local session on the loopback interface only (read by Ray when it is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")


@pytest.fixture(scope="session")
def ray_session():
    from cqa_search.distributed._ray import connect

    connect()
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield
    ray.shutdown()
