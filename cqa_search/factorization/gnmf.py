"""Group NMF with natural categories (Zhou et al., 2014): CNMF, GNMF and GNMFNC.

The questions of the archive fall into categories; ``D_p`` (``n_terms x N_p``) is the
term–question matrix of category ``p``. The three models share the kernels of
:mod:`cqa_search.factorization.nmf` (see its docstring for the objective, the update
equations, the normalisation and the mapping to scikit-learn's ``X ~ W H``):

* :class:`CNMF`: one NMF per category, ``D_p ~ U_p V_p``, no shared topics;
* :class:`GNMF`: ``D_p ~ [U_s, U_p] V_p`` with shared topics ``U_s`` and category topics
  ``U_p``, no orthogonality terms (Lee and Choi, 2009; Wang et al., 2012);
* :class:`GNMFNC`: GNMF plus the regularisers ``beta ||U_s^T U_p||^2`` and
  ``gamma ||U_p^T U_l||^2`` that keep category topics apart from the shared ones and from
  each other (eqs. 1–6), ``beta = a / (K_s K_p)``, ``gamma = a / K_p^2``.

Groups are the distinct values of the label array passed to ``fit``; questions without a
category (label ``-1`` in an index) are simply one more group, with topics of its own.
"""
from __future__ import annotations

import numbers

import numpy as np  # noqa: F401  (the doctests use it)

from .._utils import RANDOM_STATE, Interval
from .nmf import _check_matrix, _GroupFactorization

__all__ = ["CNMF", "GNMF", "GNMFNC"]

_COMMON = {
    "init": ("random", "custom"),
    "max_iter": Interval(1, None, kind=numbers.Integral),
    "tol": Interval(0, None),
    "random_state": RANDOM_STATE,
}


class _Grouped(_GroupFactorization):
    def fit(self, D, groups, *, U_shared=None, U_category=None, V=None, callback=None):
        """Factorize ``D`` with its questions grouped by ``groups``.

        Parameters
        ----------
        D : sparse matrix or ndarray of shape (n_terms, n_docs)
            Non-negative term–question matrix (never densified).
        groups : array-like of shape (n_docs,)
            Group (category) label of every question; any sortable values, e.g. category
            ids with -1 for "no category" (then one more group).
        U_shared : ndarray of shape (n_terms, n_shared), optional
            Initial shared topics (``init="custom"``).
        U_category : ndarray or sparse matrix of shape (n_terms, n_groups * n_category), optional
            Initial category topics, group ``p`` (in sorted label order) in columns
            ``p * n_category`` to ``(p + 1) * n_category``; entries on terms a group does not
            use are ignored (``init="custom"``).
        V : ndarray of shape (n_shared + n_category, n_docs), optional
            Initial coefficients (``init="custom"``).
        callback : callable, optional
            ``callback(iteration, objective)`` after each sweep.

        Returns
        -------
        self
        """
        return self._fit(_check_matrix(D), groups, U_shared, U_category, V, callback)


class CNMF(_Grouped):
    """One NMF per category (no shared topics): ``D_p ~ U_p V_p``.

    Minimises ``sum_p ||D_p - U_p V_p||^2 / ||D_p||^2``; the categories do not interact.

    Parameters
    ----------
    n_category : int, default 8
        Topics per category ``K_p``.
    init : {"random", "custom"}, default "random"
    max_iter : int, default 100
    tol : float, default 1e-4
        Relative improvement of the objective below which the fit stops.
    random_state : None, int or numpy Generator

    Attributes
    ----------
    category_topics_, coefficients_, groups_, doc_group_, loss_curve_, initial_loss_, n_iter_
        See :class:`~cqa_search.factorization.nmf._GroupFactorization` (``shared_topics_``
        has zero columns).
    """

    _parameter_constraints = {"n_category": Interval(1, None, kind=numbers.Integral), **_COMMON}

    def __init__(self, n_category=8, *, init="random", max_iter=100, tol=1e-4,
                 random_state=None):
        self.n_category = n_category
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _sizes(self):
        return 0, self.n_category, 0.0


class GNMF(_Grouped):
    """Group NMF: shared plus category topics, ``D_p ~ [U_s, U_p] V_p``, no orthogonality.

    :class:`GNMFNC` with ``a = 0``.

    Parameters
    ----------
    n_shared : int, default 20
        Shared topics ``K_s``.
    n_category : int, default 8
        Topics per category ``K_p``.
    init, max_iter, tol, random_state
        As in :class:`GNMFNC`.
    """

    _parameter_constraints = {"n_shared": Interval(0, None, kind=numbers.Integral),
                              "n_category": Interval(1, None, kind=numbers.Integral), **_COMMON}

    def __init__(self, n_shared=20, n_category=8, *, init="random", max_iter=100, tol=1e-4,
                 random_state=None):
        self.n_shared = n_shared
        self.n_category = n_category
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _sizes(self):
        return self.n_shared, self.n_category, 0.0


class GNMFNC(_Grouped):
    """Group NMF with natural categories (Zhou et al., 2014, eqs. 1–6).

    Minimises::

        sum_p ||D_p - [U_s, U_p] V_p||^2 / ||D_p||^2
            + sum_p beta ||U_s^T U_p||^2 + sum_{p < l} gamma ||U_p^T U_l||^2

    over non-negative factors with unit-norm topic columns, ``beta = a / (K_s K_p)`` and
    ``gamma = a / K_p^2`` (see :mod:`cqa_search.factorization.nmf` for the updates).

    Parameters
    ----------
    n_shared : int, default 20
        Shared topics ``K_s`` (the paper's 20).
    n_category : int, default 8
        Topics per category ``K_p`` (the paper's 8).
    a : float, default 100
        Common factor of the regularisers (the paper's 100: ``beta = gamma = 0.625``);
        0 gives :class:`GNMF`.
    init : {"random", "custom"}, default "random"
    max_iter : int, default 100
        Sweeps (the paper runs 100).
    tol : float, default 1e-4
        Relative improvement of the objective below which the fit stops.
    random_state : None, int or numpy Generator

    Attributes
    ----------
    shared_topics_ : ndarray of shape (n_terms, n_shared)
    category_topics_ : scipy.sparse.csr_matrix of shape (n_terms, n_groups * n_category)
    coefficients_ : ndarray of shape (n_shared + n_category, n_docs)
    groups_, doc_group_, loss_curve_, initial_loss_, n_iter_, n_partial_rescalings_
        See :class:`~cqa_search.factorization.nmf._GroupFactorization`.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rng = np.random.default_rng(0)
    >>> D = sp.random(50, 60, density=0.2, random_state=0, format="csc")
    >>> groups = np.repeat([0, 1, 2], 20)
    >>> model = GNMFNC(4, 2, max_iter=30, tol=0, random_state=0).fit(D, groups)
    >>> model.coefficients_.shape, model.category_topics_.shape
    ((6, 60), (50, 6))
    >>> bool(np.all(np.diff(model.loss_curve_) <= 0))
    True
    """

    _parameter_constraints = {"n_shared": Interval(0, None, kind=numbers.Integral),
                              "n_category": Interval(1, None, kind=numbers.Integral),
                              "a": Interval(0, None), **_COMMON}

    def __init__(self, n_shared=20, n_category=8, *, a=100.0, init="random", max_iter=100,
                 tol=1e-4, random_state=None):
        self.n_shared = n_shared
        self.n_category = n_category
        self.a = a
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _sizes(self):
        return self.n_shared, self.n_category, float(self.a)
