#!/usr/bin/env python3
"""Full-archive retrieval: search the whole archive for each query (the engine's real job).

Collections (both small; read the numbers as indications, not leaderboards):
- StackExchange duplicates: 8 small site dumps (4,634 questions); the 50 questions closed
  as duplicates are the queries (51 links); a query never retrieves itself.
- StackFAQ: 1,249 paraphrase queries against 125 threads (one relevant thread each).

trec convention (trec_eval semantics), depth 100. Prints a Markdown table per collection.

Usage: scripts/full_retrieval.py [--data ../shared/data] [--work DIR] [--models bm25 lm-jm ...]
"""
from __future__ import annotations

import argparse
import os
import tempfile

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.evaluation import evaluate, read_qrels, read_queries, summarize
from cqa_search.evaluation.datasets import convert_stackexchange, convert_stackfaq
from cqa_search.retrieval import parse_model

METRICS = ["map", "mrr", "p@1", "p@5", "r@10", "r@100"]
DEFAULT_MODELS = ["bm25", "bm25:k1=2.0,b=0.9", "lm-jm", "lm-dir:mu=500", "vsm", "answers-bm25"]


def collections(data, work):
    se = os.path.join(data, "stackexchange")
    yield "StackExchange duplicates (8 sites)", lambda out: convert_stackexchange(
        sorted(os.path.join(se, d) for d in os.listdir(se) if os.path.isdir(os.path.join(se, d))),
        out)
    yield "StackFAQ", lambda out: convert_stackfaq(
        os.path.join(data, "stackfaq", "stackExchange-FAQ.xml"), out)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_full_retrieval"))
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    args = ap.parse_args(argv)
    for n, (title, convert) in enumerate(collections(args.data, args.work)):
        out = os.path.join(args.work, f"c{n}")
        summary = convert(out)
        build_index(summary.file("archive.jsonl"), os.path.join(out, "index"))
        engine = SearchEngine.open(os.path.join(out, "index"))
        queries = read_queries(summary.file("queries.jsonl"))
        qrels = read_qrels(summary.file("qrels.txt"))
        print(f"\n### {title}: {summary}\n")
        print("| model | " + " | ".join(m.upper() for m in METRICS) + " |")
        print("|---|" + "---:|" * len(METRICS))
        for spec in args.models:
            config = SearchConfig(retrieval=parse_model(spec), features=())
            run = engine.with_config(config).run(queries, k=100)
            scores = summarize(evaluate(run, qrels, metrics=METRICS, convention="trec"),
                               percent=True)
            print(f"| {spec} | " + " | ".join(f"{v:.2f}" for v in scores) + " |")


if __name__ == "__main__":
    main()
