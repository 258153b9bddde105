"""Fixtures shared by the tests: our small data files, a toy archive and its index, and the
real data sets next to the repository (tests that need them skip when they are absent)."""
from pathlib import Path

import pytest

from cqa_search import Archive, SearchEngine, build_index
from cqa_search.readers import read_archive

FIXTURES = Path(__file__).resolve().parent / "data"
# ../shared/data from the repository root.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TOY_ARCHIVE = FIXTURES / "toy_archive.jsonl"


@pytest.fixture
def fixtures() -> Path:
    """tests/data (the small fixtures written for these tests)."""
    return FIXTURES


def _locate(relative) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"real data not available: {path}")
    return path


@pytest.fixture
def shared_data():
    """A function mapping a path relative to ../shared/data to a Path, skipping when absent."""
    return _locate


@pytest.fixture(scope="session")
def shared_data_session():
    """:func:`shared_data` for session- and module-scoped fixtures."""
    return _locate


@pytest.fixture
def toy_archive() -> Archive:
    return read_archive(TOY_ARCHIVE)


@pytest.fixture(scope="session")
def toy_index(tmp_path_factory) -> Path:
    """The toy archive indexed once per session (tests must not modify it)."""
    path = tmp_path_factory.mktemp("toy") / "index"
    build_index(TOY_ARCHIVE, path)
    return path


@pytest.fixture
def toy_engine(toy_index) -> SearchEngine:
    return SearchEngine.open(toy_index)
