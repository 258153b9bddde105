"""Reader for StackExchange data dumps (``Posts.xml``, optionally ``PostLinks.xml``).

A dump folder (or its ``Posts.xml``) gives one question per row with ``PostTypeId=1``;
answers (``PostTypeId=2``) are joined to their question by ``ParentId``; other post types
(tag wikis, ...) are ignored. Duplicate links are ``PostLinks.xml`` rows with
``LinkTypeId=3`` (``PostId`` duplicates ``RelatedPostId``).

Ids are ``<site>:<Id>`` (``site`` is the dump folder's name, e.g.
``ai.stackexchange.com:123``), so that the dumps of several sites can be read together.

Memory: ``Posts.xml`` is streamed twice. The first pass keeps every answer's text (and
the ids of the questions) because an answer may come before or after its question in
the file; the second pass yields the questions one by one, each taking its answers out
of that table. Memory is therefore proportional to the answers' text, not to the whole
dump.

Duplicate notices. When a question was closed as a duplicate, StackExchange used to edit a
notice naming the original(s) into the top of its body ("Possible Duplicate: <title>",
later "This question already has an answer here: <title>"). Read as a query, such a
question would carry its answer in its text, so :func:`strip_html` drops these notices
(see :func:`strip_html` for the shapes recognised).
"""
from __future__ import annotations

import os
import re
from html.parser import HTMLParser

from ..exceptions import ArchiveError
from ._base import ReadReport, check_file, iter_xml, logger, make_question

__all__ = ["read", "strip_html"]

_CATEGORY_FROM = ("site", "first_tag")
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure h1 h2 h3 h4 h5 h6 "
    "hr li ol p pre section table td th tr ul".split())
_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())
_SPACES = re.compile(r"[^\S\n]+")
_ANGLE_TAGS = re.compile(r"<([^<>]+)>")
#: The text a duplicate notice starts with, in the forms StackExchange has used.
_NOTICE = re.compile(
    r"(?:possible duplicates?\s*:"
    r"|this question already has (?:an )?answers? here\s*:"
    r"|closed\.?\s*this question is a duplicate\b"
    r"|this question (?:has been|was) marked as (?:a )?duplicate\b)", re.IGNORECASE)


class _TextExtractor(HTMLParser):
    """Collects the text of an HTML fragment, with a line break around block elements.

    ``blocks`` records where each top-level element (or run of top-level text) starts in
    ``parts``, so that leading duplicate notices can be cut off whole.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.blocks = []  # (tag or "#text", index of its first part)
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if self._depth == 0:
            self.blocks.append((tag, len(self.parts)))
        if tag not in _VOID_TAGS:
            self._depth += 1
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_startendtag(self, tag, attrs):  # <br/>: a void element either way
        if self._depth == 0:
            self.blocks.append((tag, len(self.parts)))
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if tag not in _VOID_TAGS and self._depth > 0:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth == 0 and data.strip():
            self.blocks.append(("#text", len(self.parts)))
        self.parts.append(data)

    def text_without_notices(self) -> str:
        """The text, without the duplicate notices at the top of the fragment.

        A notice is a leading top-level block (``<blockquote>``, ``<p>``, ...) whose
        text starts with one of the :data:`_NOTICE` forms; when its text ends with a
        colon, the list of originals right after it (``<ul>``/``<ol>``) goes too.
        Notices further down (a meta post quoting one) are text like any other.
        """
        ends = [start for _, start in self.blocks[1:]] + [len(self.parts)]
        cut, i = 0, 0
        while i < len(self.blocks):
            text = " ".join("".join(self.parts[self.blocks[i][1]:ends[i]]).split())
            i += 1
            if not text:
                continue
            if not _NOTICE.match(text):
                break
            if text.endswith(":") and i < len(self.blocks) and self.blocks[i][0] in ("ul", "ol"):
                i += 1
            cut = ends[i - 1]
        return "".join(self.parts[cut:])


def strip_html(html: str) -> str:
    """The text of an HTML fragment: tags dropped, entities decoded, code text kept,
    duplicate notices at the top dropped.

    Block elements (paragraphs, list items, ``<pre>``, ...) and ``<br>`` become line
    breaks; runs of other whitespace become one space; blank lines are dropped.

    Duplicate notices are the top-level blocks at the start of the fragment whose text
    starts with "Possible Duplicate:", "Possible Duplicates:", "This question already has
    an answer here:" / "answers here:", "Closed. This question is a duplicate" or "This
    question has been marked as duplicate" (any case; usually a ``<blockquote>``), with
    the list of originals that follows a notice ending in a colon.

    Examples
    --------
    >>> strip_html("<p>Use <code>x &lt; 2</code>&nbsp;here.</p><ul><li>one</li><li>two</li></ul>")
    'Use x < 2 here.\\none\\ntwo'
    >>> strip_html('<blockquote><p><strong>Possible Duplicate:</strong><br>'
    ...            '<a href="/q/1">How to fix a flat?</a></p></blockquote><p>Tyre is flat.</p>')
    'Tyre is flat.'
    """
    if "<" not in html and "&" not in html:
        text = html
    else:
        parser = _TextExtractor()
        parser.feed(html)
        parser.close()
        text = parser.text_without_notices()
    lines = (line.strip() for line in _SPACES.sub(" ", text).split("\n"))
    return "\n".join(line for line in lines if line)


def _tags(value: str) -> list:
    """Tags from ``<a><b>`` or ``|a|b|``."""
    if value.startswith("<"):
        return _ANGLE_TAGS.findall(value)
    return [tag for tag in value.split("|") if tag]


def _post_id(value):
    """Sort key of a post id: numeric when it is a number."""
    return (0, int(value), "") if value.isascii() and value.isdigit() else (1, 0, value)


def _score(row, kind, path, line, report):
    """The row's Score (0 when absent), or None after reporting a malformed one."""
    try:
        return int(row.get("Score") or 0)
    except ValueError:
        report.invalid(ArchiveError(
            f"{kind} Id={row.get('Id')}: Score is not an integer: {row.get('Score')!r}",
            path, line))
        return None


def _paths(path):
    path = os.fspath(path)
    if os.path.isdir(path):
        posts = os.path.join(path, "Posts.xml")
        if not os.path.exists(posts):
            raise ArchiveError(f"{path} has no Posts.xml: not a StackExchange dump folder")
    elif os.path.exists(path):
        posts = path
    else:
        raise ArchiveError(f"no such file or folder: {path}")
    check_file(posts)
    if not os.path.isfile(posts):
        raise ArchiveError(f"{posts} is a pipe: a StackExchange dump is read twice; give a file")
    folder = os.path.dirname(os.path.abspath(posts))
    links = os.path.join(folder, "PostLinks.xml")
    return posts, (links if os.path.isfile(links) else None), os.path.basename(folder)


def _collect(posts, report):
    """First pass: the question ids, and the answers of each parent post."""
    question_ids = set()
    answers = {}  # parent Id -> [(sort key, Id, text)]
    for row, line in iter_xml(posts, {"row"}, root_tags={"posts"}):
        kind = row.get("PostTypeId")
        if kind == "1":
            question_ids.add(row.get("Id"))
        elif kind == "2" and row.get("ParentId") and row.get("Id"):
            score = _score(row, "answer", posts, line, report)
            if score is None:
                continue
            key = (-score, _post_id(row.get("Id")))
            answers.setdefault(row.get("ParentId"), []).append(
                (key, row.get("Id"), strip_html(row.get("Body") or "")))
    return question_ids, answers


def _duplicates(links, question_ids):
    """Duplicate Id -> original Ids, for links whose two ends are questions of the dump."""
    out = {}
    if links is None:
        return out
    for row, _ in iter_xml(links, {"row"}, root_tags={"postlinks"}):
        if row.get("LinkTypeId") != "3":
            continue
        duplicate, original = row.get("PostId"), row.get("RelatedPostId")
        if duplicate in question_ids and original in question_ids:
            originals = out.setdefault(duplicate, [])
            if original not in originals:
                originals.append(original)
    return out


def read(path, *, report: ReadReport, category_from="site", site=None):
    """Yield the questions of a StackExchange dump with their answers and duplicate links.

    Fields: ``id`` = ``<site>:<Id>``; ``title`` = ``Title``; ``body`` = ``Body`` without
    HTML and without a leading duplicate notice (:func:`strip_html`); ``tags`` from ``Tags`` (``<a><b>`` or ``|a|b|``);
    ``answers`` = the answers' text ordered by ``Score`` (highest first), then by ``Id``;
    ``best_answer`` = the position of ``AcceptedAnswerId`` among them, when present;
    ``duplicate_of`` = the originals this question duplicates (``<site>:<Id>``), from
    links whose two ends are questions of the dump; ``extra`` = ``score`` and
    ``creation_date``.

    Parameters
    ----------
    path : str or path-like
        A dump folder holding ``Posts.xml`` (and optionally ``PostLinks.xml``), or the
        path of ``Posts.xml`` itself (``PostLinks.xml`` is then looked for beside it).
    report : ReadReport
        Receives invalid rows: a question without ``Id`` or ``Title``, a question or
        answer whose ``Score`` is not an integer. Answers whose question is absent are ignored.
    category_from : {'site', 'first_tag'}
        ``'site'``: the category is the site name; ``'first_tag'``: the question's
        first tag, or the site name for a question without tags.
    site : str or None
        Site name used in ids and categories; the dump folder's name when None.

    Raises
    ------
    ArchiveError
        Missing ``Posts.xml``, bad options, malformed XML or non-UTF-8 bytes (file, line,
        column), or an invalid row unless invalid records are skipped.
    """
    if category_from not in _CATEGORY_FROM:
        raise ArchiveError(f"category_from must be one of {{'site', 'first_tag'}}; "
                           f"got {category_from!r}")
    if site is not None and (not isinstance(site, str) or not site.strip()):
        raise ArchiveError(f"site must be a non-empty string or None; got {site!r}")
    posts, links, folder = _paths(path)
    site = site.strip() if site is not None else folder
    question_ids, answers = _collect(posts, report)
    duplicates = _duplicates(links, question_ids)
    for row, line in iter_xml(posts, {"row"}, root_tags={"posts"}):
        if row.get("PostTypeId") != "1":
            continue
        post_id, title = row.get("Id"), row.get("Title")
        thread = answers.pop(post_id, ())  # taken even when the question is invalid
        if not post_id or not title or not title.strip():
            report.invalid(ArchiveError(
                f"question Id={post_id} has no Title" if post_id else "question row has no Id",
                posts, line))
            continue
        score = _score(row, "question", posts, line, report)
        if score is None:
            continue
        thread = sorted(thread)
        accepted = row.get("AcceptedAnswerId")
        answer_ids = [answer_id for _, answer_id, _ in thread]
        tags = _tags(row.get("Tags") or "")
        category = tags[0] if category_from == "first_tag" and tags else site
        question = make_question(
            report, posts, line, id=f"{site}:{post_id}", title=title,
            body=strip_html(row.get("Body") or ""), category=category, tags=tags,
            answers=tuple(text for _, _, text in thread),
            best_answer=answer_ids.index(accepted) if accepted in answer_ids else None,
            duplicate_of=tuple(f"{site}:{d}" for d in duplicates.get(post_id, ())),
            extra={"score": score, "creation_date": row.get("CreationDate")})
        if question is not None:
            yield question, posts, line
    orphans = sum(len(thread) for thread in answers.values())
    if orphans:
        logger.warning("%s: %d answer(s) belong to no question of the dump (their ParentId is "
                       "not a question's Id); they are not read", posts, orphans)
