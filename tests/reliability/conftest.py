"""The demo index with a model of every family and a ranker, built once for the loops."""
import pytest

from cqa_search.testing import harness


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory):
    """Built by the command line (never modified: the loops work on copies)."""
    return harness.make_index(tmp_path_factory.mktemp("demo") / "index")
