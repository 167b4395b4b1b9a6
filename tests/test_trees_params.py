"""Parameters and hooks that code moved from XGBoost and LightGBM uses (issue 11, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor


def _data(n=300, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    score = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


def test_max_depth_minus_one_means_no_limit():
    X, y = _data(1000)
    kw = dict(n_estimators=5, grow_policy="lossguide", max_leaves=40, min_child_weight=0.01, device="numpy")
    unlimited = TreeBoostClassifier(max_depth=-1, **kw).fit(X, y)
    zero = TreeBoostClassifier(max_depth=0, **kw).fit(X, y)
    assert np.array_equal(unlimited.decision_function(X), zero.decision_function(X))
    assert max(_depth(t) for t in unlimited._ensemble.trees) > 6  # deeper than the default limit
    with pytest.raises(ValueError, match="max_depth must lie in"):
        TreeBoostClassifier(max_depth=-2, device="numpy").fit(X, y)


def _depth(tree, node=0):
    if tree.left[node] < 0:
        return 0
    return 1 + max(_depth(tree, tree.left[node]), _depth(tree, tree.right[node]))


@pytest.mark.parametrize("classes", [2, 3])
def test_zero_rows_predict_empty_arrays(classes):
    X, y = _data(classes=classes)
    est = TreeBoostClassifier(n_estimators=3, device="numpy").fit(X, y)
    empty = np.zeros((0, 5))
    assert est.predict(empty).shape == (0,) and est.predict(empty).dtype == est.classes_.dtype
    assert est.predict_proba(empty).shape == (0, classes)
    assert est.decision_function(empty).shape == ((0,) if classes == 2 else (0, classes))
    reg = TreeBoostRegressor(n_estimators=3, device="numpy").fit(X, X[:, 0])
    assert reg.predict(empty).shape == (0,)
    with pytest.raises(ValueError, match="0 sample"):
        TreeBoostRegressor(device="numpy").fit(empty, np.zeros(0))
    with pytest.raises(ValueError, match="X has 4 features"):
        est.predict(np.zeros((0, 4)))


def test_zero_rows_multilabel():
    X, y = _data()
    Y = np.column_stack([y, X[:, 2] > 0]).astype(int)
    est = TreeBoostClassifier(n_estimators=3, device="numpy").fit(X, Y)
    assert est.predict(np.zeros((0, 5))).shape == (0, 2) and est.predict_proba(np.zeros((0, 5))).shape == (0, 2)


def _split(n=600, classes=2, seed=3):
    X, y = _data(n, seed=seed, classes=classes)
    return X[: n // 2], y[: n // 2], X[n // 2:], y[n // 2:]


def test_eval_metric_history_per_set_and_metric():
    X, y, Xv, yv = _split()
    est = TreeBoostClassifier(n_estimators=8, eval_metric=["logloss", "auc", "error"], device="numpy")
    est.fit(X, y, eval_set=[(X, y), (Xv, yv)])
    res = est.evals_result_
    assert list(res) == ["validation_0", "validation_1"]
    assert all(list(v) == ["logloss", "auc", "error"] and all(len(c) == 8 for c in v.values()) for v in res.values())
    from sklearn.metrics import log_loss, roc_auc_score

    proba = est.predict_proba(Xv)[:, 1]
    assert res["validation_1"]["auc"][-1] == pytest.approx(roc_auc_score(yv, proba), abs=1e-12)
    assert res["validation_1"]["logloss"][-1] == pytest.approx(log_loss(yv, proba), rel=1e-9)
    assert res["validation_1"]["error"][-1] == pytest.approx(np.mean(est.predict(Xv) != yv))
    default = TreeBoostClassifier(n_estimators=8, device="numpy").fit(X, y, eval_set=[(Xv, yv)])
    assert list(default.evals_result_["validation_0"]) == ["logloss"]
    assert default.evals_result_["validation_0"]["logloss"] == res["validation_1"]["logloss"]


def test_early_stopping_maximises_auc_on_the_last_metric():
    X, y, Xv, yv = _split(400)
    kw = dict(n_estimators=60, learning_rate=0.5, early_stopping_rounds=5, device="numpy")
    by_auc = TreeBoostClassifier(eval_metric=["logloss", "auc"], **kw).fit(X, y, eval_set=[(Xv, yv)])
    auc = by_auc.evals_result_["validation_0"]["auc"]
    assert by_auc.best_iteration_ == int(np.argmax(auc)) and len(auc) == by_auc.best_iteration_ + 6
    assert len(by_auc._ensemble.trees) == by_auc.best_iteration_ + 1
    by_loss = TreeBoostClassifier(eval_metric=["auc", "logloss"], **kw).fit(X, y, eval_set=[(Xv, yv)])
    loss = by_loss.evals_result_["validation_0"]["logloss"]
    assert by_loss.best_iteration_ == int(np.argmin(loss))
    assert by_auc.best_iteration_ != by_loss.best_iteration_  # the watched metric decides


def test_callable_eval_metric_is_minimised_and_named():
    X, y, Xv, yv = _split(400, classes=3)
    calls = []

    def mean_abs_error(y_true, y_score, sample_weight=None):
        calls.append((y_true.shape, y_score.shape, sample_weight is not None))
        onehot = np.eye(3)[y_true]
        return float(np.average(np.abs(onehot - y_score).sum(axis=1), weights=sample_weight))

    est = TreeBoostClassifier(n_estimators=40, learning_rate=0.5, early_stopping_rounds=3, device="numpy",
                              eval_metric=["mlogloss", mean_abs_error])
    est.fit(X, y, eval_set=[(Xv, yv)], eval_sample_weight=[np.ones(len(yv))])
    curve = est.evals_result_["validation_0"]["mean_abs_error"]
    assert est.best_iteration_ == int(np.argmin(curve))
    assert calls[0] == ((200,), (200, 3), True)
    assert curve[est.best_iteration_] == pytest.approx(mean_abs_error(yv, est.predict_proba(Xv)))


def test_eval_metric_errors_name_what_applies():
    X, y = _data()
    with pytest.raises(ValueError, match="'auc' does not apply to objective 'reg:squarederror'"):
        TreeBoostRegressor(eval_metric="auc", device="numpy").fit(X, X[:, 0])
    with pytest.raises(ValueError, match="eval_metric must be a metric name"):
        TreeBoostClassifier(eval_metric="accuracy", device="numpy").fit(X, y)
    reg = TreeBoostRegressor(n_estimators=3, eval_metric=["rmse", "mae"], device="numpy")
    reg.fit(X, X[:, 0], eval_set=[(X, X[:, 0])])
    assert list(reg.evals_result_["validation_0"]) == ["rmse", "mae"]


def test_importance_types_follow_xgboost():
    X, y = _data(500)
    kw = dict(n_estimators=6, max_depth=3, device="numpy")
    est = TreeBoostClassifier(**kw).fit(X, y)
    trees = est._ensemble.trees
    f = np.concatenate([t.feature[t.feature >= 0] for t in trees])
    g = np.concatenate([t.gain[t.feature >= 0] for t in trees])
    c = np.concatenate([t.cover[t.feature >= 0] for t in trees])
    count = np.bincount(f, minlength=5).astype(float)
    expect = {"weight": count, "split": count, "total_gain": np.bincount(f, g, 5), "total_cover": np.bincount(f, c, 5),
              "gain": np.bincount(f, g, 5) / np.maximum(count, 1), "cover": np.bincount(f, c, 5) / np.maximum(count, 1)}
    for kind, scores in expect.items():
        fitted = TreeBoostClassifier(importance_type=kind, **kw).fit(X, y)
        assert np.allclose(fitted.feature_importances_, scores / scores.sum()), kind
        used = {f"f{i}": scores[i] for i in np.flatnonzero(count)}
        assert fitted.get_score().keys() == used.keys()
        assert np.allclose(list(fitted.get_score().values()), list(used.values()))
    assert not np.allclose(expect["gain"] / expect["gain"].sum(), expect["total_gain"] / expect["total_gain"].sum())
    assert est.get_score("weight") == {k: float(v) for k, v in zip([f"f{i}" for i in range(5)], count, strict=True) if v}
    with pytest.raises(ValueError, match="importance_type must be one of"):
        TreeBoostClassifier(importance_type="permutation", device="numpy").fit(X, y)


def test_cover_is_the_hessian_sum_of_the_node():
    X, y = _data(400)
    est = TreeBoostRegressor(n_estimators=2, max_depth=2, device="numpy").fit(X, X[:, 0])
    tree = est._ensemble.trees[0]
    assert tree.cover[0] == pytest.approx(400.0)  # squared error: h = 1 per row
    inner = np.flatnonzero(tree.left >= 0)
    assert np.allclose(tree.cover[inner], tree.cover[tree.left[inner]] + tree.cover[tree.right[inner]])


def test_load_model_method_restores_into_self(tmp_path):
    X, y = _data()
    est = TreeBoostClassifier(n_estimators=4, max_depth=3, importance_type="cover", eval_metric=["auc"],
                              device="numpy").fit(X, y)
    est.save_model(tmp_path / "c.json")
    into = TreeBoostClassifier(n_estimators=99)
    assert into.load_model(tmp_path / "c.json") is into
    assert np.array_equal(into.predict_proba(X), est.predict_proba(X))
    assert into.get_params() == est.get_params() and into.n_estimators == 4 and into.eval_metric == ["auc"]
    assert np.array_equal(into.feature_importances_, est.feature_importances_)
    with pytest.raises(ValueError, match="holds a TreeBoostClassifier model, not a TreeBoostRegressor"):
        TreeBoostRegressor().load_model(tmp_path / "c.json")
    reg = TreeBoostRegressor(n_estimators=3, device="numpy").fit(X, X[:, 0])
    reg.save_model(tmp_path / "r.json")
    with pytest.raises(ValueError, match="holds a TreeBoostRegressor model"):
        TreeBoostClassifier().load_model(tmp_path / "r.json")


def test_callable_metric_is_left_out_of_the_file_and_old_files_load(tmp_path):
    import json

    import mdhom

    X, y = _data()
    est = TreeBoostClassifier(n_estimators=3, eval_metric=["auc", np.mean], device="numpy").fit(X, y)
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["params"]["eval_metric"] == ["auc"]
    for name in ("eval_metric", "importance_type", "n_jobs"):  # a file written before these options
        doc["params"].pop(name)
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = mdhom.load_model(tmp_path / "old.json")
    assert old.importance_type == "gain" and old.n_jobs is None
    assert np.array_equal(old.predict(X), est.predict(X))


def test_n_jobs_fits_on_a_sub_device_of_that_many_compute_units():
    import mdhom
    from mdhom.devices import with_threads

    pocl = [d for d in mdhom.compute_devices() if d.runtime == "pocl"]
    if not pocl or pocl[0].compute_units < 2:
        pytest.skip("needs PoCL on a machine with at least 2 cores")
    dev = pocl[0]
    one = with_threads(dev, 1)
    assert one.cl_device.max_compute_units == 1 and one.cl_device.parent_device is not None
    assert one.key == dev.key and one.build_key != dev.build_key and with_threads(dev, 1) is one
    assert with_threads(dev, None) is dev and with_threads(dev, -1) is dev and with_threads(dev, 10**6) is dev
    X, y = _data()
    a = TreeBoostClassifier(n_estimators=3, max_depth=3, device=dev.key, n_jobs=1).fit(X, y)
    b = TreeBoostClassifier(n_estimators=3, max_depth=3, device=dev.key).fit(X, y)
    assert a.compute_units_ == 1 and b.compute_units_ == dev.compute_units
    assert np.array_equal(a.decision_function(X), b.decision_function(X))  # double precision: same trees
    with pytest.raises(ValueError, match="n_jobs must be None, -1"):
        TreeBoostClassifier(n_jobs=0, device="numpy").fit(X, y)
