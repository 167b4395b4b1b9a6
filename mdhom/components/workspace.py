"""The workspace of one fit on one device: the buffers every component reads and writes, the kernels built for
it, and the launch and read-back plumbing with its counters.

Components own the meaning of buffers and their kernels; the workspace owns the memory. Row-sized buffers are
allocated once, at the fit's size, by :meth:`Workspace.load`. Node-sized buffers live in a named table and grow
by doubling (:meth:`Workspace.ensure`); every reallocation bumps :attr:`Workspace.version`, and a component
re-binds its kernels (:meth:`mdhom.mdh.Computation.bind`) when it sees a newer version, so a launch sets only
the scalars that changed. Small tables go up by non-blocking copies from reused host arrays (:class:`Staging`).

Configurations come from ``mdhom.configs.lookup`` where a tuned one exists, else from the kernel spec's
heuristic; ``config_sources`` records which. Exact mode (``exact=True``) applies each spec's ``exact_pins``,
which fix the summation order to the numpy reference's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components import lanes
from mdhom.components.specs import KernelSpec
from mdhom.devices import Device, get_device
from mdhom.learn.binning import bin_dtype
from mdhom.learn.sparse_bins import SparseBins
from mdhom.mdh import Computation, Description, build_within_limits


def opaque(arr: cl_array.Array, dtype: np.dtype | None = None) -> cl_array.Array:
    """A one-element view of a whole device buffer (for checked launches of lookup inputs in tests)."""
    return cl_array.Array(arr.queue, (1,), arr.dtype if dtype is None else dtype, data=arr.base_data,
                          offset=arr.offset)


def view(arr: cl_array.Array, shape: tuple[int, ...], dtype: np.dtype) -> cl_array.Array:
    """The same buffer under another shape and dtype."""
    return cl_array.Array(arr.queue, shape, dtype, data=arr.base_data, offset=arr.offset)


class Staging:
    """Reused host arrays for non-blocking uploads: one per purpose, free again after the next sync (every
    copy enqueued before a blocking wait on the in-order queue has completed by then)."""

    def __init__(self) -> None:
        self._free: dict[str, np.ndarray] = {}
        self.busy: list[tuple[str, np.ndarray]] = []

    def take(self, key: str, n: int, dtype: np.dtype) -> np.ndarray:
        arr = self._free.pop(key, None)
        if arr is None or arr.size < n or arr.dtype != dtype:
            arr = np.empty(max(n, 2 * (arr.size if arr is not None and arr.dtype == dtype else 0), 16), dtype)
        self.busy.append((key, arr))
        return arr[:n]

    def release(self, first: int | None = None) -> None:
        """Free every array taken so far, or the ``first`` taken (those uploaded before a fence)."""
        n = len(self.busy) if first is None else first
        for key, arr in self.busy[:n]:
            self._free[key] = arr
        del self.busy[:n]


class Workspace:
    """Buffers, builds and launches of one fit (see the module docstring)."""

    def __init__(self, device: str | Device | None = None, precision: str = "double",
                 feature_major: bool | None = None, configs: Mapping[str, Mapping[str, int]] | None = None,
                 exact: bool | None = None, row_index: bool = False, columns: bool | None = None) -> None:
        self.device = get_device(device)
        self._queue: cl.CommandQueue | None = None  # chosen at the first command: see ``profile``
        self._profile = False
        self._timeline: list[tuple[str, cl.Event] | None] | None = None
        self.precision = precision
        self.quantized = lanes.is_quantized(precision)
        self.rp = "single" if precision == "single" else "double"  # the precision of the real-valued kernels
        self.real = np.dtype(lanes.REALS[precision])
        self.hist_elem = np.dtype(np.int32) if self.quantized else self.real  # one lane of a histogram cell
        self.overrides = {k: dict(v) for k, v in (configs or {}).items()}
        # quantized sums are exact in any order: nothing to pin
        self.exact = (precision == "double") if exact is None else bool(exact)
        # row-index mode: partitioning moves only the row order ``ridx``; bins and (g, h) stay in row order and
        # kernels read them through it (XGBoost's layout); else they move with the rows (position order)
        self.set_row_index(bool(row_index), feature_major)
        # row-index mode only, dense bins: a features x rows copy of the bins for the partition (RowPartitioner);
        # None: on GPUs
        self.want_columns = (self.device.type == "gpu") if columns is None else bool(columns)
        self.build_seconds = 0.0
        self.kernel_seconds: dict[str, float] = {}
        # bytes each kernel must move by design (its reads and writes of row-sized data), counted when profiling
        self.kernel_bytes: dict[str, float] = {}
        # per kernel, its launch of the most bytes since the bench last took these (bytes, device seconds): a fit's
        # root moves every row, the launch that tells a kernel's bandwidth apart from the latency of small nodes
        self.kernel_largest: dict[str, tuple[float, float]] = {}
        self.config_sources: dict[str, str] = {}
        self.syncs = 0  # blocking waits for the device (reads back included): what a GPU pays most for
        self.launches = 0
        self.version = 0  # bumped whenever a named buffer is reallocated: bound kernels must re-bind
        self._comps: dict[str, Computation] = {}
        self._events: list[tuple[str, list[cl.Event], float]] = []
        self._staging = Staging()
        self._pinned: dict[str, tuple[cl.Buffer, np.ndarray]] = {}  # key -> (buffer, its mapped host bytes)
        self._map_queue: cl.CommandQueue | None = None  # where the pinned buffers are mapped (read_later)
        self._sent: list[cl.Event] = []  # uploads since the last sync (send)
        # the last fence (:meth:`fence`): its marker, and the staging arrays and uploads taken before it
        self._fence: tuple[cl.Event, int, int] | None = None
        self._named: dict[str, cl.Buffer] = {}
        self._views: dict[tuple[str, int, int], cl.Buffer] = {}  # view(): the sub-buffers made since `version` moved
        self._views_version = -1
        # devices without sub-buffers: (name, offset, nbytes, version) of the region that the last written block copied
        # into place while "view:written" still holds the same bytes (:meth:`view`), else None
        self._held: tuple[str, int, int, int] | None = None
        self._caps: dict[str, int] = {}
        # bytes of the buffers allocated through this workspace that are alive, and the most at once (what a GPU
        # holds; CPU runtimes make only the pages touched resident)
        self.live_bytes = self.peak_bytes = 0
        self.n_rows = self.n_features = self.n_outputs = self.row_stride = 0
        self.n_bins = 2
        self.cat_mode: np.ndarray | None = None  # per feature split mode (mdhom.trees.reference); None: all numeric
        self.bin_dtype, self.bin_bytes = np.dtype(np.uint8), 1
        self.sparse = False  # bins as compressed rows (SparseBins; row-index mode), set by load
        self.columns = False  # whether the partition reads a features x rows copy (decided by load)

    def set_row_index(self, row_index: bool, feature_major: bool | None) -> None:
        """Row-index mode or not, before :meth:`load`; row-index mode reads bins rows x features unless told."""
        self.row_index = row_index
        if feature_major is None:
            feature_major = self.device.type == "gpu" and not row_index
        self.feature_major = bool(feature_major)

    # ------------------------------------------------------------------------------------------ builds
    def config(self, spec: KernelSpec, desc: Description, sizes: Mapping[str, int]) -> tuple[dict[str, int], str]:
        """The configuration for ``sizes``: an override, a tuned one, else the spec's heuristic; exact pins; a
        private scratch that holds the length ``sizes`` names (:meth:`Description.fit_scratch`)."""
        cfg, source = spec.configure(self.device, desc, sizes, self.overrides.get(desc.name))
        pins = spec.exact_pins if self.exact else {}
        if any(cfg.get(k) != v for k, v in pins.items()):
            source += "; exact order pinned"
        cfg.update(pins)
        sc = desc.scratch
        if sc is not None and sc.length in sizes:  # the build-time size check of a private scratch (Scratch.private)
            fitted = desc.fit_scratch(cfg, int(sizes[sc.length]))
            if fitted != cfg:
                cfg, source = fitted, f"{source}; scratch fitted to {sc.length}={int(sizes[sc.length])}"
        return cfg, source

    def build(self, spec: KernelSpec, desc: Description, sizes: Mapping[str, int], role: str = "",
              deal: tuple[str, int] | None = None) -> Computation:
        """Build ``desc`` once per fit with the configuration for ``sizes``; ``role`` keeps a second build of
        the same kernel for another launch regime (the histogram of one node vs. of a whole level). ``deal`` (a
        concatenated dimension, a number of work-groups): that dimension's points dealt to that many work-groups in
        strides (``CHUNKED`` 0 where the description has it, strided otherwise), whatever the configuration says:
        for launches whose points past the first few are empty
        (:meth:`mdhom.components.histogram_builder.HistogramBuilder.build`'s block slots)."""
        key = f"{desc.name} ({role})" if role else desc.name
        comp = self._comps.get(key)
        if comp is None or comp.desc is not desc:
            t0 = time.perf_counter()
            cfg, source = self.config(spec, desc, dict(sizes))
            if deal is not None:
                cfg = {**cfg, f"NUM_WG_{deal[0]}": int(deal[1]), **({"CHUNKED": 0} if desc.chunked else {})}
                source += f"; {deal[0]} dealt to {int(deal[1])} work-groups"
            comp = build_within_limits(desc, self.device, cfg)
            comp.program(False)
            self.build_seconds += time.perf_counter() - t0
            self._comps[key] = comp
            self.config_sources[key] = source
        return comp

    @property
    def computations(self) -> dict[str, Computation]:
        """The kernels built so far, by name (and role)."""
        return dict(self._comps)

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        """Each built kernel's configuration and where it came from (tuned file, defaults, heuristic)."""
        return {name: {"config": dict(comp.config), "source": self.config_sources.get(name, "")}
                for name, comp in self._comps.items()}

    @property
    def queue(self) -> cl.CommandQueue:
        """The fit's in-order queue: the device's profiling queue when ``profile`` was on before the first command,
        else its queue without profiling (cheaper per command)."""
        if self._queue is None:
            self._queue = self.device.queue if self._profile or self._timeline is not None else self.device.fast_queue
        return self._queue

    def _to_profiling_queue(self) -> None:
        """Finish the queue without profiling, if one was used, and go on in the profiling one (re-binding)."""
        if self._queue is not None and self._queue is not self.device.queue:
            self._queue.finish()
            self._queue = self.device.queue
            self.version += 1

    @property
    def profile(self) -> bool:
        """Whether each launch waits for its events and adds their device time to ``kernel_seconds`` (the benches'
        profiles). Turned on after the first command, the workspace finishes its queue and moves to the profiling
        one (bound kernels re-bind)."""
        return self._profile

    @profile.setter
    def profile(self, on: bool) -> None:
        if on:
            self._to_profiling_queue()
        self._profile = bool(on)

    @property
    def timeline(self) -> list[tuple[str, cl.Event] | None] | None:
        """A list that every launch's ``(name, event)`` pairs are appended to, without waiting (in the profiling
        queue), or None. ``profile`` serialises launches, so it cannot tell how much of a round the device was busy
        while the host enqueued the next work; the events of a fit at full speed can (the benches' timeline)."""
        return self._timeline

    @timeline.setter
    def timeline(self, events: list[tuple[str, cl.Event] | None] | None) -> None:
        if events is not None:
            self._to_profiling_queue()
        self._timeline = events

    def adopt(self, arr: cl_array.Array) -> None:
        """Wait for the queue that made a device array given to this workspace, where it is not this one: two
        in-order queues do not order each other's commands."""
        if arr.queue is not None and arr.queue is not self.queue:
            arr.queue.finish()

    # ------------------------------------------------------------------------------------------ memory
    def buf(self, nbytes: int) -> cl.Buffer:
        nbytes = max(16, int(nbytes))
        self.count(nbytes)
        return cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, nbytes)

    def count(self, nbytes: int) -> None:
        """Account ``nbytes`` allocated (negative: freed) in :attr:`live_bytes` and :attr:`peak_bytes`."""
        self.live_bytes += int(nbytes)
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def ensure(self, name: str, nbytes: int, keep: int = 0) -> cl.Buffer:
        """The named buffer, at least ``nbytes`` long: reallocated at double its size when too small (the first
        ``keep`` bytes copied over), which bumps :attr:`version`."""
        cap = self._caps.get(name, 0)
        if nbytes > cap or name not in self._named:
            new_cap = max(int(nbytes), 2 * cap, 16)
            buf = self.buf(new_cap)
            old = self._named.get(name)
            if old is not None and keep:
                cl.enqueue_copy(self.queue, buf, old, byte_count=min(keep, cap))
            if old is not None:
                self.count(-cap)  # the old buffer goes once the queue is done with it
            self._named[name], self._caps[name] = buf, new_cap
            self.version += 1
        return self._named[name]

    def swap(self, a: str, b: str) -> None:
        """Exchange two named buffers of one size (double buffering: a kernel's output becomes the next input)."""
        if self._caps.get(a) != self._caps.get(b):
            raise ValueError(f"swap: buffers {a!r} and {b!r} differ in size")
        self._named[a], self._named[b] = self._named[b], self._named[a]
        self.version += 1

    def __getitem__(self, name: str) -> cl.Buffer:
        return self._named[name]

    @property
    def view_align(self) -> int:
        """The byte offsets a :meth:`view` may start at are multiples of this: the device's base address alignment
        where views are sub-buffers, else 1 (copies start anywhere)."""
        if not self.device.sub_buffers:
            return 1
        return max(1, int(self.device.cl_device.mem_base_addr_align) // 8)

    def view(self, name: str, offset: int, nbytes: int, arg: str = "view") -> cl.Buffer:
        """``nbytes`` of the named buffer from byte ``offset`` on, as a buffer of its own that a kernel reads in place
        (a sub-buffer) where it would otherwise read a copy; :meth:`written` for a region a kernel writes. ``offset``
        must be a multiple of :attr:`view_align`. Valid until the buffer is reallocated (:attr:`version`) and, on
        devices without sub-buffers (:attr:`Device.sub_buffers <mdhom.devices.Device.sub_buffers>`), until the region
        is written, the next :meth:`written` block begins or the next view for the same kernel argument ``arg``: there
        a view at offset 0 is the buffer itself, a view of exactly the region that the last :meth:`written` block
        wrote apart (and copied into place, or stored there itself) is the buffer that block wrote (it still holds
        those bytes: a split step's search reads the siblings it just wrote without a second copy, one launch less a
        step, ~0.02 ms of an H200 host's time), and any other a copy of the region into a buffer kept per ``arg``
        (so the checker's output-size check, :meth:`Computation.bind <mdhom.mdh.Computation.bind>`, sees a view's
        region only where views are sub-buffers, as on Oclgrind). A kernel may read overlapping views but must not
        write a view that it also reads through another (a launch may write disjoint cells of a buffer it reads
        through a view at offset 0, which on such devices is the buffer itself: :meth:`written`'s ``stored``)."""
        if not self.device.sub_buffers:
            self._check_view(name, offset, nbytes)
            if offset == 0:
                return self._named[name]
            if self._held == (name, offset, nbytes, self.version):
                return self._named["view:written"]
            buf = self.ensure(f"view:{arg}", nbytes)
            self.copy("view_copies", buf, 0, self._named[name], offset, nbytes)
            return buf
        key = (name, int(offset), int(nbytes))
        if self._views_version != self.version:
            self._views.clear()
            self._views_version = self.version
        buf = self._views.get(key)
        if buf is None:
            self._check_view(name, offset, nbytes)
            if len(self._views) >= 256:  # a tree's handles: bounded, the oldest first out
                self._views.pop(next(iter(self._views)))
            buf = self._views[key] = self._named[name].get_sub_region(int(offset), int(nbytes))
        return buf

    def writes_apart(self, offset: int) -> bool:
        """Whether :meth:`written` gives a region starting at byte ``offset`` a buffer of its own (devices without
        sub-buffers, past offset 0)."""
        return not self.device.sub_buffers and offset != 0

    @contextlib.contextmanager
    def written(self, name: str, offset: int, nbytes: int, stored: bool = False) -> Iterator[cl.Buffer]:
        """A view (:meth:`view`) of a region that the launches inside the ``with`` block write, every byte of it: on
        devices without sub-buffers, a region past offset 0 (:meth:`writes_apart`) is written into a buffer of its
        own and copied into place after the block, unless ``stored``: the block's launches write the region in place
        as well (a kernel with a second output at the region's offset: ``tree_hist_siblings``' ``store``), so no copy
        follows. Either way a view of exactly that region then reads the block's buffer (:meth:`view`)."""
        self._held = None  # the block may write what "view:written" held, or its region
        if not self.writes_apart(offset):
            yield self.view(name, offset, nbytes)
            return
        self._check_view(name, offset, nbytes)
        buf = self.ensure("view:written", nbytes)
        yield buf
        if not stored:
            self.copy("view_copies", self._named[name], offset, buf, 0, nbytes)
        self._held = (name, offset, nbytes, self.version)

    def _overwrites(self, dst: cl.Buffer) -> None:
        """A copy or fill into ``dst``: where that is the buffer of the region :meth:`written` left held, or the one
        holding it, a view no longer reads the held copy (:meth:`view`)."""
        if self._held is not None and dst in (self._named.get(self._held[0]), self._named.get("view:written")):
            self._held = None

    def _check_view(self, name: str, offset: int, nbytes: int) -> None:
        if offset % self.view_align or offset < 0 or nbytes <= 0 or offset + nbytes > self._caps.get(name, 0):
            raise ValueError(f"a view of {name!r} at byte {offset} of {nbytes} bytes: outside the buffer or not at a "
                             f"multiple of {self.view_align} bytes")

    def capacity(self, name: str) -> int:
        return self._caps.get(name, 0)

    # ------------------------------------------------------------------------------------------ the fit's rows
    def load(self, bins: np.ndarray | cl_array.Array | SparseBins, n_bins: int, n_outputs: int,
             cat_mode: np.ndarray | None = None, row_stride: int = 0) -> None:
        """Take the binned training matrix and allocate the row-sized buffers: numpy (n_rows, n_features) of
        :func:`mdhom.learn.binning.bin_dtype` (uint8 up to 256 bins, else uint16),
        or a device array already in this workspace's layout (``feature_major``: (n_features, n_rows)), whose
        buffer is taken over (not copied) and whose values are trusted to lie below ``n_bins``, or the bins of
        sparse input kept sparse (:class:`mdhom.learn.sparse_bins.SparseBins`: compressed rows, read in row order,
        so the workspace switches to row-index mode). ``cat_mode``: the features' split modes where some are
        categorical. ``row_stride``: in row-index mode, dense rows x features bins laid out that many bins a row
        (:attr:`row_stride`, rows padded to whole sectors: :func:`mdhom.components.lanes.padded_stride`); 0: rows end
        to end."""
        on_device = isinstance(bins, cl_array.Array)
        if on_device:
            self.adopt(bins)
        self.sparse = isinstance(bins, SparseBins)
        if self.sparse:
            self.set_row_index(True, False)
        if not 2 <= n_bins <= 65536:
            raise ValueError(f"n_bins must be within 2..65536, got {n_bins}")
        if bins.dtype != bin_dtype(n_bins) or len(bins.shape) != 2:
            raise TypeError(f"bins must be a 2-D {bin_dtype(n_bins)} array for {n_bins} bins (uint8 up to 256 bins)")
        n_rows, n_feat = (bins.shape[::-1] if on_device and self.feature_major else bins.shape)
        if 3 * n_rows >= 2**31 or n_rows * n_feat >= 2**61:  # positions in three regions (the partition's) as int32
            raise ValueError(f"more than {(2**31 - 1) // 3} rows are not supported, got {n_rows}")
        if not on_device and bins.size and int(bins.max()) >= n_bins:
            raise ValueError(f"bins hold values up to {int(bins.max())}, but n_bins is {n_bins}")
        self.n_rows, self.n_features = int(n_rows), int(n_feat)
        self.n_bins, self.n_outputs = int(n_bins), int(n_outputs)
        if cat_mode is not None and np.any(cat_mode):
            cat_mode = np.asarray(cat_mode, np.uint8).reshape(-1)
            if cat_mode.size != self.n_features:
                raise ValueError(f"cat_mode has {cat_mode.size} entries for {self.n_features} features")
            self.cat_mode = cat_mode
        else:
            self.cat_mode = None
        self.bin_dtype = bin_dtype(n_bins)
        self.bin_bytes = self.bin_dtype.itemsize
        stride = int(row_stride) or self.n_features
        if stride != self.n_features and (stride < self.n_features or not self.row_index or self.sparse
                                          or self.feature_major):
            raise ValueError(f"row_stride: at least the {self.n_features} features, and only for dense rows x "
                             f"features bins read through the row index; got {row_stride}")
        # bins from one row to the next in ``bins``: what every kernel reading rows x features bins steps by
        self.row_stride = stride
        rows = max(1, self.n_rows)
        q = self.queue
        n_cells = max(1, self.n_rows * self.n_features) * self.bin_bytes
        counted = self.live_bytes  # what the row order's buffer adds (given back where rows move: region 0 holds it)
        if self.sparse:  # a few bytes per stored entry: copied, never moved
            packed = bins.packed()
            self.bins_orig = cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                       hostbuf=packed)
            self.count(packed.nbytes)
        elif on_device and stride != self.n_features:  # the rows padded, as they are copied
            width = self.n_features * self.bin_bytes
            self.bins_orig = self.buf(max(1, self.n_rows * stride) * self.bin_bytes)
            if bins.nbytes:
                cl.enqueue_copy(q, self.bins_orig, bins.base_data, src_origin=(bins.offset, 0),
                                dst_origin=(0, 0), region=(width, self.n_rows), src_pitches=(width,),
                                dst_pitches=(stride * self.bin_bytes,))
        elif on_device and bins.offset == 0 and bins.flags.c_contiguous:  # taken over: no copy
            self.bins_orig = bins.base_data  # row order
            self.count(bins.nbytes)
        elif on_device:
            self.bins_orig = self.buf(n_cells)
            if bins.nbytes:
                cl.enqueue_copy(q, self.bins_orig, bins.base_data, byte_count=bins.nbytes, src_offset=bins.offset)
        else:
            host = np.ascontiguousarray(bins.T if self.feature_major else bins)
            if stride != self.n_features:  # our own padded copy (the padding zero: no kernel reads it), its rows on
                # whole sectors from a line on (a CPU reads the array in place; numpy aligns large arrays to 16 bytes)
                cells = self.n_rows * stride
                raw = np.zeros(cells * self.bin_bytes + 64, np.uint8)
                at = -raw.ctypes.data % 64
                padded = raw[at: at + cells * self.bin_bytes].view(self.bin_dtype).reshape(self.n_rows, stride)
                padded[:, : self.n_features] = host
                host = padded
            if host.ctypes.data % 64:  # a view at an odd offset: kernels may read whole words of a row (ROW_WORDS)
                host = host.copy()
            # a CPU device reads the host array in place (PoCL and Intel's runtime run in this process: a copy
            # would hold the matrix twice); the buffer keeps the array alive and nothing writes it
            mf = cl.mem_flags
            flags = mf.READ_ONLY | mf.USE_HOST_PTR if self.device.type == "cpu" else mf.READ_WRITE | mf.COPY_HOST_PTR
            self.bins_orig = cl.Buffer(self.device.context, flags, hostbuf=host) if host.size else self.buf(1)
            self.count(host.nbytes)
        # position order (the row at ridx[p] sits at p), or the row order itself in row-index mode. Positions come
        # in three regions of n_rows (kernels/trees/positions.cl: a split moves a node's rows to the next region, and
        # region 0, the rows in their original order, is every tree's root), for the row order and whatever moves
        # with it; features-major bins hold the three regions in each feature's column (pos_stride positions)
        moved = not self.row_index
        self.pos_stride = 3 * rows if moved and self.feature_major else rows
        if moved:
            orig_bytes = self.live_bytes - counted
            self.bins = self.buf(3 * n_cells)
            if self.n_rows and self.n_features and self.feature_major:
                col = self.n_rows * self.bin_bytes
                cl.enqueue_copy(q, self.bins, self.bins_orig, src_origin=(0, 0), dst_origin=(0, 0),
                                region=(col, self.n_features), src_pitches=(col,),
                                dst_pitches=(self.pos_stride * self.bin_bytes,))
            elif self.n_rows and self.n_features:
                cl.enqueue_copy(q, self.bins, self.bins_orig, byte_count=self.n_rows * self.n_features * self.bin_bytes)
            q.finish()  # the source may be the caller's host array (a CPU reads it in place): done with it now
            self.count(-orig_bytes)
            self.bins_orig = None  # region 0 holds the row order from here on
        else:
            self.bins = self.bins_orig
        self.columns = self.want_columns and self.row_index and not self.sparse and not self.feature_major
        self.gh_dtype = lanes.hist_gh_type(self.precision).dtype
        # position order when rows move (three regions; the round's (g, h) are made in region 0), else row order
        self.gh = self.buf((3 if moved else 1) * rows * n_outputs * self.gh_dtype.itemsize)
        self.ridx = self.buf(12 * rows)
        cl.enqueue_copy(q, self.ridx, np.arange(rows, dtype=np.int32))  # region 0: the original order
        self.row_node = self.buf(4 * rows)
        self.node_bytes = self.n_features * self.n_outputs * self.n_bins * self.gh_dtype.itemsize
        self.cells = self.node_bytes // self.hist_elem.itemsize  # histogram lanes per node

    # ------------------------------------------------------------------------------------------ launches
    def put(self, key: str, dst: cl.Buffer, values: np.ndarray, dtype: np.dtype, offset: int = 0) -> None:
        """A small table into a pre-allocated buffer without waiting, from a reused host array."""
        values = np.asarray(values).reshape(-1)
        if values.size == 0:
            return
        host = self._staging.take(key, values.size, np.dtype(dtype))
        host[...] = values
        self.send(dst, host, offset)

    def send(self, dst: cl.Buffer, host: np.ndarray, offset: int = 0) -> None:
        """``host`` (left untouched until the next sync) into ``dst`` without waiting. The copy's event is kept until
        then: pyopencl's events of host copies wait for the copy when they are dropped, which would make every
        upload wait for all the work queued before it."""
        self._sent.append(cl.enqueue_copy(self.queue, dst, host, dst_offset=offset, is_blocking=False))

    def staging(self, key: str, n: int, dtype: np.dtype) -> np.ndarray:
        """A reused host array to fill and upload without waiting (free again after the next sync)."""
        return self._staging.take(key, n, np.dtype(dtype))

    def read_later(self, key: str, buf: cl.Buffer, n: int, dtype: np.dtype) -> tuple[np.ndarray, cl.Event]:
        """``n`` items of ``buf`` read without waiting, into pinned host memory reused per ``key`` (its last
        contents must have been used): NVIDIA's driver takes half the host time for such a read than into pageable
        memory (H100 machine: 19 against 36 us). Returns the host array (valid once the event completes)."""
        dtype = np.dtype(dtype)
        nbytes = max(1, n) * dtype.itemsize
        held = self._pinned.get(key)
        if held is None or held[1].nbytes < nbytes:
            size = max(nbytes, 2 * (held[1].nbytes if held else 0), 256)
            mf = cl.mem_flags
            buf_pinned = cl.Buffer(self.device.context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, size)
            # mapped (for good) through a queue of its own: the new buffer waits for nothing there, where a blocking
            # map in the fit's queue waited for every launch before it, a sync at each key's first read of a fit
            if self._map_queue is None:
                self._map_queue = cl.CommandQueue(self.device.context, self.device.cl_device)
            mapped, _ = cl.enqueue_map_buffer(self._map_queue, buf_pinned, cl.map_flags.READ | cl.map_flags.WRITE,
                                              0, (size,), np.uint8, is_blocking=True)
            held = self._pinned[key] = (buf_pinned, mapped)
        host = held[1][:nbytes].view(dtype)[:n]
        return host, cl.enqueue_copy(self.queue, host, buf, is_blocking=False)

    def record(self, name: str, events: list[cl.Event], nbytes: int = 0) -> None:
        """Count a launch; when profiling, wait for it, so that its device time falls inside the backend call
        that launched it (launches serialised: device time never overlaps the host work it is compared with),
        and add ``nbytes``, what the launch must move by design, to :attr:`kernel_bytes` (and its time, where it is
        the kernel's largest launch so far, to :attr:`kernel_largest`)."""
        self.launches += len(events)
        if self._timeline is not None:
            self._timeline.extend((name, e) for e in events)
        if self.profile:
            if events:
                cl.wait_for_events(events)
            self._events.append((name, events, float(nbytes)))
            if nbytes:
                self.kernel_bytes[name] = self.kernel_bytes.get(name, 0.0) + float(nbytes)

    def _synced(self) -> None:
        """After a blocking wait: free the upload arrays and add up the profiled kernel times."""
        self.syncs += 1
        self._staging.release()
        self._sent.clear()  # every upload is done: the queue ran past them
        self._fence = None  # ... and past the last fence
        for name, events, nbytes in self._events:
            t = sum((e.profile.end - e.profile.start) * 1e-9 for e in events)
            self.kernel_seconds[name] = self.kernel_seconds.get(name, 0.0) + t
            if nbytes > self.kernel_largest.get(name, (0.0, 0.0))[0]:
                self.kernel_largest[name] = (nbytes, t)
        self._events.clear()

    def read(self, host: np.ndarray, buf: cl.Buffer, offset: int = 0) -> np.ndarray:
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

    def fence(self) -> None:
        """The end of a round without waiting for it: waits for the round before (at most one round in flight), then
        frees what was uploaded before that one's fence. The next round's launches queue behind this round's last
        kernels while they run, where a sync had left the device idle until the host launched again (H200: a round's
        leaf rows and score update, ~0.3 ms)."""
        marker = cl.enqueue_marker(self.queue)
        self.queue.flush()
        last, self._fence = self._fence, (marker, len(self._staging.busy), len(self._sent))
        if last is not None:
            last[0].wait()
            self._staging.release(last[1])
            del self._sent[: last[2]]

    def copy(self, name: str, dst: cl.Buffer, dst_offset: int, src: cl.Buffer, src_offset: int, nbytes: int) -> None:
        self._overwrites(dst)
        if nbytes:
            self.record(name, [cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes, dst_offset=dst_offset,
                                               src_offset=src_offset)])

    def fill(self, name: str, dst: cl.Buffer, offset: int, nbytes: int) -> None:
        self._overwrites(dst)
        if nbytes:
            self.record(name, [cl.enqueue_fill_buffer(self.queue, dst, np.zeros(1, np.uint8), offset, nbytes)])


class Bound:
    """A kernel bound to a component's buffers, re-bound after the workspace reallocated any of them.

    ``buffers()`` returns the output and input buffers by name as of now; it runs again whenever
    :attr:`Workspace.version` moved, so a launch costs a few microseconds of host time at any size."""

    def __init__(self, ws: Workspace, comp: Computation, buffers) -> None:  # noqa: ANN001 - () -> (out, dict)
        self.ws, self.comp, self.buffers = ws, comp, buffers
        self._version = -1
        self._bound = None

    def __call__(self, sizes: Mapping[str, int], views: Mapping[str, cl.Buffer] | None = None,
                 zeroed: bool = False, **params: object) -> list[cl.Event]:
        """Launch; ``views``: buffers that stand in for the output (``"out"``) or named inputs in this launch (regions
        of a larger buffer: :meth:`Workspace.view`); a caller that passes a name passes it at every call. ``zeroed``:
        see :class:`~mdhom.mdh.computation.BoundLaunch`."""
        if self._version != self.ws.version:
            out, bufs = self.buffers()
            self._bound = self.comp.bind(out, self.ws.queue, **bufs)
            self._version = self.ws.version
        if views:
            for name, buf in views.items():
                self._bound.set_buffer(name, buf)
        return self._bound(sizes, zeroed, **params)
