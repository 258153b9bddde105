"""``cqa-search delete INDEX ID...``: delete questions from an index without a rebuild."""
from __future__ import annotations

import argparse
import sys

from ..exceptions import ParameterError
from ..index.live import delete_questions
from ._common import COMMANDS, add_common_options, run_command

HELP = COMMANDS["delete"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("ids", nargs="*", metavar="ID",
                        help="ids of the questions to delete ('-': one id per line on stdin)")
    parser.add_argument("--missing-ok", action="store_true",
                        help="ids the index does not have are reported, not an error")
    add_common_options(parser)


def run(args) -> int:
    ids = [i for i in args.ids if i != "-"]
    if "-" in args.ids:
        ids += [line.strip() for line in sys.stdin if line.strip()]
    if not ids:
        raise ParameterError("give the ids of the questions to delete (or '-' to read them "
                             "from standard input)")
    print(delete_questions(args.index, ids, missing_ok=args.missing_ok))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search delete", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
