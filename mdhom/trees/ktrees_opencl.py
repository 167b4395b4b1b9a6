"""The K-tree round on an OpenCL device (:class:`mdhom.trees.ktrees.KTreeBackend`): a thin driver over the level
kernels of :mod:`mdhom.forests.boost_level`, the forests' sibling subtraction, left scan and partition, and the
gradient kernels of :mod:`mdhom.forests.boost_gradients` (the components' loss and quantiser, class-major).

Bins, targets, weights, scores, (g, h), the position order and every row's slot stay on the device for the whole
fit; per level the host sends the slot tables and reads back one record per node (the level's one sync), per round
it sends the row mask (if any) and the leaf values, and reads the (g, h) maxima when quantized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components import gradients as TG
from mdhom.components import histogram_blocks
from mdhom.components.binning import DeviceBinner, sends_whole
from mdhom.components.split import SplitParams
from mdhom.components.workspace import Workspace
from mdhom.devices import Device
from mdhom.forests import boost_gradients as GR
from mdhom.forests import boost_level as BL
from mdhom.forests import histogram as FH
from mdhom.forests import partition as FP
from mdhom.learn.binning import bin_dtype
from mdhom.learn.memory import size_text
from mdhom.learn.validation import is_sparse
from mdhom.trees.growth import GrowParams, Thresholds
from mdhom.trees.ktrees import HostEvals, Level, grow_round
from mdhom.trees.model import Tree

# bytes a level's row kernels touch per tree and row besides (g, h): the position order and its next copy, the row
# slots and their next copy, the left scan (4 bytes each)
LEVEL_BYTES = 20


def default_batch(device: Device, n_rows: int, n_outputs: int, quantized: bool) -> int:
    """Trees grown together by default: all of a round's on GPUs (their levels are bound by launches and syncs, which
    the batch divides by K); on CPUs as many as the device's cache holds a level's row arrays of (PoCL, 2 cores, 32
    MiB L3, ten classes: together took 0.55 times one after another's time per round on load_digits, 1.4 times at
    1M rows, where ten trees' arrays (360 MB a level) stream through the cache that one tree's use from it)."""
    if device.type == "gpu":
        return n_outputs
    per_tree = max(1, n_rows) * (LEVEL_BYTES + (8 if quantized else 16))
    return int(min(n_outputs, max(1, int(device.cl_device.global_mem_cache_size) // per_tree)))


class OpenCLKTrees(HostEvals):
    """One-tree-per-output rounds on one device; ``precision`` "double" (exact: the numpy reference's trees, each
    histogram folded in position order) or "quantized" (int32 (g, h), fully parallel, the same bits); ``batch``
    trees grown together (None: :func:`default_batch`; the trees are the same for every batch);
    ``configs`` overrides named kernels' configurations (tests)."""

    def __init__(self, device: str | Device | None = "auto", precision: str = "double",
                 batch: int | None = None, configs: dict[str, dict[str, int]] | None = None) -> None:
        self.lane = BL.lane_ctype(precision)
        self.ws = Workspace(device, precision, configs=configs)
        self.device, self.precision, self.batch = self.ws.device, precision, batch
        self.quantized = precision == "quantized"
        self._absmax_read: tuple[np.ndarray, cl.Event] | None = None  # the round's maxima, read behind its launches
        if not self.device.has_fp64:
            raise ValueError(f"multi_strategy='one_output_per_tree' needs double precision arithmetic, which "
                             f"{self.device.key} lacks")

    @property
    def build_seconds(self) -> float:
        return self.ws.build_seconds

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        return self.ws.kernel_configs()

    def check_size(self, n_rows: int, n_features: int, n_bins: int, n_outputs: int,
                   n_stored: int | None = None) -> None:
        dev = self.device
        per_tree = 5 * 4 * n_rows  # position order (twice), row slots (twice), the left scan
        need = n_rows * n_features * bin_dtype(n_bins).itemsize + n_outputs * (per_tree + 6 * 8 * n_rows)
        if need > dev.global_mem_size:
            raise MemoryError(f"a one-tree-per-output fit of {n_rows} x {n_features} features and {n_outputs} outputs "
                              f"needs {size_text(need)} on the device, but {dev.key} has "
                              f"{size_text(dev.global_mem_size)}")

    def bin_rows(self, mapper: Any) -> Callable[[Any], cl_array.Array | np.ndarray]:
        """Dense rows binned on the device straight into the kernels' feature-major layout; sparse rows, rows too
        large to send whole and categorical data on the host (dense bins: every tree reads every row)."""
        def to_bins(X: Any) -> cl_array.Array | np.ndarray:
            if is_sparse(X) or mapper.categorical.any() or not sends_whole(self.device, X):
                return mapper.transform(X)
            return DeviceBinner(mapper, self.device, X.dtype, feature_major=True, queue=self.ws.queue,
                                rows=X.shape[0]).transform(np.ascontiguousarray(X))

        return to_bins

    def _host_bins(self, bins: Any) -> np.ndarray:
        return bins.get().T if isinstance(bins, cl_array.Array) else bins

    # ------------------------------------------------------------------------------------------ a fit
    def load(self, bins: np.ndarray | cl_array.Array, n_bins: int, n_outputs: int,
             cat_mode: np.ndarray | None = None) -> None:
        if cat_mode is not None and np.any(cat_mode):
            raise ValueError("multi_strategy='one_output_per_tree' does not support categorical features")
        ws = self.ws
        if isinstance(bins, cl_array.Array):  # (features, rows), binned on this workspace's queue
            ws.adopt(bins)
            n_feat, n = bins.shape
            buf = ws.ensure("bins", max(16, bins.nbytes))
            if bins.nbytes:
                cl.enqueue_copy(ws.queue, buf, bins.base_data, byte_count=bins.nbytes, src_offset=bins.offset)
        else:
            n, n_feat = bins.shape
            host = np.ascontiguousarray(np.asarray(bins).T)
            buf = ws.ensure("bins", max(16, host.nbytes))
            if host.nbytes:
                cl.enqueue_copy(ws.queue, buf, host, is_blocking=True)
        self.n_rows, self.n_features, self.n_bins, self.n_outputs = int(n), int(n_feat), int(n_bins), int(n_outputs)
        if self.batch is None:
            self.batch = default_batch(self.device, self.n_rows, self.n_outputs, self.quantized)
        k, rows = self.n_outputs, max(1, self.n_rows)
        cells = max(16, 4 * k * rows)
        for name in ("order", "order_next", "row_slot", "new_slot", "scan"):
            ws.ensure(name, cells)
        ws.ensure("gh_real", rows * k * 16)
        if self.quantized:
            ws.ensure("gh", rows * k * 8)
            ws.ensure("absmax", 16 * k)
            ws.ensure("scale", 16 * k)
            ws.ensure("inv_scale", 16 * k)
        ws.ensure("scores_0", rows * k * 8)
        ws.ensure("scores_1", rows * k * 8)
        ws.ensure("keep", rows)
        ws.ensure("feature_mask", max(16, self.n_features))
        sizes = {"slot": k, "feat": self.n_features, "pos": rows}
        b = self.n_bins
        self.c_roots = ws.build(BL.ROOTS, BL.roots(), {"tree": k, "row": rows})
        self.d_hist = BL.histogram(b, self.lane)
        self.c_hist = ws.build(BL.HISTOGRAM, self.d_hist, sizes)
        self.c_sib = ws.build(FH.SIBLINGS, FH.hist_siblings(self.lane), {"slot": k, "cell": self.n_features * b * 2})
        self.c_fs = ws.build(BL.FEATURE_SPLIT_SPEC, BL.feature_split(b, self.precision),
                             {"slot": k, "feat": self.n_features})
        self.c_ns = ws.build(BL.NODE_SPLIT_SPEC, BL.node_split(), {"slot": k})
        self.c_route = ws.build(BL.ROUTE, BL.route(b), {"tree": k, "row": rows})
        self.c_scan = ws.build(FP.LEFT_SCAN, FP.left_scan(), {"tree": k, "pos": rows})
        self.c_left = ws.build(BL.SPLIT_LEFT, BL.split_left(), {"slot": k})
        self.c_part = ws.build(FP.PARTITION, FP.partition(), {"tree": k, "pos": rows})
        self.c_child = ws.build(BL.CHILD_SLOTS, BL.child_slots(), {"slot": 2 * k})
        self.c_update = ws.build(BL.SCORE_UPDATE, BL.score_update(), {"row": rows, "cls": k})
        if self.quantized:
            self.c_absmax = ws.build(GR.ABSMAX, GR.gh_absmax(), {"cls": k, "pos": rows})
            self.c_quant = ws.build(GR.QUANTIZE, GR.quantize_gh(), {"cls": k, "pos": rows})
            self.c_scale = ws.build(TG.SCALE, TG.gh_scale(), {"output": k, "lane": 2})
        self.node_bytes = self.n_features * b * 2 * (4 if self.quantized else 8)
        self._tabs = ["a", "b"]  # the current level's slot ranges, and where the next level's go
        self._hists = ["hist_a", "hist_b"]  # the current level's histograms, and the previous level's
        self.c_blocks: tuple[Any, Any] | None = None  # float64 slots of many rows in row blocks: built at first use
        self._blk_ids: cl.Buffer | None = None  # the buffer blk_id holds the identity over (written once a buffer)

    def set_objective(self, loss: Any, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:
        ws = self.ws
        n, k = self.n_rows, self.n_outputs
        kind = loss.kind
        self.d_grad = GR.gradients(kind)
        self.c_grad = ws.build(GR.GRADIENTS[kind], self.d_grad, {"cls": k, "row": max(1, n)})
        self.softmax = kind == "softmax"
        if self.softmax:
            self.c_norm = ws.build(GR.NORM, GR.softmax_norm(), {"row": max(1, n)})
            ws.ensure("norm", 16 * max(1, n))
        ycols = 1 if kind == "softmax" else k
        y = np.ascontiguousarray(np.asarray(y, np.float64).reshape(n, -1)[:, :ycols])
        mf = cl.mem_flags
        host = {"y": y if n else np.zeros((1, ycols)), "w": np.asarray(w, np.float64) if n else np.zeros(1)}
        self.y, self.w = (cl.Buffer(self.device.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host[name])
                          for name in ("y", "w"))
        self.factor = np.float64(k / (k - 1.0) if kind == "softmax" else 1.0)
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1))
        cl.enqueue_copy(ws.queue, ws["scores_0"], base, is_blocking=True)
        self.cur = 0

    def _launch(self, name: str, comp: Any, out: cl.Buffer, sizes: dict, params: dict | None = None,
                **buffers: cl.Buffer) -> None:
        self.ws.record(name, comp.bind(out, self.ws.queue, **buffers)(sizes, **(params or {})))

    def _put(self, name: str, values: np.ndarray, dtype: Any = np.int32) -> cl.Buffer:
        """A small table up without waiting (the next read-back is the sync)."""
        values = np.asarray(values).reshape(-1)
        buf = self.ws.ensure(name, max(16, np.dtype(dtype).itemsize * values.size))
        self.ws.put(name, buf, values, dtype)
        return buf

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        """(g, h) of every (row, output) from the resident scores (rows with ``keep`` False at zero); quantized:
        the round's scale per (output, g|h) from the device's maxima, and the int32 (g, h)."""
        ws, n, k = self.ws, self.n_rows, self.n_outputs
        self._absmax_read = None
        if not n:
            return
        if keep is None:
            self._put("keep", np.ones(1, np.uint8), np.uint8)
        else:
            self._put("keep", np.asarray(keep, bool), np.uint8)
        norm = {}
        if self.softmax:
            self._launch("boost_softmax_norm", self.c_norm, ws["norm"], {"row": n}, {"n_cls": np.int32(k)},
                         scores=ws[f"scores_{self.cur}"])
            norm = {"norm": ws["norm"]}
        self._launch(self.d_grad.name, self.c_grad, ws["gh_real"], {"cls": k, "row": n},
                     {"use_keep": np.int32(keep is not None), "factor": self.factor},
                     scores=ws[f"scores_{self.cur}"], y=self.y, w=self.w, keep=ws["keep"], **norm)
        if self.quantized:
            # the scale made on the device (the maxima are non-negative doubles: their bits are what tree_gh_scale
            # reads), the maxima read behind the launches for the host's check
            self._launch("boost_gh_absmax", self.c_absmax, ws["absmax"], {"cls": k, "pos": n}, gh=ws["gh_real"])
            self._absmax_read = ws.read_later("absmax", ws["absmax"], k, TG.GH_BITS.dtype)
            self._launch("tree_gh_scale", self.c_scale, ws["scale"], {"output": k, "lane": 2},
                         {"n_rows": np.int64(n)}, absmax=ws["absmax"], inv=ws["inv_scale"])
            self._launch("boost_quantize_gh", self.c_quant, ws["gh"], {"cls": k, "pos": n}, gh=ws["gh_real"],
                         scale=ws["scale"])

    def check_gradients(self) -> None:
        """Refuse a round of non-finite gradients (quantized), from the maxima read behind its launches: after the
        round's first search, whose read brought them in (nothing has been split by then)."""
        if self._absmax_read is not None:
            TG.read_inv_scale(self._absmax_read, self.n_rows)
            self._absmax_read = None

    def grow_round(self, keep: np.ndarray | None, mask: np.ndarray, params: GrowParams,
                   threshold: Thresholds) -> list[Tree]:
        self.compute_gradients(keep)
        self._put("feature_mask", np.asarray(mask, bool), np.uint8)
        return grow_round(self, mask, params, threshold, self.batch)

    def scores(self) -> np.ndarray:
        out = np.empty((max(1, self.n_rows), self.n_outputs))
        self.ws.read(out, self.ws[f"scores_{self.cur}"])
        return out[: self.n_rows]

    def sync(self) -> None:
        self.ws.sync()

    def end_round(self) -> None:
        self.ws.sync()

    # ------------------------------------------------------------------------------------------ the level steps
    def start_batch(self, classes: np.ndarray) -> None:
        ws, n = self.ws, self.n_rows
        t = len(classes)
        self.n_trees = t
        self._first = int(classes[0])  # a batch's outputs are consecutive
        self._put("tree_col", classes)
        self._put(f"begin_{self._tabs[0]}", np.arange(t) * n)
        self._put(f"count_{self._tabs[0]}", np.full(t, n))
        for field, out in ((0, "order"), (1, "row_slot")):
            self._launch("boost_roots", self.c_roots, ws[out], {"tree": t, "row": n}, {"field": np.int32(field)})

    def search(self, level: Level, mask: np.ndarray, split: SplitParams) -> np.ndarray:
        ws = self.ws
        s = len(level.tree)
        if s * self.node_bytes > int(self.device.cl_device.max_mem_alloc_size):
            raise MemoryError(f"a level of {s} nodes needs {size_text(s * self.node_bytes)} of histograms in one "
                              f"buffer, more than {self.device.key} allocates at once; bound the trees with max_depth "
                              "or max_leaves")
        hist = ws.ensure(self._hists[0], s * self.node_bytes)
        begin, count = ws[f"begin_{self._tabs[0]}"], ws[f"count_{self._tabs[0]}"]
        self._put("slot_tree", level.tree)
        built = np.arange(s, dtype=np.int32) if level.built is None else level.built
        self._put("slot_id", built)
        if level.pair is not None:
            self._put("pair", level.pair)
            small = ws.ensure("hist_small", len(built) * self.node_bytes)
            self._histogram(small, built, level.bound, begin, count)
            self._launch("forest_hist_siblings", self.c_sib, hist, {"slot": s, "cell": self.node_bytes // 4
                         if self.quantized else self.node_bytes // 8}, small=small, prev=ws[self._hists[1]],
                         pair=ws["pair"])
        else:
            self._histogram(hist, built, level.bound, begin, count)
        fsplit = ws.ensure("fsplit", s * self.n_features * BL.FEATURE_SPLIT.dtype.itemsize)
        nsplit = ws.ensure("nsplit", s * BL.NODE_SPLIT.dtype.itemsize)
        inv = {"inv_scale": ws["inv_scale"]} if self.quantized else {}
        self._launch("boost_feature_split", self.c_fs, fsplit, {"slot": s, "feat": self.n_features},
                     {p: np.float64(getattr(split, p)) for p in BL.GAIN_PARAMS}, hist=hist,
                     feature_mask=ws["feature_mask"], slot_tree=ws["slot_tree"], tree_col=ws["tree_col"], **inv)
        self._launch("boost_node_split", self.c_ns, nsplit, {"slot": s}, {"n_feat": np.int32(self.n_features)},
                     fsplit=fsplit, slot_count=count)
        recs = ws.read(np.empty(s, BL.NODE_SPLIT.dtype), nsplit)
        self.check_gradients()
        self._hists.reverse()  # this level's histograms are the next level's parents
        return recs

    def _histogram(self, out: cl.Buffer, built: np.ndarray, bound: int, begin: cl.Buffer, count: cl.Buffer) -> None:
        ws = self.ws
        blk = histogram_blocks.BLOCK_ROWS
        if not self.quantized and bound > blk:
            self._histogram_blocks(out, built, bound, begin, count, blk)
            return
        self._launch("boost_histogram", self.c_hist, out, {"slot": len(built), "feat": self.n_features,
                                                           "pos": max(1, int(bound))},
                     {"n_rows": np.int32(self.n_rows)}, bins=ws["bins"],
                     gh=ws["gh" if self.quantized else "gh_real"], order=ws["order"], slot_begin=begin,
                     slot_count=count, slot_id=ws["slot_id"], slot_tree=ws["slot_tree"], tree_col=ws["tree_col"])

    def _histogram_blocks(self, out: cl.Buffer, built: np.ndarray, bound: int, begin: cl.Buffer, count: cl.Buffer,
                          blk: int) -> None:
        """Float64 histograms of built slots of more than ``blk`` rows in the tree learner's order
        (:mod:`mdhom.components.histogram_blocks`): the slots' blocks laid out as slots of their own
        (``boost_row_blocks``: each slot's last block at its place, the earlier ones after), built by
        ``boost_histogram`` through an identity ``slot_id``, each slot's earlier blocks and its last added up in
        order (``tree_hist_blocks``), the built slots' histograms copied to ``out``."""
        ws, n = self.ws, len(built)
        slots = min(n * int(histogram_blocks.block_count(int(bound), blk)),
                    histogram_blocks.block_slots(n, self.n_trees * self.n_rows, blk))
        if self.c_blocks is None:
            self.c_blocks = (ws.build(BL.ROW_BLOCKS, BL.row_blocks(), {"v": 64}),
                             ws.build(histogram_blocks.HIST_BLOCKS, histogram_blocks.hist_blocks(self.precision),
                                      {"node": 64, "cell": self.node_bytes // 8}))
        c_tab, c_sum = self.c_blocks
        for name in ("blk_count", "blk_begin", "blk_tree", "blk_first", "blk_cnt"):
            ws.ensure(name, 4 * max(slots, 4))
        ids = ws.ensure("blk_id", 4 * max(slots, 4))
        if self._blk_ids is not ids:  # a new buffer: the identity over all of it, once (it only grows)
            ws.put("blk_id", ids, np.arange(ws.capacity("blk_id") // 4, dtype=np.int32), np.int32)
            self._blk_ids = ids
        self._launch("boost_row_blocks", c_tab, ws["blk_count"], {"v": slots},
                     {"n_built": np.int32(n), "block_rows": np.int32(blk)}, slot_begin=begin, slot_count=count,
                     slot_id=ws["slot_id"], slot_tree=ws["slot_tree"], begin=ws["blk_begin"], tree=ws["blk_tree"],
                     first=ws["blk_first"], cnt=ws["blk_cnt"])
        part = ws.ensure("hist_blocks", slots * self.node_bytes)
        self._launch("boost_histogram", self.c_hist, part, {"slot": slots, "feat": self.n_features, "pos": blk},
                     {"n_rows": np.int32(self.n_rows)}, bins=ws["bins"], gh=ws["gh_real"], order=ws["order"],
                     slot_begin=ws["blk_begin"], slot_count=ws["blk_count"], slot_id=ws["blk_id"],
                     slot_tree=ws["blk_tree"], tree_col=ws["tree_col"])
        self._launch("tree_hist_blocks", c_sum, part, {"node": n, "cell": self.node_bytes // 8},
                     {"block_rows": np.int32(blk)}, hist=part, first=ws["blk_first"], slot_count=ws["blk_cnt"])
        ws.copy("boost_blocks_copy", out, 0, part, 0, n * self.node_bytes)

    def route(self, route_tab: np.ndarray, part_tab: np.ndarray | None, pair_parent: np.ndarray) -> None:
        ws, t, n = self.ws, self.n_trees, self.n_rows
        self._put("route_tab", route_tab)
        self._launch("boost_route", self.c_route, ws["new_slot"], {"tree": t, "row": n}, row_slot=ws["row_slot"],
                     route_tab=ws["route_tab"], bins=ws["bins"])
        if part_tab is not None:
            cur, nxt = self._tabs
            begin, count = ws[f"begin_{cur}"], ws[f"count_{cur}"]
            self._put("part_tab", part_tab)
            self._put("pair_parent", pair_parent)
            pos = {"tree": t, "pos": n}
            self._launch("forest_left_scan", self.c_scan, ws["scan"], pos, order=ws["order"], new_slot=ws["new_slot"])
            left = ws.ensure("split_left", 4 * len(part_tab))
            self._launch("boost_split_left", self.c_left, left, {"slot": len(part_tab)}, {"n_rows": np.int32(n)},
                         part_tab=ws["part_tab"], slot_begin=begin, slot_count=count, scan=ws["scan"],
                         order=ws["order"], new_slot=ws["new_slot"])
            self._launch("forest_partition", self.c_part, ws["order_next"], pos, order=ws["order"],
                         row_slot=ws["row_slot"], new_slot=ws["new_slot"], scan=ws["scan"], split_tab=ws["part_tab"],
                         slot_begin=begin, split_left=left)
            m = 2 * len(pair_parent)
            for field, name in ((0, f"begin_{nxt}"), (1, f"count_{nxt}")):
                out = ws.ensure(name, 4 * m)
                self._launch("boost_child_slots", self.c_child, out, {"slot": m}, {"field": np.int32(field)},
                             pair_parent=ws["pair_parent"], slot_begin=ws[f"begin_{cur}"],
                             slot_count=ws[f"count_{cur}"], split_left=left)
            self._tabs.reverse()
            ws.swap("order", "order_next")
        ws.swap("row_slot", "new_slot")

    def end_batch(self) -> None:
        """The batch trees' leaf codes into their outputs' rows of ``leaf`` (a copy: the next batch reuses the
        row slots), or, when the batch is the round, the row slots themselves."""
        if self.n_trees == self.n_outputs:
            self._leaf = "row_slot"
            return
        self._leaf = "leaf"
        nbytes = 4 * self.n_trees * self.n_rows
        self.ws.ensure("leaf", max(16, 4 * self.n_outputs * self.n_rows))
        self.ws.copy("boost_leaf_copy", self.ws["leaf"], 4 * self.n_rows * int(self._first), self.ws["row_slot"], 0,
                     nbytes)

    def update_scores(self, leaf_value: np.ndarray) -> None:
        ws, n, k = self.ws, self.n_rows, self.n_outputs
        if not n:
            return
        self._put("leaf_value", leaf_value, np.float64)
        self._launch("boost_score_update", self.c_update, ws[f"scores_{1 - self.cur}"], {"row": n, "cls": k},
                     scores=ws[f"scores_{self.cur}"], leaf=ws[self._leaf], leaf_value=ws["leaf_value"])
        self.cur = 1 - self.cur
