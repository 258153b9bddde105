"""Model fitting spread over Ray: the IBM Model 1 E-step and the GNMF-family blocks.

A corpus where the shards are: :class:`ShardedCorpus` builds the parallel corpus of a
sharded index in one Ray task per shard, from the shard's own files; each part and its EM
workspace stay in Ray's object store, and ``IBMModel1().fit(ShardedCorpus(top))`` runs EM
with one E-step task per shard, the expected counts summed in the driver (exact EM: the
table equals that of the corpus of the whole archive to rounding). The driver's memory is
the table's, not the pairs'.

A fit's parts where the shards are: :class:`ShardParts` makes one Ray actor per shard
holding a part of the fit made from the shard's files (e.g. the answers model's: its
answers, analysed, and their features), and calls its steps on every shard at once; the
model's global part is computed in the driver from the parts' statistics, its
per-question part by each actor against it (the interface of
:class:`cqa_search._utils.InProcess`, the whole archive in this process as one part).

Both estimators keep their own EM / multiplicative-update loop and read their data-heavy
steps through a pluggable object (a context variable of their module); within
:func:`ray_fits` those objects run the same kernels as Ray tasks:

* **IBM Model 1** (:mod:`cqa_search.translation.ibm1`): the training pairs are split into
  contiguous shards; a Ray task builds each shard's EM workspace (its cells sorted by
  table entry), which stays in Ray's object store. An iteration runs one E-step task per
  shard on the current table; each returns its log-likelihood part and the expected
  counts of its entries, which the driver sums into the table's entries and normalises
  (the M-step). The table equals
  the single-process fit's to rounding (sums in another order: ~1e-15 relative).
* **NMF, CNMF, GNMF, GNMFNC** (:mod:`cqa_search.factorization.nmf`): the categories'
  blocks (``D_p`` and ``V_p``) are spread over Ray tasks; a sweep computes every group's
  ``D_p V_p^T`` and, after the topic updates on the driver (small: terms x topics, and
  sequential across categories as the Gauss-Seidel sweep requires), every group's
  ``V_p`` update in parallel. The kernels and their inputs are those of the
  single-process fit, so the objective trajectory is the same (bit for bit here).

Use it around any fit (``cqa-search fit INDEX FAMILY --ray [ADDRESS]`` does)::

    with ray_fits(n_shards=4):
        model = TranslationModel().fit(engine.view)

The fitted model is stored like any other (:func:`cqa_search.index.models.add_model`).
"""
from __future__ import annotations

import contextlib
import logging
import warnings

import numpy as np

from ..exceptions import ParameterError
from ._ray import alive_nodes, connect, gather as _gather, on_node, remote

logger = logging.getLogger(__name__)

__all__ = ["ray_fits", "fit_backend", "RayIBM1Workspace", "RayBlocks", "ShardedCorpus",
           "ShardedSource", "ShardParts", "HeldCorpus"]


# ---------------------------------------------------------------------------------------
# IBM Model 1
# ---------------------------------------------------------------------------------------
def _ibm1_setup(corpus):
    """A shard's EM workspace (kept in Ray's object store) and what the driver needs of
    it: table entries as ``row * n_terms + col``, cells, target tokens (a Ray task)."""
    from ..translation.ibm1 import _Workspace

    ws = _Workspace(corpus)
    return ws, (ws.entry_row * ws.n_terms + ws.entry_col, ws.n_cells, ws.n_tokens)


def _shard_corpus_setup(path, generation, manifest, s, mmap, params):
    """Shard ``s``'s part of the parallel corpus of a sharded index, read from the shard's
    files (its rows with the global vocabulary), and its EM workspace (a Ray task): the
    part and the workspace (kept in Ray's object store), :func:`_ibm1_setup`'s sizes, and
    the part's corpus statistics (None: the shard gives no pair)."""
    from ..features import IndexView
    from ..index.sharding import load_shard
    from ..index.store import StoredIndex
    from ..translation.corpus import build_parallel_corpus

    data = load_shard(StoredIndex(path, generation, manifest, mmap), s)
    view = IndexView(data.index, data.archive, data.analyzer, data.categories)
    with warnings.catch_warnings(record=True):  # the driver says what the parts did
        warnings.simplefilter("always")
        try:
            corpus, stats = build_parallel_corpus(view, **params)
        except ParameterError:  # no pair in this shard: the whole corpus may have some
            return None, None, (np.zeros(0, np.int64), 0, 0), None
    ws, sizes = _ibm1_setup(corpus)
    return corpus, ws, sizes, stats.as_dict()


def _part_phrases(corpus, params, translation):
    """The phrase table of a part of the corpus (a Ray task)."""
    from ..translation.phrases import PhraseTable

    return PhraseTable(**params).fit(corpus, translation=translation)


def _ibm1_e_step(ws, index, data):
    """The E-step on a shard: its log-likelihood and its entries' expected counts under
    the table ``data`` (``index``: its entries' positions in the table; a Ray task)."""
    local = data[index]
    return ws.likelihood(local), ws.counts(local)


def _split_pairs(corpus, n_shards) -> list:
    """Contiguous pair ranges of about equal cells (target words x source length)."""
    cells = np.diff(corpus.target_offsets) * (np.diff(corpus.source_offsets) + 1)
    cum = np.cumsum(cells)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_shards) / n_shards, side="right")
    bounds = np.unique(np.concatenate([[0], cuts, [corpus.n_pairs]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


class RayIBM1Workspace:
    """An IBM Model 1 EM workspace whose E-step runs as Ray tasks, one per shard of the
    pairs (the interface :class:`~cqa_search.translation.ibm1.IBMModel1` reads of its
    in-process workspace). Each shard's workspace is built once, by a task, and stays in
    Ray's object store; the driver holds the table's entries.

    Parameters
    ----------
    workspaces : list of ObjectRef
        Each shard's workspace, in Ray's object store.
    setups : list
        Each shard's ``(table entries as row * n_terms + col, cells, target tokens)``.
    n_terms : int
    names : list of str, optional
        What each workspace is the part of, for errors (e.g. ``"shard 3 (shards/00003)"``).
    """

    @classmethod
    def split(cls, corpus, n_shards) -> "RayIBM1Workspace":
        """The workspace of a corpus of this process split into ``n_shards`` shards of the
        pairs (contiguous, about equal cells)."""
        setup = remote(_ibm1_setup, num_returns=2)
        parts = [corpus.select(np.arange(a, b)) for a, b in _split_pairs(corpus, n_shards)]
        refs = [setup.remote(part) for part in parts if len(part.target)]
        return cls([ws for ws, _ in refs], _gather([info for _, info in refs],
                                                   "setting up the EM shards"),
                   corpus.n_terms)

    def __init__(self, workspaces, setups, n_terms, names=None):
        ray = connect()
        self.workspaces = list(workspaces)
        self.names = names
        V = n_terms
        keys = np.concatenate([k for k, _, _ in setups])
        keys.sort(kind="stable")  # sorted runs (each shard's keys): merged, not re-sorted
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # np.unique hashes: slow
        self.entry_row = keys // V
        self.entry_col = (keys % V).astype(np.int32)
        self.index = [np.searchsorted(keys, k) for k, _, _ in setups]
        self._index_refs = [ray.put(i) for i in self.index]
        self.n_terms = V
        self.n_cells = sum(n for _, n, _ in setups)
        self.n_tokens = sum(n for _, _, n in setups)
        self.n_target_vocab = int(np.count_nonzero(self.entry_row == 0))
        self._counts = None

    @property
    def nnz(self):
        return len(self.entry_row)

    def likelihood(self, data) -> float:
        """The E-step on every shard at once (keeps the counts for :meth:`counts`)."""
        e_step = remote(_ibm1_e_step)
        ref = connect().put(np.asarray(data))
        parts = _gather([e_step.remote(ws, i, ref) for ws, i in
                         zip(self.workspaces, self._index_refs)], "the E-step", self.names)
        self._counts = [c for _, c in parts]
        return float(sum(ll for ll, _ in parts))

    def counts(self, data) -> np.ndarray:
        out = np.zeros(self.nnz)
        for index, part in zip(self.index, self._counts):
            out[index] += part
        return out

    def normalise(self, counts):
        from ..translation.ibm1 import _Workspace

        return _Workspace.normalise(self, counts)


# ---------------------------------------------------------------------------------------
# NMF family
# ---------------------------------------------------------------------------------------
def _blocks_step(X, Vt, DV, method, *args):
    """One step of a sweep on some categories' blocks (a Ray task): their new ``V_p^T``
    and ``D_p V_p^T`` (kept in Ray's object store) and the step's result."""
    from threadpoolctl import threadpool_limits

    from ..factorization.nmf import _Blocks

    blocks = _Blocks(X, [np.array(v) for v in Vt], DV)  # writable copies: steps update V
    with threadpool_limits(limits=1, user_api="blas"):  # as the single-process fit
        out = getattr(blocks, method)(*args)
    return blocks.Vt, blocks.DV, out


def _writable(value):
    if isinstance(value, np.ndarray):
        return np.array(value)
    if isinstance(value, tuple):
        return tuple(_writable(v) for v in value)
    return value


class RayBlocks:
    """The per-category blocks of an NMF-family fit spread over Ray tasks (the interface
    of :class:`cqa_search.factorization.nmf._Blocks`).

    Groups are dealt to ``n_shards`` parts by size (largest first, each to the least
    loaded part); every step runs one task per part, all at once, and the parts' ``D_p``
    and ``V_p`` stay in Ray's object store between steps.
    """

    def __init__(self, X, Vt, n_shards):
        ray = connect()
        sizes = np.array([x.nnz + v.size for x, v in zip(X, Vt)], dtype=np.float64)
        load = np.zeros(min(n_shards, len(X)))
        owner = np.empty(len(X), dtype=np.int64)
        for p in np.argsort(-sizes, kind="stable"):
            owner[p] = int(np.argmin(load))
            load[owner[p]] += sizes[p]
        self.groups = [np.flatnonzero(owner == a) for a in range(len(load))]
        self.X = [ray.put([X[p] for p in g]) for g in self.groups]
        self.Vt = [ray.put([Vt[p] for p in g]) for g in self.groups]
        self.DV = [None] * len(self.groups)
        self.n_groups = len(X)

    def _run(self, method, *per_group):
        step = remote(_blocks_step, num_returns=3)
        refs = [step.remote(X, Vt, DV, method, *[[arg[p] for p in g] for arg in per_group])
                for X, Vt, DV, g in zip(self.X, self.Vt, self.DV, self.groups)]
        if method in ("objective", "update"):  # the steps that change V
            self.Vt = [vt for vt, _, _ in refs]
        self.DV = [dv for _, dv, _ in refs]
        out = [None] * self.n_groups
        for g, part in zip(self.groups, _gather([r for _, _, r in refs],
                                                f"the blocks' {method} step")):
            for p, value in zip(g, part):
                out[p] = _writable(value)
        return out

    def products(self, sv) -> list:
        return self._run("products", sv)

    def objective(self, U, sv) -> list:
        return self._run("objective", U, sv)

    def update(self, U, grams, sv) -> list:
        return self._run("update", U, grams, sv)

    def coefficients(self, sv) -> list:
        return self._run("coefficients", sv)


def fit_backend() -> str:
    """Where fits run their heavy steps here and now: ``"ray"`` within :func:`ray_fits`,
    else ``"this process"`` (the context variables :data:`cqa_search.translation.ibm1.WORKSPACE`
    and :data:`cqa_search.factorization.nmf.BLOCKS` are the switch; this reads them).

    Examples
    --------
    >>> fit_backend()
    'this process'
    """
    from ..factorization import nmf
    from ..translation import ibm1

    ray = ibm1.WORKSPACE.get() is not None or nmf.BLOCKS.get() is not None
    return "ray" if ray else "this process"


@contextlib.contextmanager
def ray_fits(n_shards=None, *, address=None):
    """Within this block, IBM Model 1 and NMF-family fits run their heavy steps on Ray.

    Parameters
    ----------
    n_shards : int, optional
        Shards of the training pairs (IBM Model 1) and parts sharing the categories
        (NMF family); default: the cluster's CPUs.
    address : str, optional
        Ray cluster (default: the current session, ``RAY_ADDRESS``, or a local one).

    Examples
    --------
    >>> from cqa_search.translation import IBMModel1, ParallelCorpus
    >>> corpus = ParallelCorpus.from_pairs([([0, 1], [2]), ([1], [2, 3])])
    >>> with ray_fits(2):                                    # doctest: +SKIP
    ...     model = IBMModel1(max_iter=3, tol=None).fit(corpus)
    """
    from ..factorization import nmf
    from ..translation import ibm1

    ray = connect(address)
    if n_shards is None:
        n_shards = max(int(ray.cluster_resources().get("CPU", 1)), 1)
    tokens = (ibm1.WORKSPACE.set(lambda corpus: RayIBM1Workspace.split(corpus, n_shards)),
              nmf.BLOCKS.set(lambda X, Vt: RayBlocks(X, Vt, n_shards)))
    try:
        yield
    finally:
        ibm1.WORKSPACE.reset(tokens[0])
        nmf.BLOCKS.reset(tokens[1])


# ---------------------------------------------------------------------------------------
# The parallel corpus of a sharded index, where its shards are
# ---------------------------------------------------------------------------------------
def _summed_stats(parts) -> dict:
    """The corpus statistics of the whole archive from its parts' (counts summed)."""
    total = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            if not isinstance(value, bool):
                total[key] += value
    return total


class ShardedCorpus:
    """The parallel corpus of a sharded index, built and kept where its shards are.

    One Ray task per shard reads the shard's files (its rows with the global vocabulary:
    :func:`~cqa_search.index.sharding.load_shard`), builds its part of the corpus
    (:func:`~cqa_search.translation.corpus.build_parallel_corpus`: a question's pairs are
    its own, and TextRank filters each document alone, so the parts are the whole
    corpus's pairs) and its EM workspace, which stay in Ray's object store.
    :meth:`IBMModel1.fit <cqa_search.translation.IBMModel1.fit>` on it runs one E-step
    task per shard and sums their expected counts in the driver: exact EM, whose table
    equals that of the whole archive's corpus to rounding (the counts summed in another
    order), with the driver holding the table, never the pairs.
    :meth:`PhraseTable.fit <cqa_search.translation.PhraseTable.fit>` on it fits each
    part's phrase table in a task on the part and merges them
    (:meth:`~cqa_search.translation.PhraseTable.merged`): the driver holds the tables.

    Parameters
    ----------
    top : StoredIndex
        The top-level generation of a sharded index.
    answers, title_body, pooling, textrank, window, damping
        As :func:`~cqa_search.translation.corpus.build_parallel_corpus`. (Duplicate and
        similar-question pairs join questions of different shards: not here.)

    Attributes
    ----------
    n_pairs, n_terms : int
    stats : dict
        The corpus statistics (:class:`~cqa_search.translation.corpus.CorpusStats`) of
        the whole archive.

    Raises
    ------
    ParameterError
        No pair in any shard, or shards that disagree on the kind of pairs (some with
        answers, some falling back to title-body pairs: one process would not).
    ShardError
        A shard's task failed.
    """

    def __init__(self, top, *, answers="all", title_body=False, pooling=True,
                 textrank=True, window=3, damping=0.85):
        from ..index.sharding import read_shards, shard_dir
        from ..translation.corpus import ANSWER_PAIRS

        if answers not in ANSWER_PAIRS:
            raise ParameterError(f"answers must be one of {{'all', 'best', None}}; got "
                                 f"{answers!r}")
        connect()
        params = dict(answers=answers, title_body=title_body, pooling=pooling,
                      textrank=textrank, window=window, damping=damping)
        setup = remote(_shard_corpus_setup, num_returns=4)
        shards = [s for s, entry in enumerate(read_shards(top)) if entry["dir"] is not None]
        refs = [setup.remote(top.path, top.generation, top.manifest, s, top.mmap, params)
                for s in shards]
        names = [f"shard {s} ({shard_dir(s)})" for s in shards]
        sizes = _gather([r[2] for r in refs], "building the shards' parallel corpus", names)
        stats = _gather([r[3] for r in refs], "building the shards' parallel corpus", names)
        given = [k for k, st in enumerate(stats) if st is not None]
        if not given:
            raise ParameterError("no parallel pairs in any shard: the archive has no "
                                 "answers and no question with both a title and a body")
        fell_back = {stats[k]["n_qa_pairs"] == 0 and stats[k]["n_title_body_pairs"] > 0
                     for k in given} if answers is not None and not title_body else {False}
        if len(fell_back) > 1:
            raise ParameterError("some shards have answers and others none (they would pair "
                                 "titles with bodies instead): fit the translation model in "
                                 "one process, or with title_body=True")
        if True in fell_back:
            warnings.warn(f"the archive has no {'best ' * (answers == 'best')}answers: the "
                          "translation model learns from its title-body pairs instead (as "
                          "with --title-body --answers none)", UserWarning, stacklevel=2)
        self.n_terms = len(top.json("vocab.json"))
        self.stats = _summed_stats([stats[k] for k in given])
        self.n_pairs = self.stats["n_pairs"]
        self._corpora = [refs[k][0] for k in given]
        self._names = [names[k] for k in given]
        self._parts = ([refs[k][1] for k in given], [sizes[k] for k in given])

    def workspace(self) -> RayIBM1Workspace:
        """The EM workspace over the shards' parts (what :class:`IBMModel1
        <cqa_search.translation.IBMModel1>` fits with)."""
        return RayIBM1Workspace(*self._parts, self.n_terms, self._names)

    def phrase_tables(self, table, translation) -> list:
        """Each part's phrase table: ``table``'s parameters (a
        :class:`~cqa_search.translation.PhraseTable`), fitted with ``translation`` (the
        fitted IBM Model 1) by a task on the part."""
        task = remote(_part_phrases)
        model = connect().put(translation)
        return _gather([task.remote(corpus, table.get_params(), model)
                        for corpus in self._corpora], "extracting the shards' phrases",
                       self._names)


# ---------------------------------------------------------------------------------------
# A fit's per-question work where the shards are
# ---------------------------------------------------------------------------------------
class _PartActor:
    """One shard's part of a fit (a Ray actor): ``factory(view, start)`` made from the
    shard's files (its rows with the global vocabulary and statistics, its first row
    ``start`` in the whole index), kept between the steps the driver calls."""

    def __init__(self, path, generation, manifest, s, mmap, start, factory):
        from ..features import IndexView
        from ..index.sharding import load_shard
        from ..index.store import StoredIndex

        data = load_shard(StoredIndex(path, generation, manifest, mmap), s)
        self.part = factory(IndexView(data.index, data.archive, data.analyzer,
                                      data.categories), start)

    def call(self, method, *args):
        return getattr(self.part, method)(*args)

    @staticmethod
    def usage() -> dict:
        """The actor's process: peak resident memory (MB) and CPU seconds so far."""
        import resource

        own = resource.getrusage(resource.RUSAGE_SELF)
        return {"peak_mb": own.ru_maxrss / 1024, "cpu_s": own.ru_utime + own.ru_stime}


def _corpus_setup(corpus):
    """A part's parallel corpus (None: no pair) made an EM workspace (a Ray task): the
    workspace, :func:`_ibm1_setup`'s sizes, and ``(pairs, terms)``."""
    if corpus is None:
        return None, None, (0, 0)
    ws, sizes = _ibm1_setup(corpus)
    return ws, sizes, (corpus.n_pairs, corpus.n_terms)


class HeldCorpus:
    """A parallel corpus whose parts, and their EM workspaces, stay in Ray's object store:
    :meth:`IBMModel1.fit <cqa_search.translation.IBMModel1.fit>` fits it with one E-step
    task per part, this process holding the table (:meth:`ShardParts.parallel_corpus`).

    Attributes
    ----------
    n_pairs, n_terms : int
    """

    def __init__(self, workspaces, setups, n_pairs, n_terms, names):
        self._parts = (workspaces, setups)
        self.n_pairs, self.n_terms, self._names = n_pairs, n_terms, names

    def workspace(self) -> RayIBM1Workspace:
        return RayIBM1Workspace(*self._parts, self.n_terms, self._names)


class ShardParts:
    """A sharded index's shards as the parts of a fit, each in a Ray actor on its shard.

    The actor of shard ``s`` makes ``factory(view, start)`` from the shard's files (a
    view of its rows with the global vocabulary and statistics; ``start``: its first row
    in the whole index) and keeps it; the fit calls its steps on every shard at once and
    gets their results in shard order: the global part of the model is computed in the
    driver from the parts' statistics, the per-question part by each actor against it.
    The interface of :class:`cqa_search._utils.InProcess` (the whole archive in this
    process as one part): ``map``, ``parallel_corpus``, ``with`` (the actors end with it).
    The actors are dealt to the cluster's nodes in turn, as a sharded search's (the index
    on storage every node reads); an actor is not restarted: a shard whose actor or node
    is lost fails the fit, by name, before anything is stored.

    Parameters
    ----------
    top : StoredIndex
        The top-level generation of a sharded index.
    factory : callable
        ``factory(view, start) -> part`` (a class of the model's module, e.g.
        :class:`cqa_search.answers._Part`).

    Raises
    ------
    ShardError
        A shard's actor failed (its files unreadable, its process or node lost), named.
    """

    def __init__(self, top, factory):
        from ..index.sharding import read_shards, shard_dir

        ray = connect()
        actor = remote(_PartActor, num_cpus=0, max_restarts=0)
        nodes = alive_nodes()
        self.actors, self.names, self.nodes, start = [], [], [], 0
        for s, entry in enumerate(read_shards(top)):
            if entry["dir"] is not None:
                node = nodes[len(self.actors) % len(nodes)]  # the nodes in turn
                self.actors.append(actor.options(**on_node(node)).remote(
                    top.path, top.generation, top.manifest, s, top.mmap, start, factory))
                self.names.append(f"shard {s} ({shard_dir(s)})")
                self.nodes.append(node)
            start += entry["n_docs"]
        self._ray = ray
        self.usage = {}  # name -> what its actor used (when closed)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """End the actors (their memory is the parts'), logging what each used (INFO:
        its peak resident memory and CPU seconds; :attr:`usage`)."""
        refs = [actor.usage.remote() for actor in self.actors]
        for name, ref in zip(self.names, refs):
            try:
                self.usage[name] = used = self._ray.get(ref, timeout=30)
            except self._ray.exceptions.RayError:  # its process or node lost
                continue
            logger.info("%s: peak %.0f MB, %.1f CPU s", name, used["peak_mb"], used["cpu_s"])
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []

    def _submit(self, method, args) -> list:
        refs = [self._ray.put(a) for a in args]  # once, not once per shard
        return [actor.call.remote(method, *refs) for actor in self.actors]

    def map(self, method, *args) -> list:
        """Every shard's ``part.method(*args)``, in shard order."""
        return _gather(self._submit(method, args), f"the shards' {method} step", self.names)

    def parallel_corpus(self, method, *args):
        """The :class:`HeldCorpus` of the shards' ``part.method(*args)`` (a ParallelCorpus
        or None each; they stay in Ray's object store), or None when no shard has a
        pair."""
        setup = remote(_corpus_setup, num_returns=3)
        refs = [setup.remote(corpus) for corpus in self._submit(method, args)]
        what = f"the shards' {method} step"
        sizes = _gather([r[2] for r in refs], what, self.names)
        given = [k for k, (n, _) in enumerate(sizes) if n]
        if not given:
            return None
        setups = _gather([refs[k][1] for k in given], what, [self.names[k] for k in given])
        return HeldCorpus([refs[k][0] for k in given], setups,
                          sum(n for n, _ in sizes), max(t for _, t in sizes),
                          [self.names[k] for k in given])


class ShardedSource:
    """What a fit reads of a sharded index where its shards are, instead of the whole
    archive read in this process (an :class:`~cqa_search.features.IndexView`): the
    translation model's parallel corpus (:meth:`parallel_corpus`), and the shards as the
    parts of a fit (:meth:`fit_parts`: the answers model's).

    Parameters
    ----------
    top : StoredIndex
        The top-level generation of a sharded index.
    """

    def __init__(self, top):
        self.top = top

    def fit_parts(self, factory) -> ShardParts:
        """The shards as the parts of a fit (:class:`ShardParts`), each made by
        ``factory(view, start)`` in an actor on its shard."""
        return ShardParts(self.top, factory)

    def parallel_corpus(self, *, duplicates=False, similar_questions=None,
                        min_similarity=0.5, progress_bar=False, **params) -> tuple:
        """``(ShardedCorpus, CorpusStats)`` with the parameters of
        :func:`~cqa_search.translation.corpus.build_parallel_corpus` (duplicate and
        similar-question pairs join questions of different shards: ParameterError)."""
        from ..translation.corpus import CorpusStats

        if duplicates or similar_questions is not None:
            raise ParameterError("duplicate and similar-question pairs join questions of "
                                 "different shards: fit them without --ray (the whole "
                                 "archive read in this process)")
        corpus = ShardedCorpus(self.top, **params)
        return corpus, CorpusStats(**corpus.stats)
