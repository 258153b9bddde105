"""``cqa-search fit INDEX FAMILY [options]``: train a model family and store it in the index."""
from __future__ import annotations

import argparse

from ._common import add_common_options, run_command

HELP = "train a model (translation, topics, ...) from the index's archive and store it there"

#: Family name -> CLI module with HELP, configure(parser) and run(args); each module trains
#: through the public API and stores the model with cqa_search.engine.add_model.
FAMILIES = {}


def configure(parser) -> None:
    sub = parser.add_subparsers(dest="family", metavar="FAMILY", required=True)
    for name, module in FAMILIES.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        p.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
        module.configure(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        add_common_options(p)


def run(args) -> int:
    return FAMILIES[args.family].run(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search fit", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
