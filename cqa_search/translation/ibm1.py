"""IBM Model 1 (Brown et al., 1993) word translation probabilities, trained by EM.

Notation (as NLTK's ``nltk.translate.ibm1``): a pair translates a *source* sentence
``s_1..s_l`` into a *target* sentence ``t_1..t_m``; ``s_0`` is the NULL word. The model is

    P(t_1..t_m | s) = prod_j 1/(l+1) sum_{i=0..l} p(t_j | s_i)

(the length term ``P(m | l)`` is left out: it does not depend on the parameters).

EM, from uniform ``p(t|s) = 1 / |target vocabulary|``:

- E-step: for every target word, the posterior of its alignment to source position i is
  ``p(t_j|s_i) / sum_i' p(t_j|s_i')``; the expected counts ``c(t|s)`` add them up.
- M-step: ``p(t|s) = c(t|s) / sum_t' c(t'|s)``.

Each iteration never lowers the log-likelihood ``sum log P(t|s)``, recorded in
``log_likelihood_`` (entry k: after k iterations).

Implementation. The table's non-zeros are exactly the co-occurring (source, target) word
pairs plus (NULL, target) for every target word. Once per fit, every *cell* (a distinct
target word of a pair x a source position of that pair, NULL included) is mapped to its
table entry, and the cells are sorted by table entry (one packed ``np.sort``). An
iteration then needs no search at all: ``p`` of the cells is ``np.repeat(data, run
lengths)`` (sequential), the per-target-word denominators are one ``np.bincount``, and
the expected counts one ``np.add.reduceat`` (sequential). Repeated target words of a pair
are one cell row weighted by their count.

After EM, probabilities below ``min_prob`` are pruned (each row keeps at least its largest
entry) and every row is renormalised to sum to 1; rows of words never seen as a source get
``p(s|s) = 1`` (a word with no evidence translates to itself). The result is
``translation_probs_``, a CSR matrix of shape ``(n_terms + 1, n_terms)`` whose row 0 is the
NULL word and row ``1 + s`` the source term ``s``.
"""
from __future__ import annotations

import contextvars
import copy
import logging
import numbers
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from .. import _utils
from .._utils import Interval, validate_params
from ..exceptions import ConvergenceWarning, NotFittedError
from ..index.validate import INT32_MAX, check_array, check_count, check_sparse
from ._arrays import _bits, csr_lookup, group, offsets_from_lengths, segment_ids
from .corpus import ParallelCorpus

__all__ = ["IBMModel1"]

logger = logging.getLogger(__name__)

# Cells processed at once (bounds the temporaries of an EM pass to ~100 MB).
_CHUNK = 1 << 23

#: Makes the EM workspace of a corpus: this module's in-process one by default;
#: :func:`cqa_search.distributed.fitting.ray_fits` sets one whose E-step runs as Ray
#: tasks over shards of the pairs (the same kernels, counts summed per iteration).
WORKSPACE = contextvars.ContextVar("ibm1_workspace", default=None)


def _as_corpus(X) -> ParallelCorpus:
    if isinstance(X, ParallelCorpus) or hasattr(X, "workspace"):
        return X  # (a corpus held elsewhere makes its own workspace)
    try:
        return ParallelCorpus.from_pairs(X)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"X must be a ParallelCorpus or a sequence of (source_ids, "
                        f"target_ids) pairs; got {type(X).__name__} ({exc})") from None


class _TargetSegments:
    """Distinct target words of every pair (a *segment*) and its cells.

    A segment is one distinct target term of one pair, with its multiplicity; its cells
    are NULL followed by each source position of the pair.
    """

    def __init__(self, corpus: ParallelCorpus):
        V = corpus.n_terms
        tgt_pair = segment_ids(corpus.target_offsets)
        keys, self.token_segment, mult = group(tgt_pair * V + corpus.target,
                                               max(corpus.n_pairs, 1) * V)
        self.pair = keys // V
        self.term = keys % V
        self.multiplicity = mult.astype(np.float64)
        self.n_cells = corpus.source_lengths[self.pair] + 1
        self.cell_offsets = offsets_from_lengths(self.n_cells)
        # every source sentence preceded by NULL (row 0), as table rows (1 + term id)
        so = corpus.source_offsets
        self.source_null = np.zeros(len(corpus.source) + corpus.n_pairs, dtype=np.int64)
        starts = so[:-1] + np.arange(corpus.n_pairs)
        self.source_null[np.arange(len(corpus.source)) + np.repeat(
            np.arange(1, corpus.n_pairs + 1), np.diff(so))] = corpus.source.astype(np.int64) + 1
        self.block_start = starts[self.pair]

    def __len__(self):
        return len(self.pair)

    def chunks(self, size=_CHUNK):
        """Segment ranges ``(g0, g1)`` of about ``size`` cells each."""
        total = int(self.cell_offsets[-1])
        bounds = np.searchsorted(self.cell_offsets, np.arange(size, total, size))
        bounds = np.unique(np.concatenate([[0], bounds, [len(self)]]))
        return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))

    def cells(self, g0, g1):
        """Cells of segments ``g0:g1``: (segment, source row of the table, local position)."""
        n = self.n_cells[g0:g1]
        seg = np.repeat(np.arange(g0, g1, dtype=np.int64), n)
        local = np.arange(self.cell_offsets[g0], self.cell_offsets[g1]) - np.repeat(
            self.cell_offsets[g0:g1], n)
        row = self.source_null[np.repeat(self.block_start[g0:g1], n) + local]
        return seg, row, local - 1


class _Workspace:
    """Cells sorted by table entry: the structure every EM iteration reuses."""

    def __init__(self, corpus: ParallelCorpus):
        V = corpus.n_terms
        segs = _TargetSegments(corpus)
        n_seg, n_cells = len(segs), int(segs.cell_offsets[-1])
        key_bound = (V + 1) * V
        sbits = _bits(n_seg)
        if _bits(key_bound) + sbits <= 63:
            # packed = (row * V + term) << sbits | segment, with term and segment constant
            # per segment: one repeat of (term << sbits | segment) and one gather of rows
            per_segment = (segs.term << sbits) | np.arange(n_seg, dtype=np.int64)
            shift = segs.block_start - segs.cell_offsets[:-1]
            packed = np.empty(n_cells, dtype=np.int64)
            for g0, g1 in segs.chunks():
                c0, c1 = int(segs.cell_offsets[g0]), int(segs.cell_offsets[g1])
                n = segs.n_cells[g0:g1]
                out = packed[c0:c1]
                np.take(segs.source_null, np.arange(c0, c1) + np.repeat(shift[g0:g1], n),
                        out=out)
                out *= V << sbits
                out += np.repeat(per_segment[g0:g1], n)
            packed.sort()
            self.cell_segment = (packed & ((1 << sbits) - 1)).astype(np.int32 if n_seg < 2**31
                                                                      else np.int64)
            packed >>= sbits
            keys = packed
        else:  # vocabulary x segments too large to pack: slower lexsort
            seg, row, _ = segs.cells(0, n_seg)
            keys = row * V + segs.term[seg]
            order = np.lexsort((seg, keys))
            keys, self.cell_segment = keys[order], seg[order]
        flags = np.empty(n_cells, dtype=bool)
        flags[:1] = True
        np.not_equal(keys[1:], keys[:-1], out=flags[1:])
        starts = np.flatnonzero(flags)
        entry_keys = keys[starts]
        del keys, flags
        self.run_offsets = np.append(starts, n_cells).astype(np.int64)
        self.run_lengths = np.diff(self.run_offsets)
        self.entry_row = (entry_keys // V).astype(np.int64)
        self.entry_col = (entry_keys % V).astype(np.int32)
        self.n_terms = V
        self.n_segments = n_seg
        self.n_cells = n_cells
        self.multiplicity = segs.multiplicity
        # sum over target tokens of log(l + 1): the uniform alignment prior of the likelihood
        self.log_prior = float(segs.multiplicity @ np.log(segs.n_cells))
        self.n_target_vocab = int(np.count_nonzero(np.bincount(segs.term, minlength=V)))
        self.n_tokens = int(segs.multiplicity.sum())
        # entry ranges of about _CHUNK cells, aligned on entry boundaries
        bounds = np.searchsorted(self.run_offsets, np.arange(0, n_cells, _CHUNK))
        self.entry_chunks = [(int(a), int(b)) for a, b in
                             zip(bounds, np.append(bounds[1:], len(entry_keys))) if b > a]

    @property
    def nnz(self):
        return len(self.entry_row)

    def likelihood(self, data) -> float:
        """The E-step's first half: log-likelihood of the corpus under the table values
        ``data`` (one per entry); keeps the alignment denominators for :meth:`counts`."""
        self._denom = self.denominators(data)
        return self.log_likelihood(self._denom)

    def counts(self, data) -> np.ndarray:
        """The E-step's second half: expected counts of every entry (after
        :meth:`likelihood` on the same ``data``)."""
        return self.expected_counts(data, self._denom)

    def denominators(self, data):
        """sum_i p(t|s_i) over the cells of every segment."""
        denom = np.zeros(self.n_segments)
        for e0, e1 in self.entry_chunks:
            c0, c1 = self.run_offsets[e0], self.run_offsets[e1]
            p = np.repeat(data[e0:e1], self.run_lengths[e0:e1])
            denom += np.bincount(self.cell_segment[c0:c1], weights=p,
                                 minlength=self.n_segments)
        return np.maximum(denom, np.finfo(np.float64).tiny)

    def log_likelihood(self, denom) -> float:
        return float(self.multiplicity @ np.log(denom)) - self.log_prior

    def expected_counts(self, data, denom):
        scale = self.multiplicity / denom
        counts = np.empty(self.nnz)
        for e0, e1 in self.entry_chunks:
            c0, c1 = self.run_offsets[e0], self.run_offsets[e1]
            w = np.repeat(data[e0:e1], self.run_lengths[e0:e1])
            w *= scale[self.cell_segment[c0:c1]]
            counts[e0:e1] = np.add.reduceat(w, self.run_offsets[e0:e1] - c0)
        return counts

    def normalise(self, counts):
        totals = np.bincount(self.entry_row, weights=counts, minlength=self.n_terms + 1)
        return counts / totals[self.entry_row]


def _prune(indptr, indices, data, n_terms, min_prob):
    """Drop entries below ``min_prob`` (keeping each row's largest), renormalise rows,
    and give rows without entries ``p(s|s) = 1``."""
    n_rows = len(indptr) - 1
    row = segment_ids(indptr)
    keep = data >= min_prob
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    if len(nonempty):
        row_max = np.maximum.reduceat(data, indptr[nonempty])
        best = np.zeros(n_rows)
        best[nonempty] = row_max
        keep |= data >= best[row]
    row, indices, data = row[keep], indices[keep], data[keep]
    empty = np.flatnonzero(np.bincount(row, minlength=n_rows)[1:] == 0) + 1
    row = np.concatenate([row, empty])
    indices = np.concatenate([indices, empty - 1])
    data = np.concatenate([data, np.ones(len(empty))])
    totals = np.bincount(row, weights=data, minlength=n_rows)
    data = data / totals[row]
    order = np.lexsort((indices, row)) if len(empty) else np.arange(len(row))
    matrix = sp.csr_matrix((data[order].astype(np.float32), indices[order].astype(np.int32),
                            offsets_from_lengths(np.bincount(row, minlength=n_rows))),
                           shape=(n_rows, n_terms))
    return matrix, len(empty)


class IBMModel1(BaseEstimator):
    """IBM Model 1 word translation probabilities ``p(target | source)`` with a NULL word.

    Parameters
    ----------
    max_iter : int, default 10
        Maximum number of EM iterations.
    tol : float or None, default 1e-3
        Stop when an iteration raises the log-likelihood by less than ``tol`` times its
        absolute value; None runs exactly ``max_iter`` iterations (and never warns).
    min_prob : float, default 1e-3
        Probabilities below it are pruned after training (0 keeps every entry); each row
        keeps at least its largest entry and is renormalised to sum to 1.

    Attributes
    ----------
    translation_probs_ : scipy.sparse.csr_matrix of float32, shape (n_terms + 1, n_terms)
        ``translation_probs_[0, t] = p(t | NULL)`` and ``translation_probs_[1 + s, t] =
        p(t | s)``; every row sums to 1 (to float32 precision).
    log_likelihood_ : list of float
        Log-likelihood of the training corpus (natural log, without the length term) of
        the initial model and after each iteration; it never decreases.
    n_iter_ : int
        EM iterations run.
    n_terms_ : int
    n_identity_rows_ : int
        Source terms never seen in the corpus (given ``p(s|s) = 1``).
    timings_ : dict
        Seconds spent: ``setup`` (cell structure), ``iterations`` (one per iteration),
        ``prune``.

    Examples
    --------
    The toy bitext of NLTK's documentation (German target, English source):

    >>> from cqa_search.translation import ParallelCorpus
    >>> words = "klein ist das haus groß ja buch ein the house is small big book a".split()
    >>> ids = {w: i for i, w in enumerate(words)}
    >>> bitext = [("klein ist das haus", "the house is small"),
    ...           ("das haus ist ja groß", "the house is big"),
    ...           ("das buch ist ja klein", "the book is small"),
    ...           ("das haus", "the house"), ("das buch", "the book"), ("ein buch", "a book")]
    >>> corpus = ParallelCorpus.from_pairs(
    ...     [([ids[w] for w in e.split()], [ids[w] for w in g.split()]) for g, e in bitext])
    >>> model = IBMModel1(max_iter=5, tol=None, min_prob=0).fit(corpus)
    >>> p = model.translation_probs_
    >>> round(float(p[1 + ids["book"], ids["buch"]]), 3), round(float(p[0, ids["ja"]]), 3)
    (0.889, 0.073)
    """

    kind = "ibm1"
    _parameter_constraints = {
        "max_iter": Interval(1, None, kind=numbers.Integral),
        "tol": [(None,), Interval(0, None)],
        "min_prob": Interval(0, 1, closed="left"),
    }

    def __init__(self, *, max_iter=10, tol=1e-3, min_prob=1e-3):
        self.max_iter = max_iter
        self.tol = tol
        self.min_prob = min_prob

    # -- training --------------------------------------------------------------------
    def fit(self, X, y=None, *, progress_bar=False):
        """Learn ``p(target | source)`` from a parallel corpus.

        Parameters
        ----------
        X : ParallelCorpus or sequence of (source_ids, target_ids)
            Or a corpus held elsewhere, which makes its own EM workspace
            (:class:`cqa_search.distributed.fitting.ShardedCorpus`: the parts of a sharded
            index's corpus in its shards' Ray tasks).
        y : ignored
        progress_bar : bool, default False
            Show the iterations on stderr.

        Returns
        -------
        self
        """
        validate_params(self)
        corpus = _as_corpus(X)
        held = not isinstance(corpus, ParallelCorpus)
        if not held and (corpus.n_pairs == 0 or len(corpus.target) == 0):
            raise ValueError("cannot fit IBMModel1 on a corpus without target words")
        t0 = time.perf_counter()
        ws = corpus.workspace() if held else (WORKSPACE.get() or _Workspace)(corpus)
        if ws.n_tokens == 0:
            raise ValueError("cannot fit IBMModel1 on a corpus without target words")
        setup = time.perf_counter() - t0
        logger.info("IBM1: %d pairs, %d cells, %d table entries (setup %.1f s)",
                    corpus.n_pairs, ws.n_cells, ws.nnz, setup)
        data = np.full(ws.nnz, 1.0 / ws.n_target_vocab)
        lls, times, converged = [], [], False
        bar = _utils.progress_bar(progress_bar, "IBM Model 1 EM", "iterations", self.max_iter,
                                  leave=False)
        for it in range(self.max_iter + 1):
            t1 = time.perf_counter()
            lls.append(ws.likelihood(data))
            if it > 0:
                gain = lls[-1] - lls[-2]
                logger.info("IBM1 iteration %d: log-likelihood %.6g (per target word %.4f)",
                            it, lls[-1], lls[-1] / ws.n_tokens)
                bar.set_postfix_str(f"log-lik/word {lls[-1] / ws.n_tokens:.4f}")
                if self.tol is not None and gain <= self.tol * abs(lls[-2]):
                    converged = True
                    break
            if it == self.max_iter:
                break
            data = ws.normalise(ws.counts(data))
            times.append(time.perf_counter() - t1)
            bar.update()
        bar.close()
        if self.tol is not None and not converged:
            warnings.warn(f"IBMModel1 did not converge in max_iter={self.max_iter} iterations "
                          f"(tol={self.tol}); increase max_iter or tol", ConvergenceWarning)
        t2 = time.perf_counter()
        final_ll = t2 - t1
        indptr = offsets_from_lengths(np.bincount(ws.entry_row, minlength=ws.n_terms + 1))
        self.translation_probs_, self.n_identity_rows_ = _prune(
            indptr, ws.entry_col, data, ws.n_terms, self.min_prob)
        self.log_likelihood_ = lls
        self.n_iter_ = len(lls) - 1
        self.n_terms_ = corpus.n_terms
        self.n_target_vocab_ = ws.n_target_vocab
        self.n_cooccurrences_ = ws.nnz
        self.timings_ = {"setup": setup, "iterations": times, "final_likelihood": final_ll,
                         "prune": time.perf_counter() - t2}
        return self

    def _check_fitted(self):
        if not hasattr(self, "translation_probs_"):
            raise NotFittedError("this IBMModel1 is not fitted yet; call fit first")

    # -- using the table -----------------------------------------------------------------
    def prob(self, source_ids, target_ids) -> np.ndarray:
        """``p(target | source)`` for arrays of term ids (source -1 is NULL)."""
        self._check_fitted()
        return csr_lookup(self.translation_probs_, np.asarray(source_ids, np.int64) + 1,
                          target_ids)

    def align(self, X):
        """Viterbi alignment of every target word (zhou2011 eq. 9).

        ``a_j = argmax_i p(t_j | s_i)`` over the source positions and NULL; ties go to the
        last source position and a source word beats NULL on a tie (as NLTK's
        ``IBMModel1.align``); a target word no source word can produce is aligned to NULL.

        Parameters
        ----------
        X : ParallelCorpus or sequence of (source_ids, target_ids)

        Returns
        -------
        positions : ndarray of int32, shape (n_target_tokens,)
            Source position (within the pair) of each target word, -1 for NULL.
        probs : ndarray of float64, shape (n_target_tokens,)
            ``p(t_j | s_{a_j})`` (``p(t_j | NULL)`` for NULL).
        """
        self._check_fitted()
        corpus = _as_corpus(X)
        if corpus.n_terms > self.n_terms_:
            raise ValueError(f"the corpus has {corpus.n_terms} terms; this model knows "
                             f"{self.n_terms_}")
        segs = _TargetSegments(corpus)
        best_pos = np.full(len(segs), -1, dtype=np.int32)
        best_p = np.zeros(len(segs))
        for g0, g1 in segs.chunks(1 << 22):
            seg, row, pos = segs.cells(g0, g1)
            vals = csr_lookup(self.translation_probs_, row, segs.term[seg])
            starts = segs.cell_offsets[g0:g1] - segs.cell_offsets[g0]
            top = np.maximum.reduceat(vals, starts)
            winner = np.where((vals == top[seg - g0]) & (vals > 0) & (pos >= 0), pos, -1)
            best_pos[g0:g1] = np.maximum.reduceat(winner, starts)
            best_p[g0:g1] = top
        return best_pos[segs.token_segment], best_p[segs.token_segment]

    def extended(self, n_terms) -> "IBMModel1":
        """The model over a vocabulary grown to ``n_terms`` terms: a new term, seen in no
        training pair, translates to itself (``p(s|s) = 1``), as the fit treats every
        term it never saw as a source."""
        self._check_fitted()
        n = self.n_terms_
        if n_terms == n:
            return self
        m = self.translation_probs_
        new = np.arange(n, n_terms, dtype=np.int64)
        indptr = np.concatenate([m.indptr.astype(np.int64),
                                 m.indptr[-1] + 1 + np.arange(len(new), dtype=np.int64)])
        table = sp.csr_matrix((np.concatenate([m.data, np.ones(len(new), m.data.dtype)]),
                               np.concatenate([m.indices, new.astype(m.indices.dtype)]), indptr),
                              shape=(n_terms + 1, n_terms))
        model = copy.copy(self)
        model.translation_probs_, model.n_terms_ = table, n_terms
        model.n_identity_rows_ = self.n_identity_rows_ + len(new)
        return model

    # -- storage ---------------------------------------------------------------------------
    def state(self):
        """(meta, arrays) for :func:`cqa_search.engine.add_model`."""
        self._check_fitted()
        m = self.translation_probs_
        meta = {"n_terms": int(self.n_terms_),
                "log_likelihood": list(map(float, self.log_likelihood_)),
                "n_iter": int(self.n_iter_), "n_identity_rows": int(self.n_identity_rows_),
                "n_target_vocab": int(self.n_target_vocab_),
                "n_cooccurrences": int(self.n_cooccurrences_), "timings": self.timings_}
        return meta, {"indptr": m.indptr.astype(np.int64), "indices": m.indices.astype(np.int32),
                      "data": m.data.astype(np.float32)}

    @classmethod
    def from_state(cls, params, meta, arrays):
        """The fitted model stored by :meth:`state`."""
        model = cls(**params)
        n = check_count(meta["n_terms"], "ibm1 n_terms", high=INT32_MAX - 1)
        check_sparse(arrays["indptr"], arrays["indices"], arrays["data"], (n + 1, n),
                     "ibm1 table")
        check_array(arrays["data"], "ibm1 probabilities", kind="f", low=0.0, high=1.0 + 1e-5)
        model.translation_probs_ = sp.csr_matrix(
            (arrays["data"], arrays["indices"], arrays["indptr"]), shape=(n + 1, n))
        model.n_terms_ = n
        model.log_likelihood_ = list(meta["log_likelihood"])
        model.n_iter_ = check_count(meta["n_iter"], "ibm1 n_iter")
        model.n_identity_rows_ = check_count(meta["n_identity_rows"], "ibm1 n_identity_rows",
                                             high=n + 1)
        model.n_target_vocab_ = check_count(meta["n_target_vocab"], "ibm1 n_target_vocab",
                                            high=n)
        model.n_cooccurrences_ = check_count(meta["n_cooccurrences"], "ibm1 n_cooccurrences",
                                             high=(n + 1) * n)
        model.timings_ = dict(meta.get("timings", {}))
        return model
