"""``OpenCLTreeKernels``: the :class:`mdhom.trees.backend.TreeKernels` protocol on an OpenCL device.

Everything row-sized (bins, targets, weights, raw scores, gradients, the row order ``ridx`` grouped by node,
the row -> node map, histograms, eval sets and their scores) stays on the device for the whole fit. A round
uploads the row-subsample mask (if any) and, per split step, one small int table (the split table and the
node -> split map); it reads back one packed result per split search (best split, child sums, node totals),
plus, queued before it without a wait, the left-child row counts of the previous partition. The next
histogram's row ranges are computed on the device (from the ``small_left`` hint), so a split step has one
blocking sync. Device buffers come from a memory pool, so steps allocate nothing from the driver.

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
per (node, feature, output) along the rows, plenty on CPUs, too little on GPUs.

Quantized mode (``precision="quantized"``) gets the same bit-identity with full parallelism: gradients and
scores stay double (bit-identical to numpy, as above), and per round (g, h) become int64 fixed point with a
power-of-two scale per (output, g|h) (one MAX reduction and one small read-back per round; see
:mod:`mdhom.trees.reference`). Integer histograms, scans and differences are exact in any order, so every
configuration (rows folded by many work-items, partials in local memory with atomics) gives the reference's
sums; reals appear only in the split search, converted the reference's way.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pyopencl.tools as cl_tools

from mdhom.devices import Device, get_device
from mdhom.mdh import Computation, Description, build_program, build_within_limits
from mdhom.trees import kernels as tk
from mdhom.trees import reference as ref
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
    order); ``"single"`` keeps gradients and histograms in float32; ``"quantized"`` computes gradients in
    double and histograms in int64 fixed point (bit-identical to ``NumpyTreeKernels("quantized")`` under any
    configuration; :meth:`to_host` then returns the int64 sums). ``feature_major`` stores bins as
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
        self.quantized = tk.is_quantized(precision)
        self.precision = precision
        self.rp = "single" if precision == "single" else "double"  # the precision of the real-valued kernels
        self.real = np.dtype(tk.REALS[precision])
        self.hist_elem = np.dtype(np.int64) if self.quantized else self.real  # one lane of a histogram cell
        self.feature_major = (self.device.type == "gpu") if feature_major is None else bool(feature_major)
        self.overrides = dict(configs or {})
        # quantized sums are exact in any order: nothing to pin
        self.exact = (precision == "double") if exact is None else bool(exact)
        self.inv_scale: np.ndarray | None = None  # (n_outputs, 2) 2^-k of this round, quantized only
        self.queue = self.device.queue
        self.build_seconds = 0.0
        self.kernel_seconds: dict[str, float] = {}
        self.profile = False
        self.syncs = 0  # blocking waits for the device (reads back included): what a GPU pays most for
        self.launches = 0
        self._comps: dict[str, Computation] = {}
        self._pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        self._events: list[tuple[str, list[cl.Event]]] = []
        self._alive: list[object] = []  # host arrays of uploads in flight
        self._shapes: dict[tuple, tuple[int, ...]] = {}

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
        elif name == "tree_histogram_q":
            # one work-group per (feature, row chunk); with PARTIALS_LOCAL (the description's default where
            # 64-bit local atomics exist on a GPU) its work-items scatter into one local histogram
            for d in desc.dim_names:
                cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
            cfg["NUM_WG_feat"] = sizes["feat"]
            cfg["NUM_WG_node"] = 4 if gpu else 1
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
        elif name in ("tree_hist_siblings", "tree_score_update", "tree_predict_bins", "tree_gather_gh",
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

    def _alloc(self, shape: tuple[int, ...] | int, dtype: np.dtype) -> cl_array.Array:
        return cl_array.empty(self.queue, shape, dtype, allocator=self._pool)

    def _upload(self, host: np.ndarray) -> cl_array.Array:
        """A small table to the device without waiting (the host copy lives until the next sync)."""
        host = np.ascontiguousarray(host)
        arr = self._alloc(host.shape, host.dtype)
        if host.nbytes:
            self._alive.append(host)
            cl.enqueue_copy(self.queue, arr.base_data, host, is_blocking=False)
        return arr

    def _record(self, name: str, events: list[cl.Event]) -> None:
        self.launches += len(events)
        if self.profile:
            self._events.append((name, events))

    def _synced(self) -> None:
        """After a blocking wait: drop the upload buffers and add up the profiled kernel times."""
        self.syncs += 1
        self._alive.clear()
        for name, events in self._events:
            t = sum((e.profile.end - e.profile.start) * 1e-9 for e in events)
            self.kernel_seconds[name] = self.kernel_seconds.get(name, 0.0) + t
        self._events.clear()

    def _run(self, desc: Description, sizes: dict[str, int], out: cl_array.Array | None = None,
             **args: object) -> cl_array.Array:
        comp = self._comp(desc, sizes)
        if out is None:
            key = (desc.name, tuple(sizes.items()))
            shape = self._shapes.get(key)
            if shape is None:  # every call passes all sizes, so they fix the output shape: bind once per shape
                bound = comp.bind_sizes({i.name: args[i.name] for i in desc.inputs}, sizes)
                shape = self._shapes[key] = comp.output_shape(bound)
            out = self._alloc(shape, desc.atom.dtype)
        launch = comp.enqueue(sizes, out=out, queue=self.queue, **args)
        self._record(desc.name, launch.events)
        return launch.out

    def sync(self) -> None:
        self.queue.finish()
        self._synced()

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
        self.grad = cl_array.zeros(q, (n_rows, n_outputs), self.real)  # row order, as set_gradients gives them
        self.hess = cl_array.zeros(q, (n_rows, n_outputs), self.real)
        gh_dtype = tk.hist_gh_type(self.precision).dtype
        self.gh = cl_array.zeros(q, (rows, n_outputs), gh_dtype)  # position order (int64 pairs when quantized)
        if self.quantized:  # the round's real (g, h) before quantisation, in position order
            self.gh_real = cl_array.zeros(q, (rows, n_outputs), tk.gh_type("double").dtype)
        self.ridx_orig = cl_array.to_device(q, np.arange(rows, dtype=np.int32))
        self.ridx = cl_array.empty(q, rows, np.int32)
        self.row_node = cl_array.empty(q, rows, np.int32)
        self._tmp_ridx = cl_array.empty(q, rows, np.int32)
        self._tmp_bins = cl_array.empty(q, max(1, host.size), np.uint8)
        self._tmp_gh = cl_array.empty(q, (rows, n_outputs), gh_dtype)
        self._dummy_int = cl_array.zeros(q, 1, np.int32)
        # one-element views of the resident buffers, made once (building pyopencl views costs host time)
        self._o_bins, self._o_ridx, self._o_row_node = opaque(self.bins), opaque(self.ridx), opaque(self.row_node)
        self._mask_key: bytes | None = None
        self._root_slots = (cl_array.to_device(q, np.array([0], np.int32)),
                            cl_array.to_device(q, np.array([n_rows], np.int32)))
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
        # Build everything now, at representative sizes, so build time is reported apart from fit time.
        self._comp(self.d_hist, {"node": 1, "feat": f, "output": k, "pos": rows})
        self._comp(self.d_gather, {"pos": rows, "output": k})
        self._comp(self.d_sub, {"i": 2 * f * k * b})
        self._comp(self.d_sib, {"side": 2, "node": 1, "cell": 2 * f * k * b})
        self._comp(self.d_scan, {"node": 1, "feat": f, "output": k, "bin": b})
        if b > 2:
            self._comp(self.d_score, {"node": 1, "feat": f, "bin": b - 2, "dir": 2})
            self._comp(self.d_sums, {"node": 1, "output": k})
        self._comp(self.d_flags, {"pos": rows})
        self._comp(self.d_dest, {"pos": rows})
        self._comp(self.d_update, {"row": rows, "output": k})
        if self.quantized:
            self.d_absmax, self.d_quant = tk.gh_absmax(), tk.quantize_gh()
            self._comp(self.d_absmax, {"pos": rows, "output": k})
            self._comp(self.d_quant, {"pos": rows, "output": k})
        t0 = time.perf_counter()
        opts = [f"-DTREE_FEATURE_MAJOR={int(self.feature_major)}",
                f"-DTREE_GH_WIDE={int(self.gh.dtype.itemsize == 16)}", f"-DTREE_SPLIT_FIELDS={tk.SPLIT_FIELDS}"]
        prg = build_program(self.device, tk._snippet("scatter.cl"), opts, "tree_scatter_rows")
        self.build_seconds += time.perf_counter() - t0
        self._scatter = cl.Kernel(prg, "tree_scatter_rows")
        self._copy_back = cl.Kernel(prg, "tree_copy_back")
        self._gh_stale = True
        self._rows_dirty = True
        self._objective = False
        self._evals: list[dict[str, object]] = []
        self.reset_rows()

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        shape = (self.n_rows, self.n_outputs)
        self.grad.set(np.ascontiguousarray(np.asarray(grad, self.real).reshape(shape)), queue=self.queue)
        self.hess.set(np.ascontiguousarray(np.asarray(hess, self.real).reshape(shape)), queue=self.queue)
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
        self._scores = cl_array.to_device(q, base)
        self._scores_next = cl_array.empty(q, base.shape, self.real)
        self._comp(self.d_grad, {"row": max(1, n), "output": k})
        self._keep_all = cl_array.to_device(q, np.ones(1, np.uint8))
        self._objective = True

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        if not self._objective:
            raise RuntimeError("compute_gradients needs set_objective first")
        self.reset_rows()  # position order = row order, so gradients land in position order directly
        if self.n_rows:
            d_keep = self._keep_all if keep is None else self._upload(np.asarray(keep, bool).astype(np.uint8))
            target = self.gh_real if self.quantized else self.gh
            self._run(self.d_grad, {"row": self.n_rows, "output": self.n_outputs}, out=target[: self.n_rows],
                      scores=self._scores[: self.n_rows], y=self._y[: self.n_rows], w=self._w[: self.n_rows],
                      keep=opaque(d_keep), use_keep=int(keep is not None), factor=self._factor)
            if self.quantized:
                self._quantize()
        self._gh_stale = False

    def update_scores(self, value: np.ndarray) -> None:
        if self.n_rows:
            d_value = self._upload(np.asarray(value, np.float64).astype(self.real))
            self._run(self.d_update, {"row": self.n_rows, "output": self.n_outputs},
                      out=self._scores_next[: self.n_rows], scores=self._scores[: self.n_rows],
                      row_node=self.row_node[: self.n_rows], value=opaque(d_value))
            self._scores, self._scores_next = self._scores_next, self._scores

    def scores(self) -> np.ndarray:
        out = self._scores.get(queue=self.queue)[: self.n_rows].astype(np.float64)
        self._synced()
        return out

    def add_eval(self, bins: np.ndarray, base_score: np.ndarray) -> int:
        if bins.dtype != np.uint8 or bins.ndim != 2 or bins.shape[1] != self.n_features:
            raise ValueError("eval bins must be uint8 (n_rows, n_features) like the training bins")
        n, k = bins.shape[0], self.n_outputs
        host = np.ascontiguousarray(bins.T if self.feature_major else bins)
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(self.real)
        self._comp(self.d_predict, {"row": max(1, n), "output": k})
        q = self.queue
        self._evals.append({"n": n, "bins": cl_array.to_device(q, host if host.size else np.zeros(1, np.uint8)),
                            "scores": cl_array.to_device(q, base), "next": cl_array.empty(q, base.shape, self.real)})
        return len(self._evals) - 1

    def update_eval(self, handle: int, tree: object) -> np.ndarray:
        ev = self._evals[handle]
        n = int(ev["n"])
        if n:
            table = self._upload(tk.tree_table(tree))
            value = self._upload(np.asarray(tree.value, np.float64).astype(self.real))
            self._run(self.d_predict, {"row": n, "output": self.n_outputs}, out=ev["next"][:n], scores=ev["scores"][:n],
                      bins=opaque(ev["bins"]), tree=opaque(table), value=opaque(value), n_feat=self.n_features)
            ev["scores"], ev["next"] = ev["next"], ev["scores"]
        out = ev["scores"].get(queue=self.queue)[:n]
        self._synced()
        return out

    # ------------------------------------------------------------------------------------------ rows
    def reset_rows(self) -> None:
        """Every row into the root, and rows back in their original order (the reference's summation
        order: exact mode depends on it). Device copies only; nothing when no split moved a row since."""
        self._resolve()
        self._prepared = None
        self.begin: dict[int, int] = {0: 0}
        self.count: dict[int, int] = {0: self.n_rows}
        if not self._rows_dirty:
            return
        q = self.queue
        events = [cl.enqueue_copy(q, self.ridx.data, self.ridx_orig.data, byte_count=self.ridx.nbytes),
                  cl.enqueue_fill_buffer(q, self.row_node.data, np.zeros(1, np.int32), 0, self.row_node.nbytes)]
        if self.bins.nbytes:
            events.append(cl.enqueue_copy(q, self.bins.data, self.bins_orig.data, byte_count=self.bins.nbytes))
        self._record("tree_reset_rows", events)
        self._gh_stale = True
        self._rows_dirty = False

    def _ensure_gh(self) -> None:
        """(g, h) in position order, gathered once after set_gradients (and quantised, when quantized)."""
        if self._gh_stale and self.n_rows:
            self._run(self.d_gather, {"pos": self.n_rows, "output": self.n_outputs},
                      out=(self.gh_real if self.quantized else self.gh)[: self.n_rows],
                      ridx=self.ridx[: self.n_rows], grad=opaque(self.grad), hess=opaque(self.hess))
            if self.quantized:
                self._quantize()
        self._gh_stale = False

    def _quantize(self) -> None:
        """gh_real -> gh as int64 fixed point: max |g|, |h| per output on the device (one small blocking
        read), the exponents on the host (:func:`mdhom.trees.reference.quantization_exponents`, the same
        function the numpy reference uses), then rint(x * 2^k) on the device."""
        n, k = self.n_rows, self.n_outputs
        real = self.gh_real[:n]
        flat = _view(real, (n, k, 2), np.dtype(np.float64))
        host = self._run(self.d_absmax, {"pos": n, "output": k}, gh=flat).get(queue=self.queue)
        self._synced()
        am = np.stack([host["g"], host["h"]], axis=-1).reshape(k, 2)
        scale, self.inv_scale = ref.quantization_scales(ref.quantization_exponents(am, n))
        self._inv_dev = self._upload(self.inv_scale)
        self._run(self.d_quant, {"pos": n, "output": k}, out=self.gh[:n], gh=flat, scale=self._upload(scale))

    def _resolve(self) -> None:
        """Fold the left counts of the last partition (read back without a wait) into the host's ranges."""
        pending = getattr(self, "_pending", None)
        if pending is None:
            return
        self._pending = None
        event, n_left, rows = pending
        event.wait()
        for (node, lo, hi, b0, c0), nl in zip(rows, n_left.tolist(), strict=True):
            self.begin[lo], self.count[lo] = b0, nl
            self.begin[hi], self.count[hi] = b0 + nl, c0 - nl
            if node not in (lo, hi):
                self.count[node] = 0

    # ------------------------------------------------------------------------------------------ histograms
    def _empty_hist(self, n: int, nodes: np.ndarray) -> DeviceHist:
        gh = tk.hist_gh_type(self.precision).dtype
        shape = (n, self.n_features, self.n_outputs, self.n_bins)
        out = self._alloc(shape, gh)
        if out.nbytes:
            self._record("tree_fill", [cl.enqueue_fill_buffer(self.queue, out.base_data, np.zeros(1, np.uint8), 0,
                                                               out.nbytes)])
        return DeviceHist(out, np.asarray(nodes, np.int32))

    def histograms(self, nodes: np.ndarray) -> DeviceHist:
        nodes = np.asarray(nodes, np.int32).reshape(-1)
        prep = self._prepared
        if prep is not None and tuple(nodes.tolist()) == prep[0]:
            slot_begin, slot_count, maxc = prep[1], prep[2], prep[3]  # ranges the partition wrote on the device
        elif nodes.size == 1 and int(nodes[0]) == 0 and 0 in self.count and self.begin.get(0) == 0 \
                and self.count[0] == self.n_rows:
            slot_begin, slot_count, maxc = self._root_slots[0], self._root_slots[1], self.n_rows
        else:
            self._resolve()
            begin = np.array([self.begin.get(int(n), 0) for n in nodes], np.int32)
            count = np.array([self.count.get(int(n), 0) for n in nodes], np.int32)
            maxc = int(count.max()) if nodes.size else 0
            if maxc:
                slot_begin, slot_count = self._upload(begin), self._upload(count)
        if nodes.size == 0 or maxc == 0:
            return self._empty_hist(nodes.size, nodes)
        self._ensure_gh()
        f, k = self.n_features, self.n_outputs
        sizes = {"node": int(nodes.size), "feat": f, "output": k, "pos": maxc}
        # views with the declared extents; the kernel reads positions of every listed node (see kernels.py)
        bins = _view(self.bins, (f, maxc) if self.feature_major else (maxc, f), np.dtype(np.uint8))
        out = self._run(self.d_hist, sizes, bins=bins, gh=_view(self.gh, (maxc, k, 2), self.hist_elem),
                        slot_begin=slot_begin, slot_count=slot_count, n_rows=self.n_rows)
        return DeviceHist(out, nodes)

    def _flat(self, h: DeviceHist) -> cl_array.Array:
        return _view(h.data, (h.data.size * 2,), self.hist_elem)

    def subtract(self, parent: DeviceHist, child: DeviceHist) -> DeviceHist:
        if parent.data.shape != child.data.shape:
            raise ValueError(f"subtract: shapes differ, {parent.data.shape} and {child.data.shape}")
        out = self._alloc(parent.data.shape, parent.data.dtype)
        if parent.n_nodes:
            self._run(self.d_sub, {"i": parent.data.size * 2}, out=self._flat(DeviceHist(out, parent.nodes)),
                      parent=self._flat(parent), child=self._flat(child))
        return DeviceHist(out, parent.nodes)

    def siblings(self, parent: DeviceHist, child: DeviceHist, index: np.ndarray | None = None) -> DeviceHist:
        """[child, parent[index] - child] in one launch (``index``: parent node per child, default in order)."""
        n = child.n_nodes
        idx = np.arange(n) if index is None else np.asarray(index, np.int64).reshape(-1)
        if idx.size != n or (n and (idx.min() < 0 or idx.max() >= parent.n_nodes)):
            raise ValueError("siblings: one parent node per child, within the parent handle")
        nodes = np.concatenate([child.nodes, parent.nodes[idx] if parent.nodes.size else child.nodes])
        out = self._alloc((2 * n,) + tuple(child.data.shape[1:]), child.data.dtype)
        if n == 0:
            return DeviceHist(out, nodes)
        cell = child.data.size // n * 2
        run = n == 1 or bool(np.all(np.diff(idx) == 1))  # a contiguous run of parents needs no index table
        pidx = self._dummy_int if run else self._upload(idx.astype(np.int32))
        he = self.hist_elem
        self._run(self.d_sib, {"side": 2, "node": n, "cell": cell}, out=_view(out, (2, n, cell), he),
                  child=_view(child.data, (n, cell), he), parent=opaque(parent.data, he),
                  pidx=opaque(pidx), use_index=int(not run), pnode0=int(idx[0]) if run else 0)
        return DeviceHist(out, nodes)

    def take(self, hist: DeviceHist, index: np.ndarray) -> DeviceHist:
        """The listed nodes of a multi-node handle (device copies, one per node)."""
        index = np.asarray(index, np.int64).reshape(-1)
        out = self._alloc((index.size,) + tuple(hist.data.shape[1:]), hist.data.dtype)
        per = hist.data.nbytes // max(1, hist.n_nodes)
        events = [cl.enqueue_copy(self.queue, out.base_data, hist.data.base_data, byte_count=per, dst_offset=i * per,
                                  src_offset=int(j) * per) for i, j in enumerate(index) if per]
        self._record("tree_take", events)
        return DeviceHist(out, hist.nodes[index] if hist.nodes.size else hist.nodes)

    def concat(self, hists: list[DeviceHist]) -> DeviceHist:
        n = sum(h.n_nodes for h in hists)
        nodes = np.concatenate([h.nodes for h in hists]) if hists else np.zeros(0, np.int32)
        gh = tk.hist_gh_type(self.precision).dtype
        out = self._alloc((n, self.n_features, self.n_outputs, self.n_bins), gh)
        at, events = 0, []
        for h in hists:
            if h.n_nodes:
                events.append(cl.enqueue_copy(self.queue, out.base_data, h.data.base_data, byte_count=h.data.nbytes,
                                              dst_offset=at, src_offset=h.data.offset))
                at += h.data.nbytes
        self._record("tree_concat", events)
        return DeviceHist(out, nodes)

    def to_host(self, hist: DeviceHist) -> np.ndarray:
        """(n_nodes, n_features, n_bins, n_outputs, 2), the protocol's layout: float64, or the int64 fixed-point
        sums when quantized (as the numpy reference keeps them)."""
        h = hist.data.get(queue=self.queue)
        self._synced()
        arr = np.stack([h["g"], h["h"]], axis=-1)  # (N, F, K, B, 2)
        arr = arr if self.quantized else arr.astype(np.float64)
        return np.ascontiguousarray(arr.transpose(0, 1, 3, 2, 4))

    # ------------------------------------------------------------------------------------------ splits
    def _mask(self, feature_mask: np.ndarray) -> cl_array.Array:
        mask = np.ascontiguousarray(np.asarray(feature_mask, bool).reshape(self.n_features), dtype=np.uint8)
        key = mask.tobytes()
        if key != self._mask_key:  # a new mask per tree at most: upload it once
            self._mask_dev = cl_array.to_device(self.queue, mask)
            self._mask_key = key
        return self._mask_dev

    def best_splits(self, hist: DeviceHist, feature_mask: np.ndarray, params: SplitParams) -> Splits:
        n, f, k, b = hist.n_nodes, self.n_features, self.n_outputs, self.n_bins
        out = Splits(
            gain=np.full(n, -np.inf), feature=np.zeros(n, np.int32), bin=np.zeros(n, np.int32),
            default_left=np.zeros(n, bool), left_sum=np.zeros((n, k, 2)), right_sum=np.zeros((n, k, 2)),
            total=np.zeros((n, k, 2)),
        )
        if n == 0:
            self._resolve()
            return out
        he = self.hist_elem
        hv = _view(hist.data, (n, f, k, b, 2), he)
        scan = self._run(self.d_scan, {"node": n, "feat": f, "output": k, "bin": b}, hist=hv)
        sv = _view(scan, (n, f, k, b, 2), he)
        r = self.real.type
        inv = {"inv_scale": opaque(self._inv_dev)} if self.quantized else {}
        if b > 2:
            best = self._run(
                self.d_score, {"node": n, "feat": f, "bin": b - 2, "dir": 2}, scan=sv, hist=hv,
                feature_mask=self._mask(feature_mask), reg_lambda=r(params.reg_lambda),
                reg_alpha=r(params.reg_alpha), min_split_gain=r(params.min_split_gain),
                min_child_weight=r(params.min_child_weight), **inv,
            )
        else:  # no candidate bins: an argmax result that says "none"
            none = np.zeros(n, tk.split_type(self.precision).dtype)
            none["value"], none["index"] = -np.inf, -1
            best = self._upload(none)
        stride, _, _ = tk._best_layout(self.precision)
        res = self._run(self.d_sums, {"node": n, "output": k}, scan=opaque(scan, he),
                        hist=opaque(hist.data, he), best=_view(best, (n, stride), np.dtype(np.int32)),
                        best_value=opaque(best, self.real), n_feat=f, **inv)
        host = res.get(queue=self.queue)  # the one blocking read of a split step
        self._synced()
        self._resolve()
        out.total[:, :, 0], out.total[:, :, 1] = host["tg"], host["th"]
        gain = host["gain"][:, 0].astype(np.float64)
        ok = np.isfinite(gain)
        if b <= 2 or not ok.any():
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
        left, right = np.asarray(left, np.int64).reshape(-1), np.asarray(right, np.int64).reshape(-1)
        begin = np.array([self.begin.get(int(n), 0) for n in nodes], np.int64)
        count = np.array([self.count.get(int(n), 0) for n in nodes], np.int64)
        which = np.full(nodes.size, -1) if small_left is None else np.where(np.asarray(small_left, bool), 0, 1)
        tab = np.stack([nodes, np.asarray(feature).reshape(-1), np.asarray(bin).reshape(-1),
                        np.asarray(default_left, bool).reshape(-1), left, right, begin, count, which],
                       axis=1).astype(np.int32)
        rows = [(int(a), int(lo), int(hi), int(b0), int(c0))
                for a, lo, hi, b0, c0 in zip(nodes, left, right, begin, count, strict=True)]
        live = count > 0
        if not live.any():
            self._pending = (cl.UserEvent(self.device.context), np.zeros(nodes.size, np.int32), rows)
            self._pending[0].set_status(cl.command_execution_status.COMPLETE)
            self._resolve()
            if small_left is not None:
                self._prepared = None
            return
        lo = int(begin[live].min())
        hi = int((begin + count)[live].max())
        n_table = int(nodes.max()) + 1
        node_slot = np.full(n_table, -1, np.int32)
        node_slot[nodes] = np.arange(nodes.size, dtype=np.int32)
        d_tab = self._upload(np.concatenate([tab.reshape(-1), node_slot]))  # one upload per split step
        common = dict(bins=self._o_bins, ridx=self._o_ridx, row_node=self._o_row_node,
                      split_tab=opaque(d_tab), pos0=lo, n_split=int(nodes.size), n_table=n_table,
                      n_rows=self.n_rows, n_feat=self.n_features)
        n = hi - lo
        incl = self._run(self.d_flags, {"pos": n}, **common)
        dest = self._run(self.d_dest, {"pos": n}, incl=incl, **common)
        self._ensure_gh()
        n_left = self._alloc(nodes.size, np.int32)
        slot_begin, slot_count = self._alloc(nodes.size, np.int32), self._alloc(nodes.size, np.int32)
        wi = 64
        dims = (np.int32(lo), np.int32(n), np.int32(self.n_rows), np.int32(self.n_features),
                np.int32(self.n_outputs))
        grid = (math.ceil(max(n, nodes.size) / wi) * wi,)
        events = [
            self._scatter(self.queue, grid, (wi,), self.ridx.data, dest.data, self.bins.data, self.gh.data,
                          self.row_node.data, self._tmp_ridx.data, self._tmp_bins.data, self._tmp_gh.data,
                          *dims, d_tab.data, incl.data, np.int32(nodes.size), n_left.data, slot_begin.data,
                          slot_count.data),
        ]
        if self.feature_major:  # a column per feature: one kernel rather than n_features copies
            events.append(self._copy_back(self.queue, (math.ceil(n / wi) * wi,), (wi,), self.ridx.data,
                                          self.bins.data, self.gh.data, self._tmp_ridx.data, self._tmp_bins.data,
                                          self._tmp_gh.data, *dims))
        else:  # positions lo .. hi are one contiguous range of every array
            f, gh_row = self.n_features, self.gh.dtype.itemsize * self.n_outputs
            for dst, src, width in ((self.ridx, self._tmp_ridx, 4), (self.bins, self._tmp_bins, f),
                                    (self.gh, self._tmp_gh, gh_row)):
                events.append(cl.enqueue_copy(self.queue, dst.base_data, src.base_data, byte_count=width * n,
                                              dst_offset=width * lo, src_offset=0))
        self._record("tree_scatter_rows", events)
        host = np.empty(nodes.size, np.int32)
        read = cl.enqueue_copy(self.queue, host, n_left.data, is_blocking=False)  # waited for at the next sync
        self._pending = (read, host, rows)
        if small_left is not None:
            built = tuple(int(lo_ if s else hi_) for lo_, hi_, s in zip(left, right, np.asarray(small_left, bool),
                                                                          strict=True))
            self._prepared = (built, slot_begin, slot_count, int(count.max()))

    def row_nodes(self) -> np.ndarray:
        out = self.row_node.get(queue=self.queue)[: self.n_rows].copy()
        self._synced()
        return out

    def node_rows(self, node: int) -> np.ndarray:
        """Row indices of a node, in ascending order (the stable partition keeps the original order)."""
        self._resolve()
        b, c = self.begin.get(int(node), 0), self.count.get(int(node), 0)
        return self.ridx[b:b + c].get(queue=self.queue) if c else np.zeros(0, np.int32)
