"""Non-negative matrix factorization of term–question matrices: shared kernels and NMF.

Notation (Zhou et al., 2014, §2)
--------------------------------
The archive is a sparse *term–question* matrix ``D`` of shape ``(n_terms, n_docs)`` (one
column per question, tf-idf weights), the paper's orientation. Its questions fall into
``P`` groups (categories) ``D = [D_1, ..., D_P]`` (columns reordered). Group ``p`` is
approximated by ``D_p ~ [U_s, U_p] V_p`` with

* ``U_s`` (``n_terms x K_s``): shared topics, one column per topic;
* ``U_p`` (``n_terms x K_p``): the topics of category ``p``;
* ``V_p = [H_p; W_p]`` (``(K_s + K_p) x N_p``): the topic coefficients of the questions of
  ``p``, ``H_p`` on the shared topics and ``W_p`` on the category's own.

In scikit-learn's notation ``X ~ W H`` with ``X`` of shape ``(n_docs, n_terms)``, this is
``X = D.T``, ``W = V.T`` and ``H = U.T``: a topic is a column of ``U`` here and a row of
scikit-learn's ``components_``.

Objective (eqs. 1–2), minimised over non-negative factors::

    O = sum_p alpha_p ||D_p - [U_s, U_p] V_p||_F^2
        + sum_p beta ||U_s^T U_p||_F^2 + sum_{p < l} gamma ||U_p^T U_l||_F^2

with ``alpha_p = 1 / ||D_p||_F^2``, ``beta = a / (K_s K_p)`` and ``gamma = a / K_p^2``. Eq. 2
writes the last sum over ordered pairs ``l != p``; the multiplicative updates (4)–(6) (in
the form of MISSION.md) descend the objective in which every pair ``{p, l}`` counts once,
so that is the objective recorded here (the literal eq. 2 doubles the ``gamma`` term).

One *sweep* updates the blocks in turn (Gauss–Seidel, so each step is a
majorise–minimise step that cannot increase ``O``; updating the ``U_p`` simultaneously
can)::

    U_s <- U_s * (sum_p alpha_p D_p H_p^T)
                 / (sum_p alpha_p [U_s,U_p] V_p H_p^T + beta U_p U_p^T U_s)
    U_p <- U_p * (alpha_p D_p W_p^T)
                 / (alpha_p [U_s,U_p] V_p W_p^T + beta U_s U_s^T U_p
                    + gamma sum_{l != p} U_l U_l^T U_p)           for p = 1..P in turn
    V_p <- V_p * ([U_s,U_p]^T D_p) / ([U_s,U_p]^T [U_s,U_p] V_p)  for every p

then rescales the columns of ``U_s`` and ``U_p`` to unit L2 norm, moving the scale into
``V`` so the product is unchanged (this replaces the shrinkage terms of eq. 3: without it
the regularisers are "minimised" by shrinking ``U`` and growing ``V``). Rescaling leaves
the data term unchanged but can raise the regularisers; when full normalisation would
raise ``O`` above its value before the sweep, the step goes only part of the way, the
largest fraction ``t`` (``U <- U diag(s^-t)``, ``s`` the column norms) that keeps ``O``
from increasing (bisection on the closed form of the regularisers in the Gram matrices).
Hence ``loss_curve_`` never increases. With ``a = 0`` (GNMF, CNMF, NMF) the rescaling
never changes ``O`` and is always complete.

The variants are the same kernels with different block sizes: NMF is one group with
``K_s`` topics and no category topics; CNMF has no shared topics (``K_s = 0``) and
``a = 0``; GNMF has both and ``a = 0``; GNMFNC has ``a > 0``.

Costs per sweep (``nnz`` non-zeros of ``D``, ``K = K_s + K_p``): two sparse products of
``nnz * K`` (``D_p V_p^T`` and ``U^T D_p``), ``N K^2`` for the Gram matrices of ``V`` and the
``V`` denominators, and terms in the number of (term, category) pairs for ``U``. ``D`` is
never densified, ``U V`` never formed (the objective comes from the products the updates
compute anyway: ``||D - UV||^2 = ||D||^2 - 2 <U^T D, V> + <U^T U, V V^T>``), and the
category topics are stored on the rows of the terms their category uses (a term absent
from category ``p`` has a zero row in ``U_p`` after any update, as its numerator is zero).

References
----------
Zhou, G., Chen, Y., Zeng, D. and Zhao, J. (2014). Group non-negative matrix factorization
with natural categories for question retrieval in community question answer archives.
COLING, 89–98.

Lee, D. D. and Seung, H. S. (2001). Algorithms for non-negative matrix factorization. NIPS.

Kim, J. and Park, H. (2011). Fast nonnegative matrix factorization: an active-set-like
method and comparisons. SIAM J. Sci. Comput. 33(6), 3261–3281 (block principal pivoting).
"""
from __future__ import annotations

import logging
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from threadpoolctl import threadpool_limits  # a scikit-learn dependency

from .._utils import RANDOM_STATE, Interval, validate_params
from .nnls import nnls_gram

__all__ = ["NMF"]

logger = logging.getLogger(__name__)

# Replaces zero denominators, as scikit-learn's multiplicative updates do.
_EPSILON = np.finfo(np.float32).eps



# ---------------------------------------------------------------------------------------
# The grouped problem and the multiplicative-update kernels
# ---------------------------------------------------------------------------------------
class _Problem:
    """``D`` split by group, in the layouts the kernels read.

    Terms are renumbered to the active ones (non-zero somewhere in ``D``) and, per group
    ``p``, to the terms ``T_p`` the group uses; ``X[p]`` is ``D_p^T`` restricted to
    ``T_p`` (CSR, ``N_p x |T_p|``: question-major, the layout in which both sparse
    products of a sweep run fastest, ``X_p @ U`` directly and ``X_p^T @ V`` through the
    free CSC transpose). Questions are ordered by group (``order``), group
    ``p`` occupying ``bounds[p]:bounds[p + 1]``. ``multi`` are the terms used by at least
    two groups, the only ones where category topics of different groups can overlap;
    ``zrows[p]`` / ``upos[p]`` locate them in the overlap matrix and in ``U_p``.
    """

    def __init__(self, D, labels):
        n_terms, n_docs = D.shape
        self.n_terms, self.n_docs = n_terms, n_docs
        self.groups, inverse = np.unique(labels, return_inverse=True)
        inverse = inverse.ravel()
        self.doc_group = inverse.astype(np.int64)
        self.order = np.argsort(inverse, kind="stable")
        n_groups = len(self.groups)
        self.bounds = np.searchsorted(inverse[self.order], np.arange(n_groups + 1))
        X = sp.csr_matrix(D.T, dtype=np.float64)[self.order]  # questions x terms, by group
        X.sum_duplicates()
        X.eliminate_zeros()
        df = np.bincount(X.indices, minlength=n_terms)
        self.active = np.flatnonzero(df)
        local = np.full(n_terms, -1, dtype=np.int64)
        local[self.active] = np.arange(len(self.active))
        self.n_active = len(self.active)
        self.T, self.X, self.norm2, self.alpha = [], [], np.zeros(n_groups), np.zeros(n_groups)
        uses = np.zeros(self.n_active, dtype=np.int64)
        for p in range(n_groups):
            lo, hi = self.bounds[p], self.bounds[p + 1]
            Xp = X[lo:hi]
            cols = local[Xp.indices]
            Tp = np.unique(cols)
            At = sp.csr_matrix((Xp.data, np.searchsorted(Tp, cols), Xp.indptr),
                               shape=(hi - lo, len(Tp)))
            self.T.append(Tp)
            self.X.append(At)
            uses[Tp] += 1
            self.norm2[p] = float(Xp.data @ Xp.data)
            self.alpha[p] = 1.0 / self.norm2[p] if self.norm2[p] > 0 else 0.0
        self.multi = np.flatnonzero(uses >= 2)
        zpos = np.full(self.n_active, -1, dtype=np.int64)
        zpos[self.multi] = np.arange(len(self.multi))
        self.zrows, self.upos = [], []
        for Tp in self.T:
            where = zpos[Tp]
            self.upos.append(np.flatnonzero(where >= 0))
            self.zrows.append(where[where >= 0])
        self.mean = float(X.data.sum()) / max(self.n_active * n_docs, 1)

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    def rows(self, p):
        return slice(self.bounds[p], self.bounds[p + 1])


class _State:
    """Factors during a fit (questions in group order, terms renumbered to the active)."""

    def __init__(self, Us, Up, Vt, n_shared, n_category, n_groups):
        self.Us, self.Up, self.Vt = Us, Up, Vt
        self.Ks, self.Kp = n_shared, n_category
        # Pending column scales of each group's V (the true V_p^T is Vt_p * sv[p]): the
        # rescaling step records them and the next V update absorbs them, which saves a
        # pass over V.
        self.sv = [np.ones(n_shared + n_category) for _ in range(n_groups)]
        self.C = None      # per group V_p V_p^T
        self.DV = None     # per group D_p V_p^T of the current V (scales absorbed)
        self.Z = None      # category topics on multi-group terms, (n_multi, P K_p)
        self.B = None      # per group U_s^T U_p


def _fix(den):
    if not den.all():          # one pass without a temporary in the usual case
        den[den == 0] = _EPSILON
    return den


def _gram_blocks(st, prob):
    """Per group ``U_s^T U_p`` (``K_s x K_p``), from the rows the group uses."""
    return [st.Us[prob.T[p]].T @ st.Up[p] for p in range(prob.n_groups)]


def _overlap_gram(st):
    """``Z^T Z``: every ``U_p^T U_l`` (only terms of two groups or more can contribute)."""
    return st.Z.T @ st.Z


def _regularisation_terms(st, prob, beta, gamma):
    """Log squared Gram entries of the regularisers and their log-scale exponents.

    ``R(t) = sum_e exp(c_e - 2 t e_e)`` after rescaling the columns of ``U`` by
    ``s^-t`` (``s`` their norms), so the rescaling can be searched without touching the
    factors again (in logs: a nearly dead topic has a tiny norm; each term stays below
    ``max(exp(c_e), weight)`` for ``t`` in [0, 1], the normalised entries being cosines).
    """
    coef, expo = [], []
    ls = np.log(_norms(st.Us))
    lp = [np.log(_norms(u)) for u in st.Up]
    if beta > 0 and st.Ks and st.Kp:
        for p, B in enumerate(st.B):
            coef.append(beta * (B * B).ravel())
            expo.append((ls[:, None] + lp[p][None, :]).ravel())
    if gamma > 0 and st.Z is not None and len(prob.multi):
        G = _overlap_gram(st)
        Kp, P = st.Kp, prob.n_groups
        lall = np.concatenate(lp)
        iu = np.triu_indices(P * Kp)
        block = np.arange(P * Kp) // Kp
        keep = block[iu[0]] < block[iu[1]]  # pairs p < l only
        i, j = iu[0][keep], iu[1][keep]
        coef.append(gamma * G[i, j] ** 2)
        expo.append(lall[i] + lall[j])
    if not coef:
        return np.zeros(0), np.zeros(0)
    coef, expo = np.concatenate(coef), np.concatenate(expo)
    keep = coef > 0
    return np.log(coef[keep]), expo[keep]


def _norms(U):
    n = np.sqrt(np.einsum("ij,ij->j", U, U))
    n[n == 0] = 1.0  # a dead topic stays zero
    return n


def _data_term(st, prob, p, gram, cross):
    """``alpha_p ||D_p - U V_p||^2`` from ``<U^T D_p, V_p>`` and ``<U^T U, V_p V_p^T>``."""
    return prob.alpha[p] * (prob.norm2[p] - 2.0 * cross + float(np.sum(gram * st.C[p])))


def _group_gram(st, prob, p, UsUs):
    Ks = st.Ks
    Usp, Up = st.Us[prob.T[p]], st.Up[p]
    g = np.empty((Ks + st.Kp, Ks + st.Kp))
    g[:Ks, :Ks] = UsUs
    g[:Ks, Ks:] = Usp.T @ Up
    g[Ks:, :Ks] = g[:Ks, Ks:].T
    g[Ks:, Ks:] = Up.T @ Up
    return g


def _apply_scales(st, prob):
    for p in range(prob.n_groups):
        if np.any(st.sv[p] != 1.0):
            st.Vt[prob.rows(p)] *= st.sv[p]
            st.sv[p] = np.ones_like(st.sv[p])


def _objective(st, prob, beta, gamma):
    """The objective from scratch (one sparse product per group); fills ``C`` and ``B``."""
    _apply_scales(st, prob)
    UsUs = st.Us.T @ st.Us
    data = 0.0
    st.C, st.DV = [], []
    for p in range(prob.n_groups):
        Vt = st.Vt[prob.rows(p)]
        st.C.append(Vt.T @ Vt)
        Uloc = np.hstack([st.Us[prob.T[p]], st.Up[p]])
        st.DV.append(prob.X[p].T @ Vt)
        cross = float(np.einsum("ij,ij->", st.DV[p], Uloc))
        data += _data_term(st, prob, p, _group_gram(st, prob, p, UsUs), cross)
    st.B = _gram_blocks(st, prob)
    c, e = _regularisation_terms(st, prob, beta, gamma)
    return data + float(np.sum(np.exp(c - 2.0 * e)))


def _update_shared(st, prob, num_u, beta):
    """Eq. 4: ``U_s``."""
    Ks = st.Ks
    if not Ks:
        return
    weighted = sum(prob.alpha[p] * st.C[p][:Ks, :Ks] for p in range(prob.n_groups))
    den = st.Us @ weighted
    num = np.zeros_like(st.Us)
    for p in range(prob.n_groups):
        Tp = prob.T[p]
        num[Tp] += prob.alpha[p] * num_u[p][:, :Ks]
        if st.Kp:
            coupling = prob.alpha[p] * st.C[p][Ks:, :Ks]
            if beta > 0:
                coupling = coupling + beta * (st.Up[p].T @ st.Us[Tp])
            den[Tp] += st.Up[p] @ coupling
    # U * num / den in this order: num / den alone overflows where an entry of U has
    # decayed to a denormal (den scales with U, num does not).
    st.Us *= num
    st.Us /= _fix(den)


def _update_category(st, prob, num_u, beta, gamma):
    """Eq. 5: every ``U_p``, one group after the other."""
    Ks, Kp = st.Ks, st.Kp
    if not Kp:
        return
    for p in range(prob.n_groups):
        Up, Usp, C, a_p = st.Up[p], st.Us[prob.T[p]], st.C[p], prob.alpha[p]
        den = Up @ (a_p * C[Ks:, Ks:])
        if Ks:
            coupling = a_p * C[:Ks, Ks:]
            if beta > 0:
                coupling = coupling + beta * (Usp.T @ Up)
            den += Usp @ coupling
        if gamma > 0 and len(prob.upos[p]):
            zr, up = prob.zrows[p], prob.upos[p]
            Zp = st.Z[zr]                              # other groups' topics on p's terms
            G = Zp.T @ Up[up]                          # every U_l^T U_p
            G[p * Kp:(p + 1) * Kp] = 0.0               # l != p
            den[up] += gamma * (Zp @ G)
        Up *= a_p * num_u[p][:, Ks:]
        Up /= _fix(den)
        if gamma > 0 and len(prob.upos[p]):
            st.Z[prob.zrows[p], p * Kp:(p + 1) * Kp] = Up[prob.upos[p]]


def _update_coefficients(st, prob):
    """Eq. 6: every ``V_p``; returns the data term at the new point (fills ``C``, ``B``)."""
    UsUs = st.Us.T @ st.Us
    data = 0.0
    st.B = []
    for p in range(prob.n_groups):
        Vt, sv = st.Vt[prob.rows(p)], st.sv[p]        # V_p^T = Vt * sv
        gram = _group_gram(st, prob, p, UsUs)
        st.B.append(gram[:st.Ks, st.Ks:].copy())
        U = np.hstack([st.Us[prob.T[p]], st.Up[p]])
        num = prob.X[p] @ (U * sv)                     # (U^T D_p)^T * sv, N_p x K
        den = _fix(Vt @ (sv[:, None] * gram))          # V_p^T (U^T U)
        Vt *= num
        Vt /= den                                      # the new V_p^T, scales absorbed
        # D_p V_p^T: <U^T D_p, V_p> here (|T_p| x K, not N_p x K) and, times the scales,
        # the numerators of the next sweep's U updates (V does not change before them)
        st.DV[p] = prob.X[p].T @ Vt
        cross = float(np.einsum("ij,ij->", st.DV[p], U))
        st.sv[p] = np.ones_like(sv)
        st.C[p] = Vt.T @ Vt
        data += _data_term(st, prob, p, gram, cross)
    return data


def _rescale(st, prob, data, coef, expo, previous):
    """Move the column norms of ``U`` into ``V``, as far as the objective allows.

    Returns the objective after rescaling and the fraction ``t`` of the way done.
    """
    def objective(t):
        return data + float(np.sum(np.exp(coef - 2.0 * t * expo)))

    t = 1.0
    if len(coef) and objective(1.0) > previous and objective(0.0) <= previous:
        lo, hi = 0.0, 1.0
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            if objective(mid) <= previous:
                lo = mid
            else:
                hi = mid
        t = lo
    Ks, Kp = st.Ks, st.Kp
    f = _norms(st.Us) ** t
    st.Us /= f
    for p in range(prob.n_groups):
        fp = _norms(st.Up[p]) ** t
        st.Up[p] /= fp
        if st.Z is not None:
            st.Z[:, p * Kp:(p + 1) * Kp] /= fp
        ff = np.concatenate([f, fp])
        st.sv[p] *= ff
        st.C[p] *= np.outer(ff, ff)
        if Ks and Kp:
            st.B[p] /= np.outer(f, fp)
    return objective(t), t


def _sweep(st, prob, beta, gamma, previous):
    """One sweep of eqs. 4–6 plus the rescaling; returns (objective, rescaling fraction)."""
    num_u = [st.DV[p] * st.sv[p] for p in range(prob.n_groups)]          # D_p V_p^T
    _update_shared(st, prob, num_u, beta)
    _update_category(st, prob, num_u, beta, gamma)
    data = _update_coefficients(st, prob)
    coef, expo = _regularisation_terms(st, prob, beta, gamma)
    return _rescale(st, prob, data, coef, expo, previous)


# ---------------------------------------------------------------------------------------
# Estimators
# ---------------------------------------------------------------------------------------
def _check_matrix(D, name="D"):
    if not sp.issparse(D):
        D = np.asarray(D, dtype=np.float64)
        if D.ndim != 2:
            raise ValueError(f"{name} must be a 2-d (n_terms, n_docs) matrix; got shape {D.shape}")
        D = sp.csc_matrix(D)
    data = D.data if D.format in ("csr", "csc", "coo") else sp.csc_matrix(D).data
    if data.size and (not np.all(np.isfinite(data)) or data.min() < 0):
        raise ValueError(f"{name} must be non-negative and finite")
    return D


class _GroupFactorization(BaseEstimator):
    """What the NMF variants share: fit by the grouped kernels, fold-in, attributes.

    Attributes
    ----------
    shared_topics_ : ndarray of shape (n_terms, K_s)
        ``U_s`` (unit-norm columns; zero rows for terms absent from ``D``).
    category_topics_ : scipy.sparse.csr_matrix of shape (n_terms, n_groups * K_p)
        ``[U_1, ..., U_P]``; ``U_p`` is non-zero only on the terms its group uses.
    coefficients_ : ndarray of shape (K_s + K_p, n_docs)
        ``V``: column ``j`` is ``[h_j; w_j]``, the question's coefficients on the shared
        topics and on its own group's topics (scikit-learn's ``W`` is its transpose).
    groups_ : ndarray of shape (n_groups,)
        The distinct group labels, sorted.
    doc_group_ : ndarray of int64, shape (n_docs,)
        Index into ``groups_`` of each question.
    loss_curve_ : ndarray of shape (n_iter_,)
        The objective after each sweep (non-increasing).
    initial_loss_ : float
        The objective of the (normalised) initial factors.
    n_iter_ : int
    n_partial_rescalings_ : int
        Sweeps whose normalisation stopped short to keep the objective from increasing.
    """

    # Subclasses set these from their parameters.
    def _sizes(self):  # -> (n_shared, n_category, a)
        raise NotImplementedError

    def _fit(self, D, labels, Us0=None, Ucat0=None, V0=None, callback=None):
        validate_params(self)
        D = _check_matrix(D)
        n_terms, n_docs = D.shape
        labels = np.asarray(labels)
        if labels.shape != (n_docs,):
            raise ValueError(f"groups must have one label per question (column of D): "
                             f"expected shape ({n_docs},); got {labels.shape}")
        if n_docs == 0 or D.nnz == 0:
            raise ValueError("D has no non-zero entry: nothing to factorize")
        Ks, Kp, a = self._sizes()
        if self.init == "custom" and V0 is None:
            raise ValueError("init='custom' needs the initial factors passed to fit")
        if self.init != "custom" and any(x is not None for x in (Us0, Ucat0, V0)):
            raise ValueError("initial factors are only read with init='custom'")
        # The dense products are small (K x K Grams, a few hundred columns at most) and
        # come by the thousand: multi-threaded BLAS made a sweep 2-4x slower here.
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit_single_thread(D, labels, Ks, Kp, a, Us0, Ucat0, V0, callback)

    def _fit_single_thread(self, D, labels, Ks, Kp, a, Us0, Ucat0, V0, callback):
        n_docs = D.shape[1]
        prob = _Problem(D, labels)
        P, K = prob.n_groups, Ks + Kp
        beta = a / (Ks * Kp) if Ks and Kp else 0.0
        gamma = a / (Kp * Kp) if Kp and P > 1 else 0.0
        if self.init == "custom":
            Us, Up, Vt = self._custom_init(prob, Ks, Kp, Us0, Ucat0, V0)
        else:
            rng = np.random.default_rng(self.random_state)
            scale = np.sqrt(prob.mean / K)
            Us = np.abs(rng.standard_normal((prob.n_active, Ks))) * scale
            Up = [np.abs(rng.standard_normal((len(Tp), Kp))) * scale for Tp in prob.T]
            Vt = np.abs(rng.standard_normal((n_docs, K))) * scale
        st = _State(Us, Up, Vt, Ks, Kp, P)
        if gamma > 0:
            st.Z = np.zeros((len(prob.multi), P * Kp))
            for p in range(P):
                st.Z[prob.zrows[p], p * Kp:(p + 1) * Kp] = Up[p][prob.upos[p]]
        st.C = [None] * P
        # Start from unit-norm topics (the product, hence the data term, is unchanged).
        _objective(st, prob, beta, gamma)
        _rescale(st, prob, 0.0, np.zeros(0), np.zeros(0), np.inf)
        previous = self.initial_loss_ = _objective(st, prob, beta, gamma)
        curve, partial = [], 0
        converged = False
        for it in range(1, self.max_iter + 1):
            loss, t = _sweep(st, prob, beta, gamma, previous)
            if not np.isfinite(loss):
                raise FloatingPointError(f"{type(self).__name__}: the objective became "
                                         f"{loss} at iteration {it}")
            partial += t < 1.0
            curve.append(loss)
            if callback is not None:
                callback(it, loss)
            logger.debug("iteration %d: objective %.6g", it, loss)
            improvement = (previous - loss) / previous if previous > 0 else 0.0
            previous = loss
            if self.tol > 0 and improvement < self.tol:
                converged = True
                break
        if not converged and self.tol > 0:
            warnings.warn(f"{type(self).__name__} stopped at max_iter={self.max_iter} before "
                          f"the relative improvement fell below tol={self.tol}; increase "
                          "max_iter or tol", ConvergenceWarning, stacklevel=4)
        self._store(st, prob)
        self.loss_curve_ = np.asarray(curve)
        self.n_iter_ = len(curve)
        self.n_partial_rescalings_ = int(partial)
        logger.info("%s: %d iterations, objective %.6g -> %.6g", type(self).__name__,
                    self.n_iter_, self.initial_loss_, curve[-1])
        return self

    def _custom_init(self, prob, Ks, Kp, Us0, Ucat0, V0):
        n_terms, n_docs, P = prob.n_terms, prob.n_docs, prob.n_groups

        def dense(x, shape, name):
            x = x.toarray() if sp.issparse(x) else np.array(x, dtype=np.float64)
            if x.shape != shape:
                raise ValueError(f"{name} must have shape {shape}; got {x.shape}")
            if not np.all(np.isfinite(x)) or x.min(initial=0) < 0:
                raise ValueError(f"{name} must be non-negative and finite")
            return x.astype(np.float64)

        V = dense(V0, (Ks + Kp, n_docs), "V")
        Us = dense(Us0, (n_terms, Ks), "U_shared")[prob.active] if Ks else \
            np.zeros((prob.n_active, 0))
        if Kp:
            if Ucat0 is None or Ucat0.shape != (n_terms, P * Kp):
                raise ValueError(f"U_category must have shape {(n_terms, P * Kp)}")
            Ucat = Ucat0.tocsr() if sp.issparse(Ucat0) else np.asarray(Ucat0, dtype=np.float64)
            Up = [dense(Ucat[prob.active[Tp]][:, p * Kp:(p + 1) * Kp], (len(Tp), Kp),
                        "U_category") for p, Tp in enumerate(prob.T)]
        else:
            Up = [np.zeros((len(Tp), 0)) for Tp in prob.T]
        return Us, Up, np.ascontiguousarray(V.T[prob.order])

    def _store(self, st, prob):
        _apply_scales(st, prob)
        Ks, Kp, P = st.Ks, st.Kp, prob.n_groups
        self.shared_topics_ = np.zeros((prob.n_terms, Ks))
        self.shared_topics_[prob.active] = st.Us
        rows = np.concatenate([np.repeat(prob.active[Tp], Kp) for Tp in prob.T])
        cols = np.concatenate([np.tile(np.arange(p * Kp, (p + 1) * Kp), len(Tp))
                               for p, Tp in enumerate(prob.T)])
        data = np.concatenate([u.ravel() for u in st.Up])
        self.category_topics_ = sp.csr_matrix((data, (rows, cols)),
                                              shape=(prob.n_terms, P * Kp))
        V = np.empty((Ks + Kp, prob.n_docs))
        V[:, prob.order] = st.Vt.T
        self.coefficients_ = V
        self.groups_ = prob.groups
        self.doc_group_ = prob.doc_group

    # -- folding in ------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "coefficients_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def group_grams(self):
        """``[U_s, U_p]^T [U_s, U_p]`` of every group: ndarray (n_groups, K, K)."""
        self._check_fitted()
        return _topic_grams(self.shared_topics_, self.category_topics_, len(self.groups_))

    def _projections(self, D):
        """``[U_s, U_p]^T d`` of every column for every group: (n_groups, K, n)."""
        Q = sp.csr_matrix(_check_matrix(D).T)
        return _projections(Q, self.shared_topics_, self.category_topics_, len(self.groups_))

    def fold_in(self, D, groups=None):
        """Topic coefficients of new questions (eq. 12), by non-negative least squares.

        ``v = argmin_{v >= 0} ||d - [U_s, U_p] v||^2`` for each column ``d`` of ``D``, with
        ``p`` its group (given, or the one that reconstructs it best when ``groups`` is
        None, see :meth:`infer_groups`).

        Parameters
        ----------
        D : sparse matrix of shape (n_terms, n)
            Term–question matrix of the new questions, weighted like the training one.
        groups : array-like of shape (n,), optional
            Group labels (values of ``groups_``).

        Returns
        -------
        V : ndarray of shape (K_s + K_p, n)
        """
        self._check_fitted()
        D = _check_matrix(D)
        if D.shape[0] != self.shared_topics_.shape[0]:
            raise ValueError(f"D must have {self.shared_topics_.shape[0]} rows (terms); "
                             f"got {D.shape[0]}")
        proj = self._projections(D)
        grams = self.group_grams()
        if groups is None:
            index = _best_groups(grams, proj)[0]
        else:
            index = self._group_index(groups, D.shape[1])
        return _fold(grams, proj, index)

    def infer_groups(self, D):
        """The group whose topics reconstruct each column of ``D`` best (least residual).

        Returns
        -------
        groups : ndarray of shape (n,)
            Labels from ``groups_``.
        """
        self._check_fitted()
        return self.groups_[_best_groups(self.group_grams(), self._projections(D))[0]]

    def _group_index(self, groups, n):
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"groups must have shape ({n},); got {groups.shape}")
        index = np.searchsorted(self.groups_, groups)
        index = np.minimum(index, len(self.groups_) - 1)
        if not np.all(self.groups_[index] == groups):
            bad = groups[self.groups_[index] != groups][0]
            raise ValueError(f"unknown group {bad.item()!r}; the model has groups "
                             f"{self.groups_.tolist()}")
        return index


def _topic_grams(Us, Ucat, n_groups):
    Ks = Us.shape[1]
    Kp = Ucat.shape[1] // max(n_groups, 1)
    Ucat = sp.csc_matrix(Ucat)
    cross = np.asarray((Ucat.T @ Us).T) if Ks else np.zeros((0, Ucat.shape[1]))  # Ks x P Kp
    UsUs = Us.T @ Us
    out = np.zeros((n_groups, Ks + Kp, Ks + Kp))
    for p in range(n_groups):
        block = Ucat[:, p * Kp:(p + 1) * Kp]
        out[p, :Ks, :Ks] = UsUs
        out[p, :Ks, Ks:] = cross[:, p * Kp:(p + 1) * Kp]
        out[p, Ks:, :Ks] = out[p, :Ks, Ks:].T
        out[p, Ks:, Ks:] = (block.T @ block).toarray()
    return out


def _projections(Q, Us, Ucat, n_groups):
    """``[U_s, U_p]^T q`` for every row ``q`` of ``Q`` (n x n_terms) and every group."""
    Ks = Us.shape[1]
    Kp = Ucat.shape[1] // max(n_groups, 1)
    n = Q.shape[0]
    shared = np.asarray(Q @ Us)                                      # n x Ks
    cat = (Q @ Ucat).toarray() if Kp else np.zeros((n, 0))           # n x P Kp
    out = np.empty((n_groups, Ks + Kp, n))
    out[:, :Ks, :] = shared.T[None]
    for p in range(n_groups):
        out[p, Ks:, :] = cat[:, p * Kp:(p + 1) * Kp].T
    return out


def _fold(grams, proj, index):
    """NNLS coefficients of each column in its group ``index``: (K, n)."""
    n = proj.shape[2]
    rhs = proj[index, :, np.arange(n)].T
    return nnls_gram(grams, rhs, which=index)


def _best_groups(grams, proj):
    """Group of least reconstruction error for each column, and the fits ``b^T v``.

    At the NNLS optimum ``v^T (G v - b) = 0``, so ``||q - U v||^2 = ||q||^2 - b^T v``: the
    best group maximises ``b^T v``.
    """
    P, K, n = proj.shape
    rhs = proj.transpose(1, 0, 2).reshape(K, P * n)          # column p * n + j
    v = nnls_gram(grams, rhs, which=np.repeat(np.arange(P), n))
    fit = np.einsum("kn,kn->n", rhs, v).reshape(P, n)
    return np.argmax(fit, axis=0), fit


class NMF(_GroupFactorization):
    """Non-negative matrix factorization ``D ~ U V`` by multiplicative updates.

    Minimises ``||D - U V||_F^2 / ||D||_F^2`` (Lee and Seung, 2001) with the kernels of
    the group models (one group, no category topics); the columns of ``U`` are rescaled
    to unit norm after each sweep, which leaves the product and the objective unchanged.

    ``D`` is the term–question matrix ``(n_terms, n_docs)``: scikit-learn's ``X`` is
    ``D.T``, its ``W`` is ``V_.T`` and its ``H`` (``components_``) is ``U_.T``.

    Parameters
    ----------
    n_components : int, default 28
        Number of topics ``K``.
    init : {"random", "custom"}, default "random"
        ``"random"``: absolute values of Gaussian draws scaled to the data (like
        scikit-learn's); ``"custom"``: the ``U`` and ``V`` passed to :meth:`fit`.
    max_iter : int, default 100
    tol : float, default 1e-4
        Stop when the objective's relative improvement over a sweep falls below ``tol``.
    random_state : None, int or numpy Generator

    Attributes
    ----------
    U_ : ndarray of shape (n_terms, n_components)
        Topics (unit-norm columns).
    V_ : ndarray of shape (n_components, n_docs)
        Coefficients of the training questions.
    loss_curve_, initial_loss_, n_iter_ : see :class:`_GroupFactorization`
        (``loss_curve_[i]`` is the relative squared error after sweep ``i + 1``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> D = rng.random((30, 3)) @ rng.random((3, 40))
    >>> model = NMF(3, max_iter=500, tol=0, random_state=0).fit(D)
    >>> bool(model.loss_curve_[-1] < 1e-3)
    True
    """

    _parameter_constraints = {
        "n_components": Interval(1, None, kind=numbers.Integral),
        "init": ("random", "custom"),
        "max_iter": Interval(1, None, kind=numbers.Integral),
        "tol": Interval(0, None),
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components=28, *, init="random", max_iter=100, tol=1e-4,
                 random_state=None):
        self.n_components = n_components
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _sizes(self):
        return self.n_components, 0, 0.0

    def fit(self, D, y=None, *, U=None, V=None, callback=None):
        """Factorize ``D``.

        Parameters
        ----------
        D : sparse matrix or ndarray of shape (n_terms, n_docs)
            Non-negative.
        y : ignored
        U : ndarray of shape (n_terms, n_components), optional
            Initial topics (``init="custom"``).
        V : ndarray of shape (n_components, n_docs), optional
            Initial coefficients (``init="custom"``).
        callback : callable, optional
            ``callback(iteration, objective)`` after each sweep (e.g. a progress bar).

        Returns
        -------
        self
        """
        D = _check_matrix(D)
        return self._fit(D, np.zeros(D.shape[1], dtype=np.int64), U, None, V, callback)

    @property
    def U_(self):
        self._check_fitted()
        return self.shared_topics_

    @property
    def V_(self):
        self._check_fitted()
        return self.coefficients_

    @property
    def components_(self):
        """scikit-learn's ``H``: ``U_.T``."""
        return self.U_.T

    def transform(self, D):
        """Fold new questions in: ``V`` of shape (n_components, n) (see :meth:`fold_in`)."""
        D = _check_matrix(D)
        return self.fold_in(D, np.zeros(D.shape[1], dtype=np.int64))
