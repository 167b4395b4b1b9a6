"""Growing one tree over any :class:`~mdhom.trees.backend.TreeKernels`: depth-wise or loss-guided.

Every decision (split or not, which split, which child is smaller, leaf values) is a function of what the
kernels return, so two backends that agree on their return values grow the same tree. Histograms of a
split node's children come from one pass over the *smaller* child's rows and one subtraction
(parent - smaller = larger): the histogram subtraction trick.

The driver needs one operation beyond the protocol of :mod:`mdhom.trees.backend`: ``take(hist, index)``,
the listed nodes of a multi-node histogram handle (depth-wise growth keeps a whole level in one handle and
splits only some of its nodes). It is only called when a level splits a strict subset of its nodes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdhom.trees.backend import SplitParams, Splits, TreeKernels
from mdhom.trees.model import Tree
from mdhom.trees.reference import NumpyTreeKernels, leaf_weight


class NumpyKernels(NumpyTreeKernels):
    """The numpy reference backend plus ``take`` (a fancy index on the node axis)."""

    build_seconds = 0.0

    def take(self, hist: np.ndarray, index: np.ndarray) -> np.ndarray:
        return hist[np.asarray(index, np.int64)]


@dataclass(frozen=True)
class GrowParams:
    split: SplitParams
    learning_rate: float
    max_depth: int  # 0: no limit
    max_leaves: int  # 0: no limit
    lossguide: bool


class _Nodes:
    """Growable per-node arrays of the tree being built."""

    def __init__(self, n_outputs: int) -> None:
        self.n_outputs = n_outputs
        self.sums: list[np.ndarray] = []  # (n_outputs, 2) each
        self.depth: list[int] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.feature: list[int] = []
        self.bin: list[int] = []
        self.default_left: list[bool] = []
        self.gain: list[float] = []

    def add(self, sums: np.ndarray, depth: int) -> int:
        self.sums.append(np.asarray(sums, np.float64).reshape(self.n_outputs, 2))
        self.depth.append(depth)
        self.left.append(-1)
        self.right.append(-1)
        self.feature.append(-1)
        self.bin.append(0)
        self.default_left.append(False)
        self.gain.append(0.0)
        return len(self.depth) - 1

    def split(self, node: int, splits: Splits, i: int, min_split_gain: float) -> tuple[int, int]:
        d = self.depth[node] + 1
        lo, hi = self.add(splits.left_sum[i], d), self.add(splits.right_sum[i], d)
        self.left[node], self.right[node] = lo, hi
        self.feature[node], self.bin[node] = int(splits.feature[i]), int(splits.bin[i])
        self.default_left[node] = bool(splits.default_left[i])
        self.gain[node] = float(splits.gain[i]) + min_split_gain
        return lo, hi

    def smaller_is_left(self, node: int) -> bool:
        """Build the child of smaller hessian sum (the proxy for its row count); ties go left."""
        lo, hi = self.left[node], self.right[node]
        return bool(self.sums[lo][:, 1].sum() <= self.sums[hi][:, 1].sum())

    def to_tree(self, params: GrowParams, threshold: Callable[[int, int], float]) -> Tree:
        sums = np.stack(self.sums)
        sp = params.split
        value = params.learning_rate * leaf_weight(sums[:, :, 0], sums[:, :, 1], sp.reg_lambda, sp.reg_alpha)
        feature = np.asarray(self.feature, np.int32)
        thr = np.array([threshold(f, b) if f >= 0 else 0.0 for f, b in zip(self.feature, self.bin, strict=True)])
        return Tree(
            left=np.asarray(self.left, np.int32), right=np.asarray(self.right, np.int32), feature=feature,
            threshold=thr, default_left=np.asarray(self.default_left, bool), value=value,
            gain=np.asarray(self.gain), cover=sums[:, :, 1].sum(axis=1),
        )


def _take(kernels: TreeKernels, hist: object, index: list[int], n: int) -> object:
    if index == list(range(n)):
        return hist
    take = getattr(kernels, "take", None)
    if take is None:
        raise TypeError(f"{type(kernels).__name__} lacks take(hist, index), which depth-wise growth needs")
    return take(hist, np.asarray(index, np.int32))


def _can_split(depth: int, params: GrowParams) -> bool:
    return params.max_depth == 0 or depth < params.max_depth


def grow_tree(kernels: TreeKernels, root_sums: np.ndarray, feature_mask: np.ndarray, params: GrowParams,
              threshold: Callable[[int, int], float]) -> tuple[Tree, np.ndarray]:
    """Grow one tree on the gradients already set in ``kernels``.

    ``root_sums`` is (n_outputs, 2): the total (g, h) of all rows. Returns the tree and the leaf (node id)
    of every training row, for the driver's update of the training scores.
    """
    nodes = _Nodes(np.asarray(root_sums).shape[0])
    nodes.add(root_sums, 0)
    kernels.reset_rows()
    if _can_split(0, params) and params.max_leaves != 1:
        grow = _grow_lossguide if params.lossguide else _grow_depthwise
        grow(kernels, nodes, feature_mask, params)
    return nodes.to_tree(params, threshold), kernels.row_nodes()


def _grow_depthwise(kernels: TreeKernels, nodes: _Nodes, mask: np.ndarray, params: GrowParams) -> None:
    level = [0]
    hist = kernels.histograms(np.array([0], np.int32))
    n_leaves = 1
    while level:
        splits = kernels.best_splits(hist, mask, params.split)
        chosen = [i for i, n in enumerate(level) if splits.gain[i] > 0]
        if params.max_leaves:
            room = params.max_leaves - n_leaves
            # the largest gains first, ties to the earlier node of the level; then back to level order
            chosen = sorted(sorted(chosen, key=lambda i: -splits.gain[i])[:room])
        if not chosen:
            return
        parents = [level[i] for i in chosen]
        gamma = params.split.min_split_gain
        children = [nodes.split(n, splits, i, gamma) for n, i in zip(parents, chosen, strict=True)]
        n_leaves += len(chosen)
        kernels.apply_splits(
            np.asarray(parents, np.int32), splits.feature[chosen], splits.bin[chosen], splits.default_left[chosen],
            np.asarray([c[0] for c in children], np.int32), np.asarray([c[1] for c in children], np.int32),
        )
        depth = nodes.depth[children[0][0]]
        if not _can_split(depth, params) or (params.max_leaves and n_leaves >= params.max_leaves):
            return
        small, large = [], []
        for n, (lo, hi) in zip(parents, children, strict=True):
            left_small = nodes.smaller_is_left(n)
            small.append(lo if left_small else hi)
            large.append(hi if left_small else lo)
        h_small = kernels.histograms(np.asarray(small, np.int32))
        h_large = kernels.subtract(_take(kernels, hist, chosen, len(level)), h_small)
        hist = kernels.concat([h_small, h_large])
        level = small + large


def _grow_lossguide(kernels: TreeKernels, nodes: _Nodes, mask: np.ndarray, params: GrowParams) -> None:
    hist = {0: kernels.histograms(np.array([0], np.int32))}
    found = {0: (kernels.best_splits(hist[0], mask, params.split), 0)}
    heap: list[tuple[float, int]] = []
    if found[0][0].gain[0] > 0:
        heap.append((-float(found[0][0].gain[0]), 0))
    n_leaves = 1
    while heap and (params.max_leaves == 0 or n_leaves < params.max_leaves):
        _, node = heapq.heappop(heap)
        splits, i = found.pop(node)
        lo, hi = nodes.split(node, splits, i, params.split.min_split_gain)
        n_leaves += 1
        kernels.apply_splits(np.array([node], np.int32), splits.feature[i:i + 1], splits.bin[i:i + 1],
                             splits.default_left[i:i + 1], np.array([lo], np.int32), np.array([hi], np.int32))
        parent_hist = hist.pop(node)
        if not _can_split(nodes.depth[lo], params) or (params.max_leaves and n_leaves >= params.max_leaves):
            continue
        small, large = (lo, hi) if nodes.smaller_is_left(node) else (hi, lo)
        h_small = kernels.histograms(np.array([small], np.int32))
        h_large = kernels.subtract(parent_hist, h_small)
        both = kernels.best_splits(kernels.concat([h_small, h_large]), mask, params.split)
        for j, (child, h) in enumerate(((small, h_small), (large, h_large))):
            if both.gain[j] > 0:
                hist[child] = h
                found[child] = (both, j)
                heapq.heappush(heap, (-float(both.gain[j]), child))
