"""Reliability loops for stored indexes, shared by the tests (``tests/reliability``, small
N) and ``scripts/reliability.py`` (full N, the figures of BENCHMARKS.md).

- :func:`corrupt_and_open`: flip bits in every stored file of an index (arrays, JSON,
  the archive, the manifest), open it and search it; every case must end in a result or
  in "corrupted index" (IndexFormatError), never in another exception or a crash, and a
  result is compared with the pristine index's: the flips that change what a search
  returns without being refused are counted by file (``--verify`` refuses them). Run in
  a child process (:func:`run_corruptions`) so that a segmentation fault is seen, not
  suffered.
- :func:`kill_loop`: kill -9 ``cqa-search build-index``/``fit``/``train`` at random
  moments; after each kill the index opens and searches (the previous generation or the
  new one), and the next writer leaves no leftover behind.
- :func:`readers_against_writer`: reader processes open and search in a loop while a
  writer rebuilds (with another analyzer) and refits; a reader never fails.

The writers run as the command line runs them (``python -m cqa_search``), in processes of
their own.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from ..analysis import Analyzer
from ..archive import Question
from ..data import DEMO_ARCHIVE, DEMO_QRELS, DEMO_QUERIES, demo_dir
from ..engine import SearchEngine
from ..exceptions import CQASearchError, IndexFormatError
from ..index.build import build_index
from ..index.store import CURRENT, current_generation

__all__ = ["make_index", "demo_questions", "fresh_copy", "search_all", "corruption_cases",
           "corrupt_and_open", "run_corruptions", "kill_loop", "readers_against_writer"]

#: The command line, as a writer's process runs it.
CLI = (sys.executable, "-m", "cqa_search")

QUERIES = ["my car will not start in the morning", "cheap healthy meals", "sore throat",
           "category:Cooking rice", "visa"]


def demo_questions(n=None):
    """The first ``n`` questions of the demo archive (all by default)."""
    lines = (demo_dir() / DEMO_ARCHIVE).read_text(encoding="utf-8").splitlines()
    return [Question.from_dict(json.loads(line)) for line in lines[:n]]


def make_index(path, *, models=True) -> Path:
    """The demo archive indexed, with a small model of every family (the word vectors too)
    and a ranker (fitted and trained by the command line)."""
    path = Path(path)
    build_index(demo_dir() / DEMO_ARCHIVE, path)
    if models:
        for argv in (["fit", str(path), "translation", "--max-iter", "3"],
                     ["fit", str(path), "topics", "--n-shared", "4", "--n-category", "2",
                      "--max-iter", "10"],
                     ["fit", str(path), "multiview", "--views", "ibm1", "--n-components", "4",
                      "--max-iter", "10"],
                     ["fit", str(path), "embeddings"],
                     ["train", str(path), "--queries", str(demo_dir() / DEMO_QUERIES),
                      "--qrels", str(demo_dir() / DEMO_QRELS), "--learner", "ranksvm"]):
            done = subprocess.run([*CLI, *argv, "-q"], capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"cqa-search {' '.join(argv[:1] + argv[2:])} failed: "
                                   f"{done.stderr.strip()[-500:]}")
    return path


def search_all(path, queries=QUERIES, **open_options):
    """Open and search (``queries``, by default :data:`QUERIES`); returns what the searches
    returned (ids, exact scores, the questions as stored) to compare with another
    index's."""
    engine = SearchEngine.open(path, **open_options)
    found = []
    for text in queries:
        found.append([(hit.doc_id, repr(float(hit.score)), hit.question.to_json())
                      for hit in engine.search(text, k=5)])
    return found


# ---------------------------------------------------------------------------------------
# Bit flips
# ---------------------------------------------------------------------------------------
def corruption_cases(path, n_per_file, seed=0) -> list:
    """``(relative path, byte offset, bit)`` flips: for every file of the live generation,
    one in the first 128 bytes (an .npy header) and the others anywhere."""
    rng = random.Random(seed)
    root = Path(path) / current_generation(path)
    cases = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        size = file.stat().st_size
        if size == 0:
            continue
        rel = str(file.relative_to(root))
        for i in range(n_per_file):
            offset = rng.randrange(min(size, 128)) if i == 0 else rng.randrange(size)
            cases.append((rel, offset, 1 << rng.randrange(8)))
    return cases


def _flip(file, offset, bit):
    with open(file, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ bit]))


def corrupt_and_open(path, cases, *, verify=False, on_case=None) -> dict:
    """Every case on the index at ``path`` (each flip undone afterwards): outcome counts
    (results the same as the pristine index's or different, "corrupted index", another
    one-line error of cqa_search: e.g. a damaged ranker naming a feature no model gives),
    the unexpected outcomes (anything else), and the files whose flips changed the results
    (file -> cases). ``on_case(case)`` is called after each case (how a crash is traced to
    its case)."""
    root = Path(path) / current_generation(path)
    pristine = search_all(path)
    outcomes = {"same results": 0, "different results": 0, "corrupted index": 0,
                "other clear error": 0}
    unexpected, different = [], {}
    for rel, offset, bit in cases:
        file = root / rel
        _flip(file, offset, bit)
        try:
            found = [search_all(path, mmap=mmap, verify=verify) for mmap in (True, False)]
            if found[0] == found[1] == pristine:
                outcomes["same results"] += 1
            else:
                outcomes["different results"] += 1
                different[rel] = different.get(rel, 0) + 1
        except IndexFormatError:
            outcomes["corrupted index"] += 1
        except CQASearchError:
            outcomes["other clear error"] += 1
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            unexpected.append({"case": [rel, offset, bit], "error": type(exc).__name__,
                               "message": str(exc)[:300],
                               "where": traceback.format_exc().splitlines()[-3:]})
        finally:
            _flip(file, offset, bit)
            if on_case is not None:
                on_case([rel, offset, bit])
    return {"cases": len(cases), "outcomes": outcomes, "unexpected": unexpected,
            "different": different}


def run_corruptions(path, cases, *, verify=False, timeout=1800) -> dict:
    """:func:`corrupt_and_open` in a child process; a crash (signal) names its case."""
    code = ("import json, sys; from cqa_search.testing.harness import corrupt_and_open; "
            "print(json.dumps({'result': corrupt_and_open(sys.argv[1], json.loads(sys.argv[2]), "
            "verify=sys.argv[3] == '1', on_case=lambda case: print(json.dumps({'done': case}), "
            "flush=True))}))")
    proc = subprocess.run([sys.executable, "-c", code, os.fspath(path), json.dumps(cases),
                           "1" if verify else "0"], capture_output=True, text=True,
                          timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        done = {tuple(x["done"]) for x in lines if "done" in x}
        crashed = next((c for c in cases if tuple(c) not in done), None)
        return {"crashed": crashed, "returncode": proc.returncode, "stderr": proc.stderr[-2000:]}
    return next(x["result"] for x in lines if "result" in x)


# ---------------------------------------------------------------------------------------
# kill -9
# ---------------------------------------------------------------------------------------
def _commands(path):
    """Writers to kill: rebuilds, fits and a training run."""
    cli = list(CLI)
    archive = str(demo_dir() / DEMO_ARCHIVE)
    return [
        cli + ["build-index", archive, "-o", str(path), "-q"],
        cli + ["build-index", archive, "-o", str(path), "-q", "--stem", "porter"],
        cli + ["fit", str(path), "translation", "--max-iter", "2", "-q"],
        cli + ["fit", str(path), "topics", "--n-shared", "4", "--n-category", "2",
               "--max-iter", "10", "-q"],
        cli + ["train", str(path), "--queries", str(demo_dir() / DEMO_QUERIES), "--qrels",
               str(demo_dir() / DEMO_QRELS), "--learner", "ranksvm", "-q"],
    ]


def kill_loop(path, n_kills, *, seed=0, max_delay=3.0) -> dict:
    """kill -9 writers at random moments; check the index after each kill."""
    rng = random.Random(seed)
    commands = _commands(path)
    results = {"kills": 0, "finished_before_kill": 0, "open_failures": [], "generations": []}
    for i in range(n_kills):
        cmd = commands[i % len(commands)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.05, max_delay))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            results["kills"] += 1
        else:
            results["finished_before_kill"] += 1
        proc.wait()
        try:
            search_all(path)
            results["generations"].append(current_generation(path))
        except Exception as exc:  # noqa: BLE001
            results["open_failures"].append(f"{' '.join(cmd[3:5])}: {type(exc).__name__}: "
                                            f"{exc}")
    # the next writer that finishes removes what the killed ones left
    subprocess.run(commands[2], check=True, stdout=subprocess.DEVNULL)
    results["leftovers_after_next_write"] = sorted(
        n for n in os.listdir(path) if n.startswith((".tmp-", CURRENT + ".tmp")))
    results["generation_dirs"] = sorted(n for n in os.listdir(path) if n.startswith("gen-"))
    return results


# ---------------------------------------------------------------------------------------
# Readers against a writer
# ---------------------------------------------------------------------------------------
def _reader(path, seconds, queue):
    opened = failed = 0
    errors = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            engine = SearchEngine.open(path)
            for text in QUERIES[:3]:
                engine.search(text, k=5)
            opened += 1
        except Exception as exc:  # noqa: BLE001
            failed += 1
            if len(errors) < 5:
                errors.append(f"{type(exc).__name__}: {exc}")
    queue.put((opened, failed, errors))


def _writer(path, seconds):
    from ..factorization import TopicModel
    from ..index.models import add_model

    questions = demo_questions()
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        if i % 2 == 0:
            stem = "porter" if i % 4 == 0 else "snowball"
            build_index(questions, path, analyzer=Analyzer(stem=stem))
        else:
            engine = SearchEngine.open(path)
            model = TopicModel("nmf", n_shared=2, n_category=1, max_iter=3, tol=0)
            add_model(engine, "topics", model.fit(engine.view))
        i += 1
    return i


def readers_against_writer(path, n_readers, seconds) -> dict:
    """``n_readers`` processes open and search ``path`` while this process rewrites it."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(path, seconds, queue))
               for _ in range(n_readers)]
    for r in readers:
        r.start()
    writes = _writer(path, seconds)
    results = [queue.get(timeout=seconds + 120) for _ in readers]
    for r in readers:
        r.join()
    return {"readers": n_readers, "writes": writes,
            "opens": sum(r[0] for r in results), "failed_opens": sum(r[1] for r in results),
            "errors": [e for r in results for e in r[2]],
            "reader_exit_codes": [r.exitcode for r in readers]}


def fresh_copy(source, target) -> Path:
    """A copy of the index ``source`` at ``target`` (a loop may damage it)."""
    shutil.copytree(source, target, symlinks=True)
    return Path(target)


