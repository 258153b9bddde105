"""The engine's surface: filters as parameters (combined with the query text's in one
place), full retrieval and reranking of judged queries by rerank, the candidates' context
handed to the scorers that read it, one constructor, and no per-search reflection."""
import datetime
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.exceptions import QueryError
from cqa_search.features import ContextFeatures
from cqa_search.query_parser import Filters, ParsedQuery, Unit, parse_query
from cqa_search.retrieval import BM25
from cqa_search.retrieval.first_stage import CandidateContext, weight_of_text
from cqa_search.retrieval.hybrid import Merged
from cqa_search.searcher import LocalSearcher


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    path = tmp_path_factory.mktemp("dated") / "idx"
    build_index([
        Question("a", "renew visa at the office", category="Visas", tags=("visa", "renewal"),
                 extra={"date": "2013-05-01"}),
        Question("b", "visa fees for a renewal", category="Visas", tags=("visa",),
                 extra={"date": "2014-05-01"}),
        Question("c", "visa photo size", category="Visas", tags=("visa", "photo"),
                 extra={"date": "2015-02-01"}),
        Question("d", "cheap visa run by car", category="Cars", tags=("cars",),
                 extra={"date": "2014-07-01"}),
        Question("e", "car battery dead", category="Cars", tags=("cars", "battery"))], path)
    return SearchEngine.open(path)


def ids(results):
    return set(results.doc_ids)


# -- filters -----------------------------------------------------------------------------
def test_filters_as_parameters_equal_the_query_syntax(dated):
    """The same questions as the syntax; the same scores as the unfiltered search (a tag
    of the syntax also searches its words: a parameter never scores)."""
    plain = dated.search("visa", k=None)
    plain = dict(zip(plain.doc_ids, plain.scores.tolist()))
    for params, typed in [
            ({"tags": ["renewal"]}, "visa tag:renewal"),
            ({"tags": ["visa", "photo"]}, "visa tag:visa tag:photo"),
            ({"not_tags": ["visa"]}, "visa -tag:visa"),
            ({"after": "2014"}, "visa date:>=2014"),
            ({"before": "2014-06"}, "visa date:<2014-06"),
            ({"after": "2014", "before": "2015"}, "visa date:>=2014 date:<2015"),
            ({"category": "cars"}, "visa category:cars"),
            ({"category": "Cars", "after": datetime.date(2014, 6, 1)}, "visa category:Cars "
                                                                        "date:>=2014-06-01")]:
        by_params, by_syntax = dated.search("visa", k=None, **params), dated.search(typed, k=None)
        assert ids(by_params) == ids(by_syntax), params
        assert by_params.scores.tolist() == [plain[d] for d in by_params.doc_ids]
        assert by_params.parsed.filters() == by_syntax.parsed.filters()
    # the parameters add to the text's filters; the text's category wins
    both = dated.search("visa date:<2015", k=None, after="2014", tags=["visa"])
    assert ids(both) == {"b"}
    assert both.parsed.filters() == ("tag:visa", "date:<2015-01-01", "date:>=2014-01-01")
    assert dated.search("visa category:Cars", k=None, category="Visas").category == "Cars"
    # and never change how the text is read: operator words stay words without syntax
    plain, dated_only = dated.search("visa NOT photo", k=None), \
        dated.search("visa NOT photo", k=None, after="2000")
    assert plain.doc_ids == dated_only.doc_ids and plain.parsed.notices == \
        dated_only.parsed.notices


def test_similar_and_batch_search_take_the_filters(dated):
    assert ids(dated.similar("a", k=None)) == {"b", "c", "d"}
    assert ids(dated.similar("a", k=None, after="2014-06")) == {"c", "d"}
    assert ids(dated.similar("a", k=None, tags=["visa"], before="2015")) == {"b"}
    like = dated.similar("a", k=None, category="cars", not_tags=["battery"])
    assert ids(like) == {"d"} and like.parsed.filters() == ("-tag:battery", "category:Cars")
    runs = dated.batch_search(["visa", "renewal"], k=None, after="2014", not_tags=["cars"])
    assert ids(runs["0"]) == {"b", "c"} and ids(runs["1"]) == {"b"}
    assert runs["0"].doc_ids == dated.search("visa", k=None, after="2014",
                                             not_tags=["cars"]).doc_ids


@pytest.mark.parametrize("params, message", [
    ({"tags": "visa"}, r"tags must be a sequence of tag names \(strings\); got 'visa'"),
    ({"not_tags": [1]}, r"not_tags must be a sequence of tag names \(strings\); got \[1\]"),
    ({"tags": ["visa", " "]}, r"tags has an empty tag name: \['visa', ' '\]"),
    ({"after": "2014-13"}, r"bad date filter 'date:>=2014-13': month must be in 1\.\.12"),
    ({"before": "next week"}, r"bad date filter 'date:<next week': write date:2014"),
    ({"after": 2014}, r"after must be a date \(YYYY, YYYY-MM or YYYY-MM-DD\); got int"),
    ({"category": 3}, "category must be a non-empty string; got 3"),
    ({"category": ""}, "category must be a non-empty string; got ''"),
    ({"category": "Boats"}, "unknown category 'Boats'")])
def test_a_bad_filter_is_refused_by_every_search(dated, params, message):
    for call in (lambda: dated.search("visa", **params),
                 lambda: dated.similar("a", **params),
                 lambda: dated.batch_search(["visa"], **params)):
        with pytest.raises(QueryError, match=message):
            call()


def test_filters_apply_in_one_place():
    parsed = parse_query('visa tag:photo date:2014 -category:Cars "work permit"')
    assert Filters().apply(parsed) is parsed and not Filters()
    got = Filters(category="Visas", tags=(" renewal ",), not_tags=["old"], after="2013",
                  before="2016-02").apply(parsed)
    assert got.category == "Visas" and got.text == parsed.text
    assert got.must == parsed.must + ((Unit("tag", ("renewal",)),),)
    assert got.must_not == parsed.must_not + ((Unit("tag", ("old",)),),)
    assert got.dates == parsed.dates + ((1356998400, None), (None, 1454284800))
    assert got.not_categories == ("Cars",) and got.notices == parsed.notices
    assert Filters(category="Visas").apply(ParsedQuery("x", "Cars")).category == "Cars"


# -- rerank: judged queries ----------------------------------------------------------------
def test_rerank_without_candidates_is_full_retrieval_with_the_category_a_feature(dated):
    full = dated.rerank("cheap visa renewal", k=None, category="Cars")
    assert ids(full) == {"a", "b", "c", "d"}  # no filter
    match = full.feature_names.index("category_match")
    assert {d: f[match] for d, f in zip(full.doc_ids, full.features)} == \
        {"a": 0, "b": 0, "c": 0, "d": 1}
    # the text is plain text (no syntax) and no answers fallback
    assert ids(dated.rerank("visa -renewal", k=None)) == {"a", "b", "c", "d"}
    assert dated.rerank("cheap visa renewal", k=2).doc_ids == full.doc_ids[:2]
    given = dated.rerank("cheap visa renewal", ["c", "e", "a"], k=2, scores=[3, 2, 1])
    assert len(given) == 2 and given.doc_ids[0] == "a"  # bm25 order: e has no query term
    with pytest.raises(QueryError, match="scores are those of given candidates"):
        dated.rerank("visa", scores=[1.0])
    with pytest.raises(QueryError, match="k must be a positive integer or None"):
        dated.rerank("visa", k=0)


# -- the candidates' context -------------------------------------------------------------
def test_given_ranks_are_over_every_candidate_ties_in_the_given_order():
    context = CandidateContext.of_given(np.array([7, 3, 9, 4]), [0.5, 2, 0.5, 1])
    assert context.given == {7: 0.5, 3: 2.0, 9: 0.5, 4: 1.0}
    assert context.given_ranks == {3: 1, 4: 2, 7: 3, 9: 4}
    assert context.term_model is None and context.parts() is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30),
       st.integers(1, 4), st.randoms(use_true_random=False))
def test_a_context_made_local_to_a_shard_scores_as_the_whole(scores, n_shards, rnd):
    """What a sharded back-end does: each shard scores its rows with the context mapped to
    them (context.local); put together, the whole index's features."""
    n_docs = 40
    rows = np.array(rnd.sample(range(n_docs), len(scores)), dtype=np.int64)
    context = CandidateContext.of_given(rows, scores)
    merged = Merged(rows, np.array(scores, dtype=np.float64), np.abs(scores),
                    np.ones(len(rows)), 5.0, True)
    context = CandidateContext(BM25(), 5.0, 0.5, merged, context.given, context.given_ranks)

    class View:  # what ContextFeatures reads of an index
        categories = ()
        doc_category = np.full(n_docs, -1)
        index = {"question": type("F", (), {"doc_len": np.ones(n_docs)})()}

    scorer = ContextFeatures(View())
    query = type("Query", (), {"category": None})()
    wanted = np.array(rnd.sample(range(n_docs), rnd.randint(1, n_docs)), dtype=np.int64)
    whole = scorer.score(query, wanted, context)
    starts = sorted(rnd.sample(range(1, n_docs), n_shards - 1))
    bounds = list(zip([0] + starts, starts + [n_docs]))
    parts = np.zeros_like(whole)
    for start, stop in bounds:
        mine = (wanted >= start) & (wanted < stop)
        local = context.local(wanted[mine], start)
        parts[mine] = scorer.score(query, wanted[mine] - start, local)
        held = rows[(rows >= start) & (rows < stop) & np.isin(rows, wanted)]
        assert (local.merged.rows + start).tolist() == held.tolist()  # in candidate order
    np.testing.assert_array_equal(parts, whole)


def test_the_first_stage_feature_of_given_candidates_reads_the_whole_index_basis(
        vectors_index):
    engine = SearchEngine.open(vectors_index, config=SearchConfig(ranker=None, hybrid=0.4))
    text = "my car battery keeps dying overnight"
    free = engine.search(text, k=20)  # its basis: the stage's own
    ids_ = list(free.doc_ids)[::-1]
    given = engine.rerank(text, ids_, scores=np.linspace(1, 0, len(ids_)))
    column = engine.feature_names.index("first_stage")
    by_id = dict(zip(free.doc_ids, free.features[:, column]))
    np.testing.assert_allclose([by_id[d] for d in given.doc_ids], given.features[:, column],
                               rtol=1e-6, atol=1e-9)
    scores = dict(zip(ids_, np.linspace(1, 0, len(ids_)).tolist()))
    column = engine.feature_names.index("given_score")
    assert given.first_stage is None and given.features[:, column].tolist() == \
        [scores[d] for d in given.doc_ids]


# -- the engine itself ---------------------------------------------------------------------
def test_one_constructor_a_search_back_end(dated):
    data = dated.searcher.data
    with pytest.raises(TypeError, match=r"SearchEngine\(LocalSearcher\(data, models, config\)\)"):
        SearchEngine(data)
    trial = SearchEngine(LocalSearcher(data, dated.models, SearchConfig(ranker=None)))
    assert trial.search("visa renewal").doc_ids == dated.search("visa renewal").doc_ids
    for removed in ("retrieve", "candidates", "feature_scores", "data", "attributes"):
        assert not hasattr(dated, removed)
    with pytest.raises(AttributeError):
        dated.ranker = None  # read-only


def test_a_search_pays_for_no_reflection(dated, monkeypatch):
    """Results.replace reads Results' arguments once, not on every search; the answers
    fallback makes its retrieval model once."""
    dated.search("+visa +nosuchword")  # read once (per process, per engine)

    def reflected(*args, **kwargs):
        raise AssertionError("inspect.signature called during a search")

    monkeypatch.setattr(inspect, "signature", reflected)
    res = dated.search("visa renewal", k=3)
    assert res.parsed is not None and res.replace(relaxed=True).relaxed
    assert dated.search("+visa +nosuchword").relaxed  # the relaxed path replaces too


def test_the_first_stage_as_written():
    assert weight_of_text("auto") == "auto" and weight_of_text("OFF") is None
    assert weight_of_text(" 0.25 ") == 0.25 and weight_of_text("1") == 1.0
    for bad in ("1.5", "-0.1", "nan", "half", ""):
        with pytest.raises(ValueError, match="expected auto, none or a number in"):
            weight_of_text(bad)
