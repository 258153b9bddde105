"""Fits on Ray equal the single-process fits: IBM Model 1 (E-step over shards of the
pairs) and GNMFNC (categories' blocks in parallel)."""
import os
from importlib import resources

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")

from cqa_search import SearchEngine, build_index  # noqa: E402
from cqa_search.cli.__main__ import main as cli  # noqa: E402
from cqa_search.distributed.build import build_sharded_index  # noqa: E402
from cqa_search.distributed.fitting import ShardedCorpus, ray_fits  # noqa: E402
from cqa_search.distributed._ray import ShardError  # noqa: E402
from cqa_search.exceptions import ParameterError  # noqa: E402
from cqa_search.factorization.gnmf import GNMFNC  # noqa: E402
from cqa_search.factorization.topics import TopicModel  # noqa: E402
from cqa_search.index.models import load_models  # noqa: E402
from cqa_search.index.sharding import shard_models  # noqa: E402
from cqa_search.index.store import open_index  # noqa: E402
from cqa_search.translation import IBMModel1, ParallelCorpus  # noqa: E402
from cqa_search.translation.corpus import build_parallel_corpus  # noqa: E402
from cqa_search.training import fit_family  # noqa: E402
from cqa_search.translation.model import TranslationModel  # noqa: E402

DEMO = resources.files("cqa_search.data") / "demo"


@pytest.fixture(scope="module")
def demo(ray_session, tmp_path_factory):
    path = tmp_path_factory.mktemp("fit") / "demo"
    build_index(str(DEMO / "archive.jsonl"), path)
    return path


def _corpus(seed=0, n_pairs=400, n_terms=150):
    rng = np.random.default_rng(seed)
    zipf = 1 / np.arange(1, n_terms + 1)
    zipf /= zipf.sum()
    return ParallelCorpus.from_pairs(
        [(rng.choice(n_terms, rng.integers(1, 12), p=zipf),
          rng.choice(n_terms, rng.integers(0, 9), p=zipf)) for _ in range(n_pairs)], n_terms)


@pytest.mark.parametrize("n_shards", [1, 3, 7])
def test_ibm1_e_step_over_shards_gives_the_same_table(ray_session, n_shards):
    corpus = _corpus()
    one = IBMModel1(max_iter=6, tol=None, min_prob=0).fit(corpus)
    with ray_fits(n_shards):
        many = IBMModel1(max_iter=6, tol=None, min_prob=0).fit(corpus)
    np.testing.assert_allclose(many.log_likelihood_, one.log_likelihood_, rtol=1e-12)
    a, b = one.translation_probs_, many.translation_probs_
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(b.data, a.data, rtol=0, atol=1e-9)
    assert many.n_identity_rows_ == one.n_identity_rows_



@pytest.mark.parametrize("n, params", [(2, {}), (3, {}), (7, {}),
                                       (3, {"answers": "best", "title_body": True,
                                            "pooling": False})])
def test_ibm1_from_the_shards_parts_of_the_corpus_equals_the_whole_archives(sharded_demo, n,
                                                                            params):
    """Each shard builds its part of the parallel corpus from its own files (a Ray task);
    EM with an E-step task per part and the counts summed in the driver is the EM of the
    whole archive's corpus: the same pairs, statistics and table (to rounding: the counts
    are summed in another order)."""
    corpus, stats = build_parallel_corpus(SearchEngine.open(sharded_demo / "one").view,
                                          **params)
    parts = ShardedCorpus(open_index(sharded_demo / f"s{n}"), **params)
    assert parts.stats == stats.as_dict() and parts.n_pairs == corpus.n_pairs
    assert parts.n_terms == corpus.n_terms
    one = IBMModel1(max_iter=5, tol=None, min_prob=0).fit(corpus)
    many = IBMModel1(max_iter=5, tol=None, min_prob=0).fit(parts)
    np.testing.assert_allclose(many.log_likelihood_, one.log_likelihood_, rtol=1e-12)
    a, b = one.translation_probs_, many.translation_probs_
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(b.data, a.data, rtol=1e-9, atol=1e-12)
    assert (many.n_identity_rows_, many.n_target_vocab_, many.n_cooccurrences_) == (
        one.n_identity_rows_, one.n_target_vocab_, one.n_cooccurrences_)


def test_the_shards_corpus_checks_its_parameters(sharded_demo):
    with pytest.raises(ParameterError, match="answers must be one of .*got 'every'"):
        ShardedCorpus(open_index(sharded_demo / "s2"), answers="every")
    with pytest.raises(ParameterError, match="duplicate and similar-question pairs join "
                                             "questions of different shards"):
        fit_family(sharded_demo / "s2", "translation", ray="local", duplicates=True)


@pytest.mark.filterwarnings("ignore:.*max_iter")
def test_a_shard_that_fails_its_task_fails_the_fit_by_name(sharded_demo, tmp_path):
    """A shard's task that fails (here: a file of shard 1 damaged, found when the task reads
    it) stops the fit with an error naming the shard; nothing is stored."""
    import shutil

    path = tmp_path / "s3"
    shutil.copytree(sharded_demo / "s3", path)
    top = open_index(path)
    shard = open_index(os.path.join(top.root, "shards/00001"))
    damaged = os.path.join(shard.root, "vocab.json")
    size = os.path.getsize(damaged)
    with open(damaged, "wb") as f:  # (copytree copied it: the original is intact)
        f.write(b"x" * size)
    with pytest.raises(ShardError, match=r"building the shards' parallel corpus failed on "
                                         r"shard 1 \(shards/00001\) .*the fit stopped and "
                                         "the index is unchanged"):
        fit_family(path, "translation", ray="local", max_iter=2)
    after = open_index(path)
    assert after.generation == top.generation and after.manifest == top.manifest


@pytest.mark.filterwarnings("ignore:.*max_iter")  # a small fit stops early
@pytest.mark.parametrize("n", [2, 3, 7])
def test_fit_translation_on_ray_reads_the_shards_where_they_are(sharded_demo, n,
                                                                monkeypatch):
    """`fit INDEX translation --ray` on a sharded index: the corpus, the EM counts and the
    phrases made by tasks on the shards, never the whole archive in this process; the
    stored model is the unsharded fit's (to rounding)."""
    import cqa_search.training as training

    one = fit_family(sharded_demo / "one", "translation", max_iter=3).model
    monkeypatch.setattr(training, "sharded_data", lambda top: pytest.fail("read in the driver"))
    report = fit_family(sharded_demo / f"s{n}", "translation", ray="local", max_iter=3)
    many = load_models(open_index(sharded_demo / f"s{n}"))["translation"]
    assert report.model.corpus_stats_ == one.corpus_stats_ == many.corpus_stats_
    (meta_a, a), (meta_b, b) = one.state(), many.state()
    assert sorted(a) == sorted(b)
    for key in a:
        if a[key].dtype.kind == "f":
            np.testing.assert_allclose(b[key], a[key], rtol=1e-6, atol=1e-12, err_msg=key)
        else:
            np.testing.assert_array_equal(b[key], a[key], err_msg=key)


def test_gnmfnc_blocks_in_parallel_follow_the_same_trajectory(ray_session):
    D = sp.random(200, 300, density=0.05, random_state=1, format="csc")
    groups = np.random.default_rng(1).integers(-1, 5, 300)
    one = GNMFNC(5, 3, max_iter=15, tol=0, random_state=0).fit(D, groups)
    with ray_fits(3):
        many = GNMFNC(5, 3, max_iter=15, tol=0, random_state=0).fit(D, groups)
    np.testing.assert_allclose(many.loss_curve_, one.loss_curve_, rtol=1e-12)
    assert many.initial_loss_ == pytest.approx(one.initial_loss_, rel=1e-12)
    np.testing.assert_allclose(many.coefficients_, one.coefficients_, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(many.shared_topics_, one.shared_topics_, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(many.category_topics_.toarray(), one.category_topics_.toarray(),
                               rtol=1e-10, atol=1e-14)


def test_index_models_fitted_on_ray_equal_the_in_process_ones(demo):
    view = SearchEngine.open(demo).view
    kw = dict(textrank=False, max_iter=4, tol=None)
    one = TranslationModel(**kw).fit(view)
    with ray_fits(2):
        many = TranslationModel(**kw).fit(view)
    np.testing.assert_allclose(many.ibm1_.translation_probs_.toarray(),
                               one.ibm1_.translation_probs_.toarray(), atol=1e-9)
    topics = dict(model="gnmfnc", n_shared=4, n_category=2, max_iter=8, tol=0, random_state=0)
    one = TopicModel(**topics).fit(view)
    with ray_fits(2):
        many = TopicModel(**topics).fit(view)
    np.testing.assert_allclose(many.loss_curve_, one.loss_curve_,
                               rtol=1e-12)


def test_cli_fit_on_ray(demo, tmp_path, capsys):
    assert cli(["fit", str(demo), "topics", "--model", "gnmfnc", "--n-shared", "3",
                "--n-category", "2", "--max-iter", "5", "--tol", "0", "--ray", "-q"]) == 0
    assert "topics-gnmfnc" in capsys.readouterr().out
    assert "topics-gnmfnc" in SearchEngine.open(demo).models
    sharded = tmp_path / "s2"
    assert cli(["build-index", str(DEMO / "archive.jsonl"), "-o", str(sharded), "--shards",
                "2", "-q"]) == 0
    capsys.readouterr()
    # on a sharded index: the inputs read from its shards, the blocks on Ray, the same model
    assert cli(["fit", str(sharded), "topics", "--model", "gnmfnc", "--n-shared", "3",
                "--n-category", "2", "--max-iter", "5", "--tol", "0", "--ray", "-q"]) == 0
    assert "topics-gnmfnc" in capsys.readouterr().out
    one = SearchEngine.open(demo).models["topics-gnmfnc"]
    top = open_index(sharded)
    parts = [shard_models(top, s)["topics-gnmfnc"] for s in range(2)]
    np.testing.assert_allclose(parts[0].shared_topics_, one.shared_topics_, rtol=1e-12)
    np.testing.assert_allclose(np.vstack([p.doc_topics_ for p in parts]), one.doc_topics_,
                               rtol=1e-6)  # (float32)


def test_an_address_where_no_head_listens_is_refused_at_once():
    import socket

    from cqa_search.distributed._ray import DistributedError, _reachable

    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now (Ray itself would wait for minutes)
    with pytest.raises(DistributedError, match=f"cannot join the Ray cluster at 127.0.0.1:"
                                               f"{port}: Connection refused"):
        _reachable(f"127.0.0.1:{port}")
    _reachable("auto")  # not HOST:PORT: left to Ray


def test_fit_backend_says_where_fits_run(ray_session):
    from cqa_search.distributed.fitting import fit_backend

    assert fit_backend() == "this process"
    with ray_fits(2):
        assert fit_backend() == "ray"
    assert fit_backend() == "this process"
