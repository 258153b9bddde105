"""``cqa-search fit INDEX multiview``: SMT + MF (Zhou et al. 2013) stored in the index."""
from __future__ import annotations

import sys
import time
import warnings

from ..engine import SearchEngine, add_model
from ..exceptions import ConvergenceWarning
from ..factorization.multiview import fit_multiview
from ..factorization.dictd import DEFAULT_DICT_DIR

HELP = ("SMT + MF: factorize the questions jointly with their translations (dictionaries, "
        "IBM Model 1, supplied translations) and add one feature per view")

# The most useful view on SemEval-2016 (BENCHMARKS.md); needs a stored IBM Model 1.
DEFAULT_VIEWS = "ibm1"


def _lambdap(text):
    values = [float(v) for v in text.split(",")]
    return values[0] if len(values) == 1 else values


def configure(parser) -> None:
    parser.add_argument("--views", default=DEFAULT_VIEWS,
                        help="translated views, comma-separated: dict:LANG (FreeDict English-LANG "
                             "in --dict-dir), ibm1 (the IBM Model 1 stored in the index), "
                             "archive:LANG (the archive's \"translations\": {LANG: text}), dummy "
                             "(a copy of the original: the DT ablation); '' for the original "
                             f"only (default: {DEFAULT_VIEWS})")
    parser.add_argument("--dict-dir", default=DEFAULT_DICT_DIR,
                        help="directory of the dictd dictionaries (default: %(default)s, where "
                             "Debian's dict-freedict-eng-LANG packages put them)")
    parser.add_argument("-k", "--n-components", type=int, default=100,
                        help="latent dimensions K (default: %(default)s)")
    parser.add_argument("--lambda1", type=float, default=1.0,
                        help="ridge weight of the original view (default: %(default)s)")
    parser.add_argument("--lambdap", type=_lambdap, default=0.25,
                        help="coupling weight of the translated views, one number or one per "
                             "view, comma-separated (default: %(default)s)")
    parser.add_argument("--max-iter", type=int, default=100,
                        help="maximum ALS sweeps (default: %(default)s)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="stop when a sweep improves the objective by less than this "
                             "fraction (default: %(default)s)")
    parser.add_argument("--random-state", type=int, default=0,
                        help="seed of the initialisation (default: %(default)s)")
    parser.add_argument("--min-df", type=int, default=1,
                        help="drop words of a view found in fewer questions (default: "
                             "%(default)s)")
    parser.add_argument("--n-translations", type=int, default=3,
                        help="translations kept per word by dict and ibm1 views (default: "
                             "%(default)s)")
    parser.add_argument("--ibm1-model", metavar="NAME",
                        help="stored model whose translation table the ibm1 view uses "
                             "(default: the only one)")
    parser.add_argument("--feature-prefix", default="mv",
                        help="feature names are PREFIX_VIEW (default: %(default)s)")
    parser.add_argument("--name", default="multiview",
                        help="name of the model in the index (default: %(default)s)")


def run(args) -> int:
    t0 = time.perf_counter()
    engine = SearchEngine.open(args.index)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model = fit_multiview(
                engine, args.views, dict_dir=args.dict_dir, n_translations=args.n_translations,
                ibm1_model=args.ibm1_model, progress=not args.quiet,
                n_components=args.n_components, lambda1=args.lambda1, lambdap=args.lambdap,
                max_iter=args.max_iter, tol=args.tol, random_state=args.random_state,
                min_df=args.min_df, feature_prefix=args.feature_prefix)
    except FileNotFoundError as exc:
        print(f"cqa-search: error: {exc}", file=sys.stderr)
        return 1
    add_model(args.index, args.name, model)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    views = ", ".join(f"{n} ({e.n_features:,} words)"
                      for n, e in zip(model.view_names_, model.encoders_))
    print(f"model      {args.name} (SMT + MF) stored in {engine.path}\n"
          f"views      {views}\n"
          f"features   {', '.join(model.feature_names)}\n"
          f"K          {model.n_components}, lambda1 {model.lambda1:g}, lambdap "
          f"{model.lambdap}\n"
          f"sweeps     {model.n_iter_} ({'converged' if converged else 'max-iter reached'}), "
          f"objective {model.loss_curve_[-1]:.6g}\n"
          f"time       {time.perf_counter() - t0:.1f} s (factorization "
          f"{model.fit_seconds_:.1f} s)")
    return 0
