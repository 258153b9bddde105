"""Every model family on a sharded index: fitted from the shards (no unsharded copy), its rows
split with them, and the full pipeline (every family's features, the hybrid first stage
over the word vectors, a ranker over every feature, the answers chosen) equal to that of
one unsharded index of the same archive."""
import dataclasses
import json
import os
import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from cqa_search import Question, SearchEngine, add_questions, build_index, compact, \
    delete_questions
from cqa_search.distributed.build import build_sharded_index
from cqa_search.exceptions import ParameterError
from cqa_search.factorization.topics import TopicModel
from cqa_search.features import GIVEN_FEATURES
from cqa_search.index.models import add_model, load_models, remove_model
from cqa_search.index.sharding import read_shards, rows_of, shard_models
from cqa_search.index.store import open_index
from cqa_search.presentation import Presenter
from cqa_search.ranking.linear import LinearRanker
from cqa_search.searcher import SearchConfig
from cqa_search.training import fit_family

DEMO = resources.files("cqa_search.data") / "demo"
TOY = Path(__file__).resolve().parents[1] / "data" / "toy_archive.jsonl"
SHARDS = (2, 3, 7)
#: Small fits of every family (the order matters: multiview translates with the stored
#: translation model). The word vectors' inverted file is made above 100 questions and
#: reads all its lists (as the exact search does: a shard of fewer questions searches
#: them exactly).
FAMILIES = [("translation", {"max_iter": 3}),
            ("topics", {"n_shared": 4, "n_category": 2, "max_iter": 8, "tol": 0}),
            ("multiview", {"n_components": 6, "max_iter": 6}),
            ("answers", {}),
            ("embeddings", {"dim": 8, "neighbours": 5, "exact_limit": 100, "n_lists": 4,
                            "n_probe": 4})]
QUERIES = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines()]
pytestmark = pytest.mark.filterwarnings("ignore:.*max_iter")  # the small fits stop early


def fitted(path, ranker=None):
    """Fit every family on the index at ``path`` (and store ``ranker``)."""
    for family, params in FAMILIES:
        fit_family(path, family, **params)
    if ranker is not None:
        add_model(path, "ranker", ranker)
    return path


@pytest.fixture(scope="module")
def demo(ray_session, tmp_path_factory):
    """The demo archive whole and in 2, 3 and 7 shards, every family fitted on each, and
    one ranker over every feature of free searches (trained on the whole index's) stored
    in each."""
    root = tmp_path_factory.mktemp("models")
    archive = str(DEMO / "archive.jsonl")
    build_index(archive, root / "one")
    fitted(root / "one")
    one = SearchEngine.open(root / "one", config=SearchConfig(ranker=None))
    results = [one.search(q["text"], 15) for q in QUERIES[:25]]
    free = [j for j, f in enumerate(one.feature_names) if f not in GIVEN_FEATURES]
    X = np.vstack([r.features for r in results])[:, free]
    qid = np.repeat(np.arange(len(results)), [len(r) for r in results])
    y = np.concatenate([np.arange(len(r)) < 3 for r in results]).astype(int)
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid,
                                         feature_names=[one.feature_names[j] for j in free])
    add_model(root / "one", "ranker", ranker)
    for n in SHARDS:
        build_sharded_index(archive, root / f"s{n}", n)
        fitted(root / f"s{n}", ranker)
    return root


def whole_state(path, name):
    """The state arrays of model ``name`` of a sharded index, its rows gathered from the
    shards in order."""
    top = open_index(path)
    model = load_models(top)[name]
    rows = getattr(model, "row_arrays", ())
    meta, arrays = model.state()
    parts = [shard_models(top, s)[name].state()[1] for s, entry in
             enumerate(read_shards(top)) if entry["dir"] is not None]
    return meta, {k: np.concatenate([p[k] for p in parts]) if k in rows else v
                  for k, v in arrays.items()}


def same_split(one, path, name):
    """Each shard of the sharded index at ``path`` holds model ``name`` with its own rows
    of the model ``one`` (fitted on the whole archive): the arrays of
    :func:`rows_of` those rows, the shared ones equal."""
    top = open_index(path)
    start = 0
    for s, entry in enumerate(read_shards(top)):
        stop = start + entry["n_docs"]
        if entry["dir"] is None:
            continue
        expected = rows_of(one, start, stop)[1]
        got = shard_models(top, s)[name].state()[1]
        assert sorted(got) == sorted(expected), name
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name} {key} shard {s}")
        start = stop


def same_results(a, b):
    assert a.doc_ids == b.doc_ids
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-9, atol=1e-9)
    assert a.feature_names == b.feature_names
    np.testing.assert_allclose(a.features, b.features, rtol=1e-9, atol=1e-9)
    assert (a.first_stage is None) == (b.first_stage is None)
    if a.first_stage is not None:  # the hybrid first stage's parts of the hits
        for part in ("term", "cosine"):
            np.testing.assert_allclose(getattr(a.first_stage, part),
                                       getattr(b.first_stage, part), rtol=1e-9, atol=1e-9)
        assert a.first_stage.term_max == pytest.approx(b.first_stage.term_max, rel=1e-9)


@pytest.mark.parametrize("n", SHARDS)
def test_fits_from_the_shards_equal_the_unsharded_fits(demo, n):
    one = load_models(open_index(demo / "one"))
    for name, model in one.items():
        if name == "ranker":
            continue
        same_split(model, demo / f"s{n}", name)
    # the rows are the shards': each shard's model has as many as the shard has questions
    top = open_index(demo / f"s{n}")
    for s, entry in enumerate(read_shards(top)):
        if entry["dir"] is not None:
            models = shard_models(top, s)
            assert len(models["topics-gnmfnc"].doc_topics_) == entry["n_docs"]
            assert len(models["answers"].choice_) == entry["n_docs"]
            assert len(models["multiview"].doc_factors_[1]) == entry["n_docs"]
            assert len(models["embeddings"].doc_vectors_) == entry["n_docs"]
            assert len(models["embeddings"].doc_list_) == entry["n_docs"]  # its lists
    # the top level keeps the model without its rows
    assert len(load_models(top)["topics-gnmfnc"].doc_topics_) == 0


@pytest.mark.parametrize("n", SHARDS)
def test_the_full_pipeline_equals_one_index(demo, n):
    one, sharded = SearchEngine.open(demo / "one"), SearchEngine.open(demo / f"s{n}")
    assert sharded.ranker is not None and sharded.feature_names == one.feature_names
    assert {"topic_gnmfnc", "mv_ibm1", "ptrans_pt", "emb_sif", "softcos_title",
            "field_title_bm25", "first_stage"} <= set(one.feature_names)
    assert sharded.hybrid_weight == one.hybrid_weight > 0  # the hybrid first stage
    show_one, show_sharded = Presenter(one), Presenter(sharded)
    for q in QUERIES[::3]:
        a, b = one.search(q["text"], 10), sharded.search(q["text"], 10)
        same_results(b, a)
        assert [show_sharded.answer(h) for h in b] == [show_one.answer(h) for h in a]
        same_results(sharded.search(q["text"], 5, category=q["category"]),
                     one.search(q["text"], 5, category=q["category"]))
    ids = list(one.search(QUERIES[1]["text"], 12).doc_ids)[::-1]
    same_results(sharded.rerank(QUERIES[1]["text"], ids, scores=np.linspace(1, 0, 12)),
                 one.rerank(QUERIES[1]["text"], ids, scores=np.linspace(1, 0, 12)))
    same_results(sharded.similar(ids[0], 5), one.similar(ids[0], 5))
    # the question vectors find what shares no word with the query; a given run reranked
    text = "vegetables eaten by animals at night"
    same_results(sharded.search(text, 10), one.search(text, 10))
    same_results(sharded.rerank(text, ids, scores=np.arange(12.0)),
                 one.rerank(text, ids, scores=np.arange(12.0)))
    for a in (None, 0.3):  # the term model alone, and another weight
        config = dataclasses.replace(one.config, hybrid=a)
        same_results(sharded.with_config(config).search(QUERIES[2]["text"], 10),
                     one.with_config(config).search(QUERIES[2]["text"], 10))
    sharded.close()


def test_fits_on_the_toy_fixture_and_a_model_stored_from_elsewhere(ray_session, tmp_path):
    """The toy archive (tests/data) in 3 shards: the families fitted from the shards equal
    the unsharded fits; a model fitted on an unsharded index of the same archive is split
    when stored; removed, it leaves the shards too; rows that are not the index's are
    refused."""
    build_index(TOY, tmp_path / "one")
    build_sharded_index(str(TOY), tmp_path / "s3", 3)
    for family, params in FAMILIES:
        a = fit_family(tmp_path / "one", family, **params)
        b = fit_family(tmp_path / "s3", family, **params)
        assert a.name == b.name
        if hasattr(a.model, "select_rows"):
            same_split(a.model, tmp_path / "s3", b.name)
        else:
            for key, value in a.model.state()[1].items():
                np.testing.assert_allclose(b.model.state()[1][key], value, rtol=1e-9,
                                           atol=1e-12, err_msg=f"{family} {key}")
    view = SearchEngine.open(tmp_path / "one").view
    other = TopicModel("nmf", n_shared=2, n_category=1, max_iter=5, tol=0,
                       feature_name="topic_other").fit(view)
    add_model(tmp_path / "s3", "other", other)
    np.testing.assert_array_equal(whole_state(tmp_path / "s3", "other")[1]["doc_topics"],
                                  other.doc_topics_)
    add_model(tmp_path / "one", "other", other)
    one, sharded = SearchEngine.open(tmp_path / "one"), SearchEngine.open(tmp_path / "s3")
    for text in ("renew visa", "cheap sofa", "car engine battery"):
        same_results(sharded.search(text, 5), one.search(text, 5))
    # a shard opened alone is an index of its part, with its rows of the models
    top = open_index(tmp_path / "s3")
    part = SearchEngine.open(Path(top.root) / read_shards(top)[1]["dir"])
    assert len(part.models["other"].doc_topics_) == part.n_docs == 4
    remove_model(tmp_path / "s3", "other")
    top = open_index(tmp_path / "s3")
    assert "other" not in load_models(top)
    assert all("other" not in shard_models(top, s) for s in range(3))
    small = TopicModel("nmf", n_shared=2, n_category=1, max_iter=5, tol=0).fit(view)
    small.doc_topics_, small.doc_group_ = small.doc_topics_[:5], small.doc_group_[:5]
    with pytest.raises(ParameterError, match="has 5 rows of questions but .* has 12: fit it "
                                             "again"):
        add_model(tmp_path / "s3", "small", small)


#: Questions added to the demo archive (one replaces an archived question, with new
#: answers and no marked best answer), and those deleted afterwards.
NEW = [Question("new-1", "Sore knees after running on concrete",
                "My knees hurt after every run on the pavement. Should I change shoes?",
                category="Sports & Fitness", tags=("running", "knees"),
                answers=("Try softer ground and running shoes with more cushioning.",
                         "thanks, same here")),
       Question("new-2", "Quokka-proof fence for a vegetable garden",
                "Something eats my lettuce at night; which fence keeps small animals out?",
                category="Home & Garden", answers=("A buried wire mesh fence.",)),
       Question("new-3", "Car battery flat every morning",
                "The battery of my car is flat every morning, even when it is new. Why?",
                category="Cars & Transportation",
                answers=("Something drains it: test the parasitic draw.", "Buy a new car?")),
       Question("health-006", "Lower back pain from sitting at a desk all day",
                "My lower back aches by the afternoon. Standing desk or a better chair?",
                category="Health", answers=("A chair with lumbar support.", "Walk every hour.",
                                            "Both help."))]
GONE = ["computers-007", "health-018", "new-2"]


def _copy(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.mark.parametrize("n", SHARDS)
def test_add_delete_and_compact_answer_as_on_one_index(demo, tmp_path, n):
    one, sharded = _copy(demo / "one", tmp_path / "one"), _copy(demo / f"s{n}", tmp_path / "s")
    summaries = []
    for path in (one, sharded):
        summaries.append(add_questions(path, NEW, replace=True))
        delete_questions(path, GONE)
    assert "shards/0000" in str(summaries[1]) and "replaced   1 question" in str(summaries[1])
    queries = [q["text"] for q in QUERIES[::4]] + [q.title for q in NEW] + [
        "knees running shoes", "lettuce fence", "car battery drain tag:running"]

    def same_engines():
        a, b = SearchEngine.open(one), SearchEngine.open(sharded)
        assert a.n_questions == b.n_questions == 327 + 3 - 3
        assert b.category_counts() == a.category_counts()
        assert list(b.categories) == list(a.categories)
        assert b.tag_counts() == a.tag_counts()
        show_a, show_b = Presenter(a), Presenter(b)
        for text in queries:
            x, y = a.search(text, 10), b.search(text, 10)
            same_results(y, x)
            assert [show_b.answer(h) for h in y] == [show_a.answer(h) for h in x]
        assert "health-006" in b.search("lower back standing desk lumbar", 3)
        assert "computers-007" not in b.archive and "new-1" in b.archive
        b.close()
    same_engines()
    for path in (one, sharded):
        compact(path)
    top = open_index(sharded)
    assert all(e["n_deleted"] == 0 for e in read_shards(top))
    assert top.manifest["stats"]["n_rows"] == 327
    same_engines()
    # a model fitted again after the changes (the rows are the shards', new ones in their
    # shards: not the unsharded index's order, so not its model) covers every shard's rows
    fit_family(sharded, "topics", **dict(FAMILIES)["topics"])
    top = open_index(sharded)
    assert len(whole_state(sharded, "topics-gnmfnc")[1]["doc_topics"]) == 327
    assert SearchEngine.open(sharded).search("knees running shoes", 1).doc_ids == ("new-1",)


def test_a_change_that_fails_leaves_the_sharded_index_as_it_was(demo, tmp_path, monkeypatch):
    """A failure while the shards are changed (here: the second shard's) commits nothing:
    the live generation is the one before, and readers see it; the next change lands."""
    from cqa_search.index.changes import SegmentChange

    sharded = _copy(demo / "s3", tmp_path / "s3")
    before = open_index(sharded)
    engine = SearchEngine.open(sharded)
    expected = engine.search("car battery flat morning", 5)
    calls = []
    real = SegmentChange.append

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)
    monkeypatch.setattr(SegmentChange, "append", failing)
    with pytest.raises(OSError, match="No space left"):
        add_questions(sharded, NEW[:3])
    assert len(calls) == 2
    after = open_index(sharded)
    assert after.generation == before.generation and after.manifest == before.manifest
    assert not [e for e in os.listdir(sharded) if e.startswith(".tmp-")]
    same_results(engine.search("car battery flat morning", 5), expected)
    assert engine.reopen() is engine
    monkeypatch.setattr(SegmentChange, "append", real)
    add_questions(sharded, NEW[:3])
    fresh = engine.reopen()
    assert fresh is not engine and fresh.n_questions == 330
    assert fresh.search("car battery flat morning", 1).doc_ids == ("new-3",)
    fresh.close()
    engine.close()

