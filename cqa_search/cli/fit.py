"""``cqa-search fit INDEX FAMILY [options]``: train a model family and store it in the index.

The families and their estimators are those of the model registry
(:data:`cqa_search.index.models.FAMILIES`); each family's options are its estimator's
constructor parameters, with their defaults and documentation (:mod:`._params`), and the
family's other inputs (:data:`cqa_search.training.FIT_INPUTS`). The fit is
:func:`cqa_search.training.fit_family`.
"""
from __future__ import annotations

import argparse

from ..index.models import FAMILIES, model_class
from ..training import fit_family
from ._common import COMMANDS, add_common_options, run_command
from ._params import add_estimator_options, estimator_params

HELP = COMMANDS["fit"][1]


def _answers_inputs(parser) -> list:
    """The options of the answers family's inputs; returns their names."""
    group = parser.add_argument_group("what the ranker learns from (default: nothing, the "
                                      "unsupervised prior)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--labels", metavar="QRELS",
                        help="learn the ranker from judged answers of this index: qrels lines "
                             "'QUESTION_ID 0 ANSWER relevance', ANSWER being the answer's id "
                             "(e.g. SemEval's RELC_ID) or its 0-based position")
    source.add_argument("--ranker-from", metavar="INDEX",
                        help="apply the ranker of the answers model stored in another index "
                             "(e.g. one fitted there with --labels)")
    group.add_argument("--ranker-name", default="answers", metavar="NAME",
                       help="with --ranker-from: the model's name there (default: %(default)s)")
    group.add_argument("--translation", metavar="NAME",
                       help="use the translation model NAME stored in this index instead of "
                            "training a table")
    return ["labels", "ranker_from", "ranker_name", "translation"]


#: Family -> function adding the options of its inputs (the keyword arguments of
#: :data:`cqa_search.training.FIT_INPUTS`) and returning their names.
INPUT_OPTIONS = {"answers": _answers_inputs}


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    sub = parser.add_subparsers(dest="family", metavar="FAMILY", required=True)
    for name, family in FAMILIES.items():
        p = sub.add_parser(name, help=family.summary, description=family.summary)
        params = add_estimator_options(p, model_class(family.kind))
        if name in INPUT_OPTIONS:
            params += INPUT_OPTIONS[name](p)
        p.set_defaults(params=params)
        p.add_argument("--name", help=f"model name in the index (default: "
                                      f"{family.default_name})")
        p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                       help=(f"fit on Ray (pip install 'cqa-search[distributed]'): "
                             f"{family.on_ray}; a local Ray session, or the cluster at "
                             "ADDRESS") if family.on_ray else
                       f"nothing of the {name} family runs on Ray: it fits in this process "
                       "(the option is taken, with a warning, for scripts that give it "
                       "to every family)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        add_common_options(p)


def run(args) -> int:
    print(fit_family(args.index, args.family, name=args.name, progress=not args.quiet,
                     ray=args.ray, **estimator_params(args, args.params)))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search fit", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
