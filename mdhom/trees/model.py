"""Trees as flat arrays, prediction on raw features, and the versioned JSON model file.

Format ``mdhom.treeboost`` version 2 (one JSON object; version 1 files, which lack the one-tree-per-output fields,
read as they always did):

* ``format``, ``version``, ``mdhom_version``; ``estimator`` ("TreeBoostClassifier" | "TreeBoostRegressor");
* ``objective``, ``params`` (every option of :mod:`mdhom.trees.params`), ``n_features``, ``n_outputs``,
  ``base_score`` (one raw score per output), ``classes`` (``{"dtype", "values"}`` or null), ``best_iteration``;
* ``bin_edges``: per feature, the edges used in training (informative; prediction does not need them);
* ``trees``: one object per tree (one per round, or ``trees_per_round`` per round) with arrays indexed by node id
  (0 = root): ``left``, ``right``
  (child ids, -1 at leaves), ``feature`` (-1 at leaves), ``threshold`` (go left when ``x <= threshold``;
  null means +inf, i.e. every non-missing value goes left), ``default_left`` (where NaN goes), ``value``
  (per node, one leaf value per output, learning rate applied; used at leaves), ``gain`` (of the node's
  split, 0 at leaves) and ``cover`` (hessian sum of the node's rows, summed over outputs); where the model has
  categorical splits, ``categories``: per node null, or the category codes that go left (the node's
  ``threshold`` is then null and unused). A tree of a one-tree-per-output model (``multi_strategy``
  "one_output_per_tree", format version 2) has ``output``, the one output it scores, and one ``value`` per node.
* ``trees_per_round`` (version 2; absent: 1): the trees of a round, in output order (``best_iteration`` counts
  rounds).
* ``categories`` (models with categorical features): per feature null (numeric) or its known category codes;
  a code outside them, NaN or a negative code is missing and follows the split's default direction.
  ``category_labels``: per feature null, or the labels of a pandas ``category`` column (code = position).

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
VERSION = 2  # 2: one-tree-per-output models (``output``, ``trees_per_round``); reads 1 and 2


@dataclass
class CategoryTables:
    """A tree's categorical splits in bins, while training (the devices' binned eval-set traversal):
    ``row[node]`` is the node's row of ``table`` (the bins that go left), or -1 for a numeric split."""

    row: np.ndarray  # int32 (n_nodes,)
    table: np.ndarray  # bool (n_categorical_splits, n_bins)


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
    # per node None, or the category codes that go left at a categorical split (saved)
    categories: list[np.ndarray | None] | None = None
    cat_left: CategoryTables | None = None  # the same splits in bins, while training; not saved
    # one-tree-per-output models: the output this tree scores (``value`` is zero in every other column)
    output: int | None = None

    @property
    def n_nodes(self) -> int:
        return int(self.left.size)

    def set_categories(self, known: list[np.ndarray | None]) -> None:
        """Turn the training-time bin tables into the category codes that go left (``known``: per feature the
        binning's known codes, bin b = known[f][b])."""
        t = self.cat_left
        if t is None or not np.any(t.row >= 0):
            return
        out: list[np.ndarray | None] = [None] * self.n_nodes
        for node in np.flatnonzero(t.row >= 0):
            codes = known[int(self.feature[node])]
            out[node] = codes[t.table[t.row[node], : codes.size]]
        self.categories = out

    def to_json(self) -> dict[str, Any]:
        thr = [None if np.isinf(t) else float(t) for t in self.threshold]
        out = {
            "left": self.left.tolist(), "right": self.right.tolist(), "feature": self.feature.tolist(),
            "threshold": thr, "default_left": self.default_left.tolist(), "value": self.value.tolist(),
            "gain": self.gain.tolist(), "cover": self.cover.tolist(),
        }
        if self.output is not None:  # one output: its column only
            out["output"] = int(self.output)
            out["value"] = self.value[:, self.output:self.output + 1].tolist()
        if self.categories is not None:
            out["categories"] = [None if c is None else [int(x) for x in c] for c in self.categories]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any], n_outputs: int, n_features: int) -> Tree:
        """A tree read back from a model file, refused (ValueError) unless it predicts what training saved."""
        if not isinstance(d, dict):
            raise ValueError("a tree is not a JSON object")
        n = len(d["left"])
        output = d.get("output")
        if output is None:
            value = _reals(d["value"], "value").reshape(n, n_outputs)
        else:  # one output's column, the others zero
            if isinstance(output, bool) or not isinstance(output, int) or not 0 <= output < n_outputs:
                raise ValueError(f"a tree's output {output!r} is not one of the model's {n_outputs} outputs")
            value = np.zeros((n, n_outputs))
            value[:, output] = _reals(d["value"], "value").reshape(n)
        tree = cls(
            left=_ints(d["left"], "left"), right=_ints(d["right"], "right"), feature=_ints(d["feature"], "feature"),
            threshold=_reals([np.inf if t is None else t for t in d["threshold"]], "threshold"),
            default_left=_bools(d["default_left"], "default_left"), value=value,
            gain=_reals(d["gain"], "gain"), cover=_reals(d["cover"], "cover"), output=output,
        )
        cats = d.get("categories")
        if cats is not None:
            if not isinstance(cats, list) or len(cats) != n:
                raise ValueError("tree categories must list one entry per node")
            tree.categories = [None if c is None else np.asarray(c, np.int64).reshape(-1) for c in cats]
        tree.check(n_features)
        return tree

    def check(self, n_features: int) -> None:
        """Structural sanity: one root, every other node the child of exactly one node with a smaller id (so no
        cycle, nothing shared or unreachable), leaves without a feature, finite numbers where they are used."""
        n = self.n_nodes
        if n == 0 or any(a.shape[0] != n for a in (self.right, self.feature, self.threshold, self.default_left,
                                                    self.value, self.gain, self.cover)):
            raise ValueError("tree arrays have inconsistent lengths")
        inner = self.left >= 0
        if not np.array_equal(inner, self.right >= 0) or np.any(~inner & ((self.left != -1) | (self.right != -1))):
            raise ValueError("a node has exactly one child (or a child id below -1)")
        ids = np.arange(n)
        if np.any(inner & ((self.left <= ids) | (self.right <= ids) | (self.left >= n) | (self.right >= n))):
            raise ValueError("child ids must point forward inside the tree")
        if not np.array_equal(np.sort(np.concatenate([self.left[inner], self.right[inner]])), ids[1:]):
            raise ValueError("a node is the child of two nodes, or of none")
        if np.any(inner & ((self.feature < 0) | (self.feature >= n_features))) or np.any(~inner & (self.feature != -1)):
            raise ValueError(f"split features out of range (the model has {n_features} features)")
        if np.any(np.isnan(self.threshold) | (self.threshold == -np.inf)):
            raise ValueError("a threshold is NaN or -inf")
        if not (np.isfinite(self.value).all() and np.isfinite(self.gain).all() and np.isfinite(self.cover).all()):
            raise ValueError("a leaf value, gain or cover is not finite")
        if self.categories is not None and any(c is not None and not inner[i] for i, c in enumerate(self.categories)):
            raise ValueError("a leaf has split categories")


def _ints(values: Any, name: str) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a list of integers")
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name} holds an integer out of range")
    return a.astype(np.int32)


def _reals(values: Any, name: str) -> np.ndarray:
    a = np.asarray(values)
    if a.size and a.dtype.kind not in "iuf":  # strings, booleans, nested lists of unequal lengths, null
        raise ValueError(f"{name} must hold numbers")
    return a.astype(np.float64)


def _bools(values: Any, name: str) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or (a.size and a.dtype.kind != "b"):
        raise ValueError(f"{name} must be a list of true/false")
    return a.astype(bool)


def _count(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


OBJECTIVES = {"TreeBoostClassifier": ("binary:logistic", "multi:softmax", "multilabel:logistic"),
              "TreeBoostRegressor": ("reg:squarederror",)}


def check_document(doc: dict[str, Any]) -> None:
    """Refuse (ValueError) what a hand edit can break outside the trees: a model that would load and then
    predict NaN, fail later, or predict other classes than it was trained on. ``Tree.from_json`` checks trees."""
    estimator = doc["estimator"]
    if estimator not in OBJECTIVES:
        raise ValueError(f"unknown estimator {estimator!r}")
    objective = doc["objective"]
    if objective not in OBJECTIVES[estimator]:
        raise ValueError(f"objective {objective!r} is not one of {estimator}'s")
    if not isinstance(doc["params"], dict):
        raise ValueError("params is not a JSON object")
    n_features, n_outputs = _count(doc["n_features"], "n_features"), _count(doc["n_outputs"], "n_outputs")
    base = _reals(doc["base_score"], "base_score")
    if base.shape != (n_outputs,) or not np.isfinite(base).all():
        raise ValueError(f"base_score must be {n_outputs} finite number(s), got {doc['base_score']!r}")
    classes = doc["classes"]
    if estimator == "TreeBoostClassifier":
        if not isinstance(classes, dict) or not isinstance(classes.get("values"), list):
            raise ValueError("a classifier model lacks its classes")
        values = classes["values"]
        binary = objective == "binary:logistic"
        if len(values) < 2 or (binary and len(values) != 2) or n_outputs != (1 if binary else len(values)):
            raise ValueError(f"{len(values)} classes do not fit objective {objective} with {n_outputs} output(s)")
        if len({repr(v) for v in values}) != len(values):
            raise ValueError("the classes are not distinct")
        if not isinstance(doc["target"], dict) or (doc["target"].get("kind") == "multilabel") != (
                objective == "multilabel:logistic"):
            raise ValueError("target kind does not fit the objective")
    elif n_outputs != 1:
        raise ValueError(f"a regressor has one output, not {n_outputs}")
    names = doc.get("feature_names")
    if names is not None and (not isinstance(names, list) or len(names) != n_features
                              or not all(isinstance(x, str) for x in names)):
        raise ValueError(f"feature_names must be {n_features} strings")
    edges = doc["bin_edges"]
    if not isinstance(edges, list) or len(edges) != n_features:
        raise ValueError(f"bin_edges must hold one list per feature ({n_features})")
    for e in edges:
        e = _reals(e, "bin_edges")
        if e.ndim != 1 or not np.isfinite(e).all() or np.any(np.diff(e) <= 0):
            raise ValueError("bin edges must be finite and ascending")
    trees = doc["trees"]
    if not isinstance(trees, list):
        raise ValueError("trees is not a list")
    per_round = doc.get("trees_per_round", 1)
    if isinstance(per_round, bool) or not isinstance(per_round, int) or per_round not in (1, n_outputs) \
            or len(trees) % per_round:
        raise ValueError(f"trees_per_round {per_round!r} is neither 1 nor the {n_outputs} outputs, or does not "
                         f"divide the {len(trees)} trees")
    if per_round > 1 and any(not isinstance(t, dict) or t.get("output") != i % per_round for i, t in enumerate(trees)):
        raise ValueError("the trees of a round must score the outputs in order (tree i: output i % trees_per_round)")
    rounds = len(trees) // per_round
    best = doc["best_iteration"]
    if isinstance(best, bool) or not isinstance(best, int) or not -1 <= best < max(1, rounds):
        raise ValueError(f"best_iteration {best!r} does not index the {rounds} rounds")
    if doc.get("precision") not in (None, "double", "single", "quantized"):
        raise ValueError(f"unknown precision {doc.get('precision')!r}")


@dataclass
class Ensemble:
    """The fitted model: base score plus trees; everything needed to predict and to save."""

    n_features: int
    n_outputs: int
    base_score: np.ndarray  # (n_outputs,)
    trees: list[Tree] = field(default_factory=list)
    # per feature None (numeric) or its known category codes (ascending); None: no categorical feature
    categories: list[np.ndarray | None] | None = None

    def check_categories(self) -> None:
        """Every categorical split is on a categorical feature and names only its known codes."""
        known = self.categories
        if known is not None and len(known) != self.n_features:
            raise ValueError(f"categories lists {len(known)} features, the model has {self.n_features}")
        for t in self.trees:
            for node, codes in enumerate(t.categories or []):
                if codes is None:
                    continue
                ref = None if known is None else known[int(t.feature[node])]
                if ref is None or not np.all(np.isin(codes, ref)):
                    raise ValueError(f"a categorical split on feature {int(t.feature[node])} names categories "
                                     "the feature does not have")

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
        X, cat_row, member = self._category_walk(X, trees)
        node = np.broadcast_to(offsets, (X.shape[0], len(trees))).copy()
        active = left[node] >= 0
        while active.any():
            r, c = np.nonzero(active)
            n = node[r, c]
            x = X[r, feature[n]]
            go_left = np.where(np.isnan(x), default_left[n], x <= threshold[n])
            if cat_row is not None:
                cat = cat_row[n] >= 0
                if cat.any():
                    xc = x[cat]
                    known = ~np.isnan(xc)
                    hit = member[cat_row[n][cat], np.where(known, xc, 0).astype(np.int64)]
                    go_left[cat] = np.where(known, hit, default_left[n][cat])
            node[r, c] = np.where(go_left, left[n], right[n])
            active[r, c] = left[node[r, c]] >= 0
        return node - offsets[None, :]

    def feature_scores(self, importance_type: str) -> np.ndarray:
        """(n_features,) importance of each feature, unnormalised, in XGBoost's meanings: "weight" ("split")
        counts splits, "total_gain"/"total_cover" sum the split nodes' gain/cover, "gain"/"cover" average
        them per split (0 for a feature never split on)."""
        count = np.zeros(self.n_features)
        gain = np.zeros(self.n_features)
        cover = np.zeros(self.n_features)
        for t in self.trees:
            inner = t.feature >= 0
            np.add.at(count, t.feature[inner], 1.0)
            np.add.at(gain, t.feature[inner], t.gain[inner])
            np.add.at(cover, t.feature[inner], t.cover[inner])
        per_split = np.maximum(count, 1.0)
        scores = {"weight": count, "split": count, "total_gain": gain, "total_cover": cover,
                  "gain": gain / per_split, "cover": cover / per_split}
        if importance_type not in scores:
            raise ValueError(f"importance_type must be one of {', '.join(map(repr, scores))}; got {importance_type!r}")
        return scores[importance_type]

    def category_positions(self, X: np.ndarray) -> np.ndarray:
        """X with each categorical column's codes turned into their positions among the feature's known codes
        (NaN where missing or unknown): what the walks test against a split's left table."""
        if self.categories is None:
            return X
        from mdhom.learn.binning import category_bins

        X = X.copy()
        for f, known in enumerate(self.categories):
            if known is not None:
                pos = category_bins(X[:, f], known, -1).astype(np.float64)
                X[:, f] = np.where(pos < 0, np.nan, pos)
        return X

    def _category_walk(self, X: np.ndarray, trees: list[Tree]) -> tuple:
        """For categorical features: X as :meth:`category_positions`, each categorical node's row of a
        membership table over those positions, the table."""
        if self.categories is None or not any(t.categories is not None for t in trees):
            return X, None, None
        from mdhom.learn.binning import category_tables

        row, table = category_tables(trees, self.categories)
        return self.category_positions(X), row, table

    def tree_sums(self, X: Any, n_trees: int | None = None) -> np.ndarray:
        """(n_rows, n_outputs) sums of the leaf values over trees, added from zero in tree order (the device
        predictor's order), of float64 ``X`` or of a CSR matrix whose absent entries are missing (densified a
        bounded block of rows at a time, NaN where nothing is stored: the meaning training gave them); rows go in
        blocks to bound the (rows, trees) state."""
        if is_sparse(X):
            out = np.empty((X.shape[0], self.n_outputs))
            for lo, hi, dense in sparse_chunks(X):
                out[lo:hi] = self.tree_sums(dense, n_trees)
            return out
        out = np.zeros((X.shape[0], self.n_outputs))
        trees = self.trees[:n_trees]
        step = max(1, (1 << 22) // max(1, len(trees)))
        for lo in range(0, X.shape[0], step):
            leaves = self.leaves(X[lo:lo + step], n_trees)
            for j, tree in enumerate(trees):
                out[lo:lo + step] += tree.value[leaves[:, j]]
        return out

    def raw_predict(self, X: Any, n_trees: int | None = None) -> np.ndarray:
        """(n_rows, n_outputs) raw scores of ``X`` (as :meth:`tree_sums` takes it): the base score plus the
        tree sums."""
        return self.base_score + self.tree_sums(X, n_trees)


def save_json(path: str | os.PathLike, document: dict[str, Any]) -> None:
    """Write a tree model file (see :func:`mdhom.learn.model_files.save_json`)."""
    model_files.save_json(path, document)


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """A tree model document, its format and version checked."""
    return model_files.read_json(path, FORMAT, VERSION, "an mdhom tree model")
