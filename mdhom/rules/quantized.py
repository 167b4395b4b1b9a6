"""Fixed-point statistics of a rule (``precision="quantized"``): what lets a device sum them in any order.

The double refinement sums every (feature, label, bin) lane in one fixed order to agree with numpy to the bit,
which pins one work-item per lane: on a GPU a 20000-row step then takes tens of milliseconds. Quantized, each
statistics column a rule reads becomes ``rint(x * 2^k)`` with the trees' exponent rule
(:func:`mdhom.components.quantize.quantization_exponent`: every sum over the fit's rows stays within 2^30), once
per rule. The device adds those integers in int32 lanes (parallel, atomics allowed); the numpy reference adds
their real values ``q * 2^-k`` in doubles, which is exact too (every partial sum is a multiple of 2^-k below
2^30 * 2^-k), so both see the same sums and choose the same conditions. The head of the rule and the score
update use the quantized sums the search found; the gradient statistics themselves stay float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mdhom.components.quantize import quantization_exponents, quantization_scales


@dataclass(frozen=True)
class RuleQuantization:
    """One rule's fixed point: per statistics column used, its scale 2^k and 2^-k; the quantized columns."""

    g_cols: np.ndarray  # the gradient columns quantized (the head's labels)
    h_cols: np.ndarray  # the Hessian columns quantized (the head's Hessian columns)
    g_inv: np.ndarray  # 2^-k per column of G (1.0 where not used)
    h_inv: np.ndarray
    Gq: np.ndarray  # int32 (n, L): the quantized gradients, 0 in columns not used
    Hq: np.ndarray  # int32 (n, W)

    @classmethod
    def of(cls, G: np.ndarray, H: np.ndarray, g_cols: np.ndarray, h_cols: np.ndarray) -> RuleQuantization:
        """Quantize the columns ``g_cols`` of G and ``h_cols`` of H for sums over at most all n rows."""
        n = G.shape[0]
        g_cols, h_cols = np.unique(np.asarray(g_cols, np.int64)), np.unique(np.asarray(h_cols, np.int64))
        out = []
        for M, cols in ((G, g_cols), (H, h_cols)):
            sub = M[:, cols]
            absmax = np.abs(sub).max(axis=0) if n else np.zeros(cols.size)
            scale, inv = quantization_scales(quantization_exponents(absmax, n))
            q = np.zeros(M.shape, np.int32)
            q[:, cols] = np.rint(sub * scale).astype(np.int32)
            full_inv = np.ones(M.shape[1])
            full_inv[cols] = inv
            out += [full_inv, q]
        return cls(g_cols, h_cols, out[0], out[2], out[1], out[3])

    def covers(self, g_cols: np.ndarray, h_cols: np.ndarray) -> bool:
        """Whether the columns a (restricted) head reads were all quantized."""
        return bool(np.isin(g_cols, self.g_cols).all() and np.isin(h_cols, self.h_cols).all())

    def reals(self) -> tuple[np.ndarray, np.ndarray]:
        """The quantized statistics as the reals they stand for (``q * 2^-k``, exact): the numpy search's input."""
        return self.Gq * self.g_inv, self.Hq * self.h_inv

    def inv_scale(self, g_cols: np.ndarray, h_cols: np.ndarray) -> np.ndarray:
        """(k + 1, 2) 2^-k per head slot (g, h) and 1.0 for the count slot: the score kernel's ``inv_scale``."""
        inv = np.ones((len(g_cols) + 1, 2))
        inv[:-1, 0], inv[:-1, 1] = self.g_inv[np.asarray(g_cols)], self.h_inv[np.asarray(h_cols)]
        return inv
