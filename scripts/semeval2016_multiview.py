#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask B with SMT + MF (Zhou et al. 2013): rows like its Tables 4-6.

Same setting as scripts/semeval2016.py (_common.prepare() and table()): rerank the
10 related questions of each original question; archive = train-part2 + dev + test +
the derived part-1 CSV + the 2015 threads minus the five leaked ones. For each row, an
SMT + MF model (K = 100, lambda_1 = 1, lambda_p = 0.25, as the paper) is fitted on the
archive, stored in the index (`add_model`, then read back; each row's model replaces the
one before it), and its features, one cosine per view, are combined with VSM linearly
(eq. 20) with weights that maximise dev MAP (scipy Powell from a few starts; weights
>= 0); test is scored once with them.
Rows: VSM; VSM + MF (one view); DT + MF (dummy translator); each translator alone
(P = 2): the FreeDict dictionaries fra, deu, ita, spa (Debian dict-freedict-eng-*,
installed with apt-get when missing and allowed) and IBM Model 1 (a table stored in the
index, else one trained with cqa_search.translation on the archive's question-answer
pairs); all of them together. Significance of test MAP (paired t-test, randomization
test) against VSM and against the best earlier row by dev MAP.

Usage: scripts/semeval2016_multiview.py [--data ../shared/data] [--work DIR] [--out F.md]
       [--dict-dir DIR] [--no-install] [-k 100] [--max-iter 100] [--random-state 0]
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import scipy.optimize as sopt

from cqa_search import SearchConfig, SearchEngine
from cqa_search.evaluation import compare, evaluate, feature_table, run_of_scores
from cqa_search.factorization.dictd import DEFAULT_DICT_DIR
from cqa_search.factorization.multiview import MultiViewModel
from cqa_search.factorization.views import find_translation_table, make_translator
from cqa_search.index.models import add_model, remove_model
from cqa_search.retrieval import VSM
from cqa_search.translation import IBMModel1, build_parallel_corpus

from _common import (METRICS, paper_parser, prepare, self_candidate_queries, table,
                     write_report)

LANGS = ("fra", "deu", "ita", "spa")
#: The name each row's model is stored under in turn.
MODEL = "multiview"


def find_dictionaries(dict_dir, install):
    """The languages whose FreeDict English-X dictionary is in ``dict_dir`` (installing
    the Debian packages with apt-get when allowed and missing)."""
    def present():
        return [lang for lang in LANGS
                if os.path.isfile(os.path.join(dict_dir, f"freedict-eng-{lang}.index"))]
    have = present()
    missing = [lang for lang in LANGS if lang not in have]
    if missing and install and shutil.which("apt-get"):
        packages = [f"dict-freedict-eng-{lang}" for lang in missing]
        print(f"installing {' '.join(packages)} with apt-get", file=sys.stderr)
        for cmd in (["apt-get", "install", "-y", "-q", *packages],
                    ["apt-get", "update", "-q"],  # a fresh machine has no package lists
                    ["apt-get", "install", "-y", "-q", *packages]):
            if subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL).returncode == 0 \
                    and cmd[1] == "install":
                break
        have = present()
    return have


def ibm1_table(engine, log):
    """An IBM Model 1 table: the one stored in the index, else one trained here."""
    probs = find_translation_table(engine.models)
    if probs is not None:
        log.append("IBM Model 1: the table stored in the index")
        return probs
    t0 = time.time()
    corpus, _ = build_parallel_corpus(engine.view)
    model = IBMModel1().fit(corpus)
    log.append(f"IBM Model 1: trained here with cqa_search.translation "
               f"(IBMModel1(), defaults, build_parallel_corpus(view) defaults; "
               f"{time.time() - t0:.0f} s)")
    return model.translation_probs_


def features(index, name, splits):
    """Per split: (queries, qrels, {qid: (doc ids in given order, X)}, feature names)."""
    config = SearchConfig(features=(VSM(),), models=(name,) if name else (), ranker=None)
    engine = SearchEngine.open(index, config=config)
    out = {}
    for split, (queries, qrels, candidates) in splits.items():
        X, qid, docs, names = feature_table(engine, queries, candidates=candidates)
        cols = [i for i, n in enumerate(names) if n == "vsm" or n.startswith("mv_")]
        per_query = {}
        for q in queries:
            given = list(candidates.get(q["id"], {}))
            rows = {d: i for i, d in enumerate(docs) if qid[i] == q["id"]}
            idx = [rows[d] for d in given if d in rows]
            per_query[q["id"]] = ([docs[i] for i in idx], X[np.array(idx, dtype=int)][:, cols]
                                  if idx else np.zeros((0, len(cols))))
        out[split] = (queries, qrels, per_query, [names[i] for i in cols])
    return out


def semeval_map(per_query, qrels, queries, w):
    """Official SemEval MAP of the linear scores X @ w (stable sort: given order on ties)."""
    total = 0.0
    for q in queries:
        docs, X = per_query[q["id"]]
        if not len(docs):
            continue
        order = np.argsort(-(X @ w), kind="stable")[:10]
        judged = qrels.get(q["id"], {})
        rel = np.array([judged.get(docs[i], 0) >= 1 for i in order])
        if rel.any():
            total += (np.cumsum(rel)[rel] / (np.flatnonzero(rel) + 1)).mean()
    return 100.0 * total / len(queries)


def tune(dev, n_features):
    """Weights >= 0 maximising dev MAP (Powell from a few starts; VSM-only first)."""
    queries, qrels, per_query, _ = dev
    starts = [np.eye(n_features)[0]]
    if n_features > 1:
        starts += [np.r_[1.0, np.full(n_features - 1, v)] for v in (0.25, 1.0)]
    best_w, best = starts[0], semeval_map(per_query, qrels, queries, starts[0])
    for w0 in starts:
        res = sopt.minimize(lambda w: -semeval_map(per_query, qrels, queries, np.abs(w)), w0,
                            method="Powell", options={"xtol": 1e-3, "ftol": 1e-4,
                                                      "maxfev": 4000})
        value = semeval_map(per_query, qrels, queries, np.abs(res.x))
        if value > best + 1e-9:
            best_w, best = np.abs(res.x), value
    return best_w / max(best_w.max(), 1e-12), best


def linear_run(split_data, w):
    """The run of eq. 20's scores ``X @ w`` of each query's candidates."""
    queries, _, per_query, _ = split_data
    ids = [q["id"] for q in queries]
    return run_of_scores([q for q in ids for _ in per_query[q][0]],
                         [d for q in ids for d in per_query[q][0]],
                         np.concatenate([per_query[q][1] @ w for q in ids]))


def main(argv=None):
    ap = paper_parser(__doc__, "cqa_semeval2016_multiview")
    ap.add_argument("--dict-dir", default=DEFAULT_DICT_DIR)
    ap.add_argument("--no-install", action="store_true",
                    help="do not apt-get install missing dictionaries")
    ap.add_argument("-k", "--n-components", type=int, default=100)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--random-state", type=int, default=0)
    args = ap.parse_args(argv)
    t_start = time.time()
    engine, splits = prepare(args.data, args.work)
    index = engine.path
    # each row's model is stored under one name, replacing the row before it (two stored
    # models may not give the same features, mv_orig): other multiview models go first
    for name in [n for n, m in engine.models.items() if m.kind == "multiview" and n != MODEL]:
        remove_model(index, name)
    notes = []
    langs = find_dictionaries(args.dict_dir, not args.no_install)
    notes.append(f"dictionaries ({args.dict_dir}): "
                 + (", ".join(f"freedict-eng-{lang}" for lang in langs) or "none found"))
    for lang in LANGS:
        if lang not in langs:
            notes.append(f"dict:{lang}: not run (install dict-freedict-eng-{lang})")
    ibm1_probs = ibm1_table(engine, notes)
    translators = [f"dict:{lang}" for lang in langs] + (["ibm1"] if ibm1_probs is not None
                                                        else [])

    configs = [("VSM", None), ("VSM + MF (one view)", []), ("DT + MF (orig, dummy)", ["dummy"])]
    configs += [(f"SMT + MF (P = 2: orig, {t})", [t]) for t in translators]
    if len(translators) > 1:
        configs.append((f"SMT + MF (P = {len(translators) + 1}: orig, "
                        f"{', '.join(translators)})", translators))

    rows, details = [], []
    for label, views in configs:
        t0 = time.time()
        name = None
        if views is not None:
            name = MODEL
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                translators = [make_translator(v, dict_dir=args.dict_dir,
                                               translation_probs=ibm1_probs) for v in views]
                model = MultiViewModel(",".join(views), dict_dir=args.dict_dir,
                                       n_components=args.n_components, max_iter=args.max_iter,
                                       random_state=args.random_state).fit(
                    engine.view, translators=translators)
            add_model(index, name, model)
            fit_info = (f"{model.n_iter_} sweeps{' (max_iter)' if caught else ''}, "
                        f"{model.fit_seconds_:.0f} s, views "
                        + ", ".join(f"{n}:{e.n_features}" for n, e in
                                    zip(model.view_names_, model.encoders_)))
        else:
            fit_info = "-"
        data = features(index, name, splits)
        names = data["dev"][3]
        w, dev_map = tune(data["dev"], len(names))
        per_split = {s: evaluate(linear_run(d, w), d[1], metrics=METRICS, rerank=True)
                     for s, d in data.items()}
        rows.append((label, per_split))
        details.append(f"| {label} | {fit_info} | "
                       + ", ".join(f"{n} {v:.3f}" for n, v in zip(names, w)) + " |")
        print(f"{label}: dev MAP {per_split['dev']['map'].mean() * 100:.2f}, test MAP "
              f"{per_split['test']['map'].mean() * 100:.2f} ({time.time() - t0:.0f} s)",
              file=sys.stderr)

    vsm_test = rows[0][1]["test"]
    lines = table(rows, vsm_test, "VSM", self_candidate_queries(engine, splits)).split("\n")
    lines[0] += " best earlier row (dev MAP) | test MAP vs it: p (t-test) | p (rand.) |"
    lines[1] += "---|---:|---:|"
    for i in range(len(rows)):
        if i < 2:
            lines[i + 2] += " - | - | - |"
            continue
        j = max(range(1, i), key=lambda r: rows[r][1]["dev"]["map"].mean())
        sig = compare(rows[i][1]["test"], rows[j][1]["test"], metrics=["map"]).loc["map"]
        lines[i + 2] += f" {rows[j][0]} | {sig['p_ttest']:.3f} | {sig['p_randomization']:.3f} |"
    text = "\n".join(lines)
    text += ("\n\n| system | factorization | eq. 20 weights (tuned on dev MAP) |\n|---|---|---|\n"
             + "\n".join(details))
    text += "\n\n" + "\n".join(f"- {n}" for n in notes)
    text += (f"\n\n({len(splits['dev'][0])} dev and {len(splits['test'][0])} test queries, "
             f"{engine.n_docs} archive questions, K = {args.n_components}, max_iter = "
             f"{args.max_iter}, random_state = {args.random_state}, "
             f"{time.time() - t_start:.0f} s)")
    print(text)
    write_report(args.out, text)


if __name__ == "__main__":
    main()
