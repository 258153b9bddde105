"""Every model family on a sharded index: fitted from the shards (no unsharded copy), its rows
split with them, and the full pipeline (every family's features, a ranker over them, the
answers chosen) equal to that of one unsharded index of the same archive."""
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from cqa_search import SearchEngine, build_index
from cqa_search.distributed.build import build_sharded_index
from cqa_search.exceptions import ParameterError
from cqa_search.factorization.topics import TopicModel
from cqa_search.index.models import add_model, load_models, remove_model
from cqa_search.index.sharding import read_shards, shard_models
from cqa_search.index.store import open_index
from cqa_search.presentation import Presenter
from cqa_search.ranking.linear import LinearRanker
from cqa_search.searcher import SearchConfig
from cqa_search.training import fit_family

DEMO = resources.files("cqa_search.data") / "demo"
TOY = Path(__file__).resolve().parents[1] / "data" / "toy_archive.jsonl"
SHARDS = (2, 3, 7)
#: Small fits of every family (the order matters: multiview translates with the stored
#: translation model).
FAMILIES = [("translation", {"max_iter": 3}),
            ("topics", {"n_shared": 4, "n_category": 2, "max_iter": 8, "tol": 0}),
            ("multiview", {"n_components": 6, "max_iter": 6}),
            ("answers", {})]
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
    one ranker over every feature (trained on the whole index's) stored in each."""
    root = tmp_path_factory.mktemp("models")
    archive = str(DEMO / "archive.jsonl")
    build_index(archive, root / "one")
    fitted(root / "one")
    one = SearchEngine.open(root / "one", config=SearchConfig(ranker=None))
    results = [one.search(q["text"], 15) for q in QUERIES[:25]]
    X = np.vstack([r.features for r in results])
    qid = np.repeat(np.arange(len(results)), [len(r) for r in results])
    y = np.concatenate([np.arange(len(r)) < 3 for r in results]).astype(int)
    ranker = LinearRanker("ranksvm").fit(X, y, qid=qid, feature_names=one.feature_names)
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


def same_results(a, b):
    assert a.doc_ids == b.doc_ids
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-9, atol=1e-9)
    assert a.feature_names == b.feature_names
    np.testing.assert_allclose(a.features, b.features, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", SHARDS)
def test_fits_from_the_shards_equal_the_unsharded_fits(demo, n):
    one = load_models(open_index(demo / "one"))
    for name, model in one.items():
        if name == "ranker":
            continue
        meta, arrays = model.state()
        sharded_meta, sharded = whole_state(demo / f"s{n}", name)
        assert sorted(sharded) == sorted(arrays), name
        for key, value in arrays.items():
            np.testing.assert_allclose(sharded[key], value, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name} {key}")
    # the rows are the shards': each shard's model has as many as the shard has questions
    top = open_index(demo / f"s{n}")
    for s, entry in enumerate(read_shards(top)):
        if entry["dir"] is not None:
            models = shard_models(top, s)
            assert len(models["topics-gnmfnc"].doc_topics_) == entry["n_docs"]
            assert len(models["answers"].choice_) == entry["n_docs"]
            assert len(models["multiview"].doc_factors_[1]) == entry["n_docs"]
    # the top level keeps the model without its rows
    assert len(load_models(top)["topics-gnmfnc"].doc_topics_) == 0


@pytest.mark.parametrize("n", SHARDS)
def test_the_full_pipeline_equals_one_index(demo, n):
    one, sharded = SearchEngine.open(demo / "one"), SearchEngine.open(demo / f"s{n}")
    assert sharded.ranker is not None and sharded.feature_names == one.feature_names
    assert {"topic_gnmfnc", "mv_ibm1", "ptrans_pt"} <= set(one.feature_names)
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
        sharded = whole_state(tmp_path / "s3", b.name)[1]
        for key, value in a.model.state()[1].items():
            np.testing.assert_allclose(sharded[key], value, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{family} {key}")
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
