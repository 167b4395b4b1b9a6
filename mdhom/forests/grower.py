"""Growing a whole forest level by level: every tree's nodes of a level are one batch of slots.

The algorithm lives here, once; a backend only runs the two steps the md_hom kernels do
(:mod:`mdhom.forests.layout`): ``level`` (histograms, node totals and best splits of a batch of slots) and
``route`` (each row to its child slot, and the stable partition of the split nodes' rows). The numpy backend
runs the kernels' references, the OpenCL backend the kernels, and since every sum is an integer and every score
the same double arithmetic in the same order, both grow the same trees bit for bit.

A level is cut into batches only where its histograms would not fit ``HIST_BUDGET`` bytes; otherwise one
launch of each kernel serves every node of every tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from mdhom.forests import histogram as H
from mdhom.forests import partition as P
from mdhom.forests import sampled as SM
from mdhom.forests import split as S
from mdhom.learn.binning import BinMapper

HIST_BUDGET = 256 << 20  # bytes of histograms per batch of slots
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GrowSpec:
    """What the grower needs to know besides the data: the fit's resolved parameters."""

    outputs: tuple[int, ...]  # classes per output (classification) or 1 per output (regression)
    criterion: str
    max_depth: int | None
    min_samples_split: int
    min_samples_leaf: int
    max_features: int

    @property
    def classification(self) -> bool:
        return self.criterion != "squared_error"


@dataclass(frozen=True, eq=False)
class Bag:
    """What every tree's bag weights are made from: its draw stream's seed (:func:`~mdhom.forests.partition.
    draw_rows`), ``n_draw`` draws of the rows with replacement (``bootstrap``; else every row once, ``n_draw`` the
    rows), times the rows' whole-number sample weights. The backend makes the weights where the trees grow."""

    seeds: np.ndarray  # (trees,) uint64
    n_rows: int
    n_draw: int
    bootstrap: bool
    sample_weight: np.ndarray  # (rows,) whole numbers in [0, 2^31)

    def __post_init__(self) -> None:
        sw = np.asarray(self.sample_weight)
        if sw.shape != (self.n_rows,):
            raise ValueError(f"a bag over {self.n_rows} rows needs {self.n_rows} sample weights, got {sw.shape}")
        if sw.size and (sw.min() < 0 or sw.max() > INT32_MAX):
            raise ValueError("sample weights of a forest must be whole numbers in [0, 2^31)")
        if not 0 <= self.n_draw <= self.n_rows or (not self.bootstrap and self.n_draw != self.n_rows):
            raise ValueError(f"{self.n_draw} draws of {self.n_rows} rows (bootstrap={self.bootstrap}): the draws "
                             "are at most the rows, and all of them without bootstrap")
        # the device takes the seeds as raw 64-bit words and the weights as int32
        object.__setattr__(self, "seeds", np.ascontiguousarray(self.seeds, np.uint64).reshape(-1))
        object.__setattr__(self, "sample_weight", sw.astype(np.int32))

    @property
    def n_trees(self) -> int:
        return int(self.seeds.size)

    @property
    def worst_weight(self) -> int:
        """The most a tree's weights could sum to (every draw the heaviest row): what must stay below 2^31."""
        sw = self.sample_weight.astype(np.int64)
        return int(self.n_draw * sw.max(initial=0)) if self.bootstrap else int(sw.sum())

    @cached_property
    def max_tree_weight(self) -> int:
        """The largest sum of weights of any tree, exactly: the fixed-point scale of regression targets and the
        entropy's x log x table follow it. Equal sample weights give it without drawing; unequal ones draw every
        tree's rows on the host (numpy, what every fit cost before the bags moved to the device)."""
        sw = self.sample_weight.astype(np.int64)
        if not self.bootstrap or not sw.size or np.all(sw == sw[0]):
            return self.worst_weight
        return max((int(sw[P.draw_rows(int(s), self.n_draw, self.n_rows)].sum()) for s in self.seeds), default=0)

    def take(self, trees: np.ndarray | slice) -> Bag:
        """The bag of some of the trees (a batch of a chain position's forests)."""
        return Bag(self.seeds[trees], self.n_rows, self.n_draw, self.bootstrap, self.sample_weight)

    def weights(self) -> np.ndarray:
        """(trees, rows) int32: the numpy reference of ``forest_bootstrap``."""
        return P.bootstrap_reference(self.seeds, self.n_rows, self.n_draw, self.bootstrap, self.sample_weight)


@dataclass
class Slots:
    """A batch of nodes: one entry per (tree, node). ``begin`` is absolute in the trees x rows position order."""

    begin: np.ndarray
    count: np.ndarray
    tree: np.ndarray
    node: np.ndarray
    seed: np.ndarray
    parent: np.ndarray  # the parent's slot in the previous level (-1 at the roots); siblings are 2k, 2k + 1

    def take(self, lo: int, hi: int) -> Slots:
        return Slots(self.begin[lo:hi], self.count[lo:hi], self.tree[lo:hi], self.node[lo:hi], self.seed[lo:hi],
                     self.parent[lo:hi])

    def __len__(self) -> int:
        return int(self.begin.size)


class ForestBackend(Protocol):
    def bin_rows(self, mapper: BinMapper, X: np.ndarray) -> Any:
        """The mapper's bins of dense float64 or float32 ``X`` in the form :meth:`start` takes (numpy: host bins)."""
        ...

    def start(self, bins: Any, n_bins: int, stat: np.ndarray, bag: Bag, spec: GrowSpec,
              xlogx: np.ndarray, per_tree: H.PerTree | None = None) -> np.ndarray:
        """Take a batch of trees' data (``per_tree``: their own target columns and features), make their bag
        weights (:meth:`Bag.weights`) and the root level from them: each tree's position order
        (:func:`bag_order`) and every in-bag row in its tree's root slot
        (:func:`mdhom.forests.partition.bag_slots_reference`). Returns each tree's in-bag rows (int32)."""
        ...

    def level(self, slots: Slots, spec: GrowSpec, whole: bool) -> tuple[np.ndarray, np.ndarray]:
        """(totals (S, lanes) int64, NODE_SPLIT records (S,)) of a batch (``whole``: the batch is the level)."""
        ...

    def totals(self, slots: Slots) -> np.ndarray:
        """(S, lanes) int64 node totals of a whole level without a split search (the deepest level: its nodes are
        leaves whatever their splits, so only the totals, for the leaf values, are worth computing)."""
        ...

    def route(self, split_tab: np.ndarray, split_left: np.ndarray, slots: Slots) -> None:
        """Rows of split slots to their children (left 2k, right 2k+1 for the k-th split slot), partitioned."""
        ...


class NumpyForest:
    """The reference backend: the kernels' numpy references, one call per kernel."""

    def bin_rows(self, mapper: BinMapper, X: np.ndarray) -> np.ndarray:
        return mapper.transform(X)

    def start(self, bins, n_bins, stat, bag, spec, xlogx, per_tree=None):  # noqa: ANN001, ANN201
        weight = bag.weights()
        self.bins, self.n_bins, self.stat, self.weight = bins, n_bins, stat, weight
        self.order, counts = bag_order(weight > 0)
        self.row_slot, self.xlogx = P.bag_slots_reference(weight), xlogx
        self.per_tree = per_tree
        return counts

    def level(self, slots, spec, whole):  # noqa: ANN001, ANN201
        hist = H.histogram_reference(self.bins, self.stat, self.weight, self.order, slots.begin, slots.count,
                                     slots.tree, self.n_bins, self.per_tree)
        totals = S.node_totals_reference(hist)
        fs = S.feature_split_reference(hist, spec.outputs, spec.criterion, spec.min_samples_leaf, self.xlogx)
        allowed = None if self.per_tree is None else self.per_tree.mask[slots.tree] != 0
        ns = S.node_split_reference(fs, totals, slots.seed, slots.node, spec.max_features, spec.outputs,
                                    spec.criterion, self.xlogx, allowed)
        return totals, ns

    def totals(self, slots):  # noqa: ANN001, ANN201
        return SM.slot_totals_reference(self.stat, self.weight, self.order, slots.begin, slots.count, slots.tree,
                                        self.per_tree)

    def route(self, split_tab, split_left, slots):  # noqa: ANN001, ANN201
        new = P.route_reference(self.row_slot, split_tab, self.bins)
        self.order = P.partition_reference(self.order, new, split_tab, slots.begin, slots.count)
        self.row_slot = new


@dataclass
class GrownForest:
    """Every node of every tree, trees in order, each tree's nodes in level order (root 0)."""

    offsets: np.ndarray  # (T + 1,) first node of each tree
    feature: np.ndarray  # -1 for a leaf
    split_bin: np.ndarray
    left: np.ndarray  # local child ids (-1 for a leaf); right = left + 1
    totals: np.ndarray  # (N, lanes) int64: the node's lane sums
    gain: np.ndarray  # the split's score gain (0 for leaves)
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))


def _pure(totals: np.ndarray, spec: GrowSpec) -> np.ndarray:
    """Classification nodes whose every output has one class holding all the weight (scikit-learn's leaves of
    zero impurity). Regression nodes are never called pure here; a split must gain (below) instead."""
    if not spec.classification:
        return np.zeros(len(totals), bool)
    w = totals[:, -2]
    offs = np.concatenate([[0], np.cumsum(spec.outputs)])
    pure = np.ones(len(totals), bool)
    for o in range(len(spec.outputs)):
        pure &= totals[:, offs[o]:offs[o + 1]].max(axis=1) == w
    return pure


def bag_order(inbag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(trees x n int32 position order: each tree's in-bag rows ascending, then its out-of-bag rows ascending;
    in-bag counts). The stable argsort it equals sorts trees x n keys per grow; two scans per tree cost a third."""
    n_trees, n = inbag.shape
    order = np.empty((n_trees, n), np.int32)
    counts = np.empty(n_trees, np.int32)
    for t in range(n_trees):
        inside = np.flatnonzero(inbag[t])
        counts[t] = inside.size
        order[t, :inside.size] = inside
        order[t, inside.size:] = np.flatnonzero(~inbag[t])
    return order, counts


def grow(backend: ForestBackend, bins: np.ndarray, n_bins: int, stat: np.ndarray, bag: Bag,
         seeds: np.ndarray, spec: GrowSpec, per_tree: H.PerTree | None = None) -> GrownForest:
    """Grow ``bag.n_trees`` trees on the binned rows together (``per_tree``: each tree's own target columns of
    ``stat`` and allowed features, the forests of many classifier chains in one batch)."""
    n_trees, n = bag.n_trees, bag.n_rows
    lanes = (stat.shape[1] if per_tree is None else per_tree.n_stats) + 2
    xlogx = S.xlogx_table(bag.max_tree_weight if spec.criterion == "entropy" else 0)
    # the backend makes the bag weights, the bag order and the root slots (an OpenCL backend on its device: the
    # host's draws, per-tree scans and trees x rows uploads were most of a many-tree fit's host time)
    counts = backend.start(bins, n_bins, stat, bag, spec, xlogx, per_tree)
    trees = np.arange(n_trees, dtype=np.int32)
    slots = Slots(trees * np.int32(n), counts.astype(np.int32), trees, np.zeros(n_trees, np.int32),
                  seeds.astype(np.uint32), np.full(n_trees, -1, np.int32))
    n_nodes = np.ones(n_trees, np.int64)
    # histogram bytes per slot: every feature's, or (a sampled backend) only its drawn candidates'
    per_slot = max(1, getattr(backend, "slot_feat", bins.shape[1]) * n_bins * lanes * 8)
    batch = max(1, HIST_BUDGET // per_slot)
    levels: list[tuple] = []
    depth = 0
    while len(slots):
        if spec.max_depth is not None and depth >= spec.max_depth:
            # the deepest level splits nothing: its totals (the leaf values) in one step, no split search, no
            # histogram batches (the search's result was thrown away here; the trees are the same)
            totals = np.asarray(backend.totals(slots), np.int64)
            ns = np.zeros(len(slots), S.NODE_SPLIT.dtype)
            ns["feat"] = ns["bin"] = -1
        else:
            whole = batch >= len(slots)
            parts = [backend.level(slots.take(lo, lo + batch), spec, whole) for lo in range(0, len(slots), batch)]
            totals = np.concatenate([p[0] for p in parts]).astype(np.int64)
            ns = np.concatenate([p[1] for p in parts])
        split = (ns["feat"] >= 0) & (totals[:, -1] >= spec.min_samples_split) & ~_pure(totals, spec)
        if not spec.classification:  # a regression split must gain beyond the rounding of its score
            parent = S.side_reference(totals, spec.outputs, spec.criterion, np.zeros(1))
            split &= ns["gain"] > 1e-12 * np.abs(parent)
        k = np.flatnonzero(split)
        child_slot = np.full(len(slots), -1, np.int32)
        child_slot[k] = 2 * np.arange(k.size, dtype=np.int32)
        # children's node ids: the next free ids of their tree, in slot order (slots are grouped by tree)
        tk = slots.tree[k]
        first = np.searchsorted(tk, tk, side="left")
        child_id = (n_nodes[tk] + 2 * (np.arange(k.size) - first)).astype(np.int32)
        np.add.at(n_nodes, tk, 2)
        left_node = np.full(len(slots), -1, np.int32)
        left_node[k] = child_id
        levels.append((slots.tree.copy(), slots.node.copy(), np.where(split, ns["feat"], -1), ns["bin"], left_node,
                       totals, np.where(split, ns["gain"], 0.0), depth))
        if not k.size:
            break
        split_tab = np.stack([np.maximum(ns["feat"], 0), ns["bin"], child_slot], axis=1).astype(np.int32)
        split_left = np.where(split, ns["left"], 0).astype(np.int32)
        backend.route(split_tab, split_left, slots)
        b, c, nl = slots.begin[k], slots.count[k], split_left[k]
        slots = Slots(np.stack([b, b + nl], 1).reshape(-1).astype(np.int32),
                      np.stack([nl, c - nl], 1).reshape(-1).astype(np.int32),
                      np.repeat(tk, 2).astype(np.int32), np.stack([child_id, child_id + 1], 1).reshape(-1),
                      np.repeat(slots.seed[k], 2), np.repeat(k, 2).astype(np.int32))
        depth += 1
    return _assemble(levels, n_nodes, lanes)


def _assemble(levels: list[tuple], n_nodes: np.ndarray, lanes: int) -> GrownForest:
    offsets = np.concatenate([[0], np.cumsum(n_nodes)]).astype(np.int64)
    total = int(offsets[-1])
    feature = np.full(total, -1, np.int32)
    split_bin = np.full(total, -1, np.int32)
    left = np.full(total, -1, np.int32)
    totals = np.zeros((total, lanes), np.int64)
    gain = np.zeros(total)
    depth = np.zeros(total, np.int32)
    for tree, node, feat, sbin, lnode, tot, g, d in levels:
        at = offsets[tree] + node
        feature[at], split_bin[at], left[at], totals[at], gain[at], depth[at] = feat, sbin, lnode, tot, g, d
    split_bin[feature < 0] = -1
    return GrownForest(offsets, feature, split_bin, left, totals, gain, depth)
