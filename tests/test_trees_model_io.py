"""Model files: versioned JSON, atomic writes, round trips that predict identically, clear errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import mdhom
from mdhom import TreeBoostClassifier, TreeBoostRegressor
from mdhom.trees.model import FORMAT, VERSION


def _X(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.05] = np.nan
    return X


CASES = {
    "binary-strings": lambda X: np.where(np.nan_to_num(X[:, 0]) > 0, "yes", "no"),
    "multiclass-ints": lambda X: np.digitize(np.nan_to_num(X[:, 1]), [-0.5, 0.5]) * 10 - 5,
    "multilabel": lambda X: np.column_stack([np.nan_to_num(X[:, 0]) > 0, np.nan_to_num(X[:, 2]) < 0.3]).astype(np.int8),
    "binary-bool": lambda X: np.nan_to_num(X[:, 3]) > 0.2,
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_classifier_round_trip(tmp_path, case, policy):
    X = _X()
    y = CASES[case](X)
    est = TreeBoostClassifier(n_estimators=15, grow_policy=policy, max_leaves=9, device="numpy").fit(X, y)
    path = tmp_path / "model.json"
    est.save_model(path)
    back = mdhom.load_model(path)
    assert type(back) is TreeBoostClassifier
    assert np.array_equal(back.predict(X), est.predict(X))
    assert back.predict(X).dtype == est.predict(X).dtype
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    assert np.array_equal(back.decision_function(X), est.decision_function(X))
    assert np.array_equal(back.classes_, est.classes_) and back.classes_.dtype == est.classes_.dtype
    assert np.array_equal(back.feature_importances_, est.feature_importances_)
    assert back.get_params() == est.get_params()
    back.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_regressor_round_trip_and_document_layout(tmp_path):
    X = _X()
    y = np.nan_to_num(X[:, 0]) * 3 + np.nan_to_num(X[:, 1]) ** 2
    est = TreeBoostRegressor(n_estimators=20, device="numpy").fit(X, y)
    est.save_model(tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["format"] == FORMAT and doc["version"] == VERSION and doc["estimator"] == "TreeBoostRegressor"
    assert len(doc["trees"]) == 20 and doc["n_features"] == 4 and doc["classes"] is None
    tree = doc["trees"][0]
    assert set(tree) == {"left", "right", "feature", "threshold", "default_left", "value", "gain", "cover"}
    assert len({len(v) for v in tree.values()}) == 1
    back = mdhom.load_model(tmp_path / "r.json")
    assert np.array_equal(back.predict(X), est.predict(X))
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".mdhom-model-")]  # no temp file left


def test_pandas_feature_names_survive(tmp_path):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(_X(), columns=["a", "b", "c", "d"])
    est = TreeBoostClassifier(n_estimators=5, device="numpy").fit(X, (X["a"] > 0).to_numpy())
    est.save_model(tmp_path / "m.json")
    back = mdhom.load_model(tmp_path / "m.json")
    assert list(back.feature_names_in_) == ["a", "b", "c", "d"]
    assert np.array_equal(back.predict(X), est.predict(X))


def _saved(tmp_path):
    X = _X(100)
    TreeBoostClassifier(n_estimators=3, device="numpy").fit(X, np.nan_to_num(X[:, 0]) > 0).save_model(
        tmp_path / "m.json")
    return json.loads((tmp_path / "m.json").read_text())


def test_newer_version_and_damaged_files_are_value_errors(tmp_path):
    doc = _saved(tmp_path)
    bad = tmp_path / "bad.json"
    for mutate, match in [
        (lambda d: d.update(version=VERSION + 1), "newer"),
        (lambda d: d.update(format="xgboost"), "not an mdhom tree model"),
        (lambda d: d.pop("trees"), "damaged"),
        (lambda d: d["trees"][0].update(left=[5] + d["trees"][0]["left"][1:]), "damaged"),
        (lambda d: d["trees"][0].update(feature=[99] + d["trees"][0]["feature"][1:]), "damaged"),
        (lambda d: d.update(base_score=[0.0, 1.0]), "damaged"),
    ]:
        d = json.loads(json.dumps(doc))
        mutate(d)
        bad.write_text(json.dumps(d))
        with pytest.raises(ValueError, match=match):
            mdhom.load_model(bad)
    bad.write_text(json.dumps(doc)[:-40])
    with pytest.raises(ValueError, match="corrupt"):
        mdhom.load_model(bad)


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    X = _X(100)
    est = TreeBoostClassifier(n_estimators=3, device="numpy").fit(X, np.nan_to_num(X[:, 0]) > 0)
    path = tmp_path / "m.json"
    est.save_model(path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        est.save_model(path)
    assert path.read_bytes() == before and len(os.listdir(tmp_path)) == 1


def test_unfitted_save_raises():
    with pytest.raises(ValueError, match="not fitted"):
        TreeBoostClassifier().save_model("never.json")
