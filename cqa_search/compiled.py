"""Compiled twins of the hottest numpy paths (numba), and the one switch between them.

Each kernel gives its numpy path's result (bit for bit, but for the sum-form DP: to
rounding); the numpy path stays the reference and the fallback.

- :func:`top_k_of_postings`: the BM25 top k over the query terms' postings
  (:func:`~cqa_search.retrieval.candidates.top_k_of_model`). The numpy path sums every posting
  of the query terms into an ``n_docs``-long array (``bincount``: one random write per
  posting into an array that outgrows the CPU caches past a few hundred thousand
  questions) and selects among the documents holding a term. The kernel sums the same
  postings one window of rows at a time into a cache-sized array and keeps the k best in a
  heap, so every posting costs a sequential read and a write into the cache: the time per
  query grows with the postings read, not faster; once k hits are kept, the most common
  query terms leave the sums (MaxScore) and only the documents that may still reach the
  k-th best search their postings (see the kernel's docstring; hypothesis tests in
  ``tests/retrieval/test_candidates.py`` check both paths against exhaustive scoring).
- :func:`sum_dp` and :func:`viterbi`: the segmentation DPs of the translation features
  (:mod:`cqa_search.translation.scoring`), a loop over positions that numpy runs as one
  small ``einsum`` or ``argmax`` per position (the Viterbi pass takes the span
  probabilities and logs only the non-zero ones: numpy's log of the mostly-zero block
  takes its slow path for 0).
- :func:`hull_spans` and :func:`distortion`: the bi-phrase candidates (the windows of an
  alignment whose links span at most the longest phrase) and the phrase-alignment
  feature along the Viterbi segmentation, loops over positions that numpy runs as a few
  array operations per window length or per segment (a whole question of 500 words:
  500 rounds).
- :func:`forward_table` and :func:`scatter_max`: the per-query table of the IBM 1
  probabilities of the query terms grouped by archive word (one pass over their columns
  and a counting sort where numpy gathers, sorts and scatters) and the inverse
  alignment's maxima (``np.maximum.at``).
- :func:`align`: eq. 9's alignment of each candidate's words to the query terms and the
  word-translation sums, one pass over the (candidate, word) pairs and each word's row of
  the query's table instead of listing the (candidate, word, query term) entries and
  sorting them by (candidate, term) to reduce groups.
- :func:`quadratic_forms`: ``y^T S y`` of every question's bag of words for the soft
  cosine's norms (:func:`cqa_search.vectors.softcos.self_similarity`), each bag against
  its own words' rows of ``S`` instead of a sparse product that forms every word similar
  to a bag's words and then keeps the bag's.
- :func:`search_sorted`: ``np.searchsorted`` in the translation model's sorted tables
  (phrases, bi-phrases: tens of millions of keys at a million questions) through a
  directory of buckets of key values (about 8 keys each), two or three cache lines a
  search instead of one per halving; in a table that fits in the cache, without sorting
  the needles first.
- :func:`number_tokens`: the tokens of a batch of questions numbered in a table of the
  tokens met so far (:class:`~cqa_search.index.batches.LocalTerms`), one pass over their
  bytes instead of a ``bytes`` object and a dictionary look-up per token.
- :func:`locate`: the posting positions of (term, candidate) pairs that the term features
  read (:func:`cqa_search.retrieval.postings.locate`), the rows in increasing order,
  galloping on in each posting list from the previous row's place, instead of numpy's
  rounds of binary search over all pairs at once (as many rounds as the longest posting
  list has bits).

Which implementation runs
-------------------------
:func:`active` says which one the hot paths take now (``"numba"`` or ``"numpy"``),
:func:`describe` says it in a line for people (``cqa-search --version`` prints it), and
:func:`use` chooses, for the whole process:

- ``"auto"`` (the default): importing numba and reading the kernels from its cache on disk
  costs about half a second (compiling them, the first time on a machine, about 7 s;
  ``NUMBA_CACHE_DIR`` moves the cache), more than a single search takes, so the numpy paths
  run until :func:`load` is called (``cqa-search serve`` calls it before serving, the
  benchmarks before timing) or until they have spent :data:`AUTO_LOAD_SECONDS` of CPU in
  the process (a loop of searches); the kernels run from then on.
- ``"numba"``: the kernels, loaded at once (an error if they cannot be).
- ``"numpy"``: the numpy paths only.

The environment variable ``CQA_SEARCH_COMPILED`` (:data:`ENVIRONMENT_VARIABLE`) gives the
choice of a process that does not call :func:`use`: ``auto``, ``numba`` (loaded at the
first search), or ``numpy`` (``0`` too). Fits have a switch of their own: inside
:func:`cqa_search.distributed.fitting.ray_fits` the EM of IBM Model 1 and the NMF family's updates
run on Ray (:func:`cqa_search.distributed.fitting.fit_backend` says where they run).
"""
from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

__all__ = ["use", "active", "describe", "load", "available", "timed", "top_k_of_postings",
           "sum_dp", "viterbi", "locate", "align", "quadratic_forms", "search_sorted",
           "hull_spans", "distortion", "forward_table", "scatter_max",
           "number_tokens", "gelu_bias", "add_layer_norm", "softmax_keys",
           "TokenTable",
           "IMPLEMENTATIONS", "AUTO_LOAD_SECONDS",
           "WINDOW", "ENVIRONMENT_VARIABLE"]

#: What :func:`use` accepts.
IMPLEMENTATIONS = ("auto", "numba", "numpy")
#: CPU seconds the numpy paths may spend in a process before ``"auto"`` loads the kernels.
AUTO_LOAD_SECONDS = 2.0
#: Rows summed at once by :func:`top_k_of_postings`: its float64 window (512 KiB) stays in
#: a core's L2 cache beside the postings streaming through (2^15 to 2^18 were within 10 %
#: of each other on 200,000 and 1,000,000 questions; 2^12 was 25 % slower).
WINDOW = 1 << 16
#: The environment variable read when :func:`use` was not called.
ENVIRONMENT_VARIABLE = "CQA_SEARCH_COMPILED"

_logger = logging.getLogger(__name__)
_chosen = None          # the argument of use(); None: the environment's choice
_from_environment = None  # the environment's choice, read once
_kernels = None         # the module of compiled kernels once loaded
_failed = False         # numba missing or a kernel could not be built
_spent = 0.0            # CPU seconds of the numpy paths so far
_lock = threading.Lock()
_workspace = threading.local()  # each thread's zeroed window of top_k_of_postings


def _choice() -> str:
    """``use()``'s choice, else the environment's (``auto`` when unset or not understood),
    read once."""
    global _from_environment
    if _chosen is not None:
        return _chosen
    if _from_environment is None:
        value = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower()
        _from_environment = ("numpy" if value in ("0", "false", "no", "off", "numpy") else
                             "numba" if value == "numba" else "auto")
    return _from_environment


def use(implementation: str) -> str:
    """Choose the implementation of the hot paths for this process.

    Parameters
    ----------
    implementation : {"auto", "numba", "numpy"}
        ``"auto"``: the numpy paths until :func:`load` or :data:`AUTO_LOAD_SECONDS` of
        their CPU time, then the kernels; ``"numba"``: the kernels, loaded now;
        ``"numpy"``: the numpy paths (kernels already loaded are set aside, not unloaded).

    Returns
    -------
    str
        :func:`active` after the change.

    Raises
    ------
    ParameterError
        Another value.
    RuntimeError
        ``"numba"`` and the kernels cannot be loaded (numba missing or broken).

    Examples
    --------
    >>> from cqa_search import compiled
    >>> compiled.use("numpy")
    'numpy'
    >>> compiled.use("auto") in ("numba", "numpy")   # numba if the kernels were loaded
    True
    """
    global _chosen
    if implementation not in IMPLEMENTATIONS:
        from .exceptions import ParameterError

        raise ParameterError(f"implementation must be one of {{{', '.join(map(repr, IMPLEMENTATIONS))}}}; "
                             f"got {implementation!r}")
    _chosen = implementation
    if implementation == "numba" and not load():
        raise RuntimeError("the compiled kernels cannot be loaded: "
                           + describe().split(": ", 1)[1])
    return active()


def active() -> str:
    """The implementation the hot paths take now: ``"numba"`` (the compiled kernels) or
    ``"numpy"``. Under ``CQA_SEARCH_COMPILED=numba`` the first call loads the kernels."""
    choice = _choice()
    if choice == "numpy":
        return "numpy"
    if _kernels is None and choice == "numba" and not _failed:
        load()
    return "numba" if _kernels is not None else "numpy"


def available() -> bool:
    """True when numba can be imported (the kernels may not be loaded yet) and the numpy
    paths are not chosen."""
    if _choice() == "numpy":
        return False
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def describe() -> str:
    """One line on the implementation in use, for people (``cqa-search --version``)."""
    choice = _choice()
    if choice == "numpy":
        how = ("compiled.use('numpy')" if _chosen is not None
               else f"{ENVIRONMENT_VARIABLE}={os.environ.get(ENVIRONMENT_VARIABLE, '')}")
        return f"compiled kernels: off ({how}): the numpy paths"
    if not available():
        return ("compiled kernels: numba is not installed: the numpy paths "
                "(numba is a dependency of cqa-search; reinstall it)")
    from importlib.metadata import PackageNotFoundError, version

    try:
        numba = f"numba {version('numba')}"
    except PackageNotFoundError:  # (importable without metadata)
        numba = "numba"
    if _failed:
        return f"compiled kernels: {numba} could not build them: the numpy paths"
    if _kernels is not None:
        return f"compiled kernels: {numba}, loaded"
    return (f"compiled kernels: {numba}, loaded by `serve`, or after "
            f"{AUTO_LOAD_SECONDS:g} s of searching (auto)")


def load() -> bool:
    """Import numba and compile (or read from its cache) the kernels now, unless the numpy
    paths are chosen; True when the kernels are in use. Without numba nothing happens
    and the numpy paths stay in use (the failure is logged once)."""
    global _kernels, _failed
    if _choice() == "numpy":
        return False
    if _kernels is not None:
        return True
    if _failed:
        return False
    with _lock:
        if _kernels is None and not _failed:
            try:
                from . import _numba_kernels as kernels

                for name, example in _examples().items():  # compiled or read from the cache
                    getattr(kernels, name)(*example)
                _kernels = kernels
            except Exception as exc:  # noqa: BLE001 - numba absent or broken: numpy paths
                _failed = True
                if available():  # (installed, yet it failed: say so once)
                    _logger.warning("the compiled kernels could not be loaded (%s: %s); "
                                    "searching with the numpy paths", type(exc).__name__, exc)
    return _kernels is not None


def note_numpy_time(seconds: float) -> None:
    """Count CPU time spent by the numpy paths; past :data:`AUTO_LOAD_SECONDS`, load
    (``"auto"`` only)."""
    global _spent
    _spent += seconds
    if _spent >= AUTO_LOAD_SECONDS and _kernels is None and not _failed \
            and _choice() == "auto":
        load()


def timed(function, *args):
    """``function(*args)`` (a numpy path), its CPU time counted towards
    :data:`AUTO_LOAD_SECONDS`."""
    started = time.process_time()
    try:
        return function(*args)
    finally:
        note_numpy_time(time.process_time() - started)


def _window(n_docs):
    """This thread's zeroed float64 window for ``n_docs`` rows (the kernel leaves it zeroed)."""
    acc = getattr(_workspace, "acc", None)
    if acc is None or len(acc) != WINDOW:
        acc = _workspace.acc = np.zeros(WINDOW)
    return acc[:max(1, min(int(n_docs), len(acc)))]


_NO_INT = np.zeros(0, dtype=np.int32)  # (the arguments of a filter not applied: never read)
_NO_BOOL = np.zeros(0, dtype=bool)


def top_k_of_postings(indptr, indices, weights, term_ids, coef, k, *, n_docs,
                      doc_category=None, category=None, allowed=None, tie_rank=None,
                      largest=None):
    """``(rows, scores)`` of the ``k`` best documents holding a query term (score > 0),
    passing the filters, ordered by ``(-score, tie_rank, row)`` (the kernels must be
    loaded).

    Parameters
    ----------
    indptr, indices : ndarray
        The field's postings (:class:`~cqa_search.index.term_index.FieldIndex`).
    weights : ndarray of float32
        Every posting's weight (:meth:`TermModel.posting_weights`).
    term_ids : ndarray of int, distinct query terms, in query order
    coef : ndarray of float, their query weights
    k : int >= 1
    n_docs : int
        Rows of the field.
    doc_category, category, allowed, tie_rank
        As :func:`~cqa_search.retrieval.candidates.top_k_of_model`.
    largest : ndarray of float32, shape (n_terms,), optional
        The largest posting weight of each term, negative where not known yet: the
        kernel's pruning reads it and fills in the query terms'
        (:meth:`TermModel.largest_weights` keeps one per field); None: found for this
        query only.
    """
    if largest is None:
        largest = np.full(len(indptr) - 1, -1.0, dtype=np.float32)
    return _kernels.top_k(
        np.asarray(indptr), np.asarray(indices), np.asarray(weights),
        np.asarray(term_ids, dtype=np.int64), np.asarray(coef, dtype=np.float32), int(k),
        _window(n_docs), largest,
        _NO_INT if doc_category is None else np.asarray(doc_category),
        -1 if category is None else int(category), category is not None,
        _NO_BOOL if allowed is None else np.asarray(allowed, dtype=bool),
        allowed is not None,
        _NO_INT if tie_rank is None else np.asarray(tie_rank), tie_rank is not None)


def sum_dp(probs, lengths, running, rescale):
    """``log alpha`` of the sum-form DP of every row at its end (the kernels must be
    loaded): :func:`cqa_search.translation.scoring._sum_dp` with ``running`` (rows still
    running at each position) computed."""
    return _kernels.sum_dp(np.ascontiguousarray(probs, dtype=np.float64),
                           np.asarray(lengths, dtype=np.int64),
                           np.asarray(running, dtype=np.int64), int(rescale))


def viterbi(probs, n_rows, floor):
    """``(pad, back)`` of the max-form DP over the first ``n_rows`` rows of the span
    probabilities ``probs`` (the kernels must be loaded): see
    :func:`cqa_search.translation.scoring._viterbi`."""
    return _kernels.viterbi(np.ascontiguousarray(probs, dtype=np.float64), int(n_rows),
                            float(floor))


def locate(indptr, indices, term_ids, rows):
    """``(positions, i, j)`` of :func:`cqa_search.retrieval.postings.locate` (the kernels
    must be loaded)."""
    return _kernels.locate(np.asarray(indptr), np.asarray(indices),
                           np.asarray(term_ids, dtype=np.int64), np.asarray(rows, dtype=np.int64))


def quadratic_forms(offsets, terms, weights, indptr, indices, data):
    """``y^T S y`` of each bag of words (the kernels must be loaded): bag ``d`` is
    ``terms[offsets[d]:offsets[d + 1]]`` (distinct ids below ``S``'s size) with
    ``weights``; ``S`` the square CSR matrix ``(data, indices, indptr)`` (int64 indices
    and pointers, float32 data: converted once by the caller). See
    :func:`cqa_search.vectors.softcos.self_similarity`."""
    return _kernels.quadratic_forms(
        np.asarray(offsets, dtype=np.int64), np.asarray(terms, dtype=np.int64),
        np.asarray(weights, dtype=np.float64), indptr, indices, data,
        np.zeros(len(indptr) - 1))


#: Keys per bucket of :func:`search_sorted`'s directory, on average (8 keys: 64 bytes,
#: one cache line; the directory then holds one int64 per 8 keys).
DIRECTORY_KEYS = 8
#: Up to this many keys (1 MiB of int64, within a core's L2 cache) :func:`search_sorted`
#: searches the needles in their order; above, sorted and distinct first (an argsort of
#: 20,000 needles costs more than their searches in a table in the cache).
UNSORTED_KEYS = 1 << 17
_directories = {}  # id(keys) -> (weak reference to keys, (starts, low, shift))


def _directory(keys):
    """``(starts, low, shift)`` of :func:`search_sorted` for ``keys``: buckets of
    ``2 ** shift`` consecutive key values from the first key, about
    :data:`DIRECTORY_KEYS` keys each; None when the keys span too wide a range."""
    low, high = int(keys[0]), int(keys[-1])
    if low < 0 or high >= 1 << 62:
        return None
    n_buckets = max(1, len(keys) // DIRECTORY_KEYS)
    shift = max(0, (high - low) // n_buckets).bit_length()
    return _kernels.bucket_starts(keys, low, shift, ((high - low) >> shift) + 1), low, shift


def search_sorted(keys, needles):
    """``np.searchsorted(keys, needles)`` (the kernels must be loaded; int64 ``keys``,
    sorted, not empty): through a directory of the first position of each bucket of key
    values (:func:`_directory`), made on the first search of ``keys`` (one pass over
    them) and kept while they live. Needles are searched in their order in a table of up
    to :data:`UNSORTED_KEYS` keys, sorted and distinct first in a larger one."""
    import weakref

    entry = _directories.get(id(keys))
    if entry is None or entry[0]() is not keys:
        for k in [k for k, (ref, _) in _directories.items() if ref() is None]:
            _directories.pop(k, None)  # the tables of models no longer open
        entry = _directories[id(keys)] = (weakref.ref(keys), _directory(keys))
    needles = np.asarray(needles, dtype=np.int64)
    if entry[1] is None:
        return np.searchsorted(keys, needles)
    if len(keys) <= UNSORTED_KEYS:  # in the cache: each needle where it stands
        return _kernels.search_directed(keys, *entry[1], needles)
    # each distinct needle searched once (a query's candidates share many phrases), in
    # increasing order (successive searches walk the keys in one direction)
    order = np.argsort(needles)
    ordered = needles[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts, low, shift = entry[1]
    found = _kernels.search_directed(keys, starts, low, shift, ordered[first])
    out = np.empty(len(needles), dtype=np.int64)
    out[order] = found[np.cumsum(first) - 1]
    return out


def hull_spans(A, max_length, tight, known, lengths):
    """``(length, c, x1, lo, hi)`` of the bi-phrase candidates (the kernels must be
    loaded): see :func:`cqa_search.translation.scoring._hull_spans`; ``known`` (bool,
    ``(max_length, n or 1, P)``) marks the windows that can be a phrase of the table,
    ``lengths`` (n,) bounds each row's windows (at most ``P``)."""
    return _kernels.hull_spans(np.ascontiguousarray(A, dtype=np.int64), int(max_length),
                               bool(tight), np.ascontiguousarray(known, dtype=np.bool_),
                               np.ascontiguousarray(lengths, dtype=np.int64))


def distortion(back, S1, S2, BG):
    """The phrase-alignment feature of each row (the kernels must be loaded): see
    :meth:`cqa_search.translation.scoring.TranslationScorer._distortion`."""
    return _kernels.distortion(np.ascontiguousarray(back, dtype=np.int8),
                               np.ascontiguousarray(S1, dtype=np.int64),
                               np.ascontiguousarray(S2, dtype=np.int64),
                               np.ascontiguousarray(BG, dtype=np.bool_))


def forward_table(csc, terms):
    """``(n_distinct, f_map, f_indptr, f_term, f_prob)``: the entries of the columns
    ``terms`` of the CSC matrix ``csc`` grouped by row (the kernels must be loaded); see
    ``_numba_kernels.forward_table``."""
    return _kernels.forward_table(csc.indptr, csc.indices, csc.data,
                                  np.asarray(terms, dtype=np.int64), int(csc.shape[0]))


def scatter_max(out, idx, values) -> None:
    """``np.maximum.at(out, idx, values)`` (the kernels must be loaded; ``out`` float64 or
    int64, changed in place)."""
    _kernels.scatter_max(out, np.asarray(idx, dtype=np.int64), np.asarray(values, dtype=out.dtype))


def align(doc, row, last, count, f_indptr, f_term, f_prob, p_null, n, n_terms):
    """Eq. 9's winners and the word-translation sums of the (candidate, word) pairs, flat
    ``(n * n_terms,)`` each (the kernels must be loaded): see
    :class:`cqa_search.translation.scoring._Pairs`."""
    i64, f64 = np.int64, np.float64
    return _kernels.align(np.asarray(doc, dtype=i64), np.asarray(row, dtype=i64),
                          np.asarray(last, dtype=i64), np.asarray(count, dtype=f64),
                          np.asarray(f_indptr, dtype=i64), np.asarray(f_term, dtype=i64),
                          np.asarray(f_prob, dtype=f64), np.asarray(p_null, dtype=f64),
                          int(n), int(n_terms))


class TokenTable:
    """The state of :func:`number_tokens`: the tokens met so far and their numbers."""

    def __init__(self, size=1 << 12):
        self.slots = np.full(2 * size, -1, dtype=np.int64)
        self.starts = np.zeros(size, dtype=np.int64)
        self.lengths = np.zeros(size, dtype=np.int64)
        self.hashes = np.zeros(size, dtype=np.uint64)
        self.arena = np.zeros(8 * size, dtype=np.uint8)
        self.n_arena = self.n_known = 0

    def __len__(self):
        return self.n_known

    def token(self, number) -> bytes:
        """The bytes of token ``number``."""
        start = self.starts[number]
        return self.arena[start:start + self.lengths[number]].tobytes()

    def grow(self):
        """Twice the room (the kernel found it full)."""
        size = 2 * len(self.starts)
        for name in ("starts", "lengths", "hashes"):
            setattr(self, name, np.resize(getattr(self, name), size))
        if 2 * self.n_arena > len(self.arena) or 8 * size > len(self.arena):
            self.arena = np.resize(self.arena, max(2 * len(self.arena), 8 * size))
        self.slots = _kernels.token_slots(self.hashes, self.n_known, 2 * size)


def number_tokens(table: TokenTable, data: bytes) -> np.ndarray:
    """The number of each token of ``data`` (runs of bytes other than spaces) in
    ``table``, new tokens numbered in the order they first occur; -2 for ``b"\\x01"``
    (the kernels must be loaded). See ``_numba_kernels.number_tokens``."""
    data = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(len(data) // 2 + 1, dtype=np.int64)
    at = n_out = 0
    while True:
        at, n_out, table.n_arena, table.n_known = _kernels.number_tokens(
            data, at, out, n_out, table.slots, table.starts, table.lengths, table.hashes,
            table.arena, table.n_arena, table.n_known)
        if at == len(data):
            return out[:n_out]
        table.grow()


def gelu_bias(h, bias, numerator, denominator, clamp) -> None:
    """``h = GELU(h + bias)`` in place, erf by a rational function (the sentence
    encoder's feed-forward activation, :func:`cqa_search.vectors._bert.gelu_bias`; the
    kernels must be loaded)."""
    _kernels.gelu_bias(h, bias, numerator, denominator, np.float32(clamp))


def add_layer_norm(x, y, bias, gamma, beta, eps) -> None:
    """``x = LayerNorm(x + y + bias)`` in place (the sentence encoder's residual and
    normalisation, :func:`cqa_search.vectors._bert.add_layer_norm`; the kernels must be
    loaded)."""
    _kernels.add_layer_norm(x, y, bias, gamma, beta, float(eps))


def softmax_keys(scores, lengths) -> None:
    """Softmax over each sequence's keys, in place (the sentence encoder's attention,
    :func:`cqa_search.vectors._bert.softmax_keys`; the kernels must be loaded)."""
    _kernels.softmax_keys(scores, np.asarray(lengths, dtype=np.int64))


def _examples():
    top_k = (np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32),
             np.ones(2, dtype=np.float32), np.zeros(1, dtype=np.int64),
             np.ones(1, dtype=np.float32), 1, np.zeros(2), np.full(1, -1.0, dtype=np.float32),
             np.zeros(0, dtype=np.int32), -1, False, np.zeros(0, dtype=bool), False,
             np.zeros(0, dtype=np.int32), False)
    probs = np.full((2, 2, 1), 0.5)
    return {"top_k": top_k,
            "sum_dp": (probs, np.array([2]), np.array([1, 1, 1]), 4),
            "viterbi": (probs, 1, -1e30),
            "locate": top_k[:2] + (np.zeros(1, dtype=np.int64), np.array([1], dtype=np.int64)),
            "align": (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                      np.zeros(1, dtype=np.int64), np.ones(1), np.array([0, 1]),
                      np.zeros(1, dtype=np.int64), np.ones(1), np.zeros(1), 1, 1),
            "number_tokens": (np.frombuffer(b"ab \x01 ab", dtype=np.uint8), 0,
                              np.zeros(3, dtype=np.int64), 0, np.full(8, -1, dtype=np.int64),
                              np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64),
                              np.zeros(4, dtype=np.uint64), np.zeros(16, dtype=np.uint8), 0, 0),
            "token_slots": (np.zeros(1, dtype=np.uint64), 1, 2),
            "bucket_starts": (np.arange(3, dtype=np.int64), 0, 1, 1),
            "forward_table": (np.array([0, 1], dtype=np.int32), np.zeros(1, dtype=np.int32),
                              np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.int64), 1),
            "scatter_max": (np.zeros(1), np.zeros(1, dtype=np.int64), np.ones(1)),
            "gelu_bias": (np.zeros((1, 2), dtype=np.float32), np.zeros(2, dtype=np.float32),
                          np.ones(2, dtype=np.float32), np.ones(2, dtype=np.float32),
                          np.float32(4)),
            "add_layer_norm": (np.zeros((1, 2), dtype=np.float32),
                               np.zeros((1, 2), dtype=np.float32),
                               *[np.zeros(2, dtype=np.float32)] * 3, 1e-12),
            "softmax_keys": (np.zeros((1, 1, 2, 2), dtype=np.float32),
                             np.ones(1, dtype=np.int64)),
            "hull_spans": (np.zeros((1, 2), dtype=np.int64), 2, False,
                           np.ones((2, 1, 2), dtype=np.bool_), np.full(1, 2, dtype=np.int64)),
            "distortion": (np.array([[0, 1]], dtype=np.int8), np.zeros((1, 1, 2), np.int64),
                           np.zeros((1, 1, 2), np.int64), np.zeros((1, 1), dtype=np.bool_)),
            "search_directed": (np.arange(3, dtype=np.int64), np.array([0, 2, 3]), 0, 1,
                                np.ones(2, dtype=np.int64)),
            "quadratic_forms": (np.array([0, 1], dtype=np.int64), np.zeros(1, dtype=np.int64),
                                np.ones(1), np.array([0, 1], dtype=np.int64),
                                np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.float32),
                                np.zeros(1))}
