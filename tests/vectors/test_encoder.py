"""The sentence encoder: a tiny random BERT written by the test, checked against a plain
reference implementation of the model (loops over heads, float64, ``math.erf``; no code
shared with the kernels), the tokenizer, the compiled kernels against numpy, the model
folder's errors, identity and unpacking. With ``CQA_SEARCH_ENCODER_MODEL`` set to a real
model folder (all-MiniLM-L6-v2), its identity and a sanity check run too."""
import hashlib
import json
import math
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from cqa_search import compiled  # noqa: E402
from cqa_search.exceptions import ParameterError  # noqa: E402
from cqa_search.vectors import _bert  # noqa: E402
from cqa_search.vectors.encoder import (SentenceEncoder, check_identity,  # noqa: E402
                                        onnx_available, unpack_model)

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["how", "do", "i", "reset", "my", "router", "what", "is", "the", "best", "way", "to",
         "prevent", "a", "cold", "visa", "renew", "?", ",", ".", "!", "##s", "##ing", "re",
         "##set", "e", "##x", "x", "cafe"]
VOCAB = SPECIAL + WORDS
SIZES = {"hidden": 16, "heads": 4, "layers": 2, "inner": 32, "positions": 40}
TEXTS = ["How do I reset my router?", "", "   ", "?!", "Café résumé renewing visas",
         "what is the best way to prevent a cold", "x " * 60, "routers resets",
         "ĳ 漢字 \u200b tab\there"]


def _tokenizer_json(path):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB.index("[CLS]")), ("[SEP]", VOCAB.index("[SEP]"))])
    tok.enable_truncation(max_length=512)   # what a saved file holds; the loader resets it
    tok.enable_padding(length=64)
    tok.save(str(path))


def _tensors(seed):
    rng = np.random.default_rng(seed)
    h, inner = SIZES["hidden"], SIZES["inner"]

    def r(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {"embeddings.word_embeddings.weight": r(len(VOCAB), h),
         "embeddings.position_embeddings.weight": r(SIZES["positions"], h),
         "embeddings.token_type_embeddings.weight": r(2, h),
         "embeddings.LayerNorm.weight": 1 + r(h, scale=0.1),
         "embeddings.LayerNorm.bias": r(h, scale=0.1),
         "embeddings.position_ids": np.arange(SIZES["positions"])[None].astype(np.int64),
         "pooler.dense.weight": r(h, h), "pooler.dense.bias": r(h)}
    for i in range(SIZES["layers"]):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[p + f"attention.self.{name}.weight"] = r(h, h)
            t[p + f"attention.self.{name}.bias"] = r(h, scale=0.1)
        t[p + "attention.output.dense.weight"] = r(h, h)
        t[p + "attention.output.dense.bias"] = r(h, scale=0.1)
        t[p + "intermediate.dense.weight"] = r(inner, h)
        t[p + "intermediate.dense.bias"] = r(inner, scale=0.1)
        t[p + "output.dense.weight"] = r(h, inner)
        t[p + "output.dense.bias"] = r(h, scale=0.1)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = 1 + r(h, scale=0.1)
            t[p + ln + ".bias"] = r(h, scale=0.1)
    return t


def write_model(folder, *, pooling="mean", max_seq_length=12, normalize=True, seed=0,
                config=None):
    """A sentence-transformers folder of a tiny random BERT; returns its tensors."""
    from safetensors.numpy import save_file

    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    files = {
        "modules.json": modules,
        "config.json": dict({"_name_or_path": "tiny/bert", "architectures": ["BertModel"],
                             "model_type": "bert", "hidden_act": "gelu",
                             "hidden_size": SIZES["hidden"],
                             "num_attention_heads": SIZES["heads"],
                             "num_hidden_layers": SIZES["layers"],
                             "intermediate_size": SIZES["inner"],
                             "max_position_embeddings": SIZES["positions"],
                             "layer_norm_eps": 1e-12, "type_vocab_size": 2,
                             "vocab_size": len(VOCAB),
                             "position_embedding_type": "absolute"}, **(config or {})),
        "sentence_bert_config.json": {"max_seq_length": max_seq_length,
                                      "do_lower_case": False},
        "1_Pooling/config.json": {"word_embedding_dimension": SIZES["hidden"],
                                  "pooling_mode_cls_token": pooling == "cls",
                                  "pooling_mode_mean_tokens": pooling == "mean",
                                  "pooling_mode_max_tokens": pooling == "max",
                                  "pooling_mode_mean_sqrt_len_tokens": False}}
    for name, value in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump(value, f)
    _tokenizer_json(os.path.join(folder, "tokenizer.json"))
    tensors = _tensors(seed)
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    return tensors


# -- the reference: the model as written in the papers, one sequence, float64 ---------------
def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def reference(tensors, ids, pooling):
    t = {k: v.astype(np.float64) for k, v in tensors.items()}
    n, h, heads = len(ids), SIZES["hidden"], SIZES["heads"]
    d = h // heads
    x = (t["embeddings.word_embeddings.weight"][ids]
         + t["embeddings.position_embeddings.weight"][:n]
         + t["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    for i in range(SIZES["layers"]):
        p = f"encoder.layer.{i}."

        def dense(v, name):
            return v @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        q = dense(x, "attention.self.query")
        k = dense(x, "attention.self.key")
        v = dense(x, "attention.self.value")
        context = np.zeros((n, h))
        for head in range(heads):
            cols = slice(head * d, (head + 1) * d)
            for a in range(n):
                scores = np.array([q[a, cols] @ k[b, cols] / math.sqrt(d) for b in range(n)])
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                context[a, cols] = weights @ v[:, cols]
        x = _layer_norm(x + dense(context, "attention.output.dense"),
                        t[p + "attention.output.LayerNorm.weight"],
                        t[p + "attention.output.LayerNorm.bias"])
        inner = dense(x, "intermediate.dense")
        inner = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))(inner)
        x = _layer_norm(x + dense(inner, "output.dense"), t[p + "output.LayerNorm.weight"],
                        t[p + "output.LayerNorm.bias"])
    pooled = x[0] if pooling == "cls" else x.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


@pytest.fixture(params=["numpy", "numba"])
def implementation(request):
    """Both paths of the bias/GELU, LayerNorm and softmax passes."""
    if request.param == "numba":
        pytest.importorskip("numba")
    before = compiled._chosen
    compiled.use(request.param)
    yield request.param
    compiled._chosen = before


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    tensors = write_model(folder)
    return str(folder), tensors


# -- tokenizer --------------------------------------------------------------------------------
def test_tokenize_lowercases_splits_word_pieces_and_cuts_at_the_maximum_length(tiny):
    encoder = SentenceEncoder.load(tiny[0])
    ids = encoder.tokenize(["How do I RESET routers?", "", "x " * 60, "  zzz  "])
    ix = VOCAB.index
    assert ids[0].tolist() == [ix("[CLS]"), ix("how"), ix("do"), ix("i"), ix("reset"),
                               ix("router"), ix("##s"), ix("?"), ix("[SEP]")]
    assert ids[1].tolist() == [ix("[CLS]"), ix("[SEP]")]
    assert ids[2].tolist() == [ix("[CLS]")] + [ix("x")] * 10 + [ix("[SEP]")]   # 12 tokens
    assert ids[3].tolist() == [ix("[CLS]"), ix("[UNK]"), ix("[SEP]")]


def test_the_tokenizer_and_the_encoder_do_not_import_torch_gensim_or_sklearn():
    code = ("import sys, cqa_search.vectors.encoder, tokenizers, safetensors.numpy; "
            "print(sorted(m for m in ('torch', 'gensim', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# -- the forward pass against the reference -------------------------------------------------
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_vectors_equal_the_reference_implementation(tmp_path, implementation, pooling):
    tensors = write_model(tmp_path / "m", pooling=pooling, seed=3)
    encoder = SentenceEncoder.load(tmp_path / "m", backend="numpy")
    assert encoder.pooling == pooling and encoder.dim == SIZES["hidden"]
    got = encoder.encode(TEXTS, batch_size=4)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), SIZES["hidden"])
    for text, ids, vector in zip(TEXTS, encoder.tokenize(TEXTS), got):
        want = reference(tensors, ids, pooling)
        assert np.abs(vector - want).max() < 2e-5, text
        assert abs(np.linalg.norm(vector) - 1) < 1e-5


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_onnxruntime_pass_equals_the_reference_and_the_numpy_pass(tmp_path, pooling):
    pytest.importorskip("onnxruntime")
    tensors = write_model(tmp_path / "m", pooling=pooling, seed=5)
    encoder = SentenceEncoder.load(tmp_path / "m", backend="onnxruntime")
    numpy_pass = SentenceEncoder.load(tmp_path / "m", backend="numpy")
    assert (encoder.query_backend, encoder.batch_backend) == ("onnxruntime",) * 2
    assert (numpy_pass.query_backend, numpy_pass.batch_backend) == ("numpy",) * 2
    # batches of 3: texts of different lengths padded together
    got = encoder.encode(TEXTS, batch_size=3)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), SIZES["hidden"])
    assert np.abs(got - numpy_pass.encode(TEXTS, batch_size=3)).max() < 1e-5
    for text, ids, vector in zip(TEXTS, encoder.tokenize(TEXTS), got):
        assert np.abs(vector - reference(tensors, ids, pooling)).max() < 2e-5, text
        assert np.abs(encoder.encode_query(text) - vector).max() < 1e-5, text


def test_the_onnxruntime_pass_never_imports_onnx(tiny):
    """The graph's bytes are written by _onnx_proto: a process's first query does not pay
    onnx's import (1.5 CPU s)."""
    pytest.importorskip("onnxruntime")
    code = ("import sys; from cqa_search.vectors.encoder import SentenceEncoder; "
            f"e = SentenceEncoder.load({tiny[0]!r}, backend='onnxruntime'); "
            "v = e.encode_query('how do i reset my router'); "
            "print(v.shape, 'onnx' in sys.modules, 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == f"({SIZES['hidden']},) False True"


def test_the_backend_is_checked_and_auto_prefers_onnxruntime_for_queries(tiny):
    encoder = SentenceEncoder.load(tiny[0])
    assert encoder.query_backend == ("onnxruntime" if onnx_available() else "numpy")
    assert encoder.batch_backend == "numpy"
    assert np.abs(encoder.encode_query(TEXTS[0]) - encoder.encode(TEXTS[:1])[0]).max() < 1e-5
    with pytest.raises(ParameterError, match="backend must be one of {'auto', 'numpy', "
                                             "'onnxruntime'}; got 'torch'"):
        SentenceEncoder.load(tiny[0], backend="torch")


def test_a_model_without_normalize_module_is_normalised_all_the_same(tmp_path):
    tensors = write_model(tmp_path / "m", normalize=False)
    encoder = SentenceEncoder.load(tmp_path / "m")
    vector = encoder.encode_query("what is the best way")
    want = reference(tensors, encoder.tokenize(["what is the best way"])[0], "mean")
    assert np.abs(vector - want).max() < 2e-5


def test_a_shorter_truncation_cuts_texts_and_is_recorded(tiny):
    encoder = SentenceEncoder.load(tiny[0], max_seq_length=5)
    assert encoder.identity["max_seq_length"] == 5
    ids = encoder.tokenize(["how do i reset my router"])[0]
    assert len(ids) == 5 and ids[-1] == VOCAB.index("[SEP]")
    assert np.abs(encoder.encode_query("how do i reset my router")
                  - reference(tiny[1], ids, "mean")).max() < 2e-5
    for bad in (1, 13, 4.0):
        with pytest.raises(ParameterError, match=rf"max_seq_length must be an integer in "
                                                 rf"\[2, 12\]; got {bad!r}"):
            SentenceEncoder.load(tiny[0], max_seq_length=bad)


@settings(max_examples=25, deadline=None)
@given(texts=st.lists(st.text(alphabet=" howdiresetmyrouterx?,.é", max_size=40),
                      min_size=1, max_size=12),
       batch_size=st.integers(1, 5))
def test_a_vector_does_not_depend_on_its_batch(tiny, texts, batch_size):
    encoder = SentenceEncoder.load(tiny[0])
    together = encoder.encode(texts, batch_size=batch_size)
    for text, vector in zip(texts, together):
        assert np.abs(vector - encoder.encode_query(text)).max() < 1e-5


def test_encode_keeps_the_order_of_its_input_and_checks_batch_size(tiny):
    encoder = SentenceEncoder.load(tiny[0])
    texts = ["x " * n for n in (9, 1, 5, 0, 12, 3)]
    got = encoder.encode(texts, batch_size=2, progress=True)
    assert np.abs(got - encoder.encode(texts[::-1])[::-1]).max() < 1e-6
    assert encoder.encode([]).shape == (0, SIZES["hidden"])
    with pytest.raises(ParameterError, match="batch_size must be a positive integer; got 0"):
        encoder.encode(texts, batch_size=0)


# -- the compiled passes against numpy --------------------------------------------------------
def test_erf_is_accurate_to_float32():
    x = np.linspace(-6, 6, 20001, dtype=np.float32)
    assert np.abs(_bert.erf(x) - np.array([math.erf(v) for v in x.astype(float)])).max() < 1e-6


def test_compiled_passes_equal_their_numpy_twins():
    pytest.importorskip("numba")
    assert compiled.load()
    rng = np.random.default_rng(1)
    h = (rng.standard_normal((7, 33)) * 3).astype(np.float32)
    bias = rng.standard_normal(33).astype(np.float32)
    a, b = h.copy(), h.copy()
    _bert._gelu_bias_numpy(a, bias)
    compiled.gelu_bias(b, bias, _bert._NUMERATOR, _bert._DENOMINATOR, _bert.ERF_CLAMP)
    exact = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))(
        h.astype(float) + bias)
    assert np.abs(a - exact).max() < 1e-5 and np.abs(b - exact).max() < 1e-5
    x, y = rng.standard_normal((2, 5, 24)).astype(np.float32)
    gamma, beta, bias = rng.standard_normal((3, 24)).astype(np.float32)
    a, b = x.copy(), x.copy()
    _bert._add_layer_norm_numpy(a, y, bias, gamma, beta, 1e-12)
    compiled.add_layer_norm(b, y, bias, gamma, beta, 1e-12)
    want = _layer_norm(x.astype(float) + y + bias, gamma, beta)
    assert np.abs(a - want).max() < 1e-5 and np.abs(b - want).max() < 1e-5
    scores = (rng.standard_normal((3, 2, 6, 6)) * 20).astype(np.float32)
    lengths = np.array([6, 1, 4])
    a, b = scores.copy(), scores.copy()
    _bert._softmax_keys_numpy(a, lengths)
    compiled.softmax_keys(b, lengths)
    for s, n in enumerate(lengths):
        z = scores[s, :, :n, :n].astype(float)
        want = np.exp(z - z.max(axis=-1, keepdims=True))
        want /= want.sum(axis=-1, keepdims=True)
        for got in (a, b):
            assert np.abs(got[s, :, :n, :n] - want).max() < 1e-6
            assert not got[s, :, n:].any() and not got[s, :, :, n:].any()


# -- identity ---------------------------------------------------------------------------------
def test_identity_names_the_model_and_a_different_model_is_refused(tiny, tmp_path):
    folder, _ = tiny
    identity = SentenceEncoder.load(folder).identity
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    assert identity == {"name": "tiny-bert", "base_model": "tiny/bert", "sha256": sha,
                        "dim": SIZES["hidden"], "max_seq_length": 12, "pooling": "mean"}
    check_identity(identity, SentenceEncoder.load(folder).identity)
    write_model(tmp_path / "tiny-bert", seed=9)
    other = SentenceEncoder.load(tmp_path / "tiny-bert").identity
    with pytest.raises(ParameterError, match=rf"the encoder model differs from the index's: "
                                             rf"sha256 {other['sha256'][:12]}\.\.\., not "
                                             rf"{sha[:12]}\.\.\. \(model tiny-bert"):
        check_identity(identity, other)
    with pytest.raises(ParameterError, match="pooling cls, not mean"):
        check_identity(identity, dict(identity, pooling="cls"))


# -- the model folder's errors ----------------------------------------------------------------
def _break(folder, name, content):
    path = os.path.join(folder, name)
    if content is None:
        os.remove(path)
    else:
        with open(path, "w" if isinstance(content, str) else "wb") as f:
            f.write(content)


@pytest.mark.parametrize("change, message", [
    (("tokenizer.json", None), r"no tokenizer\.json: not a sentence-transformers model folder"),
    (("1_Pooling/config.json", None), r"no 1_Pooling/config\.json"),
    (("model.safetensors", b"\x80\x04pickle"), r"not a safetensors file"),
    (("model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": 1}        "),
     r"not a readable safetensors file"),
    (("config.json", "{not json"), r"config\.json: cannot be read as JSON"),
    (("tokenizer.json", "{}"), r"tokenizer\.json: not a Hugging Face tokenizer file"),
])
def test_a_broken_folder_is_refused_with_one_line(tmp_path, change, message):
    write_model(tmp_path / "m")
    _break(tmp_path / "m", *change)
    with pytest.raises(ParameterError, match=message) as info:
        SentenceEncoder.load(tmp_path / "m")
    assert "\n" not in str(info.value)


def test_a_pickled_checkpoint_is_not_loaded(tmp_path):
    write_model(tmp_path / "m")
    os.replace(tmp_path / "m" / "model.safetensors", tmp_path / "m" / "pytorch_model.bin")
    with pytest.raises(ParameterError, match=r"no model\.safetensors: .*pytorch_model\.bin "
                                             r"is a pickle and is not loaded"):
        SentenceEncoder.load(tmp_path / "m")


@pytest.mark.parametrize("kwargs, message", [
    ({"config": {"model_type": "roberta", "architectures": ["RobertaModel"]}},
     r"unsupported architecture 'roberta' \(RobertaModel\) in config\.json: only BERT "
     r"encoders \(model_type 'bert'\) are supported"),
    ({"config": {"hidden_act": "relu"}}, r"unsupported hidden_act 'relu'"),
    ({"config": {"num_hidden_layers": 3}}, r"no tensor encoder\.layer\.2\..*not the weights "
                                           r"of a BertModel"),
    ({"config": {"hidden_size": 32}}, r"the pooling's dimension 16 differs from the "
                                      r"model's hidden size 32"),
    ({"pooling": "max"}, r"unsupported pooling \['pooling_mode_max_tokens'\]"),
])
def test_an_unsupported_model_is_refused(tmp_path, kwargs, message):
    write_model(tmp_path / "m", **kwargs)
    with pytest.raises(ParameterError, match=message):
        SentenceEncoder.load(tmp_path / "m")


def test_an_unsupported_module_and_a_missing_folder_are_refused(tmp_path):
    write_model(tmp_path / "m")
    with open(tmp_path / "m" / "modules.json") as f:
        modules = json.load(f)
    modules.append({"idx": 3, "name": "3", "path": "3_Dense",
                    "type": "sentence_transformers.models.Dense"})
    with open(tmp_path / "m" / "modules.json", "w") as f:
        json.dump(modules, f)
    with pytest.raises(ParameterError, match=r"unsupported module 'sentence_transformers\."
                                             r"models\.Dense' in modules\.json"):
        SentenceEncoder.load(tmp_path / "m")
    with pytest.raises(ParameterError, match=r"no such model folder"):
        SentenceEncoder.load(tmp_path / "nothing")


# -- unpacking a model once -------------------------------------------------------------------
def _zip(folder, path, prefix="tiny-bert/", extra=None):
    with zipfile.ZipFile(path, "w") as z:
        for root, _, files in os.walk(folder):
            for name in files:
                full = os.path.join(root, name)
                z.write(full, prefix + os.path.relpath(full, folder))
        for name, data in (extra or {}).items():
            z.writestr(name, data)


@pytest.mark.parametrize("prefix", ["tiny-bert/", ""])
def test_unpack_model_installs_a_folder_once(tiny, tmp_path, prefix):
    _zip(tiny[0], tmp_path / "tiny-bert.zip", prefix)
    folder = unpack_model(tmp_path / "tiny-bert.zip", tmp_path / "cache")
    assert folder == str(tmp_path / "cache" / "tiny-bert")
    assert np.array_equal(SentenceEncoder.load(folder).encode(TEXTS),
                          SentenceEncoder.load(tiny[0]).encode(TEXTS))
    stamp = os.stat(os.path.join(folder, "model.safetensors")).st_mtime_ns
    assert unpack_model(tmp_path / "tiny-bert.zip", tmp_path / "cache") == folder
    assert os.stat(os.path.join(folder, "model.safetensors")).st_mtime_ns == stamp


def test_unpack_model_refuses_what_is_not_a_model(tiny, tmp_path):
    _zip(tiny[0], tmp_path / "evil.zip", "", {"../escape.txt": "x"})
    with pytest.raises(ParameterError, match=r"'\.\./escape\.txt' points outside the folder"):
        unpack_model(tmp_path / "evil.zip", tmp_path / "cache")
    assert not os.path.exists(tmp_path / "escape.txt")
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as z:
        z.writestr("readme.txt", "no model")
    with pytest.raises(ParameterError, match=r"no modules\.json: not a zipped "
                                             r"sentence-transformers model folder"):
        unpack_model(tmp_path / "empty.zip", tmp_path / "cache")
    with pytest.raises(ParameterError, match=r"not a readable zip file"):
        unpack_model(tmp_path / "missing.zip", tmp_path / "cache")


# -- the real model, when a folder is given ---------------------------------------------------
REAL = os.environ.get("CQA_SEARCH_ENCODER_MODEL")


@pytest.mark.skipif(not REAL, reason="set CQA_SEARCH_ENCODER_MODEL to a model folder "
                                     "(all-MiniLM-L6-v2) to run")
def test_the_real_model_loads_and_ranks_a_paraphrase_first():
    encoder = SentenceEncoder.load(REAL)
    if encoder.identity["name"] == "all-MiniLM-L6-v2":
        assert encoder.identity["sha256"] == ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895"
                                              "114379cacb4fab128d9db")
        assert (encoder.dim, encoder.max_seq_length) == (384, 256)
    v = encoder.encode(["how to get rid of a stuffy nose?",
                        "what is the best way to prevent a cold?",
                        "how do I renew my residence visa"])
    assert v[1] @ v[0] > v[2] @ v[0]
