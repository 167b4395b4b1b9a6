"""The plots users of XGBoost and LightGBM reach for: importance bars, metric curves, one tree drawn.

matplotlib is an optional extra (``pip install "mdhom[plot]"``), imported only when a plot is asked for, so
the estimators never depend on it. Every function returns the matplotlib Axes it drew on, as XGBoost's and
LightGBM's do. :func:`to_graphviz` writes DOT text for Graphviz without depending on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError('plotting needs matplotlib: pip install "mdhom[plot]" (or pip install matplotlib)') from None
    return plt


def _axes(ax: Any, figsize: tuple[float, float] | None) -> Any:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(1, 1, figsize=figsize)
    return ax


def _fitted(est: Any) -> Any:
    if not hasattr(est, "_ensemble"):
        raise ValueError(f"{type(est).__name__} is not fitted; call fit or load_model before plotting")
    return est


def _feature_names(est: Any) -> list[str]:
    names = getattr(est, "feature_names_in_", None)
    return [str(n) for n in names] if names is not None else [f"f{i}" for i in range(est.n_features_in_)]


def plot_importance(est: Any, ax: Any = None, importance_type: str | None = None, max_num_features: int | None = None,
                    title: str = "Feature importance", xlabel: str | None = None, ylabel: str = "Features",
                    show_values: bool = True, precision: int = 3, figsize: tuple[float, float] | None = None,
                    **bar_kwargs: Any) -> Any:
    """Horizontal bars of each split feature's importance (``est.get_score``: unnormalised, as XGBoost plots
    them), largest on top; ``importance_type`` defaults to the estimator's; features never split on are left
    out. Returns the Axes."""
    scores = _fitted(est).get_score(importance_type)
    if not scores:
        raise ValueError("the model has no splits, so no feature importance to plot")
    items = sorted(scores.items(), key=lambda kv: kv[1])  # ascending: barh draws the first at the bottom
    if max_num_features is not None:
        items = items[-max_num_features:]
    labels, values = zip(*items, strict=True)
    ax = _axes(ax, figsize)
    ylocs = np.arange(len(values))
    ax.barh(ylocs, values, align="center", **bar_kwargs)
    if show_values:
        for y, v in zip(ylocs, values, strict=True):
            ax.text(v, y, f" {v:.{precision}g}", va="center")
    ax.set_yticks(ylocs)
    ax.set_yticklabels(labels)
    ax.set_ylim(-1, len(values))
    ax.set_title(title)
    ax.set_xlabel(xlabel or f"importance ({importance_type or est.importance_type})")
    ax.set_ylabel(ylabel)
    return ax


def plot_metric(source: Any, metric: str | None = None, dataset_names: Sequence[str] | None = None, ax: Any = None,
                title: str = "Metric during training", xlabel: str = "Iterations", ylabel: str | None = None,
                figsize: tuple[float, float] | None = None) -> Any:
    """One curve per eval set of ``metric`` (default: the first recorded) over the boosting rounds, from a
    fitted estimator's ``evals_result_`` or such a dict (LightGBM's ``plot_metric``). Returns the Axes."""
    results: Mapping[str, Mapping[str, Sequence[float]]] = getattr(source, "evals_result_", source)
    if not isinstance(results, Mapping) or not results:
        raise ValueError("no metric history to plot: fit with eval_set=[(X, y)] (evals_result_ is empty)")
    names = list(dataset_names) if dataset_names is not None else list(results)
    unknown = [n for n in names if n not in results]
    if unknown:
        raise ValueError(f"no eval set named {', '.join(unknown)}; recorded: {', '.join(results)}")
    recorded = list(results[names[0]])
    metric = metric or recorded[0]
    if metric not in recorded:
        raise ValueError(f"metric {metric!r} was not recorded; recorded: {', '.join(recorded)}")
    ax = _axes(ax, figsize)
    for name in names:
        curve = results[name][metric]
        ax.plot(np.arange(len(curve)), curve, label=name)
    ax.legend(loc="best")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or metric)
    ax.grid(True)
    return ax


def _node_labels(est: Any, tree_index: int, precision: int) -> tuple[Any, list[str]]:
    trees = _fitted(est)._ensemble.trees
    if not -len(trees) <= tree_index < len(trees):
        raise ValueError(f"tree_index {tree_index} is out of range: the model has {len(trees)} trees")
    tree = trees[tree_index]
    names = _feature_names(est)
    labels = []
    for node in range(tree.n_nodes):
        if tree.left[node] < 0:
            values = ", ".join(f"{v:.{precision}g}" for v in tree.value[node])
            labels.append(f"leaf {values}\ncover {tree.cover[node]:.{precision}g}")
        else:
            thr = tree.threshold[node]
            test = f"{names[tree.feature[node]]} <= {thr:.{precision}g}" if np.isfinite(thr) else \
                f"{names[tree.feature[node]]} not missing"
            labels.append(f"{test}\ngain {tree.gain[node]:.{precision}g}")
    return tree, labels


def _edge_labels(tree: Any, node: int) -> tuple[str, str]:
    """Yes/no as XGBoost's drawings label them, with the side missing values take."""
    left_missing = bool(tree.default_left[node])
    return ("yes, missing" if left_missing else "yes"), ("no" if left_missing else "no, missing")


def to_graphviz(est: Any, tree_index: int = 0, precision: int = 4) -> str:
    """One tree as Graphviz DOT text (render with ``dot -Tpng``, or ``graphviz.Source(text)``); splits read
    ``feature <= threshold`` with the yes branch left, leaves their values."""
    tree, labels = _node_labels(est, tree_index, precision)
    lines = [f"digraph tree_{tree_index} {{", "  node [fontname=Helvetica];"]
    for node, label in enumerate(labels):
        shape = "box" if tree.left[node] < 0 else "ellipse"
        text = label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'  {node} [label="{text}", shape={shape}];')
    for node in np.flatnonzero(tree.left >= 0):
        yes, no = _edge_labels(tree, node)
        lines.append(f'  {node} -> {tree.left[node]} [label="{yes}"];')
        lines.append(f'  {node} -> {tree.right[node]} [label="{no}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layout(tree: Any) -> tuple[np.ndarray, np.ndarray]:
    """x: leaves evenly spaced in left-to-right order, a split centred over its children; y: minus depth."""
    x = np.zeros(tree.n_nodes)
    y = np.zeros(tree.n_nodes)
    next_leaf = 0.0

    def place(node: int, depth: int) -> None:
        nonlocal next_leaf
        y[node] = -depth
        if tree.left[node] < 0:
            x[node] = next_leaf
            next_leaf += 1.0
            return
        place(int(tree.left[node]), depth + 1)
        place(int(tree.right[node]), depth + 1)
        x[node] = 0.5 * (x[tree.left[node]] + x[tree.right[node]])

    place(0, 0)
    return x, y


def plot_tree(est: Any, tree_index: int = 0, ax: Any = None, precision: int = 3,
              figsize: tuple[float, float] | None = None, fontsize: float = 8) -> Any:
    """Draw one tree with matplotlib alone (no Graphviz): a box per node, splits as ``feature <= threshold``
    with the yes branch to the left (edges say where missing values go). Returns the Axes."""
    tree, labels = _node_labels(est, tree_index, precision)
    x, y = _layout(tree)
    ax = _axes(ax, figsize)
    for node in np.flatnonzero(tree.left >= 0):
        for child, label in zip((tree.left[node], tree.right[node]), _edge_labels(tree, node), strict=True):
            ax.plot([x[node], x[child]], [y[node], y[child]], color="0.5", linewidth=1, zorder=1)
            ax.text(0.5 * (x[node] + x[child]), 0.5 * (y[node] + y[child]), label, fontsize=fontsize * 0.8,
                    ha="center", va="center", color="0.3", zorder=2)
    for node, label in enumerate(labels):
        leaf = tree.left[node] < 0
        ax.text(x[node], y[node], label, ha="center", va="center", fontsize=fontsize, zorder=3,
                bbox={"boxstyle": "round", "facecolor": "#e8f0e8" if leaf else "#e8eef8", "edgecolor": "0.4"})
    ax.set_xlim(x.min() - 0.75, x.max() + 0.75)
    ax.set_ylim(y.min() - 0.5, 0.5)
    ax.set_axis_off()
    ax.set_title(f"tree {tree_index}")
    return ax
