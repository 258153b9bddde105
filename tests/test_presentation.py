"""What a person sees: marked segments, source links, "did you mean", the JSON document,
the analyzer spans that highlighting reads, and the highlighter against whoosh's."""
import json
import re
import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cqa_search import Question, SearchEngine, build_index
from cqa_search.analysis import Analyzer
from cqa_search.presentation import (MAX_SUGGESTED_WORDS, Presenter, corrected_query, highlight,
                                     segments, snippet, source_url)


def text_of(parts):
    return "".join(p["text"] for p in parts)


def test_segments_mark_the_matched_words_and_keep_the_text():
    parts = segments("Renewing my visa, renewed.", {"renew", "visa"}, Analyzer())
    assert parts == [{"text": "Renewing", "match": True}, {"text": " my ", "match": False},
                     {"text": "visa", "match": True}, {"text": ", ", "match": False},
                     {"text": "renewed", "match": True}, {"text": ".", "match": False}]
    assert segments("no match", {"visa"}, Analyzer()) == [{"text": "no match", "match": False}]
    assert segments("", {"visa"}, Analyzer()) == []


def test_segments_of_an_excerpt():
    text = "Filler words here. " * 20 + "Where can I renew my visa? " + "Thanks. " * 20
    parts = segments(text, {"visa"}, Analyzer(), width=80)
    assert len(text_of(parts)) < 120 and [p["text"] for p in parts if p["match"]] == ["visa"]


def texts(words, max_size):
    """Texts of ``words`` and some filler, with separators: what the highlighting oracles
    try."""
    filler = ["filler", "words", "go", "here", "and", "on"] * 4
    return st.builds(lambda ws, seps: "".join(w + seps[i % len(seps)] for i, w in enumerate(ws)),
                     st.lists(st.sampled_from(words + filler), max_size=max_size),
                     st.lists(st.sampled_from([" ", ", ", ". ", "\n", "  "]), min_size=1))


@settings(max_examples=300, deadline=None)
@given(text=texts(["visa", "visas", "renewal", "the", "office", "Doha", "of", "fee", "renew",
                   "x", "—", "é", "İ", "\x02"], max_size=120),
       terms=st.sets(st.sampled_from(["visa", "renew", "offic", "doha", "fee", "x"])),
       width=st.sampled_from([None, 12, 40, 100, 200]),
       pattern=st.sampled_from([r"(?u)\w{2,}", r"(?u)\w*"]))
def test_segments_are_the_marked_snippet(text, terms, width, pattern):
    """Oracle: the segments are the text :func:`highlight` (``width`` None) or
    :func:`snippet` marks, cut at the marks (odd parts matched, empty parts left out) --
    also for a token pattern that matches empty words."""
    analyzer = Analyzer(token_pattern=pattern)
    clean = text.replace("\x02", " ")
    marked = (highlight(clean, terms, analyzer, start="\x02", end="\x03") if width is None
              else snippet(clean, terms, analyzer, width=width, start="\x02", end="\x03"))
    expected = [{"text": part, "match": i % 2 == 1}
                for i, part in enumerate(re.split("[\x02\x03]", marked)) if part]
    assert segments(text, terms, analyzer, width=width) == expected


def test_marks_in_the_text_cannot_forge_a_match():
    # the control characters used as marks are removed from the text first
    parts = segments("a \x02fake\x03 mark and a visa", {"visa"}, Analyzer())
    assert [p["text"] for p in parts if p["match"]] == ["visa"]
    assert "\x02" not in text_of(parts) and "\x03" not in text_of(parts)


@pytest.mark.parametrize("doc_id,extra,url", [
    ("ai.stackexchange.com:123", {}, "https://ai.stackexchange.com/q/123"),
    ("bicycles.meta.stackexchange.com:7", {}, "https://bicycles.meta.stackexchange.com/q/7"),
    ("askubuntu.com:42", {}, "https://askubuntu.com/q/42"),
    ("Q268_R4", {}, None),
    ("mysite:12", {}, None),                            # not a StackExchange site
    ("ai.stackexchange.com:abc", {}, None),
    ("q1", {"url": "https://example.org/t/1"}, "https://example.org/t/1"),
    ("q1", {"link": "http://example.org/t/1"}, "http://example.org/t/1"),
    ("q1", {"url": "javascript:alert(1)"}, None),       # only web links
])
def test_source_url(doc_id, extra, url):
    assert source_url(Question(doc_id, "title", extra=extra)) == url


def test_corrected_query():
    assert corrected_query("how to renw my Pasport?", {"renw": ["renew"], "pasport": ["passport"]}) \
        == "how to renew my passport?"
    assert corrected_query('title:renw "renw x"', {"renw": ["renew"]}) == 'title:renew "renew x"'
    assert corrected_query("renwal renw", {"renw": ["renew"]}) == "renwal renew"  # whole words
    assert corrected_query("xq visa", {"xq": []}) is None
    assert corrected_query("a+b c", {"a+b": ["ab"]}) == "ab c"  # regex characters are text


def test_results_dict_is_json_and_matches_the_results(toy_engine):
    show = Presenter(toy_engine)
    results = toy_engine.search("renew my visa furnture", k=3)
    doc = show.results_dict(results, typed="renew my visa furnture")
    assert json.loads(json.dumps(doc)) == doc
    assert [h["id"] for h in doc["hits"]] == list(results.doc_ids)
    assert [h["score"] for h in doc["hits"]] == results.scores.tolist()
    assert doc["query_terms"] == list(results.query_terms)
    assert doc["suggestions"] == {"furnture": ["furniture"]}
    assert doc["did_you_mean"] == "renew my visa furniture"
    assert doc["ranking"] == {"retrieval": "bm25f", "ranker": None, "hybrid": None}
    first = doc["hits"][0]
    assert text_of(first["title_marked"]) == first["title"] == results[0].title
    assert any(s["match"] for s in first["title_marked"])
    assert first["answer"]["label"] == "best answer"
    assert first["answer"]["snippet"] in results[0].best_answer
    assert first["features"] == results[0].features
    assert "contributions" not in first  # no ranker to explain with


def test_suggestions_for_the_first_unknown_words_only(toy_engine):
    """A text of thousands of unknown words costs milliseconds, not seconds."""
    words = [f"furnture{'x' * (i % 5)}q{i}" for i in range(3 * MAX_SUGGESTED_WORDS)]
    results = toy_engine.search("furnture " + " ".join(words), k=3)
    doc = Presenter(toy_engine).results_dict(results)
    assert list(doc["suggestions"]) == ["furnture"] + words[:MAX_SUGGESTED_WORDS - 1]
    assert doc["suggestions"]["furnture"] == ["furniture"]
    assert len(doc["unknown_words"]) == 3 * MAX_SUGGESTED_WORDS + 1


def test_results_dict_first_answer_and_body_only_questions(tmp_path):
    path = tmp_path / "idx"
    build_index([Question("a", "", "where to renew a visa in doha", answers=("at the office",)),
                 Question("b", "Visa question", "body text")], path)
    engine = SearchEngine.open(path)
    doc = Presenter(engine).results_dict(engine.search("renew visa"))
    a, b = doc["hits"]
    assert a["answer"] == {"label": "first answer", "snippet": "at the office",
                           "snippet_marked": [{"text": "at the office", "match": False}]}
    assert text_of(a["title_marked"]).startswith("where to renew")
    assert a["snippet"] == "" and a["snippet_marked"] == []
    assert b["answer"] is None and b["n_answers"] == 0 and doc["did_you_mean"] is None


def test_spans_keep_offsets_and_terms():
    analyzer = Analyzer()
    text = "The RENEWED visas of Doha, İstanbul and Café"
    spans = [(term, text[start:end]) for start, end, term in analyzer.spans(text)]
    assert spans[:3] == [("", "The"), ("renew", "RENEWED"), ("visa", "visas")]
    assert [term for term, _ in spans if term] == analyzer.analyze(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
       st.sampled_from([Analyzer(), Analyzer(stem="porter", stopwords=None),
                        Analyzer(lowercase=False, stem=None)]))
def test_spans_equal_the_analysis(text, analyzer):
    """Oracle: the terms highlighting sees are the terms the index has (for normalised
    text; see Analyzer.spans)."""
    assume(unicodedata.is_normalized("NFKC", text))
    spans = [(term, start, end) for start, end, term in analyzer.spans(text) if term]
    assert [term for term, _, _ in spans] == analyzer.analyze(text)
    for term, start, end in spans:
        assert term in analyzer.analyze(text[start:end])


@given(st.text(alphabet=st.sampled_from("aBcEisS 1.,;'-_\n"), max_size=60),
       st.sampled_from([Analyzer(), Analyzer(stem="porter", stopwords=None),
                        Analyzer(lowercase=False, stem=None)]))
def test_spans_of_ascii_text_in_bulk_equal_those_word_by_word(text, analyzer):
    """Oracle for the bulk path of ASCII text: each word analysed on its own."""
    scan = text.lower() if analyzer.lowercase else text
    assert analyzer.spans(text) == analyzer._spans_by_word(scan, False)


def test_highlight_prefers_passages_with_more_distinct_words():
    text = ("visa visa visa. " + "filler words go here and on. " * 6 + "visa fee. "
            + "more filler words here. " * 6)
    assert highlight(text, {"visa", "fee"}, Analyzer(), whole=False, top=1, surround=10) == \
        "and on. [visa] [fee]. more filler"


def _whoosh_highlight(text, terms, analyzer, *, whole, top, surround):
    """The highlighter this package used before: whoosh's, on the analyzer's spans, ties
    between fragments broken towards the earlier one (whoosh breaks them by object id)."""
    from whoosh import highlight as wh
    from whoosh.analysis import Token

    def analyze(value, chars=False, removestops=True, mode="", **kwargs):
        for start, end, term in analyzer.spans(value):
            t = Token(chars=True, removestops=removestops, mode=mode)
            t.text, t.stopped, t.boost = term or "\0stopword", not term, 1.0
            t.startchar, t.endchar = start, end
            yield t

    class Marks(wh.Formatter):
        between = " ... "

        def format_token(self, text, token, replace=False):
            return "[" + wh.get_text(text, token, replace) + "]"

    fragmenter = wh.WholeFragmenter() if whole else wh.ContextFragmenter(surround=surround)
    out = wh.highlight(text, frozenset(terms), analyze, fragmenter, Marks(),
                       top=1 if whole else top)
    return out or text


@settings(max_examples=300, deadline=None)
@given(text=texts(["visa", "visas", "renewal", "the", "office", "Doha", "of", "a", "fee",
                   "renew", "x", "forms", "—", "é", "visa fee visas renew " * 12, "y" * 300],
                  max_size=200),  # (runs of matches, and a match longer than a passage)
       terms=st.sets(st.sampled_from(["visa", "renew", "offic", "doha", "fee", "form",
                                      "y" * 300])),
       whole=st.booleans(), top=st.integers(1, 3), surround=st.sampled_from([5, 10, 20, 45]))
def test_highlight_equals_whooshs(text, terms, whole, top, surround):
    """Oracle: our highlighter gives whoosh's output (WholeFragmenter, ContextFragmenter,
    BasicFragmentScorer, first-order fragments) for every text, term set and option."""
    from whoosh import highlight as wh

    analyzer = Analyzer()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wh.Fragment, "__lt__", lambda a, b: a.startchar > b.startchar)
        expected = _whoosh_highlight(text, terms, analyzer, whole=whole, top=top,
                                     surround=surround)
    assert highlight(text, terms, analyzer, whole=whole, top=top, surround=surround) == expected
