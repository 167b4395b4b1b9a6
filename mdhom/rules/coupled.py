"""The head of the example-wise loss over several labels (a coupled label Hessian), in one order of operations:
the numpy reference that ``kernels/rules/coupled_quality.cl`` copies, so the device search picks the reference's
conditions bit for bit.

For a candidate's sums ``g`` (k) and the packed Hessian ``h`` (k(k+1)/2, row-major lower triangle):

- scores: the fixed-order LDL^T solve of (H + l2 I) s = -soft(g, l1) (:mod:`mdhom.mdh.linalg`; LAPACK has no
  order a kernel could copy);
- quality: q = sum_i [s_i (g_i + h_ii s_i / 2 + t_i) + l1 |s_i| + l2 s_i^2 / 2], t_i = sum_{j<i} h_ij s_j (j and i
  ascending): g.s + s'Hs / 2 + l1 |s|_1 + l2 |s|^2 / 2, the loss change of the second-order approximation;
- a quality that is not finite (an overflow, NaN) marks the candidate not allowed (+inf).
"""

from __future__ import annotations

import numpy as np

from mdhom.mdh import linalg


def soft_threshold(g: np.ndarray, l1: float) -> np.ndarray:
    return np.sign(g) * np.maximum(np.abs(g) - l1, 0.0) if l1 > 0 else g


def _diagonal(k: int) -> np.ndarray:
    i = np.arange(k)
    return i * (i + 1) // 2 + i


def scores(g: np.ndarray, h: np.ndarray, l1: float, l2: float) -> np.ndarray:
    """(..., k) optimal scores for sums ``g`` (..., k) and packed Hessians ``h`` (..., k(k+1)/2)."""
    k = g.shape[-1]
    a = np.array(h, dtype=np.float64, copy=True)
    diag = _diagonal(k)
    a[..., diag] = h[..., diag] + l2
    return linalg.solve_packed(a, -soft_threshold(g, l1), k)


def quality(s: np.ndarray, g: np.ndarray, h: np.ndarray, l1: float, l2: float) -> np.ndarray:
    """(...,) quality (lower is better) of scores ``s`` for sums ``g``, ``h``; +inf where not finite."""
    k = g.shape[-1]
    off = np.arange(k) * (np.arange(k) + 1) // 2
    t = np.zeros_like(s)
    for j in range(k - 1):  # t_i += h_ij s_j, j ascending
        t[..., j + 1:] = t[..., j + 1:] + h[..., off[j + 1:] + j] * s[..., j: j + 1]
    hd = h[..., _diagonal(k)]
    qi = s * (g + 0.5 * hd * s + t) + l1 * np.abs(s) + 0.5 * l2 * s * s
    q = np.zeros(s.shape[:-1])
    for i in range(k):
        q = q + qi[..., i]
    return np.where(np.isfinite(q), q, np.inf)
