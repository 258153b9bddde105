"""``cqa-search mcp INDEX``: an MCP server (stdio) exposing search, similar and question
lookup to an assistant (needs the mcp extra: pip install 'cqa-search[mcp]')."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from ..exceptions import CQASearchError
from ._common import COMMANDS, PROG, add_common_options, run_command, warning_line

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
    import anyio

    from ..server.mcp_server import create_mcp_server, serve_stdio

    index = os.path.abspath(args.index)
    if not is_compatible(index):
        print(warning_line(f"no index at {index} yet (the tools fail until one is built "
                           "there)"), file=sys.stderr)
    server, live = create_mcp_server(index)
    live.start()
    previous = signal.signal(signal.SIGINT, _interrupted(live))
    try:
        anyio.run(serve_stdio, server)  # standard output is the protocol's: nothing else
    finally:
        signal.signal(signal.SIGINT, previous)
        live.stop()
    return 0


def _interrupted(live):
    """The SIGINT handler of the server: it ends the process at once. The SDK reads
    standard input in a worker thread, which a cancellation (asyncio's answer to SIGINT)
    and the interpreter's exit both wait for: until the client closes standard input, the
    process would stay, silent. The requests under way are dropped, as a closed standard
    input drops them."""
    def stop(signum, frame):
        live.stop()
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        os._exit(130)
    return stop


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search mcp", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
