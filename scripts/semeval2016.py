#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask B: rerank the 10 related questions of each original question.

Builds the archive from train-part2 + dev + test, the derived part-1 CSV (deduplicated by
text) and the 2015 threads (minus the five that are 2016 test questions: their README),
indexes it, and prints a table like the papers' Table 2 for dev and test: the
search-engine order and every term model, with its default parameters and tuned on dev
(the tuned setting is then run on test once). Official conventions (semeval): top 10, a
question without relevant candidates scores 0 and counts. Significance: paired t-test and
randomization test of test MAP against the search-engine order.

Usage: scripts/semeval2016.py [--data ../shared/data] [--work DIR] [--out FILE.md]

Other scripts (scripts/semeval2016_*.py) reuse prepare(), score() and table() to add the
rows of their models to the same setting.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time

import numpy as np

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.evaluation import (compare, evaluate, read_qrels, read_queries, read_run,
                                   run_queries, summarize)
from cqa_search.index.store import is_compatible
from cqa_search.evaluation.datasets import convert_semeval, self_candidates
from cqa_search.readers import read_questions
from cqa_search.retrieval import make_model

SPLITS = ("dev", "test")
METRICS = ["map", "mrr", "p@1", "p@5"]
XML = "SemEval2016-Task3-CQA-QL-{}.xml"
SEMEVAL2015 = ("SemEval2015-Task3-CQA-QL-dev-reformatted-excluding-2016-questions-cleansed.xml",
               "SemEval2015-Task3-CQA-QL-test-reformatted-excluding-2016-questions-multiline.xml")
# 2015 threads that are 2016 test questions (../shared/data/semeval2015-task3-reformatted/README.md)
LEAKED_2015 = {"Q2630", "Q2656", "Q2828", "Q2938", "Q2956"}
# Term models: (name, default parameters, grid searched on dev).
MODELS = [
    ("bm25", {}, {"k1": [0.6, 0.9, 1.2, 1.5, 2.0], "b": [0.3, 0.5, 0.75, 0.9]}),
    ("lm-jm", {}, {"lam": [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]}),
    ("lm-dir", {}, {"mu": [5, 10, 20, 50, 100, 200, 500, 2000]}),
    ("vsm", {}, {"sublinear_tf": [False, True]}),
    ("answers-bm25", {}, {"k1": [0.9, 1.2, 1.5], "b": [0.5, 0.75, 0.9]}),
    ("answers-lm-jm", {}, {"lam": [0.2, 0.5, 0.8]}),
]


def prepare(data, work):
    """Convert the splits and build the shared archive index (cached in ``work``)."""
    folder = os.path.join(data, "semeval2016-task3-cqa-ql")
    splits = {}
    for split in SPLITS:
        out = os.path.join(work, split)
        if not os.path.exists(os.path.join(out, "qrels.txt")):
            convert_semeval([os.path.join(folder, XML.format(split))], out)
        splits[split] = (read_queries(os.path.join(out, "queries.jsonl")),
                         read_qrels(os.path.join(out, "qrels.txt")),
                         read_run(os.path.join(out, "candidates.run")))
    index = os.path.join(work, "index")
    if not is_compatible(index):
        csv = os.path.join(folder, "train-part1-derived", "TRAIN-BASE.csv")
        part1 = read_questions(csv, columns={"body": "rel_question"}, auto_id=True)
        unique = {q.body: q for q in part1}.values()
        threads2015 = read_questions([os.path.join(data, "semeval2015-task3-reformatted", name)
                                      for name in SEMEVAL2015])
        extra = itertools.chain(unique, (q for q in threads2015 if q.id not in LEAKED_2015))
        collection = convert_semeval(
            [os.path.join(folder, XML.format(s)) for s in ("train-part2", *SPLITS)],
            os.path.join(work, "all"), extra_questions=extra)
        print(f"archive: {collection}", file=sys.stderr)
        build_index(collection.file("archive.jsonl"), index)
    return SearchEngine.open(index), splits


def self_candidate_queries(engine, splits) -> set:
    """Queries that have themselves among their candidates (same subject and body): 41
    of the 70 test queries, none of train or dev (their candidate is always PerfectMatch).
    Tables report test MAP without them too."""
    return {qid for queries, _, candidates in splits.values()
            for qid in self_candidates(queries, candidates, engine.archive)}


def score(engine, model, split_data):
    """Per-query metrics of reranking a split's candidates by one term model."""
    queries, qrels, candidates = split_data
    run = run_queries(engine.with_config(SearchConfig(retrieval=model, features=(), ranker=None)),
                      queries, candidates=candidates)
    return evaluate(run, qrels, metrics=METRICS)


def grid(name, space):
    keys = list(space)
    for values in itertools.product(*(space[k] for k in keys)):
        yield make_model(name, **dict(zip(keys, values)))


def bm25s_rows(engine, splits, doc_ids=None):
    """bm25s (lucene, English stopwords, Snowball) over the archive questions, or over only
    those of ``doc_ids``."""
    try:
        import bm25s
        import Stemmer
    except ImportError:
        return None
    rows = (np.arange(engine.n_docs) if doc_ids is None
            else np.sort(engine.archive.rows(sorted(doc_ids))))
    position = np.full(engine.n_docs, -1)
    position[rows] = np.arange(len(rows))
    texts = [engine.archive[int(r)].text for r in rows]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    out = {}
    for split, (queries, qrels, candidates) in splits.items():
        run = {}
        for q in queries:
            cand = engine.archive.rows(list(candidates[q["id"]]))
            tokens = bm25s.tokenize([q["text"]], stopwords="en", stemmer=stemmer,
                                    show_progress=False, return_ids=False)[0]
            scores = retriever.get_scores(tokens) if tokens else np.zeros(len(rows))
            if (position[cand] < 0).any():
                raise ValueError(f"query {q['id']}: a candidate is not in the bm25s index")
            cand_scores = [float(scores[position[r]]) for r in cand]
            ranked = sorted(range(len(cand)), key=lambda i: -cand_scores[i])  # stable
            run[q["id"]] = {engine.archive.doc_ids[cand[i]]: cand_scores[i] for i in ranked}
        out[split] = evaluate(run, qrels, metrics=METRICS)
    return out


def map_without(per_query, exclude) -> float:
    """MAP (in %) over the queries of ``per_query`` not in ``exclude``."""
    return 100 * per_query.loc[~per_query.index.isin(list(exclude)), "map"].mean()


def table(rows, baseline, baseline_name, exclude=None) -> str:
    """Markdown table of ``[(name, {split: per-query DataFrame})]`` with test-MAP p-values
    against ``baseline`` (a per-query test DataFrame); with ``exclude`` (the
    :func:`self_candidate_queries`), also test MAP over the other test queries."""
    n_other = None if exclude is None else int((~baseline.index.isin(list(exclude))).sum())
    header = ("| system | dev MAP | dev MRR | dev P@1 | dev P@5 | test MAP | test MRR | test P@1 "
              "| test P@5 | " + ("" if exclude is None else
                                f"test MAP, {n_other} queries without self-candidate | ")
              + f"test MAP vs {baseline_name}: p (t-test) | p (rand.) |")
    lines = [header, "|---|" + "---:|" * (header.count("|") - 2)]
    for name, per_split in rows:
        dev = summarize(per_split["dev"], percent=True)
        test = summarize(per_split["test"], percent=True)
        values = (*dev, *test) if exclude is None else (
            *dev, *test, map_without(per_split["test"], exclude))
        sig = compare(per_split["test"], baseline, metrics=["map"]).loc["map"]
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values)
                     + f" | {sig['p_ttest']:.3f} | {sig['p_randomization']:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_semeval2016"))
    ap.add_argument("--out", help="also write the Markdown table to this file")
    args = ap.parse_args(argv)
    t0 = time.time()
    engine, splits = prepare(args.data, args.work)

    rows = []  # (name, {split: per-query DataFrame})
    rows.append(("search-engine order (IR baseline)",
                 {s: evaluate(d[2], d[1], metrics=METRICS) for s, d in splits.items()}))
    for name, defaults, space in MODELS:
        model = make_model(name, **defaults)
        rows.append((f"{name} (default {model.cache_key()})",
                     {s: score(engine, model, d) for s, d in splits.items()}))
        best = max(grid(name, space), key=lambda m: score(engine, m, splits["dev"])["map"].mean())
        rows.append((f"{name} tuned on dev: {best.cache_key()}",
                     {s: score(engine, best, d) for s, d in splits.items()}))
    reference = bm25s_rows(engine, splits)
    if reference is not None:
        import bm25s
        rows.append((f"bm25s {bm25s.__version__} lucene k1=1.5 b=0.75 (reference, same archive)",
                     reference))
        folder = os.path.join(args.data, "semeval2016-task3-cqa-ql")
        related = {q.id for q in read_questions(
            [os.path.join(folder, XML.format(s)) for s in ("train-part2", *SPLITS)])}
        rows.append((f"bm25s {bm25s.__version__} lucene k1=1.5 b=0.75 (reference, index of the "
                     f"{len(related):,} related questions of 2016 only)",
                     bm25s_rows(engine, splits, related)))

    exclude = self_candidate_queries(engine, splits)
    table_text = table(rows, rows[0][1]["test"], "IR", exclude)
    print(table_text)
    print(f"\n({len(splits['dev'][0])} dev and {len(splits['test'][0])} test queries, "
          f"{len(exclude)} of them with themselves among their candidates; "
          f"{engine.n_docs} archive questions, {time.time() - t0:.0f} s)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table_text + "\n")


if __name__ == "__main__":
    main()
