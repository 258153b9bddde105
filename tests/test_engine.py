"""The search API: results, filters, batch search, errors, presentation helpers."""
import math
import shutil
from collections import Counter

import numpy as np
import pytest

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.analysis import Analyzer
from cqa_search.evaluation import feature_table, run_queries
from cqa_search.exceptions import IndexFormatError, QueryError
from cqa_search.presentation import Presenter
from cqa_search.query_parser import ParsedQuery
from cqa_search.retrieval import BM25, BM25F, LMDirichlet, VSM
from cqa_search.retrieval.bm25f import DEFAULT_WEIGHTS


def test_search_returns_ranked_hits_with_answers_and_features(toy_engine):
    res = toy_engine.search("how can I renew my visa", k=3)
    assert res.doc_ids[:2] == ("t02", "t01")  # both hold both terms; t02 is shorter
    assert list(res.scores) == sorted(res.scores, reverse=True)
    top = res[1]
    assert (top.rank, top.doc_id, top.category) == (2, "t01", "Visas")
    assert top.title == "How do I renew my residence visa?"
    assert top.best_answer.startswith("Go to the immigration office")
    assert set(top.features) == {"bm25", "lm_jm", "lm_dir", "vsm", "answers_bm25", "answers_lm_jm",
                                 "bm25f", "given_score", "given_rrank", "category_match",
                                 "log_length"}
    # the retrieval model of an index with titles (its score a feature too)
    assert toy_engine.config.retrieval == BM25F(**DEFAULT_WEIGHTS)
    assert top.features["bm25f"] == pytest.approx(top.score)
    assert res.query_terms == ("renew", "visa")
    assert [h.doc_id for h in res] == list(res.doc_ids)
    df = res.to_dataframe()
    assert list(df.columns[:6]) == ["rank", "doc_id", "score", "title", "category",
                                    "best_answer"] and len(df) == len(res)
    assert list(df.columns[6:]) == list(res.feature_names)
    assert df.loc[1, ["title", "category", "best_answer"]].tolist() == [
        top.title, top.category, top.best_answer]


def test_results_are_immutable(toy_engine):
    res = toy_engine.search("visa")
    with pytest.raises(AttributeError):
        res.doc_ids = ()
    with pytest.raises(ValueError):
        res.scores[0] = 1.0
    with pytest.raises(AttributeError):
        res.relaxed = True


def test_results_replace_changes_only_what_it_is_given(toy_engine):
    res = toy_engine.search("visa renewal", k=3)
    relaxed = res.replace(relaxed=True)
    assert relaxed.relaxed and not res.relaxed
    for name in ("query", "doc_ids", "feature_names", "query_terms", "unknown_words", "field",
                 "category"):
        assert getattr(relaxed, name) == getattr(res, name)
    np.testing.assert_array_equal(relaxed.scores, res.scores)
    np.testing.assert_array_equal(relaxed.features, res.features)
    assert [h.question for h in relaxed] == [h.question for h in res]
    assert res.replace(category="Visas").category == "Visas"
    with pytest.raises(TypeError, match="Results has no argument 'nope'"):
        res.replace(nope=1)


def test_only_matching_questions_are_returned_and_ties_break_by_id(toy_engine):
    res = toy_engine.search("swimming lessons", k=10)
    assert res.doc_ids == ("t10",)
    res = toy_engine.search("cheap", k=None)
    assert set(res.doc_ids) == {"t04", "t06"}


def test_results_slice_and_membership(toy_engine):
    res = toy_engine.search("visa renewal", k=4)
    assert [h.doc_id for h in res[:2]] == list(res.doc_ids[:2])
    assert [h.rank for h in res[1::2]] == [2, 4] and res[-1].doc_id == res.doc_ids[-1]
    assert res.doc_ids[0] in res and "nope" not in res
    with pytest.raises(TypeError, match="results are indexed by int or slice; got str"):
        res["t01"]
    with pytest.raises(IndexError, match="result 4 out of range for 4 results"):
        res[4]


def test_category_filter(toy_engine):
    res = toy_engine.search("cheap car visa", k=10, category="cars")  # case-insensitive
    assert res.doc_ids and all(h.category == "Cars" for h in res)
    with pytest.raises(QueryError, match=r"unknown category 'Visa'; did you mean 'Visas'\?"):
        toy_engine.search("renew", category="Visa")
    with pytest.raises(QueryError, match=r"unknown category 'Zebra' \(categories: Cars, Shopping, "
                                         r"Visas\)"):
        toy_engine.search("renew", category="Zebra")


def test_categories_that_differ_only_in_case(tmp_path):
    build_index([Question("a", "renew my visa", category="Travel"),
                 Question("b", "visa for kids", category="travel"),
                 Question("c", "visa fees", category="Visas")], tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.search("visa", category="travel").doc_ids == ("b",)
    assert engine.search("visa", category="Travel").doc_ids == ("a",)
    assert engine.search("visa", category="visas").doc_ids == ("c",)  # one such name
    with pytest.raises(QueryError, match=r"category 'TRAVEL' is ambiguous: the index has "
                                         r"'Travel' and 'travel'; give one exactly"):
        engine.search("visa", category="TRAVEL")


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_query_is_an_error(toy_engine, text):
    with pytest.raises(QueryError, match="empty query"):
        toy_engine.search(text)


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_bad_k_is_an_error(toy_engine, k):
    with pytest.raises(QueryError, match="k must be a positive integer"):
        toy_engine.search("visa", k=k)


def test_unknown_words_are_reported_with_suggestions(toy_engine):
    res = toy_engine.search("furnture for the the")
    assert len(res) == 0 and res.unknown_words == ("furnture",)
    assert Presenter(toy_engine).suggest("furnture")[0] == "furniture"
    assert toy_engine.search("the of and").doc_ids == ()  # only stopwords: nothing, no error


def test_highlight_marks_query_terms(toy_engine):
    res = toy_engine.search("renewing visas")
    show = Presenter(toy_engine)
    assert show.highlight(res[0].title, res.query_terms) == "[Visa] [renewal] documents"
    assert show.highlight("How do I renew my residence visa?", res.query_terms) == \
        "How do I [renew] my residence [visa]?"


def test_batch_search_equals_search(toy_engine):
    queries = ["renew visa", "cheap sofa", "engine start"]
    runs = toy_engine.batch_search(queries, qids=["a", "b", "c"], k=4)
    assert list(runs) == ["a", "b", "c"]
    assert runs["b"].doc_ids == toy_engine.search("cheap sofa", k=4).doc_ids
    shopping = toy_engine.batch_search(queries, k=4, category="Shopping")
    assert shopping["1"].doc_ids == toy_engine.search("cheap sofa", k=4,
                                                      category="Shopping").doc_ids
    np.testing.assert_array_equal(runs["c"].scores, toy_engine.search("engine start", k=4).scores)
    with pytest.raises(QueryError, match="qids must be distinct"):
        toy_engine.batch_search(["a", "b"], qids=["x", "x"])
    with pytest.raises(QueryError, match="got 2 queries and 1 qids"):
        toy_engine.batch_search(["a", "b"], qids=["x"])
    with pytest.raises(QueryError, match="queries must be a sequence of query texts, not one"):
        toy_engine.batch_search("renew visa")
    with pytest.raises(QueryError, match="doc_ids must be a sequence of ids, not one string"):
        toy_engine.rerank("renew visa", "t01")
    with pytest.raises(QueryError, match=r"scores must be numbers; got \['a'\]"):
        toy_engine.rerank("renew visa", ["t01"], scores=["a"])
    assert SearchConfig(n_candidates=np.int64(5)).n_candidates == 5


def test_config_selects_retrieval_model_and_features(toy_index):
    config = SearchConfig(retrieval=LMDirichlet(mu=100), features=(VSM(), BM25(field="body")))
    engine = SearchEngine.open(toy_index, config=config)
    # the index has no body field; the retrieval model's score is a feature, always
    assert engine.config.features == (VSM(), LMDirichlet(mu=100))
    res = engine.search("renew visa")
    assert res.feature_names == ("vsm", "lm_dir", "given_score", "given_rrank",
                                 "category_match", "log_length")
    assert res[0].score == pytest.approx(
        LMDirichlet(mu=100).score_rows(engine.index["question"], *_q(engine, "renew visa"),
                                       [engine.archive.row(res.doc_ids[0])])[0])
    with pytest.raises(QueryError, match="field 'body', which this index lacks"):
        SearchEngine.open(toy_index, config=SearchConfig(retrieval=BM25(field="body")))
    with pytest.raises(ValueError, match="feature names must be distinct"):
        SearchConfig(features=(BM25(), BM25(k1=2)))


def _q(engine, text):
    q = engine.analyze(text)
    return q.term_ids, q.qtf


def test_rerank_scores_only_the_candidates_and_keeps_their_order_for_ties(toy_engine):
    res = toy_engine.rerank("cheap sofa", ["t01", "t06", "t04", "t03"])
    assert res.doc_ids[:2] == ("t04", "t06")
    assert res.doc_ids[2:] == ("t01", "t03")  # both score 0: given order
    assert res.scores[2] == res.scores[3] == 0
    with pytest.raises(QueryError, match="unknown question id 'nope'"):
        toy_engine.rerank("sofa", ["t01", "nope"])


def naive_bm25(engine, text, k1=1.2, b=0.75):
    """Lucene BM25 of every archived question, by its definition (plain loops)."""
    docs = [engine.analyzer.analyze(q.text) for q in engine.archive]
    query = engine.analyzer.analyze(text)
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    out = []
    for d in docs:
        tf, s = Counter(d), 0.0
        for t in query:
            df = sum(t in x for x in docs)
            if tf[t]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return np.array(out)


def test_query_syntax_is_understood_by_the_api(toy_engine):
    assert toy_engine.search("category:shopping cheap").doc_ids == \
        toy_engine.search("cheap", category="Shopping").doc_ids
    assert toy_engine.search('category:"Visas" renew visa NOT work').doc_ids == tuple(
        d for d in toy_engine.search("renew visa", category="Visas").doc_ids
        if d not in ("t02", "t03"))                        # "work" is in both
    with pytest.raises(QueryError, match="unknown category 'Car'; did you mean 'Cars'"):
        toy_engine.search("category:Car engine")


def test_k_above_n_candidates_is_not_cut_to_n_candidates(tmp_path):
    from cqa_search.index.models import add_model
    from cqa_search.ranking import LinearRanker

    path = tmp_path / "idx"
    build_index([Question(f"q{i}", f"visa question {i}") for i in range(30)], path)
    engine = SearchEngine.open(path)
    X = np.random.default_rng(0).random((20, 1))
    ranker = LinearRanker("ranksvm").fit(X, (X[:, 0] > 0.5).astype(float),
                                         qid=np.repeat(["a", "b"], 10), feature_names=["bm25"])
    add_model(path, "ranker", ranker)
    engine = SearchEngine.open(path, config=SearchConfig(n_candidates=10))
    assert len(engine.search("visa", k=25)) == 25 and len(engine.search("visa", k=5)) == 5
    assert len(engine.search("visa", k=None)) == 30


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_a_term_in_most_questions_still_matches(tmp_path, method):
    """robertson clips the idf of a term in more than half of the questions at 0, and
    atire's is 0 in all of them: the questions that hold it are still matches."""
    path = tmp_path / "idx"
    build_index([Question("a", "visa office"), Question("b", "visa fees"),
                 Question("c", "visa rules"), Question("d", "cheap sofa")], path)
    engine = SearchEngine.open(path, config=SearchConfig(retrieval=BM25(method=method)))
    assert sorted(engine.search("visa", k=None).doc_ids) == ["a", "b", "c"]
    assert engine.search("sofa", k=None).doc_ids == ("d",)


def test_run_full_retrieval_never_returns_the_query_itself(toy_engine):
    queries = [{"id": "t07", "text": "car battery dying"}, {"id": "x", "text": "car battery"}]
    run = run_queries(toy_engine, queries, k=2)
    assert "t07" not in run["t07"] and len(run["t07"]) == 2
    assert list(run["x"])[0] == "t07"
    reranked = run_queries(toy_engine, queries, candidates={"x": {"t09": 1.0, "t07": 0.5}})
    assert list(reranked["x"]) == ["t07", "t09"] and reranked["t07"] == {}


def test_feature_table_matches_the_features_of_each_result(toy_engine):
    queries = [{"id": "a", "text": "renew visa"}, {"id": "b", "text": "cheap sofa"}]
    X, qid, docs, names = feature_table(toy_engine, queries, k=3)
    assert X.shape == (len(qid), len(names)) and list(dict.fromkeys(qid)) == ["a", "b"]
    naive = naive_bm25(toy_engine, "renew visa")
    top3 = sorted(range(len(naive)), key=lambda r: (-naive[r], toy_engine.archive.doc_ids[r]))[:3]
    assert list(docs[qid == "a"]) == [toy_engine.archive.doc_ids[r] for r in top3]
    np.testing.assert_allclose(X[qid == "a", names.index("bm25")], naive[top3], rtol=1e-6)
    lengths = [len(toy_engine.analyzer.analyze(toy_engine.archive[r].text)) for r in top3]
    np.testing.assert_allclose(X[qid == "a", names.index("log_length")], np.log1p(lengths))
    given = {"a": {"t03": 2.0, "t01": 1.0}}
    X, qid, docs, names = feature_table(toy_engine, queries[:1], candidates=given)
    assert list(docs) == ["t01", "t03"]  # ordered by the retrieval model
    assert X[:, names.index("given_rrank")].tolist() == [0.5, 1.0]


@pytest.mark.parametrize("typed, expected", [
    ("cheap sofa furniture", {"t04", "t06"}),
    ("cheap sofa furniture +sofa NOT budget", {"t06"}),  # t04's body: "on a budget"
    ("cheap sofa furniture NOT budget", {"t04", "t06"}),  # plain text: NOT is a word
    ("cheap sofa furniture -budget", {"t06"}),
    ("+sofa cheap furniture", {"t04"}),
    ("+cheap +shops", {"t06"}),
    ("-budget cheap AND shops", {"t06"}),                # AND next to other syntax
    ("visa renewal", {"t01", "t02", "t03", "t11"}),
    ('"visa renewal"', {"t02"}),                          # t01: "renew my residence visa"
    ("title:visa", {"t01", "t02", "t03", "t11"}),
    ("body:visa", {"t01", "t02"}),                        # t03, t11: in the title only
    ("answers:passport", {"t01", "t02"}),
    ("tag:family visa", {"t03"}),
    ("tags:family visa", {"t03"}),
    ("tag:Renewal visa", {"t01"}),                       # exact, any case
    ("visa -tag:family", {"t01", "t02", "t11"}),
    ("body:visa OR answers:passport", {"t01", "t02"}),
    ("title:visa OR title:sofa", {"t01", "t02", "t03", "t11", "t04"}),
    ("car shop -category:Cars", {"t06"}),                  # car shop: t06, t07-t09
    ("(battery OR engine) AND morning", {"t07", "t08"}),
    ("car -battery -ownership", {"t08"}),
    ("visa NOT (work permit)", {"t01", "t11"}),          # either word: left out
    ("visa NOT (work AND permit)", {"t01", "t02", "t11"}),  # t03 has both words
])
def test_the_query_syntax_filters_what_it_says(toy_engine, typed, expected):
    res = toy_engine.search(typed, k=None)
    assert set(res.doc_ids) == expected, typed


def test_a_filter_of_words_the_index_does_not_hold_asks_nothing(toy_engine):
    """'-5' (too short to index) or '-the' (a stopword) left out every question: they ask
    nothing, and the results say so."""
    plain = toy_engine.search("cheap sofa furniture", k=None)
    for typed in ("cheap sofa furniture -the -5", "cheap sofa -the furniture", "+the cheap sofa "
                  "furniture", "cheap sofa furniture -(5 AND the)"):
        res = toy_engine.search(typed, k=None)
        assert res.doc_ids == plain.doc_ids, typed
        assert res.parsed.filters() == () and "ask" in res.parsed.notices[-1], typed
    res = toy_engine.search("cheap sofa furniture -(budget AND the)", k=None)
    assert set(res.doc_ids) == {"t06"} and res.parsed.filters() == ("-budget",)


def test_filters_keep_the_scores_of_the_words(toy_engine):
    plain = toy_engine.search("cheap sofa furniture", k=None)
    filtered = toy_engine.search("cheap sofa furniture -budget", k=None)
    assert filtered.scores[0] == plain.scores[list(plain.doc_ids).index("t06")]
    assert filtered.query_terms == ("cheap", "sofa", "furnitur")  # "budget" is not a match


@pytest.mark.parametrize("typed", ["NOT NOT NOT", "[a TO z] visa", "visa AND", "((visa", "-",
                                   "title:", 'category:"', "visa^2 ~ *", "+ - + -"])
def test_odd_syntax_never_fails_with_a_traceback(toy_engine, typed):
    try:
        toy_engine.search(typed)
    except QueryError:
        pass


def test_negative_only_and_too_long_queries_are_clear_errors(toy_engine):
    with pytest.raises(QueryError, match="-word and NOT only leave words out"):
        toy_engine.search("-visa")
    with pytest.raises(QueryError, match="the query has 20,001 characters; at most 10,000"):
        toy_engine.search("v" * 20_001)


def test_reopen_follows_the_live_generation(tmp_path):
    path = tmp_path / "idx"
    build_index([Question("a", "renew visa")], path)
    engine = SearchEngine.open(path, config=SearchConfig(n_candidates=7))
    assert engine.reopen() is engine
    build_index([Question("b", "renew visa"), Question("c", "visa fees")], path)
    fresh = engine.reopen()
    assert fresh is not engine and fresh.generation == "gen-000002"
    assert fresh.config.n_candidates == 7 and fresh.search("visa").doc_ids == ("b", "c")
    assert engine.search("visa").doc_ids == ("a",)  # the old engine still answers
    assert fresh.analyzer._cache is engine.analyzer._cache  # words analysed stay analysed
    build_index([Question("d", "renewing visas")], path, analyzer=Analyzer(stem="porter"))
    other = fresh.reopen()
    assert other.analyzer._cache is not fresh.analyzer._cache  # not another analysis's terms
    assert other.search("renewed").doc_ids == ("d",)


def test_reopen_sees_an_index_deleted_and_built_again(tmp_path):
    # the new index's first generation has the old one's name, gen-000001
    path = tmp_path / "idx"
    build_index([Question("a", "renew visa")], path)
    engine = SearchEngine.open(path)
    shutil.rmtree(path)
    build_index([Question("b", "renew visa")], path)
    fresh = engine.reopen()
    assert fresh.generation == engine.generation == "gen-000001"
    assert fresh is not engine and fresh.search("visa").doc_ids == ("b",)
    assert fresh.reopen() is fresh


def test_a_small_batch_stays_in_this_process(toy_engine, monkeypatch):
    """Workers cost ~0.1 s to start: a batch estimated below WORTH_SECONDS is not sent."""
    import cqa_search.parallel as parallel

    def no_fork(*args, **kwargs):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(parallel.multiprocessing, "get_context", no_fork)
    one = toy_engine.batch_search(["renew visa", "cheap sofa", "engine"], k=3, n_jobs=2)
    assert one["0"].doc_ids == toy_engine.search("renew visa", k=3).doc_ids


def test_two_worker_processes_give_the_same_results(toy_engine, monkeypatch):
    import cqa_search.parallel as parallel

    # every query to the workers (a batch this small would stay in this process)
    monkeypatch.setattr(parallel, "PROBE_SECONDS", 0.0)
    monkeypatch.setattr(parallel, "WORTH_SECONDS", 0.0)
    queries = ["renew visa", "cheap sofa", "engine start", "category:Cars battery", "visa -work",
               '"visa battery" renew', "alternator"]
    one = toy_engine.batch_search(queries, k=3)
    two = toy_engine.batch_search(queries, k=3, n_jobs=2)
    assert one["5"].relaxed and one["6"].field == "answers"
    for qid in one:
        assert one[qid].doc_ids == two[qid].doc_ids and one[qid].field == two[qid].field
        assert one[qid].relaxed == two[qid].relaxed and one[qid].category == two[qid].category
        np.testing.assert_array_equal(one[qid].scores, two[qid].scores)
        np.testing.assert_array_equal(one[qid].features, two[qid].features)
        assert [h.title for h in two[qid]] == [h.title for h in one[qid]]
    judged = [{"id": f"q{i}", "text": t} for i, t in enumerate(queries[:3])]
    assert run_queries(toy_engine, judged, k=4, n_jobs=2) == run_queries(toy_engine, judged, k=4)
    a = feature_table(toy_engine, judged, k=4)
    b = feature_table(toy_engine, judged, k=4, n_jobs=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="n_jobs must be a positive integer"):
        toy_engine.batch_search(queries, n_jobs=0)


def test_similar_searches_a_question_without_itself(toy_engine, tmp_path):
    """engine.similar: the question's title and body as a plain-text query through the
    same pipeline as search, the question itself left out."""
    question = toy_engine.archive.get("t01")
    same = toy_engine.rerank(question.text, k=None)
    res = toy_engine.similar("t01", 3)
    assert "t01" not in res and "t01" in same
    assert list(res.doc_ids) == [d for d in same.doc_ids if d != "t01"][:3]
    assert res.scores.tolist() == [s for d, s in zip(same.doc_ids, same.scores.tolist())
                                   if d != "t01"][:3]
    assert res.features.shape == (3, len(toy_engine.feature_names))
    assert [h.rank for h in res] == [1, 2, 3]
    assert list(toy_engine.similar("t01", None, category="Visas").doc_ids) == [
        d for d in same.doc_ids if d != "t01" and toy_engine.archive.get(d).category == "Visas"]
    with pytest.raises(QueryError, match="unknown question id 'nope'"):
        toy_engine.similar("nope")
    with pytest.raises(QueryError, match="k must be a positive integer"):
        toy_engine.similar("t01", 0)
    from cqa_search import delete_questions

    build_index([Question("a", "renew visa"), Question("b", "visa fees"),
                 Question("c", "renew visa quickly")], tmp_path / "idx")
    delete_questions(tmp_path / "idx", ["c"])
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.similar("a").doc_ids == ("b",)
    with pytest.raises(QueryError, match="unknown question id 'c'"):  # deleted
        engine.similar("c")


def test_similar_reads_at_most_max_query_chars(tmp_path):
    """Issue 43: a question of 49 MiB took 9-17 s as the query of a more-like-this: its
    title and the start of its body are searched, as a search's query is bounded."""
    from cqa_search.query_parser import MAX_QUERY_CHARS

    body = " ".join(f"word{i % 5000}" for i in range(200_000)) + " visa"
    build_index([Question("long", "renew visa", body), Question("b", "visa fees"),
                 Question("c", "renew passport word7 word8")], tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")
    res = engine.similar("long", k=None)
    bounded = "renew visa\n" + body[:MAX_QUERY_CHARS - len("renew visa\n")]
    assert res.parsed.text == bounded and len(bounded) == MAX_QUERY_CHARS
    same = engine.search(ParsedQuery(bounded), k=None)
    assert list(res.doc_ids) == [d for d in same.doc_ids if d != "long"]
    short = engine.similar("c", k=None)  # a shorter question: searched whole, as before
    assert short.parsed.text == "renew passport word7 word8"


def test_a_feature_that_is_not_finite_is_a_corrupted_index(toy_engine, tmp_path, monkeypatch):
    """A NaN feature (a zeroed count in a stored model gave one) reached the ranker,
    whose check of its input raised ValueError: exit 70 on the command line."""
    from cqa_search.index.models import add_model
    from cqa_search.ranking import LinearRanker

    path = tmp_path / "idx"
    shutil.copytree(toy_engine.path, path)
    X, qid, docs, names = feature_table(toy_engine, [{"id": "v", "text": "renew my visa"}],
                                        k=None)
    add_model(path, "ranker", LinearRanker("ranksvm", random_state=0).fit(
        X, [d == "t01" for d in docs], qid=qid, feature_names=names))
    engine = SearchEngine.open(path)
    real = engine._features

    def with_nan(q, rows, context):
        out = real(q, rows, context)
        out[:, engine.feature_names.index("vsm")] = np.nan
        return out

    monkeypatch.setattr(engine, "_features", with_nan)
    with pytest.raises(IndexFormatError, match="corrupted index .*: feature 'vsm' is not a "
                                               "finite number .NaN or infinite. for some "
                                               "candidates"):
        engine.search("renew my visa")


def test_tag_is_an_exact_filter_and_tags_a_word_search(tmp_path):
    """tag: keeps the questions with exactly that tag (no stemming, no part of a tag:
    tag:gaming never finds game-theory); tags: searches the words of the tags."""
    build_index([Question("a", "board game rules", tags=("game-theory",)),
                 Question("b", "game consoles", tags=("gaming", "Consoles")),
                 Question("c", "game night ideas", tags=("games",))], tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.search("game tag:gaming", k=None).doc_ids == ("b",)
    assert set(engine.search("game tags:gaming", k=None).doc_ids) == {"a", "b", "c"}  # stems
    assert engine.search("game tag:consoles", k=None).doc_ids == ("b",)
    assert engine.search("game tag:game", k=None).doc_ids == ()
    assert engine.search('game tag:"game-theory"', k=None).doc_ids == ("a",)
    assert set(engine.search("game -tag:games", k=None).doc_ids) == {"a", "b"}
    assert engine.tag_counts() == {"Consoles": 1, "game-theory": 1, "games": 1, "gaming": 1}
    from cqa_search import delete_questions

    delete_questions(tmp_path / "idx", ["b"])
    engine = SearchEngine.open(tmp_path / "idx")
    assert engine.tag_counts() == {"game-theory": 1, "games": 1}
    assert engine.search("game tag:gaming", k=None).doc_ids == ()


def test_date_filters_read_the_dates_the_readers_keep(tmp_path):
    """date: on the creation date of each reader's records (StackExchange's ISO
    creation_date, SemEval's 'YYYY-MM-DD hh:mm:ss' date, Yahoo's Unix seconds)."""
    build_index([Question("se", "visa office hours", extra={"creation_date": "2013-12-31T23:59:59.5"}),
                 Question("sem", "visa fees", extra={"date": "2014-01-01 00:00:00"}),
                 Question("yahoo", "visa photo", extra={"date": "1420070400"}),  # 2015-01-01
                 Question("none", "visa queue")], tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx")

    def found(typed):
        return set(engine.search(typed, k=None).doc_ids)

    assert found("visa") == {"se", "sem", "yahoo", "none"}
    assert found("visa date:>=2014-01-01") == {"sem", "yahoo"}
    assert found("visa date:<2014") == {"se"}
    assert found("visa date:2014") == {"sem"}
    assert found("visa date:<=2014-01-01") == {"se", "sem"}
    assert found("visa date:>2014-01-01") == {"yahoo"}
    assert found("visa date:2013-12..2014-01") == {"se", "sem"}
    assert found("visa date:2015-01-01") == {"yahoo"}
    assert found("visa date:>=2014 date:<2015") == {"sem"}
    for bad, message in [("visa date:2014-02-30", "day is out of range for month"),
                         ("visa date:yesterday", "bad date filter 'date:yesterday': write"),
                         ("visa -date:2014", "a date filter cannot be left out")]:
        with pytest.raises(QueryError, match=message):
            engine.search(bad)


def test_a_date_out_of_range_in_an_older_index_is_no_date(tmp_path, monkeypatch, caplog):
    """An index built before dates were checked may hold "date": 1e30 (the write API took
    it): every tag: and date: filter and the tag counts of that index failed for every
    user. The date is read as none, with one warning naming the question."""
    import cqa_search.archive

    monkeypatch.setattr(cqa_search.archive, "date_seconds", lambda value: None)  # unchecked
    build_index([Question("huge", "visa fees", tags=["t"], extra={"date": 1e30}),
                 Question("ok", "visa office", tags=["t"], extra={"date": "2014-05-01"})],
                tmp_path / "idx")
    monkeypatch.undo()
    engine = SearchEngine.open(tmp_path / "idx")
    assert set(engine.search("visa tag:t", k=None).doc_ids) == {"huge", "ok"}
    assert engine.search("visa date:2014", k=None).doc_ids == ("ok",)
    assert engine.tag_counts() == {"t": 2}
    said = [r.getMessage() for r in caplog.records if r.name == "cqa_search.index.attributes"]
    assert len(said) == 1 and said[0].endswith(
        "seg-000001/archive.jsonl: 1 date(s) outside 0001-01-01 to 9999-12-31 (the first of "
        "question 'huge') read as no date; the index was built before dates were checked: "
        "rebuild it with `cqa-search build-index`")
