"""Helpers shared across the package: parameter validation and small utilities.

Every estimator of the package declares ``_parameter_constraints`` the way scikit-learn's
do, and checks them with :func:`validate_params` when first used. The checker is ours, not
``sklearn.utils._param_validation``, for two reasons: that module is private (no
compatibility promise between releases), and the query path (term models, the analyzer)
must not import scikit-learn, which costs about 1.5 s of start-up per command. One checker for all
estimators keeps one message format: ``max_iter must be an integer in [1, inf); got 0``.
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import numbers
import sys

import numpy as np

from .exceptions import ParameterError

__all__ = ["Interval", "InstanceOf", "RANDOM_STATE", "validate_params", "get_params",
           "Estimator", "imported", "progress_bar", "counted", "file_sha256"]


class Interval:
    """A numeric constraint for ``_parameter_constraints``.

    Examples
    --------
    >>> Interval(0, None, closed="neither").describe()
    'a number in (0, inf)'
    >>> Interval(0, 1, kind=int).check(2)
    False
    """

    def __init__(self, low=None, high=None, *, closed="both", kind=numbers.Real):
        self.low, self.high, self.closed, self.kind = low, high, closed, kind

    def check(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, self.kind):
            return False
        lo_ok = self.low is None or (value >= self.low if self.closed in ("both", "left")
                                     else value > self.low)
        hi_ok = self.high is None or (value <= self.high if self.closed in ("both", "right")
                                      else value < self.high)
        return lo_ok and hi_ok

    def describe(self) -> str:
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        what = "an integer" if self.kind is numbers.Integral or self.kind is int else "a number"
        return f"{what} in {left}{low}, {high}{right}"


class InstanceOf:
    """A ``_parameter_constraints`` option: an instance of one of ``types`` (not a bool)."""

    def __init__(self, *types, name):
        self.types, self.name = types, name

    def check(self, value) -> bool:
        return isinstance(value, self.types) and not isinstance(value, bool)

    def describe(self) -> str:
        return self.name


class _FeaturePrefix:
    """A ``_parameter_constraints`` option: a prefix of feature names (letters, digits and
    ``_``, a letter first)."""

    def check(self, value) -> bool:
        return isinstance(value, str) and value[:1].isascii() and value[:1].isalpha() and \
            all(c.isascii() and (c.isalnum() or c == "_") for c in value)

    def describe(self) -> str:
        return "letters, digits and '_' (a letter first)"


#: The ``feature_prefix`` constraint of the model families whose features have fixed names:
#: None (those names) or a prefix that tells a second model's features apart.
FEATURE_PREFIX = [(None,), _FeaturePrefix()]


def prefixed(names, prefix) -> tuple:
    """Feature names with a model's ``feature_prefix`` (None: the names themselves).

    Examples
    --------
    >>> prefixed(("emb_sif", "emb_mean"), "w2v"), prefixed(("wt",), None)
    (('w2v_emb_sif', 'w2v_emb_mean'), ('wt',))
    """
    return tuple(names) if prefix is None else tuple(f"{prefix}_{n}" for n in names)


#: The ``random_state`` constraint: None, a non-negative int or a numpy Generator.
RANDOM_STATE = [(None,), Interval(0, None, kind=numbers.Integral),
                InstanceOf(np.random.Generator, name="a numpy Generator")]


def validate_params(obj, constraints=None) -> None:
    """Check ``obj``'s parameters against ``obj._parameter_constraints``.

    A constraint is a tuple of allowed values, an :class:`Interval`, or a list of such
    alternatives. The message names the parameter, the value and what is allowed.
    """
    constraints = obj._parameter_constraints if constraints is None else constraints
    for param, allowed in constraints.items():
        value = getattr(obj, param)
        options = allowed if isinstance(allowed, list) else [allowed]
        ok = any(value in opt if isinstance(opt, tuple) else opt.check(value) for opt in options)
        if not ok:
            parts = []
            for opt in options:
                if isinstance(opt, tuple):
                    parts.append("{" + ", ".join(repr(o) for o in opt) + "}")
                else:
                    parts.append(opt.describe())
            raise ParameterError(f"{param} must be {' or '.join(parts)}; got {value!r}")


def imported(target):
    """The object ``"module:name"`` names, its module imported on first use (what the
    package's registries name, so that a part not used is not imported).

    Examples
    --------
    >>> imported("cqa_search._utils:counted")(2, "shard")
    '2 shards'
    """
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def get_params(obj) -> dict:
    """The constructor parameters of ``obj``, read from its ``__init__`` signature."""
    names = [p for p in inspect.signature(type(obj).__init__).parameters
             if p not in ("self", "args", "kwargs")]
    return {p: getattr(obj, p) for p in names}


class Estimator:
    """scikit-learn's estimator interface for the classes that must not import
    scikit-learn (those the query path loads): ``get_params`` and ``set_params`` read
    and change the parameters of ``__init__``, stored under their names, and the repr
    shows them. Parameters are checked where they are used (:func:`validate_params`).

    Examples
    --------
    >>> class Model(Estimator):
    ...     def __init__(self, *, k=1):
    ...         self.k = k
    >>> Model().set_params(k=2)
    Model(k=2)
    >>> Model().set_params(n=2)
    Traceback (most recent call last):
    ...
    cqa_search.exceptions.ParameterError: Model has no parameter 'n' (parameters: k)
    """

    def get_params(self, deep=True) -> dict:
        """The constructor parameters (scikit-learn's ``get_params``)."""
        return get_params(self)

    def set_params(self, **params):
        """Change parameters (scikit-learn's ``set_params``); checked on next use."""
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise ParameterError(f"{type(self).__name__} has no parameter {key!r} "
                                     f"(parameters: {', '.join(valid)})")
            setattr(self, key, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def close_names(wanted: str, names, limit: int = 3) -> list:
    """Up to ``limit`` of ``names`` that ``wanted`` may mean (for "did you mean"), compared
    without case: those it starts, those with a word starting with each of its words
    ("Sightseeing" for "Sightseeing and Tourist attractions", "gate" for "quantum-gate"),
    then the closest spellings.

    Examples
    --------
    >>> close_names("gate", ["quantum-gate", "gates-foundation", "python"])
    ['quantum-gate', 'gates-foundation']
    >>> close_names("pyhton", ["quantum-gate", "python"])
    ['python']
    """
    import difflib
    import re

    folded = {}
    for name in names:
        folded.setdefault(name.casefold(), name)
    key = wanted.strip().casefold()
    words = [w for w in re.split(r"[\W_]+", key) if w]
    close = [f for f in folded if f.startswith(key) or (words and all(
        any(part.startswith(w) for part in re.split(r"[\W_]+", f)) for w in words))][:limit]
    close += [c for c in difflib.get_close_matches(key, list(folded), n=limit, cutoff=0.5)
              if c not in close][:limit - len(close)]
    return [folded[c] for c in close]


def counted(n, noun) -> str:
    """``n`` and ``noun`` in the singular or the plural (``noun + "s"``).

    Examples
    --------
    >>> counted(1, "question"), counted(1200, "category")
    ('1 question', '1,200 categories')
    """
    if n == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n:,} {plural}"
def file_sha256(path) -> str:
    """The sha256 of a file's bytes (hex), read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def progress_bar(enabled, desc, unit, total=None, *, leave=True):
    """A tqdm progress bar on stderr: the one kind of bar of the package (builds, changes,
    searches, evaluation and fits). Silent when not ``enabled`` and when stderr is not a
    terminal; ``leave=False`` removes it when done (a step inside a longer task)."""
    from tqdm import tqdm

    return tqdm(desc=desc, unit=" " + unit, total=total, disable=None if enabled else True,
                file=sys.stderr, mininterval=0.5, dynamic_ncols=True, leave=leave)


class InProcess:
    """The data of a fit held in this process as one part (the whole archive), with the
    interface of :class:`cqa_search.distributed.fitting.ShardParts` (a sharded index's
    shards as parts, each in a Ray actor on its shard): a model family's fit runs its
    per-part steps through one or the other the same way.

    ``map(method, *args)``: every part's ``method(*args)``, in order (here: one);
    ``parallel_corpus(method, *args)``: a corpus IBM Model 1 fits, of the parts'
    ``method(*args)`` (ParallelCorpus or None each); ``with``: the parts are released
    at the end.

    Examples
    --------
    >>> with InProcess([1, 2]) as parts:
    ...     parts.map("count", 2)
    [1]
    """

    def __init__(self, part):
        self.part = part

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.part = None
        return False

    def map(self, method, *args) -> list:
        return [getattr(self.part, method)(*args)]

    def parallel_corpus(self, method, *args):
        return getattr(self.part, method)(*args)
