"""Text analysis: tokenize, lowercase, drop stopwords, stem.

One :class:`Analyzer` turns archive text and query text into index terms. Its
configuration is plain JSON and is saved in the index manifest, so a query is always
analysed exactly like the archive it searches.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import unicodedata
from collections.abc import Iterable

import Stemmer

from ._utils import validate_params
from .exceptions import ParameterError

__all__ = ["Analyzer", "STEMMERS", "STOPWORD_LISTS", "english_stop_words",
           "LUCENE_STOP_WORDS"]

#: ``stem`` value -> PyStemmer algorithm (Snowball "english" is Porter2).
STEMMERS = {"porter": "porter", "snowball": "english"}

# Entries of an analyzer's token cache before it is emptied: bounds its memory in a
# long-running server, while analysing an archive still stems each word about once.
_CACHE_SIZE = 1 << 18

# Runs of two or more word characters: the same tokens as scikit-learn's r"(?u)\b\w\w+\b"
# (a greedy run always spans a whole word), found about 1.5x faster.
_DEFAULT_PATTERN = r"(?u)\w{2,}"
# Token patterns made of word characters only ((?u)\w{2,}, \w+, ...): on ASCII text the
# same pattern compiled with re.ASCII finds the same words, 20-30 % faster.
_WORD_PATTERN = re.compile(r"(?:\(\?u\))?(?:\\w(?:\{\d*,?\d*\}|[+*?])?)+")


# Patterns whose tokens are the maximal runs of at least n word characters: (?u)\w{2,},
# \w\w+, \b\w\w+\b, \w+, ... (n: the \w before the quantifier plus its minimum).
_RUN_PATTERN = re.compile(r"(?:\(\?u\))?(?:\\b)?((?:\\w)*)\\w(?:(\+)|\{(\d+),\})(?:\\b)?")
# Between the texts of Analyzer.word_runs (a character no text it is given holds).
_SEPARATOR = "\x01"
# ASCII bytes -> themselves if a word character (\w), else a space; bytes >= 0x80 (the
# UTF-8 of a non-ASCII token already found) and the separator stay.
_WORD_BYTES = bytes(c if chr(c).isalnum() or c == 0x5F or c >= 0x80 or c == 1 else 0x20
                    for c in range(256))
_LOWER_WORD_BYTES = _WORD_BYTES.translate(bytes.maketrans(
    bytes(range(0x41, 0x5B)), bytes(range(0x61, 0x7B))))


def _min_run(pattern: str):
    """``n`` when the tokens of ``pattern`` are the maximal runs of at least ``n`` word
    characters, else None."""
    match = _RUN_PATTERN.fullmatch(pattern)
    if match is None:
        return None
    return len(match.group(1)) // 2 + (1 if match.group(2) else int(match.group(3)))


def _ascii_twin(pattern: str):
    """``pattern`` compiled for ASCII text when that finds the same words, else None."""
    if _WORD_PATTERN.fullmatch(pattern):
        return re.compile(pattern.removeprefix("(?u)"), re.ASCII)
    return None


#: Lucene's English stop set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``, 33 words): the
#: short list of Lucene, Elasticsearch and Anserini, beside scikit-learn's 318 words.
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split())


@functools.lru_cache(maxsize=1)
def english_stop_words() -> frozenset:
    """scikit-learn's English stopword list (318 words).

    The list is read from scikit-learn's own module file without importing the
    scikit-learn package, whose import costs about 1.5 s and 95 MB that searching with
    the term index never needs; if the file has moved, scikit-learn is imported.
    """
    spec = importlib.util.find_spec("sklearn")
    path = None if spec is None or spec.origin is None else os.path.join(
        os.path.dirname(spec.origin), "feature_extraction", "_stop_words.py")
    if path is not None and os.path.isfile(path):
        module_spec = importlib.util.spec_from_file_location("_cqa_sklearn_stop_words", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        words = getattr(module, "ENGLISH_STOP_WORDS", None)
        if isinstance(words, frozenset):
            return words
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return ENGLISH_STOP_WORDS


#: Named stopword lists (``Analyzer(stopwords=NAME)``).
STOPWORD_LISTS = {"english": english_stop_words, "lucene": lambda: LUCENE_STOP_WORDS}


class Analyzer:
    """Configurable tokenizer + lowercaser + stopword filter + stemmer.

    Parameters
    ----------
    token_pattern : str, default r"(?u)\\w{2,}"
        Regular expression whose matches are the tokens (default: words of two or more
        word characters, as scikit-learn's default pattern).
    lowercase : bool, default True
        Lowercase (after Unicode NFKC normalisation) before anything else.
    stopwords : {"english", "lucene"}, list of str or None, default "english"
        Words dropped after lowercasing: scikit-learn's English list (318 words),
        Lucene's English stop set (33 words, :data:`LUCENE_STOP_WORDS`), a custom list,
        or none.
    stem : {"snowball", "porter"} or None, default "snowball"
        Stemmer applied to the remaining tokens (PyStemmer's Snowball English = Porter2,
        or the original Porter algorithm), or no stemming.

    Examples
    --------
    >>> Analyzer().analyze("How do I renew my visas in Doha?")
    ['renew', 'visa', 'doha']
    >>> Analyzer(stopwords=None, stem=None).analyze("How do I renew")
    ['how', 'do', 'renew']
    >>> Analyzer(stopwords="lucene", token_pattern=r"(?u)\\w+").analyze("How do I renew a visa")
    ['how', 'do', 'i', 'renew', 'visa']
    >>> Analyzer.from_config(Analyzer(stem="porter").to_config()).stem
    'porter'
    """

    _parameter_constraints = {"stem": (None, *STEMMERS), "lowercase": (False, True)}

    def __init__(self, *, token_pattern=_DEFAULT_PATTERN, lowercase=True, stopwords="english",
                 stem="snowball"):
        self.token_pattern = token_pattern
        self.lowercase = lowercase
        self.stopwords = stopwords
        self.stem = stem
        self._validate()
        self._regex = re.compile(token_pattern)
        self._ascii_regex = _ascii_twin(token_pattern) or self._regex
        self._min_run = _min_run(token_pattern)
        if isinstance(stopwords, str):
            self._stopwords = STOPWORD_LISTS[stopwords]()
        else:
            self._stopwords = frozenset(stopwords or ())
        self._stemmer = Stemmer.Stemmer(STEMMERS[stem]) if stem else None
        # surface token -> term ("" for a stopword), so that each distinct word is stemmed
        # about once; emptied when it reaches _CACHE_SIZE entries.
        self._cache = {}

    def _validate(self):
        validate_params(self)
        if not isinstance(self.token_pattern, str):
            raise ParameterError(f"token_pattern must be a string; got {self.token_pattern!r}")
        try:
            groups = re.compile(self.token_pattern).groups
        except re.error as exc:
            raise ParameterError(f"token_pattern is not a valid regular expression: "
                                 f"{exc}") from None
        if groups:  # a token is the whole match (its span is what a snippet marks)
            raise ParameterError(f"token_pattern must have no capturing group; make it "
                                 f"non-capturing, (?:...); got {self.token_pattern!r}")
        sw = self.stopwords
        if not (sw is None or (isinstance(sw, str) and sw in STOPWORD_LISTS) or
                (not isinstance(sw, str) and all(isinstance(w, str) for w in sw))):
            raise ParameterError(f"stopwords must be 'english', 'lucene', a list of words or None; "
                                 f"got {sw!r}")

    def get_params(self) -> dict:
        """Constructor parameters (the JSON configuration)."""
        stopwords = self.stopwords
        if stopwords is not None and not isinstance(stopwords, str):
            stopwords = sorted(stopwords)
        return {"token_pattern": self.token_pattern, "lowercase": self.lowercase,
                "stopwords": stopwords, "stem": self.stem}

    def to_config(self) -> dict:
        """JSON-serialisable configuration; :meth:`from_config` rebuilds the same analyzer."""
        return self.get_params()

    @classmethod
    def from_config(cls, config: dict) -> "Analyzer":
        """Analyzer from :meth:`to_config` output."""
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"Analyzer({args})"

    def __eq__(self, other):
        return isinstance(other, Analyzer) and self.get_params() == other.get_params()

    def tokenize(self, text: str) -> list:
        """Surface tokens (normalised, lowercased), before stopwords and stemming."""
        text = unicodedata.normalize("NFKC", text)
        if self.lowercase:
            text = text.lower()
        return (self._ascii_regex if text.isascii() else self._regex).findall(text)

    @property
    def shortest_run(self):
        """``n`` when the tokens are the runs of at least ``n`` word characters (the
        default pattern: 2), else None: then :meth:`word_runs` gives None."""
        return self._min_run

    def word_runs(self, texts):
        """The tokens of many texts at once, for indexing, or None.

        The result is one ``bytes`` object: the UTF-8 tokens of each text (those of
        :meth:`tokenize`, in order) separated by spaces, with the separator ``b"\\x01"``
        between consecutive texts, and maybe runs shorter than :attr:`shortest_run`
        characters among the tokens, which are not tokens. ASCII text is not searched
        with the regular expression: its bytes are mapped to themselves (word
        characters, lowercased) or to spaces, about 3x faster; other text is tokenized
        text by text. None when the tokens are not word runs (another token pattern).
        """
        if self._min_run is None:
            return None
        texts = list(texts)
        joined = f" {_SEPARATOR} ".join(texts)
        if joined.count(_SEPARATOR) != max(len(texts) - 1, 0):  # (not a word character)
            texts = [t.replace(_SEPARATOR, " ") for t in texts]
            joined = f" {_SEPARATOR} ".join(texts)
        if not joined.isascii():  # those texts' tokens by the regular expression
            joined = f" {_SEPARATOR} ".join(t if t.isascii() else " ".join(self.tokenize(t))
                                           for t in texts)
        return joined.encode().translate(_LOWER_WORD_BYTES if self.lowercase else _WORD_BYTES)

    def share_cache(self, other: "Analyzer") -> None:
        """Use the word -> term cache of ``other`` when it analyses text the same way
        (equal parameters), e.g. the analyzer of an index's previous generation: a server
        following rebuilds then does not stem every word it shows again."""
        if other is not self and other == self:
            self._cache = other._cache

    def _terms(self, tokens: Iterable[str], keep_empty=False) -> list:
        cache = self._cache
        missing = [t for t in dict.fromkeys(tokens) if t not in cache]  # deterministic order
        if missing:
            if len(cache) + len(missing) > _CACHE_SIZE:
                cache.clear()
            keep = [t for t in missing if t not in self._stopwords]
            stems = self._stemmer.stemWords(keep) if self._stemmer else keep
            cache.update(dict.fromkeys(missing, ""))
            cache.update(zip(keep, stems))
        try:
            terms = list(map(cache.__getitem__, tokens))
        except KeyError:  # emptied meanwhile (another thread, or a text of many words)
            terms = [self.term(t) for t in tokens]
        return terms if keep_empty else [t for t in terms if t]

    def analyze(self, text: str) -> list:
        """Index terms of ``text``, in order (repeats kept)."""
        return self._terms(self.tokenize(text))

    def term(self, token: str) -> str:
        """The term of one surface token from :meth:`tokenize`, "" for a stopword."""
        term = self._cache.get(token)
        if term is None:
            if token in self._stopwords:
                term = ""
            else:
                term = self._stemmer.stemWord(token) if self._stemmer else token
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[token] = term
        return term

    def pairs(self, text: str) -> list:
        """(surface token, term) for every token of ``text`` that is not a stopword."""
        tokens = self.tokenize(text)
        return [(tok, term) for tok, term in zip(tokens, self._terms(tokens, keep_empty=True))
                if term]

    def stem_word(self, token: str) -> str:
        """The term of one surface token (stemmed; no stopword check, no lowercasing)."""
        if self._stemmer is None:
            return token
        return self._stemmer.stemWord(token)

    def is_stopword(self, token: str) -> bool:
        """True when the (lowercased) token is dropped as a stopword."""
        return token in self._stopwords

    def spans(self, text: str) -> list:
        """``(start, end, term)`` of every word of ``text`` in order: the word's characters
        ``text[start:end]`` and its index term ("" for a stopword), what highlighting needs.

        Words are found in the text as it is, so that offsets point into it; a word that is
        not ASCII is analysed on its own (normalised, lowercased and split again). For
        NFKC-normalised text the terms are those of :meth:`analyze`; a word that
        normalisation would join with the next character (a decomposed accent) may differ.

        Examples
        --------
        >>> Analyzer().spans("The RENEWED visas")
        [(0, 3, ''), (4, 11, 'renew'), (12, 17, 'visa')]
        """
        return list(zip(*self.span_lists(text)))

    def span_lists(self, text: str) -> tuple:
        """:meth:`spans` as three lists: the words' starts, their ends and their terms
        (what highlighting reads, without a tuple per word)."""
        lower = self.lowercase
        scan = text.lower() if lower else text
        # Unless lowercasing moved offsets (a few letters change length): then word by word.
        lowered = lower and len(scan) == len(text)
        if not lowered:
            scan = text
        if (lowered or not lower) and scan.isascii():  # every word as it is: in bulk
            matches = list(self._ascii_regex.finditer(scan))
            terms = list(map(self._cache.get, map(re.Match.group, matches)))
            if None in terms:  # words not seen yet
                terms = [self.term(m.group()) if t is None else t
                         for t, m in zip(terms, matches)]
            return (list(map(re.Match.start, matches)), list(map(re.Match.end, matches)),
                    terms)
        spans = self._spans_by_word(scan, lower and not lowered)
        return tuple(map(list, zip(*spans))) if spans else ([], [], [])

    def _spans_by_word(self, scan, lower) -> list:
        """:meth:`spans` of ``scan``, each word analysed on its own (``lower``: lowercase
        each)."""
        term, out = self.term, []
        for match in self._regex.finditer(scan):
            start, end = match.span()
            word = match.group()
            if word.isascii():
                out.append((start, end, term(word.lower() if lower else word)))
            else:
                out.extend((start, end, term(w)) for w in self.tokenize(word))
        return out
