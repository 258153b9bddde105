"""Data shipped with the package: the demo archive (written for cqa_search, MIT)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["demo_dir", "DEMO_ARCHIVE", "DEMO_QUERIES", "DEMO_QRELS"]

DEMO_ARCHIVE = "archive.jsonl"
DEMO_QUERIES = "queries.jsonl"
DEMO_QRELS = "qrels.txt"


def demo_dir() -> Path:
    """Folder of the demo archive, its queries and qrels (see its README.md)."""
    return Path(str(resources.files(__name__) / "demo"))
