"""The fixed-point scale of quantized gradients: the same integers on the host, in numpy and on every device.

Per round and per (output, g|h), (g, h) become ``rint(x * 2^k)`` with the largest k that keeps every sum over the
round's rows within 2^QUANT_BITS: integer histograms, their prefix sums and differences are then exact in any
order, which makes quantized models bit-identical across devices and configurations.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

# |k| bound of the fixed-point exponents: 2^k and 2^-k stay normal doubles, so scaling stays exact
MAX_EXPONENT = 1000
# sums over at most n_rows rows stay within +-2^30, so int32 histogram lanes hold them and their differences and
# the missing-bin add cannot overflow. At 10.5M rows that leaves ~100 levels for max |g| per row: on 200k Higgs rows
# at the same resolution, 50 rounds lost 0.0004 AUC against 2^62 (0.8027 vs 0.8031).
QUANT_BITS = 30


@lru_cache(maxsize=4096)
def quantization_exponent(absmax: float, n_rows: int) -> int:
    """The largest integer k with ``n_rows * absmax * 2^k <= 2^QUANT_BITS`` (clamped to +-MAX_EXPONENT; 0 when
    ``absmax`` is 0). Exact in integers: ``absmax`` is ``mant * 2^(e - 53)`` with an integer ``mant``, so the bound
    reads ``n_rows * mant <= 2^(QUANT_BITS - e + 53 - k)``, and host and reference agree for every input. (Rationals
    gave the same k at ~11 us a value, a round's check of its gradients ~25 us of the host's time; this ~1 us.)"""
    m = float(absmax)
    if not math.isfinite(m):
        raise ValueError("gradients or hessians are not finite (NaN or infinity): cannot quantise them")
    if m == 0.0:
        return 0
    frac, e = math.frexp(abs(m))
    p = max(1, int(n_rows)) * int(frac * (1 << 53))  # n_rows * mant, exact
    k = QUANT_BITS - e + 53 - (p - 1).bit_length()  # (p - 1).bit_length() = ceil(log2 p) for p >= 1
    return max(-MAX_EXPONENT, min(MAX_EXPONENT, k))


def quantization_exponents(absmax: np.ndarray, n_rows: int) -> np.ndarray:
    """(n_outputs, 2) int exponents from (n_outputs, 2) max |g|, max |h|."""
    absmax = np.asarray(absmax, np.float64)
    n = int(n_rows)
    return np.array([quantization_exponent(m, n) for m in absmax.reshape(-1).tolist()],
                    np.int64).reshape(absmax.shape)


def quantization_scales(exponents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scale, inv_scale): 2^k and 2^-k as float64, exact."""
    e = np.asarray(exponents, np.int64)
    return np.ldexp(1.0, e), np.ldexp(1.0, -e)


def quantize(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``rint(x * scale)`` as int64: x (n_rows, n_outputs), scale (n_outputs,). What tree_quantize_gh computes."""
    return np.rint(np.asarray(x, np.float64) * scale).astype(np.int64)


def quantize_gh(grad: np.ndarray, hess: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A round's (g, h), (n_rows, n_outputs) each, in its fixed point: int64 g and h and ``inv_scale`` (n_outputs,
    2), each output's scale from its largest |g| and |h| over the rows (what tree_gh_absmax and tree_quantize_gh
    compute on a device; 0 rows: exponent 0)."""
    n = grad.shape[0]
    absmax = np.zeros((grad.shape[1], 2))
    if n:
        absmax[:, 0], absmax[:, 1] = np.abs(grad).max(axis=0), np.abs(hess).max(axis=0)
    scale, inv_scale = quantization_scales(quantization_exponents(absmax, n))
    return quantize(grad, scale[:, 0]), quantize(hess, scale[:, 1]), inv_scale


def to_real(q: np.ndarray, inv_scale: np.ndarray | None) -> np.ndarray:
    """Integer sums to float64 (round to nearest even) times 2^-k (exact); reals pass through."""
    if inv_scale is None:
        return q
    return q.astype(np.float64) * inv_scale
