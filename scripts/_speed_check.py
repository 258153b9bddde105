"""The speed check of ``bench_search.py --quick``: a minute's measurement anyone can run
before they stop, each figure against its reference in BENCHMARKS.md.

Everything runs in this one process, in rounds, ours and the peer taking turns every 20
queries (so a load that comes and goes hits them alike), on indexes it builds once and
keeps in the work directory:

* BM25 top-10 of short queries and of whole questions (title and body), one at a time:
  ``SearchEngine.search(text, k=10)`` with ``SearchConfig(retrieval=BM25(), features=(),
  ranker=None)`` on
  the compiled kernels (loaded first, as ``serve`` does) and on the numpy paths, beside
  tantivy with the same analysis (``_peers.tantivy_searcher``); ratios of queries per CPU
  second;
* the full pipeline on the demo archive: every archive-trained family (translation,
  topics, multiview, answers, word vectors: the hybrid first stage) and a RankSVM ranker
  trained on half of its judged queries with every feature; the p95 of the search thread's
  CPU time per search over its queries (three passes), BM25 alone beside it.

Each round gives one value per check; the verdict compares the rounds with the figure of the
same check in the table under BENCHMARKS.md's "The speed check" (its "this run" column: a
run of this check pasted there): FASTER when every round is better than the reference by more
than :data:`NOISE`, SLOWER when every round is worse by more than it, SAME otherwise. The
reference holds for the default archive only (``--generate`` 100,000, seed 7).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

from _common import load_average
from _peers import read_query_texts, tantivy_build, tantivy_searcher

REPO = Path(__file__).resolve().parent.parent
#: The archive the references in BENCHMARKS.md were measured on (``--generate``).
DEFAULT_SIZE = 100_000
N_SHORT, N_WHOLE, ROUNDS, PASSES = 500, 300, 3, 3
#: A round must differ from the reference by more than this share to count.
NOISE = 0.10
SECTION = "## The speed check"
#: The model families of the pipeline, in the order they are fitted (multiview reads the
#: translation model).
FAMILIES = ("translation", "topics", "multiview", "answers", "embeddings")
K = 10


def _log(msg):
    print(f"[speed check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _cached(index, archive, build) -> Path:
    """``index`` built by ``build(index)`` unless it was built from this very ``archive``
    (its path, size and modification time, kept in ``index/.source``) and ``build``'s
    ``check(index)`` accepts it."""
    index = Path(index)
    st = os.stat(archive)
    source = f"{os.path.abspath(archive)} {st.st_size} {st.st_mtime_ns}"
    marker = index / ".source"
    if marker.exists() and marker.read_text() == source and build.check(index):
        return index
    shutil.rmtree(index, ignore_errors=True)
    _log(f"building {index} (kept for the next runs)")
    build(index)
    marker.write_text(source)
    return index


def _cqa_build(archive):
    from cqa_search import build_index
    from cqa_search.index.store import is_compatible

    def build(index):
        build_index(archive, index, fields=("question",))

    build.check = is_compatible
    return build


def _tantivy_build(archive, stopwords):
    def build(index):
        index.mkdir(parents=True)
        tantivy_build(archive, index, "tantivy", stopwords)

    build.check = lambda index: (index / "meta.json").exists()
    return build


def _pipeline_build():
    """The demo archive with every family fitted and a ranker trained on every feature."""
    import warnings

    from cqa_search import build_index
    from cqa_search.data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir, demo_split
    from cqa_search.evaluation import read_qrels, read_queries
    from cqa_search.index.store import is_compatible
    from cqa_search.training import fit_family, train_ranker

    def build(index):
        build_index(demo_dir() / DEMO_ARCHIVE, index)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for family in FAMILIES:
                fit_family(index, family)
            training, _ = demo_split(read_queries(demo_dir() / DEMO_QUERIES))
            train_ranker(index, training, read_qrels(demo_dir() / DEMO_QRELS),
                         all_features=True, no_cv=True, assess=False)

    build.check = is_compatible
    return build, demo_dir() / DEMO_ARCHIVE, demo_dir() / DEMO_QUERIES


def _cpu_of_loops(runs, queries, use, chunk=20) -> dict:
    """CPU seconds of each run over ``queries``: ``runs`` maps a name to ``(search,
    kernels)`` (``use(kernels)`` chooses the compiled kernels or the numpy paths before
    it); the runs take turns every ``chunk`` queries, so that a load that comes and goes
    hits them alike (after one warm-up query each)."""
    spent = dict.fromkeys(runs, 0.0)
    for search, kernels in runs.values():
        use(kernels)
        search(queries[0])
    for start in range(0, len(queries), chunk):
        part = queries[start:start + chunk]
        for name, (search, kernels) in runs.items():
            use(kernels)
            started = time.process_time()
            for text in part:
                search(text)
            spent[name] += time.process_time() - started
    use("auto")
    return spent


def _p95_ms(engine, queries, passes) -> float:
    """The p95 of the thread CPU time per search (ms) over ``passes`` passes."""
    engine.search(queries[0], k=K)
    each = []
    for _ in range(passes):
        for text in queries:
            started = time.thread_time()
            engine.search(text, k=K)
            each.append(1e3 * (time.thread_time() - started))
    each.sort()
    return each[min(len(each) - 1, int(len(each) * 0.95))]


def references(path=REPO / "BENCHMARKS.md") -> dict:
    """``{check: value}`` of the table under :data:`SECTION` in BENCHMARKS.md (its "this
    run" column); empty when there is none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return {}
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        return {}
    body = text[start + len(SECTION) + 2:]
    body = body[:body.find("\n## ")] if "\n## " in body else body
    out = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2:
            number = re.match(r"\**([0-9][0-9,]*\.?[0-9]*)", cells[1])
            if number:
                out[cells[0]] = float(number.group(1).replace(",", ""))
    return out


def verdict(rounds, reference, higher_is_better=True) -> str:
    """FASTER / SAME / SLOWER of the ``rounds`` against ``reference`` (see the module)."""
    if reference is None:
        return "no reference"
    better = [(r / reference if higher_is_better else reference / r) for r in rounds]
    if min(better) > 1 + NOISE:
        return "FASTER"
    if max(better) < 1 - NOISE:
        return "SLOWER"
    return "SAME"


def speed_check(archive, short, whole, work, *, rounds, argv, use_references) -> int:
    """Run the check (see the module) and print its report; ``use_references``: the
    archive is the one the references were measured on."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from cqa_search import SearchConfig, SearchEngine, compiled
    from cqa_search.retrieval import BM25
    from cqa_search.evaluation import read_queries

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    started, load_before = time.perf_counter(), load_average()
    stopwords = sorted(ENGLISH_STOP_WORDS)
    name = Path(archive).stem
    ours_index = _cached(work / f"cqa-{name}", archive, _cqa_build(archive))
    peer_index = _cached(work / f"tantivy-{name}", archive, _tantivy_build(archive, stopwords))
    build, demo_archive, demo_queries = _pipeline_build()
    pipeline_index = _cached(work / "demo-pipeline", demo_archive, build)

    kernels = compiled.load()
    bm25 = SearchConfig(retrieval=BM25(), features=(), ranker=None)  # tantivy's model
    ours = SearchEngine.open(ours_index, config=bm25)
    peer, _ = tantivy_searcher(peer_index, "tantivy", stopwords, K)
    full = SearchEngine.open(pipeline_index)
    alone = full.with_config(SearchConfig(retrieval=BM25(), features=(), models=(),
                                          ranker=None))
    texts = [q["text"] for q in read_queries(demo_queries)]
    sets = {"short queries": read_query_texts(short, N_SHORT) if short else [],
            "whole questions": read_query_texts(whole, N_WHOLE) if whole else []}
    sets = {k: v for k, v in sets.items() if v}

    def ours_search(text):
        return ours.search(text, k=K).doc_ids

    values = {}  # check -> one value per round
    for rnd in range(rounds):
        _log(f"round {rnd + 1} of {rounds}")
        for what, queries in sets.items():
            cpu = _cpu_of_loops({"ours": (ours_search, "auto"), "numpy": (ours_search, "numpy"),
                                 "tantivy": (peer, "auto")}, queries, compiled.use)
            values.setdefault(f"{what}: ours ÷ tantivy", []).append(cpu["tantivy"] / cpu["ours"])
            values.setdefault(f"{what}: numpy paths ÷ tantivy", []).append(
                cpu["tantivy"] / cpu["numpy"])
            values.setdefault(f"{what}: numpy paths ÷ compiled", []).append(
                cpu["ours"] / cpu["numpy"])
        values.setdefault("full pipeline (demo): CPU p95 ms", []).append(
            _p95_ms(full, texts, PASSES))
        values.setdefault("BM25 alone (demo): CPU p95 ms", []).append(
            _p95_ms(alone, texts, PASSES))

    refs = references() if use_references else {}
    n_docs = ours.n_questions
    print(f"## Speed check\n\n- command: `{shlex.join(argv)}`\n"
          f"- archive: {n_docs:,} questions ({Path(archive).name}); "
          + ", ".join(f"{len(q)} {what}" for what, q in sets.items())
          + f"; the pipeline: the demo archive ({full.n_questions} questions, "
          f"{len(full.feature_names)} features, ranker {full.ranker_name!r}, "
          f"hybrid weight {full.hybrid_weight:g}), {len(texts)} queries x {PASSES}\n"
          f"- compiled kernels: {'loaded' if kernels else 'not available (numpy paths)'}; "
          f"{rounds} interleaved rounds in one process, one thread; load average before / "
          f"after {load_before} / {load_average()}; {time.perf_counter() - started:.0f} s\n"
          + ("" if use_references else
             "- references: none (BENCHMARKS.md's are for the default archive, "
             f"--generate {DEFAULT_SIZE})\n"))
    print("| check | this run | rounds | BENCHMARKS.md | verdict |")
    print("|---|---:|---|---:|---|")
    for check, rs in values.items():
        higher = "÷" in check  # ratios of speed; the rest are times
        best = max(rs) if higher else min(rs)
        ref = refs.get(check)
        print(f"| {check} | {best:.2f} | " + " ".join(f"{r:.2f}" for r in rs)
              + f" | {'–' if ref is None else f'{ref:.2f}'} | {verdict(rs, ref, higher)} |")
    print(f"\nthis run: the best round; a verdict needs every round beyond ±{NOISE:.0%} of "
          "the reference (ratios: higher is faster; ms: lower is faster)")
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        print("the machine is loaded (load average above its CPUs): the ms checks are CPU "
              "times that other jobs inflate (shared caches); the ratios hold better")
    return 0
