"""The engine's first stage: the hybrid candidates against scoring the whole archive, the
lists deepened until the merge is exact, the filters, the first_stage feature, the parts
that --explain shows, and the stage's weight from the configuration or the ranker."""
import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqa_search import Question, SearchConfig, SearchEngine, build_index
from cqa_search.data import DEMO_ARCHIVE, demo_dir
from cqa_search.exceptions import QueryError
from cqa_search.index.live import delete_questions
from cqa_search.index.models import add_model
from cqa_search.retrieval import BM25, LMJelinekMercer, top_k
from cqa_search.retrieval import first_stage
from cqa_search.retrieval.hybrid import hybrid_scores
from cqa_search.searcher import LocalSearcher

QUERIES = ["sinuses plugged up and head feels heavy", "cheap flights to europe",
           "my car battery keeps dying overnight", "how do I stop my dog barking",
           "laptop will not turn on"]


def demo_questions():
    lines = (demo_dir() / DEMO_ARCHIVE).read_text(encoding="utf-8").splitlines()
    return [Question.from_dict(json.loads(x)) for x in lines]


@pytest.fixture
def index(vectors_index):
    return vectors_index


def whole_archive(engine, q, a, k, allowed=None):
    """The oracle: every allowed row scored by the hybrid formula (the retrieval model's
    scores of the whole archive, the exact cosines), the top k by (-score, doc id)."""
    model = engine.config.retrieval
    term, matched = model.score_all(model.field_index(engine.index), q.term_ids, q.qtf)
    dense = engine.searcher._dense.vectors @ engine.searcher._dense.query_vector(q)
    ok = np.ones(engine.n_docs, dtype=bool) if allowed is None else allowed
    term_max = term[ok & matched].max() if (ok & matched).any() else 0.0
    s = hybrid_scores(term, dense, a, term_max)
    return top_k(s, k, allowed=ok, tie_rank=engine.searcher.data.doc_id_rank), s


# -- the stage's loop ------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(n_docs=st.integers(2, 80), n=st.integers(1, 10), a=st.sampled_from([0.1, 0.3, 0.7, 1.0]),
       seed=st.integers(0, 10_000))
def test_deepened_lists_reach_the_whole_archive_top(n_docs, n, a, seed):
    rng = np.random.default_rng(seed)
    term = np.where(rng.random(n_docs) < 0.6, rng.random(n_docs) * 4, 0.0)
    dense = rng.random(n_docs) * 2 - 1
    tie = rng.permutation(n_docs)
    asked = []

    def term_top(m):
        asked.append(m)
        rows = top_k(term, m, allowed=term > 0, tie_rank=tie)
        return rows, term[rows]

    def dense_top(m):
        rows = top_k(dense, m, tie_rank=tie)
        return rows, dense[rows]

    got = first_stage.hybrid_candidates(n, a=a, term_top=term_top, dense_top=dense_top,
                                        term_scores=lambda r: term[r],
                                        cosines=lambda r: dense[r], depth=1,
                                        max_depth=2 * n_docs, tie_rank=tie)
    # lists as deep as the archive are exact: the loop always ends with the archive's top
    term_max = term.max() if (term > 0).any() else 0.0
    expected = top_k(hybrid_scores(term, dense, a, term_max), n, tie_rank=tie)
    assert got.exact
    assert got.rows.tolist() == expected.tolist()
    assert asked == [2 * n_docs * n]  # read once, at the deepest, and cut


def test_the_lists_are_read_once_and_cut_deeper_only_while_not_exact():
    # a = 0.5: row 0 (0.75) is the best; the top-1 lists cannot prove it (a row in neither
    # might score up to 0.5 * 4/4 + 0.5 * 1.0), the top-2 lists can (0.5 * 1/4 + 0.5 * 0.1)
    term = np.array([4.0, 0.0, 1.0, 0.0])
    dense = np.array([0.5, 1.0, 0.0, 0.1])
    depths, scored = [], []

    def top(values, m):
        depths.append(m)
        rows = top_k(values, m, allowed=values > 0)
        return rows, values[rows]

    def part(values, name):
        def of(rows):
            scored.append((name, rows.tolist()))
            return values[rows]
        return of

    def stage(max_depth):
        depths.clear(), scored.clear()
        return first_stage.hybrid_candidates(1, a=0.5, term_top=lambda m: top(term, m),
                                             dense_top=lambda m: top(dense, m),
                                             term_scores=part(term, "term"),
                                             cosines=part(dense, "cos"), depth=1,
                                             max_depth=max_depth)
    got = stage(8)
    assert got.rows.tolist() == [0] and got.exact
    assert depths == [8, 8]  # read once, at the deepest
    # cut at 1: rows 0 (term) and 1 (dense) lack a part; cut at 2: row 2 lacks its
    # cosine, row 1's term score is known; exact there, so never cut at 4
    assert scored == [("term", [1]), ("cos", [0]), ("cos", [2])]
    capped = stage(1)
    assert capped.rows.tolist() == [0] and not capped.exact
    assert depths == [1, 1]  # never deeper than max_depth


def test_capability_and_weights():
    assert first_stage.hybrid_capable(BM25()) and first_stage.hybrid_capable(BM25(field="answers"))
    assert not first_stage.hybrid_capable(LMJelinekMercer())  # log-probabilities
    assert first_stage.check_weight(0) == 0.0 and first_stage.check_weight(None) is None
    for bad in (1.5, -0.1, True, "0.3", float("nan")):
        with pytest.raises(ValueError, match="must be a number in"):
            first_stage.check_weight(bad)
    assert all(0 < a < 1 for a in first_stage.WEIGHT_GRID)
    # without judged queries the vectors touch the term order least (a title finds itself)
    assert 0 < first_stage.DEFAULT_WEIGHT <= min(first_stage.WEIGHT_GRID)


# -- in the engine ---------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.2, 0.5, 0.9])
def test_search_is_the_whole_archive_top(index, a):
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=a))
    assert engine.hybrid_weight == a
    for text in QUERIES:
        res = engine.search(text, k=20)
        q = engine.analyze(text)
        expected, s = whole_archive(engine, q, a, 20)
        assert list(res.doc_ids) == [engine.archive.doc_ids[r] for r in expected.tolist()]
        np.testing.assert_allclose(res.scores, s[expected], rtol=1e-5, atol=1e-7)
        # --explain's parts add up to the score; first_stage is the same as a feature
        parts = res.first_stage
        assert parts.a == a and parts.term_model == engine.config.retrieval.feature_name
        np.testing.assert_allclose(parts.scores, res.scores, rtol=1e-6)
        hit = res[0]
        assert hit.first_stage["term_part"] + hit.first_stage["cosine_part"] == \
            pytest.approx(hit.score)
        assert hit.features["first_stage"] == pytest.approx(hit.score, rel=1e-5)
        assert hit.features["emb_sif"] == pytest.approx(hit.first_stage["cosine"], rel=1e-5)


def test_the_first_stage_feature_of_the_stage_candidates_is_their_stage_score(index):
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=0.5))
    (feature,) = [s for s in engine.searcher._scorers
                  if isinstance(s, first_stage.FirstStageFeature)]
    for text in QUERIES:
        q = engine.analyze(text)
        res = engine.search(text, k=30)  # the candidates as the stage found them
        rows = res._rows
        got = res.features[:, engine.feature_names.index("first_stage")]
        assert got.tolist() == res.scores.tolist()
        # the reference: recomputed from the stage's basis, in any order of the rows
        basis = first_stage.CandidateContext(engine.config.retrieval, res.first_stage.term_max,
                                             0.5)
        np.testing.assert_allclose(got, feature.score(q, rows, basis)[:, 0], rtol=1e-6,
                                   atol=1e-9)
        np.testing.assert_allclose(feature.score(q, rows[::-1], basis)[:, 0], got[::-1],
                                   rtol=1e-6, atol=1e-9)


def test_filters_deleted_rows_and_categories(index, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(index, path)
    delete_questions(path, ["health-004", "cooking-014"])
    engine = SearchEngine.open(path, config=SearchConfig(ranker=None, hybrid=0.5))
    live = engine.searcher.data.live
    cats = engine.view.doc_category
    health = engine.categories.id("Health")
    for typed, allowed in [
            (QUERIES[0], live),
            ("category:Health " + QUERIES[0], live & (cats == health)),
            (QUERIES[0] + " -category:Health", live & (cats != health)),
            ("+head sinuses heavy", None)]:
        res = engine.search(typed, k=15)
        q = engine.analyze(engine.search(typed, k=1).query)
        if allowed is None:  # +head: the questions holding the word only
            allowed = live & (engine.index["question"].matrix()[:, engine.index.vocab.ids(
                ["head"])].toarray().ravel() > 0)
        expected, _ = whole_archive(engine, q, 0.5, 15, allowed)
        assert list(res.doc_ids) == [engine.archive.doc_ids[r] for r in expected.tolist()]
        assert "health-004" not in res.doc_ids and "cooking-014" not in res.doc_ids


def test_candidates_are_always_filled(index):
    """BM25 finds only the questions that share a word; the hybrid stage fills the
    candidates (and the hits) with the nearest questions by vector."""
    bm25 = SearchEngine.open(index, config=SearchConfig(ranker=None, hybrid=None))
    hybrid = SearchEngine.open(index, config=SearchConfig(ranker=None))
    assert bm25.hybrid_weight == 0 and hybrid.hybrid_weight == first_stage.DEFAULT_WEIGHT
    text = "sinuses plugged up"
    assert len(bm25.search(text, k=50)) < 50 == len(hybrid.search(text, k=50))
    assert bm25.search(text, k=50).first_stage is None
    # the term order alone: the same hits as an index without word vectors
    no_vectors = SearchEngine.open(index, config=SearchConfig(ranker=None, models=()))
    assert no_vectors.hybrid_weight == 0 and "first_stage" not in no_vectors.feature_names
    for text in QUERIES:
        assert bm25.search(text, k=10).doc_ids == no_vectors.search(text, k=10).doc_ids


def test_no_word_in_the_questions(index):
    """A query whose words only answers hold falls back to the answers (as without
    vectors); one whose words nothing holds still finds the nearest questions."""
    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    in_questions = engine.index["question"].stats.df
    answers_only = []  # words of answers that no question holds
    for question in demo_questions():
        for word in " ".join(question.answers).split():
            ids = engine.index.known_ids(engine.analyzer.analyze(word))
            if len(ids) == 1 and ids[0] >= 0 and in_questions[ids[0]] == 0:
                answers_only.append(word)
    assert len(answers_only) > 3
    res = engine.search(" ".join(answers_only[:3]), k=5)
    assert res.field == "answers" and len(res)
    assert res.first_stage.term_model == "answers_bm25" and res.first_stage.term_max > 0
    # the first_stage feature of these hits is their answers-stage score
    np.testing.assert_allclose([h.features["first_stage"] for h in res], res.scores, rtol=1e-5)


def test_configuration_and_the_rankers_weight(index, tmp_path):
    with pytest.raises(QueryError, match="hybrid must be 'auto', None or a number"):
        SearchConfig(hybrid=2)
    with pytest.raises(QueryError, match="hybrid_depth must be a positive integer"):
        SearchConfig(hybrid_depth=0)
    with pytest.raises(QueryError, match="needs a BM25-like retrieval model"):
        SearchEngine.open(index, config=SearchConfig(retrieval=LMJelinekMercer(), hybrid=0.3))
    assert SearchEngine.open(index, config=SearchConfig(retrieval=LMJelinekMercer())) \
        .hybrid_weight == 0  # auto: the term model alone
    plain = tmp_path / "plain"
    build_index(demo_questions()[:40], plain)
    with pytest.raises(QueryError, match="needs the index's word vectors"):
        SearchEngine.open(plain, config=SearchConfig(hybrid=0.3))
    # a ranker's stored a is the engine's (auto), unless the configuration says otherwise
    from cqa_search.ranking import LinearRanker

    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    found = engine.search(QUERIES[0], k=30)
    names = list(engine.feature_names)
    free = [j for j, n in enumerate(names) if not n.startswith("given_")]
    X = found.features[:, free]
    y = (np.arange(len(found)) < 3).astype(float)
    ranker = LinearRanker("ranksvm", random_state=0).fit(
        X, y, qid=np.zeros(len(found)), feature_names=[names[j] for j in free])
    assert ranker.hybrid_weight_ is None
    ranker.hybrid_weight_ = 0.7
    copy = tmp_path / "copy"
    shutil.copytree(index, copy)
    add_model(copy, "ranker", ranker)
    assert SearchEngine.open(copy).hybrid_weight == 0.7
    assert SearchEngine.open(copy, config=SearchConfig(hybrid=0.2)).hybrid_weight == 0.2
    assert SearchEngine.open(copy, config=SearchConfig(hybrid=None)).hybrid_weight == 0
    stored = SearchEngine.open(copy).models["ranker"]
    assert stored.hybrid_weight_ == 0.7
    meta, arrays = stored.state()
    from cqa_search.index.validate import InvalidArray

    with pytest.raises(InvalidArray, match="hybrid_weight must be a number in"):
        type(stored).from_state(stored.get_params(), {**meta, "hybrid_weight": 3}, arrays)
    old = {k: v for k, v in meta.items() if k != "hybrid_weight"}  # stored before it existed
    assert type(stored).from_state(stored.get_params(), old, arrays).hybrid_weight_ is None


def test_ranked_candidates_keep_their_parts(index):
    """With a ranker the hits are reordered; each keeps its own first-stage parts."""
    from cqa_search.ranking import LinearRanker

    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    found = engine.search(QUERIES[1], k=40)
    names = list(engine.feature_names)
    ranker = LinearRanker("ranksvm", random_state=0).fit(
        found.features[:, [names.index("log_length")]], np.arange(len(found)) % 2,
        qid=np.zeros(len(found)), feature_names=["log_length"])
    ranked = SearchEngine(LocalSearcher(engine.searcher.data,
                                        {**engine.models, "ranker": ranker}))
    res = ranked.search(QUERIES[1], k=10)
    free = engine.search(QUERIES[1], k=100)
    by_id = {d: free[i].first_stage for i, d in enumerate(free.doc_ids)}
    for hit in res:
        assert hit.first_stage == pytest.approx(by_id[hit.doc_id])
    like = ranked.similar(res.doc_ids[0], k=5)
    assert res.doc_ids[0] not in like.doc_ids and len(like.first_stage.term) == len(like)


def test_per_field_parts_reach_the_features(index):
    from cqa_search.evaluation import feature_table

    engine = SearchEngine.open(index, config=SearchConfig(ranker=None))
    queries = [{"id": "x", "text": "dog barking\nhow to stop my dog barking at night",
                "title": "dog barking", "body": "how to stop my dog barking at night"},
               {"id": "y", "text": "dog barking at night"}]
    X, qid, docs, names = feature_table(engine, queries, k=10)
    body = names.index("field_body_bm25")
    assert X[qid == "x", body].max() > 0  # the query's body against the questions' bodies
    assert not X[qid == "y", body].any()  # one text: its own title, no body
    body = engine.feature_names.index("field_body_bm25")  # with the given-run columns
    res = engine.search(title="dog barking", body="how to stop my dog barking at night", k=5)
    assert res.features[:, body].max() > 0 and res.query.startswith("dog barking")
    runs = engine.batch_search([queries[0], "dog barking"], ["a", "b"], k=5)
    assert runs["a"].features[:, body].max() > 0 and not runs["b"].features[:, body].any()
    with pytest.raises(QueryError, match="a query's title must be a string"):
        engine.analyze("x", title=3)
