"""The forest backend on an OpenCL device: a thin driver over the kernels of :mod:`mdhom.forests.histogram`,
:mod:`mdhom.forests.split` and :mod:`mdhom.forests.partition` (the dense level) and :mod:`mdhom.forests.sampled`
(the sampled level).

Rows, weights, the position order and every row's slot stay on the device for the whole fit, the binned rows and
statistics across the grows of one fit (a classifier chain's positions); per batch of slots the host sends the
slot tables without waiting and reads back the node totals and best splits (a few bytes per node, the one sync
of a level), per level it sends the split table. Builds and configurations go through the components'
:class:`~mdhom.components.workspace.Workspace` (tuned configurations, else each kernel spec's heuristic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components.binning import DeviceBinner, sends_whole
from mdhom.components.workspace import Workspace
from mdhom.devices import Device
from mdhom.forests import histogram as H
from mdhom.forests import partition as P
from mdhom.forests import sampled as SM
from mdhom.forests import split as S
from mdhom.forests.grower import Bag, GrowSpec, Slots, bag_order
from mdhom.learn.binning import BinMapper


@dataclass(frozen=True)
class DeviceBins:
    """Rows binned on the device, feature-major (the forest kernels' layout); ``shape`` is (rows, features), as
    the grower reads host bins."""

    array: cl_array.Array  # (features, rows)

    @property
    def shape(self) -> tuple[int, int]:
        f, n = self.array.shape
        return n, f


class OpenCLForest:
    """:class:`mdhom.forests.grower.ForestBackend` on one device.

    ``sampled``: levels histogram only each node's drawn features (:mod:`mdhom.forests.sampled`); None decides
    per grow (:func:`mdhom.forests.sampled.use_sampled`). ``bag_on_device``: the root level (bag order, root
    slots) made by the device's kernels from the weights it holds, or on the host from the weights read back and
    sent; None: on GPUs (1M rows x 50 trees: ~0.5 s of host scans and 400 MB each way there; PoCL runs the
    kernels slower than numpy runs the scans, and its reads are copies in host memory). Either way the trees are
    the same."""

    def __init__(self, device: str | Device | None = "auto", sampled: bool | None = None,
                 bag_on_device: bool | None = None) -> None:
        self.ws = Workspace(device, precision="double", exact=False)
        self.device = self.ws.device
        self.sampled_choice = sampled
        self.bag_on_device = self.device.type == "gpu" if bag_on_device is None else bool(bag_on_device)

    def bin_rows(self, mapper: BinMapper, X: np.ndarray) -> DeviceBins | np.ndarray:
        """Dense float64 or float32 rows binned on the device (:class:`mdhom.components.binning.DeviceBinner`: the
        mapper's bins exactly) straight into the kernels' feature-major layout: the host's per-column search was the
        largest host cost of a fit (1.6 s of 1M x 28 rows on a 2-core host), and the bins need no upload. Rows
        whose bytes would pass half the device's largest allocation are binned on the host (and sent as bins by
        :meth:`start`, as the chains' bins are)."""
        if not sends_whole(self.device, X):
            return mapper.transform(X)
        binner = DeviceBinner(mapper, self.device, X.dtype, feature_major=True, queue=self.ws.queue,
                              rows=X.shape[0])
        return DeviceBins(binner.transform(np.ascontiguousarray(X)))

    # ------------------------------------------------------------------------------------------ buffers
    def _upload(self, name: str, values: np.ndarray) -> cl.Buffer:
        values = np.ascontiguousarray(values)
        buf = self.ws.ensure(name, max(16, values.nbytes))
        if values.nbytes:
            cl.enqueue_copy(self.ws.queue, buf, values, is_blocking=True)
        return buf

    def _put(self, name: str, values: np.ndarray) -> cl.Buffer:
        """A small per-level table (int32) up without waiting (the level's read-back is the sync)."""
        values = np.asarray(values).reshape(-1)
        buf = self.ws.ensure(name, max(16, 4 * values.size))
        self.ws.put(name, buf, values, np.int32)
        return buf

    def start(self, bins: np.ndarray | DeviceBins, n_bins: int, stat: np.ndarray, bag: Bag, spec: GrowSpec,
              xlogx: np.ndarray, per_tree: H.PerTree | None = None) -> np.ndarray:
        ws = self.ws
        self.n, self.n_feat = bins.shape
        self.n_trees = bag.n_trees
        self.n_bins = n_bins
        self.lane = "int" if stat.dtype == np.int32 else "long"
        self.per_tree = per_tree
        self.lanes = (stat.shape[1] if per_tree is None else per_tree.n_stats) + 2
        self.stat_stride = stat.shape[1]
        self.lane_dtype = np.dtype(np.int32 if self.lane == "int" else np.int64)
        # the binned rows and their statistics stay from one grow to the next (a classifier chain's positions)
        if getattr(self, "_bins_src", None) is not bins:
            if isinstance(bins, DeviceBins):  # already on the device, feature-major
                arr = bins.array
                ws.adopt(arr)  # binned on this workspace's queue (bin_rows); else that queue is waited for
                buf = ws.ensure("bins", max(16, arr.nbytes))
                if arr.nbytes:
                    cl.enqueue_copy(ws.queue, buf, arr.base_data, byte_count=arr.nbytes, src_offset=arr.offset)
            else:
                self._upload("bins", np.ascontiguousarray(bins.T))  # feature-major: the kernels' layout
            self._bins_src = bins
        if getattr(self, "_stat_src", None) is not stat:
            self._upload("stat", stat.astype(self.lane_dtype))
            self._stat_src = stat
        counts = self._bag(bag, count=self.bag_on_device)
        # the partition's and routing's outputs are written whole before they are read: allocated, not sent
        size = self.n_trees * self.n
        for name in ("order", "order_next", "row_slot", "new_slot"):
            ws.ensure(name, max(16, 4 * size))
        ws.ensure("scan", 4 * max(1, size))
        if not self.bag_on_device:  # the root level on the host (its order gives the in-bag counts too), sent
            weight = np.empty((self.n_trees, self.n), np.int32)
            if size:
                ws.read(weight, ws["weight"])
            order, counts = bag_order(weight > 0)
            self._upload("order", order)
            self._upload("row_slot", P.bag_slots_reference(weight))
        elif size:  # from the weights on the device: grower.bag_order's order, bag_slots' slots
            cells = {"tree": self.n_trees, "row": self.n}
            for name, spec_, desc, out, extra in (
                    ("forest_bag_scan", P.BAG_SCAN, P.bag_scan(), "scan", {}),
                    ("forest_bag_order", P.BAG_ORDER, P.bag_order(), "order", {"scan": ws["scan"]}),
                    ("forest_bag_slots", P.BAG_SLOTS, P.bag_slots(), "row_slot", {})):
                self._launch(name, ws.build(spec_, desc, cells), ws[out], cells, {}, weight=ws["weight"], **extra)
        self._upload("xlogx", xlogx.astype(np.float64))
        masked = per_tree is not None
        if masked:
            self._upload("tree_col", per_tree.column.astype(np.int32))
            self._upload("feat_mask", np.ascontiguousarray(per_tree.mask, np.uint8))
        out = spec.outputs
        self.sampled = SM.use_sampled(spec.max_features, self.n_feat) if self.sampled_choice is None \
            else bool(self.sampled_choice)
        # histogram features per slot: the dense level's every feature, or the sampled level's candidates
        self.slot_feat = spec.max_features if self.sampled else self.n_feat
        sizes = {"slot": self.n_trees, "feat": self.slot_feat, "pos": self.n}
        if self.sampled:
            self.width = SM.cand_width(spec.max_features)
            self.c_cand = ws.build(SM.CANDIDATES, SM.candidates(n_bins, self.n_feat, self.width, masked),
                                   {"slot": self.n_trees})
            self.c_cs = ws.build(SM.CAND_SPLIT, SM.cand_split(self.lane, out, spec.criterion, self.width),
                                 {"slot": self.n_trees})
            self.c_ss = ws.build(SM.SAMPLED_SPLIT, SM.sampled_split(n_bins, self.lane, out, spec.criterion,
                                                                    self.width, masked),
                                 {"slot": self.n_trees, "feat": spec.max_features})
            self.d_hist = H.histogram(n_bins, self.lane, out, masked, self.width)
            self.c_hist = ws.build(H.HISTOGRAM, self.d_hist, sizes, role="sampled")
        else:
            self.d_hist = H.histogram(n_bins, self.lane, out, masked)
            self.c_hist = ws.build(H.HISTOGRAM, self.d_hist, sizes)
            self.c_ns = ws.build(S.NODE_SPLIT_SPEC, S.node_split(self.lane, out, spec.criterion, self.n_feat, masked),
                                 {"slot": self.n_trees})
            self.c_tot = ws.build(S.NODE_TOTALS, S.node_totals(self.lane), {"slot": self.n_trees, "lane": self.lanes,
                                                                           "bin": n_bins})
            self.c_fs = ws.build(S.FEATURE_SPLIT_SPEC, S.feature_split(self.lane, out, spec.criterion),
                                 {"slot": self.n_trees, "feat": self.n_feat})
        # node totals from rows: the sampled level's, and the deepest level's of either (no split search there)
        self.c_stot = ws.build(SM.SLOT_TOTALS, SM.slot_totals(self.lane, out, masked),
                               {"slot": self.n_trees, "lane": self.lanes, "pos": self.n})
        rows = {"tree": self.n_trees, "row": self.n}
        self.c_sib = ws.build(H.SIBLINGS, H.hist_siblings(self.lane),
                              {"slot": self.n_trees, "cell": self.n_feat * n_bins * self.lanes})
        self.c_route = ws.build(P.ROUTE, P.route(n_bins), rows)
        self._hist = ["hist_a", "hist_b"]  # this level's histograms and the previous level's (for subtraction)
        self._prev_whole = False
        self.c_scan = ws.build(P.LEFT_SCAN, P.left_scan(), {"tree": self.n_trees, "pos": self.n})
        self.c_part = ws.build(P.PARTITION, P.partition(), {"tree": self.n_trees, "pos": self.n})
        return counts

    def _bag(self, bag: Bag, count: bool = True) -> np.ndarray:
        """The trees' bag weights into "weight" (``forest_bootstrap``: drawn and counted on the device, so neither
        the draws nor trees x rows weights cross the bus) and, with ``count``, their in-bag rows per tree (read
        back; the host's root level counts them itself)."""
        ws = self.ws
        size = bag.n_trees * self.n
        weight = ws.ensure("weight", max(16, 4 * size))
        counts = np.zeros(bag.n_trees, np.int32)
        if not size:
            return counts
        cells = {"tree": bag.n_trees, "row": self.n}
        ws.fill("forest_bootstrap", weight, 0, 4 * size)
        self._put("bag_seed", bag.seeds.view(np.int32))  # uint64 seeds as int32 pairs (little-endian devices)
        self._put("sample_weight", bag.sample_weight)
        self._launch("forest_bootstrap", ws.build(P.BOOTSTRAP, P.bootstrap(), {"tree": bag.n_trees, "draw": self.n}),
                     weight, {"tree": bag.n_trees, "draw": self.n},
                     {"n_draw": np.int32(bag.n_draw), "bootstrap": np.int32(bag.bootstrap)},
                     seed=ws["bag_seed"], sample_weight=ws["sample_weight"])
        if not count:
            return counts
        counted = ws.ensure("bag_counts", max(16, 4 * bag.n_trees))
        self._launch("forest_bag_counts", ws.build(P.BAG_COUNTS, P.bag_counts(), cells), counted, cells, {},
                     weight=weight)
        return ws.read(counts, counted)

    def _launch(self, name: str, comp, out: cl.Buffer, sizes: dict, params: dict, **buffers: cl.Buffer) -> None:  # noqa: ANN001
        self.ws.record(name, comp.bind(out, self.ws.queue, **buffers)(sizes, **params))

    # ------------------------------------------------------------------------------------------ steps
    def _build(self, out: cl.Buffer, begin: np.ndarray, count: np.ndarray, tree: np.ndarray) -> None:
        """Histograms of the listed nodes into ``out`` (the dense level)."""
        ws = self.ws
        for name, values in (("slot_begin", begin), ("slot_count", count), ("slot_tree", tree)):
            self._put(name, values)
        params, extra = {"n_rows": np.int32(self.n)}, {}
        if self.per_tree is not None:
            params["stat_stride"] = np.int32(self.stat_stride)
            extra = {"tree_col": ws["tree_col"], "feat_mask": ws["feat_mask"]}
        self._launch("forest_histogram", self.c_hist, out,
                     {"slot": len(begin), "feat": self.n_feat, "pos": max(1, int(count.max()))},
                     params, bins=ws["bins"], stat=ws["stat"], weight=ws["weight"],
                     order=ws["order"], slot_begin=ws["slot_begin"], slot_count=ws["slot_count"],
                     slot_tree=ws["slot_tree"], **extra)

    def level(self, slots: Slots, spec: GrowSpec, whole: bool) -> tuple[np.ndarray, np.ndarray]:
        if self.sampled:
            return self._sampled_level(slots, spec)
        ws = self.ws
        s = len(slots)
        cells = self.n_feat * self.n_bins * self.lanes
        node_bytes = cells * self.lane_dtype.itemsize
        hist = ws.ensure(self._hist[0], s * node_bytes)
        # the node split's tables first: a runtime may hold a write behind the queue's kernels (PoCL does), and
        # every table before the first launch keeps the level's host work off the device's critical path
        self._put("slot_node", slots.node)
        self._put("slot_seed", slots.seed.view(np.int32))
        masked = {}
        if self.per_tree is not None:  # the node split reads each slot's tree for its feature mask
            self._put("node_tree", slots.tree)
            masked = {"slot_tree": ws["node_tree"], "feat_mask": ws["feat_mask"]}
        if whole and self._prev_whole and slots.parent[0] >= 0:
            # siblings come in pairs (2k, 2k + 1): build the smaller one, subtract it from the parent for the other
            count = slots.count.reshape(-1, 2)
            side = (count[:, 1] < count[:, 0]).astype(np.int32)
            built = 2 * np.arange(count.shape[0]) + side
            small = ws.ensure("hist_small", count.shape[0] * node_bytes)
            self._put("pair", np.stack([slots.parent[0::2], side], axis=1))
            self._build(small, slots.begin[built], slots.count[built], slots.tree[built])
            self._launch("forest_hist_siblings", self.c_sib, hist, {"slot": s, "cell": cells}, {}, small=small,
                         prev=ws[self._hist[1]], pair=ws["pair"])
        else:
            self._build(hist, slots.begin, slots.count, slots.tree)
        totals = ws.ensure("totals", s * self.lanes * self.lane_dtype.itemsize)
        fsplit = ws.ensure("fsplit", s * self.n_feat * S.FEATURE_SPLIT.dtype.itemsize)
        nsplit = ws.ensure("nsplit", s * S.NODE_SPLIT.dtype.itemsize)
        self._launch("forest_node_totals", self.c_tot, totals, {"slot": s, "lane": self.lanes, "bin": self.n_bins},
                     {"n_feat": np.int32(self.n_feat)}, hist=hist)
        self._launch("forest_feature_split", self.c_fs, fsplit, {"slot": s, "feat": self.n_feat},
                     {"n_bins": np.int32(self.n_bins), "min_leaf": np.int32(spec.min_samples_leaf)},
                     hist=hist, xlogx=ws["xlogx"])
        self._launch("forest_node_split", self.c_ns, nsplit, {"slot": s}, {"max_features": np.int32(spec.max_features)},
                     fsplit=fsplit, totals=totals, slot_seed=ws["slot_seed"], slot_node=ws["slot_node"],
                     xlogx=ws["xlogx"], **masked)
        tot = np.empty((s, self.lanes), self.lane_dtype)
        ns = np.empty(s, S.NODE_SPLIT.dtype)
        cl.enqueue_copy(ws.queue, tot, totals, is_blocking=False)
        ws.read(ns, nsplit)
        if whole:  # this level's histograms are the next level's parents
            self._hist.reverse()
        self._prev_whole = whole
        return tot.astype(np.int64), ns

    def _sampled_level(self, slots: Slots, spec: GrowSpec) -> tuple[np.ndarray, np.ndarray]:
        """Draw each node's features, then score only the live ones: from histograms of the large nodes, from the
        rows of the small ones (:mod:`mdhom.forests.sampled`). One read-back: totals and splits."""
        ws = self.ws
        s, k = len(slots), self.slot_feat
        large = np.flatnonzero(slots.count > SM.SMALL_ROWS).astype(np.int32)
        index = np.full(s, -1, np.int32)
        index[large] = np.arange(large.size, dtype=np.int32)
        # every table up before the first launch (a runtime may hold a write behind the queue's kernels: PoCL does)
        tables = [("slot_node", slots.node), ("slot_seed", slots.seed.view(np.int32)), ("slot_begin", slots.begin),
                  ("slot_count", slots.count), ("slot_tree", slots.tree), ("hist_index", index)]
        if large.size:
            tables += [("large_begin", slots.begin[large]), ("large_count", slots.count[large]),
                       ("large_tree", slots.tree[large]), ("large_id", large)]
        for name, values in tables:
            self._put(name, values)
        masked = {} if self.per_tree is None else {"slot_tree": ws["slot_tree"], "feat_mask": ws["feat_mask"]}
        stat_io, stat_params = self._stat_io()
        rows = {"n_rows": np.int32(self.n)}
        cand = ws.ensure("cand", s * self.width * 4)
        self._launch("forest_candidates", self.c_cand, cand, {"slot": s},
                     {**rows, "max_features": np.int32(spec.max_features)}, bins=ws["bins"],
                     order=ws["order"], slot_begin=ws["slot_begin"], slot_count=ws["slot_count"],
                     slot_seed=ws["slot_seed"], slot_node=ws["slot_node"], **masked)
        totals = self._slot_totals(slots)
        hist = ws.ensure(self._hist[0], max(1, large.size) * k * self.n_bins * self.lanes * self.lane_dtype.itemsize)
        if large.size:
            self._launch("forest_histogram", self.c_hist, hist,
                         {"slot": large.size, "feat": k, "pos": max(1, int(slots.count[large].max()))},
                         {**rows, **stat_params}, bins=ws["bins"], stat=ws["stat"], weight=ws["weight"],
                         order=ws["order"], slot_begin=ws["large_begin"], slot_count=ws["large_count"],
                         slot_tree=ws["large_tree"], slot_id=ws["large_id"], cand=cand, **stat_io)
        fsplit = ws.ensure("fsplit", s * k * S.FEATURE_SPLIT.dtype.itemsize)
        nsplit = ws.ensure("nsplit", s * S.NODE_SPLIT.dtype.itemsize)
        self._launch("forest_sampled_split", self.c_ss, fsplit, {"slot": s, "feat": k},
                     {"n_bins": np.int32(self.n_bins), "min_leaf": np.int32(spec.min_samples_leaf), **rows,
                      **stat_params}, hist=hist, hist_index=ws["hist_index"], cand=cand, bins=ws["bins"],
                     stat=ws["stat"], weight=ws["weight"], order=ws["order"], slot_begin=ws["slot_begin"],
                     slot_count=ws["slot_count"], slot_tree=ws["slot_tree"], xlogx=ws["xlogx"], **stat_io)
        self._launch("forest_cand_split", self.c_cs, nsplit, {"slot": s}, {"n_cand": np.int32(k)},
                     fsplit=fsplit, totals=totals, cand=cand, xlogx=ws["xlogx"])
        tot = np.empty((s, self.lanes), self.lane_dtype)
        ns = np.empty(s, S.NODE_SPLIT.dtype)
        cl.enqueue_copy(ws.queue, tot, totals, is_blocking=False)
        ws.read(ns, nsplit)
        return tot.astype(np.int64), ns

    def _stat_io(self) -> tuple[dict, dict]:
        """The statistics' extra buffer and parameter where trees read their own target columns (chains)."""
        if self.per_tree is None:
            return {}, {}
        return {"tree_col": self.ws["tree_col"]}, {"stat_stride": np.int32(self.stat_stride)}

    def _slot_totals(self, slots: Slots) -> cl.Buffer:
        """Enqueue the slots' lane sums from their rows (slot_begin / count / tree already sent) into "totals"."""
        ws = self.ws
        stat_io, stat_params = self._stat_io()
        totals = ws.ensure("totals", len(slots) * self.lanes * self.lane_dtype.itemsize)
        self._launch("forest_slot_totals", self.c_stot, totals,
                     {"slot": len(slots), "lane": self.lanes, "pos": max(1, int(slots.count.max()))},
                     {"n_rows": np.int32(self.n), **stat_params}, stat=ws["stat"], weight=ws["weight"],
                     order=ws["order"], slot_begin=ws["slot_begin"], slot_count=ws["slot_count"],
                     slot_tree=ws["slot_tree"], **stat_io)
        return totals

    def totals(self, slots: Slots) -> np.ndarray:
        """The deepest level: one launch over all its slots (no histograms, so no batches) and one read."""
        for name, values in (("slot_begin", slots.begin), ("slot_count", slots.count), ("slot_tree", slots.tree)):
            self._put(name, values)
        tot = np.empty((len(slots), self.lanes), self.lane_dtype)
        self.ws.read(tot, self._slot_totals(slots))
        return tot.astype(np.int64)

    def route(self, split_tab: np.ndarray, split_left: np.ndarray, slots: Slots) -> None:
        ws = self.ws
        rows = {"tree": self.n_trees, "row": self.n}
        pos = {"tree": self.n_trees, "pos": self.n}
        self._put("split_tab", split_tab)
        self._put("split_left", split_left)
        self._put("level_begin", slots.begin)
        self._launch("forest_route", self.c_route, ws["new_slot"], rows, {},
                     row_slot=ws["row_slot"], split_tab=ws["split_tab"], bins=ws["bins"])
        self._launch("forest_left_scan", self.c_scan, ws["scan"], pos, {}, order=ws["order"], new_slot=ws["new_slot"])
        self._launch("forest_partition", self.c_part, ws["order_next"], pos, {}, order=ws["order"],
                     row_slot=ws["row_slot"], new_slot=ws["new_slot"], scan=ws["scan"], split_tab=ws["split_tab"],
                     slot_begin=ws["level_begin"], split_left=ws["split_left"])
        ws.swap("order", "order_next")
        ws.swap("row_slot", "new_slot")
