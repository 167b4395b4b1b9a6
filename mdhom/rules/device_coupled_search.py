"""The coupled heads' step on the device: complete heads over a coupled label Hessian (the example-wise loss) search
with :mod:`mdhom.rules.device_coupled`'s kernels, driven for a :class:`mdhom.rules.device.DeviceRefinement` (whose
buffers, coverage masks and head they read): the covered rows' list once per coverage mask, a stable counting sort of
them by bin per searched feature, then per chunk of features (their statistics within the refinement's
``coupled_budget``) the histogram, scan, quality and result, and one read of every chunk's best.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mdhom.components.lanes import bin_ctype
from mdhom.components.workspace import Bound
from mdhom.rules import device_coupled as dc
from mdhom.rules.device_kernels import MASKS

if TYPE_CHECKING:
    from mdhom.rules.device import DeviceRefinement


class CoupledSearch:
    """The coupled heads' kernels, built once per (labels, chunk, quality scratch), and their step."""

    def __init__(self, refinement: DeviceRefinement) -> None:
        self.refinement = refinement
        self._kernels: dict[str, dict[str, object]] = {}
        self._rows_of = -1  # the coverage mask (DeviceRefinement.masks) the covered rows' list is of

    def kernels(self, k: int, chunk: int) -> dict[str, object]:
        """The coupled search's kernels for heads of ``k`` labels and chunks of ``chunk`` features (built once per
        (k, chunk, quality scratch length)), and its buffers at that size."""
        r = self.refinement
        work = dc.work_len(k, r.head.label_binning)  # the quality kernel's scratch: private when small
        key = f"{k}/{chunk}/{work}"
        if key in self._kernels:
            return self._kernels[key]
        ws, n, nb = r.ws, r.n, r.n_bins
        lanes = dc.lanes_of(k)
        n_chunks = -(-r.n_feat // chunk)
        tiles = -(-n // dc.SORT_TILE)
        block = dc.lane_block(ws.device)
        n_blk = -(-lanes // block)
        ws.ensure("c_hist", 8 * chunk * nb * n_blk * block)
        ws.ensure("c_scan", 8 * chunk * lanes * nb)
        ws.ensure("c_res", 8 * n_chunks * (lanes + 2))
        ws.ensure("c_at", 4 * n)
        ws.ensure("c_ridx", 4 * n)
        ws.ensure("c_count", 4 * r.n_feat * nb * tiles)
        ws.ensure("c_off", 4 * r.n_feat * nb * tiles)
        ws.ensure("c_srows", 4 * r.n_feat * n)
        role = f"{k}/{chunk}"
        bt = bin_ctype(nb)
        k_hist = ws.build(dc.HISTOGRAM, dc.histogram(block), {"feat": chunk, "bin": nb, "blk": n_blk, "pos": n},
                          role=role)
        k_cs = ws.build(dc.COVER_SCAN, dc.cover_scan(), {"row": n})
        k_cr = ws.build(dc.COVER_ROWS, dc.cover_rows(), {"row": n})
        k_sc = ws.build(dc.SORT_COUNT, dc.sort_count(bt), {"feat": r.searched, "bin": nb, "tile": tiles,
                                                           "q": dc.SORT_TILE})
        k_so = ws.build(dc.SORT_OFFSETS, dc.sort_offsets(), {"feat": r.searched, "cell": nb * tiles})
        k_sr = ws.build(dc.SORT_ROWS, dc.sort_rows(bt), {"feat": r.searched, "pos": n})
        k_scan = ws.build(dc.SCAN, dc.scan(), {"feat": chunk, "lane": lanes, "bin": nb}, role=role)
        k_q = ws.build(dc.QUALITY, dc.quality(), {"feat": chunk, "bin": nb - 2, "dir": 2, "work_len": work},
                       role=f"{role}/{work}")
        k_res = ws.build(dc.RESULT, dc.result(), {"lane": lanes + 2}, role=role)
        lists = lambda c: dict(ridx=ws["c_ridx"], at=ws["c_at"], covered=ws[f"cov{c}"])  # noqa: E731
        kernels = {
            # per coverage mask (cov0 / cov1 ping-pong), and for the sort per bins source
            "hist": [Bound(ws, k_hist, lambda c=c: (ws["c_hist"], dict(
                G=ws["G"], weight=ws["weight"], gcol=r._tab["cols"], pair_r=r._tab["pair_r"],
                pair_c=r._tab["pair_c"], srows=ws["c_srows"], off=ws["c_off"], at=ws["c_at"],
                covered=ws[f"cov{c}"]))) for c in MASKS],
            "sort_count": {(src, c): Bound(ws, k_sc, lambda src=src, c=c: (ws["c_count"], dict(
                bins=ws[src], **lists(c)))) for src in ("bins", "sbins") for c in MASKS},
            "sort_offsets": Bound(ws, k_so, lambda: (ws["c_off"], dict(count=ws["c_count"]))),
            "sort_rows": {(src, c): Bound(ws, k_sr, lambda src=src, c=c: (ws["c_srows"], dict(
                bins=ws[src], **lists(c), off=ws["c_off"]))) for src in ("bins", "sbins") for c in MASKS},
            # the list of covered rows, per coverage mask
            "cover_scan": [Bound(ws, k_cs, lambda c=c: (ws["c_at"], dict(covered=ws[f"cov{c}"]))) for c in MASKS],
            "cover_rows": [Bound(ws, k_cr, lambda c=c: (ws["c_ridx"], dict(covered=ws[f"cov{c}"], at=ws["c_at"])))
                           for c in MASKS],
            "scan": Bound(ws, k_scan, lambda: (ws["c_scan"], dict(hist=ws["c_hist"]))),
            "quality": Bound(ws, k_q, lambda: (ws["best"], dict(scan=ws["c_scan"]))),
            "result": Bound(ws, k_res, lambda: (ws["c_res"], dict(scan=ws["c_scan"], best=ws["best"],
                                                                  best_value=ws["best"]))),
        }
        self._kernels[key] = kernels
        return kernels

    def best(self, features: np.ndarray):  # noqa: ANN201 - a Refinement or None
        """:meth:`DeviceRefinement.best` for a complete head over a coupled Hessian (the sampled features' bins are in
        place)."""
        from mdhom.rules.refinement import Refinement

        r = self.refinement
        ws, head, n, nb = r.ws, r.head, r.n, r.n_bins
        k, f = head.k, len(features)
        lanes = dc.lanes_of(k)
        chunk = dc.feature_chunk(r.searched, lanes, nb, r.coupled_budget)
        kern = self.kernels(k, chunk)
        src, stride = ("sbins", f) if f < r.n_feat else ("bins", r.n_feat)
        n_chunks = -(-f // chunk)
        if self._rows_of != r.masks:  # the covered rows' list, once per coverage mask
            ws.record("rule_cover_scan", kern["cover_scan"][r.cur]({"row": n}))
            ws.record("rule_cover_rows", kern["cover_rows"][r.cur]({"row": n}))
            self._rows_of = r.masks
        # the covered rows grouped by bin per searched feature (a stable counting sort: count, offsets, scatter)
        tiles = -(-n // dc.SORT_TILE)
        block = dc.lane_block(ws.device)
        n_blk = -(-lanes // block)
        ws.record("rule_sort_count", kern["sort_count"][src, r.cur](
            {"feat": f, "bin": nb, "tile": tiles, "q": dc.SORT_TILE}, bin_stride=stride, n_rows=n))
        ws.record("rule_sort_offsets", kern["sort_offsets"]({"feat": f, "cell": nb * tiles}))
        ws.record("rule_sort_rows", kern["sort_rows"][src, r.cur](
            {"feat": f, "pos": n}, bin_stride=stride, n_bins=nb, tile=dc.SORT_TILE, n_rows=n))
        for c in range(n_chunks):
            fc = min(chunk, f - c * chunk)
            ws.record("rule_coupled_histogram", kern["hist"][r.cur](
                {"feat": fc, "bin": nb, "blk": n_blk, "pos": n}, feat0=c * chunk, g_stride=r.n_labels, k=k,
                width=lanes - 2, n_tiles=tiles, n_rows=n))
            ws.record("rule_coupled_scan", kern["scan"]({"feat": fc, "lane": lanes, "bin": nb},
                                                        lane_stride=n_blk * block))
            ws.record("rule_coupled_quality", kern["quality"](
                {"feat": fc, "bin": nb - 2, "dir": 2}, k=k, n_lanes=lanes, l2=r.l2, l1=r.l1,
                min_coverage=r.min_coverage, work_len=dc.work_len(k, head.label_binning),
                **dc.binning_params(k, head.label_binning)))
            ws.record("rule_coupled_result", kern["result"]({"lane": lanes + 2}, n_feat=fc, n_bins=nb, chunk=c))
        host = r._read(np.empty((n_chunks, lanes + 2)), ws["c_res"])
        r.steps += 1
        win = int(np.argmax(host[:, -2]))  # the first of equal values: the earlier chunk's features come first
        value = float(host[win, -2])
        if not value > -np.inf:
            return None
        at, rest = divmod(int(host[win, -1]), 2 * (nb - 2))
        feat = int(features[win * chunk + at])
        b, op = divmod(rest, 2)
        side = host[win, :lanes]
        return Refinement(-value, feat, "<=" if op == 0 else ">", float(r.edges[feat][b]), side[:lanes - 2].copy(),
                          int(side[lanes - 1]), b)
