"""Command-line options derived from an estimator's signature and numpydoc docstring.

Each constructor parameter ``name`` becomes ``--name`` (underscores as dashes) with the
signature's default and the docstring's description as help; the numpydoc type line
("int", "float or None", ``{"all", "best"} or None``, "bool", "sequence of float")
chooses the conversion. So a model family's hyperparameters, their defaults and their
documentation live in one place: the estimator.
"""
from __future__ import annotations

import argparse
import inspect
import json
import re

__all__ = ["parameter_docs", "add_estimator_options", "estimator_params"]

_ENTRY = re.compile(r"^(\w+(?:\s*,\s*\w+)*)\s*:\s*(.*)$")


def parameter_docs(cls) -> dict:
    """``{name: (type line, description)}`` of the Parameters section of ``cls``'s docstring."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines[:-1])
                     if line.strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"})
    except StopIteration:
        return {}
    out, names, desc = {}, None, []

    def flush():
        if names:
            text = re.sub(r":\w+:`~?([^`]*)`", r"\1", " ".join(desc)).replace("``", "")
            for n in names[0]:
                out[n] = (names[1], text)

    body = lines[start + 2:]
    for i, line in enumerate(body):
        if line and not line.startswith(" "):
            flush()
            if i + 1 < len(body) and body[i + 1].strip() and set(body[i + 1].strip()) == {"-"}:
                return out  # the title of the next section
            match = _ENTRY.match(line.strip())
            names = ([n.strip() for n in match.group(1).split(",")], match.group(2)) \
                if match else None
            desc = []
        elif line.strip():
            desc.append(line.strip())
    flush()
    return out


def _none(text):
    return text.strip().lower() in ("none", "null", "")


def _converter(spec, default):
    """(argparse ``type``, choices, metavar) for a numpydoc type line and a default."""
    nullable = "None" in spec or default is None
    choices = re.search(r"\{([^}]*)\}", spec)
    if choices:
        options = [c.strip().strip("'\"") for c in choices.group(1).split(",")]
        pick = {o.lower(): o for o in options}

        def convert(text):
            if nullable and _none(text):
                return None
            if text.lower() not in pick:
                raise argparse.ArgumentTypeError(
                    f"must be one of {', '.join(options)}" + (" or none" if nullable else "")
                    + f"; got {text!r}")
            return pick[text.lower()]
        metavar = "{" + ",".join(options + (["none"] if nullable else [])) + "}"
        return convert, metavar
    base = spec.split(",")[0].split(" or ")
    if spec.startswith("dict"):
        def convert(text):
            if nullable and _none(text):
                return None
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
            if not isinstance(value, dict):
                raise argparse.ArgumentTypeError(f"must be a JSON object; got {text!r}")
            return value
        return convert, "JSON"
    if re.match(r"(tuple|list|sequence) of str", spec):
        def convert(text):
            if nullable and _none(text):
                return None
            return tuple(v.strip() for v in text.split(",") if v.strip())
        return convert, "A[,B...]"
    if "sequence of float" in spec or "list of float" in spec:
        def convert(text):
            if nullable and _none(text):
                return None
            values = [float(v) for v in text.split(",")]
            return values[0] if len(values) == 1 else values
        return convert, "X[,X...]"
    kind = type(default) if default is not None else None
    if kind is None:
        kind = int if any("int" == b.strip() for b in base) or spec.startswith("int") else \
            float if "float" in spec else str

    def convert(text):
        if nullable and _none(text):
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}"
                                             + (" or none" if nullable else "")
                                             + f"; got {text!r}") from None
    return convert, kind.__name__.upper() if kind in (int, float) else "TEXT"


def add_estimator_options(parser, cls, *, skip=()) -> list:
    """Add one option per constructor parameter of ``cls``; returns the parameter names."""
    docs = parameter_docs(cls)
    names = []
    group = parser.add_argument_group(f"{cls.__name__} parameters")
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.name in ("self", *skip) or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        spec, desc = docs.get(p.name, ("", ""))
        flag = "--" + p.name.replace("_", "-")
        default = p.default
        help_text = desc.replace("%", "%%") + " (default: %(default)s)"
        if isinstance(default, bool):
            group.add_argument(flag, dest=p.name, action=argparse.BooleanOptionalAction,
                               default=default, help=desc.replace("%", "%%") or None)
        else:
            convert, metavar = _converter(spec, default)
            group.add_argument(flag, dest=p.name, type=convert, default=default,
                               metavar=metavar, help=help_text)
        names.append(p.name)
    return names


def estimator_params(args, names) -> dict:
    """The parameters parsed by :func:`add_estimator_options`."""
    return {name: getattr(args, name) for name in names}
