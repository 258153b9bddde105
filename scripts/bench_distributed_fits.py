#!/usr/bin/env python3
"""Model fits on a local Ray session beside the same fits in one process.

On an index (built by ``cqa-search build-index``), fits in the same run:

* IBM Model 1 on the index's pooled question-answer pairs (``--ibm1-iter`` EM iterations,
  no pruning), in process and with the E-step as Ray tasks over ``--shards`` shards of
  the pairs; reports the largest difference between the two tables and log-likelihoods;
* GNMFNC on the index's tf-idf term-question matrix grouped by category (the topic model
  of ``cqa-search fit INDEX topics``, ``--gnmf-iter`` sweeps), in process and with the
  categories' blocks as Ray tasks; reports the largest relative difference between the
  two objective trajectories.

Wall seconds and the driver's CPU seconds (the Ray tasks' work runs in worker processes).
The load average is printed before and after each fit: the machine may be shared.

Usage: scripts/bench_distributed_fits.py INDEX [--shards 2] [--ibm1-iter 5] [--gnmf-iter 10]
"""
from __future__ import annotations

import argparse

import numpy as np

from cqa_search import SearchEngine
from cqa_search.distributed._ray import connect
from cqa_search.distributed.fitting import ray_fits
from cqa_search.factorization.topics import TopicModel
from cqa_search.translation import IBMModel1
from cqa_search.translation.corpus import build_parallel_corpus

from _common import load_average, timed


def load():
    return f"load {load_average()}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("index")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--ibm1-iter", type=int, default=5)
    ap.add_argument("--gnmf-iter", type=int, default=10)
    args = ap.parse_args(argv)
    view = SearchEngine.open(args.index).view
    print(f"ray.init {timed(connect).wall:.1f} s | {load()}", flush=True)
    corpus, _ = build_parallel_corpus(view, textrank=False)
    print(f"parallel corpus: {corpus.n_pairs:,} pairs, {len(corpus.target):,} target words",
          flush=True)

    def ibm1():
        return IBMModel1(max_iter=args.ibm1_iter, tol=None, min_prob=0).fit(corpus)

    one, w1, c1 = timed(ibm1)
    print(f"IBM1 in process: {w1:.1f} s (CPU {c1:.1f} s) | {load()}", flush=True)
    with ray_fits(args.shards):
        many, w2, c2 = timed(ibm1)
    diff = np.abs(one.translation_probs_ - many.translation_probs_).max()
    ll = max(abs(a - b) / abs(a) for a, b in zip(one.log_likelihood_, many.log_likelihood_))
    print(f"IBM1 on Ray, {args.shards} shards: {w2:.1f} s (driver CPU {c2:.1f} s), "
          f"{w1 / w2:.2f}x the in-process speed; table max |diff| {diff:.1e}, "
          f"log-likelihood max relative diff {ll:.1e} | {load()}", flush=True)

    def gnmf():
        return TopicModel("gnmfnc", max_iter=args.gnmf_iter, tol=0, random_state=0).fit(view)

    one, w1, c1 = timed(gnmf)
    print(f"GNMFNC in process: {w1:.1f} s (CPU {c1:.1f} s), {len(one.categories_)} "
          f"categories | {load()}", flush=True)
    with ray_fits(args.shards):
        many, w2, c2 = timed(gnmf)
    rel = np.max(np.abs(one.loss_curve_ - many.loss_curve_) / one.loss_curve_)
    print(f"GNMFNC on Ray, {args.shards} parts: {w2:.1f} s (driver CPU {c2:.1f} s), "
          f"{w1 / w2:.2f}x the in-process speed; objective trajectory max relative diff "
          f"{rel:.1e} | {load()}", flush=True)


if __name__ == "__main__":
    main()
