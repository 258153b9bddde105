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

The setting (prepare(), score(), table()) is in scripts/_common.py: the other paper tables
(scripts/semeval2016_*.py) add the rows of their models to it.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from cqa_search.evaluation import evaluate
from cqa_search.readers import read_questions
from cqa_search.retrieval import make_model

from _common import (METRICS, SPLITS, paper_parser, prepare, score, self_candidate_queries,
                     semeval_xml, table, write_report)

# Term models: (name, default parameters, grid searched on dev).
MODELS = [
    ("bm25", {}, {"k1": [0.6, 0.9, 1.2, 1.5, 2.0], "b": [0.3, 0.5, 0.75, 0.9]}),
    ("lm-jm", {}, {"lam": [0.1, 0.2, 0.3, 0.5, 0.7, 0.9]}),
    ("lm-dir", {}, {"mu": [5, 10, 20, 50, 100, 200, 500, 2000]}),
    ("vsm", {}, {"sublinear_tf": [False, True]}),
    ("answers-bm25", {}, {"k1": [0.9, 1.2, 1.5], "b": [0.5, 0.75, 0.9]}),
    ("answers-lm-jm", {}, {"lam": [0.2, 0.5, 0.8]}),
]


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
        out[split] = evaluate(run, qrels, metrics=METRICS, rerank=True)
    return out


def main(argv=None):
    args = paper_parser(__doc__, "cqa_semeval2016").parse_args(argv)
    t0 = time.time()
    engine, splits = prepare(args.data, args.work)

    rows = []  # (name, {split: per-query DataFrame})
    rows.append(("search-engine order (IR baseline)",
                 {s: evaluate(d[2], d[1], metrics=METRICS, rerank=True)
                  for s, d in splits.items()}))
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
        related = {q.id for q in read_questions(
            [semeval_xml(args.data, s) for s in ("train-part2", *SPLITS)])}
        rows.append((f"bm25s {bm25s.__version__} lucene k1=1.5 b=0.75 (reference, index of the "
                     f"{len(related):,} related questions of 2016 only)",
                     bm25s_rows(engine, splits, related)))

    exclude = self_candidate_queries(engine, splits)
    table_text = table(rows, rows[0][1]["test"], "IR", exclude)
    print(table_text)
    print(f"\n({len(splits['dev'][0])} dev and {len(splits['test'][0])} test queries, "
          f"{len(exclude)} of them with themselves among their candidates; "
          f"{engine.n_docs} archive questions, {time.time() - t0:.0f} s)")
    write_report(args.out, table_text)


if __name__ == "__main__":
    main()
