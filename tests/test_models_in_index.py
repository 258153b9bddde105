"""Trained models stored in an index: save/replace/remove, features, and a ranker."""
import numpy as np
import pytest
from sklearn.base import BaseEstimator

from cqa_search import SearchConfig, SearchEngine, build_index
from cqa_search.exceptions import IndexFormatError, ParameterError, QueryError
from cqa_search.index.models import MODEL_KINDS, add_model, remove_model
from cqa_search.index.store import current_generation, verify_index


class LengthModel(BaseEstimator):
    """A toy feature model: a learned weight times the candidate's question length."""

    kind = "toy-length"

    def __init__(self, scale=1.0):
        self.scale = scale

    @property
    def feature_names(self):
        return ("toy_length",)

    def fit(self, view):
        self.weights_ = self.scale * view.index["question"].doc_len.astype(np.float64)
        return self

    def state(self):
        return {"note": "toy"}, {"weights": self.weights_}

    @classmethod
    def from_state(cls, params, meta, arrays):
        model = cls(**params)
        model.weights_ = arrays["weights"]
        return model

    def scorer(self, view):
        model = self

        class Scorer:
            names = model.feature_names

            def score(self, query, rows):
                return model.weights_[rows][:, None]
        return Scorer()


class Ranker(BaseEstimator):
    kind = "toy-ranker"

    def __init__(self, feature="toy_length", sign=-1.0):
        self.feature, self.sign = feature, sign

    @property
    def feature_names_in_(self):
        return (self.feature,)

    def predict(self, X):
        return self.sign * X[:, 0]

    def state(self):
        return {}, {}

    @classmethod
    def from_state(cls, params, meta, arrays):
        return cls(**params)


@pytest.fixture
def index(tmp_path, fixtures, monkeypatch):
    monkeypatch.setitem(MODEL_KINDS, "toy-length", LengthModel)
    monkeypatch.setitem(MODEL_KINDS, "toy-ranker", Ranker)
    path = tmp_path / "idx"
    build_index(fixtures / "toy_archive.jsonl", path)
    return path


def test_stored_model_adds_its_features_and_survives_reopening(index):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel(scale=2.0).fit(engine.view))
    engine = SearchEngine.open(index)
    assert engine.models["length"].scale == 2.0 and "toy_length" in engine.feature_names
    res = engine.search("visa")
    rows = engine.archive.rows(res.doc_ids)
    np.testing.assert_allclose(res.features[:, res.feature_names.index("toy_length")],
                               2.0 * engine.index["question"].doc_len[rows])
    verify_index(index)  # the model's files are checksummed like the rest


def test_replacing_and_removing_a_model_cleans_up(index):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel(scale=1.0).fit(engine.view))
    add_model(index, "length", LengthModel(scale=3.0).fit(engine.view))
    assert SearchEngine.open(index).models["length"].scale == 3.0
    live = index / current_generation(index)
    assert [p.name for p in (live / "models").iterdir()] == ["length"]
    remove_model(index, "length")
    assert SearchEngine.open(index).models == {}
    assert not (index / current_generation(index) / "models").exists()
    # the live generation and the one before it are kept, older ones removed
    assert len([p for p in index.iterdir() if p.name.startswith("gen-")]) == 2
    with pytest.raises(IndexFormatError, match="has no model 'length'"):
        remove_model(index, "length")


def test_two_models_giving_one_feature_are_refused(index):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel().fit(engine.view))
    generation = current_generation(index)
    with pytest.raises(ParameterError, match="model 'other' gives the feature.s. toy_length, "
                                             "which the stored model 'length' gives already"):
        add_model(index, "other", LengthModel(scale=2.0).fit(engine.view))
    assert current_generation(index) == generation  # nothing written
    add_model(index, "length", LengthModel(scale=2.0).fit(engine.view))  # replacing is fine
    assert SearchEngine.open(index).feature_names.count("toy_length") == 1


def test_ranker_orders_the_candidates(index):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel().fit(engine.view))
    plain = SearchEngine.open(index).search("visa", k=None)
    add_model(index, "ranker", Ranker(sign=-1.0))
    ranked = SearchEngine.open(index).search("visa", k=3)
    lengths = dict(zip(plain.doc_ids, plain.features[:, plain.feature_names.index("toy_length")]))
    expected = sorted(plain.doc_ids, key=lambda d: (lengths[d], d))[:3]
    assert list(ranked.doc_ids) == expected
    assert SearchEngine.open(index, config=SearchConfig(ranker=None)).search("visa").doc_ids == \
        plain.doc_ids[:10]
    # a ranker whose features are missing is refused with a clear message
    with pytest.raises(QueryError, match="ranker 'ranker' uses features this engine does not "
                                         "compute: toy_length"):
        SearchEngine.open(index, config=SearchConfig(models=()))


def test_a_change_that_takes_a_rankers_feature_away_is_refused(index, monkeypatch):
    class OtherLength(LengthModel):  # a version of the model giving another feature name
        @property
        def feature_names(self):
            return ("toy_length_2",)

    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel().fit(engine.view))
    add_model(index, "ranker", Ranker())
    monkeypatch.setitem(MODEL_KINDS, "toy-length", OtherLength)
    generation = current_generation(index)
    message = ("would take away the feature.s. toy_length, which the stored ranker 'ranker' "
               r"uses: store the model under another name \(--name\)")
    with pytest.raises(ParameterError, match="storing model 'length' " + message):
        add_model(index, "length", OtherLength().fit(engine.view))
    with pytest.raises(ParameterError, match="removing model 'length' " + message):
        remove_model(index, "length")
    assert current_generation(index) == generation  # nothing written
    add_model(index, "length-2", OtherLength().fit(engine.view))  # another name: fine
    remove_model(index, "ranker")
    remove_model(index, "length")  # no ranker uses it now


def test_a_model_of_another_kind_does_not_replace_one(index):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel().fit(engine.view))
    add_model(index, "ranker", Ranker())
    generation = current_generation(index)
    with pytest.raises(ParameterError, match="has a toy-length model named 'length': storing "
                                             "this toy-ranker model under that name would "
                                             "replace it; give it another name"):
        add_model(index, "length", Ranker())
    with pytest.raises(ParameterError, match="has a toy-ranker model named 'ranker'"):
        add_model(index, "ranker", LengthModel().fit(engine.view))
    assert current_generation(index) == generation


def test_unknown_kind_and_bad_names(index, monkeypatch):
    engine = SearchEngine.open(index)
    add_model(index, "length", LengthModel().fit(engine.view))
    monkeypatch.delitem(MODEL_KINDS, "toy-length")
    with pytest.raises(IndexFormatError, match="model 'length' is of kind 'toy-length', which "
                                               "this cqa_search cannot read"):
        SearchEngine.open(index)
    with pytest.raises(ValueError, match="not a registered model kind"):
        add_model(index, "x", LengthModel())
    monkeypatch.setitem(MODEL_KINDS, "toy-length", LengthModel)
    with pytest.raises(ValueError, match="model name must use letters"):
        add_model(index, "../escape", LengthModel().fit(engine.view))
