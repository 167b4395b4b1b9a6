"""A fitted forest's prediction kernels: ``forest_leaves`` (the leaf each row reaches in each tree, tree-major)
and ``forest_leaf_sums`` (per row, the sum of its leaves' values in tree order). :mod:`mdhom.forests.walker`
drives them; their numpy reference is :class:`mdhom.forests.model.Forest`'s walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from mdhom.components.predictor import FOREST_NODE
from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.devices import Device
from mdhom.forests import tuning_inputs as TI
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Scalar


@lru_cache(maxsize=1)
def leaves() -> Description:
    """The leaf each row reaches in each tree (NaN goes right, as in training), tree-major: neighbouring work-items
    walk one tree for neighbouring rows, so a tree's nodes stay in cache while its rows pass (a walk of every
    tree per row cycles the whole forest through the cache once per row)."""
    return Description(
        "forest_leaves", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
__global const forest_node_t* nodes = (__global const forest_node_t*)forest;
int node = root[tree];
while (nodes[node].left >= 0) {
    __global const forest_node_t* t = nodes + node;
    node = X[(long)row * n_feat + t->feature] <= t->threshold ? t->left : t->right;
}
out = node;""",
        inputs=[Input("X", "double", ("*",), gather=True), Input("forest", "int", ("*",), gather=True),
                Input("root", "int", ("tree",), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=FOREST_NODE.declaration("forest_node_t") + "\n",
    )


# most leaf values (classes of every output, or regression outputs) a leaf sum carries in private memory; more go
# through the boosting trees' per-output walk (mdhom.components.predictor.ForestPredictor)
MAX_WALK_VALUES = 32


@lru_cache(maxsize=8)
def leaf_sums(n_values: int) -> Description:
    """Per row, the sum over trees of the ``n_values`` values of its leaf in each (:func:`leaves`). Exact pins keep
    the sum in tree order from zero, the numpy walk's order (:meth:`mdhom.forests.model.Forest.tree_sums`), so
    both give the same bits."""
    n = int(n_values)
    return Description(
        "forest_leaf_sums", ["row", "tree"], [Concat(), Reduce(SUM)], Array(Scalar("double"), n),
        scalar=f"""
const long node = leaf[(long)tree * SIZE_row + row];
for (int k = 0; k < {n}; ++k) out.v[k] = value[node * {n} + k];""",
        accumulate=f"""
const long node = leaf[(long)tree * SIZE_row + row];
for (int k = 0; k < {n}; ++k) acc.v[k] += value[node * {n} + k];""",
        inputs=[Input("leaf", "int", ("*",), gather=True), Input("value", "double", ("*",), gather=True)],
    )


def _rows_of_trees(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Element-wise over rows on GPUs. On CPUs one work-item per group: a walk's length differs from row to row,
    and runtimes that vectorise across work-items run every lane to the longest (PoCL, 200k rows x 50 trees of
    depth 10: forest_leaves 0.42 s at one work-item per group against 0.85 s at 64)."""
    cfg = elementwise("row")(desc, dev, sizes)
    if dev.type != "gpu":
        cfg["NUM_WI_row"] = 1
        cfg["NUM_WG_row"] = max(1, dev.compute_units) * 64
    return cfg


_SUM_PINS = {"NUM_WI_tree": 1, "NUM_WG_tree": 1}
# tuned on the 500-tree forest of depth 10 (mdhom.forests.tuning_inputs); the leaf sums under their exact pins (the
# walker always runs them so) and checked bit for bit: a tuned configuration cannot move a prediction's last bit
LEAVES = KernelSpec("forest_leaves", _rows_of_trees, tuning=Tuning(
    lambda s: leaves(), TI.WALK_CLASSES, TI.leaves_inputs, TI.leaves_ref,
    doc="the leaf each row reaches in each tree of a fitted forest (tree-major)"))
LEAF_SUMS = KernelSpec("forest_leaf_sums", _rows_of_trees, exact_pins=_SUM_PINS, tuning=Tuning(
    lambda s: leaf_sums(TI.LEAF_VALUES), TI.WALK_CLASSES, TI.leaf_sums_inputs, TI.leaf_sums_ref,
    tolerances={"double": (0.0, 0.0)}, fixed=dict(_SUM_PINS),
    doc="per row, its leaves' values summed over the trees in tree order (exact pins)"))
SPECS = (LEAVES, LEAF_SUMS)
