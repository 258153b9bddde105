"""``cqa-search export-ranker INDEX``: a stored ranker as JSON or in RankLib's linear model
format (for the learning-to-rank plugins of Elasticsearch and OpenSearch)."""
from __future__ import annotations

import argparse
import json

from ..exceptions import ParameterError
from ..features import GIVEN_FEATURES, search_ranker_name, uses_given
from ..index.models import load_model
from ..index.store import open_index
from ..ranking.export import FORMATS, export_ranker
from ._common import (COMMANDS, add_common_options, json_text, os_error_reason, printable,
                      run_command)

HELP = COMMANDS["export-ranker"][1]


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write it to FILE (default: standard output)")
    parser.add_argument("--format", choices=FORMATS, default="json",
                        help="json: the weights, the normalisation and the folded weights; "
                             "ranklib: RankLib's linear model (the normalisation folded into "
                             "one weight per feature, features numbered in the order its "
                             "header lists) (default: %(default)s)")
    parser.add_argument("--name", default="ranker",
                        help="the stored ranker (default: %(default)s)")
    add_common_options(parser)


def run(args) -> int:
    stored = open_index(args.index)
    entry = stored.models.get(args.name)
    rankers = [n for n, e in stored.models.items() if e["kind"] == "ranker"]
    if entry is None or entry["kind"] != "ranker":
        raise ParameterError(f"this index has no ranker {args.name!r} (rankers: "
                             f"{', '.join(rankers) or 'none; train one with `cqa-search train`'})")
    ranker = load_model(stored, args.name)
    if uses_given(ranker):
        search = search_ranker_name(args.name)
        candidates = ("cqa-search ranks candidates given with their scores with it (a rerank "
                      f"of a run: the features {' and '.join(GIVEN_FEATURES)} are a "
                      "candidate's given score and 1/rank); its free searches use "
                      + (f"the ranker {search!r}" if search in stored.models else
                         "the retrieval model's order"))
    else:
        candidates = ("cqa-search reranks the top n_candidates (100 by default) of its "
                      "retrieval model (bm25 by default) with it")
    text = export_ranker(ranker, args.format, index=stored.path, generation=stored.generation,
                         model=args.name, created=entry.get("created"), candidates=candidates)
    if args.output is None:  # (a terminal: its JSON with DEL and C1 escaped too)
        text = json_text(json.loads(text), indent=1) if args.format == "json" else \
            printable(text)
        print(text.rstrip("\n"))
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ParameterError(f"cannot write {args.output}: {os_error_reason(exc)}") from None
    print(f"ranker {args.name!r} of {stored.path} written to {args.output} ({args.format})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search export-ranker", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
