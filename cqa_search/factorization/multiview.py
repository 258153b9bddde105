"""SMT + MF: translation-enriched NMF, every view coupled to the original language.

Zhou, Liu, Liu, He and Zhao (2013), "Statistical Machine Translation Improves Question
Retrieval in Community Question Answering via Matrix Factorization", §2. Each question
has P views: its original text (view 1) and translations of it (views 2..P, see
:mod:`cqa_search.factorization.views`). View p is a tf-idf term x question matrix
``D_p`` (``M_p x N``) factorized as ``U_p V_p`` with ``U_p >= 0`` (``M_p x K``) and
``V_p >= 0`` (``K x N``); the question factors of each translation are pulled towards
those of the original, which smooths out translation noise and sparsity (eqs. 1-4)::

    O = sum_p ||D_p - U_p V_p||_F^2 + lambda_1 ||V_1||_F^2
        + sum_{p >= 2} lambda_p ||V_p - V_1||_F^2

Here, as in scikit-learn, questions are rows: ``X_p = D_p^T`` has shape
``(n_docs, n_features_p)``, ``components_[p] = U_p^T`` has shape
``(n_components, n_features_p)`` and ``doc_factors_[p] = V_p^T`` has shape
``(n_docs, n_components)``.

Optimization (Algorithms 1-3): alternating least squares; a sweep updates every ``U_p``
(eq. 7), then ``V_1``, then every ``V_p`` (eq. 14), each with the others fixed.
Non-negativity is enforced *inside* each least-squares block: the block is a
non-negative least-squares problem sharing one Gram matrix, solved by a pass of exact
coordinate descent over its K coordinates (hierarchical ALS, Cichocki & Phan 2009) from
the current value. Each coordinate step is the exact minimiser of O along that
coordinate, clipped at 0, so O never increases, and when no bound is active repeated
passes converge to the closed forms of eqs. 7, 14 and 15. The ``V_1`` block minimises O
itself, coupling terms included: ``(U_1^T U_1 + (lambda_1 + sum_p lambda_p) I) v =
U_1^T d + sum_p lambda_p v_p``, which is eq. 15 when P = 1 (eq. 15 drops the coupling
terms, and with them the guarantee that O decreases). As in the paper, only the
question factors are regularised, so O has no minimiser in the strict sense: scaling
``U_p`` up and every ``V_p`` down by the same factor keeps the products and lowers the
penalties. The factors' scale therefore drifts slowly as the sweeps go on, which the
stopping rule (``tol``) bounds; the cosine features do not depend on it. The objective
is recorded after
every sweep (``loss_curve_``); it is computed from the Gram matrices the updates need,
``||X - W H||^2 = ||X||^2 - 2 <X H^T, W> + <H H^T, W^T W>``, never densifying ``X``.

Queries are folded in by eq. 17, ``v_q1 = argmin_{v >= 0} ||q_1 - U_1 v||^2 + lambda_1
||v||^2``, then eq. 19, ``v_qp = argmin_{v >= 0} ||q_p - U_p v||^2 + lambda_p ||v -
v_q1||^2``, solved exactly (non-negative least squares on the K x K Gram system). The
features are the cosines ``s(q_p, d_p)`` of eq. 18 between ``v_qp`` and the question's
factors, one per view; with VSM they are combined linearly by the ranker (eq. 20).
"""
from __future__ import annotations

import copy
import logging
import numbers
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._utils import RANDOM_STATE, Interval, progress_bar, validate_params
from ..exceptions import IndexFormatError, ParameterError
from ..features import analyze
from ..index.validate import INT32_MAX, check_array, check_count
from .dictd import DEFAULT_DICT_DIR
from .._blas import one_blas_thread
from .nnls import GramFactor, nnls_gram
from .views import (DummyTranslator, SourceBags, Translator, ViewEncoder, build_view,
                    find_translation_table, make_translator, parse_views)

__all__ = ["MultiViewNMF", "MultiViewModel", "MultiViewScorer"]

logger = logging.getLogger(__name__)

# Rows per block of the coordinate-descent pass: a block of factors (rows x K) stays in
# cache while its K coordinates are updated (1024 was fastest for K = 100 here).
_CHUNK = 1024


# ---------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------
def _cd_pass(X, G, B, chunk=_CHUNK) -> None:
    """One pass of exact coordinate descent on ``min_{X >= 0} sum_i x_i^T G x_i / 2 - b_i^T x_i``.

    ``X`` (n, K) is updated in place, coordinate k of every row at once:
    ``x_ik <- max(0, x_ik + (b_ik - x_i^T g_k) / g_kk)``. ``G`` (K, K) is symmetric
    positive semi-definite and ``B`` is (n, K). Coordinates with ``g_kk = 0`` do not
    change the objective and are left as they are.
    """
    diag = np.diag(G).copy()
    active = np.flatnonzero(diag > 0)
    for start in range(0, X.shape[0], chunk):
        Xc = X[start:start + chunk]
        Bc = B[start:start + chunk]
        for k in active:
            col = Xc[:, k]
            step = Bc[:, k] - Xc @ G[k]
            step /= diag[k]
            step += col
            np.maximum(step, 0.0, out=step)
            Xc[:, k] = step


def _fold_in(components, lambdas, Xs, grams=None) -> list:
    """Eqs. 17 and 19 for the rows of ``Xs`` (one matrix per view)."""
    grams = grams if grams is not None else _fold_grams(components, lambdas)
    out = []
    for p, (H, X) in enumerate(zip(components, Xs)):
        X = sp.csr_matrix(X, dtype=np.float64)
        cols = np.unique(X.indices)  # a query touches a few columns of U_p only
        B = np.asarray(X[:, cols] @ np.asarray(H[:, cols], dtype=np.float64).T)
        if p > 0:
            B = B + lambdas[p] * out[0]
        out.append(nnls_gram(grams[p], B.T).T)
    return out


def _fold_grams(components, lambdas) -> list:
    """``U_p^T U_p + lambda_p I`` of every view (the systems of eqs. 17 and 19)."""
    out = []
    for H, lam in zip(components, lambdas):
        H = np.asarray(H, dtype=np.float64)
        out.append(H @ H.T + lam * np.eye(H.shape[0]))
    return out


def _init_factors(Xs, K, rng):
    """Random non-negative ``(U_p, W_p)`` at scikit-learn's NMF scale ``sqrt(mean(X_1) / K)``.

    ``V_1`` is random and every ``V_p`` starts as a copy of it (the coupling's target).
    """
    N, M = Xs[0].shape
    scale = np.sqrt(max(Xs[0].sum() / max(N * M, 1), 1e-12) / K)
    W1 = scale * np.abs(rng.standard_normal((N, K)))
    Ws = [W1] + [W1.copy() for _ in range(len(Xs) - 1)]
    Us = [scale * np.abs(rng.standard_normal((X.shape[1], K))) for X in Xs]
    return Us, Ws


def _check_views(Xs, name="Xs") -> list:
    if isinstance(Xs, (np.ndarray, sp.spmatrix, sp.sparray)) or not hasattr(Xs, "__len__") \
            or len(Xs) == 0:
        raise ValueError(f"{name} must be a non-empty list of matrices (one per view)")
    out = []
    for p, X in enumerate(Xs):
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"{name}[{p}] must be 2-D")
        if X.nnz and (not np.isfinite(X.data).all() or X.data.min() < 0):
            raise ValueError(f"{name}[{p}] must be non-negative and finite")
        if out and X.shape[0] != out[0].shape[0]:
            raise ValueError(f"every view must have the same number of rows (questions); "
                             f"{name}[0] has {out[0].shape[0]}, {name}[{p}] has {X.shape[0]}")
        out.append(X)
    return out


def _lambdas(lambda1, lambdap, n_views) -> np.ndarray:
    """``[lambda_1, lambda_2, ..., lambda_P]`` from a scalar or per-view ``lambdap``."""
    if isinstance(lambdap, numbers.Real) and not isinstance(lambdap, bool):
        rest = [float(lambdap)] * (n_views - 1)
    else:
        rest = [float(v) for v in lambdap]
        if len(rest) != n_views - 1:
            raise ParameterError(f"lambdap must be a number or one number per translated view "
                             f"({n_views - 1}); got {len(rest)} values")
    lam = np.array([float(lambda1), *rest])
    if not np.isfinite(lam).all() or (lam[1:] < 0).any():
        raise ParameterError(f"lambdap must be non-negative; got {lambdap!r}")
    return lam


class _SequenceOf:
    """Constraint alternative: any list or tuple (its values are checked by :func:`_lambdas`)."""

    def check(self, value):
        return isinstance(value, (list, tuple))

    def describe(self):
        return "a list of numbers (one per translated view)"


_CONSTRAINTS = {
    "n_components": Interval(1, None, kind=numbers.Integral),
    "lambda1": Interval(0, None, closed="neither"),
    "lambdap": [Interval(0, None), _SequenceOf()],
    "max_iter": Interval(1, None, kind=numbers.Integral),
    "tol": Interval(0, None),
    "random_state": RANDOM_STATE,
}


# ---------------------------------------------------------------------------------------
# The factorization
# ---------------------------------------------------------------------------------------
class MultiViewNMF(BaseEstimator):
    """Multi-view NMF coupled to view 1 (SMT + MF, Zhou et al. 2013, eqs. 3-15).

    Parameters
    ----------
    n_components : int, default 100
        K, the number of latent dimensions shared by the views (paper: 100).
    lambda1 : float, default 1.0
        Ridge weight on the original view's question factors (paper: 1); > 0, which
        also makes the fold-in of eq. 17 well posed.
    lambdap : float or sequence of float, default 0.25
        Coupling weight of each translated view to view 1 (paper: 0.25), one number for
        all or one per translated view.
    max_iter : int, default 100
        Maximum number of ALS sweeps.
    tol : float, default 1e-4
        Stop when a sweep lowers the objective by less than ``tol`` times its value.
    random_state : None, int or numpy.random.Generator
        Seed of the random initialisation (same seed, same bits).

    Attributes
    ----------
    components_ : list of ndarray of shape (n_components, n_features_p)
        ``U_p^T``: the latent dimensions over each view's words.
    doc_factors_ : list of ndarray of shape (n_docs, n_components)
        ``V_p^T``: the training questions in each view.
    lambdas_ : ndarray of shape (n_views,)
        ``[lambda_1, lambda_2, ..., lambda_P]``.
    loss_curve_ : list of float
        Objective O after each sweep (non-increasing).
    n_iter_ : int
        Sweeps run.
    n_views_ : int
    n_features_ : list of int
    timings_ : dict
        Seconds spent: ``setup`` (initialisation), ``sweeps`` (wall time, one per sweep)
        and ``sweeps_cpu`` (CPU time of the process, one per sweep).

    References
    ----------
    G. Zhou, F. Liu, Y. Liu, S. He, J. Zhao. Statistical Machine Translation Improves
    Question Retrieval in Community Question Answering via Matrix Factorization. ACL 2013.
    A. Cichocki, A.-H. Phan. Fast local algorithms for large scale nonnegative matrix and
    tensor factorizations. IEICE Trans. 2009 (coordinate-wise non-negative ALS).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X1 = rng.random((30, 12)); X2 = X1 @ rng.random((12, 8))
    >>> nmf = MultiViewNMF(n_components=3, tol=1e-3, random_state=0).fit([X1, X2])
    >>> [H.shape for H in nmf.components_], nmf.doc_factors_[1].shape
    ([(3, 12), (3, 8)], (30, 3))
    >>> bool(np.all(np.diff(nmf.loss_curve_) <= 1e-9 * nmf.loss_curve_[0]))
    True
    """

    _parameter_constraints = _CONSTRAINTS

    def __init__(self, n_components=100, *, lambda1=1.0, lambdap=0.25, max_iter=100, tol=1e-4,
                 random_state=None):
        self.n_components = n_components
        self.lambda1 = lambda1
        self.lambdap = lambdap
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, Xs, y=None, *, progress=False) -> "MultiViewNMF":
        """Factorize the views.

        Parameters
        ----------
        Xs : list of {array-like, sparse matrix} of shape (n_docs, n_features_p)
            One non-negative matrix per view (view 1 first), questions as rows.
        y : ignored
        progress : bool, default False
            Show a progress bar of the sweeps on stderr.

        Returns
        -------
        self
        """
        validate_params(self)
        Xs = _check_views(Xs)
        lam = _lambdas(self.lambda1, self.lambdap, len(Xs))
        Us, Ws, losses, converged = self._als(Xs, lam, progress)
        self.components_ = [np.ascontiguousarray(U.T) for U in Us]
        self.doc_factors_ = Ws
        self.lambdas_ = lam
        self.loss_curve_ = losses
        self.n_iter_ = len(losses)
        self.n_views_ = len(Xs)
        self.n_features_ = [X.shape[1] for X in Xs]
        if not converged:
            warnings.warn(f"MultiViewNMF: maximum number of iterations ({self.max_iter}) "
                          "reached before convergence; increase max_iter", ConvergenceWarning)
        return self

    def fit_transform(self, Xs, y=None, *, progress=False) -> list:
        """Fit and return ``doc_factors_`` (the training questions' factors)."""
        return self.fit(Xs, progress=progress).doc_factors_

    def transform(self, Xs) -> list:
        """Fold new questions in (eqs. 17 and 19): their factors in every view.

        With one view, folding the training questions in gives their fitted factors
        (at convergence); with more views the fitted ``V_1`` also feels the coupling
        terms, so the two differ.

        Parameters
        ----------
        Xs : list of {array-like, sparse matrix} of shape (n, n_features_p)

        Returns
        -------
        list of ndarray of shape (n, n_components)
        """
        check_is_fitted(self, "components_")
        Xs = _check_views(Xs)
        if len(Xs) != self.n_views_ or [X.shape[1] for X in Xs] != self.n_features_:
            raise ValueError(f"Xs must have {self.n_views_} views with "
                             f"{self.n_features_} features; got "
                             f"{[X.shape[1] for X in Xs]}")
        return _fold_in(self.components_, self.lambdas_, Xs)

    # -- the sweeps ------------------------------------------------------------------
    def _als(self, Xs, lam, progress):
        P, K = len(Xs), self.n_components
        t_setup = time.perf_counter()
        sq = [float(X.data @ X.data) for X in Xs]
        Us, Ws = _init_factors(Xs, K, np.random.default_rng(self.random_state))
        Fs = [W.T @ W for W in Ws]
        self.timings_ = {"setup": time.perf_counter() - t_setup, "sweeps": [], "sweeps_cpu": []}
        eye = np.eye(K)
        losses, converged = [], False
        bar = progress_bar(progress, "ALS sweeps", "sweeps", self.max_iter)
        for it in range(self.max_iter):
            t0, c0 = time.perf_counter(), time.process_time()
            for p in range(P):  # eq. 7: U_p given V_p; X^T as CSC reads V_p row by row
                _cd_pass(Us[p], Fs[p], np.asarray(Xs[p].T @ Ws[p]))
            data = np.zeros(P)
            for p in range(P):  # V_1 first: the translated views are pulled towards it
                U, W = Us[p], Ws[p]
                G = U.T @ U
                B = np.asarray(Xs[p] @ U)
                if p == 0:
                    rhs = B.copy()
                    for r in range(1, P):
                        rhs += lam[r] * Ws[r]
                    _cd_pass(W, G + lam.sum() * eye, rhs)
                else:  # eq. 14
                    rhs = B + lam[p] * Ws[0]
                    _cd_pass(W, G + lam[p] * eye, rhs)
                del rhs
                Fs[p] = W.T @ W
                data[p] = sq[p] - 2.0 * np.vdot(B, W) + np.vdot(G, Fs[p])
                del B
            loss = data.sum() + lam[0] * np.trace(Fs[0])
            for p in range(1, P):
                loss += lam[p] * (np.trace(Fs[p]) + np.trace(Fs[0]) - 2.0 * np.vdot(Ws[p], Ws[0]))
            losses.append(float(loss))
            self.timings_["sweeps"].append(time.perf_counter() - t0)
            self.timings_["sweeps_cpu"].append(time.process_time() - c0)
            logger.debug("sweep %d: objective %.6g (%.2f s)", it + 1, loss,
                         self.timings_["sweeps"][-1])
            bar.update()
            bar.set_postfix(objective=f"{loss:.5g}", refresh=False)
            if it > 0 and losses[-2] - loss <= self.tol * abs(losses[-2]):
                converged = True
                break
        bar.close()
        logger.info("SMT + MF: %d views, %d sweeps, objective %.6g", P, len(losses), losses[-1])
        return Us, Ws, losses, converged


# ---------------------------------------------------------------------------------------
# The model stored in an index
# ---------------------------------------------------------------------------------------
class MultiViewModel(BaseEstimator):
    """SMT + MF over an index: its views, their factorization and the ``mv_*`` features.

    Fit with :meth:`fit` (the views are made from the ``views`` specifications, or given
    as translators), store with :func:`cqa_search.index.models.add_model`. The features,
    one per view, are named ``<feature_prefix>_<view>`` (``mv_orig``, ``mv_fra``,
    ``mv_ibm1``, ...): the cosine of eq. 18 between the folded-in query (eqs. 17 and 19)
    and the question's factors.

    Parameters
    ----------
    views : str, default "ibm1"
        Translated views 2..P, comma-separated: ``dict:LANG`` (the FreeDict
        English-LANG dictionary in ``dict_dir``), ``ibm1`` (the IBM Model 1 table of the
        index's stored translation model), ``archive:LANG`` (the archive's
        ``"translations": {LANG: text}``), ``dummy`` (a copy of the original: the DT
        ablation); empty for the original view only (VSM + MF). ``ibm1`` was the most
        useful view on SemEval-2016 (BENCHMARKS.md).
    dict_dir : str, default "/usr/share/dictd"
        Where ``dict:LANG`` dictionaries are (Debian's dict-freedict-eng-LANG packages).
    n_translations : int, default 3
        Translations kept per word by the dictionary and IBM Model 1 views.
    translation_model : str or None, default None
        The stored model whose IBM Model 1 table the ``ibm1`` view uses (None: the only
        one).
    n_components : int, default 100
        Latent dimensions K (the paper's 100).
    lambda1 : float, default 1.0
        Ridge weight of the original view's question factors.
    lambdap : float or sequence of float, default 0.25
        Coupling weight of each translated view to the original (one number for all).
    max_iter : int, default 100
        ALS sweeps, at most.
    tol : float, default 1e-4
        Stop when a sweep improves the objective by less than this fraction.
    random_state : None or int, default 0
        Seed of the initialisation: seeded by default, so that two fits of one index
        give the same model (None: a random start).
    min_df : int, default 1
        Words of a view found in fewer questions are left out of that view.
    feature_prefix : str, default "mv"
        Prefix of the feature names (to store two such models in one index).

    Attributes
    ----------
    view_names_ : list of str
        ``"orig"`` then the translators' names.
    encoders_ : list of ViewEncoder
        How questions and queries become tf-idf vectors in each view.
    n_components_ : int
        K used: ``n_components``, or fewer when the views have fewer questions or words
        (no more components than the views' rank).
    components_ : list of ndarray of float32, shape (n_components_, n_features_p)
    doc_factors_ : list of ndarray of float32, shape (n_docs, n_components_)
        The archived questions in each view (stored in float32).
    lambdas_, loss_curve_, n_iter_ : as :class:`MultiViewNMF`
    fit_seconds_ : float
        Time of the factorization (views excluded).
    inputs_ : tuple of str
        The stored model whose table the ``ibm1`` view read (none without that view):
        ``cqa-search info`` calls this model stale once that one is fitted again (not
        stored: :func:`~cqa_search.index.models.add_model` records it).

    Examples
    --------
    >>> import tempfile, os
    >>> from cqa_search import Question, build_index, SearchEngine
    >>> qs = [Question(str(i), t) for i, t in enumerate(
    ...     ["renew visa", "visa renewal office", "cheap sofa", "buy a sofa", "visa fees"])]
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index(qs, out)
    >>> view = SearchEngine.open(out).view
    >>> model = MultiViewModel(views="dummy", n_components=2, tol=1e-3).fit(view)
    >>> model.feature_names
    ('mv_orig', 'mv_dummy')
    """

    kind = "multiview"
    _parameter_constraints = {**_CONSTRAINTS, "min_df": Interval(1, None, kind=numbers.Integral),
                              "n_translations": Interval(1, None, kind=numbers.Integral)}

    def __init__(self, views="ibm1", *, dict_dir=DEFAULT_DICT_DIR, n_translations=3,
                 translation_model=None, n_components=100, lambda1=1.0, lambdap=0.25,
                 max_iter=100, tol=1e-4, random_state=0, min_df=1, feature_prefix="mv"):
        self.views = views
        self.dict_dir = dict_dir
        self.n_translations = n_translations
        self.translation_model = translation_model
        self.n_components = n_components
        self.lambda1 = lambda1
        self.lambdap = lambdap
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.min_df = min_df
        self.feature_prefix = feature_prefix

    @property
    def feature_names(self) -> tuple:
        check_is_fitted(self, "view_names_")
        return tuple(f"{self.feature_prefix}_{name}" for name in self.view_names_)

    @property
    def row_arrays(self) -> tuple:
        """The state arrays with one row per question (see :mod:`cqa_search.index.models`):
        the question factors of every view."""
        check_is_fitted(self, "view_names_")
        return tuple(f"view{p}_doc_factors" for p in range(len(self.view_names_)))

    def _translators(self, view) -> list:
        """The translators of the ``views`` specifications (``ibm1`` reads the table of a
        translation model stored in the index: ``view.models``)."""
        specs = parse_views(self.views)
        table, read = None, []
        if "ibm1" in specs:
            table = find_translation_table(view.models, self.translation_model,
                                           n_terms=len(view.index.vocab), found=read)
        self.inputs_ = tuple(read)  # the stored model read (stale once it is fitted again)
        return [make_translator(s, dict_dir=self.dict_dir, n_translations=self.n_translations,
                                translation_probs=table) for s in specs]

    def fit(self, view, y=None, *, translators=None, progress=False) -> "MultiViewModel":
        """Build the views of the archive and factorize them.

        Parameters
        ----------
        view : IndexView
            The index (its question field is view 1; its stored models give the ``ibm1``
            view its table).
        y : ignored
        translators : sequence of Translator, optional
            Views 2..P made in Python, instead of the ``views`` specifications.
        progress : bool, default False
            Progress bars on stderr.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad parameters, an unknown view, ``ibm1`` without a stored translation
            model, two views with the same name, an empty view.
        FileNotFoundError
            Missing dictionary directory or dictionary (naming the package to install).
        """
        validate_params(self)
        if not isinstance(self.feature_prefix, str) or not self.feature_prefix:
            raise ParameterError(f"feature_prefix must be a non-empty string; got "
                             f"{self.feature_prefix!r}")
        translators = self._translators(view) if translators is None else list(translators)
        for t in translators:
            if not isinstance(t, Translator):
                raise ValueError(f"translators must be Translator objects; got {t!r}")
        names = ["orig"] + [t.name for t in translators]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ParameterError(f"two views are named {dup[0]!r} (view 1 is 'orig'); give "
                             "them distinct names")
        lam = _lambdas(self.lambda1, self.lambdap, len(names))
        bags = SourceBags(view, progress=progress)
        Xs, encoders = [], []
        for t in [DummyTranslator(name="orig")] + translators:
            X, enc = build_view(t, view, min_df=self.min_df, bags=bags)
            logger.info("view %s: %d words, %d entries", enc.name, X.shape[1], X.nnz)
            Xs.append(X)
            encoders.append(enc)
        del bags
        # Components beyond the views' rank (more than there are questions, or words in a
        # view) are directions no question needs: nothing bounds their factors, which grew
        # past float32's range on a 20-question archive with K = 100.
        self.n_components_ = min(self.n_components, *(min(X.shape) for X in Xs))
        if self.n_components_ < self.n_components:
            logger.info("n_components %d capped at %d (the rank of the views)",
                        self.n_components, self.n_components_)
        t0 = time.perf_counter()
        nmf = MultiViewNMF(self.n_components_, lambda1=self.lambda1, lambdap=self.lambdap,
                           max_iter=self.max_iter, tol=self.tol,
                           random_state=self.random_state)
        nmf.fit(Xs, progress=progress)
        self.fit_seconds_ = time.perf_counter() - t0
        self.view_names_ = names
        self.encoders_ = encoders
        self.components_ = [H.astype(np.float32) for H in nmf.components_]
        self.doc_factors_ = [W.astype(np.float32) for W in nmf.doc_factors_]
        self.lambdas_ = lam
        self.loss_curve_ = nmf.loss_curve_
        self.n_iter_ = nmf.n_iter_
        self._grams = self._solvers = None
        return self

    def describe(self) -> str:
        """What the fit did, for ``cqa-search fit``."""
        check_is_fitted(self, "components_")
        views = ", ".join(f"{n} ({e.n_features:,} words)"
                          for n, e in zip(self.view_names_, self.encoders_))
        converged = self.n_iter_ < self.max_iter
        lines = [f"views      {views}",
                 f"features   {', '.join(self.feature_names)}",
                 f"K          {self.n_components_}"
                 + ("" if self.n_components_ == self.n_components else
                    f" (n_components {self.n_components} capped: at most one per question "
                    "and per word of a view)")
                 + f", lambda1 {self.lambda1:g}, lambdap {self.lambdap}",
                 f"sweeps     {self.n_iter_} ({'converged' if converged else 'max-iter reached'})"
                 f", objective {self.loss_curve_[-1]:.6g}"]
        if hasattr(self, "fit_seconds_"):
            lines.append(f"time       {self.fit_seconds_:.1f} s (factorization)")
        return "\n".join(lines)

    def _fold_systems(self):
        if getattr(self, "_grams", None) is None:
            self._grams = _fold_grams(self.components_, self.lambdas_)
        return self._grams

    def _query_solvers(self):
        """One :class:`GramFactor` per view (single right-hand sides), cached."""
        if getattr(self, "_solvers", None) is None:
            self._solvers = [GramFactor(g) for g in self._fold_systems()]
        return self._solvers

    def transform_query(self, query, view) -> list:
        """The query's factors in every view (eqs. 17 and 19): a list of (n_components,).

        Parameters
        ----------
        query : AnalyzedQuery
        view : IndexView
        """
        check_is_fitted(self, "components_")
        n_terms = len(view.index.vocab)
        out = []
        for p, (enc, H, solver) in enumerate(zip(self.encoders_, self.components_,
                                                 self._query_solvers())):
            x = enc.encode_query(query, view.analyzer, n_terms)
            b = np.asarray(H[:, x.indices], dtype=np.float64) @ x.data   # U_p^T q_p
            if p > 0:
                b += self.lambdas_[p] * out[0]
            out.append(solver.solve(b))
        return out

    def scorer(self, view) -> "MultiViewScorer":
        """The ``mv_*`` features of candidates (a :class:`FeatureScorer`)."""
        return MultiViewScorer(self, view)

    def _new_rows(self, view):
        """Factors, in every view, of the questions the index gained since the fit, folded
        in as queries are (eqs. 17 and 19): a list of (n_new, n_components), or None."""
        check_is_fitted(self, "components_")
        n_fit, n_docs = self.doc_factors_[0].shape[0], view.n_docs
        if n_docs < n_fit:
            raise IndexFormatError(f"this multiview model covers {n_fit} questions but the "
                                   f"index has only {n_docs}: fit it again")
        if n_docs == n_fit:
            return None
        logger.info("folding in %d questions added since the multiview model was fitted",
                    n_docs - n_fit)
        queries = [analyze(view.index, view.analyzer, view.archive[row].text)
                   for row in range(n_fit, n_docs)]
        xs = [sp.vstack([enc.encode_query(q, view.analyzer, None) for q in queries])
              for enc in self.encoders_]
        return _fold_in(self.components_, self.lambdas_, xs, self._fold_systems())

    def select_rows(self, view, rows) -> "MultiViewModel":
        """A copy whose question factors are those of ``rows`` of ``view``, in that order
        (questions added since the fit folded in first): what a compaction stores."""
        new = self._new_rows(view)
        model = copy.copy(self)
        model.doc_factors_ = [
            np.ascontiguousarray((W if new is None else np.vstack(
                [W, np.asarray(n, dtype=np.float32)]))[np.asarray(rows)])
            for W, n in zip(self.doc_factors_, new or [None] * len(self.doc_factors_))]
        return model

    # -- storage ---------------------------------------------------------------------
    def state(self):
        """``(meta, arrays)`` of the learned state (see :mod:`cqa_search.features`)."""
        check_is_fitted(self, "components_")
        meta = {"view_names": list(self.view_names_), "n_components": int(self.n_components_),
                "lambdas": self.lambdas_.tolist(),
                "loss_curve": list(self.loss_curve_), "n_iter": int(self.n_iter_),
                "fit_seconds": float(getattr(self, "fit_seconds_", 0.0)), "views": []}
        arrays = {}
        for p, (enc, H, W) in enumerate(zip(self.encoders_, self.components_, self.doc_factors_)):
            m, a = enc.state(f"view{p}_")
            meta["views"].append(m)
            arrays.update(a)
            arrays[f"view{p}_components"] = np.asarray(H, dtype=np.float32)
            arrays[f"view{p}_doc_factors"] = np.asarray(W, dtype=np.float32)
        return meta, arrays

    @classmethod
    def from_state(cls, params, meta, arrays) -> "MultiViewModel":
        """The inverse of :meth:`state` (arrays may be memory-mapped)."""
        model = cls(**params)
        names = list(meta["view_names"])
        if len(meta["views"]) != len(names):
            raise ValueError("multiview model: view metadata does not match its views")
        model.view_names_ = names
        model.encoders_ = [ViewEncoder.from_state(m, arrays, f"view{p}_")
                           for p, m in enumerate(meta["views"])]
        model.components_ = [check_array(arrays[f"view{p}_components"], f"view {p} components",
                                         kind="f", ndim=2, finite=True)
                              for p in range(len(names))]
        model.doc_factors_ = [check_array(arrays[f"view{p}_doc_factors"], f"view {p} factors",
                                          kind="f", ndim=2, finite=True)
                              for p in range(len(names))]
        model.n_components_ = check_count(meta.get("n_components", model.n_components),
                                          "multiview n_components", low=1, high=INT32_MAX)
        model.lambdas_ = check_array(np.asarray(meta["lambdas"], dtype=np.float64),
                                     "multiview lambdas", kind="f", shape=(len(names),),
                                     low=0.0, finite=True)
        model.loss_curve_ = list(meta["loss_curve"])
        model.n_iter_ = check_count(meta["n_iter"], "multiview n_iter")
        model.fit_seconds_ = float(meta.get("fit_seconds", 0.0))
        for p, (enc, H, W) in enumerate(zip(model.encoders_, model.components_,
                                            model.doc_factors_)):
            if H.shape != (model.n_components_, enc.n_features) or W.shape[1] != H.shape[0] \
                    or W.shape[0] != model.doc_factors_[0].shape[0]:
                raise ValueError(f"multiview model: the arrays of view {names[p]!r} have "
                                 "inconsistent shapes")
        model._grams = model._solvers = None
        return model


class MultiViewScorer:
    """Cosine of eq. 18 per view between the folded-in query and each candidate.

    The query is folded in once (kept in ``query.cache``); only the candidates' rows of
    the question factors are read. A query or question without words in a view scores 0
    there.
    """

    def __init__(self, model, view):
        self.model = model
        self.view = view
        self.names = model.feature_names
        new = model._new_rows(view)  # questions added since the fit, folded in once
        self._doc_factors = [np.asarray(W) for W in model.doc_factors_] if new is None else [
            np.vstack([W, np.asarray(n, dtype=np.float32)])
            for W, n in zip(model.doc_factors_, new)]

    def score(self, query, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        key = ("multiview", id(self.model))
        out = np.zeros((len(rows), len(self.names)))
        with one_blas_thread():
            vq = query.cache.get(key)
            if vq is None:
                vq = query.cache[key] = self.model.transform_query(query, self.view)
            if len(rows) == 0:
                return out
            for p, (W, v) in enumerate(zip(self._doc_factors, vq)):
                D = np.asarray(W[rows], dtype=np.float64)
                den = np.linalg.norm(D, axis=1) * np.linalg.norm(v)
                num = D @ v
                out[:, p] = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        return out
