"""The row partitioner: which rows each node holds, kept on the device as the row order ``ridx`` grouped by node
(node ``n`` owns positions ``begin[n] .. begin[n] + count[n]``; XGBoost's GPU-hist layout), with the binned
matrix and the (g, h) pairs moved along (LightGBM's ordered bins and gradients), so a node's histogram streams
through one contiguous range.

Positions come in three regions of ``n_rows`` (the row order, and the bins and (g, h) where they move;
kernels/trees/positions.cl): region 0 holds the rows in their original order and is never written by a split, so
every tree's root reads it; a node's rows lie in one region, and a split writes its children to the same range of
the next region (1, or 2 from 1), so nothing is copied back, neither after a split nor after a tree (ranges in the
tables are these combined positions; modulo ``n_rows`` the live nodes' ranges tile the rows). PoCL, 500k Higgs
rows, 255 leaves: the scatter with its copy back took 28-31 ms a round, ~40 bytes a row each way twice; the copy
of a tree's rows back into their original order, 3.5-4.9 ms a round (2-core EPYC), before the third region.

A split step uploads one split table (:data:`mdhom.components.tables.SPLIT_RECORD`), visits only the rows of the
nodes it splits (their ranges end to end: the compact index space), and partitions each stably (left rows first,
each side in its old order), so rows stay in ascending order inside a node: the order the numpy reference sums
in. The rows going left per split come back without a wait, with the next split search's read. The next
histogram's row ranges are written on the device by the scatter (from ``next_child``), so the host need not
know the new counts before it launches the histogram.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_partition_flags   pos                              inclusive prefix sum of the go-left flags
tree_group_counts      blk x k                          concat, sum of the go-left flags of each block's rows
tree_leaf_rows         pos                              concat, scattered to ridx[pos]: the node of each row
tree_scatter_rows      pos                              concat, scattered to each split: its left count (each index
                                                        moves its row to its place from the flag counts, in the next
                                                        region of the positions: written inputs)
tree_block_scatter     blk                              concat, scattered to each split: its left count (a block's
                                                        walk moves its rows, written inputs)
tree_block_stage       blk                              concat, each block's left count (its walk keeps its rows'
                                                        index entries in its own indices, a written input)
tree_block_copy        blk                              concat, scattered to each split: its left count (a block's
                                                        kept rows to their places, written inputs)
tree_group_scatter     blk x k                          concat, scan placing each block's rows (mdh.Place): its
                                                        left count (the rows moved, written inputs)
=====================  ===============================  ======================================================

On CPUs the partition runs in blocks instead (``blocks`` rows each, a work-item per block; the layout choice
``blocks`` of :mod:`mdhom.trees.layouts`). Where rows move, ``tree_group_counts`` counts each block's rows going
left (a work-item folding a block in order) and the generated ``tree_block_scatter`` walks its block again in order,
writing left and right rows (to the next region) from its split's earlier blocks' counts, the rows' bins and (g, h)
and the next histogram's slot tables as written inputs, each split's left count its output (scattered: a split's
first block writes it): each row streams once, in order. Where rows are read through the row index, the split bin is
a gather (the row 16 on prefetched), so it is read once: ``tree_block_stage`` walks a block keeping its left rows'
index entries from the block's first index up and its right rows' from its last down, counting them, and
``tree_block_copy`` copies them to their places (PoCL, 2-core Xeon, 500k rows, row index with a column copy, fits
alternating, identical models: 32.8 -> 31.3 ms a depth-wise round, 46.7 -> 45.2 loss-guided). A work-item per row
costs a search of the split table and a prefix count per row, which on a CPU cost more than the rows' bytes (PoCL,
500k Higgs rows, 255 leaves: 0.10 s of partition kernels per round against 0.04 s in blocks of 2048). The generated
block scatter runs as fast as the hand-written one it replaced (2-core EPYC, 500k rows, the two alternating launch by
launch in profiled fits: PoCL 1.30 / 1.30 ms a launch depth-wise, 0.83 / 0.88 loss-guided; Intel's runtime 1.47-1.56 /
1.57-1.77 and 1.12-1.14 / 1.24-1.27).

On GPUs a block is a work-group's (``group`` work-items, the group partition; blocks of
:data:`mdhom.components.partition_kernels.GROUP_ROWS`): the
generated ``tree_group_counts`` counts each block's left rows, and ``tree_group_scatter`` partitions its block in
local memory and writes it out coalesced after the rows of the split's earlier blocks. Two launches a split step
instead of the per-row partition's four (the scan's three and the scatter), no prefix count written and read back
per row and no search of the split table per row: H200, 10.5M Higgs rows, profiled, the partition's kernels 1.55 +
0.99 -> 0.96 + 0.94 ms a loss-guided round, 1.29 + 0.86 -> 0.79 + 0.75 ms depth-wise (14 bytes a row by design
instead of 25: no count per row; the same or a lower fraction of a copy). Both block partitions read a table of
(split, block) pairs uploaded after the split records; tables decided on the device (the look-ahead) have theirs
written by the table maker itself (``tree_split_from_search``, into a buffer of their own beside the table, up to an
upper bound of the blocks that the partition launches for): their counts are not on the host.

A tree's last step, whose children are leaves, is not partitioned where rows move (``defer_last``): the leaves' pass
(``tree_leaf_rows``) takes each row's child from its split bin and the step's table, read in position order; the
partition runs only if a leaf's rows or ranges are asked for, or a later step would overwrite the table.

A step's launches, in whichever of the three forms, are :class:`mdhom.components.partition_steps.PartitionSteps`'s;
this module keeps the host's side: the ranges, the tables, the look-ahead's steps and the leaves' pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from mdhom.components.leaf_rows import LEAF_ROWS, leaf_records, leaf_records_table, leaf_rows
from mdhom.components.lookahead import AHEAD, AHEAD_ENTRIES, split_from_search
from mdhom.components.partition_kernels import SPLIT_FIELDS, block_table, flip_positions, region_start
from mdhom.components.partition_steps import PartitionSteps
from mdhom.components.split_evaluator import result_buffers
from mdhom.components.split_gate import SplitGate
from mdhom.components.tables import SPLIT_RECORD, with_left_tables
from mdhom.components.workspace import Bound, Workspace


class Slots(NamedTuple):
    """What :meth:`RowPartitioner.slots` wrote: the longest of the nodes' ranges and their rows in all, or bounds on
    them."""

    longest: int
    rows: int


class _Ahead:
    """A partition the device decided (:meth:`RowPartitioner.apply_searched`): the first child id and, once the host
    has the search's result, the nodes' ids and which of them split; ``take``, where set, takes that result (a
    look-ahead's level its caller has not asked for yet)."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.nodes: np.ndarray | None = None
        self.ok: np.ndarray | None = None
        self.take: Callable[[], None] | None = None


def _pairs_of(tab: str) -> str:
    """The buffer of a device-made table's block pairs (``split_ahead0`` -> ``ahead_blk0``): one beside each of the
    two alternating tables, so a deferred partition finds its own."""
    return tab.replace("split_ahead", "ahead_blk")


class _Deferred:
    """A tree's last split step, its partition not launched (``final``: its children are leaves, whose rows' nodes the
    leaves' pass decides from the split table ``tab`` itself): ``launch()`` runs it after all, where something asks
    for the children's ranges (:meth:`RowPartitioner.node_rows`) or a later step would overwrite its table, and
    returns (the read of its left counts, the host array they arrive in)."""

    def __init__(self, tab: str, launch: Callable[[], tuple[cl.Event, np.ndarray]]) -> None:
        self.tab = tab
        self.launch = launch


class RowPartitioner:
    """Rows to nodes on the device (see the module docstring). The host keeps each live node's (begin, count),
    folded in from the left counts each partition reads back without a wait; they decide nothing but the
    launch sizes of the next histograms."""

    def __init__(self, ws: Workspace, ahead: bool = False, blocks: int = 0, group: int = 0,
                 summed: bool = False) -> None:
        """``ahead``: build what :meth:`apply_searched` launches (the look-ahead), whose table maker also writes the
        split search's packed result (``summed``: as the split evaluator's, after the score's vector form; the
        evaluator's buffers ``scan``, ``best``, ``res``, ``inv_scale`` and ``cat_mode`` where summed). ``blocks``: rows
        per block of the block partition, 0 for a work-item per row and a prefix count. ``group``: work-items per block
        (the group partition, GPUs; the block in local memory), 0 for one work-item walking each block (CPUs). Tables
        decided on the device (:meth:`apply_searched`) have their blocks cut on the device too (their counts are not
        on the host), launched for an upper bound of the blocks. Sparse bins are read through their own reader,
        which the block kernels lack."""
        self.ws = ws
        rows = max(1, ws.n_rows)
        b = ws.n_bins
        self.steps = PartitionSteps(ws, blocks, group)
        self.d_leaf_rows = leaf_rows(b, ws.feature_major)
        leaves = ws.build(LEAF_ROWS, self.d_leaf_rows, {"pos": rows})
        self.ensure(16)
        ws.ensure("split_tab", 16 * SPLIT_RECORD.dtype.itemsize + 256)
        ws.ensure("leaf_tab", 8 * 64)
        self.k_leaf_rows = Bound(ws, leaves, lambda: (ws.row_node, dict(
            ridx=ws.ridx, leaf_tab=ws["leaf_tab"], n_left=ws["n_left"], bins=ws.bins, split_tab=ws["split_tab"])))
        # a tree's last step leaves its partition out where rows move: the leaves' pass then reads each row's split bin
        # in position order, a stream (2-core Xeon, 500k rows, depth 8: the last level 3.3 -> 2.0 ms of device time).
        # Through the row index it gathers them, and there the pass cost more than the partition it saved (H200, 10.5M
        # rows: depth-wise rounds 4.91-4.95 -> 5.05-5.09 ms on a fast host)
        self.defer_last = not ws.row_index
        self._ahead_comp = None
        self._ahead_bounds: dict[tuple[str, str, str], Bound] = {}
        self._tab = "split_tab"  # the buffer holding the last step's table
        self._at_root = False  # whether no split step has run since reset
        if ahead:  # tables made on the device alternate between two buffers: each is made from the one before
            self._ahead_comp = ws.build(AHEAD, split_from_search(b, ws.n_outputs, ws.precision, summed),
                                        {"entry": AHEAD_ENTRIES + 1})
            self._summed = summed
            for name in ("split_ahead0", "split_ahead1", "ahead_blk0", "ahead_blk1"):
                ws.ensure(name, 16 * SPLIT_RECORD.dtype.itemsize)
            self.gate = SplitGate(ws)
        # partitions whose left counts (or, decided on the device, whole tables) are still on their way to the host
        self._pending: list[tuple] = []
        # the last split step with a next_child per record: (its rows, the most rows of one node, its records)
        self._last: tuple[int, int, int] | None = None
        self.nodes_written = False  # whether ws.row_node holds every row's node as of the host's ranges
        self._settling = False
        self._written_ahead: tuple[_Ahead, int] | None = None  # write_leaves_ahead's step and its entries
        self.tree = 0  # resets so far (a tree begins with one or two): whether results are of the rows' tree still
        self.names: np.ndarray | None = None  # the renaming of the last relabel (None: none since the last reset)
        self._prepared: tuple[tuple[int, ...], Slots] | None = None
        self._root_host = np.array([0, ws.n_rows], np.int32)
        # each node's range of positions, by node id (arrays, not dicts: a depth-wise level updates up to 2^depth
        # nodes at once); a node never split into has count 0
        self.begin = np.zeros(64, np.int64)
        self.count = np.zeros(64, np.int64)

    @property
    def blocks(self) -> int:
        """Rows per block of the step's partition, 0 for a work-item per row (:class:`PartitionSteps`)."""
        return self.steps.blocks

    @property
    def group(self) -> int:
        """Work-items per block (the group partition), 0 for one walking each block (:class:`PartitionSteps`)."""
        return self.steps.group

    def ensure(self, n: int) -> None:
        """Room for ``n`` split nodes per step (left counts, the next histogram's slot tables)."""
        for name in ("n_left", "slot_begin", "slot_count"):
            self.ws.ensure(name, 8 * n)

    # ------------------------------------------------------------------------------------------ a tree
    def reset(self) -> None:
        """Every row into the root: region 0 of the positions, which holds the rows in their original order (the
        reference's summation order) whatever the last tree moved. Nothing runs on the device: a last step whose
        partition was left out (:class:`_Deferred`) is dropped (its rows' leaves come from its table)."""
        self._materialize(drop=True)
        self.resolve()
        self._prepared = None
        self._last = None
        self._at_root = True  # no split step since (apply_searched may split the root)
        ws = self.ws
        self.begin[:] = 0
        self.count[:] = 0
        self.count[0] = ws.n_rows
        self.names = None
        self.nodes_written = False  # row_node may hold the last tree's leaves: settle() writes the root's 0s
        self._written_ahead = None
        self.tree += 1

    def resolve(self, known: bool = False) -> None:
        """Fold the left counts of the last partitions (read back without a wait) into the host's ranges; for a
        table decided on the device, its records too (only those that split). ``known``: only the partitions before
        the first whose splits the host does not know yet (a look-ahead's levels, folded as their searches come in,
        while the device works through the levels below). A tree's last step whose partition was left out stays
        pending (:meth:`_materialize` runs it)."""
        pending, self._pending = self._pending, []
        for i, (event, n_left, rows) in enumerate(pending):
            if isinstance(event, _Deferred):
                self._pending = pending[i:]
                return
            if isinstance(rows, _Ahead) and (rows.ok is None or rows.nodes is None):  # its splits not known yet
                self._pending = pending[i:]
                if known:
                    return
                if rows.take is None:
                    raise RuntimeError("apply_searched's nodes and splits are needed before its ranges")
                rows.take()  # (which folds the ranges before this one's, then this one's)
                self.resolve()
                return
            if event is not None:
                event.wait()
            if isinstance(rows, _Ahead):  # apply_searched's: the host's ranges of the nodes that split
                k = np.flatnonzero(rows.ok)
                node = np.asarray(rows.nodes, np.int64)[k]
                rows, n_left = (node, rows.base + 2 * k, rows.base + 2 * k + 1, self.begin[node], self.count[node]), \
                    n_left[k]
            node, lo, hi, b0, c0 = rows  # integer arrays, as apply_splits and the look-ahead's records make them
            if not node.size:
                continue
            self._room(max(int(lo.max()), int(hi.max())) + 1)
            gone = (node != lo) & (node != hi)
            self.count[node[gone]] = 0
            dst = flip_positions(b0, self.ws.n_rows)  # the children's rows: the same range of the next region
            self.begin[lo], self.count[lo] = dst, n_left
            self.begin[hi], self.count[hi] = dst + n_left, c0 - n_left

    def _materialize(self, drop: bool = False) -> None:
        """Launch the partition a tree's last step left out (:class:`_Deferred`), where its children's ranges are
        asked for or a later step would overwrite its table; ``drop``: let it go unlaunched instead."""
        if self._pending and isinstance(self._pending[-1][0], _Deferred):
            deferred, _, rows = self._pending.pop()
            if not drop:
                self._pending.append((*deferred.launch(), rows))

    def _room(self, n: int) -> None:
        """Node ids below ``n`` in the range arrays."""
        if n > self.begin.size:
            size = max(n, 2 * self.begin.size)
            self.begin = np.concatenate([self.begin, np.zeros(size - self.begin.size, np.int64)])
            self.count = np.concatenate([self.count, np.zeros(size - self.count.size, np.int64)])

    def _ranges(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(begin, count) of ``nodes``; 0 rows for ids never split into."""
        nodes = np.asarray(nodes).reshape(-1)
        self._room(int(nodes.max()) + 1 if nodes.size else 0)
        return self.begin[nodes], self.count[nodes]

    def slots(self, nodes: np.ndarray) -> Slots:
        """The row ranges of ``nodes`` into the slot tables the histogram reads; returns the longest range and the
        rows in all (what a histogram build sizes its launch and its row blocks by). After a partition with a
        ``small_left`` hint, the scatter has written them already."""
        ws = self.ws
        n = int(nodes.size)
        self.ensure(n)
        prep = self._prepared
        if prep is not None and tuple(nodes.tolist()) == prep[0]:
            return prep[1]
        if n == 1 and int(nodes[0]) == 0 and self.begin[0] == 0 and self.count[0] == ws.n_rows:
            if ws.n_rows:
                ws.send(ws["slot_begin"], self._root_host[:1])
                ws.send(ws["slot_count"], self._root_host[1:])
            return Slots(ws.n_rows, ws.n_rows)
        self._materialize()
        self.resolve()
        begin, count = self._ranges(nodes)
        maxc = int(count.max()) if n else 0
        if maxc:
            ws.put("slot_begin", ws["slot_begin"], begin, np.int32)
            ws.put("slot_count", ws["slot_count"], count, np.int32)
        return Slots(maxc, int(count.sum()))

    def rows_of(self, nodes: np.ndarray) -> int:
        """The rows the listed nodes hold (after the last partition's counts are in)."""
        self._materialize()
        self.resolve()
        return int(self._ranges(nodes)[1].sum())

    def apply_splits(self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     left: np.ndarray, right: np.ndarray, small_left: np.ndarray | None = None,
                     cat_left: np.ndarray | None = None, final: bool = False) -> None:
        """Move each split node's rows to its children (see :meth:`mdhom.trees.backend.TreeKernels.apply_splits`).
        (g, h) must be in position order already: they move with the rows, except in a ``final`` step (the tree's
        last: only the row order moves, as in :meth:`apply_searched`)."""
        # this runs between a step's read-back and its launches, while the device waits, with the host's caches cold
        # from the kernels (PoCL, 2-core EPYC: ~10 us a numpy call): no conversions the arrays as given do not need
        ws = self.ws
        nodes = np.asarray(nodes).reshape(-1)
        self._prepared = None
        if nodes.size == 0:
            return
        self._at_root = False
        self._materialize()
        self.resolve()
        self.nodes_written = False
        ns = int(nodes.size)
        left, right = np.asarray(left).reshape(-1), np.asarray(right).reshape(-1)
        begin, count = self._ranges(nodes)
        rows = (nodes, left, right, begin, count)
        self._last = None
        ends = count.cumsum()
        n = int(ends[-1])  # the split nodes' rows, end to end: the compact index space of the partition
        if not n:
            self._pending.append((None, np.zeros(ns, np.int64), rows))
            self.resolve()
            return
        self.ensure(ns)
        row = None
        if cat_left is not None and ws.cat_mode is not None:
            cat = ws.cat_mode[np.asarray(feature, np.int64).reshape(-1)] != 0
            row = np.where(cat, np.cumsum(cat) - 1, -1)
            cat_left = np.asarray(cat_left)[cat]
        ws.ensure("split_tab", ns * SPLIT_RECORD.dtype.itemsize + (0 if row is None else cat_left.size))
        rec = len(SPLIT_FIELDS)
        blocked = self.blocks and row is None
        n_blk = blk_at = 0  # the block partitions' (split, block) pairs: how many, from which int of the table
        if blocked:  # the records, then the blocks (at most ns + n / blocks of them): one upload
            most_blk = ns + n // self.blocks + 1
            raw = ws.staging("tab", ns * rec + 2 * most_blk, np.int32)
            tab = raw[: ns * rec].view(SPLIT_RECORD.dtype)
        else:
            tab = ws.staging("tab", ns, SPLIT_RECORD.dtype)  # one upload per split step, from a reused host array
        # every field is an int32: the records fill as the columns of one (ns, 11) block (few numpy calls: this
        # runs between a level's read-back and its first launch, while the device waits)
        first = ends - count
        next_child = -1 if small_left is None else np.logical_not(small_left)  # 0: the left child's histogram
        cols = (nodes, feature, bin, default_left, left, right, begin, count, next_child, first, -1)
        block = tab.view(np.int32).reshape(ns, rec)
        for j, col in enumerate(cols):
            block[:, j] = col
        if blocked:
            n_blk = block_table(count, self.blocks, raw[ns * rec:])[1]
            blk_at = ns * rec
            ws.ensure("split_tab", 4 * (blk_at + 2 * n_blk))
            ws.send(ws["split_tab"], raw[: blk_at + 2 * n_blk])
        elif row is None:
            ws.send(ws["split_tab"], tab)
        else:
            raw = with_left_tables(tab, row, cat_left)
            if self.blocks:  # the block table after the records and their left tables, int-aligned
                blocks, n_blk = block_table(count, self.blocks)
                blk_at = -(-raw.size // 4)
                raw = np.concatenate([raw, np.zeros(4 * blk_at - raw.size, np.uint8), blocks.view(np.uint8)])
            ws.ensure("split_tab", raw.size)
            ws.put("split_tab", ws["split_tab"], raw, np.uint8)

        def launch() -> tuple[cl.Event, np.ndarray]:
            self.steps.launch(n, ns, "split_tab", n_blk, blk_at, move=not final)
            host, read = ws.read_later("n_left", ws["n_left"], ns, np.int32)  # waited for at the next sync
            return read, host

        self._tab = "split_tab"
        deferred = final and self.defer_last
        self._pending.append((_Deferred("split_tab", launch), None, rows) if deferred else (*launch(), rows))
        if small_left is not None:
            built = np.where(np.asarray(small_left, bool).reshape(-1), left, right)
            most = int(count.max())
            self._prepared = (tuple(built.tolist()), Slots(most, int(count.sum())))
            if row is None:
                self._last = (n, most, ns)

    def apply_searched(self, hist: cl.Buffer, allow: np.ndarray, base: int, leaves: int = -1,
                       max_leaves: int = 0, min_gain: float = 0.0, final: bool = False,
                       then: Callable[[], None] | None = None,
                       chain: tuple[np.ndarray, np.ndarray, int] | None = None) -> tuple[int, int, _Ahead]:
        """Split the nodes of the split search just run by their best splits, decided on the device
        (:mod:`mdhom.components.lookahead`): the host learns the splits with the search's result, after the launches,
        and sets the returned record's ``nodes`` and ``ok`` (which split) before it next needs the ranges. The nodes
        are the children of the last split step (host or device made) in the search's order (each record's built
        child, then the others), or the root alone where no step has split since :meth:`reset`; ``allow`` where each
        may split, into ``base + 2i`` and ``base + 2i + 1``; the child of the smaller hessian sum is built next.
        ``leaves``: the tree's leaves before the step, where the last step was the host's or none (the device's steps
        carry the count on); ``max_leaves`` > 0: the step is a depth-wise tree's last level, which splits only the
        largest gains its leaf budget holds (``tree_ahead_budget``); ``min_gain``: no split of a smaller gain (a
        loss-guided batch's floor); ``chain`` (each node's parent's chain value, the left-out candidates' chain values,
        the batch bound): the step splits only the nodes a bounded loss-guided batch's next batch would take
        (``tree_ahead_chain``). ``final``: the step is the tree's last, its children leaves that nothing reads the
        bins or (g, h) of (no histogram, no partition: the next tree's root reads region 0), so only the row order
        moves (PoCL, 2-core EPYC, 500k rows, depth 8: the last level's scatter moved 40 bytes a row each way).
        Numeric splits only. ``hist``: the searched nodes' histograms (the search's view of them); the table maker
        writes the search's packed result into ``res`` from them and the score's ``best``, so the search launches no
        ``tree_split_sums``; ``then`` runs right after that launch, before the partition's: where the host's read of
        ``res`` goes (behind the partition and scatter, a loss-guided batch's host waited for them: H200, 10.5M rows,
        10 -> 16 ms a round). Returns (the rows of the
        split nodes, the most rows one of them holds: upper bounds for the launches that follow; the record)."""
        ws = self.ws
        self._materialize()
        allow = np.asarray(allow, bool).reshape(-1)
        m = int(allow.size)
        root = self._at_root and m == 1
        if self._ahead_comp is None or not (root or (self._last is not None and m == 2 * self._last[2])):
            raise ValueError("apply_searched: the children of the last split step (with a next child, numeric), or "
                             "the root before any, of a partitioner built with ahead=True")
        if leaves < 0 and (root or not self._tab.startswith("split_ahead")):
            raise ValueError("apply_searched: the tree's leaves before a step the host's table (or none) precedes")
        n, most, _ = (ws.n_rows, ws.n_rows, 0) if root else self._last
        self._at_root = False
        self._prepared = None
        self.nodes_written = False
        ws.ensure("n_left", 8 * (m + 1), keep=ws.capacity("n_left"))  # the last step's counts: the table's input
        self.ensure(m + 1)
        out = "split_ahead1" if self._tab == "split_ahead0" else "split_ahead0"
        ws.ensure(out, (m + 1) * SPLIT_RECORD.dtype.itemsize)
        allowed = self.gate.allowed(allow, self._tab, leaves, max_leaves, min_gain, chain)
        ns = m + 1  # and the sentinel
        # the table's blocks (block partitions): at most n rows over the block size, rounded up, one at least a
        # record; the table maker writes their pairs beside the table (a buffer for each of the two tables)
        n_blk = n // self.blocks + ns + 1 if self.blocks else 0
        blk = _pairs_of(out)
        ws.ensure(blk, 8 * max(1, n_blk))
        make = self._ahead_bound(self._tab, out, allowed)
        ws.record("tree_split_from_search", make({"entry": ns}, {"hist": hist}, n_entries=m, base=int(base),
                                                 n_rows=ws.n_rows, root=int(root), leaves=int(leaves),
                                                 min_gain=float(min_gain), n_feat=ws.n_features,
                                                 blk_rows=self.blocks, n_blk=n_blk))
        if then is not None:
            then()
        level = sum(isinstance(p[2], _Ahead) for p in self._pending)

        def launch() -> tuple[cl.Event, np.ndarray]:
            self.steps.launch(n, ns, out, n_blk, 0, blk, move=not final)
            n_left, read = ws.read_later(f"n_left_ahead{level}", ws["n_left"], m, np.int32)
            return read, n_left

        self._tab = out
        ahead = _Ahead(int(base))
        deferred = final and self.defer_last
        self._pending.append((_Deferred(out, launch), None, ahead) if deferred else (*launch(), ahead))
        self._last = (n, most, m)
        return n, most, ahead

    def _ahead_bound(self, last: str, out: str, allow: str) -> Bound:
        """The table maker from ``last`` into ``out`` (its ``allow`` in buffer ``allow``)."""
        key = (last, out, allow)
        bound = self._ahead_bounds.get(key)
        if bound is None:
            ws = self.ws
            bound = self._ahead_bounds[key] = Bound(ws, self._ahead_comp, lambda: (ws[out], dict(
                res=ws["res"], **result_buffers(ws, self._summed), last_tab=ws[last], n_left=ws["n_left"],
                allow=ws[allow], blk_tab=ws[_pairs_of(out)])))
        return bound

    def relabel(self, node_map: np.ndarray) -> None:
        """Rename every row's node: ``node_map[node]`` (rows learn it at :meth:`settle`). The ranges stay those of
        the nodes renamed: the nodes renamed to one may sit at different depths, so in different regions."""
        self.resolve()
        self._prepared = None
        self.names = np.asarray(node_map, np.int64).reshape(-1)
        self.nodes_written = False

    def _names(self, node: np.ndarray) -> np.ndarray:
        """The names nodes go by (:meth:`relabel`)."""
        names = self.names
        if names is None or names.size == 0:
            return node
        return np.where(node < names.size, names[np.minimum(node, names.size - 1)], node)

    def _last_splits(self) -> tuple | None:
        """Every partition folded but the last, whose splits are made known; that one's (nodes, left children, right
        children, begins, counts, index of each in its left counts and in its split table, the buffer of the table
        where its partition was left out (:class:`_Deferred`), else None), its counts left on their way; None where
        every partition is folded."""
        if not self._pending:
            return None
        last = self._pending.pop()
        try:
            self.resolve()
            _, _, rows = last
            if isinstance(rows, _Ahead) and (rows.ok is None or rows.nodes is None):
                if rows.take is None:
                    raise RuntimeError("apply_searched's nodes and splits are needed before its ranges")
                rows.take()  # (which folds nothing: the partitions before are folded, and this one is popped)
        finally:
            self._pending.append(last)
        tab = last[0].tab if isinstance(last[0], _Deferred) else None
        if isinstance(rows, _Ahead):
            k = np.flatnonzero(rows.ok)
            node = np.asarray(rows.nodes, np.int64)[k]
            return node, rows.base + 2 * k, rows.base + 2 * k + 1, self.begin[node], self.count[node], k, tab
        node, lo, hi, b0, c0 = rows
        return node, lo, hi, b0, c0, np.arange(node.size), tab

    def settle(self) -> None:
        """Write every row's node into ``row_node`` from the host's ranges (one ``tree_leaf_rows`` pass), where a
        split or a renaming since the last one left it stale. The last partition's counts are not waited for: its
        splits' children are one record each, which the kernel cuts at the left count on the device (H200, 10.5M
        rows, depth 8: the device had waited 1.1 ms a tree between the last partition and this pass)."""
        if self.nodes_written or self._settling:  # (the last level's splits, taken for it here, settle again)
            return
        self._settling = True
        try:
            self._write_leaves()
        finally:
            self._settling = False
        self.nodes_written = True

    def _write_leaves(self) -> None:
        ws = self.ws
        last = self._last_splits()
        live = self.count > 0
        held, rules = None, None
        if last is not None:
            p_node, lo, hi, b0, c0, s, rules = last
            live[p_node] = False  # the split nodes' rows are their children's now
            held = np.flatnonzero(c0 > 0)
        node = np.flatnonzero(live)
        # records filled field by field, few numpy calls: this runs while the device works through the tree's last
        # partition, which is short on GPUs
        rec = self._leaf_records(node, 0 if held is None else held.size)
        if held is not None:
            tail = rec[node.size:]
            tail["node"] = self._names(np.asarray(lo)[held])
            tail["right"] = self._names(np.asarray(hi)[held])
            if rules is None:  # partitioned: the children in the next region, cut at the left count on the device
                tail["begin"], tail["split"] = flip_positions(b0[held], ws.n_rows), s[held]
            else:  # not partitioned (the tree's last step): the parent's range, each row's child from its bin
                tail["begin"], tail["rule"] = b0[held], s[held]
        self._launch_leaves(rec, rules or self._tab)

    def _leaf_records(self, node: np.ndarray, more: int) -> np.ndarray:
        """Leaf records (:func:`~mdhom.components.leaf_rows.leaf_records`, -1 where unset): the leaves ``node`` (their
        begins and names), then ``more`` records for the caller to fill."""
        rec = leaf_records(node.size + more)
        head = rec[: node.size]
        head["begin"], head["node"] = self.begin[node], self._names(node)
        return rec

    def _launch_leaves(self, rec: np.ndarray, tab: str) -> None:
        """``tree_leaf_rows`` over the records ``rec`` (begins as combined positions, split here into their regions
        and the begins within them), reading split table ``tab``."""
        ws = self.ws
        rec["region"] = region_start(rec["begin"], ws.n_rows)
        rec["begin"] -= rec["region"]
        if ws.n_rows and rec.size:
            table, shift = leaf_records_table(rec[np.argsort(rec["begin"], kind="stable")], ws.n_rows)
            ws.ensure("leaf_tab", table.nbytes)
            ws.put("leaf_tab", ws["leaf_tab"], table, np.int32)
            ws.record("tree_leaf_rows", self.k_leaf_rows(
                {"pos": ws.n_rows}, {"split_tab": ws[tab]}, n_leaves=int(rec.shape[0]), bucket_shift=shift,
                n_rows=ws.pos_stride, n_feat=ws.row_stride))

    def write_leaves_ahead(self, nodes: np.ndarray) -> bool:
        """Write every row's node before the host has read whether the last :meth:`apply_searched` split ``nodes``
        (its entries' ids, in its order; the partitions before it folded): a node of the step is a record its table
        decides on the device (``stay``, :data:`~mdhom.components.tables.LEAF_RECORD`), the other nodes holding rows
        are leaves. The pass then queues behind the step's launches while the host still waits for its search, instead
        of after the host's read-back and bookkeeping (H200 host's 16-core PoCL, 500k rows, depth 8: the device idled
        0.29-0.45 ms a round there, 0.05 after), and the score update behind it with the last level's values made on
        the device (:meth:`leaves_ahead`, :meth:`mdhom.components.scores.ScoreUpdater.update_ahead`): a depth-wise tree
        decided on the device then has no round trip before its scores are updated. Only a step whose partition was
        left out (:class:`_Deferred`, rows that move): through the row index (GPUs) the host's walk of the levels, not
        the search, is what the pass waits for, and the H200's rounds gained nothing. Returns whether it did: not where
        a partition before the step is still unfolded or the step was not the last applied."""
        if self.nodes_written or len(self._pending) != 1:
            return False
        event, _, rows = self._pending[0]
        if not isinstance(event, _Deferred) or not isinstance(rows, _Ahead) or rows.ok is not None:
            return False
        nodes = np.asarray(nodes, np.int64).reshape(-1)
        b0, c0 = self._ranges(nodes)
        held = np.flatnonzero(c0 > 0)
        live = self.count > 0
        live[nodes[held]] = False
        node = np.flatnonzero(live)
        rec = self._leaf_records(node, held.size)
        tail = rec[node.size:]
        tail["begin"] = b0[held]
        tail["node"] = self._names(rows.base + 2 * held)
        tail["right"] = self._names(rows.base + 2 * held + 1)
        tail["rule"] = held  # the entry's record in the step's table
        tail["stay"] = self._names(nodes[held])
        self._launch_leaves(rec, event.tab)
        self.nodes_written = True
        self._written_ahead = (rows, int(nodes.size))
        return True

    def leaves_ahead(self) -> tuple[int, int] | None:
        """Where the rows' nodes were written ahead of the tree's last search (:meth:`write_leaves_ahead`) and nothing
        has moved a row since: (the first child id of that step, its entries); else None."""
        w = self._written_ahead
        if w is None or not self.nodes_written or not self._pending or self._pending[-1][2] is not w[0]:
            return None
        return w[0].base, w[1]

    def row_nodes(self) -> np.ndarray:
        ws = self.ws
        self.settle()
        out = np.empty(max(1, ws.n_rows), np.int32)
        return ws.read(out, ws.row_node)[: ws.n_rows].copy()

    def node_rows(self, node: int) -> np.ndarray:
        """Row indices of a node, in ascending order. (The stable partition keeps them so within a node; a leaf
        renamed by ``relabel`` holds the rows of the nodes below it.)"""
        self._materialize()
        self.resolve()
        held = np.flatnonzero(self.count > 0)
        name = self._names(held)
        parts = [self.ws.read(np.empty(int(self.count[p]), np.int32), self.ws.ridx, 4 * int(self.begin[p]))
                 for p in held[name == node]]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int32)
