#!/usr/bin/env python3
"""Speed and memory of the translation models on a synthetic archive.

1. One EM iteration of IBM Model 1 over the first N question-answer pairs (default
   100,000; every answer, no pooling, no TextRank) of an archive written by
   ../shared/bench/synth_archive.py, beside eflomal (``Aligner(model=1,
   n_iterations=(1, 0, 0), n_samplers=1)``, the whole ``align`` call) and NLTK's
   ``IBMModel1`` (one iteration on the first 5,000 pairs), all in the same run on the
   same term-id sentences.
2. The full ``TranslationModel().fit`` with its defaults (pooling, TextRank, EM, phrases) on the
   whole archive: time per stage, table sizes on disk and in memory, TextRank shrink.
3. Scoring the eight translation features of the BM25 top-100 candidates of queries
   (archive titles), in milliseconds per query (wall clock and process CPU time).

Usage: scripts/bench_translation.py [--archive /work/tmp/synth100k.jsonl] [--work DIR]
       [--pairs 100000] [--nltk-pairs 5000] [--queries 200] [--out FILE.md]
Run it under ``nice``; ratios are measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import warnings
from importlib import metadata

import numpy as np

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.index.models import add_model
from cqa_search.index.store import is_compatible, open_index
from cqa_search.retrieval import top_k
from cqa_search.translation import IBMModel1, TranslationModel, build_parallel_corpus

from _common import SYNTH, Clock, dir_bytes, timed, write_report


def lines(corpus, side):
    flat, off = ((corpus.source, corpus.source_offsets) if side == "source"
                 else (corpus.target, corpus.target_offsets))
    words = np.char.add("t", flat.astype(str))
    return [" ".join(words[off[k]:off[k + 1]]) + "\n" for k in range(corpus.n_pairs)]


def bench_eflomal(corpus):
    try:
        import eflomal
    except ImportError:
        return None
    src, tgt = lines(corpus, "source"), lines(corpus, "target")
    with tempfile.TemporaryDirectory() as tmp:
        links = os.path.join(tmp, "fwd.links")
        with Clock() as clock:
            eflomal.Aligner(model=1, n_iterations=(1, 0, 0), n_samplers=1).align(
                src, tgt, links_filename_fwd=links, quiet=True)
    return clock.wall   # the work is done by eflomal's binary (a child process): wall clock


def bench_nltk(corpus, n_pairs):
    try:
        from nltk.translate import AlignedSent, IBMModel1 as NltkIBM1
    except ImportError:
        return None
    sub = corpus.head(n_pairs)
    bitext = [AlignedSent(*[list(map(str, x)) for x in sub.pair(k)[::-1]])
              for k in range(sub.n_pairs)]
    with Clock() as clock:
        NltkIBM1(bitext, 1)
    return clock.wall, clock.cpu


def held_bytes(obj, seen=None):
    """Bytes of the numpy arrays (and scipy sparse matrices) an object holds."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if hasattr(obj, "indptr") and hasattr(obj, "data"):          # scipy sparse
        return sum(held_bytes(getattr(obj, a), seen) for a in ("data", "indices", "indptr"))
    if isinstance(obj, (list, tuple)):
        return sum(held_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(held_bytes(x, seen) for x in obj.values())
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("cqa_search.translation"):
        return sum(held_bytes(x, seen) for x in vars(obj).values())
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archive", default="/work/tmp/synth100k.jsonl")
    ap.add_argument("--size", type=int, default=100_000,
                    help="questions to generate when --archive does not exist")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_bench_translation"))
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--nltk-pairs", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--out", help="also write the Markdown report to this file")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    report = []

    def say(text=""):
        print(text, flush=True)
        report.append(text)

    if not os.path.exists(args.archive):
        subprocess.run([sys.executable, SYNTH, str(args.size), args.archive], check=True)
    index = os.path.join(args.work, "index")
    if not is_compatible(index):
        build_index(args.archive, index)
    engine = SearchEngine.open(index)
    say(f"archive: {args.archive} ({engine.n_docs:,} questions, "
        f"{len(engine.index.vocab):,} terms); {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at start")

    # -- 1. one EM iteration ---------------------------------------------------------------
    corpus, _ = build_parallel_corpus(engine.view, pooling=False, textrank=False)
    corpus = corpus.head(args.pairs)
    say(f"\n## One IBM Model 1 EM iteration: {corpus.n_pairs:,} question-answer pairs "
        f"({len(corpus.source):,} source and {len(corpus.target):,} target words)\n")
    ours, total_wall, total_cpu = timed(lambda: IBMModel1(max_iter=2, tol=None).fit(corpus))
    setup, iters = ours.timings_["setup"], ours.timings_["iterations"]
    efl = bench_eflomal(corpus)
    nl = bench_nltk(corpus, args.nltk_pairs)
    say("| system | what is timed | seconds | vs eflomal |")
    say("|---|---|---:|---:|")
    say(f"| cqa_search IBMModel1 | one EM iteration (E + M step), mean of 2 | "
        f"{np.mean(iters):.2f} | {np.mean(iters) / efl:.2f}x |" if efl else
        f"| cqa_search IBMModel1 | one EM iteration | {np.mean(iters):.2f} | |")
    say(f"| cqa_search IBMModel1 | set-up (cells sorted by table entry), once per fit | "
        f"{setup:.2f} | |")
    say(f"| cqa_search IBMModel1 | set-up + 1 iteration | {setup + iters[0]:.2f} | "
        + (f"{(setup + iters[0]) / efl:.2f}x |" if efl else "|"))
    if efl:
        say(f"| eflomal {metadata.version('eflomal')} | Aligner(model=1, n_iterations=(1,0,0), "
            f"n_samplers=1).align: whole call (text in, 1 iteration, links out) | "
            f"{efl:.2f} | 1.00x |")
    if nl:
        per_pair = nl[0] / args.nltk_pairs
        say(f"| nltk IBMModel1 | 1 iteration on {args.nltk_pairs:,} pairs (+ its final "
            f"alignment) | {nl[0]:.2f} | (x{corpus.n_pairs // args.nltk_pairs} pairs: "
            f"~{per_pair * corpus.n_pairs:.0f} s) |")
    say(f"\n(cqa_search: {ours.n_cooccurrences_:,} table entries; fit of 2 iterations took "
        f"{total_wall:.1f} s wall, {total_cpu:.1f} s CPU)")

    # -- 2. the whole model ----------------------------------------------------------------
    say("\n## TranslationModel().fit with defaults on the whole archive\n")
    model = TranslationModel().fit(engine.view)
    s = model.summary_
    say("```\n" + str(s) + "\n```")
    plain = TranslationModel(textrank=False, max_iter=model.ibm1_.n_iter_, tol=None).fit(
        engine.view)
    say(f"\nTextRank: translations per source word {plain.summary_.translations_per_word:.1f}"
        f" -> {s.translations_per_word:.1f} (entries >= min_prob); co-occurring words "
        f"{plain.summary_.cooccurrences_per_word:.1f} -> {s.cooccurrences_per_word:.1f}; "
        f"phrase pairs {plain.summary_.phrase_pairs:,} -> {s.phrase_pairs:,}")
    add_model(index, "translation", model)
    head = open_index(index)
    stored = head.manifest["models"]["translation"]["dir"]
    disk = dir_bytes(os.path.join(head.root, stored))
    loaded = SearchEngine.open(index, mmap=False)
    ram = held_bytes(loaded.models["translation"])
    index_arrays = {id(f.sequence) for f in loaded.index.fields.values()}
    ram_scorer = held_bytes(loaded.models["translation"].scorer(loaded.view), index_arrays)
    say(f"\nTables: {disk / 2**20:.1f} MiB on disk (models/{os.path.basename(stored)}); in "
        f"memory {ram / 2**20:.1f} MiB for the loaded model (stored arrays + derived phrase "
        f"probabilities) and {ram_scorer / 2**20:.1f} MiB with its scorer (adds a column-major "
        f"copy of the word table)")
    tight = TranslationModel(unaligned_edges=False).fit(engine.view)
    say(f"\nWith tight bi-phrases (`unaligned_edges=False`, `--tight-phrases`): "
        f"{tight.summary_.phrase_pairs:,} bi-phrases, "
        f"{sum(tight.summary_.nbytes.values()) / 2**20:.1f} MiB of arrays "
        f"({tight.summary_.seconds['phrases']:.1f} s for the phrases)")

    # -- 3. scoring --------------------------------------------------------------------------
    rng = random.Random(0)
    rows = rng.sample(range(engine.n_docs), args.queries)
    texts = [engine.archive[r].title or engine.archive[r].body for r in rows]
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    work = []
    retrieval = engine.config.retrieval
    for text in texts:
        q = engine.analyze(text)
        scores, matched = retrieval.score_all(engine.index["question"], q.term_ids, q.qtf)
        work.append((q, top_k(scores, args.candidates, allowed=matched)))
    scorer = engine.models["translation"].scorer(engine.view)
    walls, cpus = [], []
    for q, cand in work:
        q.cache.clear()
        with Clock() as clock:
            scorer.score(q, cand)
        walls.append(clock.wall)
        cpus.append(clock.cpu)
    n_terms = np.mean([len(q.sequence) for q, _ in work])
    say(f"\n## Scoring the eight translation features of {args.candidates} candidates "
        f"({args.queries} queries, {n_terms:.1f} query terms on average)\n")
    say("| clock | mean ms/query | median | 90th percentile |")
    say("|---|---:|---:|---:|")
    for name, vals in (("wall", walls), ("process CPU", cpus)):
        v = 1000 * np.array(vals)
        say(f"| {name} | {v.mean():.1f} | {np.median(v):.1f} | {np.percentile(v, 90):.1f} |")
    tight_scorer = tight.scorer(engine.view)
    tight_cpu = []
    for q, cand in work:
        q.cache.clear()
        with Clock() as clock:
            tight_scorer.score(q, cand)
        tight_cpu.append(clock.wall)
    say(f"| wall, tight bi-phrases | {1000 * np.mean(tight_cpu):.1f} | "
        f"{1000 * np.median(tight_cpu):.1f} | {1000 * np.percentile(tight_cpu, 90):.1f} |")
    with Clock() as clock:
        for text in texts:
            engine.search(text, k=args.candidates)
    w, c = clock.wall, clock.cpu
    say(f"\nWhole engine.search (BM25 top-{args.candidates} + every feature, translation "
        f"included): {1000 * w / len(texts):.1f} ms/query wall, {1000 * c / len(texts):.1f} "
        f"ms CPU")
    say(f"\n(load average {os.getloadavg()[0]:.1f} at the end)")
    write_report(args.out, "\n".join(report))


if __name__ == "__main__":
    main()
