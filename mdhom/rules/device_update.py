"""The statistics update after a rule on the device (:mod:`mdhom.rules.device_stats`' kernels): a thin driver that
owns the scores, the labels and the per-column fixed-point scales, and writes the int32 statistics the refinement's
histogram reads. The host sends the scores once per fit (after the default rule, which it computes as
mlrl-boomer's, in double) and then per rule only the head (its labels and shrunk scores, one small copy); it reads
back what an option needs, when it needs it: the scores (:meth:`scores`: global pruning's measure, the fitted
learner) and a head's fixed-point columns (:meth:`atoms`: instance sampling's sums over every covered example).
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from mdhom.components.lanes import gh_type
from mdhom.components.workspace import Bound, Workspace
from mdhom.rules import device_stats as ds

_GH = gh_type("double").dtype


def _aligned(nbytes: int, align: int) -> int:
    return -(-int(nbytes) // align) * align


class DeviceStatistics:
    """The label-wise statistics of a quantized fit on the device. ``gh`` is the refinement's int32 buffer: the
    gradient columns (label-major, ``n`` rows each) from 0, the Hessian columns from element ``h_off``; ``masks``
    the refinement's coverage mask buffers by name (a rule covers the rows of the one :meth:`apply` is told)."""

    def __init__(self, ws: Workspace, loss: str, Y: np.ndarray, S: np.ndarray, gh: cl.Buffer, h_off: int,
                 align: int, masks: tuple[str, ...]) -> None:
        if loss not in ds.LOSSES:
            raise ValueError(f"the device statistics update takes the losses {', '.join(ds.LOSSES)}, not {loss!r}")
        self.ws, self.loss = ws, loss
        n, L = S.shape
        self.n, self.n_labels, self.h_off = int(n), int(L), int(h_off)
        self.n_cols = L  # gradient columns; the Hessian columns (one per label) follow in the scale table
        # the head of the last rule: its shrunk scores, then its labels at an aligned offset (one copy, two regions)
        self._at_cols = _aligned(8 * L, align)
        # st_new: the new columns' (s, g, h) records, every column's after the upload
        for name, nbytes in (("st_S", 8 * L * n), ("st_Y", L * n), ("st_new", 24 * L * n), ("st_absmax", 16 * L),
                             ("st_scale", 16 * 2 * L), ("st_all", 4 * L), ("st_head", self._at_cols + 4 * L)):
            ws.ensure(name, nbytes)
        self._score = ws["st_head"].get_sub_region(0, 8 * L)
        self._cols = ws["st_head"].get_sub_region(self._at_cols, 4 * L)
        sizes = {"slot": L, "row": n}
        k_apply = ws.build(ds.APPLY[loss], ds.apply_scores(loss), sizes)
        k_abs = ws.build(ds.ABSMAX, ds.stat_absmax(), {"row": n, "slot": L})
        k_scale = ws.build(ds.SCALE, ds.stat_scale(), {"slot": L, "part": 2})
        k_quant = ws.build(ds.QUANTIZE, ds.stat_quantize(), {"slot": L, "part": 2, "row": n})
        k_commit = ws.build(ds.COMMIT, ds.commit_scores(), sizes)
        k_inv = ws.build(ds.HEAD_INV, ds.head_inv(), {"slot": L + 1})
        # per column table (every column after the upload, or the head's) and coverage mask (a Bound binds once)
        tables = {"all": lambda: ws["st_all"], "head": lambda: self._cols}
        self.k_apply = {(t, m): Bound(ws, k_apply, lambda c=c, m=m: (ws["st_new"], dict(
            S=ws["st_S"], Y=ws["st_Y"], covered=ws[m], cols=c(), score=self._score)))
            for t, c in tables.items() for m in masks}
        self.k_absmax = Bound(ws, k_abs, lambda: (ws["st_absmax"], dict(new=ws["st_new"])))
        self.k_scale = {t: Bound(ws, k_scale, lambda c=c: (ws["st_scale"], dict(absmax=ws["st_absmax"], cols=c())))
                        for t, c in tables.items()}
        self.k_quant = {t: Bound(ws, k_quant, lambda c=c: (gh, dict(new=ws["st_new"], cols=c(), scale=ws["st_scale"])))
                        for t, c in tables.items()}
        self.k_commit = Bound(ws, k_commit, lambda: (ws["st_S"], dict(new=ws["st_new"], cols=self._cols)))
        self._mask0 = masks[0]
        self._k_inv = k_inv
        self._inv: dict[tuple[int, int], Bound] = {}
        # once per fit: the scores after the default rule, the labels, and every column's fixed point
        queue = ws.queue
        cl.enqueue_copy(queue, ws["st_S"], np.ascontiguousarray(S.T, np.float64))
        cl.enqueue_copy(queue, ws["st_Y"], np.ascontiguousarray(Y.T, np.uint8))
        cl.enqueue_copy(queue, ws["st_all"], np.arange(L, dtype=np.int32))
        ws.record("rule_apply_scores", self.k_apply["all", self._mask0]({"slot": L, "row": n}, add=0))
        self._requantize("all", L)

    def _requantize(self, table: str, k: int) -> None:
        """The fixed point of the ``k`` new columns (every column: ``table`` "all"; the head's: "head")."""
        ws, n = self.ws, self.n
        ws.record("rule_stat_absmax", self.k_absmax({"row": n, "slot": k}))
        ws.record("rule_stat_scale", self.k_scale[table]({"slot": k, "part": 2}, n_rows=n, h_base=self.n_cols,
                                                          h_at=0))
        ws.record("rule_stat_quantize", self.k_quant[table]({"slot": k, "part": 2, "row": n}, h_base=self.n_cols,
                                                             h_at=0, h_off=self.h_off))

    def apply(self, labels: np.ndarray, scores: np.ndarray, mask: str, pending: list) -> None:
        """Add a head (``labels``, shrunk ``scores``) to the scores of the rows mask ``mask`` covers and re-quantize
        its columns, all queued (``pending`` keeps the head's copy event until the next read-back, so that it does
        not wait)."""
        ws, n = self.ws, self.n
        labels = np.asarray(labels, np.int32).ravel()
        k = labels.size
        host = ws.staging("st_head", self._at_cols + 4 * k, np.uint8)
        host[: 8 * k].view(np.float64)[:] = np.asarray(scores, np.float64).ravel()
        host[self._at_cols: self._at_cols + 4 * k].view(np.int32)[:] = labels
        pending.append(cl.enqueue_copy(ws.queue, ws["st_head"], host, is_blocking=False))
        ws.record("rule_apply_scores", self.k_apply["head", mask]({"slot": k, "row": n}, add=1))
        self._requantize("head", k)
        ws.record("rule_commit_scores", self.k_commit({"slot": k, "row": n}))

    def head_inv(self, out: cl.Buffer, cols: cl.Buffer, k: int, h_at: int) -> None:
        """A head's 2^-k per slot (``k`` labels; its gradient columns ``cols[0 ..]``, Hessian columns ``cols[h_at
        ..]``) into ``out``: the score and result kernels' ``inv_scale``."""
        key = (id(out), id(cols))
        if key not in self._inv:
            self._inv[key] = Bound(self.ws, self._k_inv, lambda: (out, dict(scale=self.ws["st_scale"], cols=cols)))
        self.ws.record("rule_head_inv", self._inv[key]({"slot": k + 1}, k=k, h_base=self.n_cols, h_at=h_at))

    # ------------------------------------------------------------------------------------------ read-backs
    def scores(self) -> np.ndarray:
        """The scores (n, L) as the device holds them (a blocking read)."""
        out = np.empty((self.n_labels, self.n))
        self.ws.read(out, self.ws["st_S"])
        return np.ascontiguousarray(out.T)

    def atoms(self, gh: cl.Buffer, labels: np.ndarray, h_cols: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:meth:`mdhom.rules.quantized.QuantizedStatistics.atoms` of ``rows`` from the device's fixed point
        (blocking reads of the head's columns and the scale table): instance sampling's sums over every covered
        example."""
        ws, n = self.ws, self.n
        table = np.empty(2 * self.n_cols, _GH)
        q = []
        for base, cols in ((0, labels), (self.h_off, h_cols)):
            for c in np.asarray(cols, np.intp):
                col = np.empty(n, np.int32)
                cl.enqueue_copy(ws.queue, col, gh, src_offset=4 * (base + int(c) * n), is_blocking=False)
                q.append(col)
        ws.read(table, ws["st_scale"])
        inv = table["h"]
        k = len(labels)
        g = np.stack(q[:k], axis=1)[rows] * inv[np.asarray(labels, np.intp)]
        h = np.stack(q[k:], axis=1)[rows] * inv[self.n_cols + np.asarray(h_cols, np.intp)]
        return np.concatenate([g, h], axis=1)
