"""``OpenCLTreeKernels``: the :class:`mdhom.trees.backend.TreeKernels` protocol on an OpenCL device.

Everything row-sized (bins, targets, weights, raw scores, gradients, the row order ``ridx`` grouped by node,
the row -> node map, histograms, eval sets and their scores) stays on the device for the whole fit. A round
uploads the row-subsample mask (if any) and, per split step, one small int table (the split table); it reads
back one packed result per split search (best split, child sums, node totals), plus, queued before it without
a wait, the left-child row counts of the previous partition. The next histogram's row ranges are computed on
the device (from the ``small_left`` hint), so a split step has one blocking sync. A partition visits only the
rows of the nodes it splits (their ranges end to end, ``kernels/trees/partition.cl``).

The host side of a split step is what a loss-guided tree costs (the grower batches leaves, but a 255-leaf tree
still takes a few dozen steps, each a dozen launches): every kernel is built once per fit and *bound* once
(:meth:`mdhom.mdh.Computation.bind`) to buffers allocated in ``load`` at their largest size (the root's rows;
node-sized buffers grow by doubling and are re-bound, which happens a few times per fit at most). A launch then
sets only the scalars that changed; no pyopencl array object is made per step, and small tables go up by non-
blocking copies into pre-allocated buffers. Histograms live in one arena buffer per tree, addressed by node slot
(a :class:`DeviceHist` is a slot range); kernels write node-sized scratch outputs, which one device copy puts
into the arena. Configurations come from ``mdhom.configs.lookup`` where a tuned one exists, else from a
heuristic per device type; ``config_sources`` records which.

Exact mode (``exact=True``, the default in double precision) makes the results bit-identical to the numpy
reference, not merely close: the histogram folds each (node, feature, output) over its rows sequentially,
and rows stay in ascending order inside a node (the partition is stable), which is the order in which
``np.bincount`` adds them; the split scan folds bins in ``np.cumsum``'s order; the gain is computed with the
reference's operations in its order (no FMA); the argmax is order-independent. Identical sums matter beyond
rounding: after histogram subtraction an empty bin is "parent - child", which is 0 or a few ulps depending
on the order of summation, and that decides ties between thresholds. The cost is parallelism: one work-item
per (node, feature, output) along the rows, plenty on CPUs, too little on GPUs.

Quantized mode (``precision="quantized"``) gets the same bit-identity with full parallelism: gradients and
scores stay double (bit-identical to numpy, as above), and per round (g, h) become int32 fixed point with a
power-of-two scale per (output, g|h) (one MAX reduction and one small read-back per round; see
:mod:`mdhom.trees.reference`). Integer histograms, scans and differences are exact in any order, so every
configuration (rows folded by many work-items, partials in local memory with atomics) gives the reference's
sums; reals appear only in the split search, converted the reference's way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.devices import Device, get_device
from mdhom.mdh import Computation, Description, build_program, build_within_limits
from mdhom.trees import kernels as tk
from mdhom.trees import reference as ref
from mdhom.trees.backend import SplitParams, Splits


def opaque(arr: cl_array.Array, dtype: np.dtype | None = None) -> cl_array.Array:
    """A one-element view of a whole device buffer (for checked launches of lookup inputs in tests)."""
    return cl_array.Array(arr.queue, (1,), arr.dtype if dtype is None else dtype, data=arr.base_data,
                          offset=arr.offset)


def _view(arr: cl_array.Array, shape: tuple[int, ...], dtype: np.dtype) -> cl_array.Array:
    return cl_array.Array(arr.queue, shape, dtype, data=arr.base_data, offset=arr.offset)


def _buffer_of(x: cl_array.Array | cl.Buffer) -> cl.Buffer:
    return x.base_data if isinstance(x, cl_array.Array) else x


@dataclass
class DeviceHist:
    """A handle to histograms on the device: ``n_nodes`` consecutive node slots of the tree's arena, each
    (feat, output, bin) (g, h) pairs. Valid until the next tree starts (``reset_rows``); ``gen`` checks it."""

    slot: int
    n_nodes: int
    nodes: np.ndarray
    gen: int


def _pow2_at_most(n: int, cap: int) -> int:
    v = 1
    while v * 2 <= min(max(1, n), cap):
        v *= 2
    return v


class _Bound:
    """One md_hom kernel bound to the fit's buffers: a :class:`~mdhom.mdh.computation.BoundLaunch` (a few
    microseconds of host time per call, at any size: launches past 32-bit indices run the 64-bit build)."""

    def __init__(self, comp: Computation, queue: cl.CommandQueue, out: cl.Buffer, **buffers: cl.Buffer) -> None:
        self.comp = comp
        self.bound = comp.bind(out, queue, **buffers)

    def __call__(self, sizes: dict[str, int], **params: object) -> list[cl.Event]:
        return self.bound(sizes, **params)


class _Staging:
    """Reused host arrays for non-blocking uploads: one per purpose, free again after the next sync (every
    copy enqueued before a blocking wait on the in-order queue has completed by then)."""

    def __init__(self) -> None:
        self._free: dict[str, np.ndarray] = {}
        self.busy: list[np.ndarray] = []

    def take(self, key: str, n: int, dtype: np.dtype) -> np.ndarray:
        arr = self._free.pop(key, None)
        if arr is None or arr.size < n or arr.dtype != dtype:
            arr = np.empty(max(n, 2 * (arr.size if arr is not None and arr.dtype == dtype else 0), 16), dtype)
        self.busy.append((key, arr))
        return arr[:n]

    def release(self) -> None:
        for key, arr in self.busy:
            self._free[key] = arr
        self.busy.clear()



# The node count the level-wide histogram and the batch split search are configured for (depthwise levels
# and loss-guided batches hold 2 .. ~2^depth nodes); split searches of up to FEW_NODES nodes (one or two
# splits' children) run the build configured for one node.
LEVEL_NODES = 64
FEW_NODES = 4


def heuristic_config(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The configuration a tree kernel runs when nothing is tuned; also the tuner's baseline for it."""
    cfg = desc.default_config(dev, sizes)
    gpu = dev.type == "gpu"
    cu = max(1, dev.compute_units)
    name = desc.name
    if name == "tree_histogram":
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        cfg["NUM_WG_feat"] = sizes["feat"]
        cfg["NUM_WG_node"] = _pow2_at_most(sizes["node"], 4 if gpu else 2)
        if gpu:
            cfg["NUM_WI_pos"] = 16
            cfg["NUM_WG_pos"] = 16
        else:
            cfg["NUM_WG_pos"] = _pow2_at_most(2 * cu, 64)
    elif name == "tree_histogram_q":
        # one work-group per (feature, row chunk); with PARTIALS_LOCAL (the description's default where
        # 64-bit local atomics exist on a GPU) its work-items scatter into one local histogram
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        cfg["NUM_WG_feat"] = sizes["feat"]
        cfg["NUM_WG_node"] = _pow2_at_most(sizes["node"], 4 if gpu else 1)
        if gpu and cfg.get("PARTIALS_LOCAL"):  # an untested guess until the GPU run tunes it
            cfg["NUM_WI_pos"] = 256
            cfg["NUM_WG_pos"] = 16
        elif gpu:
            cfg["NUM_WI_pos"] = 16
            cfg["NUM_WG_pos"] = 16
        else:
            # CPUs: (node, feature) work-groups are parallelism enough; rows folded in one lane per group
            # (PoCL, 200k x 28, 255 leaves: 24 ms per round vs 40 ms with rows over 4 groups and a combine)
            cfg["NUM_WG_pos"] = _pow2_at_most(max(1, 2 * cu // max(1, sizes["feat"])), 64)
    elif name == "tree_split_scan":
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        cfg["NUM_WI_feat"] = _pow2_at_most(sizes["feat"], 64 if gpu else 8)
        cfg["NUM_WG_node"] = 64 if gpu else 2 * cu  # built at node=1, launched for whole batches
    elif name == "tree_split_score":
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        cfg["NUM_WI_bin"] = _pow2_at_most(sizes["bin"], 64 if gpu else 16)
        cfg["NUM_WI_dir"] = 2
        cfg["NUM_WG_node"] = 256 if gpu else 2 * cu  # built at node=1, launched for whole batches
    elif name == "tree_partition_flags":
        cfg["NUM_WI_pos"] = 256 if gpu else 64
        cfg["NUM_WG_pos"] = 64 if gpu else 2 * cu
    elif name in ("tree_partition_dest", "tree_hist_subtract"):
        dim = desc.dim_names[0]
        cfg[f"NUM_WI_{dim}"] = 256 if gpu else 64
        cfg[f"NUM_WG_{dim}"] = 4 * cu * (16 if gpu else 1)
    elif name in ("tree_hist_siblings", "tree_score_update", "tree_relabel", "tree_predict_bins", "tree_gather_gh",
                  "tree_quantize_gh") or name.startswith("tree_gradients_"):
        # element-wise: the row / cell dimension carries the parallelism, outputs stay in a work-item
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        dim = "cell" if "cell" in desc.dim_names else desc.dim_names[0]
        cfg[f"NUM_WI_{dim}"] = 256 if gpu else 64
        cfg[f"NUM_WG_{dim}"] = 4 * cu * (16 if gpu else 1)
    elif name == "tree_gh_absmax":
        for d in desc.dim_names:
            cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
        cfg["NUM_WI_pos"] = 256 if gpu else 64
        cfg["NUM_WG_pos"] = 4 * cu * (4 if gpu else 1)
    return cfg


class OpenCLTreeKernels:
    """The md_hom tree kernels on one OpenCL device (see the module docstring).

    ``precision="double"`` reproduces the numpy reference (same splits, sums within rounding of the row
    order); ``"single"`` keeps gradients and histograms in float32; ``"quantized"`` computes gradients in
    double and histograms in int32 fixed point (bit-identical to ``NumpyTreeKernels("quantized")`` under any
    configuration; :meth:`to_host` then returns the int64 sums). ``feature_major`` stores bins as
    features x rows (coalesced reads on GPUs) instead of rows x features (one cache line per row on
    CPUs); ``None`` picks by device type. ``configs`` overrides the configuration of named kernels.
    ``exact`` (default: True in double precision) pins the summation order to the reference's (see the
    module docstring); without it tuned configurations may fold rows in parallel, correct to rounding.
    After ``load``, ``config_sources`` maps each kernel to where its configuration came from
    (``mdhom.configs.lookup``'s source, "override" or "heuristic") and ``kernel_configs()`` adds the values.

    Usage (``bins`` uint8 (n_rows, n_features), ``g``/``h`` (n_rows,), ``params`` a SplitParams)::

        kern = OpenCLTreeKernels("cpu")
        kern.load(bins, n_bins=64, n_outputs=1)
        kern.set_gradients(g, h)
        kern.reset_rows()
        splits = kern.best_splits(kern.histograms(np.array([0])), np.ones(bins.shape[1], bool), params)
    """

    # loss-guided trees search the splits of several leaves per step (mdhom.trees.grower): a split step costs a
    # device round trip and a dozen launches, while one more node in a launch costs little
    batch_lossguide = True

    def __init__(self, device: str | Device | None = None, precision: str = "double",
                 feature_major: bool | None = None, configs: dict[str, dict[str, int]] | None = None,
                 exact: bool | None = None) -> None:
        self.device = get_device(device)
        self.quantized = tk.is_quantized(precision)
        self.precision = precision
        self.rp = "single" if precision == "single" else "double"  # the precision of the real-valued kernels
        self.real = np.dtype(tk.REALS[precision])
        self.hist_elem = np.dtype(np.int32) if self.quantized else self.real  # one lane of a histogram cell
        self.feature_major = (self.device.type == "gpu") if feature_major is None else bool(feature_major)
        self.overrides = dict(configs or {})
        # quantized sums are exact in any order: nothing to pin
        self.exact = (precision == "double") if exact is None else bool(exact)
        self.inv_scale: np.ndarray | None = None  # (n_outputs, 2) 2^-k of this round, quantized only
        self.queue = self.device.queue
        self.build_seconds = 0.0
        self.kernel_seconds: dict[str, float] = {}
        self.config_sources: dict[str, str] = {}
        self.profile = False
        self.syncs = 0  # blocking waits for the device (reads back included): what a GPU pays most for
        self.launches = 0
        self._comps: dict[str, Computation] = {}
        self._events: list[tuple[str, list[cl.Event]]] = []
        self._alive: list[object] = []  # host arrays of uploads in flight
        self._staging = _Staging()

    def _heuristic(self, desc: Description, sizes: dict[str, int]) -> dict[str, int]:
        return heuristic_config(desc, self.device, sizes)

    def _config(self, desc: Description, sizes: dict[str, int]) -> tuple[dict[str, int], str]:
        cfg, source = self.overrides.get(desc.name), "override"
        if cfg is None:
            try:
                from mdhom.configs import lookup
                cfg, source = lookup(self.device, desc.name, sizes, desc)
            except ImportError:  # the tuned-config store is optional for this backend
                cfg, source = None, "heuristic"
        if cfg is None:
            cfg = self._heuristic(desc, sizes)
            source = "heuristic" if source == "heuristic" else f"heuristic ({source})"
        cfg = dict(cfg)
        pin = {}
        if self.exact and desc.name == "tree_split_scan":
            pin = {"NUM_WI_bin": 1, "NUM_WG_bin": 1}  # sequential prefix: np.cumsum's order
        if self.exact and desc.name == "tree_histogram":
            pin = {"NUM_WI_pos": 1, "NUM_WG_pos": 1}  # rows in ascending order: np.bincount's order
        if any(cfg.get(k) != v for k, v in pin.items()):
            source += "; exact order pinned"
        cfg.update(pin)
        return cfg, source

    def _comp(self, desc: Description, sizes: dict[str, int], role: str = "") -> Computation:
        """Build ``desc`` once per fit with the configuration for ``sizes``; ``role`` keeps a second build of
        the same kernel for another launch regime (the histogram of one node vs. of a whole level)."""
        key = f"{desc.name} ({role})" if role else desc.name
        comp = self._comps.get(key)
        if comp is None or comp.desc is not desc:
            t0 = time.perf_counter()
            cfg, source = self._config(desc, sizes)
            comp = build_within_limits(desc, self.device, cfg)
            comp.program(False)
            self.build_seconds += time.perf_counter() - t0
            self._comps[key] = comp
            self.config_sources[key] = source
        return comp

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        """Each built kernel's configuration and where it came from (tuned file, defaults, heuristic)."""
        return {name: {"config": dict(comp.config), "source": self.config_sources.get(name, "")}
                for name, comp in self._comps.items()}

    def _buf(self, nbytes: int) -> cl.Buffer:
        return cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, max(16, int(nbytes)))

    def _put(self, key: str, dst: cl.Buffer, values: np.ndarray, dtype: np.dtype, offset: int = 0) -> None:
        """A small table into a pre-allocated buffer without waiting, from a reused host array."""
        values = np.asarray(values).reshape(-1)
        if values.size == 0:
            return
        host = self._staging.take(key, values.size, np.dtype(dtype))
        host[...] = values
        cl.enqueue_copy(self.queue, dst, host, dst_offset=offset, is_blocking=False)

    def _record(self, name: str, events: list[cl.Event]) -> None:
        self.launches += len(events)
        if self.profile:
            self._events.append((name, events))

    def _synced(self) -> None:
        """After a blocking wait: free the upload arrays and add up the profiled kernel times."""
        self.syncs += 1
        self._alive.clear()
        self._staging.release()
        for name, events in self._events:
            t = sum((e.profile.end - e.profile.start) * 1e-9 for e in events)
            self.kernel_seconds[name] = self.kernel_seconds.get(name, 0.0) + t
        self._events.clear()

    def _read(self, host: np.ndarray, buf: cl.Buffer, offset: int = 0) -> np.ndarray:
        """A blocking read (the sync of a step)."""
        if host.nbytes:
            cl.enqueue_copy(self.queue, host, buf, src_offset=offset, is_blocking=True)
        else:
            self.queue.finish()
        self._synced()
        return host

    def sync(self) -> None:
        self.queue.finish()
        self._synced()

    # ------------------------------------------------------------------------------------------ data
    def load(self, bins: np.ndarray | cl_array.Array, n_bins: int, n_outputs: int) -> None:
        """Take the binned training matrix: numpy uint8 (n_rows, n_features), or a device array already in
        this backend's layout (``feature_major``: (n_features, n_rows), else (n_rows, n_features); e.g.
        :class:`mdhom.trees.bin_kernel.DeviceBinner` output), which is used without a trip to the host: its
        buffer is taken over (not copied) and its values are trusted to lie below ``n_bins``."""
        on_device = isinstance(bins, cl_array.Array)
        if bins.dtype != np.uint8 or len(bins.shape) != 2:
            raise TypeError("bins must be a 2-D uint8 array")
        n_rows, n_feat = (bins.shape[::-1] if on_device and self.feature_major else bins.shape)
        if n_rows >= 2**31 - 1 or n_rows * n_feat >= 2**62:
            raise ValueError("more than 2^31 - 2 rows are not supported")
        if not 2 <= n_bins <= 256:
            raise ValueError(f"n_bins must be within 2..256, got {n_bins}")
        if not on_device and bins.size and int(bins.max()) >= n_bins:
            raise ValueError(f"bins hold values up to {int(bins.max())}, but n_bins is {n_bins}")
        self.n_rows, self.n_features = int(n_rows), int(n_feat)
        self.n_bins, self.n_outputs = int(n_bins), int(n_outputs)
        rows = max(1, n_rows)
        q = self.queue
        n_cells = max(1, n_rows * n_feat)
        if on_device and bins.offset == 0 and bins.flags.c_contiguous:  # taken over: no copy
            self.bins_orig = bins.base_data  # row order, for resetting the position order per tree
        elif on_device:
            self.bins_orig = self._buf(n_cells)
            if bins.nbytes:
                cl.enqueue_copy(q, self.bins_orig, bins.base_data, byte_count=bins.nbytes, src_offset=bins.offset)
        else:
            host = np.ascontiguousarray(bins.T if self.feature_major else bins)
            self.bins_orig = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                       hostbuf=host) if host.size else self._buf(1)
        self.bins = self._buf(n_cells)  # position order: the row at ridx[p] sits at p
        self.grad = cl_array.zeros(q, (rows, n_outputs), self.real)  # row order, as set_gradients gives them
        self.hess = cl_array.zeros(q, (rows, n_outputs), self.real)
        gh_dtype = tk.hist_gh_type(self.precision).dtype
        self.gh = cl_array.zeros(q, (rows, n_outputs), gh_dtype)  # position order (int32 pairs when quantized)
        if self.quantized:  # the round's real (g, h) before quantisation, in position order
            self.gh_real = cl_array.zeros(q, (rows, n_outputs), tk.gh_type("double").dtype)
        self.ridx_orig = cl_array.to_device(q, np.arange(rows, dtype=np.int32))
        self.ridx = cl_array.empty(q, rows, np.int32)
        self.row_node = cl_array.empty(q, rows, np.int32)
        self._tmp_ridx = cl_array.empty(q, rows, np.int32)
        self._tmp_bins = self._buf(n_cells)
        self._tmp_gh = cl_array.empty(q, (rows, n_outputs), gh_dtype)
        self._incl = self._buf(4 * rows)  # partition: inclusive go-left counts and destinations, root-sized
        self._dest = self._buf(tk.DEST.dtype.itemsize * rows)
        self._keep = self._buf(rows)
        self._one = np.ones(1, np.uint8)
        self._mask_key: bytes | None = None
        self._mask_buf = self._buf(max(1, n_feat))
        self._inv = self._buf(16 * n_outputs)  # 2^-k per (output, g|h), quantized
        self._scale = self._buf(16 * n_outputs)
        self._absmax = self._buf(16 * n_outputs)
        self._root_host = np.array([0, n_rows], np.int32)
        self._node_bytes = n_feat * n_outputs * n_bins * gh_dtype.itemsize
        self._cell = self._node_bytes // self.hist_elem.itemsize  # histogram lanes per node
        p, rp, b, k, f = self.precision, self.rp, self.n_bins, self.n_outputs, self.n_features
        self.d_hist = tk.histogram(b, p, self.feature_major)
        self.d_gather = tk.gather_gh(rp)
        self.d_sub = tk.hist_subtract(p)
        self.d_sib = tk.hist_siblings(p)
        self.d_scan = tk.split_scan(b, p)
        self.d_score = tk.split_score(b, k, p)
        self.d_sums = tk.split_sums(b, k, p)
        self.d_flags = tk.partition_flags(b, self.feature_major)
        self.d_dest = tk.partition_dest(b, self.feature_major)
        self.d_update = tk.score_update(rp)
        self.d_predict = tk.predict_bins(b, rp, self.feature_major)
        self.d_relabel = tk.relabel()
        # Build everything now, at representative sizes, so build time is reported apart from fit time.
        self._comp(self.d_hist, {"node": 1, "feat": f, "output": k, "pos": rows})
        # a depthwise level builds many nodes in one launch: a configuration that spreads nodes over
        # work-groups (one tuned for a single node walks them one after another in each group)
        self._comp(self.d_hist, {"node": LEVEL_NODES, "feat": f, "output": k, "pos": max(1, rows // LEVEL_NODES)},
                   role="levels")
        self._comp(self.d_gather, {"pos": rows, "output": k})
        self._comp(self.d_sub, {"i": 2 * f * k * b})
        self._comp(self.d_sib, {"side": 2, "node": 1, "cell": 2 * f * k * b})
        # the split search runs for one split's two children and for whole batches: a build for each regime
        self._comp(self.d_scan, {"node": 1, "feat": f, "output": k, "bin": b})
        self._comp(self.d_scan, {"node": LEVEL_NODES, "feat": f, "output": k, "bin": b}, role="levels")
        if b > 2:
            self._comp(self.d_score, {"node": 1, "feat": f, "bin": b - 2, "dir": 2})
            self._comp(self.d_score, {"node": LEVEL_NODES, "feat": f, "bin": b - 2, "dir": 2}, role="levels")
            self._comp(self.d_sums, {"node": 1, "output": k})
        self._comp(self.d_flags, {"pos": rows})
        self._comp(self.d_dest, {"pos": rows})
        self._comp(self.d_update, {"row": rows, "output": k})
        self._comp(self.d_relabel, {"row": rows})
        if self.quantized:
            self.d_absmax, self.d_quant = tk.gh_absmax(), tk.quantize_gh()
            self._comp(self.d_absmax, {"pos": rows, "output": k})
            self._comp(self.d_quant, {"pos": rows, "output": k})
        t0 = time.perf_counter()
        opts = [f"-DTREE_FEATURE_MAJOR={int(self.feature_major)}", f"-DTREE_BINS={b}",
                f"-DTREE_GH_WIDE={int(self.gh.dtype.itemsize == 16)}", f"-DTREE_SPLIT_FIELDS={tk.SPLIT_FIELDS}"]
        source = tk._snippet("partition.cl") + tk._snippet("scatter.cl")
        prg = build_program(self.device, source, opts, "tree_scatter_rows")
        self.build_seconds += time.perf_counter() - t0
        self._scatter = cl.Kernel(prg, "tree_scatter_rows")
        self._copy_back = cl.Kernel(prg, "tree_copy_back")
        # node-sized buffers (grown by doubling, then re-bound) and the histogram arena of the tree
        self._cap_nodes = 0
        self._cap_tab = 0
        self._cap_arena = 0
        self._arena_top = 0
        self._gen = 0
        self._small_holds: tuple[int, int, int] | None = None  # (gen, slot, n): what _h_small mirrors
        self._work_holds: tuple[int, int, int] | None = None
        self._grow_nodes(16)
        self._grow_tab(16 * tk.SPLIT_FIELDS + 64)
        self._grow_arena(64)
        self._bind_tree()
        self._gh_stale = True
        self._rows_dirty = True
        self._objective = False
        self._evals: list[dict[str, object]] = []
        self._cap_value = 0
        self._pending = None
        self.reset_rows()

    # ------------------------------------------------------------------------------------------ buffers
    def _grow_nodes(self, n: int) -> None:
        """Scratch outputs and small tables for ``n`` nodes per call (histograms), 2n per split search."""
        cap = max(int(n), 2 * self._cap_nodes)
        nb, k = self._node_bytes, self.n_outputs
        self._h_small = self._buf(cap * nb)
        self._h_work = self._buf(2 * cap * nb)
        self._scan = self._buf(2 * cap * nb)
        self._best = self._buf(2 * cap * tk.split_type(self.precision).dtype.itemsize)
        self._res = self._buf(2 * cap * k * tk.result_type(self.precision).dtype.itemsize)
        self._slot_begin, self._slot_count = self._buf(4 * cap), self._buf(4 * cap)
        self._n_left, self._pidx = self._buf(4 * cap), self._buf(4 * cap)
        self._cap_nodes = cap
        self._small_holds = self._work_holds = None

    def _grow_tab(self, n: int) -> None:
        self._cap_tab = max(int(n), 2 * self._cap_tab)
        self._tab = self._buf(4 * self._cap_tab)

    def _grow_arena(self, n: int) -> None:
        cap = max(int(n), 2 * self._cap_arena)
        arena = self._buf(cap * self._node_bytes)
        if self._cap_arena and self._arena_top:
            cl.enqueue_copy(self.queue, arena, self._arena, byte_count=self._arena_top * self._node_bytes)
        self._arena, self._cap_arena = arena, cap

    def _bind_tree(self) -> None:
        """Bind the split step's kernels to the current buffers (after load and after any buffer grew)."""
        q, comps = self.queue, self._comps
        hist_buffers = dict(bins=self.bins, gh=self.gh.base_data, slot_begin=self._slot_begin,
                            slot_count=self._slot_count)
        self.k_hist = _Bound(comps[self.d_hist.name], q, self._h_small, **hist_buffers)
        self.k_hist_levels = _Bound(comps[f"{self.d_hist.name} (levels)"], q, self._h_small, **hist_buffers)
        self.k_sib = _Bound(comps["tree_hist_siblings"], q, self._h_work, child=self._h_small, parent=self._arena,
                            pidx=self._pidx)
        self.k_scan = _Bound(comps["tree_split_scan"], q, self._scan, hist=self._h_work)
        self.k_scan_levels = _Bound(comps["tree_split_scan (levels)"], q, self._scan, hist=self._h_work)
        inv = {"inv_scale": self._inv} if self.quantized else {}
        if "tree_split_score" in comps:
            score = dict(scan=self._scan, hist=self._h_work, feature_mask=self._mask_buf, **inv)
            self.k_score = _Bound(comps["tree_split_score"], q, self._best, **score)
            self.k_score_levels = _Bound(comps["tree_split_score (levels)"], q, self._best, **score)
            self.k_sums = _Bound(comps["tree_split_sums"], q, self._res, scan=self._scan, hist=self._h_work,
                                 best=self._best, best_value=self._best, **inv)
        self.k_flags = _Bound(comps["tree_partition_flags"], q, self._incl, bins=self.bins, split_tab=self._tab)
        self.k_dest = _Bound(comps["tree_partition_dest"], q, self._dest, incl=self._incl, split_tab=self._tab)
        self.k_relabel = _Bound(comps["tree_relabel"], q, self._tmp_ridx.base_data, row_node=self.row_node.base_data,
                                node_map=self._tab)
        target = (self.gh_real if self.quantized else self.gh).base_data
        self.k_gather = _Bound(comps["tree_gather_gh"], q, target, ridx=self.ridx.base_data,
                               grad=self.grad.base_data, hess=self.hess.base_data)
        if self.quantized:
            self.k_absmax = _Bound(comps["tree_gh_absmax"], q, self._absmax, gh=self.gh_real.base_data)
            self.k_quant = _Bound(comps["tree_quantize_gh"], q, self.gh.base_data, gh=self.gh_real.base_data,
                                  scale=self._scale)
        i32 = np.int32
        sc = self._scatter
        for i, a in enumerate((self.ridx.base_data, self._dest, self.bins, self.gh.base_data,
                               self.row_node.base_data, self._tmp_ridx.base_data, self._tmp_bins,
                               self._tmp_gh.base_data)):
            sc.set_arg(i, a)
        for i, v in ((9, self.n_rows), (10, self.n_features), (11, self.n_outputs)):
            sc.set_arg(i, i32(v))
        for i, a in ((12, self._tab), (13, self._incl), (15, self._n_left), (16, self._slot_begin),
                     (17, self._slot_count)):
            sc.set_arg(i, a)
        cb = self._copy_back
        for i, a in enumerate((self.ridx.base_data, self.bins, self.gh.base_data, self._tmp_ridx.base_data,
                               self._tmp_bins, self._tmp_gh.base_data)):
            cb.set_arg(i, a)
        for i, v in ((7, self.n_rows), (8, self.n_features), (9, self.n_outputs)):
            cb.set_arg(i, i32(v))
        cb.set_arg(10, self._tab)

    def _arena_alloc(self, n: int) -> int:
        slot = self._arena_top
        if slot + n > self._cap_arena:
            self._grow_arena(slot + n)
            self._bind_tree()
        self._arena_top = slot + n
        return slot

    def _need_nodes(self, n: int) -> None:
        if n > self._cap_nodes:
            self._grow_nodes(n)
            self._bind_tree()

    def _check(self, hist: DeviceHist) -> None:
        if hist.gen != self._gen:
            raise ValueError("a histogram handle of an earlier tree (handles live until reset_rows)")

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        shape = (self.n_rows, self.n_outputs)
        if self.n_rows:
            self.grad[: self.n_rows].set(np.ascontiguousarray(np.asarray(grad, self.real).reshape(shape)),
                                         queue=self.queue)
            self.hess[: self.n_rows].set(np.ascontiguousarray(np.asarray(hess, self.real).reshape(shape)),
                                         queue=self.queue)
        self._gh_stale = True
        self._rows_dirty = True  # gh is refilled from grad/hess in the root's order

    # ------------------------------------------------------------------------------------------ a round
    def set_objective(self, loss: object, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:
        kind = getattr(loss, "kind", "")
        q, n, k = self.queue, self.n_rows, self.n_outputs
        self.d_grad = tk.gradients(kind, self.rp)
        ycols = 1 if kind == "softmax" else k
        y = np.asarray(y, np.float64).reshape(n, -1)[:, :ycols]
        self._y = cl_array.to_device(q, np.ascontiguousarray(y, self.real).reshape(max(1, n), ycols))
        self._w = cl_array.to_device(q, np.ascontiguousarray(np.asarray(w, np.float64).reshape(n), self.real))
        self._factor = self.real.type(k / (k - 1.0) if kind == "softmax" else 1.0)
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(self.real)
        # raw scores ping-pong between two buffers: the update reads one and writes the other
        self._score_bufs = (cl_array.to_device(q, base).base_data, self._buf(base.nbytes))
        self._cur = 0
        self._comp(self.d_grad, {"row": max(1, n), "output": k})
        self._objective = True
        if not self._cap_value:
            self._grow_value(64)
        self._bind_values()

    def _grow_value(self, n: int) -> None:
        """The per-tree tables (leaf values, the tree table of the eval update) for ``n`` nodes."""
        self._cap_value = max(int(n), 2 * self._cap_value)
        self._value = self._buf(self._cap_value * self.n_outputs * self.real.itemsize)
        self._tree_tab = self._buf(self._cap_value * tk.TREE_FIELDS * 4)
        self._bind_values()

    def _bind_values(self) -> None:
        """Bind the round's kernels (gradients, score and eval updates) to the current buffers."""
        for ev in self._evals:
            self._bind_eval(ev)
        if not self._objective:
            return
        q, comps = self.queue, self._comps
        target = (self.gh_real if self.quantized else self.gh).base_data
        a, b = self._score_bufs
        grad = comps[self.d_grad.name]
        self.k_grad = [_Bound(grad, q, target, scores=s, y=self._y.base_data, w=self._w.base_data, keep=self._keep)
                       for s in (a, b)]
        upd = comps["tree_score_update"]
        self.k_update = [_Bound(upd, q, o, scores=s, row_node=self.row_node.base_data, value=self._value)
                         for s, o in ((a, b), (b, a))]

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        if not self._objective:
            raise RuntimeError("compute_gradients needs set_objective first")
        self.reset_rows()  # position order = row order, so gradients land in position order directly
        if self.n_rows:
            if keep is None:  # the kernel reads keep[0] (non-zero) when use_keep is 0
                cl.enqueue_copy(self.queue, self._keep, self._one, is_blocking=False)
            else:
                self._put("keep", self._keep, np.asarray(keep, bool).reshape(-1), np.uint8)
            self._record(self.d_grad.name, self.k_grad[self._cur](
                {"row": self.n_rows, "output": self.n_outputs}, use_keep=int(keep is not None), factor=self._factor))
            if self.quantized:
                self._quantize()
        self._gh_stale = False

    def update_scores(self, value: np.ndarray) -> None:
        if self.n_rows:
            value = np.asarray(value, np.float64).reshape(-1, self.n_outputs)
            if value.shape[0] > self._cap_value:
                self._grow_value(value.shape[0])
            self._put("value", self._value, value, self.real)
            self._record("tree_score_update", self.k_update[self._cur]({"row": self.n_rows, "output": self.n_outputs}))
            self._cur = 1 - self._cur

    def scores(self) -> np.ndarray:
        out = np.empty((max(1, self.n_rows), self.n_outputs), self.real)
        self._read(out, self._score_bufs[self._cur])
        return out[: self.n_rows].astype(np.float64)

    def add_eval(self, bins: np.ndarray | cl_array.Array, base_score: np.ndarray) -> int:
        """Keep an evaluation matrix: numpy uint8 (n_rows, n_features), or a device array in the training
        layout (as for :meth:`load`)."""
        on_device = isinstance(bins, cl_array.Array)
        shape = bins.shape[::-1] if on_device and self.feature_major else bins.shape
        if bins.dtype != np.uint8 or len(shape) != 2 or shape[1] != self.n_features:
            raise ValueError("eval bins must be uint8 (n_rows, n_features) like the training bins")
        n, k = int(shape[0]), self.n_outputs
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(self.real)
        self._comp(self.d_predict, {"row": max(1, n), "output": k})
        q = self.queue
        if on_device:
            d_bins = self._buf(bins.nbytes)
            if bins.nbytes:
                cl.enqueue_copy(q, d_bins, bins.base_data, byte_count=bins.nbytes, src_offset=bins.offset)
        else:
            host = np.ascontiguousarray(bins.T if self.feature_major else bins)
            d_bins = cl_array.to_device(q, host if host.size else np.zeros(1, np.uint8)).base_data
        ev = {"n": n, "bins": d_bins, "bufs": (cl_array.to_device(q, base).base_data, self._buf(base.nbytes)), "cur": 0}
        self._evals.append(ev)
        if not self._cap_value:
            self._grow_value(64)
        else:
            self._bind_eval(ev)
        return len(self._evals) - 1

    def _bind_eval(self, ev: dict) -> None:
        comp = self._comps["tree_predict_bins"]
        a, b = ev["bufs"]
        ev["k"] = [_Bound(comp, self.queue, o, scores=s, bins=ev["bins"], tree=self._tree_tab, value=self._value)
                   for s, o in ((a, b), (b, a))]

    def update_eval(self, handle: int, tree: object) -> np.ndarray:
        ev = self._evals[handle]
        n = int(ev["n"])
        if n:
            table = tk.tree_table(tree)
            if table.shape[0] > self._cap_value:
                self._grow_value(table.shape[0])
            self._put("tree", self._tree_tab, table, np.int32)
            self._put("tree_value", self._value, np.asarray(tree.value, np.float64), self.real)
            self._record("tree_predict_bins", ev["k"][ev["cur"]]({"row": n, "output": self.n_outputs},
                                                                 n_feat=self.n_features))
            ev["cur"] = 1 - ev["cur"]
        out = np.empty((max(1, n), self.n_outputs), self.real)
        return self._read(out, ev["bufs"][ev["cur"]])[:n]

    # ------------------------------------------------------------------------------------------ rows
    def reset_rows(self) -> None:
        """Every row into the root, and rows back in their original order (the reference's summation
        order: exact mode depends on it). Device copies only; nothing when no split moved a row since.
        Starts a new histogram arena: handles of the previous tree become invalid."""
        self._resolve()
        self._prepared = None
        self.begin: dict[int, int] = {0: 0}
        self.count: dict[int, int] = {0: self.n_rows}
        self._gen += 1
        self._arena_top = 0
        self._small_holds = self._work_holds = None
        if not self._rows_dirty:
            return
        q = self.queue
        events = [cl.enqueue_copy(q, self.ridx.base_data, self.ridx_orig.base_data, byte_count=self.ridx.nbytes),
                  cl.enqueue_fill_buffer(q, self.row_node.base_data, np.zeros(1, np.int32), 0, self.row_node.nbytes)]
        if self.n_rows and self.n_features:
            events.append(cl.enqueue_copy(q, self.bins, self.bins_orig, byte_count=self.n_rows * self.n_features))
        self._record("tree_reset_rows", events)
        self._gh_stale = True
        self._rows_dirty = False

    def _ensure_gh(self) -> None:
        """(g, h) in position order, gathered once after set_gradients (and quantised, when quantized)."""
        if self._gh_stale and self.n_rows:
            self._record("tree_gather_gh", self.k_gather({"pos": self.n_rows, "output": self.n_outputs}))
            if self.quantized:
                self._quantize()
        self._gh_stale = False

    def _quantize(self) -> None:
        """gh_real -> gh as int32 fixed point: max |g|, |h| per output on the device (one small blocking
        read), the exponents on the host (:func:`mdhom.trees.reference.quantization_exponents`, the same
        function the numpy reference uses), then rint(x * 2^k) on the device."""
        n, k = self.n_rows, self.n_outputs
        self._record("tree_gh_absmax", self.k_absmax({"pos": n, "output": k}))
        host = self._read(np.empty(k, tk.gh_type("double").dtype), self._absmax)
        am = np.stack([host["g"], host["h"]], axis=-1).reshape(k, 2)
        scale, self.inv_scale = ref.quantization_scales(ref.quantization_exponents(am, n))
        self._put("inv", self._inv, self.inv_scale, np.float64)
        self._put("scale", self._scale, scale, np.float64)
        self._record("tree_quantize_gh", self.k_quant({"pos": n, "output": k}))

    def _resolve(self) -> None:
        """Fold the left counts of the last partition (read back without a wait) into the host's ranges."""
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        event, n_left, rows = pending
        if event is not None:
            event.wait()
        for (node, lo, hi, b0, c0), nl in zip(rows, n_left.tolist(), strict=True):
            self.begin[lo], self.count[lo] = b0, nl
            self.begin[hi], self.count[hi] = b0 + nl, c0 - nl
            if node not in (lo, hi):
                self.count[node] = 0

    # ------------------------------------------------------------------------------------------ histograms
    def _copy(self, dst: cl.Buffer, dst_slot: int, src: cl.Buffer, src_slot: int, n: int) -> None:
        nb = self._node_bytes
        if n and nb:
            self._record("tree_copy", [cl.enqueue_copy(self.queue, dst, src, byte_count=n * nb,
                                                       dst_offset=dst_slot * nb, src_offset=src_slot * nb)])

    def _zeros(self, n: int, nodes: np.ndarray) -> DeviceHist:
        slot = self._arena_alloc(n)
        if n and self._node_bytes:
            self._record("tree_fill", [cl.enqueue_fill_buffer(self.queue, self._arena, np.zeros(1, np.uint8),
                                                              slot * self._node_bytes, n * self._node_bytes)])
        return DeviceHist(slot, n, np.asarray(nodes, np.int32), self._gen)

    def histograms(self, nodes: np.ndarray) -> DeviceHist:
        nodes = np.asarray(nodes, np.int32).reshape(-1)
        n = int(nodes.size)
        self._need_nodes(n)
        prep = self._prepared
        if prep is not None and tuple(nodes.tolist()) == prep[0]:
            maxc = prep[1]  # ranges the partition wrote into the slot tables on the device
        elif n == 1 and int(nodes[0]) == 0 and self.begin.get(0) == 0 and self.count.get(0) == self.n_rows:
            maxc = self.n_rows
            if maxc:
                q = self.queue
                cl.enqueue_copy(q, self._slot_begin, self._root_host[:1], is_blocking=False)
                cl.enqueue_copy(q, self._slot_count, self._root_host[1:], is_blocking=False)
        else:
            self._resolve()
            begin = [self.begin.get(int(x), 0) for x in nodes]
            count = [self.count.get(int(x), 0) for x in nodes]
            maxc = max(count) if n else 0
            if maxc:
                self._put("slot_begin", self._slot_begin, begin, np.int32)
                self._put("slot_count", self._slot_count, count, np.int32)
        if n == 0 or maxc == 0:
            return self._zeros(n, nodes)
        self._ensure_gh()
        sizes = {"node": n, "feat": self.n_features, "output": self.n_outputs, "pos": maxc}
        launch = self.k_hist if n == 1 else self.k_hist_levels
        self._record(self.d_hist.name, launch(sizes, n_rows=self.n_rows))
        slot = self._arena_alloc(n)
        self._copy(self._arena, slot, self._h_small, 0, n)
        self._small_holds = (self._gen, slot, n)
        return DeviceHist(slot, n, nodes, self._gen)

    def _siblings_to_work(self, parent_slots: np.ndarray, child: DeviceHist) -> None:
        """[child, arena[parent_slots] - child] into the split search's input buffer (one launch)."""
        self._check(child)
        n = child.n_nodes
        self._need_nodes(n)
        if self._small_holds != (child.gen, child.slot, n):
            self._copy(self._h_small, 0, self._arena, child.slot, n)
            self._small_holds = (child.gen, child.slot, n)
        run = n == 1 or bool(np.all(np.diff(parent_slots) == 1))  # a contiguous run of parents: no index table
        if not run:
            self._put("pidx", self._pidx, parent_slots, np.int32)
        self._record("tree_hist_siblings", self.k_sib({"side": 2, "node": n, "cell": self._cell},
                                                      use_index=int(not run),
                                                      pnode0=int(parent_slots[0]) if run else 0))
        self._work_holds = None

    def _siblings_into_arena(self, parent_slots: np.ndarray, child: DeviceHist, nodes: np.ndarray) -> DeviceHist:
        n = child.n_nodes
        if n == 0:
            return DeviceHist(self._arena_alloc(0), 0, nodes, self._gen)
        self._siblings_to_work(parent_slots, child)
        slot = self._arena_alloc(2 * n)
        self._copy(self._arena, slot, self._h_work, 0, 2 * n)
        self._work_holds = (self._gen, slot, 2 * n)
        return DeviceHist(slot, 2 * n, nodes, self._gen)

    def siblings(self, parent: DeviceHist, child: DeviceHist, index: np.ndarray | None = None) -> DeviceHist:
        """[child, parent[index] - child] in one launch (``index``: parent node per child, default in order)."""
        n = child.n_nodes
        idx = np.arange(n) if index is None else np.asarray(index, np.int64).reshape(-1)
        if idx.size != n or (n and (idx.min() < 0 or idx.max() >= parent.n_nodes)):
            raise ValueError("siblings: one parent node per child, within the parent handle")
        self._check(parent)
        nodes = np.concatenate([child.nodes, parent.nodes[idx] if parent.nodes.size else child.nodes])
        return self._siblings_into_arena(idx + parent.slot, child, nodes)

    def siblings_from(self, parents: list[tuple[DeviceHist, int]], child: DeviceHist) -> DeviceHist:
        """[child, parent - child] in one launch, each child's parent ``(handle, index)`` a node of any handle
        of this tree (loss-guided batches split leaves searched in different steps)."""
        if len(parents) != child.n_nodes:
            raise ValueError("siblings_from: one parent node per child")
        for h, i in parents:
            self._check(h)
            if not 0 <= i < h.n_nodes:
                raise ValueError("siblings_from: a parent index outside its handle")
        slots = np.array([h.slot + i for h, i in parents], np.int64)
        pnodes = np.array([h.nodes[i] if h.nodes.size else -1 for h, i in parents], np.int32)
        return self._siblings_into_arena(slots, child, np.concatenate([child.nodes, pnodes]))

    def subtract(self, parent: DeviceHist, child: DeviceHist) -> DeviceHist:
        if parent.n_nodes != child.n_nodes:
            raise ValueError(f"subtract: node counts differ, {parent.n_nodes} and {child.n_nodes}")
        n = child.n_nodes
        if n == 0:
            return DeviceHist(self._arena_alloc(0), 0, parent.nodes, self._gen)
        self._check(parent)
        self._siblings_to_work(parent.slot + np.arange(n), child)
        slot = self._arena_alloc(n)
        self._copy(self._arena, slot, self._h_work, n, n)
        return DeviceHist(slot, n, parent.nodes, self._gen)

    def take(self, hist: DeviceHist, index: np.ndarray) -> DeviceHist:
        """The listed nodes of a multi-node handle (device copies, one per run of consecutive nodes)."""
        self._check(hist)
        index = np.asarray(index, np.int64).reshape(-1)
        slot = self._arena_alloc(index.size)
        i = 0
        while i < index.size:
            j = i + 1
            while j < index.size and index[j] == index[j - 1] + 1:
                j += 1
            self._copy(self._arena, slot + i, self._arena, hist.slot + int(index[i]), j - i)
            i = j
        return DeviceHist(slot, int(index.size), hist.nodes[index] if hist.nodes.size else hist.nodes, self._gen)

    def concat(self, hists: list[DeviceHist]) -> DeviceHist:
        n = sum(h.n_nodes for h in hists)
        nodes = np.concatenate([h.nodes for h in hists]) if hists else np.zeros(0, np.int32)
        slot = self._arena_alloc(n)
        at = slot
        for h in hists:
            self._check(h)
            self._copy(self._arena, at, self._arena, h.slot, h.n_nodes)
            at += h.n_nodes
        return DeviceHist(slot, n, nodes, self._gen)

    def to_host(self, hist: DeviceHist) -> np.ndarray:
        """(n_nodes, n_features, n_bins, n_outputs, 2), the protocol's layout: float64, or the int64 fixed-point
        sums when quantized (as the numpy reference keeps them)."""
        self._check(hist)
        gh = tk.hist_gh_type(self.precision).dtype
        h = np.empty((hist.n_nodes, self.n_features, self.n_outputs, self.n_bins), gh)
        self._read(h, self._arena, hist.slot * self._node_bytes)
        arr = np.stack([h["g"], h["h"]], axis=-1)  # (N, F, K, B, 2)
        arr = arr.astype(np.int64 if self.quantized else np.float64)  # the protocol: int64 sums, as numpy keeps them
        return np.ascontiguousarray(arr.transpose(0, 1, 3, 2, 4))

    # ------------------------------------------------------------------------------------------ splits
    def _mask(self, feature_mask: np.ndarray) -> None:
        mask = np.ascontiguousarray(np.asarray(feature_mask, bool).reshape(self.n_features), dtype=np.uint8)
        key = mask.tobytes()
        if key != self._mask_key:  # a new mask per tree at most
            self._alive.append(mask)
            cl.enqueue_copy(self.queue, self._mask_buf, mask, is_blocking=False)
            self._mask_key = key

    def best_splits(self, hist: DeviceHist, feature_mask: np.ndarray, params: SplitParams) -> Splits:
        self._check(hist)
        n, f, k, b = hist.n_nodes, self.n_features, self.n_outputs, self.n_bins
        out = Splits.none(n, k, np.zeros((n, k, 2)))
        if n == 0:
            self._resolve()
            return out
        if 2 * self._cap_nodes < n:
            self._need_nodes(-(-n // 2))
        if self._work_holds != (hist.gen, hist.slot, n):
            self._copy(self._h_work, 0, self._arena, hist.slot, n)
            self._work_holds = (hist.gen, hist.slot, n)
        few = n <= FEW_NODES
        scan = self.k_scan if few else self.k_scan_levels
        self._record("tree_split_scan", scan({"node": n, "feat": f, "output": k, "bin": b}))
        if b > 2:
            self._mask(feature_mask)
            r = self.real.type
            score = self.k_score if few else self.k_score_levels
            self._record("tree_split_score", score(
                {"node": n, "feat": f, "bin": b - 2, "dir": 2}, reg_lambda=r(params.reg_lambda),
                reg_alpha=r(params.reg_alpha), min_split_gain=r(params.min_split_gain),
                min_child_weight=r(params.min_child_weight)))
            self._record("tree_split_sums", self.k_sums({"node": n, "output": k}, n_feat=f))
            host = self._read(np.empty((n, k), tk.result_type(self.precision).dtype), self._res)
        else:  # no candidate bins: only the node totals, the last prefix sum of feature 0
            self._resolve()
            scan = np.empty((n, f, k, b), tk.hist_gh_type(self.precision).dtype)
            scan = self._read(scan, self._scan)[:, 0, :, b - 1]
            inv = self.inv_scale if self.quantized else np.ones((k, 2))
            out.total[:, :, 0], out.total[:, :, 1] = scan["g"] * inv[:, 0], scan["h"] * inv[:, 1]
            return out
        self._resolve()
        out.total[:, :, 0], out.total[:, :, 1] = host["tg"], host["th"]
        gain = host["gain"][:, 0].astype(np.float64)
        ok = np.isfinite(gain)
        if not ok.any():
            return out
        idx = host["index"][:, 0].astype(np.int64)
        n_cand = b - 2
        out.gain[ok] = gain[ok]
        out.feature[ok] = idx[ok] // (2 * n_cand)
        out.bin[ok] = (idx[ok] // 2) % n_cand
        out.default_left[ok] = idx[ok] % 2 == 0
        for dst, g, h in ((out.left_sum, "lg", "lh"), (out.right_sum, "rg", "rh")):
            dst[ok, :, 0], dst[ok, :, 1] = host[g][ok], host[h][ok]
        return out

    # ------------------------------------------------------------------------------------------ partition
    def apply_splits(self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     left: np.ndarray, right: np.ndarray, small_left: np.ndarray | None = None) -> None:
        nodes = np.asarray(nodes, np.int64).reshape(-1)
        self._prepared = None
        if nodes.size == 0:
            return
        self._resolve()
        self._rows_dirty = True
        ns = int(nodes.size)
        left, right = np.asarray(left, np.int64).reshape(-1), np.asarray(right, np.int64).reshape(-1)
        begin = [self.begin.get(int(x), 0) for x in nodes]
        count = [self.count.get(int(x), 0) for x in nodes]
        rows = list(zip(nodes.tolist(), left.tolist(), right.tolist(), begin, count, strict=True))
        live = [c > 0 for c in count]
        if not any(live):
            self._pending = (None, np.zeros(ns, np.int32), rows)
            self._resolve()
            return
        n = int(sum(count))  # the split nodes' rows, end to end: the compact index space of the partition
        width = tk.SPLIT_FIELDS * ns
        self._need_nodes(ns)
        if width > self._cap_tab:
            self._grow_tab(width)
            self._bind_tree()
        # the split table: one upload per split step, from a reused host array
        tab = self._staging.take("tab", width, np.dtype(np.int32))
        which = [-1] * ns if small_left is None else [0 if s else 1 for s in np.asarray(small_left, bool).reshape(-1)]
        if ns == 1:  # loss-guided growth: one split per step, filled without array temporaries
            tab[: tk.SPLIT_FIELDS] = (rows[0][0], int(np.asarray(feature).reshape(-1)[0]),
                                      int(np.asarray(bin).reshape(-1)[0]),
                                      int(bool(np.asarray(default_left).reshape(-1)[0])), rows[0][1], rows[0][2],
                                      begin[0], count[0], which[0], 0)
        else:
            t = tab.reshape(ns, tk.SPLIT_FIELDS)
            t[:, 0], t[:, 1], t[:, 2] = nodes, np.asarray(feature).reshape(-1), np.asarray(bin).reshape(-1)
            t[:, 3] = np.asarray(default_left, bool).reshape(-1)
            t[:, 4], t[:, 5], t[:, 6], t[:, 7], t[:, 8] = left, right, begin, count, which
            t[0, 9] = 0
            np.cumsum(t[:-1, 7], out=t[1:, 9])
        q = self.queue
        cl.enqueue_copy(q, self._tab, tab, is_blocking=False)
        events = self.k_flags({"pos": n}, n_split=ns, n_rows=self.n_rows, n_feat=self.n_features)
        events += self.k_dest({"pos": n}, n_split=ns)
        self._record("tree_partition", events)
        self._ensure_gh()
        wi = 64
        i32 = np.int32
        sc = self._scatter
        sc.set_arg(8, i32(n))
        sc.set_arg(14, i32(ns))
        events = [cl.enqueue_nd_range_kernel(q, sc, (math.ceil(max(n, ns) / wi) * wi,), (wi,))]
        # the rows back home: one kernel (a column per feature when feature-major; one launch is also cheaper
        # on the host than three buffer copies when row-major)
        cb = self._copy_back
        cb.set_arg(6, i32(n))
        cb.set_arg(11, i32(ns))
        events.append(cl.enqueue_nd_range_kernel(q, cb, (math.ceil(n / wi) * wi,), (wi,)))
        self._record("tree_scatter_rows", events)
        host = np.empty(ns, np.int32)
        read = cl.enqueue_copy(q, host, self._n_left, is_blocking=False)  # waited for at the next sync
        self._pending = (read, host, rows)
        if small_left is not None:
            built = tuple(int(a if s else b_) for a, b_, s in zip(left, right, np.asarray(small_left, bool).reshape(-1),
                                                                  strict=True))
            self._prepared = (built, max(count))

    def relabel(self, node_map: np.ndarray) -> None:
        node_map = np.asarray(node_map, np.int32).reshape(-1)
        self._resolve()
        self._prepared = None
        # the host's row ranges: a renamed node's range spans the ranges of all the nodes renamed to it
        begin, count = {}, {}
        for old, c in self.count.items():
            if c and old < node_map.size:
                new = int(node_map[old])
                begin[new] = min(begin.get(new, self.n_rows), self.begin[old])
                count[new] = count.get(new, 0) + c
        self.begin, self.count = begin, count
        if not self.n_rows or node_map.size == 0:
            return
        if node_map.size > self._cap_tab:
            self._grow_tab(node_map.size)
            self._bind_tree()
        self._put("node_map", self._tab, node_map, np.int32)
        events = self.k_relabel({"row": self.n_rows})
        events.append(cl.enqueue_copy(self.queue, self.row_node.base_data, self._tmp_ridx.base_data,
                                      byte_count=4 * self.n_rows))
        self._record("tree_relabel", events)

    def row_nodes(self) -> np.ndarray:
        out = np.empty(max(1, self.n_rows), np.int32)
        return self._read(out, self.row_node.base_data)[: self.n_rows].copy()

    def node_rows(self, node: int) -> np.ndarray:
        """Row indices of a node, in ascending order. (The stable partition keeps them so within a node; a leaf
        renamed by ``relabel`` holds the ranges of the nodes below it, each ascending.)"""
        self._resolve()
        b, c = self.begin.get(int(node), 0), self.count.get(int(node), 0)
        if not c:
            return np.zeros(0, np.int32)
        return np.sort(self._read(np.empty(c, np.int32), self.ridx.base_data, 4 * b))
