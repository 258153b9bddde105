#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask A: choose the answer shown with an archived question.

Subtask A ranks the 10 comments of each related question (thread) by their relevance to
that question (RELC_RELEVANCE2RELQ: Good is relevant; PotentiallyUseful and Bad are not),
over the threads subtask A keeps (repeats of an earlier thread are skipped). Official
conventions: top 10, a thread without a Good comment scores 0 and counts. P@1 is the
product's figure: how often the answer shown first is a Good one.

Setting. One archive of every 2016 thread (train-part2, dev, test) and the 2015 threads
(minus the five that are 2016 test threads), indexed **without** the comment labels.
:class:`cqa_search.answers.AnswerSelector` trains its translation table on this archive's
question-comment pairs (text only). The supervised ranker learns from the train-part2
labels only (the derived part-1 CSV has no comments). Every choice (the unsupervised
prior among a few candidates, the learner and its parameters, the feature set) is made on
dev; test is scored once per reported system. A second index of the train-part2 threads
alone gives a ranker that is then *transferred* to the full archive (``fit(view,
ranker=...)``): the stored-and-applied-elsewhere path.

Anchors from the task paper (test MAP): chronological 59.53, random 52.80, best team
(KeLP) 79.19.

Usage: scripts/semeval2016_answers.py [--data ../shared/data] [--work DIR] [--out FILE.md]
"""
from __future__ import annotations

import os
import sys
import time

from cqa_search import Question, SearchEngine, build_index
from cqa_search.answers import FEATURE_NAMES, UNSUPERVISED_WEIGHTS, AnswerSelector, \
    answer_features
from cqa_search.evaluation import compare, evaluate, run_of_scores, summarize
from cqa_search.evaluation.datasets import semeval_comment_ranking
from cqa_search.index.store import is_compatible
from cqa_search.readers import read_questions

from _common import LEAKED_2015, SEMEVAL2015, paper_parser, semeval_xml, write_report

SPLITS = ("train-part2", "dev", "test")
METRICS = ["map", "mrr", "p@1"]
# Unsupervised candidates compared on dev: single content scores and content + priors
# (unit weights on z-scored features). The package default is UNSUPERVISED_WEIGHTS.
PRIORS = {"by_asker": -1.0, "question_mark": -1.0}
UNSUPERVISED = [
    {"translation": 1.0}, {"translation_inverse": 1.0}, {"lm": 1.0}, {"bm25": 1.0},
    {"cosine": 1.0}, {"lm": 1.0, "translation": 1.0},
    {"translation": 1.0, **PRIORS, "log_position": -1.0},
    {"lm": 1.0, **PRIORS}, {"cosine": 1.0, **PRIORS}, {"lm": 1.0, "log_length": 1.0, **PRIORS},
    {"lm": 1.0, **PRIORS, "log_position": -1.0},
    {"lm": 1.0, "log_length": 1.0, **PRIORS, "log_position": -1.0},
]
# Supervised: learner -> parameter grid (chosen on dev).
GRID = {"ranksvm": [{"C": c} for c in (0.01, 0.1, 1.0)],
        "coordinate-ascent": [{}], "powell": [{}], "lambdarank": [{}],
        "perceptron": [{}]}


def unlabelled(question):
    """The question without its comments' labels (they never reach an index)."""
    extra = {k: v for k, v in question.extra.items() if k != "answer_labels"}
    return Question(question.id, question.title, question.body, question.category,
                    question.tags, question.answers, None, question.duplicate_of, extra)


def index_of(paths, out):
    if not is_compatible(out):
        questions = [unlabelled(q) for q in read_questions(paths) if q.id not in LEAKED_2015]
        print(build_index(questions, out), file=sys.stderr)
    return SearchEngine.open(out)


def scored(engine, model, qrels):
    """Per-thread metrics of ranking each thread's comments by the model."""
    rows = engine.archive.rows(list(qrels))
    X, row, position = answer_features(engine.view, model, rows)
    threads = [engine.archive[r] for r in row.tolist()]
    run = run_of_scores([q.id for q in threads],
                        [q.extra["answer_ids"][k] for q, k in zip(threads, position.tolist())],
                        model.decision_function(X))
    return evaluate(run, qrels, metrics=METRICS, rerank=True)


def describe(config):
    params = config["learner_params"] or ""
    return f"{config['learner']} {params}".strip() + (", TextRank" if config["textrank"] else "")


def name_of(weights):
    return " ".join(f"{'+' if w > 0 else '-'}{f}" for f, w in weights.items())


def main(argv=None):
    args = paper_parser(__doc__, "cqa_semeval2016_a").parse_args(argv)
    t0 = time.time()
    xml = {s: semeval_xml(args.data, s) for s in SPLITS}
    extra = [os.path.join(args.data, "semeval2015-task3-reformatted", n) for n in SEMEVAL2015]
    engine = index_of([*xml.values(), *extra], os.path.join(args.work, "index"))
    tasks = {s: semeval_comment_ranking([xml[s]]) for s in SPLITS}   # (qrels, chronological)
    qrels = {s: t[0] for s, t in tasks.items()}
    train_y = {thread: list(judged.values()) for thread, judged in qrels["train-part2"].items()}

    dev_rows, test_rows = [], []
    chrono = {s: evaluate(tasks[s][1], qrels[s], metrics=METRICS, rerank=True)
              for s in ("dev", "test")}
    test_rows.append(("chronological order (official baseline)", chrono))

    # The translation tables (without and with TextRank), trained once each.
    tables = {}
    for textrank in (False, True):
        t1 = time.time()
        tables[textrank] = AnswerSelector(unsupervised_weights={"translation": 1.0},
                                          textrank=textrank).fit(engine.view).ibm1_
        print(f"translation table (textrank={textrank}): {time.time() - t1:.0f} s",
              file=sys.stderr)
    # Unsupervised: each candidate prior on dev; the package default on dev and test.
    t1 = time.time()
    default = AnswerSelector().fit(engine.view)
    print(f"unsupervised default fit: {time.time() - t1:.1f} s", file=sys.stderr)
    candidates = []
    for weights in UNSUPERVISED:
        model = AnswerSelector(unsupervised_weights=weights).fit(engine.view,
                                                                 translation=tables[False])
        candidates.append((scored(engine, model, qrels["dev"]), weights))
        dev_rows.append((f"unsupervised {name_of(weights)}", candidates[-1][0]))
    chosen = max(candidates, key=lambda c: c[0]["map"].mean())[1]
    if chosen != UNSUPERVISED_WEIGHTS:
        print(f"note: the best unsupervised candidate on dev is {name_of(chosen)}, not the "
              f"package default UNSUPERVISED_WEIGHTS", file=sys.stderr)
    test_rows.append((f"unsupervised default: {name_of(UNSUPERVISED_WEIGHTS)}",
                      {s: scored(engine, default, qrels[s]) for s in ("dev", "test")}))
    # Supervised: every learner and parameter, with and without TextRank before the
    # translation table, trained on train-part2; the best on dev.
    best = None
    for textrank, table in tables.items():
        for learner, grid in GRID.items():
            for params in grid:
                config = {"learner": learner, "learner_params": params or None,
                          "textrank": textrank, "random_state": 0}
                model = AnswerSelector(**config).fit(engine.view, train_y, translation=table)
                dev = scored(engine, model, qrels["dev"])
                dev_rows.append((f"supervised {describe(config)}", dev))
                if best is None or dev["map"].mean() > best[1]["map"].mean():
                    best = (config, dev, model)
    config, dev, model = best
    label = describe(config)
    # Ablation on dev: the chosen learner without each feature.
    for feature in FEATURE_NAMES:
        kept = tuple(f for f in FEATURE_NAMES if f != feature)
        ablated = AnswerSelector(features=kept, **config).fit(
            engine.view, train_y, translation=tables[config["textrank"]])
        dev_rows.append((f"supervised {label} without {feature}",
                         scored(engine, ablated, qrels["dev"])))
    test_rows.append((f"supervised (train-part2 labels), chosen on dev: {label}",
                      {"dev": dev, "test": scored(engine, model, qrels["test"])}))
    weights = dict(zip(model.ranker_.feature_names_in_, model.ranker_.coef_))
    # Transferred: trained on an index of the train-part2 threads alone, applied here.
    train_engine = index_of([xml["train-part2"]], os.path.join(args.work, "train-index"))
    trained = AnswerSelector(**config).fit(train_engine.view, train_y)
    moved = AnswerSelector(**config).fit(engine.view, ranker=trained.ranker_,
                                         translation=tables[config["textrank"]])
    test_rows.append((f"supervised {label}, trained on a train-part2-only index and applied "
                      "to this archive", {s: scored(engine, moved, qrels[s])
                                          for s in ("dev", "test")}))

    text = "\n\n".join([test_table(test_rows), dev_table(dev_rows, chrono["dev"])])
    text += ("\n\nchosen supervised weights (z-scored features): "
             + ", ".join(f"{k} {v:+.3f}" for k, v in weights.items()))
    print(text)
    print(f"\n({len(qrels['dev'])} dev and {len(qrels['test'])} test threads, "
          f"{len(qrels['train-part2'])} training threads; {engine.n_docs} archive questions; "
          f"{time.time() - t0:.0f} s)")
    write_report(args.out, text)


def test_table(rows):
    """Rows ``(name, {split: per-thread metrics})``; test MAP p-values against the first
    row (chronological) and the second (the unsupervised default)."""
    header = ("| system | dev MAP | dev MRR | dev P@1 | test MAP | test MRR | test P@1 "
              "| test MAP vs chronological: p (t-test / rand.) "
              "| vs unsupervised default: p (t-test / rand.) |")
    lines = [header, "|---|" + "---:|" * (header.count("|") - 2)]
    for name, per_split in rows:
        dev = summarize(per_split["dev"], percent=True)
        test = summarize(per_split["test"], percent=True)
        cells = [f"{v:.2f}" for v in (*dev, *test)]
        for baseline in (rows[0][1]["test"], rows[1][1]["test"]):
            sig = compare(per_split["test"], baseline, metrics=["map"]).loc["map"]
            cells.append(f"{sig['p_ttest']:.3g} / {sig['p_randomization']:.3g}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dev_table(rows, baseline):
    header = "| candidate (dev only) | dev MAP | dev MRR | dev P@1 | dev MAP vs chronological: p (t-test) |"
    lines = [header, "|---|---:|---:|---:|---:|"]
    for name, per_query in rows:
        m = summarize(per_query, percent=True)
        p = compare(per_query, baseline, metrics=["map"]).loc["map", "p_ttest"]
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in m) + f" | {p:.3g} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
