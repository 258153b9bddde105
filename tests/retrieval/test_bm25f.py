"""BM25F against a plain double loop over its definition, its equality to BM25 on one field,
its combined postings, its parameters, and its place in the engine (stored and live indexes,
the first stage, the fallback to the answers)."""
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqa_search import (Question, SearchConfig, SearchEngine, add_questions, build_index,
                        compact, delete_questions)
from cqa_search.analysis import Analyzer
from cqa_search.exceptions import ParameterError, QueryError
from cqa_search.index.term_index import PARTS as SOURCES, TermIndexBuilder, combine_fields
from cqa_search.retrieval import BM25, BM25F, make_model, parse_field_weights, parse_model, top_k
from cqa_search.retrieval.candidates import top_k_of_model
from cqa_search.retrieval.first_stage import hybrid_capable

FIELDS = ("question", "title", "answers")
PARTS = tuple(SOURCES)  # title, body, answers


def make_index(docs):
    """A TermIndex of question, title and answers over token lists: ``docs`` are
    ``(title, body, answers)`` triples (each token a term; "-" an empty text)."""
    analyzer = Analyzer(stopwords=["-"], stem=None, token_pattern=r"\S+")
    builder = TermIndexBuilder(analyzer, fields=FIELDS)
    for i, (title, body, answers) in enumerate(docs):
        builder.add(Question(f"d{i}", " ".join(title) or "-", " ".join(body) or "-",
                             answers=(" ".join(answers) or "-",)))
    return builder.build()


def query_arrays(index, tokens):
    ids = [index.vocab.id(t) for t in tokens if index.vocab.id(t) >= 0]
    uniq, counts = np.unique(np.array(ids, dtype=np.int64), return_counts=True)
    return uniq, counts.astype(float)


def naive_bm25f(docs, query, weights, b, k1):
    """The definition, one document and one query term at a time (``weights`` and ``b``:
    part -> value)."""
    n = len(docs)
    parts = [p for p in PARTS if weights[p] > 0]
    avg = {p: sum(len(d[i]) for d in docs) / n for i, p in enumerate(PARTS)}

    def holds(d, t, names):
        return any(t in d[PARTS.index(p)] for p in names)

    out = []
    for d in docs:
        score = 0.0
        for t, qtf in Counter(query).items():
            question_parts = [p for p in parts if p != "answers"]
            # the document frequency of the combined field (combine_fields)
            df_q = sum(holds(x, t, ["title"] if question_parts == ["title"]
                             else ["title", "body"]) for x in docs)
            df_a = sum(holds(x, t, ["answers"]) for x in docs)
            df = max(df_q if question_parts else 0, df_a if "answers" in parts else 0)
            tf = 0.0
            for i, p in enumerate(PARTS):
                count = d[i].count(t)
                if weights[p] > 0 and count:
                    tf += weights[p] * count / (1 - b[p] + b[p] * len(d[i]) / avg[p])
            if tf > 0:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += qtf * idf * tf / (k1 + tf)
        out.append(score)
    return np.array(out)


DOCS = [
    ("what is a qubit".split(), "a qubit is a two level system".split(), "qubit".split()),
    ("qubit gates".split(), "qubit qubit qubit qubit gates on a qubit".split(), []),
    ("entanglement".split(), "two qubit entanglement".split(), "a qubit pair".split()),
    ([], "noise".split(), "qubit noise qubit".split()),
    ("what is noise".split(), [], []),
]


def bm25f(weights, b, k1):
    return BM25F(**weights, k1=k1, **{f"b_{p}": v for p, v in b.items()})


tokens = st.lists(st.sampled_from("abcd"), max_size=5)
weights = st.fixed_dictionaries({p: st.sampled_from([0.0, 0.5, 1.0, 2.5]) for p in PARTS}) \
    .filter(lambda w: any(w.values()))
norms = st.fixed_dictionaries({p: st.sampled_from([0.0, 0.3, 0.75, 1.0]) for p in PARTS})


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(st.tuples(tokens, tokens, tokens), min_size=1, max_size=7),
       query=st.lists(st.sampled_from("abcde"), min_size=1, max_size=5),
       weights=weights, b=norms, k1=st.sampled_from([0.3, 1.2, 2.0]), k=st.integers(1, 4),
       seed=st.integers(0, 1000))
def test_bm25f_matches_the_definition(docs, query, weights, b, k1, k, seed):
    """Property: every scoring path (all documents from the posting weights, given rows,
    the pruned top k) equals the double loop, and "matched" means holding a query term in
    a weighted part."""
    index = make_index(docs)
    model = bm25f(weights, b, k1)
    field = model.field_index(index)
    ids, qtf = query_arrays(index, query)
    expected = naive_bm25f(docs, query, weights, b, k1)
    scores, matched = model.score_all(field, ids, qtf)
    np.testing.assert_allclose(scores, expected, rtol=1e-6, atol=1e-9)  # float32 weights
    holding = [any(t in d[PARTS.index(p)] for t in query for p in PARTS if weights[p] > 0)
               for d in docs]
    assert matched.tolist() == holding
    rows = np.random.default_rng(seed).permutation(len(docs))[:3]
    np.testing.assert_allclose(model.score_rows(field, ids, qtf, rows), expected[rows],
                               rtol=1e-12, atol=1e-12)
    found, got = top_k_of_model(model, field, ids, qtf, k)
    want = top_k(scores, k, allowed=matched)
    assert found.tolist() == want.tolist() and got.tolist() == scores[want].tolist()


@settings(max_examples=60, deadline=None)
@given(docs=st.lists(st.tuples(tokens, tokens, tokens), min_size=1, max_size=7),
       query=st.lists(st.sampled_from("abcde"), min_size=1, max_size=5),
       k1=st.sampled_from([0.3, 1.2, 2.0]), b=st.sampled_from([0.0, 0.4, 0.75, 1.0]))
def test_one_weighted_field_is_bm25(docs, query, k1, b):
    """Property: BM25F of one part (weight 1) is BM25 of that field; of the title and the
    body without length normalisation, BM25 of the question without it."""
    index = make_index(docs)
    ids, qtf = query_arrays(index, query)
    pairs = [(BM25F(title=1.0, body=0.0, k1=k1, b_title=b), BM25(field="title", k1=k1, b=b)),
             (BM25F(title=0.0, body=0.0, answers=1.0, k1=k1, b_answers=b),
              BM25(field="answers", k1=k1, b=b)),
             (BM25F(title=1.0, body=1.0, k1=k1, b_title=0.0, b_body=0.0),
              BM25(field="question", k1=k1, b=0.0))]
    for fielded, plain in pairs:
        got, got_matched = fielded.score_all(fielded.field_index(index), ids, qtf)
        want, want_matched = plain.score_all(index[plain.field], ids, qtf)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
        assert got_matched.tolist() == want_matched.tolist()
        rows = np.arange(len(docs))
        np.testing.assert_allclose(
            fielded.score_rows(fielded.field_index(index), ids, qtf, rows),
            plain.score_rows(index[plain.field], ids, qtf, rows), rtol=1e-12, atol=1e-12)


def test_a_title_match_outweighs_a_body_that_repeats_the_word():
    """The issue's case in small: BM25 on the question saturates on the question that says
    "qubit" five times; BM25F (title weight 2) ranks the question titled with the query
    first."""
    index = make_index(DOCS)
    ids, qtf = query_arrays(index, "what is a qubit".split())
    plain, _ = BM25().score_all(index["question"], ids, qtf)
    fielded, _ = BM25F().score_all(BM25F().field_index(index), ids, qtf)
    assert np.argmax(fielded) == 0
    np.testing.assert_allclose(fielded, naive_bm25f(DOCS, "what is a qubit".split(),
                                                     {"title": 2, "body": 1, "answers": 0},
                                                     dict.fromkeys(PARTS, 0.75), 1.2),
                               rtol=1e-6)
    assert plain[0] > 0 and fielded[0] / fielded[1] > plain[0] / plain[1]


def test_combined_postings():
    index = make_index(DOCS)
    question = index["question"]
    title_body = combine_fields(index, ["body", "title"])  # any order: PARTS order
    assert title_body.parts == ("title", "body") and title_body.name == "title+body"
    # the question's own postings (and posting weights), counts split by part
    assert title_body.indices is question.indices and title_body._derived is question._derived
    np.testing.assert_array_equal(title_body.counts.sum(axis=1), question.counts)
    np.testing.assert_array_equal(title_body.part_len.sum(axis=1), question.doc_len)
    assert combine_fields(index, ["title", "body"]) is title_body  # made once
    np.testing.assert_array_equal(title_body.stats.df, question.stats.df)
    # with the answers: the union of the postings; df the larger of the two
    every = combine_fields(index, PARTS)
    qubit = index.vocab.id("qubit")
    rows = every.indices[every.indptr[qubit]:every.indptr[qubit + 1]]
    assert rows.tolist() == [0, 1, 2, 3]  # row 3 holds it in its answers only
    counts = every.counts[every.indptr[qubit]:every.indptr[qubit + 1]]
    assert counts.tolist() == [[1, 1, 1], [1, 5, 0], [0, 1, 1], [0, 0, 2]]
    assert every.stats.df[qubit] == 3  # max(3 questions, 3 answers): 4 hold it
    # the body alone: no posting of a word of the title only
    body = combine_fields(index, ["body"])
    what = index.vocab.id("what")
    assert body.indptr[what + 1] == body.indptr[what]
    np.testing.assert_array_equal(body.part_len[:, 0],
                                  question.doc_len - index["title"].doc_len)


def test_combined_postings_refuse_what_they_cannot_combine():
    index = make_index(DOCS)
    with pytest.raises(ParameterError, match=r"parts must be distinct names among "
                                             r"\{title, body, answers\}; got \['title', 'tags'\]"):
        combine_fields(index, ["title", "tags"])
    with pytest.raises(ParameterError, match="parts must be distinct"):
        combine_fields(index, [])
    no_title = {"question": index["question"], "answers": index["answers"]}
    with pytest.raises(QueryError, match="read from the field 'title', which this index lacks "
                                         r"\(fields: question, answers\)"):
        combine_fields(no_title, ["title", "body"])
    # an analyzer whose tokens span the title and the body: a title term no question has
    builder = TermIndexBuilder(Analyzer(stopwords=None, stem=None, token_pattern=r"[^,]+"),
                               fields=FIELDS)
    builder.add(Question("a", "renew visa", "at the office"))
    with pytest.raises(ParameterError, match="the terms of the title field are not all terms "
                                             "of the question field"):
        combine_fields(builder.build(), ["title", "body"])


def test_parameters():
    model = parse_model("bm25f:title=2,body=1,answers=0.5,k1=1.2")
    assert model == BM25F(answers=0.5) and model.parts == PARTS
    assert model.field == "question" and model.feature_name == "bm25f"
    assert model.index_fields == ("question", "title", "answers")
    assert make_model("bm25f", title=0.0, body=0.0, answers=1.0).field == "answers"
    assert BM25F(body=0.0).index_fields == ("title",)
    assert hybrid_capable(BM25F())  # sums of positive posting weights
    assert BM25F().cache_key() == \
        "bm25f(answers=0.0,b_answers=0.75,b_body=0.75,b_title=0.75,body=1.0,k1=1.2,title=2.0)"
    with pytest.raises(ParameterError, match="must be finite and at least one above 0; got "
                                             "0, 0, 0.0"):
        parse_model("bm25f:title=0,body=0")
    with pytest.raises(ParameterError, match="must be finite"):
        BM25F(title=math.inf).cache_key()
    with pytest.raises(ParameterError, match=r"b_body must be a number in \[0, 1\]; got 1.5"):
        parse_model("bm25f:b_body=1.5")
    with pytest.raises(ParameterError, match=r"title must be a number in \[0, inf\); got -1"):
        parse_model("bm25f:title=-1")
    with pytest.raises(ParameterError, match="bm25f weighs its fields itself .* and takes no "
                                             "field; got field 'answers'"):
        make_model("answers-bm25f")
    with pytest.raises(ParameterError, match="takes no field; got field 'title'"):
        parse_model("bm25f:field=title")
    assert make_model("answers_bm25").field == "answers"  # one-field models as before


def test_field_weights_option():
    assert parse_field_weights("title=2,body=1,answers=0.5") == \
        {"title": 2.0, "body": 1.0, "answers": 0.5}
    assert parse_field_weights(" title = 3 ") == {"title": 3.0, "body": 0.0, "answers": 0.0}
    for bad in ("title", "title=x", "title=-1", "tags=1", "title=1,title=2", "title=inf"):
        with pytest.raises(ParameterError, match="field weights are part=weight, parts among "
                                                 r"\{title, body, answers\} \(each once\)"):
            parse_field_weights(bad)
    for bad in ("", "title=0"):
        with pytest.raises(ParameterError, match="at least one field weight must be above 0"):
            parse_field_weights(bad)


# -- in the engine ---------------------------------------------------------------------------
CONFIG = SearchConfig(retrieval=BM25F(), features=(BM25F(answers=0.5), BM25()), ranker=None,
                      hybrid=None)
QUERIES = ["what is a qubit", "qubit noise", "entanglement pair", "gates gates qubit"]


def archive(docs=DOCS, start=0):
    return [Question(f"q{start + i}", " ".join(t), " ".join(b), answers=(" ".join(a),)
                     if a else ()) for i, (t, b, a) in enumerate(docs)]


def test_search_with_bm25f(tmp_path):
    """The engine's candidates and features of BM25F are the model's scores of the stored
    index; the feature of the answers' union is the double loop's."""
    build_index(archive(), tmp_path / "idx")
    engine = SearchEngine.open(tmp_path / "idx", config=CONFIG)
    assert engine.feature_names[:2] == ("bm25f", "bm25")
    for text in QUERIES:
        res = engine.rerank(text, k=None)
        tokens = engine.analyzer.analyze(text)
        # the default analyzer stems and drops stopwords: the oracle reads its terms
        terms = [[engine.analyzer.analyze(" ".join(part)) for part in d] for d in DOCS]
        terms = [tuple(sum((engine.analyzer.analyze(w) for w in part), []) for part in d)
                 for d in DOCS]
        expected = naive_bm25f(terms, tokens, {"title": 2, "body": 1, "answers": 0},
                               dict.fromkeys(PARTS, 0.75), 1.2)
        rows = [int(d[1:]) for d in res.doc_ids]
        np.testing.assert_allclose(res.scores, expected[rows], rtol=1e-6)
        assert sorted(rows) == [i for i in range(len(DOCS)) if expected[i] > 0]
        with_answers = naive_bm25f(terms, tokens, {"title": 2, "body": 1, "answers": 0.5},
                                   dict.fromkeys(PARTS, 0.75), 1.2)
        np.testing.assert_allclose(res.features[:, 0], with_answers[rows], rtol=1e-9)


@pytest.mark.parametrize("steps", [["add", "delete", "compact"], ["delete", "add"]])
def test_live_changes_score_as_a_rebuild(tmp_path, steps):
    path = tmp_path / "idx"
    build_index(archive(DOCS[:3]), path)
    more = archive(DOCS[3:] + [("a qubit".split(), "noise noise".split(), "gates".split())],
                   start=3)
    for step in steps:
        if step == "add":
            add_questions(path, more)
        elif step == "delete":
            delete_questions(path, ["q1"])
        else:
            compact(path)
        engine = SearchEngine.open(path, config=CONFIG)
        live = [engine.archive[r] for r in range(engine.n_docs)
                if engine.searcher.data.live is None or engine.searcher.data.live[r]]
        build_index(live, tmp_path / f"rebuilt-{step}")
        rebuilt = SearchEngine.open(tmp_path / f"rebuilt-{step}", config=CONFIG)
        for text in QUERIES:  # every hit: scores and features
            got, want = engine.rerank(text, k=None), rebuilt.rerank(text, k=None)
            assert got.doc_ids == want.doc_ids
            np.testing.assert_allclose(np.column_stack([got.scores, got.features]),
                                       np.column_stack([want.scores, want.features]),
                                       rtol=1e-9, atol=1e-12)


def test_an_index_without_titles(tmp_path):
    build_index(archive(), tmp_path / "idx", fields=("question", "answers"))
    with pytest.raises(QueryError, match="uses field 'title', which this index lacks"):
        SearchEngine.open(tmp_path / "idx", config=SearchConfig(retrieval=BM25F()))
    engine = SearchEngine.open(tmp_path / "idx", config=CONFIG.__class__(
        features=(BM25F(), BM25()), ranker=None))
    assert engine.feature_names[0] == "bm25"  # a feature of a field the index lacks: left out
    # BM25F of the answers alone needs no title
    answers = SearchConfig(retrieval=BM25F(title=0.0, body=0.0, answers=1.0), features=(),
                           ranker=None)
    res = SearchEngine.open(tmp_path / "idx", config=answers).search("pair")
    assert res.doc_ids == ("q2",) and res.field == "answers"


def test_words_only_in_the_answers_fall_back_to_bm25_of_the_answers(tmp_path):
    build_index(archive(), tmp_path / "idx")
    config = SearchConfig(retrieval=BM25F(k1=0.9, b_answers=0.4), features=(), ranker=None)
    res = SearchEngine.open(tmp_path / "idx", config=config).search("pair")
    plain = SearchEngine.open(tmp_path / "idx", config=SearchConfig(
        retrieval=BM25(field="answers", k1=0.9, b=0.4), features=(), ranker=None))
    assert res.field == "answers" and res.doc_ids == ("q2",)
    assert res.scores.tolist() == plain.search("pair").scores.tolist()
    # with the answers weighed, they were searched already: no second search
    assert BM25F(answers=0.5).on_field("answers") is None
    assert BM25F().on_field("title") is None


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=st.sampled_from([0.3, 0.7]))
def test_hybrid_first_stage_with_bm25f(vectors_index, a):
    """The hybrid stage over BM25F: its candidates are the whole archive's best by the
    hybrid formula with BM25F as the term part."""
    from cqa_search.retrieval.hybrid import hybrid_scores

    engine = SearchEngine.open(vectors_index, config=SearchConfig(retrieval=BM25F(),
                                                                  ranker=None, hybrid=a))
    model = BM25F()
    for text in ["my car battery keeps dying overnight", "cheap flights to europe"]:
        res = engine.search(text, k=10)
        q = engine.analyze(text)
        term, matched = model.score_all(model.field_index(engine.index), q.term_ids, q.qtf)
        dense = engine.searcher._dense.vectors @ engine.searcher._dense.query_vector(q)
        s = hybrid_scores(term, dense, a, term[matched].max())
        want = top_k(s, 10, tie_rank=engine.searcher.data.doc_id_rank)
        assert list(res.doc_ids) == [engine.archive.doc_ids[r] for r in want.tolist()]
        assert res.first_stage.term_model == "bm25f"
        np.testing.assert_allclose(res.scores, s[want], rtol=1e-5, atol=1e-7)
