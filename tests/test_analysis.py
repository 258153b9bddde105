import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search.analysis import Analyzer


def test_default_pipeline():
    a = Analyzer()
    assert a.analyze("The Visas were RENEWED quickly, weren't they?") == \
        ["visa", "renew", "quick", "weren"]
    assert Analyzer(stem="porter").analyze("generously") == ["gener"]
    assert Analyzer(stem=None, stopwords=None).analyze("The cats") == ["the", "cats"]
    assert Analyzer(stopwords=["cats"]).analyze("The cats sleep") == ["the", "sleep"]
    assert Analyzer().analyze("ｆｕｌｌｗｉｄｔｈ Café") == ["fullwidth", "café"]  # NFKC


def test_config_round_trip_and_errors():
    a = Analyzer(stem="porter", stopwords=["b", "a"], token_pattern=r"\S+", lowercase=False)
    assert Analyzer.from_config(a.to_config()) == a
    assert a.to_config()["stopwords"] == ["a", "b"]
    with pytest.raises(ValueError, match=r"stem must be \{None, 'porter', 'snowball'\}; got 'lancaster'"):
        Analyzer(stem="lancaster")
    with pytest.raises(ValueError, match="token_pattern is not a valid regular expression"):
        Analyzer(token_pattern="(")
    with pytest.raises(ValueError, match=r"token_pattern must have no capturing group; make it "
                                         r"non-capturing, \(\?:\.\.\.\)"):
        Analyzer(token_pattern=r"(\w)(\w+)")
    assert Analyzer(token_pattern=r"(?:\w)\w+").tokenize("renew visas") == ["renew", "visas"]
    with pytest.raises(ValueError, match="stopwords must be 'english', 'lucene', a list of "
                                         "words or None"):
        Analyzer(stopwords="french")
    lucene = Analyzer(stopwords="lucene", token_pattern=r"(?u)\w+")
    assert Analyzer.from_config(lucene.to_config()) == lucene
    assert lucene.to_config()["stopwords"] == "lucene"


def test_stopword_lists():
    from cqa_search.analysis import LUCENE_STOP_WORDS, english_stop_words

    assert len(LUCENE_STOP_WORDS) == 33 and len(english_stop_words()) == 318
    assert LUCENE_STOP_WORDS < english_stop_words() | {"such", "will"}
    # the short list keeps words the long one drops
    assert Analyzer(stopwords="lucene").analyze("Which one should I do first?") == \
        ["which", "one", "should", "do", "first"]
    assert Analyzer().analyze("Which one should I do first?") == []


@given(st.text(alphabet=st.sampled_from("ab é_1'-. \n"), max_size=40))
def test_token_pattern_equals_scikit_learn_default(text):
    assert Analyzer(stopwords=None, stem=None).tokenize(text) == \
        re.findall(r"(?u)\b\w\w+\b", text.lower())


@given(st.text(alphabet=st.sampled_from("abcdeé 1.,;!?"), max_size=60))
def test_spans_give_the_same_terms(text):
    a = Analyzer()
    assert [term for _, _, term in a.spans(text.lower()) if term] == a.analyze(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=80),
       pattern=st.sampled_from([r"(?u)\w{2,}", r"(?u)\w+", r"\w\w+", r"(?u)\w{3,10}", r"\w*"]))
def test_the_ascii_twin_of_a_word_pattern_finds_the_same_words(text, pattern):
    """On ASCII text (control characters included) the pattern compiled with re.ASCII, what
    tokenize and spans use there, finds the words of the pattern as given."""
    from cqa_search.analysis import _ascii_twin

    twin = _ascii_twin(pattern)
    assert twin is not None
    assert [m.span() for m in twin.finditer(text)] == \
        [m.span() for m in re.compile(pattern).finditer(text)]
    assert _ascii_twin(r"(?u)\b\w\w+\b") is None and _ascii_twin(r"\S+") is None


_TEXT = st.text(alphabet=st.sampled_from(list("ab_Z9 .,\n\t-'é\u00c9\u0301ﬁＡΣς\x01\x0b\x1c")),
                max_size=40)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, max_size=6),
       pattern=st.sampled_from([r"(?u)\w{2,}", r"\w+", r"(?u)\b\w\w+\b", r"\w{3,}",
                                r"\w{2,3}", r"\S+"]),
       lowercase=st.booleans())
def test_word_runs_are_the_tokens_of_each_text(texts, pattern, lowercase):
    """The bulk tokenizer of indexing gives what tokenize() gives text by text: ASCII text
    by bytes, the rest by the regular expression (None: another pattern)."""
    analyzer = Analyzer(token_pattern=pattern, lowercase=lowercase)
    runs = analyzer.word_runs(texts)
    if runs is None:
        assert analyzer.shortest_run is None
        return
    tokens = [t for t in runs.split() if t == b"\x01" or len(t.decode()) >= analyzer.shortest_run]
    expected = []
    for i, text in enumerate(texts):
        expected += ([b"\x01"] if i else []) + [t.encode() for t in analyzer.tokenize(text)]
    assert tokens == expected
