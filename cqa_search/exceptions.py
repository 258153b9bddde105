"""Exceptions raised by cqa_search.

Every error caused by user input derives from :class:`CQASearchError`; the command line
prints its message and exits 1 instead of showing a traceback.
"""

__all__ = [
    "CQASearchError",
    "ArchiveError",
    "IndexFormatError",
    "IndexNotFoundError",
    "QueryError",
    "ParameterError",
    "NotFittedError",
    "ConvergenceWarning",
    "rebuild_hint",
]


class CQASearchError(Exception):
    """Base class of the errors a user can cause and fix (bad input, bad index, bad query)."""


class ArchiveError(CQASearchError, ValueError):
    """An archive file cannot be read: malformed record, missing field, duplicate id, ...

    Parameters
    ----------
    message : str
        What is wrong.
    path : str or None
        The file, when known.
    line : int or None
        1-based line (or record) number in ``path``, when known.
    """

    def __init__(self, message, path=None, line=None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


class IndexFormatError(CQASearchError):
    """An index directory is missing, foreign, corrupted or of another format version."""


class IndexNotFoundError(IndexFormatError, FileNotFoundError):
    """There is no index at a path (nothing there, or a first build that did not finish):
    also a ``FileNotFoundError``, as opening a missing file raises."""
def rebuild_hint(options: str = "") -> str:
    """How to mend an index that cannot be read or changed in place: the end of every such
    message (``options``: what the rebuild needs besides the defaults).

    Examples
    --------
    >>> rebuild_hint()
    'rebuild it with `cqa-search build-index`'
    """
    return f"rebuild it with `cqa-search build-index{options}`"


class QueryError(CQASearchError, ValueError):
    """A query cannot be run: empty text, unknown category, bad parameter."""


class ParameterError(CQASearchError, ValueError):
    """A parameter given by the user is invalid (its name, its value, what is allowed).

    Raised for bad option values of the API and the command line; a ``ValueError``, as
    scikit-learn raises for bad estimator parameters.
    """


def __getattr__(name):
    # scikit-learn's own classes (so that its check_is_fitted and ours raise the same
    # NotFittedError), imported on first use: importing scikit-learn is slow.
    if name in ("NotFittedError", "ConvergenceWarning"):
        from sklearn import exceptions

        return getattr(exceptions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
