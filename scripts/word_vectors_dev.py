#!/usr/bin/env python3
"""Which learner of word vectors serves the learned pipeline best, on dev data only (issue 26).

The embeddings model (:class:`cqa_search.vectors.EmbeddingModel`) is refitted with each
learner of :data:`VARIANTS` on an index of ``scripts/full_retrieval.py --work WORK``
(default analysis, every other model as stored), then the whole learned pipeline is
measured as ``cqa-search train`` builds it: the hybrid first stage's ``a`` chosen on the
training queries (:func:`full_retrieval.choose_weight`), the feature table of its top 100
(:func:`cqa_search.training.training_table`: the vectors change both the candidates and
the SIF, mean-embedding and soft-cosine features), and a LinearRankerCV with ``train``'s
defaults, scored by query-grouped 5-fold cross-validation (trec AP at depth 100) on:

- ``semeval-train``: SemEval-2016 train-part2's 61 original questions over the
  full-retrieval archive (``a`` chosen on all of them);
- ``demo``: the demo's 28 training queries (``a`` chosen on them);
- ``semeval`` and ``stackexchange``: the training queries of each of the scored
  collection's 5 folds, 5-fold cross-validated inside them (``a`` chosen on the fold's
  training queries); the fold's test queries are never read.

No scored query's label is read. Each run writes ``WORK/word_vectors_dev/COLL-VARIANT.json``
(per-query AP, the choices, the fit's CPU seconds); ``--table`` prints every variant against
``ppmi-svd`` (U·S^0.5, the default before this measure) with paired t-test p-values per dev set and pooled.

``VARIANT@SEED`` refits with another seed (of the SVD or of word2vec): the seed moves the
pipeline's MAP by about a point, so learners are compared over several seeds.

Usage: scripts/word_vectors_dev.py --work WORK COLLECTION VARIANT[@SEED]
       scripts/word_vectors_dev.py --work WORK --table
"""
import argparse
import functools
import glob
import json
import os
import sys
import time
import warnings
from unittest import mock

import numpy as np

from cqa_search import SearchConfig, SearchEngine
from cqa_search.retrieval.first_stage import WEIGHT_GRID
from cqa_search.searcher import LocalSearcher
from cqa_search.training import training_table
from cqa_search.vectors import EmbeddingModel, embeddings

from _common import held_out_ap, split5
from full_retrieval import (DATA, DEFAULT_ANALYZER, DEPTH, choose_weight, first_stage_run,
                            open_index, per_query, read_collection)

#: name -> (EmbeddingModel parameters, extra ppmi_svd parameters, label)
VARIANTS = {
    "ppmi-svd": ({}, {"eig": 0.5}, "PPMI-SVD, U·S^0.5 (the default before this measure), "
                                   "100 dims"),
    "word2vec": ({"method": "word2vec"}, {}, "word2vec skip-gram (gensim, 1 worker, 20 "
                                             "epochs)"),
    "eig0": ({}, {"eig": 0.0}, "PPMI-SVD, U (eigenvalue weight p = 0; the default now)"),
    "eig1": ({}, {"eig": 1.0}, "PPMI-SVD, U·S (p = 1)"),
    "wc": ({}, {"eig": 0.5, "context": True}, "PPMI-SVD, W + C (U·S^0.5 + V·S^0.5)"),
    "eig0-wc": ({}, {"eig": 0.0, "context": True}, "PPMI-SVD, p = 0, W + C"),
    "shift5": ({}, {"eig": 0.5, "shift": 5.0}, "PPMI-SVD, U·S^0.5, shifted PPMI (log 5)"),
    "dim300": ({"dim": 300}, {"eig": 0.5}, "PPMI-SVD, U·S^0.5, 300 dims"),
}
BASE = "ppmi-svd"
COLUMNS = [("semeval-train", "SemEval-2016 train-part2, 61 queries"),
           ("demo", "demo training queries, 28"),
           ("semeval", "SemEval-2016 training folds, 5 × 78"),
           ("stackexchange", "StackExchange training folds, 5 × 40")]
INNER = ("semeval", "stackexchange")


def parse(variant):
    """``(name, seed)`` of ``NAME`` (seed 0) or ``NAME@SEED``."""
    name, _, seed = variant.partition("@")
    return name, int(seed or 0)


def fit_model(view, variant):
    """The embeddings model of ``variant`` fitted on ``view``, and its CPU seconds."""
    name, seed = parse(variant)
    params, extra, _ = VARIANTS[name]
    params = {**params, "random_state": seed}
    learner = functools.partial(embeddings.ppmi_svd, **extra)
    t0 = time.process_time()
    with mock.patch.object(embeddings, "ppmi_svd", learner), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = EmbeddingModel(**params).fit(view)
    return model, time.process_time() - t0


def run(work, coll, variant, log):
    _, out, folder, queries, qrels, splits, _ = read_collection(coll, DATA, work)
    if coll == "demo":  # the 28 training queries only (the held-out ones are scored)
        queries = [q for q in queries if q["id"] in set(splits[0][0])]
    engine = open_index(out, folder, DEFAULT_ANALYZER, log)
    model, cpu = fit_model(engine.view, variant)
    log(f"{coll} {variant}: fitted in {cpu:.0f} CPU s")
    trial = SearchEngine(LocalSearcher(engine.searcher.data,
                                       {**engine.models, "embeddings": model},
                                       SearchConfig(ranker=None)))
    stages = {a: per_query(first_stage_run(trial, queries, a=a), qrels, queries)
              for a in WEIGHT_GRID}
    ids = sorted(q["id"] for q in queries)
    # the (a, training queries) of every evaluation: the dev set itself, or each training
    # fold of the scored collection (its test queries never enter)
    pools = [tr for tr, _ in splits] if coll in INNER else [ids]
    tables, res, choices, recall = {}, {}, [], {}
    for k, pool in enumerate(pools):
        a = choose_weight(stages, pool)
        if a not in tables:
            X, y, qid, _, names = training_table(
                trial.with_config(SearchConfig(ranker=None, hybrid=a)), queries, qrels,
                k=DEPTH)
            n_rel = np.array([sum(g >= 1 for g in qrels[q].values()) for q in qid])
            tables[a] = (X, y, qid, names, n_rel)
        recall[k] = 100 * stages[a].loc[pool, "r@100"].mean()
        for tr, te in split5(pool, seed=1 if coll in INNER else 0):
            ap, cv = held_out_ap(*tables[a], tr, te)
            res.update({f"{k}|{q}": v for q, v in ap.items()})
            choices.append(f"a={a:g} {cv.chosen_}:{cv.best_params_}:{len(cv.features_)}")
    os.makedirs(os.path.join(work, "word_vectors_dev"), exist_ok=True)
    with open(os.path.join(work, "word_vectors_dev", f"{coll}-{variant}.json"), "w") as f:
        json.dump({"coll": coll, "variant": variant, "ap": res, "choices": choices,
                   "fit_cpu": cpu, "r@100": recall}, f)
    print(f"{coll} {variant}: MAP {100 * np.mean(list(res.values())):.2f}, R@100 "
          f"{np.mean(list(recall.values())):.2f}", choices, flush=True)


def table(work):
    """Every variant against today's PPMI-SVD, seed 0; then, for the learners run with
    several seeds, the per-query AP averaged over the seeds against PPMI-SVD's average."""
    from scipy.stats import ttest_rel

    runs = {}
    for path in glob.glob(os.path.join(work, "word_vectors_dev", "*.json")):
        with open(path) as f:
            d = json.load(f)
        runs.setdefault(d["coll"], {})[d["variant"]] = d

    def ap_of(ds, variants):
        """Per-query AP averaged over ``variants`` (those run), keys sorted."""
        done = [runs[ds][v] for v in variants if v in runs.get(ds, {})]
        if not done:
            return None, 0
        keys = sorted(done[0]["ap"])
        return np.mean([[d["ap"][k] for k in keys] for d in done], axis=0), np.mean(
            [np.mean(list(d["r@100"].values())) for d in done])

    seeds = sorted({parse(v)[1] for r in runs.values() for v in r})
    rows = [(v, [v], label) for v, (_, _, label) in VARIANTS.items()]
    rows += [(f"{name}, seeds", [name] + [f"{name}@{s}" for s in seeds if s],
              f"{label}: mean over seeds {', '.join(map(str, seeds))}")
             for name, (_, _, label) in VARIANTS.items()
             if sum(f"{name}@{s}" in r for r in runs.values() for s in seeds) > 0]
    print("| word vectors (everything else as `train`) | " + " | ".join(c for _, c in COLUMNS)
          + " | pooled Δ (evaluations), p |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    for key, variants, label in rows:
        base_variants = [BASE] if len(variants) == 1 else [BASE] + [
            f"{BASE}@{s}" for s in seeds if s]
        cells, diffs = [], []
        for ds, _ in COLUMNS:
            x, rec = ap_of(ds, variants)
            b, _ = ap_of(ds, base_variants)
            if x is None or b is None:
                cells.append("–")
                continue
            n = len([v for v in variants if v in runs[ds]])
            runs_note = f"; {n} seed{'s' * (n > 1)}" if len(variants) > 1 else ""
            if variants == base_variants:
                cells.append(f"{100 * x.mean():.2f} (R@100 {rec:.1f}{runs_note})")
                continue
            p = ttest_rel(x, b).pvalue if np.any(x != b) else 1.0
            cells.append(f"{100 * x.mean():.2f} ({100 * (x - b).mean():+.2f}, p {p:.2f}; "
                         f"R@100 {rec:.1f}{runs_note})")
            diffs.append(x - b)
        if variants == base_variants or not diffs:
            pooled = "–"
        else:
            d = np.concatenate(diffs)
            p = ttest_rel(d, np.zeros_like(d)).pvalue if np.any(d) else 1.0
            pooled = f"{100 * d.mean():+.2f} ({len(d)}), p {p:.2f}"
        print(f"| {label} | " + " | ".join(cells) + f" | {pooled} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--table", action="store_true", help="print the table of the runs")
    ap.add_argument("args", nargs="*", metavar="COLLECTION VARIANT")
    args = ap.parse_args(argv)
    if args.table:
        table(args.work)
    elif (len(args.args) == 2 and args.args[0] in dict(COLUMNS)
          and parse(args.args[1])[0] in VARIANTS):
        run(args.work, *args.args, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    else:
        ap.error(f"give COLLECTION ({', '.join(dict(COLUMNS))}) and VARIANT[@SEED] "
                 f"({', '.join(VARIANTS)}), or --table")


if __name__ == "__main__":
    sys.exit(main())
