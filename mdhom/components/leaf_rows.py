"""Every row's leaf at a tree's end, from the leaves' position ranges (:meth:`mdhom.components.partition.
RowPartitioner.settle` writes the table, the score updater and the host read the result): ``tree_leaf_rows``'s
md_hom description, its table and its numpy reference.

================  ===============  =================================================================
kernel            index space      combine operators
================  ===============  =================================================================
tree_leaf_rows    pos              concat, scattered: the node of the row at each position
================  ===============  =================================================================
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import DEFAULT_BINS, bin_ctype, bins_reader, defines
from mdhom.components.specs import KernelSpec, elementwise
from mdhom.components.tables import LEAF_RECORD
from mdhom.mdh import Concat, Description, Input, Param

LEAF_INTS = len(LEAF_RECORD.fields)  # a leaf record's int32s
# the host's leaf records before they are packed: LEAF_RECORD's fields by name, int64 (a begin is a combined position,
# up to three regions of rows, until the caller splits it into its region and the begin within it)
LEAF_COLUMNS = np.dtype([(name, np.int64) for name in LEAF_RECORD.dtype.names])


def leaf_records(n: int) -> np.ndarray:
    """``n`` leaf records (:data:`LEAF_COLUMNS`) to fill by field name, every field -1 (unset)."""
    return np.full(n, -1, LEAF_COLUMNS)


@lru_cache(maxsize=32)
def leaf_rows(n_bins: int = DEFAULT_BINS, feature_major: bool = False) -> Description:
    """Every row's node from the nodes' position ranges: ``row_node[ridx[region + pos]]`` = the node whose range
    holds ``pos`` (``leaf_tab``: :func:`leaf_records_table`: ``n_leaves`` ``LEAF_RECORD``s in ascending ``begin``,
    ranges within [0, n_rows) covering every position, each in the region of positions that starts at ``region``
    (:func:`flip_positions`); then, per bucket of ``2^bucket_shift`` positions, the leaf holding its first position,
    so a position's search starts within a few leaves: PoCL, 2-core Xeon, 500k rows in 363 leaves, 3.65 -> 2.42 ms).
    A record with ``split`` >= 0 is the children of a split of the last partition, whose left count the host has not
    read: the kernel takes it from ``n_left``, so the leaves are written right behind that partition (the host does
    not wait for it). A record with ``rule`` >= 0 is the children of a split no partition ran for (a tree's last
    step: :meth:`mdhom.components.partition.RowPartitioner.settle`): the parent's range, each row's child decided
    from its split bin by record ``rule`` of the split table ``split_tab``, as the partition would; ``bins`` in
    position order (the layouts whose rows move, which alone leave a step's partition out). Such a record with
    ``stay`` >= 0 is a node of a step decided on the device whose search the host has not read
    (:meth:`mdhom.components.partition.RowPartitioner.write_leaves_ahead`): its rows stay ``stay``'s where record
    ``rule`` holds none (the step did not split the node), so the leaves are written before the host reads the tree's
    last search. The partition keeps
    only the row order per step; a row's node is written once per tree, when something reads it (the score update,
    the host), instead of a scattered 4-byte write per row and split step. It scatters (``out_at = ridx[...]``): a
    permutation of positions into rows, so no two points write one place."""
    return Description(
        "tree_leaf_rows", ["pos"], [Concat()], "int",
        scalar="""
__global const tree_leaf_t* mdh_leaf = (__global const tree_leaf_t*)leaf_tab;
__global const int* mdh_first = leaf_tab + TREE_LEAF_INTS * n_leaves;
const int mdh_b = (int)(pos >> bucket_shift);
int lo = mdh_first[mdh_b], hi = mdh_first[mdh_b + 1];
while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (mdh_leaf[mid].begin <= pos) lo = mid; else hi = mid - 1;
}
const tree_leaf_t mdh_t = mdh_leaf[lo];
const long mdh_p = mdh_t.region + pos;
/* a step decided on the device (stay >= 0): its record holds no rows where it did not split the node */
const int mdh_kept = mdh_t.stay >= 0 && ((__global const tree_split_t*)split_tab + mdh_t.rule)->count == 0;
int mdh_right = mdh_t.split >= 0 && pos - mdh_t.begin >= n_left[mdh_t.split];
if (mdh_t.rule >= 0 && !mdh_kept) {
    __global const tree_split_t* t = (__global const tree_split_t*)split_tab + mdh_t.rule;
    mdh_right = !tree_goes_left(tree_bin_of(bins, mdh_p, t->feature, n_rows, n_feat), t,
                                (__global const uchar*)split_tab);
}
out = mdh_kept ? mdh_t.stay : (mdh_right ? mdh_t.right : mdh_t.node);
out_at = ridx[mdh_p];""",
        inputs=[Input("ridx", "int", ("*",), gather=True), Input("leaf_tab", "int", ("*",), gather=True),
                Input("n_left", "int", ("*",), gather=True), Input("bins", bin_ctype(n_bins), ("*",), gather=True),
                Input("split_tab", "int", ("*",), gather=True)],
        params=[Param("n_leaves", "int"), Param("bucket_shift", "int"), Param("n_rows", "int"),
                Param("n_feat", "int")],
        preamble=defines("double", n_bins, feature_major=feature_major) + bins_reader()
        + LEAF_RECORD.declaration(LEAF_RECORD.name) + f"\n#define TREE_LEAF_INTS {LEAF_INTS}\n",
        scatter=True,
        chunked=True,
        inline_scalar=True,
    )


def leaf_records_table(rec: np.ndarray, n_rows: int, shift: int | None = None) -> tuple[np.ndarray, int]:
    """``tree_leaf_rows``'s table and bucket shift: the records ``rec`` (:func:`leaf_records`, ascending ``begin``,
    the first 0) as ``LEAF_RECORD``s, then for each of the ``ceil(n_rows / 2^shift) + 1`` buckets the leaf holding
    its first position (the last position for the end); ``shift`` None: about four buckets a leaf. As int32s."""
    begin = rec["begin"]
    if shift is None:
        shift = max(0, math.ceil(math.log2(max(1.0, n_rows / (4 * max(1, begin.size))))))
    n_buckets = -(-max(1, n_rows) >> shift)
    first = np.searchsorted(begin, np.minimum(np.arange(n_buckets + 1) << shift, max(0, n_rows - 1)), side="right") - 1
    ints = np.stack([rec[name] for name in LEAF_RECORD.dtype.names], axis=1).reshape(-1)
    return np.concatenate([ints, first]).astype(np.int32), shift


def leaf_rows_reference(ridx: np.ndarray, leaf_tab: np.ndarray, n_rows: int, n_leaves: int,
                        n_left: np.ndarray | None = None, goes_left: np.ndarray | None = None,
                        counts: np.ndarray | None = None) -> np.ndarray:
    """``tree_leaf_rows`` in numpy: the node of each of ``n_rows`` rows. ``goes_left`` (positions of the three
    regions x split records, bool): whether the row at a position goes left by a record's split, for records with a
    ``rule``; ``counts``: the split records' row counts, for records with a ``stay``."""
    rec = np.ascontiguousarray(leaf_tab[: LEAF_INTS * n_leaves], np.int32).view(LEAF_RECORD.dtype)
    begin, node, region, split, right, rule, stay = (rec[k].astype(np.int64) for k in LEAF_RECORD.dtype.names)
    kept = np.zeros(n_leaves, bool)
    if (stay >= 0).any():
        kept[stay >= 0] = np.asarray(counts)[rule[stay >= 0]] == 0
    held = split >= 0
    pos = np.arange(n_rows)
    at = np.searchsorted(begin, pos, side="right") - 1
    lefts = np.zeros(n_leaves, np.int64)
    if held.any():
        lefts[held] = np.asarray(n_left)[split[held]]
    goes_right = held[at] & (pos - begin[at] >= lefts[at])
    ruled = ((rule >= 0) & ~kept)[at]
    if ruled.any():
        goes_right[ruled] = ~np.asarray(goes_left)[region[at][ruled] + pos[ruled], rule[at][ruled]]
    out = np.empty(n_rows, np.int32)
    out[ridx[region[at] + pos]] = np.where(kept[at], stay[at], np.where(goes_right, right[at], node[at]))
    return out


LEAF_ROWS = KernelSpec("tree_leaf_rows", elementwise())
SPECS = (LEAF_ROWS,)
