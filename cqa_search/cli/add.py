"""``cqa-search add INDEX ARCHIVE...``: add questions to an index without a rebuild."""
from __future__ import annotations

import argparse

from ..index.live import add_questions
from ._common import COMMANDS, add_common_options, run_command
from .build_index import add_reader_options, reader_options

HELP = COMMANDS["add"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("archive", nargs="+", metavar="ARCHIVE",
                        help="archive files with the new questions (any build-index format)")
    parser.add_argument("--replace", action="store_true",
                        help="a question whose id the index has replaces it (e.g. with new "
                             "answers); without it, such a question is refused")
    add_reader_options(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def run(args) -> int:
    print(add_questions(args.index, args.archive, replace=args.replace,
                                format=args.format, skip_invalid=args.skip_invalid,
                                progress=not args.quiet, **reader_options(args)))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search add", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
