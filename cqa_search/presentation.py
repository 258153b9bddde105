"""What a person sees of results: matched words highlighted, "did you mean" suggestions.

Built on whoosh's highlighter and spelling automata; the command line and the server
share these helpers. The hot scoring path does not use whoosh.
"""
from __future__ import annotations

import functools
import warnings
from bisect import bisect_left

__all__ = ["highlight", "snippet", "Suggester", "Presenter", "MAX_SUGGESTED_WORD"]

#: Longest word "did you mean" looks at: the edit automaton of a longer word costs
#: seconds and memory (a 20,000-character word took 41 s), and no real word is longer.
MAX_SUGGESTED_WORD = 40


def _shorten(text, width) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def snippet(text: str, terms, analyzer, *, width=200, start="[", end="]") -> str:
    """A query-biased excerpt of ``text``: the passages around the matched words, marked.

    The whole text when it fits in ``width`` characters; else the best fragments with
    matches (whoosh's scoring), joined by " ... "; else the start of the text.

    Examples
    --------
    >>> from cqa_search.analysis import Analyzer
    >>> text = "I moved here last year. " * 5 + "Where can I renew my visa? " + "Thanks. " * 9
    >>> snippet(text, {"renew", "visa"}, Analyzer(), width=80)
    '... year. Where can I [renew] my [visa]? Thanks. Thanks ...'
    >>> snippet("No match at all in this one.", {"visa"}, Analyzer(), width=12)
    'No match at…'
    """
    flat = " ".join(text.split())
    if len(flat) <= width or not terms:
        return highlight(_shorten(flat, width), terms, analyzer, start=start, end=end)
    surround = max(10, (width - 20) // 4)
    out = highlight(flat, terms, analyzer, start=start, end=end, whole=False, top=2,
                    surround=surround)
    if out == flat or not out:  # nothing matched
        return _shorten(flat, width)
    return "... " + out + " ..."


def highlight(text: str, terms, analyzer, *, start="[", end="]", whole=True, top=3,
              surround=40) -> str:
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
    surround : int
        Characters kept on each side of a match in a fragment.

    Examples
    --------
    >>> from cqa_search.analysis import Analyzer
    >>> highlight("Renewing my visas in Doha", {"renew", "visa"}, Analyzer())
    '[Renewing] my [visas] in Doha'
    """
    terms = frozenset(terms)
    if not terms or not text:
        return text
    _wh = _whoosh().highlight

    class _Formatter(_wh.Formatter):
        between = " ... "

        def format_token(self, text, token, replace=False):
            return start + _wh.get_text(text, token, replace) + end

    fragmenter = _wh.WholeFragmenter() if whole else _wh.ContextFragmenter(surround=surround)
    out = _wh.highlight(text, terms, analyzer.whoosh_analyzer(), fragmenter, _Formatter(),
                        top=1 if whole else top)
    return out or text


@functools.lru_cache(maxsize=1)
def _whoosh():
    """whoosh's highlighter and spelling automata, imported on first use."""
    import types

    with warnings.catch_warnings():  # whoosh 2.7 has invalid escape sequences
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        from whoosh import highlight as wh
        from whoosh.automata.fsa import find_all_matches
        from whoosh.automata.lev import levenshtein_automaton
        from whoosh.spelling import Corrector

    class RankedCorrector(Corrector):
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

    return types.SimpleNamespace(highlight=wh, RankedCorrector=RankedCorrector)


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
        self._corrector = _whoosh().RankedCorrector(sorted(words), words)

    def suggest(self, word: str, limit: int = 3, maxdist: int = 2) -> list:
        """Up to ``limit`` known words within ``maxdist`` edits of ``word``, best first
        (none for a word longer than :data:`MAX_SUGGESTED_WORD`).

        Only words that share the first letter (a misspelling seldom changes it, as
        Lucene's spell checker assumes): "sinuses" gets no "minutes".
        """
        if len(word) > MAX_SUGGESTED_WORD:
            return []
        if len(word) <= 3:
            maxdist = 1
        word = word.lower()
        return self._corrector.suggest(word, limit=limit, maxdist=maxdist, prefix=1)


class Presenter:
    """What the command line and the server show of an engine's results.

    Parameters
    ----------
    engine : SearchEngine

    Examples
    --------
    >>> import os, tempfile
    >>> from cqa_search import Question, SearchEngine, build_index
    >>> out = os.path.join(tempfile.mkdtemp(), "idx")
    >>> _ = build_index([Question("a", "Renewing my residence visa")], out)
    >>> engine = SearchEngine.open(out)
    >>> show = Presenter(engine)
    >>> res = engine.search("visa renewal resdence")
    >>> show.highlight(res[0].title, res.query_terms), show.suggestions(res)
    ('[Renewing] my residence [visa]', {'resdence': ['residence']})
    """

    def __init__(self, engine):
        self.engine = engine
        self._suggester = None

    def highlight(self, text: str, terms, **kwargs) -> str:
        """``text`` with the words of ``terms`` (index terms) marked; see :func:`highlight`."""
        return highlight(text, terms, self.engine.analyzer, **kwargs)

    def snippet(self, text: str, terms, **kwargs) -> str:
        """A query-biased excerpt of ``text`` with the matched words marked; see
        :func:`snippet`."""
        return snippet(text, terms, self.engine.analyzer, **kwargs)

    def suggest(self, word: str, limit: int = 3) -> list:
        """Archive words close to ``word`` (for "did you mean")."""
        if self._suggester is None:
            self._suggester = Suggester(self.engine.data.surface_words())
        return self._suggester.suggest(word, limit=limit)

    def suggestions(self, results) -> dict:
        """``{word: [suggestions]}`` for the query words the archive lacks."""
        return {w: self.suggest(w) for w in results.unknown_words}

    def answer(self, hit):
        """``(label, text)`` of the answer shown with a hit, or None when it has none: the
        answer the archive marks as best; else the one the index's answer selector chose
        (``cqa-search fit INDEX answers``); else the first."""
        question = hit.question
        if question.best_answer is not None:
            return "best answer", question.best_answer_text
        if not question.answers:
            return None
        if "answers" in self.engine.models and hit.row >= 0:
            from .answers import chosen_answer

            chosen = chosen_answer(self.engine, hit.row)
            return "chosen answer", chosen.text
        return "first answer", question.answers[0]

    def hit_record(self, hit, terms, *, ranker=None, marks=("", ""), width=200) -> dict:
        """A hit as a JSON-ready dict: what the command line's ``--json`` and the server
        give (title, query-biased snippets of the body and the shown answer with the
        matched words between ``marks``, category, tags, features; the ranker's
        contribution of each feature when ``ranker`` is given)."""
        start, end = marks
        question = hit.question
        answer = self.answer(hit)
        record = {"rank": hit.rank, "id": hit.doc_id, "score": hit.score,
                  "title": self.highlight(question.title, terms, start=start, end=end)
                  if start else question.title,
                  "snippet": self.snippet(question.body, terms, width=width, start=start,
                                          end=end) if question.body else "",
                  "category": question.category, "tags": list(question.tags),
                  "n_answers": len(question.answers),
                  "answer": None if answer is None else {
                      "label": answer[0],
                      "snippet": self.snippet(answer[1], terms, width=width, start=start,
                                              end=end)},
                  "features": dict(hit.features)}
        if ranker is not None:
            record["contributions"] = ranker.explain(hit.features)
        return record
