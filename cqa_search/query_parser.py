"""The query syntax a person types, parsed into words and filters (the common syntax
directly, the rest by whoosh's query parser).

One parser serves the Python API (:meth:`cqa_search.SearchEngine.search`), the command
line and the server. The syntax (what ``:help`` and the README list):

======================================  ===============================================
``renew work visa``                     any of the words (ranked by the retrieval model)
``+visa renew``, ``+visa +renew``       ``visa`` required (both required)
``-used``                               leave out questions with ``used``
``"reset button"``                      the words next to each other (a phrase; required)
``(visa OR permit) AND renew``          one of the words in brackets, and ``renew``
``title:visa`` ``body:`` ``answers:``   the word in that part of the question (required);
``tags:visa``                           ``tags:`` a word of the question's tags
``tag:machine-learning``                questions with exactly this tag (no stemming,
                                        any case); ``-tag:x`` leaves them out
``date:>=2014-01-01``                   questions created from that day on (also ``>``,
                                        ``<``, ``<=``; ``date:2014``, ``date:2014-03``:
                                        that year or month; ``date:2014-01..2014-06``)
``title:visa OR title:permit``          either requirement (side by side: both)
``visa^2`` ``title:visa^2``             a boost: the word weighs 2 in the term scores
                                        (1 without one); ``(visa permit)^2`` both
``category:Travel``                     only this category; ``category:"Doha Shopping"``
``-category:Travel``                    leave this category out
======================================  ===============================================

``AND``, ``OR`` and ``NOT`` (upper case) are operators in a query written in the syntax:
one with other syntax too (a field with its value, a quoted phrase of two words or more,
``+word`` or ``-word``, a ``date:`` filter, a range or a boost, or brackets an operator
opens, closes or is inside of: ``visa NOT (work permit)``, ``title:visa AND renew``). In
text with none of these they are words, as in a pasted question ("I can NOT sleep at
night" searches ``sleep``; Elasticsearch's ``simple_query_string`` never reads them,
Lucene's classic parser always does): the query's :attr:`~ParsedQuery.notices` say so,
and ``-word`` leaves a word out in any query. A field name with nothing right after its colon
(``tag:``, ``Date: tomorrow``) is no filter and no word: it is left out, with a notice.
What a query applied is :meth:`ParsedQuery.filters` (the search page, the command line and
the API show it). A boost multiplies the weight of its words' terms in the query (their
query frequency ``qtf``, which every term model's score multiplies), wherever they rank;
a boost that cannot apply (on a left-out word, a category, a boost of 0, a word the index
does not hold: :func:`without_empty_units`) is ignored, with a notice.
Filters given beside the text (a category, tags, a date range: the
keyword parameters of :meth:`~cqa_search.SearchEngine.search`) are :class:`Filters`,
added to the text's by :meth:`Filters.apply`.

Field names may be written in any case (``Title:visa``). A query keeps one category.
Dates are those the archive's records keep (:mod:`cqa_search.index.attributes`), in UTC;
a date filter leaves out the questions without a date.

Words are analysed like the archive (stemmed, stopwords dropped), so a filter matches what
a search matches. Prose punctuation is not syntax: a ``+`` or ``-`` standing alone between
spaces ("Doha - any ideas?"), brackets without an operator, square brackets and braces
without a range (``[a TO b]``), a caret without a boost (``word^2``), a colon not after a
field name, single quotes. Text without any syntax is taken as it is (repeated words
counted), without a parser; text whoosh's
parser cannot read (``title:x NOT NOT``) falls back to its plain words, with a notice.
"""
from __future__ import annotations

import dataclasses
import datetime
import re
import threading
import warnings
from dataclasses import dataclass

from .archive import END_OF_DATES, FIRST_DATE
from .exceptions import QueryError

__all__ = ["ParsedQuery", "Unit", "Filters", "parse_query", "without_empty_units",
           "FIELD_PREFIXES", "MAX_QUERY_CHARS"]

#: Field prefixes of the syntax (``title:word``); ``text`` is the default (the question:
#: title and body). Not the index's fields (:data:`cqa_search.index.term_index.FIELDS`):
#: ``tags:`` is a word of the tags (the ``tags`` field), ``tag:`` an exact tag (a filter),
#: ``title:`` and ``body:`` look in parts of ``question``.
FIELD_PREFIXES = ("title", "body", "answers", "tags", "tag")
#: Longest query text taken (a server takes queries from anyone).
MAX_QUERY_CHARS = 10_000
# a field name before its colon, in any case
_FIELD = r"(?i:\b(?:category|" + "|".join(FIELD_PREFIXES) + r"):)"

_OPERATOR = r"\b(?:AND|OR|NOT|ANDNOT|ANDMAYBE)\b"
# Text with none of these (nor a phrase: _has_syntax) is plain words, searched as typed
# without the parser (whoosh's parser costs milliseconds on a long question), its operator
# words words too: they are operators only next to other syntax (the module docstring).
# Colons, parentheses and quotes of ordinary prose are not syntax: a colon only after a
# field name and before its value, quotes only around two words or more (a "word" in
# quotes asks nothing of it), parentheses only with an operator, a caret only before a
# boost (word^2), brackets and braces only around a range (a TO b), a sign only before a
# word that is no number ("-5 degrees"); prose keeps its repeated words as plain text does.
_SYNTAX = re.compile(_FIELD + r'(?=\S)|\^[0-9.]'
                     r'|[\[{][^\]}]*\bTO\b|(?:^|(?<=[\s(]))[-+](?=[^\s)\d])'
                     r"|" + _OPERATOR + r"\s*\(|\)\s*" + _OPERATOR
                     + r"|\([^()]*" + _OPERATOR + r"[^()]*\)")
_OPERATOR_WORD = re.compile(_OPERATOR)
#: Every match of ``_SYNTAX`` and every phrase holds one of these.
_SYNTAX_CHARACTERS = ':^[{-+()"'
# the words around the operator words of plain text (what their notice suggests)
_AFTER_NOT = re.compile(r"\bNOT\s+(?:(?i:a|an|the|to|be|my|your|his|her|its|our|their|any|"
                        r"so|that|this|at|in|on|of)\s+)*(\w[\w'-]*)")  # the word, not "a"
_AROUND_AND = re.compile(r"(\w[\w'-]*)\s+AND\s+(\w[\w'-]*)")
# a field name with nothing right after its colon (tag:, -tag:, "Date: tomorrow"): no
# filter and no word
_EMPTY_FIELD = re.compile(r"(?:^|(?<=[\s(]))[-+]?((?i:(?:category|date|"
                          + "|".join(FIELD_PREFIXES) + r"):))(?=[\s)]|\Z)")
_WORD = re.compile(r"[^\s\"()\[\]{}^:+]+")
# The common syntax, read without whoosh (whoosh's parser tries each of its taggers at each
# character: ~4 ms on a long question with a quotation in it): words, +word, -word and
# quoted phrases (+ and - allowed before them at the start of a word), at least one clause
# not excluded. A quote opens a phrase when another closes it on the same line and is a
# character of a word otherwise, as in whoosh; an oracle test holds the result to whoosh's
# on text of these clauses. Parentheses, brackets, colons and single quotes are punctuation
# of the words here (prose: "Thanks :)", "Engineer(construction)"), as in text without
# any syntax; whoosh reads what is syntax beyond these: a field (title:), an operator word,
# a sign before a bracket (+(a b): one of them required), a range ([a TO b]), a boost (a^2).
_PHRASE = re.compile(r'"(.*?)"')  # whoosh's PhrasePlugin (no newline in a phrase)
_SPACE = re.compile(r"\s+")
_NOT_COMMON = re.compile(_FIELD + r"|" + _OPERATOR + r"|(?:^|(?<=\s))[-+][(\[{]|"
                         r"[\[{][^\]}]*\bTO\b|\^[0-9.]")
# + and - alone between spaces: punctuation of prose, removed before parsing
_LONE_SIGN = re.compile(r"(?:^|(?<=\s))[-+]+(?=\s|\Z)")
# a field name in any case (Title:, CATEGORY:), given to whoosh in lower case
_FIELD_NAME = re.compile(_FIELD + r"(?=\S)")


@dataclass(frozen=True)
class Unit:
    """Words that must occur in one field of a question (next to each other if a phrase).

    Attributes
    ----------
    field : str
        ``"question"`` (title and body), ``"title"``, ``"body"``, ``"answers"``, ``"tags"``
        (words of the tags) or ``"tag"`` (one exact tag, ignoring case).
    words : tuple of str
        As typed (analysed by the engine).
    phrase : bool
    """

    field: str
    words: tuple
    phrase: bool = False


@dataclass(frozen=True)
class ParsedQuery:
    """A typed query: the words to rank by, and filters.

    Attributes
    ----------
    text : str
        The words that score (every word the query asks for, filters' words included but
        an exact tag's: ``tag:`` filters, and its words score only in a query without
        other words).
    category : str or None
        ``category:`` filter.
    must : tuple of tuple of Unit
        Each a disjunction: a hit matches at least one of its units.
    must_not : tuple of tuple of Unit
        Each a conjunction: a hit never matches all of its units.
    not_categories : tuple of str
        Categories left out (``-category:Travel``).
    dates : tuple of (int or None, int or None)
        ``date:`` filters: each a range ``[low, high)`` of seconds since 1970 (UTC), None
        for no bound.
    notices : tuple of str
        What of the typed text was not read as the syntax it looks like (operator words
        searched as words, a field without a value left out, a boost ignored), one
        sentence each.
    boosts : tuple of (str, float)
        The boosted words of ``text`` (as typed) with their boost, one pair per boosted
        occurrence: each counts its boost instead of 1 in the query frequency of its
        terms.
    """

    text: str
    category: str | None = None
    must: tuple = ()
    must_not: tuple = ()
    not_categories: tuple = ()
    dates: tuple = ()
    notices: tuple = ()
    boosts: tuple = ()

    @property
    def has_filters(self) -> bool:
        return bool(self.must or self.must_not or self.not_categories or self.dates)

    def filters(self) -> tuple:
        """The requirements and filters the query applies, each written in the query
        syntax (what a person is shown of how the query was read): ``+word``, a phrase or
        a field's word (required), ``+(a OR b)``, ``-word``, ``-(a AND b)``,
        ``category:NAME``, ``-category:NAME``, ``date:A..B`` (days, both included),
        ``date:>=A``, ``date:<B``.

        Examples
        --------
        >>> parse_query('+visa "work permit" -used title:(renew OR extend) date:2014').filters()
        ('+visa', '"work permit"', '+(title:renew OR title:extend)', '-used', \
'date:2014-01-01..2014-12-31')
        >>> parse_query("I can NOT sleep at night").filters()
        ()
        """
        required = [_clause(units, " OR ", "+") for units in self.must]
        excluded = [_clause(units, " AND ", "-") for units in self.must_not]
        categories = [f"category:{_quoted(self.category)}"] if self.category else []
        categories += [f"-category:{_quoted(name)}" for name in self.not_categories]
        return tuple(required + excluded + categories + [_date_clause(*r) for r in self.dates])


def _quoted(value) -> str:
    return f'"{value}"' if any(c.isspace() or c in '()"' for c in value) else value


def _clause(units, joint, sign) -> str:
    """One requirement (``sign`` "+": one of ``units``) or exclusion ("-": all of them)
    in the syntax; a lone phrase or field's word is required without a sign."""
    written = [("" if u.field == "question" else u.field + ":")
               + (f'"{" ".join(u.words)}"' if u.phrase or len(u.words) > 1 else u.words[0])
               for u in units]
    if len(written) > 1:
        return f"{sign}({joint.join(written)})"
    bare = sign == "+" and (units[0].phrase or units[0].field != "question")
    return written[0] if bare else sign + written[0]


def _date_clause(low, high) -> str:
    """A ``date:`` filter of the range ``[low, high)`` (seconds of whole days)."""
    day = lambda seconds: datetime.datetime.fromtimestamp(  # noqa: E731
        seconds, datetime.timezone.utc).date().isoformat()
    if low is not None and high is not None:
        return f"date:{day(low)}..{day(high - 86400)}"
    if high is None:
        return f"date:>={day(low)}"
    # (the day after 9999-12-31 has no date to write)
    return f"date:<={day(high - 86400)}" if high == END_OF_DATES else f"date:<{day(high)}"


def _parser():
    """A whoosh query parser for the syntax (whoosh is imported on the first query with
    syntax: plain text never needs it)."""
    with warnings.catch_warnings():  # whoosh 2.7 has invalid escape sequences
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        from whoosh.analysis import RegexTokenizer
        from whoosh.fields import ID, TEXT, Schema
        from whoosh.qparser import (OperatorsPlugin, OrGroup, PlusMinusPlugin, QueryParser,
                                    WildcardPlugin, syntax)
        from whoosh.query.compound import CompoundQuery

    class Either(CompoundQuery):
        """``a OR b`` as typed: told apart from words side by side (a whoosh Or, which
        normalising would merge into the Or of the words around it)."""
        JOINT = " OR "
        explicit = True

    class ExplicitOr(syntax.OrGroup):
        qclass = Either

    text = TEXT(analyzer=RegexTokenizer(r"\S+"))
    schema = Schema(text=text, category=ID, **dict.fromkeys(FIELD_PREFIXES, text))
    parser = QueryParser("text", schema, group=OrGroup)
    parser.remove_plugin_class(WildcardPlugin)
    parser.replace_plugin(OperatorsPlugin(
        ops=[(OperatorsPlugin.OpTagger(r"(?<=\s)OR(?=\s)", ExplicitOr, memo="or"), 0)],
        Or=None))
    # + and - are operators only at the start of a word ("C++", "e-mail" stay words).
    parser.add_plugin(PlusMinusPlugin(plusexpr=r"(?<![^\s(])\+", minusexpr=r"(?<![^\s(])-"))
    return parser


_LOCAL = threading.local()  # one parser per thread: whoosh's keeps state while it parses


class _Walk:
    """Collects the words and filters of a whoosh query tree."""

    def __init__(self):
        from whoosh import query

        self.wq = query
        self.words, self.categories, self.not_categories = [], [], []
        self.negated = 0  # inside a NOT
        self.must, self.must_not = [], []
        self.ranges = []  # [a TO b]: no filter of this syntax (the notices say so)
        self.boosts = []  # (word, boost) of the words that score
        self.ignored = []  # the boosted clauses whose boost cannot apply, as typed
        self.tag_words = []  # of tag: filters: the words searched when there are no others

    def unit(self, node):
        """The Unit of a leaf, or None (not a word: a range, the category, ...)."""
        field = getattr(node, "fieldname", "text")
        if isinstance(node, self.wq.Phrase):
            words = tuple(w for w in node.words if w)
            return Unit("question" if field == "text" else field, words, len(words) > 1) \
                if words else None
        if isinstance(node, self.wq.TermRange):
            self.ranges.append(f"{'' if field == 'text' else field + ':'}"
                               f"[{node.start or ''} TO {node.end or ''}]")
        text = getattr(node, "text", None)
        if not isinstance(text, str) or not text:
            return None
        if field == "category":  # (the quote of category:"Doha Shopping left unclosed: no
            # part of the name)
            (self.not_categories if self.negated else self.categories).append(
                text.strip('"') or text)
            self.ignore(node.boost, f"category:{text}")
            return None
        return Unit("question" if field == "text" else field, (text,))

    def leaves(self, node, boost=1.0):
        """``(unit, boost)`` of the units under ``node`` (for an OR inside a requirement, or
        an AND inside a NOT), ``boost`` times the boosts on the way."""
        boost *= getattr(node, "boost", 1.0)
        if node.is_leaf():
            u = self.unit(node)
            return [(u, boost)] if u is not None else []
        return [pair for child in node.children() for pair in self.leaves(child, boost)]

    def score(self, pairs):
        """The words of ``(unit, boost)`` pairs rank the results (with their boosts)."""
        for unit, boost in pairs:
            if unit.field == "tag":  # an exact tag filters; its words score only alone
                self.ignore(boost, _written(unit))
                self.tag_words.extend(unit.words)
                continue
            self.words.extend(unit.words)
            if boost > 0 and boost != 1.0:
                self.boosts.extend((w, boost) for w in unit.words)
            elif boost != 1.0:
                self.ignore(boost, _written(unit))

    def ignore(self, boost, clause):
        """A boost that cannot apply (on a left-out word, a filter; a boost of 0)."""
        if boost != 1.0:
            self.ignored.append(f"{clause}^{boost:g}")

    def exclude(self, node):
        """``NOT node``: NOT (a OR b) leaves out a and b, NOT (a AND b) what has both."""
        if isinstance(node, self.wq.Not):
            return  # NOT NOT x: not a filter
        self.negated += 1
        try:
            self._exclude(node)
        finally:
            self.negated -= 1

    def _exclude(self, node):
        if node.is_leaf():
            unit = self.unit(node)
            if unit is not None:
                self.must_not.append((unit,))
                self.ignore(node.boost, "-" + _written(unit))
        elif isinstance(node, self.wq.And):
            pairs = self.leaves(node)
            for unit, boost in pairs:
                self.ignore(boost, "-" + _written(unit))
            if pairs:
                self.must_not.append(tuple(u for u, _ in pairs))
        else:
            for child in node.children():
                self.exclude(child)

    def walk(self, node, mode="should", boost=1.0):
        if isinstance(node, self.wq.Not):
            if mode != "not":
                self.exclude(node.query)
            return
        if isinstance(node, self.wq.AndNot):
            self.walk(node.a, mode, boost)
            self.walk(self.wq.Not(node.b), mode)
            return
        if isinstance(node, (self.wq.AndMaybe, self.wq.Require)):
            self.walk(node.a, "must" if mode == "should" else mode, boost)
            self.walk(node.b, mode, boost)
            return
        if node.is_leaf():
            unit = self.unit(node)
            if unit is None:
                return
            if mode != "not":
                self.score([(unit, boost * node.boost)])
            if mode == "must" or unit.phrase or unit.field != "question":
                self.must.append((unit,))
            return
        if (isinstance(node, self.wq.Or) or getattr(node, "explicit", False)) \
                and mode == "must":
            pairs = self.leaves(node, boost)
            self.score(pairs)
            if pairs:
                self.must.append(tuple(u for u, _ in pairs))
            return
        if getattr(node, "explicit", False) and mode == "should":
            pairs = self.leaves(node, boost)
            if any(u.phrase or u.field != "question" for u, _ in pairs):
                # title:a OR title:b: one requirement that either side meets (each side
                # alone would be a requirement of its own)
                self.score(pairs)
                self.must.append(tuple(u for u, _ in pairs))
                return
        child_mode = "must" if isinstance(node, self.wq.And) and mode == "should" else mode
        boost *= getattr(node, "boost", 1.0)
        for child in node.children():
            self.walk(child, child_mode, boost)


def parse_query(typed: str) -> ParsedQuery:
    """Words and filters of a typed query (see the module docstring for the syntax).

    Examples
    --------
    >>> q = parse_query('category:"Doha Shopping" cheap sofa -category:Visas')
    >>> q.text, q.category, q.not_categories
    ('cheap sofa', 'Doha Shopping', ('Visas',))
    >>> q = parse_query('router "reset button" -wifi')
    >>> q.text
    'router reset button'
    >>> q.must
    ((Unit(field='question', words=('reset', 'button'), phrase=True),),)
    >>> q.must_not
    ((Unit(field='question', words=('wifi',), phrase=False),),)
    >>> parse_query("title:x NOT NOT NOT").text   # unreadable: its plain words
    'title x NOT NOT NOT'
    >>> q = parse_query("I can NOT sleep at night")
    >>> q.text, q.must_not
    ('I can NOT sleep at night', ())
    >>> q.notices[0].partition(" (")[0]
    'NOT was searched as a word'
    """
    notices = []
    if ":" in typed:
        typed, notices = _without_empty_fields(typed)
    typed, dates = _dates(typed)
    # (each pattern only where its character occurs: a whole question is a long query)
    if "+" in typed or "-" in typed:
        typed = _LONE_SIGN.sub(" ", typed)
    if ":" in typed:
        typed = _FIELD_NAME.sub(lambda m: m.group(0).lower(), typed)
    if not (dates or _has_syntax(typed)):
        parsed = ParsedQuery(" ".join(typed.split()))
        # (OR read as a word asks what OR asks, any of the words: nothing to say of it)
        operators = [w for w in dict.fromkeys(_OPERATOR_WORD.findall(typed)) if w != "OR"]
        if operators:
            notices.append(_operators_notice(typed, operators))
    else:
        parsed = _common_syntax(typed)
        if parsed is None:
            parsed = _parsed(typed)
    if dates or notices:
        parsed = dataclasses.replace(parsed, dates=dates,
                                     notices=(*notices, *parsed.notices))
    return parsed


def without_empty_units(parsed: ParsedQuery, analyze) -> ParsedQuery:
    """``parsed`` without the requirements and exclusions whose words ``analyze`` (the
    index's analyzer) turns into no term: stopwords and words too short to index, which
    the index does not hold ("-5" or "-the" would otherwise leave out every question, and
    "+the" requires nothing), with a notice each.

    Examples
    --------
    >>> from cqa_search.analysis import Analyzer
    >>> q = without_empty_units(parse_query("beer -5 days +the -(a AND fresh)"),
    ...                         Analyzer().analyze)
    >>> q.filters(), q.notices
    (('-fresh',), ('+the, -5 and -a ask nothing: their words are not in the index \
(stopwords and words too short to index are not)',))
    """
    def empty(unit):
        return unit.field != "tag" and not any(analyze(w) for w in unit.words)

    dropped = [_clause((u,), " OR ", "+") for units in parsed.must for u in units if empty(u)]
    dropped += [_clause((u,), " AND ", "-") for units in parsed.must_not for u in units
                if empty(u)]
    lost = [(w, b) for w, b in parsed.boosts if not analyze(w)]
    if lost:  # the^2: nothing to boost
        parsed = dataclasses.replace(parsed, boosts=tuple(
            p for p in parsed.boosts if p not in lost), notices=(*parsed.notices, _boosts_notice(
                [f"{w}^{b:g}" for w, b in lost], "its word is not in the index: stopwords and "
                "words too short to index are not" if len(lost) == 1 else "their words are "
                "not in the index: stopwords and words too short to index are not")))
    if not dropped:
        return parsed
    # (a OR the: the second side matches every question, so the requirement asks nothing)
    must = tuple(units for units in parsed.must if not any(map(empty, units)))
    must_not = tuple(kept for units in parsed.must_not
                     for kept in [tuple(u for u in units if not empty(u))] if kept)
    listed = " and ".join([", ".join(dropped[:-1]), dropped[-1]] if len(dropped) > 1
                          else dropped)
    notice = (f"{listed} {'asks' if len(dropped) == 1 else 'ask'} nothing: "
              f"{'its' if len(dropped) == 1 else 'their'} words are not in the index "
              "(stopwords and words too short to index are not)")
    return dataclasses.replace(parsed, must=must, must_not=must_not,
                               notices=(*parsed.notices, notice))


def _has_syntax(typed) -> bool:
    """Whether ``typed`` uses the syntax beyond operator words (see ``_SYNTAX``)."""
    if not any(c in typed for c in _SYNTAX_CHARACTERS):  # (a short query: no regex)
        return False
    return bool(_SYNTAX.search(typed)) or ('"' in typed and any(
        len(m.group(1).split()) > 1 for m in _PHRASE.finditer(typed)))


def _operators_notice(typed, operators) -> str:
    """The notice of operator words searched as words in plain text, with what would
    apply them."""
    hints = []
    if "NOT" in operators:
        after = _AFTER_NOT.search(typed)
        hints.append(f"-{after[1]} leaves out the questions with {after[1]!r}" if after else
                     "-word leaves a word out")
    if "AND" in operators:
        around = _AROUND_AND.search(typed)
        hints.append(f"+{around[1]} +{around[2]} requires both" if around else
                     "+word requires a word")
    many = len(operators) > 1
    return (f"{' and '.join(operators)} {'were' if many else 'was'} searched as "
            f"{'words' if many else 'a word'} (operators only next to other syntax: +word, "
            '-word, "a phrase", field:value, brackets)' + "".join(f"; {h}" for h in hints))


def _without_empty_fields(typed) -> tuple:
    """``typed`` without its field names that have no value (``tag:`` alone), and the
    notices that say so."""
    found = []

    def drop(m):
        found.append(m.group(1))
        return " "

    typed = _EMPTY_FIELD.sub(drop, typed)
    return typed, [f"{name!r} has no value right after its colon: left out (write e.g. "
                   f"{_EXAMPLE[name[:-1].lower()]})" for name in dict.fromkeys(found)]


# what an empty field's notice suggests
_EXAMPLE = {"title": "title:visa", "body": "body:visa", "answers": "answers:passport",
            "tags": "tags:family", "tag": "tag:machine-learning", "category": "category:Travel",
            "date": "date:>=2014-01-01"}


# date:EXPR (a sign before it: refused), read before the rest of the syntax
_DATE_CLAUSE = re.compile(r"(?:^|(?<=[\s(]))([-+]?)(?i:date):(\S+)")
_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_DATE_HELP = ("write date:2014, date:2014-03, date:2014-03-31, date:>=2014-01-01 (also >, <, "
              "<=), or date:2014-01..2014-06")


def _period(text, clause):
    """``[start, end)`` in seconds of a year, month or day ``YYYY[-MM[-DD]]``."""
    m = _DATE.fullmatch(text)
    if m is None:
        raise QueryError(f"bad date filter {clause!r}: {_DATE_HELP}")
    year, month, day = int(m[1]), int(m[2] or 1), int(m[3] or 1)
    try:
        start = datetime.datetime(year, month, day, tzinfo=datetime.timezone.utc)
    except ValueError as exc:
        raise QueryError(f"bad date filter {clause!r}: {exc}") from None
    try:
        if m[3]:
            end = int((start + datetime.timedelta(days=1)).timestamp())
        elif m[2]:
            end = int(start.replace(year=year + month // 12, month=month % 12 + 1).timestamp())
        else:
            end = int(start.replace(year=year + 1).timestamp())
    except (OverflowError, ValueError):  # the period ends with 9999-12-31, the last day
        end = END_OF_DATES
    return int(start.timestamp()), end


def _date_range(expr, clause) -> tuple:
    """``(low, high)`` seconds of the filter ``date:EXPR`` (see the module docstring)."""
    if ".." in expr:
        first, _, last = expr.partition("..")
        low = _period(first, clause)[0] if first else None
        high = _period(last, clause)[1] if last else None
        if low is None and high is None:
            raise QueryError(f"bad date filter {clause!r}: {_DATE_HELP}")
    else:
        op = next((o for o in (">=", "<=", ">", "<", "=") if expr.startswith(o)), "")
        start, end = _period(expr[len(op):], clause)
        low, high = {"": (start, end), "=": (start, end), ">=": (start, None),
                     ">": (end, None), "<": (None, start), "<=": (None, end)}[op]
    if (low is not None and low >= END_OF_DATES) or (high is not None and high <= FIRST_DATE):
        raise QueryError(f"bad date filter {clause!r}: no question is dated "
                         f"{'after 9999-12-31' if high is None else 'before 0001-01-01'} (dates "
                         "run from 0001-01-01 to 9999-12-31)")
    return low, high


def _dates(typed) -> tuple:
    """``typed`` without its ``date:`` clauses, and their ranges."""
    ranges = []

    def take(m):
        clause = m.group(0).strip()
        if m.group(1) == "-":
            raise QueryError(f"a date filter cannot be left out ({clause!r}): give the dates "
                             "to keep, e.g. date:<2014-01-01")
        ranges.append(_date_range(m.group(2), clause))
        return " "

    if "ate:" not in typed.lower():
        return typed, ()
    return _DATE_CLAUSE.sub(take, typed), tuple(ranges)


@dataclass(frozen=True)
class Filters:
    """Filters of a search given beside its text (parameters, not query syntax), checked
    once: :meth:`apply` adds them to those of the text.

    Parameters
    ----------
    category : str, optional
        Only this category (``category:NAME``; a ``category:`` in the text wins).
    tags : sequence of str, optional
        Only questions with every one of these tags (``tag:NAME`` each: exact, any case).
    not_tags : sequence of str, optional
        No question with any of these tags (``-tag:NAME`` each).
    after, before : str or datetime.date, optional
        Only questions created on or after the day, month or year ``after``
        (``YYYY[-MM[-DD]]``: ``date:>=AFTER``), before ``before`` (``date:<BEFORE``).

    Raises
    ------
    QueryError
        A value of the wrong type, an empty tag, a bad date.

    Examples
    --------
    >>> Filters(tags=["visa"], after="2014").apply(parse_query("renew")).filters()
    ('tag:visa', 'date:>=2014-01-01')
    >>> Filters(before="2014-13")
    Traceback (most recent call last):
    ...
    cqa_search.exceptions.QueryError: bad date filter 'date:<2014-13': month must be in 1..12
    """

    category: str | None = None
    tags: tuple = ()
    not_tags: tuple = ()
    after: str | None = None
    before: str | None = None

    def __post_init__(self):
        if self.category is None and self.after is None and self.before is None \
                and _no_tags(self.tags) and _no_tags(self.not_tags):
            for name in ("tags", "not_tags", "_dates"):  # most searches: nothing to check
                object.__setattr__(self, name, ())
            return
        for name in ("tags", "not_tags"):  # (the category: checked by the index's names)
            object.__setattr__(self, name, _tag_names(name, getattr(self, name)))
        dates = []
        for name, op in (("after", ">="), ("before", "<")):
            value = getattr(self, name)
            if isinstance(value, datetime.date):
                value = value.isoformat()[:10]
            elif value is not None and not isinstance(value, str):
                raise QueryError(f"{name} must be a date (YYYY, YYYY-MM or YYYY-MM-DD); got "
                                 f"{type(value).__name__}")
            object.__setattr__(self, name, value or None)
            if value:
                clause = f"date:{op}{value}"
                if any(c.isspace() for c in clause):
                    raise QueryError(f"bad date filter {clause!r}: {_DATE_HELP}")
                dates.append(_date_range(clause[len("date:"):], clause))
        object.__setattr__(self, "_dates", tuple(dates))

    def __bool__(self) -> bool:
        return self.category is not None or bool(self.tags or self.not_tags or self._dates)

    def apply(self, parsed: ParsedQuery) -> ParsedQuery:
        """``parsed`` with these filters added to its own (its category kept if it has
        one)."""
        if not self:
            return parsed
        return dataclasses.replace(
            parsed, category=self.category if parsed.category is None else parsed.category,
            must=parsed.must + tuple((Unit("tag", (t,)),) for t in self.tags),
            must_not=parsed.must_not + tuple((Unit("tag", (t,)),) for t in self.not_tags),
            dates=parsed.dates + self._dates)


def unknown_tags_noted(parsed: ParsedQuery, tags) -> ParsedQuery:
    """``parsed`` with a notice for each required tag (``tag:``) that is none of ``tags``
    (the index's, compared without case), naming the tags it may mean: a search that finds
    nothing says why.

    Examples
    --------
    >>> unknown_tags_noted(parse_query("tag:gate hadamard"), ["quantum-gate"]).notices
    ('tag:gate: no question has this tag; did you mean tag:quantum-gate?',)
    """
    from ._utils import close_names

    known = {t.casefold() for t in tags}
    notices = []
    for units in parsed.must:
        for unit in units:
            name = " ".join(unit.words)
            if unit.field != "tag" or name.casefold() in known:
                continue
            close = close_names(name, tags)
            notices.append(f"tag:{_quoted(name)}: no question has this tag" + (
                f"; did you mean {' or '.join(f'tag:{_quoted(c)}' for c in close)}?"
                if close else ""))
    if not notices:
        return parsed
    return dataclasses.replace(parsed, notices=(*parsed.notices, *notices))


def _no_tags(tags) -> bool:
    """``tags`` says no tag (None, or an empty tuple or list): nothing to check."""
    return tags is None or (type(tags) in (tuple, list) and not tags)


def _tag_names(name, tags) -> tuple:
    """``tags`` (a sequence of tag names, or None) as a tuple of names, checked."""
    if tags is None:
        return ()
    try:
        given = tuple(tags) if not isinstance(tags, str) else None
    except TypeError:
        given = None
    if given is None or not all(isinstance(t, str) for t in given):
        raise QueryError(f"{name} must be a sequence of tag names (strings); got {tags!r}")
    names = tuple(t.strip() for t in given)
    if not all(names):
        raise QueryError(f"{name} has an empty tag name: {list(given)!r}")
    return names


def _parsed(typed: str) -> ParsedQuery:
    """:func:`parse_query` by whoosh's parser."""
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = _parser()
    walk = _Walk()
    try:
        walk.walk(parser.parse(typed))
    except Exception:  # noqa: BLE001 - whoosh fails on odd input in many ways
        return ParsedQuery(" ".join(_WORD.findall(typed)), notices=(
            "the query syntax could not be read (an operator without a word on each side?): "
            "its words were searched, without filters",))
    wanted = list(dict.fromkeys(walk.categories))
    if len({c.casefold() for c in wanted}) > 1:
        raise QueryError(f"a query keeps one category; got {' and '.join(map(repr, wanted))}")
    notices = [f"{' '.join(dict.fromkeys(walk.ranges))}: a range is no filter here (dates: "
               "date:2014-01..2014-06), left out"] if walk.ranges else []
    if walk.ignored:
        notices.append(_boosts_notice(walk.ignored, "a boost above 0 weighs a word that "
                                      "ranks the results; a left-out word, a tag or a "
                                      "category ranks nothing"))
    # (tag:dogs alone, the tag facet's first click: the questions with the tag, ranked by
    # its words; beside other words it only filters)
    return ParsedQuery(" ".join(walk.words or walk.tag_words), wanted[0] if wanted else None,
                       tuple(walk.must),
                       tuple(walk.must_not), tuple(dict.fromkeys(walk.not_categories)),
                       notices=tuple(notices), boosts=tuple(walk.boosts))


def _written(unit) -> str:
    """A unit as typed (a word, or a phrase in quotes; ``field:`` before it)."""
    return ("" if unit.field == "question" else unit.field + ":") + \
        (f'"{" ".join(unit.words)}"' if unit.phrase else " ".join(unit.words))


def _boosts_notice(clauses, why) -> str:
    listed = list(dict.fromkeys(clauses))
    listed = " and ".join([", ".join(listed[:-1]), listed[-1]] if len(listed) > 1 else listed)
    return f"{listed}: {'the boost was' if len(clauses) == 1 else 'the boosts were'} " \
           f"ignored ({why})"


def _common_syntax(typed: str) -> ParsedQuery | None:
    """:func:`parse_query` of text in the common syntax (see ``_PHRASE``); None for any
    other text. Like whoosh's tree: the required clauses' words come first, then the
    others' in order; a phrase is required wherever it is; each group holds a clause once."""
    if _NOT_COMMON.search(typed):
        return None
    groups = {"+": [], "": [], "-": []}  # required, optional, excluded
    at, end, sign = 0, len(typed), ""
    while at < end:
        space = _SPACE.match(typed, at)
        if space:
            if sign:  # a lone + or -
                return None
            at = space.end()
            continue
        char = typed[at]
        if char in "+-" and (at == 0 or typed[at - 1].isspace()):
            if sign:
                return None
            sign, at = char, at + 1
            continue
        phrase = _PHRASE.match(typed, at) if char == '"' else None
        if phrase is not None:
            if typed.startswith("~", phrase.end()):  # whoosh's phrase slop: "a b"~2
                return None
            words = tuple(phrase.group(1).split())
            if len(words) < 2 and sign:
                return None
            unit = Unit("question", words, True) if len(words) > 1 else \
                Unit("question", words) if words else None
            at = phrase.end()
        else:  # a word: up to a space or a quote that opens a phrase
            start = at
            while at < end and not typed[at].isspace() and not (
                    typed[at] == '"' and at > start and _PHRASE.match(typed, at)):
                at += 1
            unit = Unit("question", (typed[start:at],))
        if unit is not None:
            groups[sign].append(unit)
        sign = ""
    if sign:
        return None
    required, optional, excluded = (list(dict.fromkeys(groups[key])) for key in ("+", "", "-"))
    if not (required or optional):
        return None
    if len(required) == 1 and not optional:  # one clause: required or not, the same hits
        required, optional = [], required
    words = [w for u in required + optional for w in u.words]
    must = [(u,) for u in required] + [(u,) for u in optional if u.phrase]
    return ParsedQuery(" ".join(words), None, tuple(must), tuple((u,) for u in excluded))
