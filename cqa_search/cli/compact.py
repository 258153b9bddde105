"""``cqa-search compact INDEX``: merge an index's segments and drop its deleted questions."""
from __future__ import annotations

import argparse

from ..index.live import compact
from ._common import COMMANDS, add_common_options, run_command

HELP = COMMANDS["compact"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("--ray", nargs="?", const=True, metavar="ADDRESS",
                        help="a sharded index: compact each shard by a Ray task on the "
                             "cluster's nodes (pip install 'cqa-search[distributed]'), in a "
                             "local Ray session or on the cluster at ADDRESS; this process "
                             "writes only the top-level generation (default: on Ray when "
                             "RAY_ADDRESS names a cluster, else in this process)")
    add_common_options(parser)


def run(args) -> int:
    print(compact(args.index, ray=args.ray))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search compact", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
