#!/usr/bin/env python3
"""Cost of best-answer selection against building the index, on a synthetic archive.

Writes an archive of N questions with ``bench/synth_archive.py``, builds its index, then
fits :class:`cqa_search.answers.AnswerSelector` twice: the unsupervised default (no
translation table) and a selector whose ranker reads the translation features (IBM Model 1
trained on the archive's question-answer pairs, 10 EM iterations). CPU seconds
(``time.process_time``), best of ``--repeat`` runs, and the ratio to the index build of
the same run. The query-time cost of showing the chosen answer is one array lookup.

Usage: scripts/bench_answers.py [N] [--repeat 2] [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from cqa_search import SearchEngine, build_index
from cqa_search.answers import AnswerSelector

from _common import SYNTH, timed


def best_cpu(fn, repeat):
    """The least CPU seconds of ``repeat`` calls of ``fn``, and the last call's value."""
    runs = [timed(fn) for _ in range(repeat)]
    return min(run.cpu for run in runs), runs[-1].value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "cqa_bench_answers"))
    ap.add_argument("--synth", default=SYNTH)
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    archive = os.path.join(args.work, f"synth{args.n}.jsonl")
    if not os.path.exists(archive):
        subprocess.run([sys.executable, args.synth, str(args.n), archive], check=True)
    index = os.path.join(args.work, f"index{args.n}")
    build, summary = best_cpu(lambda: build_index(archive, index), args.repeat)
    view = SearchEngine.open(index).view
    rows = [("build-index (reference)", build, None)]
    for name, params in (("fit answers: unsupervised default (no table)", {}),
                         ("fit answers: with the translation table",
                          {"unsupervised_weights": {"lm": 1.0, "translation": 1.0}})):
        seconds, model = best_cpu(lambda: AnswerSelector(**params).fit(view), args.repeat)
        rows.append((name, seconds, model))
    print(f"{summary.n_questions:,} questions, {summary.n_answers:,} answers; CPU seconds, best "
          f"of {args.repeat}\n")
    print("| step | CPU s | ratio to build-index | of which (wall s) |")
    print("|---|---:|---:|---|")
    for name, seconds, model in rows:
        parts = "" if model is None else ", ".join(
            f"{k} {v:.1f}" for k, v in model.seconds_.items())
        print(f"| {name} | {seconds:.1f} | {seconds / build:.2f} | {parts} |")


if __name__ == "__main__":
    main()
