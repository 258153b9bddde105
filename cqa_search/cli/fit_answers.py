"""What ``cqa-search fit INDEX answers`` reads besides the selector's parameters: labels
to learn from, or the ranker of a selector fitted on another index, and a stored
translation model to use instead of training a table."""
from __future__ import annotations

from ..answers import AnswerSelector, labels_from_qrels
from ..engine import SearchEngine
from ..evaluation import read_qrels
from ..exceptions import QueryError


def configure_inputs(parser) -> None:
    group = parser.add_argument_group("what the ranker learns from (default: nothing, the "
                                      "unsupervised prior)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--labels", metavar="QRELS",
                        help="learn the ranker from judged answers of this index: qrels lines "
                             "'QUESTION_ID 0 ANSWER relevance', ANSWER being the answer's id "
                             "(e.g. SemEval's RELC_ID) or its 0-based position")
    source.add_argument("--ranker-from", metavar="INDEX",
                        help="apply the ranker of the answers model stored in another index "
                             "(e.g. one fitted there with --labels)")
    group.add_argument("--ranker-name", default="answers", metavar="NAME",
                       help="with --ranker-from: the model's name there (default: %(default)s)")
    group.add_argument("--translation", metavar="NAME",
                       help="use the translation model NAME stored in this index instead of "
                            "training a table")


def _stored(engine, name, what):
    if name not in engine.models:
        raise QueryError(f"{engine.path} has no model {name!r} "
                         f"(models: {', '.join(engine.models) or 'none'})")
    model = engine.models[name]
    if not isinstance(model, what):
        raise QueryError(f"model {name!r} of {engine.path} is of kind {model.kind!r}")
    return model


def fit_inputs(args, engine) -> dict:
    """Keyword arguments of :meth:`AnswerSelector.fit` from the options."""
    inputs = {}
    if args.labels:
        inputs["y"] = labels_from_qrels(engine.archive, read_qrels(args.labels))
    if args.ranker_from:
        inputs["ranker"] = _stored(SearchEngine.open(args.ranker_from), args.ranker_name,
                                   AnswerSelector).ranker_
    if args.translation:
        from ..translation import TranslationModel

        inputs["translation"] = _stored(engine, args.translation, TranslationModel)
    return inputs
