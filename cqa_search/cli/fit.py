"""``cqa-search fit INDEX FAMILY [options]``: train a model family and store it in the index.

The families and their estimators are those of the model registry
(:data:`cqa_search.index.models.FAMILIES`); each family's options are its estimator's
constructor parameters, with their defaults and documentation (:mod:`._params`).
"""
from __future__ import annotations

import argparse
import importlib
import time

from ..engine import SearchConfig, SearchEngine
from ..index.models import FAMILIES, add_model, model_class
from ._common import COMMANDS, add_common_options, run_command
from ._params import add_estimator_options, estimator_params

HELP = COMMANDS["fit"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    sub = parser.add_subparsers(dest="family", metavar="FAMILY", required=True)
    for name, family in FAMILIES.items():
        p = sub.add_parser(name, help=family.summary, description=family.summary)
        p.set_defaults(params=add_estimator_options(p, model_class(family.kind)))
        if family.inputs:
            importlib.import_module(family.inputs).configure_inputs(p)
        p.add_argument("--name", help=f"model name in the index (default: "
                                      f"{family.default_name})")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        add_common_options(p)


def fit_family(index, family, params=None, *, name=None, progress=True, args=None) -> str:
    """Fit a family's model on the index at ``index`` and store it; returns the report.
    ``args`` (the parsed options) give the family's other inputs (labels, ...)."""
    spec = FAMILIES[family]
    cls = model_class(spec.kind)
    t0 = time.perf_counter()
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    inputs = {}
    if spec.inputs and args is not None:
        inputs = importlib.import_module(spec.inputs).fit_inputs(args, engine)
    model = cls(**(params or {})).fit(engine.view, progress=progress, **inputs)
    name = name or spec.store_name(model.get_params())
    add_model(engine, name, model)
    return (f"model      {name} ({family}) stored in {engine.path}\n{model.describe()}\n"
            f"total      {time.perf_counter() - t0:.1f} s")


def run(args) -> int:
    print(fit_family(args.index, args.family, estimator_params(args, args.params),
                     name=args.name, progress=not args.quiet, args=args))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search fit", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
