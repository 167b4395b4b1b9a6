"""plot_importance, plot_metric, plot_tree and to_graphviz on small fitted models (matplotlib's Agg backend)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import mdhom
from mdhom import TreeBoostClassifier

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 5)), columns=["age", "income", "noise1", "noise2", "height"])
    y = (X["age"] + 0.5 * X["income"] ** 2 > 0.5).astype(int)
    est = TreeBoostClassifier(n_estimators=6, max_depth=2, eval_metric=["logloss", "auc"], device="numpy")
    return est.fit(X[:300], y[:300], eval_set=[(X[:300], y[:300]), (X[300:], y[300:])])


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_plot_importance_bars_follow_get_score(fitted):
    ax = mdhom.plot_importance(fitted, importance_type="weight")
    scores = fitted.get_score("weight")
    bars = ax.patches
    assert len(bars) == len(scores)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == sorted(scores, key=scores.get)  # largest on top
    assert [b.get_width() for b in bars] == sorted(scores.values())
    assert "age" in labels and ax.get_title() == "Feature importance"
    top = mdhom.plot_importance(fitted, max_num_features=2)
    assert len(top.patches) == 2


def test_plot_metric_draws_one_curve_per_eval_set(fitted):
    ax = mdhom.plot_metric(fitted, metric="auc")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["validation_0", "validation_1"]
    assert np.array_equal(lines[1].get_ydata(), fitted.evals_result_["validation_1"]["auc"])
    assert ax.get_ylabel() == "auc"
    assert mdhom.plot_metric(fitted.evals_result_).get_ylabel() == "logloss"  # a dict; the first metric
    with pytest.raises(ValueError, match="'rmse' was not recorded; recorded: logloss, auc"):
        mdhom.plot_metric(fitted, metric="rmse")
    with pytest.raises(ValueError, match="no metric history"):
        mdhom.plot_metric({})


def test_plot_tree_draws_every_node_and_dot_text(fitted):
    tree = fitted._ensemble.trees[0]
    ax = mdhom.plot_tree(fitted, tree_index=0)
    boxes = [t for t in ax.texts if t.get_bbox_patch() is not None]
    assert len(boxes) == tree.n_nodes
    root = boxes[0].get_text()  # nodes are drawn in id order, the root first
    assert root.startswith(fitted.feature_names_in_[tree.feature[0]] + " <= ")
    assert sum(t.get_text().startswith("leaf ") for t in boxes) == int((tree.left < 0).sum())
    dot = mdhom.to_graphviz(fitted, tree_index=0)
    assert dot.startswith("digraph tree_0 {") and dot.count("->") == 2 * int((tree.left >= 0).sum())
    assert dot.count("shape=box") == int((tree.left < 0).sum())
    with pytest.raises(ValueError, match="tree_index 6 is out of range: the model has 6 trees"):
        mdhom.plot_tree(fitted, tree_index=6)


def test_missing_matplotlib_is_a_clear_error(fitted, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"mdhom\[plot\]"):
        mdhom.plot_importance(fitted)
    assert "digraph" in mdhom.to_graphviz(fitted)  # DOT text needs no matplotlib
