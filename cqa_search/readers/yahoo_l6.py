"""Reader for the Yahoo! Answers Webscope L6 XML (``<ystfeed>`` of ``<document>``).

Each ``<document>`` (inside ``<vespaadd>``) is one question::

    <document type="wisdom"><uri>..</uri><subject>..</subject><content>..</content>
      <bestanswer>..</bestanswer><nbestanswers><answer_item>..</answer_item>...</nbestanswers>
      <cat>..</cat><maincat>..</maincat><subcat>..</subcat><qlang>..</qlang>...</document>

L6 text carries line breaks as escaped ``<br />`` (``&lt;br /&gt;`` in the file) and some
HTML entities; both are decoded.
"""
from __future__ import annotations

import html
import re

from ..exceptions import ArchiveError
from ._base import ReadReport, check_file, child_text, iter_xml, make_question

__all__ = ["read"]

_CATEGORY_LEVELS = ("maincat", "cat", "subcat")
_FIELDS = frozenset({"uri", "subject", "content", "bestanswer", "nbestanswers"})
_BR = re.compile(r"[ \t]*<br\s*/?>[ \t]*", re.IGNORECASE)
# L6's <id> is the asker's user id; it must not clash with the question id.
_RENAMED = {"id": "user_id"}


def _text(value) -> str:
    """L6 text with ``<br />`` as line breaks and HTML entities decoded."""
    return html.unescape(_BR.sub("\n", value or "")).strip()


def read(path, *, report: ReadReport, category_level="maincat"):
    """Yield one :class:`~cqa_search.archive.Question` per ``<document>`` of an L6 file.

    Fields: ``id`` = ``uri``, ``title`` = ``subject``, ``body`` = ``content``,
    ``answers`` = the ``nbestanswers`` items in file order (the ``bestanswer`` is put
    first when it is not among them), ``best_answer`` = the position of ``bestanswer``,
    ``category`` = the element named by ``category_level``. Every other child element
    (the other category levels, ``qlang``, ``date``, ...) is kept in ``extra`` under its
    name, except ``id`` (the asker), kept as ``user_id``.

    Parameters
    ----------
    path : str or path-like
        An L6 XML file.
    report : ReadReport
        Receives invalid documents (no ``uri``, neither subject nor content).
    category_level : {'maincat', 'cat', 'subcat'}
        Which level of the Yahoo! category tree is the question's category.

    Raises
    ------
    ArchiveError
        Bad option, malformed XML or non-UTF-8 bytes (file, line, column), a file without
        ``<document>``, or an invalid document unless invalid records are skipped.
    """
    if category_level not in _CATEGORY_LEVELS:
        raise ArchiveError(f"category_level must be one of {{'maincat', 'cat', 'subcat'}}; "
                           f"got {category_level!r}")
    path = check_file(path)
    n_documents = 0
    for document, line in iter_xml(path, {"document"}):
        n_documents += 1
        uri = (document.findtext("uri") or "").strip()
        if not uri:
            report.invalid(ArchiveError("<document> has no <uri>", path, line))
            continue
        answers = [_text("".join(item.itertext()))
                   for item in document.iterfind("nbestanswers/answer_item")]
        answers = [answer for answer in answers if answer]
        best = _text(child_text(document, "bestanswer"))
        if best and best not in answers:
            answers.insert(0, best)
        extra = {_RENAMED.get(child.tag, child.tag): (child.text or "").strip()
                 for child in document
                 if child.tag not in _FIELDS and child.tag != category_level}
        question = make_question(
            report, path, line, id=uri, title=_text(child_text(document, "subject")),
            body=_text(child_text(document, "content")),
            category=document.findtext(category_level),
            answers=tuple(answers), best_answer=answers.index(best) if best else None,
            extra=extra)
        if question is not None:
            yield question, path, line
    if n_documents == 0:
        raise ArchiveError("no <document> element: not a Yahoo! Answers L6 file", path)
