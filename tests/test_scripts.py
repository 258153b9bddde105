"""The benchmark and paper-table scripts start, and the benchmarks run end to end on a
tiny archive (their full runs are documented in BENCHMARKS.md)."""
import importlib.util
import json
import os
import random
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the scripts (scripts/_common.py is what they share, not a script)
SCRIPTS = sorted(f for f in os.listdir(os.path.join(ROOT, "scripts"))
                 if f.endswith(".py") and not f.startswith("_"))
WORDS = ("visa renew passport sofa cheap car engine battery water tap doha bank loan school "
         "fees").split()


def run(script, *args, cwd=ROOT):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *args],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def write_archive(path, n, n_queries=None, queries=None, seed=0):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i}", "title": " ".join(rng.choices(WORDS, k=4)),
                                "body": " ".join(rng.choices(WORDS, k=12)),
                                "category": rng.choice(["A", "B"])}) + "\n")
    if queries:
        with open(queries, "w", encoding="utf-8") as f:
            for i in range(n_queries):
                f.write(json.dumps({"id": f"t{i}", "text": " ".join(rng.choices(WORDS, k=3))})
                        + "\n")


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    assert "usage" in run(script, "--help").lower()


def test_bench_search_tiny(tmp_path):
    archive, queries = tmp_path / "a.jsonl", tmp_path / "q.jsonl"
    write_archive(archive, 300, 20, queries)
    out = run("bench_search.py", str(archive), str(queries), "--engines", "cqa-question",
              "--check", "0", "--work-dir", str(tmp_path / "work"), "--whole-questions", "5")
    assert "| cqa_search `fields=(question)`, BM25 top-10" in out
    assert "### Queries: 5 archive questions, title + body" in out
    assert out.count("BM25 top-10, `features=()`, numpy paths |") == 4  # 2 sets x 2 tables


def test_bench_search_bm25f_tiny(tmp_path):
    archive, queries = tmp_path / "a.jsonl", tmp_path / "q.jsonl"
    write_archive(archive, 300, 20, queries)
    out = run("bench_search.py", str(archive), str(queries), "--engines", "cqa-bm25f",
              "--check", "0", "--work-dir", str(tmp_path / "work"))
    assert "| cqa_search `fields=(question,title)`, BM25 top-10, `features=()` |" in out
    assert out.count("BM25F top-10 (title 2, body 1), `features=()` |") == 2  # 2 tables
    assert "cqa-question+title: BM25F's first query" in out


def test_bench_search_quick_tiny(tmp_path):
    """The speed check on a tiny archive: every check once, a verdict each (no reference
    applies to another archive than the default one), its indexes kept for the next run."""
    archive, queries = tmp_path / "a.jsonl", tmp_path / "q.jsonl"
    write_archive(archive, 200, 20, queries)
    work = tmp_path / "work"
    out = run("bench_search.py", str(archive), str(queries), "--quick", "--repeat", "1",
              "--work-dir", str(work))
    rows = [line for line in out.splitlines() if line.startswith("| ") and "check" not in line]
    checks = [row.split(" | ")[0].lstrip("| ") for row in rows]
    assert checks == [f"{what}: {ratio}" for what in ("short queries", "whole questions")
                      for ratio in ("ours ÷ tantivy", "numpy paths ÷ tantivy",
                                    "numpy paths ÷ compiled")] + [
        "full pipeline (demo): CPU p95 ms", "BM25 alone (demo): CPU p95 ms"]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and len(cells[2].split()) == 1  # one round
        assert cells[3:] == ["–", "no reference"]
    assert "200 questions" in out and "20 short queries, 200 whole questions" in out
    assert {p.name for p in work.iterdir()} >= {"cqa-a", "tantivy-a", "demo-pipeline"}
    # where a search of that pipeline spends its time, stage by stage
    from cqa_search.data import DEMO_QUERIES, demo_dir

    out = run("bench_stages.py", str(work / "demo-pipeline"), str(demo_dir() / DEMO_QUERIES),
              "--passes", "1")
    stages = [line.split(" | ")[0].lstrip("| ") for line in out.splitlines()
              if line.startswith("| ") and not line.startswith("| stage |")]
    assert stages[:2] == ["parse", "analysis"] and stages[-3:] == ["results", "the rest",
                                                                   "**search**"]
    assert "first stage" in stages and "ranker" in stages
    assert "features: TranslationScorer (wt, 8)" in stages
    assert "features: FirstStageFeature (first_stage, 1)" in stages


def test_speed_check_verdicts(tmp_path):
    """FASTER / SAME / SLOWER only beyond the noise, every round; references read from the
    section's "this run" column."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from _speed_check import NOISE, SECTION, references, verdict
    finally:
        sys.path.pop(0)
    assert verdict([1.5, 1.6], 1.2) == "FASTER" and verdict([1.5, 1.3], 1.2) == "SAME"
    assert verdict([0.9, 1.0], 1.2) == "SLOWER" and verdict([1.0], None) == "no reference"
    assert verdict([5.0], 5.0 * (1 + NOISE / 2), higher_is_better=False) == "SAME"
    assert verdict([5.0], 6.0, higher_is_better=False) == "FASTER"
    doc = tmp_path / "B.md"
    doc.write_text(f"# Speed\n\n{SECTION}\n\n| check | this run | rounds |\n|---|---:|---|\n"
                   "| short queries: ours ÷ tantivy | **1.52** | 1.4 1.52 |\n"
                   "| full pipeline (demo): CPU p95 ms | 6.10 | 6.1 |\n\n## Next\n\n"
                   "| other | 9 |\n")
    assert references(doc) == {"short queries: ours ÷ tantivy": 1.52,
                               "full pipeline (demo): CPU p95 ms": 6.10}
    assert references(tmp_path / "missing.md") == {}


def test_known_item_tiny(tmp_path):
    archive = tmp_path / "a.jsonl"
    write_archive(archive, 60)
    out = run("known_item.py", str(archive), "--models", "bm25", "bm25f:title=3",
              "--work", str(tmp_path / "work"))
    assert "| archive | titles | bm25 first / top 3 | bm25f:title=3 first / top 3 |" in out
    row = next(line for line in out.splitlines() if line.startswith("| a.jsonl | 60 |"))
    cells = [c.split(" / ") for c in row.strip("| ").split(" | ")[2:]]
    assert len(cells) == 2 and all(0 <= float(x) <= 100 for c in cells for x in c)


def test_bench_complete_tiny(tmp_path):
    from cqa_search import build_index

    write_archive(tmp_path / "a.jsonl", 80)
    build_index(str(tmp_path / "a.jsonl"), tmp_path / "idx")
    out = run("bench_complete.py", str(tmp_path / "idx"), "--n-prefixes", "30", "--json-out",
              str(tmp_path / "c.json"))
    assert "80 questions, 1 segment(s), k = 5" in out
    row = next(line for line in out.splitlines() if line.startswith("| all | 30 | 30 |"))
    assert len(row.strip("| ").split(" | ")) == 8
    saved = json.load(open(tmp_path / "c.json", encoding="utf-8"))
    assert len(saved["ms"]) == len(saved["cpu_ms"]) == 30 and all(saved["found"])


def test_bench_live_tiny(tmp_path):
    n, batch, segments, n_queries = 200, 10, 3, 10
    total = n + batch * segments
    write_archive(tmp_path / f"synth{total}.jsonl", total, n_queries,
                  tmp_path / f"synth{total}_queries.jsonl")
    out = run("bench_live.py", "--n", str(n), "--batch", str(batch), "--segments",
              str(segments), "--queries", str(n_queries), "--repeats", "1", "--work",
              str(tmp_path))
    report = json.loads(out[:out.index("\n}\n") + 3])
    assert report["segments"] == segments + 1 and report["speedup_cpu"] > 0
    assert report["cli_add_wall_s"] > 0 and report["speedup_cli_wall"] > 0


def test_bench_parallel_tiny(tmp_path):
    archive, queries = tmp_path / "a.jsonl", tmp_path / "q.jsonl"
    write_archive(archive, 300, 30, queries)
    from cqa_search import build_index

    build_index(str(archive), str(tmp_path / "idx"))
    out = run("bench_parallel.py", str(tmp_path / "idx"), str(queries), "--bm25-only",
              "--repeats", "1")
    assert "30 queries" in out


@pytest.mark.parametrize("workers", [1, 2])
def test_load_server_tiny(tmp_path, workers):
    """The loopback load (a few requests) on the demo archive, with its mid-run rebuild:
    no request fails, and the server follows the new generation."""
    from cqa_search.data import DEMO_ARCHIVE, demo_dir

    out = run("load_server.py", "--archive", str(demo_dir() / DEMO_ARCHIVE), "--queries",
              str(demo_dir() / "queries.jsonl"), "--work", str(tmp_path), "--clients", "3",
              "--requests", "60", "--warmup", "5", "--workers", str(workers))
    row = [line for line in out.splitlines() if line.startswith("| 60 |")]
    assert row, out
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    assert cells[1] == "0" and float(cells[2]) > 0  # errors, throughput
    assert "gen-000001 -> gen-000002" in out



def test_bench_vectors_tiny(tmp_path):
    archive, queries = tmp_path / "a.jsonl", tmp_path / "q.jsonl"
    write_archive(archive, 300, 12, queries)
    index = tmp_path / "idx"
    from cqa_search.cli.__main__ import main

    assert main(["build-index", str(archive), "-o", str(index), "-q"]) == 0
    assert main(["fit", str(index), "embeddings", "--dim", "8", "--exact-limit", "0",
                 "--n-lists", "10", "--n-probe", "10", "-q"]) == 0
    out = run("bench_vectors.py", "ann", str(index), str(queries), "--libraries", "exact",
              "ivf", "--n-queries", "12")
    assert "| exact (numpy matmul, one BLAS thread) |" in out
    assert "| numpy IVF (ours), 300 lists, 32 probed |" in out
    out = run("bench_vectors.py", "hybrid", str(index), str(queries), "--n-queries", "12",
              "--n-check", "12")
    assert "| hybrid top 100 |" in out and "the bound proves it" in out
    # (the inverted file reads every list here: the engine's top 100 is the archive's)
    assert "whole archive's top 100 (every question scored by the formula, the exact " \
        "cosines) for 100.0 %" in out
    out = run("bench_vectors.py", "fit", str(index), "--sample", "0.5")
    assert "| PPMI-SVD" in out and "| yes |" in out
    out = run("bench_vectors.py", "fit-model", str(index))
    assert "| **the whole fit** (ppmi-svd) |" in out and "| soft-cosine norms |" in out


def test_bench_build_tiny(tmp_path):
    archive = tmp_path / "a.jsonl"
    write_archive(archive, 50)
    out = run("bench_build.py", str(archive), "--work-dir", str(tmp_path / "work"),
              "--repeat", "1", "--jobs", "1,2", "--tantivy", "2")
    assert "| n_jobs=2 |" in out and "Every build wrote the same files: yes" in out
    assert "| tantivy en_stem, 2 thread(s) |" in out  # the peer in the same rounds


def test_bench_sharded_tiny(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")
    archive, queries, new = tmp_path / "a.jsonl", tmp_path / "q.jsonl", tmp_path / "new.jsonl"
    write_archive(archive, 150, 10, queries)
    write_archive(new, 20, seed=1)
    with open(new, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    with open(new, "w", encoding="utf-8") as f:  # new ids
        f.writelines(json.dumps({**q, "id": f"new{i}"}) + "\n" for i, q in enumerate(lines))
    report = tmp_path / "report.json"
    run("bench_sharded.py", str(archive), str(queries), "--work", str(tmp_path / "work"),
        "--shards", "2", "--families", "answers", "embeddings", "--params",
        "embeddings:dim=8", "embeddings:neighbours=5", "--add", str(new), "--delete", "5",
        "--queries", "10", "--json", str(report))
    out = json.loads(report.read_text())
    steps = [(r["step"], r["index"]) for r in out["steps"]]
    assert steps == [(s, i) for s in ("build", "fit-answers", "fit-embeddings", "add",
                                      "delete", "compact", "query") for i in ("one", "sharded")]
    assert all(r["wall_s"] > 0 and r["driver_peak_mb"] > 0 for r in out["steps"])
    assert out["model_differences"] == {"answers": 0.0, "embeddings": 0.0}
    assert out["same_hits"] and out["max_feature_difference"] < 1e-9
    query = out["steps"][-1]
    assert "first_stage" in query["features"] and len(query["shards"]) == 2


def test_full_retrieval_demo_rows(tmp_path):
    """The harness on the demo's held-out queries: rows searched without a ranker and one
    trained by cross_validate_training (the command in the table's header, p-values)."""
    out = run("full_retrieval.py", "--work", str(tmp_path), "--collections", "demo",
              "--rows", "bm25", "lm-jm", "pipeline-plain", "first-stage", "--reference",
              "pipeline-plain", "--out", str(tmp_path / "tables.md"), "-q")
    assert "#### Demo archive, held-out queries (trained on the 28 others): 327 archive " \
           "questions, 33 queries scored, 91 relevant" in out
    assert "`python scripts/full_retrieval.py --collections demo --rows bm25 lm-jm " \
           "pipeline-plain first-stage --reference pipeline-plain`" in out  # no machine path
    assert "| system | MAP | P@1 | MRR | R@100 | MAP vs BM25: p (t / rand.) | vs " \
           "pipeline-plain: p (t / rand.) |" in out
    bm25 = next(line for line in out.splitlines() if line.startswith("| BM25"))
    assert bm25.split(" | ")[1:3] == ["26.27", "45.45"]  # BENCHMARKS.md, the demo
    assert "| learned pipeline on an index without fitted models" in out
    assert "| its first stage alone (as `pipeline-plain` chose it" in out
    assert "`pipeline-plain` per fold: " in out
    # the first stage as train chooses it, without training a ranker (over BM25F, the
    # index's retrieval model)
    stage = next(line for line in out.splitlines() if line.startswith("| the first stage alone"))
    assert stage.split(" | ")[1:3] == ["33.15", "42.42"] and "`first-stage` per fold: a 0.6" in out
    assert (tmp_path / "tables.md").read_text().strip() in out


def test_known_item_queries_count_every_question_of_the_title(tmp_path, monkeypatch):
    """Known-item search: a question's own title is its query, and every question with
    that title (case and spacing aside) is relevant; BM25 finds one of them first."""
    import importlib.util

    from cqa_search import Question

    scripts = os.path.join(ROOT, "scripts")
    spec = importlib.util.spec_from_file_location("full_retrieval",
                                                  os.path.join(scripts, "full_retrieval.py"))
    fr = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "full_retrieval", fr)  # its dataclasses look it up
    sys.path.insert(0, scripts)  # the script imports its _common
    try:
        spec.loader.exec_module(fr)
    finally:
        sys.path.remove(scripts)
    questions = [Question("a", "Renew my visa?", "at the office"),
                 Question("b", "renew  my VISA?", "online"),
                 Question("c", "Cheap sofa", "the Friday market"),
                 Question("d", "", "no title")]
    c = fr.known_item("known-item-toy", "Known-item search: toy", questions, str(tmp_path / "d"))
    assert [q["text"] for q in c.queries] == ["Renew my visa?", "renew  my VISA?", "Cheap sofa"]
    assert c.qrels["title:a"] == c.qrels["title:b"] == {"a": 1, "b": 1}
    assert c.qrels["title:c"] == {"c": 1} and c.known_item
    path = fr.index_of(c, (), str(tmp_path), print)
    table = fr.search_row(c, fr.ROWS["bm25"], path, str(tmp_path))
    assert table["success@1"].tolist() == [1.0, 1.0, 1.0]


def test_bench_encoder_tiny(tmp_path):
    """Every part but the reference (no torch here) on the tiny random BERT of the
    encoder's tests and the StackExchange fixtures."""
    pytest.importorskip("tokenizers")
    spec = importlib.util.spec_from_file_location(
        "encoder_tests", os.path.join(ROOT, "tests", "vectors", "test_encoder.py"))
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    tests.write_model(tmp_path / "tiny-bert")
    out = run("bench_encoder.py", "--model", str(tmp_path / "tiny-bert"),
              "--data", os.path.join(ROOT, "tests", "data"), "--n-texts", "6",
              "--n-queries", "3", "--truncate", "6", "--out", str(tmp_path / "report.md"))
    assert "questions per CPU second** at float32" in out
    assert "| ours (numpy), cut at 6 tokens |" in out and "| short (3) |" in out
    from cqa_search.vectors.encoder import onnx_available

    if onnx_available():   # both passes side by side
        assert "| ours (onnxruntime), 12 tokens |" in out
        assert "| ours (numpy) | ours (onnxruntime) | sentence-transformers |" in out
    assert "| float16 | 32 |" in out and "| int8 + scale per row | 20 |" in out
    with open(tmp_path / "report.md", encoding="utf-8") as f:
        assert f.read().strip() == out.strip()
    out = run("bench_encoder.py", "--model", str(tmp_path / "tiny-bert"), "--data",
              os.path.join(ROOT, "tests", "data"), "--parts", "start", "--repeat", "1",
              "--backends", "numpy")
    assert re.search(r"\| numpy \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9.]+ \| no \|",
                     out), out
