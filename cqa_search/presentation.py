"""What a person sees of results: matched words highlighted, "did you mean" suggestions,
and results as JSON-ready data.

Highlighting follows whoosh's fragment rules on the analyzer's word spans
(:meth:`~cqa_search.analysis.Analyzer.spans`); "did you mean" uses whoosh's spelling
automata (imported on first use). The command line and the server share these helpers
(:meth:`Presenter.results_dict` is both the CLI's ``--json`` and the server's
``/api/search``).
"""
from __future__ import annotations

import functools
import itertools
import operator
import re
import warnings
from bisect import bisect_left, bisect_right

__all__ = ["highlight", "snippet", "segments", "source_url", "corrected_query", "Suggester",
           "Presenter", "MAX_K", "MAX_SUGGESTED_WORD", "MAX_SUGGESTED_WORDS"]

#: Most results a person is shown of one search (the interactive session's ``:k``, the
#: search page, the API and the MCP tools): the candidates a ranker reorders by default
#: (:attr:`SearchConfig.n_candidates <cqa_search.SearchConfig>`). Past the questions that
#: share a word with the query, the hybrid first stage ranks every question by its vector:
#: a larger k lists the whole archive. (``cqa-search query -k N`` writes runs of any depth.)
MAX_K = 100
#: Longest word "did you mean" looks at: the edit automaton of a longer word costs
#: seconds and memory (a 20,000-character word took 41 s), and no real word is longer.
MAX_SUGGESTED_WORD = 40
#: Most unknown words of one query that get "did you mean" suggestions.
MAX_SUGGESTED_WORDS = 10
# Highlighting looks at the first 32,768 characters of a text (whoosh's default).
_CHARLIMIT = 1 << 15
# Marks around highlighted words in text cut into segments: control characters that are
# removed from the text first, so that no archive text can forge a mark.
_START, _END = "\x02", "\x03"
_UNMARKED = str.maketrans({_START: " ", _END: " "})
# Sites of the StackExchange network: their ids "<site>:<Id>" (the stackexchange reader's)
# name a post at https://<site>/q/<Id>.
_STACKEXCHANGE_SITE = re.compile(
    r"(?:[a-z0-9-]+\.)*(?:stackexchange\.com|stackoverflow\.com|serverfault\.com|"
    r"superuser\.com|askubuntu\.com|mathoverflow\.net|stackapps\.com)\Z")


def _shorten(text, width) -> str:
    return _cut(" ".join(text.split()), width)


def _cut(flat, width) -> str:
    """:func:`_shorten` of a text whose whitespace is collapsed already."""
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


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
    shown, best, cut = _excerpt(text, terms, analyzer, width)
    out = _joined(shown, best, start, end) if best else shown
    if not cut:
        return out
    if out == shown:  # nothing matched (or marks that are empty strings)
        return _cut(shown, width)
    return "... " + out + " ..."


def _excerpt(text, terms, analyzer, width):
    """``(shown, best, cut)`` of :func:`snippet`: the text it shows from (whitespace
    collapsed; shortened to ``width`` unless ``cut``, an excerpt of fragments), and its
    best fragments (:func:`_best`)."""
    flat = " ".join(text.split())
    if len(flat) <= width or not terms:
        shown = _cut(flat, width)
        return shown, _best(shown, terms, analyzer), False
    best = _best(flat, terms, analyzer, whole=False, top=2,
                 surround=max(10, (width - 20) // 4))
    return (flat, best, True) if best else (_cut(flat, width), [], False)


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
    best = _best(text, terms, analyzer, whole=whole, top=top, surround=surround)
    return _joined(text, best, start, end) if best else text


def _best(text, terms, analyzer, *, whole=True, top=3, surround=40) -> list:
    """The fragments :func:`highlight` shows, in text order: ``(first, last, matches)``
    each (``text[first:last]``, the ``(start, end, term)`` of its matched words); [] when
    no word matched."""
    terms = frozenset(terms)
    if not terms or not text:
        return []
    # the words up to the first that ends past the limit (a word longer than 1,024
    # characters across the limit is cut there: only the end of a last fragment can move)
    starts, ends, words = analyzer.span_lists(text[:_CHARLIMIT + 1024])
    hits = list(itertools.compress(itertools.count(), map(terms.__contains__, words)))
    if not hits:
        return []
    if whole:
        kept = bisect_right(ends, _CHARLIMIT)
        matches = [(starts[i], ends[i], words[i]) for i in hits if i < kept]
        return [(0, len(text), matches)] if matches else []
    fragments = _fragments(starts, ends, words, hits, surround)
    # whoosh's scoring: matches x 100 x distinct terms matched; ties: the earlier fragment
    scored = [(len(m) * 100 * len({w[2] for w in m}), -i, f)
              for i, f in enumerate(fragments) for m in [f[2]] if m]
    return sorted(f for _, _, f in sorted(scored, reverse=True)[:1 if whole else top])


def _joined(text, best, start, end) -> str:
    """The fragments ``best`` of ``text`` joined by " ... ", their matches marked."""
    return " ... ".join(_marked(text, *f, start, end) for f in best)


def _marked(text, first, last, matches, start, end) -> str:
    """``text[first:last]`` with ``start`` and ``end`` around each match."""
    out, at = [], first
    for s, e, _ in matches:
        if s < at:
            continue
        out.append(text[at:s])
        out.append(start + text[s:e] + end)
        at = e
    out.append(text[at:last])
    return "".join(out)


def _fragments(starts, ends, terms, hits, surround, maxchars=200):
    """Passages around the matched words: whoosh's ``ContextFragmenter`` (``surround``
    characters of context on each side, at most ``maxchars`` characters), on the
    analyzer's word spans (:meth:`~cqa_search.analysis.Analyzer.span_lists`), ``hits``
    the indices of the matched words; ``(first, last, matches)`` each.

    Whoosh walks word by word; here each run of unmatched words is taken at once, by
    bisection: outside a passage, the passage the next match opens starts at the first
    of them that starts within ``surround`` characters of the end of the word before the
    match; inside one, their lengths (summed in ``sizes``) use up its countdown and its
    ``maxchars``.
    """
    out, n, n_hits = [], len(starts), len(hits)
    sizes = list(itertools.accumulate(map(operator.sub, ends, starts)))  # words 0..k
    first, countdown, matches, length, last = None, -1, [], 0, None
    head = None  # where the passage of a match met now would start (whoosh's firsts[0])
    i = h = 0
    while i < n:
        while h < n_hits and hits[h] < i:
            h += 1
        m = hits[h] if h < n_hits else n  # the next matched word
        if m > i:  # unmatched words i .. m - 1
            stop = bisect_right(ends, _CHARLIMIT, i, m)  # the first past the limit, or m
            if countdown < 0:  # outside a passage
                if stop < m or m == n:
                    break
                at = bisect_left(starts, ends[m - 1] - surround, i, m)
                head = starts[at] if at < m else None
            else:  # inside one: which word ends it, if one does
                base = sizes[i - 1] if i else 0
                too_long = bisect_right(sizes, maxchars - length + base, i, m)
                run_out = bisect_left(sizes, countdown + base, i, m)
                k = min(too_long, run_out)
                if stop <= k and stop < m:
                    last = ends[stop]
                    break
                if k < m:
                    last = ends[k]
                    out.append((_first(first, matches), last, matches))
                    countdown = (starts[k] - last if too_long <= run_out
                                 else countdown - (sizes[k] - base))
                    head, first, matches, length = None, None, [], 0
                    i = k + 1
                    continue
                length += sizes[m - 1] - base
                countdown -= sizes[m - 1] - base
                last = ends[m - 1]
            i = m
            if i == n:
                break
        start, last = starts[i], ends[i]  # a matched word
        if last > _CHARLIMIT:
            break
        size = last - start
        if length + size > maxchars:
            countdown = 0
        else:
            countdown = surround
            if first is None:
                if head is not None:
                    first = head
                else:
                    first = start
                    countdown += surround
            matches.append((start, last, terms[i]))
        length += size
        countdown -= size
        if countdown <= 0:
            out.append((_first(first, matches), last, matches))
            head, first, matches, length = None, None, [], 0
        i += 1
    if matches:
        out.append((_first(first, matches), last, matches))
    return out


def _first(first, matches) -> int:
    return first if first is not None else (matches[0][0] if matches else 0)


def segments(text: str, terms, analyzer, *, width=None) -> list:
    """``text`` cut into ``{"text": str, "match": bool}`` segments, the words whose index
    term is in ``terms`` matched: the whole text, or with ``width`` a query-biased excerpt
    of it (:func:`snippet`). What a client that is not a terminal (a web page) renders.

    Examples
    --------
    >>> from cqa_search.analysis import Analyzer
    >>> segments("Renewing my visa", {"visa"}, Analyzer())
    [{'text': 'Renewing my ', 'match': False}, {'text': 'visa', 'match': True}]
    """
    if _START in text or _END in text:  # (a scan for two characters costs less than translate)
        text = text.translate(_UNMARKED)
    if width is None:
        shown, best, cut = text, _best(text, terms, analyzer), False
    else:
        shown, best, cut = _excerpt(text, terms, analyzer, width)
    if not best:
        return [{"text": shown, "match": False}] if shown else []
    out, pending = [], "... " if cut else ""
    for n, (first, last, matches) in enumerate(best):
        if n:
            pending += " ... "
        at = first
        for s, e, _ in matches:
            if s < at:
                continue
            if pending or at < s:
                out.append({"text": pending + shown[at:s], "match": False})
            if s < e:
                out.append({"text": shown[s:e], "match": True})
            pending, at = "", e
        pending += shown[at:last]
    if cut:
        pending += " ..."
    if pending:
        out.append({"text": pending, "match": False})
    return out


def _plain(marked) -> str:
    """The text of marked segments (:func:`segments`) without the marks."""
    return "".join(part["text"] for part in marked)


def source_url(question) -> str | None:
    """The original post of an archived question, when the archive has one: its ``url``
    (or ``link``) field, else for a StackExchange id ``<site>:<Id>``
    ``https://<site>/q/<Id>``.

    Examples
    --------
    >>> from cqa_search.archive import Question
    >>> source_url(Question("ai.stackexchange.com:123", "How do transformers work?"))
    'https://ai.stackexchange.com/q/123'
    >>> source_url(Question("Q268_R4", "Where to buy a sofa?")) is None
    True
    """
    for key in ("url", "link"):
        url = question.extra.get(key)
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            return url
    site, sep, post = question.id.rpartition(":")
    if sep and post.isdigit() and _STACKEXCHANGE_SITE.match(site):
        return f"https://{site}/q/{post}"
    return None


def corrected_query(typed: str, suggestions) -> str | None:
    """``typed`` with each unknown word replaced by its first suggestion ("did you mean"),
    or None when no word has one.

    Examples
    --------
    >>> corrected_query("Resdence visa", {"resdence": ["residence"], "xq": []})
    'residence visa'
    """
    out, changed = typed, False
    for word, options in suggestions.items():
        if options:
            out, n = re.subn(rf"(?<!\w){re.escape(word)}(?!\w)", lambda _: options[0], out,
                             flags=re.IGNORECASE)
            changed = changed or n > 0
    return out if changed else None


@functools.lru_cache(maxsize=1)
def _whoosh():
    """whoosh's spelling automata, imported on first use."""
    import types

    with warnings.catch_warnings():  # whoosh 2.7 has invalid escape sequences
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
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

    return types.SimpleNamespace(RankedCorrector=RankedCorrector)


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
        # the same misspellings come back (a server's queries): each walk costs milliseconds
        self._walk = functools.lru_cache(maxsize=4096)(self._walk)

    def suggest(self, word: str, limit: int = 3, maxdist: int = 2) -> list:
        """Up to ``limit`` known words within ``maxdist`` edits of ``word``, best first
        (none for a word longer than :data:`MAX_SUGGESTED_WORD`).

        Only words that share the first letter (a misspelling seldom changes it, as
        Lucene's spell checker assumes): "sinuses" gets no "minutes"; none for a number
        (a phone number's "4444" is no misspelling of "444").
        """
        if len(word) > MAX_SUGGESTED_WORD or word.isdigit():
            return []
        if len(word) <= 3:
            maxdist = 1
        return list(self._walk(word.lower(), limit, maxdist))

    def _walk(self, word, limit, maxdist) -> tuple:
        return tuple(self._corrector.suggest(word, limit=limit, maxdist=maxdist, prefix=1))


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

    def segments(self, text: str, terms, *, width=None) -> list:
        """``text`` (or an excerpt of ``width`` characters) as marked segments; see
        :func:`segments`."""
        return segments(text, terms, self.engine.analyzer, width=width)

    def prepare(self) -> "Presenter":
        """Read now the files suggestions need (a long-running reader: a writer may
        remove its generation's files later, see :mod:`cqa_search.index.store`)."""
        if self._suggester is None:
            self._suggester = Suggester(self.engine.surface_words())
        return self

    def suggest(self, word: str, limit: int = 3) -> list:
        """Archive words close to ``word`` (for "did you mean")."""
        return self.prepare()._suggester.suggest(word, limit=limit)

    def suggestions(self, results) -> dict:
        """``{word: [suggestions]}`` for the query words the archive lacks (the first
        :data:`MAX_SUGGESTED_WORDS` of them: each costs milliseconds, and a text of
        thousands of unknown words is no misspelling)."""
        return {w: self.suggest(w) for w in results.unknown_words[:MAX_SUGGESTED_WORDS]}

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

    def ranking(self) -> dict:
        """What orders the hits of a search: the retrieval model, ``hybrid`` (the weight
        ``a`` of the word-vector cosine in the first stage, None when the retrieval model
        alone chooses the candidates) and the ranker (None without one; its ``name``: the
        stored ranker that ran, see :attr:`~cqa_search.SearchEngine.ranker_name`)."""
        config, ranker = self.engine.config, self.engine.ranker
        a = self.engine.hybrid_weight
        info = {"retrieval": config.retrieval.feature_name, "ranker": None,
                "hybrid": float(a) if a else None}
        if ranker is not None:
            info["ranker"] = {"name": self.engine.ranker_name,
                              "learner": getattr(ranker, "learner", None),
                              "n_candidates": config.n_candidates,
                              "intercept": float(getattr(ranker, "intercept_", 0.0)),
                              "features": [str(f) for f in ranker.feature_names_in_]}
        return info

    def hit_dict(self, hit, terms, *, explain=False, width=200) -> dict:
        """One hit as JSON-ready data (the CLI's ``--json`` and the server's).

        Keys: ``rank``, ``id``, ``score``, ``title``, ``category``, ``tags``, ``date``
        (the creation date in ISO 8601, :attr:`~cqa_search.archive.Question.date`; None
        without one), ``url``
        (:func:`source_url`), ``n_answers``, ``features``; ``snippet``, a query-biased
        excerpt of the body; ``answer`` (``{"label", "snippet"}``, see :meth:`answer`;
        None without answers); the same texts as marked segments (:func:`segments`) for
        clients that render matches: ``title_marked``, ``snippet_marked`` and the answer's
        ``snippet_marked``; with ``explain`` and a ranker, ``contributions`` (the ranker's
        :meth:`~cqa_search.ranking.LinearRanker.explain`); with ``explain`` after a hybrid
        first stage, ``first_stage`` (the two parts of its score,
        :meth:`~cqa_search.retrieval.first_stage.StageParts.hit`).
        """
        question = hit.question
        answer = self.answer(hit)
        title = question.title or _shorten(question.body, width // 2)
        body = question.body if question.title else ""
        body_marked = self.segments(body, terms, width=width) if body else []
        answer_marked = None if answer is None else self.segments(answer[1], terms, width=width)
        out = {"rank": hit.rank, "id": hit.doc_id, "score": hit.score, "title": title,
               "category": question.category, "tags": list(question.tags),
               "date": question.date,
               "url": source_url(question), "n_answers": len(question.answers),
               "snippet": _plain(body_marked),
               "answer": None if answer is None else {
                   "label": answer[0], "snippet": _plain(answer_marked),
                   "snippet_marked": answer_marked},
               "title_marked": self.segments(question.title or question.body, terms,
                                             width=None if question.title else width // 2),
               "snippet_marked": body_marked,
               "features": dict(hit.features)}
        if explain and self.engine.ranker is not None and self.engine.ranker.can_explain:
            out["contributions"] = self.engine.ranker.explain(hit.features)
        if explain and hit.first_stage is not None:
            out["first_stage"] = hit.first_stage
        return out

    @staticmethod
    def facets(results, limit: int = 20) -> dict:
        """The categories and tags of the hits of ``results``, with how many hits have
        each (most first, then by name; tags compared without case, each as first met; at
        most ``limit`` tags): the facets of the results shown, where
        :meth:`~cqa_search.SearchEngine.category_counts` and
        :meth:`~cqa_search.SearchEngine.tag_counts` count the archive.

        Returns
        -------
        dict
            ``{"categories": [{"name", "count"}], "tags": [{"name", "count"}]}``.
        """
        categories, tags, spelling = {}, {}, {}
        for hit in results:
            if hit.category:
                categories[hit.category] = categories.get(hit.category, 0) + 1
            for tag in dict.fromkeys(t.strip().casefold() for t in hit.question.tags
                                     if t.strip()):
                tags[tag] = tags.get(tag, 0) + 1
            for t in hit.question.tags:
                spelling.setdefault(t.strip().casefold(), t.strip())

        def listed(counts, names=None):
            order = sorted(counts, key=lambda n: (-counts[n], n.casefold()))
            return [{"name": n if names is None else names[n], "count": counts[n]}
                    for n in order]
        return {"categories": listed(categories), "tags": listed(tags, spelling)[:limit]}

    def results_dict(self, results, *, typed=None, explain=False) -> dict:
        """Results as JSON-ready data: ``query`` (the words searched), ``category`` (the
        filter applied), ``filters`` (every requirement and filter applied, in the query
        syntax: :meth:`~cqa_search.query_parser.ParsedQuery.filters`), ``notices`` (what
        of the query was not read as the syntax it looks like), ``query_terms``,
        ``matched_in`` (the field the hits matched in), ``relaxed`` (the query's
        requirements were dropped: nothing met them),
        ``unknown_words``, ``suggestions``, ``did_you_mean`` (``typed``, the query as
        typed, corrected; None without a correction or ``typed``), ``ranking``
        (:meth:`ranking`), ``facets`` (the hits' categories and tags, :meth:`facets`) and
        ``hits`` (:meth:`hit_dict`)."""
        suggestions = self.suggestions(results)
        terms, parsed = frozenset(results.query_terms), results.parsed
        return {"query": results.query, "category": results.category,
                "filters": [] if parsed is None else list(parsed.filters()),
                "notices": [] if parsed is None else list(parsed.notices),
                "query_terms": list(results.query_terms), "matched_in": results.field,
                "relaxed": results.relaxed,
                "unknown_words": list(results.unknown_words), "suggestions": suggestions,
                "did_you_mean": None if typed is None else corrected_query(typed, suggestions),
                "ranking": self.ranking(), "facets": self.facets(results),
                "hits": [self.hit_dict(hit, terms, explain=explain) for hit in results]}
