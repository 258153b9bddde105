"""The encoder's rows on a sharded index: the fit stores each shard's questions' vectors
with the shard, added questions are encoded into the shard that gets them, a compaction
keeps them, and a search gives what it gives on one index of the same questions."""
import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from cqa_search import (SearchEngine, add_questions, build_index, compact,  # noqa: E402
                        delete_questions)
from cqa_search.distributed.build import build_sharded_index  # noqa: E402
from cqa_search.training import fit_family  # noqa: E402

from .test_writer import shard_parts  # noqa: E402
from ..vectors.test_encoded import (MORE, QUESTIONS, assert_rows_equal,  # noqa: E402,F401
                                    model_dir, oracle)


def shard_rows(path):
    """Each live shard's encoder rows and its questions."""
    return [(model.vectors_, questions) for model, questions in shard_parts(path, "encoder")]


def test_two_shards_hold_their_questions_vectors(ray_session, tmp_path, model_dir):
    path, single = tmp_path / "s2", tmp_path / "one"
    build_sharded_index(QUESTIONS, path, 2)
    fit_family(path, "encoder", model=model_dir)
    add_questions(path, MORE)
    for rows, questions in shard_rows(path):
        assert_rows_equal(rows, oracle(model_dir, questions))
    delete_questions(path, ["q1"])
    compact(path)
    kept = [q for q in QUESTIONS + MORE if q.id != "q1"]
    assert sum(len(q) for _, q in shard_rows(path)) == len(kept)
    for rows, questions in shard_rows(path):
        assert_rows_equal(rows, oracle(model_dir, questions))
    build_index(kept, single)
    fit_family(single, "encoder", model=model_dir)
    for query in ("how do I reset my router", "renew a visa", "the best cafe"):
        sharded = SearchEngine.open(path).search(query, k=5)
        local = SearchEngine.open(single).search(query, k=5)
        assert sharded.doc_ids == local.doc_ids
        # the shards encode their questions in other batches: rows a float16 step apart
        np.testing.assert_allclose(sharded.scores, local.scores, atol=2e-3)


def test_more_like_this_on_shards_reads_the_stored_vector(ray_session, tmp_path, model_dir):
    path, single = tmp_path / "s2", tmp_path / "one"
    build_sharded_index(QUESTIONS, path, 2)
    build_index(QUESTIONS, single)
    for p in (path, single):
        fit_family(p, "encoder", model=model_dir)
    sharded = SearchEngine.open(path).similar("q4", k=3)
    local = SearchEngine.open(single).similar("q4", k=3)
    assert sharded.doc_ids == local.doc_ids and "q4" not in local.doc_ids
    np.testing.assert_allclose(sharded.scores, local.scores, atol=2e-3)  # batches: above
