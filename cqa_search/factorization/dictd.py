"""dictd dictionaries (the format of Debian's FreeDict packages), read offline.

A dictd dictionary is a ``NAME.index`` file (headword, base-64 offset and length of its
entry, tab-separated) and a ``NAME.dict`` or gzip-compressed ``NAME.dict.dz`` file of
entries. :class:`DictdDictionary` reads both; :func:`parse_dictd_entry` extracts the
translations of one entry. Used by the dictionary views of SMT + MF
(:mod:`cqa_search.factorization.views`).
"""
from __future__ import annotations

import gzip
import os
import re

__all__ = ["DEFAULT_DICT_DIR", "DictdDictionary", "parse_dictd_entry"]

#: Where Debian's dict-freedict-* packages install their dictionaries.
DEFAULT_DICT_DIR = "/usr/share/dictd"

_B64 = {c: i for i, c in enumerate(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_HEADER = re.compile(r"^00-?database", re.IGNORECASE)
_SENSE_NUMBER = re.compile(r"^\d+\.\s*")
_ANNOTATIONS = re.compile(r"<[^>]*>|\[[^\]]*\]|\{[^}]*\}|\([^)]*\)")
_SEPARATORS = re.compile(r"[,;]")
_WORD = re.compile(r"\w")
_PRONUNCIATION = re.compile(r"^/[^/]*/$")
_B64_NUMBER = re.compile(r"^[A-Za-z0-9+/]+$")


def _b64_number(text: str) -> int:
    """A dictd offset/length: a base-64 *number* (most significant digit first)."""
    n = 0
    for c in text:
        n = n * 64 + _B64[c]
    return n


def parse_dictd_entry(text: str, headword: str | None = None) -> list:
    """The translations listed in one dictd entry, in order, without duplicates.

    FreeDict entries start with a headword line (``house /haus/``), then one line per
    sense (``1. acquérir``, ``Bank <fem>, Gruppe <fem>``); indented lines are examples,
    notes, synonyms and cross-references. Grammar labels and glosses in ``<>``, ``[]``,
    ``{}`` and ``()`` are dropped, and a sense line is split at commas and semicolons.

    Parameters
    ----------
    text : str
        The entry, as stored in the ``.dict`` file.
    headword : str, optional
        The entry's headword; the first line is dropped when it starts with it (without
        a headword, the first line is dropped when it holds a ``/pronunciation/``).

    Examples
    --------
    >>> parse_dictd_entry("get /get/\\n1. acquérir\\n2. arriver, parvenir\\n", "get")
    ['acquérir', 'arriver', 'parvenir']
    >>> parse_dictd_entry("bank /bæŋk/\\nBank <fem>, Gruppe <fem>\\n   Synonym: {x}\\n", "bank")
    ['Bank', 'Gruppe']
    """
    lines = text.splitlines()
    if lines:
        first = lines[0].strip().casefold()
        if (headword is not None and first.startswith(headword.strip().casefold())) or \
                (headword is None and "/" in first):
            lines = lines[1:]
    out = {}
    for line in lines:
        if not line.strip() or line[0].isspace():
            continue
        line = _ANNOTATIONS.sub(" ", _SENSE_NUMBER.sub("", line.strip()))
        for item in _SEPARATORS.split(line):
            item = " ".join(item.split())
            if item and _WORD.search(item) and not _PRONUNCIATION.match(item):
                out.setdefault(item, None)
    return list(out)


class DictdDictionary:
    """A dictionary in dictd format: ``NAME.index`` plus ``NAME.dict`` or ``NAME.dict.dz``.

    The index has one line per entry, ``headword TAB offset TAB length``, where offset
    and length (in bytes of the uncompressed ``.dict``) are numbers written in base 64
    (``A``-``Z``, ``a``-``z``, ``0``-``9``, ``+``, ``/``). A headword may have several
    entries (senses), kept in index order. Header entries (``00-database-info``,
    ``00databaseshort``, ...) are skipped. A ``.dict.dz`` is dictzip, which is
    gzip-compatible: it is decompressed once, when the first entry is read.

    Files are read lazily, on first use.

    Parameters
    ----------
    index_path : path
        The ``.index`` file.
    dict_path : path, optional
        The ``.dict`` or ``.dict.dz`` file (default: next to the index, same name).

    Raises
    ------
    FileNotFoundError
        A file is missing.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> body = "house /haus/\\nmaison\\n"
    >>> with open(os.path.join(d, "x.dict"), "w", encoding="utf-8") as f:
    ...     _ = f.write(body)
    >>> with open(os.path.join(d, "x.index"), "w", encoding="utf-8") as f:
    ...     _ = f.write("house\\tA\\tV\\n")
    >>> DictdDictionary(os.path.join(d, "x.index")).translations("house")
    ['maison']
    """

    def __init__(self, index_path, dict_path=None):
        self.index_path = os.fspath(index_path)
        if not os.path.isfile(self.index_path):
            raise FileNotFoundError(f"dictd index not found: {self.index_path}")
        if dict_path is None:
            base = self.index_path[:-len(".index")] if self.index_path.endswith(".index") \
                else self.index_path
            candidates = [base + ".dict.dz", base + ".dict"]
            found = [c for c in candidates if os.path.isfile(c)]
            if not found:
                raise FileNotFoundError(f"dictd dictionary not found next to {self.index_path} "
                                        f"(looked for {' and '.join(candidates)})")
            dict_path = found[0]
        self.dict_path = os.fspath(dict_path)
        if not os.path.isfile(self.dict_path):
            raise FileNotFoundError(f"dictd dictionary not found: {self.dict_path}")
        self._entries = None  # casefolded headword -> [(headword, offset, length)]
        self._data = None
        self._stems = {}

    @property
    def name(self) -> str:
        """The file name without ``.index`` (e.g. ``freedict-eng-fra``)."""
        base = os.path.basename(self.index_path)
        return base[:-len(".index")] if base.endswith(".index") else base

    def _index(self) -> dict:
        if self._entries is None:
            entries = {}
            with open(self.index_path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    parts = line.rstrip("\r\n").split("\t")
                    if len(parts) < 3:
                        if line.strip():
                            raise ValueError(f"{self.index_path}, line {lineno}: a dictd index "
                                             "line is 'headword TAB offset TAB length'")
                        continue
                    word = parts[0].strip()
                    if not word or _HEADER.match(word):
                        continue
                    if not _B64_NUMBER.match(parts[1]) or not _B64_NUMBER.match(parts[2]):
                        raise ValueError(f"{self.index_path}, line {lineno}: offset and length "
                                         "must be base-64 numbers")
                    # decoded on lookup: most entries of a large dictionary are never read
                    entries.setdefault(word.casefold(), []).append((word, parts[1], parts[2]))
            self._entries = entries
        return self._entries

    def _bytes(self) -> bytes:
        if self._data is None:
            with open(self.dict_path, "rb") as f:
                magic = f.read(2)
            opener = gzip.open if magic == b"\x1f\x8b" else open
            with opener(self.dict_path, "rb") as f:
                self._data = f.read()
        return self._data

    def headwords(self) -> list:
        """Every headword (casefolded), header entries excluded."""
        return list(self._index())

    def __contains__(self, word) -> bool:
        return isinstance(word, str) and word.casefold() in self._index()

    def __len__(self) -> int:
        return len(self._index())

    def entries(self, word) -> list:
        """The raw entries of ``word`` (case-insensitive; exact-case entries first)."""
        found = self._index().get(word.casefold(), [])
        found = sorted(found, key=lambda e: e[0] != word)  # stable: index order otherwise
        data = self._bytes()
        out = []
        for _, offset, length in found:
            off, n = _b64_number(offset), _b64_number(length)
            out.append(data[off:off + n].decode("utf-8", errors="replace"))
        return out

    def translations(self, word, n=None) -> list:
        """The translations of ``word`` in dictionary order (all entries), at most ``n``."""
        out = {}
        for entry in self.entries(word):
            for t in parse_dictd_entry(entry, word):
                out.setdefault(t, None)
        found = list(out)
        return found if n is None else found[:n]

    def resolve(self, token, stem=None) -> str | None:
        """The headword to look ``token`` up by: itself, or a headword with the same stem.

        Among single-word headwords whose stem (by ``stem``, a function) equals the
        token's, the one sharing the longest prefix with the token wins (then the
        shortest): "houses" -> "house".
        """
        index = self._index()
        if token.casefold() in index:
            return token
        if stem is None:
            return None
        stems = self._stems.get(stem)
        if stems is None:
            stems = {}
            for word in index:
                if " " not in word and "-" not in word:
                    stems.setdefault(stem(word), []).append(word)
            self._stems[stem] = stems
        same = stems.get(stem(token.casefold()))
        if not same:
            return None

        def key(word):
            common = len(os.path.commonprefix([word, token]))
            return (-common, len(word), word)
        return min(same, key=key)
