"""The boosting loop both tree estimators run (:mod:`mdhom.trees.estimators`): per round the rows and features drawn,
the gradients, the round's trees grown (one, or one per output), the eval sets' metrics and early stopping.

The round stays on the backend's side: scores, gradients and the eval sets' scores are resident there. Without eval
sets no round needs its tree on the host before the next starts, so where the device computes beside the host
(``overlap_trees``, GPUs) each tree is assembled while the device grows the next
(:func:`mdhom.trees.grower.start_tree`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdhom.learn.losses import Loss
from mdhom.learn.metrics import Metric
from mdhom.trees.backend import SplitParams, TreeKernels
from mdhom.trees.grower import GrowParams, grow_tree, start_tree
from mdhom.trees.growth import Thresholds
from mdhom.trees.model import Ensemble, Tree


@dataclass
class Boosted:
    """What a fit's rounds made: the trees (cut to the best round with early stopping), each round's seconds, the
    eval sets' metrics by round (XGBoost's ``evals_result``) and the best round's index."""

    trees: list[Tree]
    round_times: list[float]
    results: dict[str, dict[str, list[float]]]
    best: int


def trees_per_round(p: dict[str, Any], loss: Loss) -> int:
    """Trees a round grows: one per output with ``multi_strategy="one_output_per_tree"`` (grown together by the
    backend of :mod:`mdhom.trees.ktrees`, whose ``grow_round`` grows them), else one over every output."""
    return loss.n_outputs if p["multi_strategy"] == "one_output_per_tree" else 1


def boost(kernels: TreeKernels, to_bins: Callable, loss: Loss, ensemble: Ensemble, X: np.ndarray, y: np.ndarray,
          w: np.ndarray, evals: list, metrics: list[Metric], p: dict[str, Any], threshold: Thresholds) -> Boosted:
    """Grow ``p["n_estimators"]`` rounds of trees on ``kernels`` (loaded with ``X``'s bins), each round's row and
    feature draws from ``p["random_state"]``, the eval sets' metrics after each round and early stopping on the last
    one's last metric. ``evals``: (X, y, w) triples; ``p``: the validated parameters
    (:func:`mdhom.trees.params.validate`)."""
    n, n_features = X.shape
    grow = GrowParams(
        split=SplitParams(p["reg_lambda"], p["reg_alpha"], p["min_split_gain"], p["min_child_weight"],
                          p["cat_smooth"]),
        learning_rate=p["learning_rate"], max_depth=max(p["max_depth"] or 0, 0), max_leaves=p["max_leaves"],
        lossguide=p["grow_policy"] == "lossguide",
        categorical=None if ensemble.categories is None else np.array([c is not None for c in ensemble.categories]),
    )
    rng = np.random.default_rng(p["random_state"])
    # the round stays on the backend's side: scores, gradients and eval-set scores are resident there
    kernels.set_objective(loss, y, w, ensemble.base_score)
    handles = [kernels.add_eval(to_bins(Xe), ensemble.base_score) for Xe, _, _ in evals]
    results: dict[str, dict[str, list[float]]] = {
        f"validation_{i}": {m.name: [] for m in metrics} for i in range(len(evals))}
    # early stopping watches the last metric of the last eval set, as XGBoost does; a score to maximise
    # (auc) is watched negated
    watch = metrics[-1]
    sign = -1.0 if watch.maximize else 1.0
    trees: list[Tree] = []
    times: list[float] = []
    best, best_score, patience = -1, np.inf, p["early_stopping_rounds"]
    n_rows = max(1, int(round(p["subsample"] * n)))
    n_cols = max(1, int(round(p["colsample_bytree"] * n_features)))
    per_round = 1  # trees a round
    per_output = trees_per_round(p, loss) > 1
    # without eval sets no round needs its tree on the host before the next starts: each tree is assembled while
    # the device grows the next (start_tree's while_busy), where the device computes beside the host
    unfinished: list[Callable[[], Tree]] = []

    def add(tree: Tree) -> None:
        if ensemble.categories is not None:
            tree.set_categories(ensemble.categories)
        trees.append(tree)

    def finish_last() -> None:  # (one tree at most: each start_tree finishes the one before)
        while unfinished:
            add(unfinished.pop(0)())

    for it in range(p["n_estimators"]):
        start = time.perf_counter()
        keep = None
        if n_rows < n:
            keep = np.zeros(n, bool)
            keep[rng.choice(n, n_rows, replace=False)] = True
        mask = np.ones(n_features, bool)
        if n_cols < n_features:
            mask[:] = False
            mask[rng.choice(n_features, n_cols, replace=False)] = True
        grown: list[Tree] = []
        if per_output:  # one tree per output, grown together (mdhom.trees.ktrees)
            grown = kernels.grow_round(keep, mask, grow, threshold)
        else:
            kernels.compute_gradients(keep)
            if evals or not kernels.overlap_trees:
                grown = [grow_tree(kernels, None, mask, grow, threshold, on_values=kernels.update_scores)]
            else:
                unfinished.append(start_tree(kernels, None, mask, grow, threshold,
                                             on_values=kernels.update_scores, while_busy=finish_last,
                                             relabel=False))
        per_round = max(1, len(grown))
        for tree in grown:
            add(tree)
        for k, (handle, (_, ye, we)) in enumerate(zip(handles, evals, strict=True)):
            for tree in grown:
                raw = np.asarray(kernels.update_eval(handle, tree), np.float64)
            for m in metrics:
                results[f"validation_{k}"][m.name].append(m.score(ye, raw, we))
        kernels.end_round()  # a GPU's next round queues behind this one's last kernels: a round's time is its period
        times.append(time.perf_counter() - start)
        if evals:
            current = sign * results[f"validation_{len(evals) - 1}"][watch.name][-1]
            if current < best_score:
                best, best_score = it, current
            if p["verbose"] and (it % p["verbose"] == 0 or it == p["n_estimators"] - 1):
                text = "\t".join(f"{k}-{name}:{v[name][-1]:.5f}" for k, v in results.items() for name in v)
                print(f"[{it}]\t{text}", flush=True)
            if patience and it - best >= patience:
                break
    if times:  # the last round's device work and the last tree's host work, counted in the last round
        start = time.perf_counter()
        kernels.sync()
        finish_last()
        times[-1] += time.perf_counter() - start
    if patience:  # whole rounds (one_output_per_tree grows a tree per output each)
        trees = trees[: (best + 1) * per_round]
    else:
        best = len(trees) // per_round - 1
    return Boosted(trees, times, results, best)
