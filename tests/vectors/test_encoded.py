"""The encoder family end to end with a tiny random BERT (``write_model`` of
test_encoder.py): fit, the float16 rows equal to the encoder's vectors, search and its
features, live add (the new questions encoded), delete and compact (rows carried), the
model's identity checked at open, an interrupted fit resumed."""
import os

import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from cqa_search import (Question, SearchConfig, SearchEngine, add_questions,  # noqa: E402
                        build_index, compact, delete_questions)
from cqa_search.exceptions import ParameterError  # noqa: E402
from cqa_search.index.store import open_index  # noqa: E402
from cqa_search.retrieval import first_stage  # noqa: E402
from cqa_search.training import fit_family  # noqa: E402
from cqa_search.vectors import encoded  # noqa: E402
from cqa_search.vectors.encoded import (MODEL_ENV, EncoderModel,  # noqa: E402
                                        encode_questions, question_texts)
from cqa_search.vectors.encoder import SentenceEncoder  # noqa: E402

from .test_encoder import write_model  # noqa: E402

QUESTIONS = [
    Question("q0", "how do I reset my router", "the router is x", answers=("reset it",),
             best_answer=0),
    Question("q1", "renew visa", "what is the best way to renew a visa"),
    Question("q2", "prevent a cold", "what is the best way to prevent a cold",
             answers=("cafe", "re"), best_answer=1),
    Question("q3", "routers", ""),
    Question("q4", "cafe", "is the cafe the best"),
]
MORE = [Question("n0", "renew my visa", "how do I renew"), Question("n1", "a cold", "")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    write_model(folder)
    return str(folder)


@pytest.fixture
def index(tmp_path, model_dir):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    fit_family(path, "encoder", model=model_dir)
    return path


def oracle(model_dir, questions, texts=encoded.TEXTS):
    """Each question's texts encoded one by one (zero for an empty text), float16."""
    encoder = SentenceEncoder.load(model_dir)
    out = np.zeros((len(questions), len(texts), encoder.dim), np.float16)
    for i, q in enumerate(questions):
        for j, text in enumerate(question_texts(q, texts)):
            if text.strip():
                out[i, j] = encoder.encode([text])[0]
    return out


def assert_rows_equal(actual, desired):
    """Float16 rows equal up to float16's rounding of the float32 vectors: the fit
    encodes questions in batches, the oracle one at a time, and a matrix product's last
    float32 bit depends on its number of rows on some CPUs (OpenBLAS' kernels for them),
    which can round a value to the neighbouring float16."""
    assert actual.dtype == desired.dtype == np.float16 and actual.shape == desired.shape
    step = np.spacing(np.maximum(np.abs(actual), np.abs(desired))).astype(np.float32)
    apart = np.abs(actual.astype(np.float32) - desired.astype(np.float32))
    assert np.all(apart <= step), f"{int((apart > step).sum())} values apart by more " \
                                  f"than one float16 step (at most {apart.max()})"
    assert np.array_equal(actual == 0, desired == 0)  # an empty text's row stays zero


def rows_of(path):
    return SearchEngine.open(path).models["encoder"].vectors_


def test_fit_stores_float16_rows_equal_to_the_encoders_vectors_and_its_identity(
        index, model_dir):
    engine = SearchEngine.open(index)
    model = engine.models["encoder"]
    assert model.vectors_.dtype == np.float16
    assert_rows_equal(model.vectors_, oracle(model_dir, QUESTIONS))
    assert not model.vectors_[3, 2].any() and not model.vectors_[1, 3].any()  # no body, answer
    assert model.identity_ == SentenceEncoder.load(model_dir).identity
    assert model.model == os.path.abspath(model_dir)
    assert not os.path.exists(str(index) + ".encoder-fit")  # the checkpoint is removed
    assert "encoder" in model.describe()


def test_search_gives_the_encoder_cosines_as_features(index, model_dir):
    engine = SearchEngine.open(index)
    # without a ranker, the encoder's dense list has its own default weight
    assert engine.ranker is None and engine.hybrid_weight == first_stage.ENCODER_WEIGHT
    res = engine.search("how do I reset my router", k=5)
    names = list(res.feature_names)
    q = SentenceEncoder.load(model_dir).encode_query("how do I reset my router")
    stored = rows_of(index).astype(np.float64)  # the index's rows (near the oracle's: above)
    for j, text in enumerate(encoded.TEXTS):
        col = names.index(f"encoder_{text}")
        rows = [int(d[1:]) for d in res.doc_ids]
        np.testing.assert_allclose(res.features[:, col], stored[rows, j] @ q, atol=1e-6)


def test_added_questions_are_encoded_and_compaction_carries_the_rows(index, model_dir):
    add_questions(index, MORE)
    entry = open_index(index).models["encoder"]
    assert [run["arrays"] for run in entry["runs"]] == [["vectors", "doc_list"]]
    everything = QUESTIONS + MORE
    assert_rows_equal(rows_of(index), oracle(model_dir, everything))
    delete_questions(index, ["q1", "n0"])
    compact(index)
    kept = [q for q in everything if q.id not in ("q1", "n0")]
    assert_rows_equal(rows_of(index), oracle(model_dir, kept))
    assert open_index(index).models["encoder"]["runs"] == []
    engine = SearchEngine.open(index)
    assert engine.search("a cold", k=1).doc_ids[0] in {"q2", "n1"}


def test_another_model_or_a_missing_folder_is_refused_in_one_line(index, tmp_path,
                                                                  monkeypatch):
    other = tmp_path / "other-bert"
    write_model(other, seed=1)
    monkeypatch.setenv(MODEL_ENV, str(other))
    with pytest.raises(ParameterError, match=r"^the encoder model differs from the index's: "
                                             r"sha256 .*fit the encoder again$"):
        SearchEngine.open(index)
    with pytest.raises(ParameterError, match="differs"):
        add_questions(index, MORE)  # nothing is encoded with the wrong model
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ParameterError, match=rf"is not at .*nowhere \({MODEL_ENV}\): set "):
        SearchEngine.open(index)


def test_the_model_folder_of_the_environment_variable_is_used(index, model_dir, tmp_path,
                                                               monkeypatch):
    import shutil

    moved = tmp_path / "elsewhere"
    shutil.copytree(model_dir, moved)
    monkeypatch.setenv(MODEL_ENV, str(moved))
    assert SearchEngine.open(index).search("renew visa", k=1).doc_ids == ("q1",)


class Interrupted(Exception):
    """The fit stopped (as by Ctrl-C: an exception out of the encoding)."""


def test_an_interrupted_fit_resumes_from_its_checkpoint(tmp_path, model_dir, monkeypatch):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    monkeypatch.setattr(encoded, "CHUNK", 2)
    calls, resumed = [], False
    real = encoded._encode

    def failing(encoder, questions, texts, batch_size, bar=None):
        calls.append([q.id for q in questions])
        if len(calls) == 2 and not resumed:
            raise Interrupted
        return real(encoder, questions, texts, batch_size, bar)

    monkeypatch.setattr(encoded, "_encode", failing)
    with pytest.raises(Interrupted):
        fit_family(path, "encoder", model=model_dir)
    assert os.listdir(str(path) + ".encoder-fit")  # the first chunk is kept
    calls.clear()
    resumed = True
    fit_family(path, "encoder", model=model_dir)
    assert calls == [["q2", "q3"], ["q4"]]  # the first chunk is read, not encoded again
    assert_rows_equal(rows_of(path), oracle(model_dir, QUESTIONS))
    assert not os.path.exists(str(path) + ".encoder-fit")


def test_encode_questions_is_one_function_for_any_part_of_the_archive(model_dir):
    encoder = SentenceEncoder.load(model_dir)
    whole = encode_questions(encoder, QUESTIONS, ("title", "answer"))
    part = encode_questions(encoder, QUESTIONS[2:], ("title", "answer"))
    assert_rows_equal(whole[2:], part)
    assert_rows_equal(whole, oracle(model_dir, QUESTIONS, ("title", "answer")))


@pytest.mark.parametrize("params, message", [
    ({}, "needs a model folder"),
    ({"model": "m", "texts": ("title", "tags")}, "texts must be distinct names"),
    ({"model": "m", "batch_size": 0}, "batch_size must be"),
])
def test_bad_parameters_are_refused(tmp_path, params, message):
    build_index(QUESTIONS, tmp_path / "idx")
    with pytest.raises(ParameterError, match=message):
        EncoderModel(**params).fit(SearchEngine.open(tmp_path / "idx").view)


def test_the_inverted_file_above_the_exact_limit_finds_what_the_exact_search_finds(
        tmp_path, model_dir):
    """Oracle: with every list probed, the inverted file's top k is the exact top k;
    added questions go to their nearest list."""
    words = ["how", "do", "i", "reset", "my", "router", "visa", "renew", "cold", "cafe",
             "prevent", "the", "best", "way"]
    rng = np.random.default_rng(0)
    questions = [Question(f"r{i}", " ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 6)))
                 for i in range(40)]
    exact, ivf = tmp_path / "exact", tmp_path / "ivf"
    for path, params in ((exact, {}), (ivf, {"exact_limit": 10, "n_lists": 4, "n_probe": 4})):
        build_index(questions, path)
        fit_family(path, "encoder", model=model_dir, **params)
    model = SearchEngine.open(ivf).models["encoder"]
    assert model.centroids_.shape == (4, 16) and model.doc_list_.shape == (40,)
    add_questions(ivf, MORE)
    add_questions(exact, MORE)
    model = SearchEngine.open(ivf).models["encoder"]
    from cqa_search.vectors.dense import assign

    np.testing.assert_array_equal(model.doc_list_[40:], assign(
        model.vectors_[40:, 0].astype(np.float32), model.centroids_))
    for query in ("how do I reset my router", "renew visa", "the best cafe"):
        found = [SearchEngine.open(p, config=SearchConfig(ranker=None, hybrid=1.0)).search(
            query, k=10) for p in (exact, ivf)]
        assert found[0].doc_ids == found[1].doc_ids
        np.testing.assert_array_equal(found[0].scores, found[1].scores)


def test_the_demo_adds_the_encoder_rows_when_a_model_is_installed(tmp_path, model_dir,
                                                                   monkeypatch, capsys):
    from cqa_search.cli.__main__ import main

    from ..cli.test_cli import held_out_scores

    monkeypatch.setenv(MODEL_ENV, model_dir)
    assert main(["demo", "-o", str(tmp_path / "demo"), "-q", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "model      encoder" in out and "features   encoder_question" in out
    assert list(held_out_scores(out)) == ["BM25F", "+ word vectors", "models + ranker",
                                          "encoder alone", "+ encoder, ranker"]
    assert "no sentence encoder installed" not in out


def test_a_query_of_a_title_and_a_body_compares_each_part_with_the_stored_texts(
        index, model_dir):
    engine = SearchEngine.open(index)
    title, body = "reset router", "the router is stuck, how do I reset it"
    res = engine.search(f"{title}\n{body}", k=5, title=title, body=body)
    names = list(res.feature_names)
    encoder = SentenceEncoder.load(model_dir)
    stored = rows_of(index).astype(np.float64)
    rows = [int(d[1:]) for d in res.doc_ids]
    for part, text in (("title", title), ("body", body)):
        q = encoder.encode_query(text)
        for t in encoded.PART_TEXTS:
            col = names.index(f"encoder_q{part}_{t}")
            np.testing.assert_allclose(res.features[:, col],
                                       stored[rows, encoded.TEXTS.index(t)] @ q, atol=1e-6)
    assert not any(n.startswith("encoder_q") and n.endswith("_answer") for n in names)


def test_a_query_of_one_text_is_its_title_and_has_no_body(index):
    res = SearchEngine.open(index).search("how do I reset my router", k=5)
    names = list(res.feature_names)
    for t in encoded.PART_TEXTS:
        np.testing.assert_array_equal(res.features[:, names.index(f"encoder_qtitle_{t}")],
                                      res.features[:, names.index(f"encoder_{t}")])
        assert not res.features[:, names.index(f"encoder_qbody_{t}")].any()


def test_more_like_this_reuses_the_stored_vector(index, monkeypatch):
    engine = SearchEngine.open(index)
    scorer = next(s for s in engine._searcher._scorers if hasattr(s, "archived_query"))

    def never(text):
        raise AssertionError(f"{text!r} encoded again")

    monkeypatch.setattr(scorer.encoder, "encode_query", never)
    found = engine.similar("q2", k=4)
    stored = engine.models["encoder"].vectors_.astype(np.float64)
    rows = [int(d[1:]) for d in found.doc_ids]
    assert "q2" not in found.doc_ids
    col = list(found.feature_names).index("encoder_question")
    np.testing.assert_allclose(found.features[:, col], stored[rows, 0] @ stored[2, 0],
                               atol=1e-6)
    for part in encoded.QUERY_PARTS:  # its title and body: their stored vectors
        col = list(found.feature_names).index(f"encoder_q{part}_question")
        j = encoded.TEXTS.index(part)
        np.testing.assert_allclose(found.features[:, col], stored[rows, 0] @ stored[2, j],
                                   atol=1e-6)


def test_a_fit_after_a_deletion_has_a_row_for_every_row_of_the_index(tmp_path, model_dir):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    add_questions(path, MORE)
    delete_questions(path, ["q1"])
    fit_family(path, "encoder", model=model_dir)
    engine = SearchEngine.open(path)
    assert_rows_equal(engine.models["encoder"].vectors_, oracle(model_dir, QUESTIONS + MORE))
    assert "q1" not in engine.search("renew visa", k=10).doc_ids
