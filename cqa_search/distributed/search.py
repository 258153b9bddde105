"""Fan-out search over a sharded index: one Ray actor per shard, merged on the driver.

A query runs in two rounds, each sent to every shard at once:

1. *candidates*: each shard actor scores its part of the archive with the collection's
   global statistics (so a document scores as it would in one index of the whole
   archive), applies the category filter and the query syntax, and returns its best
   ``depth`` rows with their scores and doc ids (``depth`` is ``k``, or the ranker's
   ``n_candidates`` when a ranker reorders); the driver keeps the global best ``depth``
   by (-score, doc id). The union of the shards' best holds the global best, and the
   shards break ties by doc id as the merge does, so these are the candidates one index
   would select.
2. *features*: each shard computes the features of its rows among the merged candidates;
   the driver applies the stored ranker and sorts, as :class:`~cqa_search.SearchEngine`
   does. Without a ranker the order is the retrieval order, and each shard returns the
   features of its best ``k`` with its candidates: one round instead of two.

Results therefore equal those of one unsharded index of the same archive (ids, order,
scores, features; ``tests/distributed``). Rows of a sharded engine are global: shard
``s`` holds rows ``doc_offset_s`` to ``doc_offset_s + n_docs_s - 1``.

Failures: an actor that dies (its process killed, its node lost) is restarted by Ray
and its pending calls retried (``max_restarts``, ``max_task_retries``); a shard that
still does not answer, or not within ``timeout`` seconds, fails the search with a
:class:`~._ray.ShardError` naming it: a result never silently misses a shard.

Models: a sharded index stores its models once, at the top level (``add_model`` on the
index directory, as for any index). Each actor loads them and computes their features
for its rows. Models whose state is per vocabulary (translation tables, rankers, topic
interpolation) serve every shard; models with a row per question (topic coefficients,
multiview factors, chosen answers) would need splitting with the shards and are refused
with a clear error.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..analysis import Analyzer
from ..engine import SearchConfig, SearchEngine
from ..exceptions import CQASearchError, IndexFormatError, QueryError, rebuild_hint
from ..index.layout import Categories, load_index
from ..index.models import load_models
from ..index.store import StoredIndex, open_index
from ..index.term_index import CollectionStats, FieldIndex, TermIndex
from ..index.vocab import Vocabulary
from ..results import Results
from ._ray import ShardError, connect, remote

__all__ = ["ShardedEngine"]

logger = logging.getLogger(__name__)

#: Model kinds a sharded index can use: their state is per vocabulary, not per question.
SHARDABLE_KINDS = frozenset({"translation", "ibm1", "ranker", "topic-interpolation"})
#: Seconds a shard may take to answer one round of a query.
DEFAULT_TIMEOUT = 120.0
# Seconds a shard may take to start (open its index and models).
_START_TIMEOUT = 600.0
_ACTOR_OPTIONS = {"num_cpus": 0, "max_restarts": 2, "max_task_retries": 2}
_CACHE = 100_000
# Questions of results read from their shards at once, and kept.
_READ_AHEAD = 20
_QUESTIONS_KEPT = 1000


def _check_models(stored) -> None:
    for name, entry in stored.models.items():
        if entry["kind"] not in SHARDABLE_KINDS:
            raise IndexFormatError(
                f"{stored.path}: model {name!r} (kind {entry['kind']!r}) has a row per "
                f"question, which a sharded index does not split yet; remove it "
                f"(models of kinds {', '.join(sorted(SHARDABLE_KINDS))} are supported)")


def global_stats(stored) -> dict:
    """Field -> the collection statistics of the whole sharded index."""
    n_docs = int(stored.manifest["stats"]["n_docs"])
    out = {}
    for name, meta in stored.manifest["fields"].items():
        df = stored.array(f"fields/{name}/df.npy")
        tf = stored.array(f"fields/{name}/term_freq.npy")
        stored.check(df.shape == tf.shape, f"the statistics of field {name} disagree")
        out[name] = CollectionStats(n_docs, df, tf, int(meta["total_terms"]))
    return out


class _ShardSearcher:
    """One shard of a sharded index, searched with the global statistics (a Ray actor).

    Parameters
    ----------
    path, generation, manifest
        The top-level generation of the sharded index (opened by the driver).
    shard : str
        The shard's directory, relative to that generation.
    mmap : bool
    """

    def __init__(self, path, generation, manifest, shard, mmap=True):
        top = StoredIndex(path, generation, manifest, mmap)
        _check_models(top)
        stats = global_stats(top)
        stored = open_index(f"{top.root}/{shard}", mmap=mmap)
        data = load_index(stored)
        fields = {}
        for name, fi in data.index.fields.items():
            fields[name] = fi = fi.with_stats(stats[name])
            for key, rel in stored.manifest.get("shard", {}).get("weights", {}).get(name,
                                                                                   {}).items():
                fi.store_weights(key, stored.array(rel))
        self.data = dataclasses.replace(data, index=TermIndex(data.index.vocab, fields))
        self.models = load_models(top)
        self._engines = {}
        self._root = stored.root
        self._work = {}  # round -> [calls, CPU seconds]

    def _done(self, what, started) -> None:
        work = self._work.setdefault(what, [0, 0.0])
        work[0] += 1
        work[1] += time.thread_time() - started

    def stats(self) -> dict:
        """What this shard holds and has done: its size on disk, this process's memory,
        and the calls and CPU seconds of each round (of the thread that computes them:
        Ray's own threads are left out)."""
        rss = None
        try:
            with open("/proc/self/status") as f:
                rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
        except (OSError, StopIteration, ValueError):
            pass
        disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self._root)
                   for f in fs)
        return {"host": socket.gethostname(), "pid": os.getpid(), "n_docs": self.data.index.n_docs,
                "disk_bytes": disk, "rss_bytes": rss,
                "work": {k: {"calls": n, "cpu_seconds": t} for k, (n, t) in self._work.items()}}

    def _engine(self, config) -> SearchEngine:
        engine = self._engines.get(config)
        if engine is None:  # the ranker runs on the driver, over every shard's candidates
            engine = self._engines[config] = SearchEngine(
                self.data, models=self.models, config=dataclasses.replace(config, ranker=None))
        return engine

    def feature_names(self, config) -> tuple:
        return self._engine(config).feature_names

    def candidates(self, config, q, depth, category, parsed, retrieval):
        """(rows, scores, doc ids) of this shard's best ``depth`` candidates."""
        started = time.thread_time()
        if category is not None and category not in self.data.categories:
            return np.zeros(0, np.int64), np.zeros(0), []
        cid = None if category is None else self.data.categories.index(category)
        rows, scores = self._engine(config).candidates(q, depth, cid, parsed, retrieval)
        doc_ids = self.data.archive.doc_ids
        out = rows, scores, [doc_ids[r] for r in rows.tolist()]
        self._done("candidates", started)
        return out

    def candidates_and_features(self, config, q, depth, category, parsed, retrieval):
        """:meth:`candidates` with their features (one round when no ranker reorders)."""
        rows, scores, doc_ids = self.candidates(config, q, depth, category, parsed, retrieval)
        return rows, scores, doc_ids, self.features(config, q, rows)

    def features(self, config, q, rows) -> np.ndarray:
        started = time.thread_time()
        out = self._engine(config).feature_scores(q, rows)
        self._done("features", started)
        return out

    def score_rows(self, q, rows, retrieval) -> np.ndarray:
        return retrieval.score_rows(self.data.index[retrieval.field], q.term_ids, q.qtf, rows)

    def rows(self, doc_ids) -> np.ndarray:
        """Row of each id in this shard, -1 where it is not."""
        archive = self.data.archive
        return np.array([archive.row(d) if d in archive else -1 for d in doc_ids],
                        dtype=np.int64)

    def questions(self, rows) -> list:
        return [self.data.archive[r] for r in rows]


class _ShardedCategories(Categories):
    """The categories of a sharded index: names and counts (no per-row array)."""

    def __init__(self, names, counts):
        super().__init__(names, None)
        self._counts = np.asarray(counts, dtype=np.int64)

    def counts(self) -> np.ndarray:
        return self._counts


class _ShardedArchive:
    """The archive of a sharded engine as results read it: doc ids of the rows seen in
    results, questions fetched from their shard on access."""

    def __init__(self, engine):
        self._engine = engine
        self._ids = {}
        self._recent = []
        self._questions = OrderedDict()

    def remember(self, rows, doc_ids) -> None:
        if len(self._ids) > _CACHE:
            self._ids.clear()
        self._recent = np.asarray(rows).tolist()
        self._ids.update(zip(self._recent, doc_ids))

    @property
    def doc_ids(self):
        """Row -> doc id, for the rows of results (what :class:`Results` reads)."""
        return self._ids

    def __len__(self):
        return self._engine.n_docs

    def __getitem__(self, row):
        row = int(row)
        question = self._questions.get(row)
        if question is None:
            # read ahead: the rows of the latest results come next (one round, not one each)
            wanted = [row] + [r for r in self._recent[:_READ_AHEAD]
                              if r != row and r not in self._questions]
            rows = np.array(wanted, dtype=np.int64)
            engine = self._engine
            shard = engine.shard_of(rows)
            shards = np.unique(shard).tolist()
            picks = [rows[shard == s] for s in shards]
            found = engine._gather(shards, [engine.actors[s].questions.remote(
                (p - engine.starts[s]).tolist()) for s, p in zip(shards, picks)],
                "reading questions")
            for p, questions in zip(picks, found):
                self._questions.update(zip(p.tolist(), questions))
            while len(self._questions) > _QUESTIONS_KEPT:
                self._questions.popitem(last=False)
            question = self._questions[row]
        return question

    def rows(self, doc_ids) -> np.ndarray:
        """Global rows of ``doc_ids``; QueryError for an id no shard has."""
        doc_ids = list(doc_ids)
        engine = self._engine
        live = engine.live_shards
        found = engine._gather(live, [engine.actors[s].rows.remote(doc_ids) for s in live],
                               "looking up question ids")
        rows = np.full(len(doc_ids), -1, dtype=np.int64)
        for s, local in zip(live, found):
            hit = local >= 0
            rows[hit] = local[hit] + engine.starts[s]
        if (rows < 0).any():
            raise QueryError(f"unknown question id {doc_ids[int(np.argmax(rows < 0))]!r}")
        self.remember(rows, doc_ids)
        return rows

    def get(self, doc_id):
        return self[self.rows([doc_id])[0]]

    def __contains__(self, doc_id):
        try:
            self.rows([doc_id])
        except QueryError:
            return False
        return True


@dataclass(frozen=True)
class _ShardedData:
    """What a sharded engine's driver holds (in place of :class:`IndexData`)."""

    stored: StoredIndex
    analyzer: Analyzer
    index: TermIndex
    archive: _ShardedArchive
    categories: Categories
    doc_id_rank = None

    def surface_words(self) -> dict:
        """Surface word -> document frequency of its term over the fields (global)."""
        words = self.stored.json("surface.json")
        self.stored.check(isinstance(words, dict), "surface.json is not a mapping")
        df = sum(np.asarray(st.df, dtype=np.int64) for st in global_stats(self.stored).values())
        return {w: int(df[t]) for w, t in words.items()
                if isinstance(t, int) and 0 <= t < len(df) and df[t] > 0}


class ShardedEngine(SearchEngine):
    """A :class:`~cqa_search.SearchEngine` over a sharded index: every query fans out to
    one Ray actor per shard (see the module docstring). Create it with
    :meth:`SearchEngine.open <cqa_search.SearchEngine.open>` on the index directory.

    Parameters
    ----------
    stored : StoredIndex
        The top-level generation of a sharded index.
    config : SearchConfig, optional
    address : str, optional
        Ray cluster to run the shard actors on (default: the current Ray session, or the
        ``RAY_ADDRESS`` environment variable, or a local session).
    timeout : float, default 120
        Seconds a shard may take to answer one round of a query.

    Raises
    ------
    IndexFormatError
        A model the shards cannot split, or malformed top-level files.
    DistributedError
        Ray is missing or the cluster cannot be joined.
    """

    def __init__(self, stored, *, config=None, address=None, timeout=DEFAULT_TIMEOUT,
                 _shared=None):
        manifest = stored.manifest
        try:
            shards = [dict(s) for s in manifest["shards"]]
            self.starts = np.array([int(s["doc_offset"]) for s in shards], dtype=np.int64)
            sizes = np.array([int(s["n_docs"]) for s in shards], dtype=np.int64)
            field_names = list(manifest["fields"])
            analyzer = Analyzer.from_config(manifest["analyzer"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: bad shard list "
                                   f"({exc!r}); {rebuild_hint()}") from None
        stored.check(len(shards) > 0 and np.all(np.diff(self.starts) == sizes[:-1])
                     and "question" in field_names, "its shards do not tile the archive")
        self.shards, self.timeout = shards, timeout
        self.live_shards = [s for s, info in enumerate(shards) if info["n_docs"] > 0]
        if _shared is None:
            _check_models(stored)
            vocab = Vocabulary(stored.json("vocab.json"))
            names = stored.json("categories.json")
            counts = stored.array("category_counts.npy")
            stored.check(isinstance(names, list) and len(names) == len(counts),
                         "categories.json and category_counts.npy disagree")
            self.models = load_models(stored)
            connect(address)  # the Ray session the actors start in
            searcher = remote(_ShardSearcher, **_ACTOR_OPTIONS)
            self.actors = {s: searcher.remote(stored.path, stored.generation, manifest,
                                              shards[s]["dir"], stored.mmap)
                           for s in self.live_shards}
            self.data = _ShardedData(stored, analyzer, _statistics_only(vocab, stored),
                                     _ShardedArchive(self), _ShardedCategories(names, counts))
        else:
            self.models, self.actors, data = _shared
            self.data = dataclasses.replace(data, archive=_ShardedArchive(self))
        self.view = None  # models are fitted on an unsharded index (see cqa_search.distributed)
        self.config = self._checked_config(config or SearchConfig())
        s0 = self.live_shards[0]
        self._feature_names = tuple(self._gather(
            [s0], [self.actors[s0].feature_names.remote(self.config)], "starting the shards",
            timeout=_START_TIMEOUT)[0])
        self.ranker, self.given_ranker = self._make_rankers()

    # -- what the engine reads -------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return int(self.manifest["stats"]["n_docs"])

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    @property
    def feature_names(self) -> tuple:
        return self._feature_names

    def with_config(self, config: SearchConfig) -> "ShardedEngine":
        """A new engine with another configuration, sharing this one's shard actors."""
        return ShardedEngine(self.data.stored, config=config, timeout=self.timeout,
                             _shared=(self.models, self.actors, self.data))

    def close(self) -> None:
        """Stop the shard actors (the engine is unusable afterwards)."""
        ray = connect()
        for actor in self.actors.values():
            ray.kill(actor)
        self.actors = {}

    def shard_stats(self) -> list:
        """Per live shard: its host and process, questions, bytes on disk, the actor's
        resident memory, and the calls and CPU seconds of each round of the queries so
        far (what sizing a deployment needs)."""
        live = self.live_shards
        return [dict(shard=s, **info) for s, info in zip(live, self._gather(
            live, [self.actors[s].stats.remote() for s in live], "reporting"))]

    def shard_of(self, rows) -> np.ndarray:
        """Shard of each global row."""
        return np.searchsorted(self.starts, rows, side="right") - 1

    # -- the fan-out -----------------------------------------------------------------
    def _gather(self, shards, refs, what, timeout=None):
        """``ray.get`` of one call per shard; a shard that fails or does not answer in
        time fails the whole request with a ShardError naming it."""
        ray = connect()
        timeout = self.timeout if timeout is None else timeout
        out = []
        for s, ref in zip(shards, refs):
            try:
                out.append(ray.get(ref, timeout=timeout))
            except ray.exceptions.GetTimeoutError:
                for other in refs:
                    ray.cancel(other)
                raise ShardError(f"shard {s} of {self.n_shards} ({self.shards[s]['dir']}) did "
                                 f"not answer within {timeout:g} s while {what}; no partial "
                                 "result is returned") from None
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, CQASearchError):
                    raise cause from None
                raise ShardError(f"shard {s} of {self.n_shards} ({self.shards[s]['dir']}) "
                                 f"failed while {what} ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}); no "
                                 "partial result is returned") from None
        return out

    def _local_query(self, q, s, rows):
        """``q`` for shard ``s``: the given scores and ranks of reranked candidates keyed by
        the shard's own rows (ranks over all candidates, as ContextFeatures computes them)."""
        if not q.given:
            return q
        ordered = sorted(q.given, key=lambda r: -q.given[r])  # stable, as ContextFeatures
        rank = {r: i + 1 for i, r in enumerate(ordered)}
        start = int(self.starts[s])
        mine = [r for r in rows.tolist()]
        return dataclasses.replace(q, given={r - start: q.given[r] for r in mine if r in q.given},
                                   cache={"given_rank": {r - start: rank[r] for r in mine
                                                         if r in rank}})

    def feature_scores(self, q, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), len(self.feature_names)))
        if not len(rows):
            return out
        shard = self.shard_of(rows)
        shards = np.unique(shard).tolist()
        picks = [shard == s for s in shards]
        refs = [self.actors[s].features.remote(self.config, self._local_query(q, s, rows[p]),
                                               rows[p] - self.starts[s])
                for s, p in zip(shards, picks)]
        for p, part in zip(picks, self._gather(shards, refs, "computing features")):
            out[p] = part
        return out

    def candidates(self, q, depth, category_id=None, parsed=None, retrieval=None):
        rows, scores, _ = self._candidates(q, depth, category_id, parsed, retrieval)
        return rows, scores

    def _candidates(self, q, depth, category_id, parsed, retrieval, features=False):
        """The global best ``depth`` candidates: rows, scores, doc ids (and their
        features, computed by the shards in the same round, when ``features``)."""
        category = self._name(category_id)
        shards = self.live_shards
        method = "candidates_and_features" if features else "candidates"
        refs = [getattr(self.actors[s], method).remote(self.config, q, depth, category, parsed,
                                                       retrieval) for s in shards]
        parts = self._gather(shards, refs, "selecting candidates")
        rows = np.concatenate([part[0] + self.starts[s] for s, part in zip(shards, parts)])
        scores = np.concatenate([part[1] for part in parts]).astype(np.float64)
        doc_ids = [d for part in parts for d in part[2]]
        order = np.lexsort((_id_rank(doc_ids), -scores))[:depth]
        doc_ids = [doc_ids[i] for i in order.tolist()]
        self.archive.remember(rows[order], doc_ids)
        out = rows[order], scores[order], doc_ids
        if features:
            matrix = np.vstack([part[3] for part in parts]) if parts else \
                np.zeros((0, len(self.feature_names)))
            out += (matrix[order],)
        return out

    def _retrieve(self, q, k, category_id, parsed=None, retrieval=None):
        model = self.config.retrieval if retrieval is None else retrieval
        if len(q.term_ids) == 0:
            empty = np.zeros(0, np.int64)
            return self._ranked(q, empty, np.zeros(0), empty, k)
        if self.ranker is None:  # one round: each shard's best k come with their features
            rows, scores, doc_ids, features = self._candidates(q, k, category_id, parsed,
                                                               model, features=True)
            return Results(q.text, rows, doc_ids, scores, self.feature_names, features,
                           q.terms, q.unknown_words, self.archive, model.field,
                           category=q.category)
        # as SearchEngine: the ranker reorders the top n_candidates (a second round)
        depth = None if k is None else max(k, self.config.n_candidates)
        rows, scores, doc_ids = self._candidates(q, depth, category_id, parsed, model)
        return self._ranked(q, rows, scores, _id_rank(doc_ids), k, field=model.field)

    def _retrieval_scores(self, q, rows):
        model = self.config.retrieval
        base = np.zeros(len(rows))
        shard = self.shard_of(rows)
        shards = np.unique(shard).tolist()
        picks = [shard == s for s in shards]
        refs = [self.actors[s].score_rows.remote(q, rows[p] - self.starts[s], model)
                for s, p in zip(shards, picks)]
        for p, part in zip(picks, self._gather(shards, refs, "scoring candidates")):
            base[p] = part
        return base


def _statistics_only(vocab, stored) -> TermIndex:
    """The driver's term index: the vocabulary and each field's global statistics, no
    postings (those are the shards'); what query analysis reads (which words are known)."""
    n_terms = len(vocab)
    empty = np.zeros(0, dtype=np.int32)
    fields = {}
    for name, stats in global_stats(stored).items():
        stored.check(len(stats.df) == n_terms, f"the statistics of field {name} do not "
                     "cover the vocabulary")
        fields[name] = FieldIndex(name, np.zeros(n_terms + 1, dtype=np.int64), empty, empty,
                                  empty, empty, stats=stats)
    return TermIndex(vocab, fields)


def _id_rank(doc_ids) -> np.ndarray:
    """Rank of each id in sorted order: the global doc-id order that breaks ties (the
    order every shard's ``doc_id_rank`` follows for its own ids)."""
    rank = np.empty(len(doc_ids), dtype=np.int64)
    rank[sorted(range(len(doc_ids)), key=doc_ids.__getitem__)] = np.arange(len(doc_ids))
    return rank
