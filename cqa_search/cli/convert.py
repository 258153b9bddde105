"""``cqa-search convert {semeval,stackexchange,stackfaq} ... -o DIR``: judged collections."""
from __future__ import annotations

import argparse

from ..evaluation.datasets import (convert_semeval, convert_stackexchange, convert_stackfaq)
from ..exceptions import CQASearchError
from ._common import COMMANDS, add_common_options, os_error_reason, run_command

HELP = COMMANDS["convert"][1]


def configure(parser) -> None:
    sub = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    p = sub.add_parser("semeval", help="SemEval-2016 Task 3 XML (subtask B: original questions, "
                                       "their 10 related questions, labels)")
    p.add_argument("xml", nargs="+", metavar="XML", help="2016 XML files (train, dev, test)")
    p.add_argument("--relevancy", nargs="+", default=[], metavar="FILE",
                   help="official .relevancy gold files (override the XML labels)")
    p.add_argument("--extra-archive", nargs="+", default=[], metavar="FILE",
                   help="more archive files appended to the archive (e.g. the 2015 threads)")
    p.add_argument("--full-retrieval", action="store_true",
                   help="lay out for full retrieval: no candidates.run, each thread once in "
                        "the archive (repeats merged, judgments following), a thread that is "
                        "a query itself under the query's id")
    p.add_argument("--keep-labels", action="store_true",
                   help="keep the comments' relevance labels (answer_labels) in the archive; "
                        "only for a training archive: labels of an evaluation split must "
                        "never reach an index (default: dropped)")
    p = sub.add_parser("stackexchange", help="StackExchange dumps: queries are questions closed "
                                             "as duplicates, relevant = their originals")
    p.add_argument("dumps", nargs="+", metavar="DUMP_DIR")
    p.add_argument("--category-from", choices=["site", "first_tag"], default="site",
                   help="category = site name (default) or first tag: give the one the "
                        "index is built with (build-index --category-from), so that the "
                        "queries' categories are the index's")
    p = sub.add_parser("stackfaq", help="StackFAQ XML: paraphrase queries against their thread")
    p.add_argument("xml", metavar="XML")
    for p in sub.choices.values():
        p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
        add_common_options(p)


def run(args) -> int:
    try:
        if args.source == "semeval":
            summary = convert_semeval(args.xml, args.output, relevancy=args.relevancy,
                                      extra_archive=args.extra_archive,
                                      keep_labels=args.keep_labels,
                                      full_retrieval=args.full_retrieval)
        elif args.source == "stackexchange":
            summary = convert_stackexchange(args.dumps, args.output,
                                            category_from=args.category_from)
        else:
            summary = convert_stackfaq(args.xml, args.output)
    except OSError as exc:  # the readers turn their own I/O errors into ArchiveError
        raise CQASearchError(f"cannot write to {args.output}: {os_error_reason(exc)}") from None
    print(summary)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search convert", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
