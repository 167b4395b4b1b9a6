"""Trees as flat arrays, prediction on raw features, and the versioned JSON model file.

Format ``mdhom.treeboost`` version 1 (one JSON object):

* ``format``, ``version``, ``mdhom_version``; ``estimator`` ("TreeBoostClassifier" | "TreeBoostRegressor");
* ``objective``, ``params`` (every option of :mod:`mdhom.trees.params`), ``n_features``, ``n_outputs``,
  ``base_score`` (one raw score per output), ``classes`` (``{"dtype", "values"}`` or null), ``best_iteration``;
* ``bin_edges``: per feature, the edges used in training (informative; prediction does not need them);
* ``trees``: one object per boosting round with arrays indexed by node id (0 = root): ``left``, ``right``
  (child ids, -1 at leaves), ``feature`` (-1 at leaves), ``threshold`` (go left when ``x <= threshold``;
  null means +inf, i.e. every non-missing value goes left), ``default_left`` (where NaN goes), ``value``
  (per node, one leaf value per output, learning rate applied; used at leaves), ``gain`` (of the node's
  split, 0 at leaves) and ``cover`` (hessian sum of the node's rows, summed over outputs).

The raw score of a row is ``base_score + sum over trees of value[leaf]``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdhom.learn import model_files
from mdhom.learn.validation import is_sparse, sparse_chunks

FORMAT = "mdhom.treeboost"
VERSION = 1


@dataclass
class Tree:
    left: np.ndarray  # int32 (n_nodes,)
    right: np.ndarray  # int32
    feature: np.ndarray  # int32, -1 at leaves
    threshold: np.ndarray  # float64
    default_left: np.ndarray  # bool
    value: np.ndarray  # float64 (n_nodes, n_outputs)
    gain: np.ndarray  # float64
    cover: np.ndarray  # float64
    # the split bins (0 at leaves) while training, for the devices' binned eval-set traversal; not saved
    bin: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return int(self.left.size)

    def to_json(self) -> dict[str, Any]:
        thr = [None if np.isinf(t) else float(t) for t in self.threshold]
        return {
            "left": self.left.tolist(), "right": self.right.tolist(), "feature": self.feature.tolist(),
            "threshold": thr, "default_left": self.default_left.tolist(), "value": self.value.tolist(),
            "gain": self.gain.tolist(), "cover": self.cover.tolist(),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], n_outputs: int, n_features: int) -> Tree:
        n = len(d["left"])
        tree = cls(
            left=np.asarray(d["left"], np.int32), right=np.asarray(d["right"], np.int32),
            feature=np.asarray(d["feature"], np.int32),
            threshold=np.asarray([np.inf if t is None else t for t in d["threshold"]], np.float64),
            default_left=np.asarray(d["default_left"], bool),
            value=np.asarray(d["value"], np.float64).reshape(n, n_outputs),
            gain=np.asarray(d["gain"], np.float64), cover=np.asarray(d["cover"], np.float64),
        )
        tree.check(n_features)
        return tree

    def check(self, n_features: int) -> None:
        """Structural sanity: children point forward inside the tree, leaves have no feature."""
        n = self.n_nodes
        if n == 0 or any(a.shape[0] != n for a in (self.right, self.feature, self.threshold, self.default_left,
                                                    self.value, self.gain, self.cover)):
            raise ValueError("tree arrays have inconsistent lengths")
        inner = self.left >= 0
        if not np.array_equal(inner, self.right >= 0):
            raise ValueError("a node has exactly one child")
        ids = np.arange(n)
        if np.any(inner & ((self.left <= ids) | (self.right <= ids) | (self.left >= n) | (self.right >= n))):
            raise ValueError("child ids must point forward inside the tree")
        if np.any(inner & ((self.feature < 0) | (self.feature >= n_features))) or np.any(~inner & (self.feature != -1)):
            raise ValueError("split features out of range")
        if np.any(np.isnan(self.threshold)) or np.any(~np.isfinite(self.value)):
            raise ValueError("NaN threshold or non-finite leaf value")


@dataclass
class Ensemble:
    """The fitted model: base score plus trees; everything needed to predict and to save."""

    n_features: int
    n_outputs: int
    base_score: np.ndarray  # (n_outputs,)
    trees: list[Tree] = field(default_factory=list)

    def leaves(self, X: np.ndarray, n_trees: int | None = None) -> np.ndarray:
        """(n_rows, n_trees) node ids of the leaf each row reaches, all trees walked together."""
        trees = self.trees[:n_trees]
        if not trees:
            return np.zeros((X.shape[0], 0), np.int64)
        offsets = np.cumsum([0] + [t.n_nodes for t in trees[:-1]])
        pairs = list(zip(trees, offsets, strict=True))
        left = np.concatenate([t.left.astype(np.int64) + np.where(t.left >= 0, o, 0) for t, o in pairs])
        right = np.concatenate([t.right.astype(np.int64) + np.where(t.right >= 0, o, 0) for t, o in pairs])
        feature = np.concatenate([t.feature for t in trees]).astype(np.int64)
        threshold = np.concatenate([t.threshold for t in trees])
        default_left = np.concatenate([t.default_left for t in trees])
        node = np.broadcast_to(offsets, (X.shape[0], len(trees))).copy()
        active = left[node] >= 0
        while active.any():
            r, c = np.nonzero(active)
            n = node[r, c]
            x = X[r, feature[n]]
            go_left = np.where(np.isnan(x), default_left[n], x <= threshold[n])
            node[r, c] = np.where(go_left, left[n], right[n])
            active[r, c] = left[node[r, c]] >= 0
        return node - offsets[None, :]

    def raw_predict(self, X: Any, n_trees: int | None = None) -> np.ndarray:
        """(n_rows, n_outputs) raw scores of float64 ``X``, or of a CSR matrix whose absent entries are missing
        (densified a bounded block of rows at a time, NaN where nothing is stored: the meaning training gave
        them); rows go in blocks to bound the (rows, trees) state."""
        if is_sparse(X):
            out = np.empty((X.shape[0], self.n_outputs))
            for lo, hi, dense in sparse_chunks(X):
                out[lo:hi] = self.raw_predict(dense, n_trees)
            return out
        out = np.tile(self.base_score, (X.shape[0], 1))
        trees = self.trees[:n_trees]
        step = max(1, (1 << 22) // max(1, len(trees)))
        for lo in range(0, X.shape[0], step):
            leaves = self.leaves(X[lo:lo + step], n_trees)
            for j, tree in enumerate(trees):
                out[lo:lo + step] += tree.value[leaves[:, j]]
        return out


def save_json(path: str | os.PathLike, document: dict[str, Any]) -> None:
    """Write a tree model file (see :func:`mdhom.learn.model_files.save_json`)."""
    model_files.save_json(path, document)


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """A tree model document, its format and version checked."""
    return model_files.read_json(path, FORMAT, VERSION, "an mdhom tree model")
