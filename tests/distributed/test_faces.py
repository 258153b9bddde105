"""The faces of the engine on a sharded index, as on an unsharded one: the server's JSON API
and page, the interactive session, ``info`` and ``evaluate`` (each compared with the same
archive indexed whole)."""
import io
import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from cqa_search import SearchEngine, build_index
from cqa_search.cli.__main__ import main as cli
from cqa_search.distributed.build import build_sharded_index
from cqa_search.index.models import add_model
from cqa_search.ranking.linear import LinearRanker
from cqa_search.training import fit_family

DATA = Path(__file__).resolve().parents[1] / "data"
TOY = DATA / "toy_archive.jsonl"
QUERIES = ["renew my visa", "category:cars engine battery", '"second hand" sofa',
           "+visa -family office", "title:visa renewal", "car visa tag:family",
           "-category:Visas office", "furnture sofa", "how do I", "zzzz"]


@pytest.fixture(scope="module")
def toy(ray_session, tmp_path_factory):
    """The toy archive indexed whole ("one") and in 3 shards ("s3"), word vectors fitted
    on each (the hybrid first stage), the same ranker in both (trained on the whole one's
    features)."""
    root = tmp_path_factory.mktemp("faces")
    build_index(TOY, root / "one")
    build_sharded_index(str(TOY), root / "s3", 3)
    for name in ("one", "s3"):
        fit_family(root / name, "embeddings", dim=8, neighbours=5, min_count=1)
    one = SearchEngine.open(root / "one")
    results = [one.search(q, 6) for q in ("renew visa", "car battery", "cheap sofa", "visa")]
    X = np.vstack([r.features for r in results])
    qid = np.repeat(np.arange(len(results)), [len(r) for r in results])
    y = np.concatenate([np.arange(len(r)) < 2 for r in results]).astype(int)
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=one.feature_names)
    for name in ("one", "s3"):
        add_model(root / name, "ranker", ranker)
    return root


def _without_generation(doc):
    return {k: v for k, v in doc.items() if k != "generation"}


def test_the_json_api_and_the_page_answer_as_on_one_index(toy):
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from cqa_search.server import create_app

    with TestClient(create_app(toy / "one")) as one, TestClient(create_app(toy / "s3")) as s3:
        health = s3.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert health.json()["n_docs"] == one.get("/health").json()["n_docs"] == 12
        for path in ("/api/categories", "/api/tags", "/api/questions/t04",
                     "/api/questions/t04/similar?k=4", "/api/questions/nope",
                     "/api/complete?q=visa", "/api/complete?q=how+&k=1",
                     "/api/complete?q=c"):
            a, b = one.get(path), s3.get(path)
            assert a.status_code == b.status_code, path
            assert _without_generation(b.json()) == _without_generation(a.json()), path
        assert [t["name"] for t in s3.get("/api/tags").json()["tags"]]  # the facet is on
        hybrid = s3.get("/api/search", params={"q": "renew visa", "explain": "true"}).json()
        assert hybrid["hits"][0]["first_stage"]["a"] > 0  # both parts of the hybrid stage
        for q in QUERIES:
            for params in ({"q": q, "k": 5, "explain": "true"}, {"q": q, "category": "cars"}):
                a, b = one.get("/api/search", params=params), s3.get("/api/search",
                                                                       params=params)
                assert a.status_code == b.status_code == 200, (params, b.text)
                assert _without_generation(b.json()) == _without_generation(a.json()), params
        assert s3.get("/api/search", params={"q": "visa", "category": "Nope"}).status_code == 400
        page = s3.get("/")
        assert page.status_code == 200 and "<html" in page.text.lower()


def _session(path, script):
    from cqa_search.cli._common import Style
    from cqa_search.cli.query import _Session

    args = Namespace(k=3, category=None, answers=True, explain=True, facets=False, after=None,
                     before=None, tag=None, not_tag=None)
    out = io.StringIO()
    _Session(SearchEngine.open(path), args, Style("never"), out=out).loop(io.StringIO(script))
    return out.getvalue()


def test_the_interactive_session_is_the_same(toy):
    script = "\n".join([":k 2", "renew visa", ":show 2", ":category cars", "battery",
                        ":category Nope", "category:Shopping sofa", ":categories",
                        ":like 1", ":like t05", "furnture", ":quit"])
    out = _session(toy / "s3", script)
    assert out.startswith("12 questions indexed.")
    assert out == _session(toy / "one", script)


def test_info_evaluate_and_query_on_the_command_line(toy, tmp_path, capsys):
    def run(*argv):
        code = cli([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    code, out, _ = run("info", toy / "s3")
    assert code == 0
    assert "shards     3: shards/00000 4 questions, shards/00001 4 questions, shards/00002 4 " \
           "questions" in out
    assert "categories 3" in out and "model      ranker (ranker" in out
    code, doc, _ = run("info", toy / "s3", "--json")
    whole = json.loads(run("info", toy / "one", "--json")[1])
    doc = json.loads(doc)
    for key in ("questions", "rows", "terms", "categories", "fields"):
        assert doc[key] == whole[key], key
    outputs = []
    for name in ("one", "s3"):
        code, out, _ = run("evaluate", toy / name, "--queries", DATA / "toy_queries.jsonl",
                           "--qrels", DATA / "toy_qrels.txt", "--run-out",
                           tmp_path / f"{name}.run", "-q")
        assert code == 0
        outputs.append((out, (tmp_path / f"{name}.run").read_text()))
    assert outputs[0] == outputs[1]
    code, a, _ = run("query", toy / "one", "renew visa", "--json", "--explain")
    code, b, _ = run("query", toy / "s3", "renew visa", "--json", "--explain")
    assert code == 0 and json.loads(a) == json.loads(b)
    code, a, _ = run("query", toy / "s3", "--like", "t01", "-k", "2", "--color", "never")
    assert code == 0 and a.startswith("questions like t01:")


def test_a_sharded_server_stops_cleanly_on_sigterm(toy):
    """Issue 40: SIGTERM (what systemd and docker send) made a sharded server write Ray's C
    stack and two tracebacks into its log; now it stops as on SIGINT."""
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "cqa_search", "serve", str(toy / "s3"),
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?q=visa",
                                       timeout=10).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.communicate()[1]) from None
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    # (uvicorn ends by the signal it stopped on, as an unsharded server does)
    assert proc.returncode == -signal.SIGTERM, err
    assert "SIGTERM received" not in err and "Traceback" not in err, err
