"""Reader for SemEval-2016 Task 3 (Qatar Living, "CQA-QL") XML files.

The archive records are the related questions (``RelQuestion``) with their comments
(``RelComment``), one per ``Thread``; the original questions (``OrgQuestion``) are the
task's queries, not archive records, and are ignored here. Both layouts are read: the
2016 files (``OrgQuestion > Thread``) and the 2015 data reformatted for 2016 (``Thread``
directly under the root), including the multi-line variants, whose comment text is in
``RelCBody`` (uncleansed) or ``RelCClean`` instead of ``RelCText``.

Repeated threads
----------------
A thread that is a candidate for several original questions appears once per original
question, under a new ``RELQ_ID``, with ``SubtaskA_Skip_Because_Same_As_RelQuestion_ID``
naming its first occurrence (often in another file, such as the unavailable TRAIN part 1).
Every ``RELQ_ID`` is kept, since the task's candidate lists and gold labels refer to
them; the repeat's first occurrence is recorded in ``extra["repeat_of"]``. The same
``RELQ_ID`` seen twice is yielded once.
"""
from __future__ import annotations

from ..exceptions import ArchiveError
from ._base import ReadReport, check_file, child_text, iter_xml, make_question

__all__ = ["read", "read_original_questions", "RELEVANCE"]

_REPEAT_OF = "SubtaskA_Skip_Because_Same_As_RelQuestion_ID"
_COMMENT_TEXT = ("RelCText", "RelCBody", "RelCClean")


def _text(elem, tag) -> str:
    return child_text(elem, tag).strip()


def _comment_text(comment) -> str:
    for tag in _COMMENT_TEXT:
        if comment.find(tag) is not None:
            return _text(comment, tag)
    return ""


def read(path, *, report: ReadReport):
    """Yield one :class:`~cqa_search.archive.Question` per distinct thread of a SemEval file.

    Fields: ``id`` = ``RELQ_ID``, ``title`` = ``RelQSubject``, ``body`` = ``RelQBody``,
    ``category`` = ``RELQ_CATEGORY``, ``answers`` = the comment texts in thread order,
    ``best_answer`` = None. ``extra`` holds ``answer_labels`` (``RELC_RELEVANCE2RELQ``
    of each comment, in the order of ``answers``; None when absent), ``answer_ids``
    (``RELC_ID``), ``answer_user_ids`` (``RELC_USERID``: who wrote each comment), and
    ``date``, ``user_id`` and ``repeat_of`` (``RELQ_DATE``, ``RELQ_USERID``: who asked,
    the first occurrence of a repeated thread) when present.

    Parameters
    ----------
    path : str or path-like
        A SemEval-2016 Task 3 XML file (2016 or 2015-reformatted layout).
    report : ReadReport
        Receives invalid threads (no ``RelQuestion``, no id, neither subject nor body).

    Raises
    ------
    ArchiveError
        Malformed XML or non-UTF-8 bytes (file, line, column), a file without any
        ``Thread`` element, or an invalid thread unless invalid records are skipped.
    """
    path = check_file(path)
    seen = set()
    n_threads = 0
    for thread, line in iter_xml(path, {"Thread"}):
        n_threads += 1
        question = thread.find("RelQuestion")
        name = thread.get("THREAD_SEQUENCE")
        if question is None:
            report.invalid(ArchiveError(f"thread {name!r} has no <RelQuestion>", path, line))
            continue
        qid = question.get("RELQ_ID") or name
        if not qid:
            report.invalid(ArchiveError(
                "<RelQuestion> has no RELQ_ID (nor its thread a THREAD_SEQUENCE)", path, line))
            continue
        if qid in seen:
            continue
        comments = thread.findall("RelComment")
        extra = {
            "answer_labels": [c.get("RELC_RELEVANCE2RELQ") for c in comments],
            "answer_ids": [c.get("RELC_ID") for c in comments],
            "answer_user_ids": [c.get("RELC_USERID") for c in comments],
        }
        for element, attribute, key in ((question, "RELQ_DATE", "date"),
                                        (question, "RELQ_USERID", "user_id"),
                                        (thread, _REPEAT_OF, "repeat_of")):
            if element.get(attribute):
                extra[key] = element.get(attribute)
        record = make_question(
            report, path, line, id=qid, title=_text(question, "RelQSubject"),
            body=_text(question, "RelQBody"), category=question.get("RELQ_CATEGORY"),
            answers=tuple(_comment_text(c) for c in comments), extra=extra)
        if record is not None:
            seen.add(record.id)
            yield record, path, line
    if n_threads == 0:
        raise ArchiveError("no <Thread> element: not a SemEval-2016 Task 3 file", path)


#: RELQ_RELEVANCE2ORGQ -> graded relevance (PerfectMatch and Relevant are relevant).
RELEVANCE = {"PerfectMatch": 2, "Relevant": 1, "Irrelevant": 0}


def read_original_questions(path):
    """Yield the original questions of a 2016 file with their ranked candidates.

    Each item is a dict: ``id`` (``ORGQ_ID``), ``title``, ``body``, and ``candidates``, a
    list of ``(RELQ_ID, RELQ_RANKING_ORDER, label)`` in file order, where ``label`` is the
    graded relevance of :data:`RELEVANCE` or None when the file has no gold label (the
    test input's ``?``). An original question's elements must be consecutive, as in the
    official files.

    Raises
    ------
    ArchiveError
        Malformed XML, a missing id or rank, or an original question split in two.
    """
    path = check_file(path)
    current, done = None, set()
    for elem, line in iter_xml(path, {"OrgQuestion"}):
        qid = elem.get("ORGQ_ID")
        rel = elem.find("Thread/RelQuestion")
        if not qid or rel is None or not rel.get("RELQ_ID"):
            raise ArchiveError("<OrgQuestion> without ORGQ_ID or related question", path, line)
        try:
            rank = int(rel.get("RELQ_RANKING_ORDER"))
        except (TypeError, ValueError):
            raise ArchiveError(f"bad RELQ_RANKING_ORDER {rel.get('RELQ_RANKING_ORDER')!r}",
                               path, line) from None
        candidate = (rel.get("RELQ_ID"), rank, RELEVANCE.get(rel.get("RELQ_RELEVANCE2ORGQ")))
        if current is not None and current["id"] == qid:
            current["candidates"].append(candidate)
            continue
        if current is not None:
            done.add(current["id"])
            yield current
        if qid in done:
            raise ArchiveError(f"original question {qid} appears in two separate places",
                               path, line)
        current = {"id": qid, "title": _text(elem, "OrgQSubject"),
                   "body": _text(elem, "OrgQBody"), "candidates": [candidate]}
    if current is not None:
        yield current
