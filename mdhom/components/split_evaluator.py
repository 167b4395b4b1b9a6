"""The split evaluator: the split search's launches over a batch of histograms, under a pluggable gain, and the
unpacking of its result (one read per split step). The descriptions it launches, their heuristics and tuner inputs
are :mod:`mdhom.components.split`'s, :mod:`mdhom.components.split_result`'s (the packed result) and
:mod:`mdhom.components.split_categorical`'s (categorical fits)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyopencl as cl

from mdhom.components.histogram_builder import FEW_NODES, LEVEL_NODES
from mdhom.components.lanes import hist_gh_type, split_type, vector_forms
from mdhom.components.split import SCAN, XGBOOST_GAIN, Gain, Splits, score_spec, split_scan, split_score
from mdhom.components.split_categorical import CAT_LEFT, CAT_SCAN, split_cat_left, split_scan_cat
from mdhom.components.split_result import SUMS, result_type, split_sums
from mdhom.components.workspace import Bound, Workspace


def result_buffers(ws: Workspace, summed: bool) -> dict[str, cl.Buffer]:
    """What the statements of the packed result (:func:`mdhom.components.split_result.result_code`) read, by input name:
    the evaluator's ``tree_split_sums`` and the look-ahead's table maker (``RowPartitioner.apply_searched``) bind
    the same buffers (the histograms ``hist`` stand in for each launch's view)."""
    return dict(scan=ws["scan"], hist=ws["arena"], best=ws["best"], best_value=ws["best"],
                **({"cat_mode": ws["cat_mode"]} if summed else {}),
                **({"inv_scale": ws["inv_scale"]} if ws.quantized else {}))


class SplitEvaluator:
    """The best split of every node of a batch of histograms (a view of the histogram builder's arena, in place where
    the device has sub-buffers: :meth:`mdhom.components.histogram_builder.HistogramBuilder.view`), under a pluggable
    :class:`Gain`."""

    def __init__(self, ws: Workspace, gain: Gain = XGBOOST_GAIN, summed: bool | None = None) -> None:
        """``summed``: score in the vector form, which sums each feature's bins as it walks them, so that a numeric
        fit's search launches no scan before it (``None``: where the device builds vector forms,
        :func:`mdhom.components.lanes.vector_forms`); ``self.summed`` says whether the build has it (not in single
        precision, nor where the gain has no vector form)."""
        self.ws, self.gain = ws, gain
        p, b, k, f = ws.precision, ws.n_bins, ws.n_outputs, ws.n_features
        vector = vector_forms(ws.device) if summed is None else bool(summed)
        self.d_score = split_score(b, k, p, gain, vector=vector)
        self.summed = self.d_score.vector is not None
        self.d_sums = split_sums(b, k, p, summed=self.summed)
        self.res_dtype = result_type(p).dtype
        self.best_dtype = split_type(p).dtype
        self.categorical = ws.cat_mode is not None
        # whether a search launches no scan: categorical features' orders and fits without candidate bins still need
        # it (what a fit's layout reports as ``summed``)
        self.skips_scan = self.summed and b > 2 and not self.categorical
        self.ensure(16)
        ws.ensure("feature_mask", max(1, f))
        ws.ensure("inv_scale", 16 * k)
        inv = (lambda: {"inv_scale": ws["inv_scale"]}) if ws.quantized else dict
        # the split search runs for one split's two children and for whole batches: a build for each regime. The
        # histograms are read where they are: every launch is given their buffer (a view of the histogram builder's
        # arena), the kernels bound to the arena until the first
        if self.categorical or self.summed:  # (a numeric fit's are all 0: every feature's bins summed in order)
            ws.ensure("cat_mode", f)
            ws.put("cat_mode", ws["cat_mode"], ws.cat_mode if self.categorical else np.zeros(f), np.uint8)
        cats = (lambda: {"cat_mode": ws["cat_mode"]}) if self.summed else dict
        if self.categorical:
            self.d_scan = split_scan_cat(b, p)
            scan = [ws.build(CAT_SCAN, self.d_scan, {"node": n, "feat": f, "output": k, "bin": b, "bin2": b}, role=r)
                    for n, r in ((1, ""), (LEVEL_NODES, "levels"))]
            self.k_scan = [Bound(ws, c, lambda: (ws["scan"], dict(hist=ws["arena"], cat_mode=ws["cat_mode"],
                                                                  **inv()))) for c in scan]
        else:
            self.d_scan = split_scan(b, p)
            scan = [ws.build(SCAN, self.d_scan, {"node": n, "feat": f, "output": k, "bin": b}, role=r)
                    for n, r in ((1, ""), (LEVEL_NODES, "levels"))]
            self.k_scan = [Bound(ws, c, lambda: (ws["scan"], dict(hist=ws["arena"]))) for c in scan]
        self._mask_key: bytes | None = None
        self._values: tuple[tuple, dict[str, object]] = ((), {})  # the gain's parameters as the kernel takes them
        if b > 2:
            spec = score_spec(gain)
            score = [ws.build(spec, self.d_score, {"node": n, "feat": f, "bin": b - 2, "dir": 2}, role=r)
                     for n, r in ((1, ""), (LEVEL_NODES, "levels"))]
            sums = ws.build(SUMS, self.d_sums, {"node": 1, "output": k})

            def score_buffers():  # noqa: ANN202
                return ws["best"], dict(scan=ws["scan"], hist=ws["arena"], feature_mask=ws["feature_mask"],
                                        **cats(), **inv())

            self.k_score = [Bound(ws, c, score_buffers) for c in score]
            self.k_sums = Bound(ws, sums, lambda: (ws["res"], result_buffers(ws, self.summed)))
            if self.categorical:
                self.d_cat_left = split_cat_left(b, k, p)
                left = ws.build(CAT_LEFT, self.d_cat_left, {"node": 1, "bin": b})
                self.k_cat_left = Bound(ws, left, lambda: (ws["cat_left"], dict(
                    hist=ws["arena"], best=ws["best"], cat_mode=ws["cat_mode"], **inv())))

    def ensure(self, n: int) -> None:
        """Room for a search over ``n`` nodes."""
        ws = self.ws
        ws.ensure("scan", n * ws.node_bytes)
        ws.ensure("best", n * self.best_dtype.itemsize)
        ws.ensure("res", n * ws.n_outputs * self.res_dtype.itemsize)
        if self.categorical:
            ws.ensure("cat_left", n * ws.n_bins)

    def _mask(self, feature_mask: np.ndarray) -> None:
        ws = self.ws
        mask = np.asarray(feature_mask, bool).reshape(ws.n_features)
        key = mask.tobytes()
        if key != self._mask_key:  # a new mask per tree at most
            ws.put("mask", ws["feature_mask"], mask, np.uint8)
            self._mask_key = key

    def search(self, hist: cl.Buffer, n: int, feature_mask: np.ndarray, params: object,
               inv_scale: Callable[[], np.ndarray | None], then: Callable[[], None] | None = None) -> Splits:
        """The best split of each of the ``n`` nodes whose histograms ``hist`` holds; ``params`` holds the
        gain's parameters as attributes (a :class:`~mdhom.trees.backend.SplitParams` for XGBoost's gain);
        ``inv_scale()`` gives the round's 2^-k per (output, g|h) when quantized, asked only where no bin is a
        candidate (the records hold reals, which the device made with its own copy). One blocking read; a second
        one, of the left tables, only when the fit has categorical features and a categorical split won. ``then``
        runs after the launches, before the read (host work that overlaps the search)."""
        ws = self.ws
        if self._launch(hist, n, feature_mask, params, then):
            return self._totals_only(n, inv_scale())
        return self._unpack(n, ws.read(np.empty((n, ws.n_outputs), self.res_dtype), ws["res"]))

    def score_only(self, hist: cl.Buffer, n: int, feature_mask: np.ndarray, params: object) -> None:
        """:meth:`search` up to the best split of each node (``best``), without its packed result and without
        waiting: a look-ahead's table maker writes that result (``RowPartitioner.apply_searched``, one launch fewer a
        level), and :meth:`result_later` reads it after. Numeric splits over at least 3 bins only."""
        if self.categorical or self.ws.n_bins <= 2:
            raise ValueError("score_only: numeric splits over at least 3 bins only")
        self._launch(hist, n, feature_mask, params, None, sums=False)

    def result_later(self, n: int, key: int = 0) -> Callable[[], Splits]:
        """The packed result of the last search over ``n`` nodes copied to the host behind what is queued: the
        returned function waits for it. Results in flight at once need distinct ``key``s (their host memory)."""
        ws = self.ws
        host, event = ws.read_later(f"split_result{key}", ws["res"], n * ws.n_outputs, self.res_dtype)
        host = host.reshape(n, ws.n_outputs)

        def result() -> Splits:
            event.wait()
            return self._unpack(n, host)

        return result

    def _launch(self, hist: cl.Buffer, n: int, feature_mask: np.ndarray, params: object,
                then: Callable[[], None] | None, sums: bool = True) -> bool:
        """The search's launches (``sums``: and its packed result); True when there are no candidate bins (only the
        scan ran)."""
        ws = self.ws
        f, k, b = ws.n_features, ws.n_outputs, ws.n_bins
        self.ensure(n)
        few = n <= FEW_NODES
        r = ws.real.type
        smooth = {"cat_smooth": r(getattr(params, "cat_smooth", 0.0))} if self.categorical else {}
        sizes = {"node": n, "feat": f, "output": k, "bin": b} | ({"bin2": b} if self.categorical else {})
        view = {"hist": hist}
        if not self.skips_scan:  # (no candidates: the totals are read from the scan)
            ws.record(self.d_scan.name, self.k_scan[0 if few else 1](sizes, view, **smooth))
        if b <= 2:
            if then is not None:
                then()
            return True
        self._mask(feature_mask)
        raw = tuple(getattr(params, p) for p in self.gain.params)
        if raw != self._values[0]:  # the same parameters all fit long: numpy scalars made once
            self._values = (raw, {p: r(v) for p, v in zip(self.gain.params, raw, strict=True)})
        values = self._values[1]
        ws.record(self.d_score.name, self.k_score[0 if few else 1]({"node": n, "feat": f, "bin": b - 2, "dir": 2}, view,
                                                                   **values))
        if sums:
            ws.record("tree_split_sums", self.k_sums({"node": n, "output": k}, view, n_feat=f))
        if self.categorical:
            ws.record("tree_split_cat_left", self.k_cat_left({"node": n, "bin": b}, view, n_feat=f, **smooth))
        if then is not None:
            ws.queue.flush()  # the launches go to the device before the host's work, not with the read after it
            then()
        return False

    def _totals_only(self, n: int, inv_scale: np.ndarray | None) -> Splits:
        """No candidate bins: only the node totals, the last prefix sum of feature 0."""
        ws = self.ws
        f, k, b = ws.n_features, ws.n_outputs, ws.n_bins
        out = Splits.none(n, k, np.zeros((n, k, 2)))
        scan = np.empty((n, f, k, b), hist_gh_type(ws.precision).dtype)
        scan = ws.read(scan, ws["scan"])[:, 0, :, b - 1]
        inv = inv_scale if ws.quantized else np.ones((k, 2))
        out.total[:, :, 0], out.total[:, :, 1] = scan["g"] * inv[:, 0], scan["h"] * inv[:, 1]
        return out

    def _unpack(self, n: int, host: np.ndarray) -> Splits:
        """The Splits of a search's packed result ``host`` ((n, n_outputs) records)."""
        ws = self.ws
        k, b = ws.n_outputs, ws.n_bins
        # the seven reals of each record (lg lh rg rh tg th gain) as one array, the fields views of it, in few numpy
        # calls: this runs between a step's read-back and its next launch, while the device waits
        raw = host.view(ws.real).reshape(n, k, -1)[:, :, :7].astype(np.float64)
        gain = raw[:, 0, 6]
        idx = host["index"][:, 0]  # a view of ``host``, which may be reused memory: only read here
        ok = np.isfinite(gain)
        if not ok.all():  # no valid split: gain -inf, feature and bin 0, not default-left, child sums 0
            raw[~ok, :, 0:4] = 0.0
            gain = np.where(ok, gain, -np.inf)
            idx = np.where(ok, idx, np.int32(1))
        n_cand = b - 2
        feat, rest = np.divmod(idx, np.int32(2 * n_cand))  # new arrays; rest: 2 * bin + (0: missing values go left)
        raw.flags.writeable = False  # the Splits below are views of it: read-only, so no caller writes into another
        out = Splits(gain=gain, feature=feat, bin=rest >> 1, default_left=(rest & 1) == 0, left_sum=raw[:, :, 0:2],
                     right_sum=raw[:, :, 2:4], total=raw[:, :, 4:6])
        if self.categorical:
            out.cat_left = np.zeros((n, b), bool)
            if np.any(ws.cat_mode[out.feature[ok]]):  # a second read only when a categorical split won
                out.cat_left[:] = ws.read(np.empty((n, b), np.uint8), ws["cat_left"]) != 0
        return out
