"""``cqa-search serve INDEX``: the search page and the JSON API over HTTP (read-only)."""
from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import stat
import sys
import threading
import time

from ..exceptions import CQASearchError, ParameterError
from ._common import (HYBRID_HELP, add_common_options, hybrid_weight, note_shards, run_command,
                      unwritable, warning_line)

#: Seconds that stopping the server (SIGINT, SIGTERM) waits for the requests under way.
GRACEFUL_SECONDS = 5
#: The shortest write token taken.
MIN_TOKEN_CHARS = 16
#: The largest token file read (a token is tens of bytes: more is not a token file).
MAX_TOKEN_FILE_BYTES = 4096

HELP = ("serve a search page and a JSON API over an index (read-only unless --allow-writes; "
        "follows rebuilds without a restart; needs the server extra: pip install "
        "'cqa-search[server]')")


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: %(default)s, this machine only; "
                             "0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=8080, help="port (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (default: %(default)s; each maps the index; "
                             "the system spreads the connections over them)")
    parser.add_argument("--verify", action="store_true",
                        help="check every file's checksum when a generation of the index is "
                             "opened (slower start and reload; finds any damaged byte)")
    parser.add_argument("--allow-writes", action="store_true",
                        help="also take questions to add (POST /api/questions) and delete "
                             "(DELETE /api/questions/ID) from clients that give the token "
                             "(Authorization: Bearer TOKEN), read from --token-file or the "
                             "environment variable CQA_SEARCH_WRITE_TOKEN")
    parser.add_argument("--token-file", metavar="FILE",
                        help=f"with --allow-writes: the file holding the token (at least "
                             f"{MIN_TOKEN_CHARS} characters; e.g. made by `openssl rand -hex "
                             "32 > FILE`)")
    parser.add_argument("--hybrid", type=hybrid_weight, default="auto", metavar="A|none",
                        help=HYBRID_HELP)
    add_common_options(parser)


def _uvicorn():
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise CQASearchError(f"serve needs the server extra ({exc.name} is not installed): "
                             "pip install 'cqa-search[server]'") from None
    return uvicorn


def _loopback(host) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _write_token(args, variable) -> str | None:
    """The write token of ``--allow-writes`` (None without it), from ``--token-file`` or
    the environment; an error when there is none or it is too short to be a secret."""
    if not args.allow_writes:
        if args.token_file:
            raise ParameterError("--token-file applies with --allow-writes")
        return None
    if args.token_file:
        token = _read_token_file(args.token_file)
    else:
        token = os.environ.get(variable, "").strip()
        if not token:
            raise ParameterError(f"--allow-writes needs a token: --token-file FILE, or the "
                                 f"environment variable {variable}")
    if len(token) < MIN_TOKEN_CHARS or not (token.isascii() and token.isprintable()) \
            or any(c.isspace() for c in token):
        # (HTTP clients send a header's bytes as Latin-1 at best: another token would
        # never match)
        raise ParameterError(f"the write token must have at least {MIN_TOKEN_CHARS} "
                             "characters, all printable ASCII, and no white space (e.g. "
                             "`openssl rand -hex 32`)")
    return token


def _read_token_file(path) -> str:
    """The token in the file ``path``: a regular file of at most
    :data:`MAX_TOKEN_FILE_BYTES` bytes (a FIFO would block the start until someone writes
    to it, a device such as /dev/zero would be read without end), in UTF-8."""
    def refused(reason):
        return ParameterError(f"cannot read --token-file {path}: {reason}")

    try:  # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise refused(exc.strerror or exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        raise refused(f"it is {kind}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_TOKEN_FILE_BYTES + 1)
        except OSError as exc:
            raise refused(exc.strerror or exc) from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise refused(f"it has more than {MAX_TOKEN_FILE_BYTES:,} bytes (a token file holds "
                      "the token alone)")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise refused("it is not UTF-8 text") from None


def _say_when_listening(host, port, message, *, timeout=600.0) -> threading.Thread:
    """Print ``message`` on stderr once ``host:port`` accepts connections (from a daemon
    thread polling it; nothing when it never does within ``timeout`` seconds)."""
    target = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)

    def wait():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection((target, port), timeout=1).close()
            except OSError:
                time.sleep(0.1)
                continue
            print(message, file=sys.stderr, flush=True)
            return

    thread = threading.Thread(target=wait, name="cqa-search-listening", daemon=True)
    thread.start()
    return thread


def run(args) -> int:
    if not 0 < args.port < 65536:
        raise ParameterError(f"--port must be between 1 and 65535; got {args.port}")
    if args.workers < 1:
        raise ParameterError(f"--workers must be a positive integer; got {args.workers}")
    uvicorn = _uvicorn()
    from ..index.store import is_compatible
    from ..server.app import INDEX_VARIABLE, MAX_TARGET_BYTES, VERIFY_VARIABLE, create_app

    from ..server.app import HYBRID_VARIABLE, WRITE_TOKEN_VARIABLE

    token = _write_token(args, WRITE_TOKEN_VARIABLE)
    os.environ.pop(WRITE_TOKEN_VARIABLE, None)  # the worker processes read it from there
    if token is not None:
        os.environ[WRITE_TOKEN_VARIABLE] = token
    index = os.path.abspath(args.index)
    if not is_compatible(index):
        print(warning_line(f"no index to serve at {index} yet (the API answers 503 until one "
                           "is built there)"), file=sys.stderr)
    else:
        note_shards(index, ray=True)
        reason = unwritable(index) if token is not None else None
        if reason is not None:
            print(warning_line(f"this process cannot write the index {index} ({reason}): "
                               "its writes will be refused (503)"), file=sys.stderr)
    if not _loopback(args.host):
        print(f"cqa-search: note: listening on {args.host}: other machines can reach this "
              "server (" + ("writes with the token: serve it behind HTTPS" if token else
                            "read-only") + ")", file=sys.stderr)
    from ..server.protocol import RequestTimeoutProtocol

    # a client that trickles its request head or body is dropped (RequestTimeoutProtocol);
    # stopping waits for the requests under way, not for ever
    options = dict(host=args.host, port=args.port, log_level="info" if args.verbose else
                   "warning", h11_max_incomplete_event_size=MAX_TARGET_BYTES + 16384,  # + headers
                   server_header=False, http=RequestTimeoutProtocol,
                   timeout_graceful_shutdown=GRACEFUL_SECONDS)
    from ..server.processes import REUSE_PORT, listening_socket, serve_processes

    several = args.workers > 1 and REUSE_PORT  # the kernel spreads connections over them
    try:  # a clear error before anything starts (e.g. the port is in use)
        listening_socket(args.host, args.port, reuse_port=several).close()
    except OSError as exc:
        raise CQASearchError(f"cannot listen on {args.host}:{args.port}: "
                             f"{exc.strerror or exc}") from None
    # said once the port answers: loading the index and the compiled kernels takes
    # seconds, during which the address printed would refuse a browser's connection
    _say_when_listening(args.host, args.port,
                        f"serving {index} on http://{args.host}:{args.port}/"
                        + (" (writes allowed with the token)" if token else "")
                        + " (Ctrl-C stops)")
    if args.workers == 1:
        uvicorn.run(create_app(index, verify=args.verify, write_token=token,
                               hybrid=args.hybrid), **options)
        return 0
    if several:
        options = {k: v for k, v in options.items() if k not in ("host", "port")}
        return serve_processes(args.workers, index, verify=args.verify, host=args.host,
                               port=args.port, options=options, hybrid=args.hybrid)
    # uvicorn's worker processes make the application from the environment
    os.environ[INDEX_VARIABLE] = index
    if args.verify:
        os.environ[VERIFY_VARIABLE] = "1"
    os.environ[HYBRID_VARIABLE] = "none" if args.hybrid is None else str(args.hybrid)
    uvicorn.run("cqa_search.server.app:app_from_environment", factory=True,
                workers=args.workers, **options)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search serve", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
