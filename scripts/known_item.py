#!/usr/bin/env python3
"""Known-item search: each archived question's own title as the query, BM25 beside BM25F.

Usage::

    python scripts/known_item.py [ARCHIVE ...] [--data ../shared/data] [--work DIR]
        [--models bm25 bm25f bm25f:title=3 ...] [--out FILE]

Without ARCHIVE: every StackExchange dump in ``DATA/stackexchange`` and the demo archive.
Each archive is indexed once with ``build_index``'s defaults (the question, its answers and
its title); then every question with a title is searched by its title as plain text
(``engine.rerank(title, k=3)``), by each retrieval model of ``--models`` alone: no ranker,
no features, no hybrid stage. A question is found *first* when the first hit is a question
with the same title (a title several questions share counts for any of them; titles
compared after case folding and collapsing white space) and in the *top 3* likewise.
Prints a Markdown table (% first / % top 3, per archive and the mean over archives).

This is dev-style measurement on titles (no relevance labels): the issue's target for the
default first stage is >= 97 % first and >= 99.5 % in the top 3 on every archive.
"""
from __future__ import annotations

import os
import sys
import time

from _common import DATA, load_average, paper_parser, stackexchange_sites, write_report

#: The retrieval models compared by default (``parse_model`` specs).
MODELS = ("bm25", "bm25f:title=1,body=1", "bm25f", "bm25f:title=3", "bm25f:title=5",
          "bm25f:title=2,body=1,answers=0.5")
K = 3


def _key(title) -> str:
    return " ".join(title.split()).casefold()


def known_item(path, specs) -> dict:
    """``{spec: (n queries, n first, n in the top 3)}`` of the index at ``path``."""
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.retrieval import parse_model

    engine = SearchEngine.open(path, config=SearchConfig(features=(), ranker=None, hybrid=None))
    questions = [engine.archive[row] for row in range(engine.n_docs)]
    same = {}
    for q in questions:
        if q.title.strip():
            same.setdefault(_key(q.title), set()).add(q.id)
    out = {}
    for spec in specs:
        searcher = engine.with_config(SearchConfig(retrieval=parse_model(spec), features=(),
                                                   ranker=None, hybrid=None))
        n = first = top = 0
        for q in questions:
            if not q.title.strip():
                continue
            wanted = same[_key(q.title)]
            hits = searcher.rerank(q.title, k=K).doc_ids
            n += 1
            first += bool(hits) and hits[0] in wanted
            top += any(h in wanted for h in hits)
        out[spec] = (n, first, top)
    return out


def main(argv=None) -> int:
    ap = paper_parser(__doc__, "known_item")
    ap.add_argument("archives", nargs="*", metavar="ARCHIVE",
                    help="archives (files or StackExchange dump folders); default: every "
                         "dump in DATA/stackexchange and the demo archive")
    ap.add_argument("--models", nargs="+", default=list(MODELS), metavar="SPEC",
                    help="retrieval models (e.g. bm25, bm25f:title=3,b_title=0.5)")
    a = ap.parse_args(argv)
    from cqa_search import build_index
    from cqa_search.data import DEMO_ARCHIVE, demo_dir

    archives = a.archives or [*stackexchange_sites(a.data), os.fspath(demo_dir() / DEMO_ARCHIVE)]
    os.makedirs(a.work, exist_ok=True)
    rows, t0 = {}, time.perf_counter()
    for archive in archives:
        name = os.path.basename(os.path.normpath(archive))
        if name == DEMO_ARCHIVE:
            name = "demo"
        path = os.path.join(a.work, name)
        build_index(archive, path)  # a new generation over any index built before
        rows[name] = known_item(path, a.models)
        print(f"[known_item] {name}: {rows[name][a.models[0]][0]} titles", file=sys.stderr)
    cell = lambda n, k: f"{100 * k / n:.1f}" if n else "–"  # noqa: E731
    lines = ["| archive | titles | " + " | ".join(f"{s} first / top 3" for s in a.models)
             + " |", "|---|---:|" + "---:|" * len(a.models)]
    for name, per_model in rows.items():
        n = per_model[a.models[0]][0]
        lines.append(f"| {name} | {n} | " + " | ".join(
            f"{cell(n, f)} / {cell(n, t)}" for _, f, t in per_model.values()) + " |")
    means = [(sum(100 * r[s][1] / r[s][0] for r in rows.values() if r[s][0]) / len(rows),
              sum(100 * r[s][2] / r[s][0] for r in rows.values() if r[s][0]) / len(rows))
             for s in a.models]
    lines.append("| mean over archives | | " + " | ".join(f"{f:.1f} / {t:.1f}"
                                                          for f, t in means) + " |")
    report = "\n".join([f"Command: `python scripts/known_item.py {' '.join(argv or sys.argv[1:])}`"
                        f"; load average {load_average()}; {time.perf_counter() - t0:.0f} s",
                        "", *lines])
    print(report)
    write_report(a.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
