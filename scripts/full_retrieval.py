#!/usr/bin/env python3
"""Full-archive retrieval: search the whole archive for each query (the engine's real job).

Collections (both small; read the numbers as indications, not leaderboards):
- StackExchange duplicates: 8 small site dumps (4,634 questions); the 50 questions closed
  as duplicates are the queries (51 links); a query never retrieves itself.
- StackFAQ: 1,249 paraphrase queries against 125 threads (one relevant thread each).

trec convention (trec_eval semantics), depth 100. Prints a Markdown table per collection:
every term model alone, then (with --trained) the trained pipeline: translation, topic
(GNMFNC) and multiview (IBM1 view) models fitted on the collection's own archive, the top
100 BM25 candidates reordered by a linear ranker evaluated by 5-fold query-grouped
cross-validation (each query is ranked by a ranker that never saw it).

Usage: scripts/full_retrieval.py [--data ../shared/data] [--work DIR] [--models bm25 ...]
                                 [--trained] [--learners coordinate-ascent ranksvm]
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.evaluation import (compare, evaluate, feature_table, read_qrels, read_queries,
                                   run_queries, summarize)
from cqa_search.evaluation.datasets import convert_stackexchange, convert_stackfaq
from cqa_search.factorization import MultiViewModel, TopicModel
from cqa_search.index.models import add_model
from cqa_search.ranking import LinearRanker, cross_val_predict
from cqa_search.retrieval import parse_model
from cqa_search.translation import TranslationModel

METRICS = ["map", "mrr", "p@1", "p@5", "r@10", "r@100"]
DEFAULT_MODELS = ["bm25", "bm25:k1=2.0,b=0.9", "lm-jm", "lm-dir:mu=500", "vsm", "answers-bm25"]


def collections(data, work):
    se = os.path.join(data, "stackexchange")
    yield "StackExchange duplicates (8 sites)", lambda out: convert_stackexchange(
        sorted(os.path.join(se, d) for d in os.listdir(se) if os.path.isdir(os.path.join(se, d))),
        out)
    yield "StackFAQ", lambda out: convert_stackfaq(
        os.path.join(data, "stackfaq", "stackExchange-FAQ.xml"), out)


def fit_models(path):
    """Translation, GNMFNC topics and the IBM1-view multiview model, with defaults."""
    engine = SearchEngine.open(path)
    add_model(path, "translation", TranslationModel().fit(engine.view))
    add_model(path, "topics-gnmfnc", TopicModel().fit(engine.view))
    engine = SearchEngine.open(path)
    add_model(path, "multiview", MultiViewModel("ibm1").fit(engine.view))
    return SearchEngine.open(path)


def cross_validated_run(engine, queries, qrels, learner, groups, n_splits=5, k=100):
    """Out-of-fold run: each query ranked by the ranker of the fold that held it out."""
    X, qid, docs, names = feature_table(engine, queries, k=k)
    columns = [i for i, n in enumerate(names) if any(n.startswith(g) for g in groups)]
    y = np.array([qrels.get(q, {}).get(d, 0) >= 1 for q, d in zip(qid, docs)], dtype=float)
    scores = cross_val_predict(LinearRanker(learner, random_state=0), X[:, columns], y,
                               qid=qid, n_splits=n_splits, random_state=0,
                               feature_names=[names[c] for c in columns])
    run = {q["id"]: {} for q in queries}
    for q, d, score in zip(qid, docs, scores):
        run[q][d] = float(score)
    return run


GROUPS = {"term": ("bm25", "lm_", "vsm", "answers_"),
          "all": ("bm25", "lm_", "vsm", "answers_", "category_match", "log_length", "wt",
                  "translm", "ptrans_", "topic_", "mv_")}


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_full_retrieval"))
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--trained", action="store_true", help="also the trained pipeline")
    ap.add_argument("--learners", nargs="+", default=["coordinate-ascent", "ranksvm"])
    args = ap.parse_args(argv)
    for n, (title, convert) in enumerate(collections(args.data, args.work)):
        out = os.path.join(args.work, f"c{n}")
        summary = convert(out)
        build_index(summary.file("archive.jsonl"), os.path.join(out, "index"))
        engine = SearchEngine.open(os.path.join(out, "index"))
        queries = read_queries(summary.file("queries.jsonl"))
        qrels = read_qrels(summary.file("qrels.txt"))
        print(f"\n### {title}: {summary}\n")
        print("| model | " + " | ".join(m.upper() for m in METRICS)
              + " | MAP vs BM25: p (t / rand.) | MAP vs the same learner on term features |")
        print("|---|" + "---:|" * (len(METRICS) + 2))
        term_models = {spec: evaluate(run_queries(engine.with_config(SearchConfig(
            retrieval=parse_model(spec), features=())), queries, k=100), qrels,
            metrics=METRICS, convention="trec") for spec in dict.fromkeys(["bm25", *args.models])}
        bm25 = term_models["bm25"]

        def row(name, per_query, against=None):
            scores = summarize(per_query, percent=True)
            cells = [f"{v:.2f}" for v in scores] + [_p(per_query, bm25)]
            cells.append("–" if against is None else _p(per_query, against))
            print(f"| {name} | " + " | ".join(cells) + " |")

        for spec in args.models:
            row(spec, term_models[spec])
        if not args.trained:
            continue
        engine = fit_models(os.path.join(out, "index")).with_config(SearchConfig(ranker=None))
        for learner in args.learners:
            term = None
            for group, prefixes in GROUPS.items():
                run = cross_validated_run(engine, queries, qrels, learner, prefixes)
                # queries whose candidates hold no relevant question still count (AP 0)
                per_query = evaluate(run, qrels, metrics=METRICS, convention="trec")
                row(f"BM25 top 100 + {learner} on {group} features (5-fold CV)", per_query,
                    term)
                term = per_query if group == "term" else term


def _p(a, b) -> str:
    """p-values (paired t-test / randomization) of the MAP difference of two systems."""
    c = compare(a, b, metrics=["map"]).loc["map"]
    return f"{c['p_ttest']:.3f} / {c['p_randomization']:.3f}"

if __name__ == "__main__":
    main()
