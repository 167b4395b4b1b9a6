"""One tree per output and round (XGBoost's ``multi_strategy="one_output_per_tree"``), the K trees of a round grown
together over the tree dimension.

A multiclass (or multi-label) round computes every row's (g, h) for all K outputs once, then grows K single-output
trees, tree k on output k's (g, h), as XGBoost and LightGBM do. Here those trees are one batch of slots of the
forests' level machinery (:mod:`mdhom.forests.boost_level`): per level one histogram launch over every node of
every tree, one split search, one routing and one partition, one read-back of a few bytes per node; the host
decides the splits with the depth-wise grower's own rules (:class:`mdhom.trees.growth.NodeTable`, the same order of
nodes, ties and leaf values), so each tree is the tree :func:`mdhom.trees.grower.grow_tree` grows on its
output's gradients, bit for bit (float64 slots of many rows summed in the tree learner's row blocks:
:mod:`mdhom.components.histogram_blocks`). ``batch`` grows the K trees in batches of that many (1: one after another,
through the same kernels; what the benchmark compares against).

Depth-wise growth only (``max_depth``, ``max_leaves``, ``min_child_weight``, ``min_split_gain``, ``reg_alpha``,
``reg_lambda``, ``subsample``, ``colsample_bytree``); the estimator refuses loss-guided growth and categorical
features in this mode. Precision "double" or "quantized".

:class:`NumpyKTrees` is the reference backend (each kernel's numpy reference, in the kernels' order), and
:class:`mdhom.trees.ktrees_opencl.OpenCLKTrees` runs the kernels; both keep the eval sets' scores on the host
(:class:`HostEvals`), so their models and eval metrics are the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mdhom.components.quantize import quantize_gh
from mdhom.components.split import SPLIT_EPS, SplitParams, Splits
from mdhom.forests import boost_level as BL
from mdhom.forests import histogram as FH
from mdhom.forests import partition as FP
from mdhom.learn.memory import check_host, size_text
from mdhom.trees.growth import GrowParams, NodeTable, Thresholds, can_split
from mdhom.trees.model import Tree
from mdhom.trees.reference import predict_bins


@dataclass(frozen=True)
class Level:
    """A level's slots as the host describes them: each slot's batch tree; below the root, the built child of each
    split (``built``: its slot, the smaller child by hessian sum) and the pair table of the sibling subtraction
    (``pair``: (the parent's slot in the previous level, 1 where the right child is built)); ``bound``: the most
    rows a built slot can hold (its parent's count), the launch size of the ragged row fold."""

    tree: np.ndarray
    built: np.ndarray | None
    pair: np.ndarray | None
    bound: int


class KTreeBackend(Protocol):
    """The device side of a round: per batch of trees, the root level, per level a split search and a routing,
    at the end the score update."""

    n_rows: int
    n_outputs: int

    def start_batch(self, classes: np.ndarray) -> None:
        """Every row into the root of each batch tree (tree t scores output ``classes[t]``)."""

    def search(self, level: Level, mask: np.ndarray, split: SplitParams) -> np.ndarray:
        """The level's histograms (built children, then siblings by subtraction) and each slot's best split:
        (slots,) ``boost_level.NODE_SPLIT`` records."""

    def route(self, route_tab: np.ndarray, part_tab: np.ndarray | None, pair_parent: np.ndarray) -> None:
        """Rows to their child slots or leaves (``route_tab``); where ``part_tab`` is given, the stable partition
        of the slots it splits (child >= 0) and the next level's slot ranges (pairs of ``pair_parent``)."""

    def end_batch(self) -> None:
        """Keep the batch trees' leaf codes (every row ends in a leaf: ``-2 - leaf``) for the score update."""

    def update_scores(self, leaf_value: np.ndarray) -> None:
        """Add each row's leaf value (``leaf_value[leaf]``) in each output's tree to its score."""


def _splits(recs: np.ndarray) -> Splits:
    """The records of one tree's slots as the grower's :class:`Splits` (one output)."""
    ok = np.isfinite(recs["gain"])
    side = ok[:, None, None]
    return Splits(gain=np.where(ok, recs["gain"], -np.inf), feature=recs["feat"].astype(np.int32),
                  bin=recs["bin"].astype(np.int32), default_left=ok & (recs["dir"] == 0),
                  left_sum=np.where(side, np.stack([recs["lg"], recs["lh"]], -1)[:, None], 0.0),
                  right_sum=np.where(side, np.stack([recs["rg"], recs["rh"]], -1)[:, None], 0.0),
                  total=np.stack([recs["tg"], recs["th"]], -1)[:, None].astype(np.float64))


def grow_round(backend: KTreeBackend, mask: np.ndarray, params: GrowParams, threshold: Thresholds,
               batch: int | None = None) -> list[Tree]:
    """The round's K trees (tree k on output k of the gradients already in ``backend``), grown ``batch`` at a time
    (None: all together); the scores are updated. Each tree's ``value`` is (n_nodes, K), zero but in its column
    ``output``."""
    k = backend.n_outputs
    step = k if batch is None else max(1, int(batch))
    trees: list[Tree] = []
    leaf_value: list[float] = []  # the round's leaf table (leaf ids run on across batches)
    for lo in range(0, k, step):
        trees += _grow_batch(backend, np.arange(lo, min(k, lo + step), dtype=np.int32), mask, params, threshold,
                             leaf_value)
        backend.end_batch()
    backend.update_scores(np.asarray(leaf_value, np.float64))
    return trees


def _grow_batch(backend: KTreeBackend, classes: np.ndarray, mask: np.ndarray, params: GrowParams,
                threshold: Thresholds, leaf_value: list[float]) -> list[Tree]:
    """The depth-wise grower of :func:`mdhom.trees.grower.grow_tree` for every batch tree in lockstep: a level's
    choices per tree (gain above SPLIT_EPS, the best gains within ``max_leaves``, ties to the earlier node of the
    level, whose order is the built children then their siblings), node ids and leaf values are that grower's."""
    n_trees = len(classes)
    backend.start_batch(classes)
    level = Level(np.arange(n_trees, dtype=np.int32), None, None, backend.n_rows)
    recs = backend.search(level, mask, params.split)
    nodes = []
    for t in range(n_trees):
        nodes.append(NodeTable(1))
        nodes[t].add([[recs["tg"][t], recs["th"][t]]], 0)
    order = [[t] for t in range(n_trees)]  # each tree's slots in the grower's level order
    ids = [[0] for _ in range(n_trees)]  # ... and their node ids
    n_leaves = [1] * n_trees
    leaves: list[tuple[int, int]] = []  # (tree, node) of each leaf of the batch, ids from len(leaf_value) on
    first = len(leaf_value)
    depth = 0
    while True:
        n_slots = len(level.tree)
        route_tab = np.zeros((n_slots, 4), np.int32)
        part_tab = np.full((n_slots, 3), -1, np.int32)
        pairs: list[tuple[int, int, bool]] = []  # (parent slot, tree, left child built) per partitioned slot
        next_order: list[list[int]] = [[] for _ in range(n_trees)]
        next_ids: list[list[int]] = [[] for _ in range(n_trees)]
        for t in range(n_trees):
            slots = np.asarray(order[t], np.int64)
            if not slots.size:
                continue
            gain = recs["gain"][slots]
            chosen = np.flatnonzero(gain > SPLIT_EPS)
            if params.max_leaves:
                room = params.max_leaves - n_leaves[t]
                chosen = np.sort(chosen[np.argsort(-gain[chosen], kind="stable")[:room]])
            for j in np.setdiff1d(np.arange(slots.size), chosen).tolist():
                route_tab[slots[j], 2] = first + len(leaves)
                leaves.append((t, ids[t][j]))
            if not chosen.size:
                continue
            parents = np.asarray(ids[t], np.int32)[chosen]
            lo, hi, left_small, record = nodes[t].split_level(parents, _splits(recs[slots]), chosen, params)
            record()
            n_leaves[t] += int(chosen.size)
            done = not can_split(depth + 1, params) or bool(params.max_leaves and n_leaves[t] >= params.max_leaves)
            small_slots, large_slots, small_ids, large_ids = [], [], [], []
            for c, j in enumerate(chosen.tolist()):
                s, r = int(slots[j]), recs[slots[j]]
                flags = BL.SPLITS | (BL.DEFAULT_LEFT if r["dir"] == 0 else 0)
                if done:  # the children end the tree: leaves
                    route_tab[s] = (r["feat"], r["bin"], first + len(leaves), flags | BL.TO_LEAVES)
                    leaves += [(t, int(lo[c])), (t, int(hi[c]))]
                    continue
                p = len(pairs)
                pairs.append((s, t, bool(left_small[c])))
                route_tab[s] = (r["feat"], r["bin"], 2 * p, flags)
                part_tab[s] = (r["feat"], r["bin"], 2 * p)
                side = 0 if left_small[c] else 1
                small_slots.append(2 * p + side)
                large_slots.append(2 * p + 1 - side)
                small_ids.append(int(lo[c] if left_small[c] else hi[c]))
                large_ids.append(int(hi[c] if left_small[c] else lo[c]))
            next_order[t], next_ids[t] = small_slots + large_slots, small_ids + large_ids
        parents = np.asarray([p[0] for p in pairs], np.int32)
        backend.route(route_tab, part_tab if pairs else None, parents)
        if not pairs:
            break
        depth += 1
        side = np.asarray([0 if p[2] else 1 for p in pairs], np.int32)
        level = Level(np.repeat(np.asarray([p[1] for p in pairs], np.int32), 2),
                      (2 * np.arange(len(pairs)) + side).astype(np.int32), np.stack([parents, side], 1),
                      int(recs["count"][parents].max()))
        recs = backend.search(level, mask, params.split)
        order, ids = next_order, next_ids
    values = [nd.values(params) for nd in nodes]  # (n_nodes, 1) each
    leaf_value += [float(values[t][node, 0]) for t, node in leaves]
    trees = []
    for t, nd in enumerate(nodes):
        full = np.zeros((nd.n, backend.n_outputs))
        full[:, classes[t]] = values[t][:, 0]
        tree = nd.to_tree(params, threshold, full)
        tree.output = int(classes[t])
        trees.append(tree)
    return trees


def make_ktree_kernels(device: Any, precision: str, p: dict[str, Any], categorical: np.ndarray,
                       batch: int | None = None) -> NumpyKTrees | Any:
    """The backend of a one-tree-per-output fit (``precision`` resolved, ``p`` the validated options), or a clear
    error for what this mode does not do."""
    mode = "multi_strategy='one_output_per_tree'"
    if p["grow_policy"] != "depthwise":
        raise ValueError(f"{mode} grows trees depth-wise only; use grow_policy='depthwise' (bounded by max_depth and "
                         "max_leaves), or multi_strategy='multi_output_tree' for loss-guided trees")
    if np.any(categorical):
        raise ValueError(f"{mode} does not support categorical features; use multi_strategy='multi_output_tree'")
    if precision not in ("double", "quantized"):
        raise ValueError(f"{mode} runs in precision 'double' or 'quantized', not {precision!r} (a device without "
                         "double precision resolves to 'single': use multi_strategy='multi_output_tree' there)")
    if device == "numpy":
        return NumpyKTrees(precision, batch)
    from mdhom.trees.ktrees_opencl import OpenCLKTrees

    return OpenCLKTrees("auto" if device is None else device, precision, batch)


class HostEvals:
    """Eval sets on the host: binned rows and raw scores, a tree's leaf values added to its output's column (the
    numpy walk over bins, so every backend reports the same bits)."""

    evals: list[list[np.ndarray]]

    def add_eval(self, bins: Any, base_score: np.ndarray) -> int:
        bins = np.ascontiguousarray(self._host_bins(bins))
        if not hasattr(self, "evals"):
            self.evals = []
        self.evals.append([bins, np.tile(np.asarray(base_score, np.float64), (bins.shape[0], 1))])
        return len(self.evals) - 1

    def update_eval(self, handle: int, tree: Tree) -> np.ndarray:
        bins, raw = self.evals[handle]
        k = tree.output
        raw[:, k] = raw[:, k] + tree.value[predict_bins(bins, tree, self.n_bins), k]
        return raw

    def _host_bins(self, bins: Any) -> np.ndarray:
        return bins


class NumpyKTrees(HostEvals):
    """The reference backend of the K-tree round: the level kernels' numpy references, one call per kernel, and the
    gradients of :meth:`mdhom.learn.losses.Loss.gradients` (quantized: the references' fixed point)."""

    build_seconds = 0.0

    def __init__(self, precision: str = "double", batch: int | None = None) -> None:
        BL.lane_ctype(precision)  # refuses single precision
        self.precision, self.batch = precision, batch

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        return {}

    def bin_rows(self, mapper: Any) -> Callable[[Any], np.ndarray]:
        return mapper.transform  # dense bins, sparse input included (each tree reads every row)

    def check_size(self, n_rows: int, n_features: int, n_bins: int, n_outputs: int,
                   n_stored: int | None = None) -> None:
        node = n_features * n_bins * 2 * 8
        check_host(n_rows * n_features * 2 + 4 * n_rows * n_outputs * 8 + 64 * node,
                   f"a one-tree-per-output fit of {n_rows} x {n_features} features and {n_outputs} outputs "
                   f"(the bin matrix, per output the position order and row slots; {size_text(node)} a node)",
                   n_features)

    def load(self, bins: np.ndarray, n_bins: int, n_outputs: int, cat_mode: np.ndarray | None = None) -> None:
        if cat_mode is not None and np.any(cat_mode):
            raise ValueError("multi_strategy='one_output_per_tree' does not support categorical features")
        self.bins, self.n_bins = np.ascontiguousarray(bins), int(n_bins)
        self.n_rows, self.n_outputs = self.bins.shape[0], int(n_outputs)

    def set_objective(self, loss: Any, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:
        self.loss, self.y, self.w = loss, np.asarray(y, np.float64), np.asarray(w, np.float64)
        self.raw = np.tile(np.asarray(base_score, np.float64), (self.n_rows, 1))

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        g, h = self.loss.gradients(self.y, self.raw, self.w)
        if keep is not None:
            g[~keep] = 0.0
            h[~keep] = 0.0
        self.inv_scale = None
        if self.precision == "quantized":
            g, h, self.inv_scale = quantize_gh(g, h)
        self.gh = np.stack([g, h], axis=-1)  # (n, K, 2)
        self.leaf = np.empty((self.n_outputs, self.n_rows), np.int32)  # each output's tree's leaf codes

    def grow_round(self, keep: np.ndarray | None, mask: np.ndarray, params: GrowParams,
                   threshold: Thresholds) -> list[Tree]:
        self.compute_gradients(keep)
        return grow_round(self, mask, params, threshold, self.batch)

    def scores(self) -> np.ndarray:
        return self.raw.copy()

    def sync(self) -> None:
        pass

    def end_round(self) -> None:
        pass

    # ------------------------------------------------------------------------------------------ the level steps
    def start_batch(self, classes: np.ndarray) -> None:
        n, t = self.n_rows, len(classes)
        self.classes = np.asarray(classes, np.int32)
        self.order = np.tile(np.arange(n, dtype=np.int32), (t, 1))
        self.row_slot = np.repeat(np.arange(t, dtype=np.int32)[:, None], n, axis=1)
        self.begin = (np.arange(t) * n).astype(np.int32)
        self.count = np.full(t, n, np.int32)

    def search(self, level: Level, mask: np.ndarray, split: SplitParams) -> np.ndarray:
        built = np.arange(len(level.tree), dtype=np.int32) if level.built is None else level.built
        hist = BL.histogram_reference(self.bins, self.gh, self.order, self.begin, self.count, built, level.tree,
                                      self.classes, self.n_bins)
        if level.pair is not None:
            hist = FH.hist_siblings_reference(hist, self.prev, level.pair.reshape(-1))
        self.prev = hist
        params = {p: getattr(split, p) for p in BL.GAIN_PARAMS}
        fs = BL.feature_split_reference(hist, mask, level.tree, self.classes, params, self.inv_scale)
        return BL.node_split_reference(fs, self.count)

    def route(self, route_tab: np.ndarray, part_tab: np.ndarray | None, pair_parent: np.ndarray) -> None:
        new = BL.route_reference(self.row_slot, route_tab, self.bins, self.n_bins)
        if part_tab is not None:
            left = BL.split_left_reference(new, self.order, part_tab, self.begin, self.count)
            self.order = FP.partition_reference(self.order, new, part_tab, self.begin, self.count)
            self.begin, self.count = BL.child_slots_reference(pair_parent, self.begin, self.count, left)
        self.row_slot = new

    def end_batch(self) -> None:
        self.leaf[self.classes] = self.row_slot

    def update_scores(self, leaf_value: np.ndarray) -> None:
        self.raw = BL.score_update_reference(self.raw, self.leaf, leaf_value)
