"""The query side, built on whoosh: fielded query syntax, highlighting, "did you mean".

The hot scoring path does not use whoosh; these helpers shape what a person types and
what they see.
"""
from __future__ import annotations

import warnings
from bisect import bisect_left
from dataclasses import dataclass

with warnings.catch_warnings():  # whoosh 2.7 has invalid escape sequences
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    from whoosh import highlight as _wh
    from whoosh.analysis import RegexTokenizer
    from whoosh.automata.fsa import find_all_matches
    from whoosh.automata.lev import levenshtein_automaton
    from whoosh.fields import ID, TEXT, Schema
    from whoosh.qparser import OrGroup, QueryParser, WildcardPlugin
    from whoosh.query import Not, Phrase
    from whoosh.spelling import Corrector

__all__ = ["ParsedQuery", "parse_query", "highlight", "Suggester"]


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


def highlight(text: str, terms, analyzer, *, start="[", end="]", whole=True, top=3) -> str:
    """Mark the words of ``text`` whose index term is in ``terms``.

    Parameters
    ----------
    text : str
    terms : iterable of str
        Index terms (as produced by ``analyzer``), e.g. the query's terms.
    analyzer : Analyzer
    start, end : str
        Strings placed around each match (e.g. ANSI colour codes).
    whole : bool
        Return the whole text; otherwise the ``top`` best fragments around matches.

    Examples
    --------
    >>> from cqa_search.analysis import Analyzer
    >>> highlight("Renewing my visas in Doha", {"renew", "visa"}, Analyzer())
    '[Renewing] my [visas] in Doha'
    """
    terms = frozenset(terms)
    if not terms or not text:
        return text

    class _Formatter(_wh.Formatter):
        between = " ... "

        def format_token(self, text, token, replace=False):
            return start + _wh.get_text(text, token, replace) + end

    fragmenter = _wh.WholeFragmenter() if whole else _wh.ContextFragmenter(surround=40)
    out = _wh.highlight(text, terms, analyzer.whoosh_analyzer(), fragmenter, _Formatter(),
                        top=1 if whole else top)
    return out or text


class _RankedCorrector(Corrector):
    """Words within an edit distance, nearest first, then most frequent."""

    def __init__(self, words, freq):
        self.words = words  # sorted
        self.freq = freq

    def _next_word(self, w):
        """The first word >= ``w`` (the lookup that drives the automaton walk)."""
        pos = bisect_left(self.words, w)
        return self.words[pos] if pos < len(self.words) else None

    def _suggestions(self, text, maxdist, prefix):
        seen = {text}
        for dist in range(1, maxdist + 1):
            dfa = levenshtein_automaton(text, dist, prefix).to_dfa()
            for word in find_all_matches(dfa, self._next_word):
                if word not in seen:
                    seen.add(word)
                    yield -(dist + 1.0 / (1.0 + self.freq.get(word, 0))), word


class Suggester:
    """"Did you mean" for query words the archive lacks.

    Parameters
    ----------
    words : dict
        Surface word -> frequency (document frequency of its term), the candidates.

    Examples
    --------
    >>> Suggester({"hospital": 9, "hostel": 3, "visa": 5}).suggest("hospitel")
    ['hospital', 'hostel']
    """

    def __init__(self, words: dict):
        self._corrector = _RankedCorrector(sorted(words), words)

    def suggest(self, word: str, limit: int = 3, maxdist: int = 2) -> list:
        """Up to ``limit`` known words within ``maxdist`` edits of ``word``, best first."""
        if len(word) <= 3:
            maxdist = 1
        return self._corrector.suggest(word.lower(), limit=limit, maxdist=maxdist)
