"""The query syntax a person types, parsed with whoosh into free text and filters.

One parser serves the Python API (:meth:`cqa_search.SearchEngine.search`), the command
line and the server: ``category:Travel lost passport`` and ``category:"Doha Shopping"
cheap sofa`` filter by category; ``NOT word`` leaves a word out; quotes group words.
Text without any syntax is taken as it is, without running the parser.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

with warnings.catch_warnings():  # whoosh 2.7 has invalid escape sequences
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    from whoosh.analysis import RegexTokenizer
    from whoosh.fields import ID, TEXT, Schema
    from whoosh.qparser import OrGroup, QueryParser, WildcardPlugin
    from whoosh.query import Not, Phrase

__all__ = ["ParsedQuery", "parse_query"]

# Text with none of these is plain words: the parser would return it unchanged.
_SYNTAX = re.compile(r'[:"()\[\]{}^]|(?:^|(?<=\W))\'|\b(?:AND|OR|NOT|ANDNOT|ANDMAYBE)\b')


@dataclass(frozen=True)
class ParsedQuery:
    """Free text and filters of a typed query."""

    text: str
    category: str | None = None


_SCHEMA = Schema(text=TEXT(analyzer=RegexTokenizer(r"\S+")), category=ID)


def parse_query(typed: str) -> ParsedQuery:
    """Split a typed query into free text and a ``category:`` filter (whoosh syntax).

    ``category:Travel lost passport`` and ``category:"Doha Shopping" cheap sofa`` set the
    category; ``NOT word`` drops the word; quotes group words.

    Examples
    --------
    >>> parse_query('category:"Doha Shopping" cheap sofa')
    ParsedQuery(text='cheap sofa', category='Doha Shopping')
    >>> parse_query("reset my router NOT wifi")
    ParsedQuery(text='reset my router', category=None)
    """
    if not _SYNTAX.search(typed):
        return ParsedQuery(" ".join(typed.split()))
    parser = QueryParser("text", _SCHEMA, group=OrGroup)
    parser.remove_plugin_class(WildcardPlugin)
    words, category = [], None

    def walk(node, negated=False):
        nonlocal category
        if isinstance(node, Not):
            walk(node.query, True)
            return
        if node.is_leaf():
            if negated:
                return
            field = getattr(node, "fieldname", None)
            if field == "category":
                category = node.text
            elif isinstance(node, Phrase):
                words.extend(node.words)
            elif field == "text":
                words.append(node.text)
            return
        for child in node.children():
            walk(child, negated)

    walk(parser.parse(typed))
    return ParsedQuery(" ".join(words), category)


