"""``cqa-search build-index ARCHIVE... -o DIR``: index an archive."""
from __future__ import annotations

import argparse
import os
import sys

from ..analysis import STEMMERS, STOPWORD_LISTS, Analyzer
from ..exceptions import CQASearchError, ParameterError
from ..index.build import DEFAULT_FIELDS, build_index
from ..index.models import FAMILIES
from ..index.term_index import FIELDS
from ..readers import FORMATS, detect_format
from ._common import (COMMANDS, ListOption, add_common_options, os_error_reason,
                      positive_int, run_command, warning_line)

HELP = COMMANDS["build-index"][1]


def _columns(text):
    """Parse ``key=col,key=col`` (``answers=a1+a2`` for several columns)."""
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise argparse.ArgumentTypeError(
                f"expected KEY=COLUMN[,KEY=COLUMN...]; got {item!r}")
        cols = [c.strip() for c in value.split("+")]
        out[key.strip()] = cols if len(cols) > 1 else cols[0]
    return out


def configure(parser) -> None:
    parser.add_argument("archive", nargs="+", metavar="ARCHIVE",
                        help="archive files (or StackExchange dump folders), read in order")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="index directory (default: indexes/<name of the first archive>); "
                             "an existing index there is replaced")
    parser.add_argument("--fields", default=",".join(DEFAULT_FIELDS),
                        help=f"comma-separated fields to index, among {', '.join(FIELDS)} "
                             f"(default: %(default)s)")
    analysis = parser.add_argument_group("text analysis (saved with the index)")
    analysis.add_argument("--stem", choices=[*STEMMERS, "none"], default="snowball",
                          help="stemmer (default: %(default)s)")
    analysis.add_argument("--stopwords", default="english", metavar="english|lucene|none|FILE",
                          help="stopword list: English (scikit-learn's 318 words), lucene "
                               "(Lucene's 33), none, or a file with one word per line "
                               "(default: %(default)s)")
    analysis.add_argument("--token-pattern", default=None, metavar="REGEX",
                          help="the tokens: matches of this regular expression (default: "
                               "words of 2+ word characters, (?u)\\w{2,})")
    add_reader_options(parser)
    parser.add_argument("--models", action=ListOption, default=[], metavar="FAMILY",
                        help="after indexing, train these model families with their default "
                             "options (like `cqa-search fit DIR FAMILY`), in this order "
                             "whatever the order given (a multiview model's ibm1 view reads "
                             "the translation model): " + ", ".join(FAMILIES))
    scale = parser.add_argument_group("scale-out on Ray (pip install 'cqa-search[distributed]')")
    scale.add_argument("--shards", type=positive_int, metavar="N",
                       help="split the archive into N shard indexes built in parallel on Ray, "
                            "searched by fan-out (`cqa-search query DIR` as usual)")
    scale.add_argument("--ray", metavar="ADDRESS",
                       help="with --shards: build on the Ray cluster at ADDRESS (default: a "
                            "local Ray session; the index directory must be on storage every "
                            "node sees)")
    parser.add_argument("-j", "--jobs", type=_jobs, default=-1, metavar="N",
                        help="cores at work, threads analysing the text beside the one "
                             "reading it (default: all, -1; 1: one thread); the index is the "
                             "same")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def _jobs(text):
    """``--jobs``: a positive number of processes, or -1 for one per core."""
    if text.strip() == "-1":
        return -1
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or -1 (one per core); "
                                         f"got {text!r}") from None


def add_reader_options(parser) -> None:
    """The options of the archive readers (build-index, add)."""
    parser.add_argument("--format", choices=list(FORMATS),
                        help="archive format (default: detected from each file)")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="skip malformed records and report how many, instead of stopping")
    readers = parser.add_argument_group("reader options")
    readers.add_argument("--columns", type=_columns, metavar="KEY=COL,...",
                         help="CSV/TSV column (JSONL key) mapping, e.g. "
                              "id=qid,title=subject,answers=a1+a2")
    readers.add_argument("--list-separator", metavar="SEP",
                         help="CSV/TSV: separator of the items of a list cell (default |)")
    readers.add_argument("--auto-id", action="store_true", default=None,
                         help="CSV/TSV without an id column: use <file>:<line> as ids")
    readers.add_argument("--category-from", choices=["site", "first_tag"],
                         help="StackExchange: category = site name (default) or first tag")
    readers.add_argument("--category-level", choices=["maincat", "cat", "subcat"],
                         help="Yahoo! L6: which category level is the category (default maincat)")


def reader_options(args) -> dict:
    """The reader options given (see :func:`add_reader_options`)."""
    return {name: value for name, value in (
        ("columns", args.columns), ("list_separator", args.list_separator),
        ("auto_id", args.auto_id), ("category_from", args.category_from),
        ("category_level", args.category_level))
        if value is not None}


def _analyzer(args) -> Analyzer:
    stopwords = args.stopwords
    if stopwords == "none":
        stopwords = None
    elif stopwords not in STOPWORD_LISTS:  # a file
        if not os.path.isfile(stopwords):
            raise ParameterError(f"--stopwords must be 'english', 'lucene', 'none' or a file; no "
                                 f"such file: {stopwords}")
        try:
            with open(stopwords, encoding="utf-8") as f:
                stopwords = [w.strip().lower() for w in f if w.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            reason = os_error_reason(exc) if isinstance(exc, OSError) else "not valid UTF-8"
            raise CQASearchError(f"cannot read --stopwords {stopwords}: {reason}") from None
    pattern = {} if args.token_pattern is None else {"token_pattern": args.token_pattern}
    return Analyzer(stem=None if args.stem == "none" else args.stem, stopwords=stopwords,
                    **pattern)


def _one_stackexchange_site(args, summary) -> bool:
    """Whether the build read StackExchange dumps into a single category (the site's)."""
    if summary.n_categories != 1 or args.category_from == "first_tag":
        return False
    return all((args.format or detect_format(path)) == "stackexchange" for path in args.archive)


def run(args) -> int:
    unknown = [m for m in args.models if m not in FAMILIES]
    if unknown:
        raise ParameterError(f"--models: unknown family {unknown[0]!r}; families: "
                             f"{', '.join(FAMILIES)}")
    *archives, last = args.archive
    if args.output is None and archives and not os.path.exists(last):
        # `build-index ARCHIVE DIR`: the directory read as a second archive
        raise ParameterError(f"no such archive: {last}; the index directory is given with "
                             f"-o: cqa-search build-index {' '.join(archives)} -o {last}")
    options = reader_options(args)
    output = args.output
    if output is None:
        first = os.path.basename(os.path.normpath(args.archive[0]))
        output = os.path.join("indexes", first.split(".")[0] or "index")
    fields = tuple(f.strip() for f in args.fields.split(",") if f.strip())
    analyzer = _analyzer(args)
    if args.ray is not None and args.shards is None:
        raise ParameterError("--ray needs --shards (the number of shards to build)")
    try:
        if args.shards is not None:
            from ..distributed.build import build_sharded_index

            summary = build_sharded_index(args.archive, output, args.shards, address=args.ray,
                                          analyzer=analyzer, fields=fields, format=args.format,
                                          skip_invalid=args.skip_invalid,
                                          progress=not args.quiet, **options)
        else:
            summary = build_index(args.archive, output, analyzer=analyzer, fields=fields,
                                  format=args.format, skip_invalid=args.skip_invalid,
                                  progress=not args.quiet, n_jobs=args.jobs, **options)
    except OSError as exc:  # the readers turn their own I/O errors into ArchiveError
        kept = " (the index already there is unchanged)" if os.path.isdir(output) else ""
        raise CQASearchError(
            f"cannot write the index {output}: {os_error_reason(exc)}{kept}") from None
    print(summary)
    if summary.n_skipped:
        print(warning_line(f"{summary.n_skipped} invalid record(s) were skipped; the first:"),
              file=sys.stderr)
        for error in summary.skipped_examples:
            print(f"  {error}", file=sys.stderr)
    if _one_stackexchange_site(args, summary):
        print(warning_line(
            "every question is in one category, the site's name: the category facet and "
            "filter have nothing to choose, and the topic models (--models topics, `cqa-search "
            "fit INDEX topics`) learn topics per category; --category-from first_tag makes "
            "each question's first tag its category"), file=sys.stderr)
    if args.models:  # the fits import scikit-learn: only when asked for
        from ..training import fit_family
    families = sorted(set(args.models), key=list(FAMILIES).index)  # the fitting order
    for i, family in enumerate(families):
        print(f"\ntraining {family} ...")
        try:
            print(fit_family(output, family, progress=not args.quiet))
        except BaseException:  # the index is built: say so, and how to fit the rest
            print(_unfitted_note(output, summary, families[:i], families[i:]),
                  file=sys.stderr, flush=True)
            raise
    return 0


def _unfitted_note(output, summary, fitted, unfitted) -> str:
    """The state a failed (or interrupted) fit of ``--models`` leaves: the index is built
    and searchable, with the families fitted before; the rest wait for ``cqa-search fit``."""
    kept = f"; fitted: {', '.join(fitted)}" if fitted else ""
    return (f"cqa-search: note: the index {output} is built ({summary.n_questions:,} "
            f"questions{kept}); not fitted: {', '.join(unfitted)} ("
            + ", ".join(f"`cqa-search fit {output} {family}`" for family in unfitted) + ")")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search build-index", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
