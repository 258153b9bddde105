"""TREC qrels/run files, query files, and SVM-rank (LETOR) feature files.

- qrels: ``qid iteration doc_id relevance`` per line.
- run: ``qid Q0 doc_id rank score tag`` per line (:func:`read_run` keeps file order,
  which the SemEval convention uses to break ties).
- queries: JSONL ``{"id", "text" | "title"+"body", "category"?}`` or TSV ``qid<TAB>text``.
- SVM-rank/LETOR: ``relevance qid:Q 1:v 2:v ... # doc_id``.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..exceptions import ArchiveError

__all__ = ["read_qrels", "write_qrels", "read_run", "write_run", "read_queries",
           "write_queries", "write_svmrank"]


def _lines(path, what):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ArchiveError(f"no such {what} file: {path}")
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ArchiveError(f"not valid UTF-8 (byte {exc.start})", path, lineno) from None
            if line.strip() and not line.lstrip().startswith("#"):
                yield lineno, line.rstrip("\r\n")


def read_qrels(path) -> dict:
    """``{qid: {doc_id: relevance}}`` from a TREC qrels file.

    Raises
    ------
    ArchiveError
        Missing file or a malformed line (named by file and line).
    """
    qrels = {}
    for lineno, line in _lines(path, "qrels"):
        parts = line.split()
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


def write_qrels(qrels: dict, path) -> None:
    """Write ``{qid: {doc_id: relevance}}`` as a TREC qrels file."""
    with open(path, "w", encoding="utf-8") as f:
        for qid, judged in qrels.items():
            for doc_id, rel in judged.items():
                f.write(f"{qid} 0 {doc_id} {int(rel)}\n")


def read_run(path) -> dict:
    """``{qid: {doc_id: score}}`` from a TREC run file, in file order.

    Raises
    ------
    ArchiveError
        Missing file, malformed line, or a document listed twice for a query.
    """
    run = {}
    for lineno, line in _lines(path, "run"):
        parts = line.split()
        if len(parts) != 6:
            raise ArchiveError(f"a run line has 6 columns (qid Q0 doc_id rank score tag); "
                               f"got {len(parts)}", path, lineno)
        qid, _, doc_id, _, score, _ = parts
        try:
            value = float(score)
        except ValueError:
            raise ArchiveError(f"score must be a number; got {score!r}", path, lineno) from None
        docs = run.setdefault(qid, {})
        if doc_id in docs:
            raise ArchiveError(f"document {doc_id!r} is listed twice for query {qid!r}",
                               path, lineno)
        docs[doc_id] = value
    return run


def write_run(run: dict, path, tag="cqa_search") -> None:
    """Write ``{qid: {doc_id: score}}`` as a TREC run, ranked by score (ties in run order)."""
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in run.items():
            ranked = sorted(docs.items(), key=lambda x: -x[1])
            for rank, (doc_id, score) in enumerate(ranked, 1):
                f.write(f"{qid} Q0 {doc_id} {rank} {score:.6f} {tag}\n")


def read_queries(path) -> list:
    """Queries as dicts ``{"id", "text", "category"}`` from JSONL or TSV (``qid<TAB>text``).

    A JSONL query has ``text``, or ``title`` and/or ``body`` (joined like a question);
    ``category`` is optional.
    """
    queries, seen = [], set()
    jsonl = os.fspath(path).endswith((".jsonl", ".json", ".ndjson"))
    for lineno, line in _lines(path, "queries"):
        if jsonl or line.lstrip().startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ArchiveError(f"malformed JSON: {exc.msg}", path, lineno) from None
            if not isinstance(record, dict) or "id" not in record:
                raise ArchiveError("a query needs an 'id'", path, lineno)
            text = record.get("text") or "\n".join(
                t for t in (record.get("title"), record.get("body")) if t)
            query = {"id": str(record["id"]), "text": text, "category": record.get("category")}
        else:
            qid, sep, text = line.partition("\t")
            if not sep:
                raise ArchiveError("a TSV query line is 'qid<TAB>text'", path, lineno)
            query = {"id": qid.strip(), "text": text, "category": None}
        if not query["text"] or not query["text"].strip():
            raise ArchiveError(f"query {query['id']!r} has no text", path, lineno)
        if query["id"] in seen:
            raise ArchiveError(f"duplicate query id {query['id']!r}", path, lineno)
        seen.add(query["id"])
        queries.append(query)
    return queries


def write_queries(queries, path) -> None:
    """Write queries (dicts with id, text, category and any other keys) as JSONL."""
    with open(path, "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")


def write_svmrank(path, X, y, qid, *, doc_ids=None, feature_names=None) -> None:
    """Write a feature matrix in SVM-rank/LETOR format.

    Parameters
    ----------
    X : array of shape (n_pairs, n_features)
    y : array of shape (n_pairs,)
        Relevance labels.
    qid : sequence of str, shape (n_pairs,)
        Query of each row (rows of one query should be contiguous). SVM-rank needs
        integer query ids, so they are numbered 1, 2, ... in order of appearance and the
        original id is written in the trailing comment.
    doc_ids : sequence of str, optional
        Written in the trailing comments.
    feature_names : sequence of str, optional
        Written as a header comment (feature i is column i - 1).
    """
    X = np.asarray(X, dtype=np.float64)
    numbers = {}
    with open(path, "w", encoding="utf-8") as f:
        if feature_names is not None:
            f.write("# " + " ".join(f"{i}:{n}" for i, n in enumerate(feature_names, 1)) + "\n")
        for i in range(X.shape[0]):
            number = numbers.setdefault(qid[i], len(numbers) + 1)
            feats = " ".join(f"{j}:{v:.6g}" for j, v in enumerate(X[i], 1))
            tail = f" {doc_ids[i]}" if doc_ids is not None else ""
            f.write(f"{int(y[i])} qid:{number} {feats} # {qid[i]}{tail}\n")
