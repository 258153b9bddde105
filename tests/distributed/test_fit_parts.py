"""Fits whose per-question part is computed where the shards are (``fit --ray`` on a sharded
index: :class:`~cqa_search.distributed.fitting.ShardParts`, an actor per shard): the model
equals the fit of one unsharded index of the same archive, and the driver never reads the
archive."""
import os
import shutil

import numpy as np
import pytest

from cqa_search.distributed._ray import ShardError
from cqa_search.index.models import load_models
from cqa_search.index.sharding import read_shards, shard_models
from cqa_search.index.store import open_index
from cqa_search.training import fit_family

pytestmark = pytest.mark.filterwarnings("ignore:.*max_iter")  # the small fits stop early


@pytest.fixture
def no_archive_in_the_driver(monkeypatch):
    import cqa_search.training as training

    monkeypatch.setattr(training, "sharded_data",
                        lambda top: pytest.fail("the archive was read in the driver"))


def choices(path, name="answers"):
    """The stored choices of an index, gathered from its shards in order when sharded."""
    top = open_index(path)
    if "shards" not in top.manifest:
        return load_models(top)[name].choice_
    return np.concatenate([shard_models(top, s)[name].choice_
                           for s, e in enumerate(read_shards(top)) if e["dir"] is not None])


def same_ranker(a, b):
    """The rankers of two answer selectors: the same features and weights; the z-scores'
    means and deviations to rounding (summed over the shards in another order)."""
    assert list(a.feature_names_in_) == list(b.feature_names_in_)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    (_, x), (_, y) = a.state(), b.state()
    for key in ("norm_offset", "norm_scale"):
        np.testing.assert_allclose(y[key], x[key], rtol=1e-12, err_msg=key)


@pytest.mark.parametrize("n", [2, 3, 7])
@pytest.mark.parametrize("params", [
    {},  # the unsupervised default: no table
    {"features": ("translation", "translation_inverse", "lm", "log_position"),
     "unsupervised_weights": {"translation": 1.0, "translation_inverse": 0.5,
                              "log_position": -1.0},
     "max_iter": 3, "tol": None},  # a table trained by EM over the shards' pairs
])
def test_answers_from_the_shards_equal_the_unsharded_fit(sharded_demo, n, params,
                                                         no_archive_in_the_driver):
    one = fit_family(sharded_demo / "one", "answers", **params).model
    report = fit_family(sharded_demo / f"s{n}", "answers", ray="local", **params)
    many = load_models(open_index(sharded_demo / f"s{n}"))["answers"]
    np.testing.assert_array_equal(choices(sharded_demo / f"s{n}"), one.choice_)
    np.testing.assert_array_equal(report.model.choice_, one.choice_)
    assert (many.n_answers_, many.avg_answer_length_, many.mode_) == (
        one.n_answers_, one.avg_answer_length_, one.mode_)  # (lengths: exact sums)
    same_ranker(one.ranker_, many.ranker_)
    assert (one.ibm1_ is None) == (many.ibm1_ is None) == ("max_iter" not in params)
    if one.ibm1_ is not None:  # EM counts summed in another order
        a, b = one.ibm1_.translation_probs_, many.ibm1_.translation_probs_
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(b.data, a.data, rtol=1e-9, atol=1e-12)


def test_supervised_and_transferred_answers_from_the_shards(sharded_demo, tmp_path,
                                                            no_archive_in_the_driver):
    """Labels (qrels) matched to the answers by each shard; a ranker from another index
    applied on each shard; a stored translation table read by the shards."""
    path = tmp_path / "s3"
    shutil.copytree(sharded_demo / "s3", path)
    qrels = {"health-001": {"0": 1, "1": 0}, "computers-017": {"1": 1, "0": 0},
             "cooking-023": {"0": 0, "1": 1}, "pets-005": {"1": 1}}
    params = {"learner": "perceptron", "features": ("lm", "bm25", "log_position")}
    one = fit_family(sharded_demo / "one", "answers", labels=qrels, name="trained", **params)
    many = fit_family(path, "answers", labels=qrels, name="trained", ray="local", **params)
    assert many.model.mode_ == one.model.mode_ == "supervised"
    np.testing.assert_allclose(many.model.ranker_.coef_, one.model.ranker_.coef_, rtol=1e-9)
    np.testing.assert_array_equal(choices(path, "trained"), one.model.choice_)
    moved = fit_family(path, "answers", ranker_from=sharded_demo / "one", ranker_name="trained",
                       name="moved", ray="local")
    assert moved.model.mode_ == "transferred"
    np.testing.assert_array_equal(choices(path, "moved"), one.model.choice_)
    with pytest.raises(ValueError, match="the labels name question 'nope', which is not in "
                                         "the archive"):
        fit_family(path, "answers", labels={"nope": {"0": 1}}, ray="local")


def test_a_shard_that_fails_fails_the_answers_fit_by_name(sharded_demo, tmp_path):
    """A shard whose actor fails (a file of shard 2 damaged, found when the actor reads
    it) stops the fit with an error naming the shard; the index is unchanged."""
    path = tmp_path / "s3"
    shutil.copytree(sharded_demo / "s3", path)
    top = open_index(path)
    shard = open_index(os.path.join(top.root, "shards/00002"))
    damaged = os.path.join(shard.root, "vocab.json")
    size = os.path.getsize(damaged)
    with open(damaged, "wb") as f:  # (copytree copied it: the original is intact)
        f.write(b"x" * size)
    with pytest.raises(ShardError, match=r"the shards' summary step failed on shard 2 "
                                         r"\(shards/00002\) .*the index is unchanged"):
        fit_family(path, "answers", ray="local")
    after = open_index(path)
    assert after.generation == top.generation and after.manifest == top.manifest
