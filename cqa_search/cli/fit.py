"""``cqa-search fit INDEX FAMILY [options]``: train a model family and store it in the index."""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil

from ._common import add_common_options, run_command

HELP = "train a model (translation, topics, ...) from the index's archive and store it there"

#: Family name -> CLI module ``cli/fit_<family>.py`` with HELP, configure(parser) and
#: run(args); each trains through the public API and stores its model in the index.
FAMILIES = {info.name[len("fit_"):]: importlib.import_module(f"{__package__}.{info.name}")
            for info in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]),
                               key=lambda info: info.name)
            if info.name.startswith("fit_")}


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    sub = parser.add_subparsers(dest="family", metavar="FAMILY", required=True)
    for name, module in FAMILIES.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        add_common_options(p)


def run(args) -> int:
    return FAMILIES[args.family].run(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search fit", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
