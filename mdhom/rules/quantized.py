"""Fixed-point statistics of a rule fit (``precision="quantized"``): what lets a device sum them in any order.

The double refinement sums every (feature, label, bin) lane in one fixed order to agree with numpy to the bit,
which pins one work-item per lane: on a GPU a 20000-row step then takes tens of milliseconds. Quantized, each
statistics column a rule reads is ``rint(x * 2^k)`` with the trees' exponent rule
(:func:`mdhom.components.quantize.quantization_exponent`: every sum over the fit's rows stays within 2^30). The
device adds those integers in int32 lanes (parallel, atomics allowed); the numpy reference adds their reals
``q * 2^-k`` in doubles, which is exact too (every partial sum is a multiple of 2^-k below 2^30 * 2^-k), so both
see the same sums and choose the same conditions. The gradient statistics themselves stay float64.

A column is quantized again only after a rule changed it (a decomposable loss changes the head's labels only),
and the integers are kept label-major, so a device reads a column's rows contiguously and only the columns
that changed travel to it.
"""

from __future__ import annotations

import numpy as np

from mdhom.components.quantize import quantization_exponents, quantization_scales, quantize


def _quantize(M: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int32 (len(cols), n) fixed point of the columns, their 2^-k): the trees' rule, per column."""
    sub = M[:, cols]
    n = M.shape[0]
    absmax = np.abs(sub).max(axis=0) if n else np.zeros(cols.size)
    scale, inv = quantization_scales(quantization_exponents(absmax, n))
    return np.ascontiguousarray(quantize(sub, scale).T, np.int32), inv


class QuantizedStatistics:
    """The fixed point of every statistics column a rule has read, label-major: ``Gq`` (L, n) and ``Hq``
    (W, n) int32, with 2^-k per column (1.0 where never quantized)."""

    def __init__(self, n_rows: int, n_g: int, n_h: int) -> None:
        self.n = int(n_rows)
        self.Gq, self.Hq = np.zeros((n_g, self.n), np.int32), np.zeros((n_h, self.n), np.int32)
        self.g_inv, self.h_inv = np.ones(n_g), np.ones(n_h)
        self.g_fresh, self.h_fresh = np.zeros(n_g, bool), np.zeros(n_h, bool)

    def stale(self, g_cols: np.ndarray | None = None, h_cols: np.ndarray | None = None) -> None:
        """Columns whose float statistics changed (None: every column)."""
        self.g_fresh[slice(None) if g_cols is None else g_cols] = False
        self.h_fresh[slice(None) if h_cols is None else h_cols] = False

    def refresh(self, G: np.ndarray, H: np.ndarray, g_cols: np.ndarray,
                h_cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Quantize the columns a head reads that are not current; returns those (gradient, Hessian) columns."""
        out = []
        for M, q, inv, fresh, cols in ((G, self.Gq, self.g_inv, self.g_fresh, g_cols),
                                       (H, self.Hq, self.h_inv, self.h_fresh, h_cols)):
            cols = np.asarray(cols, np.intp)
            todo = np.unique(cols[~fresh[cols]])
            if todo.size:
                q[todo], inv[todo] = _quantize(M, todo)
                fresh[todo] = True
            out.append(todo)
        return out[0], out[1]

    def atoms(self, labels: np.ndarray, h_cols: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The reals ``q * 2^-k`` of the columns as a head's atoms (n, width): gradients, then Hessians."""
        sel = slice(None) if rows is None else rows
        g = self.Gq[labels][:, sel].T * self.g_inv[labels]
        h = self.Hq[h_cols][:, sel].T * self.h_inv[h_cols]
        return np.concatenate([g, h], axis=1)

    def inv_scale(self, g_cols: np.ndarray, h_cols: np.ndarray) -> np.ndarray:
        """(k + 1, 2) 2^-k per head slot (g, h) and 1.0 for the count slot: the score kernel's ``inv_scale``."""
        if not (self.g_fresh[g_cols].all() and self.h_fresh[h_cols].all()):
            raise ValueError("a head reads statistics columns that are not quantized at their current values")
        inv = np.ones((len(g_cols) + 1, 2))
        inv[:-1, 0], inv[:-1, 1] = self.g_inv[g_cols], self.h_inv[h_cols]
        return inv
