"""``cqa-search fit INDEX topics``: train a topic model (NMF, CNMF, GNMF, GNMFNC) on an index."""
from __future__ import annotations

import warnings

from ..engine import SearchEngine, add_model
from ..exceptions import ConvergenceWarning
from ..factorization import VARIANTS, fit_topics

HELP = ("topic model of the term–question matrix grouped by category (NMF, CNMF, GNMF, "
        "GNMFNC; Zhou et al. 2014), giving the topic-similarity feature")


def configure(parser) -> None:
    parser.add_argument("--model", choices=VARIANTS, default="gnmfnc",
                        help="factorization (default: %(default)s)")
    parser.add_argument("--ks", type=int, default=20, metavar="K_S",
                        help="shared topics (default: %(default)s; NMF has K_S + K_P topics)")
    parser.add_argument("--kp", type=int, default=8, metavar="K_P",
                        help="topics per category (default: %(default)s)")
    parser.add_argument("--a", type=float, default=100.0,
                        help="GNMFNC regularisation factor: beta = a/(K_S K_P), "
                             "gamma = a/K_P^2 (default: %(default)s)")
    parser.add_argument("--max-iter", type=int, default=100,
                        help="maximum sweeps (default: %(default)s)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="stop when the objective improves by less than this fraction "
                             "(default: %(default)s)")
    parser.add_argument("--random-state", type=int, default=0,
                        help="seed of the initial factors (default: %(default)s)")
    parser.add_argument("--category-inference", choices=["all", "hits", "reconstruction"],
                        default="all",
                        help="a query without a category is folded in against all categories' "
                             "topics at once, those of the category of its top BM25 hits, or "
                             "those of the best-reconstructing category (default: %(default)s)")
    parser.add_argument("--name", help="model name in the index (default: topics-MODEL); "
                                       "the feature is topic_MODEL, or topic_NAME for another name")


def feature_name_for(name, model):
    """The feature of a model stored as ``name``: ``topic_<variant>`` for the default name."""
    if name is None or name == f"topics-{model}":
        return None
    stem = name[len("topics"):].lstrip("-_") if name.startswith("topics") else name
    return "topic_" + (stem or model).replace("-", "_")


def run(args) -> int:
    name = args.name or f"topics-{args.model}"
    engine = SearchEngine.open(args.index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = fit_topics(engine.view, args.model, n_shared=args.ks, n_category=args.kp,
                           a=args.a, max_iter=args.max_iter, tol=args.tol,
                           random_state=args.random_state,
                           category_inference=args.category_inference,
                           feature_name=feature_name_for(args.name, args.model),
                           progress=not args.quiet)
    add_model(args.index, name, model)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    groups = len(model.categories_)
    n_topics = model.shared_topics_.shape[1] + model.category_topics_.shape[1]
    print(f"model      {name} ({args.model}), feature {model.feature_name_}")
    n_terms = int((engine.index["question"].df > 0).sum())
    print(f"data       {model.n_docs_:,} questions, {groups} group{'s' * (groups != 1)}, "
          f"{n_terms:,} terms")
    print(f"topics     {n_topics} in all ({model.shared_topics_.shape[1]} shared, "
          f"{model.category_topics_.shape[1] // max(groups, 1)} per category)")
    print(f"iterations {model.n_iter_}" + ("" if converged else
                                          f" (max_iter reached before tol={args.tol})"))
    print(f"objective  {model.initial_loss_:.6g} -> {model.loss_curve_[-1]:.6g}")
    print(f"time       {model.fit_seconds_:.1f} s "
          f"({model.fit_seconds_ / max(model.n_iter_, 1):.2f} s per iteration incl. set-up)")
    return 0
