"""``cqa-search demo``: index the embedded demo archive and show a few searches."""
from __future__ import annotations

import argparse
import json
import os

from ..data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir
from ..engine import SearchEngine, build_index
from ..evaluation import evaluate, read_qrels, read_queries, summarize
from ._common import Style, add_common_options, format_hit, run_command

HELP = "build indexes/demo from the demo archive shipped with cqa_search and show searches"

#: Demo queries shown: each shares few or no words with the questions that answer it.
SHOWN = ("dq01", "dq02", "dq05", "dq03")


def configure(parser) -> None:
    parser.add_argument("-o", "--output", default=os.path.join("indexes", "demo"), metavar="DIR",
                        help="where to build the demo index (default: %(default)s)")
    parser.add_argument("-k", type=int, default=3, help="results per query (default: 3)")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def run(args) -> int:
    folder = demo_dir()
    summary = build_index(folder / DEMO_ARCHIVE, args.output, progress=not args.quiet)
    print(summary)
    engine = SearchEngine.open(args.output)
    with open(folder / DEMO_QUERIES, encoding="utf-8") as f:
        queries = {q["id"]: q for q in map(json.loads, f)}
    qrels = read_qrels(folder / DEMO_QRELS)
    style = Style(args.color)
    for qid in SHOWN:
        query = queries[qid]
        print()
        print(style.bold(f"query {qid}: {query['text']}"))
        results = engine.search(query["text"], k=args.k)
        relevant = {d for d, rel in qrels.get(qid, {}).items() if rel > 0}
        for hit in results:
            mark = "  " + style.match("<- judged relevant") if hit.doc_id in relevant else ""
            print(format_hit(hit, engine, results.query_terms, style) + mark)
        if not len(results):
            print("no matching questions")
    queries_path, qrels_path = folder / DEMO_QUERIES, folder / DEMO_QRELS
    scores = summarize(evaluate(engine.run(read_queries(queries_path), k=100), qrels,
                                metrics=["map", "p@5", "mrr"], convention="trec"), percent=True)
    print()
    print(f"BM25 over all {len(queries)} judged demo queries: "
          + ", ".join(f"{m.upper()} {v:.1f}" for m, v in scores.items()))
    print(f"(the same: cqa-search evaluate {args.output} --queries {queries_path} "
          f"--qrels {qrels_path} --convention trec)")
    print()
    print(f"Search it yourself:  cqa-search query {args.output}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search demo", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
