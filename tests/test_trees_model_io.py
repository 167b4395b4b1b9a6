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


def _tree0(**fields):
    """A mutation that replaces fields of the first tree (a function of the old value, or the new value)."""
    def mutate(d):
        t = d["trees"][0]
        t.update({k: f(t[k]) if callable(f) else f for k, f in fields.items()})
    return mutate


def _set(**fields):
    return lambda d: d.update({k: f(d[k]) if callable(f) else f for k, f in fields.items()})


# hand edits that loaded and then predicted NaN, failed later, or predicted something else than was trained
DAMAGE = {
    "base-score-nan": _set(base_score=[float("nan")]),
    "base-score-inf": _set(base_score=[float("inf")]),
    "base-score-count": _set(base_score=[0.0, 1.0]),
    "base-score-string": _set(base_score=["0.5"]),
    "no-trees": lambda d: d.pop("trees"),
    "trees-not-a-list": _set(trees={}),
    "tree-not-an-object": _set(trees=[[1, 2]]),
    "right-shorter": _tree0(right=lambda r: r[:-1]),
    "value-longer": _tree0(value=lambda v: v + [[0.0]]),
    "child-out-of-range": _tree0(left=lambda a: [len(a) + 3] + a[1:]),
    "child-huge": _tree0(left=lambda a: [2**40] + a[1:]),
    "cycle-to-root": _tree0(left=lambda a: [0] + a[1:]),
    "shared-child": lambda d: d["trees"][0].update(right=d["trees"][0]["left"][:1] + d["trees"][0]["right"][1:]),
    "child-float": _tree0(left=lambda a: [a[0] + 0.5] + a[1:]),
    "leaf-child-below-minus-one": _tree0(left=lambda a: a[:-1] + [-7], right=lambda a: a[:-1] + [-7]),
    "one-child": _tree0(right=lambda r: [-1] + r[1:]),
    "feature-99": _tree0(feature=lambda f: [99] + f[1:]),
    "feature-n-features": _tree0(feature=lambda f: [4] + f[1:]),
    "feature-on-leaf": _tree0(feature=lambda f: f[:-1] + [0]),
    "threshold-nan": _tree0(threshold=lambda t: [float("nan")] + t[1:]),
    "threshold-minus-inf": _tree0(threshold=lambda t: [float("-inf")] + t[1:]),
    "threshold-string": _tree0(threshold=lambda t: ["0.1"] + t[1:]),
    "value-nan": _tree0(value=lambda v: v[:-1] + [[float("nan")]]),
    "value-null": _tree0(value=lambda v: v[:-1] + [[None]]),
    "value-inf": _tree0(value=lambda v: v[:-1] + [[float("inf")]]),
    "gain-inf": _tree0(gain=lambda g: [float("inf")] + g[1:]),
    "cover-nan": _tree0(cover=lambda c: [float("nan")] + c[1:]),
    "default-left-strings": _tree0(default_left=lambda b: ["no" for _ in b]),
    "bin-edges-one-short": _set(bin_edges=lambda e: e[:-1]),
    "bin-edges-nan": _set(bin_edges=lambda e: [[float("nan")] + e[0]] + e[1:]),
    "bin-edges-descending": _set(bin_edges=lambda e: [e[0][::-1]] + e[1:]),
    "n-features-zero": _set(n_features=0),
    "n-features-string": _set(n_features="4"),
    "n-outputs-two": _set(n_outputs=2, base_score=[0.0, 0.0]),
    "three-classes-binary": _set(classes=lambda c: {**c, "values": c["values"] + [True]}),
    "no-classes": _set(classes=None),
    "duplicate-classes": _set(classes=lambda c: {**c, "values": [c["values"][0]] * 2}),
    "softmax-one-output": _set(objective="multi:softmax"),
    "regression-objective": _set(objective="reg:squarederror"),
    "unknown-estimator": _set(estimator="XGBClassifier"),
    "feature-names-count": _set(feature_names=["a", "b"]),
    "params-a-list": _set(params=[1, 2]),
    "params-bad-value": _set(params=lambda p: {**p, "max_depth": -3}),
    "best-iteration-beyond": _set(best_iteration=99),
    "precision-unknown": _set(precision="half"),
    "target-multilabel": _set(target={"kind": "multilabel", "label_dtype": "|i1"}),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_files_are_refused(tmp_path, damage):
    doc = _saved(tmp_path)
    mdhom.load_model(tmp_path / "m.json")  # the file as saved loads
    DAMAGE[damage](doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))  # json writes NaN and Infinity, and Python's json reads them back
    with pytest.raises(ValueError, match="damaged mdhom model file"):
        mdhom.load_model(bad)


def test_a_regressor_file_with_two_outputs_is_refused(tmp_path):
    X = _X(100)
    TreeBoostRegressor(n_estimators=2, device="numpy").fit(X, np.arange(100.0)).save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc.update(n_outputs=2, base_score=[0.0, 0.0])
    for t in doc["trees"]:
        t["value"] = [[v[0], v[0]] for v in t["value"]]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="regressor has one output"):
        mdhom.load_model(tmp_path / "m.json")


def test_newer_version_and_corrupt_files_are_value_errors(tmp_path):
    doc = _saved(tmp_path)
    bad = tmp_path / "bad.json"
    for mutate, match in [
        (lambda d: d.update(version=VERSION + 1), "newer"),
        (lambda d: d.update(format="xgboost"), "not an mdhom tree model"),
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
