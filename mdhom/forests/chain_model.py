"""A fitted ensemble of classifier chains: every forest of every chain as one flat forest, its numpy walk and its
JSON form.

Trees are position-major: the forest of chain ``c`` at chain position ``p`` is trees ``(p*C + c)*E ..`` (``C``
chains, ``E`` trees per forest), so one position of every chain is one contiguous run of trees, what the device
walks in one launch. Features ``0..F-1`` are X's columns, ``F + j`` is label ``j`` (a chain's forest only splits
on labels earlier in its order); a leaf's value is the label's probability. Prediction runs position by
position: a chain's label is its forest's probability > 0.5 (scikit-learn's ``predict`` of a forest: the larger
class, ties to 0), fed to its later positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mdhom.forests.model import _BIG, Forest

FORMAT = "mdhom.chains"
VERSION = 1


@dataclass
class ChainForests:
    n_features: int  # X's columns
    orders: np.ndarray  # (C, L) label order of each chain
    n_estimators: int
    forest: Forest  # L * C * E trees over F + L features, value (N, 1)

    @property
    def n_chains(self) -> int:
        return int(self.orders.shape[0])

    @property
    def n_labels(self) -> int:
        return int(self.orders.shape[1])

    def first_tree(self, position: int) -> int:
        return position * self.n_chains * self.n_estimators

    def check(self) -> None:
        """Refuse what a damaged file could hold, beyond :meth:`Forest.check`."""
        c, lab = self.orders.shape
        if c < 1 or lab < 1 or self.n_estimators < 1:
            raise ValueError("an ensemble needs a chain, a label and a tree per forest")
        for row in self.orders:
            if not np.array_equal(np.sort(row), np.arange(lab)):
                raise ValueError("a chain's order is not a permutation of the labels")
        if self.forest.n_trees != c * lab * self.n_estimators:
            raise ValueError(f"{self.forest.n_trees} trees for {c} chains x {lab} labels x {self.n_estimators}")
        if self.forest.n_features != self.n_features + lab or self.forest.value.shape[1] != 1:
            raise ValueError("the forest's features or values do not match the chains")
        self.forest.check()

    # ------------------------------------------------------------------------------------------ prediction
    def chain_probabilities(self, X: np.ndarray, chunk_cells: int = 1 << 22) -> np.ndarray:
        """(C, n, L): each chain's probability of each label, the chains' forests walked position by position
        in numpy (the reference of :mod:`mdhom.forests.chain_kernels`: tree sums in tree order, then / E)."""
        n = X.shape[0]
        c, e, f = self.n_chains, self.n_estimators, self.n_features
        state = np.zeros((c, n, self.n_labels))
        fo = self.forest
        absolute_left = np.where(fo.feature >= 0, fo.left + np.repeat(fo.offsets[:-1], np.diff(fo.offsets)), -1)
        step = max(1, chunk_cells // (c * e))
        for p in range(self.n_labels):
            roots = fo.offsets[self.first_tree(p):self.first_tree(p) + c * e]
            for lo in range(0, n, step):
                x = X[lo:lo + step]
                m = x.shape[0]
                st = state[:, lo:lo + m]
                node = np.tile(roots, m)  # (row, chain, tree) flat
                row = np.repeat(np.arange(m), c * e)
                chain = np.tile(np.repeat(np.arange(c), e), m)
                active = np.arange(node.size)
                while active.size:
                    nd = node[active]
                    feat = fo.feature[nd]
                    inner = feat >= 0
                    active, nd, feat = active[inner], nd[inner], feat[inner]
                    r = row[active]
                    v = np.where(feat < f, x[r, np.minimum(feat, f - 1)],
                                 (st[chain[active], r, np.maximum(feat - f, 0)] > 0.5).astype(np.float64))
                    node[active] = absolute_left[nd] + ~(v <= fo.threshold[nd])  # NaN: right
                leaf = fo.value[node, 0].reshape(m, c, e)
                acc = np.zeros((m, c))
                for t in range(e):  # tree order: the device's sum
                    acc += leaf[:, :, t]
                st[np.arange(c)[:, None], np.arange(m)[None, :], self.orders[:, p][:, None]] = (acc / e).T
        return state

    @staticmethod
    def vote(state: np.ndarray, voting: str) -> np.ndarray:
        """(n, L): the chains' mean probability (``voting="proba"``) or share of 0/1 votes (``"label"``), added
        in chain order (the device's ``ecc_vote``)."""
        acc = np.zeros(state.shape[1:])
        for c in range(state.shape[0]):
            acc += state[c] if voting == "proba" else (state[c] > 0.5).astype(np.float64)
        return acc / state.shape[0]

    # ------------------------------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        fo = self.forest
        return {"n_features": self.n_features, "n_estimators": self.n_estimators, "orders": self.orders.tolist(),
                "offsets": fo.offsets.tolist(), "feature": fo.feature.tolist(),
                "threshold": np.where(np.isinf(fo.threshold), _BIG, fo.threshold).tolist(),
                "left": fo.left.tolist(), "value": fo.value[:, 0].tolist()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChainForests:
        orders = np.asarray(d["orders"], np.int64)
        if orders.ndim != 2:
            raise ValueError("orders must be one row per chain")
        f = int(d["n_features"])
        forest = Forest(f + orders.shape[1], np.asarray(d["offsets"], np.int64), np.asarray(d["feature"], np.int32),
                        np.asarray(d["threshold"], np.float64), np.asarray(d["left"], np.int32),
                        np.asarray(d["value"], np.float64).reshape(-1, 1), np.zeros(f + orders.shape[1]))
        model = cls(f, orders, int(d["n_estimators"]), forest)
        model.check()
        return model
