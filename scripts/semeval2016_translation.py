#!/usr/bin/env python3
"""SemEval-2016 Task 3 subtask B with the translation models (zhou2011 Table 4 setting).

Trains the translation models on the shared SemEval archive of scripts/semeval2016.py
(train-part2 + dev + test threads, the derived part-1 CSV and the 2015 threads minus the
five leaked ones): question-answer pairs, pooling, TextRank, IBM Model 1, phrases up to
5 words. Then reranks the 10 related questions of each original question by

- LM (``lm_jm``, lambda = 0.2), WT (eqs. 3-4) and TransLM (eqs. 5-6, beta = 0.8): their own
  scores, no tuning;
- P-Trans: the eight features of §3.4 (PT, IPT, LW, ILW, PA, UWP, LM = ``lm_jm``,
  WT = ``wt``) combined linearly by Powell's MAP search (cqa_search.ranking), tuned on dev,
  with mu1 (question vs answer part, eq. 15) chosen on dev; also without TextRank (§4.4),
  with the question part only (mu1 = 1) and with tight bi-phrases only;
- controls: the same tuned combination over LM + WT + TransLM only (no phrase features);
- a robustness check: the weights learned on train-part2 (67 queries) instead of dev.

Significance (test MAP): paired t-test and randomization test against the best term model
(chosen by dev MAP among the default term models of scripts/semeval2016.py).

Usage: scripts/semeval2016_translation.py [--data ../shared/data] [--work DIR] [--out FILE.md]
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from cqa_search import SearchConfig, SearchEngine
from cqa_search.evaluation import evaluate, feature_table, run_of_scores, summarize
from cqa_search.index.models import add_model
from cqa_search.ranking import LinearRanker
from cqa_search.retrieval import make_model
from cqa_search.translation import TranslationModel

from _common import (METRICS, convert_split, paper_parser, prepare, score,
                     self_candidate_queries, table, write_report)

PTRANS = ["ptrans_pt", "ptrans_ipt", "ptrans_lw", "ptrans_ilw", "ptrans_pa", "ptrans_uwp",
          "lm_jm", "wt"]
TERM_MODELS = ["bm25", "lm-jm", "lm-dir", "vsm"]
MU1 = [0.5, 0.8, 0.9, 1.0]
EXAMPLES = ["visa", "famili visa", "drive licens", "bank account", "internet", "doctor"]


def stored(index, model):
    """The engine of ``index`` with ``model`` stored as its translation model (written, then
    read back): the variants are stored in turn, as two stored translation models would give
    the same features."""
    add_model(index, "translation", model)
    return SearchEngine.open(index)


def features(engine, splits, **scoring):
    """Feature tables of every split with the engine's translation model (its scoring
    parameters set to ``scoring``)."""
    engine.models["translation"].set_params(**scoring)
    eng = engine.with_config(SearchConfig(models=("translation",), ranker=None))
    out = {}
    for split, (queries, qrels, candidates) in splits.items():
        X, qid, docs, names = feature_table(eng, queries, candidates=candidates)
        y = np.array([qrels.get(q, {}).get(d, 0) > 0 for q, d in zip(qid, docs)], dtype=float)
        out[split] = (X, qid, docs, list(names), y, qrels)
    return out


def per_query(tables, scorer):
    """{split: per-query metrics} of the run given by ``scorer(X, names)`` on dev and test."""
    out = {}
    for split in ("dev", "test"):
        X, qid, docs, names, _, qrels = tables[split]
        out[split] = evaluate(run_of_scores(qid, docs, scorer(X, names)), qrels,
                              metrics=METRICS, rerank=True)
    return out


def column(name):
    return lambda X, names: X[:, names.index(name)]


def tuned(tables, feats, on="dev"):
    """A Powell-tuned linear combination of ``feats`` (fit on the split ``on``)."""
    X, qid, _, names, y, _ = tables[on]
    cols = [names.index(f) for f in feats]
    ranker = LinearRanker("powell", random_state=0).fit(X[:, cols], y, qid=qid,
                                                        feature_names=feats)
    return (lambda X, names: ranker.predict(X[:, [names.index(f) for f in feats]])), ranker


def main(argv=None):
    args = paper_parser(__doc__, "cqa_semeval2016_translation").parse_args(argv)
    warnings.simplefilter("ignore")
    t0 = time.time()
    engine, splits = prepare(args.data, args.work)
    index = engine.path
    term_splits = dict(splits)
    splits = {**splits, "train": convert_split(args.data, "train-part2", args.work)}
    report = []

    def say(text=""):
        print(text, flush=True)
        report.append(text)

    # -- training -----------------------------------------------------------------------
    trained = {name: TranslationModel(**params).fit(engine.view) for name, params in (
        ("translation", {}), ("translation-notextrank", {"textrank": False}),
        ("translation-tight", {"unaligned_edges": False}))}
    engine = stored(index, trained["translation"])
    s, s0 = trained["translation"].summary_, trained["translation-notextrank"].summary_
    say("## Training (the SemEval archive)\n")
    say("```\n" + str(s) + "\n```\n")
    say(f"TextRank (§3.3.2, window 3, d = 0.85) kept {s.corpus['tokens_after_textrank']:,} of "
        f"{s.corpus['tokens_before_textrank']:,} words; translations per source word "
        f"(p >= 1e-3): {s0.translations_per_word:.1f} without -> "
        f"{s.translations_per_word:.1f} with TextRank (co-occurring words "
        f"{s0.cooccurrences_per_word:.1f} -> {s.cooccurrences_per_word:.1f}; phrase pairs "
        f"{s0.phrase_pairs:,} -> {s.phrase_pairs:,}). The paper: 69 -> 24.\n")
    vocab = engine.index.vocab
    table2 = trained["translation"].phrase_table_
    say("Most probable translations phi(w|t) of a few source phrases (stems):\n")
    say("| source t | top 5 target phrases w |")
    say("|---|---|")
    for phrase in EXAMPLES:
        ids = vocab.ids(phrase.split())
        if (ids < 0).any():
            continue
        tops = table2.translations(ids.tolist(), k=5)
        say(f"| {phrase} | " + ", ".join(f"{' '.join(vocab.term(t) for t in w)} ({p:.2f})"
                                       for w, p in tops) + " |")

    # -- term models: the best by dev MAP is the significance baseline -----------------
    rows = [("search-engine order (IR baseline)",
             {sp: evaluate(d[2], d[1], metrics=METRICS, rerank=True)
              for sp, d in term_splits.items()})]
    terms = {}
    for name in TERM_MODELS:
        model = make_model(name)
        terms[name] = {sp: score(engine, model, d) for sp, d in term_splits.items()}
        rows.append((f"{name} (default {model.cache_key()})", terms[name]))
    best_term = max(terms, key=lambda n: terms[n]["dev"]["map"].mean())

    # -- WT, TransLM, P-Trans ------------------------------------------------------------
    by_mu = {mu: features(engine, splits, question_weight=mu) for mu in MU1}
    base = by_mu[MU1[0]]
    rows.append(("WT: Jeon et al. eqs. 3-4 (lambda 0.2)", per_query(base, column("wt"))))
    rows.append(("TransLM: Xue et al. eqs. 5-6 (beta 0.8, lambda 0.2)",
                 per_query(base, column("translm"))))
    for feats, label in ((["lm_jm", "wt"], "LM + WT"),
                         (["lm_jm", "wt", "translm"], "LM + WT + TransLM")):
        fn, _ = tuned(base, feats)
        rows.append((f"control: {label}, Powell-tuned on dev", per_query(base, fn)))
    choice = {}
    for mu, tabs in by_mu.items():
        fn, ranker = tuned(tabs, PTRANS)
        choice[mu] = (per_query(tabs, fn), ranker)
    best_mu = max(MU1, key=lambda mu: choice[mu][0]["dev"]["map"].mean())
    rows.append((f"P-Trans (l = 5): 8 features Powell-tuned on dev, mu1 = {best_mu} "
                 "(chosen on dev)", choice[best_mu][0]))
    rows.append(("P-Trans, question part only (mu1 = 1)", choice[1.0][0]))
    rows.append((f"P-Trans, weights learned on train-part2 (67 queries), mu1 = {best_mu}",
                 per_query(by_mu[best_mu], tuned(by_mu[best_mu], PTRANS, on="train")[0])))
    rows.append(("control: LM + WT + TransLM, weights learned on train-part2",
                 per_query(base, tuned(base, ["lm_jm", "wt", "translm"], on="train")[0])))
    no_tr = features(stored(index, trained["translation-notextrank"]), splits,
                     question_weight=best_mu)
    rows.append((f"P-Trans without TextRank (mu1 = {best_mu})",
                 per_query(no_tr, tuned(no_tr, PTRANS)[0])))
    tight = features(stored(index, trained["translation-tight"]), splits,
                     question_weight=best_mu)
    engine = stored(index, trained["translation"])  # the index keeps the default model
    rows.append((f"P-Trans with tight bi-phrases only (mu1 = {best_mu})",
                 per_query(tight, tuned(tight, PTRANS)[0])))
    for name in ("ptrans_pt", "ptrans_lw", "ptrans_ipt"):
        rows.append((f"feature {name} alone (mu1 = {best_mu})",
                     per_query(by_mu[best_mu], column(name))))

    baseline = terms[best_term]["test"]
    say(f"\n## Reranking SemEval-2016 subtask B (MAP etc. in %; p-values: test MAP against "
        f"the best term model on dev, {best_term})\n")
    say(table(rows, baseline, best_term, self_candidate_queries(engine, splits)))
    weights = choice[best_mu][1]
    say("\nP-Trans weights (z-scored features, tuned on dev): " + ", ".join(
        f"{f} {w:+.2f}" for f, w in zip(weights.feature_names_in_, weights.coef_)))
    means = {label: (summarize(r["dev"])["map"], summarize(r["test"])["map"])
             for label, r in rows}
    lm = means[[lbl for lbl in means if lbl.startswith("lm-jm")][0]]
    wt = means["WT: Jeon et al. eqs. 3-4 (lambda 0.2)"]
    tlm = means["TransLM: Xue et al. eqs. 5-6 (beta 0.8, lambda 0.2)"]
    pt = means[[lbl for lbl in means if lbl.startswith("P-Trans (l = 5)")][0]]
    for k, split in enumerate(("dev", "test")):
        seq = [lm[k], wt[k], tlm[k], pt[k]]
        holds = all(a < b for a, b in zip(seq, seq[1:]))
        say(f"\n{split}: LM {100 * lm[k]:.2f} < WT {100 * wt[k]:.2f} < TransLM "
            f"{100 * tlm[k]:.2f} < P-Trans {100 * pt[k]:.2f}: "
            f"{'holds' if holds else 'does not hold'}")
    say(f"\n({len(splits['train'][0])} train-part2, {len(splits['dev'][0])} dev and "
        f"{len(splits['test'][0])} test queries, "
        f"{engine.n_docs} archive questions, {time.time() - t0:.0f} s)")
    write_report(args.out, "\n".join(report))


if __name__ == "__main__":
    main()
