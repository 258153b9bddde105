"""``cqa-search`` (also ``python -m cqa_search``): the command line."""
from __future__ import annotations

import argparse
import importlib
import sys

from .._version import __version__
from ._common import COMMANDS, PROG, run_command


def _module(command):
    return importlib.import_module(f"{__package__}.{COMMANDS[command][0]}")


class _Version(argparse.Action):
    """``--version``: the version, and whether the compiled kernels can be used (looked up
    only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and whether the compiled kernels (numba) can be "
                      "used, and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import compiled

        print(f"{parser.prog} {__version__}\n{compiled.describe()}")
        parser.exit()


def make_parser(command=None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that subcommand is configured (the others are
    placeholders), so that running one command imports only what it needs."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Question retrieval for community question answering archives.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if command == name:
            _module(name).configure(p)
    return parser


def _innermost(parser, args) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` ran, e.g. ``cqa-search fit INDEX topics``'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None))
            if chosen is not None:
                return _innermost(chosen, args)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = make_parser(command if command in COMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    if extra:
        inner = _innermost(parser, args)
        if inner.prog != f"{PROG} {args.command}" or any(
                isinstance(a, argparse._SubParsersAction) for a in inner._actions):
            # said by the command's parser, with its usage (argparse: the top one's)
            inner.error(f"unrecognized arguments: {' '.join(extra)}")
        # options between the words: `query INDEX -k 3 car battery`
        command = args.command
        args = inner.parse_intermixed_args(argv[argv.index(command) + 1:])
        args.command = command
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run_command(_module(args.command).run, args)


if __name__ == "__main__":
    sys.exit(main())
