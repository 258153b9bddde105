"""Data shipped with the package: the demo archive (written for cqa_search, MIT)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["demo_dir", "demo_split", "DEMO_ARCHIVE", "DEMO_QUERIES", "DEMO_QRELS",
           "DEMO_SHOWN"]

DEMO_ARCHIVE = "archive.jsonl"
DEMO_QUERIES = "queries.jsonl"
DEMO_QRELS = "qrels.txt"
#: Demo queries ``cqa-search demo`` shows: each shares few or no words with the questions
#: that answer it.
DEMO_SHOWN = ("dq01", "dq02", "dq05", "dq03")


def demo_dir() -> Path:
    """Folder of the demo archive, its queries and qrels (see its README.md)."""
    return Path(str(resources.files(__name__) / "demo"))


def demo_split(queries):
    """(training, held-out) demo queries: every other query is held out, and so is every
    query the demo shows (:data:`DEMO_SHOWN`), so that no query shown or scored was used to
    train the ranker; the held-out queries are scored without their category, as a user
    would type them."""
    held_out = [q for i, q in enumerate(queries) if i % 2 or q["id"] in DEMO_SHOWN]
    ids = {q["id"] for q in held_out}
    return ([q for q in queries if q["id"] not in ids],
            [{**q, "category": None} for q in held_out])
