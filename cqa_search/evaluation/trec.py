"""TREC qrels/run files, query files, and SVM-rank (LETOR) feature files.

- qrels: ``qid iteration doc_id relevance`` per line, or BEIR's ``qid<TAB>doc_id<TAB>score``
  (with its header ``query-id corpus-id score``).
- run: ``qid Q0 doc_id rank score tag`` per line (:func:`read_run` keeps file order,
  which the SemEval convention uses to break ties; :func:`rank_documents` is the rank
  order of each convention, in which :func:`write_run` writes).
- queries: JSONL ``{"id", "text" | "title"+"body", "category"?}`` (BEIR's ``_id`` for
  ``id``) or TSV ``qid<TAB>text``.
- SVM-rank/LETOR: ``relevance qid:Q 1:v 2:v ... # doc_id``.
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..archive import FIELD_ALIASES
from ..exceptions import ArchiveError, ParameterError
from ..readers._base import check_file

__all__ = ["read_qrels", "write_qrels", "read_run", "write_run", "rank_documents",
           "read_queries", "write_queries", "write_svmrank", "as_run", "as_qrels", "as_queries"]


def _lines(path, what):
    path = check_file(path, what)  # a file, or a pipe (``--qrels <(grep ...)``)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM is not text
            except UnicodeDecodeError as exc:
                raise ArchiveError(f"not valid UTF-8 (byte {exc.start})", path, lineno) from None
            if line.strip() and not line.lstrip().startswith("#"):
                yield lineno, line.rstrip("\r\n")


_BEIR_QRELS_HEADER = ["query-id", "corpus-id", "score"]


def read_qrels(path) -> dict:
    """``{qid: {doc_id: relevance}}`` from a TREC qrels file (``qid iter doc_id relevance``)
    or a BEIR one (``qid doc_id relevance``, after a ``query-id corpus-id score`` header).

    Raises
    ------
    ArchiveError
        Missing file, a malformed line, or one document judged twice differently (named
        by file and line).
    """
    qrels = {}
    for n, (lineno, line) in enumerate(_lines(path, "qrels")):
        parts = line.split()
        if n == 0 and parts == _BEIR_QRELS_HEADER:
            continue
        if len(parts) not in (3, 4):
            raise ArchiveError(f"a qrels line has 4 columns (qid iter doc_id relevance), or 3 "
                               f"in BEIR's format (qid doc_id relevance); got {len(parts)}",
                               path, lineno)
        try:
            rel = int(parts[-1])
        except ValueError:
            raise ArchiveError(f"relevance must be an integer; got {parts[-1]!r}",
                               path, lineno) from None
        judged = qrels.setdefault(parts[0], {})
        if judged.get(parts[-2], rel) != rel:
            raise ArchiveError(f"document {parts[-2]!r} of query {parts[0]!r} is judged twice, "
                               f"{judged[parts[-2]]} and {rel}", path, lineno)
        judged[parts[-2]] = rel
    return qrels


def _scored(value, what, reader, mapping_of) -> dict:
    """``value`` read by ``reader`` when it is a path, else checked to be ``{qid: {doc_id:
    mapping_of}}`` (a clear error naming the reader rather than a TypeError later)."""
    if isinstance(value, (str, os.PathLike)):
        return reader(value)
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ParameterError(f"{what} must be a path or a dict {{qid: {{doc_id: {mapping_of}}}}} "
                             f"as {reader.__name__} returns; got {type(value).__name__}")
    return value


def as_run(run) -> dict:
    """A run given as ``{qid: {doc_id: score}}`` or as the path of a TREC run file
    (:func:`read_run`)."""
    return _scored(run, "a run", read_run, "score")


def as_qrels(qrels) -> dict:
    """Judgments given as ``{qid: {doc_id: relevance}}`` or as the path of a qrels file
    (:func:`read_qrels`)."""
    return _scored(qrels, "qrels", read_qrels, "relevance")


def as_queries(queries) -> list:
    """Queries given as a list of ``{"id", "text", "category"?}`` or as the path of a
    queries file (:func:`read_queries`)."""
    if isinstance(queries, (str, os.PathLike)):
        return read_queries(queries)
    try:
        queries = list(queries) if not isinstance(queries, (bytes, dict)) else None
    except TypeError:  # not iterable
        queries = None
    if queries is None or not all(isinstance(q, dict) and "id" in q and "text" in q
                                  for q in queries):
        raise ParameterError("queries must be a path or a list of dicts {'id', 'text', "
                             "'category'?} as read_queries returns")
    return queries


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


def rank_documents(scored: dict, convention: str) -> list:
    """Doc ids of one query in rank order under ``convention``.

    ``"semeval"``: score descending, ties in run order. ``"trec"``: as trec_eval orders a
    run file's lines: by score descending, in single precision (pytrec_eval and older
    trec_eval hold a score as a C ``float``: two scores equal there tie), then by doc id
    descending (C ``strcmp``: code point order).

    Examples
    --------
    >>> rank_documents({"a": 1.0, "b": 2.0, "c": 1.0}, "semeval")
    ['b', 'a', 'c']
    >>> rank_documents({"a": 1.0, "b": 2.0, "c": 1.0 + 1e-12}, "trec")
    ['b', 'c', 'a']
    """
    ids = list(scored)
    scores = np.fromiter(scored.values(), dtype=np.float64, count=len(ids))
    if convention == "semeval":
        order = np.argsort(-scores, kind="stable")
    else:
        order = np.lexsort((np.array(ids, dtype=str), scores.astype(np.float32)))[::-1]
    return [ids[i] for i in order]


def write_run(run: dict, path, tag="cqa_search", *, convention="trec") -> None:
    """Write ``{qid: {doc_id: score}}`` as a TREC run that evaluates as the run does.

    Each query's lines are in the rank order of ``convention`` (:func:`rank_documents`:
    for ``"trec"``, trec_eval's own, ties by doc id descending; for ``"semeval"``, ties
    in run order, which a reader of the file keeps), and each score is the shortest
    decimal that reads back as the same single-precision number: the precision at which
    pytrec_eval, older trec_eval and :func:`~cqa_search.evaluation.evaluate` compare
    scores (newer trec_eval reads a double, and orders these decimals alike). So
    trec_eval or pytrec_eval on the file, or :func:`read_run` and ``evaluate``, give
    the figures of ``evaluate`` on ``run`` exactly (six decimals made ties that
    trec_eval broke by doc id).

    Raises
    ------
    ParameterError
        An id or the tag that a run line cannot hold (empty, or with white space), or a
        path that cannot be written.
    """
    for name in (tag, *run, *(d for docs in run.values() for d in docs)):
        if not name or any(c.isspace() for c in str(name)):
            raise ParameterError(f"a TREC run cannot hold the id {str(name)!r}: ids are "
                                 "non-empty, without white space")
    check_writable(path)
    try:
        with open(path, "w", encoding="utf-8") as f:
            for qid, docs in run.items():
                for rank, doc_id in enumerate(rank_documents(docs, convention), 1):
                    f.write(f"{qid} Q0 {doc_id} {rank} {np.float32(docs[doc_id])!s} {tag}\n")
    except OSError as exc:  # a full disk, say
        raise ParameterError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None


def check_writable(path) -> None:
    """ParameterError unless a file can be written at ``path`` (checked before long work
    whose result goes there)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    problem = ("it is a directory" if os.path.isdir(path) else
               f"there is no directory {folder}" if not os.path.isdir(folder) else
               f"{folder} is not writable" if not os.access(folder, os.W_OK) else
               f"{path} is not writable" if os.path.exists(path) and not os.access(path, os.W_OK)
               else None)
    if problem:
        raise ParameterError(f"cannot write {path}: {problem}")


def read_queries(path) -> list:
    """Queries as dicts ``{"id", "text", "category", "title", "body"}`` from JSONL or TSV
    (``qid<TAB>text``).

    A JSONL query has ``id`` (or ``_id``, as in BEIR's queries.jsonl), and ``text``, or
    ``title`` and/or ``body`` (joined like a question, when there is no ``text``);
    ``category``, ``title`` and ``body`` are optional (None when absent: the title and
    body are the query's two parts, which the per-field features compare with the
    archived questions'). A TSV
    line is ``qid<TAB>text``; the format is told by the extension (``.jsonl``, ``.json``,
    ``.ndjson``; ``.tsv``, ``.tab``) or else line by line (a line starting with ``{`` is
    JSON).

    Raises
    ------
    ArchiveError
        Missing file, or a malformed line (named by file and line): bad JSON, no id, no
        text, a field of the wrong type, a duplicate id.
    """
    queries, seen = [], set()
    name = os.fspath(path).lower()
    jsonl = name.endswith((".jsonl", ".json", ".ndjson"))
    tsv = name.endswith((".tsv", ".tab"))
    for lineno, line in _lines(path, "queries"):
        if jsonl or (not tsv and line.lstrip().startswith("{")):
            query = _json_query(line, path, lineno)
        else:
            qid, sep, text = line.partition("\t")
            if not sep:
                raise ArchiveError("a TSV query line is 'qid<TAB>text'", path, lineno)
            query = {"id": qid.strip(), "text": text, "category": None, "title": None,
                     "body": None}
        if not query["text"] or not query["text"].strip():
            raise ArchiveError(f"query {query['id']!r} has no text", path, lineno)
        if query["id"] in seen:
            raise ArchiveError(f"duplicate query id {query['id']!r}", path, lineno)
        seen.add(query["id"])
        queries.append(query)
    return queries


def _json_query(line, path, lineno) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ArchiveError(f"malformed JSON: {exc.msg} (column {exc.colno})", path,
                           lineno) from None
    except (ValueError, RecursionError):  # too many digits, too deep
        raise ArchiveError("unsupported JSON: a number too long or nesting too deep",
                           path, lineno) from None
    if not isinstance(record, dict):
        raise ArchiveError(f"a query must be a JSON object; got {type(record).__name__}",
                           path, lineno)
    qid = next((record[k] for k in ("id", *FIELD_ALIASES["id"]) if k in record), None)
    if qid is None:
        raise ArchiveError("a query needs an 'id' (or '_id')", path, lineno)
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise ArchiveError(f"a query id must be a string or an integer; got {qid!r}",
                           path, lineno)
    fields = {k: record.get(k) for k in ("text", "title", "body", "category")}
    for key, value in fields.items():
        if value is not None and not isinstance(value, str):
            raise ArchiveError(f"the query's {key!r} must be a string; got "
                               f"{type(value).__name__}", path, lineno)
    text = fields["text"] or "\n".join(t for t in (fields["title"], fields["body"]) if t)
    return {"id": str(qid), "text": text, "category": fields["category"],
            "title": fields["title"], "body": fields["body"]}


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
