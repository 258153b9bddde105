"""The tests of this folder need Ray (skipped without it); its session is the
``ray_session`` fixture of tests/conftest.py."""
import os
from importlib import resources

import pytest

# A local session on the loopback interface only (read by Ray when it is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")


@pytest.fixture(scope="module")
def sharded_demo(ray_session, tmp_path_factory):
    """The demo archive indexed once unsharded (``one``) and in 2, 3 and 7 shards (``sN``)."""
    from cqa_search import build_index
    from cqa_search.distributed.build import build_sharded_index

    root = tmp_path_factory.mktemp("sharded-demo")
    archive = str(resources.files("cqa_search.data") / "demo" / "archive.jsonl")
    build_index(archive, root / "one")
    for n in (2, 3, 7):
        build_sharded_index(archive, root / f"s{n}", n)
    return root
