"""What the scripts share: default paths, clocks and memory, the SemEval-2016 setting of the
paper tables, the model families fitted with their defaults, and Markdown table cells.

The scripts are run as ``python scripts/NAME.py`` (Python puts ``scripts/`` first on the
path, so ``import _common`` finds this module); everything else they use is the package.
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
import warnings
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
#: The judged collections (``--data``) and the synthetic archive generator, next to the
#: repository.
DATA = os.path.join(HERE, "..", "..", "shared", "data")
SYNTH = os.path.join(HERE, "..", "..", "shared", "bench", "synth_archive.py")


# -- arguments and reports -----------------------------------------------------------------
def paper_parser(doc, work) -> argparse.ArgumentParser:
    """The options of a script run on the judged collections: ``--data``, ``--work`` (a
    directory ``work`` under the temporary directory by default) and ``--out``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), work))
    ap.add_argument("--out", help="also write the Markdown report to this file")
    return ap


def write_report(path, text) -> None:
    """Write ``text`` to ``path`` (nothing when ``path`` is None)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


# -- clocks, memory, disk, load -------------------------------------------------------------
Timed = namedtuple("Timed", "value wall cpu")


class Clock:
    """Wall-clock and CPU seconds of a ``with`` block (``.wall``, ``.cpu``)."""

    def __enter__(self):
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu
        return False


def timed(fn) -> Timed:
    """``fn()``'s value with the wall-clock and CPU seconds it took."""
    with Clock() as clock:
        value = fn()
    return Timed(value, clock.wall, clock.cpu)


def memory_mb() -> tuple:
    """(peak, current) resident set size of this process in MB.

    Linux's ``VmHWM`` (the high-water mark of this process image) and ``VmRSS``; elsewhere
    ``ru_maxrss`` for the peak (on Linux it would include the parent's RSS inherited through
    fork + exec) and NaN for the current size.
    """
    found = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    found[line.split(":")[0]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    if "VmHWM" not in found:
        scale = 1024 ** 2 if sys.platform == "darwin" else 1024  # bytes on macOS, KB elsewhere
        found["VmHWM"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
    return found["VmHWM"], found.get("VmRSS", float("nan"))


def dir_bytes(path) -> int:
    """Bytes of the files under ``path`` (a file hard-linked twice counts once)."""
    seen, total = set(), 0
    for folder, _, files in os.walk(path):
        for name in files:
            st = os.stat(os.path.join(folder, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes (``1.0/0.8/0.5``)."""
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# -- the SemEval-2016 Task 3 setting of the paper tables -------------------------------------
SEMEVAL2016 = "semeval2016-task3-cqa-ql"
XML = "SemEval2016-Task3-CQA-QL-{}.xml"
SEMEVAL2015 = ("SemEval2015-Task3-CQA-QL-dev-reformatted-excluding-2016-questions-cleansed.xml",
               "SemEval2015-Task3-CQA-QL-test-reformatted-excluding-2016-questions-multiline.xml")
#: 2015 threads that are 2016 test questions (../shared/data/semeval2015-task3-reformatted/
#: README.md): never in an archive.
LEAKED_2015 = {"Q2630", "Q2656", "Q2828", "Q2938", "Q2956"}
#: The splits scored: choices on dev, test once.
SPLITS = ("dev", "test")
METRICS = ["map", "mrr", "p@1", "p@5"]


def semeval_xml(data, split) -> str:
    """The SemEval-2016 file of ``split`` (``train-part2``, ``dev``, ``test``)."""
    return os.path.join(data, SEMEVAL2016, XML.format(split))


def semeval_part1_csv(data) -> str:
    """The derived copy of SemEval-2016 train-part1 (columns ``feature`` = OrgQSubject + " "
    + RelQSubject, ``question`` = OrgQBody, ``rel_question`` = RelQBody, ``labels``; no ids;
    ../shared/data/semeval2016-task3-cqa-ql/README.md)."""
    return os.path.join(data, SEMEVAL2016, "train-part1-derived", "TRAIN-BASE.csv")


def semeval_extra_questions(data):
    """The archive's questions besides the 2016 threads: the distinct related questions of
    the derived part-1 CSV (their bodies: the CSV has no related subject of its own) and
    the 2015 threads, minus the five that are 2016 test questions."""
    from cqa_search.readers import read_questions

    part1 = read_questions(semeval_part1_csv(data), columns={"body": "rel_question"},
                           auto_id=True)
    threads2015 = read_questions([os.path.join(data, "semeval2015-task3-reformatted", name)
                                  for name in SEMEVAL2015])
    return itertools.chain({q.body: q for q in part1}.values(),
                           (q for q in threads2015 if q.id not in LEAKED_2015))


def read_split(folder) -> tuple:
    """(queries, qrels, candidates run) of a converted collection."""
    from cqa_search.evaluation import read_qrels, read_queries, read_run

    return (read_queries(os.path.join(folder, "queries.jsonl")),
            read_qrels(os.path.join(folder, "qrels.txt")),
            read_run(os.path.join(folder, "candidates.run")))


def convert_split(data, split, work) -> tuple:
    """:func:`read_split` of a SemEval-2016 split, converted into ``work/split`` once."""
    from cqa_search.evaluation.datasets import convert_semeval

    out = os.path.join(work, split)
    if not os.path.exists(os.path.join(out, "qrels.txt")):
        convert_semeval([semeval_xml(data, split)], out)
    return read_split(out)


def prepare(data, work):
    """Convert the splits and build the shared archive index (cached in ``work``): the
    related questions of train-part2, dev and test and :func:`semeval_extra_questions`.

    Returns
    -------
    engine : SearchEngine
    splits : dict
        Split -> (queries, qrels, candidates run), for dev and test.
    """
    from cqa_search import SearchEngine, build_index
    from cqa_search.evaluation.datasets import convert_semeval
    from cqa_search.index.store import is_compatible

    splits = {split: convert_split(data, split, work) for split in SPLITS}
    index = os.path.join(work, "index")
    if not is_compatible(index):
        collection = convert_semeval([semeval_xml(data, s) for s in ("train-part2", *SPLITS)],
                                     os.path.join(work, "all"),
                                     extra_questions=semeval_extra_questions(data))
        print(f"archive: {collection}", file=sys.stderr)
        build_index(collection.file("archive.jsonl"), index)
    return SearchEngine.open(index), splits


def self_candidate_queries(engine, splits) -> set:
    """Queries that have themselves among their candidates (same subject and body): 41
    of the 70 test queries, none of train or dev (their candidate is always PerfectMatch).
    Tables report test MAP without them too."""
    from cqa_search.evaluation.datasets import self_candidates

    return {qid for queries, _, candidates in splits.values()
            for qid in self_candidates(queries, candidates, engine.archive)}


def score(engine, model, split_data):
    """Per-query metrics of reranking a split's candidates by one term model."""
    from cqa_search import SearchConfig
    from cqa_search.evaluation import evaluate, run_queries

    queries, qrels, candidates = split_data
    run = run_queries(engine.with_config(SearchConfig(retrieval=model, features=(), ranker=None)),
                      queries, candidates=candidates)
    return evaluate(run, qrels, metrics=METRICS, rerank=True)


def positions(run):
    """The run with every candidate scored 1/position in its query's search-engine order
    (what part 1 has), instead of the official 1/RELQ_RANKING_ORDER."""
    out = {}
    for qid, docs in run.items():
        ranked = sorted(docs, key=lambda d: -docs[d])  # stable: file order on ties
        out[qid] = {d: 1.0 / (i + 1) for i, d in enumerate(ranked)}
    return out


def map_without(per_query, exclude) -> float:
    """MAP (in %) over the queries of ``per_query`` not in ``exclude``."""
    return 100 * per_query.loc[~per_query.index.isin(list(exclude)), "map"].mean()


def split_cells(per_split, exclude=None) -> list:
    """The dev and test metrics of one row (in %, formatted), and with ``exclude`` test
    MAP without those queries."""
    from cqa_search.evaluation import summarize

    values = (*summarize(per_split["dev"], percent=True),
              *summarize(per_split["test"], percent=True))
    if exclude is not None:
        values = (*values, map_without(per_split["test"], exclude))
    return [f"{v:.2f}" for v in values]


def p_values(a, b) -> str:
    """``t-test / randomization`` p-values of per-query MAP, ``a`` against ``b``."""
    from cqa_search.evaluation import compare

    sig = compare(a, b, metrics=["map"]).loc["map"]
    return f"{sig['p_ttest']:.3f} / {sig['p_randomization']:.3f}"


def table(rows, baseline, baseline_name, exclude=None) -> str:
    """Markdown table of ``[(name, {split: per-query DataFrame})]`` with test-MAP p-values
    against ``baseline`` (a per-query test DataFrame); with ``exclude`` (the
    :func:`self_candidate_queries`), also test MAP over the other test queries."""
    n_other = None if exclude is None else int((~baseline.index.isin(list(exclude))).sum())
    header = ("| system | dev MAP | dev MRR | dev P@1 | dev P@5 | test MAP | test MRR | test P@1 "
              "| test P@5 | " + ("" if exclude is None else
                                f"test MAP, {n_other} queries without self-candidate | ")
              + f"test MAP vs {baseline_name}: p (t-test) | p (rand.) |")
    lines = [header, "|---|" + "---:|" * (header.count("|") - 2)]
    for name, per_split in rows:
        lines.append(f"| {name} | " + " | ".join(split_cells(per_split, exclude))
                     + " | " + p_values(per_split["test"], baseline).replace(" / ", " | ")
                     + " |")
    return "\n".join(lines)


# -- models fitted with the defaults of `cqa-search fit` --------------------------------------
def fit_default_models(path, families=("translation", "topics", "multiview"), log=None):
    """Fit the model families an index lacks with the defaults of ``cqa-search fit``
    (:func:`cqa_search.training.fit_family`; the multiview model's ibm1 view reads the
    translation model: fitted in this order), and return the index's engine."""
    from cqa_search import SearchEngine
    from cqa_search.training import fit_family

    for family in families:
        stored = SearchEngine.open(path).models
        if not any(name == family or name.startswith(family + "-") for name in stored):
            if log is not None:
                log(f"fitting {family} with its defaults")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit_family(path, family)
    return SearchEngine.open(path)


def stackexchange_sites(data) -> list:
    """The site folders of the StackExchange duplicates collection."""
    folder = os.path.join(data, "stackexchange")
    return sorted(os.path.join(folder, d) for d in os.listdir(folder)
                  if os.path.isdir(os.path.join(folder, d)))
