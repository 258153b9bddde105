#!/usr/bin/env python3
"""Learner variants of ``cqa-search train`` on dev data that no benchmark scores (issue 26).

A prototype kept in the history only (this commit adds it with the mechanisms it tries, the
next one reverts both: none measured better than ``train``'s defaults). Each variant is a
:class:`~cqa_search.ranking.LinearRankerCV` differing from ``train``'s defaults in one
choice, scored by query-grouped 5-fold cross-validation (trec AP at depth 100) on:

- SemEval-2016 train-part2's original questions over the full-retrieval archive
  (``full_retrieval.py``'s ``semeval-train``; 61 with a relevant question; ``a`` = 0.7, what
  ``train`` chooses on them);
- the demo's 28 training queries (``a`` = 0.8);
- with ``--inner``, the training queries of each of the scored collection's 5 folds
  (SemEval-2016 ``a`` = 0.5, every fold's choice; StackExchange 0.2, four folds' choice):
  5-fold cross-validation inside them, the fold's test queries untouched.

The feature tables are those ``full_retrieval.py --work WORK`` caches (default analysis).

Usage: scripts/learner_dev.py --work WORK COLLECTION A VARIANT [--inner]
       scripts/learner_dev.py --work WORK --table
"""
import argparse
import glob
import json
import os
import sys
import warnings

import numpy as np

from cqa_search.evaluation import read_qrels, read_queries
from cqa_search.data import DEMO_QUERIES, demo_dir, demo_split
from cqa_search.ranking import LinearRankerCV
from cqa_search.ranking._utils import QueryGroups, average_precision, query_folds

VARIANTS = {
    "base": ({}, "`train`'s defaults (C and families by inner CV, alpha 0.1)"),
    "bag10": ({"n_bags": 10}, "bagging: RankSVM on 10 bootstrap resamples of the queries, "
                              "weights averaged"),
    "1se": ({"one_se": True}, "one-standard-error rule for C (the most regularised C within "
                              "one paired SE of the best)"),
    "rep3": ({"n_repeats": 3}, "the inner cross-validation repeated 3 times (3 fold splits), "
                               "choices on the mean"),
    "all": ({"select_features": False}, "every family (no forward selection)"),
    "all+1se": ({"select_features": False, "one_se": True}, "every family + one-SE rule"),
    "all+bag10": ({"select_features": False, "n_bags": 10}, "every family + bagging"),
    "all+rep3": ({"select_features": False, "n_repeats": 3},
                 "every family + repeated inner CV"),
    "rep3+1se": ({"n_repeats": 3, "one_se": True}, "repeated inner CV + one-SE rule"),
    "alpha05": ({"alpha": 0.05}, "family selection at alpha 0.05"),
    "alpha2": ({"alpha": 0.2}, "family selection at alpha 0.2"),
    "minmax": ({"normalize": "minmax"}, "min-max normalisation"),
    "uniform": ({"params": {"pair_weight": "uniform"}}, "uniform pair weights (not per query)"),
    "lambdarank": ({"learner": "lambdarank"}, "LambdaRank instead of RankSVM"),
}
COLUMNS = [("semeval-train", "SemEval-2016 train-part2, 61 queries"),
           ("demo", "demo training queries, 28"),
           ("semeval-inner", "SemEval-2016 training folds, 5 × 78"),
           ("stackexchange-inner", "StackExchange training folds, 5 × 40")]


def split5(ids, seed=0):
    ids = sorted(ids)
    return [([ids[i] for i in tr], [ids[i] for i in te])
            for tr, te in query_folds(len(ids), 5, np.random.default_rng(seed))]


def held_out_ap(X, y, qid, names, n_rel, train, test, options):
    """Trec AP (over every relevant question) of the test queries under the variant
    trained on the training queries."""
    tr, te = np.isin(qid, train), np.isin(qid, test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv = LinearRankerCV(baseline="first_stage", random_state=0, **options).fit(
            X[tr], y[tr], qid=qid[tr], feature_names=names, n_relevant=n_rel[tr])
    cols = [names.index(f) for f in cv.feature_names_in_]
    s = cv.predict(X[np.ix_(te, cols)], qid[te])
    g = QueryGroups(qid[te], X[te][:, :0], y[te])
    ap = average_precision(s[g.order], y[te][g.order], g)
    found = np.bincount(g.group, weights=(y[te][g.order] >= 1), minlength=g.n_queries)
    total = np.zeros(g.n_queries)
    total[g.group] = n_rel[te][g.order]
    return dict(zip(g.qids.tolist(), (ap * found / total).tolist())), cv


def run(work, coll, a, variant, inner):
    base = os.path.join(work, coll)
    qrels = read_qrels(os.path.join(base, "data", "qrels.txt"))
    with np.load(os.path.join(base, "sklearn318", f"features-{a}.npz")) as z:
        X, y, qid, names = z["X"], z["y"], z["qid"], [str(n) for n in z["names"]]
    n_rel = np.array([sum(g >= 1 for g in qrels[q].values()) for q in qid])
    ids = sorted(set(qid.tolist()))
    if coll == "demo":
        training = {q["id"] for q in demo_split(read_queries(demo_dir() / DEMO_QUERIES))[0]}
        ids = [q for q in ids if q in training]
    res, choices = {}, []
    for k, (pool, _) in enumerate(split5(ids) if inner else [(ids, None)]):
        for tr, te in split5(pool, seed=1 if inner else 0):
            ap, cv = held_out_ap(X, y, qid, names, n_rel, tr, te, VARIANTS[variant][0])
            res.update({f"{k}|{q}": v for q, v in ap.items()})
            choices.append(f"{cv.chosen_}:{cv.best_params_}:{len(cv.features_)}")
    tag = f"{coll}-{a}-{variant}{'-inner' if inner else ''}"
    os.makedirs(os.path.join(work, "learner_dev"), exist_ok=True)
    with open(os.path.join(work, "learner_dev", f"{tag}.json"), "w") as f:
        json.dump({"coll": coll, "variant": variant, "inner": inner, "ap": res,
                   "choices": choices}, f)
    print(tag, f"MAP {100 * np.mean(list(res.values())):.2f}", choices)


def table(work):
    from scipy.stats import ttest_rel

    runs = {}
    for path in glob.glob(os.path.join(work, "learner_dev", "*.json")):
        with open(path) as f:
            d = json.load(f)
        runs.setdefault(d["coll"] + ("-inner" if d["inner"] else ""), {})[d["variant"]] = d
    print("| learner (everything else as `train`) | " + " | ".join(c for _, c in COLUMNS)
          + " | pooled Δ (evaluations) |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    for v, (_, label) in VARIANTS.items():
        cells, diffs = [], []
        for ds, _ in COLUMNS:
            r = runs.get(ds, {})
            if v not in r or "base" not in r:
                cells.append("–")
                continue
            keys = sorted(r[v]["ap"])
            x = np.array([r[v]["ap"][k] for k in keys])
            b = np.array([r["base"]["ap"][k] for k in keys])
            if v == "base":
                cells.append(f"{100 * x.mean():.2f}")
                continue
            p = ttest_rel(x, b).pvalue if np.any(x != b) else 1.0
            cells.append(f"{100 * x.mean():.2f} ({100 * (x - b).mean():+.2f}, p {p:.2f})")
            diffs += list(x - b)
        pooled = "–" if v == "base" else f"{100 * np.mean(diffs):+.2f} ({len(diffs)})"
        print(f"| {label} | " + " | ".join(cells) + f" | {pooled} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--table", action="store_true", help="print the table of the runs")
    ap.add_argument("args", nargs="*", metavar="COLLECTION A VARIANT")
    ap.add_argument("--inner", action="store_true")
    args = ap.parse_args(argv)
    if args.table:
        table(args.work)
    elif len(args.args) == 3 and args.args[2] in VARIANTS:
        run(args.work, *args.args, args.inner)
    else:
        ap.error(f"give COLLECTION A VARIANT (variants: {', '.join(VARIANTS)}) or --table")


if __name__ == "__main__":
    sys.exit(main())
