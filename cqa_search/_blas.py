"""BLAS limited to one thread on per-query paths.

A query's products are small (a K x K system, a 100 x K block of candidates): threaded
BLAS gains nothing there, and when the other cores are busy a threaded call waits for
a core, which turned a 2 ms fold-in into 30-200 ms. The limit is set around the
per-query work only (the process's setting is restored after), through one
:class:`threadpoolctl.ThreadpoolController` made on first use (making one inspects the
loaded libraries, about 100 times the cost of a limit).
"""
from __future__ import annotations

from threadpoolctl import ThreadpoolController  # a scikit-learn dependency

__all__ = ["one_blas_thread"]

_controller = None


def one_blas_thread():
    """Context manager: BLAS libraries use one thread inside it."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")
