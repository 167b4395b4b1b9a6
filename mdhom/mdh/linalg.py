"""Small dense linear algebra for scalar functions: a fixed-order LDL^T factorisation and solve of a symmetric
matrix in packed lower-triangular storage (``kernels/linalg/packed_ldl.cl``), and its numpy twin here.

Why its own solver: a description over candidates whose scalar function solves each candidate's small system (a
batched solve) must give the numpy reference's bits on every device, so both sides need one order of operations;
LAPACK's blocked, pivoting routines have none that OpenCL could copy. The numpy twin runs the same loops,
vectorised over a batch of matrices (and, where the order per element allows, over a row), so every element sees
the same operations in the same order as in the kernel. The matrix goes into the description's
:class:`~mdhom.mdh.Scratch` memory (it is too large for private memory at a hundred labels), e.g.::

    Description(..., preamble=mdh.linalg.SOURCE, scratch=mdh.Scratch("work", "double", "work_len"), ...)
    # scalar: copy the packed matrix to work, mdh_ldl_packed(work, k); copy b to work + P;
    #         mdh_ldl_solve_packed(work, k, work + P)
"""

from __future__ import annotations

from importlib import resources

import numpy as np

SOURCE = resources.files("mdhom.kernels").joinpath("linalg", "packed_ldl.cl").read_text()


def packed_size(k: int) -> int:
    """Entries of a packed k x k symmetric matrix: k(k+1)/2."""
    return k * (k + 1) // 2


def _safe_divide(w: np.ndarray, d: np.ndarray) -> np.ndarray:
    """w / d, 0.0 where d is 0 (the kernel's ``(d == 0.0) ? 0.0 : w / d``)."""
    zero = d == 0.0
    return np.where(zero, 0.0, w / np.where(zero, 1.0, d))


def _unpack_lower(a: np.ndarray, k: int) -> np.ndarray:
    """(..., k, k) with the packed lower triangle (other entries 0): rows and columns become strided views."""
    rows, cols = np.tril_indices(k)
    out = np.zeros(a.shape[:-1] + (k, k))
    out[..., rows, cols] = a
    return out


def _pack_lower(m: np.ndarray, k: int) -> np.ndarray:
    rows, cols = np.tril_indices(k)
    return m[..., rows, cols]


def _ldl_full(m: np.ndarray, k: int) -> np.ndarray:
    """The factorisation in place on a lower triangle held as full matrices, column by column (right-looking): at
    step j, L_ij = W_ij / D_j below the diagonal, then every later entry (i, c), c <= i, loses W_ij L_cj. Each entry
    so sees the kernel's operations in the kernel's order (its terms by ascending j), with k vectorised steps
    instead of the kernel's k^2 / 2 loops (the upper triangle gets scratch values, never read)."""
    for j in range(k):
        w = m[..., j + 1:, j].copy()
        lj = _safe_divide(w, m[..., j, j][..., None])
        m[..., j + 1:, j] = lj
        m[..., j + 1:, j + 1:] -= w[..., :, None] * lj[..., None, :]
    return m


def ldl_packed(a: np.ndarray, k: int) -> np.ndarray:
    """The kernel's ``mdh_ldl_packed`` on a batch (..., k(k+1)/2): L below the diagonal, D on it (a copy)."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape[-1] != packed_size(k):
        raise ValueError(f"packed matrices of {k} x {k} have {packed_size(k)} entries, got {a.shape[-1]}")
    return _pack_lower(_ldl_full(_unpack_lower(a, k), k), k)


def _solve_full(f: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    x = np.array(b, dtype=np.float64, copy=True)
    for j in range(k - 1):  # forward, j ascending
        x[..., j + 1:] = x[..., j + 1:] - f[..., j + 1:, j] * x[..., j: j + 1]
    x = _safe_divide(x, np.diagonal(f, axis1=-2, axis2=-1))
    for j in range(k - 1, 0, -1):  # backward, j descending
        x[..., :j] = x[..., :j] - f[..., j, :j] * x[..., j: j + 1]
    return x


def ldl_solve_packed(f: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """The kernel's ``mdh_ldl_solve_packed``: x with L D L^T x = b for factors ``f`` (..., k(k+1)/2) from
    :func:`ldl_packed` and right-hand sides ``b`` (..., k)."""
    return _solve_full(_unpack_lower(np.asarray(f, dtype=np.float64), k), b, k)


def solve_packed(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """x with A x = b for packed symmetric ``a`` (..., k(k+1)/2) and ``b`` (..., k), in the kernel's order."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape[-1] != packed_size(k):
        raise ValueError(f"packed matrices of {k} x {k} have {packed_size(k)} entries, got {a.shape[-1]}")
    return _solve_full(_ldl_full(_unpack_lower(a, k), k), b, k)
