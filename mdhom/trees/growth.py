"""What every tree grower here shares: its parameters, the node table a tree is written into while it grows, and
the rules for depth limits, categorical splits and sibling histograms (:mod:`mdhom.trees.grower` grows depth-wise and
drives :mod:`mdhom.trees.lossguide`; :mod:`mdhom.trees.ktrees` grows one tree per output with the same table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdhom.components.lookahead import AHEAD_ENTRIES
from mdhom.learn.portable import sum_in_order
from mdhom.trees.backend import SplitParams, Splits, TreeKernels
from mdhom.trees.model import CategoryTables, Tree
from mdhom.trees.reference import leaf_weight, left_smaller

# the raw thresholds of split nodes from their (feature, split bin) arrays (BinMapper.thresholds)
Thresholds = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class GrowParams:
    split: SplitParams
    learning_rate: float
    max_depth: int  # 0: no limit
    max_leaves: int  # 0: no limit
    lossguide: bool
    categorical: np.ndarray | None = None  # bool per feature; None: every feature numeric


class NodeTable:
    """Per-node arrays of the tree being built, grown by doubling (a depth-wise level adds up to 2^depth nodes
    in one step, and per-node Python there keeps the device waiting)."""

    def __init__(self, n_outputs: int, capacity: int = 64) -> None:
        self.n_outputs = n_outputs
        self.n = 0
        self._alloc(max(1, capacity))
        self.cat_left: dict[int, np.ndarray] = {}  # the left bins of each categorical split node

    def _alloc(self, cap: int) -> None:
        old = self.n

        def grow(a: np.ndarray | None, fill: object, shape: tuple[int, ...] = (), dtype: object = np.int32
                 ) -> np.ndarray:
            out = np.full((cap, *shape), fill, dtype)
            if a is not None:
                k = min(old, len(a))
                out[:k] = a[:k]
            return out

        get = self.__dict__.get
        self.sums = grow(get("sums"), 0.0, (self.n_outputs, 2), np.float64)
        self.depth = grow(get("depth"), 0)
        self.left, self.right = grow(get("left"), -1), grow(get("right"), -1)
        self.feature, self.bin = grow(get("feature"), -1), grow(get("bin"), 0)
        self.default_left = grow(get("default_left"), False, (), bool)
        self.gain = grow(get("gain"), 0.0, (), np.float64)

    def _new(self, k: int) -> int:
        """Room for ``k`` more nodes; returns the first new id."""
        first = self.n
        if first + k > self.depth.size:
            self._alloc(max(first + k, 2 * self.depth.size))
        self.n += k
        return first

    def add(self, sums: np.ndarray, depth: int) -> int:
        i = self._new(1)
        self.sums[i] = np.asarray(sums, np.float64).reshape(self.n_outputs, 2)
        self.depth[i] = depth
        return i

    def split(self, node: int, splits: Splits, i: int, params: GrowParams) -> tuple[int, int]:
        """:meth:`split_level` of one node, with scalars (a loss-guided tree splits one node per step)."""
        d = self.depth[node] + 1
        lo = self._new(2)
        hi = lo + 1
        self.sums[lo], self.sums[hi] = splits.left_sum[i], splits.right_sum[i]  # (n_outputs, 2) each
        self.depth[lo] = self.depth[hi] = d
        self.left[node], self.right[node] = lo, hi
        self.feature[node], self.bin[node] = int(splits.feature[i]), int(splits.bin[i])
        self.default_left[node] = bool(splits.default_left[i])
        self.gain[node] = float(splits.gain[i]) + params.split.min_split_gain
        if is_categorical(params, int(self.feature[node])):
            self.cat_left[node] = splits.cat_left[i].copy()
        return lo, hi

    def write_splits(self, node: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     gain: np.ndarray, left_sum: np.ndarray, right_sum: np.ndarray, depth: np.ndarray,
                     params: GrowParams, cat_left: Callable[[int], np.ndarray] | None) -> int:
        """Split ``node[k]`` into two new nodes ``first + 2k`` and ``first + 2k + 1`` of depth ``depth[k]`` (their
        parents may be new nodes of the same call), the splits given field by field in arrays, in a few numpy calls
        (the loss-guided walk takes ~250 splits a tree; written one by one they had kept the device waiting for the
        tree's end). ``cat_left(k)`` gives split k's left bins, asked where the fit has categorical features. Returns
        ``first``."""
        k = int(np.asarray(node).size)
        first = self._new(2 * k)
        lo = np.arange(first, first + 2 * k, 2)
        self.sums[lo], self.sums[lo + 1] = left_sum, right_sum
        self.depth[lo] = self.depth[lo + 1] = depth
        self.left[node], self.right[node] = lo, lo + 1
        self.feature[node], self.bin[node], self.default_left[node] = feature, bin, default_left
        self.gain[node] = np.asarray(gain, np.float64) + params.split.min_split_gain
        if params.categorical is not None:
            if cat_left is None:
                raise ValueError("write_splits: a fit with categorical features needs the splits' left bins")
            for j in np.flatnonzero(params.categorical[np.asarray(feature, np.int64)]).tolist():
                self.cat_left[int(node[j])] = np.array(cat_left(j), copy=True)
        return first

    def split_level(self, parents: np.ndarray, splits: Splits, chosen: np.ndarray, params: GrowParams
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Callable[[], None]]:
        """Split every ``parents[k]`` by split ``chosen[k]`` of ``splits``, in that order: the children of
        ``parents[k]`` get ids ``first + 2k`` (left) and ``first + 2k + 1``. Returns (left ids, right ids, whether
        each left child has the smaller hessian sum, the proxy for its row count, ties going left; and
        ``record``, which writes the split into the node table). The ids and the hint are what the device needs
        next; ``record`` can wait until the device is busy (a level holds up to 2^depth nodes)."""
        k = parents.size
        first = self._new(2 * k)
        lo = np.arange(first, first + 2 * k, 2, dtype=np.int32)
        hi = lo + 1
        ls = np.asarray(splits.left_sum[chosen], np.float64).reshape(k, self.n_outputs, 2)
        rs = np.asarray(splits.right_sum[chosen], np.float64).reshape(k, self.n_outputs, 2)
        left_small = left_smaller(ls, rs)

        def record() -> None:
            self.sums[lo], self.sums[hi] = ls, rs
            self.depth[lo] = self.depth[hi] = self.depth[parents] + 1
            self.left[parents], self.right[parents] = lo, hi
            self.feature[parents], self.bin[parents] = splits.feature[chosen], splits.bin[chosen]
            self.default_left[parents] = splits.default_left[chosen]
            self.gain[parents] = np.asarray(splits.gain[chosen], np.float64) + params.split.min_split_gain
            if params.categorical is not None:
                for p, f, c in zip(parents.tolist(), splits.feature[chosen].tolist(), np.asarray(chosen).tolist(),
                                   strict=True):
                    if is_categorical(params, int(f)):
                        self.cat_left[p] = splits.cat_left[c].copy()

        return lo, hi, left_small, record

    def left_small(self, splits: Splits, chosen: np.ndarray) -> np.ndarray:
        """:meth:`split_level`'s hint of which child is built, before the children have ids."""
        k = np.asarray(chosen).size
        return left_smaller(np.asarray(splits.left_sum[chosen], np.float64).reshape(k, self.n_outputs, 2),
                            np.asarray(splits.right_sum[chosen], np.float64).reshape(k, self.n_outputs, 2))

    def smaller_is_left(self, node: int) -> bool:
        """:func:`left_smaller` of ``node``'s children."""
        lo, hi = self.left[node], self.right[node]
        return bool(left_smaller(self.sums[lo:lo + 1], self.sums[hi:hi + 1])[0])

    def values(self, params: GrowParams) -> np.ndarray:
        """Each node's value (n_nodes, n_outputs)."""
        return node_values(self.sums[: self.n], params)

    def to_tree(self, params: GrowParams, threshold: Thresholds, value: np.ndarray | None = None) -> Tree:
        n = self.n
        sums = self.sums[:n]
        value = self.values(params) if value is None else value
        feature = self.feature[:n].copy()
        thr = np.zeros(n)
        inner = np.flatnonzero(feature >= 0)
        thr[inner] = threshold(feature[inner], self.bin[:n][inner])
        tables = None
        if self.cat_left:
            row = np.full(n, -1, np.int32)
            order = sorted(self.cat_left)
            row[order] = np.arange(len(order))
            thr[order] = np.inf
            tables = CategoryTables(row, np.stack([self.cat_left[i] for i in order]))
        return Tree(
            left=self.left[:n].copy(), right=self.right[:n].copy(), feature=feature,
            threshold=thr, default_left=self.default_left[:n].copy(), value=value,
            gain=self.gain[:n].copy(), cover=sum_in_order(sums[:, :, 1], axis=1), bin=self.bin[:n].copy(),
            cat_left=tables,
        )


def node_values(sums: np.ndarray, params: GrowParams) -> np.ndarray:
    """The values of nodes of (g, h) sums ((n_nodes, n_outputs, 2)): learning rate x the leaf weight."""
    sp = params.split
    return params.learning_rate * leaf_weight(sums[:, :, 0], sums[:, :, 1], sp.reg_lambda, sp.reg_alpha)


def is_categorical(params: GrowParams, feature: int) -> bool:
    return params.categorical is not None and bool(params.categorical[feature])


def any_categorical(params: GrowParams, features: np.ndarray | list[int]) -> bool:
    """Whether any of the listed split features is categorical (nothing to look up in an all-numeric fit)."""
    return params.categorical is not None and bool(np.any(params.categorical[np.asarray(features, np.int64)]))


def cat_tables(params: GrowParams, splits: Splits, index: list[int] | np.ndarray,
               feature: np.ndarray) -> np.ndarray | None:
    """The left-bin tables of the listed splits for ``apply_splits`` (None when none of them is categorical)."""
    if splits.cat_left is None or not any_categorical(params, feature):
        return None
    return splits.cat_left[np.asarray(index, np.int64)]


def sibling_histograms(kernels: TreeKernels, parent: object, child: object, index: list[int] | None, n: int) -> object:
    """[child, parent[index] - child] (``parent`` has ``n`` nodes) in one backend call."""
    if index is not None and index == list(range(n)):
        index = None
    return kernels.siblings(parent, child, None if index is None else np.asarray(index, np.int32))


def can_split(depth: int, params: GrowParams) -> bool:
    return params.max_depth == 0 or depth < params.max_depth


def can_split_each(depth: np.ndarray, params: GrowParams) -> np.ndarray:
    """:func:`can_split` of each of an array of depths (a loss-guided batch's nodes)."""
    depth = np.asarray(depth)
    return depth < params.max_depth if params.max_depth else np.ones(depth.shape, bool)


def ahead_levels(kernels: TreeKernels, params: GrowParams, depth: int, n_nodes: int, n_leaves: int) -> int:
    """How many levels below the ``n_nodes`` nodes at ``depth`` the device may split by their best splits before the
    host sees them (``kernels.depth_ahead`` at most; none in a fit with categorical features, the look-ahead splits
    numerically): as many as leave the level after them splittable (a level at the depth limit would be built and
    searched in vain), and only while the leaf budget cannot bind (every node of those levels splitting adds
    ``n_nodes * (2^levels - 1)`` leaves at most), so that the level-wise rule (every node of gain > SPLIT_EPS, the
    largest gains where the budget is short) takes the same splits as the device's. The deepest level searched holds
    ``n_nodes * 2^levels`` entries, those below nodes that did not split included: at most ``AHEAD_ENTRIES``, so a
    tree without a depth or leaf limit does not allocate histograms for 2^7 slots below each node of a wide level."""
    if params.categorical is not None and bool(np.any(params.categorical)):
        return 0
    levels = int(kernels.depth_ahead)
    if params.max_depth:
        levels = min(levels, params.max_depth - depth - 1)
    if params.max_leaves:
        while levels > 0 and n_leaves + n_nodes * ((1 << levels) - 1) > params.max_leaves:
            levels -= 1
    while levels > 0 and n_nodes << levels > AHEAD_ENTRIES:
        levels -= 1
    return max(0, levels)
