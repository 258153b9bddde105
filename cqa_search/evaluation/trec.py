"""TREC qrels and run files.

qrels: ``qid iteration doc_id relevance`` per line; run: ``qid Q0 doc_id rank score tag``.
"""
from __future__ import annotations

import os

from ..exceptions import ArchiveError

__all__ = ["read_qrels"]


def read_qrels(path) -> dict:
    """``{qid: {doc_id: relevance}}`` from a TREC qrels file.

    Raises
    ------
    ArchiveError
        Missing file or a malformed line (named by file and line).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ArchiveError(f"no such qrels file: {path}")
    qrels = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if len(parts) != 4:
                raise ArchiveError(f"a qrels line has 4 columns (qid iter doc_id relevance); "
                                   f"got {len(parts)}", path, lineno)
            try:
                rel = int(parts[3])
            except ValueError:
                raise ArchiveError(f"relevance must be an integer; got {parts[3]!r}",
                                   path, lineno) from None
            qrels.setdefault(parts[0], {})[parts[2]] = rel
    return qrels
