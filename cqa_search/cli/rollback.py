"""``cqa-search rollback INDEX``: make the generation before the live one live again."""
from __future__ import annotations

import argparse

from ..index.store import rollback
from ._common import COMMANDS, add_common_options, run_command

HELP = COMMANDS["rollback"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    add_common_options(parser)


def run(args) -> int:
    live, restored, generation = rollback(args.index)
    print(f"rolled back {args.index}: the index of {restored} is live again, as "
          f"{generation} (it replaces {live}; a server follows it). One step: an index keeps "
          f"only the generation before the live one, so a second rollback brings {live} back")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search rollback", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
