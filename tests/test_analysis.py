import re

import pytest
from hypothesis import given
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
    with pytest.raises(ValueError, match="stopwords must be 'english', a list of words or None"):
        Analyzer(stopwords="french")


@given(st.text(alphabet=st.sampled_from("ab é_1'-. \n"), max_size=40))
def test_token_pattern_equals_scikit_learn_default(text):
    assert Analyzer(stopwords=None, stem=None).tokenize(text) == \
        re.findall(r"(?u)\b\w\w+\b", text.lower())


@given(st.text(alphabet=st.sampled_from("abcdeé 1.,;!?"), max_size=60))
def test_whoosh_analyzer_gives_the_same_terms(text):
    a = Analyzer()
    assert [t.text for t in a.whoosh_analyzer()(text.lower())] == a.analyze(text)
