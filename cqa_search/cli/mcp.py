"""``cqa-search mcp INDEX``: an MCP server (stdio) exposing search, similar and question
lookup to an assistant (needs the mcp extra: pip install 'cqa-search[mcp]')."""
from __future__ import annotations

import argparse
import os
import sys

from ..exceptions import CQASearchError
from ._common import COMMANDS, add_common_options, run_command, warning_line

HELP = COMMANDS["mcp"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    add_common_options(parser)


def run(args) -> int:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise CQASearchError("mcp needs the mcp extra (the mcp package is not installed): "
                             "pip install 'cqa-search[mcp]'") from None
    from ..index.store import is_compatible
    from ..server.mcp_server import create_mcp_server

    index = os.path.abspath(args.index)
    if not is_compatible(index):
        print(warning_line(f"no index at {index} yet (the tools fail until one is built "
                           "there)"), file=sys.stderr)
    server, live = create_mcp_server(index)
    live.start()
    try:
        server.run("stdio")  # standard output is the protocol's: nothing else is printed
    finally:
        live.stop()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search mcp", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
