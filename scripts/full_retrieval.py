#!/usr/bin/env python3
"""Full-archive retrieval: every collection, every configuration, paired p-values.

One harness for the engine's real job (each query searches the whole archive), on the
library's public API only:

Collections (``--collections``; data from ``--data``, default ``../shared/data``):

- ``demo``: the demo archive (``cqa-search demo``): trained on its 28 training queries,
  its 33 held-out queries scored once, searched without their category.
- ``semeval``: SemEval-2016 full retrieval: the 120 original questions of dev and test
  search the archive of the 2016 related questions (train-part2, dev, test), the derived
  part-1 texts and the 2015 threads, each thread once (``convert_semeval(...,
  full_retrieval=True)``); relevant = PerfectMatch/Relevant; the 22 queries without any
  are left out (AP 0 for every system); query-grouped 5-fold cross-validation.
- ``semeval-devtest``: SemEval-2016 dev -> test: the archive of the dev and test threads;
  trained on the 50 dev queries, the 70 test queries scored once.
- ``stackexchange``: the 8 StackExchange dumps (duplicate notices stripped by the
  reader); the 50 questions closed as duplicates are the queries; 5-fold CV.
- ``stackfaq``: StackFAQ, 1,249 paraphrase queries against 125 threads; 5-fold CV.
- ``known-item``: each StackExchange dump and the demo archive on its own, each archived
  question's own title as the query (relevant: every question with that title, so that a
  title shared by several questions counts when any of them is first); no ranker.
- ``semeval-train``, ``demo-train``, ``semeval-dev``: dev data, queries no benchmark
  scores (SemEval-2016 train-part2's original questions over the ``semeval`` archive; the
  demo's 28 training queries; the 50 dev queries of ``semeval-devtest`` over its archive,
  its test queries neither trained on nor scored), trained rows by query-grouped 5-fold
  cross-validation: how the default of an index without a ranker
  (``--default-weight``) and ``train``'s default learner (``--learner-choice``) are
  chosen.

``--learners``: the first stage alone (``a`` chosen per fold as ``train`` chooses it) with
word vectors learned by PPMI-SVD and by word2vec, three seeds each (word2vec: ``pip install
'cqa-search[word2vec]'``).

Rows (``--rows``; :data:`ROWS`): each a configuration, not code: a
:class:`~cqa_search.SearchConfig` searched without a ranker, or ``cqa-search train``
with options, scored by :func:`cqa_search.training.cross_validate_training` (each fold's
queries by a training on the other folds; on one split, trained on the training queries
and the others scored once), on an index of the collection's archive with the model
families of the row fitted with their defaults (``cqa-search fit``). A trained row also
gives the first stage it chose per fold, alone. A query never retrieves itself; trec
convention (AP over every relevant question), depth 100. p-values: paired t-test /
randomization test of per-query AP (known-item: of "first") against BM25 and against
``--reference``.

Indexes, fitted models, feature tables and runs are kept in ``--work``: a re-run after a
new row computes only that row.

Usage: scripts/full_retrieval.py [--data ../shared/data] [--work DIR]
                                 [--collections demo semeval ...] [--rows bm25 pipeline ...]
                                 [--reference pipeline] [--out FILE] [--default-weight]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir, demo_split
from cqa_search.evaluation import (compare, evaluate, read_qrels, read_queries, run_queries,
                                   summarize, write_qrels, write_queries)
from cqa_search.evaluation.datasets import (convert_semeval, convert_stackexchange,
                                            convert_stackfaq)
from cqa_search.index.models import add_model
from cqa_search.index.store import is_compatible
from cqa_search.ranking.selection import FAMILIES as FEATURE_FAMILIES
from cqa_search.readers import read_questions
from cqa_search.readers.semeval import read_original_questions
from cqa_search.retrieval import BM25, BM25F, parse_model
from cqa_search.retrieval.first_stage import DEFAULT_WEIGHT, WEIGHT_GRID
from cqa_search.training import cross_validate_training, fit_family, query_splits
from cqa_search.training_data import JudgedQueries

from _common import DATA, semeval_extra_questions, semeval_xml, stackexchange_sites

DEPTH = 100
#: The model families fitted on a collection's index (``cqa-search fit`` defaults).
EVERY_FAMILY = ("translation", "topics", "multiview", "embeddings")
#: A row's pretrained encoder: the model folder of ``--encoder-model``.
ENCODER = ("encoder", {"model": "--encoder-model"})
#: The same, encoding only the whole question (what the first stage reads).
ENCODER_QUESTION = ("encoder", {"model": "--encoder-model", "texts": ("question",)})


# -- rows: configurations ------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """A system: ``config`` (SearchConfig fields) searched without a ranker, or, with
    ``train`` (``cqa-search train`` options), the learned pipeline, or, with
    ``first_stage``, the first stage alone with the ``a`` that ``train`` chooses on each
    fold's training queries (no ranker learned); on an index with the
    model ``families`` fitted in this order, each a family name (fitted with the defaults
    of ``cqa-search fit``) or ``(name, {parameter: value})`` (e.g. a model folder)."""

    label: str
    config: dict = field(default_factory=dict)
    train: dict | None = None
    families: tuple = EVERY_FAMILY
    first_stage: bool = False  # the first stage alone, its a chosen as `train` chooses it
    fuse: tuple = ()  # rows whose runs are fused (FUSIONS: how), none searched by this one
    fusion: str = "rrf"


ROWS = {
    "bm25": Row("BM25 (k1=1.2, b=0.75)", {"retrieval": BM25(), "hybrid": None, "models": ()}),
    "default": Row("the index's default search without a ranker (every family fitted)"),
    "term": Row("the term model alone (the default retrieval model, hybrid off)",
                {"hybrid": None}),
    "hybrid": Row(f"hybrid first stage, a = {DEFAULT_WEIGHT:g} (archive word vectors)",
                  {"hybrid": DEFAULT_WEIGHT}),
    "pipeline": Row("**learned pipeline** (`cqa-search train` defaults, every family)",
                    train={}),
    "pipeline-plain": Row("learned pipeline on an index without fitted models (term and "
                          "context features)", train={}, families=()),
    "pipeline-ranksvm": Row("learned pipeline, ranksvm with family selection (`train "
                            "--learner ranksvm --no-all-features`: the default before "
                            "2026-12-07)", train={"learner": "ranksvm", "all_features": False}),
    "pipeline-anchored-selected": Row("learned pipeline, anchored with family selection "
                                      "(`train --no-all-features`)",
                                      train={"learner": "anchored", "all_features": False}),
    "pipeline-term": Row("learned pipeline over the term model's candidates "
                         "(`train --hybrid none`)", train={"hybrid": None}),
    **{f"hybrid@{a:g}": Row(f"hybrid first stage, a = {a:g}", {"hybrid": a},
                            families=("embeddings",)) for a in WEIGHT_GRID},
    **{name: Row(f"{spec} alone", {"retrieval": parse_model(spec), "hybrid": None,
                                   "models": ()}, families=())
       for name, spec in (("lm-jm", "lm-jm"), ("lm-dir", "lm-dir:mu=500"), ("vsm", "vsm"))},
    "first-stage": Row("the first stage alone, a chosen on the training queries as `train` "
                       "chooses it", first_stage=True, families=("embeddings",)),
    **{f"first-stage-{method}-{seed}": Row(
        f"the first stage alone (a as `train` chooses it), {method} word vectors, seed {seed}",
        first_stage=True, families=(("embeddings", {"method": method, "random_state": seed}),))
       for method in ("ppmi-svd", "word2vec") for seed in (0, 1, 2)},
    "encoder": Row("the pretrained encoder alone (cosine of the whole question; "
                   "`--encoder-model`)", {"hybrid": 1.0, "models": ("encoder",)},
                   families=(ENCODER,)),
    **{f"encoder-hybrid@{a:g}": Row(f"hybrid first stage over the encoder's vectors, a = {a:g}",
                                    {"hybrid": a}, families=(ENCODER_QUESTION,))
       for a in WEIGHT_GRID},
    "first-stage-encoder": Row("BM25 + the encoder's cosine, a chosen on the training "
                               "queries as `train` chooses it", first_stage=True,
                               families=(ENCODER,)),
    "pipeline-encoder": Row("**learned pipeline with the encoder** (`cqa-search train` "
                            "defaults, every family and the encoder)", train={},
                            families=EVERY_FAMILY + (ENCODER,)),
    "pipeline-encoder-query-norm": Row("learned pipeline with the encoder, features "
                                       "normalised per query (`train --normalize query`)",
                                       train={"normalize": "query"},
                                       families=EVERY_FAMILY + (ENCODER,)),
    **{f"pipeline-no-{f}": Row(f"learned pipeline without the {f} features",
                               train={"exclude": list(prefixes)})
       for f, prefixes in FEATURE_FAMILIES.items() if f not in ("first-stage",)},
}
# Safe defaults of an index without a ranker (--safe-defaults): on an index with word
# vectors only (no other family changes a search without a ranker)
_VECTORS = ("embeddings",)
#: The hybrid weights the safe-defaults rows try on each BM25F.
_SAFE_WEIGHTS = (0.02, 0.03, 0.05, 0.1, 0.2, 0.3)
_BM25F = {"bm25f": BM25F(), "bm25f-t3": BM25F(title=3, b_title=1), "bm25f-t5": BM25F(title=5),
          "bm25f-t5b1": BM25F(title=5, b_title=1)}
ROWS.update({
    "bm25-v": Row("BM25 (k1=1.2, b=0.75)", {"retrieval": BM25(), "hybrid": None},
                  families=_VECTORS),
    "hybrid-v": Row("hybrid first stage on BM25, a = 0.7 (the default before)",
                    {"retrieval": BM25(), "hybrid": 0.7}, families=_VECTORS),
    "vectors": Row("the word vectors alone (a = 1)", {"hybrid": 1.0}, families=_VECTORS),
    **{name: Row(f"{name}: {model!r}", {"retrieval": model, "hybrid": None},
                 families=_VECTORS) for name, model in _BM25F.items()},
    **{f"{name}@{a:g}": Row(f"hybrid on {name}, a = {a:g}", {"retrieval": model, "hybrid": a},
                            families=_VECTORS)
       for name, model in _BM25F.items() for a in _SAFE_WEIGHTS},
    **{f"{fusion}-{name}": Row(f"{fusion}: {name} and the word vectors", families=_VECTORS,
                               fuse=(name, "vectors"), fusion=fusion)
       for fusion in ("rrf", "extend") for name in ("bm25-v", "bm25f", "bm25f-t3")},
})
SAFE_ROWS = ["bm25-v", "hybrid-v", "vectors", *_BM25F,
             *(f"{n}@{a:g}" for n in _BM25F for a in _SAFE_WEIGHTS),
             *(f"{f}-{n}" for f in ("rrf", "extend") for n in ("bm25-v", "bm25f", "bm25f-t3"))]
RETRIEVAL_ROWS = ["bm25", "default", "term", "hybrid", "pipeline"]
#: The rows and dev collections that chose ``train``'s default learner (``--learner-choice``).
LEARNER_CHOICE = (["bm25", "pipeline-ranksvm", "pipeline-anchored-selected", "pipeline"],
                  ["semeval-dev", "demo-train", "semeval-train"])
KNOWN_ITEM_ROWS = ["bm25", "default", "term", "hybrid"]


# -- collections: converters on the public API ---------------------------------------------
@dataclass
class Collection:
    """A converted collection: its archive and judged queries, and how it is scored."""

    key: str
    title: str
    folder: str
    queries: list
    qrels: dict
    splits: list | None = None  # [(training ids, scored ids), ...]; None: 5-fold CV
    known_item: bool = False  # no ranker row (every query is scored)
    index: str = ""  # the name of the index (collections of one archive share it)

    def __post_init__(self):
        self.index = self.index or self.key

    @property
    def scored(self) -> list:
        if self.splits is None:
            return self.queries
        scored = {q for _, test in self.splits for q in test}
        return [q for q in self.queries if q["id"] in scored]

    @property
    def folds(self):
        """The folds of :func:`cross_validate_training` (5: 5-fold CV of every query)."""
        return 5 if self.splits is None else self.splits


def _read(key, title, folder, *, relevant_only=True, **more) -> Collection:
    queries = [{**q, "category": None}  # searched as a user searches
               for q in read_queries(os.path.join(folder, "queries.jsonl"))]
    qrels = read_qrels(os.path.join(folder, "qrels.txt"))
    if relevant_only:
        queries = [q for q in queries if any(g >= 1 for g in qrels.get(q["id"], {}).values())]
    return Collection(key, title, folder, queries, qrels, **more)


def _converted(out, convert):
    if not os.path.exists(os.path.join(out, "qrels.txt")):
        convert(out)
    return out


def _demo_files(out):
    os.makedirs(out, exist_ok=True)
    for name in (DEMO_ARCHIVE, DEMO_QUERIES, DEMO_QRELS):
        shutil.copyfile(demo_dir() / name, os.path.join(out, name))


def demo(data, out, train=False):
    folder = _converted(out, _demo_files)
    training, held_out = demo_split(read_queries(os.path.join(folder, DEMO_QUERIES)))
    ids = ([q["id"] for q in training], [q["id"] for q in held_out])
    if train:
        c = _read("demo-train", "Demo archive, its 28 training queries", folder,
                  relevant_only=False, index="demo")
        c.queries = [q for q in c.queries if q["id"] in set(ids[0])]
        return c
    return _read("demo", "Demo archive, held-out queries (trained on the 28 others)", folder,
                 relevant_only=False, splits=[ids], index="demo")


def semeval(data, out):
    folder = _converted(out, lambda o: convert_semeval(
        [semeval_xml(data, s) for s in ("dev", "test")], o,
        extra_archive=[semeval_xml(data, "train-part2")],
        extra_questions=semeval_extra_questions(data), full_retrieval=True))
    return _read("semeval", "SemEval-2016 full retrieval (dev + test queries)", folder)


def semeval_train(data, out):
    folder = _converted(out, lambda o: convert_semeval(
        [semeval_xml(data, "train-part2")], o,
        extra_archive=[semeval_xml(data, s) for s in ("dev", "test")],
        extra_questions=semeval_extra_questions(data), full_retrieval=True))
    return _read("semeval-train", "SemEval-2016 train-part2's queries (training queries)",
                 folder)


def semeval_devtest(data, out, dev_only=False):
    folder = _converted(out, lambda o: convert_semeval(
        [semeval_xml(data, s) for s in ("dev", "test")], o, full_retrieval=True))
    dev = {org["id"] for org in read_original_questions(semeval_xml(data, "dev"))}
    c = _read("semeval-devtest", "SemEval-2016 dev -> test (archive: the dev and test "
              "threads; trained on the dev queries)", folder, relevant_only=False)
    dev_ids = [q["id"] for q in c.queries if q["id"] in dev]
    c.splits = [(dev_ids, [q["id"] for q in c.queries if q["id"] not in dev])]
    if dev_only:  # 5-fold CV of the dev queries; the test queries' rows are never read
        c.key, c.title = "semeval-dev", "SemEval-2016 dev queries by 5-fold CV"
        c.splits = query_splits(dev_ids, 5)
    return c


def stackexchange(data, out):
    folder = _converted(out, lambda o: convert_stackexchange(stackexchange_sites(data), o))
    return _read("stackexchange", "StackExchange duplicates (8 sites)", folder)


def stackfaq(data, out):
    folder = _converted(out, lambda o: convert_stackfaq(
        os.path.join(data, "stackfaq", "stackExchange-FAQ.xml"), o))
    return _read("stackfaq", "StackFAQ", folder)


def _title_key(title) -> str:
    return " ".join((title or "").casefold().split())


def known_item(key, title, questions, out, index=None) -> Collection:
    """Each question's own title as the query; relevant: every question of that title."""
    def write(o):
        os.makedirs(o, exist_ok=True)
        with open(os.path.join(o, "archive.jsonl"), "w", encoding="utf-8") as f:
            for q in questions:
                f.write(q.to_json() + "\n")
        by_title = {}
        for q in questions:
            if _title_key(q.title):
                by_title.setdefault(_title_key(q.title), []).append(q.id)
        write_queries([{"id": f"title:{q.id}", "text": q.title} for q in questions
                       if _title_key(q.title)], os.path.join(o, "queries.jsonl"))
        write_qrels({f"title:{q.id}": dict.fromkeys(by_title[_title_key(q.title)], 1)
                     for q in questions if _title_key(q.title)}, os.path.join(o, "qrels.txt"))

    return _read(key, title, _converted(out, write), known_item=True,
                 index=index or key)


def known_items(data, work) -> list:
    sites = [(f"known-item-{os.path.basename(s)}", f"Known-item search: {os.path.basename(s)}",
              lambda s=s: read_questions([s], format="stackexchange"), None)
             for s in stackexchange_sites(data)]
    sites.append(("known-item-demo", "Known-item search: the demo archive",
                  lambda: read_questions(demo_dir() / DEMO_ARCHIVE), "demo"))
    return [known_item(key, title, list(read()), os.path.join(work, key, "data"), index)
            for key, title, read, index in sites]


COLLECTIONS = {"demo": demo, "semeval": semeval, "semeval-devtest": semeval_devtest,
               "stackexchange": stackexchange, "stackfaq": stackfaq, "known-item": None,
               "semeval-train": semeval_train,
               "demo-train": lambda data, out: demo(data, out, train=True),
               "semeval-dev": lambda data, out: semeval_devtest(data, out, dev_only=True)}
DEFAULT_COLLECTIONS = ["demo", "semeval", "semeval-devtest", "stackexchange", "known-item"]


def collections(keys, data, work) -> list:
    out = []
    for key in keys:
        if key == "known-item":
            out.extend(known_items(data, work))
        else:
            folder = {"demo-train": "demo", "semeval-dev": "semeval-devtest"}.get(key, key)
            out.append(COLLECTIONS[key](data, os.path.join(work, folder, "data")))
    return out


# -- scoring --------------------------------------------------------------------------------
def metric_names(c) -> list:
    return ["success@1", "success@3", "mrr"] if c.known_item else \
        ["map", "p@1", "mrr", f"r@{DEPTH}"]


def index_of(c, families, work, log, encoder_model=None) -> str:
    """The collection's index with ``families`` fitted (cached: an index per list; the
    encoder's model folder and texts are ``encoder_model``: (folder, texts or None))."""
    fits = [(f, {}) if isinstance(f, str) else (f[0], dict(f[1])) for f in families]
    for _, params in fits:
        if params.get("model") == ENCODER[1]["model"]:
            if encoder_model is None or encoder_model[0] is None:
                raise SystemExit("the encoder rows need --encoder-model DIR (a "
                                 "sentence-transformers model folder: docs/models.md)")
            params["model"] = os.path.abspath(encoder_model[0])
            if encoder_model[1] is not None:
                params["texts"] = tuple(encoder_model[1])
    folder = "-".join(f + (f"-{_key(p)[:8]}" if p else "") for f, p in fits) or "none"
    path = os.path.join(work, c.index, "index-" + folder)
    if not is_compatible(path):
        build_index(os.path.join(c.folder, "archive.jsonl"), path)
    stored = SearchEngine.open(path).models
    for family, params in fits:
        if not any(name == family or name.startswith(family + "-") for name in stored):
            t0 = time.process_time()
            donor = _encoded_elsewhere(path, params) if family == "encoder" else None
            if donor is not None:  # the same archive's vectors: not encoded twice
                add_model(path, family, donor)
                log(f"  {path}: {family} copied from an index of the same archive")
                continue
            fit_family(path, family, **params)
            log(f"  {path}: {family} fitted in {time.process_time() - t0:.0f} CPU s")
    return path


def _encoded_elsewhere(path, params):
    """An encoder model fitted with ``params`` on another index of the collection's
    archive (the same questions in the same rows), or None."""
    from cqa_search.vectors.encoded import TEXTS

    here = SearchEngine.open(path).archive.doc_ids
    parent = os.path.dirname(path)
    for other in sorted(os.listdir(parent)):
        full = os.path.join(parent, other)
        if full == path or not other.startswith("index-") or not is_compatible(full):
            continue
        engine = SearchEngine.open(full, config=SearchConfig(models=()))
        model = engine.models.get("encoder")
        if model is not None and model.model == params["model"] \
                and tuple(model.texts) == tuple(params.get("texts", TEXTS)) \
                and engine.archive.doc_ids == here:
            return model
    return None


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _rrf(runs, k=60):
    """Reciprocal-rank fusion (Cormack, Clarke & Buettcher 2009): sum of 1 / (k + rank)."""
    fused = {}
    for run in runs:
        for rank, doc in enumerate(sorted(run, key=lambda d: (-run[d], d)), 1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return fused


def _extend(runs):
    """The first run's hits in its order, then the next runs' hits it does not have."""
    out = list(dict.fromkeys(d for run in runs for d in sorted(run, key=lambda d: (-run[d], d))))
    return {d: float(len(out) - i) for i, d in enumerate(out)}


FUSIONS = {"rrf": _rrf, "extend": _extend}


def row_run(c, row, path, work) -> dict:
    """The run of a row without a ranker over the scored queries (cached), or the fusion of
    its ``fuse`` rows' runs, cut at ``DEPTH``."""
    if row.fuse:
        runs = [row_run(c, ROWS[name], path, work) for name in row.fuse]
        fused = {q: FUSIONS[row.fusion]([run.get(q, {}) for run in runs]) for q in runs[0]}
        return {q: dict(sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:DEPTH])
                for q, docs in fused.items()}
    engine = SearchEngine.open(path, config=SearchConfig(ranker=None, **row.config))
    cache = os.path.join(work, c.key, "runs", _key(engine.manifest, repr(engine.config),
                                                   [q["id"] for q in c.scored]) + ".json")
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            run = {q: dict(docs) for q, docs in json.load(f).items()}
    else:
        run = run_queries(engine, c.scored, k=DEPTH)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache + ".tmp", "w", encoding="utf-8") as f:
            json.dump({q: list(docs.items()) for q, docs in run.items()}, f)
        os.replace(cache + ".tmp", cache)
    return run


def search_row(c, row, path, work):
    """Per-query metrics of a row without a ranker over the scored queries."""
    return evaluate(row_run(c, row, path, work), c.qrels, metrics=metric_names(c))


def train_row(c, row, path, work):
    """Held-out per-query metrics of ``cqa-search train`` with the row's options, and of
    the first stage each fold chose alone, with each fold's choices."""
    cv = cross_validate_training(path, c.queries, c.qrels, folds=c.folds, k=DEPTH,
                                 cache=os.path.join(work, c.index, "tables"), **row.train)
    ids = [q["id"] for q in c.scored]
    return cv.metrics.loc[ids], cv.baseline.loc[ids], [f.describe() for f in cv.folds]


def first_stage_row(c, row, path, work):
    """Held-out per-query metrics of the first stage alone at the ``a`` that ``train``
    chooses on each fold's training queries (the folds of :func:`train_row`)."""
    import pandas as pd

    engine = SearchEngine.open(path, config=SearchConfig(ranker=None, hybrid=None))
    judged = JudgedQueries(engine, c.queries, c.qrels, k=DEPTH,
                           cache=os.path.join(work, c.index, "tables"))
    parts, choices = [], []
    for train_ids, test_ids in query_splits(judged.ids, c.folds):
        choice = judged.choose(train_ids)
        a = 0.0 if choice is None else choice.a
        parts.append(judged.stage(a).loc[test_ids])
        choices.append(f"a {a:g}")
    return pd.concat(parts).loc[[q["id"] for q in c.scored]], choices


def p_values(a, b, metric) -> str:
    sig = compare(a, b, metrics=[metric]).loc[metric]
    return f"{sig['p_ttest']:.3f} / {sig['p_randomization']:.3f}"


def run_collection(c, rows, reference, work, command, log, encoder_model=None):
    """The collection's Markdown table (with the command that made it in its header), and
    its rows' per-query metrics ``{row: (label, table)}``."""
    t0, cpu0 = time.time(), time.process_time()
    log(f"{c.title}: {len(c.queries)} queries, {len(c.scored)} scored")
    if c.known_item:
        rows = [r for r in rows if ROWS[r].train is None and not ROWS[r].first_stage]
    results, notes, n_docs = {}, [], None
    for name in rows:
        row = ROWS[name]
        path = index_of(c, row.families, work, log, encoder_model)
        n_docs = SearchEngine.open(path).n_docs
        if row.first_stage:
            table, choices = first_stage_row(c, row, path, work)
            results[name] = (row.label, table)
            notes.append(f"`{name}` per fold: " + " | ".join(choices))
        elif row.train is None:
            results[name] = (row.label, search_row(c, row, path, work))
        else:
            t1 = time.process_time()
            table, stage, choices = train_row(c, row, path, work)
            results[name] = (row.label, table)
            results[f"{name}:first-stage"] = (f"its first stage alone (as `{name}` chose it "
                                              "on the training queries)", stage)
            notes.append(f"`{name}` per fold: " + " | ".join(choices))
            log(f"  {name}: MAP {100 * table['map'].mean():.2f} "
                f"({time.process_time() - t1:.0f} CPU s)")
    metrics = metric_names(c)
    main = metrics[0]
    n_rel = sum(g >= 1 for q in c.scored for g in c.qrels.get(q["id"], {}).values())
    ref = reference if reference in results else ("default" if "default" in results else None)
    heads = {"map": "MAP", "p@1": "P@1", "mrr": "MRR", f"r@{DEPTH}": f"R@{DEPTH}",
             "success@1": "% first", "success@3": "% top 3"}
    lines = [f"#### {c.title}: {n_docs:,} archive questions, {len(c.scored):,} queries scored, "
             f"{n_rel:,} relevant", "", f"`{command}`", "",
             "| system | " + " | ".join(heads[m] for m in metrics)
             + f" | {heads[main]} vs BM25: p (t / rand.) | vs {ref}: p (t / rand.) |",
             "|---|" + "---:|" * (len(metrics) + 2)]
    base = results.get("bm25", results.get("bm25-v", (None, None)))[1]
    for name, (label, table) in results.items():
        cells = [f"{v:.2f}" for v in summarize(table[metrics], percent=True)]
        for other in (base, None if ref is None else results[ref][1]):
            cells.append("–" if other is None or other is table else
                         p_values(table, other, main))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [""] + [n + "." for n in notes] + [""] if notes else [""]
    lines.append(f"({time.time() - t0:.0f} s wall, {time.process_time() - cpu0:.0f} CPU s of "
                 "this process; load average "
                 + "/".join(f"{x:.1f}" for x in os.getloadavg()) + ")")
    return "\n".join(lines), results, n_docs


def known_item_summary(done, command) -> str:
    """One table of every known-item collection: % first / % top 3 of each row (named by
    its key in :data:`ROWS`), and the queries of all archives pooled."""
    import pandas as pd

    names = list(done[0][1])
    lines = ["#### Known-item search, every archive: its questions' own titles as queries, "
             "% found first / % in the top 3", "", f"`{command}`", "",
             "| archive | questions | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|---:|" + "---:|" * len(names)]

    def cells(tables):
        return [f"{100 * t['success@1'].mean():.2f} / {100 * t['success@3'].mean():.2f}"
                for t in tables]

    for c, results, n_docs in done:
        lines.append(f"| {c.title.split(': ', 1)[1]} | {n_docs:,} | "
                     + " | ".join(cells(results[n][1] for n in names)) + " |")
    pooled = [pd.concat([results[n][1] for _, results, _ in done]) for n in names]
    lines.append(f"| all, pooled | {sum(n for _, _, n in done):,} | " + " | ".join(cells(pooled))
                 + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA, help="the judged collections (default: "
                                                 "../shared/data beside the repository)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_full_retrieval"),
                    help="indexes, fitted models, feature tables and runs, kept between runs")
    ap.add_argument("--collections", nargs="+", default=DEFAULT_COLLECTIONS,
                    choices=list(COLLECTIONS))
    ap.add_argument("--rows", nargs="+", choices=list(ROWS), metavar="ROW",
                    help=f"rows (default: {' '.join(RETRIEVAL_ROWS)}; known-item: no trained "
                         f"row); any of: {', '.join(ROWS)}")
    ap.add_argument("--reference", default="pipeline", choices=list(ROWS),
                    help="the row every row is also compared with (default: %(default)s; "
                         "default when it is not in a table)")
    ap.add_argument("--default-weight", action="store_true",
                    help="the tables that chose the default a of an index without a ranker: "
                         "--collections semeval-train demo-train --rows bm25 hybrid@A... "
                         "(with --encoder-model: encoder-hybrid@A... too)")
    ap.add_argument("--learner-choice", action="store_true",
                    help="the tables that chose train's default learner, on dev data only: "
                         f"--collections {' '.join(LEARNER_CHOICE[1])} --rows "
                         f"{' '.join(LEARNER_CHOICE[0])} --reference pipeline-ranksvm")
    ap.add_argument("--safe-defaults", action="store_true",
                    help="the first stages an index without a ranker could use (BM25F "
                         "weights, small hybrid weights, fusions with the word vectors) on "
                         "every collection, against BM25")
    ap.add_argument("--learners", action="store_true",
                    help="the first stage alone (a as train chooses it) with PPMI-SVD and "
                         "word2vec word vectors, three seeds each, on --collections")
    ap.add_argument("--encoder-model", default=os.environ.get("CQA_SEARCH_ENCODER_DIR"),
                    help="the sentence-transformers model folder of the encoder rows "
                         "(default: $CQA_SEARCH_ENCODER_DIR)")
    ap.add_argument("--encoder-texts", nargs="+", choices=["question", "title", "body", "answer"],
                    help="the texts the encoder rows encode (default: the family's, all four)")
    ap.add_argument("--out", help="also write the tables to this Markdown file")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    if args.default_weight:
        args.collections = ["semeval-train", "demo-train"]
        args.rows = ["bm25"] + [f"hybrid@{a:g}" for a in WEIGHT_GRID] + (
            [f"encoder-hybrid@{a:g}" for a in WEIGHT_GRID] if args.encoder_model else [])
        args.reference = "bm25"
    if args.learner_choice:
        args.rows, args.collections = map(list, LEARNER_CHOICE)
        args.reference = "pipeline-ranksvm"
    if args.safe_defaults:
        args.collections = ["semeval-train", "demo-train", "demo", "semeval",
                            "semeval-devtest", "stackexchange", "stackfaq", "known-item"]
        args.rows = SAFE_ROWS
        args.reference = "hybrid-v"
    if args.learners:
        args.rows = [f"first-stage-{m}-{seed}" for m in ("ppmi-svd", "word2vec")
                     for seed in (0, 1, 2)]
        args.reference = "first-stage-ppmi-svd-0"
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr,
                                                                   flush=True))
    os.makedirs(args.work, exist_ok=True)
    tables, known = [], []
    shown = re.sub(r" --(work|data|out|encoder-model)[ =]\S+| (-q|--quiet)(?= |$)", "",
                   " " + " ".join(argv)).strip()
    command = f"python scripts/full_retrieval.py {shown}".strip()
    for c in collections(args.collections, args.data, args.work):
        rows = args.rows or (KNOWN_ITEM_ROWS if c.known_item else RETRIEVAL_ROWS)
        table, results, n_docs = run_collection(c, rows, args.reference, args.work, command,
                                                log, (args.encoder_model, args.encoder_texts))
        tables.append(table)
        print("\n" + table, flush=True)
        if c.known_item:
            known.append((c, results, n_docs))
    if len(known) > 1:
        tables.append(known_item_summary(known, command))
        print("\n" + tables[-1], flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n\n".join(tables) + "\n")


if __name__ == "__main__":
    main()
