"""The histogram builder: a tree's histograms in an arena on the device (one slot per node), built per call for the
listed nodes and their siblings by subtraction, written and read in place through views of the arena's slots
(sub-buffers; on devices without them, NVIDIA's, copies: :meth:`Workspace.view
<mdhom.components.workspace.Workspace.view>`). The descriptions it launches, their heuristics and tuner inputs are
:mod:`mdhom.components.histogram`'s."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyopencl as cl

from mdhom.components import histogram_blocks
from mdhom.components.histogram import SIBLINGS, hist_siblings, histogram, histogram_spec
from mdhom.components.histogram_blocks import (
    HIST_BLOCKS,
    ROW_BLOCKS,
    block_count,
    block_slots,
    hist_blocks,
    row_blocks,
)
from mdhom.components.lanes import hist_gh_type, is_quantized
from mdhom.components.row_histogram import (
    HISTOGRAM_GROUPS,
    HISTOGRAM_ROWS,
    feature_groups,
    histogram_groups,
    histogram_rows,
)
from mdhom.components.row_histogram_real import HISTOGRAM_ROWS_REAL, histogram_rows_real, real_groups
from mdhom.components.workspace import Bound, Workspace
from mdhom.devices import Device
from mdhom.mdh import Computation


@dataclass
class DeviceHist:
    """A handle to histograms on the device: ``n_nodes`` consecutive node slots of the tree's arena, each
    (feat, output, bin) (g, h) pairs. Valid until the next tree starts (:meth:`HistogramBuilder.reset`)."""

    slot: int
    n_nodes: int
    nodes: np.ndarray
    gen: int

    @cached_property
    def node_ids(self) -> list[int]:
        """``nodes`` as Python ints (per-node reads of a loss-guided batch, without a numpy call each)."""
        return self.nodes.tolist()


# The node count the batch builds of the split search are configured for (depthwise levels and loss-guided batches
# hold 2 .. ~2^depth nodes); searches of up to FEW_NODES nodes (one or two splits' children) run the build
# configured for one node. Histograms: a build per class of node counts, (count, role), a call taking the first
# class that holds it.
LEVEL_NODES = 64
FEW_NODES = 4
# work-groups a compute unit that a CPU's launch over block slots deals them to (HistogramBuilder._slot_builds)
SLOT_GROUPS = 1
NODE_CLASSES = ((1, ""), (8, "few"), (LEVEL_NODES, "levels"))


def row_classes(rows: int) -> tuple[tuple[int, str], ...]:
    """Whole-row histograms: builds by rows per node (the work-groups a node gets follow its rows), as node
    counts that share the rows: every row in one node, an eighth, a 64th, a 512th (above 1024 rows a node)."""
    out = [(1, "")]
    for c, role in ((8, "few"), (64, "levels"), (512, "small")):
        if rows // c >= 1024:
            out.append((c, role))
    return tuple(out)


def row_class(classes: tuple[tuple[int, str], ...], flat: list[bool], n_rows: int, max_count: int,
              per_node: int | None = None) -> int:
    """The whole-row build for nodes of at most ``max_count`` rows: the class of the most rows at or below it.
    Where ``max_count`` is only a bound and ``per_node`` what a node holds (levels split on the device), the class
    is chosen by ``per_node`` among the FLAT builds (if any): a FLAT build shares out the rows there are, while a
    class chosen by the bound gives each node the work-groups of a node that large, most of them folding few rows
    into partials of their own (H200, 10.5M rows,
    depth-wise levels split on the device with the root's rows as the bound: 2.78 ms of histograms a round against
    2.10 for the same levels split by the host)."""
    at: list[int] = list(range(len(classes)))
    rows_at = max_count
    if per_node is not None:
        rows_at = min(max_count, max(1, per_node))
        at = [i for i in at if flat[i]] or at
    return next((i for i in at if n_rows // classes[i][0] <= rows_at), at[-1])


def real_whole_rows(device: Device, precision: str, n_features: int, n_outputs: int, n_bins: int, whole_rows: bool,
                    sparse: bool) -> bool:
    """Whether a fit's histograms are real-lane builds of whole rows (``tree_histogram_rows_real``): where the layout
    asks for whole rows (``whole_rows``) of dense bins in a real precision and a feature's histogram fits a
    work-item's private memory (:func:`~mdhom.components.row_histogram_real.real_groups`). Such fits read through
    the row index lay their rows out padded (:func:`~mdhom.components.lanes.padded_stride`)."""
    feature_bytes = n_outputs * n_bins * hist_gh_type(precision).dtype.itemsize
    return (not is_quantized(precision) and whole_rows and not sparse
            and real_groups(device, n_features, 1, feature_bytes) > 0)


class HistogramBuilder:
    """Histograms of listed nodes into the tree's arena, in place, and the arena's bookkeeping (handles, sibling
    subtraction, the views the split search reads).

    The rows of node ``i`` of a call are ``slot_begin[i] .. + slot_count[i]`` (positions), tables that the
    row partitioner fills (:meth:`mdhom.components.partition.RowPartitioner.slots`)."""

    def __init__(self, ws: Workspace, whole_rows: bool = False) -> None:
        self.ws = ws
        p, b, k, f = ws.precision, ws.n_bins, ws.n_outputs, ws.n_features
        rows = max(1, ws.n_rows)
        # whole rows per point where the precision allows (integer atomics) and a node's histogram fits in local
        # memory, whole or in feature groups (feature_groups); always in row-index mode
        # row-index mode builds whole rows where it can (quantized, fits; real lanes where the layout asks), else a
        # feature per lane through ridx
        groups = feature_groups(ws.device, f, k, b) if ws.quantized else 0
        if groups > 1 and ws.sparse:  # compressed rows keep a feature per lane (their reader is untried in groups)
            groups = 0
        self.whole_rows = groups > 0 and (ws.row_index or whole_rows)
        # real lanes (float64, float32): whole rows where the layout asks for them (CPUs'), dense rows moved or read
        # through the row index, a build's features in the groups that give its nodes the device's compute units
        feature_bytes = k * b * hist_gh_type(p).dtype.itemsize
        real = real_whole_rows(ws.device, p, f, k, b, whole_rows, ws.sparse)
        if ws.row_stride != f and not real:  # only the real-lane whole-row build steps by a padded stride
            raise ValueError(f"bins padded to {ws.row_stride} a row need the real-lane whole-row histogram")
        classes = row_classes(rows) if self.whole_rows or real else NODE_CLASSES
        self._dims = [{} for _ in classes]  # each build's dimensions besides node and pos (feature groups)
        if real:
            self.whole_rows = True
            self.spec = HISTOGRAM_ROWS_REAL
            self._dims = [{"grp": real_groups(ws.device, f, c, feature_bytes)} for c, _ in classes]
            blk = histogram_blocks.BLOCK_ROWS
            descs = [histogram_rows_real(b, f, k, d["grp"], p, ws.feature_major, ws.row_index, block_rows=blk,
                                         row_stride=ws.row_stride) for d in self._dims]
        elif self.whole_rows and groups > 1:
            self.spec = HISTOGRAM_GROUPS
            self._dims = [{"grp": groups} for _ in classes]
            descs = [histogram_groups(b, f, k, groups, ws.feature_major, ws.row_index, ws.sparse)] * len(classes)
        elif self.whole_rows:
            self.spec = HISTOGRAM_ROWS
            descs = [histogram_rows(b, f, k, ws.feature_major, ws.row_index, ws.sparse)] * len(classes)
        else:
            self.spec = histogram_spec(p)
            self._dims = [{"feat": f, "output": k} for _ in classes]
            descs = [histogram(b, p, ws.feature_major, ws.row_index, ws.sparse)] * len(classes)
        self.d_hist = descs[0]
        self.d_sib = hist_siblings(p)
        # one build per class of node counts (NODE_CLASSES): the split of work-groups between nodes and rows is
        # fixed at build time, and a batch of many small nodes wants it otherwise than one node of every row
        self.classes = classes
        self._build_args = [(d, {"node": c, **dims, "pos": max(1, rows // c)}, r)
                            for (c, r), d, dims in zip(classes, descs, self._dims, strict=True)]
        builds = [ws.build(self.spec, d, sizes, role=r) for d, sizes, r in self._build_args]
        sib = ws.build(SIBLINGS, self.d_sib, {"side": 2, "node": 1, "cell": ws.cells})  # as launched
        self.nb = ws.node_bytes
        # slots between handles' starts at least, so that each can be viewed: 1 where a node's bytes are a multiple of
        # the alignment (64 and 256 bins on every device) or views are copies (NVIDIA: Device.sub_buffers); more for
        # odd features x bins, where aligning handles can double the arena (201 features x 41 bins at a 512-byte
        # alignment: 255 -> 576 slots)
        self._granule = ws.view_align // math.gcd(self.nb, ws.view_align)
        # what a histogram pass reads of each row: its bins, (g, h) and, in row-index mode, its index (profiles)
        self.row_bytes = ws.n_features * ws.bin_bytes + ws.n_outputs * ws.gh_dtype.itemsize + 4 * ws.row_index
        self._small_holds: tuple[int, int, int] | None = None
        self.ensure(16)
        ws.ensure("arena", 64 * self.nb)

        # the real-lane whole-row build folds a node's blocks in turn where asked (blocks=1), keeping the sum of the
        # earlier ones in ``part`` (the output's buffer, past the nodes)
        self._folds_blocks = self.spec is HISTOGRAM_ROWS_REAL
        self._whole = dict(blocks=0) if self._folds_blocks else {}

        self._builds = builds
        self.k_hist = self._bind_builds("slot_begin", "slot_count")
        self._flat = [c.flat for c in builds]
        # real lanes: nodes of more than BLOCK_ROWS rows in blocks (histogram_blocks), its kernels built at first use
        self.blocked = not ws.quantized
        # launches of at least this many nodes fold each node's blocks in turn (whole-row real builds): their nodes
        # fill the device; fewer nodes lay the blocks out as nodes of their own (parallel over a node's blocks)
        self.turns_from = max(1, ws.device.compute_units)
        self._blocks: tuple[list[Bound], list[Bound], Bound, Bound] | None = None

        # its output, parents and child are chosen per call (views of the arena's slots, hist_small, hist_work)
        self.k_sib = Bound(ws, sib, lambda: (ws["hist_small"], dict(child=ws["hist_small"], parent=ws["arena"],
                                                                    pidx=ws["pidx"], zero=ws["hist_small"],
                                                                    store=ws["hist_small"])))
        self.gen = 0
        self.reset()

    def ensure(self, n: int) -> None:
        """Room for ``n`` nodes per call."""
        ws, nb = self.ws, self.nb
        for name, nbytes in (("hist_small", n * nb), ("slot_begin", 8 * n), ("slot_count", 8 * n), ("pidx", 8 * n)):
            if nbytes > ws.capacity(name):
                ws.ensure(name, nbytes)
                if self._small_holds is not None and self._small_holds[3] == name:
                    self._small_holds = None

    def reset(self) -> None:
        """A new tree: an empty arena; handles of the previous tree become invalid."""
        self.gen += 1
        self.top = 0
        # (gen, slot, n, buffer): the transient histograms a small buffer holds (hist_small or hist_small2)
        self._small_holds: tuple[int, int, int, str] | None = None
        # (buffer, its cl.Buffer, n): a small buffer whose first n nodes a siblings launch zeroed (zero_next)
        self._zeroed: tuple[str, cl.Buffer, int] | None = None

    def check(self, hist: DeviceHist, transient: bool = False) -> None:
        """A handle of this tree; a transient one (``build(transient=True)``) only where allowed, and only while
        hist_small still holds it."""
        if hist.gen != self.gen:
            raise ValueError("a histogram handle of an earlier tree (handles live until reset_rows)")
        if hist.slot < 0 and (not transient or self._small_holds is None
                              or self._small_holds[:3] != (hist.gen, hist.slot, hist.n_nodes)):
            raise ValueError("a transient histogram handle is only the child of the next siblings call")

    def _alloc(self, n: int) -> int:
        """``n`` slots of the arena, the first at a byte offset a view may start at (:meth:`Workspace.view`)."""
        slot = -(-self.top // self._granule) * self._granule
        self.ws.ensure("arena", (slot + n) * self.nb, keep=self.top * self.nb)
        self.top = slot + n
        return slot

    def _copy(self, dst: str, dst_slot: int, src: str, src_slot: int, n: int) -> None:
        ws, nb = self.ws, self.nb
        ws.copy("tree_copy", ws[dst], dst_slot * nb, ws[src], src_slot * nb, n * nb)

    def zeros(self, nodes: np.ndarray) -> DeviceHist:
        n = int(nodes.size)
        slot = self._alloc(n)
        self.ws.fill("tree_fill", self.ws["arena"], slot * self.nb, n * self.nb)
        return DeviceHist(slot, n, np.asarray(nodes, np.int32), self.gen)

    def build(self, nodes: np.ndarray, max_count: int, rows: int = 0, transient: bool = False,
              per_node: int | None = None, total: int | None = None) -> DeviceHist:
        """Histograms of ``nodes`` (the slot tables hold their ranges; ``max_count`` the longest, or a bound on it;
        ``rows``, their rows in all, only for the bytes a profile reports: each row's bins, (g, h) and row index are
        read once). ``transient``: the handle is only the child of the next ``siblings`` call, which writes it with
        its siblings anyway; it gets no slots of its own (it stays in hist_small). Otherwise the histograms are
        written into the arena's slots (:meth:`Workspace.written <mdhom.components.workspace.Workspace.written>`:
        in place, or copied there on devices without sub-buffers). ``per_node``: about the rows a node holds, where
        ``max_count`` is only a bound (levels split on the device: the host knows no ranges, only the rows of its last
        step's largest node), see :func:`row_class`. ``total``: the nodes' rows in all, or a bound on them (the block
        slots a build of real-lane nodes of more than BLOCK_ROWS rows lays out; default every row of the fit)."""
        nodes = np.asarray(nodes, np.int32).reshape(-1)
        n = int(nodes.size)
        if n == 0 or max_count == 0:
            return self.zeros(nodes)
        ws = self.ws
        if self.blocked and max_count > histogram_blocks.BLOCK_ROWS:
            return self._build_blocks(nodes, max_count, rows, transient, total, per_node)
        if self.whole_rows:  # by rows per node: the class of the most rows at or below the longest range
            at = row_class(self.classes, self._flat, max(1, self.ws.n_rows), max_count, per_node)
        else:  # by node count: the first class that holds them
            at = next((i for i, (c, _) in enumerate(self.classes) if n <= c), len(self.classes) - 1)
        launch = self.k_hist[at]
        sizes = {"node": n, **self._dims[at], "pos": max_count}
        if transient:  # into a small buffer: one the last siblings zeroed for it, where it adds up into zeros (FLAT)
            z, self._zeroed = self._zeroed, None
            zeroed = z is not None and launch.comp.flat and z[2] >= n and ws[z[0]] is z[1]
            name = z[0] if zeroed else "hist_small"
            ws.record(self.d_hist.name, launch(sizes, {"out": ws[name]}, zeroed, n_rows=ws.pos_stride, **self._whole),
                      rows * self.row_bytes)
            self._small_holds = (self.gen, -1, n, name)
            return DeviceHist(-1, n, nodes, self.gen)
        slot = self._alloc(n)  # into the arena's slots
        with ws.written("arena", slot * self.nb, n * self.nb) as out:
            ws.record(self.d_hist.name, launch(sizes, {"out": out}, n_rows=ws.pos_stride, **self._whole),
                      rows * self.row_bytes)
        return DeviceHist(slot, n, nodes, self.gen)

    def _bind_builds(self, begin: str, count: str, builds: list[Computation] | None = None) -> list[Bound]:
        """The histogram builds (one a class; ``builds``, default the nodes') bound to the ranges in buffers ``begin``
        and ``count``: the nodes' slot tables, or the block table's."""
        ws = self.ws

        def buffers():  # noqa: ANN202
            ridx = {"ridx": ws.ridx} if ws.row_index else {}
            return ws["hist_small"], dict(bins=ws.bins, gh=ws.gh, slot_begin=ws[begin], slot_count=ws[count], **ridx,
                                          **self._block_inputs())

        return [Bound(ws, c, buffers) for c in (self._builds if builds is None else builds)]

    @cached_property
    def _slot_class(self) -> int:
        """The whole-row build a launch over block slots runs: the class of nodes of one block's rows."""
        return row_class(self.classes, self._flat, max(1, self.ws.n_rows), histogram_blocks.BLOCK_ROWS)

    def _slot_builds(self) -> list[Computation]:
        """The builds a launch over block slots runs. A table's slots are the nodes' blocks, then empty ones up to the
        launch's bound (levels split on the device know their block counts only there), and PoCL hands a launch's
        work-groups to its threads in runs of consecutive ones (of n left, ceil(n / threads) to the next free thread):
        with a slot a work-group, the first of two threads took every block of a depth-wise level's one node, and by
        the counts 6-8 of 16 threads took two or three blocks each. So on CPUs the real-lane build of the slots'
        class deals them in strides (``CHUNKED`` 0) to ``SLOT_GROUPS`` work-groups a compute unit, each with its share
        of the blocks; the same bits (each slot's rows are one work-item's in order either way). 2-core Xeon, 500k
        rows, PoCL: that level 2.6-3.3 -> 1.5-2.2 ms; fits alternating, depth-wise 36.57 -> 35.52 ms a round,
        loss-guided 53.45 -> 52.24, identical predictions; Intel's runtime (its own scheduler) 30.67 -> 31.07, within
        its spread.

        One work-group a compute unit, not several: PoCL's runs of consecutive work-groups met the strides again where
        a launch holds fewer blocks than work-groups (every level below 1M rows). At four a compute unit, a 16-core
        launch of 15 blocks dealt them to work-groups 0-14, and the first four threads took them all (H100 host, PoCL
        5.0, 500k rows, the profiled launch alone: the smaller child of the root 1.34 ms, levels of 2-8 nodes 1.42-1.48
        against the root's 1.46)."""
        ws = self.ws
        if not (self._folds_blocks and ws.device.type == "cpu"):
            return self._builds
        at = self._slot_class
        desc, sizes, role = self._build_args[at]
        dealt = ws.build(self.spec, desc, sizes, role=f"{role} slots".strip(),
                         deal=("node", SLOT_GROUPS * max(1, ws.device.compute_units)))
        return [dealt if i == at else c for i, c in enumerate(self._builds)]

    def _block_inputs(self) -> dict[str, cl.Buffer]:
        """The real-lane whole-row build's inputs for folding a node's blocks in turn, as of now (``part`` stands in
        until a launch passes the output's buffer)."""
        ws = self.ws
        return dict(part=ws["hist_small"]) if self._folds_blocks else {}

    def _block_kernels(self) -> tuple[list[Bound], list[Bound], Bound, Bound]:
        """The histogram builds' launches over block slots and (real-lane whole rows) over nodes folding their blocks
        in turn, the block table's launch and the blocks' sums (built at first use: a fit of nodes of at most
        BLOCK_ROWS rows builds none of them). The sums write no output of their own (they add up in place in ``hist``):
        the buffer they add up in stands in for it, never written through it."""
        if self._blocks is None:
            ws = self.ws
            k_slots = self._bind_builds("blk_begin", "blk_count", self._slot_builds())
            # (not k_hist: these launches also pass ``part`` as a view, and a bound launch's views stay set)
            k_turns = self._bind_builds("slot_begin", "slot_count") if self._folds_blocks else []
            tab = ws.build(ROW_BLOCKS, row_blocks(), {"v": LEVEL_NODES})
            k_tab = Bound(ws, tab, lambda: (ws["blk_count"], dict(slot_begin=ws["slot_begin"],
                                                                  slot_count=ws["slot_count"],
                                                                  begin=ws["blk_begin"], first=ws["blk_first"])))
            sums = ws.build(HIST_BLOCKS, hist_blocks(ws.precision), {"node": LEVEL_NODES, "cell": ws.cells})
            k_sum = Bound(ws, sums, lambda: (ws["hist_small"], dict(hist=ws["hist_small"], first=ws["blk_first"],
                                                                    slot_count=ws["slot_count"])))
            self._blocks = (k_slots, k_turns, k_tab, k_sum)
        return self._blocks

    def _build_blocks(self, nodes: np.ndarray, max_count: int, rows: int, transient: bool,
                      total: int | None, per_node: int | None) -> DeviceHist:
        """:meth:`build` of real-lane nodes of more than BLOCK_ROWS rows (``max_count``, or a bound on it; ``total``,
        their rows in all or a bound), summed block by block in the reference's order
        (:mod:`mdhom.components.histogram_blocks`), one of two ways, the same bits either way:

        - launches of fewer nodes than the device has compute units build the blocks as nodes of their own, parallel
          over a node's blocks (laid out by ``tree_row_blocks``): each node's earlier blocks' histograms into slots past
          the nodes' (given back after), its last block's into its own, then the earlier ones and the last added up in
          order (``tree_hist_blocks``);
        - launches of more (real-lane whole rows) fold each node's blocks in turn by one work-item, which adds them up
          itself, keeping the sum of the earlier ones in a slot past the nodes' (given back after): one launch, none
          over block slots that the bound on their number would leave empty."""
        ws, n, nb, blk = self.ws, int(nodes.size), self.nb, histogram_blocks.BLOCK_ROWS
        self.ensure(n)
        k_slots, k_turns, k_tab, k_sum = self._block_kernels()
        turns = bool(k_turns) and n >= self.turns_from
        if turns:  # the nodes, then their running sums
            slots = 2 * n
            at = row_class(self.classes, self._flat, max(1, ws.n_rows), max_count, per_node)
            launch, sizes, params = k_turns[at], {"node": n, **self._dims[at], "pos": max_count}, dict(blocks=1)
        else:  # the nodes' last blocks, then their earlier ones
            bound = min(n * max_count, ws.n_rows, ws.n_rows if total is None else total)
            slots = min(n * int(block_count(max_count, blk)), block_slots(n, bound, blk))
            for name in ("blk_count", "blk_begin", "blk_first"):
                ws.ensure(name, 4 * slots)
            ws.record("tree_row_blocks", k_tab({"v": slots}, n_nodes=n, block_rows=blk))
            if self.whole_rows:
                at = self._slot_class
            else:
                at = next((i for i, (c, _) in enumerate(self.classes) if slots <= c), len(self.classes) - 1)
            launch, sizes, params = k_slots[at], {"node": slots, **self._dims[at], "pos": blk}, self._whole
        views = ("out", "part") if self._folds_blocks else ("out",)
        self._zeroed = None
        if transient:  # in hist_small, the blocks or running sums after the nodes
            if slots * nb > ws.capacity("hist_small"):
                ws.ensure("hist_small", slots * nb)
            out, slot = ws["hist_small"], -1
            self._small_holds = (self.gen, -1, n, "hist_small")
        else:  # in the arena's slots, the blocks or running sums in the slots after them, given back after
            slot = self._alloc(slots)
        with contextlib.nullcontext(out) if transient else ws.written("arena", slot * nb, slots * nb) as out:
            ws.record(self.d_hist.name, launch(sizes, dict.fromkeys(views, out), n_rows=ws.pos_stride, **params),
                      rows * self.row_bytes)
            if not turns:
                ws.record("tree_hist_blocks", k_sum({"node": n, "cell": ws.cells}, {"out": out, "hist": out},
                                                    block_rows=blk))
        if not transient:
            self.top = slot + n
        return DeviceHist(slot, n, nodes, self.gen)

    def _siblings_launch(self, parent_slots: np.ndarray, child: DeviceHist, run: bool | None, parent: cl.Buffer,
                         out: cl.Buffer, zero_next: bool = False, store_slot: int = -1) -> None:
        """[child, parent[parent_slots] - child] into ``out`` (one launch); ``run``, when the caller knows it: whether
        the parents' slots are consecutive. The child is read where it is: a small buffer, or the arena's slots.
        ``zero_next``: the next transient build adds up into the other small buffer, which this launch zeroes (2n
        nodes: a build of more zeroes its own). ``store_slot`` >= 0: the launch also writes its output into the arena
        from that slot on (``parent``, where it is the arena, is read below it)."""
        ws, n = self.ws, child.n_nodes
        held = self._small_holds
        if held is not None and held[:3] == (child.gen, child.slot, n):
            child_buf = ws[held[3]]
        else:  # an arena handle (check refused a transient one hist_small no longer holds)
            child_buf = ws.view("arena", child.slot * self.nb, n * self.nb, "child")
            held = None
        zero, zeroed = child_buf, None  # (not written without zero_next)
        if zero_next and held is not None:
            other = "hist_small2" if held[3] == "hist_small" else "hist_small"
            if 2 * n * self.nb > ws.capacity(other):
                ws.ensure(other, 2 * n * self.nb)
            zero = ws[other]
            zeroed = (other, zero, 2 * n)
        else:
            zero_next = False
        if run is None:  # a contiguous run of parents: no index table
            run = n == 1 or bool(np.all(np.diff(parent_slots) == 1))
        if not run:
            ws.put("pidx", ws["pidx"], parent_slots, np.int32)
        store = ws["arena"] if store_slot >= 0 else child_buf  # (not written without a store_slot)
        ws.record("tree_hist_siblings", self.k_sib({"side": 2, "node": n, "cell": ws.cells},
                                                   {"out": out, "parent": parent, "child": child_buf, "zero": zero,
                                                    "store": store},
                                                   use_index=int(not run), pnode0=int(parent_slots[0]) if run else 0,
                                                   zero_next=int(zero_next),
                                                   store_at=store_slot * ws.cells if store_slot >= 0 else -1))
        if zeroed is not None:  # (once the launch is queued: a launch that raised zeroed nothing)
            self._zeroed = zeroed

    def _siblings_to_work(self, parent_slots: np.ndarray, child: DeviceHist) -> None:
        """[child, arena[parent_slots] - child] into hist_work (``subtract``'s scratch)."""
        self.check(child, transient=True)
        n = child.n_nodes
        self.ensure(n)
        ws = self.ws
        ws.ensure("hist_work", 2 * n * self.nb)
        self._siblings_launch(parent_slots, child, None, ws["arena"], ws["hist_work"])

    def _siblings_into_arena(self, parent_slots: np.ndarray, child: DeviceHist, nodes: np.ndarray,
                             run: bool | None = None, zero_next: bool = False) -> DeviceHist:
        """[child, arena[parent_slots] - child] into new slots of the arena (:meth:`Workspace.written
        <mdhom.components.workspace.Workspace.written>`): the parents are read through a view of the slots below
        the new ones (a kernel must not write a view of a buffer it reads whole). Without sub-buffers that view is the
        arena itself and the output a buffer of its own, which the search reads; the launch then writes the new
        slots of the arena too (the arena read as the parents and written as ``store``: disjoint cells, the parents'
        all below the new slots, which this checks)."""
        n = child.n_nodes
        if n == 0:
            return DeviceHist(self._alloc(0), 0, nodes, self.gen)
        self.check(child, transient=True)
        self.ensure(n)
        slot = self._alloc(2 * n)  # before the views: the arena may move
        ws, nb = self.ws, self.nb
        # where the region is written apart (no sub-buffers), the launch writes it into the arena too: no copy after
        stored = ws.writes_apart(slot * nb)
        if stored and int(np.max(parent_slots)) >= slot:  # (_alloc hands out slots above every live one)
            raise RuntimeError(f"siblings: a parent at slot {int(np.max(parent_slots))}, not below the new slots "
                               f"({slot}) that the launch writes in the buffer it reads the parents from")
        with ws.written("arena", slot * nb, 2 * n * nb, stored=stored) as out:
            self._siblings_launch(parent_slots, child, run, ws.view("arena", 0, slot * nb, "parent"), out, zero_next,
                                  slot if stored else -1)
        return DeviceHist(slot, 2 * n, nodes, self.gen)

    def siblings(self, parent: DeviceHist, child: DeviceHist, index: np.ndarray | None = None,
                 zero_next: bool = False) -> DeviceHist:
        """[child, parent[index] - child] in one launch (``index``: parent node per child, default in order).
        ``zero_next``: the next transient build is of at most the 2n nodes this returns (a look-ahead's next level):
        a transient ``child``'s launch zeroes where that build adds up, which then launches no zeroing of its own."""
        n = child.n_nodes
        if index is None:  # the parent handle's first n nodes: consecutive slots, in range when n fits (a depth-wise
            # look-ahead's every level: no index checked or tested for a run, ~20 us a level on a 2-core EPYC)
            idx, slots, run, bad = slice(n), np.arange(parent.slot, parent.slot + n), True, n > parent.n_nodes
        else:
            idx = np.asarray(index, np.int64).reshape(-1)
            slots, run = idx + parent.slot, None
            bad = idx.size != n or (n and (idx.min() < 0 or idx.max() >= parent.n_nodes))
        if bad:
            raise ValueError("siblings: one parent node per child, within the parent handle")
        self.check(parent)
        nodes = np.concatenate([child.nodes, parent.nodes[idx] if parent.nodes.size else child.nodes])
        return self._siblings_into_arena(slots, child, nodes, run, zero_next)

    def siblings_from(self, parents: list[tuple[DeviceHist, int]], child: DeviceHist,
                      zero_next: bool = False) -> DeviceHist:
        """[child, parent - child] in one launch, each child's parent ``(handle, index)`` a node of any handle
        of this tree (loss-guided batches split leaves searched in different steps). ``zero_next``: as in
        :meth:`siblings`, for whatever transient build comes next (the next batch's smaller children, or a look-ahead's
        first level); a build of more than 2n nodes zeroes its own."""
        if len(parents) != child.n_nodes:
            raise ValueError("siblings_from: one parent node per child")
        gen = self.gen
        slots, pnodes = [], []
        for h, i in parents:  # a loss-guided batch has up to a few hundred: one pass, no per-parent numpy calls
            if h.gen != gen or h.slot < 0:
                self.check(h)  # raises the reason
            if not 0 <= i < h.n_nodes:
                raise ValueError("siblings_from: a parent index outside its handle")
            slots.append(h.slot + i)
            ids = h.node_ids
            pnodes.append(ids[i] if ids else -1)
        run = bool(slots) and slots == list(range(slots[0], slots[0] + len(slots)))
        return self._siblings_into_arena(np.array(slots, np.int64), child,
                                         np.concatenate([child.nodes, np.array(pnodes, np.int32)]), run, zero_next)

    def subtract(self, parent: DeviceHist, child: DeviceHist) -> DeviceHist:
        if parent.n_nodes != child.n_nodes:
            raise ValueError(f"subtract: node counts differ, {parent.n_nodes} and {child.n_nodes}")
        n = child.n_nodes
        if n == 0:
            return DeviceHist(self._alloc(0), 0, parent.nodes, self.gen)
        self.check(parent)
        self._siblings_to_work(parent.slot + np.arange(n), child)
        slot = self._alloc(n)
        self._copy("arena", slot, "hist_work", n, n)
        return DeviceHist(slot, n, parent.nodes, self.gen)

    def take(self, hist: DeviceHist, index: np.ndarray) -> DeviceHist:
        """The listed nodes of a multi-node handle (device copies, one per run of consecutive nodes)."""
        self.check(hist)
        index = np.asarray(index, np.int64).reshape(-1)
        slot = self._alloc(index.size)
        i = 0
        while i < index.size:
            j = i + 1
            while j < index.size and index[j] == index[j - 1] + 1:
                j += 1
            self._copy("arena", slot + i, "arena", hist.slot + int(index[i]), j - i)
            i = j
        return DeviceHist(slot, int(index.size), hist.nodes[index] if hist.nodes.size else hist.nodes, self.gen)

    def concat(self, hists: list[DeviceHist]) -> DeviceHist:
        n = sum(h.n_nodes for h in hists)
        nodes = np.concatenate([h.nodes for h in hists]) if hists else np.zeros(0, np.int32)
        slot = self._alloc(n)
        at = slot
        for h in hists:
            self.check(h)
            self._copy("arena", at, "arena", h.slot, h.n_nodes)
            at += h.n_nodes
        return DeviceHist(slot, n, nodes, self.gen)

    def view(self, hist: DeviceHist) -> cl.Buffer:
        """The handle's histograms as the split search reads them: a view of the arena at its slots (in place where
        the device has sub-buffers: 16-core PoCL copied buffers on one thread, 4.8 ms of a 45 ms loss-guided round at
        255 bins; NVIDIA copies them, :meth:`Workspace.view <mdhom.components.workspace.Workspace.view>`)."""
        self.check(hist)
        n = max(1, hist.n_nodes)
        self.ws.ensure("arena", (hist.slot + n) * self.nb, keep=self.top * self.nb)
        return self.ws.view("arena", hist.slot * self.nb, n * self.nb, "hist")

    def to_host(self, hist: DeviceHist) -> np.ndarray:
        """(n_nodes, n_features, n_bins, n_outputs, 2), the protocol's layout: float64, or the int64 fixed-point
        sums when quantized (as the numpy reference keeps them)."""
        self.check(hist)
        ws = self.ws
        h = np.empty((hist.n_nodes, ws.n_features, ws.n_outputs, ws.n_bins), ws.gh_dtype)
        ws.read(h, ws["arena"], hist.slot * self.nb)
        arr = np.stack([h["g"], h["h"]], axis=-1)  # (N, F, K, B, 2)
        arr = arr.astype(np.int64 if ws.quantized else np.float64)
        return np.ascontiguousarray(arr.transpose(0, 1, 3, 2, 4))
