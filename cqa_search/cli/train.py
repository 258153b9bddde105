"""``cqa-search train INDEX --queries Q --qrels R``: learn a ranker and store it in the index.

By default the ranker is chosen by query-grouped cross-validation
(:class:`~cqa_search.ranking.LinearRankerCV`): its regularisation, the model families that
earn their place, and whether it ranks the candidates better than the retrieval model
alone; when it does not, nothing is stored (and a ranker stored before under the same name
is removed), so training never makes search worse.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings

import numpy as np

from ..engine import SearchConfig, SearchEngine
from ..evaluation import feature_table, read_qrels, read_queries, read_run
from ..exceptions import QueryError
from ..index.models import add_model, remove_model
from ..ranking import LEARNERS, LinearRanker, LinearRankerCV, NoImprovementWarning
from ..ranking.selection import REGULARISATION
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
    parser.add_argument("-k", type=positive_int, default=None,
                        help="candidates per query from full retrieval (default: the "
                             "engine's n_candidates, 100: the candidates search reranks)")
    parser.add_argument("--learner", choices=list(LEARNERS), default="ranksvm",
                        help="how the weights are learned (default: %(default)s)")
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="KEY=VALUE",
                        help="a learner option (value read as JSON when it parses), e.g. "
                             "C=0.1, margin=even, base='[\"powell\",\"ranksvm\"]'; repeatable; "
                             "fixing the option cross-validation would choose (C, alpha) "
                             "turns that choice off")
    parser.add_argument("--normalize", choices=["zscore", "minmax", "query", "none"],
                        default="zscore",
                        help="feature normalisation: over the training candidates, or per "
                             "query (query: no --explain) (default: %(default)s)")
    parser.add_argument("--max-iter", type=int, default=None, metavar="N",
                        help="iteration limit of the learner (default: the learner's, or "
                             "chosen by cross-validation for perceptron and boosting)")
    parser.add_argument("--tol", type=float, default=1e-4, help="tolerance (default: 1e-4)")
    parser.add_argument("--early-stopping", action="store_true",
                        help="choose the number of iterations on held-out training queries "
                             "(perceptron, boosting, lambdarank; with --no-cv)")
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
    parser.add_argument("--cv", type=int, default=5, metavar="N",
                        help="folds of the query-grouped cross-validation that chooses the "
                             "regularisation and the features and checks the ranker against "
                             "the retrieval order (default: %(default)s)")
    parser.add_argument("--all-features", action="store_true",
                        help="keep every model family (no family selection)")
    parser.add_argument("--no-cv", action="store_true",
                        help="no cross-validation: fit the learner with its options on all "
                             "the features and store it")
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


def training_table(engine, queries, qrels, *, candidates=None, k=None, graded=False,
                   progress=False):
    """Features and labels of the candidates a ranker will reorder.

    Full retrieval (``candidates`` None): the top ``k`` of the engine's retrieval model
    (default: its ``n_candidates``, the candidates search reranks), with the queries
    searched as a user searches, without their category (``category_match`` is then as at
    search time). Given candidates (a run): those, with the queries' categories.

    Returns
    -------
    X, y, qid, doc_ids, feature_names
        ``y`` is the relevance grade (``graded``) or 1/0.
    """
    engine = engine.with_config(dataclasses.replace(engine.config, ranker=None))
    if candidates is None:
        queries = [{**q, "category": None} for q in queries]
        k = engine.config.n_candidates if k is None else k
    X, qid, docs, names = feature_table(engine, queries, candidates=candidates,
                                        k=100 if k is None else k, progress=progress)
    grades = np.array([qrels.get(q, {}).get(d, 0) for q, d in zip(qid, docs)], dtype=np.float64)
    return X, (grades if graded else (grades >= 1).astype(np.float64)), qid, docs, list(names)


def selection_options(learner, params, max_iter) -> dict:
    """:class:`LinearRankerCV` arguments for learner options fixed by the user: fixing
    what the regularisation grid sets turns the grid off."""
    grid = REGULARISATION.get(learner, [])
    fixed = set(params or {}) | ({"max_iter"} if max_iter is not None else set())
    return {"param_grid": None if any(set(p) & fixed for p in grid) else "auto"}


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
        lines.extend(cv_report(cv))
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
    lines.append("(weights of the normalised features: (value - mean) / scale)"
                 if ranker.normalize != "query" else
                 "(weights of the features min-max scaled among each query's candidates)")
    return "\n".join(lines)


def cv_report(cv) -> list:
    """Lines on what cross-validation chose (a fitted :class:`LinearRankerCV`)."""
    best_single = cv.single_feature_
    lines = [f"{cv.n_splits}-fold MAP   query-grouped cross-validation:"]
    if cv.baseline is not None:
        lines.append(f"  {'retrieval order (' + cv.baseline + ')':<34} {100 * cv.baseline_score_:6.2f}")
    lines.append(f"  {'best single feature (' + best_single + ')':<34} "
                 f"{100 * cv.single_scores_[best_single]:6.2f}")
    point = ", ".join(f"{k}={v!r}" for k, v in cv.best_params_.items())
    lines.append(f"  {'learned ranker' + (' (' + point + ')' if point else ''):<34} "
                 f"{100 * cv.learned_score_:6.2f}")
    if cv.dropped_ and all(set(d["features"]) <= set(cv.features_) for d in cv.dropped_):
        # forward selection left families out, but the ranker on all features won
        lines.append(f"  all features beat forward selection (MAP "
                     f"{100 * cv.dropped_[0]['map_without']:.2f} without "
                     f"{', '.join(d['family'] for d in cv.dropped_)}): every family is kept")
    else:
        lines.extend(f"  left out {d['family']} ({', '.join(d['features'])}): MAP "
                     f"{100 * d['map_with']:.2f} with it, {100 * d['map_without']:.2f} without "
                     f"(gain p = {d['p_value']:.2f})" for d in cv.dropped_)
    chosen = {"learned": "the learned ranker", "baseline": "the retrieval order",
              "single": f"the single feature {cv.single_feature_}"}[cv.chosen_]
    lines.append(f"chosen       {chosen} (MAP {100 * cv.best_score_:.2f})")
    return lines


def run(args) -> int:
    qrels = read_qrels(args.qrels)
    queries = [q for q in read_queries(args.queries) if q["id"] in qrels]
    if not queries:
        raise QueryError(f"none of the queries of {args.queries} is judged in {args.qrels}")
    candidates = read_run(args.candidates) if args.candidates else None
    return train_ranker(args.index, queries, qrels, args, candidates=candidates)


def train_ranker(index, queries, qrels, args, *, candidates=None) -> int:
    """What ``cqa-search train`` does once its files are read (``args``: its options)."""
    if not args.no_cv and args.cv < 2:
        raise QueryError(f"--cv must be at least 2; got {args.cv}")
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    t0 = time.perf_counter()
    X, y, qid, docs, names = training_table(engine, queries, qrels, candidates=candidates,
                                            k=args.k, graded=args.graded,
                                            progress=not args.quiet)
    if len(X) == 0:
        raise QueryError("the queries have no candidates to learn from")
    cols = _columns(names, args.features, args.exclude)
    X, names = X[:, cols], [names[j] for j in cols]
    t1 = time.perf_counter()
    n_pairs, n_useful = _pairs(y, qid)
    if n_pairs == 0:
        raise QueryError("no query has both relevant and non-relevant candidates: nothing to "
                         "learn")
    normalize = None if args.normalize == "none" else args.normalize
    params = dict(args.param) or None
    cv = None
    if args.no_cv:
        ranker = LinearRanker(args.learner, params=params, normalize=normalize,
                              max_iter=args.max_iter, tol=args.tol,
                              early_stopping=args.early_stopping, random_state=args.random_state)
        ranker.fit(X, y, qid=qid, feature_names=names)
    else:
        if args.early_stopping:
            raise QueryError("--early-stopping goes with --no-cv (cross-validation chooses "
                             "the iterations)")
        baseline = "given_rrank" if candidates is not None else engine.config.retrieval.feature_name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoImprovementWarning)  # reported below
            cv = LinearRankerCV(args.learner, params=params, normalize=normalize,
                                select_features=not args.all_features,
                                baseline=baseline if baseline in names else None,
                                n_splits=args.cv, max_iter=args.max_iter, tol=args.tol,
                                random_state=args.random_state,
                                **selection_options(args.learner, params, args.max_iter))
            cv.fit(X, y, qid=qid, feature_names=names)
        ranker = cv.best_estimator_
    print(summary(ranker, n_queries=len(queries), n_useful=n_useful, n_rows=len(X),
                  n_pairs=n_pairs, cv=cv))
    print(f"time         {time.perf_counter() - t0:.1f} s (candidates and features "
          f"{t1 - t0:.1f} s, learning {time.perf_counter() - t1:.1f} s)")
    if cv is not None and not cv.improves_:
        print(f"\nwarning: the learned ranking (cross-validated MAP {100 * cv.learned_score_:.2f}) "
              f"is not better than the retrieval order alone ({cv.baseline}, "
              f"{100 * cv.baseline_score_:.2f}): no ranker stored, search keeps the retrieval "
              "order" + (f" (the ranker {args.name!r} stored before is removed)"
                         if args.name in engine.models and not args.dry_run else ""))
        if not args.dry_run and args.name in engine.models:
            remove_model(index, args.name)
    elif args.dry_run:
        print("\n(dry run: nothing stored)")
    else:
        add_model(engine, args.name, ranker)
        use = "" if args.name == "ranker" else f" --ranker {args.name}"
        print(f"\nstored as model {args.name!r} in {index}"
              + (": searches now rank with it" if args.name == "ranker" else "")
              + f"\nsearch with it:   cqa-search query {index}{use} \"your question\""
              f"\nevaluate it:      cqa-search evaluate {index}{use} --queries Q --qrels R")
    return 0


def default_args(index):
    """The options of ``cqa-search train INDEX`` with their defaults (and -q)."""
    parser = argparse.ArgumentParser(prog="cqa-search train")
    configure(parser)
    return parser.parse_args([str(index), "--queries", "-", "--qrels", "-", "-q"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search train", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
