"""Sharded indexes on Ray: the build, and fan-out search equal to one unsharded index."""
import json
import os
import time
from importlib import resources

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")

from cqa_search import SearchConfig, SearchEngine, build_index  # noqa: E402
from cqa_search.cli.__main__ import main as cli  # noqa: E402
from cqa_search.distributed._ray import ShardError  # noqa: E402
from cqa_search.distributed.build import build_sharded_index  # noqa: E402
from cqa_search.distributed.search import ShardedSearcher  # noqa: E402
from cqa_search.exceptions import QueryError  # noqa: E402
from cqa_search.features import GIVEN_FEATURES  # noqa: E402
from cqa_search.index.models import add_model  # noqa: E402
from cqa_search.index.store import open_index  # noqa: E402
from cqa_search.ranking.linear import LinearRanker  # noqa: E402

DEMO = resources.files("cqa_search.data") / "demo"
SHARDS = (1, 2, 3, 7)
QUERIES = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines()]
SYNTAX = ["category:Health head feels heavy", "computer +slow -virus", '"time zone" sleep',
          "visa OR passport", "title:laptop battery", "-the car engine noise", "NOT cheap sofa",
          "tag:dogs barking", "pet food -tag:cats"]


@pytest.fixture(scope="module")
def indexes(ray_session, tmp_path_factory):
    """The demo archive indexed once unsharded and once per shard count, with the same
    rankers stored in each: ``ranker`` on every feature (it reads the given-run ones:
    reranks of candidates given with scores) and ``ranker-search`` without the given-run
    features (free searches)."""
    root = tmp_path_factory.mktemp("sharded")
    archive = str(DEMO / "archive.jsonl")
    build_index(archive, root / "one")
    for n in SHARDS:
        build_sharded_index(archive, root / f"s{n}", n)
    one = SearchEngine.open(root / "one", config=SearchConfig(ranker=None))
    rows = [(q["id"], one.search(q["text"], 20)) for q in QUERIES[:30]]
    X = np.vstack([r.features for _, r in rows])
    qid = np.concatenate([[i] * len(r) for i, r in rows])
    y = np.concatenate([(np.arange(len(r)) < 3).astype(int) for _, r in rows])
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=one.feature_names)
    free = [j for j, f in enumerate(one.feature_names) if f not in GIVEN_FEATURES]
    search = LinearRanker("ranksvm").fit(X[:, free], y, qid=qid,
                                         feature_names=[one.feature_names[j] for j in free])
    for name in ["one", *(f"s{n}" for n in SHARDS)]:
        add_model(root / name, "ranker-search", search)
        add_model(root / name, "ranker", ranker)
    return root


def _same(a, b):
    assert a.doc_ids == b.doc_ids
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-12, atol=1e-12)
    assert a.feature_names == b.feature_names
    np.testing.assert_allclose(a.features, b.features, rtol=1e-12, atol=1e-12)
    assert a.field == b.field and a.query_terms == b.query_terms


def test_shards_share_the_unsharded_vocabulary_and_statistics(indexes):
    one = open_index(indexes / "one")
    for n in SHARDS:
        top = open_index(indexes / f"s{n}")
        assert top.json("vocab.json") == one.json("vocab.json")
        assert top.json("categories.json") == one.json("categories.json")
        assert top.json("surface.json") == one.json("surface.json")
        assert len(top.manifest["shards"]) == n
        assert sum(s["n_docs"] for s in top.manifest["shards"]) == 327
        for field in ("question", "answers"):
            whole = SearchEngine.open(indexes / "one").index[field].stats
            df = top.array(f"stats/{field}/df.npy")
            np.testing.assert_array_equal(df, whole.df)
            np.testing.assert_array_equal(top.array(f"stats/{field}/term_freq.npy"),
                                          whole.term_freq)
        assert top.manifest["stats"]["fields"] == one.manifest["stats"]["fields"]
        # each shard is a normal index of its contiguous part of the archive, in order
        ids = []
        for shard in top.manifest["shards"]:
            part = SearchEngine.open(os.path.join(top.root, shard["dir"]))
            assert len(part.index.vocab) == len(one.json("vocab.json"))
            ids += part.archive.doc_ids
        assert ids == list(SearchEngine.open(indexes / "one").archive.doc_ids)


@pytest.fixture(scope="module")
def engines(indexes):
    """The unsharded engine ("one") and two sharded engines per shard count: ``n``, its
    shards in Ray actors (they take a second each to start: opened once for the module),
    and ``(n, "here")``, its shards read in this process."""
    return {"one": SearchEngine.open(indexes / "one"),
            **{n: SearchEngine.open(indexes / f"s{n}", ray=True) for n in SHARDS},
            **{(n, "here"): SearchEngine.open(indexes / f"s{n}", ray=False) for n in SHARDS}}


WHERE = pytest.mark.parametrize("where", ["ray", "here"])


def _sharded(engines, n, where):
    return engines[n] if where == "ray" else engines[(n, where)]


@WHERE
@pytest.mark.parametrize("n", SHARDS)
def test_fan_out_search_equals_one_index(engines, n, where):
    one, sharded = engines["one"], _sharded(engines, n, where)
    assert isinstance(sharded.searcher, ShardedSearcher) and sharded.ranker is not None
    assert sharded.searcher.ray is (where == "ray") and sharded.searcher.forks is (
        where == "here")
    assert sharded.ranker_name == one.ranker_name == "ranker-search"
    assert sharded.given_ranker_name == one.given_ranker_name == "ranker"
    assert sharded.n_docs == one.n_docs and list(sharded.categories) == list(one.categories)
    for q in QUERIES[::2]:
        _same(sharded.search(q["text"], 10), one.search(q["text"], 10))
        _same(sharded.search(q["text"], 5, category=q["category"]),
              one.search(q["text"], 5, category=q["category"]))
        _same(sharded.rerank(q["text"], k=30, category=q["category"]),
              one.rerank(q["text"], k=30, category=q["category"]))
    for text in SYNTAX:
        _same(sharded.search(text, 10), one.search(text, 10))
    for q in QUERIES[:4]:  # more like this: a question of whichever shard
        doc_id = one.search(q["text"], 1).doc_ids[0]
        _same(sharded.similar(doc_id, 5), one.similar(doc_id, 5))
    assert sharded.tag_counts() == one.tag_counts()
    # without the ranker, every matching question (k=None), and the answers fallback
    plain = SearchConfig(ranker=None)
    s2, o2 = sharded.with_config(plain), one.with_config(plain)
    for q in QUERIES[:10]:
        _same(s2.search(q["text"], None), o2.search(q["text"], None))
    _same(sharded.search("passport photos medical certificate sponsor"),
          one.search("passport photos medical certificate sponsor"))
    for hit_s, hit_o in zip(sharded.search(QUERIES[0]["text"]), one.search(QUERIES[0]["text"])):
        assert hit_s.question == hit_o.question and hit_s.features == hit_o.features


@WHERE
@pytest.mark.parametrize("n", (2, 7))
def test_bm25f_on_shards_equals_one_index(engines, n, where):
    """BM25F's combined field in each shard scores with the whole index's statistics."""
    from cqa_search.retrieval import BM25F

    config = SearchConfig(retrieval=BM25F(answers=0.5), features=(BM25F(),), ranker=None,
                          hybrid=None)
    one, sharded = engines["one"].with_config(config), _sharded(engines, n, where).with_config(
        config)
    for q in QUERIES[:8]:
        _same(sharded.search(q["text"], 10), one.search(q["text"], 10))
    _same(sharded.search("title:laptop^2 battery", None), one.search("title:laptop^2 battery",
                                                                      None))


@WHERE
@pytest.mark.parametrize("n", (3, 7))
def test_rerank_and_batch_search_equal_one_index(engines, n, where):
    one, sharded = engines["one"], _sharded(engines, n, where)
    ids = list(one.search(QUERIES[1]["text"], 12).doc_ids)[::-1]
    given = np.linspace(1, 0, len(ids))
    _same(sharded.rerank(QUERIES[1]["text"], ids, scores=given),
          one.rerank(QUERIES[1]["text"], ids, scores=given))
    texts = [q["text"] for q in QUERIES[:8]]
    a, b = sharded.batch_search(texts, k=7), one.batch_search(texts, k=7)
    for qid in a:
        _same(a[qid], b[qid])
    stats = sharded.searcher.shard_stats()
    assert [s["shard"] for s in stats] == sharded.searcher.live_shards
    assert sum(s["n_docs"] for s in stats) == 327
    assert all(s["work"]["candidates"]["calls"] > 0 and s["rss_bytes"] > 0 for s in stats)
    with pytest.raises(QueryError, match="unknown question id 'nope'"):
        sharded.rerank("visa", ["nope"])
    with pytest.raises(QueryError, match="unknown category"):
        sharded.search("visa", category="Nope")


def test_more_shards_than_questions_leaves_empty_shards(ray_session, tmp_path, toy_archive):
    build_index(list(toy_archive)[3:6], tmp_path / "one")
    build_sharded_index(list(toy_archive)[3:6], tmp_path / "s7", 7)
    shards = open_index(tmp_path / "s7").manifest["shards"]
    assert [s["n_docs"] for s in shards] == [0, 0, 1, 0, 1, 0, 1]
    assert [s["dir"] for s in shards] == [None, None, "shards/00002", None, "shards/00004",
                                          None, "shards/00006"]
    one, sharded = SearchEngine.open(tmp_path / "one"), SearchEngine.open(tmp_path / "s7")
    for text in ("sofa", "category:Shopping sofa", "cheap +sofa", "zzz", "visa"):
        _same(sharded.search(text, 3), one.search(text, 3))


def test_the_build_shows_the_shards_work_after_the_reading(ray_session, tmp_path,
                                                          toy_archive, shown_bars):
    """After the reading bar, the shards' steps on Ray (starting it, analysing, writing)
    have a bar of their own: it was seconds (minutes at scale) of a still screen."""
    from cqa_search.distributed import build as build_module

    shown = shown_bars(build_module)
    build_sharded_index(list(toy_archive)[:4], tmp_path / "s2", 2, progress=True)
    start = shown.index(("building shards", 4))
    assert shown[start:] == [("building shards", 4), "starting Ray", "analysing", 1, 1,
                             "writing", 2, "closed"]


def test_a_killed_shard_is_restarted_or_the_search_fails(engines, indexes):
    one = engines["one"]
    sharded = SearchEngine.open(indexes / "s2")
    text = QUERIES[2]["text"]
    expected = one.search(text)
    # killed between the two rounds of a query: Ray restarts it and retries the call
    real = sharded.searcher.features

    def kill_then_features(q, rows, context):
        ray.kill(sharded.searcher.actors[1], no_restart=False)
        return real(q, rows, context)
    sharded.searcher.features = kill_then_features
    _same(sharded.search(text), expected)
    # killed for good mid-query: the search fails, naming the shard
    def kill_for_good(q, rows, context):
        actor = sharded.searcher.actors[1]
        ray.kill(actor, no_restart=True)
        # ray.kill only asks: a call sent at once can still be served (seen under load)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                ray.get(actor.row_stats.remote(), timeout=10)
            except ray.exceptions.RayActorError:
                break
            time.sleep(0.05)
        return real(q, rows, context)
    sharded.searcher.features = kill_for_good
    with pytest.raises(ShardError, match=r"shard 1 of 2 \(shards/00001\) failed while "
                                         "computing features.*no partial result"):
        sharded.search(text)
    with pytest.raises(ShardError, match="shard 1 of 2"):
        sharded.search("visa")


def test_cli_builds_and_queries_a_sharded_index(indexes, tmp_path, capsys):
    archive = str(DEMO / "archive.jsonl")
    assert cli(["build-index", archive, "-o", str(tmp_path / "s2"), "--shards", "2", "-q"]) == 0
    out = capsys.readouterr().out
    assert "questions  327" in out
    assert cli(["build-index", archive, "-o", str(tmp_path / "one"), "-q"]) == 0
    capsys.readouterr()
    assert cli(["query", str(tmp_path / "s2"), "laptop battery", "-k", "3"]) == 0
    sharded_out = capsys.readouterr().out
    assert cli(["query", str(tmp_path / "one"), "laptop battery", "-k", "3"]) == 0
    assert capsys.readouterr().out == sharded_out
    assert cli(["build-index", archive, "-o", str(tmp_path / "x"), "--ray", "auto"]) == 1
    assert "--ray needs --shards" in capsys.readouterr().err
    # info lists the shards; live changes work on both, and answer alike
    assert cli(["info", str(tmp_path / "s2")]) == 0
    assert "shards     2: shards/00000 163 questions, shards/00001 164 questions" in \
        capsys.readouterr().out
    new = tmp_path / "new.jsonl"
    new.write_text('{"id": "z1", "title": "laptop battery swollen", "category": "Computers '
                   '& Internet", "answers": ["replace it now"]}\n')
    for index in ("s2", "one"):
        path = str(tmp_path / index)
        assert cli(["add", path, str(new)]) == 0
        assert cli(["delete", path, "computers-007"]) == 0
        assert cli(["compact", path]) == 0
    out = capsys.readouterr().out
    assert "shards     shards/00000 +1" in out and "questions  327 in 2 shards" in out
    assert cli(["delete", str(tmp_path / "s2"), "nope"]) == 1
    assert "the index has no question 'nope'" in capsys.readouterr().err
    assert cli(["query", str(tmp_path / "s2"), "laptop battery", "-k", "3"]) == 0
    sharded_out = capsys.readouterr().out
    assert cli(["query", str(tmp_path / "one"), "laptop battery", "-k", "3"]) == 0
    assert capsys.readouterr().out == sharded_out and "z1" in sharded_out


def test_a_one_shot_command_on_a_local_sharded_index_starts_no_ray(indexes):
    """`query` and `evaluate` on a sharded index of this machine read its shards in the
    command's process: no Ray session (its start took 21-28 s), the same output as one
    index's. A process of its own: Ray is not even imported."""
    import subprocess
    import sys

    code = ("import sys; from cqa_search.cli.__main__ import main; rc = main(sys.argv[1:]); "
            "print('ray imported' if 'ray' in sys.modules else 'no ray', file=sys.stderr); "
            "sys.exit(rc)")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    commands = [["query", "{index}", "laptop battery", "-k", "5", "--explain"],
                ["evaluate", "{index}", "--queries", str(DEMO / "queries.jsonl"), "--qrels",
                 str(DEMO / "qrels.txt"), "--metrics", "map", "p@5"]]
    for argv in commands:
        out = {}
        for name in ("one", "s3"):
            proc = subprocess.run([sys.executable, "-c", code] + [
                a.format(index=indexes / name) for a in argv], capture_output=True, text=True,
                timeout=300, env=env)
            assert proc.returncode == 0, proc.stderr
            assert proc.stderr.splitlines()[-1] == "no ray", proc.stderr
            out[name] = proc.stdout
        assert out["s3"] == out["one"].replace(str(indexes / "one"), str(indexes / "s3"))
        assert out["one"].strip()


def test_the_raylets_notices_never_reach_standard_output(ray_session, capsys, caplog):
    """Ray's driver prints its raylet's notices on stdout (a loaded machine's "24 PYTHON
    worker processes have been started ..." landed in a sharded query's results): they are
    the ray logger's warnings, shown with -v; a worker's own lines still pass."""
    import logging

    from ray._private import worker

    caplog.set_level(logging.WARNING, logger="ray")
    worker.print_to_stdstream({"lines": ["WARNING: 24 PYTHON worker processes have been "
                                         "started"], "pid": "raylet", "is_err": False},
                              ignore_prefix=False)
    assert capsys.readouterr().out == ""
    assert [r.getMessage() for r in caplog.records if r.name == "ray"] == [
        "(raylet) WARNING: 24 PYTHON worker processes have been started"]
    worker.print_to_stdstream({"lines": ["a worker's line"], "pid": 1234, "is_err": False,
                               "ip": "127.0.0.1"}, ignore_prefix=True)
    assert "a worker's line" in capsys.readouterr().out


def test_ray_says_nothing_on_the_command_line_without_v(tmp_path):
    """A sharded command's stderr is the command's own: Ray's notices (its token
    authentication, ...) only with -v. A process of its own: it starts its Ray session."""
    import subprocess
    import sys

    archive = str(DEMO / "archive.jsonl")
    proc = subprocess.run([sys.executable, "-m", "cqa_search", "build-index", archive, "-o",
                           str(tmp_path / "s2"), "--shards", "2", "-q"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
