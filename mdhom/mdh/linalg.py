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

from functools import lru_cache
from importlib import resources

import numpy as np

SOURCE = resources.files("mdhom.kernels").joinpath("linalg", "packed_ldl.cl").read_text()


def packed_size(k: int) -> int:
    """Entries of a packed k x k symmetric matrix: k(k+1)/2."""
    return k * (k + 1) // 2


@lru_cache(maxsize=16)
def _offsets(k: int) -> np.ndarray:
    """Where each row starts in packed storage; also the diagonal's positions shifted by the row index."""
    i = np.arange(k, dtype=np.intp)
    return i * (i + 1) // 2


def _safe_divide(w: np.ndarray, d: np.ndarray) -> np.ndarray:
    """w / d, 0.0 where d is 0 (the kernel's ``(d == 0.0) ? 0.0 : w / d``)."""
    zero = d == 0.0
    return np.where(zero, 0.0, w / np.where(zero, 1.0, d))


def ldl_packed(a: np.ndarray, k: int) -> np.ndarray:
    """The kernel's ``mdh_ldl_packed`` on a batch (..., k(k+1)/2): L below the diagonal, D on it (a copy)."""
    a = np.array(a, dtype=np.float64, copy=True)
    if a.shape[-1] != packed_size(k):
        raise ValueError(f"packed matrices of {k} x {k} have {packed_size(k)} entries, got {a.shape[-1]}")
    off = _offsets(k)
    for i in range(k):
        row = a[..., off[i]: off[i] + i + 1]  # a view: updates land in a
        for m in range(i - 1):  # W_ij -= W_im L_jm for every j in m+1 .. i-1, m ascending
            js = np.arange(m + 1, i)
            row[..., m + 1: i] = row[..., m + 1: i] - row[..., m: m + 1] * a[..., off[js] + m]
        d = row[..., i].copy()
        w = row[..., :i].copy()
        diag = a[..., off[:i] + np.arange(i)]
        lij = _safe_divide(w, diag)
        for j in range(i):  # D_i = A_ii - sum_j W_ij L_ij, j ascending
            d = d - w[..., j] * lij[..., j]
        row[..., :i] = lij
        row[..., i] = d
    return a


def ldl_solve_packed(f: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """The kernel's ``mdh_ldl_solve_packed``: x with L D L^T x = b for factors ``f`` (..., k(k+1)/2) from
    :func:`ldl_packed` and right-hand sides ``b`` (..., k)."""
    x = np.array(b, dtype=np.float64, copy=True)
    off = _offsets(k)
    for j in range(k - 1):  # forward, j ascending
        i = np.arange(j + 1, k)
        x[..., j + 1:] = x[..., j + 1:] - f[..., off[i] + j] * x[..., j: j + 1]
    x = _safe_divide(x, f[..., off + np.arange(k)])
    for j in range(k - 1, 0, -1):  # backward, j descending
        x[..., :j] = x[..., :j] - f[..., off[j]: off[j] + j] * x[..., j: j + 1]
    return x


def solve_packed(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """x with A x = b for packed symmetric ``a`` (..., k(k+1)/2) and ``b`` (..., k), in the kernel's order."""
    return ldl_solve_packed(ldl_packed(a, k), b, k)
