"""A fitted forest as flat node arrays (every tree's nodes end to end), its prediction walk and its JSON form.

Thresholds are raw feature values (the bin edge above the split bin; :meth:`BinMapper.threshold`), so a saved
forest predicts on raw features without its binning; NaN goes right at every split (the missing bin is the
last). The walk adds the trees' leaf values in tree order and divides by the tree count once: the same bits
on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

FORMAT = "mdhom.forest"
VERSION = 1
_BIG = float(np.finfo(np.float64).max)  # "every value goes left": JSON has no infinity, and X holds none


@dataclass
class Forest:
    """``offsets[t] .. offsets[t+1]`` are tree ``t``'s nodes, root first; ``left`` is the left child's id
    within its tree (the right child is ``left + 1``), -1 for a leaf; ``value`` the nodes' outputs (class
    probabilities per output, or the target's mean per output)."""

    n_features: int
    offsets: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    value: np.ndarray
    importances: np.ndarray

    @property
    def n_trees(self) -> int:
        return int(self.offsets.size - 1)

    def check(self) -> None:
        """Refuse arrays a damaged file could hold: wrong lengths, children outside their tree, features out of
        range, cycles (a child must come after its parent)."""
        n = int(self.offsets[-1])
        if self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 1):
            raise ValueError("tree offsets must start at 0 and every tree hold a node")
        for name in ("feature", "threshold", "left"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name} has {getattr(self, name).shape[0]} entries for {n} nodes")
        if self.value.shape[0] != n or not np.isfinite(self.value).all():
            raise ValueError("node values are missing or not finite")
        if np.any(self.feature >= self.n_features) or np.any(self.feature < -1):
            raise ValueError("a split names a feature outside X's columns")
        tree = np.repeat(np.arange(self.n_trees), np.diff(self.offsets))
        local = np.arange(n) - self.offsets[tree]
        size = np.diff(self.offsets)[tree]
        inner = self.feature >= 0
        if np.any((self.left[inner] <= local[inner]) | (self.left[inner] + 1 >= size[inner])):
            raise ValueError("a split's children lie outside its tree or before it")
        if np.any(np.isnan(self.threshold)):
            raise ValueError("a split has no threshold")

    def predict_sum(self, X: np.ndarray, chunk_cells: int = 1 << 22) -> np.ndarray:
        """(n, n_values): the mean of the trees' leaf values at every row of float64 ``X`` (NaN goes right)."""
        return self.tree_sums(X, chunk_cells) / self.n_trees

    def tree_sums(self, X: np.ndarray, chunk_cells: int = 1 << 22) -> np.ndarray:
        """(n, n_values): the sum of the trees' leaf values, added in tree order from zero (the device's reference,
        :func:`mdhom.forests.walk_kernels.leaf_sums`)."""
        n = X.shape[0]
        out = np.zeros((n, self.value.shape[1]))
        step = max(1, chunk_cells // max(1, self.n_trees))
        for lo in range(0, n, step):
            idx = self.leaves(X[lo:lo + step])
            acc = np.zeros((idx.shape[0], self.value.shape[1]))
            for t in range(self.n_trees):  # tree order: the same sum everywhere
                acc += self.value[idx[:, t]]
            out[lo:lo + step] = acc
        return out

    def leaves(self, X: np.ndarray) -> np.ndarray:
        """(n, n_trees) int64: the node (id in the whole forest) each row of float64 ``X`` reaches in each tree,
        NaN going right (the reference of :func:`mdhom.forests.walk_kernels.leaves`, which writes it tree-major)."""
        m = X.shape[0]
        roots = self.offsets[:-1]
        absolute_left = np.where(self.feature >= 0, self.left + np.repeat(roots, np.diff(self.offsets)), -1)
        node = np.tile(roots, m)  # (row, tree) flat: rows still walking shrink the active set each level
        row = np.repeat(np.arange(m), self.n_trees)
        active = np.arange(node.size)
        while active.size:
            nd = node[active]
            f = self.feature[nd]
            inner = f >= 0
            active, nd, f = active[inner], nd[inner], f[inner]
            right = ~(X[row[active], f] <= self.threshold[nd])  # NaN compares false: right
            node[active] = absolute_left[nd] + right
        return node.reshape(m, self.n_trees)

    def as_trees(self) -> list[SimpleNamespace]:
        """The trees as the device walks read them (:class:`mdhom.forests.walker.ForestWalker` and the boosting
        trees' :class:`mdhom.components.predictor.ForestPredictor`: per tree its nodes' feature, threshold,
        children, default direction and values), NaN going right."""
        out = []
        for t in range(self.n_trees):
            sl = slice(int(self.offsets[t]), int(self.offsets[t + 1]))
            left, n = self.left[sl], sl.stop - sl.start
            out.append(SimpleNamespace(n_nodes=n, feature=self.feature[sl], threshold=self.threshold[sl],
                                       default_left=np.zeros(n, np.int32), left=left,
                                       right=np.where(left >= 0, left + 1, -1), value=self.value[sl]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"n_features": self.n_features, "offsets": self.offsets.tolist(), "feature": self.feature.tolist(),
                "threshold": np.where(np.isinf(self.threshold), _BIG, self.threshold).tolist(),
                "left": self.left.tolist(), "value": self.value.tolist(), "importances": self.importances.tolist()}

    @classmethod
    def from_json(cls, d: dict[str, Any], n_values: int) -> Forest:
        f = cls(int(d["n_features"]), np.asarray(d["offsets"], np.int64), np.asarray(d["feature"], np.int32),
                np.asarray(d["threshold"], np.float64), np.asarray(d["left"], np.int32),
                np.asarray(d["value"], np.float64).reshape(-1, n_values), np.asarray(d["importances"], np.float64))
        f.check()
        if f.importances.shape != (f.n_features,):
            raise ValueError("importances do not match the features")
        return f
