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
