"""``cqa-search train INDEX --queries Q --qrels R``: learn a ranker and store it in the index.

By default the ranker is chosen by query-grouped cross-validation
(:class:`~cqa_search.ranking.LinearRankerCV`): its regularisation, the model families that
earn their place, and whether it ranks the candidates better than the retrieval model
alone on the training queries; when it does not, nothing is stored (and a ranker stored
before under the same name is removed). The whole training is then cross-validated too
(``--no-assess``: not), and the report says what MAP to expect on new queries against the
first stage and the retrieval model alone, with 95% intervals.

With ``--candidates``, a ranker that reads the candidates' given scores (``given_score``,
``given_rrank``) ranks only candidates given with scores (``evaluate --candidates``); a
ranker without them, trained the same way, is stored beside it as ``NAME-search`` for free
searches (``query``, the server), which have no given scores.
"""
from __future__ import annotations

import argparse
import inspect
import json

from ..evaluation import read_qrels, read_queries, read_run
from ..exceptions import QueryError
from ..ranking import LEARNERS
from ..training import train_ranker
from ._common import (COMMANDS, ListOption, add_common_options, hybrid_weight, positive_int,
                      run_command)

HELP = COMMANDS["train"][1]
#: The defaults of the options: those of :func:`~cqa_search.training.train_ranker`.
DEFAULTS = {p.name: p.default for p in inspect.signature(train_ranker).parameters.values()}


def _param(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a learner option is KEY=VALUE; got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def configure(parser) -> None:
    parser.add_argument("index", metavar="INDEX", help="index directory (from build-index)")
    parser.add_argument("--queries", required=True, metavar="FILE",
                        help="training queries (JSONL or qid<TAB>text)")
    parser.add_argument("--qrels", required=True, metavar="FILE",
                        help="judgments of the queries: TREC qrels (qid iter doc_id "
                             "relevance) or BEIR's TSV; relevance >= 1: relevant")
    parser.add_argument("--candidates", metavar="RUN",
                        help="rank these candidates (TREC run; their scores are the given_* "
                             "features) instead of the top -k of full retrieval; a ranker "
                             "that reads given_* ranks only candidates given with scores, and "
                             "one without them is stored as NAME-search for free searches")
    parser.add_argument("-k", type=positive_int, default=None,
                        help="candidates per query from full retrieval (default: the "
                             "engine's n_candidates, 100: the candidates search reranks)")
    parser.add_argument("--learner", choices=list(LEARNERS), default=DEFAULTS["learner"],
                        help="how the weights are learned (default: %(default)s)")
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="KEY=VALUE",
                        help="a learner option (value read as JSON when it parses), e.g. "
                             "C=0.1, margin=even, base='[\"powell\",\"ranksvm\"]'; repeatable; "
                             "fixing the option cross-validation would choose (C, alpha) "
                             "turns that choice off")
    parser.add_argument("--normalize", choices=["zscore", "minmax", "query", "none"],
                        default=DEFAULTS["normalize"],
                        help="feature normalisation: over the training candidates, or per "
                             "query (query: no --explain) (default: %(default)s)")
    parser.add_argument("--max-iter", type=int, default=DEFAULTS["max_iter"], metavar="N",
                        help="iteration limit of the learner (default: the learner's, or "
                             "chosen by cross-validation for perceptron and boosting)")
    parser.add_argument("--tol", type=float, default=DEFAULTS["tol"],
                        help="tolerance (default: %(default)g)")
    parser.add_argument("--early-stopping", action="store_true",
                        help="choose the number of iterations on held-out training queries "
                             "(perceptron, boosting, lambdarank; with --no-cv)")
    parser.add_argument("--random-state", type=int, default=DEFAULTS["random_state"],
                        metavar="SEED", help="seed of every random choice (default: "
                                             "%(default)s)")
    parser.add_argument("--features", action=ListOption, metavar="PREFIX",
                        help="use only the feature columns whose names start with one of "
                             "these prefixes (e.g. bm25 lm_ given_)")
    parser.add_argument("--exclude", action=ListOption, metavar="PREFIX",
                        help="leave out the feature columns whose names start with these "
                             "prefixes (e.g. given_)")
    parser.add_argument("--graded", action="store_true",
                        help="pairwise learners also order the relevance grades (default: "
                             "relevant or not)")
    parser.add_argument("--cv", type=int, default=DEFAULTS["cv"], metavar="N",
                        help="folds of the query-grouped cross-validation that chooses the "
                             "regularisation and the features and checks the ranker against "
                             "the retrieval order (default: %(default)s)")
    parser.add_argument("--all-features", action=argparse.BooleanOptionalAction,
                        default=DEFAULTS["all_features"],
                        help="keep every model family; --no-all-features: forward selection "
                             "of the families by cross-validation (default: all)")
    parser.add_argument("--no-cv", action="store_true",
                        help="no cross-validation: fit the learner with its options on all "
                             "the features and store it")
    parser.add_argument("--name", default=DEFAULTS["name"],
                        help="model name in the index (default: ranker, the one search uses); "
                             "NAME-search, the ranker of free searches of a ranker that reads "
                             "given_*, belongs to it (replaced or removed)")
    parser.add_argument("--hybrid", type=hybrid_weight, default=DEFAULTS["hybrid"],
                        metavar="auto|A|none",
                        help="on an index with word vectors (`cqa-search fit INDEX "
                             "embeddings`), the first stage whose candidates the ranker "
                             "reorders, stored with it: auto chooses the weight a of the "
                             "cosine in (1-a)*bm25/max bm25 + a*cosine by the training "
                             "queries' recall of their relevant questions; A fixes it; none: "
                             "the retrieval model alone (default: %(default)s; full "
                             "retrieval only)")
    parser.add_argument("--no-assess", action="store_true",
                        help="do not cross-validate the whole training (the MAP to expect on "
                             "new queries, with intervals; it costs --cv times the learning)")
    parser.add_argument("--dry-run", action="store_true", help="train and report, store nothing")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def run(args) -> int:
    qrels = read_qrels(args.qrels)
    queries = read_queries(args.queries)
    if not any(q["id"] in qrels for q in queries):
        raise QueryError(f"none of the queries of {args.queries} is judged in {args.qrels}")
    candidates = read_run(args.candidates) if args.candidates else None
    report = train_ranker(
        args.index, queries, qrels, candidates, k=args.k, learner=args.learner,
        params=dict(args.param), normalize=None if args.normalize == "none" else args.normalize,
        max_iter=args.max_iter, tol=args.tol, early_stopping=args.early_stopping,
        random_state=args.random_state, features=args.features, exclude=args.exclude,
        graded=args.graded, cv=args.cv, all_features=args.all_features, no_cv=args.no_cv,
        name=args.name, hybrid=args.hybrid, assess=not args.no_assess, dry_run=args.dry_run,
        progress=not args.quiet)
    print(report)
    for line in next_steps(report):
        print(line)
    return 0


def next_steps(report) -> list:
    """The commands that use what a training stored (a
    :class:`~cqa_search.training.TrainReport`): the face says them, not the library."""
    index, name, search = report.index, report.name, report.search
    use = "" if name == "ranker" else f" --ranker {name}"
    query = f"search with it:   cqa-search query {index}{use} \"your question\""
    if not report.stored:
        return [query] if search is not None and search.stored else []
    if search is None and report.improves:
        return [query, f"evaluate it:      cqa-search evaluate {index}{use} --queries Q "
                       "--qrels R"]
    if search is None:
        return []
    return [f"evaluate it:      cqa-search evaluate {index}{use} --candidates RUN --queries Q "
            "--qrels R"] + ([query] if search.stored else [])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search train", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
