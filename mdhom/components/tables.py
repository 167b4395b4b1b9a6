"""Tables that the host and the kernels share, each declared once as an :class:`mdhom.mdh.Struct`: the OpenCL
typedef every tree kernel is built with and the numpy dtype the host fills, so no field is read by position.

``SPLIT_RECORD``: one row per split node of a split step (uploaded once per step). ``first`` lays the split
nodes' row ranges end to end (the running sum of ``count``): the compact index space of a partition, which
visits only the rows of the nodes it splits. ``next_child`` names the child whose row range the next histogram
reads (0 left, 1 right, -1 neither).

``LEAF_RECORD``: one row per range of positions that ``tree_leaf_rows`` maps to a node: a leaf's range (``split`` and
``rule`` -1), or the range of the children of a split whose left count is still on the device only (``split``: its
index in the last partition's counts, ``n_left``): positions before ``begin + n_left[split]`` are ``node``'s, the
others ``right``'s. So a tree's leaves can be written behind its last partition without the host waiting for that
partition's counts. Or (``rule``: the index of its record in the split table) the range of a node split by a step
that no partition ran for, a tree's last: each row goes to ``node`` or ``right`` as its bin says, so the tree's
last level moves no row. With ``stay`` >= 0 as well, that step was decided on the device and the host has not read
whether it split the node: where it did not, its record ``rule`` holds no rows and the rows stay ``stay``'s. So a
tree's leaves are written before the host has read its last search.

``TREE_NODE``: one row per node of a grown tree, walked by the eval-set prediction (``left`` < 0 at leaves).

In both, ``cats`` is -1 for a numeric split; for a categorical one, the byte offset (from the start of the
table's buffer) of its left table: one byte per bin, 1 where the bin goes left. The left tables follow the
records in the same buffer, so a categorical split costs the kernels no extra argument.
"""

from __future__ import annotations

import numpy as np

from mdhom.mdh import Struct

SPLIT_RECORD = Struct("tree_split_t", tuple((name, "int") for name in (
    "node", "feature", "bin", "default_left", "left", "right", "begin", "count", "next_child", "first", "cats")))
LEAF_RECORD = Struct("tree_leaf_t", tuple((name, "int") for name in ("begin", "node", "region", "split", "right",
                                                                       "rule", "stay")))
TREE_NODE = Struct("tree_node_t", tuple((name, "int") for name in ("feature", "bin", "default_left", "left", "right",
                                                                   "cats")))
TABLE_TYPEDEFS = "".join(s.declaration(s.name) + "\n" for s in (SPLIT_RECORD, TREE_NODE))


def split_table(n: int) -> np.ndarray:
    """An empty split table of ``n`` rows (fields by name; numeric splits: ``cats`` -1)."""
    out = np.zeros(n, SPLIT_RECORD.dtype)
    out["cats"] = -1
    return out


def tree_table(tree) -> np.ndarray:  # noqa: ANN001 - a mdhom.trees.model.Tree
    """The table tree_predict_bins walks, as bytes: one TREE_NODE record per node, then the left tables of
    its categorical splits."""
    out = np.zeros(tree.n_nodes, TREE_NODE.dtype)
    out["feature"], out["bin"], out["default_left"] = tree.feature, tree.bin, tree.default_left
    out["left"], out["right"] = tree.left, tree.right
    return with_left_tables(out, None if tree.cat_left is None else tree.cat_left.row,
                            None if tree.cat_left is None else tree.cat_left.table)


def with_left_tables(records: np.ndarray, row: np.ndarray | None, tables: np.ndarray | None) -> np.ndarray:
    """``records`` (with a ``cats`` field) as bytes followed by the left tables; record ``i`` with ``row[i]``
    >= 0 points at table ``row[i]``, the others get -1."""
    records["cats"] = -1
    if row is None or tables is None or not np.any(row >= 0):
        return records.view(np.uint8)
    cat = row >= 0
    records["cats"][cat] = records.nbytes + row[cat].astype(np.int64) * tables.shape[1]
    return np.concatenate([records.view(np.uint8), np.ascontiguousarray(tables, np.uint8).reshape(-1)])
