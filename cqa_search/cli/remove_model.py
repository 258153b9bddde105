"""``cqa-search remove-model INDEX NAME``: drop a stored model (also a damaged one)."""
from __future__ import annotations

import argparse

from ..index.models import remove_model
from ._common import COMMANDS, add_common_options, run_command

HELP = COMMANDS["remove-model"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("name", metavar="NAME", help="the model (`cqa-search info` lists them)")
    add_common_options(parser)


def run(args) -> int:
    generation = remove_model(args.index, args.name)
    print(f"model {args.name!r} removed from {args.index} (generation {generation}); "
                  "fit or train it again to have it back")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search remove-model", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
