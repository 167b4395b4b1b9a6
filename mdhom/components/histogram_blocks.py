"""Real-lane histograms of large nodes in fixed row blocks: the fixed order that lets a float64 (or float32) histogram
fold one node's rows on many cores and still give the same bits on every device.

Real sums depend on their order. A node's rows are therefore added as blocks of :data:`BLOCK_ROWS` consecutive
positions: each block's sum from zero in position order, then the blocks' sums in block order (the numpy
reference, :func:`mdhom.trees.reference.histograms`, adds them so). The block size is part of what a model is, not
a tuning parameter: it must not depend on the device. A node of at most one block (every node of the test data)
is summed as before. Without blocks the exact fold of a node's rows was one work-item a (node, feature group): the
root of a 16-core CPU's float64 fit ran each of its 16 work-items over every row for one or two features
(0.41-0.49x XGBoost CPU's round).

A build of larger nodes (:class:`mdhom.components.histogram_builder.HistogramBuilder`) takes one of two ways, the same
bits either way:

- the blocks as nodes of their own (``tree_row_blocks`` lays them out), parallel over a node's blocks, for launches of
  fewer nodes than the device has compute units (a tree's top levels); any histogram kernel, its source unchanged (on
  CPUs the real-lane build's slots dealt in strides to a few work-groups a core, so every thread gets its share of the
  blocks: :meth:`~mdhom.components.histogram_builder.HistogramBuilder.build`). It writes each node's last block's
  histogram where the node's goes and its earlier (whole) blocks' into slots after the nodes', then adds each node's
  earlier blocks in order and its last into its slot, in place (``tree_hist_blocks``);
- each node's blocks in turn by one work-item (the real-lane whole-row build with ``blocks`` 1), which adds them up
  as it goes, the sum of the earlier ones kept in a slot past the nodes': for launches of many nodes, whose block
  count the host knows only as a bound (levels split on the device), where a launch over that many slots would run
  most of them empty (2-core Xeon, depth-wise levels: up to 1.8x the level's histogram time). One launch: no table,
  no sums' launch.

The K trees of a round (:mod:`mdhom.trees.ktrees_opencl`) sum their float64 slots the same way, their blocks laid out
by their own table (``boost_row_blocks``, through the level's ``slot_id``) and added up by ``tree_hist_blocks``.

===================  ===============================  ======================================================
kernel               index space                      combine operators
===================  ===============================  ======================================================
tree_row_blocks      v (block slot)                   concat: the v-th block's count (and begin, further blocks)
tree_hist_blocks     node x cell                      concat, concat: a node's blocks added in order, in place
===================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import hist_ctype
from mdhom.components.specs import KernelSpec, elementwise, ones
from mdhom.devices import Device
from mdhom.mdh import Concat, Description, Input, Param

# Rows a block: 31 blocks at the root of 500k rows (two each for a 16-core CPU), a node of up to 16k rows in one
# block (its sums as without blocks)
BLOCK_ROWS = 1 << 14


def block_count(count: int | np.ndarray, block_rows: int = BLOCK_ROWS) -> int | np.ndarray:
    """The blocks of a node of ``count`` rows (none for an empty node)."""
    return -(-count // block_rows)


def block_slots(n_nodes: int, rows: int, block_rows: int = BLOCK_ROWS) -> int:
    """Block slots enough for ``n_nodes`` nodes of ``rows`` rows in all (a first block each, then a further one per
    ``block_rows`` rows past it)."""
    return int(n_nodes) + int(rows) // int(block_rows)


def earlier_blocks(count: str) -> str:
    """OpenCL: the whole blocks before the last of a range of ``count`` rows (none for a range of one block or of none),
    ``block_rows`` the blocks' length."""
    return f"({count} > block_rows ? ({count} - 1) / block_rows : 0)"


def block_table(n: str, range_of: str = "mdh_i", last: str = "", earlier: str = "", empty: str = "") -> str:
    """The scalar function of a block table over ``n`` ranges (range i at ``slot_begin[range_of]``, ``slot_count[...]``
    rows, ``range_of`` an expression of ``mdh_i``): block slot ``v``'s rows in ``out`` and its first position in
    ``begin``, each range's last block at slot i, its earlier (whole) ones from slot ``n`` on, range i's first of them
    in ``first[i]``; ``last``, ``earlier`` and ``empty``: what a table writes besides at a range's last block, at an
    earlier one (``mdh_s`` the range's index) and at a slot past them. A point walks the ranges up to its own (a few
    hundred at most), so a table needs no scan kernel; each point writes only its own places."""
    return f"""
int mdh_at = {n};  /* the earlier blocks from slot {n} on */
out = 0;
for (int mdh_i = 0; mdh_i < {n}; ++mdh_i) {{
    const int mdh_s = {range_of};
    const int mdh_cnt = slot_count[mdh_s];
    const int mdh_more = {earlier_blocks("mdh_cnt")};
    if (v == mdh_i) {{  /* the range's last block */
        first[v] = mdh_at;
        begin[v] = slot_begin[mdh_s] + mdh_more * block_rows;
        out = mdh_cnt - mdh_more * block_rows;{last}
    }}
    if (v >= mdh_at && v < mdh_at + mdh_more) {{  /* one of its earlier, whole blocks */
        begin[v] = slot_begin[mdh_s] + (v - mdh_at) * block_rows;
        out = block_rows;{earlier}
    }}
    mdh_at += mdh_more;
}}
if (v >= {n} && v >= mdh_at) {{
    begin[v] = 0;{empty}
}}"""


@lru_cache(maxsize=1)
def row_blocks() -> Description:
    """The block table of ``n_nodes`` nodes' ranges (``slot_begin``, ``slot_count``; :func:`block_table`): block slot
    ``v`` holds ``out[v]`` rows from position ``begin[v]``. Slot i < ``n_nodes`` is node i's last block (so a build
    over the slots writes every node's last block where its histogram goes: the whole histogram of a node of one
    block); the nodes' earlier blocks, whole ones, follow from slot ``n_nodes`` on, node by node in order,
    ``first[i]`` node i's first; slots past them are empty."""
    return Description(
        "tree_row_blocks", ["v"], [Concat()], "int",
        scalar=block_table("n_nodes"),
        inputs=[Input("slot_begin", "int", ("*",), gather=True), Input("slot_count", "int", ("*",), gather=True),
                Input("begin", "int", ("*",), gather=True, writes=True),
                Input("first", "int", ("*",), gather=True, writes=True)],
        params=[Param("n_nodes", "int"), Param("block_rows", "int")],
    )


def row_blocks_reference(slot_begin: np.ndarray, slot_count: np.ndarray, n_slots: int,
                         block_rows: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, begin) of ``n_slots`` block slots and each node's first earlier block's slot, as ``tree_row_blocks``
    writes them."""
    n = len(slot_count)
    count, begin = np.zeros(n_slots, np.int32), np.zeros(n_slots, np.int32)
    more = np.maximum(block_count(np.asarray(slot_count, np.int64), block_rows) - 1, 0)
    first = (n + np.cumsum(more) - more).astype(np.int32)
    for i, (b, c) in enumerate(zip(slot_begin, slot_count, strict=True)):
        count[i], begin[i] = int(c) - more[i] * block_rows, int(b) + more[i] * block_rows
        for j in range(int(more[i])):
            count[first[i] + j], begin[first[i] + j] = block_rows, int(b) + j * block_rows
    return count, begin, first


@lru_cache(maxsize=4)
def hist_blocks(precision: str = "double") -> Description:
    """Each node of more than one block: its earlier blocks' histograms (``hist``'s slots from ``first[node]`` on,
    ``SIZE_cell`` cells a slot) added in order, then its last block's (``hist``'s slot ``node``), into the node's
    slot, in place. Nodes of one block are left as they are, so the kernel writes no output of its own (every
    point's ``out_at`` -1): one work-item a (node, cell) reads the earlier blocks' cells (which nothing writes) and
    reads and writes its own."""
    r = hist_ctype(precision)
    return Description(
        "tree_hist_blocks", ["node", "cell"], [Concat(), Concat()], r,
        scalar=f"""
out_at = -1;
out = 0;
const int mdh_more = {earlier_blocks("slot_count[node]")};
if (mdh_more > 0) {{
    const long mdh_c = (long)node * SIZE_cell + cell, mdh_f = first[node];
    atom_t mdh_s = hist[mdh_f * SIZE_cell + cell];
    for (int mdh_j = 1; mdh_j < mdh_more; ++mdh_j) mdh_s += hist[(mdh_f + mdh_j) * SIZE_cell + cell];
    hist[mdh_c] = mdh_s + hist[mdh_c];
}}""",
        inputs=[Input("hist", r, ("*",), gather=True, writes=True), Input("first", "int", ("*",), gather=True),
                Input("slot_count", "int", ("*",), gather=True)],
        params=[Param("block_rows", "int")],
        scatter=True, chunked=True,
    )


def hist_blocks_reference(hist: np.ndarray, first: np.ndarray, slot_count: np.ndarray,
                          block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """``hist`` (block slot, ...) with each node's earlier blocks added in order, then its last, into its slot."""
    out = hist.copy()
    for i, (f, c) in enumerate(zip(first, slot_count, strict=True)):
        more = int(block_count(int(c), block_rows)) - 1
        if more > 0:
            acc = hist[int(f)]
            for j in range(1, more):
                acc = acc + hist[int(f) + j]
            out[i] = acc + hist[i]
    return out


def blocks_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The cells carry the parallelism (a node's 3584 at 64 bins and 28 features), the nodes the rest: on GPUs
    work-groups of 256 over a node's cells, on CPUs a work-item walking a node's cells (contiguous, a loop the compiler
    vectorises), as ``tree_hist_siblings`` runs them; a work-item adds a cell's blocks in order."""
    cfg = ones(desc, dev, sizes)
    cu = max(1, dev.compute_units)
    if dev.type == "gpu":
        cfg["NUM_WI_cell"] = 256
        cfg["NUM_WG_cell"] = max(1, -(-int(sizes["cell"]) // 256))
        cfg["NUM_WG_node"] = max(1, 4 * cu // cfg["NUM_WG_cell"])
    else:
        cfg["NUM_WG_node"] = 4 * cu
    return cfg


# the tables and the sums read whole lookup buffers (the nodes' ranges, the blocks' histograms): not tunable until the
# generator has any-extent inputs, as tree_hist_siblings
ROW_BLOCKS = KernelSpec("tree_row_blocks", elementwise())
HIST_BLOCKS = KernelSpec("tree_hist_blocks", blocks_heuristic)
SPECS = (ROW_BLOCKS, HIST_BLOCKS)
