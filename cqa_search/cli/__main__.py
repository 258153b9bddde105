"""``cqa-search`` (also ``python -m cqa_search``): the command line."""
from __future__ import annotations

import argparse
import importlib
import sys

from .._version import __version__
from ._common import PROG, run_command

#: Subcommand name -> module (in this package) with HELP, configure(parser) and run(args).
COMMANDS = {"build-index": "build_index", "query": "query", "fit": "fit", "train": "train",
            "evaluate": "evaluate", "convert": "convert", "demo": "demo", "serve": "serve"}


def _module(command):
    return importlib.import_module(f"{__package__}.{COMMANDS[command]}")


def make_parser(command=None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that subcommand is configured (the others are
    placeholders), so that running one command imports only what it needs."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Question retrieval for community question answering archives.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if command is None or command == name:
            module = _module(name)
            module.configure(sub.add_parser(name, help=module.HELP, description=module.HELP))
        else:
            sub.add_parser(name)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = make_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run_command(_module(args.command).run, args)


if __name__ == "__main__":
    sys.exit(main())
