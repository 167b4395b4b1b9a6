"""``OpenCLTreeKernels``: the :class:`mdhom.trees.backend.TreeKernels` protocol as a thin driver over the device
components of :mod:`mdhom.components` (the way XGBoost's ``gpu_hist`` updater drives its histogram builder, row
partitioner and split evaluator).

Everything row-sized (bins, targets, weights, raw scores, gradients, the row order grouped by node, the row ->
node map, histograms, eval sets and their scores) stays on the device for the whole fit. A round uploads the
row-subsample mask (if any) and, per split step, one split table; it reads back one packed result per split
search (best split, child sums, node totals), plus, queued before it without a wait, the left-child row counts
of the previous partition. So a split step has one blocking sync.

Exact mode (``exact=True``, the default in double precision) makes the results bit-identical to the numpy
reference, not merely close: each kernel spec pins what fixes the summation order (rows in ascending order per
node, np.cumsum's order over bins), the gain follows the reference's operations in its order (no FMA), and the
argmax is order-independent. Identical sums matter beyond rounding: after histogram subtraction an empty bin is
"parent - child", which is 0 or a few ulps depending on the order of summation, and that decides ties between
thresholds. Quantized mode (``precision="quantized"``) gets the same bit-identity with full parallelism:
integer histograms, scans and differences are exact in any order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyopencl.array as cl_array

from mdhom.components.binning import DeviceBinner, sends_whole
from mdhom.components.gradients import GradientSource
from mdhom.components.histogram_builder import DeviceHist, HistogramBuilder, real_whole_rows
from mdhom.components.lanes import padded_stride
from mdhom.components.partition import RowPartitioner
from mdhom.components.partition_kernels import GROUP_ROWS, GROUP_WI
from mdhom.components.predictor import Predictor
from mdhom.components.row_histogram import feature_groups
from mdhom.components.scores import ScoreUpdater
from mdhom.components.specs import pow2_at_most
from mdhom.components.split import XGBOOST_GAIN
from mdhom.components.split_evaluator import SplitEvaluator
from mdhom.components.workspace import Workspace
from mdhom.devices import Device
from mdhom.learn.binning import BinMapper, bin_dtype
from mdhom.learn.memory import size_text
from mdhom.learn.sparse_bins import SparseBins, sparse_bytes, sparse_pays
from mdhom.learn.validation import is_sparse
from mdhom.trees.backend import SplitParams, Splits
from mdhom.trees.layouts import BATCH, BLOCK_ROWS, DEPTH_AHEAD, Layout
from mdhom.trees.layouts import kernel_name as layout_name
from mdhom.trees.layouts import stored as stored_layout
from mdhom.trees.reference import ahead_step

WIDE_ROWS = 64  # features from which CPUs read rows through the row index rather than move them
# most feature groups for which GPUs read rows through the row index: each group reads a row's index and (g, h) again,
# and the row-index layout keeps a column copy of the bins for the partition; wider rows (hundreds of features) stay
# moved, as before feature groups, since neither is measured there
ROW_GROUPS = 8
LOOKAHEAD_GPU = 0  # levels below loss-guided batches split on the device, by default on GPUs (off: see load; depth-wise
# levels: DEPTH_AHEAD)
SPECULATE = True  # by default (CPUs and GPUs alike): loss-guided batches reach below the heap's leaves


def _workspace_attribute(name: str, writable: bool = False) -> property:
    """An attribute of the backend that is the workspace's (counters, the layout decided at load)."""

    def get(self: OpenCLTreeKernels) -> object:
        return getattr(self.ws, name)

    def set_(self: OpenCLTreeKernels, value: object) -> None:
        setattr(self.ws, name, value)

    return property(get, set_ if writable else None)


class OpenCLTreeKernels:
    """The md_hom tree kernels on one OpenCL device (see the module docstring).

    ``precision="double"`` reproduces the numpy reference; ``"single"`` keeps gradients and histograms in
    float32; ``"quantized"`` computes gradients in double and histograms in int32 fixed point (bit-identical to
    ``NumpyTreeKernels("quantized")`` under any configuration; :meth:`to_host` then returns the int64 sums).
    ``feature_major`` stores bins as features x rows (coalesced reads on GPUs) instead of rows x features (one
    cache line per row on CPUs); ``None`` picks by device type. ``configs`` overrides the configuration of named
    kernels. ``exact`` (default: True in double precision) pins the summation order to the reference's.
    ``row_index`` (``None``: on GPUs when quantized and a node's histogram fits in local memory, on CPUs for
    rows of ``WIDE_ROWS`` features or more) moves only the row order when partitioning and reads bins
    (rows x features) and (g, h) through it;
    ``whole_rows`` builds histograms a whole row per point instead of a feature per lane: quantized where a node's
    histogram fits in local memory (always so with ``row_index``), in real lanes of dense rows in feature groups
    (:func:`mdhom.components.row_histogram_real.histogram_rows_real`; ``None``: on CPUs, of moved rows, and through the
    row index where the caller or a stored layout reads rows so: the heuristic's wide rows keep a feature per lane).
    ``columns`` (row-index mode, dense bins; ``None``: on GPUs) keeps a features x rows copy of the bins that only
    the partition reads: a split reads one feature per row, which a row-major matrix serves a sector per byte.
    ``lookahead`` levels below each loss-guided batch and ``depth_ahead`` depth-wise levels are split on the device
    before the host reads them (quantized, numeric splits; :mod:`mdhom.trees.layouts`). ``blocks`` rows a block of
    the block partition (0: a work-item per row), ``block_group`` work-items a block (GPUs' group partition).
    ``batch``: the most candidates a speculative loss-guided step splits, ties with the last kept (0: every one the
    walk may reach; ``None``: :data:`mdhom.trees.layouts.BATCH`). ``summed``: the split search's score sums each
    feature's bins itself, no scan before it (``None``: where the device builds vector forms, CPUs).
    ``row_index``, ``whole_rows``, ``columns``, ``lookahead``, ``blocks``, ``depth_ahead``, ``batch`` and ``summed``
    left at ``None`` come from the layout ``mdhom tune``
    stored for the device and precision where there is one (:mod:`mdhom.trees.layouts`; ``layout`` and
    ``layout_source`` say which), else from the heuristics above.
    After ``load``, ``config_sources`` maps each kernel to where its configuration came from
    (``mdhom.configs.lookup``'s source, "override" or "heuristic") and ``kernel_configs()`` adds the values.

    Usage (``bins`` uint8 (n_rows, n_features), uint16 past 256 bins, ``g``/``h`` (n_rows,), ``params`` a SplitParams)::

        kern = OpenCLTreeKernels("cpu")
        kern.load(bins, n_bins=64, n_outputs=1)
        kern.set_gradients(g, h)
        kern.reset_rows()
        splits = kern.best_splits(kern.histograms(np.array([0])), np.ones(bins.shape[1], bool), params)
    """

    # a split step costs a device round trip and a dozen launches, while one more node in a launch costs little:
    # loss-guided trees search the splits of several leaves per step (mdhom.trees.lossguide)
    batch_lossguide = True

    @property
    def overlap_trees(self) -> bool:
        """A GPU computes beside the host; a CPU device's kernels share its cores (TreeKernels.overlap_trees)."""
        return self.device.type != "cpu"

    def __init__(self, device: str | Device | None = None, precision: str = "double",
                 feature_major: bool | None = None, configs: dict[str, dict[str, int]] | None = None,
                 exact: bool | None = None, row_index: bool | None = None, whole_rows: bool | None = None,
                 columns: bool | None = None, lookahead: int | None = None, blocks: int | None = None,
                 speculate: bool | None = None, block_group: int | None = None,
                 depth_ahead: int | None = None, batch: int | None = None, summed: bool | None = None) -> None:
        # columns, H100, 10.5M Higgs rows, depth 8: the partition kernels take 1.82 ms a round with them, 3.07
        # without; rounds alternating in one process 14.6 vs 15.5 ms (medians of 4 fits each, noisy host)
        self.ws = Workspace(device, precision, feature_major, configs, exact, bool(row_index), columns)
        self._row_index, self._feature_major = row_index, feature_major  # resolved in load (they need the shape)
        # whole-row histograms with rows moved: 4.8x faster than a feature per lane on PoCL (100k Higgs rows, 255
        # leaves: 0.0106 vs 0.0506 s per round), not on the H100 (10.5M rows, lossguide: 7.4 vs 6.6 ms per round);
        # row-index mode (the GPU default) always builds whole rows
        self.whole_rows = (self.ws.device.type == "cpu") if whole_rows is None else bool(whole_rows)
        self.device, self.precision = self.ws.device, precision
        self._lookahead, self._depth_ahead = lookahead, depth_ahead
        if batch is not None and batch < 0:
            raise ValueError(f"batch must be 0 (no bound) or the most candidates a loss-guided step splits, got "
                             f"{batch}")
        self._batch = batch
        self._summed = summed
        self._whole_rows, self._columns = whole_rows, columns
        if blocks is not None and blocks < 0:
            raise ValueError(f"blocks must be 0 (a work-item per row) or rows per block, got {blocks}")
        # the block partition on CPUs (PoCL, 2-core AMD EPYC, 500k Higgs rows, 255 leaves, rounds alternating in one
        # process: 0.150-0.155 s against 0.188-0.192 s with a work-item per row; the partition's kernels 0.04 s
        # against 0.10 s per round, profiled)
        self._blocks = blocks
        # work-items per block of the block partition: a work-group a block on GPUs (the group partition), one
        # work-item walking each on CPUs (0)
        self._block_group = block_group
        # a loss-guided batch's siblings zero 2n nodes where the next histograms built (the next batch's, or with a
        # look-ahead the 2n nodes they return) add up (FLAT), so that build launches no zeroing of its own where it
        # has as many nodes or fewer (the GPUs' layout on PoCL with the H200's configurations, six 255-leaf trees:
        # 210 -> 117 histogram launches). On GPUs: there a launch costs the host more than zeroing a few MB costs the
        # device; on a CPU the zeroing is the cores' own work, paid where the next batch is larger too
        self.zero_batches = self.ws.device.type != "cpu"
        # the choices left at None come from the device's tuned layout where `mdhom tune` stored one (resolved
        # with the shape, in _resolve_rows), else from the heuristics here and in _resolve_rows and load
        self.layout: Layout | None = None
        self.layout_source = "heuristic"
        self.lookahead = self.depth_ahead = 0  # decided at load: they need numeric splits of quantized histograms
        # H100, 10.5M Higgs rows, 255 leaves: 0.025-0.027 s a round against 0.045-0.063 without; PoCL 2-core, 500k
        # rows: 0.115-0.129 against 0.152-0.163 (fits alternating in one process, the same trees)
        self.speculate = SPECULATE if speculate is None else bool(speculate)
        self.batch = 0  # decided at load (the layout)
        self.scores_: ScoreUpdater | None = None
        self.binner: DeviceBinner | None = None

    # ------------------------------------------------------------------------------------------ counters
    build_seconds = _workspace_attribute("build_seconds")
    profile = _workspace_attribute("profile", writable=True)  # the bench's recorder turns profiling on
    timeline = _workspace_attribute("timeline", writable=True)  # ... or collects its launches' events unserialised
    kernel_seconds = _workspace_attribute("kernel_seconds", writable=True)  # ... and counts calls in its own dict
    kernel_bytes = _workspace_attribute("kernel_bytes")  # bytes moved by design, per kernel (when profiling)
    kernel_largest = _workspace_attribute("kernel_largest")  # ... and each kernel's launch of the most bytes
    syncs = _workspace_attribute("syncs")
    launches = _workspace_attribute("launches")
    config_sources = _workspace_attribute("config_sources")
    feature_major = _workspace_attribute("feature_major")  # decided in load (or bin_rows) with the shape
    exact = _workspace_attribute("exact")

    @property
    def inv_scale(self) -> np.ndarray | None:
        return self.gradients.inv_scale

    def _inv_scale(self) -> np.ndarray | None:  # what a split search asks for, when it needs it
        return self.gradients.inv_scale

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        out = self.ws.kernel_configs()
        if getattr(self, "hist", None) is not None:  # loaded: the layout in effect, stored or heuristic
            out[layout_name(self.precision)] = {"config": self.effective_layout().config(),
                                                "source": self.layout_source}
        if self.binner is not None:
            out[self.binner.desc.name] = {"config": dict(self.binner.comp.config), "source": self.binner.config_source}
        return out

    def _resolve_rows(self, n_feat: int, n_bins: int, n_outputs: int, feature_major: bool | None) -> None:
        """Row-index mode or not, and the bins' layout, once the shape is known."""
        ws = self.ws
        self._tuned_layout(n_feat)
        layout = self.layout
        row_index = self._row_index
        if row_index is None and layout is not None:
            row_index = bool(layout.row_index) and not feature_major
        if row_index is None:
            # GPUs, quantized, where a node's histogram fits in local memory, whole or in at most ROW_GROUPS feature
            # groups (H200, 10.5M Higgs rows at 256 bins in 4 groups: 0.0076 / 0.0166 s a depth-wise / loss-guided
            # round against 0.0241 / 0.0283 with rows moved and a feature per lane; in 2 groups since: 0.0060 /
            # 0.0147). H100, 10.5M Higgs rows, 64 bins, per round 0.066 s vs 0.081 s with rows moved (lossguide, 255
            # leaves) and 0.0275 vs 0.0351 s (depthwise, depth 8): the partition moves 8 bytes a row instead of ~40;
            # with the layout already fixed feature-major (device bins), rows stay moved
            row_index = (ws.device.type == "gpu" and ws.quantized
                         and 0 < feature_groups(ws.device, n_feat, n_outputs, n_bins) <= ROW_GROUPS
                         and not feature_major)
            # CPUs, wide rows (rows x features): a byte per feature is a cache line per (row, feature) read in either
            # mode once a row spans one (64 features), while moving rows costs the position-order and scratch
            # copies of the bin matrix (20000 x 5000 sparse: 100 MB instead of 300 MB) and a byte per feature per
            # row and split
            row_index = row_index or (ws.device.type == "cpu" and n_feat >= WIDE_ROWS and not feature_major)
        ws.set_row_index(bool(row_index), feature_major)

    def effective_layout(self) -> Layout:
        """The layout this fit runs (after ``load``): what was asked for, less what the data rules out (sparse
        input is read through the row index; whole rows need a node's histogram in local memory; categorical fits and
        fits of at most two bins scan before they score)."""
        ws = self.ws
        return Layout(int(ws.row_index), int(self.hist.whole_rows), int(ws.columns), int(self.lookahead),
                      int(self.rows.blocks), int(self.depth_ahead), int(self.batch), int(self.split.skips_scan))

    def _tuned_layout(self, n_feat: int) -> None:
        """The stored layout's choices for the options the caller left at None (:mod:`mdhom.trees.layouts`)."""
        if None not in (self._row_index, self._whole_rows, self._columns, self._lookahead, self._blocks,
                        self._depth_ahead, self._batch, self._summed):
            return
        layout, source = stored_layout(self.ws.device, self.precision, n_feat)
        self.layout, self.layout_source = layout, source
        if layout is None:
            return
        self.ws.config_sources[layout_name(self.precision)] = source
        if self._whole_rows is None:
            self.whole_rows = bool(layout.whole_rows)
        if self._columns is None:
            self.ws.want_columns = bool(layout.columns)

    def bin_rows(self, mapper: BinMapper) -> Callable[[object], cl_array.Array | np.ndarray]:
        """How rows become bins in this backend's layout, straight into ``load`` (the mapper's bins exactly):
        dense rows are binned on the device; sparse rows, and rows with categorical features (the device binner
        knows edges only), on the host, in the layout the device reads, and uploaded by ``load``; so are dense
        rows too large to send whole (:func:`mdhom.components.binning.sends_whole`)."""
        self._resolve_rows(len(mapper.edges), mapper.n_bins, 1, self._feature_major)
        self.binner = None  # built at the first dense matrix (the training rows')
        binners: dict[np.dtype, DeviceBinner] = {}  # float64, or float32 rows as the caller has them

        def to_bins(X: object) -> cl_array.Array | np.ndarray | SparseBins:
            if is_sparse(X) and sparse_pays(*X.shape, X.nnz, bin_dtype(mapper.n_bins).itemsize):
                return mapper.transform_sparse(X)  # compressed rows: load and add_eval take them as they are
            if is_sparse(X) or mapper.categorical.any() or not sends_whole(self.device, X):
                bins = mapper.transform(X, feature_major=self.feature_major)
                return bins.T if self.feature_major else bins  # (rows, features) as load reads it; no copy
            binner = binners.get(X.dtype)
            if binner is None:
                binner = binners[X.dtype] = DeviceBinner(mapper, self.device, X.dtype, self.feature_major,
                                                         queue=self.ws.queue, rows=X.shape[0])
                self.binner = self.binner or binner
            return binner.transform(X)

        return to_bins

    def _whole_builds(self) -> bool:
        """Whether the histograms read whole rows, once the rows are resolved: real lanes through the row index where
        the caller or a stored layout asks for it; the heuristic's wide rows (WIDE_ROWS features and more) keep a
        feature per lane, the build they were measured with."""
        asked = self._whole_rows is not None or self.layout is not None
        return self.whole_rows and (self.ws.quantized or not self.ws.row_index or asked)

    def _row_stride(self, n_features: int, n_bins: int, n_outputs: int, sparse: bool) -> int:
        """The bins' row stride, once the rows are resolved: real-lane whole rows gathered through the row index
        padded to whole sectors (:func:`~mdhom.components.lanes.padded_stride`), else 0 (rows end to end)."""
        ws = self.ws
        gathered = ws.row_index and not ws.feature_major and real_whole_rows(
            ws.device, ws.precision, n_features, n_outputs, n_bins, self._whole_builds(), sparse)
        return padded_stride(n_features, n_bins) if gathered else 0

    def check_size(self, n_rows: int, n_features: int, n_bins: int, n_outputs: int,
                   n_stored: int | None = None) -> None:
        self._resolve_rows(n_features, n_bins, n_outputs, self._feature_major)
        dev, ws = self.device, self.ws
        width = bin_dtype(n_bins).itemsize
        sparse = n_stored is not None and sparse_pays(n_rows, n_features, n_stored, width)
        row_bytes = (self._row_stride(n_features, n_bins, n_outputs, sparse) or n_features) * width  # padded or not
        cells = n_rows * row_bytes
        if sparse:  # compressed rows, read through the row index: one copy
            cells = sparse_bytes(n_rows, n_stored, width)
        node = n_features * n_outputs * n_bins * 2 * ws.hist_elem.itemsize
        shape = f"{n_features} features x {n_bins} bins x {n_outputs} output(s)"
        max_alloc = int(dev.cl_device.max_mem_alloc_size)
        moved = not sparse and not ws.row_index  # rows move: one buffer holds the three regions of positions
        regions = 3 if moved else 1
        for what, nbytes, per_row in ((f"the bin matrix ({n_rows} x {n_features} x {width} bytes"
                                       f"{', three regions of positions' if moved else ''})", regions * cells,
                                       regions * row_bytes),
                                      (f"one node's histograms ({shape})", node, None)):
            if nbytes > max_alloc:
                fits = f"; about {max_alloc // per_row} rows of this width would fit" if per_row else ""
                raise MemoryError(f"{what} needs {size_text(nbytes)} in one buffer, but {dev.key} allocates at "
                                  f"most {size_text(max_alloc)} at once{fits}")
        # three regions of positions, the first the row order, and while they are filled the matrix as given (one
        # copy in row-index mode); the histogram arena starts at 64 nodes, the split search's buffers and the
        # histograms' other tables at 16 (subtract's scratch, 32, is allocated when used)
        if sparse:
            copies = 1
        elif ws.row_index:  # and the partition's column copy, where it is kept
            copies = 1 + int(ws.want_columns and not ws.feature_major)
        else:
            copies = 4
        need = copies * cells + (64 + 48) * node
        if need > dev.global_mem_size:
            rows = max(0, dev.global_mem_size - (64 + 48) * node) // max(1, copies * row_bytes)
            raise MemoryError(f"a fit of {n_rows} x {n_features} features ({copies} device copies of the bin "
                              f"matrix, histograms of {size_text(node)} a node: {shape}) needs {size_text(need)}, "
                              f"but {dev.key} has {size_text(dev.global_mem_size)}; about {rows} rows would fit")

    # ------------------------------------------------------------------------------------------ data
    def load(self, bins: np.ndarray | cl_array.Array | SparseBins, n_bins: int, n_outputs: int,
             cat_mode: np.ndarray | None = None) -> None:
        """Take the binned training matrix: numpy (n_rows, n_features) of ``bin_dtype(n_bins)``, or a device array
        already in this backend's layout (``feature_major``: (n_features, n_rows), else (n_rows, n_features); e.g.
        :class:`mdhom.components.binning.DeviceBinner` output), which is used without a trip to the host: its
        buffer is taken over (not copied) and its values are trusted to lie below ``n_bins``; or sparse input's
        bins as compressed rows (:class:`mdhom.learn.sparse_bins.SparseBins`, read through the row index). Builds
        every kernel now, so build time is reported apart from fit time."""
        ws = self.ws
        on_device = isinstance(bins, cl_array.Array)
        n_feat = bins.shape[0] if on_device and ws.feature_major else bins.shape[1]
        # device bins come in the layout bin_rows chose: keep it
        self._resolve_rows(n_feat, n_bins, n_outputs, ws.feature_major if on_device else self._feature_major)
        stride = self._row_stride(n_feat, n_bins, n_outputs, isinstance(bins, SparseBins))
        ws.load(bins, n_bins, n_outputs, cat_mode, row_stride=stride)
        self.n_rows, self.n_features, self.n_bins, self.n_outputs = ws.n_rows, ws.n_features, ws.n_bins, n_outputs
        self.gradients = GradientSource(ws)
        # look-ahead below loss-guided batches: levels split on the device halve a tree's round trips (25 instead of
        # 44 on 10.5M Higgs rows), but their speculative splits add device work and a GPU round is bound by the
        # host's launches: H200, 10.5M rows, alternating fits, 11.64 ms a round without, 11.77 with one level
        # (kernels 5.91 against 6.76 ms); PoCL, 2-core EPYC, 500k rows, 112 against 125 ms. Off by default. Below a
        # bounded batch it now splits only the children the next batch takes (the host's splits, one round trip
        # earlier: no device work in vain), and still loses on a GPU (H100, 10.5M rows: round trips 10.1 -> 6.9, medians
        # 13.2 -> 16.6 ms a round; the host had fallen behind inside the old look-ahead's launches too, H200): off.
        # Depth-wise levels ahead split what the level-wise rule splits anyway: on by default (DEPTH_AHEAD, figures
        # in mdhom.trees.layouts), since their partitions cut blocks on the device and their histograms take the
        # class of a node's rows (before, each cost more than the round trips saved: H200 kernels 4.78 -> 6.02 ms).
        # Float fits take them too (the device's search is the host's, bit for bit; the float64 histogram ragged, so a
        # level whose ranges the host does not know costs its rows): PoCL, 2-core EPYC, default parameters (double,
        # depth 6), alternating fits, 20k rows 16.2 / 16.0 / 13.1 -> 11.7 / 10.9 / 12.0 ms a round, 100k rows 32.6 /
        # 27.5 / 31.6 -> 27.1 / 25.5 / 28.5; the loss-guided look-ahead stays quantized (the layouts' candidates)
        ahead = ws.cat_mode is None and n_bins > 2
        want = (LOOKAHEAD_GPU if ws.device.type == "gpu" else 0) if self._lookahead is None else int(self._lookahead)
        if self._lookahead is None and self.layout is not None:
            want = self.layout.lookahead
        self.lookahead = want if ahead and ws.quantized else 0
        depth = DEPTH_AHEAD if self._depth_ahead is None else int(self._depth_ahead)
        if self._depth_ahead is None and self.layout is not None:
            depth = self.layout.depth_ahead
        self.depth_ahead = depth if ahead else 0
        batch = self._batch
        if batch is None:
            batch = self.layout.batch if self.layout is not None else BATCH
        self.batch = int(batch)
        blocks = self._blocks
        if blocks is None:
            blocks = self.layout.blocks if self.layout is not None else (
                BLOCK_ROWS if ws.device.type == "cpu" else GROUP_ROWS)
        group = self._block_group
        if group is None:  # every device but a CPU takes GROUP_ROWS a block, and a work-group for each
            group = 0 if ws.device.type == "cpu" else pow2_at_most(ws.device.max_work_group_size, GROUP_WI)
        summed = self._summed
        if summed is None and self.layout is not None:
            summed = bool(self.layout.summed)
        self.split = SplitEvaluator(ws, XGBOOST_GAIN, summed)
        self.rows = RowPartitioner(ws, ahead=ahead, blocks=int(blocks), group=int(group), summed=self.split.summed)
        self._ahead_calls = 0  # look-aheads launched: their reads' host memory alternates (look_ahead)
        self.hist = HistogramBuilder(ws, self._whole_builds())
        self.predictor = Predictor(ws)
        ScoreUpdater.build(ws)  # now, so that build time stays apart from the first round
        self.scores_ = None
        self.reset_rows()

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        self.gradients.set_gradients(grad, hess)

    def set_objective(self, loss: object, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:
        self.scores_ = ScoreUpdater(self.ws, base_score)
        self.gradients.set_objective(loss.kind, y, w, self.scores_.buffers)

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        if self.scores_ is None:
            raise RuntimeError("compute_gradients needs set_objective first")
        self.reset_rows()  # position order = row order, so gradients land in position order directly
        self.gradients.compute(keep, self.scores_.cur)

    def update_scores(self, value: np.ndarray) -> None:
        self.rows.settle()  # every row's leaf, from the tree's final ranges
        self.scores_.update(value)

    def scores_ahead(self, value: np.ndarray, learning_rate: float, params: SplitParams) -> bool:
        # rows that move: the leaves were written before the last search was read (RowPartitioner.write_leaves_ahead)
        ahead = self.rows.leaves_ahead()
        if ahead is None:
            return False
        base, n_entries = ahead
        self.scores_.update_ahead(value, base, n_entries, learning_rate, params.reg_lambda, params.reg_alpha)
        return True

    def scores(self) -> np.ndarray:
        return self.scores_.scores()

    def add_eval(self, bins: np.ndarray | cl_array.Array, base_score: np.ndarray) -> int:
        return self.predictor.add(bins, base_score)

    def update_eval(self, handle: int, tree: object) -> np.ndarray:
        return self.predictor.update(handle, tree)

    def sync(self) -> None:
        self.ws.sync()

    def end_round(self) -> None:
        # profiled fits wait at every round's end: a round's kernel times are its own
        if self.overlap_trees and not self.ws.profile:
            self.ws.fence()
        else:
            self.ws.sync()

    # ------------------------------------------------------------------------------------------ a tree
    def reset_rows(self) -> None:
        """Every row into the root, in its original order; starts a new histogram arena (handles of the
        previous tree become invalid)."""
        self.rows.reset()
        self.hist.reset()

    def histograms(self, nodes: np.ndarray, transient: bool = False) -> DeviceHist:
        nodes = np.asarray(nodes, np.int32).reshape(-1)
        self.hist.ensure(int(nodes.size))
        max_count, total = self.rows.slots(nodes) if nodes.size else (0, 0)
        if max_count:
            self.gradients.ensure()
        rows = self.rows.rows_of(nodes) if self.ws.profile and max_count else 0  # a wait: profiling only
        return self.hist.build(nodes, max_count, rows, transient, total=total)

    def siblings(self, parent: DeviceHist, child: DeviceHist, index: np.ndarray | None = None) -> DeviceHist:
        return self.hist.siblings(parent, child, index)

    def siblings_from(self, parents: list[tuple[DeviceHist, int]], child: DeviceHist) -> DeviceHist:
        return self.hist.siblings_from(parents, child, zero_next=self.zero_batches)

    def subtract(self, parent: DeviceHist, child: DeviceHist) -> DeviceHist:
        return self.hist.subtract(parent, child)

    def take(self, hist: DeviceHist, index: np.ndarray) -> DeviceHist:
        return self.hist.take(hist, index)

    def concat(self, hists: list[DeviceHist]) -> DeviceHist:
        return self.hist.concat(hists)

    def to_host(self, hist: DeviceHist) -> np.ndarray:
        return self.hist.to_host(hist)

    def best_splits(self, hist: DeviceHist, feature_mask: np.ndarray, params: SplitParams,
                    then: Callable[[], None] | None = None) -> Splits:
        self.hist.check(hist)
        if hist.n_nodes == 0:
            if then is not None:
                then()
            self.rows.resolve()
            return Splits.none(0, self.n_outputs, np.zeros((0, self.n_outputs, 2)))
        view = self.hist.view(hist)

        def overlap() -> None:  # host work while the search runs: the caller's, then the last partition's left
            if then is not None:  # counts (read back before the search's result) into the ranges, which had
                then()  # been folded in after the result, between the step's read-back and its next launch
            self.rows.resolve()

        out = self.split.search(view, hist.n_nodes, feature_mask, params, self._inv_scale, overlap)
        self.gradients.check()
        return out

    def apply_splits(self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     left: np.ndarray, right: np.ndarray, small_left: np.ndarray | None = None,
                     cat_left: np.ndarray | None = None, final: bool = False) -> None:
        self.gradients.ensure()  # (g, h) move with the rows
        self.rows.apply_splits(nodes, feature, bin, default_left, left, right, small_left, cat_left, final)

    def look_ahead(self, hist: DeviceHist, feature_mask: np.ndarray, params: SplitParams, nodes: np.ndarray,
                   allow: list[np.ndarray], first_id: list[int], final: tuple[int, int] | None = None,
                   then: Callable[[], None] | None = None, min_gain: float = 0.0,
                   chain: tuple[np.ndarray, np.ndarray, int] | None = None) -> tuple[list[Splits], list[DeviceHist]]:
        self.hist.check(hist)
        levels = len(allow)
        built_levels = levels - (final is not None)  # levels whose children are built and searched
        leaves, max_leaves = final if final is not None else (0, 0)
        # the tree whose results these are: a level taken after the next tree began (its last level, which
        # scores_ahead leaves to the tree's finish) touches no row state; its results' host memory is not the next
        # look-ahead's (whose reads may land before the host has taken it: a small tree's whole look-ahead can run on
        # the device before the host writes the last tree)
        tree = self.rows.tree
        self._ahead_calls += 1
        key0 = 64 * (self._ahead_calls % 2)
        view = self.hist.view(hist)  # the searched level's histograms: its table maker reads them too
        self.split.score_only(view, hist.n_nodes, feature_mask, params)
        later: list[Callable[[], Splits]] = []
        founds: list[Splits] = []
        aheads = []
        state = {"ids": np.asarray(nodes, np.int64).reshape(-1), "alive": np.ones(hist.n_nodes, bool),
                 "leaves": leaves}

        def take(k: int) -> None:  # level k's splits: which of its nodes split, and the next level's ids
            founds.append(later[k]())
            room = max_leaves - state["leaves"] if k == built_levels and max_leaves else None
            ok, _, ids, alive = ahead_step(founds[k], state["alive"], allow[k], first_id[k], room, min_gain,
                                           chain if k == 0 else None)
            aheads[k].nodes, aheads[k].ok = state["ids"], ok
            state["ids"], state["alive"] = ids, alive
            state["leaves"] += int(ok.sum())
            if self.rows.tree != tree:
                return
            # the ranges of the levels taken so far, while the device works on the levels below; not the tree's last
            # level's: its leaves are written from the counts on the device (RowPartitioner.settle), and the host's
            # ranges wait until something asks for them
            if k < built_levels:
                self.rows.resolve(known=True)
                if k + 1 == built_levels and len(aheads) > built_levels:  # the last level's entries are known, its
                    self.rows.write_leaves_ahead(state["ids"])  # search is not: the leaves' pass queues behind it
            else:  # (k == built_levels: the tree's last level, on the device) the tree's leaves are known: their rows'
                self.rows.settle()  # nodes are written right behind the last partition, while the host does the
                # level's bookkeeping (the score update's)

        self.gradients.ensure()
        cur, hists = hist, []
        for k in range(levels):
            m = cur.n_nodes
            split_rows, most, ahead = self.rows.apply_searched(
                view, allow[k], first_id[k], leaves if k == 0 else -1, max_leaves if k == built_levels else 0,
                min_gain, final=k == built_levels,  # the search's result, written by the table maker, read behind it
                then=lambda m=m, k=k: later.append(self.split.result_later(m, key=key0 + k)),
                chain=chain if k == 0 else None)
            aheads.append(ahead)
            if k == built_levels:  # the tree's last level: nothing below it to build or search
                break
            rows = 0
            if self.ws.profile:  # the rows the histogram reads, for the bytes a profile reports (profiling waits)
                take(k)
                rows = self.rows.rows_of(state["ids"][:m][ahead.ok])
            self.hist.ensure(m)
            # the built children, one per entry of the m, hold about half the split nodes' rows
            built = self.hist.build(np.full(m, -1, np.int32), most, rows, transient=True,
                                    per_node=split_rows // (2 * max(1, m)), total=split_rows)
            cur = self.hist.siblings(cur, built, zero_next=k + 1 < built_levels)  # (a build of cur's nodes follows)
            hists.append(cur)
            if k + 1 < levels:
                view = self.hist.view(cur)
                self.split.score_only(view, cur.n_nodes, feature_mask, params)

        def take_rest() -> None:  # with every launch queued: the caller's work, then the results not taken yet
            if then is not None:
                then()
            for k in range(len(founds), levels):
                take(k)

        if final is not None:  # every search is in once the last partition is launched: the host reads them while
            self.ws.queue.flush()  # the device works through the levels (the leaves wait for no count on the host); the
            if then is not None:  # launches under way first (a driver may hold them; the search below flushes its own)
                then()
            self.gradients.check()
            # each level taken when the caller first asks for it (or the ranges need it): the caller's work on a level
            # overlaps the device's on the levels below; at the tree's end the leaves' pass is queued behind the last
            # partition as soon as the last search is in (H200, 10.5M rows, depth 8: 7.9 -> 5.0 ms a round)
            taken = _Levels(levels, founds, take)
            for k, ahead in enumerate(aheads):
                ahead.take = lambda k=k: taken[k]
            return taken, hists

        def take_all() -> None:  # while the last search runs: the earlier results, and the ranges
            take_rest()
            self.rows.resolve()

        last = self.split.search(self.hist.view(cur), cur.n_nodes, feature_mask, params, self._inv_scale, take_all)
        self.rows.resolve()
        self.gradients.check()
        return [*founds, last], hists

    def relabel(self, node_map: np.ndarray) -> None:
        self.rows.relabel(node_map)

    def row_nodes(self) -> np.ndarray:
        return self.rows.row_nodes()

    def node_rows(self, node: int) -> np.ndarray:
        return self.rows.node_rows(node)


class _Levels(Sequence):
    """A look-ahead's splits by level, each taken from the device (:meth:`OpenCLTreeKernels.look_ahead`'s ``take``)
    when first asked for, with every level before it."""

    def __init__(self, n: int, founds: list[Splits], take: Callable[[int], None]) -> None:
        self._n, self._founds, self._take = n, founds, take

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k: int) -> Splits:  # type: ignore[override]  (levels one at a time)
        k = range(self._n)[k]
        while len(self._founds) <= k:
            self._take(len(self._founds))
        return self._founds[k]
