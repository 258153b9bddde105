"""Model fitting spread over Ray: the IBM Model 1 E-step and the GNMF-family blocks.

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

import numpy as np

from ._ray import ShardError, connect, remote

__all__ = ["ray_fits", "fit_backend", "RayIBM1Workspace", "RayBlocks"]


def _gather(refs, what):
    ray = connect()
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as exc:
        raise ShardError(f"{what} failed on a Ray worker ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); the fit stopped") \
            from None


# ---------------------------------------------------------------------------------------
# IBM Model 1
# ---------------------------------------------------------------------------------------
def _ibm1_setup(corpus):
    """A shard's EM workspace (kept in Ray's object store) and what the driver needs of
    it: table entries as ``row * n_terms + col``, cells, target tokens (a Ray task)."""
    from ..translation.ibm1 import _Workspace

    ws = _Workspace(corpus)
    return ws, (ws.entry_row * ws.n_terms + ws.entry_col, ws.n_cells, ws.n_tokens)


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
    Ray's object store.

    Parameters
    ----------
    corpus : ParallelCorpus
    n_shards : int
    """

    def __init__(self, corpus, n_shards):
        ray = connect()
        setup = remote(_ibm1_setup, num_returns=2)
        parts = [corpus.select(np.arange(a, b)) for a, b in _split_pairs(corpus, n_shards)]
        refs = [setup.remote(part) for part in parts if len(part.target)]
        self.workspaces = [ws for ws, _ in refs]
        setups = _gather([info for _, info in refs], "setting up the EM shards")
        V = corpus.n_terms
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
                         zip(self.workspaces, self._index_refs)], "the E-step")
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
    tokens = (ibm1.WORKSPACE.set(lambda corpus: RayIBM1Workspace(corpus, n_shards)),
              nmf.BLOCKS.set(lambda X, Vt: RayBlocks(X, Vt, n_shards)))
    try:
        yield
    finally:
        ibm1.WORKSPACE.reset(tokens[0])
        nmf.BLOCKS.reset(tokens[1])
