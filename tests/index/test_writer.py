"""The write seam: the back-end chosen from the manifest, nested writers owned by the store,
and the rows of a model with a row per question kept where its questions are (stored,
added as runs, carried by a compaction)."""
import copy
import os

import numpy as np
import pytest

from cqa_search import Question, SearchEngine, add_questions, build_index, compact, \
    delete_questions
from cqa_search.exceptions import IndexFormatError, ParameterError
from cqa_search.index import model_files
from cqa_search.index.models import add_model, load_models, remove_model
from cqa_search.index.store import IndexWriter, open_index
from cqa_search.index.writer import LocalWriter, open_writer, writer_class

QUESTIONS = [Question(f"q{i}", title, f"body {i}") for i, title in enumerate(
    ["renew my visa", "cheap sofa", "car battery flat", "beach in doha", "work permit"])]
MORE = [Question("n1", "visa office hours", "when"), Question("n2", "sofa delivery", "how")]


class TitleLengths:
    """A model with a row per question that computes the rows of questions when they are
    added (what an encoder's vectors are): each question's title length."""

    kind = "title-lengths"
    row_arrays = ("lengths",)

    def __init__(self, *, scale=1):
        self.scale = scale

    def get_params(self, deep=True):
        return {"scale": self.scale}

    def fit(self, view):
        self.lengths_ = self._of([view.archive[r] for r in range(view.n_docs)])
        return self

    def _of(self, questions):
        return np.array([self.scale * len(q.title) for q in questions], dtype=np.int64)

    def state(self):
        return {}, {"lengths": self.lengths_, "shared": np.arange(3)}

    @classmethod
    def from_state(cls, params, meta, arrays):
        model = cls(**params)
        model.lengths_ = np.asarray(arrays["lengths"])
        return model

    def select_rows(self, view, rows):
        model = copy.copy(self)
        model.lengths_ = self.lengths_[np.asarray(rows)]
        return model

    def added_rows(self, questions):
        return {"lengths": self._of(questions)}


@pytest.fixture
def lengths_kind(monkeypatch):
    monkeypatch.setitem(model_files.MODEL_KINDS, TitleLengths.kind, TitleLengths)


def expected(path):
    """Title lengths of every row of the index at ``path`` (deleted ones included)."""
    engine = SearchEngine.open(path)
    return [len(engine.archive[r].title) for r in range(engine.n_docs)]


def test_the_back_end_is_the_live_generations(tmp_path):
    build_index(QUESTIONS, tmp_path / "idx")
    assert writer_class(open_index(tmp_path / "idx")) is LocalWriter
    with open_writer(tmp_path / "idx") as writer:
        assert isinstance(writer, LocalWriter)
        assert writer.base.generation == open_index(tmp_path / "idx").generation
    with pytest.raises(IndexFormatError, match="no index at"):
        with open_writer(tmp_path / "none"):
            pass
    assert not (tmp_path / "none").exists()


def test_a_nested_index_takes_no_lock_and_is_registered_by_the_store(tmp_path):
    with IndexWriter(tmp_path / "outer") as outer:
        outer.begin()
        with outer.nested("inner") as inner:
            inner.begin()
            inner.json("x.json", ["a"])
            inner.commit({"models": {}})
        assert not os.path.exists(os.path.join(outer.tmp, "inner", ".lock"))
        outer.commit({"models": {}})
    stored = open_index(tmp_path / "outer", verify=True)
    inner = [rel for rel in stored.manifest["files"] if rel.startswith("inner/")]
    assert "inner/CURRENT" in inner and any(rel.endswith("/x.json") for rel in inner)
    with IndexWriter(tmp_path / "outer") as outer:
        with pytest.raises(RuntimeError, match="the index at inner was not committed"):
            with outer.nested("inner"):
                pass


def test_rows_added_later_are_stored_with_their_segment_and_merged_by_a_compaction(
        tmp_path, lengths_kind):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    add_model(path, "lengths", TitleLengths().fit(SearchEngine.open(path).view))
    assert open_index(path).models["lengths"]["runs"] == []
    add_questions(path, MORE[:1])
    add_questions(path, MORE[1:])
    stored = open_index(path, verify=True)
    assert stored.models["lengths"]["runs"] == [
        {"segment": "seg-000002", "arrays": ["lengths"]},
        {"segment": "seg-000003", "arrays": ["lengths"]}]
    assert stored.has("models/lengths/rows/seg-000003/lengths.npy")
    assert load_models(stored)["lengths"].lengths_.tolist() == expected(path)
    delete_questions(path, ["q1", "n1"])
    live = [n for n, q in zip(expected(path), QUESTIONS + MORE) if q.id not in ("q1", "n1")]
    compact(path)
    stored = open_index(path, verify=True)
    assert stored.models["lengths"]["runs"] == []
    assert not [rel for rel in stored.manifest["files"] if "/rows/" in rel]
    assert load_models(stored)["lengths"].lengths_.tolist() == live == expected(path)
    add_questions(path, [Question("n3", "a new title", "")])
    remove_model(path, "lengths")
    stored = open_index(path, verify=True)
    assert "lengths" not in stored.models
    assert not [rel for rel in stored.manifest["files"] if rel.startswith("models/")]


def test_a_model_that_gives_other_rows_than_questions_added_is_refused(tmp_path,
                                                                      lengths_kind,
                                                                      monkeypatch):
    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    add_model(path, "lengths", TitleLengths().fit(SearchEngine.open(path).view))
    before = open_index(path).generation
    monkeypatch.setattr(TitleLengths, "added_rows",
                        lambda self, questions: {"lengths": np.zeros(1, dtype=np.int64)})
    with pytest.raises(ParameterError, match="gave 1 rows of lengths for 2 added questions"):
        add_questions(path, MORE)
    assert open_index(path).generation == before


@pytest.mark.filterwarnings("ignore:.*max_iter")  # (a small fit)
def test_models_that_fold_questions_in_store_no_runs(tmp_path):
    from cqa_search.factorization import TopicModel

    path = tmp_path / "idx"
    build_index(QUESTIONS, path)
    add_model(path, "topics", TopicModel("nmf", n_shared=0, n_category=2, max_iter=3).fit(
        SearchEngine.open(path).view))
    add_questions(path, MORE)
    stored = open_index(path)
    assert "runs" not in stored.models["topics"]
    assert load_models(stored)["topics"].n_docs_ == len(QUESTIONS)  # the rest folded in
