"""Arithmetic that gives the same bits on every CPU and every OpenCL device: what the reference trains with.

numpy sends ``np.exp`` and ``np.log`` to SIMD code chosen at run time (AVX-512 versions on CPUs that have it,
libm elsewhere), and their last bits differ; ``np.sum`` adds pairwise with eight accumulators from eight terms
on, an order no kernel uses. Either made the numpy reference's softmax models differ from the devices' (whose
kernels sum outputs in index order), so the training path uses only what is below: IEEE's correctly rounded
``+ - * /``, exact exponent handling (``frexp``, ``ldexp``, ``rint``) and fixed polynomials, evaluated in a
fixed order. ``kernels/trees/loss.cl`` computes :func:`exp_nonpositive` with the same operations (FP_CONTRACT
OFF, constants passed as hex literals), so double precision agrees to the bit by construction.
"""

from __future__ import annotations

import math

import numpy as np

# exp(x) = 2^k exp(r), x = k ln2 + r, |r| <= ln2 / 2 (fdlibm's two-part ln2: k * LN2_HI is exact), and exp(r) as
# its Taylor polynomial of degree 13 (error below 1e-17 on that interval) by Horner's rule.
INV_LN2 = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
EXP_COEFFS = tuple(1.0 / math.factorial(n) for n in range(13, -1, -1))  # highest degree first
EXP_MIN = -746.0  # exp(-746) rounds to 0 in double

# log(1 + f) = 2 atanh(s), s = f / (2 + f), as 2s + s R(s^2): fdlibm's e_log.c minimax coefficients Lg1..Lg7
LOG_COEFFS = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
              1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)
SQRT_HALF = 0.70710678118654757


# elements :func:`exp_nonpositive` takes at a time, in place: its 30-odd passes stay in a core's cache (10^7 scores,
# the sigmoid of a prediction's: 0.615 -> 0.073 s on a 2-core EPYC, the same bits)
_EXP_BLOCK = 1 << 14


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 (the only arguments the losses need: they subtract the maximum first)."""
    x = np.asarray(x, np.float64)
    out = np.empty(x.shape)
    flat, dst = x.reshape(-1), out.reshape(-1)
    for lo in range(0, flat.size, _EXP_BLOCK):
        v = np.maximum(flat[lo:lo + _EXP_BLOCK], EXP_MIN)
        k = np.rint(v * INV_LN2)
        r = v - k * LN2_HI
        r -= k * LN2_LO
        p = np.full_like(r, EXP_COEFFS[0])
        for c in EXP_COEFFS[1:]:
            p *= r
            p += c
        with np.errstate(invalid="ignore"):  # NaN in, NaN out
            np.ldexp(p, k.astype(np.int32), out=dst[lo:lo + _EXP_BLOCK])
    return out if out.ndim else out[()]


def log_positive(x: np.ndarray) -> np.ndarray:
    """log(x) within 1 ulp for x > 0 (0 gives -inf, a negative x or NaN gives NaN, inf gives inf)."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(x)  # x = m 2^e exactly, m in [0.5, 1) (subnormals included)
    low = m < SQRT_HALF  # to m in [sqrt(1/2), sqrt(2)) so that |f| <= 0.29
    m = np.where(low, m * 2.0, m)
    k = (e - low).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = m - 1.0
        s = f / (2.0 + f)
        z = s * s
        w = z * z
        c = LOG_COEFFS
        t1 = w * (c[1] + w * (c[3] + w * c[5]))
        t2 = z * (c[0] + w * (c[2] + w * (c[4] + w * c[6])))
        r = t2 + t1
        hfsq = 0.5 * f * f
        out = k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
    out = np.where(x == 0.0, -np.inf, out)
    out = np.where(np.isinf(x) & (x > 0), np.inf, out)
    return np.where((x < 0) | np.isnan(x), np.nan, out)


def log1p_nonnegative(x: np.ndarray) -> np.ndarray:
    """log(1 + x) for x >= 0, accurate for tiny x too: log(u) * x / (u - 1) with u = 1 + x rounded (the
    quotient corrects the rounding of u; Goldberg's rule)."""
    x = np.asarray(x, np.float64)
    u = 1.0 + x
    d = u - 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d == 0.0, x, log_positive(u) * (x / np.where(d == 0.0, 1.0, d)))


def sum_in_order(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """The sum along ``axis`` added in index order (a running sum, as the kernels add), never pairwise."""
    a = np.asarray(a)
    if a.shape[axis] == 0:
        return np.sum(a, axis=axis)
    if a.shape[axis] == 1 and a.dtype.kind == "f":  # one output (a split search's child sums): the element itself
        return a.take(0, axis=axis)
    return np.take(np.cumsum(a, axis=axis), -1, axis=axis)
