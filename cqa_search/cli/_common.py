"""What the subcommands share: error handling, colours, hit formatting."""
from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import re
import sys
import textwrap
import warnings

from .._utils import counted
from ..exceptions import CQASearchError, ParameterError, QueryError
from ..retrieval.first_stage import DEFAULT_WEIGHT

__all__ = ["run_command", "Style", "printable", "json_text", "format_hit", "format_explanation",
           "format_question", "add_common_options", "positive_int", "os_error_reason",
           "hybrid_weight", "format_first_stage", "add_field_weights_option", "retrieval_model"]

PROG = "cqa-search"

#: Subcommand -> (module of this package with configure(parser) and run(args), one-line
#: help). Kept here so that ``cqa-search --help`` imports no command module.
COMMANDS = {
    "build-index": ("build_index", "index an archive (JSONL, CSV/TSV, SemEval XML, "
                                   "StackExchange dump, Yahoo! L6)"),
    "query": ("query", "search an index once, or interactively when no query text is given"),
    "fit": ("fit", "train a model (translation, topics, ...) from the index's archive and "
                   "store it there"),
    "train": ("train", "train a ranker on judged queries and store it in the index (search "
                       "then ranks with it)"),
    "evaluate": ("evaluate", "evaluate a retrieval model (or a given run) against relevance "
                             "judgments"),
    "convert": ("convert", "turn a judged collection into archive.jsonl, queries.jsonl, "
                           "qrels.txt (+ candidates.run)"),
    "demo": ("demo", "build indexes/demo from the demo archive shipped with cqa_search, "
                     "search it, then learn its models and a ranker and search again"),
    "add": ("add", "add questions to an index (a new segment; no rebuild)"),
    "delete": ("delete", "delete questions from an index by id (no rebuild)"),
    "compact": ("compact", "merge an index's segments into one, without deleted questions"),
    "remove-model": ("remove_model", "remove a stored model from an index (also a damaged "
                                     "one: then fit or train it again)"),
    "rollback": ("rollback", "make the generation before the live one live again (after a "
                             "damaging or mistaken change; one step: a second rollback undoes "
                             "the first)"),
    "info": ("info", "what an index holds: questions, segments, models and how stale they "
                     "are"),
    "export-ranker": ("export_ranker", "write a stored ranker as JSON or in RankLib's linear "
                                       "format (Elasticsearch / OpenSearch LTR)"),
    "serve": ("serve", "serve an index over HTTP: a JSON API and a search page "
                       "(pip install 'cqa-search[server]')"),
    "mcp": ("mcp", "serve an index to an assistant over MCP (stdio): search, similar "
                   "questions, question lookup (pip install 'cqa-search[mcp]')"),
}


def add_common_options(parser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log progress details to stderr (-vv for debug)")


#: Exit status of a bug (sysexits' EX_SOFTWARE): distinct from a user's error (1) and a
#: usage error (2).
EXIT_BUG = 70


def _user_error(exc) -> bool:
    """True for errors the user caused and can fix: ours, and scikit-learn's check of an
    estimator parameter given as an option."""
    if isinstance(exc, CQASearchError):
        return True
    validation = sys.modules.get("sklearn.utils._param_validation")
    return validation is not None and isinstance(exc, validation.InvalidParameterError)


# C0 control characters but tab and newline, DEL, and the C1 ones (U+009B is a CSI to
# some terminals, as ESC [ is)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text) -> str:
    r"""``text`` safe for a terminal: its control characters (but tab and newline) written
    as escapes (``\x1b``), so that the text of an archive or an index never reaches a
    terminal as a control sequence (clearing it, retitling it, a hyperlink), as ``--json``
    and the search page escape it. Every printer of the command line passes what it did
    not write itself through this (its own colours are added after).

    Examples
    --------
    >>> printable("x \x1b[2J\x1b]0;owned\x07 y\tz")
    'x \\x1b[2J\\x1b]0;owned\\x07 y\tz'
    """
    text = str(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


# what JSON leaves raw in its strings of those: DEL and C1
_JSON_RAW = re.compile(r"[\x7f-\x9f]")


def json_text(doc, **options) -> str:
    r"""``doc`` as JSON text safe for a terminal: :func:`json.dumps` (non-ASCII text as it
    is) escapes the C0 control characters of its strings, and here DEL and the C1 ones
    too (``\u009b``), which JSON allows raw (U+009B is a CSI to some terminals).

    Examples
    --------
    >>> json_text({"title": "x\x1b[2J\x9b2J é"})
    '{"title": "x\\u001b[2J\\u009b2J é"}'
    """
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}",
                         json.dumps(doc, ensure_ascii=False, **options))


def warning_line(message) -> str:
    """How the command line says a warning (its own, Python's and the logged ones)."""
    return f"{PROG}: warning: {printable(message)}"


class _Said(logging.Formatter):
    def format(self, record) -> str:
        return f"{PROG}: {record.levelname.lower()}: {printable(record.getMessage())}"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(warning_line(message), file=sys.stderr if file is None else file)


#: OSError numbers that are the machine's state, not a bug in cqa_search: a full disk, a
#: file-size (``ulimit -f``) or quota limit, a read-only file system, no permission, too
#: many open files, a failing device.
_ENVIRONMENT = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES,
                errno.EPERM, errno.EMFILE, errno.ENFILE, errno.EIO}
#: The commands that change an index (atomically: an error leaves it as it was).
_INDEX_WRITERS = {"fit", "train", "add", "delete", "compact", "remove_model", "rollback"}


class _OutputError(CQASearchError):
    """Standard output cannot be written (a full disk, a closed terminal)."""


class _Stdout:
    """``sys.stdout`` while a command runs: text the output's encoding cannot represent is
    replaced (``PYTHONIOENCODING=ascii``, a C locale), and an error writing it is the
    user's environment (:class:`_OutputError`), not a bug; a closed pipe stays a
    BrokenPipeError (``cqa-search query ... | head`` ends quietly)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:
                encoding = getattr(self._stream, "encoding", None) or "ascii"
                return self._stream.write(text.encode(encoding, "replace").decode(encoding))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc) -> _OutputError:
        _discard_stdout(self._stream)
        return _OutputError(f"cannot write to standard output: {os_error_reason(exc)}")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _discard_stdout(stream) -> None:
    """Send standard output nowhere: what could not be written stays in its buffer, and
    Python's flush at exit must not fail on it again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _closed_streams() -> None:
    """Standard streams the caller closed (``>&-``, ``2>&-``, ``<&-``; Python then sets
    ``sys.stdout`` and the others to None) read and write the null device: a closed
    standard output discards the results, a closed standard error the messages (they must
    not go to standard output), a closed standard input is empty. Its descriptor gets the
    null device too, or the next file opened would take its number, and what is written
    to standard output (or a child's) would go into that file."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:  # still free: the null device on it
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))


def run_command(run, args) -> int:
    """Call ``run(args)``: a user's error prints one line and exits 1; a bug says it is one
    and exits :data:`EXIT_BUG` (``-vv`` shows its traceback). A warning prints one line
    (``-vv``: Python's, with the source line that issued it). What the machine refuses (a
    full disk, a file-size limit, standard output on a full device or in an encoding
    without some characters of the results) is the user's environment: one line, exit 1,
    and text that cannot be encoded is replaced; a standard stream the caller closed is
    the null device."""
    _closed_streams()
    verbose = getattr(args, "verbose", 0)
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    handler = logging.StreamHandler()  # without -v only warnings: said like the command's
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s") if verbose
                         else _Said())
    logging.basicConfig(level=level, handlers=[handler])
    stdout = sys.stdout
    sys.stdout = _Stdout(stdout)
    try:
        with warnings.catch_warnings():
            if verbose < 2:
                warnings.showwarning = _show_warning
            return _run(run, args, verbose, run.__module__.rpartition(".")[2])
    finally:
        sys.stdout = stdout


def _environment_error(exc, args, command) -> str:
    """The one line of an OSError the machine caused (see :data:`_ENVIRONMENT`)."""
    reason = os_error_reason(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        reason = f"cannot write: {reason}"
    if command in _INDEX_WRITERS and getattr(args, "index", None):
        reason += f" (the index {args.index} is unchanged)"
    return reason


def _close_bars() -> None:
    """Close the progress bars a failure left open: closed later (when collected), each
    would draw itself once more under the command's last line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()


def unwritable(index) -> str | None:
    """Why this process cannot write the index directory ``index`` (a read-only file
    system, no permission), or None (it can, or there is no such directory yet)."""
    if not os.path.isdir(index) or os.access(index, os.W_OK):
        return None
    try:
        read_only = bool(os.statvfs(index).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return ("it is on a read-only file system" if read_only else
            "no permission to write in its directory")


def _check_writable(args, command) -> None:
    """Refuse at once a change to an index this process cannot write (a read-only file
    system or directory), rather than after a fit or a training of minutes."""
    index = getattr(args, "index", None)
    if command not in _INDEX_WRITERS or not index or getattr(args, "dry_run", False):
        return
    reason = unwritable(index)
    if reason is not None:
        raise CQASearchError(f"cannot write the index {index}: {reason} (the index is "
                             "unchanged; nothing was done)")


def _run(run, args, verbose, command) -> int:
    try:
        _check_writable(args, command)
        status = run(args)
        sys.stdout.flush()  # an output error is seen now, not at exit
        return status
    except KeyboardInterrupt:
        _close_bars()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `cqa-search query ... | head`
        _discard_stdout(sys.stdout)
        return 0
    except Exception as exc:  # noqa: BLE001 - the one place that reports every failure
        _close_bars()
        if _user_error(exc):
            print(f"{PROG}: error: {printable(exc)}", file=sys.stderr)
            return 1
        if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT:
            print(f"{PROG}: error: {_environment_error(exc, args, command)}", file=sys.stderr)
            return 1
        if verbose >= 2:
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {printable(exc)}\n"
              f"This is a bug in cqa_search; run the command again with -vv to see where it "
              f"happened, and please report it.", file=sys.stderr)
        return EXIT_BUG


class Style:
    """ANSI styling, on for terminals (``auto``), always or never."""

    def __init__(self, color="auto", stream=None):
        stream = sys.stdout if stream is None else stream
        self.on = color == "always" or (color == "auto" and hasattr(stream, "isatty")
                                        and stream.isatty() and not os.environ.get("NO_COLOR"))

    def _wrap(self, code, text):
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    def bold(self, text):
        return self._wrap("1", text)

    def dim(self, text):
        return self._wrap("2", text)

    def match(self, text):
        return self._wrap("1;33", text)

    @property
    def marks(self):
        """(start, end) strings around highlighted words."""
        return ("\x1b[1;33m", "\x1b[0m") if self.on else ("", "")


class ListOption(argparse.Action):
    """``action`` of an option taking several values (``nargs="+"``), separated by spaces
    or commas as ``--fields`` takes them: ``--models translation,topics`` is
    ``--models translation topics``, never one value "translation,topics"."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest,
                [part.strip() for value in values for part in value.split(",") if part.strip()])


def positive_int(text) -> int:
    """argparse type of a count: a positive integer (anything else is a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {value}")
    return value


def hybrid_weight(text):
    """argparse type of ``--hybrid``: "auto", "none" (or "off") or a number in [0, 1]
    (:func:`~cqa_search.retrieval.first_stage.weight_of_text`)."""
    from ..retrieval.first_stage import weight_of_text

    try:
        return weight_of_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_field_weights_option(parser) -> None:
    """``--field-weights title=2,body=1,answers=0.5`` (query, evaluate): BM25F's weights,
    parsed by :func:`~cqa_search.retrieval.parse_field_weights` (a bad value is a usage
    error)."""
    from ..retrieval import parse_field_weights

    def weights(text):
        try:
            return parse_field_weights(text)
        except ParameterError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parser.add_argument("--field-weights", type=weights, metavar="PART=W[,...]",
                        help="search with BM25F, the questions' parts weighted so (parts: "
                             "title, body, answers; one not listed is not searched), e.g. "
                             "title=2,body=1,answers=0.5; the index needs its titles, which "
                             "build-index indexes by default")


def retrieval_model(spec=None, weights=None):
    """The retrieval model of ``--model SPEC`` (:func:`~cqa_search.retrieval.parse_model`)
    and ``--field-weights`` (``weights``: BM25F with them, its other parameters from a
    ``bm25f`` SPEC); "auto" without either (the index's: see ``SearchConfig.retrieval``).

    Raises
    ------
    QueryError
        Field weights with a SPEC of another model.
    """
    from ..retrieval import BM25F, parse_model

    if spec is None and weights is None:
        return "auto"
    model = parse_model(spec or "bm25")
    if weights is None:
        return model
    if spec is not None and not isinstance(model, BM25F):
        raise QueryError(f"--field-weights searches with bm25f: give its other parameters as "
                         f"--model bm25f:k1=..., not --model {spec}")
    return BM25F(**{**(model.get_params() if isinstance(model, BM25F) else {}), **weights})


#: The help of ``--hybrid`` (query, evaluate, serve).
HYBRID_HELP = ("the first stage: the weight a of the word-vector cosine in the hybrid score "
               "(1-a)*T/max T + a*cosine (T: the retrieval model's score), in [0, 1]; "
               "'none': the retrieval model alone (default: auto, the a stored with the "
               f"ranker by `train`, or {DEFAULT_WEIGHT:g} without one, when the index has "
               "word vectors: `cqa-search fit INDEX embeddings`)")


#: Longest title a hit shows whole (a longer one: an excerpt around its matches).
TITLE_WIDTH = 400


def format_hit(hit, presenter, terms, style, *, answer=True, width=100) -> str:
    """A hit as a few indented lines: rank, score, id, category, date (the day), the title
    and a snippet of the body with the matched words marked, and a snippet of the answer
    shown."""
    start, end = style.marks if style.on else ("", "")
    question = hit.question
    head = f"{hit.rank:>2}. {hit.score:8.3f}  {style.bold(printable(hit.doc_id))}"
    if hit.category:
        head += "  " + style.dim(f"[{printable(hit.category)}]")
    if question.date is not None:
        head += "  " + style.dim(question.date[:10])
    # the title whole, as the page shows it (an excerpt only of one longer than a few lines)
    lines = [head, "    " + (presenter.snippet(printable(question.title), terms,
                                               width=TITLE_WIDTH, start=start, end=end)
                             if question.title else
                             presenter.snippet(printable(question.body), terms, width=width,
                                               start=start, end=end))]
    if question.title and question.body:
        lines.append("    " + style.dim(presenter.snippet(printable(question.body), terms,
                                                          width=width, start=start, end=end)))
    if answer:
        shown = presenter.answer(hit)
        if shown is not None:
            label, text = shown
            lines.append("    " + style.dim(f"{label}: ") + presenter.snippet(
                printable(text), terms, width=width - len(label) - 2, start=start, end=end))
    return "\n".join(lines)


def format_first_stage(parts) -> str:
    """The two parts of a hit's hybrid first-stage score (``hit.first_stage``), e.g.
    ``0.612 = 0.3 × bm25 8.31/12.0 + 0.7 × cosine 0.52``."""
    return (f"{parts['score']:.3f} = {1 - parts['a']:.2g} × {printable(parts['term_model'])} "
            f"{parts['term']:.3g}/{parts['term_max']:.3g} + {parts['a']:.2g} × cosine "
            f"{parts['cosine']:.3f}")


def format_explanation(hit, engine, style, top=6) -> str:
    """Why a hit ranks where it does: the ranker's largest feature contributions, or the
    feature scores when no ranker is active (or its contributions depend on the other
    candidates: features normalised per query); after a hybrid first stage, first the
    two parts of the hit's first-stage score (the term model's and the word vectors')."""
    stage = "" if hit.first_stage is None else "    " + style.dim(
        "first stage " + ("" if engine.ranker is None else "(the candidates) ")) \
        + format_first_stage(hit.first_stage) + "\n"
    return stage + _ranking_explanation(hit, engine, style, top)


def _ranking_explanation(hit, engine, style, top) -> str:
    if engine.ranker is None or not engine.ranker.can_explain:
        items = sorted(hit.features.items(), key=lambda kv: -abs(kv[1]))[:top]
        label = "features: " if engine.ranker is None else \
            "features (the ranker normalises them per query: no contributions): "
        return "    " + style.dim(label) + ", ".join(f"{printable(k)} {v:.3g}" for k, v in items)
    contributions = engine.ranker.explain(hit.features)
    shown = list(contributions.items())[:top]
    rest = sum(v for _, v in list(contributions.items())[top:])
    text = ", ".join(f"{printable(k)} {v:+.3g}" for k, v in shown)
    if len(contributions) > top:
        text += f", {len(contributions) - top} more {rest:+.3g}"
    intercept = float(getattr(engine.ranker, "intercept_", 0.0))
    return "    " + style.dim("score = ") + text + (f", intercept {intercept:+.3g}"
                                                     if intercept else "")


def format_question(question, style, width=100) -> str:
    """A whole question with all its answers (for the REPL's :show)."""
    wrap = lambda text, indent: textwrap.fill(  # noqa: E731
        " ".join(printable(text).split()), width, initial_indent=indent,
        subsequent_indent=indent)
    out = [style.bold(printable(question.id))
           + (f"  [{printable(question.category)}]" if question.category else ""),
           wrap(question.title, "  ")]
    if question.body:
        out.append(wrap(question.body, "  "))
    if question.tags:
        out.append("  tags: " + printable(", ".join(question.tags)))
    for i, ans in enumerate(question.answers):
        mark = " (best)" if i == question.best_answer else ""
        out.append(style.dim(f"  answer {i + 1}{mark}:"))
        out.append(wrap(ans, "    "))
    if not question.answers:
        out.append(style.dim("  (no answers)"))
    return "\n".join(out)


def check_query_categories(engine, queries, path) -> None:
    """QueryError before any search when queries (``{"id", "category"?, ...}`` read from
    ``path``) have a category the index lacks: the collection and the index were
    categorised differently (e.g. a StackExchange index built with ``--category-from
    first_tag`` and queries converted by site)."""
    present = {c.casefold() for c in engine.categories.present()}
    unknown = [q for q in queries if isinstance(q.get("category"), str)
               and q["category"].strip() and q["category"].strip().casefold() not in present]
    if unknown:
        first = unknown[0]
        raise QueryError(
            f"{counted(len(unknown), 'query')} of {path} {'has' if len(unknown) == 1 else 'have'}"
            f" a category this index does not have (the first: query {first['id']!r}, {first['category']!r}): the queries "
            "and the index must be categorised alike (convert stackexchange takes the "
            "--category-from that build-index took)")


def unjudged_note(engine, queries, qrels) -> str | None:
    """A warning when the questions the qrels judge relevant (for ``queries``) are not all
    in the index (qrels of another archive: every AP would be 0 without a word), else
    None."""
    wanted = {q["id"] for q in queries}
    relevant = {d for qid, judged in qrels.items() if qid in wanted
                for d, label in judged.items() if label > 0}
    missing = sorted(d for d in relevant if d not in engine.archive)
    if not missing:
        return None
    return (f"{len(missing):,} of the {len(relevant):,} questions the qrels judge relevant are "
            f"not in the index (the first: {missing[0]!r})"
            + (": every query scores 0; are the qrels of this archive?"
               if len(missing) == len(relevant) else
               "; the queries count them as missed"))


def note_shards(path, file=None, *, ray=None) -> None:
    """On a terminal, say that opening the sharded index at ``path`` with ``ray`` (see
    :meth:`SearchEngine.open <cqa_search.SearchEngine.open>`) starts its Ray actors (a
    local Ray session first): seconds pass before its first result or prompt. Nothing is
    said when its shards are read in this process."""
    from ..distributed._ray import runs_on_ray

    file = sys.stderr if file is None else file
    if not file.isatty() or not runs_on_ray(ray):
        return
    from ..index.store import open_index

    try:
        shards = open_index(path).manifest.get("shards")
    except (CQASearchError, OSError, ValueError):
        return  # opening it for the search says what is wrong
    if shards:
        print(f"{PROG}: note: {path} has {len(shards)} shards: starting their Ray actors "
              "(and a local Ray session unless one runs) takes a few seconds ...", file=file,
              flush=True)


def os_error_reason(exc: OSError) -> str:
    """An OSError in a few words, with the path it concerns."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        path = os.fspath(exc.filename)  # name the part of the path that is a file
        while path and not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        if os.path.exists(path) and not os.path.isdir(path):
            return f"{path} is not a directory"
    reason = exc.strerror or str(exc)
    return f"{reason}: {exc.filename}" if exc.filename else reason
