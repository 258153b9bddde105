"""Issue 29, item 4: forged files that keep their checksums (what ``--verify`` cannot see).

A value of a stored model's ``model.json`` or of the manifest, or an element of a stored
array, is replaced by an implausible one (a count beyond its dtype, a float32 maximum,
NaN, infinity, a wrong type) and the manifest's size and SHA-256 of the file updated;
then the index is opened with ``verify=True`` and searched. Every case must end in
"corrupted index" (or another one-line error of cqa_search) or in results whose scores
are all finite: never an exception of another kind, a crash, or NaN/infinite scores. The
results of a forgery that is not refused are compared with the pristine index's: the
forgeries that change what a search returns are counted by file (neither the checks on
opening nor ``--verify`` see them: the value is plausible and its checksum right).
Run in a child process (:func:`run_forgeries`), like the bit flips.

:func:`run_exports` forges a stored ranker the same way and exports it
(``cqa-search export-ranker``, JSON and RankLib): refused in one line, or written with
finite numbers only (strict JSON).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

from ..exceptions import CQASearchError, IndexFormatError
from ..index.store import MANIFEST, current_generation

#: What a JSON value is replaced with.
JSON_VALUES = [99999999999, -1, 0, 2 ** 63, 1e308, "nan", "inf", 3.4028235e38, True, None,
               "x", [], {}]
# (JSON has no NaN: json.dumps writes Python's NaN and Infinity, which the index reads.)
_SPECIAL = {"nan": math.nan, "inf": math.inf}
#: What an array element is replaced with, by dtype kind.
ARRAY_VALUES = {"f": ["max", "-max", "inf", "nan", "max_all"], "i": ["max", "min", "-1"],
                "u": ["max"], "b": []}


def _leaves(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(x, list) and x:
        for i, v in enumerate(x[:3]):  # the first items stand for the rest
            yield from _leaves(v, path + (i,))
    else:
        yield path


def forgery_cases(path, *, n=None, seed=0) -> list:
    """``(relative path, where, value)`` cases: every JSON leaf of the manifest's models and
    stats and of every ``model.json`` with every value of :data:`JSON_VALUES`, and every
    ``.npy`` array with :data:`ARRAY_VALUES`; ``n`` draws that many at random."""
    root = Path(path) / current_generation(path)
    cases = []
    manifest = json.loads((root / MANIFEST).read_text())
    for key in ("stats", "segments", "models"):
        for leaf in _leaves(manifest.get(key), (key,)):
            cases += [(MANIFEST, list(leaf), v) for v in JSON_VALUES]
    for file in sorted(root.rglob("model.json")):
        rel = str(file.relative_to(root))
        doc = json.loads(file.read_text())
        for leaf in _leaves({"params": doc["params"], "meta": doc["meta"]}):
            cases += [(rel, list(leaf), v) for v in JSON_VALUES]
    for file in sorted(root.rglob("*.npy")):
        kind = np.load(file, mmap_mode="r").dtype.kind
        rel = str(file.relative_to(root))
        cases += [(rel, "element", v) for v in ARRAY_VALUES.get(kind, [])]
    if n is not None and n < len(cases):
        cases = random.Random(seed).sample(cases, n)
    return cases


def _sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()


def _set(doc, where, value):
    for key in where[:-1]:
        doc = doc[key]
    doc[where[-1]] = value


def _forged_array(a, value):
    a = np.array(a)
    if a.size == 0:
        return a
    info = np.finfo(a.dtype) if a.dtype.kind == "f" else np.iinfo(a.dtype)
    flat = a.reshape(-1)
    at = flat.size // 2
    if value == "max_all":
        flat[:] = info.max
    else:
        flat[at] = {"max": info.max, "-max": -info.max if a.dtype.kind == "f" else 0,
                    "min": info.min, "-1": -1, "inf": np.inf, "nan": np.nan}[value]
    return a


def forge(root, case) -> dict:
    """Apply ``case`` to the generation at ``root`` (manifest updated); returns what
    undoes it (file -> original bytes)."""
    rel, where, value = case
    file, manifest_file = root / rel, root / MANIFEST
    saved = {manifest_file: manifest_file.read_bytes()}
    if file != manifest_file:
        saved[file] = file.read_bytes()
    if where == "element":
        import io

        buf = io.BytesIO()
        np.save(buf, _forged_array(np.load(file), value), allow_pickle=False)
        data = buf.getvalue()
    else:
        doc = json.loads(file.read_text())
        _set(doc, where, _SPECIAL.get(value, value) if isinstance(value, str) else value)
        data = json.dumps(doc).encode()
    file.write_bytes(data)
    if file != manifest_file:
        manifest = json.loads(manifest_file.read_text())
        manifest["files"][rel] = {"bytes": len(data), "sha256": _sha256(data)}
        manifest_file.write_text(json.dumps(manifest))
    return saved


def forge_and_open(path, cases, queries) -> dict:
    """Every case on the index at ``path`` (undone afterwards): outcome counts (results
    the same as the pristine index's or different, "corrupted index", another one-line
    error), the unexpected ones (another exception, NaN or infinite scores) and the files
    whose forgeries changed the results (file -> cases)."""
    from .harness import search_all

    root = Path(path) / current_generation(path)
    pristine = search_all(path, verify=True, queries=queries)
    outcomes = {"same results": 0, "different results": 0, "corrupted index": 0,
                "other clear error": 0}
    unexpected, different = [], {}
    for case in cases:
        saved = forge(root, case)
        try:
            found = search_all(path, verify=True, queries=queries)
            scores = [float(score) for hits in found for _, score, _ in hits]
            if not all(math.isfinite(score) for score in scores):
                raise AssertionError(f"non-finite scores {scores}")
            if found == pristine:
                outcomes["same results"] += 1
            else:
                outcomes["different results"] += 1
                different[case[0]] = different.get(case[0], 0) + 1
        except IndexFormatError:
            outcomes["corrupted index"] += 1
        except CQASearchError:
            outcomes["other clear error"] += 1
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            unexpected.append({"case": case, "error": type(exc).__name__,
                               "message": str(exc)[:300],
                               "where": traceback.format_exc().splitlines()[-3:]})
        finally:
            for file, data in saved.items():
                file.write_bytes(data)
            print(json.dumps({"done": case}), flush=True)
    return {"cases": len(cases), "outcomes": outcomes, "unexpected": unexpected,
            "different": different}


def _exported(text, format) -> bool:
    """Whether an export holds finite numbers only (JSON: strict, without NaN/Infinity)."""
    if format == "json":
        def refuse(constant):
            raise ValueError(constant)
        try:
            json.loads(text, parse_constant=refuse)
            return True
        except ValueError:
            return False
    weights = text.strip().splitlines()[-1].split()
    return all(math.isfinite(float(item.split(":")[1])) for item in weights)


def forge_and_export(path, cases) -> dict:
    """Every case on the index at ``path`` (undone afterwards), its ranker exported as
    JSON and in RankLib's format by ``cqa-search export-ranker`` (in this process): each
    export refused in one line, or written with finite numbers."""
    from ..cli.__main__ import main

    root = Path(path) / current_generation(path)
    outcomes = {"written": 0, "refused": 0}
    unexpected = []
    out = Path(path).parent / "exported"
    for case in cases:
        saved = forge(root, case)
        try:
            for format in ("json", "ranklib"):
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    code = main(["export-ranker", str(path), "--format", format, "-o",
                                 str(out)])
                lines = err.getvalue().strip().splitlines()
                if code == 0 and _exported(out.read_text(), format):
                    outcomes["written"] += 1
                elif code == 1 and len(lines) == 1 and lines[0].startswith("cqa-search: error:"):
                    outcomes["refused"] += 1
                else:
                    unexpected.append({"case": case, "format": format, "code": code,
                                       "stderr": err.getvalue()[-300:]})
        finally:
            for file, data in saved.items():
                file.write_bytes(data)
            print(json.dumps({"done": case}), flush=True)
    return {"cases": len(cases), "outcomes": outcomes, "unexpected": unexpected}


def ranker_cases(path) -> list:
    """The cases of :func:`forgery_cases` that forge the stored ranker."""
    return [c for c in forgery_cases(path) if c[0].startswith("models/ranker/")]


def run_forgeries(path, cases, queries, timeout=3600) -> dict:
    """:func:`forge_and_open` in a child process; a crash (signal) names its case."""
    return _in_child("forge_and_open", path, [cases, queries], cases, timeout)


def run_exports(path, cases, timeout=3600) -> dict:
    """:func:`forge_and_export` in a child process; a crash (signal) names its case."""
    return _in_child("forge_and_export", path, [cases], cases, timeout)


def _in_child(function, path, arguments, cases, timeout) -> dict:
    code = ("import json, sys; from cqa_search.testing import forgery; "
            f"print(json.dumps({{'result': forgery.{function}(sys.argv[1], "
            "*json.load(open(sys.argv[2])))}))")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:  # too long for an argument
        json.dump(arguments, f)
        f.flush()
        proc = subprocess.run([sys.executable, "-c", code, os.fspath(path), f.name],
                              capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        done = {json.dumps(x["done"]) for x in lines if "done" in x}
        crashed = next((c for c in cases if json.dumps(c) not in done), None)
        return {"crashed": crashed, "returncode": proc.returncode, "stderr": proc.stderr[-2000:]}
    return next(x["result"] for x in lines if "result" in x)
