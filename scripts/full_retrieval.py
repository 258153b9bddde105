#!/usr/bin/env python3
"""Full-archive retrieval: search the whole archive for each query (the engine's real job).

Collections (all small; read the numbers as indications, not leaderboards):
- StackExchange duplicates: 8 small site dumps (4,634 questions, duplicate notices
  stripped by the reader); the 50 questions closed as duplicates are the queries (51 links).
- StackFAQ: 1,249 paraphrase queries against 125 threads (one relevant thread each).
- SemEval-2016 full retrieval: the 120 original questions of dev and test search the
  whole archive of scripts/semeval2016.py (2016 related questions, derived part-1 texts,
  2015 threads), each thread once (``convert_semeval(..., full_retrieval=True)``);
  relevant = its PerfectMatch/Relevant related questions; the 22 queries without any are
  left out (AP would be 0 for every system).
- The demo archive's held-out queries (``cqa-search demo``): trained on its 28 training
  queries, scored on the 33 held-out ones, instead of cross-validation.

A query never retrieves itself, and queries are searched without their category (as a
user searches), with their title and body when they have them (the per-field features).
trec convention (AP over every relevant question), depth 100.

Rows, every choice made on training queries only (query-grouped 5-fold cross-validation:
each query is scored by a system chosen and trained without it):
- BM25 with the default analysis and parameters; BM25 tuned (text analysis of
  :data:`ANALYZERS`, k1, b chosen on the training folds);
- the hybrid first stage alone (``(1-a)*bm25/max bm25 + a*cosine`` of SIF vectors, no
  ranker): with ``a`` chosen on the training folds as ``cqa-search train`` chooses it
  (the training queries' R@100, then the MAP of the order), and with the default ``a`` of
  an index without a ranker;
- the **learned pipeline**: ``cqa-search train`` with its defaults (the hybrid first
  stage's ``a`` chosen on the training queries; LinearRankerCV: RankSVM over its top 100,
  C and model families chosen by inner cross-validation, never worse than the first
  stage's order or the best single feature on the training queries), with the
  translation, GNMFNC topic, multiview (IBM1 view) and embeddings models fitted on the
  collection's own archive, on the index of the default analysis unless another's
  pipeline scores significantly better in the inner cross-validation of the training
  folds (AP over every relevant question, so that analyses compare; paired over the
  training queries, p <= 0.1 as for a family: :func:`choose_analysis`);
- the pipeline before the word vectors (issue 26): the same over BM25's top 100 with the
  term, context, translation, topic and multiview features;
- ablations of the pipeline (its analysis and ``a`` per fold): the same learner with every
  family but one, the term features alone and with one family (C chosen by inner
  cross-validation, no family selection); the pipeline over BM25's top 100 (no hybrid
  stage); the families before issue 26 over the hybrid candidates;
- the term models alone (default analysis);
- SemEval-2016 only: the learned pipeline also trained on train-part2's original questions
  (:func:`train_part2`: 61 with a relevant question, never scored, their ids mapped onto
  this archive's), on the default analysis, ``a`` chosen on all the training queries: what
  a user with those judgments would do (the standard row trains on the folds alone); and
  the same also trained on train-part1's (:func:`train_part1`: 173 of its 200 original
  questions, from the derived CSV, their related questions mapped onto this archive by
  text), as SemEval systems train on both parts.
p-values: paired t-test / randomization test of per-query AP against BM25, against the
pipeline before issue 26 and against the learned pipeline (and the rows trained on more
queries against each other).

``--learners`` instead prints the hybrid first stage alone (``a`` per fold) with word
vectors learned by PPMI-SVD (the default) and by word2vec, three seeds each: R@100, MAP
of the order and the fit's CPU seconds.

``--default-weight`` instead prints the hybrid order's MAP and R@100 for every ``a`` on
training queries that no benchmark scores (SemEval-2016 train-part2's original questions
in full retrieval, the demo's 28 training queries): the choice of
:data:`cqa_search.retrieval.first_stage.DEFAULT_WEIGHT`, the ``a`` of an index without
a ranker.

Usage: scripts/full_retrieval.py [--data ../shared/data] [--work DIR]
                                 [--collections stackexchange stackfaq semeval demo]
                                 [--default-weight | --learners]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from cqa_search import Analyzer, SearchConfig, SearchEngine, build_index
from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir, demo_split
from cqa_search.evaluation import (evaluate, judged_only, read_qrels, read_queries,
                                   run_of_scores, run_queries, summarize)
from cqa_search.evaluation.datasets import (_query, _words, convert_semeval,
                                            convert_stackexchange, convert_stackfaq)
from cqa_search.index.store import CURRENT
from cqa_search.ranking import LinearRankerCV, NoImprovementWarning
from cqa_search.ranking._utils import query_folds
from cqa_search.ranking.selection import FAMILIES, family
from cqa_search.retrieval import BM25, parse_model
from cqa_search.searcher import LocalSearcher
from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT, WEIGHT_GRID
from cqa_search.training import best_weight, training_table

from _common import (DATA, fit_default_models, p_values, semeval_extra_questions,
                     semeval_part1_csv, semeval_xml, stackexchange_sites)

METRICS = ["map", "p@1", "p@5", "ndcg@10", "mrr", "r@100"]
DEPTH = 100
#: Text analyses tried (chosen on the training folds): ours, and Lucene's short stop list
#: with 1-character tokens kept (as Lucene's StandardAnalyzer) or not.
ANALYZERS = {"sklearn318": Analyzer(),
             "lucene33": Analyzer(stopwords="lucene", token_pattern=r"(?u)\w+"),
             "lucene33-2ch": Analyzer(stopwords="lucene")}
DEFAULT_ANALYZER = "sklearn318"
BM25_GRID = [(k1, b) for k1 in (0.6, 0.9, 1.2, 1.5, 2.0) for b in (0.3, 0.5, 0.75, 0.9)]
TERM_MODELS = ["lm-jm", "lm-dir:mu=500", "vsm", "answers-bm25"]
MODELS = ("translation", "topics", "multiview", "embeddings")
#: The feature families of the pipeline before issue 26.
BEFORE = ("term", "context", "translation", "topics", "multiview")


# -- collections -----------------------------------------------------------------------
def stackexchange(data, out):
    return convert_stackexchange(stackexchange_sites(data), out), None


def stackfaq(data, out):
    return convert_stackfaq(os.path.join(data, "stackfaq", "stackExchange-FAQ.xml"), out), None


def semeval(data, out):
    return convert_semeval([semeval_xml(data, s) for s in ("dev", "test")], out,
                           extra_archive=[semeval_xml(data, "train-part2")],
                           extra_questions=semeval_extra_questions(data),
                           full_retrieval=True), None


def semeval_train(data, out):
    """SemEval-2016 train-part2's original questions over the same archive (the dev and
    test threads in it as text only): training queries, for the default ``a``."""
    return convert_semeval([semeval_xml(data, "train-part2")], out,
                           extra_archive=[semeval_xml(data, s) for s in ("dev", "test")],
                           extra_questions=semeval_extra_questions(data),
                           full_retrieval=True), None


def demo(data, out):
    """The demo archive, with the demo's own training / held-out split."""
    folder = demo_dir()
    os.makedirs(out, exist_ok=True)
    for name in (DEMO_ARCHIVE, DEMO_QUERIES, DEMO_QRELS):
        with open(folder / name, "rb") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
    training, held_out = demo_split(read_queries(folder / DEMO_QUERIES))
    return out, ([q["id"] for q in training], [q["id"] for q in held_out])


COLLECTIONS = {"stackexchange": ("StackExchange duplicates (8 sites)", stackexchange),
               "stackfaq": ("StackFAQ", stackfaq),
               "semeval": ("SemEval-2016 full retrieval (dev + test queries)", semeval),
               "demo": ("Demo archive, held-out queries (trained on the 28 others)", demo)}


# -- helpers -----------------------------------------------------------------------------
def per_query(run, qrels, queries):
    """Per-query metrics (trec convention) of ``queries``, with the condensed-list MAP."""
    ids = [q["id"] for q in queries]
    run = {q: run.get(q, {}) for q in ids}
    table = evaluate(run, qrels, metrics=METRICS, convention="trec")
    table["cmap"] = evaluate(judged_only(run, qrels), qrels, metrics=["map"],
                             convention="trec")["map"]
    return table.loc[ids]


def first_stage_run(engine, queries, *, a=None, k1=1.2, b=0.75):
    """The run of the first stage alone (no features, no ranker): BM25's top 100, or the
    hybrid stage's with weight ``a``."""
    config = SearchConfig(retrieval=BM25(k1=k1, b=b), features=(), ranker=None, hybrid=a,
                          models=() if a is None else ("embeddings",))
    return run_queries(engine.with_config(config), queries, k=DEPTH)


def read_collection(key, data, work):
    """``(title, folder, queries with a relevant question, qrels, folds, scored queries)``."""
    title, convert = ({**COLLECTIONS, "semeval-train": (
        "SemEval-2016 train-part2 (training queries)", semeval_train)})[key]
    out = os.path.join(work, key)
    converted, split = convert(data, os.path.join(out, "data"))
    folder = converted if isinstance(converted, str) else converted.path  # the converters'
    queries = [{**q, "category": None}  # file names are the demo's too
               for q in read_queries(os.path.join(folder, "queries.jsonl"))]
    qrels = read_qrels(os.path.join(folder, "qrels.txt"))
    queries = [q for q in queries if any(g >= 1 for g in qrels.get(q["id"], {}).values())]
    scored = [q for q in queries if split is None or q["id"] in split[1]]
    return title, out, folder, queries, qrels, folds(queries, split), scored


def train_part2(data, work, folder):
    """SemEval-2016 train-part2's original questions and qrels (``semeval-train``) with
    the ids of the scored collection's archive in ``folder``: the two conversions hold the
    same threads (with other ids where copies were merged), matched by subject and body; a
    query whose own thread is archived takes that thread's id, so that it never retrieves
    itself, as the scored queries. Training queries only: their labels are train-part2's,
    and no label of any split reaches the archive (the conversions drop them)."""
    _, _, other, queries, qrels, _, _ = read_collection("semeval-train", data, work)

    def ids(path):
        with open(path, encoding="utf-8") as f:
            return {(r["title"], r["body"]): r["id"] for r in map(json.loads, f)}

    ours, theirs = ids(os.path.join(folder, "archive.jsonl")), ids(
        os.path.join(other, "archive.jsonl"))
    if set(ours) != set(theirs):
        raise RuntimeError("the archives of semeval and semeval-train differ")
    rename = {theirs[key]: ours[key] for key in theirs}
    queries = [{**q, "id": rename.get(q["id"], q["id"])} for q in queries]
    qrels = {rename.get(q, q): {rename[d]: g for d, g in docs.items()}
             for q, docs in qrels.items()}
    return queries, qrels


#: The grades of train-part1's labels (those of ``convert_semeval``).
PART1_GRADES = {"PerfectMatch": 2, "Relevant": 1, "Irrelevant": 0}


def part1_subject(features, subjects=None):
    """The OrgQSubject of one of train-part1's original questions, from the ``feature``
    cells of its rows (OrgQSubject + " " + RelQSubject, no other separator).

    The subject ends at a space of the cells' common prefix. There is a choice when that
    prefix holds several spaces (the longest split is always possible; a shorter one means
    every related subject starts with the same words): the split under which the most
    related subjects are ones that the archive holds for the same body, and on a tie (no
    such evidence) the longest.

    Parameters
    ----------
    features : list of str
        The ``feature`` cells of the original question's rows.
    subjects : list of set, optional
        Per row, the subjects (word tuples, :func:`~cqa_search.evaluation.datasets._words`)
        of the archive's copies of its related question.

    Returns
    -------
    subject : str
    n_splits : int
        The possible splits (1: no choice; 0: no space in common, the subject is empty).
    n_confirmed : int
        Rows whose related subject under the chosen split is one of ``subjects``.
    """
    subjects = subjects or [set()] * len(features)
    common = os.path.commonprefix(list(features))
    splits = [k for k, c in enumerate(common) if c == " "]
    if not splits:
        return "", 0, 0

    def confirmed(k):
        return sum(_words("", f[k + 1:]) in s for f, s in zip(features, subjects))

    best = max(splits, key=lambda k: (confirmed(k), k))
    return features[0][:best], len(splits), confirmed(best)


def train_part1(csv_path, folder):
    """SemEval-2016 train-part1's original questions as training queries of the scored
    collection in ``folder``, from the derived CSV (:func:`_common.semeval_part1_csv`):
    each query is an original question's subject (:func:`part1_subject`) and body, with
    no category (as the scored queries); its judgments (:data:`PART1_GRADES`) go to the
    archive's copies of each related question: the records with the same body words and
    the related subject's words, or no subject and a body with words (the archive's part-1
    copies have no subject, and the bodies without words are many questions'). A
    query whose own text is archived (the same test) takes that record's id, so that it
    never retrieves itself, as the scored queries; one with two such records (two ids) is
    left out. Only the archive's texts are read, never a label of it. Training queries
    only: their labels are train-part1's.

    Returns
    -------
    queries : list of dict
        The original questions with at least one relevant question mapped.
    qrels : dict
    report : dict
        Counts: ``originals``, ``one_split`` (subjects without a choice), ``confirmed``
        (chosen split confirmed by the archive's subjects), ``unconfirmed`` (a choice the
        archive cannot confirm: the longest split), ``self_archived`` (queries whose text is
        archived: they take its id), ``left_out`` (two archived copies of themselves),
        ``relevant_pairs``, ``relevant_mapped`` (pairs with at least one archive record),
        ``relevant_records`` (their records), ``queries`` (with a relevant record).
    """
    from collections import Counter, defaultdict

    from cqa_search.readers import read_questions

    records = defaultdict(list)  # body words -> archive records (id, subject words)
    with open(os.path.join(folder, "archive.jsonl"), encoding="utf-8") as f:
        for r in map(json.loads, f):
            records[_words("", r["body"])].append((r["id"], _words("", r["title"] or "")))

    def copies(body, subject):  # a record without a subject is a copy if it has words
        words = _words("", body)
        return [i for i, s in records.get(words, ()) if s == _words("", subject)
                or not s and words]

    originals = defaultdict(list)  # OrgQBody -> its rows, in the file's order
    for row in read_questions(csv_path, columns={"body": "question"}, auto_id=True):
        originals[row.body].append(row.extra)
    queries, qrels, report = [], {}, Counter(originals=len(originals))
    for n, (body, rows) in enumerate(originals.items(), 1):
        features = [r["feature"] for r in rows]
        related = [_words("", r["rel_question"]) for r in rows]
        subject, n_splits, n_confirmed = part1_subject(
            features, [{s for _, s in records.get(w, ()) if s} if w else set()
                       for w in related])
        report["one_split" if n_splits <= 1 else "confirmed" if n_confirmed
               else "unconfirmed"] += 1
        own = copies(body, subject)
        if len(own) > 1:
            report["left_out"] += 1
            continue
        report["self_archived"] += len(own)
        qid = own[0] if own else f"part1-{n}"
        judged = {}
        for r in rows:
            grade = PART1_GRADES[r["labels"]]
            docs = [d for d in copies(r["rel_question"], r["feature"][len(subject) + 1:])
                    if d != qid]
            if grade:
                report["relevant_pairs"] += 1
                report["relevant_mapped"] += bool(docs)
                report["relevant_records"] += len(docs)
            for d in docs:
                judged[d] = max(grade, judged.get(d, grade))
        if qid in qrels:
            raise RuntimeError(f"two of train-part1's original questions are {qid}")
        if any(g >= 1 for g in judged.values()):
            queries.append(_query(qid, subject, body))
            qrels[qid] = judged
    report["queries"] = len(queries)
    return queries, qrels, dict(report)


def distinct_queries(extra, queries):
    """Raise when an extra training query has the id or the text (subject and body, or
    body) of one of ``queries`` (the scored queries, or another set of extra ones)."""
    def texts(qs):
        return {t for q in qs for t in (_words(q["title"] or "", q["body"] or ""),
                                        _words("", q["body"] or ""))}

    for what, of in (("id", lambda qs: {q["id"] for q in qs}), ("text", texts)):
        if of(extra) & of(queries):
            raise RuntimeError(f"an extra training query has the {what} of another query")


def open_index(out, folder, name, log, models=MODELS):
    """The collection's index of analysis ``name`` with ``models`` fitted (cached)."""
    path = os.path.join(out, name, "index")
    if not os.path.exists(os.path.join(path, CURRENT)):
        build_index(os.path.join(folder, "archive.jsonl"), path, analyzer=ANALYZERS[name])
    t0 = time.process_time()
    engine = fit_default_models(path, models, log=lambda msg: log(f"  {path}: {msg}"))
    if time.process_time() - t0 > 1:
        log(f"  {name}: models fitted in {time.process_time() - t0:.0f} CPU s")
    return SearchEngine.open(path, config=SearchConfig(ranker=None))


def folds(queries, split):
    """``[(train ids, test ids)]``: 5 query-grouped folds, or the given split."""
    if split is not None:
        return [split]
    ids = sorted(q["id"] for q in queries)
    return [([ids[i] for i in tr], [ids[i] for i in te])
            for tr, te in query_folds(len(ids), 5, np.random.default_rng(0))]


def choose_weight(stages, train_ids):
    """The ``a`` that ``cqa-search train`` chooses on the training queries (its criterion,
    :func:`cqa_search.training.best_weight`), from per-query tables ``{a: metrics}``."""
    return best_weight([(a, stages[a].loc[train_ids, "r@100"].mean(),
                         stages[a].loc[train_ids, "map"].mean()) for a in WEIGHT_GRID])


def fit_predict(table, train_ids, test_ids, columns=None, **options):
    """A LinearRankerCV trained on the training queries' candidates (``cqa-search train``
    defaults unless ``options``; AP over every relevant question, so that indexes of other
    analyses compare; the baseline is the first stage's order), and its run of the test
    queries' candidates."""
    X, y, qid, docs, names, n_relevant = table
    columns = list(range(len(names))) if columns is None else columns
    tr, te = np.isin(qid, train_ids), np.isin(qid, test_ids)
    used = [names[j] for j in columns]
    baseline = next((b for b in ("first_stage", "bm25") if b in used), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoImprovementWarning)
        cv = LinearRankerCV(baseline=baseline, random_state=0, **options).fit(
            X[np.ix_(tr, columns)], y[tr], qid=qid[tr], feature_names=used,
            n_relevant=n_relevant[tr])
    cols = [names.index(f) for f in cv.feature_names_in_]
    return cv, run_of_scores(qid[te], docs[te], cv.predict(X[np.ix_(te, cols)], qid[te]))


def choose_analysis(selections):
    """The analysis of a fold's pipeline, from ``{analysis: LinearRankerCV}`` fitted on its
    training queries: the default analysis, unless another's pipeline has a higher
    cross-validated MAP with a one-sided paired t-test p-value (over the training queries'
    APs) at most the family selection's ``alpha`` (the most significant one then). The
    best of three noisy scores otherwise wins by luck: on SemEval-2016 it chose Lucene's
    analysis, whose hybrid stage holds 6 points fewer relevant questions in its top 100."""
    from scipy.stats import ttest_rel

    ap = {n: pd.Series(cv.query_ap_, index=cv.query_ids_) for n, cv in selections.items()}
    base = ap[DEFAULT_ANALYZER]
    p = {n: ttest_rel(a.loc[base.index], base, alternative="greater").pvalue
         for n, a in ap.items() if n != DEFAULT_ANALYZER and a.mean() > base.mean()}
    best = min(p, key=p.get, default=None)
    return best if best is not None and p[best] <= selections[best].alpha \
        else DEFAULT_ANALYZER


def describe(cv):
    point = ",".join(f"{k}={v}" for k, v in cv.best_params_.items())
    if cv.chosen_ == "baseline":
        return f"{cv.baseline} order"
    if cv.chosen_ == "single":
        return f"single {cv.single_feature_}"
    if cv.dropped_ and all(set(d["features"]) <= set(cv.features_) for d in cv.dropped_):
        return f"{point} all features (they beat forward selection)"
    dropped = "-".join(d["family"] for d in cv.dropped_)
    return f"{point}" + (f" without {dropped}" if dropped else "")


def columns_of(names, families):
    return [j for j, n in enumerate(names) if family(n) in families]


# -- one collection ------------------------------------------------------------------------
def run_collection(key, data, work, log):
    title, out, folder, queries, qrels, splits, scored = read_collection(key, data, work)
    log(f"{title}: {len(queries)} queries with a relevant question, {len(splits)} fold(s)")
    ids = [q["id"] for q in scored]

    # every analysis: BM25 of every (k1, b), and the first stage of every a (no ranker)
    engines, bm25, stages = {}, {}, {}
    for name in ANALYZERS:
        engines[name] = open_index(out, folder, name, log)
        for k1, b in BM25_GRID:
            bm25[name, k1, b] = per_query(first_stage_run(engines[name], queries, k1=k1, b=b),
                                          qrels, queries)
        stages[name] = {a: per_query(first_stage_run(engines[name], queries, a=a), qrels,
                                     queries) for a in WEIGHT_GRID}
    n_docs = engines[DEFAULT_ANALYZER].n_docs

    def choose(train_ids, keys):
        return max(keys, key=lambda c: bm25[c].loc[train_ids, "map"].mean())

    default = bm25[DEFAULT_ANALYZER, 1.2, 0.75]
    tuned_parts, tuned_choice, hybrid_parts, weights = [], [], [], {}
    for train_ids, test_ids in splits:
        best = choose(train_ids, list(bm25))
        tuned_parts.append(bm25[best].loc[test_ids])
        tuned_choice.append(f"{best[0]} k1={best[1]} b={best[2]}")
        for name in ANALYZERS:  # the a that train chooses, on each analysis's index
            weights[name, tuple(test_ids)] = choose_weight(stages[name], train_ids)
        a = weights[DEFAULT_ANALYZER, tuple(test_ids)]
        hybrid_parts.append(stages[DEFAULT_ANALYZER][a].loc[test_ids])
    tuned = pd.concat(tuned_parts).loc[ids]
    hybrid = pd.concat(hybrid_parts).loc[ids]

    # the feature tables (delete --work to recompute): of BM25's top 100 (a = 0), and of
    # the hybrid stage's top 100 at every a a fold chose
    tables, extras = {}, {"": (queries, qrels)}  # extra training queries: their name

    def table_of(name, a, extra=""):
        """The feature table of the queries (``extra``: of a set of extra training
        queries, ``-train-part1`` or ``-train-part2``)."""
        if (name, a, extra) not in tables:
            cache = os.path.join(out, name, f"features{extra}-{a:g}.npz")
            qs, judged = extras[extra]
            if not os.path.exists(cache):
                engine = engines[name].with_config(SearchConfig(ranker=None, hybrid=a or None))
                t0 = time.process_time()
                X, y, qid, docs, names = training_table(engine, qs, judged, k=DEPTH)
                np.savez(cache, X=X, y=y, qid=qid, docs=docs, names=np.array(names))
                log(f"  {name}, a = {a:g}: features of {len(X):,} candidates ({len(names)} "
                    f"columns) in {time.process_time() - t0:.0f} CPU s")
            with np.load(cache, allow_pickle=False) as z:
                n_relevant = np.array([sum(g >= 1 for g in judged[q].values())
                                       for q in z["qid"]])
                tables[name, a, extra] = (z["X"], z["y"], z["qid"], z["docs"],
                                          [str(n) for n in z["names"]], n_relevant)
        return tables[name, a, extra]

    # the pipelines, on the index of the default analysis unless another's pipeline scores
    # significantly better on the training folds (cross-validated inside them): today's
    # (BM25 candidates, the families before issue 26) and the learned pipeline (train's
    # defaults: its a, every family)
    names = table_of(DEFAULT_ANALYZER, 0.0)[4]
    before = columns_of(names, BEFORE)
    pipelines, chosen = {}, {}
    for label, a_of, columns in (("before", lambda name, te: 0.0, before),
                                 ("pipeline", lambda name, te: weights[name, te], None)):
        for train_ids, test_ids in splits:
            te = tuple(test_ids)
            fits = {name: fit_predict(table_of(name, a_of(name, te)), train_ids, test_ids,
                                      columns) for name in ANALYZERS}
            best = choose_analysis({n: cv for n, (cv, _) in fits.items()})
            chosen[label, te] = (best, a_of(best, te))
            pipelines[label, te] = fits[best]
    present = [f for f in FAMILIES if any(family(n) == f for n in names)]
    variants = {"pipeline": (None, None, {}), "before": (None, before, {})}
    variants["BM25 candidates (hybrid stage off), `train` defaults"] = (0.0, None, {})
    variants["hybrid candidates, the families before issue 26"] = (
        None, before + columns_of(names, ("first-stage",)), {})
    for f in present:
        variants[f"all but {f}"] = (None, [j for j, n in enumerate(names) if family(n) != f],
                                    {"select_features": False})
    variants["term only"] = (None, columns_of(names, ("term",)), {"select_features": False})
    for f in present:
        if f != "term":
            variants[f"term + {f}"] = (None, columns_of(names, ("term", f)),
                                       {"select_features": False})
    variants["all, no family selection"] = (None, None, {"select_features": False})
    results, choices = {}, {}
    t0 = time.process_time()
    for label, (a, columns, options) in variants.items():
        run = {}
        choices[label] = []
        for train_ids, test_ids in splits:
            te = tuple(test_ids)
            if label in ("pipeline", "before"):
                cv, part = pipelines[label, te]
            else:
                name, a_fold = chosen["pipeline", te]
                cv, part = fit_predict(table_of(name, a_fold if a is None else a), train_ids,
                                       test_ids, columns, **options)
            run.update(part)
            choices[label].append(describe(cv))
        results[label] = per_query(run, qrels, scored)
        log(f"  {label}: MAP {100 * results[label]['map'].mean():.2f} "
            f"({'; '.join(choices[label])})")
    log(f"  rankers: {time.process_time() - t0:.0f} CPU s")
    more = {}  # SemEval-2016: what a user with the training parts' judgments would do
    if key == "semeval":
        extras["-train-part2"] = train_part2(data, work, folder)
        part1, part1_qrels, report = train_part1(semeval_part1_csv(data), folder)
        extras["-train-part1"] = part1, part1_qrels
        log(f"  train-part1: {report}")
        every = read_queries(os.path.join(folder, "queries.jsonl"))  # with those scoring 0
        for extra, other in ((extras["-train-part2"][0], every), (part1, every),
                             (part1, extras["-train-part2"][0])):
            distinct_queries(extra, other)
        extra_stage = {}
        for extra, (qs, judged) in extras.items():
            if extra:
                extra_stage[extra] = {a: per_query(first_stage_run(
                    engines[DEFAULT_ANALYZER], qs, a=a), judged, qs) for a in WEIGHT_GRID}
        for label, parts in (("train-part2", ("-train-part2",)),
                             ("train-part1 and train-part2", ("-train-part1",
                                                              "-train-part2"))):
            extra_ids = [q["id"] for part in parts for q in extras[part][0]]
            run, more_choices = {}, []
            for train_ids, test_ids in splits:
                both = {a: pd.concat([stages[DEFAULT_ANALYZER][a].loc[train_ids]]
                                     + [extra_stage[part][a] for part in parts])
                        for a in WEIGHT_GRID}
                a = choose_weight(both, list(train_ids) + extra_ids)
                ours = [table_of(DEFAULT_ANALYZER, a, part) for part in ("", *parts)]
                if any(t[4] != ours[0][4] for t in ours):
                    raise RuntimeError("the feature tables have different columns")
                X, y, qid, docs, n_relevant = (np.concatenate([t[j] for t in ours])
                                               for j in (0, 1, 2, 3, 5))
                cv, part = fit_predict((X, y, qid, docs, ours[0][4], n_relevant),
                                       list(train_ids) + extra_ids, test_ids)
                run.update(part)
                more_choices.append(f"a {a:g}, {describe(cv)}")
            more[label] = per_query(run, qrels, scored), len(extra_ids), more_choices
            log(f"  also trained on {label}: MAP {100 * more[label][0]['map'].mean():.2f} "
                f"({'; '.join(more_choices)})")

    # the table
    n_rel = sum(g >= 1 for q in scored for g in qrels[q["id"]].values())
    cmap = key == "semeval"
    head = ["MAP", "P@1", "P@5", "nDCG@10", "MRR", "R@100"] + (["cond. MAP"] if cmap else [])
    print(f"\n#### {title}: {n_docs:,} archive questions, {len(scored)} queries scored, "
          f"{n_rel} relevant\n")
    print("| system | " + " | ".join(head) + " | MAP vs BM25: p (t / rand.) "
          "| vs the pipeline before issue 26 | vs the learned pipeline |")
    print("|---|" + "---:|" * (len(head) + 3))
    base = default.loc[ids]
    pipeline, before_26 = results["pipeline"], results["before"]

    def row(label, table):
        values = summarize(table[METRICS + (["cmap"] if cmap else [])], percent=True)
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values)
              + "".join(f" | {p_values(table, other) if table is not other else '–'}"
                        for other in (base, before_26, pipeline)) + " |")

    row("BM25 (k1=1.2, b=0.75, analysis sklearn318)", base)
    row("BM25 tuned (analysis, k1, b chosen on the training folds)", tuned)
    row("hybrid first stage alone (a chosen on the training folds, as `train` does)", hybrid)
    row(f"hybrid first stage alone, a = {DEFAULT_WEIGHT:g} (the default without a ranker)",
        stages[DEFAULT_ANALYZER][DEFAULT_WEIGHT].loc[ids])
    row("pipeline before issue 26 (BM25 top 100; term, context, translation, topics, "
        "multiview)", before_26)
    row("**learned pipeline** (`cqa-search train` defaults: hybrid stage, every family)",
        pipeline)
    for label, (table, n_extra, _) in more.items():
        row(f"**the same, also trained on {label}'s queries** ({n_extra} more training "
            "queries, never scored; default analysis, `a` chosen on all the training queries)",
            table)
    for label, table in results.items():
        if label not in ("pipeline", "before"):
            row(f"ablation: {label}", table)
    for spec in TERM_MODELS:
        config = SearchConfig(retrieval=parse_model(spec), features=(), models=(), ranker=None)
        run = run_queries(engines[DEFAULT_ANALYZER].with_config(config), queries, k=DEPTH)
        row(f"{spec} alone", per_query(run, qrels, scored))
    if len(more) == 2:  # the row trained on both parts against the one on train-part2
        (fewer, (t_fewer, _, _)), (most, (t_most, _, _)) = more.items()
        print(f"\nAlso trained on {most} against also trained on {fewer}: MAP p (t / rand.) "
              f"{p_values(t_most, t_fewer)}.")
    print("\nBM25 (k1=1.2, b=0.75) MAP by analysis: " + ", ".join(
        f"{a} {100 * bm25[a, 1.2, 0.75].loc[ids, 'map'].mean():.2f}" for a in ANALYZERS)
        + "; best k1, b per analysis: " + ", ".join(
        f"{a} {100 * max(bm25[a, k1, b].loc[ids, 'map'].mean() for k1, b in BM25_GRID):.2f}"
        for a in ANALYZERS) + " (on the scored queries: for reading, not for choosing).")
    stage = stages[DEFAULT_ANALYZER]
    print("\nThe hybrid first stage alone by a (analysis sklearn318, the scored queries: for "
          "reading, not for choosing): " + ", ".join(
              f"a={a:g} MAP {100 * stage[a].loc[ids, 'map'].mean():.2f} R@100 "
              f"{100 * stage[a].loc[ids, 'r@100'].mean():.2f}" for a in WEIGHT_GRID) + ".")
    print(f"\nChoices per fold: BM25 tuned: {'; '.join(tuned_choice)}. Hybrid first stage "
          "alone: a " + ", ".join(f"{weights[DEFAULT_ANALYZER, tuple(te)]:g}"
                                  for _, te in splits)
          + ". Pipeline before issue 26: analysis " + ", ".join(
              chosen["before", tuple(te)][0] for _, te in splits)
          + f"; ranker {'; '.join(choices['before'])}. Learned pipeline: analysis and a "
          + ", ".join(f"{n} {a:g}" for n, a in (chosen["pipeline", tuple(te)]
                                                for _, te in splits))
          + f"; ranker {'; '.join(choices['pipeline'])}."
          + "".join(f" Also trained on {label}: {'; '.join(choices)}."
                    for label, (_, _, choices) in more.items()))


def learners(keys, data, work, log):
    """The hybrid first stage alone (a chosen per fold as `train` does) with word vectors
    learned by PPMI-SVD and by word2vec, three seeds each (default analysis)."""
    from cqa_search.vectors import EmbeddingModel

    print("\n#### Word vectors of the hybrid first stage: PPMI-SVD or word2vec\n")
    print("| collection | learner, seed | R@100 | MAP of the hybrid order | fit CPU s |\n"
          "|---|---|---:|---:|---:|")
    for key in keys:
        title, out, folder, queries, qrels, splits, scored = read_collection(key, data, work)
        engine = open_index(out, folder, DEFAULT_ANALYZER, log)
        ids = [q["id"] for q in scored]
        for method in ("ppmi-svd", "word2vec"):
            for seed in (0, 1, 2):
                t0 = time.process_time()
                model = EmbeddingModel(method, random_state=seed).fit(engine.view)
                cpu = time.process_time() - t0
                trial = SearchEngine(LocalSearcher(engine.searcher.data,
                                                   {**engine.models, "embeddings": model},
                                                   SearchConfig(ranker=None)))
                stages = {a: per_query(first_stage_run(trial, queries, a=a), qrels, queries)
                          for a in WEIGHT_GRID}
                table = pd.concat([stages[choose_weight(stages, tr)].loc[te]
                                   for tr, te in splits]).loc[ids]
                print(f"| {title} | {method}, seed {seed} | {100 * table['r@100'].mean():.2f} "
                      f"| {100 * table['map'].mean():.2f} | {cpu:.0f} |", flush=True)


def default_weight(data, work, log):
    """The hybrid order (no ranker) for every a on training queries no benchmark scores."""
    rows = {}
    for key in ("semeval-train", "demo"):
        title, out, folder, queries, qrels, splits, _ = read_collection(key, data, work)
        if key == "demo":  # its training queries only (the held-out ones are scored)
            queries = [q for q in queries if q["id"] in set(splits[0][0])]
            title = "Demo archive, its 28 training queries"
        engine = open_index(out, folder, DEFAULT_ANALYZER, log, models=("embeddings",))
        log(f"{title}: {len(queries)} queries")
        rows[title] = {a: per_query(first_stage_run(engine, queries, a=a), qrels, queries)
                       for a in (None, *WEIGHT_GRID)}
    print("\n#### The default a: the hybrid order without a ranker, on training queries\n")
    print("| a | " + " | ".join(f"{t}: MAP | R@100" for t in rows) + " | mean MAP |")
    print("|---|" + "---:|---:|" * len(rows) + "---:|")
    means = {}
    for a in (None, *WEIGHT_GRID):
        cells = [(100 * r[a]["map"].mean(), 100 * r[a]["r@100"].mean()) for r in rows.values()]
        means[a] = np.mean([m for m, _ in cells])
        print(f"| {'BM25 alone' if a is None else f'{a:g}'} | "
              + " | ".join(f"{m:.2f} | {r:.2f}" for m, r in cells) + f" | {means[a]:.2f} |")
    best = max(WEIGHT_GRID, key=lambda a: (round(means[a], 9), -a))
    print(f"\nBest mean MAP of the two: a = {best:g} (DEFAULT_WEIGHT is {DEFAULT_WEIGHT:g}).")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_full_retrieval"))
    ap.add_argument("--collections", nargs="+", default=list(COLLECTIONS),
                    choices=list(COLLECTIONS))
    instead = ap.add_mutually_exclusive_group()
    instead.add_argument("--default-weight", action="store_true",
                         help="instead: the hybrid order by a on training queries (the "
                              "choice of the default a)")
    instead.add_argument("--learners", action="store_true",
                         help="instead: the hybrid first stage with PPMI-SVD and word2vec "
                              "vectors, three seeds each, on --collections")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    log = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr,
                                                                  flush=True))
    t0 = time.time()
    if args.default_weight:
        default_weight(args.data, args.work, log)
    elif args.learners:
        learners(args.collections, args.data, args.work, log)
    else:
        for key in args.collections:
            run_collection(key, args.data, args.work, log)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
