"""Fixtures shared by the tests: our small data files, a toy archive and its index, the
real data sets next to the repository (tests that need them skip when they are absent),
and one local Ray session (tests that need it skip without Ray)."""
import os
from pathlib import Path

import pytest

from cqa_search import Archive, SearchEngine, build_index
from cqa_search.readers import read_archive

FIXTURES = Path(__file__).resolve().parent / "data"
# ../shared/data from the repository root.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TOY_ARCHIVE = FIXTURES / "toy_archive.jsonl"
# Judged queries of the toy archive (graded qrels), to train rankers on.
TOY_QUERIES, TOY_QRELS = FIXTURES / "toy_queries.jsonl", FIXTURES / "toy_qrels.txt"


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


@pytest.fixture(scope="session")
def vectors_index(tmp_path_factory) -> Path:
    """The demo archive (327 questions) indexed with word vectors: a small embeddings
    model, so that searches use the hybrid first stage (tests must not modify it)."""
    from cqa_search.data import DEMO_ARCHIVE, demo_dir
    from cqa_search.index.models import add_model
    from cqa_search.vectors import EmbeddingModel

    path = tmp_path_factory.mktemp("vectors") / "index"
    build_index(demo_dir() / DEMO_ARCHIVE, path)
    engine = SearchEngine.open(path)
    add_model(engine, "embeddings", EmbeddingModel(dim=16, neighbours=10).fit(engine.view))
    return path


@pytest.fixture
def vectors_copy(vectors_index, tmp_path) -> Path:
    """A copy of :func:`vectors_index` to change."""
    import shutil

    path = tmp_path / "vectors"
    shutil.copytree(vectors_index, path)
    return path


@pytest.fixture
def toy_judged():
    """The paths of the toy archive's judged queries and their (graded) qrels."""
    return TOY_QUERIES, TOY_QRELS


def _bm25_position_qrels(index, position) -> dict:
    """Qrels of the toy queries making the candidate at ``position`` of each one's BM25 top 10
    the relevant one (0: the retrieval order is perfect; -1: the reverse of it)."""
    from cqa_search import SearchConfig
    from cqa_search.evaluation import read_queries

    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    qrels = {}
    for query in read_queries(TOY_QUERIES):
        ranked = engine.search(query["text"], k=10).doc_ids
        qrels[query["id"]] = {d: int(i == position % len(ranked)) for i, d in enumerate(ranked)}
    return qrels


@pytest.fixture
def bm25_position_qrels():
    """:func:`_bm25_position_qrels`: ``(index, position) -> qrels``."""
    return _bm25_position_qrels


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray session, on the loopback interface only, for every test that needs
    one (starting one takes seconds); skipped without Ray."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read at import
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install "
                                            "'.[distributed]')")
    from cqa_search.distributed._ray import connect

    connect()
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield
    ray.shutdown()


def _given_run(qrels) -> dict:
    """A run of each query's judged candidates whose given order (scores n, ..., 1) puts
    the relevant ones first: candidates given with informative scores."""
    run = {}
    for qid, judged in qrels.items():
        order = sorted(judged, key=lambda d: -judged[d])  # stable: relevant first
        run[qid] = {d: float(len(order) - i) for i, d in enumerate(order)}
    return run


@pytest.fixture
def given_run():
    """:func:`_given_run`: ``qrels -> run``."""
    return _given_run


@pytest.fixture
def shown_bars(monkeypatch):
    """``shown_bars(module)`` replaces the module's ``progress_bar`` with a recorder and
    returns the list of what its bars showed, in order: ``(desc, total)`` as each is made,
    its postfix texts, the counts of its updates, and ``"closed"``."""
    shown = []

    class Bar:
        def __init__(self, enabled, desc, unit, total=None, **kwargs):
            shown.append((desc, total))

        def set_postfix_str(self, text):
            shown.append(text)

        def update(self, n=1):
            shown.append(n)

        def close(self):
            shown.append("closed")

    def record(module):
        monkeypatch.setattr(module, "progress_bar", Bar)
        return shown
    return record
