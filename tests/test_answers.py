"""Best-answer selection: features against a naive oracle, the estimator contract, storage
in an index, the shown answer, supervised and transferred rankers, hygiene, and the CLI."""
import collections
import math
import re

import numpy as np
import pytest
from sklearn.base import clone

import cqa_search.answers as answers_module
from cqa_search import Question, SearchEngine, build_index
from cqa_search.answers import (FEATURE_NAMES, UNSUPERVISED_WEIGHTS, AnswerSelector,
                                answer_features, chosen_answer, labels_from_qrels)
from cqa_search.cli.__main__ import main
from cqa_search.index.models import add_model
from cqa_search.exceptions import ArchiveError, NotFittedError
from cqa_search.readers import read_questions

QUESTIONS = [
    Question("q1", "How do I renew my residence visa?", "It expires next month in Doha.",
             answers=("thanks for the help", "Go to the immigration office with your passport "
                      "to renew the residence visa.", "Why not ask your company?"),
             extra={"user_id": "u1", "answer_user_ids": ["u1", "u2", "u3"],
                    "answer_ids": ["q1_C1", "q1_C2", "q1_C3"]}),
    Question("q2", "Cheap second hand sofa", "Where can I buy furniture on a budget?",
             answers=("The Friday market sells used furniture and sofas cheap.", "lol",
                      "Check the classifieds, people leaving sell sofas."),
             extra={"user_id": "u4", "answer_user_ids": ["u5", "u4", "u6"]}),
    Question("q3", "Best beach near Doha", answers=("Fuwairit beach, 75 km north of Doha.",)),
    Question("q4", "Any good vet for my cat?", "My cat is old and sick."),
    Question("q5", "Visa renewal fee", "How much is the residence visa renewal?",
             answers=("The fee is 500 riyals at the immigration office.", "no idea sorry?"),
             best_answer=0),
    Question("q6", "Driving licence transfer", "Can I transfer my licence to Qatar?",
             answers=("Yes, at the traffic department with an eye test.",
                      "I did it last year, took one day at the traffic department.")),
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("answers") / "idx"
    build_index(QUESTIONS, path)
    return SearchEngine.open(path)


@pytest.fixture(scope="module")
def fitted(engine):
    """The unsupervised default (it reads no translation feature: no table is trained)."""
    return AnswerSelector(random_state=0).fit(engine.view)


@pytest.fixture(scope="module")
def translated(engine):
    """A selector whose ranker reads the translation feature (so it has a table)."""
    return AnswerSelector(unsupervised_weights={"translation": 1.0}, tol=None,
                          max_iter=3).fit(engine.view)


def naive_features(engine, model, row, k):
    """The features of answer k of row by the formulas of the module docstring."""
    view, lam = engine.view, model.lam
    vocab, analyzer = view.index.vocab, view.analyzer
    question = view.archive[row]
    q = [t for t in vocab.ids(analyzer.analyze(question.text)) if t >= 0]
    a = [t for t in vocab.ids(analyzer.analyze(question.answers[k])) if t >= 0] \
        if analyzer.analyze(question.answers[k]) else []
    cq, ca = collections.Counter(q), collections.Counter(a)
    table = model.ibm1_.translation_probs_.toarray()
    field = view.index["answers"]
    total = field.stats.total_terms
    bg = np.where(field.stats.collection_prob > 0, field.stats.collection_prob, 0.5 / total)
    df, n = field.stats.df, field.stats.n_docs
    idf = np.where(df > 0, np.log1p((n - df + 0.5) / (df + 0.5)), 0.0)
    la, lq = max(len(a), 1), max(len(q), 1)
    tr = sum(c * math.log((1 - lam) * sum(ca[t] * table[1 + t, w] for t in ca) / la
                          + lam * bg[w]) for w, c in cq.items()) / lq
    inv = (sum(c * math.log((1 - lam) * sum(cq[w] * table[1 + w, t] for w in cq) / lq
                            + lam * bg[t]) for t, c in ca.items()) / len(a)
           if a else math.log(lam * bg.min()))
    lm = sum(c * math.log((1 - lam) * ca[w] / la + lam * bg[w]) for w, c in cq.items()) / lq
    avgdl = model.avg_answer_length_
    bm25 = sum(c * idf[w] * ca[w] / (ca[w] + model.k1 * (1 - model.b + model.b * len(a) / avgdl))
               for w, c in cq.items())
    vq = {w: c * idf[w] for w, c in cq.items()}
    va = {t: c * idf[t] for t, c in ca.items()}
    nq, na = math.sqrt(sum(v * v for v in vq.values())), math.sqrt(sum(v * v for v in va.values()))
    cos = sum(vq[w] * va.get(w, 0) for w in vq) / (nq * na) if nq and na else 0.0
    authors = question.extra.get("answer_user_ids") or [None] * len(question.answers)
    asker = float(authors[k] is not None and authors[k] == question.extra.get("user_id"))
    return [tr, inv, lm, bm25, cos, math.log1p(len(a)), math.log1p(k), asker,
            float("?" in question.answers[k])]


def test_features_match_the_naive_formulas(engine, fitted, translated, monkeypatch):
    X, row, position = answer_features(engine.view, translated)
    assert X.shape == (sum(len(q.answers) for q in QUESTIONS), len(FEATURE_NAMES))
    expected = np.array([naive_features(engine, translated, r, k)
                         for r, k in zip(row, position)])
    np.testing.assert_allclose(X, expected, rtol=1e-6, atol=1e-9)
    # without a translation table: the same features, translation columns NaN
    assert fitted.ibm1_ is None and translated.ibm1_ is not None
    plain = answer_features(engine.view, fitted)[0]
    assert np.isnan(plain[:, :2]).all()
    np.testing.assert_allclose(plain[:, 2:], X[:, 2:], rtol=1e-12)
    # tiny chunks: the same features
    monkeypatch.setattr(answers_module, "_CHUNK_CELLS", 7)
    np.testing.assert_allclose(answer_features(engine.view, translated)[0], X, rtol=1e-12)
    # a subset of rows: the same rows of the matrix
    sub, sub_row, _ = answer_features(engine.view, translated, [4, 1])
    assert sub_row.tolist() == [4, 4, 1, 1, 1]
    np.testing.assert_allclose(sub, np.vstack([X[row == 4], X[row == 1]]), rtol=1e-12)


def test_features_match_the_naive_formulas_on_the_demo(tmp_path):
    """Other smoothing and BM25 parameters, on part of the demo archive."""
    from cqa_search.data import DEMO_ARCHIVE, demo_dir

    build_index(demo_dir() / DEMO_ARCHIVE, tmp_path / "demo")
    engine = SearchEngine.open(tmp_path / "demo")
    model = AnswerSelector(unsupervised_weights={"translation": 1.0}, lam=0.5, k1=2.0, b=0.5,
                           tol=None, max_iter=3).fit(engine.view)
    X, row, position = answer_features(engine.view, model, np.arange(0, 327, 23))
    expected = np.array([naive_features(engine, model, r, k) for r, k in zip(row, position)])
    assert len(X) > 20 and (X[:, FEATURE_NAMES.index("bm25")] > 0).sum() > 10
    np.testing.assert_allclose(X, expected, rtol=1e-6, atol=1e-9)


def test_unsupervised_choice(engine, fitted):
    assert fitted.mode_ == "unsupervised" and fitted.train_score_ is None
    assert fitted.choice_.dtype == np.int32 and fitted.choice_.shape == (engine.n_docs,)
    # q1: not the asker's thanks nor the question back; q2: not the asker's "lol";
    # q4 has no answers
    assert fitted.choice_.tolist()[:4] == [1, 0, 0, -1]
    coef = dict(zip(fitted.ranker_.feature_names_in_, fitted.ranker_.coef_))
    assert coef == UNSUPERVISED_WEIGHTS
    X, row, position = answer_features(engine.view, fitted)
    scores = fitted.decision_function(X)
    for r in range(engine.n_docs):
        mine = scores[row == r]
        if len(mine):
            assert fitted.choice_[r] == position[row == r][np.argmax(mine)]
            np.testing.assert_allclose(fitted.score_answers(engine.view, r), mine)


def test_ties_choose_the_earlier_answer(engine):
    model = AnswerSelector(unsupervised_weights={"by_asker": -1.0}).fit(engine.view)
    # only q1's and q2's first/second answers are by their askers: everything else ties
    assert model.choice_.tolist() == [1, 0, 0, -1, 0, 0]


def test_a_new_question_is_scored_like_an_archived_one(engine, fitted):
    question = engine.archive[1]
    np.testing.assert_allclose(fitted.score_answers(engine.view, question),
                               fitted.score_answers(engine.view, 1))
    assert fitted.select(engine.view, question) == fitted.choice_[1]
    assert fitted.select(engine.view, Question("new", "no answers here")) == -1


def test_estimator_contract(engine, fitted, translated):
    params = fitted.get_params()
    assert params["lam"] == 0.2 and params["learner"] == "ranksvm"
    assert clone(fitted).get_params() == params and not hasattr(clone(fitted), "choice_")
    with pytest.raises(NotFittedError, match="not fitted yet"):
        AnswerSelector().score_answers(engine.view, 0)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        AnswerSelector().decision_function(np.zeros((1, len(FEATURE_NAMES))))
    for bad, message in [({"lam": 0}, r"lam must be a number in \(0, 1\]; got 0"),
                         ({"learner": "svm"}, "learner must be {'powell'"),
                         ({"features": ("lm", "nope")}, "features must be None or distinct"),
                         ({"unsupervised_weights": {"lm": "high"}},
                          "unsupervised_weights must be None or a non-empty dict"),
                         ({"features": ("cosine",), "unsupervised_weights": {"lm": 1.0}},
                          "the unsupervised scorer needs one of the features")]:
        with pytest.raises(ValueError, match=message):
            AnswerSelector(**bad).fit(engine.view, translation=translated.ibm1_)
    with pytest.raises(ValueError, match="not both"):
        AnswerSelector().fit(engine.view, {"q1": [0, 1, 0]}, ranker=fitted.ranker_)


def labels():
    return {"q1": [0, 1, 0], "q2": [1, 0, 1], "q6": [1, None]}


def test_supervised_fit_is_seeded_and_checks_labels(engine, translated):
    a = AnswerSelector(learner="powell", random_state=3).fit(
        engine.view, labels(), translation=translated.ibm1_)
    b = AnswerSelector(learner="powell", random_state=3).fit(
        engine.view, labels(), translation=translated.ibm1_)
    assert a.mode_ == "supervised" and 0 <= a.train_score_ <= 1
    np.testing.assert_array_equal(a.ranker_.coef_, b.ranker_.coef_)
    assert a.choice_[0] == 1 and a.choice_[3] == -1
    for y, message in [({"zz": [1]}, "the labels name question 'zz', which is not in"),
                       ({"q1": [1, 0]}, "gives 2 labels for question 'q1', which has 3"),
                       ({"q1": [None, None, None]}, "labels none of the archive's answers"),
                       ([1, 0], "y must map question ids")]:
        with pytest.raises(ValueError, match=message):
            AnswerSelector().fit(engine.view, y, translation=translated.ibm1_)


def test_labels_from_qrels(engine):
    y = labels_from_qrels(engine.archive, {"q1": {"q1_C2": 1, "q1_C1": 0}, "q2": {"2": 1}})
    assert y == {"q1": [0, 1, None], "q2": [None, None, 1]}
    with pytest.raises(ArchiveError, match="answer 'q1_C9' of question 'q1', which has 3"):
        labels_from_qrels(engine.archive, {"q1": {"q1_C9": 1}})
    with pytest.raises(ArchiveError, match="name question 'nope', which is not in the"):
        labels_from_qrels(engine.archive, {"nope": {"0": 1}})


def test_stored_in_the_index(engine, fitted, translated, tmp_path):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    supervised = AnswerSelector(random_state=0).fit(engine.view, labels(),
                                                    translation=translated.ibm1_)
    add_model(path, "answers", fitted)
    add_model(path, "supervised", supervised)
    reopened = SearchEngine.open(path)
    for name, model in (("answers", fitted), ("supervised", supervised)):
        stored = reopened.models[name]
        assert isinstance(stored, AnswerSelector) and stored.get_params() == model.get_params()
        np.testing.assert_array_equal(stored.choice_, model.choice_)
        assert stored.mode_ == model.mode_ and stored.n_answers_ == model.n_answers_
        assert (stored.ibm1_ is None) == (model.ibm1_ is None)
        for r in (0, 1, 5):
            np.testing.assert_allclose(stored.score_answers(reopened.view, r),
                                       model.score_answers(engine.view, r))
    # the engine searches as before: the selector adds no feature and is no ranker
    assert reopened.feature_names == engine.feature_names
    assert reopened.search("visa renewal").doc_ids == engine.search("visa renewal").doc_ids


def test_chosen_answer(engine, fitted, tmp_path):
    assert chosen_answer(engine, 0, fitted).text.startswith("Go to the immigration office")
    assert chosen_answer(engine, 0, fitted).source == "model"
    marked = chosen_answer(engine, 4, fitted)          # the archive marks q5's best answer
    assert (marked.index, marked.source) == (0, "marked")
    assert chosen_answer(engine, 3, fitted) is None     # no answers
    assert chosen_answer(engine, 1).source == "first"   # no model in this index
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    add_model(path, "best", fitted)
    stored = SearchEngine.open(path)
    assert chosen_answer(stored, 0, name="best") == chosen_answer(engine, 0, fitted)
    # an index that changed since the fit: the choice is computed, not read
    bigger = tmp_path / "bigger"
    build_index([*QUESTIONS, Question("q7", "lost cat", answers=("?", "check the shelter"))],
                bigger)
    grown = SearchEngine.open(bigger)
    assert chosen_answer(grown, 0, fitted).index == 1
    assert chosen_answer(grown, 6, fitted).index == fitted.select(grown.view, 6) == 1


def test_a_grown_vocabulary_keeps_the_table_usable(engine, translated, tmp_path):
    """New terms (ids after the fitted vocabulary) have no translations; a smaller
    vocabulary is another index."""
    bigger = tmp_path / "bigger"
    build_index([*QUESTIONS, Question("q7", "lost cat zebra", answers=("zebra shelter",))],
                bigger)
    grown = SearchEngine.open(bigger).view
    assert len(grown.index.vocab) > translated.ibm1_.n_terms_
    # (the background statistics of the grown index differ a little)
    np.testing.assert_allclose(translated.score_answers(grown, 0),
                               translated.score_answers(engine.view, 0), rtol=0.05)
    assert np.isfinite(translated.score_answers(grown, 6)).all()
    smaller = tmp_path / "smaller"
    build_index(QUESTIONS[:2], smaller)
    with pytest.raises(ValueError, match="fitted on a vocabulary of"):
        translated.score_answers(SearchEngine.open(smaller).view, 0)


def test_ranker_transferred_to_another_archive(engine, translated, tmp_path):
    trained = AnswerSelector(learner="ranksvm", random_state=0).fit(
        engine.view, labels(), translation=translated.ibm1_)
    other = tmp_path / "other"
    build_index(QUESTIONS[::-1], other)
    view = SearchEngine.open(other).view
    moved = AnswerSelector(tol=None, max_iter=3).fit(view, ranker=trained.ranker_)
    assert moved.mode_ == "transferred" and moved.ranker_ is trained.ranker_
    assert moved.ibm1_ is not None      # the ranker reads translation features
    X, row, position = answer_features(view, moved)
    np.testing.assert_allclose(moved.decision_function(X), trained.ranker_.predict(X))
    assert moved.choice_[view.archive.row("q1")] == 1


def test_comment_labels_never_reach_the_features(fixtures, tmp_path):
    """The same archive with and without SemEval's comment labels: same model, same choice."""
    questions = list(read_questions(fixtures / "semeval" / "sample-2016.xml"))
    assert any(q.extra.get("answer_labels") for q in questions)
    stripped = [Question(q.id, q.title, q.body, q.category, answers=q.answers,
                         extra={k: v for k, v in q.extra.items() if k != "answer_labels"})
                for q in questions]
    fits = []
    for name, archive in (("labelled", questions), ("stripped", stripped)):
        build_index(archive, tmp_path / name)
        view = SearchEngine.open(tmp_path / name).view
        model = AnswerSelector(tol=None, max_iter=2).fit(view)
        fits.append((model, answer_features(view, model)[0]))
    np.testing.assert_array_equal(fits[0][0].choice_, fits[1][0].choice_)
    np.testing.assert_array_equal(fits[0][1], fits[1][1])
    # the asker and the comment authors come through the reader
    assert questions[0].extra["answer_user_ids"] == ["U11", "U12"]


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_cli_fit_answers(capsys, tmp_path):
    train, other = tmp_path / "train", tmp_path / "other"
    build_index(QUESTIONS, train)
    build_index(QUESTIONS[:3], other)
    code, out, _ = run(capsys, "fit", train, "answers", "-q", "--max-iter", "2")
    assert code == 0 and "answers (answers)" in out and "mode         unsupervised" in out
    assert SearchEngine.open(train).models["answers"].mode_ == "unsupervised"
    qrels = tmp_path / "labels.qrels"
    qrels.write_text("q1 0 q1_C2 1\nq1 0 q1_C1 0\nq2 0 0 1\nq2 0 1 0\n", encoding="utf-8")
    code, out, _ = run(capsys, "fit", train, "answers", "-q", "--labels", qrels,
                       "--learner", "ranksvm", "--learner-params", '{"C": 0.5}', "--name",
                       "trained")
    assert code == 0 and "training MAP" in out
    stored = SearchEngine.open(train).models["trained"]
    assert stored.mode_ == "supervised" and stored.learner_params == {"C": 0.5}
    code, out, _ = run(capsys, "fit", other, "answers", "-q", "--ranker-from", train,
                       "--ranker-name", "trained")
    assert code == 0 and "mode         transferred" in out
    moved = SearchEngine.open(other).models["answers"]
    np.testing.assert_array_equal(moved.ranker_.coef_, stored.ranker_.coef_)


@pytest.mark.parametrize("extra, message", [
    (["--labels", "{tmp}/missing.qrels"], "no such qrels file"),
    (["--labels", "{tmp}/bad.qrels"], "answer 'q1_C7' of question 'q1'"),
    (["--ranker-from", "{index}", "--ranker-name", "nope"], "has no model 'nope'"),
    (["--translation", "nope"], "has no model 'nope'"),
])
def test_cli_fit_answers_errors(capsys, tmp_path, extra, message):
    index = tmp_path / "idx"
    build_index(QUESTIONS, index)
    (tmp_path / "bad.qrels").write_text("q1 0 q1_C7 1\n", encoding="utf-8")
    argv = [a.format(tmp=tmp_path, index=index) for a in extra]
    code, _, err = run(capsys, "fit", index, "answers", "-q", *argv)
    assert code == 1 and re.search(message, err), err


def test_cli_learner_params_must_be_a_json_object(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(tmp_path), "answers", "--learner-params", "[1]"])
    assert exc.value.code == 2
    assert "--learner-params: must be a JSON object; got '[1]'" in capsys.readouterr().err


def test_the_answer_shown_with_a_hit_is_the_selectors_choice(tmp_path):
    from cqa_search.presentation import Presenter

    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    engine = SearchEngine.open(path)
    hit = engine.search("renew my residence visa expires")[0]
    assert hit.doc_id == "q1" and Presenter(engine).answer(hit) == ("first answer",
                                                                   "thanks for the help")
    add_model(path, "answers", AnswerSelector(tol=None, max_iter=3).fit(engine.view))
    engine = SearchEngine.open(path)
    hit = engine.search("renew my residence visa expires")[0]
    label, text = Presenter(engine).answer(hit)
    assert label == "chosen answer" and text.startswith("Go to the immigration office")


def test_an_archive_without_answers_warns_that_there_is_none_to_choose(tmp_path):
    """Every family asked for an archive without answers (build-index --models ...): the
    answers model says it has nothing to choose instead of a silent empty fit."""
    build_index([Question("a", "renew my visa", "at the office"),
                 Question("b", "dog barks at night", "the neighbours complain")],
                tmp_path / "idx")
    with pytest.warns(UserWarning, match="the archive has no answers: the answers model has "
                                         "none to choose"):
        model = AnswerSelector().fit(SearchEngine.open(tmp_path / "idx").view)
    assert model.n_answers_ == 0 and (model.choice_ < 0).all()
