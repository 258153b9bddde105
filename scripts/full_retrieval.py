#!/usr/bin/env python3
"""Full-archive retrieval: search the whole archive for each query (the engine's real job).

Collections (all small; read the numbers as indications, not leaderboards):
- StackExchange duplicates: 8 small site dumps (4,634 questions, duplicate notices
  stripped by the reader); the 50 questions closed as duplicates are the queries (51 links).
- StackFAQ: 1,249 paraphrase queries against 125 threads (one relevant thread each).
- SemEval-2016 full retrieval: the 120 original questions of dev and test search the
  whole archive of scripts/semeval2016.py (2016 related questions, derived part-1 texts,
  2015 threads), each thread once (``convert_semeval(..., full_retrieval=True)``);
  relevant = its PerfectMatch/Relevant related questions; the 22 queries without any are
  left out (AP would be 0 for every system).
- The demo archive's held-out queries (``cqa-search demo``): trained on its 28 training
  queries, scored on the 33 held-out ones, instead of cross-validation.

A query never retrieves itself, and queries are searched without their category (as a
user searches). trec convention (AP over every relevant question), depth 100.

Rows, every choice made on training queries only (query-grouped 5-fold cross-validation:
each query is scored by a system chosen and trained without it):
- BM25 with the default analysis and parameters;
- BM25 tuned: text analysis (:data:`ANALYZERS`) and k1, b chosen on the training folds;
- the learned pipeline with the defaults of ``cqa-search train`` (LinearRankerCV: BM25
  top 100, RankSVM, C and model families chosen by inner cross-validation, never worse
  than BM25 or the best single feature on the training queries), with the translation,
  GNMFNC topic and multiview (IBM1 view) models fitted on the collection's own archive,
  on the index of the analysis whose pipeline scores best in the inner cross-validation
  of the training folds (AP over every relevant question, so that analyses compare);
- an ablation: the same learner with every family but one, and with the term features
  plus one family, C chosen by inner cross-validation, no family selection;
- the term models alone (default analysis).
p-values: paired t-test / randomization test of per-query AP against BM25 and against the
pipeline.

Usage: scripts/full_retrieval.py [--data ../shared/data] [--work DIR]
                                 [--collections stackexchange stackfaq semeval demo]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

from cqa_search import Analyzer, SearchConfig, SearchEngine, build_index
from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir, demo_split
from cqa_search.index.store import CURRENT
from cqa_search.evaluation import (evaluate, judged_only, read_qrels, read_queries,
                                   run_of_scores, run_queries, summarize)
from cqa_search.evaluation.datasets import (convert_semeval, convert_stackexchange,
                                            convert_stackfaq)
from cqa_search.training import training_table
from cqa_search.ranking import LinearRankerCV, NoImprovementWarning
from cqa_search.ranking._utils import query_folds
from cqa_search.ranking.selection import FAMILIES, family
from cqa_search.retrieval import BM25, parse_model

from _common import (DATA, fit_default_models, p_values, semeval_extra_questions, semeval_xml,
                     stackexchange_sites)

METRICS = ["map", "p@1", "p@5", "ndcg@10", "mrr", "r@100"]
DEPTH = 100
#: Text analyses tried (chosen on the training folds): ours, and Lucene's short stop list
#: with 1-character tokens kept (as Lucene's StandardAnalyzer) or not.
ANALYZERS = {"sklearn318": Analyzer(),
             "lucene33": Analyzer(stopwords="lucene", token_pattern=r"(?u)\w+"),
             "lucene33-2ch": Analyzer(stopwords="lucene")}
DEFAULT_ANALYZER = "sklearn318"
BM25_GRID = [(k1, b) for k1 in (0.6, 0.9, 1.2, 1.5, 2.0) for b in (0.3, 0.5, 0.75, 0.9)]
TERM_MODELS = ["lm-jm", "lm-dir:mu=500", "vsm", "answers-bm25"]


# -- collections -----------------------------------------------------------------------
def stackexchange(data, out):
    return convert_stackexchange(stackexchange_sites(data), out), None


def stackfaq(data, out):
    return convert_stackfaq(os.path.join(data, "stackfaq", "stackExchange-FAQ.xml"), out), None


def semeval(data, out):
    return convert_semeval([semeval_xml(data, s) for s in ("dev", "test")], out,
                           extra_archive=[semeval_xml(data, "train-part2")],
                           extra_questions=semeval_extra_questions(data),
                           full_retrieval=True), None


def demo(data, out):
    """The demo archive, with the demo's own training / held-out split."""
    folder = demo_dir()
    os.makedirs(out, exist_ok=True)
    for name in (DEMO_ARCHIVE, DEMO_QUERIES, DEMO_QRELS):
        with open(folder / name, "rb") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
    training, held_out = demo_split(read_queries(folder / DEMO_QUERIES))
    return out, ([q["id"] for q in training], [q["id"] for q in held_out])


COLLECTIONS = {"stackexchange": ("StackExchange duplicates (8 sites)", stackexchange),
               "stackfaq": ("StackFAQ", stackfaq),
               "semeval": ("SemEval-2016 full retrieval (dev + test queries)", semeval),
               "demo": ("Demo archive, held-out queries (trained on the 28 others)", demo)}


# -- helpers -----------------------------------------------------------------------------
def per_query(run, qrels, queries):
    """Per-query metrics (trec convention) of ``queries``, with the condensed-list MAP."""
    ids = [q["id"] for q in queries]
    run = {q: run.get(q, {}) for q in ids}
    table = evaluate(run, qrels, metrics=METRICS, convention="trec")
    table["cmap"] = evaluate(judged_only(run, qrels), qrels, metrics=["map"],
                             convention="trec")["map"]
    return table.loc[ids]


def bm25_run(engine, queries, k1=1.2, b=0.75):
    config = SearchConfig(retrieval=BM25(k1=k1, b=b), features=(), models=(), ranker=None)
    return run_queries(engine.with_config(config), queries, k=DEPTH)


def fit_models(path, log):
    """Translation, GNMFNC topics and the IBM1-view multiview model, with defaults."""
    fit_default_models(path, log=lambda msg: log(f"  {path}: {msg}"))
    return SearchEngine.open(path, config=SearchConfig(ranker=None))


def folds(queries, split):
    """``[(train ids, test ids)]``: 5 query-grouped folds, or the given split."""
    if split is not None:
        return [split]
    ids = sorted(q["id"] for q in queries)
    return [([ids[i] for i in tr], [ids[i] for i in te])
            for tr, te in query_folds(len(ids), 5, np.random.default_rng(0))]


def fit_predict(table, train_ids, test_ids, columns=None, **options):
    """A LinearRankerCV trained on the training queries' candidates (``cqa-search train``
    defaults unless ``options``; AP over every relevant question, so that indexes of other
    analyses compare), and its run of the test queries' candidates."""
    X, y, qid, docs, names, n_relevant = table
    columns = list(range(len(names))) if columns is None else columns
    tr, te = np.isin(qid, train_ids), np.isin(qid, test_ids)
    used = [names[j] for j in columns]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoImprovementWarning)
        cv = LinearRankerCV(baseline="bm25" if "bm25" in used else None, random_state=0,
                            **options).fit(X[np.ix_(tr, columns)], y[tr], qid=qid[tr],
                                           feature_names=used, n_relevant=n_relevant[tr])
    cols = [names.index(f) for f in cv.feature_names_in_]
    return cv, run_of_scores(qid[te], docs[te], cv.predict(X[np.ix_(te, cols)], qid[te]))


def describe(cv):
    point = ",".join(f"{k}={v}" for k, v in cv.best_params_.items())
    if cv.chosen_ == "baseline":
        return "bm25 order"
    if cv.chosen_ == "single":
        return f"single {cv.single_feature_}"
    dropped = "-".join(d["family"] for d in cv.dropped_)
    return f"{point}" + (f" without {dropped}" if dropped else "")


# -- one collection ------------------------------------------------------------------------
def run_collection(key, data, work, log):
    title, convert = COLLECTIONS[key]
    out = os.path.join(work, key)
    converted, split = convert(data, os.path.join(out, "data"))
    folder = converted if isinstance(converted, str) else converted.path  # the converters'
    archive = os.path.join(folder, "archive.jsonl")  # file names are the demo's too
    queries = [{**q, "category": None}
               for q in read_queries(os.path.join(folder, "queries.jsonl"))]
    qrels = read_qrels(os.path.join(folder, "qrels.txt"))
    queries = [q for q in queries if any(g >= 1 for g in qrels.get(q["id"], {}).values())]
    splits = folds(queries, split)
    scored = [q for q in queries if split is None or q["id"] in split[1]]
    log(f"{title}: {len(queries)} queries with a relevant question, {len(splits)} fold(s)")

    # every analysis, every BM25 setting: per-query metrics of all queries
    engines, bm25 = {}, {}
    for name, analyzer in ANALYZERS.items():
        path = os.path.join(out, name, "index")
        if not os.path.exists(os.path.join(path, CURRENT)):
            build_index(archive, path, analyzer=analyzer)
        engines[name] = SearchEngine.open(path, config=SearchConfig(ranker=None))
        for k1, b in BM25_GRID:
            bm25[name, k1, b] = per_query(bm25_run(engines[name], queries, k1, b), qrels, queries)
    n_docs = engines[DEFAULT_ANALYZER].n_docs

    def choose(train_ids, keys):
        return max(keys, key=lambda c: bm25[c].loc[train_ids, "map"].mean())

    default = bm25[DEFAULT_ANALYZER, 1.2, 0.75]
    tuned_parts, tuned_choice = [], []
    for train_ids, test_ids in splits:
        best = choose(train_ids, list(bm25))
        tuned_parts.append(bm25[best].loc[test_ids])
        tuned_choice.append(f"{best[0]} k1={best[1]} b={best[2]}")
    import pandas as pd

    tuned = pd.concat(tuned_parts).loc[[q["id"] for q in scored]]

    # the learned pipeline, on the index of the analysis whose pipeline the training folds
    # score best (cross-validated inside them)
    tables = {}
    for name in ANALYZERS:
        cache = os.path.join(out, name, "features.npz")  # delete --work to recompute
        if not os.path.exists(cache):
            engine = fit_models(os.path.join(out, name, "index"), log)
            t0 = time.process_time()
            X, y, qid, docs, names = training_table(engine, queries, qrels, k=DEPTH)
            np.savez(cache, X=X, y=y, qid=qid, docs=docs, names=np.array(names))
            log(f"  {name}: features of {len(X):,} candidates ({len(names)} columns) in "
                f"{time.process_time() - t0:.0f} CPU s")
        with np.load(cache, allow_pickle=False) as z:
            n_relevant = np.array([sum(g >= 1 for g in qrels[q].values()) for q in z["qid"]])
            tables[name] = (z["X"], z["y"], z["qid"], z["docs"], [str(n) for n in z["names"]],
                            n_relevant)
    analysis, pipeline_fits = {}, {}
    for train_ids, test_ids in splits:
        fits = {name: fit_predict(table, train_ids, test_ids) for name, table in tables.items()}
        best = max(fits, key=lambda a: fits[a][0].best_score_)
        analysis[tuple(test_ids)], pipeline_fits[tuple(test_ids)] = best, fits[best]
    names = tables[DEFAULT_ANALYZER][4]
    present = [f for f in FAMILIES if any(family(n) == f for n in names)]
    variants = {"pipeline": (None, {})}
    for f in present:
        variants[f"all but {f}"] = ([j for j, n in enumerate(names) if family(n) != f],
                                    {"select_features": False})
    variants["term only"] = ([j for j, n in enumerate(names) if family(n) == "term"],
                             {"select_features": False})
    for f in present:
        if f != "term":
            variants[f"term + {f}"] = ([j for j, n in enumerate(names)
                                        if family(n) in ("term", f)], {"select_features": False})
    variants["all, no family selection"] = (None, {"select_features": False})
    results, choices = {}, {}
    t0 = time.process_time()
    for label, (columns, options) in variants.items():
        run = {}
        choices[label] = []
        for train_ids, test_ids in splits:
            cv, part = pipeline_fits[tuple(test_ids)] if label == "pipeline" else fit_predict(
                tables[analysis[tuple(test_ids)]], train_ids, test_ids, columns, **options)
            run.update(part)
            choices[label].append(describe(cv))
        results[label] = per_query(run, qrels, scored)
        log(f"  {label}: MAP {100 * results[label]['map'].mean():.2f} "
            f"({'; '.join(choices[label])})")
    log(f"  rankers: {time.process_time() - t0:.0f} CPU s")

    # the table
    n_rel = sum(g >= 1 for q in scored for g in qrels[q["id"]].values())
    cmap = key == "semeval"
    head = ["MAP", "P@1", "P@5", "nDCG@10", "MRR", "R@100"] + (["cond. MAP"] if cmap else [])
    print(f"\n#### {title}: {n_docs:,} archive questions, {len(scored)} queries scored, "
          f"{n_rel} relevant\n")
    print("| system | " + " | ".join(head) + " | MAP vs BM25: p (t / rand.) "
          "| MAP vs pipeline: p (t / rand.) |")
    print("|---|" + "---:|" * (len(head) + 2))
    base = default.loc[[q["id"] for q in scored]]
    pipeline = results["pipeline"]

    def row(label, table, against_pipeline=True):
        values = summarize(table[METRICS + (["cmap"] if cmap else [])], percent=True)
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values)
              + f" | {p_values(table, base)} | "
              + (p_values(table, pipeline) if against_pipeline else "–") + " |")

    row("BM25 (k1=1.2, b=0.75, analysis sklearn318)", base)
    row("BM25 tuned (analysis, k1, b chosen on the training folds)", tuned)
    row("**learned pipeline** (`cqa-search train` defaults)", pipeline, False)
    for label, table in results.items():
        if label != "pipeline":
            row(f"ablation: {label}", table)
    for spec in TERM_MODELS:
        config = SearchConfig(retrieval=parse_model(spec), features=(), models=(), ranker=None)
        run = run_queries(engines[DEFAULT_ANALYZER].with_config(config), queries, k=DEPTH)
        row(f"{spec} alone", per_query(run, qrels, scored))
    ids = [q["id"] for q in scored]
    print("\nBM25 (k1=1.2, b=0.75) MAP by analysis: " + ", ".join(
        f"{a} {100 * bm25[a, 1.2, 0.75].loc[ids, 'map'].mean():.2f}" for a in ANALYZERS)
        + "; best k1, b per analysis: " + ", ".join(
        f"{a} {100 * max(bm25[a, k1, b].loc[ids, 'map'].mean() for k1, b in BM25_GRID):.2f}"
        for a in ANALYZERS) + " (on the scored queries: for reading, not for choosing).")
    print(f"\nChoices per fold: BM25 tuned: {'; '.join(tuned_choice)}. Pipeline: analysis "
          f"{', '.join(analysis[tuple(te)] for _, te in splits)}; ranker "
          f"{'; '.join(choices['pipeline'])}.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_full_retrieval"))
    ap.add_argument("--collections", nargs="+", default=list(COLLECTIONS),
                    choices=list(COLLECTIONS))
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    log = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr,
                                                                  flush=True))
    t0 = time.time()
    for key in args.collections:
        run_collection(key, args.data, args.work, log)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
