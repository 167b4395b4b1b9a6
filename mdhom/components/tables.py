"""Tables that the host and the kernels share, each declared once as an :class:`mdhom.mdh.Struct`: the OpenCL
typedef every tree kernel is built with and the numpy dtype the host fills, so no field is read by position.

``SPLIT_RECORD``: one row per split node of a split step (uploaded once per step). ``first`` lays the split
nodes' row ranges end to end (the running sum of ``count``): the compact index space of a partition, which
visits only the rows of the nodes it splits. ``next_child`` names the child whose row range the next histogram
reads (0 left, 1 right, -1 neither).

``TREE_NODE``: one row per node of a grown tree, walked by the eval-set prediction (``left`` < 0 at leaves).
"""

from __future__ import annotations

import numpy as np

from mdhom.mdh import Struct

SPLIT_RECORD = Struct("tree_split_t", tuple((name, "int") for name in (
    "node", "feature", "bin", "default_left", "left", "right", "begin", "count", "next_child", "first")))
TREE_NODE = Struct("tree_node_t", tuple((name, "int") for name in ("feature", "bin", "default_left", "left", "right")))
# where the row at a compact index goes (a compact index in its split's range) and its new node
DEST = Struct("dest_t", (("pos", "int"), ("node", "int")))

TABLE_TYPEDEFS = "".join(s.declaration(s.name) + "\n" for s in (SPLIT_RECORD, TREE_NODE))


def split_table(n: int) -> np.ndarray:
    """An empty split table of ``n`` rows (fields by name)."""
    return np.zeros(n, SPLIT_RECORD.dtype)


def tree_table(tree) -> np.ndarray:  # noqa: ANN001 - a mdhom.trees.model.Tree
    """The table tree_predict_bins walks: one TREE_NODE record per node."""
    out = np.zeros(tree.n_nodes, TREE_NODE.dtype)
    out["feature"], out["bin"], out["default_left"] = tree.feature, tree.bin, tree.default_left
    out["left"], out["right"] = tree.left, tree.right
    return out
