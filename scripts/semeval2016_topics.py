#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask B with the topic models of Zhou et al. (2014), like its Table 3.

The archive and splits are those of scripts/semeval2016.py (_common.prepare()): every archive
thread, the 2015 threads included minus the five 2016 test questions; categories are
RELQ_CATEGORY (questions of the derived part-1 CSV have none: one more group). NMF, CNMF,
GNMF and GNMFNC are fitted with the paper's settings (K_s=20, K_p=8, a=100, 100 sweeps;
NMF with K_s+K_p topics) and each candidate of the 10 given ones is scored by eq. 14,
``s = alpha * s_topic + (1 - alpha) * s_term`` with the term score (BM25 or LM-JM,
lambda=0.2) min-max normalised per query and alpha = 0.6. The original questions carry no
category: each is folded in against all categories' topics (--inference all, the
default), or the category of its top BM25 hits, or the best-reconstructing one.

Printed (Markdown): the Table-3 rows for BM25 and LM with test-MAP significance against the
term model (paired t-test and randomization test); the same with alpha tuned on dev; the
spread of MAP over random seeds; the category inferences compared (MAP; and, for the two
that pick a category, accuracy on archive questions held out of the fit); fit statistics.

Usage: scripts/semeval2016_topics.py [--data ../shared/data] [--work DIR] [--seeds 5]
                                     [--inference reconstruction|hits|all] [--out FILE.md]
"""
from __future__ import annotations

import copy
import time
import warnings

import numpy as np

from cqa_search import SearchConfig, SearchEngine
from cqa_search.evaluation import evaluate, feature_table, run_of_scores
from cqa_search.exceptions import ConvergenceWarning
from cqa_search.factorization import (VARIANTS, GNMFNC, TopicModel, interpolate,
                                      term_question_matrix)
from cqa_search.retrieval import BM25, LMJelinekMercer, top_k
from cqa_search.searcher import LocalSearcher

from _common import METRICS, paper_parser, prepare, self_candidate_queries, table, write_report

TERMS = {"BM25": BM25(), "LM": LMJelinekMercer()}
ALPHAS = [round(0.1 * i, 1) for i in range(11)]


INFERENCES = ("all", "hits", "reconstruction")


def fit_all(view, seeds, inference, max_iter=100, tol=0.0):
    """{(variant, seed): model} and a fit-statistics table (100 sweeps, as the paper)."""
    models, lines = {}, ["| model | seed | sweeps | objective (initial -> final) | partial "
                         "rescalings | fit s |", "|---|---:|---:|---|---:|---:|"]
    for variant in VARIANTS:
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                m = TopicModel(variant, random_state=seed, category_inference=inference,
                               max_iter=max_iter, tol=tol,
                               feature_name=f"topic_{variant}_{seed}").fit(view)
            models[variant, seed] = m
            lines.append(f"| {variant} | {seed} | {m.n_iter_} | {m.initial_loss_:.4g} -> "
                         f"{m.loss_curve_[-1]:.4g} | {m.n_partial_rescalings_} | "
                         f"{m.fit_seconds_:.1f} |")
    return models, "\n".join(lines)


def features(engine, models, splits):
    """Per split: (X, qid, doc_ids, names) for the given candidates."""
    eng = SearchEngine(LocalSearcher(
        engine.searcher.data, {**engine.models, **{m.feature_name_: m for m in models}},
        SearchConfig(features=tuple(TERMS.values()),
                     models=tuple(m.feature_name_ for m in models), ranker=None)))
    out = {}
    for split, (queries, qrels, candidates) in splits.items():
        out[split] = feature_table(eng, queries, candidates=candidates)
    return out


def system(feats, splits, term, topic=None, alpha=0.6):
    """{split: per-query metrics} of eq. 14 (term only when topic is None)."""
    out = {}
    for split, (queries, qrels, candidates) in splits.items():
        X, qid, docs, names = feats[split]
        s_term = X[:, names.index(TERMS[term].feature_name)]
        scores = s_term if topic is None else interpolate(
            s_term, X[:, names.index(topic)], alpha, qid=qid)
        # in the given candidate order: ties keep it, as the official scorer does
        out[split] = evaluate(run_of_scores(qid, docs, scores, order=candidates), qrels,
                              metrics=METRICS, rerank=True)
    return out


def tuned(feats, splits, term, topic):
    best = max(ALPHAS, key=lambda a: system(feats, {"dev": splits["dev"]}, term, topic,
                                            a)["dev"]["map"].mean())
    return best, system(feats, splits, term, topic, best)


def heldout_inference(view, n_held=300, seed=0):
    """Accuracy of the two category inferences on categorised archive questions held out
    of the fit (GNMFNC, paper settings); BM25 hits exclude every held-out question."""
    D, _ = term_question_matrix(view)
    labels = np.asarray(view.doc_category)
    rng = np.random.default_rng(seed)
    held = np.sort(rng.choice(np.flatnonzero(labels >= 0), n_held, replace=False))
    train = np.setdiff1d(np.arange(D.shape[1]), held)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = GNMFNC(random_state=0).fit(D[:, train], labels[train])
    recon = est.infer_groups(D[:, held])
    field = view.index["question"]
    counts = field.rows_matrix()
    allowed_base = np.ones(D.shape[1], dtype=bool)
    allowed_base[held] = False
    hits = []
    for r in held.tolist():
        row = counts[r]
        scores, matched = BM25().score_all(field, row.indices.astype(np.int64),
                                           row.data.astype(np.float64))
        rows = top_k(scores, 10, allowed=matched & allowed_base)
        if len(rows) == 0:
            hits.append(-2)
            continue
        votes = {}
        for x in rows.tolist():
            votes[labels[x]] = votes.get(labels[x], 0.0) + scores[x]
        hits.append(max(votes, key=votes.get))
    truth = labels[held]
    majority = np.bincount(labels[train][labels[train] >= 0]).argmax()
    return {"reconstruction": float(np.mean(recon == truth)),
            "hits": float(np.mean(np.array(hits) == truth)),
            "majority class": float(np.mean(truth == majority)), "n": n_held,
            "n_categories": len(view.categories)}


def main(argv=None):
    ap = paper_parser(__doc__, "cqa_semeval2016")
    ap.add_argument("--seeds", type=int, default=5, help="random seeds per model (default 5)")
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--inference", choices=INFERENCES, default="all",
                    help="category inference of the main tables (default: %(default)s)")
    args = ap.parse_args(argv)
    t0 = time.time()
    engine, splits = prepare(args.data, args.work)
    seeds = list(range(args.seeds))
    models, fit_table = fit_all(engine.view, seeds, args.inference)
    others = [copy.copy(m).set_params(category_inference=inference,
                                      feature_name=f"topic_{variant}_{seed}_{inference}")
              for (variant, seed), m in models.items()
              for inference in INFERENCES if inference != args.inference]
    feats = features(engine, [*models.values(), *others], splits)

    def name(variant, seed, inference):
        return f"topic_{variant}_{seed}" + ("" if inference == args.inference
                                            else f"_{inference}")

    report = []
    exclude = self_candidate_queries(engine, splits)

    # Table 3: seed 0, alpha = 0.6 (and the topic score alone)
    for term in TERMS:
        base = system(feats, splits, term)
        rows = [(term, base)]
        for variant in VARIANTS:
            rows.append((f"{term} + {variant.upper()} (alpha={args.alpha})",
                         system(feats, splits, term, f"topic_{variant}_0", args.alpha)))
        report.append(f"### {term} + topic models, alpha = {args.alpha} (seed 0)\n\n"
                      + table(rows, base["test"], term, exclude))
    rows = [(f"{variant.upper()} alone (alpha=1)",
             system(feats, splits, "BM25", f"topic_{variant}_0", 1.0)) for variant in VARIANTS]
    report.append("### Topic score alone (seed 0; significance against BM25)\n\n"
                  + table(rows, system(feats, splits, "BM25")["test"], "BM25", exclude))

    # alpha tuned on dev
    for term in TERMS:
        base = system(feats, splits, term)
        rows = [(term, base)]
        for variant in VARIANTS:
            alpha, res = tuned(feats, splits, term, f"topic_{variant}_0")
            rows.append((f"{term} + {variant.upper()} (alpha={alpha} tuned on dev)", res))
        report.append(f"### {term} + topic models, alpha tuned on dev (seed 0)\n\n"
                      + table(rows, base["test"], term, exclude))

    # spread over seeds
    lines = ["| system | dev MAP mean ± sd | test MAP mean ± sd | test MAP per seed |",
             "|---|---:|---:|---|"]
    for term in TERMS:
        for variant in VARIANTS:
            dev, test = [], []
            for seed in seeds:
                res = system(feats, splits, term, f"topic_{variant}_{seed}", args.alpha)
                dev.append(100 * res["dev"]["map"].mean())
                test.append(100 * res["test"]["map"].mean())
            lines.append(f"| {term} + {variant.upper()} | {np.mean(dev):.2f} ± {np.std(dev):.2f} "
                         f"| {np.mean(test):.2f} ± {np.std(test):.2f} | "
                         + ", ".join(f"{x:.2f}" for x in test) + " |")
    report.append(f"### MAP over {len(seeds)} seeds (alpha = {args.alpha})\n\n" + "\n".join(lines))

    # category inference
    lines = ["| system | inference | dev MAP (mean over seeds) | test MAP (mean over seeds) |",
             "|---|---|---:|---:|"]
    for term in TERMS:
        for variant in VARIANTS:
            if variant == "nmf":
                continue
            for inference in INFERENCES:
                res = [system(feats, splits, term, name(variant, s, inference), args.alpha)
                       for s in seeds]
                dev = np.mean([100 * r["dev"]["map"].mean() for r in res])
                test = np.mean([100 * r["test"]["map"].mean() for r in res])
                lines.append(f"| {term} + {variant.upper()} | {inference} | {dev:.2f} | "
                             f"{test:.2f} |")
    acc = heldout_inference(engine.view)
    report.append(f"### Category inference for queries without a category (alpha = {args.alpha})"
                  "\n\n" + "\n".join(lines)
                  + f"\n\nAccuracy on {acc['n']} categorised archive questions held out of a "
                  f"GNMFNC fit ({acc['n_categories']} categories): reconstruction "
                  f"{100 * acc['reconstruction']:.1f}%, BM25 hits {100 * acc['hits']:.1f}%, "
                  f"majority class {100 * acc['majority class']:.1f}%.")
    report.append("### Fits\n\n" + fit_table)
    text = "\n\n".join(report)
    print(text)
    print(f"\n({len(splits['dev'][0])} dev and {len(splits['test'][0])} test queries, "
          f"{engine.n_docs} archive questions, {time.time() - t0:.0f} s)")
    write_report(args.out, text)


if __name__ == "__main__":
    main()
