"""The classifier chains' prediction as md_hom computations: position by position, every chain at once.

At chain position ``p`` each chain ``c`` has a forest of ``E`` trees (trees ``(p*C + c)*E ..`` of the ensemble's
forest) that reads X and the chain's earlier predicted labels. ``state`` holds, per (chain, row, label), the
probability the chain's forest gave that label (filled position by position); a label feature's value is that
probability thresholded at 0.5 (the chain's 0/1 prediction, which scikit-learn's ClassifierChain feeds on).

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
ecc_walk               row x chain x tree   concat, concat, sum over the chain's trees at the position
ecc_store              chain x row          concat at a computed position (scatter): p into ``state``
ecc_vote               row x label x chain  concat, concat, sum over chains (probabilities or 0/1 votes)
=====================  ===================  ==============================================================

Sums run in tree and chain order (exact pins: one work-item along the reduced dimension), so every device
gives the numpy walk's bits (:mod:`mdhom.forests.chain_model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.predictor import FOREST_NODE
from mdhom.components.specs import KernelSpec, Tuning, elementwise, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import SUM, Concat, Description, Input, Param, Reduce


@lru_cache(maxsize=1)
def walk() -> Description:
    """Per (row, chain): the sum over the chain's ``SIZE_tree`` trees at the position (from tree ``first_tree``)
    of the leaf value (the label's probability) the row reaches; NaN goes right, as in training."""
    return Description(
        "ecc_walk", ["row", "chain", "tree"], [Concat(), Concat(), Reduce(SUM)], "double",
        scalar="""
__global const forest_node_t* nodes = (__global const forest_node_t*)forest;
int node = root[first_tree + chain * SIZE_tree + tree];
while (nodes[node].left >= 0) {
    __global const forest_node_t* t = nodes + node;
    const int f = t->feature;
    const double x = f < n_x ? X[(long)row * n_x + f]
        : (state[((long)chain * SIZE_row + row) * n_labels + (f - n_x)] > 0.5 ? 1.0 : 0.0);
    node = x <= t->threshold ? t->left : t->right;
}
out = value[node];""",
        inputs=[Input("X", "double", ("*",), gather=True), Input("state", "double", ("*",), gather=True),
                Input("forest", "int", ("*",), gather=True), Input("root", "int", ("*",), gather=True),
                Input("value", "double", ("*",), gather=True)],
        params=[Param("first_tree", "int"), Param("n_x", "int"), Param("n_labels", "int")],
        preamble=FOREST_NODE.declaration("forest_node_t") + "\n",
    )


@lru_cache(maxsize=1)
def store() -> Description:
    """Each chain's probability of its label at the position (the tree sum over the tree count) into
    ``state[chain, row, orders[chain, position]]``; the rest of ``state`` is left as it is."""
    return Description(
        "ecc_store", ["chain", "row"], [Concat(), Concat()], "double",
        scalar="""
out = sums[(long)row * SIZE_chain + chain] / (double)n_trees;
out_at = ((idx_t)chain * SIZE_row + row) * n_labels + orders[chain * n_labels + position];""",
        inputs=[Input("sums", "double", ("*",), gather=True), Input("orders", "int", ("*",), gather=True)],
        params=[Param("n_trees", "int"), Param("n_labels", "int"), Param("position", "int")],
        scatter=True,
    )


@lru_cache(maxsize=2)
def vote(labels: bool) -> Description:
    """Per (row, label): the sum over chains of their probabilities (``labels``: of their 0/1 predictions)."""
    value = "(p > 0.5 ? 1.0 : 0.0)" if labels else "p"
    return Description(
        "ecc_vote", ["row", "label", "chain"], [Concat(), Concat(), Reduce(SUM)], "double",
        scalar=f"""
const double p = state[((long)chain * SIZE_row + row) * SIZE_label + label];
out = {value};""",
        inputs=[Input("state", "double", ("*",), gather=True)],
    )


# ------------------------------------------------------------------------------------------------ tables
def node_table(feature: np.ndarray, threshold: np.ndarray, left: np.ndarray,
               offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FOREST_NODE records as int32 words, root of each tree) of flat forest arrays (``left`` local to the
    tree, the right child next to it)."""
    n = feature.size
    rec = np.zeros(max(1, n), FOREST_NODE.dtype)
    base = np.repeat(offsets[:-1], np.diff(offsets))
    inner = feature >= 0
    rec["threshold"][:n] = threshold
    rec["feature"][:n] = np.maximum(feature, 0)
    rec["left"][:n] = np.where(inner, left + base, -1)
    rec["right"][:n] = np.where(inner, left + 1 + base, -1)
    rec["cats"] = -1
    raw = rec.view(np.uint8)
    raw = np.concatenate([raw, np.zeros((-raw.size) % 4, np.uint8)])
    return raw.view(np.int32), np.ascontiguousarray(offsets[:-1], np.int32)


# ------------------------------------------------------------------------------------------------ references
def walk_reference(a: Mapping[str, np.ndarray], sizes: Mapping[str, int]) -> np.ndarray:
    """(row, chain) sums of the kernel over its raw inputs, trees added in order from 0."""
    rec = a["forest"].view(np.uint8)[: (a["forest"].nbytes // FOREST_NODE.dtype.itemsize)
                                     * FOREST_NODE.dtype.itemsize].view(FOREST_NODE.dtype)
    n, c, e = int(sizes["row"]), int(sizes["chain"]), int(sizes["tree"])
    n_x, n_lab = int(a["n_x"]), int(a["n_labels"])
    X = a["X"].reshape(n, n_x)
    state = a["state"].reshape(c, n, n_lab)
    node = np.broadcast_to(a["root"][int(a["first_tree"]) + np.arange(c * e)], (n, c * e)).reshape(-1).copy()
    row = np.repeat(np.arange(n), c * e)
    chain = np.tile(np.repeat(np.arange(c), e), n)
    active = np.arange(node.size)
    while active.size:
        nd = node[active]
        active, nd = active[rec["left"][nd] >= 0], nd[rec["left"][nd] >= 0]
        f = rec["feature"][nd]
        lab = np.maximum(f - n_x, 0)
        x = np.where(f < n_x, X[row[active], np.minimum(f, n_x - 1)],
                     (state[chain[active], row[active], np.minimum(lab, n_lab - 1)] > 0.5).astype(np.float64))
        node[active] = np.where(x <= rec["threshold"][nd], rec["left"][nd], rec["right"][nd])
    leaf = a["value"][node].reshape(n, c, e)
    acc = np.zeros((n, c))
    for t in range(e):
        acc += leaf[:, :, t]
    return acc


# ------------------------------------------------------------------------------------------------ heuristics
def walk_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Rows carry the parallelism (a work-item walks one row's trees of one chain); chains in work-groups."""
    cfg = elementwise("row")(desc, dev, sizes)
    if dev.type == "gpu":
        cfg["NUM_WI_row"], cfg["NUM_WG_chain"] = 128, pow2_at_most(int(sizes.get("chain", 1)), 64)
    return cfg


def _walk_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    """Random complete trees of depth ``depth`` over ``n_x`` features and ``labels`` label features."""
    n, c, e, depth = int(s["row"]), int(s["chain"]), int(s["tree"]), int(s.get("depth", 8))
    n_x, n_lab = int(s.get("n_x", 72)), int(s.get("labels", 6))
    per = 2 ** (depth + 1) - 1
    trees = c * e
    local = np.arange(per)
    inner = local < 2 ** depth - 1
    feature = np.where(inner[None, :], rng.integers(0, n_x + n_lab, (trees, per)), -1).reshape(-1)
    left = np.tile(np.where(inner, 2 * local + 1, -1), trees)
    offsets = np.arange(trees + 1, dtype=np.int64) * per
    threshold = np.where(feature >= n_x, 0.5, rng.normal(size=feature.size))
    forest, root = node_table(feature.astype(np.int32), threshold, left.astype(np.int32), offsets)
    return {"X": rng.normal(size=n * n_x), "state": rng.random(c * n * n_lab), "forest": forest, "root": root,
            "value": rng.random(trees * per), "first_tree": np.int32(0), "n_x": np.int32(n_x),
            "n_labels": np.int32(n_lab)}


_WALK_CLASSES = {
    "emotions_200x64x32": {"row": 200, "chain": 64, "tree": 32, "depth": 8, "n_x": 72, "labels": 6},
    "mediamill_16384x64x32": {"row": 16384, "chain": 64, "tree": 32, "depth": 10, "n_x": 120, "labels": 101},
}

def _walk_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    n = a["X"].size // int(a["n_x"])
    c = a["state"].size // (n * int(a["n_labels"]))
    return walk_reference(a, {"row": n, "chain": c, "tree": a["root"].size // c})


WALK = KernelSpec("ecc_walk", walk_heuristic, exact_pins={"NUM_WI_tree": 1, "NUM_WG_tree": 1}, tuning=Tuning(
    lambda s: walk(), _WALK_CLASSES, _walk_inputs, _walk_ref, fixed={"NUM_WI_tree": 1, "NUM_WG_tree": 1},
    doc="classifier chains' forests at one chain position: rows x chains x trees, summed over each chain's trees"))
STORE = KernelSpec("ecc_store", elementwise("row"))
VOTE = KernelSpec("ecc_vote", elementwise("row"), exact_pins={"NUM_WI_chain": 1, "NUM_WG_chain": 1})
SPECS = (WALK, STORE, VOTE)
