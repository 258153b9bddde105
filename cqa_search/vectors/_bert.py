"""The forward pass of a BERT encoder in numpy: packed token rows, no padding in the
dense layers.

A batch of token sequences is packed into one ``(n_tokens, hidden)`` matrix: every dense
layer (the query/key/value projection, the attention output, the feed-forward network)
is one BLAS product over all the batch's tokens, so no row is spent on padding. Only
self-attention needs the sequences apart: it scatters the packed rows into a padded
``(sequences, heads, length, head_dim)`` block, a few sequences at a time, and masks the
padded keys; the caller sorts sequences by length, so the padding there is a few rows.

Notation (Devlin et al. 2019, the Hugging Face ``BertModel``): hidden size ``H``, ``A``
heads of ``d = H / A`` dimensions, feed-forward size ``I``; a layer is::

    q, k, v = x Wq + bq, x Wk + bk, x Wv + bv
    x = LayerNorm(x + softmax(q k^T / sqrt(d) + mask) v Wo + bo)       (post-LN)
    x = LayerNorm(x + GELU(x W1 + b1) W2 + b2)

GELU is the exact one, ``x Phi(x) = x (1 + erf(x / sqrt 2)) / 2``, with erf computed by a
rational function of float32 accuracy (:func:`erf`): scipy's erf costs 15 ns a value here,
40 % of a layer's time.

The arithmetic is float32 with BLAS products; :mod:`cqa_search.compiled` runs the bias,
GELU and LayerNorm passes as numba kernels (one pass over the rows instead of a dozen
numpy passes), and these numpy functions are their reference and fallback.
"""
from __future__ import annotations

import numpy as np

from .. import compiled

__all__ = ["BertWeights", "forward", "erf", "gelu_bias", "add_layer_norm",
           "ERF_NUMERATOR", "ERF_DENOMINATOR", "ERF_CLAMP"]

#: The rational approximation of erf on [-4, 4] (Eigen's ``generic_fast_erf_float``):
#: ``erf(x) ~ x P(x^2) / Q(x^2)``, coefficients from the highest power down; outside the
#: interval erf is +-1 in float32.
ERF_NUMERATOR = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                 -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                 -1.60960333262415e-02)
ERF_DENOMINATOR = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                   -7.37332916720468e-03, -1.42647390514189e-02)
ERF_CLAMP = 4.0
_NUMERATOR = np.array(ERF_NUMERATOR, dtype=np.float32)
_DENOMINATOR = np.array(ERF_DENOMINATOR, dtype=np.float32)
#: Scores of the padded keys before the softmax (exp underflows to exactly 0).
_MASKED = -1e30
#: Attention scores held at once (sequences x heads x length x length), float32: 4 MiB,
#: so that a block of scores stays in the cache between the two products.
_SCORES_BUDGET = 1 << 20


def erf(x):
    """erf of a float32 array by the rational approximation (absolute error < 1e-6).

    Examples
    --------
    >>> import math
    >>> x = np.linspace(-5, 5, 101, dtype=np.float32)
    >>> bool(np.abs(erf(x) - [math.erf(v) for v in x]).max() < 1e-6)
    True
    """
    x = np.clip(np.asarray(x, dtype=np.float32), -ERF_CLAMP, ERF_CLAMP)
    x2 = x * x
    p = np.full_like(x, _NUMERATOR[0])
    for c in _NUMERATOR[1:]:
        p *= x2
        p += c
    q = np.full_like(x, _DENOMINATOR[0])
    for c in _DENOMINATOR[1:]:
        q *= x2
        q += c
    p *= x
    p /= q
    return p


def _gelu_bias_numpy(h, bias):
    h += bias
    e = erf(h * np.float32(0.7071067811865476))
    e += np.float32(1.0)
    h *= np.float32(0.5)
    h *= e


def gelu_bias(h, bias) -> None:
    """``h = GELU(h + bias)`` in place (``h``: float32 ``(n, I)``, C-contiguous)."""
    if compiled.active() == "numba":  # the same arithmetic, one pass compiled
        compiled.gelu_bias(h, bias, _NUMERATOR, _DENOMINATOR, ERF_CLAMP)
    else:
        compiled.timed(_gelu_bias_numpy, h, bias)


def _add_layer_norm_numpy(x, y, bias, gamma, beta, eps):
    x += y
    x += bias
    mean = x.mean(axis=1, keepdims=True)
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[1])
    x *= 1.0 / np.sqrt(var + np.float32(eps))
    x *= gamma
    x += beta


def add_layer_norm(x, y, bias, gamma, beta, eps) -> None:
    """``x = LayerNorm(x + y + bias)`` in place, row by row (``x`` and ``y``: float32
    ``(n, H)``, C-contiguous; ``bias``, ``gamma``, ``beta``: ``(H,)``)."""
    if compiled.active() == "numba":  # the same arithmetic, one pass compiled
        compiled.add_layer_norm(x, y, bias, gamma, beta, eps)
    else:
        compiled.timed(_add_layer_norm_numpy, x, y, bias, gamma, beta, eps)


class BertWeights:
    """The arrays of a ``BertModel`` laid out for :func:`forward`.

    Parameters
    ----------
    tensors : dict of str to ndarray
        The model's tensors by their Hugging Face names (``embeddings.word_embeddings.weight``,
        ``encoder.layer.0.attention.self.query.weight``, ...; a ``bert.`` prefix is
        dropped), as :func:`safetensors.numpy.load_file` gives them.
    n_layers, n_heads : int
    layer_norm_eps : float

    Raises
    ------
    KeyError
        A tensor is missing (its name).
    ValueError
        A tensor has the wrong shape (its name and shape).

    Notes
    -----
    The matrices are stored ``(in, out)``, C-contiguous (Hugging Face stores ``(out, in)``):
    a product of a few rows (a query) by a transposed view ran 1.5 times slower. The
    query, key and value projections are fused into one ``(H, 3H)`` matrix, the query's
    columns scaled by ``1 / sqrt(d)`` (the scores' scale folded into the weights).
    """

    def __init__(self, tensors, *, n_layers, n_heads, layer_norm_eps):
        t = {(name[5:] if name.startswith("bert.") else name): value
             for name, value in tensors.items()}

        def get(name, shape):
            value = t[name]
            if value.shape != shape:
                raise ValueError(f"tensor {name} has shape {value.shape}; "
                                 f"expected {shape}")
            return np.ascontiguousarray(value, dtype=np.float32)

        self.word = t["embeddings.word_embeddings.weight"].astype(np.float32, copy=False)
        vocab, hidden = self.word.shape
        if hidden % n_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of {n_heads} heads")
        self.hidden, self.n_heads, self.eps = hidden, n_heads, float(layer_norm_eps)
        self.position = t["embeddings.position_embeddings.weight"].astype(np.float32,
                                                                          copy=False)
        if self.position.ndim != 2 or self.position.shape[1] != hidden:
            raise ValueError(f"tensor embeddings.position_embeddings.weight has shape "
                             f"{self.position.shape}; expected (n, {hidden})")
        self.token_type = get("embeddings.token_type_embeddings.weight",
                              t["embeddings.token_type_embeddings.weight"].shape[:1]
                              + (hidden,))[0].copy()
        self.ln = (get("embeddings.LayerNorm.weight", (hidden,)),
                   get("embeddings.LayerNorm.bias", (hidden,)))
        scale = np.float32(1.0 / np.sqrt(hidden // n_heads))

        def t_(name, shape):   # (out, in) as stored -> (in, out), C-contiguous
            return np.ascontiguousarray(get(name, shape).T)

        self.layers = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            inner = t[p + "intermediate.dense.weight"].shape[0]
            qkv = np.concatenate([get(a + "self.query.weight", (hidden, hidden)) * scale,
                                  get(a + "self.key.weight", (hidden, hidden)),
                                  get(a + "self.value.weight", (hidden, hidden))])
            self.layers.append({
                "qkv": np.ascontiguousarray(qkv.T),
                "qkv_bias": np.concatenate([get(a + "self.query.bias", (hidden,)) * scale,
                                            get(a + "self.key.bias", (hidden,)),
                                            get(a + "self.value.bias", (hidden,))]),
                "out": t_(a + "output.dense.weight", (hidden, hidden)),
                "out_bias": get(a + "output.dense.bias", (hidden,)),
                "ln1": (get(a + "output.LayerNorm.weight", (hidden,)),
                        get(a + "output.LayerNorm.bias", (hidden,))),
                "up": t_(p + "intermediate.dense.weight", (inner, hidden)),
                "up_bias": get(p + "intermediate.dense.bias", (inner,)),
                "down": t_(p + "output.dense.weight", (hidden, inner)),
                "down_bias": get(p + "output.dense.bias", (hidden,)),
                "ln2": (get(p + "output.LayerNorm.weight", (hidden,)),
                        get(p + "output.LayerNorm.bias", (hidden,))),
            })

    @property
    def max_positions(self) -> int:
        """The longest sequence the position embeddings cover."""
        return self.position.shape[0]


def _softmax_keys_numpy(scores, lengths):
    n = scores.shape[-1]
    keys = np.arange(n)[None, :] < np.asarray(lengths)[:, None]          # (b, n)
    scores += np.where(keys, np.float32(0), np.float32(_MASKED))[:, None, None, :]
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    scores *= keys[:, None, :, None]                                     # padded queries


def softmax_keys(scores, lengths) -> None:
    """Softmax of each row of ``scores`` (float32 ``(b, heads, n, n)``, C-contiguous) over
    the first ``lengths[b]`` keys, in place; the padded keys and query rows get 0."""
    if compiled.active() == "numba":  # the same values to rounding, one pass a row
        compiled.softmax_keys(scores, lengths)
    else:
        compiled.timed(_softmax_keys_numpy, scores, lengths)


def _attention(qkv, lengths, starts, n_heads):
    """Self-attention of each sequence over its own tokens: ``(n_tokens, H)`` context
    rows from the packed ``(n_tokens, 3H)`` projections."""
    n_tokens, three_h = qkv.shape
    hidden = three_h // 3
    d = hidden // n_heads
    out = np.empty((n_tokens, hidden), dtype=np.float32)
    n_seq = len(lengths)
    i = 0
    while i < n_seq:
        # as many sequences as fit the scores budget (at least one)
        j, longest = i + 1, int(lengths[i])
        while j < n_seq:
            longest_next = max(longest, int(lengths[j]))
            if (j + 1 - i) * n_heads * longest_next * longest_next > _SCORES_BUDGET:
                break
            longest, j = longest_next, j + 1
        lens = lengths[i:j]
        first, last = int(starts[i]), int(starts[j - 1] + lengths[j - 1])
        if np.all(lens == longest):  # no padding: a reshape of the packed rows
            block, rows = qkv[first:last].reshape(j - i, longest, 3, n_heads, d), None
        else:
            rows = np.arange(longest)[None, :] < lens[:, None]
            block = np.zeros((j - i, longest, 3, n_heads, d), dtype=np.float32)
            block[rows] = qkv[first:last].reshape(-1, 3, n_heads, d)
        # each head's rows contiguous: BLAS runs twice as fast as on the strided views
        q = np.ascontiguousarray(block[:, :, 0].transpose(0, 2, 1, 3))   # (b, heads, n, d)
        k = np.ascontiguousarray(block[:, :, 1].transpose(0, 2, 3, 1))   # (b, heads, d, n)
        v = np.ascontiguousarray(block[:, :, 2].transpose(0, 2, 1, 3))
        scores = np.matmul(q, k)                                         # (b, heads, n, n)
        softmax_keys(scores, lens)
        context = np.matmul(scores, v).transpose(0, 2, 1, 3)             # (b, n, heads, d)
        out[first:last] = (context.reshape(-1, hidden) if rows is None
                           else context[rows].reshape(-1, hidden))
        i = j
    return out


def forward(weights: BertWeights, ids, lengths, *, pooling="mean"):
    """Pooled outputs of a batch of token sequences.

    Parameters
    ----------
    weights : BertWeights
    ids : ndarray of int, shape (n_tokens,)
        The sequences' token ids one after another (each with its ``[CLS]`` and
        ``[SEP]``).
    lengths : ndarray of int, shape (n_sequences,)
        Each sequence's length (>= 1; sorted, for the least padding in attention).
    pooling : {"mean", "cls"}
        The mean of each sequence's last hidden states, or its first token's.

    Returns
    -------
    ndarray of float32, shape (n_sequences, H)
        Not normalised.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    positions = np.arange(len(ids)) - np.repeat(starts, lengths)
    w = weights
    x = w.word[ids]
    add_layer_norm(x, w.position[positions], w.token_type, *w.ln, w.eps)
    for layer in w.layers:
        qkv = x @ layer["qkv"]
        qkv += layer["qkv_bias"]
        context = _attention(qkv, lengths, starts, w.n_heads)
        add_layer_norm(x, context @ layer["out"], layer["out_bias"], *layer["ln1"], w.eps)
        h = x @ layer["up"]
        gelu_bias(h, layer["up_bias"])
        add_layer_norm(x, h @ layer["down"], layer["down_bias"], *layer["ln2"], w.eps)
    if pooling == "cls":
        return x[starts]
    sums = np.add.reduceat(x, starts, axis=0)
    return sums / lengths[:, None].astype(np.float32)
