"""``cqa-search train INDEX --queries Q --qrels R``: learn a ranker and store it in the index."""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ..engine import SearchConfig, SearchEngine
from ..evaluation import feature_table, read_qrels, read_queries, read_run
from ..exceptions import QueryError
from ..index.models import add_model
from ..ranking import LEARNERS, LinearRanker, cross_validate
from ._common import COMMANDS, add_common_options, positive_int, run_command

HELP = COMMANDS["train"][1]


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
                        help="TREC qrels of the queries (relevance >= 1: relevant)")
    parser.add_argument("--candidates", metavar="RUN",
                        help="rank these candidates (TREC run; their scores are the given_* "
                             "features) instead of the top -k of full retrieval")
    parser.add_argument("-k", type=positive_int, default=100,
                        help="candidates per query from full retrieval (default: 100)")
    parser.add_argument("--learner", choices=list(LEARNERS), default="powell",
                        help="how the weights are learned (default: %(default)s)")
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="KEY=VALUE",
                        help="a learner option (value read as JSON when it parses), e.g. "
                             "C=0.1, margin=even, base='[\"powell\",\"ranksvm\"]'; repeatable")
    parser.add_argument("--normalize", choices=["zscore", "minmax", "none"], default="zscore",
                        help="feature normalisation (default: %(default)s)")
    parser.add_argument("--max-iter", type=int, default=None, metavar="N",
                        help="iteration limit of the learner (default: the learner's)")
    parser.add_argument("--tol", type=float, default=1e-4, help="tolerance (default: 1e-4)")
    parser.add_argument("--early-stopping", action="store_true",
                        help="choose the number of iterations on held-out training queries "
                             "(perceptron, boosting, lambdarank)")
    parser.add_argument("--random-state", type=int, default=0, metavar="SEED",
                        help="seed of every random choice (default: 0)")
    parser.add_argument("--features", nargs="+", metavar="PREFIX",
                        help="use only the feature columns whose names start with one of "
                             "these prefixes (e.g. bm25 lm_ given_)")
    parser.add_argument("--exclude", nargs="+", metavar="PREFIX",
                        help="leave out the feature columns whose names start with these "
                             "prefixes (e.g. given_)")
    parser.add_argument("--graded", action="store_true",
                        help="pairwise learners also order the relevance grades (default: "
                             "relevant or not)")
    parser.add_argument("--cv", type=int, metavar="N",
                        help="also report the N-fold query-grouped cross-validated MAP")
    parser.add_argument("--name", default="ranker",
                        help="model name in the index (default: ranker, the one search uses)")
    parser.add_argument("--dry-run", action="store_true", help="train and report, store nothing")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common_options(parser)


def _columns(names, keep, drop):
    cols = [j for j, n in enumerate(names)
            if (not keep or n.startswith(tuple(keep))) and not (drop and n.startswith(tuple(drop)))]
    if not cols:
        raise QueryError(f"no feature column is left (features: {', '.join(names)})")
    return cols


def _pairs(y, qid):
    total = n_useful = 0
    for q in np.unique(qid):
        yq = y[qid == q]
        n = int(np.sum(yq[:, None] > yq[None, :]))
        total += n
        n_useful += n > 0
    return total, n_useful


def summary(ranker, *, n_queries, n_useful, n_rows, n_pairs, cv=None) -> str:
    """The training report: learner, data, MAP, and the weight of every feature."""
    params = ranker.params or {}
    lines = [f"learner      {ranker.learner}"
             + (" (" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")" if params else ""),
             f"queries      {n_queries} judged, {n_useful} with candidates of different relevance",
             f"candidates   {n_rows}",
             f"pairs        {n_pairs} (candidate pairs of different relevance)",
             f"iterations   {ranker.n_iter_}",
             f"training MAP {100 * ranker.train_score_:.2f}"]
    if ranker.init_score_ is not None:
        lines[-1] += f" (from {100 * ranker.init_score_:.2f} at the start)"
    if cv is not None:
        lines.append(f"{len(cv)}-fold MAP   {100 * cv.mean():.2f} (sd {100 * cv.std():.2f} "
                     "over folds, query-grouped)")
    info = ranker.learner_info_
    if info.get("base") is not None:
        lines.append("base rankers " + ", ".join(
            f"{b} {w:+.3f}" for b, w in zip(info["base"], info["meta_coef"])))
    if info.get("base_feature") is not None:
        lines.append(f"base score   {info['base_feature']} (alpha_0 {info['alpha0']:.3f})")
    lines.append("")
    lines.append(f"{'feature':<22} {'weight':>9} {'mean':>10} {'scale':>10}  thresholds")
    n_steps = np.bincount(ranker.step_feature_, minlength=ranker.n_features_in_)
    for j, name in enumerate(ranker.feature_names_in_):
        lines.append(f"{name:<22} {ranker.coef_[j]:>9.4f} {ranker.norm_offset_[j]:>10.4g} "
                     f"{ranker.norm_scale_[j]:>10.4g}  {n_steps[j] or ''}")
    lines.append("(weights of the normalised features: (value - mean) / scale)")
    return "\n".join(lines)


def run(args) -> int:
    if args.cv is not None and args.cv < 2:
        raise QueryError(f"--cv must be at least 2; got {args.cv}")
    engine = SearchEngine.open(args.index, config=SearchConfig(ranker=None))
    qrels = read_qrels(args.qrels)
    queries = [q for q in read_queries(args.queries) if q["id"] in qrels]
    if not queries:
        raise QueryError(f"none of the queries of {args.queries} is judged in {args.qrels}")
    candidates = read_run(args.candidates) if args.candidates else None
    t0 = time.perf_counter()
    X, qid, docs, names = feature_table(engine, queries, candidates=candidates, k=args.k,
                                        progress=not args.quiet)
    t1 = time.perf_counter()
    if len(X) == 0:
        raise QueryError("the queries have no candidates to learn from")
    cols = _columns(names, args.features, args.exclude)
    X, names = X[:, cols], [names[j] for j in cols]
    grades = np.array([qrels[q].get(d, 0) for q, d in zip(qid, docs)], dtype=np.float64)
    y = grades if args.graded else (grades >= 1).astype(np.float64)
    n_pairs, n_useful = _pairs(y, qid)
    if n_pairs == 0:
        raise QueryError("no query has both relevant and non-relevant candidates: nothing to "
                         "learn")
    ranker = LinearRanker(args.learner, params=dict(args.param) or None,
                          normalize=None if args.normalize == "none" else args.normalize,
                          max_iter=args.max_iter, tol=args.tol,
                          early_stopping=args.early_stopping, random_state=args.random_state)
    ranker.fit(X, y, qid=qid, feature_names=names)
    cv = None
    if args.cv:
        cv = cross_validate(ranker, X, y, qid=qid, n_splits=args.cv,
                            random_state=args.random_state, feature_names=names)
    print(summary(ranker, n_queries=len(queries), n_useful=n_useful, n_rows=len(X),
                  n_pairs=n_pairs, cv=cv))
    print(f"time         {time.perf_counter() - t0:.1f} s (candidates and features "
          f"{t1 - t0:.1f} s, learning {time.perf_counter() - t1:.1f} s)")
    if args.dry_run:
        print("\n(dry run: nothing stored)")
    else:
        add_model(engine, args.name, ranker)
        use = "" if args.name == "ranker" else f" --ranker {args.name}"
        print(f"\nstored as model {args.name!r} in {args.index}"
              + (": searches now rank with it" if args.name == "ranker" else "")
              + f"\nsearch with it:   cqa-search query {args.index}{use} \"your question\""
              f"\nevaluate it:      cqa-search evaluate {args.index}{use} --queries Q "
              f"--qrels R")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search train", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
