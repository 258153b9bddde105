#!/usr/bin/env python3
"""Where is the lexical gap, and do the translation, topic and multiview features bridge it?

For the candidates of each query, pairs (relevant r, non-relevant n) of the same query are
split by their word overlap with the query (the fraction of the query's index terms the
candidate contains): *gap pairs*, where the relevant candidate shares fewer of the query's
words than the non-relevant one, and the others. A term model orders a gap pair wrongly
almost by construction; a feature that bridges the lexical gap orders it right. Printed:
how many pairs are gap pairs, and each feature's pairwise accuracy on both kinds (ties
count one half).

Collections: SemEval-2016 dev (the 10 given candidates; models fitted with their defaults
on the index of scripts/semeval2016.py), and the StackExchange duplicates (BM25 top 100;
models fitted on the collection's archive). The SemEval translation model is also fitted
on other parallel corpora (question-answer pairs by default; Jeon et al.'s pairs of
questions answered alike; title-body pairs) to see which data moves the gap pairs.

Usage: scripts/lexical_gap.py [--data ../shared/data] [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import warnings

import numpy as np

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.evaluation import (evaluate, feature_table, read_qrels, read_queries,
                                   run_of_scores)
from cqa_search.evaluation.datasets import convert_stackexchange
from cqa_search.index.models import add_model
from cqa_search.index.store import CURRENT
from cqa_search.translation import TranslationModel

from _common import DATA, fit_default_models, positions, prepare, stackexchange_sites

#: Parallel corpora tried for the SemEval translation model (TranslationModel options).
CORPORA = {"question-answer (default)": {},
           "question-answer + similar questions (k=5, cos >= 0.5)": {"similar_questions": 5},
           "similar questions only (k=10, cos >= 0.3)": {"answers": None,
                                                         "similar_questions": 10,
                                                         "min_similarity": 0.3},
           "question-answer + title-body": {"title_body": True}}


def overlap(engine, queries, qid, docs):
    """Fraction of each pair's query terms that its candidate contains."""
    text = {q["id"]: q["text"] for q in queries}
    terms = {q: set(engine.analyzer.analyze(t)) for q, t in text.items()}
    out = np.zeros(len(qid))
    for i, (q, d) in enumerate(zip(qid, docs)):
        cand = set(engine.analyzer.analyze(engine.archive.get(d).text))
        out[i] = len(terms[q] & cand) / max(1, len(terms[q]))
    return out


def pairs(qid, y, ov):
    """(relevant row, non-relevant row, is a gap pair) of every query."""
    rel, non, gap = [], [], []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        r, n = rows[y[rows] >= 1], rows[y[rows] < 1]
        rr, nn = np.repeat(r, len(n)), np.tile(n, len(r))
        rel.append(rr)
        non.append(nn)
        gap.append(ov[rr] < ov[nn])
    return np.concatenate(rel), np.concatenate(non), np.concatenate(gap)


def accuracy(x, rel, non, mask):
    if not mask.any():
        return float("nan")
    a, b = x[rel[mask]], x[non[mask]]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def report(title, X, names, qid, y, ov, extra=()):
    rel, non, gap = pairs(qid, y, ov)
    print(f"\n#### {title}\n")
    print(f"{len(np.unique(qid))} queries, {len(y):,} candidates, {len(rel):,} (relevant, "
          f"non-relevant) pairs of a query, {gap.sum():,} ({100 * gap.mean():.0f}%) gap pairs "
          "(the relevant candidate shares fewer of the query's words).\n")
    print("| feature | accuracy on gap pairs | on the other pairs |")
    print("|---|---:|---:|")
    for j, name in enumerate(names):
        if np.ptp(X[:, j]) > 0 and not name.startswith("given_"):
            print(f"| {name} | {accuracy(X[:, j], rel, non, gap):.3f} | "
                  f"{accuracy(X[:, j], rel, non, ~gap):.3f} |")
    for name, x in extra:
        print(f"| {name} | {accuracy(x, rel, non, gap):.3f} | {accuracy(x, rel, non, ~gap):.3f} |")


def semeval(data, work):
    engine, splits = prepare(data, work)
    engine = fit_default_models(engine.path)
    queries, qrels, candidates = splits["dev"]
    given = positions(candidates)
    X, qid, docs, names = feature_table(engine.with_config(SearchConfig(ranker=None)),
                                        queries, candidates=given)
    y = np.array([qrels[q].get(d, 0) for q, d in zip(qid, docs)], dtype=float)
    ov = overlap(engine, queries, qid, docs)
    buckets = [(0, .1), (.1, .2), (.2, .3), (.3, 1.01)]
    print("\nSemEval-2016 dev, share of relevant candidates by word overlap with the query: "
          + ", ".join(f"[{lo}, {min(hi, 1)}): "
                      f"{100 * (y[(ov >= lo) & (ov < hi)] >= 1).mean():.0f}% "
                      f"of {((ov >= lo) & (ov < hi)).sum()}" for lo, hi in buckets))
    extra, maps = [], []
    # the variants go into a copy, each in turn its translation model (two stored translation
    # models would give the same features)
    copy = os.path.join(work, "lexical_gap", "index")
    if not os.path.exists(copy):
        shutil.copytree(os.path.join(work, "index"), copy)
    for label, params in CORPORA.items():
        model = TranslationModel(**params).fit(engine.view)
        add_model(copy, "translation", model)
        variant = SearchEngine.open(copy, config=SearchConfig(models=("translation",),
                                                              ranker=None))
        F, qid_v, docs_v, names_v = feature_table(variant, queries, candidates=given)
        if list(qid_v) != list(qid) or list(docs_v) != list(docs):
            raise RuntimeError("the variant's candidates differ from the index's")
        F = F[:, [names_v.index("wt"), names_v.index("translm")]]
        for j, f in enumerate(("wt", "translm")):
            extra.append((f"{f}, {label}: {model.corpus_stats_['n_pairs']:,} pairs", F[:, j]))
            run = run_of_scores(qid, docs, F[:, j])
            maps.append((extra[-1][0], 100 * evaluate(run, qrels, metrics=["map"])["map"].mean()))
    report("SemEval-2016 dev: the 10 given candidates", X, names, qid, y, ov, extra)
    print("\nDev MAP of ranking by one translation feature: " + "; ".join(
        f"{name} {m:.2f}" for name, m in maps) + ".")


def stackexchange(data, work):
    out = os.path.join(work, "stackexchange")
    summary = convert_stackexchange(stackexchange_sites(data), out)
    path = os.path.join(out, "index")
    if not os.path.exists(os.path.join(path, CURRENT)):
        build_index(summary.file("archive.jsonl"), path)
        fit_default_models(path)
    engine = SearchEngine.open(path, config=SearchConfig(ranker=None))
    queries = [{**q, "category": None} for q in read_queries(summary.file("queries.jsonl"))]
    qrels = read_qrels(summary.file("qrels.txt"))
    X, qid, docs, names = feature_table(engine, queries, k=100)
    y = np.array([qrels[q].get(d, 0) for q, d in zip(qid, docs)], dtype=float)
    report("StackExchange duplicates: BM25 top 100", X, names, qid, y,
           overlap(engine, queries, qid, docs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_semeval2016"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    semeval(args.data, args.work)
    stackexchange(args.data, args.work)


if __name__ == "__main__":
    main()
