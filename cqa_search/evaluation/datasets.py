"""Turn judged collections into the evaluation layout: archive, queries, qrels, candidates.

Every converter writes into a folder::

    archive.jsonl     the questions to index (canonical schema)
    queries.jsonl     {"id", "text", "title", "body", "category"} per query
    qrels.txt         TREC qrels
    candidates.run    (rerank collections) the given candidates as a TREC run

and returns a :class:`Collection` summary.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ..archive import Question
from ..exceptions import ArchiveError
from ..readers import read_questions
from ..readers.semeval import read_original_questions
from .trec import _lines, write_qrels, write_queries, write_run

__all__ = ["Collection", "convert_semeval", "convert_stackexchange", "convert_stackfaq",
           "semeval_comment_ranking", "self_candidates"]

ARCHIVE, QUERIES, QRELS, CANDIDATES = "archive.jsonl", "queries.jsonl", "qrels.txt", "candidates.run"
#: ``Question.extra`` keys that hold relevance labels (the SemEval comment labels).
LABEL_KEYS = ("answer_labels",)
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Collection:
    """Paths and counts of a converted collection."""

    path: str
    n_questions: int
    n_queries: int
    n_judged: int
    n_relevant: int
    candidates: bool

    def file(self, name) -> str:
        return os.path.join(self.path, name)

    def __str__(self):
        return (f"{self.path}: {self.n_questions:,} archive questions, {self.n_queries:,} queries, "
                f"{self.n_judged:,} judgments ({self.n_relevant:,} relevant)"
                + (", candidates.run" if self.candidates else ""))


def _query(qid, title, body, category=None, **extra):
    text = "\n".join(t for t in (title, body) if t)
    return {"id": qid, "text": text, "title": title, "body": body, "category": category, **extra}


def _write(out_dir, questions, queries, qrels, run=None) -> Collection:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, ARCHIVE), "w", encoding="utf-8") as f:
        n_questions = 0
        for q in questions:
            f.write(q.to_json() + "\n")
            n_questions += 1
    write_queries(queries, os.path.join(out_dir, QUERIES))
    write_qrels(qrels, os.path.join(out_dir, QRELS))
    if run is not None:
        write_run(run, os.path.join(out_dir, CANDIDATES), tag="given")
    judged = [r for docs in qrels.values() for r in docs.values()]
    return Collection(os.fspath(out_dir), n_questions, len(queries), len(judged),
                      sum(r > 0 for r in judged), run is not None)


def _without_labels(question):
    if not any(key in question.extra for key in LABEL_KEYS):
        return question
    return dataclasses.replace(question, extra={k: v for k, v in question.extra.items()
                                                if k not in LABEL_KEYS})


def convert_semeval(xml_paths, out_dir, *, relevancy=(), extra_archive=(),
                    extra_questions=(), keep_labels=False, full_retrieval=False) -> Collection:
    """Convert SemEval-2016 Task 3 files (subtask B) into the evaluation layout.

    Parameters
    ----------
    xml_paths : list of path
        2016 XML files (train/dev/test); their related questions form the archive
        (each ``RELQ_ID`` once) and their original questions the queries.
    out_dir : path
    relevancy : list of path
        Official ``.relevancy`` gold files; where given they replace the XML labels for
        their queries (``true`` -> 1, ``false`` -> 0). Otherwise qrels come from
        ``RELQ_RELEVANCE2ORGQ`` (PerfectMatch 2, Relevant 1, Irrelevant 0).
    extra_archive : list of path
        More archive files (any format, detected; e.g. the 2015 threads) appended to the
        archive.
    extra_questions : iterable of Question
        More questions appended to the archive (e.g. read from a CSV with a column
        mapping).
    keep_labels : bool, default False
        Keep the comments' relevance labels (``extra["answer_labels"]``,
        ``RELC_RELEVANCE2RELQ``) in the archive. Off by default: the archive becomes an
        index, and the labels of an evaluation split must never reach one; keep them only
        for a training archive (e.g. to train an answer ranker).
    full_retrieval : bool, default False
        Lay the collection out for full retrieval (each original question searches the
        whole archive) instead of reranking: no candidates run; the archive holds each
        thread once (the task repeats a thread under a new ``RELQ_ID`` for every original
        question it is related to: copies with the same words in subject and body are
        merged into the first, and their judgments follow it, the highest grade winning);
        and a thread that is an original question itself (41 of the 70 test queries have
        one among their candidates) takes the query's id, so that the query never
        retrieves itself and other queries still can.

    The candidates run is the search-engine order: score ``1/RELQ_RANKING_ORDER``.
    """
    queries, qrels, run = [], {}, {}
    for path in xml_paths:
        for org in read_original_questions(path):
            if not (org["title"] or "").strip() and not (org["body"] or "").strip():
                raise ArchiveError(f"original question {org['id']!r} has neither a subject "
                                   "nor a body: it cannot be a query", path)
            queries.append(_query(org["id"], org["title"], org["body"]))
            run[org["id"]] = {rid: 1.0 / rank for rid, rank, _ in org["candidates"]}
            labels = {rid: label for rid, _, label in org["candidates"] if label is not None}
            if labels:
                qrels[org["id"]] = labels
    for path in relevancy:
        for lineno, line in _lines(path, "relevancy"):
            parts = line.split("\t")
            if len(parts) != 5 or parts[4] not in ("true", "false"):
                raise ArchiveError("a .relevancy line is ORGQ_ID RELQ_ID rank score "
                                   "true|false (tab-separated)", path, lineno)
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[4] == "true")
    ids = [q["id"] for q in queries]
    if len(set(ids)) != len(ids):
        raise ArchiveError("the same original question occurs in two of the given files")
    questions = itertools.chain(read_questions([*xml_paths, *extra_archive]), extra_questions)
    if not keep_labels:
        questions = map(_without_labels, questions)
    if full_retrieval:
        questions, qrels = _one_copy_per_thread(questions, queries, qrels)
        run = None
    return _write(out_dir, questions, queries, qrels, run)


def _words(title, body) -> tuple:
    return tuple(_WORDS.findall(f"{title}\n{body}".lower()))


def _one_copy_per_thread(questions, queries, qrels):
    """The archive with one record per distinct text (a text that is a query's takes its
    id) and the qrels mapped onto the kept records (see :func:`convert_semeval`)."""
    query_of = {_words(q["title"], q["body"]): q["id"] for q in queries}
    kept, new_id, archive = {}, {}, []
    for q in questions:
        key = _words(q.title, q.body)
        if key not in kept:
            kept[key] = query_of.get(key, q.id)
            archive.append(q if kept[key] == q.id else dataclasses.replace(q, id=kept[key]))
        new_id[q.id] = kept[key]
    merged = {}
    for qid, docs in qrels.items():
        judged = merged.setdefault(qid, {})
        for doc, grade in docs.items():
            doc = new_id.get(doc, doc)
            if doc != qid:
                judged[doc] = max(grade, judged.get(doc, grade))
    return archive, merged


def self_candidates(queries, candidates, archive) -> dict:
    """The candidates that are their query itself: ``{qid: doc_id}``.

    A candidate is its query when the words of its title and body (lowercased, runs of
    word characters: quoting, punctuation and spacing aside) are the query's. In the
    SemEval-2016 test set, 41 of the 70 original questions have such a candidate among
    their 10 (always PerfectMatch); train-part2 and dev have none. Only texts are read,
    never labels.

    Parameters
    ----------
    queries : list of dict
        ``{"id", "text"}`` (see :func:`cqa_search.evaluation.read_queries`).
    candidates : dict
        ``{qid: {doc_id: score}}``.
    archive : Archive or mapping of doc_id to Question
        Where the candidates' texts are read (``archive.get(doc_id)``).

    Returns
    -------
    dict
        ``{qid: doc_id}``, the first such candidate in the given order, for the queries
        that have one.
    """
    out = {}
    for query in queries:
        words = _WORDS.findall(query["text"].lower())
        for doc_id in candidates.get(query["id"], {}):
            question = archive.get(doc_id)
            if _WORDS.findall(f"{question.title}\n{question.body}".lower()) == words:
                out[query["id"]] = doc_id
                break
    return out


def convert_stackexchange(dump_dirs, out_dir, **reader_options) -> Collection:
    """Duplicate-question retrieval from StackExchange dumps.

    The archive is every question. Queries are the questions closed as duplicates
    (``duplicate_of`` pointing at a question of the dumps), and the qrels make their
    originals relevant. A query is itself in the archive: :meth:`SearchEngine.run
    <cqa_search.engine.SearchEngine.run>` never returns a query's own id for it.
    """
    archive = list(read_questions(dump_dirs, format="stackexchange", **reader_options))
    ids = {q.id for q in archive}
    queries, qrels = [], {}
    for q in archive:
        originals = [d for d in q.duplicate_of if d in ids]
        if originals:
            queries.append(_query(q.id, q.title, q.body, q.category))
            qrels[q.id] = dict.fromkeys(originals, 1)
    return _write(out_dir, archive, queries, qrels)


def convert_stackfaq(xml_path, out_dir) -> Collection:
    """StackFAQ (Karan & Snajder, 2018): paraphrase queries against their own thread.

    The archive holds one question per ``<qapair>`` (``faq-N``: the ``<question>`` with its
    ``<answer>`` entries); every non-empty ``<rephr>`` other than the ``*`` separator is a
    query whose only relevant question is its thread.
    """
    if not os.path.isfile(xml_path):
        raise ArchiveError(f"no such file: {xml_path}")
    try:
        root = ET.parse(xml_path).getroot()
    except ET.ParseError as exc:
        raise ArchiveError(f"malformed XML: {exc}", xml_path) from None
    except OSError as exc:
        raise ArchiveError(f"cannot read: {exc.strerror or exc}", xml_path) from None
    archive, queries, qrels = [], [], {}
    for n, pair in enumerate(root.iter("qapair"), 1):
        doc_id = f"faq-{n}"
        if not (pair.findtext("question") or "").strip():
            raise ArchiveError(f"<qapair> {n} has an empty <question>", xml_path)
        archive.append(Question(doc_id, (pair.findtext("question") or "").strip(),
                                answers=tuple(a.text.strip() for a in pair.iter("answer")
                                              if a.text and a.text.strip())))
        paraphrases = [r.text.strip() for r in pair.iter("rephr") if r.text and r.text.strip()]
        for i, text in enumerate(p for p in paraphrases if p != "*"):
            qid = f"{doc_id}-p{i + 1}"
            queries.append(_query(qid, text, ""))
            qrels[qid] = {doc_id: 1}
    if not archive:
        raise ArchiveError("no <qapair> element: not a StackFAQ file", xml_path)
    return _write(out_dir, archive, queries, qrels)


#: RELC_RELEVANCE2RELQ -> relevance in subtask A (PotentiallyUseful counts as Bad).
COMMENT_RELEVANCE = {"Good": 1, "PotentiallyUseful": 0, "Bad": 0}


def semeval_comment_ranking(xml_paths):
    """SemEval-2016 Task 3 subtask A: rank the comments of each related question.

    The "queries" are the threads subtask A keeps: every related question with comments
    that is not a repeat of an earlier thread (``SubtaskA_Skip_Because_Same_As_RelQuestion_ID``);
    the candidates are its comments, relevant when ``RELC_RELEVANCE2RELQ`` is Good
    (PotentiallyUseful and Bad are not). Score with ``evaluate(run, qrels, rerank=True)``
    (the official conventions: top 10, a thread without a Good comment scores 0 and
    counts).

    Parameters
    ----------
    xml_paths : list of path
        2016 (or 2015-reformatted) XML files with comment labels.

    Returns
    -------
    qrels : dict
        ``{RELQ_ID: {RELC_ID: 0 or 1}}``.
    run : dict
        The chronological order (the official IR baseline): ``{RELQ_ID: {RELC_ID: 1/k}}``
        for the comment at position ``k`` (1-based).

    Raises
    ------
    ArchiveError
        A kept thread whose comments lack a label (e.g. the unlabelled test input).
    """
    qrels, run = {}, {}
    for question in read_questions(list(xml_paths), format="semeval"):
        ids = question.extra.get("answer_ids") or []
        if "repeat_of" in question.extra or not ids:
            continue
        labels = question.extra.get("answer_labels") or [None] * len(ids)
        if any(label not in COMMENT_RELEVANCE for label in labels):
            bad = next(label for label in labels if label not in COMMENT_RELEVANCE)
            raise ArchiveError(f"thread {question.id}: comment label {bad!r} is not one of "
                               f"{{'Good', 'PotentiallyUseful', 'Bad'}}")
        qrels[question.id] = {c: COMMENT_RELEVANCE[label] for c, label in zip(ids, labels)}
        run[question.id] = {c: 1.0 / k for k, c in enumerate(ids, 1)}
    return qrels, run
