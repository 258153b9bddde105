"""The search back-end of a sharded index: one Ray actor per shard (or every shard read
in this process), merged on the driver.

:class:`ShardedSearcher` is a :class:`~cqa_search.searcher.Searcher` (what
:class:`~cqa_search.SearchEngine` asks of its back-end). Each call is sent to the shards
at once; every shard (a :class:`_ShardActor`) holds its shard as a
:class:`~cqa_search.searcher.LocalSearcher` (memory-mapped) that scores with the
collection's global statistics, so a question scores as it would in one index of the
whole archive:

* *candidates*: each shard applies the category filter and the query syntax and returns
  its best ``depth`` rows with their scores and doc ids; the driver keeps the global best
  ``depth`` by (-score, doc id). The union of the shards' best holds the global best, and
  the shards break ties by doc id as the merge does, so these are the candidates one
  index would select. Asked for their features (no ranker reorders them), each shard
  returns the features of its best with them: one round.
* *features* and *retrieval scores* of given rows: each shard computes those of its
  rows (the ranker's second round, reranking), the features with the candidates' context
  in its own rows (:meth:`CandidateContext.local
  <cqa_search.retrieval.first_stage.CandidateContext.local>`).
* questions, ids and rows, counts of categories and tags, the answers chosen: from the
  shards holding the rows (or from every shard, merged).

Results therefore equal those of one unsharded index of the same archive (ids, order,
scores, features; ``tests/distributed``). Rows of a sharded index are the shards' rows
one after the other: shard ``s`` holds rows ``starts[s]`` to ``starts[s + 1] - 1``.

Where the shards are: in Ray actors (:class:`_ShardActors`) when the searcher is opened
with Ray (:func:`~._ray.runs_on_ray`: a server, a cluster, a process in a Ray session
already), else in this process (:class:`_InProcessShards`: a one-shot command on a local
sharded index starts no Ray session; the shards answer one after the other). Both answer
the same calls with the same results.

The shard actors are pinned to the cluster's nodes, taken in turn. Failures: an actor
whose process dies is restarted by Ray on its node (``max_restarts``); one whose node is
lost is started again on a node alive; a call to a shard that is restarting is made
again, until ``timeout`` seconds have passed (its calls only read). A shard that fails,
or does not answer within ``timeout``, fails the call with a :class:`~._ray.ShardError`
naming it: a result never silently misses a shard (``tests/distributed/test_cluster.py``:
a node of a real two-node cluster killed in the middle of a query).

Models: each shard actor loads the index's models, its own rows of the per-question
ones (:mod:`cqa_search.index.sharding`), and computes their features for its rows; the
driver holds the rankers (and every model's shared part: names, feature names).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import time
from collections import OrderedDict

import numpy as np

from ..analysis import Analyzer
from ..exceptions import CQASearchError, IndexFormatError, QueryError, rebuild_hint
from ..index.layout import Categories, read_stats
from ..index.sharding import load_shard, read_shards, shard_models
from ..index.store import StoredIndex
from ..index.term_index import FieldIndex, TermIndex
from ..index.vocab import Vocabulary
from ..retrieval.first_stage import CandidateContext
from ..searcher import Candidates, LocalSearcher, SearchConfig, checked_config
from ._ray import ShardError, alive_nodes, connect, on_node, remote, runs_on_ray

__all__ = ["ShardedSearcher", "DEFAULT_TIMEOUT"]

logger = logging.getLogger(__name__)

#: Seconds a shard may take to answer one call.
DEFAULT_TIMEOUT = 120.0
# Seconds a shard may take to start (open its index and models).
_START_TIMEOUT = 600.0
_ACTOR_OPTIONS = {"num_cpus": 0, "max_restarts": 2, "max_task_retries": 2}
_CACHE = 100_000
# Questions of results read from their shards at once, and kept.
_READ_AHEAD = 20
_QUESTIONS_KEPT = 1000


class _ShardActor:
    """One shard of a sharded index, searched with the global statistics (a Ray actor, or
    an object of this process).

    Parameters
    ----------
    path, generation, manifest
        The top-level generation of the sharded index (opened by the driver).
    shard : int
        The shard's number.
    mmap : bool
    """

    def __init__(self, path, generation, manifest, shard, mmap=True):
        top = StoredIndex(path, generation, manifest, mmap)
        self.searcher = LocalSearcher(load_shard(top, shard), shard_models(top, shard),
                                      dataclasses.replace(SearchConfig(), ranker=None))
        self._searchers = {}
        self._stats_id = None
        self._root = self.searcher.stored.root
        self._work = {}  # call -> [calls, CPU seconds]

    def _of(self, config, stats=None) -> LocalSearcher:
        """The shard's back-end of ``config``; ``stats``: ``[ref]`` of the whole index's
        statistics of what the scorers compute over their rows (:meth:`row_stats`), read
        from Ray's object store (or :class:`_Held` in this process) when this actor has
        not used them yet (a call carries the reference: an actor restarted by Ray takes
        them again)."""
        if stats is not None and stats[0].hex() != self._stats_id:
            self.searcher.use_stats(_fetched(stats[0]))
            self._searchers, self._stats_id = {}, stats[0].hex()
        searcher = self._searchers.get(config)
        if searcher is None:  # the ranker runs on the driver, over every shard's candidates
            searcher = self._searchers[config] = self.searcher.with_config(config)
        return searcher

    def row_stats(self) -> dict:
        """What the scorers compute over this shard's rows alone
        (:meth:`~cqa_search.searcher.LocalSearcher.row_stats`)."""
        return self.searcher.row_stats()

    def _done(self, what, started) -> None:
        work = self._work.setdefault(what, [0, 0.0])
        work[0] += 1
        work[1] += time.thread_time() - started

    def stats(self) -> dict:
        """What this shard holds and has done: its node, its size on disk, this process's
        memory, and the calls and CPU seconds of each kind of call (of the thread that computes
        them: Ray's own threads are left out)."""
        rss = None
        try:
            with open("/proc/self/status") as f:
                rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
        except (OSError, StopIteration, ValueError):
            pass
        disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self._root)
                   for f in fs)
        ray = sys.modules.get("ray")  # None: a shard read in a process without Ray
        node = ray.get_runtime_context().get_node_id() if ray and ray.is_initialized() \
            else None
        return {"host": socket.gethostname(), "pid": os.getpid(), "node": node,
                "n_docs": self.searcher.n_docs, "disk_bytes": disk, "rss_bytes": rss,
                "work": {k: {"calls": n, "cpu_seconds": t} for k, (n, t) in self._work.items()}}

    def describe(self, config) -> tuple:
        """(feature names, whether it has question vectors, the default ``a`` of its dense
        list) of ``config``."""
        searcher = self._of(config)
        return searcher.feature_names, searcher.has_vectors, searcher.default_weight

    def _local(self, searcher, category, parsed):
        """(category id, parsed) of this shard (None for a category it has no question
        of: nothing matches)."""
        categories = searcher.categories
        if category is not None and category not in categories:
            return None
        if parsed is not None and parsed.not_categories:  # (names checked by the driver)
            parsed = dataclasses.replace(parsed, not_categories=tuple(
                name for name in parsed.not_categories if name in categories))
        return (None if category is None else categories.index(category)), parsed

    def candidates(self, config, stats, q, depth, category, parsed, retrieval, features):
        """(rows, scores, doc ids, features or None) of this shard's best ``depth`` (their
        features: those of a search's candidates, none given with scores)."""
        started = time.thread_time()
        searcher = self._of(config, stats)
        local = self._local(searcher, category, parsed)
        searched = CandidateContext()
        if local is None:
            none = np.zeros(0, np.int64)
            return (none, np.zeros(0), [],
                    searcher.features(q, none, searched) if features else None)
        found = searcher.candidates(q, depth, *local, retrieval)
        out = (found.rows, found.scores, searcher.doc_ids(found.rows),
               searcher.features(q, found.rows, searched) if features else None)
        self._done("candidates", started)
        return out

    def nearest(self, config, q, depth, category, parsed):
        """(rows, cosines, doc ids) of this shard's ``depth`` nearest question vectors."""
        started = time.thread_time()
        searcher = self._of(config)
        local = self._local(searcher, category, parsed)
        if local is None:
            return np.zeros(0, np.int64), np.zeros(0), []
        found = searcher.nearest(q, depth, *local)
        self._done("nearest", started)
        return found.rows, found.scores, searcher.doc_ids(found.rows)

    def cosines(self, config, q, rows) -> np.ndarray:
        return self._of(config).cosines(q, rows)

    def features(self, config, stats, q, context, rows) -> np.ndarray:
        started = time.thread_time()
        out = self._of(config, stats).features(q, rows, context)
        self._done("features", started)
        return out

    def retrieval_scores(self, q, model, rows) -> np.ndarray:
        return self.searcher.retrieval_scores(q, rows, model)

    def rows(self, doc_ids) -> np.ndarray:
        """Row of each id in this shard, -1 where it has no live question of that id."""
        archive = self.searcher.archive
        return np.array([archive.row(d) if d in archive else -1 for d in doc_ids],
                        dtype=np.int64)

    def doc_ids(self, rows) -> list:
        return self.searcher.doc_ids(rows)

    def questions(self, rows) -> list:
        return [self.searcher.archive[r] for r in rows]

    def category_counts(self) -> dict:
        """Category name -> live questions."""
        return dict(zip(self.searcher.categories.names,
                        self.searcher.category_counts().tolist()))

    def completions(self, prefix, k) -> list:
        return self.searcher.completions(prefix, k)

    def prepare_titles(self) -> None:
        self.searcher.prepare_titles()

    def tag_counts(self) -> list:
        """``(tag without case, its first spelling, live questions)`` in the order the
        shard first met them."""
        attributes = self.searcher.attributes
        counts = attributes.tag_counts(self.searcher.data.live).tolist()
        return [(tag.strip().casefold(), tag, n) for tag, n in zip(attributes.tags, counts)]

    def answer_choices(self, name, rows) -> list:
        return [self.searcher.answer_choice(name, row) for row in np.asarray(rows).tolist()]

    def archived_queries(self, rows) -> list:
        return [self.searcher.archived_query(row) for row in np.asarray(rows).tolist()]


class _ShardedCategories(Categories):
    """The categories of a sharded index: names and counts (no per-row array)."""

    def __init__(self, names, counts):
        super().__init__(names, None)
        self._counts = np.asarray(counts, dtype=np.int64)

    def counts(self, live=None) -> np.ndarray:
        return self._counts


class _ShardedArchive:
    """The archive of a sharded index as results read it: doc ids of the rows seen in
    results, questions fetched from their shard on access."""

    def __init__(self, searcher):
        self._searcher = searcher
        self._ids = {}
        self._recent = []
        self._questions = OrderedDict()

    def remember(self, rows, doc_ids) -> None:
        if len(self._ids) > _CACHE:
            self._ids.clear()
        self._recent = np.asarray(rows).tolist()
        self._ids.update(zip(self._recent, doc_ids))

    def __len__(self):
        return self._searcher.n_docs

    def __getitem__(self, row):
        row = int(row)
        question = self._questions.get(row)
        if question is None:
            # read ahead: the rows of the latest results come next (one round, not one each)
            wanted = [row] + [r for r in self._recent[:_READ_AHEAD]
                              if r != row and r not in self._questions]
            rows = np.array(wanted, dtype=np.int64)
            for picked, questions in self._searcher.per_shard(rows, "questions",
                                                              "reading questions"):
                self._questions.update(zip(picked.tolist(), questions))
            while len(self._questions) > _QUESTIONS_KEPT:
                self._questions.popitem(last=False)
            question = self._questions[row]
        return question

    def rows(self, doc_ids) -> np.ndarray:
        """Rows of ``doc_ids``; QueryError for an id no shard has."""
        doc_ids = list(doc_ids)
        searcher = self._searcher
        live = searcher.live_shards
        found = searcher.call(live, "rows", "looking up question ids", (doc_ids,))
        rows = np.full(len(doc_ids), -1, dtype=np.int64)
        for s, local in zip(live, found):
            hit = local >= 0
            rows[hit] = local[hit] + searcher.starts[s]
        if (rows < 0).any():
            raise QueryError(f"unknown question id {doc_ids[int(np.argmax(rows < 0))]!r}")
        self.remember(rows, doc_ids)
        return rows

    def row(self, doc_id) -> int:
        return int(self.rows([doc_id])[0])

    def similar_ids(self, doc_id, limit: int = 3) -> list:
        """None here: the ids are the shards' (see :meth:`Archive.similar_ids
        <cqa_search.archive.Archive.similar_ids>`)."""
        return []

    def get(self, doc_id):
        return self[self.row(doc_id)]

    def __contains__(self, doc_id):
        try:
            self.rows([doc_id])
        except QueryError:
            return False
        return True

    def doc_ids_of(self, rows) -> list:
        """Ids of ``rows`` (those not seen in results read from their shards)."""
        rows = np.asarray(rows, dtype=np.int64)
        missing = [r for r in rows.tolist() if r not in self._ids]
        if missing:
            for picked, ids in self._searcher.per_shard(np.array(missing), "doc_ids",
                                                        "reading question ids"):
                self._ids.update(zip(picked.tolist(), ids))
        return [self._ids[r] for r in rows.tolist()]


class ShardedSearcher:
    """The search back-end of a sharded index: every call fans out to one Ray actor per
    shard, or to the shards read in this process (see the module docstring).
    :meth:`SearchEngine.open <cqa_search.SearchEngine.open>` makes one for a sharded
    index.

    Parameters
    ----------
    stored : StoredIndex
        The top-level generation of a sharded index.
    config : SearchConfig, optional
    ray : bool or str, optional
        Where the shards are searched (:func:`~._ray.runs_on_ray`): ``True``, Ray actors
        in the current Ray session (or that of ``RAY_ADDRESS``, or a local one); a
        cluster's ``HOST:PORT``, actors on that cluster; ``False``, this process. Default:
        Ray when this process is in a Ray session or ``RAY_ADDRESS`` is set, else this
        process.
    timeout : float, default 120
        Seconds a shard actor may take to answer one call.

    Raises
    ------
    IndexFormatError
        Malformed top-level files.
    DistributedError
        Ray is missing or the cluster cannot be joined.
    """

    view = None

    def __init__(self, stored, config=None, *, ray=None, timeout=DEFAULT_TIMEOUT,
                 _shared=None):
        self.stored, self.timeout = stored, timeout
        self.shards = read_shards(stored)
        sizes = np.array([s["n_docs"] for s in self.shards], dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(sizes)))
        self.live_shards = [s for s, info in enumerate(self.shards) if info["n_docs"] > 0]
        if _shared is None:
            self._open(ray)
        else:
            (self.analyzer, self.index, self.categories, self.models, self.actors,
             self._stats) = _shared
        # a Ray driver is not shared by forking (its shard actors work in parallel); shards
        # read in this process are, as a local index is
        self.forks = self.actors.forks
        self.archive = _ShardedArchive(self)
        self.config = checked_config(config or SearchConfig(), self.index.fields, self.models)
        s0 = self.live_shards[0]
        names, self.has_vectors, self.default_weight = self.call(
            [s0], "describe", "starting the shards", (self.config,), timeout=_START_TIMEOUT)[0]
        self.feature_names = tuple(names)

    def _open(self, ray) -> None:
        stored = self.stored
        try:
            self.analyzer = Analyzer.from_config(stored.manifest["analyzer"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFormatError(f"corrupted index {stored.path}: bad analyzer "
                                   f"({exc!r}); {rebuild_hint()}") from None
        vocab = Vocabulary(stored.json("vocab.json"))
        self.index = _statistics_only(vocab, read_stats(stored))
        stored.check(len(vocab) == len(next(iter(self.index.fields.values())).stats.df),
                     "the statistics do not cover the vocabulary")
        names = stored.json("categories.json")
        counts = stored.array("category_counts.npy")
        stored.check(isinstance(names, list) and len(names) == len(counts),
                     "categories.json and category_counts.npy disagree")
        self.categories = _ShardedCategories(names, counts)
        self.models = shard_models(stored, None)  # the shared parts: rankers, names
        if runs_on_ray(ray):
            connect(ray if isinstance(ray, str) else None)  # the session the actors start in
            self.actors = _ShardActors(stored, self.live_shards,
                                       ray if isinstance(ray, str) else True)
        else:
            self.actors = _InProcessShards(stored, self.live_shards)
        # what the scorers compute over their rows (an embeddings model's title and body
        # fields): summed over the shards, so that each scores with the whole index's
        totals = {}
        for part in self.call(self.live_shards, "row_stats", "starting the shards",
                              timeout=_START_TIMEOUT):
            for key, st in part.items():
                totals[key] = st if key not in totals else totals[key] + st
        self._stats = [self.actors.put(totals)] if totals else None

    @classmethod
    def open(cls, stored, config=None, *, ray=None) -> "ShardedSearcher":
        return cls(stored, config, ray=ray)

    @property
    def ray(self):
        """Where the shards are searched, as ``ray`` of :meth:`open` takes it: False (this
        process), True or a cluster's address (Ray actors)."""
        return self.actors.ray

    def with_config(self, config) -> "ShardedSearcher":
        """The same shard actors with another configuration."""
        return ShardedSearcher(self.stored, config, timeout=self.timeout, _shared=(
            self.analyzer, self.index, self.categories, self.models, self.actors,
            self._stats))

    # -- what the engine reads -------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return int(self.starts[-1])

    @property
    def n_questions(self) -> int:
        return int(self.stored.manifest["stats"]["n_docs"])

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    def close(self) -> None:
        """Stop the shard actors (the searcher is unusable afterwards)."""
        self.actors.close()

    def shard_stats(self) -> list:
        """Per live shard: its host and process, questions, bytes on disk, the actor's
        resident memory, and the calls and CPU seconds of each kind of call so far (what
        sizing a deployment needs)."""
        live = self.live_shards
        return [dict(shard=s, **info) for s, info in zip(live, self.call(live, "stats",
                                                                         "reporting"))]

    def shard_of(self, rows) -> np.ndarray:
        """Shard of each row."""
        return np.searchsorted(self.starts, rows, side="right") - 1

    # -- the fan-out -----------------------------------------------------------------
    def call(self, shards, method, what, args=(), *, timeout=None) -> list:
        """``shard.method(*args)`` on each of ``shards`` (``args``: the same for every
        shard, or a dict shard -> its own), their answers in shard order; a shard that
        fails fails the whole call with a ShardError naming it (:meth:`_ShardActors.call`
        for the Ray actors' retries and ``timeout``, seconds)."""
        return self.actors.call(shards, method, what, args,
                                self.timeout if timeout is None else timeout)

    def per_shard(self, rows, method, what, *args, context=None):
        """``[(rows of shard s, actor.method(*args, [context,] local rows)), ...]`` for the
        shards holding ``rows`` (``context``: the candidates' context, made local to each
        shard)."""
        rows = np.asarray(rows, dtype=np.int64)
        shard = self.shard_of(rows)
        shards = np.unique(shard).tolist()
        picks = [rows[shard == s] for s in shards]
        starts = {s: int(self.starts[s]) for s in shards}
        return list(zip(picks, self.call(shards, method, what, {
            s: (*args, *(() if context is None else (context.local(p, starts[s]),)),
                p - starts[s]) for s, p in zip(shards, picks)})))

    def _scatter(self, rows, method, what, width, *args, context=None) -> np.ndarray:
        """An array of ``len(rows)`` (x ``width``) of the shards' answers for their rows."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((len(rows), width) if width else len(rows))
        if not len(rows):
            return out
        position = {r: i for i, r in enumerate(rows.tolist())}
        for picked, part in self.per_shard(rows, method, what, *args, context=context):
            out[[position[r] for r in picked.tolist()]] = part
        return out

    # -- the back-end's calls --------------------------------------------------------
    def candidates(self, q, depth, category_id=None, parsed=None, retrieval=None, *,
                   features=False) -> Candidates:
        category = None if category_id is None else self.categories[category_id]
        shards = self.live_shards
        parts = self.call(shards, "candidates", "selecting candidates",
                          (self.config, self._stats, q, depth, category, parsed, retrieval,
                           features))
        found, order = self._merged(shards, parts, depth)
        if not features:
            return found
        matrix = (np.vstack([part[3] for part in parts]) if parts else
                  np.zeros((0, len(self.feature_names))))
        return dataclasses.replace(found, features=matrix[order])

    def _merged(self, shards, parts, depth) -> tuple:
        """The best ``depth`` of the shards' (rows, scores, doc ids, ...) by (-score, doc
        id), and their positions in the shards' answers put end to end."""
        rows = np.concatenate([part[0] + self.starts[s] for s, part in zip(shards, parts)])
        scores = np.concatenate([part[1] for part in parts]).astype(np.float64)
        doc_ids = [d for part in parts for d in part[2]]
        order = np.lexsort((_id_rank(doc_ids), -scores))[:depth]
        doc_ids = [doc_ids[i] for i in order.tolist()]
        rows = rows[order]
        self.archive.remember(rows, doc_ids)
        return Candidates(rows, scores[order], np.arange(len(rows)), doc_ids), order

    def nearest(self, q, depth, category_id=None, parsed=None) -> Candidates:
        category = None if category_id is None else self.categories[category_id]
        shards = self.live_shards
        parts = self.call(shards, "nearest", "searching the question vectors",
                          (self.config, q, depth, category, parsed))
        return self._merged(shards, parts, depth)[0]

    def features(self, q, rows, context) -> np.ndarray:
        return self._scatter(rows, "features", "computing features", len(self.feature_names),
                             self.config, self._stats, q, context=context)

    def retrieval_scores(self, q, rows, model) -> np.ndarray:
        return self._scatter(rows, "retrieval_scores", "scoring candidates", 0, q, model)

    def cosines(self, q, rows) -> np.ndarray:
        return self._scatter(rows, "cosines", "scoring candidates", 0, self.config, q)

    def tie_ranks(self, rows) -> np.ndarray:
        return _id_rank(self.doc_ids(rows))

    def rows(self, doc_ids) -> np.ndarray:
        return self.archive.rows(doc_ids)

    def doc_ids(self, rows) -> list:
        return self.archive.doc_ids_of(rows)

    def category_counts(self) -> np.ndarray:
        return self.categories.counts()

    def tag_counts(self) -> dict:
        live = self.live_shards
        first, counts = {}, {}
        for part in self.call(live, "tag_counts", "counting tags"):
            for key, tag, n in part:  # the first spelling met, in row order
                first.setdefault(key, tag)
                counts[key] = counts.get(key, 0) + n
        order = sorted((k for k, n in counts.items() if n),
                       key=lambda k: (-counts[k], first[k].casefold()))
        return {first[k]: counts[k] for k in order}

    def completions(self, prefix, k) -> list:
        return [c for part in self.call(self.live_shards, "completions", "completing titles",
                                        (prefix, k)) for c in part]

    def prepare_titles(self) -> None:
        self.call(self.live_shards, "prepare_titles", "reading the titles")

    def surface_words(self) -> dict:
        words = self.stored.json("surface.json")
        self.stored.check(isinstance(words, dict), "surface.json is not a mapping")
        df = sum(np.asarray(f.stats.df, dtype=np.int64) for f in self.index.fields.values())
        return {w: int(df[t]) for w, t in words.items()
                if isinstance(t, int) and 0 <= t < len(df) and df[t] > 0}

    def answer_choice(self, name, row) -> int:
        (_, choices), = self.per_shard([int(row)], "answer_choices", "choosing an answer",
                                       name)
        return int(choices[0])

    def archived_query(self, row) -> dict:
        (_, found), = self.per_shard([int(row)], "archived_queries",
                                     "reading a question's vectors")
        return found[0]


def _failed(shards, s, what, exc) -> ShardError:
    return ShardError(f"shard {s} of {len(shards)} ({shards[s]['dir']}) failed while "
                      f"{what} ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}); no partial "
                      "result is returned")


class _Held:
    """A value the driver hands to shards read in this process, as it hands Ray's object
    references to shard actors (:func:`_fetched` reads either)."""

    def __init__(self, value):
        self.value = value

    def hex(self) -> str:
        return f"held-{id(self):x}"


def _fetched(ref):
    if isinstance(ref, _Held):
        return ref.value
    import ray

    return ray.get(ref)


class _InProcessShards:
    """The shards of a searcher read in this process (shared by its copies with other
    configurations): a :class:`_ShardActor` object each, called directly, one after the
    other. No Ray session: what a one-shot command on a local sharded index needs."""

    ray = False
    forks = True

    def __init__(self, stored, shards):
        self.shards = read_shards(stored)
        self.handles = {s: _ShardActor(stored.path, stored.generation, stored.manifest, s,
                                       stored.mmap) for s in shards}

    def __getitem__(self, s):
        return self.handles[s]

    @staticmethod
    def put(value) -> _Held:
        return _Held(value)

    def call(self, shards, method, what, args, timeout) -> list:
        """As :meth:`_ShardActors.call` (``timeout``: unused, the shards answer here); a
        shard whose files cannot be read fails the call with a ShardError naming it."""
        out = []
        for s in shards:
            try:
                out.append(getattr(self.handles[s], method)(
                    *(args[s] if isinstance(args, dict) else args)))
            except OSError as exc:
                raise _failed(self.shards, s, what, exc) from None
        return out

    def close(self) -> None:
        self.handles = {}


class _ShardActors:
    """The shard actors of a searcher (shared by its copies with other configurations):
    each pinned to a node, the cluster's nodes taken in turn (each node's share of the
    shards, so of the memory and CPU, known in advance). Ray restarts an actor whose
    process dies on its node; one whose node is lost is started again here on the node
    alive with the fewest shards (:meth:`replace_lost`).

    ``ray``: the cluster's address they were started on, or True (the session of this
    process)."""

    forks = False

    def __init__(self, stored, shards, ray=True):
        self.stored, self.ray = stored, ray
        self.shards = read_shards(stored)
        self._actor = remote(_ShardActor, **_ACTOR_OPTIONS)
        self.handles, self.nodes = {}, {}
        nodes = alive_nodes()
        for k, s in enumerate(shards):
            self._start(s, nodes[k % len(nodes)])

    def _start(self, s, node) -> None:
        stored = self.stored
        self.handles[s] = self._actor.options(**on_node(node)).remote(
            stored.path, stored.generation, stored.manifest, s, stored.mmap)
        self.nodes[s] = node

    def __getitem__(self, s):
        return self.handles[s]

    @staticmethod
    def put(value):
        return connect().put(value)

    def call(self, shards, method, what, args, timeout) -> list:
        """``actor.method(*args)`` on each of ``shards`` at once (``args``: the same for
        every shard, or a dict shard -> its own), their answers in shard order.

        A shard whose actor is temporarily unavailable (restarting: its process or node
        was lost) is asked again until ``timeout`` seconds have passed; a shard that fails,
        or has not answered by then, fails the whole call with a ShardError naming it."""
        ray = connect()
        deadline = time.monotonic() + timeout

        def submit(s):
            return getattr(self.handles[s], method).remote(
                *(args[s] if isinstance(args, dict) else args))

        refs = {s: submit(s) for s in shards}
        out = []
        for s in shards:
            while True:
                try:
                    out.append(ray.get(refs[s], timeout=max(deadline - time.monotonic(), 0)))
                    break
                except ray.exceptions.GetTimeoutError:
                    pass
                except (ray.exceptions.ActorUnavailableError, ray.exceptions.ActorDiedError,
                        ray.exceptions.ActorUnschedulableError) as exc:
                    # restarting, or its node lost: started again elsewhere (its calls only
                    # read: asked again)
                    lost = self.replace_lost(s)
                    if time.monotonic() < deadline and (
                            lost or isinstance(exc, ray.exceptions.ActorUnavailableError)):
                        time.sleep(0 if lost else min(0.5, deadline - time.monotonic()))
                        refs[s] = submit(s)
                        continue
                    if not isinstance(exc, ray.exceptions.ActorUnavailableError):
                        raise _failed(self.shards, s, what, exc) from None
                except ray.exceptions.RayError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, CQASearchError):
                        raise cause from None
                    raise _failed(self.shards, s, what, exc) from None
                for other in refs.values():
                    ray.cancel(other)
                raise ShardError(f"shard {s} of {len(self.shards)} ({self.shards[s]['dir']}) "
                                 f"did not answer within {timeout:g} s while {what}; no "
                                 "partial result is returned")
        return out

    def replace_lost(self, s) -> bool:
        """Start shard ``s``'s actor again on a node alive if its node is lost; whether it
        was."""
        alive = alive_nodes()
        if not alive or self.nodes[s] in alive:
            return False
        load = {n: 0 for n in alive}
        for node in self.nodes.values():
            if node in load:
                load[node] += 1
        logger.warning("the node of shard %d is lost: its actor starts again on another", s)
        connect().kill(self.handles[s], no_restart=True)
        self._start(s, min(alive, key=lambda n: (load[n], n)))
        return True

    def close(self) -> None:
        ray = connect()
        for actor in self.handles.values():
            ray.kill(actor)
        self.handles = {}


def _statistics_only(vocab, stats) -> TermIndex:
    """The driver's term index: the vocabulary and each field's global statistics, no
    postings (those are the shards'); what query analysis reads (which words are known)."""
    n_terms = len(vocab)
    empty = np.zeros(0, dtype=np.int32)
    fields = {name: FieldIndex(name, np.zeros(n_terms + 1, dtype=np.int64), empty, empty,
                               empty, empty, stats=st) for name, st in stats.items()}
    return TermIndex(vocab, fields)


def _id_rank(doc_ids) -> np.ndarray:
    """Rank of each id in sorted order: the global doc-id order that breaks ties (the
    order every shard's ``doc_id_rank`` follows for its own ids)."""
    rank = np.empty(len(doc_ids), dtype=np.int64)
    rank[sorted(range(len(doc_ids)), key=doc_ids.__getitem__)] = np.arange(len(doc_ids))
    return rank
