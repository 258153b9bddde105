"""Every code block of README.md, then of the docs/ pages it links to (the reference it
points a reader to), runs, in order, as a reader would run them.

The two set-up commands are checked against what CI runs (`.ci/run`): the test install is
exactly that command (CI runs it from a clean clone, so it is not run again here), and the
demo command is the same install followed by `cqa-search demo`, which is run. Every other
``sh`` block runs line by line in bash and every ``python`` block in a fresh interpreter,
all in one scratch copy of the repository's layout (so `cqa_search/data/demo/...` and
`../shared/data/...` resolve as in a clone; blocks that read `../shared/data` are skipped
when it is absent), with this environment's `cqa-search` first on the PATH. A ``text``
block right after a code block is what that block prints: each of its lines must be in the
output, in order (spaces between words compared as one), so that every figure the README
quotes from a command is the one the command gives.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
BIN = os.path.dirname(sys.executable)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


#: Records of earlier benchmark runs: their commands are not examples to run.
HISTORY = "docs/benchmark-history.md"
LINK = re.compile(r"\]\((docs/[\w.-]+\.md)(?:#[\w-]*)?\)")


def read(page) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def pages() -> list:
    """README.md, then the docs/ pages it links to in the order of their first link (their
    blocks may use what the README's made: the same scratch clone)."""
    linked = dict.fromkeys(m.group(1) for m in LINK.finditer(read("README.md")))
    return ["README.md", *(page for page in linked if page != HISTORY)]


def blocks():
    """``(where, lang, code, expected)`` of each code block of :func:`pages`; ``expected``
    is the ``text`` block that follows it (only blank lines between), or None."""
    out = []
    for page in pages():
        text = read(page)
        found = list(FENCE.finditer(text))
        for i, m in enumerate(found):
            if m.group(1) == "text":
                continue
            after = found[i + 1] if i + 1 < len(found) else None
            expected = after.group(2) if after is not None and after.group(1) == "text" and \
                not text[m.end():after.start()].strip() else None
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{page}:{line}", m.group(1), m.group(2), expected))
    return out


BLOCKS = blocks()


def check_output(where, output, expected) -> None:
    """Every line of ``expected`` in ``output``, in order (runs of spaces as one)."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for want in (" ".join(line.split()) for line in expected.splitlines() if line.strip()):
        while at < len(lines) and lines[at] != want:
            at += 1
        assert at < len(lines), f"{where}: the output has no line {want!r} (in order):\n{output}"
        at += 1
DEMO = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/cqa-search demo"


def ci_command() -> str:
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        return [ln for ln in f.read().splitlines() if ln.strip()][-1].strip()


def is_setup(code) -> bool:
    return code.strip().startswith("python3 -m venv")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A scratch clone layout: ``work/clone`` (the cwd) with the package's demo data at
    ``cqa_search/data/demo`` and ``work/shared`` -> the shared data when present."""
    base = tmp_path_factory.mktemp("readme")
    clone = base / "clone"
    (clone / "cqa_search" / "data").mkdir(parents=True)
    os.symlink(os.path.join(ROOT, "cqa_search", "data", "demo"),
               clone / "cqa_search" / "data" / "demo")
    if os.path.isdir(SHARED):
        os.symlink(SHARED, base / "shared")
    return clone


def environment():
    return {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NO_COLOR": "1",
            "PYTHONPATH": ROOT}


def run_sh(code, cwd, where) -> str:
    """Run the block line by line; returns what it printed."""
    printed = []
    for line in code.replace("\\\n", " ").splitlines():
        line = line.split("  # ")[0].strip()
        if not line or line.startswith("#"):
            continue
        out = subprocess.run(["bash", "-c", "set -euo pipefail; " + line], cwd=cwd,
                             env=environment(), capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (f"{where}: `{line}` exited {out.returncode}\n"
                                     f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
        printed.append(out.stdout)
    return "".join(printed)


def test_setup_commands_are_what_ci_runs():
    setups = [code.strip() for _, lang, code, _ in BLOCKS if lang == "sh" and is_setup(code)]
    assert setups == [DEMO, ci_command()], setups


def test_output_blocks_follow_a_command():
    assert all(block[1] != "text" for block in BLOCKS)
    text_blocks = sum(1 for page in pages() for m in FENCE.finditer(read(page))
                      if m.group(1) == "text")
    assert text_blocks == sum(expected is not None for *_, expected in BLOCKS)


def test_every_docs_page_with_code_is_run():
    """A docs/ page with code blocks is linked from the README (so its blocks run here),
    or it is the benchmark history."""
    run = set(pages())
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        page = f"docs/{name}"
        if name.endswith(".md") and page != HISTORY and FENCE.search(read(page)):
            assert page in run, f"{page} has code blocks but the README does not link it"


@pytest.mark.parametrize("where,lang,code,expected", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_block(where, lang, code, expected, workspace):
    assert lang in ("sh", "python"), f"{where}: a code block must say sh, python or text"
    if "../shared/data" in code and not os.path.isdir(SHARED):
        pytest.skip("the judged collections (../shared/data) are absent")
    if lang == "sh" and is_setup(code):
        if code.strip() != DEMO:  # the test install: what CI runs (checked above)
            return
        code = "cqa-search demo --quiet"  # the demo, installed as CI installs
    if lang == "sh":
        printed = run_sh(code, workspace, where)
    else:
        out = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=environment(),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"{where}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        printed = out.stdout
    if expected is not None:
        check_output(where, printed, expected)


def test_shell_lines_parse():
    """Every shell line is valid shell (quotes closed): a reader can paste it."""
    for where, lang, code, _ in BLOCKS:
        if lang == "sh":
            for line in code.replace("\\\n", " ").splitlines():
                shlex.split(line.split("  # ")[0], comments=True)
