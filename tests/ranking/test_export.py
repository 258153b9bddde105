"""export-ranker: the exported weights reproduce the engine's scores (JSON and RankLib's
linear format), and what a linear model cannot hold is said."""
import json
import re
import shutil
import warnings

import numpy as np
import pytest

from cqa_search import SearchEngine
from cqa_search.cli.__main__ import main
from cqa_search.evaluation import feature_table
from cqa_search.exceptions import ConvergenceWarning, ParameterError
from cqa_search.index.models import add_model
from cqa_search.ranking import LinearRanker
from cqa_search.ranking.export import export_ranker, folded_weights

QUERIES = [{"id": "v1", "text": "which office renews a residence visa"},
           {"id": "s1", "text": "cheap sofa and furniture shops"},
           {"id": "c1", "text": "the car engine will not start in the cold morning"},
           {"id": "c2", "text": "how do I transfer my car to the buyer"}]
RELEVANT = {"v1": {"t01", "t02"}, "s1": {"t04", "t06"}, "c1": {"t07", "t08"}, "c2": {"t09"}}
SEARCHES = ["renew my visa", "cheap furniture", "car battery dead", "sofa shop car"]


def ranked(toy_index, tmp_path, **options):
    path = tmp_path / "idx"
    shutil.copytree(toy_index, path)
    X, qid, docs, names = feature_table(SearchEngine.open(path), QUERIES, k=None)
    y = np.array([d in RELEVANT[q] for q, d in zip(qid, docs)], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ranker = LinearRanker(random_state=0, **options).fit(X, y, qid=qid, feature_names=names)
    add_model(path, "ranker", ranker)
    return path


def hits(path):
    engine = SearchEngine.open(path)
    return [hit for text in SEARCHES for hit in engine.search(text, k=None)]


@pytest.mark.parametrize("normalize", ["zscore", "minmax", None])
def test_exported_weights_reproduce_the_engines_scores(toy_index, tmp_path, normalize, capsys):
    path = ranked(toy_index, tmp_path, learner="ranksvm", normalize=normalize)
    assert main(["export-ranker", str(path), "-o", str(tmp_path / "r.json")]) == 0
    assert main(["export-ranker", str(path), "--format", "ranklib", "-o",
                 str(tmp_path / "r.txt")]) == 0
    assert "written to" in capsys.readouterr().out
    doc = json.loads((tmp_path / "r.json").read_text())
    lines = (tmp_path / "r.txt").read_text().splitlines()
    assert lines[0] == "## Coordinate Ascent" and all(ln.startswith("## ") for ln in lines[:-1])
    numbered = dict(item.split("=") for item in next(
        ln for ln in lines if ln.startswith("## features: "))[len("## features: "):].split())
    ranklib = {numbered[i]: float(w) for i, w in (item.split(":") for item in lines[-1].split())}
    intercept = float(next(ln for ln in lines if ln.startswith("## intercept = ")).split()[3])
    found = hits(path)
    assert len(found) > 10
    for hit in found:
        x = hit.features
        by_normalised = sum(f["weight"] * (x[f["name"]] - f["offset"]) / f["scale"]
                            for f in doc["features"]) + doc["intercept"]
        by_folded = sum(f["folded_weight"] * x[f["name"]] for f in doc["features"]) \
            + doc["folded_intercept"]
        by_ranklib = sum(w * x[name] for name, w in ranklib.items()) + intercept
        assert by_normalised == pytest.approx(hit.score, rel=1e-9, abs=1e-9)
        assert by_folded == pytest.approx(hit.score, rel=1e-9, abs=1e-9)
        assert by_ranklib == pytest.approx(hit.score, rel=1e-9, abs=1e-9)


def test_threshold_terms_and_per_query_scaling_are_json_only(toy_index, tmp_path, capsys):
    path = ranked(toy_index, tmp_path, learner="boosting", params={"n_thresholds": 3})
    ranker = SearchEngine.open(path).ranker
    assert len(ranker.step_coef_)
    with pytest.raises(ParameterError, match="threshold terms, which a linear model cannot"):
        folded_weights(ranker)
    assert main(["export-ranker", str(path), "--format", "ranklib"]) == 1
    assert "export it as json" in capsys.readouterr().err
    doc = json.loads(export_ranker(ranker, "json"))
    assert doc["folded_intercept"] is None and doc["steps"]
    for hit in hits(path):
        x = hit.features
        score = sum(f["weight"] * (x[f["name"]] - f["offset"]) / f["scale"]
                    for f in doc["features"]) + doc["intercept"]
        score += sum(s["weight"] for s in doc["steps"] if x[s["feature"]] > s["threshold"])
        assert score == pytest.approx(hit.score, rel=1e-9, abs=1e-9)
    per_query = LinearRanker("ranksvm", normalize="query")
    per_query.__dict__.update({k: v for k, v in ranker.__dict__.items() if k.endswith("_")})
    with pytest.raises(ParameterError, match="among each query's candidates"):
        export_ranker(per_query, "ranklib")
    assert "offset" not in json.loads(export_ranker(per_query, "json"))["features"][0]


def test_errors(toy_index, capsys):
    assert main(["export-ranker", str(toy_index)]) == 1
    assert "this index has no ranker 'ranker' (rankers: none; train one with `cqa-search " \
           "train`)" in capsys.readouterr().err


@pytest.mark.parametrize("value,format,message", [
    ("max", "json", "the folded weight of feature '.*' is (-)?inf"),
    ("max", "ranklib", "the folded weight of feature '.*' is (-)?inf"),
    ("inf", "json", "corrupted index .*: model 'ranker' cannot be loaded .ranker coef holds "
                    "NaN or infinite values"),
])
def test_a_forged_ranker_is_refused_not_written(toy_index, tmp_path, capsys, value, format,
                                                message):
    """Issue 43: a ranker forged with its checksum (a weight at float's maximum, one
    infinite) exited 70 (loaded by hand, unchecked) or wrote Infinity into its JSON."""
    from cqa_search.index.store import current_generation
    from cqa_search.testing.forgery import forge

    path = ranked(toy_index, tmp_path, learner="ranksvm")
    forge(path / current_generation(path), ("models/ranker/coef.npy", "element", value))
    assert main(["export-ranker", str(path), "--format", format]) == 1
    out, err = capsys.readouterr()
    assert out == "" and re.fullmatch(f"cqa-search: error: (the ranker cannot be exported: )?"
                                      f"{message}.*\n", err)
