"""A live archive: add, delete, replace and compact score exactly as a rebuild would."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqa_search import (Question, SearchConfig, SearchEngine, add_questions, build_index,
                        compact, delete_questions)
from cqa_search.cli.__main__ import main
from cqa_search.cli.info import format_info
from cqa_search.exceptions import ArchiveError, IndexFormatError
from cqa_search.index.layout import SortedIds, doc_id_ranks
from cqa_search.index.live import index_info
from cqa_search.index.store import current_generation
from cqa_search.retrieval import BM25, VSM, LMDirichlet, LMJelinekMercer

WORDS = ["visa", "renew", "office", "car", "battery", "cheap", "sofa", "doha", "fee", "work",
         "permit", "engine", "morning", "shop", "beach"]
CONFIG = SearchConfig(retrieval=BM25(), features=(
    BM25(), LMJelinekMercer(), LMDirichlet(mu=20), VSM(),
    BM25(field="answers"), LMJelinekMercer(field="answers")))
QUERIES = ["visa renew", "cheap sofa shop", "car battery morning", "fee", "beach doha work"]


def question(i, words, answer_words, category):
    return Question(f"q{i:03d}", " ".join(words), answers=(" ".join(answer_words),)
                    if answer_words else (), category=category)


questions = st.builds(
    question, st.integers(0, 10**6),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.lists(st.sampled_from(WORDS), max_size=5),
    st.sampled_from([None, "Visas", "Cars", "Shopping"]))


def results(engine, k=None):
    out = []
    for text in QUERIES:
        res = engine.rerank(text, k=k)
        out.append((res.doc_ids, res.scores, res.features))
    return out


def assert_same(live_engine, rebuilt_engine):
    for (ids_a, sc_a, ft_a), (ids_b, sc_b, ft_b) in zip(results(live_engine),
                                                        results(rebuilt_engine)):
        assert ids_a == ids_b
        np.testing.assert_allclose(sc_a, sc_b, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ft_a, ft_b, rtol=1e-9, atol=1e-12)


def live_archive(engine):
    return [engine.archive[r] for r in range(engine.n_docs)
            if engine.searcher.data.live is None or engine.searcher.data.live[r]]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(first=st.lists(questions, min_size=1, max_size=8, unique_by=lambda q: q.id),
       steps=st.lists(st.tuples(st.sampled_from(["add", "replace", "delete", "compact"]),
                                st.lists(questions, min_size=1, max_size=5,
                                         unique_by=lambda q: q.id),
                                st.integers(0, 10**6)), min_size=1, max_size=5))
def test_any_sequence_of_changes_scores_as_a_rebuild(tmp_path_factory, first, steps):
    path = tmp_path_factory.mktemp("live") / "idx"
    build_index(first, path)
    for action, batch, seed in steps:
        engine = SearchEngine.open(path, config=CONFIG)
        live_ids = [q.id for q in live_archive(engine)]
        if action == "add":
            batch = [q for q in batch if q.id not in live_ids]
            if not batch:
                continue
            add_questions(path, batch)
        elif action == "replace":
            add_questions(path, batch, replace=True)
        elif action == "delete":
            rng = np.random.default_rng(seed)
            doomed = [d for d in live_ids if rng.random() < 0.4][:len(live_ids) - 1]
            if not doomed:
                continue
            delete_questions(path, doomed)
        else:
            compact(path)
        engine = SearchEngine.open(path, config=CONFIG)
        rebuilt = tmp_path_factory.mktemp("rebuilt") / "idx"
        build_index(live_archive(engine), rebuilt)
        assert_same(engine, SearchEngine.open(rebuilt, config=CONFIG))


@given(old=st.lists(st.text("abc", max_size=3)), new=st.lists(st.text("abc", max_size=3)))
def test_sorted_ids_find_rows_and_rank_new_ids_as_a_sort_of_all_ids(old, new):
    """An addition places the new ids among the ranks of the old ones (equal ids, as a
    replaced question's: in row order) exactly as ranking every id again would; an id's
    rows are found by binary search."""
    ids = SortedIds(old, doc_id_ranks(old))
    extended = ids.extended_ranks(new)
    assert extended.dtype == np.int32
    assert extended.tolist() == doc_id_ranks(old + new).tolist()
    for doc_id in set(old + new):
        assert ids.rows(doc_id) == [r for r, d in enumerate(old) if d == doc_id]


@pytest.fixture
def index(tmp_path, fixtures):
    path = tmp_path / "idx"
    lines = (fixtures / "toy_archive.jsonl").read_text().splitlines()
    (tmp_path / "first.jsonl").write_text("\n".join(lines[:9]) + "\n")
    (tmp_path / "more.jsonl").write_text("\n".join(lines[9:]) + "\n")
    build_index(tmp_path / "first.jsonl", path)
    return path


def test_add_delete_compact_from_the_command_line(index, tmp_path, capsys):
    more = tmp_path / "more.jsonl"
    assert main(["add", str(index), str(more), "-q"]) == 0
    assert "added      3 questions" in capsys.readouterr().out
    assert SearchEngine.open(index).search("swimming lessons").doc_ids == ("t10",)
    # the same ids again: refused with the id, unless --replace
    assert main(["add", str(index), str(more), "-q"]) == 1
    assert "question id 't10' is already in the index" in capsys.readouterr().err
    changed = tmp_path / "changed.jsonl"
    record = json.loads(more.read_text().splitlines()[0])
    record["answers"] = ["The city pool has adult classes on Fridays."]
    changed.write_text(json.dumps(record) + "\n")
    assert main(["add", str(index), str(changed), "--replace", "-q"]) == 0
    engine = SearchEngine.open(index)
    assert engine.search("swimming").doc_ids == ("t10",)
    assert engine.archive.get("t10").answers == ("The city pool has adult classes on Fridays.",)
    assert main(["delete", str(index), "t10", "t01"]) == 0
    assert SearchEngine.open(index).search("swimming").doc_ids == ()
    assert main(["delete", str(index), "t10"]) == 1
    assert "the index has no question 't10'" in capsys.readouterr().err
    assert main(["info", str(index)]) == 0
    out = capsys.readouterr().out
    assert "questions  10 (3 deleted rows until `cqa-search compact`)" in out
    assert main(["compact", str(index)]) == 0
    info = index_info(index)
    assert info["questions"] == 10 and info["rows"] == 10 and len(info["segments"]) == 1


def test_models_follow_additions_and_compaction(tmp_path):
    from cqa_search.data import DEMO_ARCHIVE, demo_dir
    from cqa_search.factorization import MultiViewModel, TopicModel
    from cqa_search.index.models import add_model
    from cqa_search.translation import FEATURE_NAMES as FEATURES
    from cqa_search.translation import TranslationModel

    lines = (demo_dir() / DEMO_ARCHIVE).read_text().splitlines()
    path = tmp_path / "idx"
    build_index([Question.from_dict(json.loads(x)) for x in lines[:300]], path)
    engine = SearchEngine.open(path)
    add_model(engine, "translation", TranslationModel(max_iter=2).fit(engine.view))
    engine = SearchEngine.open(path)
    add_model(engine, "topics", TopicModel(n_shared=3, n_category=2, max_iter=10).fit(
        engine.view))
    add_model(engine, "multiview", MultiViewModel("ibm1", n_components=4, max_iter=10).fit(
        engine.view))
    small = SearchEngine.open(path)
    add_questions(path, [Question.from_dict(json.loads(x)) for x in lines[300:]])
    info = index_info(path)["models"]
    assert info["topics"]["added_since"] == 27 and info["translation"]["deleted_since"] == 0
    shown = format_info({**index_info(path), "models": {
        **info, "ranker": {**info["topics"], "kind": "ranker"}}})
    assert "topics (topics, fitted " in shown
    assert f"27 questions added since (refit with `cqa-search fit {path} topics --name " \
        "topics`)" in shown  # (its default name would be topics-gnmfnc)
    assert f"27 questions added since (retrain it with `cqa-search train {path} --queries Q " \
        "--qrels R`)" in shown
    assert info["multiview"]["refitted_since"] == []
    grown = SearchEngine.open(path)  # the new questions are folded into the models
    assert len(grown.index.vocab) > len(small.index.vocab)
    res = grown.search("my legs are sore after running", k=5)
    assert len(res) == 5 and np.isfinite(res.features).all()
    assert set(FEATURES) <= set(res.feature_names)
    # a question added after the fits is a hit, scored with its rows folded in
    added = [grown.archive.doc_ids[r] for r in grown.archive.rows(res.doc_ids) if r >= 300]
    assert added
    delete_questions(path, [grown.archive.doc_ids[5]])
    before = SearchEngine.open(path).search("my legs are sore after running", k=5)
    compact(path)
    after = SearchEngine.open(path)
    res_after = after.search("my legs are sore after running", k=5)
    assert res_after.doc_ids == before.doc_ids
    np.testing.assert_allclose(res_after.features, before.features, rtol=1e-5, atol=1e-6)
    assert after.models["topics"].n_docs_ == after.n_docs == 326
    assert set(added) <= set(res_after.doc_ids)  # its rows carried over by the compaction


def test_a_model_fitted_before_a_compaction_is_refused(index):
    from cqa_search.factorization import TopicModel
    from cqa_search.index.models import add_model

    engine = SearchEngine.open(index)
    model = TopicModel(n_shared=2, n_category=1, max_iter=3).fit(engine.view)
    delete_questions(index, ["t01"])
    compact(index)
    with pytest.raises(IndexFormatError, match="rebuilt or compacted while model 'topics'"):
        add_model(engine, "topics", model)


def test_bad_changes_are_clear_errors(index):
    with pytest.raises(ArchiveError, match="twice in the new questions"):
        add_questions(index, [Question("n1", "a"), Question("n1", "b")])
    with pytest.raises(ArchiveError, match="the index has no question 'nope'"):
        delete_questions(index, ["nope"])
    with pytest.raises(ArchiveError, match="doc_ids must be a list of ids, not one string"):
        delete_questions(index, "t01")
    summary = delete_questions(index, ["nope"], missing_ok=True)  # nothing to do: no commit
    assert summary.deleted == 0 and summary.generation == current_generation(index)
    with pytest.raises(ArchiveError, match="would leave an empty index"):
        delete_questions(index, [f"t0{i}" for i in range(1, 10)])
    generation = current_generation(index)
    assert generation == "gen-000001"  # nothing was written
    with pytest.raises(IndexFormatError, match="no index at"):
        add_questions(index.parent / "nothing", [Question("n1", "a")])
