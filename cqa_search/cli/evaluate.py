"""``cqa-search evaluate INDEX --queries Q --qrels R``: MAP, MRR, P@k of a model or a run."""
from __future__ import annotations

import argparse
import sys

from ..engine import SearchConfig
from ..evaluation import (CONVENTIONS, compare, evaluate, protocol_convention, read_qrels,
                          read_queries, read_run, run_queries, summarize, write_run)
from ..evaluation.significance import N_RESAMPLES
from ..evaluation.trec import check_writable
from ..exceptions import QueryError
from ._common import (COMMANDS, HYBRID_HELP, ListOption, add_common_options,
                      add_field_weights_option, check_query_categories, hybrid_weight,
                      positive_int, retrieval_model, run_command, unjudged_note, warning_line)
from .query import open_engine

HELP = COMMANDS["evaluate"][1]
#: Metrics printed by default: of a full retrieval (or a given run), and of a rerank.
METRICS = ("map", "mrr", "p@1", "p@5", "p@10", "ndcg@10")
RERANK_METRICS = ("map", "mrr", "p@1", "p@5", "p@10")


def _protocol(args) -> tuple:
    """``(convention, metrics, what)``: the options given, else the defaults of the
    protocol (the convention: :func:`~cqa_search.evaluation.protocol_convention`, the
    rule of the Python API's ``evaluate`` too)."""
    rerank = args.candidates is not None
    convention = args.convention or protocol_convention(rerank)
    metrics = args.metrics or list(RERANK_METRICS if rerank else METRICS)
    what = ("rerank of the given candidates" if rerank else
            "the run given" if args.run is not None else "full retrieval of the archive")
    return convention, metrics, what


def configure(parser) -> None:
    parser.add_argument("index", nargs="?", metavar="INDEX",
                        help="index directory (omit with --run to score an existing run)")
    parser.add_argument("--queries", metavar="FILE", help="queries (JSONL or qid<TAB>text)")
    parser.add_argument("--qrels", required=True, metavar="FILE",
                        help="judgments: TREC qrels (qid iter doc_id relevance) or BEIR's TSV "
                             "(query-id, corpus-id, score); relevance >= 1: relevant")
    parser.add_argument("--candidates", metavar="RUN",
                        help="rerank these candidates (TREC run) instead of searching the archive")
    parser.add_argument("--run", metavar="RUN", help="score this TREC run instead of an index")
    parser.add_argument("--convention", choices=CONVENTIONS,
                        help="trec: trec_eval semantics, AP and recall over every relevant "
                             "document (the default, but with --candidates); semeval: the "
                             "SemEval-2016 scorer, top 10 (P@K and R@K with K > 10 as at 10), "
                             "ties in run order, every judged query counts, AP and R@K over the "
                             "relevant documents the run holds (the rerank protocol: the "
                             "default with --candidates; on a full retrieval it ignores the "
                             "relevant documents never retrieved)")
    parser.add_argument("--model", metavar="SPEC",
                        help="retrieval model, e.g. bm25, lm-jm:lam=0.5, lm-dir:mu=500, vsm, "
                             "answers-bm25, bm25f:title=2,body=1,k1=1.2 (default: bm25); "
                             "given, it is evaluated alone, without the index's ranker "
                             "(--ranker NAME: that ranker reorders its candidates)")
    add_field_weights_option(parser)
    parser.add_argument("--ranker", metavar="NAME|none",
                        help="the stored ranker that orders the candidates: the full pipeline "
                             "(default: the index's 'ranker' when it has one; 'none': the "
                             "retrieval model alone); without --candidates, one that reads "
                             "the given-run features ranks with its NAME-search")
    parser.add_argument("--hybrid", type=hybrid_weight, default="auto", metavar="A|none",
                        help=HYBRID_HELP + "; full retrieval only")
    parser.add_argument("--metrics", action=ListOption,
                        help="map, mrr, p@K, r@K, ndcg@K (default: "
                             f"{' '.join(RERANK_METRICS)} with --candidates, else "
                             f"{' '.join(METRICS)})")
    parser.add_argument("-k", type=positive_int, default=100,
                        help="depth of full retrieval (default: 100)")
    parser.add_argument("--run-out", metavar="FILE",
                        help="write the run (TREC format; trec_eval on it gives the figures "
                             "printed)")
    parser.add_argument("--compare", metavar="RUN",
                        help="another run: print its scores, the difference and p-values "
                             "(paired t-test, randomization test)")
    parser.add_argument("--per-query", action="store_true", help="print the per-query table")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def _label(args, model) -> str:
    """The run's name of the retrieval model: ``--model`` as given (the engine's model's
    name by default), or ``bm25f:title=2,body=1,answers=0`` with ``--field-weights``."""
    if args.field_weights is None:
        return args.model or model.feature_name
    return "bm25f:" + ",".join(f"{p}={w:g}" for p, w in args.field_weights.items())


def _table(rows: dict) -> str:
    import pandas as pd

    df = pd.DataFrame(rows).T
    df.columns = [c.upper() for c in df.columns]
    return df.to_string(float_format=lambda v: f"{v:.2f}")


def run(args) -> int:
    if args.run is not None and args.index is not None:
        raise QueryError("give either INDEX or --run, not both")
    if args.run is None and (args.index is None or args.queries is None):
        raise QueryError("evaluate needs INDEX and --queries (or --run RUN)")
    model = retrieval_model(args.model, args.field_weights)
    if args.run_out:
        check_writable(args.run_out)  # before the searching
    qrels = read_qrels(args.qrels)
    if args.run is not None:
        run_, label = read_run(args.run), args.run
        if not any(q in qrels for q in run_):  # mismatched files: every AP 0, or no query
            raise QueryError(f"none of the queries of {args.run} is judged in {args.qrels}")
    else:
        candidates = read_run(args.candidates) if args.candidates else None
        alone = {"ranker": None} if args.model is not None and args.ranker is None else {}
        engine = open_engine(args, given=candidates is not None, retrieval=model, **alone)
        ranker = engine.ranker_name if candidates is None else engine.given_ranker_name
        if ranker is None:  # the first stage alone: no features to compute
            engine = engine.with_config(SearchConfig(retrieval=model, features=(), ranker=None,
                                                     hybrid=args.hybrid))
        queries = read_queries(args.queries)
        if not any(q["id"] in qrels for q in queries):  # mismatched files: every AP 0
            raise QueryError(f"none of the queries of {args.queries} is judged in {args.qrels}"
                             if queries else f"{args.queries} holds no queries")
        check_query_categories(engine, queries, args.queries)
        note = unjudged_note(engine, queries, qrels)
        if note:
            print(warning_line(note), file=sys.stderr)
        run_ = run_queries(engine, queries, candidates=candidates, k=args.k,
                           progress=not args.quiet)
        a = engine.hybrid_weight if candidates is None else 0.0
        label = _label(args, engine.config.retrieval) + (f"+hybrid{a:g}" if a else "") \
            + (f"+{ranker}" if ranker is not None else "")
    convention, metrics, what = _protocol(args)
    if args.run_out:  # in the convention's order: the file evaluates to what is printed
        write_run(run_, args.run_out, tag=label.replace(" ", "_"), convention=convention)
    per_query = evaluate(run_, qrels, metrics=metrics, convention=convention)
    print(f"{len(per_query)} queries evaluated ({convention} convention, {what})")
    rows = {label: summarize(per_query, percent=True)}
    if args.compare:
        other = evaluate(read_run(args.compare), qrels, metrics=metrics, convention=convention)
        rows[args.compare] = summarize(other, percent=True)
        stats = compare(per_query, other, n_resamples=N_RESAMPLES)
        rows["difference"] = stats["diff"] * 100
        rows["p (t-test)"] = stats["p_ttest"]
        rows["p (randomization)"] = stats["p_randomization"]
    print(_table(rows))
    if args.compare:
        n = int(stats["n_queries"].iloc[0])
        # (scipy's test is exact, over all 2**n swaps of the pairs, when they are fewer)
        how = (f"exact: all {2 ** n:,} swaps of the pairs" if 2 ** n <= N_RESAMPLES
               else f"{N_RESAMPLES:,} random swaps of the pairs, seed 0")
        print(f"difference = {label} minus {args.compare} (positive: {label} scores higher) "
              f"on the {n} queries both runs have; two-sided p-values: paired t-test, "
              f"randomization test ({how})")
    if args.per_query:
        print((per_query * 100).to_string(float_format=lambda v: f"{v:.2f}"))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search evaluate", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
