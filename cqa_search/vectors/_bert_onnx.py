"""The forward pass of a BERT encoder through onnxruntime: an ONNX graph built from the
weights of :class:`._bert.BertWeights`, without torch.

:func:`build_graph` writes the same arithmetic as :func:`._bert.forward` (fused query, key
and value projection with the scores' scale folded in, post-LN layers, the exact GELU,
mean or CLS pooling) as a standard ONNX graph (opset 20), the weights as initializers,
written as protobuf bytes by :mod:`._onnx_proto` (through ``onnx``, a process's first query
spent 2 of its 2.6 CPU seconds importing it and building the graph); :class:`OnnxForward`
runs it in one onnxruntime session on one thread. Why: numpy's BLAS packs a weight matrix
at every product, which dominates the products of a few token rows (a query);
onnxruntime packs its constant weights once when the session starts, and fuses the bias,
GELU and LayerNorm passes into its kernels (BENCHMARKS.md, "The pretrained sentence
encoder": the measurement behind the choice).

A batch is a padded ``(b, n)`` block of token ids with a ``(b, n)`` mask (1 for a token,
0 for padding): padded keys get ``-1e30`` before the softmax and padded rows are left out
of the mean, so each sequence's vector is that of the sequence alone (up to rounding).
The caller sorts sequences by length, so the padding is a few tokens.
"""
from __future__ import annotations

import numpy as np

from . import _onnx_proto as proto

__all__ = ["build_graph", "OnnxForward", "OPSET"]

#: ONNX opset of the graph (``Gelu`` and ``LayerNormalization`` are standard ops there).
OPSET = 20


def build_graph(weights, *, pooling="mean") -> bytes:
    """The serialized ONNX model (``ModelProto`` bytes) of the forward pass of ``weights``.

    Parameters
    ----------
    weights : BertWeights
    pooling : {"mean", "cls"}

    Returns
    -------
    bytes
        Inputs ``ids`` (int64, ``(b, n)``) and ``mask`` (float32, ``(b, n)``); output
        ``pooled`` (float32, ``(b, H)``), not normalised. Written by :mod:`._onnx_proto`
        (no ``onnx`` import); ``onnx.load_from_string`` reads it.
    """
    w = weights
    h, heads = w.hidden, w.n_heads
    d = h // heads
    nodes, inits = [], []

    def const(name, value):
        inits.append(proto.tensor(name, np.asarray(value)))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(proto.node(op, inputs, [name], name, **attrs))
        return name

    # embeddings: word + position + token type 0 (folded into the position table), LN
    const("word", w.word)
    const("position", (w.position + w.token_type).astype(np.float32))
    const("emb_gamma", w.ln[0])
    const("emb_beta", w.ln[1])
    const("i0", np.array(0, np.int64))
    const("i1", np.array(1, np.int64))
    const("ax1", np.array([1], np.int64))
    const("ax2", np.array([2], np.int64))
    const("neg", np.array(1e30, np.float32))
    const("one", np.array(1.0, np.float32))
    const("heads_shape", np.array([0, 0, heads, d], np.int64))
    const("hidden_shape", np.array([0, 0, h], np.int64))
    node("Shape", ["ids"], "ids_shape")
    node("Gather", ["ids_shape", "i1"], "n", axis=0)
    node("Range", ["i0", "n", "i1"], "positions")
    node("Gather", ["word", "ids"], "tok")
    node("Gather", ["position", "positions"], "pos")
    node("Add", ["tok", "pos"], "emb")
    x = node("LayerNormalization", ["emb", "emb_gamma", "emb_beta"], "x0", axis=-1,
             epsilon=w.eps)
    # the keys' mask: 0 for a token, -1e30 for padding, shape (b, 1, 1, n)
    node("Sub", ["mask", "one"], "mask_off")
    node("Mul", ["mask_off", "neg"], "mask_neg")
    node("Unsqueeze", ["mask_neg", "ax1"], "mask_b1n")
    node("Unsqueeze", ["mask_b1n", "ax1"], "key_bias")
    def linear(x, p, name, layer, output_names):
        """x W + b of the layer's ``name`` weights (nodes named by ``output_names``)."""
        y = node("MatMul", [x, const(p + name, layer[name])], p + output_names[0])
        return node("Add", [y, const(p + name + "_b", layer[name + "_bias"])],
                    p + output_names[1])

    def add_norm(o, x, p, layer, j):
        """LayerNorm(o + x), the layer's ``ln{j}`` (post-LN)."""
        o = node("Add", [o, x], p + f"res{j}")
        return node("LayerNormalization", [o, const(p + f"ln{j}_g", layer[f"ln{j}"][0]),
                                           const(p + f"ln{j}_b", layer[f"ln{j}"][1])],
                    p + f"x{j}", axis=-1, epsilon=w.eps)

    for i, layer in enumerate(w.layers):
        p = f"l{i}_"
        qkv = linear(x, p, "qkv", layer, ("qkv_x", "qkv_y"))
        nodes.append(proto.node("Split", [qkv], [p + "q", p + "k", p + "v"], p + "split",
                                axis=-1, num_outputs=3))
        q, k, v = (node("Reshape", [p + s, "heads_shape"], p + s + "_r") for s in "qkv")
        q = node("Transpose", [q], p + "qt", perm=[0, 2, 1, 3])           # (b, A, n, d)
        k = node("Transpose", [k], p + "kt", perm=[0, 2, 3, 1])           # (b, A, d, n)
        v = node("Transpose", [v], p + "vt", perm=[0, 2, 1, 3])
        s = node("MatMul", [q, k], p + "scores")
        s = node("Add", [s, "key_bias"], p + "masked")
        s = node("Softmax", [s], p + "probs", axis=-1)
        c = node("MatMul", [s, v], p + "ctx")
        c = node("Transpose", [c], p + "ctx_t", perm=[0, 2, 1, 3])        # (b, n, A, d)
        c = node("Reshape", [c, "hidden_shape"], p + "ctx_r")
        x = add_norm(linear(c, p, "out", layer, ("o", "o_b")), x, p, layer, 1)
        u = node("Gelu", [linear(x, p, "up", layer, ("u", "u_b"))], p + "gelu")
        x = add_norm(linear(u, p, "down", layer, ("dn", "dn_b")), x, p, layer, 2)
    if pooling == "cls":
        node("Gather", [x, "i0"], "pooled", axis=1)
    else:
        node("Unsqueeze", ["mask", "ax2"], "mask_bn1")
        node("Mul", [x, "mask_bn1"], "kept")
        node("ReduceSum", ["kept", "ax1"], "sums", keepdims=0)
        node("ReduceSum", ["mask", "ax1"], "counts", keepdims=1)
        node("Div", ["sums", "counts"], "pooled")
    graph = proto.graph(nodes, "bert",
                        [proto.value_info("ids", proto.INT64, ["b", "n"]),
                         proto.value_info("mask", proto.FLOAT, ["b", "n"])],
                        [proto.value_info("pooled", proto.FLOAT, ["b", h])], inits)
    return proto.model(graph, {"": OPSET}, producer_name="cqa_search")


class OnnxForward:
    """An onnxruntime session of :func:`build_graph`, one thread: :meth:`__call__` has the
    signature of :func:`._bert.forward` (packed ids, lengths) and returns the same pooled
    rows (to float32 rounding).

    Parameters
    ----------
    weights : BertWeights
    pooling : {"mean", "cls"}
    """

    def __init__(self, weights, *, pooling="mean"):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = \
            onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3          # no warnings about unused initializers
        self._session = onnxruntime.InferenceSession(
            build_graph(weights, pooling=pooling), options,
            providers=["CPUExecutionProvider"])

    def __call__(self, ids, lengths) -> np.ndarray:
        lengths = np.asarray(lengths, dtype=np.int64)
        b, n = len(lengths), int(lengths.max())
        keep = np.arange(n)[None, :] < lengths[:, None]
        block = np.zeros((b, n), dtype=np.int64)
        block[keep] = ids
        return self._session.run(["pooled"], {"ids": block,
                                              "mask": keep.astype(np.float32)})[0]
