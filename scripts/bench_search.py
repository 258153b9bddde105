#!/usr/bin/env python3
"""Search speed and memory of cqa_search beside bm25s and tantivy, on the same texts.

Usage::

    python scripts/bench_search.py ARCHIVE.jsonl [QUERIES.jsonl] [--whole-questions N]
        [--work-dir DIR] [--engines cqa,bm25s,tantivy,tantivy-en_stem] [--limit N]
        [--n-queries Q] [--repeat R] [--json-out FILE]
    python scripts/bench_search.py --generate 200000 --work-dir DIR    # synth_archive.py first
    python scripts/bench_search.py --pipeline NAME=INDEX:QUERIES [...] [--repeat R]
        [--passes P] [--baseline-src DIR]    # latency of the full pipeline (see below)
    python scripts/bench_search.py --quick [--generate N | ARCHIVE QUERIES] [--repeat R]
        [--work-dir DIR]    # the speed check before you stop (scripts/_speed_check.py)

``--quick`` measures in one process, in interleaved rounds (3 by default), ours beside
tantivy on short queries and whole questions of a generated archive (100,000 questions by
default) and the full pipeline's p95 on the demo archive with every model family and a
ranker, and says FASTER / SAME / SLOWER against the figures under "The speed check" in
BENCHMARKS.md; it builds its indexes once and keeps them in ``--work-dir`` (default
``indexes/speed-check``). The first run generates and builds (a few minutes), the next
ones take under a minute on two cores.

Prints a Markdown report on stdout (command, machine, two tables, a sanity line, notes);
progress goes to stderr. ``--json-out`` also saves the raw measurements.

What is measured (the fairness rules)
-------------------------------------
* Same texts. Every engine indexes ``title + "\\n" + body`` of every record (the question
  field). cqa_search additionally stores the whole record (answers included) as its
  document store (``archive.jsonl`` in the index); it is built twice, with
  ``fields=("question",)`` (comparable with the others) and with the default
  ``fields=("question", "answers")``, and both are reported.
* Same analysis as far as each engine allows. cqa_search: its default ``Analyzer()``
  (NFKC + lowercase, ``(?u)\\w{2,}``, scikit-learn's English stopwords, Snowball
  "english"). bm25s: ``bm25s.tokenize(texts, stopwords=<the same scikit-learn list>,
  stemmer=Stemmer.Stemmer("english"))`` (its pattern ``(?u)\\b\\w\\w+\\b`` gives the same
  tokens; no NFKC), ``BM25(method="lucene", k1=1.2, b=0.75)``. tantivy: a custom text
  analyzer with the closest filters, ``Tokenizer.regex(r"(?u)\\w{2,}")`` + lowercase +
  ``custom_stopword(<the same list>)`` + ``stemmer("english")`` (engine ``tantivy``), and
  its built-in ``en_stem`` (simple tokenizer, remove_long(40), lowercase, Snowball
  english; no stopwords) as engine ``tantivy-en_stem``; tantivy's own BM25 (k1=1.2,
  b=0.75). The text field is indexed with ``index_option="freq"`` (no positions: none of
  the engines needs them for bag-of-words BM25); the id is stored.
* Queries: the ``text`` field of each line of QUERIES (e.g. the 3-4 word queries of
  ``synth_archive.py --queries``) and/or, with ``--whole-questions N``, N questions of the
  archive as whole-question queries (title, a newline and body: what this engine is for;
  sampled with seed 7 among the first 200,000 records, so that archives of any size
  generated with one seed, which share their first records, get the same queries). Each
  query process times every set, one after the other, and the report has rows per set.
  Top-10, one query at a time in one thread, the clock running from the query string to the top-10 (query analysis
  included). cqa_search: ``engine.search(text, k=10)`` with ``SearchConfig(features=())``
  (pure BM25 top-10) with the compiled kernels loaded first (as ``serve`` does) and, in
  the same process, with the numpy paths (``compiled.use("numpy")``: what an install
  without numba, or ``CQA_SEARCH_COMPILED=numpy``, runs), and with the default config
  (BM25 plus the feature scores of each hit), separate rows; on an index with titles
  (engine ``cqa-bm25f``: ``fields=("question", "title")``), BM25F's top-10 too
  (``SearchConfig(retrieval=BM25F(), features=())``, the same queries in the same process,
  its first query, which combines the postings and computes their weights, reported
  apart). bm25s: ``bm25s.tokenize`` of the one query then
  ``retrieve(..., k=10, n_threads=1)`` per query (the like-for-like number), and, as a
  second row, all queries tokenized and retrieved in one batch call (``n_threads=1``).
  tantivy: the query analysed by the field's analyzer (``TextAnalyzer.analyze``), an OR
  of term queries (what its query parser builds for plain words, without turning words
  such as "rock'n'roll" into phrase queries that need positions), then
  ``searcher.search(query, 10, count=False)``. Doc ids for the sanity check are read
  outside the timed loop. Each loop runs after one warm-up query.
* Build time: from the JSONL file on disk to a searchable index saved on disk (bm25s:
  json parse + tokenize + index + ``save``; tantivy: json parse + ``add_document`` +
  ``commit`` + waiting for merges, one indexing thread, 256 MB writer heap; cqa_search:
  ``build_index`` on the file). Index size: the bytes of the saved index directory.
* Wall-clock and CPU time are both recorded (CPU: ``time.process_time``, every thread of
  the measuring process, e.g. cqa_search's and tantivy's build threads, plus
  ``getrusage(RUSAGE_CHILDREN)`` for processes it waited for). Ratios are given for both:
  on a quiet machine they agree for one thread; on a machine shared with other jobs the
  CPU-time ratio is the one to trust (a build on several threads takes less wall time
  than CPU time).
* Peak RSS: every engine builds in its own subprocess and is queried in another one
  (this script run with ``--child ENGINE --phase build|query``), which reports its own
  peak RSS (``VmHWM``: unlike ``ru_maxrss`` it excludes the parent's memory inherited
  through fork + exec). "peak RSS" is the larger of the two (the build, in practice);
  "query RSS" is the query process's. The query process also times opening the saved
  index (cqa_search: ``SearchEngine.open``, memory-mapped; bm25s: ``BM25.load``;
  tantivy: ``Index.open``) and the first query.
* ``--repeat R`` runs every process R times, interleaved across engines, and keeps the
  best time (and the largest RSS) of each; the spread is printed in the notes.
* Sanity check (not a test): for the first 20 queries, the mean Jaccard overlap of each
  engine's top-10 doc ids with bm25s's top-10.

Full pipeline (``--pipeline``)
------------------------------
``engine.search(text, k=10)`` on an index with stored models and a ranker (every feature
family: term, context, translation, topics, multiview; 100 BM25 candidates reranked),
one query at a time in one thread, ``--passes`` passes over the queries of each
``NAME=INDEX:QUERIES``; p50/p95/p99 of the wall-clock latency, the mean CPU time per query and
the p50/p95 of the search thread's CPU time per search (what a machine loaded by other jobs
inflates least),
beside BM25 alone on the same index in the same run (``SearchConfig(features=(),
models=(), ranker=None)``). Each measurement runs in its own process, quiet and then with
the other core busy (a spinning process started and stopped by this script), BLAS as
installed (no thread limit set by the script); ``--baseline-src DIR`` adds the same
measurements with the package imported from DIR (e.g. an export of an older commit).
``--repeat R`` interleaves R rounds and keeps the lowest percentile of each.

All figures come from one run on one machine; compare them as ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from _common import SYNTH, Clock, dir_bytes, load_average, memory_mb
from _peers import read_query_texts, tantivy_build, tantivy_searcher, whole_questions
from _speed_check import DEFAULT_SIZE, N_WHOLE, ROUNDS, speed_check

HERE = Path(__file__).resolve().parent
ENGINES = ("cqa", "bm25s", "tantivy", "tantivy-en_stem", "cqa-question",  # last two: not
           "cqa-bm25f")                                                    # default
K = 10


# ---------------------------------------------------------------------------------------
# Helpers shared by the parent and the children
# ---------------------------------------------------------------------------------------
def _read_texts(archive):
    """(question texts, ids) of the archive, as the bm25s and tantivy builds see them."""
    texts, ids = [], []
    with open(archive, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            texts.append(rec["title"] + "\n" + rec["body"])
            ids.append(rec["id"])
    return texts, ids


def _query_sets(a):
    """``{name: query texts}`` of the ``--query-set NAME=PATH`` arguments of a child."""
    return {name: read_query_texts(path, a.n_queries)
            for name, path in (spec.split("=", 1) for spec in a.query_set)}


def _per_set(sets, run_modes):
    """``run_modes(queries) -> {mode: loop}`` for every query set, as one dict of modes
    named ``mode|set``."""
    return {f"{mode}|{name}": loop for name, queries in sets.items()
            for mode, loop in run_modes(queries).items()}


def _loop_result(n, clock, **extra):
    return {"n_queries": n, "seconds": clock.wall, "cpu_seconds": clock.cpu,
            "qps": n / clock.wall, "cpu_qps": n / max(clock.cpu, 1e-9), **extra}


def _timed_loop(queries, run_one, n_check):
    """Run ``run_one(text) -> top ids`` over ``queries`` (after one warm-up query)."""
    run_one(queries[0])
    lat, tops = [], []
    perf = time.perf_counter
    with Clock() as clock:
        for i, text in enumerate(queries):
            t = perf()
            top = run_one(text)
            lat.append(perf() - t)
            if i < n_check:
                tops.append(top)
    lat.sort()
    return _loop_result(len(queries), clock, top=tops, p50_ms=1e3 * lat[len(lat) // 2],
                        p99_ms=1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))])


def _first_query(run_one, text):
    t0 = time.perf_counter()
    run_one(text)
    return 1e3 * (time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# Children: one engine, one phase, in its own process
# ---------------------------------------------------------------------------------------
def _cqa_build(a):
    import cqa_search
    from cqa_search.index.layout import segment_dir
    from cqa_search.index.store import open_index

    import_rss = memory_mb()[0]
    with Clock() as clock:
        summary = cqa_search.build_index(a.archive, a.index, fields=tuple(a.fields.split(",")))
    stored = open_index(a.index)
    store = sum(os.path.getsize(stored.file(f"{segment_dir(seg['name'])}/archive.jsonl"))
                for seg in stored.manifest["segments"])
    return {"build_s": clock.wall, "build_cpu_s": clock.cpu, "import_rss_mb": import_rss,
            "n_docs": summary.n_questions, "n_terms": summary.n_terms,
            "doc_store_bytes": store}


def _cqa_query(a, sets):
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.retrieval import BM25

    import_rss = memory_mb()[0]
    from cqa_search import compiled

    with Clock() as clock:
        engine = SearchEngine.open(a.index, config=SearchConfig(retrieval=BM25(), features=()))
    # steady state, as `cqa-search serve` starts: the compiled kernel loaded first (its
    # one-off cost is reported apart)
    with Clock() as kernel_clock:
        kernel = compiled.load()  # (CQA_SEARCH_COMPILED=numpy: the numpy paths)
    first = next(iter(sets.values()))[0]
    first_ms = _first_query(lambda q: engine.search(q, k=K), first)
    full = engine.with_config(SearchConfig())
    searchers = {"bm25": engine}
    if "title" in engine.index.fields:  # BM25F beside BM25, on the same index
        from cqa_search.retrieval import BM25F

        searchers["bm25f"] = engine.with_config(SearchConfig(retrieval=BM25F(), features=()))
        # its first query combines the title and the question's postings and computes the
        # posting weights (BM25's are stored by the build)
        bm25f_first_ms = _first_query(lambda q: searchers["bm25f"].search(q, k=K), first)

    def modes(queries):
        out = {}
        for name, searcher in searchers.items():
            out[name] = _timed_loop(queries, lambda q, s=searcher: list(s.search(q, k=K).doc_ids),
                                    a.check)
        if kernel:  # the same searches on the numpy paths, in this process
            compiled.use("numpy")
            for name, searcher in searchers.items():
                out[f"{name}-numpy"] = _timed_loop(
                    queries, lambda q, s=searcher: list(s.search(q, k=K).doc_ids), a.check)
            compiled.use("auto")
        out["default"] = _timed_loop(queries, lambda q: list(full.search(q, k=K).doc_ids),
                                     a.check)
        out["default"]["n_features"] = len(full.config.features)
        return out

    return {"open_s": clock.wall, "first_query_ms": first_ms, "import_rss_mb": import_rss,
            "modes": _per_set(sets, modes), "compiled": kernel,
            "kernel_load_s": kernel_clock.wall,
            "bm25f_first_query_ms": bm25f_first_ms if "bm25f" in searchers else None}


def _bm25s_build(a, stopwords):
    import bm25s
    import Stemmer

    import_rss = memory_mb()[0]
    with Clock() as clock:
        texts, _ = _read_texts(a.archive)
        tokens = bm25s.tokenize(texts, stopwords=stopwords, stemmer=Stemmer.Stemmer("english"),
                                show_progress=False)
        del texts
        retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        retriever.index(tokens, show_progress=False)
        retriever.save(a.index)
    return {"build_s": clock.wall, "build_cpu_s": clock.cpu, "import_rss_mb": import_rss,
            "n_terms": len(tokens.vocab)}


def _bm25s_query(a, sets, stopwords):
    import bm25s
    import Stemmer

    import_rss = memory_mb()[0]
    stemmer = Stemmer.Stemmer("english")
    with Clock() as clock:
        retriever = bm25s.BM25.load(a.index)

    def one(text):
        qtok = bm25s.tokenize(text, stopwords=stopwords, stemmer=stemmer, return_ids=False,
                              show_progress=False)
        docs, _ = retriever.retrieve(qtok, k=K, n_threads=1, show_progress=False)
        return docs[0].tolist()

    first_ms = _first_query(one, next(iter(sets.values()))[0])

    def modes(queries):
        out = {"per_query": _timed_loop(queries, one, a.check)}
        with Clock() as batch:
            qtok = bm25s.tokenize(queries, stopwords=stopwords, stemmer=stemmer,
                                  return_ids=False, show_progress=False)
            docs, _ = retriever.retrieve(qtok, k=K, n_threads=1, show_progress=False)
        out["batch"] = _loop_result(len(queries), batch, top=docs[:a.check].tolist())
        return out

    return {"open_s": clock.wall, "first_query_ms": first_ms, "import_rss_mb": import_rss,
            "modes": _per_set(sets, modes)}


def _tantivy_build(a, stopwords):
    import tantivy  # noqa: F401  (its import in the RSS after imports, as the others')

    import_rss = memory_mb()[0]
    with Clock() as clock:
        segments = tantivy_build(a.archive, a.index, a.engine, stopwords)
    return {"build_s": clock.wall, "build_cpu_s": clock.cpu, "import_rss_mb": import_rss,
            "segments": segments}


def _tantivy_query(a, sets, stopwords):
    import tantivy  # noqa: F401  (its import in the RSS after imports, as the others')

    import_rss = memory_mb()[0]
    with Clock() as clock:
        one, doc_id = tantivy_searcher(a.index, a.engine, stopwords, K)
    first_ms = _first_query(one, next(iter(sets.values()))[0])

    def modes(queries):
        loop = _timed_loop(queries, one, a.check)
        loop["top"] = [[doc_id(hit) for hit in hits] for hits in loop["top"]]
        return {"per_query": loop}

    return {"open_s": clock.wall, "first_query_ms": first_ms, "import_rss_mb": import_rss,
            "modes": _per_set(sets, modes)}


def _pipeline_child(a):
    from cqa_search import SearchConfig, SearchEngine
    from cqa_search.retrieval import BM25

    (queries,) = _query_sets(a).values()
    try:  # steady state, as `cqa-search serve` runs: the compiled kernels when installed
        from cqa_search import compiled
    except ImportError:  # (an older tree as the baseline)
        compiled = None
    kernels = compiled is not None and compiled.load()
    engine = SearchEngine.open(a.index)
    if a.config == "bm25":
        engine = engine.with_config(SearchConfig(retrieval=BM25(), features=(), models=(),
                                                 ranker=None))
    engine.search(queries[0], k=K)
    lat, cpu_each, cpu = [], [], time.process_time()
    for _ in range(a.passes):
        for text in queries:
            t, c = time.perf_counter(), time.thread_time()
            engine.search(text, k=K)
            cpu_each.append(1e3 * (time.thread_time() - c))
            lat.append(1e3 * (time.perf_counter() - t))
    return {"latency_ms": lat, "cpu_ms": 1e3 * (time.process_time() - cpu) / len(lat),
            "cpu_each_ms": cpu_each,
            "n_features": len(engine.feature_names), "ranker": engine.ranker is not None,
            "compiled": kernels}


def _percentiles(lat):
    lat = sorted(lat)
    return {f"p{q}": lat[min(len(lat) - 1, int(len(lat) * q / 100))] for q in (50, 95, 99)}


def pipeline_main(a, argv) -> int:
    """Latency of the full pipeline, quiet and with the other core busy (see the docstring)."""
    work = Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    impls = {"this tree": None}
    if a.baseline_src:
        impls[f"baseline ({a.baseline_src})"] = os.fspath(Path(a.baseline_src).resolve())
    specs = [spec.partition("=")[::2] for spec in a.pipeline]
    runs, load_before = {}, load_average()
    try:
        for rnd in range(a.repeat):
            for name, paths in specs:
                index, _, queries = paths.rpartition(":")
                for impl, src in impls.items():
                    for condition in ("quiet", "other core busy"):
                        spinner = None
                        if condition != "quiet":
                            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        try:
                            for config in ("full", "bm25"):
                                result = work / "pipeline.json"
                                env = dict(os.environ)
                                if src:
                                    env["PYTHONPATH"] = src
                                _log(f"round {rnd + 1}: {name}, {impl}, {config}, {condition}")
                                subprocess.run([sys.executable, os.fspath(Path(__file__).resolve()),
                                                "--child", "pipeline", "--index", index,
                                                "--query-set", f"pipeline={queries}",
                                                "--result", os.fspath(result),
                                                "--config", config, "--passes", str(a.passes)],
                                               check=True, env=env)
                                runs.setdefault((name, impl, config, condition), []).append(
                                    json.loads(result.read_text()))
                        finally:
                            if spinner is not None:
                                spinner.kill()
                                spinner.wait()
        print(f"Command: `{shlex.join(argv)}`\n\nMachine: {_machine()}; {_git_state()}; load "
              f"average (1/5/15 min) before / after: {load_before} / {load_average()}\n")
        print("| index | implementation | search | condition | p50 ms | p95 ms | p99 ms | "
              "CPU ms / query | CPU p50 / p95 ms | p95 ÷ BM25 alone |")
        print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
        best, notes = {}, []
        for key, rs in runs.items():
            pct = [_percentiles(r["latency_ms"]) for r in rs]
            best[key] = {q: min(p[q] for p in pct) for q in ("p50", "p95", "p99")}
            best[key]["cpu"] = min(r["cpu_ms"] for r in rs)
            # the search thread's CPU time per search: what a loaded machine inflates least
            cpu_pct = [_percentiles(r.get("cpu_each_ms") or [float("nan")]) for r in rs]
            best[key]["cpu50"] = min(p["p50"] for p in cpu_pct)
            best[key]["cpu95"] = min(p["p95"] for p in cpu_pct)
            notes.append(f"{', '.join(key)}: p95 over the rounds "
                         + ", ".join(f"{p['p95']:.1f}" for p in pct) + " ms")
        for (name, impl, config, condition), b in best.items():
            r = runs[(name, impl, config, condition)][0]
            what = (f"full: {r['n_features']} features, ranker" if config == "full"
                    else "BM25 top-10 alone")
            ratio = b["p95"] / best[(name, impl, "bm25", condition)]["p95"]
            print(f"| {name} | {impl} | {what} | {condition} | {b['p50']:.1f} | {b['p95']:.1f} "
                  f"| {b['p99']:.1f} | {b['cpu']:.1f} | {b['cpu50']:.1f} / {b['cpu95']:.1f} "
                  f"| {ratio:.1f} |")
        print()
        for name, _ in specs:
            for impl in impls:
                q = best[(name, impl, "full", "quiet")]["p95"]
                busy = best[(name, impl, "full", "other core busy")]["p95"]
                print(f"- {name}, {impl}: full-pipeline p95 with the other core busy / quiet = "
                      f"{busy / q:.2f}")
        for name, _ in specs:
            n = len(runs[(name, next(iter(impls)), "full", "quiet")][0]["latency_ms"])
            print(f"- {name}: {n} searches per measurement ({a.passes} passes), best of "
                  f"{a.repeat} interleaved rounds per percentile")
        for impl in impls:
            loaded = {r.get("compiled", False) for key, rs in runs.items() if key[1] == impl
                      for r in rs}
            print(f"- {impl}: compiled kernels (numba) "
                  + ("loaded before the first search" if loaded == {True} else
                     "not loaded (the numpy paths)" if loaded == {False} else "in some runs"))
        for line in notes:
            print(f"- {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def child_main(a) -> int:
    if a.engine == "pipeline":
        Path(a.result).write_text(json.dumps(_pipeline_child(a)))
        return 0
    stopwords = json.loads(Path(a.stopwords).read_text()) if a.stopwords else None
    engine = "tantivy" if a.engine.startswith("tantivy") else a.engine
    if a.phase == "build":
        out = {"cqa": lambda: _cqa_build(a), "bm25s": lambda: _bm25s_build(a, stopwords),
               "tantivy": lambda: _tantivy_build(a, stopwords)}[engine]()
    else:
        sets = _query_sets(a)
        out = {"cqa": lambda: _cqa_query(a, sets),
               "bm25s": lambda: _bm25s_query(a, sets, stopwords),
               "tantivy": lambda: _tantivy_query(a, sets, stopwords)}[engine]()
    out["peak_rss_mb"] = memory_mb()[0]
    Path(a.result).write_text(json.dumps(out))
    return 0


# ---------------------------------------------------------------------------------------
# Parent: runs the children one after the other and prints the report
# ---------------------------------------------------------------------------------------
def _log(msg):
    print(f"[bench_search {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _run_child(work, engine, phase, tag, archive, sets, index, extra=(), label=None):
    result = work / f"{tag}.{phase}.json"
    cmd = [sys.executable, os.fspath(Path(__file__).resolve()), "--child", engine,
           "--phase", phase, "--archive", os.fspath(archive),
           *[arg for name, path in sets.items() for arg in ("--query-set", f"{name}={path}")],
           "--index", os.fspath(index), "--result", os.fspath(result),
           "--stopwords", os.fspath(work / "stopwords.json"), *extra]
    label = label or tag
    _log(f"{label}: {phase} ...")
    subprocess.run(cmd, check=True)
    out = json.loads(result.read_text())
    summary = {k: v for k, v in out.items() if isinstance(v, float)}
    summary.update({f"{mode} q/s": m["qps"] for mode, m in out.get("modes", {}).items()})
    _log(f"{label}: {phase} done " + ", ".join(f"{k}={v:.3g}" for k, v in summary.items()))
    return out


def _best(builds, queries):
    """Best of the repetitions: fastest build and loops, largest RSS; all values kept."""
    build = dict(builds[0])
    for key in ("build_s", "build_cpu_s"):
        build[key] = min(b[key] for b in builds)
        build[f"all_{key}"] = [b[key] for b in builds]
    build["peak_rss_mb"] = max(b["peak_rss_mb"] for b in builds)
    query = dict(queries[0])
    query["peak_rss_mb"] = max(q["peak_rss_mb"] for q in queries)
    query["open_s"] = min(q["open_s"] for q in queries)
    query["first_query_ms"] = min(q["first_query_ms"] for q in queries)
    query["modes"] = {}
    for mode, first in queries[0]["modes"].items():
        best = dict(first)
        for key in ("qps", "cpu_qps"):
            best[key] = max(q["modes"][mode][key] for q in queries)
            best[f"all_{key}"] = [q["modes"][mode][key] for q in queries]
        if "p50_ms" in first:
            best["p50_ms"] = min(q["modes"][mode]["p50_ms"] for q in queries)
            best["p99_ms"] = min(q["modes"][mode]["p99_ms"] for q in queries)
        query["modes"][mode] = best
    return {"build": build, "query": query}


def _jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def _git_state() -> str:
    """``git abc1234`` of the measured package (``+ uncommitted changes`` when dirty)."""
    repo = HERE.parent
    try:
        head = subprocess.run(["git", "-C", os.fspath(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", os.fspath(repo), "status", "--porcelain",
                                "--", "cqa_search"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"git {head}" + (" + uncommitted changes" if dirty else "")


def _machine() -> str:
    """CPU, memory, OS, Python and package versions."""
    model, mem_gb = "", float("nan")
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = next(line for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
        mem_gb = int(mem.split()[1]) / 1024 ** 2
    except (OSError, StopIteration, ValueError):
        pass
    versions = []
    for dist in ("cqa-search", "numpy", "scipy", "scikit-learn", "PyStemmer", "bm25s",
                 "tantivy"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{os.cpu_count()} CPUs ({usable} usable) {model}, {mem_gb:.0f} GB RAM, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
            + ", ".join(versions))


def _ratio(x, ref):
    return f"{x / ref:.2f}" if ref else "n/a"


def report(sections, *, argv, info, notes):
    """The Markdown report (a list of lines); ``sections``: ``(query set, rows, bm25s row,
    tantivy row, jaccard, n_check)`` each."""
    out = ["## Search benchmark", "",
           f"- command: `{' '.join(shlex.quote(a) for a in argv)}`",
           *[f"- {k}: {v}" for k, v in info.items()]]
    empty = {"qps": 0, "cpu_qps": 0, "build_s": 0, "build_cpu_s": 0, "peak_rss_mb": 0}
    for name, rows, base, peer, jaccard, n_check in sections:
        base, peer = base or empty, peer or empty
        out += ["", f"### Queries: {name}", "",
                "| engine | build s | build CPU s | index MB | peak RSS MB | q/s | q/s per CPU s "
                "| q/s ÷ tantivy, wall / CPU | q/s ÷ bm25s, wall / CPU "
                "| build ÷ tantivy, wall / CPU (lower is better) "
                "| query RSS ÷ tantivy (lower is better) |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            out.append(
                f"| {r['label']} | {r['build_s']:.1f} | {r['build_cpu_s']:.1f} | "
                f"{r['index_mb']:.0f} | {r['peak_rss_mb']:.0f} | {r['qps']:.0f} | "
                f"{r['cpu_qps']:.0f} | {_ratio(r['qps'], peer['qps'])} / "
                f"{_ratio(r['cpu_qps'], peer['cpu_qps'])} | {_ratio(r['qps'], base['qps'])} / "
                f"{_ratio(r['cpu_qps'], base['cpu_qps'])} | "
                f"{_ratio(r['build_s'], peer['build_s'])} / "
                f"{_ratio(r['build_cpu_s'], peer['build_cpu_s'])} | "
                f"{_ratio(r['query_rss_mb'], peer.get('query_rss_mb', 0))} |")
        out += ["", "| engine | p50 ms | p99 ms | query RSS MB | open ms | first query ms "
                "| RSS after imports MB |", "|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            p = ((f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f}") if r.get("p50_ms") is not None
                 else "– | –")
            out.append(f"| {r['label']} | {p} | {r['query_rss_mb']:.0f} | "
                       f"{1e3 * r['open_s']:.1f} | {r['first_query_ms']:.1f} | "
                       f"{r['import_rss_mb']:.0f} |")
        out += ["", f"Sanity check, mean Jaccard overlap of the top-{K} with bm25s's on the "
                f"first {n_check} queries: "
                + (", ".join(f"{k} {v:.3f}" for k, v in jaccard.items())
                   or "n/a (needs bm25s and another engine in the run)")]
    out += ["", "Ratios are against the tantivy row with the same analysis (\"tantivy, custom "
            "analyzer as ours\") and the bm25s per-query row of the same query set. q/s per "
            "CPU s = queries per second of CPU time. peak RSS = the larger of the build "
            "process's and the query process's peaks; query RSS = the query process's (an "
            "index opened and searched).", ""] + [f"- {n}" for n in notes]
    return out


def _label(engine, tag, mode, m):
    if engine == "cqa":
        fields = tag.split("-", 1)[1].replace("+", ",")
        what = {"bm25": "BM25 top-10, `features=()`",
                "bm25-numpy": "BM25 top-10, `features=()`, numpy paths",
                "bm25f": "BM25F top-10 (title 2, body 1), `features=()`",
                "bm25f-numpy": "BM25F top-10 (title 2, body 1), `features=()`, numpy paths"}.get(
            mode, f"default config ({m.get('n_features')} feature scores per hit)")
        return f"cqa_search `fields=({fields})`, {what}"
    if engine == "bm25s":
        return ("bm25s, per-query loop" if mode == "per_query" else
                "bm25s, one batch call (tokenize + retrieve)")
    return ("tantivy, custom analyzer as ours" if engine == "tantivy"
            else "tantivy, built-in en_stem")


def _run_all(a, work, archive, sets, jobs):
    """{tag: best-of build and query results}, running every process ``a.repeat`` times."""
    common = ["--check", str(a.check)] + (["--n-queries", str(a.n_queries)]
                                          if a.n_queries else [])
    runs = {tag: {"build": [], "query": []} for _, tag, _ in jobs}
    for rep in range(a.repeat):  # repetitions interleaved, so load spikes hit all engines
        for engine, tag, extra in jobs:
            index = work / f"index-{tag}"
            shutil.rmtree(index, ignore_errors=True)
            if not engine.startswith("cqa"):
                index.mkdir()
            label = tag if a.repeat == 1 else f"{tag} (run {rep + 1}/{a.repeat})"
            build = _run_child(work, engine, "build", tag, archive, sets, index,
                               extra + common, label)
            build["index_bytes"] = dir_bytes(index)
            query = _run_child(work, engine, "query", tag, archive, sets, index,
                               extra + common, label)
            runs[tag]["build"].append(build)
            runs[tag]["query"].append(query)
            if not a.keep_indexes or rep + 1 < a.repeat:
                shutil.rmtree(index, ignore_errors=True)
    return {tag: _best(r["build"], r["query"]) for tag, r in runs.items()}


def _inputs(a, work):
    """(archive, queries, whole questions): the paths of the archive (given, generated, its
    first ``--limit`` records), its queries (None without) and ``--whole-questions``
    questions of the archive as queries (None without)."""
    if a.generate:
        archive = work / f"synth{a.generate}.jsonl"
        queries = work / f"synth{a.generate}_queries.jsonl"
        if not (archive.exists() and queries.exists()):
            _log(f"generating {archive} with {SYNTH}")
            subprocess.run([sys.executable, os.fspath(SYNTH), str(a.generate),
                            os.fspath(archive), "--queries", str(a.n_queries or 1000),
                            os.fspath(queries)], check=True)
    elif a.archive and (a.queries or a.whole_questions):
        archive, queries = Path(a.archive), a.queries and Path(a.queries)
    else:
        raise SystemExit("bench_search: give ARCHIVE and QUERIES (or --whole-questions N), "
                         "or --generate N")
    if a.limit:
        limited = work / f"archive_first{a.limit}.jsonl"
        with open(archive, encoding="utf-8") as src, open(limited, "w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if i >= a.limit:
                    break
                dst.write(line)
        archive = limited
    whole = None
    if a.whole_questions:
        whole = work / f"whole_questions_{a.whole_questions}.jsonl"
        whole_questions(archive, a.whole_questions, whole)
    return archive, queries, whole


def parent_main(a, argv) -> int:
    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        raise SystemExit(f"bench_search: unknown engine {bad[0]!r} (choose from "
                         f"{', '.join(ENGINES)})")
    tmp = tempfile.mkdtemp(prefix="bench_search_") if a.work_dir is None else None
    work = Path(tmp or a.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        archive, queries, whole = _inputs(a, work)
        sets = {}
        if queries:
            sets[f"{queries.name} (its `text` field)"] = queries
        if whole:
            sets[f"{a.whole_questions} archive questions, title + body"] = whole
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        # Given to the bm25s and tantivy children as data, so that they need not import
        # scikit-learn (whose import would inflate their RSS).
        (work / "stopwords.json").write_text(json.dumps(sorted(ENGLISH_STOP_WORDS)))
        n_queries = {name: len(read_query_texts(path, a.n_queries)) for name, path in sets.items()}
        _, doc_ids = _read_texts(archive)
        jobs = []  # (engine, tag, extra child arguments)
        for e in engines:
            if e in ("cqa", "cqa-question"):
                jobs.append(("cqa", "cqa-question", ["--fields", "question"]))
                if e == "cqa":
                    jobs.append(("cqa", "cqa-question+answers", ["--fields", "question,answers"]))
            elif e == "cqa-bm25f":  # the question and its title: BM25 and BM25F, one process
                jobs.append(("cqa", "cqa-question+title", ["--fields", "question,title"]))
            else:
                jobs.append((e, e, []))
        state, load_before = _git_state(), load_average()
        results = _run_all(a, work, archive, sets, jobs)
        state_after = _git_state()
        notes = []
        rows = {name: [] for name in sets}
        base, peer, tops = {}, {}, {name: {} for name in sets}
        for engine, tag, _ in jobs:
            b, q = results[tag]["build"], results[tag]["query"]
            for key, m in q["modes"].items():
                mode, name = key.split("|", 1)
                row = {"label": _label(engine, tag, mode, m), "build_s": b["build_s"],
                       "build_cpu_s": b["build_cpu_s"], "index_mb": b["index_bytes"] / 1e6,
                       "peak_rss_mb": max(b["peak_rss_mb"], q["peak_rss_mb"]),
                       "query_rss_mb": q["peak_rss_mb"], "open_s": q["open_s"],
                       "first_query_ms": q["first_query_ms"],
                       "import_rss_mb": q["import_rss_mb"], "qps": m["qps"],
                       "cpu_qps": m["cpu_qps"], "p50_ms": m.get("p50_ms"),
                       "p99_ms": m.get("p99_ms")}
                rows[name].append(row)
                if engine == "bm25s":
                    if mode == "per_query":
                        base[name] = row
                        tops[name]["bm25s"] = [[doc_ids[i] for i in t] for t in m["top"]]
                else:
                    if engine == "tantivy":
                        peer[name] = row
                    label = {"cqa": f"{tag} {mode}", "tantivy": "tantivy (same analysis)",
                             "tantivy-en_stem": "tantivy en_stem"}[engine]
                    tops[name][label] = m["top"]
            if a.repeat > 1:
                spread = "; ".join(f"{mode} q/s {min(m['all_qps']):.0f}–{max(m['all_qps']):.0f}"
                                   f" (per CPU s {min(m['all_cpu_qps']):.0f}–"
                                   f"{max(m['all_cpu_qps']):.0f})"
                                   for mode, m in q["modes"].items())
                notes.append(f"{tag} over the {a.repeat} runs: build "
                             f"{min(b['all_build_s']):.1f}–{max(b['all_build_s']):.1f} s "
                             f"(CPU {min(b['all_build_cpu_s']):.1f}–"
                             f"{max(b['all_build_cpu_s']):.1f} s); {spread}")
            if engine == "cqa":
                notes.append(f"{tag}: {b['n_terms']:,} terms; its index includes the document "
                             f"store archive.jsonl, {b['doc_store_bytes'] / 1e6:.0f} MB of the "
                             f"{b['index_bytes'] / 1e6:.0f} MB")
                notes.append(f"{tag}: BM25 top k by the compiled kernel (numba), loaded in "
                             f"{1e3 * q['kernel_load_s']:.0f} ms before the first query"
                             if q.get("compiled") else
                             f"{tag}: BM25 top k by the numpy path (no compiled kernel)")
                if q.get("bm25f_first_query_ms") is not None:
                    notes.append(f"{tag}: BM25F's first query {q['bm25f_first_query_ms']:.0f} "
                                 "ms (its combined postings and posting weights made; BM25's "
                                 "weights are stored)")
            elif engine.startswith("tantivy"):
                notes.append(f"{tag}: {b['segments']} segment(s) after commit and merges")
            elif engine == "bm25s":
                notes.append(f"bm25s: {b['n_terms']:,} terms")
        sections = []
        for name in sets:
            ref = tops[name].pop("bm25s", None)
            jaccard = ({} if ref is None else
                       {label: statistics.fmean(_jaccard(x, y) for x, y in zip(t, ref))
                        for label, t in tops[name].items()})
            sections.append((name, rows[name], base.get(name), peer.get(name), jaccard,
                             min(a.check, n_queries[name])))
        info = {"machine": _machine(),
                "cqa_search": state + ("" if state_after == state
                                       else f" (changed during the run, now {state_after})"),
                "data": f"{len(doc_ids):,} archive records; queries: "
                        + ", ".join(f"{n:,} ({name})" for name, n in n_queries.items())
                        + f"; top-{K}, one thread"
                        + (f"; best of {a.repeat} runs (fastest build and query loop, "
                           "largest RSS)" if a.repeat > 1 else ""),
                "load average (1/5/15 min) before / after": f"{load_before} / {load_average()}"}
        lines = report(sections, argv=argv, info=info, notes=notes)
        print("\n".join(lines))
        if a.json_out:
            Path(a.json_out).write_text(json.dumps({"argv": argv, "info": info,
                                                    "results": results, "rows": rows},
                                                   indent=1))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def quick_main(a, argv) -> int:
    """The speed check (``--quick``): its archive (generated unless given), its query sets
    and its cached indexes in the work directory, measured by :mod:`_speed_check`."""
    given = bool(a.archive)
    if not given:
        a.generate = a.generate or DEFAULT_SIZE
    a.whole_questions = a.whole_questions or N_WHOLE
    work = Path(a.work_dir or HERE.parent / "indexes" / "speed-check")
    work.mkdir(parents=True, exist_ok=True)
    archive, queries, whole = _inputs(a, work)
    return speed_check(archive, queries, whole, work, rounds=a.repeat or ROUNDS, argv=argv,
                       use_references=not given and a.generate == DEFAULT_SIZE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive", nargs="?", help="archive JSONL (id, title, body, ...)")
    ap.add_argument("queries", nargs="?", help="queries JSONL (a 'text' field per line)")
    ap.add_argument("--whole-questions", type=int, metavar="N",
                    help="also time N archive questions (title + body) as queries (sampled "
                         "with seed 7 among the first 200,000 records)")
    ap.add_argument("--generate", type=int, metavar="N",
                    help=f"write an N-question archive and its queries with "
                         f"{Path(SYNTH).name} "
                         "into the work dir (reused when present)")
    ap.add_argument("--work-dir", help="where indexes go (default: a temporary directory, "
                                       "deleted at the end)")
    ap.add_argument("--engines", default=",".join(ENGINES[:4]),
                    help=f"comma-separated, among {', '.join(ENGINES)} (default: the first "
                         "four; cqa-question: cqa's question-only build alone; cqa-bm25f: "
                         "an index of the questions and their titles, BM25 and BM25F)")
    ap.add_argument("--limit", type=int, metavar="N", help="use the first N archive records")
    ap.add_argument("--n-queries", type=int, metavar="Q",
                    help="use the first Q queries (default all; --generate writes 1000)")
    ap.add_argument("--repeat", type=int, metavar="R",
                    help="run every build and query process R times (interleaved) and "
                         "report the best time and the largest RSS (default 1)")
    ap.add_argument("--check", type=int, default=20,
                    help="queries compared with bm25s's top-10 (default 20)")
    ap.add_argument("--keep-indexes", action="store_true", help="keep the built indexes")
    ap.add_argument("--json-out", help="also write the raw measurements here")
    ap.add_argument("--quick", action="store_true",
                    help="the speed check: ours beside tantivy in one process and the full "
                         "pipeline's p95, against BENCHMARKS.md (--generate: the archive's "
                         f"size, default {DEFAULT_SIZE:,}; --work-dir: its cache, default "
                         "indexes/speed-check; --repeat: its rounds, default 3)")
    # Internal: one engine and phase in a child process.
    ap.add_argument("--pipeline", action="append", metavar="NAME=INDEX:QUERIES",
                    help="measure the full pipeline on this index (repeatable)")
    ap.add_argument("--passes", type=int, default=3,
                    help="passes over the queries per pipeline measurement (default 3)")
    ap.add_argument("--baseline-src", metavar="DIR",
                    help="also measure the pipeline with cqa_search imported from DIR")
    ap.add_argument("--child", choices=ENGINES + ("pipeline",), help=argparse.SUPPRESS)
    ap.add_argument("--config", choices=("full", "bm25"), help=argparse.SUPPRESS)
    ap.add_argument("--phase", choices=("build", "query"), help=argparse.SUPPRESS)
    ap.add_argument("--archive", dest="child_archive", help=argparse.SUPPRESS)
    ap.add_argument("--query-set", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--stopwords", help=argparse.SUPPRESS)
    ap.add_argument("--fields", default="question,answers", help=argparse.SUPPRESS)
    raw = sys.argv[1:] if argv is None else list(argv)
    a = ap.parse_args(raw)
    if a.repeat is not None and a.repeat < 1:
        ap.error(f"--repeat must be at least 1; got {a.repeat}")
    if a.quick:
        return quick_main(a, ["python", "scripts/bench_search.py", *raw])
    a.repeat = a.repeat or 1
    if a.child:
        a.engine, a.archive = a.child, a.child_archive
        return child_main(a)
    if a.pipeline:
        return pipeline_main(a, ["python", "scripts/bench_search.py", *raw])
    return parent_main(a, ["python", "scripts/bench_search.py", *raw])


if __name__ == "__main__":
    sys.exit(main())
