"""The analysis of batches: the compiled token numbering against the dictionary's."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import compiled
from cqa_search.analysis import Analyzer
from cqa_search.index.batches import LocalTerms

_WORDS = st.sampled_from(["visa", "Visas", "renew", "the", "a", "x_1", "Über", "über", "ＦＵ",
                          "sofa", "\x01", "b", "qatar", "-", "\n", " "])
_TEXTS = st.lists(st.lists(_WORDS, max_size=8).map(" ".join), min_size=0, max_size=12)


def _same(a, b):
    assert a.new_tokens == b.new_tokens and a.new_terms == b.new_terms
    for x, y in zip(a.fields, b.fields):
        assert [v.tolist() for v in x] == [v.tolist() for v in y]


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(_TEXTS.filter(lambda t: len(t) % 2 == 0), min_size=1, max_size=4),
       switch=st.integers(0, 4), pattern=st.sampled_from([r"(?u)\w{2,}", r"\w+", r"\S+"]))
def test_the_compiled_numbering_analyses_as_the_dictionary(batches, switch, pattern):
    """Batch after batch, the kernels taken from batch ``switch`` on (the tokens met so far
    carried over) and set aside again after it, give the dictionary's results."""
    if not compiled.load():
        pytest.skip("numba is not installed")
    reference, mixed = LocalTerms(Analyzer(token_pattern=pattern)), \
        LocalTerms(Analyzer(token_pattern=pattern))
    try:
        for i, texts in enumerate(batches):
            compiled.use("numpy")
            expected = reference.analyse(texts, 2)
            compiled.use("numba" if i >= switch else "numpy")
            got = mixed.analyse(texts, 2)
            _same(got, expected)
        compiled.use("numpy")  # back to a dictionary from the kernels' table
        _same(mixed.analyse(batches[0], 2), reference.analyse(batches[0], 2))
    finally:
        compiled.use("auto")


def test_fields_of_a_batch(toy_archive):
    from cqa_search.index.term_index import FIELDS

    analyzer = Analyzer()
    texts = [FIELDS[f](q) for q in toy_archive for f in ("question", "answers")]
    batch = LocalTerms(analyzer).analyse(texts, 2)
    local = {}
    for word, tid in batch.new_tokens:
        local[word] = tid
    terms = batch.new_terms
    for f, name in enumerate(("question", "answers")):
        sequence, doc_len, rows, ids, counts = batch.fields[f]
        got = [terms[t] for t in sequence.tolist()]
        assert got == [t for q in toy_archive for t in analyzer.analyze(FIELDS[name](q))]
        assert doc_len.tolist() == [len(analyzer.analyze(FIELDS[name](q))) for q in toy_archive]
        assert np.all(np.diff(rows) >= 0) and counts.sum() == doc_len.sum()
