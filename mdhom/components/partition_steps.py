"""The launches of one partition step: the split feature's bins read and the rows moved to the next region, in one
of three forms (:mod:`mdhom.components.partition` says when each runs and why):

- a work-item per row: ``tree_partition_flags`` (an inclusive count of the rows going left) and
  ``tree_scatter_rows``;
- blocks walked by a work-item each (CPUs): ``tree_group_counts`` and ``tree_block_scatter`` where rows move,
  ``tree_block_stage`` and ``tree_block_copy`` where they are read through the row index;
- blocks partitioned by a work-group each in local memory (GPUs): ``tree_group_counts`` and ``tree_group_scatter``
  (a placing scan: :func:`mdhom.components.partition_kernels.group_scatter`).

:class:`PartitionSteps` builds the form the layout asks for and binds its kernels to the tables they read (the
host's split table, or one of the tables the look-ahead makes on the device); the row partitioner decides which table
a step reads and keeps the host's side of the ranges.
"""

from __future__ import annotations

import pyopencl as cl

from mdhom.components.partition_kernels import (
    BLOCK_COPY,
    BLOCK_SCATTER,
    BLOCK_STAGE,
    COLUMNS,
    FLAGS,
    GROUP_COUNTS,
    GROUP_SCATTER,
    SCATTER_ROWS,
    bin_columns,
    block_copy,
    block_scatter,
    block_stage,
    group_counts,
    group_scatter,
    partition_flags,
    scatter_rows,
)
from mdhom.components.workspace import Bound, Workspace


class PartitionSteps:
    """The kernels of a partition step, built for the workspace's layout, and their launches.

    ``blocks``: rows per block of the block partition, 0 for a work-item per row and a prefix count. ``group``:
    work-items per block (the group partition, GPUs; the block in local memory), 0 for one work-item walking each
    block (CPUs). Sparse bins are read through their own reader, which the block kernels lack: a sparse fit takes a
    work-item per row."""

    def __init__(self, ws: Workspace, blocks: int = 0, group: int = 0) -> None:
        self.ws = ws
        rows = max(1, ws.n_rows)
        b = ws.n_bins
        # row-index mode with a column copy of the bins (ws.columns): splits read a feature's column
        cols = ws.columns and ws.n_rows > 0 and ws.n_features > 0
        self.d_flags = partition_flags(b, ws.feature_major or cols, ws.row_index, ws.sparse)
        flags = ws.build(FLAGS, self.d_flags, {"pos": rows})
        # the kernels' n_feat is where a row's bins start from the last one's: the rows' stride (Workspace.row_stride,
        # padded where rows are gathered), the features themselves wherever rows move
        split_bins = ws.bins
        if cols:
            comp = ws.build(COLUMNS, bin_columns(b), {"feat": ws.n_features, "row": ws.n_rows})
            split_bins = ws.buf(ws.n_rows * ws.n_features * ws.bin_bytes)
            ws.record("tree_bin_columns", comp.bind(split_bins, ws.queue, bins=ws.bins)(
                {"feat": ws.n_features, "row": ws.n_rows}, n_feat=ws.row_stride))
        self.split_bins = split_bins
        self._flags_comp = flags
        self._flags_bounds: dict[str, Bound] = {}
        moved = not ws.row_index  # rows x (bins, (g, h)) move with the row order; else only the order moves
        self.incl = ws.buf(4 * rows)  # inclusive go-left counts, root-sized
        self._ridx = {"ridx": ws.ridx} if ws.row_index else {}
        self.blocks = 0 if ws.sparse else int(blocks)
        self.group = int(group) if self.blocks else 0
        # the block partition's launches: where rows are read through the row index (CPUs) a walk keeping each
        # block's rows and a copy; elsewhere a count of each block's left rows, then a scatter (GPUs: the group
        # scatter, a work-group a block; CPUs: the block scatter, a work-item a block)
        self.staged = bool(self.blocks) and not self.group and ws.row_index
        if self.blocks and not self.staged:
            self._group_comp = ws.build(GROUP_COUNTS, group_counts(b, ws.feature_major or cols, ws.row_index),
                                        {"blk": -(-rows // self.blocks), "k": self.blocks})
            self._group_bounds: dict[tuple[str, str], Bound] = {}
        row_bins = ws.n_features * ws.bin_bytes
        words = row_bins // 4 if moved and not ws.feature_major and row_bins % 4 == 0 else 0
        gh_wide = ws.gh_dtype.itemsize == 16
        if not self.blocks:  # the per-row partition's scatter
            self._scatter_comp = ws.build(SCATTER_ROWS, scatter_rows(
                b, bool(ws.feature_major), moved, gh_wide, 2 * ws.n_outputs, words), {"pos": rows})
            self._scatter_bounds: dict[str, Bound] = {}
        n_blk = -(-rows // self.blocks) + 1 if self.blocks else 0
        if self.blocks and not self.group and not self.staged:  # the block scatter (rows move)
            self._block_comp = ws.build(BLOCK_SCATTER, block_scatter(
                b, bool(ws.feature_major), gh_wide, 2 * ws.n_outputs, words), {"blk": n_blk})
            self._block_bounds: dict[tuple[str, str], Bound] = {}
        if self.staged:  # the walk and the copy (rows read through the row index)
            self._stage_comp = ws.build(BLOCK_STAGE, block_stage(b, bool(ws.feature_major)), {"blk": n_blk})
            self._copy_comp = ws.build(BLOCK_COPY, block_copy(), {"blk": n_blk})
            self.stage = ws.buf(4 * rows)  # the row index entries each block's walk keeps, one a compact index
            self._stage_bounds: dict[tuple[str, str], Bound] = {}
            self._copy_bounds: dict[tuple[str, str], Bound] = {}
        if self.group:  # the group scatter: a placing scan, a block a work-group (its local arrays: the block's)
            desc = group_scatter(b, bool(ws.feature_major), moved, gh_wide, 2 * ws.n_outputs, words, self.blocks)
            dev = ws.device
            need = desc.local_mem_bytes({**{f"NUM_WI_{d}": 1 for d in desc.dim_names}, "NUM_WI_k": self.group})
            if self.group & (self.group - 1) or self.group > dev.max_work_group_size or need > dev.local_mem_size:
                raise ValueError(f"group: a power of two of work-items per block, at most {dev.max_work_group_size}, "
                                 f"and blocks that fit {dev.local_mem_size} bytes of local memory ({need} for "
                                 f"{self.blocks} rows and {self.group} work-items)")
            self._gscatter_comp = ws.build(GROUP_SCATTER, desc, {"blk": n_blk, "k": self.blocks})
            self._gscatter_bounds: dict[tuple[str, str], Bound] = {}
        # bytes per row the partition (the go-left counts) and the scatter must move by design (profiles): the
        # partition reads the split feature's bin (and the row index) and writes the counts; the scatter reads the
        # counts and moves the row order to the next region, with the row's bins and (g, h) when rows move. The
        # block and group partitions write no count per row: their scatters read the bin (and the row index) again,
        # except the walk and the copy (the walk keeps the row index entry, the copy reads it and writes the order)
        row = row_bins + ws.n_outputs * ws.gh_dtype.itemsize
        self.part_bytes = 4 * ws.row_index + ws.bin_bytes + 4
        self.scatter_bytes = 4 + 4 + 8 + 2 * (row if moved else 0)
        self.blk_part_bytes = 4 * ws.row_index + ws.bin_bytes
        self.blk_scatter_bytes = 4 + 4 + ws.bin_bytes + 2 * (row if moved else 0)
        self.stage_bytes = 4 + ws.bin_bytes + 4
        self.copy_bytes = 4 + 4
        self._row_bytes = row if moved else 0  # what a tree's last split leaves unmoved (_scatter_bytes)

    def flags(self, tab: str) -> Bound:
        """The per-row partition's counts, reading the split table in buffer ``tab``."""
        bound = self._flags_bounds.get(tab)
        if bound is None:
            ws = self.ws
            bound = self._flags_bounds[tab] = Bound(ws, self._flags_comp, lambda: (self.incl, dict(
                bins=self.split_bins, split_tab=ws[tab], **self._ridx)))
        return bound

    def launch(self, n: int, ns: int, tab: str, n_blk: int = 0, blk_at: int = 0, blk: str = "split_tab",
               move: bool = True) -> None:
        """A step over the ``n`` rows of the ``ns`` records of table ``tab`` (the records' ranges end to end: the
        compact index space). Block partitions read ``n_blk`` (split, block) pairs from int ``blk_at`` on in buffer
        ``blk``. ``move`` false: the row order alone, the rows' bins and (g, h) left where they are (a tree's last
        split). Each split's left count lands in ``n_left``."""
        ws = self.ws
        if self.blocks:
            launch = self._group_launch if self.group else self._staged_launch if self.staged else self._block_launch
            launch(n, n_blk, blk_at, tab, blk, move)
            return
        ws.record("tree_partition", self.flags(tab)({"pos": n}, n_split=ns, n_rows=ws.pos_stride,
                                                    n_feat=ws.row_stride), n * self.part_bytes)
        ws.record("tree_scatter_rows", self._scatter_launch(n, ns, tab, move),
                  n * self._scatter_bytes(self.scatter_bytes, move))

    def _block_launch(self, n: int, n_blk: int, blk_at: int, tab_name: str, blk_name: str, move: bool) -> None:
        """The partition in blocks where rows move, a work-item each (a work-group of one: PoCL compiles a kernel
        per work-group size, one size keeps it to one build): the counts, then the scatter."""
        ws, br = self.ws, self.blocks
        self._block_counts(n, n_blk, blk_at, tab_name, blk_name)
        # the scatter's output is n_left, a count a split written by the split's first block (a scatter over the
        # blocks): room for one a block, which a checker's bound launch checks
        ws.ensure("n_left", 4 * n_blk, keep=ws.capacity("n_left"))
        cols = int(self.split_bins is not ws.bins)
        key = (tab_name, blk_name)
        scatter = self._block_bounds.get(key)
        if scatter is None:
            scatter = self._block_bounds[key] = Bound(ws, self._block_comp, lambda: (ws["n_left"], dict(
                ridx=ws.ridx, bins=ws.bins, gh=ws.gh, split_bins=self.split_bins, split_tab=ws[tab_name],
                blk_tab=ws[blk_name], blk_left=ws["blk_left"], slot_begin=ws["slot_begin"],
                slot_count=ws["slot_count"])))
        ev = scatter({"blk": n_blk}, split_cols=cols, n_rows=ws.n_rows, stride=ws.pos_stride, n_feat=ws.row_stride,
                     n_out=ws.n_outputs, blk_at=blk_at, blk_rows=br, move=int(move))
        ws.record("tree_scatter_rows", ev, n * self._scatter_bytes(self.blk_scatter_bytes, move))

    def _staged_launch(self, n: int, n_blk: int, blk_at: int, tab_name: str, blk_name: str, move: bool) -> None:
        """The partition in blocks through the row index, a work-item each: the walk, then the copy (``move`` is
        moot: only the row order moves)."""
        ws, br = self.ws, self.blocks
        ws.ensure("blk_left", 4 * n_blk)
        # the copy's output is n_left, a count a split written by the split's first block (a scatter over the
        # blocks): room for one a block, which a checker's bound launch checks
        ws.ensure("n_left", 4 * n_blk, keep=ws.capacity("n_left"))
        key = (tab_name, blk_name)
        stage = self._stage_bounds.get(key)
        if stage is None:
            stage = self._stage_bounds[key] = Bound(ws, self._stage_comp, lambda: (ws["blk_left"], dict(
                ridx=ws.ridx, split_bins=self.split_bins, split_tab=ws[tab_name], blk_tab=ws[blk_name],
                stage=self.stage)))
        ws.record("tree_partition", stage({"blk": n_blk}, split_cols=int(self.split_bins is not ws.bins),
                                          n_rows=ws.n_rows, stride=ws.pos_stride, n_feat=ws.row_stride,
                                          blk_at=blk_at, blk_rows=br), n * self.stage_bytes)
        copy = self._copy_bounds.get(key)
        if copy is None:
            copy = self._copy_bounds[key] = Bound(ws, self._copy_comp, lambda: (ws["n_left"], dict(
                ridx=ws.ridx, stage=self.stage, split_tab=ws[tab_name], blk_tab=ws[blk_name],
                blk_left=ws["blk_left"], slot_begin=ws["slot_begin"], slot_count=ws["slot_count"])))
        ws.record("tree_scatter_rows", copy({"blk": n_blk}, n_rows=ws.n_rows, blk_at=blk_at, blk_rows=br),
                  n * self.copy_bytes)

    def _block_counts(self, n: int, n_blk: int, blk_at: int, tab_name: str, blk_name: str) -> None:
        """The left rows of each of a step's ``n_blk`` blocks into ``blk_left``: the first launch of the group
        partition and of the block partition where rows move (the walk counts its own through the row index)."""
        ws = self.ws
        ws.ensure("blk_left", 4 * n_blk)
        key = (tab_name, blk_name)
        counts = self._group_bounds.get(key)
        if counts is None:
            counts = self._group_bounds[key] = Bound(ws, self._group_comp, lambda: (ws["blk_left"], dict(
                bins=self.split_bins, split_tab=ws[tab_name], blk_tab=ws[blk_name], **self._ridx)))
        ws.record("tree_partition", counts({"blk": n_blk, "k": self.blocks}, blk_at=blk_at, n_rows=ws.pos_stride,
                                           n_feat=ws.row_stride), n * self.blk_part_bytes)

    def _group_launch(self, n: int, n_blk: int, blk_at: int, tab_name: str, blk_name: str, move: bool) -> None:
        """The group partition, a work-group a block: the counts' reduction, then the scatter."""
        ws = self.ws
        self._block_counts(n, n_blk, blk_at, tab_name, blk_name)
        ws.ensure("blk_out", 4 * n_blk)  # the scatter's output: each block's left count
        key = (tab_name, blk_name)
        scatter = self._gscatter_bounds.get(key)
        if scatter is None:
            scatter = self._gscatter_bounds[key] = Bound(ws, self._gscatter_comp, lambda: (ws["blk_out"], dict(
                ridx=ws.ridx, bins=ws.bins, gh=ws.gh, split_bins=self.split_bins, split_tab=ws[tab_name],
                blk_tab=ws[blk_name], blk_left=ws["blk_left"], n_left=ws["n_left"], slot_begin=ws["slot_begin"],
                slot_count=ws["slot_count"])))
        ev = scatter({"blk": n_blk, "k": self.blocks}, split_cols=int(self.split_bins is not ws.bins),
                     n_rows=ws.n_rows, stride=ws.pos_stride, n_feat=ws.row_stride, n_out=ws.n_outputs, blk_at=blk_at,
                     move=int(move))
        ws.record("tree_scatter_rows", ev, n * self._scatter_bytes(self.blk_scatter_bytes, move))

    def _scatter_bytes(self, per_row: int, move: bool) -> int:
        """Bytes a row the scatter moves by design: ``per_row``, less the row's bins and (g, h) both ways where they
        stay (``move`` false)."""
        return per_row if move or not self._row_bytes else per_row - 2 * self._row_bytes

    def _scatter_launch(self, n: int, ns: int, tab: str, move: bool) -> list[cl.Event]:
        """The per-row scatter of the ``n`` compact indices of the ``ns`` records of table ``tab`` to the next
        region."""
        ws = self.ws
        # its output is n_left, each split's count written by the split's point (a scatter over the indices): room
        # for one an index, which a checker's bound launch checks
        ws.ensure("n_left", 4 * max(n, ns), keep=ws.capacity("n_left"))
        scatter = self._scatter_bounds.get(tab)
        if scatter is None:
            scatter = self._scatter_bounds[tab] = Bound(ws, self._scatter_comp, lambda: (ws["n_left"], dict(
                ridx=ws.ridx, bins=ws.bins, gh=ws.gh, split_tab=ws[tab], incl=self.incl,
                slot_begin=ws["slot_begin"], slot_count=ws["slot_count"])))
        return scatter({"pos": max(n, ns)}, n=n, n_split=ns, n_rows=ws.n_rows, stride=ws.pos_stride,
                       n_feat=ws.row_stride, n_out=ws.n_outputs, move=int(move))
