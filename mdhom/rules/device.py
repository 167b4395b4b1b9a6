"""The rule refinement on an OpenCL device: a thin driver over its own step histogram (the trees' histogram operators,
reading the statistics in place), the trees' split-scan description and the split evaluator's score description with
the rule head's quality plugged in, plus small kernels of its own (:mod:`mdhom.rules.device_kernels` declares them
and lists every kernel of a step; complete heads over a coupled Hessian run :mod:`mdhom.rules.device_coupled`'s, driven
by :mod:`mdhom.rules.device_coupled_search`).
:mod:`mdhom.rules.binned` is the numpy reference of every step, to the bit.

:meth:`DeviceRefinement.best` runs one step and reads it; :meth:`DeviceRefinement.best_batch` runs several and reads
them at once: step j narrows the mask by step j - 1's winner on the device (``rule_cover_best``), and after a
single-label head's first step the device picks the head's label itself (``rule_head_columns``, and
``rule_head_scale`` for quantized statistics), so that a rule's steps follow each other without the host. The
learner keeps the steps up to the first it rejects (:meth:`mdhom.rules.induction.Learner._batch`).

The histogram, scan and score run over the sampled features only (mlrl-boomer's default samples floor(log2(F - 1) +
1) of F features per step: 7 of mediamill's 120), the histogram reading their columns of a features x rows copy of
the bins through the sample's table (``fidx``; the samples of several steps go up in one copy,
:meth:`DeviceRefinement.stage_features`); their index in the sample maps back to the feature on the host. Per step
that is 5 launches (histogram, scan, score and its combine, result) and one read, plus a cover per kept condition; a
rule starts from an all-ones mask filled once per fit. The coverage mask, the statistics (G, H of every example and
label) and the bins stay on the device. Quantized with a label-wise loss the statistics are updated there after each
rule (:meth:`load_statistics`, :meth:`apply_head`: :mod:`mdhom.rules.device_update`) and none go up per rule;
otherwise G and H go up once per rule (the host updates them after the rule's head is added, for the covered rows;
quantized, only the columns that changed; complete heads of the example-wise loss send G only, their Hessian entries
are built from it on the device), the head's tables in one copy when they change, the
feature samples of several steps in one copy. No upload waits: pyopencl's event of a copy from host memory waits for
it when deleted, so the driver keeps those events until the next read-back. Exact mode: the histogram adds rows in
ascending order from 0.0 (one lane per (feature, slot): ``np.bincount``'s order) and the scan adds bins in order
(``np.cumsum``'s), the quality is the reference's arithmetic and ties go to the lower index, so every device chooses
the conditions the numpy reference chooses and the model files are byte-identical.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyopencl as cl

from mdhom.components import split as sp
from mdhom.components.lanes import bin_ctype, hist_gh_type, split_type
from mdhom.components.workspace import Bound, Workspace
from mdhom.devices import Device
from mdhom.rules import device_kernels as dk
from mdhom.rules.device_coupled_search import CoupledSearch
from mdhom.rules.device_gain import head_gain
from mdhom.rules.device_kernels import MASKS
from mdhom.rules.heads import Head
from mdhom.rules.losses import packed_index
from mdhom.rules.quantized import QuantizedStatistics

_BEST = split_type("double").dtype  # the score kernel's winner (split_t), one record on the device

# the most refinement steps a batch launches before its one read-back (best_batch). With more than 1 the learner's
# batches grow 3, 6, 8, 8, ... within a rule, its first step included (mdhom.rules.induction.Learner._batch): on the
# mediamill-shaped benchmark (label-wise loss, single-label heads, 32 bins, quantized) a rule takes 16.5 steps and as
# many reads one step at a time, 3.3 reads and 19.6 steps with 8 (the steps after a rejected one are wasted). The
# wasted steps' launches cost more than the saved reads on both machines measured: H100 median rule 7.9 / 7.8 ms
# with 1 against 8.8 / 10.5 ms with 8 and 10.3 with 4 (python -m mdhom.bench.rules_host --device gpu --rules 103
# --timed --lookahead 1,8,1,8,4, the same model file each); on the 2-core PoCL machine batching was slightly slower
# too. So one step per read-back by default; the batches stay an option (DeviceRefinement(lookahead=k))
LOOKAHEAD = 1
# the most feature samples of a rule's steps that go up in one copy (stage_features): a rule of the mediamill-shaped
# benchmark takes ~14 steps, so one copy per rule instead of one per step
AHEAD = 16
# the coverage masks (MASKS): cov2 covers every row; a rule's first cover reads it and writes cov0, later covers
# alternate
_NEXT = (1, 0, 0)


class DeviceRefinement:
    """The refinement search of one fit on one device (:mod:`mdhom.rules.binned`'s semantics).

    ``bins`` (n, F) from :func:`binned.bin_matrix`; ``h_width`` the Hessian columns per example (L, or L(L+1)/2
    for the example-wise loss, whose single-label heads read the diagonal). Per rule :meth:`start`, then per step
    :meth:`best` and, for a condition the rule keeps, :meth:`add`; :meth:`restrict` when the head's labels
    change. Complete heads over a coupled Hessian search with :mod:`mdhom.rules.device_coupled`'s kernels, the
    sampled features in chunks whose statistics fit ``coupled_budget`` bytes (default: an eighth of the device's
    memory, at most its largest allocation). ``lookahead``: the most steps of a batch (:meth:`best_batch`; None:
    the module's ``LOOKAHEAD``). ``searched``: the features a step searches (the feature sample's size; None: all),
    the size a step's kernels are launched at and so the size they are built, configured and looked up in tuned
    configurations for (buffers hold all features either way): built for all 120 features of a mediamill-shaped
    fit, the heuristics gave the 7-feature steps 120 work-groups (PoCL, label-wise, old and new code alternating:
    median rule 0.21-0.24 s against 0.13-0.14 s)."""

    def __init__(self, device: str | Device | None, bins: np.ndarray, n_bins: int, edges: list[np.ndarray],
                 n_labels: int, h_width: int, l1: float, l2: float, min_coverage: int,
                 configs: Mapping[str, Mapping[str, int]] | None = None, precision: str = "double",
                 coupled_budget: int | None = None, lookahead: int | None = None,
                 searched: int | None = None) -> None:
        if precision not in ("double", "quantized"):
            raise ValueError(f"the rule refinement runs in 'double' or 'quantized' precision, not {precision!r}")
        self.ws = ws = Workspace(device, precision, configs=configs)
        self.precision = precision
        q = ws.quantized
        stat = np.dtype(np.int32 if q else np.float64)  # one statistic of G / H as the device holds it
        cell = hist_gh_type(precision).dtype.itemsize  # one (g, h) pair of the atoms and histograms
        self.n, self.n_feat = bins.shape
        self.n_bins, self.edges = int(n_bins), edges
        self.n_labels, self.h_width = int(n_labels), int(h_width)
        self.l1, self.l2, self.min_coverage = float(l1), float(l2), float(min_coverage)
        n, f, nb, slots = self.n, self.n_feat, self.n_bins, self.n_labels + 1
        self.searched = fs = max(1, min(f, int(searched or f)))
        self.stat_dtype = stat
        queue = ws.queue
        bins = np.ascontiguousarray(bins)
        self.lookahead = max(1, int(LOOKAHEAD if lookahead is None else lookahead))
        # one row per step of a batch (best_batch): each row a sub-buffer, so at the device's base address alignment
        align = max(1, int(ws.device.cl_device.mem_base_addr_align) // 8)
        self._res_stride = -(-dk.SIDE.dtype.itemsize * (self.n_labels + 1) // align) * align
        ws.ensure("bins", bins.nbytes)
        cl.enqueue_copy(queue, ws["bins"], bins)
        # H (n x h_width) is allocated by the first start() that sends one: complete heads of the example-wise
        # loss build its entries from G on the device, which at 101 labels spares 0.8 GB of device memory
        # the bins feature-major too: the histogram and rule_cover_best read a sampled feature's column in place
        ws.ensure("fbins", bins.nbytes)
        cl.enqueue_copy(queue, ws["fbins"], np.ascontiguousarray(bins.T))
        # feature samples: a row of n_feat per step, for a rule's steps drawn ahead (stage_features) or a batch's
        self.fidx_rows = max(self.lookahead, AHEAD)
        # quantized, the int32 statistics in one buffer (the gradient columns, then the Hessian columns at an aligned
        # offset: the device's statistics update writes both in one launch, mdhom.rules.device_update); double, G
        # here and H at the first start() that sends it
        self._stats: dict[str, cl.Buffer] = {}
        self.h_off = 0
        if q:
            g_bytes = 4 * n * self.n_labels
            at = -(-g_bytes // align) * align
            ws.ensure("GHq", at + 4 * n * self.h_width)
            self._stats = {"G": ws["GHq"].get_sub_region(0, g_bytes),
                           "H": ws["GHq"].get_sub_region(at, 4 * n * self.h_width)}
            self.h_off = at // 4
        else:
            ws.ensure("G", stat.itemsize * n * self.n_labels)
        self.stats = None  # a DeviceStatistics once the statistics live on the device (load_statistics)
        for name, nbytes in (("weight", 8 * n), ("cov0", n), ("cov1", n),
                             ("cov2", n),
                             ("hist", cell * f * slots * nb), ("scan", cell * f * slots * nb), ("best", _BEST.itemsize),
                             ("res", dk.SIDE.dtype.itemsize * slots), ("mask", f), ("fidx", 4 * f * self.fidx_rows),
                             ("res_batch", self._res_stride * self.lookahead),
                             ("sbins", bins.nbytes), ("cols1", 8), ("inv1", 32)):
            ws.ensure(name, nbytes)
        # the head's tables (its gradient columns, then from ``n_labels`` its Hessian columns; 2^-k per slot; a
        # coupled head's label pairs), one section each of one buffer at the device's alignment, so that restrict()
        # sends them in one copy. cols1 and inv1: a single-label head's, after its batch's first step chose the label
        self._head_at: dict[str, tuple[int, int]] = {}
        end = 0
        for name, nbytes in (("cols", 4 * (self.n_labels + max(self.n_labels, self.h_width))),
                             ("inv_scale", 16 * slots), ("pair_r", 4 * self.h_width), ("pair_c", 4 * self.h_width)):
            self._head_at[name] = (end, nbytes)
            end += -(-nbytes // align) * align
        ws.ensure("head", end)
        self._tab = {name: ws["head"].get_sub_region(at, nbytes) for name, (at, nbytes) in self._head_at.items()}
        # the coverage mask: cov2 covers every row (filled once: a rule starts from it), then cov0 and cov1 take
        # turns (the cover kernel reads one and writes the other; _NEXT)
        ws.record("fill", [cl.enqueue_fill_buffer(queue, ws["cov2"], np.ones(1, np.uint8), 0, n)])
        self.cur = 2
        self._tables = {"full": lambda: (self._tab["cols"], self._tab["inv_scale"]),
                        "one": lambda: (ws["cols1"], ws["inv1"])}
        k_cov = ws.build(dk.COVER, dk.cover(bin_ctype(nb)), {"row": n})
        self.k_cover = [Bound(ws, k_cov, lambda c=c: (ws[f"cov{_NEXT[c]}"], dict(covered=ws[f"cov{c}"],
                                                                                 bins=ws["bins"]))) for c in MASKS]
        # a batch's later steps narrow the mask by the winner the device holds, over the features that step searched
        k_cb = ws.build(dk.COVER_BEST, dk.cover_best(bin_ctype(nb)), {"row": n})
        self.k_cover_best = [Bound(ws, k_cb, lambda c=c: (ws[f"cov{_NEXT[c]}"], dict(
            covered=ws[f"cov{c}"], bins=ws["fbins"], fidx=ws["fidx"], best=ws["best"], best_value=ws["best"])))
            for c in MASKS]
        # the sampled features' bins side by side: what the coupled heads' counting sort reads
        k_fb = ws.build(dk.FEATURE_BINS, dk.feature_bins(bin_ctype(nb)), {"row": n, "feat": fs})
        self.k_feature_bins = Bound(ws, k_fb, lambda: (ws["sbins"], dict(bins=ws["bins"], fidx=ws["fidx"])))
        # a step's statistics (heads that are not coupled), per head tables (the head's own, or the label a batch's
        # first step chose) and coverage mask
        self.d_hist = dk.histogram(nb, precision, bin_ctype(nb))
        k_hist = ws.build(dk.HISTOGRAM_Q if q else dk.HISTOGRAM, self.d_hist, {"feat": fs, "output": slots, "pos": n})
        self.k_hist = {(t, c): Bound(ws, k_hist, lambda t=t, c=c: (ws["hist"], dict(
            bins=ws["fbins"], fidx=ws["fidx"], G=self._stat("G"), H=self._stat("H"), weight=ws["weight"],
            covered=ws[f"cov{c}"],
            cols=self._tables[t]()[0]))) for t in self._tables for c in MASKS}
        self.d_scan = sp.split_scan(nb, precision)
        k_scan = ws.build(sp.SCAN, self.d_scan, {"node": 1, "feat": fs, "output": slots, "bin": nb})
        self.k_scan = Bound(ws, k_scan, lambda: (ws["scan"], dict(hist=ws["hist"])))
        inv = (lambda t: {"inv_scale": self._tables[t]()[1]}) if q else (lambda t: {})
        k_res = ws.build(dk.RESULT, dk.result(precision), {"slot": slots})
        self.k_result = Bound(ws, k_res, lambda: (ws["res"], dict(scan=ws["scan"], best=ws["best"],
                                                                  best_value=ws["best"], **inv("full"))))
        # the result of a batch's step j goes to row j of res_batch (sub-buffers: the kernel writes from offset 0)
        batch_rows = [ws["res_batch"].get_sub_region(j * self._res_stride, self._res_stride)
                      for j in range(self.lookahead)]
        self.k_result_batch = {(t, j): Bound(ws, k_res, lambda t=t, r=r: (r, dict(
            scan=ws["scan"], best=ws["best"], best_value=ws["best"], **inv(t))))
            for t in self._tables for j, r in enumerate(batch_rows)}
        # a single-label head's tables after the label its batch's first step chose (row 0 of res_batch)
        k_hc = ws.build(dk.HEAD_COLUMNS, dk.head_columns(), {"i": 2})
        self.k_head_columns = Bound(ws, k_hc, lambda: (ws["cols1"], dict(res=batch_rows[0], cols=self._tab["cols"])))
        self.k_head_scale = None
        if q:
            k_hs = ws.build(dk.HEAD_SCALE, dk.head_scale(), {"slot": 2})
            self.k_head_scale = Bound(ws, k_hs, lambda: (ws["inv1"], dict(res=batch_rows[0],
                                                                          inv_scale=self._tab["inv_scale"])))
        self.batch_label = -1  # the label the last batch's first step chose on the device (restrict_first)
        self._inv = inv
        self._scores: dict[tuple[str, int, str], Bound] = {}
        dev = ws.device
        self.coupled_budget = int(coupled_budget if coupled_budget is not None else
                                  min(int(dev.cl_device.max_mem_alloc_size), dev.global_mem_size // 8))
        self.masks = 0  # coverage masks made so far (start, add)
        self._coupled = CoupledSearch(self)
        self._mask_key: int | None = None  # the feature mask holds this many ones (every searched feature)
        self.head: Head | None = None
        self.quant: QuantizedStatistics | None = None
        self.has_h = False  # whether the last start() sent Hessians (heads that are not coupled read them)
        self._weights: np.ndarray | None = None  # the example weights on the device
        self._pending: list[cl.Event] = []  # copies from host memory since the last read-back (see _put)
        self.steps = 0

    # the profiler's handles (mdhom.bench.profile.KernelRecorder): serialised launches, device seconds per kernel
    @property
    def profile(self) -> bool:
        return self.ws.profile

    @profile.setter
    def profile(self, on: bool) -> None:
        self.ws.profile = on

    @property
    def kernel_seconds(self) -> dict[str, float]:
        return self.ws.kernel_seconds

    @kernel_seconds.setter
    def kernel_seconds(self, table: dict[str, float]) -> None:
        self.ws.kernel_seconds = table

    def _score(self, kind: str, k: int, tables: str = "full") -> Bound:
        key = (kind, k, tables)
        if key not in self._scores:
            ws = self.ws
            spec = dk.SCORE_SINGLE if kind == "single" else dk.SCORE_COMPLETE
            comp = ws.build(spec, dk.score(self.n_bins, k, kind, self.precision),
                            {"node": 1, "feat": self.searched, "bin": self.n_bins - 2, "dir": 2}, role=str(k))
            self._scores[key] = Bound(ws, comp, lambda: (ws["best"], dict(
                scan=ws["scan"], hist=ws["hist"], feature_mask=ws["mask"], **self._inv(tables))))
        return self._scores[key]

    def start(self, G: np.ndarray, H: np.ndarray | None, weights: np.ndarray, head: Head,
              quant: QuantizedStatistics | None = None,
              changed: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """A new rule: the current statistics and weights go up, every row is covered. Quantized, ``quant``
        holds the fixed-point statistics (``G`` and ``H`` are not read) and ``changed`` the (gradient, Hessian)
        columns it quantized since the last call: only those go up. ``H`` may be None for a coupled head (the
        example-wise logistic loss, whose Hessian entries the coupled histogram builds from ``G``:
        :meth:`mdhom.rules.losses.LogisticExampleWise.hessian`), so only n x L doubles go up per rule."""
        ws = self.ws
        if self.stats is not None:  # the statistics are on the device, updated there after each rule
            self.has_h = True
        elif ws.quantized:
            if quant is None or changed is None:
                raise ValueError("a quantized refinement needs the fixed-point statistics and their changed columns")
            for name, q, cols in (("G", quant.Gq, changed[0]), ("H", quant.Hq, changed[1])):
                self._put_columns(name, q, cols)
            self.has_h = True
        else:
            self._put("G", ws["G"], G, self.stat_dtype)
            self.has_h = H is not None
            if H is not None:
                ws.ensure("H", 8 * self.n * self.h_width)
                self._put("H", ws["H"], H, self.stat_dtype)
        self.quant = quant
        if self._weights is None or not np.array_equal(weights, self._weights):  # without instance sampling: once
            if ws.quantized and not np.isin(weights, (0.0, 1.0)).all():
                raise ValueError("a quantized refinement takes example weights of 0 or 1")
            self._put("weight", ws["weight"], weights, np.float64)
            self._weights = np.array(weights, np.float64)
        self.cur = 2  # every row
        self.masks += 1
        self._staged = 0
        self.restrict(head)

    def _put(self, key: str, dst: cl.Buffer, values: np.ndarray, dtype: np.dtype, offset: int = 0) -> None:
        """``Workspace.put`` that does not wait: pyopencl's event of a copy from host memory waits for the copy
        when it is deleted (its NannyEvent keeps the host array alive), and in the in-order queue that is a wait for
        every launch before it. The events are kept until the next read-back (:meth:`_read`), when they are done."""
        values = np.asarray(values).reshape(-1)
        if values.size == 0:
            return
        host = self.ws.staging(key, values.size, np.dtype(dtype))
        host[...] = values
        self._pending.append(cl.enqueue_copy(self.ws.queue, dst, host, dst_offset=offset, is_blocking=False))

    def _read(self, host: np.ndarray, buf: cl.Buffer) -> np.ndarray:
        """The blocking read of a step or batch (``Workspace.read``); the copies before it are done after it."""
        out = self.ws.read(host, buf)
        self._pending.clear()
        return out

    def _put_columns(self, name: str, q: np.ndarray, cols: np.ndarray) -> None:
        """Label-major int32 columns ``cols`` of ``q`` (C, n) to the device, one copy per run of adjacent columns."""
        n = self.n
        cols = np.asarray(cols, np.intp)
        if cols.size == 0:
            return
        breaks = np.flatnonzero(np.diff(cols) != 1) + 1
        for run in np.split(cols, breaks):
            a, b = int(run[0]), int(run[-1]) + 1
            self._put(name, self._stat(name), q[a:b], np.int32, offset=4 * n * a)

    def restrict(self, head: Head) -> None:
        """The head whose labels the next steps score (its gradient and Hessian columns go up)."""
        ws = self.ws
        if ws.quantized and head.coupled:
            raise ValueError("a quantized refinement needs decomposable head statistics: coupled heads sum float64 "
                             "statistics on a device")
        if not head.coupled and not self.has_h:
            raise ValueError("a head that is not coupled reads the Hessians: start() needs H")
        tables = {}
        if ws.quantized and self.stats is None:
            tables["inv_scale"] = (self.quant.inv_scale(head.labels, head.h_columns), np.float64)
        if head.coupled:  # each packed entry's two labels, the larger first (the coupled histogram's pair_r, pair_c)
            sub_r, sub_c = packed_index(head.k)
            tables["pair_r"], tables["pair_c"] = (head.labels[sub_r], np.int32), (head.labels[sub_c], np.int32)
        places = [(self._head_at["cols"][0], head.labels, np.int32),
                  (self._head_at["cols"][0] + 4 * self.n_labels, head.h_columns, np.int32)]
        places += [(self._head_at[name][0], values, dtype) for name, (values, dtype) in tables.items()]
        end = max(at + np.asarray(v).size * np.dtype(t).itemsize for at, v, t in places)
        host = ws.staging("head", end, np.uint8)
        for at, values, dtype in places:
            host[at: at + np.asarray(values).size * np.dtype(dtype).itemsize].view(dtype)[:] = np.ravel(values)
        # one copy (the gaps between tables as they are); its event kept, so that the copy does not wait
        self._pending.append(cl.enqueue_copy(ws.queue, ws["head"], host, is_blocking=False))
        if ws.quantized and self.stats is not None:  # the head's 2^-k from the device's per-column scales
            self.stats.head_inv(self._tab["inv_scale"], self._tab["cols"], head.k, self.n_labels)
        self.head = head

    def _stat(self, name: str) -> cl.Buffer:
        """The statistics buffer ``name`` ("G" or "H") the histogram reads."""
        return self._stats[name] if self._stats else self.ws[name]

    # ------------------------------------------------------------------------------------------ statistics update
    def load_statistics(self, loss: str, Y: np.ndarray, S: np.ndarray) -> None:
        """From now on the statistics live on the device (quantized, a label-wise loss): the scores ``S`` and labels
        ``Y`` go up once and every column is quantized there; after each rule :meth:`apply_head` updates them, and
        :meth:`start` sends none (:mod:`mdhom.rules.device_update`)."""
        from mdhom.rules.device_update import DeviceStatistics

        if not self.ws.quantized or self.h_width != self.n_labels:
            raise ValueError("the device statistics update runs quantized, for label-wise losses")
        align = max(1, int(self.ws.device.cl_device.mem_base_addr_align) // 8)
        self.stats = DeviceStatistics(self.ws, loss, Y, S, self.ws["GHq"], self.h_off, align,
                                      tuple(f"cov{c}" for c in MASKS))

    def apply_head(self, labels: np.ndarray, scores: np.ndarray) -> None:
        """Add a rule's head to the scores of the rows the current mask covers and re-quantize its columns, on the
        device (no read-back)."""
        self.stats.apply(labels, scores, f"cov{self.cur}", self._pending)

    def cover_rule(self, found: list) -> None:
        """The mask of a rule from every row and its kept conditions (Refinements): a batch's mask may have gone past
        the rule's last condition or stopped before it."""
        self.cur = 2
        for f in found:
            self.add(f)

    def stage_features(self, feature_sets: list[np.ndarray]) -> None:
        """The feature samples of the rule's next steps (at most :attr:`fidx_rows`), drawn ahead by the caller, in one
        copy: :meth:`best` with ``row=j`` searches ``feature_sets[j]`` (the same search as :meth:`best` without a
        row, which copies its sample itself)."""
        m = len(feature_sets)
        if m > self.fidx_rows:
            raise ValueError(f"at most {self.fidx_rows} feature samples go up at once, got {m}")
        table = self.ws.staging("fidx", m * self.n_feat, np.int32)
        for j, fs in enumerate(feature_sets):
            table[j * self.n_feat: j * self.n_feat + len(fs)] = fs
        self._pending.append(cl.enqueue_copy(self.ws.queue, self.ws["fidx"], table, is_blocking=False))
        self._staged = m

    def best(self, features: np.ndarray, row: int | None = None):  # noqa: ANN201 - a Refinement or None
        """The best condition over the sampled ``features`` (ascending) for the rows covered now; one read.
        ``row``: the row of :meth:`stage_features`' table that holds ``features`` (None: copied now)."""
        ws, head = self.ws, self.head
        n, nb, k = self.n, self.n_bins, head.k
        features = np.asarray(features)
        f = len(features)  # the searched features: a sample's index maps back through ``features``
        if nb <= 2 or f == 0:
            return None
        if row is None or not 0 <= row < self._staged:
            self._put("fidx", ws["fidx"], features, np.int32)
            self._staged, row = 0, 0
        if head.coupled:
            if f < self.n_feat:  # the counting sort reads the sampled features' bins side by side
                ws.record("rule_feature_bins", self.k_feature_bins({"row": n, "feat": f}, n_feat=self.n_feat,
                                                                   fidx0=row * self.n_feat))
            return self._coupled.best(features)
        self._search(f, self.k_result, fidx0=row * self.n_feat)
        host = self._read_pinned("res", k + 1, dk.SIDE.dtype)
        self.steps += 1
        return self._refinement(host, features)

    def _search(self, f: int, result: Bound, k: int | None = None, tables: str = "full", fidx0: int = 0) -> None:
        """Launch one step's search over the ``f`` features ``fidx[fidx0 ..]`` into ``result``'s buffer, for the head
        (``k`` labels; ``tables`` "one": the single label a batch's first step chose, :func:`head_columns`)."""
        ws, n, nb = self.ws, self.n, self.n_bins
        k = self.head.k if k is None else k
        kind = "single" if tables == "one" else self.head.kind
        if f != self._mask_key:
            self._put("mask", ws["mask"], np.ones(f, np.uint8), np.uint8)
            self._mask_key = f
        g_stride, h_stride = (n, n) if ws.quantized else (self.n_labels, self.h_width)
        ws.record(self.d_hist.name, self.k_hist[tables, self.cur](
            {"feat": f, "output": k + 1, "pos": n}, n_rows=n, fidx0=fidx0, g_stride=g_stride, h_stride=h_stride, k=k,
            h_at=1 if tables == "one" else self.n_labels))
        ws.record("tree_split_scan", self.k_scan({"node": 1, "feat": f, "output": k + 1, "bin": nb}))
        ws.record(head_gain(kind).kernel_name, self._score(kind, k, tables)(
            {"node": 1, "feat": f, "bin": nb - 2, "dir": 2}, l2=self.l2, l1=self.l1, min_coverage=self.min_coverage))
        ws.record("rule_refine_result", result({"slot": k + 1}, n_feat=f, n_bins=nb))

    def _read_pinned(self, key: str, count: int, dtype: np.dtype) -> np.ndarray:
        """The step's blocking read of ``count`` records of buffer ``key`` into pinned host memory reused per key
        (NVIDIA's driver: half the host time of a read into pageable memory, :meth:`Workspace.read_later`); valid
        until the next read of ``key``."""
        host, _event = self.ws.read_later(key, self.ws[key], count, dtype)
        self.ws.sync()
        self._pending.clear()
        return host

    def _refinement(self, host: np.ndarray, features: np.ndarray, k: int | None = None):  # noqa: ANN202
        """The condition (a Refinement, or None) a step's read-back (k + 1 SIDE records) names, ``features`` the
        step's searched ones, ``k`` its head's labels (default: the head's)."""
        from mdhom.rules.refinement import Refinement

        k, nb = self.head.k if k is None else k, self.n_bins
        value = float(host["value"][0])
        if not value > -np.inf:
            return None
        idx = int(host["index"][0])
        at, rest = divmod(idx, 2 * (nb - 2))
        feat = int(features[at])
        b, op = divmod(rest, 2)
        total = np.concatenate([host["g"][:k], host["h"][:k]])
        return Refinement(-value, feat, "<=" if op == 0 else ">", float(self.edges[feat][b]), total,
                          int(host["h"][k]), b)

    def best_batch(self, feature_sets: list[np.ndarray], restrict_first: bool = False) -> list:
        """:meth:`best` for several steps with one read-back: step j searches ``feature_sets[j]`` over the rows
        covered after step j - 1's winner, which the device applies itself (``rule_cover_best``), as if the host
        had read it and called :meth:`add`. The caller keeps the steps up to the first it rejects (a rejected
        step's successors searched rows no rule covers) and calls :meth:`add` for the last one when it goes on.
        ``restrict_first`` (a single-label head over several labels): the steps after the first search the label
        of the first step's winner (the largest |score|, as :meth:`Head.predict` picks it; chosen on the device by
        ``rule_head_columns`` / ``rule_head_scale``, and :attr:`batch_label` after the read), as the host does
        once a rule has its first condition; the caller then calls :meth:`restrict` with that head before its next
        batch. At most :attr:`lookahead` steps; heads over a coupled Hessian run step by step."""
        ws, head = self.ws, self.head
        m = len(feature_sets)
        if m > self.lookahead:
            raise ValueError(f"a batch holds at most {self.lookahead} steps, got {m}")
        if restrict_first and (head.kind != "single" or head.coupled or head.k < 2):
            raise ValueError("restrict_first takes a single-label head over several labels")
        if head.coupled or m <= 1:
            out: list = []
            for features in feature_sets:  # one read each; stop at the first step without a condition
                if out:
                    self.add(out[-1])
                out.append(self.best(features))
                if out[-1] is None:
                    break
            return out + [None] * (m - len(out))
        sets = [np.asarray(fs) for fs in feature_sets]
        if self.n_bins <= 2 or any(len(fs) == 0 for fs in sets):
            return [None] * m
        n, nb, k = self.n, self.n_bins, head.k
        self.stage_features(sets)  # every step's sample in one upload, step j's at row j
        self._staged = 0  # the table is the batch's: a later best() without a row copies its own
        for j, fs in enumerate(sets):
            if j:  # narrow the mask by step j - 1's winner, over the features it searched
                ws.record("rule_cover_best", self.k_cover_best[self.cur]({"row": n}, n_feat=len(sets[j - 1]),
                                                                         n_bins=nb, fidx0=(j - 1) * self.n_feat))
                self.cur = _NEXT[self.cur]
                self.masks += 1
            tables = "one" if restrict_first and j else "full"
            self._search(len(fs), self.k_result_batch[tables, j], 1 if tables == "one" else k, tables,
                         fidx0=j * self.n_feat)
            if restrict_first and j == 0 and m > 1:  # the label of step 0's winner: the later steps' head
                hk = {"k": k, "l2": self.l2, "l1": self.l1}
                ws.record("rule_head_columns", self.k_head_columns({"i": 2}, h_at=self.n_labels, **hk))
                if self.k_head_scale is not None:
                    ws.record("rule_head_scale", self.k_head_scale({"slot": 2}, **hk))
        chosen = np.full(2, -1, np.int32)
        if restrict_first and m > 1:  # in order before the blocking read below: complete when it returns
            self._pending.append(cl.enqueue_copy(ws.queue, chosen, ws["cols1"], is_blocking=False))
        raw = self._read(np.empty(m * self._res_stride, np.uint8), ws["res_batch"])
        self.batch_label = int(chosen[0])
        self.steps += m
        out = []
        for j, fs in enumerate(sets):
            kj = 1 if restrict_first and j else k
            at = j * self._res_stride
            out.append(self._refinement(raw[at: at + dk.SIDE.dtype.itemsize * (kj + 1)].view(dk.SIDE.dtype), fs, kj))
        return out

    def add(self, found) -> None:  # noqa: ANN001 - a Refinement from best()
        """Narrow the coverage mask by the condition (no sync)."""
        self.ws.record("rule_cover", self.k_cover[self.cur]({"row": self.n}, n_feat=self.n_feat, feat=found.feature,
                                                              bin=found.bin, op=0 if found.op == "<=" else 1,
                                                              missing=self.n_bins - 1))
        self.cur = _NEXT[self.cur]
        self.masks += 1
