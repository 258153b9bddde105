"""One local Ray session for all the tests of this folder (starting one takes seconds)."""
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")


@pytest.fixture(scope="session")
def ray_session():
    from cqa_search.distributed._ray import connect

    connect()
    yield
    ray.shutdown()
