"""``cqa-search fit INDEX translation``: train the translation models of an index."""
from __future__ import annotations

import warnings

from ..engine import SearchEngine, add_model
from ..exceptions import ConvergenceWarning
from ..translation import fit_translation

HELP = ("word and phrase translation models from the archive's question-answer pairs "
        "(IBM Model 1, TransLM, P-Trans; Zhou et al. 2011), giving the features wt, "
        "translm and ptrans_*")


def _tol(text):
    return None if text.lower() == "none" else float(text)


def configure(parser) -> None:
    corpus = parser.add_argument_group("parallel corpus")
    corpus.add_argument("--pairs", choices=["all", "best", "none"], default="all",
                        help="question-answer pairs from every answer, best answers only, or "
                             "none (default: %(default)s)")
    corpus.add_argument("--title-body", action="store_true",
                        help="also (title, body) pairs of the questions")
    corpus.add_argument("--duplicates", action="store_true",
                        help="also (question, duplicated question) pairs")
    corpus.add_argument("--no-pooling", action="store_true",
                        help="train on (question, answer) pairs only, not also (answer, "
                             "question)")
    corpus.add_argument("--no-textrank", action="store_true",
                        help="keep every word (no TextRank filtering of the documents)")
    corpus.add_argument("--window", type=int, default=3,
                        help="TextRank co-occurrence window in index terms (default: %(default)s)")
    em = parser.add_argument_group("IBM Model 1")
    em.add_argument("--iterations", type=int, default=10, metavar="N",
                    help="maximum EM iterations (default: %(default)s)")
    em.add_argument("--tol", type=_tol, default=1e-3,
                    help="stop when the log-likelihood rises by less than this fraction; "
                         "'none' runs all iterations (default: %(default)s)")
    em.add_argument("--min-prob", type=float, default=1e-3,
                    help="prune word translation probabilities below this (default: %(default)s)")
    phrases = parser.add_argument_group("phrases and scoring")
    phrases.add_argument("--max-phrase-length", type=int, default=5,
                         help="longest phrase (default: %(default)s)")
    phrases.add_argument("--tight-phrases", action="store_true",
                         help="extract only bi-phrases whose edge words are aligned")
    phrases.add_argument("--question-weight", type=float, default=0.8,
                         help="weight of the question part against the answer part in "
                              "P-Trans (mu1 of eq. 15; default: %(default)s)")
    parser.add_argument("--name", default="translation",
                        help="model name in the index (default: %(default)s)")


def run(args) -> int:
    engine = SearchEngine.open(args.index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = fit_translation(
            engine.view, progress=not args.quiet,
            answers=None if args.pairs == "none" else args.pairs, title_body=args.title_body,
            duplicates=args.duplicates, pooling=not args.no_pooling,
            textrank=not args.no_textrank, window=args.window, max_iter=args.iterations,
            tol=args.tol, min_prob=args.min_prob, max_phrase_length=args.max_phrase_length,
            unaligned_edges=not args.tight_phrases, question_weight=args.question_weight)
    add_model(args.index, args.name, model)
    print(f"model        {args.name} (translation), features {', '.join(model.feature_names)}")
    print(model.summary_)
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        print(f"note         EM stopped at --iterations {args.iterations} before --tol {args.tol}")
    return 0
