"""``cqa-search fit INDEX answers``: choose the answer shown with every archived question."""
from __future__ import annotations

import argparse
import json
import warnings

import numpy as np

from ..answers import FEATURE_NAMES, AnswerSelector, labels_from_qrels
from ..engine import SearchEngine, add_model
from ..evaluation import read_qrels
from ..exceptions import ConvergenceWarning, QueryError
from ..ranking import LEARNERS

HELP = ("best-answer selection for archives that mark no best answer: scores each answer of "
        "a question (translation likelihood, term scores, length, position, asker) and "
        "stores the one to show")


def _params(text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--learner-params must be a JSON object; got "
                                         f"{text!r}")
    return value


def configure(parser) -> None:
    ranker = parser.add_argument_group("ranker (default: unsupervised, no labels)")
    source = ranker.add_mutually_exclusive_group()
    source.add_argument("--labels", metavar="QRELS",
                        help="learn the ranker from judged answers of this index: qrels lines "
                             "'QUESTION_ID 0 ANSWER relevance', ANSWER being the answer's id "
                             "(e.g. SemEval's RELC_ID) or its 0-based position")
    source.add_argument("--ranker-from", metavar="INDEX",
                        help="apply the ranker of the answers model stored in another index "
                             "(e.g. one fitted there with --labels)")
    ranker.add_argument("--learner", choices=list(LEARNERS), default="ranksvm",
                        help="learner of the ranker with --labels (default: %(default)s)")
    ranker.add_argument("--learner-params", type=_params, metavar="JSON",
                        help='its options, e.g. \'{"C": 0.1}\'')
    ranker.add_argument("--features", nargs="+", choices=FEATURE_NAMES, metavar="FEATURE",
                        help="features the ranker reads (default: all: "
                             f"{', '.join(FEATURE_NAMES)})")
    ranker.add_argument("--seed", type=int, default=0,
                        help="random seed of the learner (default: %(default)s)")
    table = parser.add_argument_group("translation table")
    table.add_argument("--translation", metavar="NAME",
                       help="use the translation model NAME stored in this index instead of "
                            "training a table")
    table.add_argument("--textrank", action="store_true",
                       help="TextRank-filter the question-answer pairs before training")
    table.add_argument("--iterations", type=int, default=10, metavar="N",
                       help="maximum EM iterations (default: %(default)s)")
    parser.add_argument("--name", default="answers",
                        help="model name in the index (default: %(default)s)")
    parser.add_argument("--ranker-name", default="answers", metavar="NAME",
                        help="with --ranker-from: the model's name there (default: %(default)s)")


def _stored(engine, name, what):
    if name not in engine.models:
        raise QueryError(f"{engine.path} has no model {name!r} "
                         f"(models: {', '.join(engine.models) or 'none'})")
    model = engine.models[name]
    if not isinstance(model, what):
        raise QueryError(f"model {name!r} of {engine.path} is of kind {model.kind!r}")
    return model


def run(args) -> int:
    engine = SearchEngine.open(args.index)
    y = ranker = translation = None
    if args.labels:
        y = labels_from_qrels(engine.archive, read_qrels(args.labels))
    if args.ranker_from:
        ranker = _stored(SearchEngine.open(args.ranker_from), args.ranker_name,
                         AnswerSelector).ranker_
    if args.translation:
        from ..translation import TranslationModel

        translation = _stored(engine, args.translation, TranslationModel)
    model = AnswerSelector(features=args.features, textrank=args.textrank,
                           max_iter=args.iterations, learner=args.learner,
                           learner_params=args.learner_params, random_state=args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(engine.view, y, ranker=ranker, translation=translation,
                  progress_bar=not args.quiet)
    add_model(args.index, args.name, model)
    choice = model.choice_
    with_answers = int((choice >= 0).sum())
    marked = engine.manifest.get("stats", {}).get("n_with_best_answer", 0)
    print(f"model        {args.name} (answers, {model.mode_}), features "
          f"{', '.join(map(str, model.ranker_.feature_names_in_))}")
    print(f"questions    {with_answers:,} with answers ({int((choice > 0).sum()):,} show an "
          f"answer other than the first); {marked:,} mark a best answer, which is shown "
          "instead")
    print(f"answers      {model.n_answers_:,} scored")
    if model.train_score_ is not None:
        print(f"training MAP {100 * model.train_score_:.2f}")
    weights = dict(zip(model.ranker_.feature_names_in_, np.round(model.ranker_.coef_, 3)))
    print("weights      " + ", ".join(f"{k} {v:+g}" for k, v in weights.items() if v))
    print("time         " + ", ".join(f"{k} {v:.1f} s" for k, v in model.seconds_.items()))
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        print("note         EM or the learner stopped at its iteration limit")
    return 0
