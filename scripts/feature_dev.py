#!/usr/bin/env python3
"""Candidate feature families for the learned pipeline, measured on dev data only (issue 26).

A prototype: each family's columns are computed here, in python over an index with every
model fitted, for the candidates of the feature tables that ``full_retrieval.py --work
WORK`` caches (``WORK/<collection>/sklearn318/features-<a>.npz``), and appended to them
(``features-<a>+new.npz``). Then :class:`~cqa_search.ranking.LinearRankerCV` with
``cqa-search train``'s defaults (C and families chosen by inner cross-validation) is
compared with and without each family by query-grouped 5-fold cross-validation (trec AP
at depth 100), paired over the queries, on the dev sets of ``learner_dev.py`` (git
0358e6d):

- ``semeval-train``: SemEval-2016 train-part2's 61 original questions over the
  full-retrieval archive (``a`` = 0.7);
- ``demo``: the demo's 28 training queries (``a`` = 0.8);
- ``semeval-inner`` / ``stackexchange-inner``: the training queries of each of the scored
  collection's 5 folds, cross-validated inside them (``a`` = 0.5 / 0.2).

The families (``q`` the query's part, ``d`` the question's; parts: title, body, whole):

- ``align``: soft alignment (Kusner-style word matching, idf-weighted): for each word of
  one side its best match on the other (1 if the same term, else ``S_ij`` of the
  embeddings model's neighbour matrix), the idf-weighted mean; ``align_recall_<part>``
  over the query's words, ``align_precision_<part>`` over the question's;
- ``cross``: the query's whole text against the question's title (BM25, VSM, soft cosine
  with the word-vector matrix): a typed query has no body, and a subject is a question's
  densest part (for a query of one text, the same as the per-field title features);
- ``ov``: word n-gram overlap of the titles (Jaccard of terms and of bigrams, the longest
  common subsequence over the query title's length) and of the whole texts (bigrams), as
  the SemEval-2016/2017 systems have;
- ``ans``: the query against the question's answers: soft cosine, VSM, soft alignment
  (the answers' BM25 is the strongest single feature on the dev sets);
- ``length``: ``log(1 + |title|)`` and ``|log((1 + |q|) / (1 + |d|))|`` (a ratio's log
  alone is a per-query constant minus ``log_length``: nothing a linear ranker lacks).

Usage: scripts/feature_dev.py --work WORK columns COLLECTION A
       scripts/feature_dev.py --work WORK run COLLECTION A FAMILY [--inner]
       scripts/feature_dev.py --work WORK table
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

from cqa_search.data import DEMO_QUERIES, demo_dir, demo_split
from cqa_search.evaluation import read_qrels, read_queries
from cqa_search.ranking import selection

from _common import held_out_ap, split5

NEW = {"align": [f"align_{d}_{p}" for p in ("title", "body", "question")
                 for d in ("recall", "precision")],
       "cross": ["cross_bm25", "cross_vsm", "cross_softcos"],
       "length": ["length_title", "length_ratio"],
       "ov": ["ov_jaccard_title", "ov_bigram_title", "ov_bigram_question", "ov_lcs_title"],
       "ans": ["ans_softcos", "ans_vsm", "ans_align_recall", "ans_align_precision"]}
#: The families of the first round, together (``ov`` and ``ans`` came after it).
ALL = ("align", "cross", "length")
DATASETS = [("semeval-train", "0.7", False, "SemEval-2016 train-part2, 61 queries"),
            ("demo", "0.8", False, "demo training queries, 28"),
            ("semeval", "0.5", True, "SemEval-2016 training folds, 5 × 78"),
            ("stackexchange", "0.2", True, "StackExchange training folds, 5 × 40")]


# -- the columns ----------------------------------------------------------------------------
def _align(qterms, dterms_by_row, S, idf):
    """(recall, precision) of each row: idf-weighted mean over the query's distinct terms
    of their best match among the row's, and the reverse."""
    from cqa_search.vectors.softcos import idf_of

    n = len(dterms_by_row)
    rec, prec = np.zeros(n), np.zeros(n)
    qterms = np.unique(qterms)
    if len(qterms) == 0:
        return rec, prec
    wq = idf_of(idf, qterms)
    Mq = S[qterms].tocsr()  # |Q| x V
    for r, d in enumerate(dterms_by_row):
        d = np.unique(d)
        if len(d) == 0:
            continue
        sim = Mq[:, d].toarray()
        sim[qterms[:, None] == d[None, :]] = 1.0
        wd = idf_of(idf, d)
        rec[r] = wq @ sim.max(axis=1) / wq.sum()
        prec[r] = wd @ sim.max(axis=0) / wd.sum()
    return rec, prec


def _bigrams(seq):
    return set(zip(seq[:-1].tolist(), seq[1:].tolist()))


def _lcs(a, b):
    """Length of the longest common subsequence of two term sequences."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _overlap(qp, fields, rows):
    """Word n-gram overlap of the query's title (whole text) with the questions'."""
    out = {k: np.zeros(len(rows)) for k in NEW["ov"]}
    seqs = {}
    for part in ("title", "question"):
        terms, pos = fields[part].sequences_of(rows)
        seqs[part] = [terms[pos == i] for i in range(len(rows))]
    qt, qq = qp["title"], qp["question"]
    for i in range(len(rows)):
        dt, dq = seqs["title"][i], seqs["question"][i]
        u = set(qt.tolist()) | set(dt.tolist())
        if u:
            out["ov_jaccard_title"][i] = len(set(qt.tolist()) & set(dt.tolist())) / len(u)
        for key, x, y in (("ov_bigram_title", qt, dt), ("ov_bigram_question", qq, dq)):
            bx, by = _bigrams(x), _bigrams(y)
            if bx | by:
                out[key][i] = len(bx & by) / len(bx | by)
        if len(qt):
            out["ov_lcs_title"][i] = _lcs(qt.tolist(), dt.tolist()) / len(qt)
    return out


def columns(work, coll, a):
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.vectors import softcos
    from cqa_search.vectors.scoring import _bag, query_parts

    base = os.path.join(work, coll)
    with np.load(os.path.join(base, "sklearn318", f"features-{a}.npz")) as z:
        tab = {k: z[k] for k in z.files}
    names = [str(n) for n in tab["names"]]
    engine = SearchEngine.open(os.path.join(base, "sklearn318", "index"),
                               config=SearchConfig(ranker=None))
    view = engine.view
    scorer = engine.models["embeddings"].scorer(view)
    m = scorer.model
    S = m.emb_similarity_
    queries = {q["id"]: q for q in read_queries(os.path.join(base, "data", "queries.jsonl"))}
    qid, docs = tab["qid"], tab["docs"]
    new = [c for fam in NEW.values() for c in fam]
    out = np.zeros((len(qid), len(new)))
    fields = {**scorer.fields, "question": scorer.question}
    check = []
    for q in dict.fromkeys(qid.tolist()):
        sel = np.flatnonzero(qid == q)
        rows = engine.searcher.rows(docs[sel].tolist())
        spec = queries[q]
        query = engine.analyze(spec["text"], title=spec.get("title"), body=spec.get("body"))
        qp = query_parts(query)
        col = {}
        for part in ("title", "body", "question"):
            terms, pos = fields[part].sequences_of(rows)
            by_row = [terms[pos == i] for i in range(len(rows))]
            col[f"align_recall_{part}"], col[f"align_precision_{part}"] = _align(
                qp[part], by_row, S, m.idf_)
        ids, qtf = _bag(qp["question"])
        col["cross_bm25"] = scorer._bm25.score_rows(fields["title"], ids, qtf.astype(float), rows)
        col["cross_vsm"] = scorer._vsm.score_rows(fields["title"], ids, qtf.astype(float), rows)
        col["cross_softcos"] = scorer._soft_cosines(query, "emb", "question_title",
                                                    qp["question"], fields["title"], rows,
                                                    scorer.norms[rows, 0])
        col.update(_overlap(qp, fields, rows))
        answers = view.index["answers"]
        terms, pos = answers.sequences_of(rows)
        col["ans_align_recall"], col["ans_align_precision"] = _align(
            qp["question"], [terms[pos == i] for i in range(len(rows))], S, m.idf_)
        col["ans_vsm"] = scorer._vsm.score_rows(answers, ids, qtf.astype(float), rows)
        col["ans_softcos"] = scorer._soft_cosines(
            query, "emb", "question_answers", qp["question"], answers, rows,
            softcos.self_similarity(answers, rows, m.idf_, [S])[:, 0])
        tl = fields["title"].doc_len[rows]
        col["length_title"] = np.log1p(tl)
        col["length_ratio"] = np.abs(np.log1p(len(query.sequence))
                                     - np.log1p(fields["question"].doc_len[rows]))
        out[sel] = np.column_stack([col[c] for c in new])
        # the table's own per-field column, recomputed: the queries are analysed as it was
        ti, tq = _bag(qp["title"])
        if len(ti):
            mine = scorer._bm25.score_rows(fields["title"], ti, tq.astype(float), rows)
            check.append(np.max(np.abs(mine - tab["X"][sel, names.index("field_title_bm25")])))
    print(coll, a, "max |field_title_bm25 recomputed - table| =", max(check, default=0))
    path = os.path.join(base, "sklearn318", f"features-{a}+new.npz")
    np.savez(path + ".tmp.npz",
             X=np.hstack([tab["X"], out]), y=tab["y"], qid=qid, docs=docs,
             names=np.array(names + new))
    os.replace(path + ".tmp.npz", path)


# -- the comparison (learner_dev.py's protocol) ---------------------------------------------
def run(work, coll, a, fam, inner):
    for f, cols in NEW.items():  # the new families, by prefix
        selection.FAMILIES.setdefault(f, (f + "_",))
    base = os.path.join(work, coll)
    qrels = read_qrels(os.path.join(base, "data", "qrels.txt"))
    with np.load(os.path.join(base, "sklearn318", f"features-{a}+new.npz")) as z:
        X, y, qid, names = z["X"], z["y"], z["qid"], [str(n) for n in z["names"]]
    new = [c for cols in NEW.values() for c in cols]
    families = ALL if fam == "all" else (fam,) if fam in NEW else ()
    keep = [j for j, n in enumerate(names) if n not in new or n.split("_")[0] in families]
    X, names = X[:, keep], [names[j] for j in keep]
    n_rel = np.array([sum(g >= 1 for g in qrels[q].values()) for q in qid])
    ids = sorted(set(qid.tolist()))
    if coll == "demo":
        training = {q["id"] for q in demo_split(read_queries(demo_dir() / DEMO_QUERIES))[0]}
        ids = [q for q in ids if q in training]
    res, choices = {}, []
    for k, (pool, _) in enumerate(split5(ids) if inner else [(ids, None)]):
        for tr, te in split5(pool, seed=1 if inner else 0):
            ap, cv = held_out_ap(X, y, qid, names, n_rel, tr, te)
            res.update({f"{k}|{q}": v for q, v in ap.items()})
            choices.append(f"{cv.chosen_}:{cv.best_params_}:"
                           + ",".join(f for f in cv.features_ if f.split("_")[0] in NEW))
    tag = f"{coll}-{a}-{fam}{'-inner' if inner else ''}"
    os.makedirs(os.path.join(work, "feature_dev"), exist_ok=True)
    with open(os.path.join(work, "feature_dev", f"{tag}.json"), "w") as f:
        json.dump({"coll": coll, "family": fam, "inner": inner, "ap": res,
                   "choices": choices}, f)
    print(tag, f"MAP {100 * np.mean(list(res.values())):.2f}", choices, flush=True)


def table(work):
    from scipy.stats import ttest_rel

    runs = {}
    for path in glob.glob(os.path.join(work, "feature_dev", "*.json")):
        with open(path) as f:
            d = json.load(f)
        runs.setdefault(d["coll"] + ("-inner" if d["inner"] else ""), {})[d["family"]] = d
    sets = [c + ("-inner" if inner else "") for c, _, inner, _ in DATASETS]
    print("| features (learner: `train`'s defaults) | "
          + " | ".join(label for *_, label in DATASETS) + " | pooled Δ (p) |")
    print("|---|" + "---:|" * (len(DATASETS) + 1))
    for fam in ["base", *NEW, "all"]:
        cells, diffs = [], []
        for ds in sets:
            r = runs.get(ds, {})
            if fam not in r or "base" not in r:
                cells.append("–")
                continue
            keys = sorted(r[fam]["ap"])
            x = np.array([r[fam]["ap"][k] for k in keys])
            b = np.array([r["base"]["ap"][k] for k in keys])
            if fam == "base":
                cells.append(f"{100 * x.mean():.2f}")
                continue
            p = ttest_rel(x, b).pvalue if np.any(x != b) else 1.0
            cells.append(f"{100 * x.mean():.2f} ({100 * (x - b).mean():+.2f}, p {p:.2f})")
            diffs += list(x - b)
        if fam == "base" or not diffs:
            pooled = "–"
        else:
            d = np.array(diffs)
            p = ttest_rel(d, np.zeros_like(d)).pvalue if np.any(d) else 1.0
            pooled = f"{100 * d.mean():+.2f} (p {p:.2f}, {len(d)})"
        label = ("today's families" if fam == "base" else
                 f"+ {fam} ({', '.join(NEW[fam])})" if fam in NEW else f"+ {', '.join(ALL)}")
        print(f"| {label} | " + " | ".join(cells) + f" | {pooled} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("what", choices=("columns", "run", "table"))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--inner", action="store_true")
    args = ap.parse_args(argv)
    if args.what == "columns":
        columns(args.work, *args.args)
    elif args.what == "run":
        run(args.work, *args.args, args.inner)
    else:
        table(args.work)


if __name__ == "__main__":
    sys.exit(main())
