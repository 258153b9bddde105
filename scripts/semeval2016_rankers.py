#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask B with learned rankers: every learner, with and without the
search-engine rank, on the feature columns the index provides.

Setting (scripts/semeval2016.py, _common.prepare(): one archive of train-part2 + dev + test + the
derived part-1 CSV + the 2015 threads). Training queries: the 67 original questions of
train-part2 and (``--part1 extra``, the default) the 200 original questions of the
derived part-1 CSV, reranking their related questions inside the archive:

- the CSV has no ids, but prepare() put every distinct ``rel_question`` text into the
  archive (``<csv stem>:<line>`` ids, the last row of each text), so each row's related
  question is found by its text;
- the original question's subject is not a column: ``feature`` is its subject and the
  related question's subject joined by a space, so the subject is taken as the words
  that all ``feature`` values of the original question share at the start;
- the rows of an original question come in the search-engine order (relevance falls
  with the row position as it does with the official rank on dev), so the row position
  gives the search-engine rank; 41 of the official 1,999 rows are missing, so a few
  positions are shifted.

The search-engine rank means the same for every query: the given score of a candidate is
1/position among its query's candidates in the search-engine order, for part 1 (row
order) as for part 2, dev and test (RELQ_RANKING_ORDER; the official 1/RELQ_RANKING_ORDER,
up to 1/99, exists only for those), so ``given_score`` equals ``given_rrank`` and the one
column ``given_rrank`` is the SE-rank feature.
  The part-1 related questions have no subject and no comments in the CSV: their
  ``answers_*`` features are 0, constant within each part-1 query, so they do not move
  the pairwise or per-query MAP objectives.

For every feature set (``--feature-sets``), every learner and both variants (the groups'
columns plus the search-engine rank ``given_rrank``, or without it), a small grid of
hyperparameters is trained on the training queries and scored on dev; so is
``cqa-search train``'s default (LinearRankerCV: C and families chosen by 5-fold
cross-validation on the training queries, never worse there than the SE order with the
SE rank, or BM25 without it). Each table shows, per learner, the configuration with the
best dev MAP, run on test once. The system of the whole run is the one row with the best
dev MAP over every feature set, variant, learner and configuration: feature set, learner
and parameters are all chosen on dev, and test is scored once. Stacking uses each base
learner's dev-selected configuration (Tomeh et al.'s "best model for each ranking
approach"). Official conventions (semeval): top 10, ties in the given order, a question
without relevant candidates scores 0 and counts. Test MAP is also given without the 41
test queries that have themselves among their candidates.
Significance of test MAP: paired t-test and randomization test against the search-engine
order (IR) and against BM25.

Feature groups are chosen by column-name prefix (``--feature-set``), so the script can be
rerun once translation, topic or multiview models are stored in the index:
term (bm25, lm_*, vsm, answers_*), translation (wt, translm, ptrans_*), topics (topic_*),
multiview (mv_*), context (given_*, category_match, log_length), or all.

Translation, topic and multiview models missing from the index are fitted with the
defaults of ``cqa-search fit`` when a feature set needs them.

Usage: scripts/semeval2016_rankers.py [--feature-sets "term context" all ...]
       [--part1 extra|none] [--learners ...] [--data ../shared/data] [--work DIR]
       [--out FILE.md] [--details FILE.json]
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

from cqa_search.evaluation import evaluate, feature_table, run_of_scores
from cqa_search.exceptions import ConvergenceWarning
from cqa_search.ranking import LinearRanker, LinearRankerCV, NoImprovementWarning
from cqa_search.readers import read_questions
from cqa_search.retrieval import make_model

from _common import (METRICS, SEMEVAL2016, convert_split, fit_default_models, p_values,
                     paper_parser, positions, prepare, score, self_candidate_queries,
                     split_cells, write_report)

GROUPS = {"term": ("bm25", "lm_", "vsm", "answers_"),
          "translation": ("wt", "translm", "ptrans_"),
          "topics": ("topic_",),
          "multiview": ("mv_",),
          "context": ("given_", "category_match", "log_length")}
SE_RANK = ("given_rrank",)
GIVEN = ("given_score", "given_rrank")
LABELS = {"PerfectMatch": 2, "Relevant": 1, "Irrelevant": 0}
# learner -> list of (params, other LinearRanker arguments): the dev grid
GRIDS = {
    "powell": [({"n_restarts": r}, {}) for r in (5, 20)],
    "coordinate-ascent": [({"n_restarts": r, "init": i}, {})
                          for r in (1, 5) for i in ("best-feature", "uniform")],
    "ranksvm": [({"C": c, "loss": loss, "pair_weight": pw}, {})
                for c in (0.01, 0.1, 1.0, 10.0) for loss in ("squared_hinge", "hinge")
                for pw in ("query", "uniform")],
    "perceptron": [({"algorithm": a, "margin": m, "tau": t}, {})
                   for a in ("fast", "full") for m in ("uneven", "even") for t in (0.1, 1.0)],
    "boosting": [({"epsilon": e, "n_thresholds": n}, {"max_iter": r})
                 for e in (0.0025, 0.01, 0.05) for n in (8, 16) for r in (10, 30, 100, 300)],
    "lambdarank": [({"learning_rate": lr, "alpha": a}, {})
                   for lr in (0.01, 0.05) for a in (1e-4, 1e-2)],
    "stacking": [({"meta": m}, {}) for m in ("ranksvm", "coordinate-ascent")],
    "train-defaults": [({}, {})],
}


def part1_queries(folder):
    """The derived part-1 CSV as queries, qrels and a candidates run (see the docstring)."""
    csv = os.path.join(folder, "train-part1-derived", "TRAIN-BASE.csv")
    rows = list(read_questions(csv, columns={"body": "rel_question"}, auto_id=True))
    doc_of = {q.body: q.id for q in rows}  # the id prepare() kept for each text
    by_question = {}
    for q in rows:
        by_question.setdefault(q.extra["question"], []).append(q)
    queries, qrels, run = [], {}, {}
    for n, (body, group) in enumerate(by_question.items(), 1):
        subject = []
        for words in zip(*(q.extra["feature"].split() for q in group)):
            if len(set(words)) > 1:
                break
            subject.append(words[0])
        qid = f"P1-{n:03d}"
        queries.append({"id": qid, "text": "\n".join(t for t in (" ".join(subject), body) if t),
                        "category": None})
        run[qid], qrels[qid] = {}, {}
        for position, q in enumerate(group, 1):
            doc = doc_of[q.body]
            if doc not in run[qid]:
                run[qid][doc] = 1.0 / position
                qrels[qid][doc] = LABELS[q.extra["labels"]]
    return queries, qrels, run


def columns(names, feature_set, with_se_rank):
    """Columns of the feature groups, plus (``with_se_rank``) or minus the search-engine
    rank feature (``given_score``, equal to it, never)."""
    prefixes = tuple(p for s in feature_set for p in GROUPS[s]) if "all" not in feature_set \
        else ("",)
    return [j for j, n in enumerate(names)
            if (n.startswith(prefixes) and n not in GIVEN) or (with_se_rank and n in SE_RANK)]


def run_of_model(model, table, cols, candidates):
    """The run of ``model`` on a table's pairs, in the given candidate order (the scorer
    keeps it on ties)."""
    X, qid, docs, _ = table
    return run_of_scores(qid, docs, model.predict(X[:, cols]), order=candidates)


def fit(learner, params, extra, train, cols, names, seed):
    X, qid, _, y = train
    used = [names[j] for j in cols]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", NoImprovementWarning)
        if learner == "train-defaults":
            baseline = next((b for b in ("given_rrank", "bm25") if b in used), None)
            cv = LinearRankerCV(baseline=baseline, random_state=seed).fit(
                X[:, cols], (y >= 1).astype(float), qid=qid, feature_names=used)
            return _Columns(cv.best_estimator_, used)
        return LinearRanker(learner, params=params, random_state=seed, **extra).fit(
            X[:, cols], (y >= 1).astype(float), qid=qid, feature_names=used)


class _Columns:
    """A ranker on a subset of ``used`` (LinearRankerCV may leave features out), applied
    to the ``used`` columns."""

    def __init__(self, ranker, used):
        self.ranker, self.train_score_ = ranker, ranker.train_score_
        self._cols = [used.index(f) for f in ranker.feature_names_in_]
        self.description = ",".join(ranker.feature_names_in_)

    def predict(self, X):
        return self.ranker.predict(X[:, self._cols])


def select(learner, grid, tables, qrels, candidates, cols, names, seed, log):
    """The grid configuration of best dev MAP (first on ties), with every dev score."""
    best, best_map, scores = None, -1.0, []
    for params, extra in grid:
        t0 = time.time()
        model = fit(learner, params, extra, tables["train"], cols, names, seed)
        dev_map = float(evaluate(run_of_model(model, tables["dev"], cols, candidates["dev"]),
                                 qrels["dev"],
                                 metrics=["map"], rerank=True)["map"].mean())
        scores.append({"params": params, **extra, "dev_map": dev_map,
                       "train_map": model.train_score_, "seconds": time.time() - t0})
        log(f"  {learner} {params} {extra}: dev MAP {100 * dev_map:.2f}")
        if dev_map > best_map + 1e-12:
            best, best_map = (params, extra, model), dev_map
    return best, scores


def describe(params, extra):
    items = {**params, **extra}
    return ", ".join(f"{k}={v}" for k, v in items.items()) if items else "defaults"


def markdown(rows, baselines, exclude) -> str:
    """``rows``: (system, features, {split: per-query DataFrame}); test MAP without the
    ``exclude`` queries; p-values of test MAP against each baseline (name -> per-query
    test DataFrame)."""
    n_other = sum(q not in exclude for q in next(iter(baselines.values())).index)
    head = ("| system | features | dev MAP | dev MRR | dev P@1 | dev P@5 | test MAP | test MRR "
            f"| test P@1 | test P@5 | test MAP, {n_other} queries without self-candidate | "
            + " | ".join(f"p vs {b} (t / rand.)" for b in baselines) + " |")
    lines = [head, "|---|---|" + "---:|" * (9 + len(baselines))]
    for system, features, per_split in rows:
        cells = split_cells(per_split, exclude) + [p_values(per_split["test"], base)
                                                   for base in baselines.values()]
        lines.append(f"| {system} | {features} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = paper_parser(__doc__, "cqa_semeval2016")
    ap.add_argument("--feature-sets", nargs="+", default=["term context"], metavar="GROUPS",
                    help="feature sets, each a space-separated list of groups among "
                         f"{', '.join([*GROUPS, 'all'])} (column-name prefixes), e.g. "
                         "'term context' 'term translation context' all")
    ap.add_argument("--part1", choices=["extra", "none"], default="extra",
                    help="also train on the derived part-1 CSV (default: extra)")
    ap.add_argument("--learners", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--details", help="write every configuration's dev MAP (JSON) here")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    feature_sets = [tuple(fs.split()) for fs in args.feature_sets]
    for fs in feature_sets:
        unknown = [g for g in fs if g not in (*GROUPS, "all")]
        if unknown or not fs:
            ap.error(f"--feature-sets: unknown group {unknown[0] if unknown else '(none)'!r}")
    log = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr))
    t0 = time.time()
    engine, splits = prepare(args.data, args.work)
    groups = {g for fs in feature_sets for g in fs}
    engine = fit_default_models(engine.path, [f for f in ("translation", "topics", "multiview")
                                              if f in groups or "all" in groups], log)
    exclude = self_candidate_queries(engine, splits)
    train_sets = {"part2": convert_split(args.data, "train-part2", args.work)}
    if args.part1 == "extra":
        train_sets["part1"] = part1_queries(os.path.join(args.data, SEMEVAL2016))

    def table(queries, qrels, candidates):
        X, qid, docs, names = feature_table(engine, queries, candidates=positions(candidates))
        y = np.array([qrels.get(q, {}).get(d, 0) for q, d in zip(qid, docs)], dtype=float)
        return X, qid, docs, y, names

    tables, qrels, candidates = {}, {}, {}
    parts = [table(*data) for data in train_sets.values()]
    names = list(parts[0][4])
    tables["train"] = tuple(np.concatenate([p[i] for p in parts]) for i in range(4))
    for split in ("dev", "test"):
        *t, _ = table(*splits[split])
        tables[split], qrels[split], candidates[split] = tuple(t), splits[split][1], \
            splits[split][2]
    n_train_q = len(np.unique(tables["train"][1]))
    log(f"features: {', '.join(names)}; training queries {n_train_q} "
        f"({', '.join(train_sets)}), {len(tables['train'][0])} candidates")

    ir = {s: evaluate(d[2], d[1], metrics=METRICS, rerank=True) for s, d in splits.items()}
    bm25 = {s: score(engine, make_model("bm25"), d) for s, d in splits.items()}
    baselines = [("search-engine order (IR)", "given rank", ir),
                 ("BM25 (k1=1.2, b=0.75) on the candidates", "bm25", bm25)]
    details, texts, everything = {}, [], []  # everything: (dev MAP, row) of every configuration
    for feature_set in feature_sets:
        rows = list(baselines)
        for with_se in (True, False):
            cols = columns(names, feature_set, with_se)
            label = "+".join(feature_set) + (" + SE rank" if with_se else " (no SE rank)")
            chosen = {}
            log(f"{label}: {', '.join(names[j] for j in cols)}")
            for learner in args.learners:
                grid = GRIDS[learner]
                if learner == "stacking":
                    base = [b for b in GRIDS if b not in ("stacking", "train-defaults")
                            and b in chosen]
                    if not base:
                        continue
                    # each base learner with its dev-chosen options (and boosting's rounds)
                    base_params = {b: {**chosen[b][0], **chosen[b][1]} for b in base}
                    grid = [({**p, "base": base, "base_params": base_params}, {})
                            for p, _ in GRIDS["stacking"]]
                (params, extra, model), scores = select(learner, grid, tables, qrels,
                                                        candidates, cols, names, args.seed, log)
                chosen[learner] = (params, extra)
                details[f"{label} | {learner}"] = scores
                per_split = {s: evaluate(run_of_model(model, tables[s], cols, candidates[s]),
                                         qrels[s], metrics=METRICS, rerank=True)
                             for s in ("dev", "test")}
                shown = {k: v for k, v in params.items() if k not in ("base", "base_params")}
                name = f"{learner} ({describe(shown, extra)})" if learner != "train-defaults" \
                    else f"cqa-search train defaults (chose {model.description})"
                rows.append((name, label, per_split))
                everything.append((per_split["dev"]["map"].mean(), rows[-1]))
        texts.append(f"#### {' + '.join(feature_set)}\n\n"
                     + markdown(rows, {"IR": ir["test"], "BM25": bm25["test"]}, exclude))
    # the one system of the run: best dev MAP over every feature set, variant and learner
    # (first on ties, in run order)
    best = max(range(len(everything)), key=lambda i: (everything[i][0], -i))
    texts.insert(0, "#### The system chosen on dev (feature set, learner and parameters), "
                 "test scored once\n\n"
                 + markdown([*baselines, everything[best][1]],
                            {"IR": ir["test"], "BM25": bm25["test"]}, exclude))
    text = "\n\n".join(texts)
    print(text)
    print(f"\n({len(splits['dev'][0])} dev and {len(splits['test'][0])} test queries, "
          f"{len(exclude)} of them with themselves among their candidates; {n_train_q} "
          f"training queries ({' + '.join(train_sets)}); {engine.n_docs} archive questions; "
          f"{len(everything)} systems compared on dev; {time.time() - t0:.0f} s)")
    write_report(args.out, text)
    if args.details:
        with open(args.details, "w", encoding="utf-8") as f:
            json.dump(details, f, indent=1)


if __name__ == "__main__":
    main()
