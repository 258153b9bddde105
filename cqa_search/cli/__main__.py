"""``cqa-search`` (also ``python -m cqa_search``): the command line."""
from __future__ import annotations

import argparse
import sys

from .._version import __version__
from . import build_index, convert, demo, evaluate, fit, query, train
from ._common import PROG, run_command

#: Subcommand name -> module with HELP, configure(parser) and run(args).
COMMANDS = {"build-index": build_index, "query": query, "fit": fit, "train": train,
            "evaluate": evaluate, "convert": convert, "demo": demo}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Question retrieval for community question answering archives.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        module.configure(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run_command(COMMANDS[args.command].run, args)


if __name__ == "__main__":
    sys.exit(main())
