#!/usr/bin/env python3
"""Where a search's time goes: the full pipeline's per-stage CPU time, one thread.

Usage::

    python scripts/bench_stages.py INDEX QUERIES.jsonl [--passes 3] [--k 10]

``engine.search(text, k)`` on INDEX as it is stored (its models, its ranker, its first
stage) over the ``text`` of each line of QUERIES, ``--passes`` times (after one warm-up
pass), the compiled kernels loaded first (as ``serve`` does). Each stage is clocked by the
search thread's CPU time (``time.thread_time``) around the calls that make it, wrapped for
the run:

* parse: the query syntax read (``query_parser.parse_query``, ``without_empty_units``);
* analysis: ``SearchEngine.analyze`` (tokens, stems, term ids);
* first stage: the back-end's first-stage calls (``candidates``, ``nearest``,
  ``retrieval_scores``, ``cosines``: the term model's top list, the vectors' and the hybrid
  merge's look-ups);
* one row per feature scorer (term models, context, each model family, the first-stage
  feature), named by its first feature;
* ranker: ``predict`` of the engine's ranker;
* results: building the :class:`~cqa_search.results.Results`;
* the rest: the search's CPU time outside these (the engine's own steps: filters, the
  hybrid merge, sorting, the checks).

Prints a Markdown table: p50, p95 and mean per stage, and its share of the mean search.
The sum of the stages' p95 is not the search's p95 (the slowest searches differ by stage).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time

from _common import load_average
from _peers import read_query_texts


class StageClock:
    """CPU time per stage of the current search; :meth:`wrap` clocks a callable as one."""

    def __init__(self):
        self.spent = {}
        self._depth = 0

    def wrap(self, stage, fn):
        """``fn`` clocked into ``stage`` (a call inside another clocked call is not counted
        twice: the outer one holds it)."""
        def clocked(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[stage] = self.spent.get(stage, 0.0) + time.thread_time() - started
                self._depth -= 1
        return clocked


def clocked_engine(engine, clock):
    """Wrap the stages of ``engine``'s searches into ``clock`` (for this process)."""
    from cqa_search import engine as engine_module

    for name in ("parse_query", "without_empty_units"):
        setattr(engine_module, name, clock.wrap("parse", getattr(engine_module, name)))
    engine_module.Results = clock.wrap("results", engine_module.Results)
    engine.analyze = clock.wrap("analysis", engine.analyze)
    searcher = engine.searcher
    for name in ("candidates", "nearest", "retrieval_scores", "cosines"):
        setattr(searcher, name, clock.wrap("first stage", getattr(searcher, name)))
    for scorer in searcher._scorers:  # the feature scorers, in column order
        label = f"features: {type(scorer).__name__} ({scorer.names[0]}, {len(scorer.names)})"
        scorer.score = clock.wrap(label, scorer.score)
    if engine.ranker is not None:
        engine.ranker.predict = clock.wrap("ranker", engine.ranker.predict)


def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q / 100))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("index")
    ap.add_argument("queries", help="queries JSONL (a 'text' field per line)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    raw = sys.argv[1:] if argv is None else list(argv)
    a = ap.parse_args(raw)
    from cqa_search import SearchEngine, compiled

    kernels = compiled.load()
    engine = SearchEngine.open(a.index)
    texts = read_query_texts(a.queries)
    clock = StageClock()
    clocked_engine(engine, clock)
    load_before = load_average()
    for text in texts:  # warm-up pass
        engine.search(text, k=a.k)
    per_search = []
    for _ in range(a.passes):
        for text in texts:
            clock.spent = {}
            started = time.thread_time()
            engine.search(text, k=a.k)
            total = time.thread_time() - started
            spent = dict(clock.spent)
            spent["the rest"] = total - sum(spent.values())
            spent["search"] = total
            per_search.append(spent)
    stages = list(dict.fromkeys(s for spent in per_search for s in spent))
    stages = [s for s in stages if s not in ("the rest", "search")] + ["the rest", "search"]
    mean_total = sum(s["search"] for s in per_search) / len(per_search)
    print(f"Command: `{shlex.join(['python', 'scripts/bench_stages.py', *raw])}`\n\n"
          f"{engine.n_questions:,} questions; {len(texts)} queries x {a.passes} passes "
          f"(top {a.k}); {len(engine.feature_names)} features, ranker "
          f"{engine.ranker_name!r}, hybrid weight {engine.hybrid_weight:g}; compiled kernels "
          f"{'loaded' if kernels else 'not available'}; load average before / after "
          f"{load_before} / {load_average()}\n")
    print("| stage | CPU p50 ms | CPU p95 ms | mean ms | share of the mean |")
    print("|---|---:|---:|---:|---:|")
    for stage in stages:
        values = [1e3 * spent.get(stage, 0.0) for spent in per_search]
        mean = sum(values) / len(values)
        name = f"**{stage}**" if stage == "search" else stage
        print(f"| {name} | {_percentile(values, 50):.2f} | {_percentile(values, 95):.2f} | "
              f"{mean:.2f} | {mean / (1e3 * mean_total):.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
