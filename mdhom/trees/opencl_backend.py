"""``OpenCLTreeKernels``: the :class:`mdhom.trees.backend.TreeKernels` protocol on an OpenCL device.

Everything row-sized (bins, gradients, the row order ``ridx`` grouped by node, the row -> node map,
histograms) stays on the device for the whole fit. Per call the host uploads a few ints per node (which
rows a node owns, the split table) and reads back only the best split of each node, its child sums, and
the left-child row counts of each split (which it needs to size the next histogram launch).

Each md_hom kernel is built once per fit: sizes are kernel arguments, so one build serves every level and
every tree. Configurations come from ``mdhom.configs.lookup_config`` where a tuned one exists, else from a
heuristic per device type.

Exact mode (``exact=True``, the default in double precision) makes the results bit-identical to the numpy
reference, not merely close: the histogram folds each (node, feature, output) over its rows sequentially,
and rows stay in ascending order inside a node (the partition is stable), which is the order in which
``np.bincount`` adds them; the split scan folds bins in ``np.cumsum``'s order; the gain is computed with the
reference's operations in its order (no FMA); the argmax is order-independent. Identical sums matter beyond
rounding: after histogram subtraction an empty bin is "parent - child", which is 0 or a few ulps depending
on the order of summation, and that decides ties between thresholds. The cost is parallelism: one work-item
per (node, feature, output) along the rows, plenty on CPUs, too little on GPUs (see the report: a GPU wants
integer, fixed-point accumulation, which is exact in any order).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.devices import Device, get_device
from mdhom.mdh import Computation, Description, build_program, build_within_limits
from mdhom.trees import kernels as tk
from mdhom.trees.backend import SplitParams, Splits


def opaque(arr: cl_array.Array, dtype: np.dtype | None = None) -> cl_array.Array:
    """A one-element view of a whole device buffer, for lookup inputs declared ``shape=(1,)``.

    The kernel receives the buffer itself; bounds are the kernel's own business (and Oclgrind's check).
    """
    return cl_array.Array(arr.queue, (1,), arr.dtype if dtype is None else dtype, data=arr.base_data,
                          offset=arr.offset)


def _view(arr: cl_array.Array, shape: tuple[int, ...], dtype: np.dtype) -> cl_array.Array:
    return cl_array.Array(arr.queue, shape, dtype, data=arr.base_data, offset=arr.offset)


@dataclass
class DeviceHist:
    """A handle to histograms on the device: (nodes, feat, output, bin) (g, h) pairs."""

    data: cl_array.Array  # dtype gh_t, shape (n_nodes, n_features, n_outputs, n_bins)
    nodes: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.data.shape[0])


def _pow2_at_most(n: int, cap: int) -> int:
    v = 1
    while v * 2 <= min(max(1, n), cap):
        v *= 2
    return v


class OpenCLTreeKernels:
    """The md_hom tree kernels on one OpenCL device (see the module docstring).

    ``precision="double"`` reproduces the numpy reference (same splits, sums within rounding of the row
    order); ``"single"`` keeps gradients and histograms in float32. ``feature_major`` stores bins as
    features x rows (coalesced reads on GPUs) instead of rows x features (one cache line per row on
    CPUs); ``None`` picks by device type. ``configs`` overrides the configuration of named kernels.
    ``exact`` (default: True in double precision) pins the summation order to the reference's (see the
    module docstring); without it tuned configurations may fold rows in parallel, correct to rounding.

    Usage (``bins`` uint8 (n_rows, n_features), ``g``/``h`` (n_rows,), ``params`` a SplitParams)::

        kern = OpenCLTreeKernels("cpu")
        kern.load(bins, n_bins=64, n_outputs=1)
        kern.set_gradients(g, h)
        kern.reset_rows()
        splits = kern.best_splits(kern.histograms(np.array([0])), np.ones(bins.shape[1], bool), params)
    """

    def __init__(self, device: str | Device | None = None, precision: str = "double",
                 feature_major: bool | None = None, configs: dict[str, dict[str, int]] | None = None,
                 exact: bool | None = None) -> None:
        self.device = get_device(device)
        tk.real_ctype(precision)
        self.precision = precision
        self.real = np.dtype(tk.REALS[precision])
        self.feature_major = (self.device.type == "gpu") if feature_major is None else bool(feature_major)
        self.overrides = dict(configs or {})
        self.exact = (precision == "double") if exact is None else bool(exact)
        self.queue = self.device.queue
        self.build_seconds = 0.0
        self.kernel_seconds: dict[str, float] = {}
        self.profile = False
        self._comps: dict[str, Computation] = {}

    # ------------------------------------------------------------------------------------------ configuration
    def _heuristic(self, desc: Description, sizes: dict[str, int]) -> dict[str, int]:
        dev = self.device
        cfg = desc.default_config(dev, sizes)
        gpu = dev.type == "gpu"
        cu = max(1, dev.compute_units)
        name = desc.name
        if name == "tree_histogram":
            for d in desc.dim_names:
                cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
            cfg["NUM_WG_feat"] = sizes["feat"]
            cfg["NUM_WG_node"] = 4 if gpu else 2
            if gpu:
                cfg["NUM_WI_pos"] = 16
                cfg["NUM_WG_pos"] = 16
            else:
                cfg["NUM_WG_pos"] = _pow2_at_most(2 * cu, 64)
        elif name == "tree_split_scan":
            for d in desc.dim_names:
                cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
            cfg["NUM_WI_feat"] = _pow2_at_most(sizes["feat"], 64 if gpu else 8)
            cfg["NUM_WG_node"] = 64 if gpu else 2 * cu
        elif name == "tree_split_score":
            for d in desc.dim_names:
                cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
            cfg["NUM_WI_bin"] = _pow2_at_most(sizes["bin"], 64 if gpu else 16)
            cfg["NUM_WI_dir"] = 2
            cfg["NUM_WG_node"] = 256 if gpu else 2 * cu
        elif name == "tree_partition_flags":
            cfg["NUM_WI_pos"] = 256 if gpu else 64
            cfg["NUM_WG_pos"] = 64 if gpu else 2 * cu
        elif name in ("tree_partition_dest", "tree_hist_subtract"):
            dim = desc.dim_names[0]
            cfg[f"NUM_WI_{dim}"] = 256 if gpu else 64
            cfg[f"NUM_WG_{dim}"] = 4 * cu * (16 if gpu else 1)
        return cfg

    def _config(self, desc: Description, sizes: dict[str, int]) -> dict[str, int]:
        cfg = self.overrides.get(desc.name)
        if cfg is None:
            try:
                from mdhom.configs import lookup_config
                cfg = lookup_config(self.device, desc.name, sizes, desc)
            except ImportError:  # the tuned-config store is optional for this backend
                cfg = None
        cfg = dict(cfg) if cfg is not None else self._heuristic(desc, sizes)
        if self.exact and desc.name == "tree_split_scan":
            cfg["NUM_WI_bin"] = cfg["NUM_WG_bin"] = 1  # sequential prefix: np.cumsum's order
        if self.exact and desc.name == "tree_histogram":
            cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 1  # rows in ascending order: np.bincount's order
        return cfg

    def _comp(self, desc: Description, sizes: dict[str, int]) -> Computation:
        comp = self._comps.get(desc.name)
        if comp is None or comp.desc is not desc:
            t0 = time.perf_counter()
            comp = build_within_limits(desc, self.device, self._config(desc, sizes))
            comp.program(False)
            self.build_seconds += time.perf_counter() - t0
            self._comps[desc.name] = comp
        return comp

    def _run(self, desc: Description, sizes: dict[str, int], out: cl_array.Array | None = None,
             **args: object) -> cl_array.Array:
        launch = self._comp(desc, sizes).enqueue(sizes, out=out, queue=self.queue, **args)
        if self.profile:
            self.kernel_seconds[desc.name] = self.kernel_seconds.get(desc.name, 0.0) + launch.kernel_seconds()
        return launch.out

    # ------------------------------------------------------------------------------------------ data
    def load(self, bins: np.ndarray, n_bins: int, n_outputs: int) -> None:
        if bins.dtype != np.uint8 or bins.ndim != 2:
            raise TypeError("bins must be a 2-D uint8 array")
        n_rows, n_feat = bins.shape
        if n_rows >= 2**31 - 1 or n_rows * n_feat >= 2**62:
            raise ValueError("more than 2^31 - 2 rows are not supported")
        if not 2 <= n_bins <= 256:
            raise ValueError(f"n_bins must be within 2..256, got {n_bins}")
        if bins.size and int(bins.max()) >= n_bins:
            raise ValueError(f"bins hold values up to {int(bins.max())}, but n_bins is {n_bins}")
        self.n_rows, self.n_features = int(n_rows), int(n_feat)
        self.n_bins, self.n_outputs = int(n_bins), int(n_outputs)
        host = np.ascontiguousarray(bins.T if self.feature_major else bins)
        rows = max(1, n_rows)
        q = self.queue
        self.bins_orig = cl_array.to_device(q, host)  # row order, for resetting the position order per tree
        self.bins = cl_array.empty(q, host.shape, np.uint8)  # position order: the row at ridx[p] sits at p
        self.grad = cl_array.zeros(q, (n_rows, n_outputs), self.real)  # row order, as the driver gives them
        self.hess = cl_array.zeros(q, (n_rows, n_outputs), self.real)
        gh_dtype = tk.gh_type(self.precision).dtype
        self.gh = cl_array.zeros(q, (rows, n_outputs), gh_dtype)  # position order
        self.ridx = cl_array.empty(q, rows, np.int32)
        self.row_node = cl_array.empty(q, rows, np.int32)
        self._tmp_ridx = cl_array.empty(q, rows, np.int32)
        self._tmp_bins = cl_array.empty(q, max(1, host.size), np.uint8)
        self._tmp_gh = cl_array.empty(q, (rows, n_outputs), gh_dtype)
        p, b, k, f = self.precision, self.n_bins, self.n_outputs, self.n_features
        self.d_hist = tk.histogram(b, p, self.feature_major)
        self.d_gather = tk.gather_gh(p)
        self.d_sub = tk.hist_subtract(p)
        self.d_scan = tk.split_scan(b, p)
        self.d_score = tk.split_score(b, k, p)
        self.d_sums = tk.split_sums(b, k, p)
        self.d_flags = tk.partition_flags(b, self.feature_major)
        self.d_dest = tk.partition_dest(b, self.feature_major)
        # Build everything now, at representative sizes, so build time is reported apart from fit time.
        self._comp(self.d_hist, {"node": 1, "feat": f, "output": k, "pos": rows})
        self._comp(self.d_gather, {"pos": rows, "output": k})
        self._comp(self.d_sub, {"i": 2 * f * k * b})
        self._comp(self.d_scan, {"node": 1, "feat": f, "output": k, "bin": b})
        if b > 2:
            self._comp(self.d_score, {"node": 1, "feat": f, "bin": b - 2, "dir": 2})
            self._comp(self.d_sums, {"node": 1, "output": k})
        self._comp(self.d_flags, {"pos": rows})
        self._comp(self.d_dest, {"pos": rows})
        self._comp(tk.PARTITION_COUNTS, {"slot": 1})
        t0 = time.perf_counter()
        opts = [f"-DTREE_FEATURE_MAJOR={int(self.feature_major)}", f"-DTREE_DOUBLE={int(p == 'double')}"]
        prg = build_program(self.device, tk._snippet("scatter.cl"), opts, "tree_scatter_rows")
        self.build_seconds += time.perf_counter() - t0
        self._scatter = cl.Kernel(prg, "tree_scatter_rows")
        self._copy_back = cl.Kernel(prg, "tree_copy_back")
        self._gh_stale = True
        self.reset_rows()

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        shape = (self.n_rows, self.n_outputs)
        self.grad.set(np.ascontiguousarray(np.asarray(grad, self.real).reshape(shape)), queue=self.queue)
        self.hess.set(np.ascontiguousarray(np.asarray(hess, self.real).reshape(shape)), queue=self.queue)
        self._gh_stale = True

    def reset_rows(self) -> None:
        """Every row into the root, and rows back in their original order (the reference's summation
        order: exact mode depends on it)."""
        self.ridx.set(np.arange(self.ridx.size, dtype=np.int32), queue=self.queue)
        self.row_node.fill(0, queue=self.queue)
        if self.bins.nbytes:
            cl.enqueue_copy(self.queue, self.bins.data, self.bins_orig.data, byte_count=self.bins.nbytes)
        self._gh_stale = True
        self.begin: dict[int, int] = {0: 0}
        self.count: dict[int, int] = {0: self.n_rows}

    def _ensure_gh(self) -> None:
        """(g, h) in position order, gathered once after new gradients or a reset."""
        if self._gh_stale and self.n_rows:
            self._run(self.d_gather, {"pos": self.n_rows, "output": self.n_outputs},
                      out=self.gh[: self.n_rows], ridx=self.ridx[: self.n_rows], grad=opaque(self.grad),
                      hess=opaque(self.hess))
        self._gh_stale = False

    # ------------------------------------------------------------------------------------------ histograms
    def _empty_hist(self, n: int, nodes: np.ndarray) -> DeviceHist:
        gh = tk.gh_type(self.precision).dtype
        shape = (n, self.n_features, self.n_outputs, self.n_bins)
        return DeviceHist(cl_array.zeros(self.queue, shape, gh), np.asarray(nodes, np.int32))

    def histograms(self, nodes: np.ndarray) -> DeviceHist:
        nodes = np.asarray(nodes, np.int32).reshape(-1)
        begin = np.array([self.begin.get(int(n), 0) for n in nodes], np.int32)
        count = np.array([self.count.get(int(n), 0) for n in nodes], np.int32)
        if nodes.size == 0 or count.max() == 0:
            return self._empty_hist(nodes.size, nodes)
        self._ensure_gh()
        f, k, maxc = self.n_features, self.n_outputs, int(count.max())
        sizes = {"node": int(nodes.size), "feat": f, "output": k, "pos": maxc}
        # views with the declared extents; the kernel reads positions of every listed node (see kernels.py)
        bins = _view(self.bins, (f, maxc) if self.feature_major else (maxc, f), np.dtype(np.uint8))
        out = self._run(
            self.d_hist, sizes, bins=bins, gh=_view(self.gh, (maxc, k, 2), self.real),
            slot_begin=cl_array.to_device(self.queue, begin), slot_count=cl_array.to_device(self.queue, count),
            n_rows=self.n_rows,
        )
        return DeviceHist(out, nodes)

    def _flat(self, h: DeviceHist) -> cl_array.Array:
        return _view(h.data, (h.data.size * 2,), self.real)

    def subtract(self, parent: DeviceHist, child: DeviceHist) -> DeviceHist:
        if parent.data.shape != child.data.shape:
            raise ValueError(f"subtract: shapes differ, {parent.data.shape} and {child.data.shape}")
        if parent.n_nodes == 0:
            return self._empty_hist(0, parent.nodes)
        out = self._empty_hist(parent.n_nodes, parent.nodes)
        self._run(self.d_sub, {"i": parent.data.size * 2}, out=self._flat(out),
                  parent=self._flat(parent), child=self._flat(child))
        return out

    def concat(self, hists: list[DeviceHist]) -> DeviceHist:
        n = sum(h.n_nodes for h in hists)
        nodes = np.concatenate([h.nodes for h in hists]) if hists else np.zeros(0, np.int32)
        out = self._empty_hist(n, nodes)
        at = 0
        for h in hists:
            if h.n_nodes:
                cl.enqueue_copy(self.queue, out.data.base_data, h.data.base_data, byte_count=h.data.nbytes,
                                dst_offset=at, src_offset=h.data.offset)
                at += h.data.nbytes
        return out

    def to_host(self, hist: DeviceHist) -> np.ndarray:
        """(n_nodes, n_features, n_bins, n_outputs, 2) float64, the protocol's layout."""
        h = hist.data.get(queue=self.queue)
        arr = np.stack([h["g"], h["h"]], axis=-1).astype(np.float64)  # (N, F, K, B, 2)
        return np.ascontiguousarray(arr.transpose(0, 1, 3, 2, 4))

    # ------------------------------------------------------------------------------------------ splits
    def best_splits(self, hist: DeviceHist, feature_mask: np.ndarray, params: SplitParams) -> Splits:
        n, f, k, b = hist.n_nodes, self.n_features, self.n_outputs, self.n_bins
        out = Splits(
            gain=np.full(n, -np.inf), feature=np.zeros(n, np.int32), bin=np.zeros(n, np.int32),
            default_left=np.zeros(n, bool), left_sum=np.zeros((n, k, 2)), right_sum=np.zeros((n, k, 2)),
        )
        if n == 0 or b <= 2:
            return out
        mask = np.ascontiguousarray(np.asarray(feature_mask, bool).reshape(f), dtype=np.uint8)
        hv = _view(hist.data, (n, f, k, b, 2), self.real)
        scan = self._run(self.d_scan, {"node": n, "feat": f, "output": k, "bin": b}, hist=hv)
        sv = _view(scan, (n, f, k, b, 2), self.real)
        r = self.real.type
        best = self._run(
            self.d_score, {"node": n, "feat": f, "bin": b - 2, "dir": 2}, scan=sv, hist=hv,
            feature_mask=cl_array.to_device(self.queue, mask), reg_lambda=r(params.reg_lambda),
            reg_alpha=r(params.reg_alpha), min_split_gain=r(params.min_split_gain),
            min_child_weight=r(params.min_child_weight),
        )
        stride, _ = tk._best_layout(self.precision)
        sums = self._run(self.d_sums, {"node": n, "output": k}, scan=opaque(scan, self.real),
                         hist=opaque(hist.data, self.real), best=_view(best, (n, stride), np.dtype(np.int32)), n_feat=f)
        best_h, sums_h = best.get(queue=self.queue), sums.get(queue=self.queue)
        n_cand = b - 2
        for i in range(n):
            gain = float(best_h["value"][i])
            if not np.isfinite(gain):
                continue
            idx = int(best_h["index"][i])
            out.gain[i] = gain
            out.feature[i], out.bin[i], out.default_left[i] = idx // (2 * n_cand), (idx // 2) % n_cand, idx % 2 == 0
            out.left_sum[i, :, 0], out.left_sum[i, :, 1] = sums_h["lg"][i], sums_h["lh"][i]
            out.right_sum[i, :, 0], out.right_sum[i, :, 1] = sums_h["rg"][i], sums_h["rh"][i]
        return out

    # ------------------------------------------------------------------------------------------ partition
    def apply_splits(self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     left: np.ndarray, right: np.ndarray) -> None:
        nodes = np.asarray(nodes, np.int64).reshape(-1)
        if nodes.size == 0:
            return
        begin = np.array([self.begin.get(int(n), 0) for n in nodes], np.int64)
        count = np.array([self.count.get(int(n), 0) for n in nodes], np.int64)
        tab = np.stack([nodes, np.asarray(feature).reshape(-1), np.asarray(bin).reshape(-1),
                        np.asarray(default_left, bool).reshape(-1), np.asarray(left).reshape(-1),
                        np.asarray(right).reshape(-1), begin, count], axis=1).astype(np.int32)
        live = count > 0
        if live.any():
            lo = int(begin[live].min())
            hi = int((begin + count)[live].max())
            n_table = int(nodes.max()) + 1
            node_slot = np.full(n_table, -1, np.int32)
            node_slot[nodes] = np.arange(nodes.size, dtype=np.int32)
            d_tab = cl_array.to_device(self.queue, tab)
            common = dict(bins=opaque(self.bins), ridx=opaque(self.ridx), row_node=opaque(self.row_node),
                          node_slot=opaque(cl_array.to_device(self.queue, node_slot)), split_tab=opaque(d_tab),
                          pos0=lo, n_table=n_table, n_rows=self.n_rows, n_feat=self.n_features)
            incl = self._run(self.d_flags, {"pos": hi - lo}, **common)
            dest = self._run(self.d_dest, {"pos": hi - lo}, incl=incl, **common)
            counts = self._run(tk.PARTITION_COUNTS, {"slot": nodes.size}, incl=opaque(incl), split_tab=d_tab, pos0=lo)
            self._ensure_gh()
            n = hi - lo
            wi = 64
            dims = (np.int32(lo), np.int32(n), np.int32(self.n_rows), np.int32(self.n_features),
                    np.int32(self.n_outputs))
            grid = (math.ceil(n / wi) * wi,)
            events = [
                self._scatter(self.queue, grid, (wi,), self.ridx.data, dest.data, self.bins.data, self.gh.data,
                              self.row_node.data, self._tmp_ridx.data, self._tmp_bins.data, self._tmp_gh.data,
                              *dims),
            ]
            if self.feature_major:  # a column per feature: one kernel rather than n_features copies
                events.append(self._copy_back(self.queue, grid, (wi,), self.ridx.data, self.bins.data,
                                              self.gh.data, self._tmp_ridx.data, self._tmp_bins.data,
                                              self._tmp_gh.data, *dims))
            else:  # positions lo .. hi are one contiguous range of every array
                f, gh_row = self.n_features, self.gh.dtype.itemsize * self.n_outputs
                for dst, src, width in ((self.ridx, self._tmp_ridx, 4), (self.bins, self._tmp_bins, f),
                                        (self.gh, self._tmp_gh, gh_row)):
                    events.append(cl.enqueue_copy(self.queue, dst.base_data, src.base_data, byte_count=width * n,
                                                  dst_offset=width * lo, src_offset=0))
            if self.profile:
                cl.wait_for_events(events)
                self.kernel_seconds["tree_scatter_rows"] = (
                    self.kernel_seconds.get("tree_scatter_rows", 0.0)
                    + sum((e.profile.end - e.profile.start) * 1e-9 for e in events))
            n_left = counts.get(queue=self.queue)
        else:
            n_left = np.zeros(nodes.size, np.int32)
        for i, node in enumerate(nodes):
            b0, c0, nl = int(begin[i]), int(count[i]), int(n_left[i])
            self.begin[int(left[i])], self.count[int(left[i])] = b0, nl
            self.begin[int(right[i])], self.count[int(right[i])] = b0 + nl, c0 - nl
            if int(node) not in (int(left[i]), int(right[i])):
                self.count[int(node)] = 0

    def row_nodes(self) -> np.ndarray:
        return self.row_node.get(queue=self.queue)[: self.n_rows].copy()

    def node_rows(self, node: int) -> np.ndarray:
        """Row indices of a node, in ascending order (the stable partition keeps the original order)."""
        b, c = self.begin.get(int(node), 0), self.count.get(int(node), 0)
        return self.ridx[b:b + c].get(queue=self.queue) if c else np.zeros(0, np.int32)
