"""The bin matrix of sparse input kept sparse: compressed rows of (feature, bin), every absent cell the missing bin.

A 20000 x 5000 CSR matrix with 100k stored entries bins to 100 MB as a dense uint8 matrix, though all but 0.1 %
of its cells are the missing bin. :class:`SparseBins` holds only the stored entries whose bin is not the missing
one, as compressed rows: ``indptr`` (n_rows + 1), ``indices`` (features, ascending within a row) and ``bins`` (their
bins): 0.6 MB for that matrix. A cell reads as its stored bin, or the missing bin ``n_bins - 1`` (an absent entry is
missing: XGBoost's meaning, :mod:`mdhom.learn.binning`), so every kernel and the numpy reference see exactly the
values of the dense matrix: same sums in the same order, same models, bit for bit.

The numpy reference indexes it like the dense matrix (``bins[rows, f0:f1]``, ``bins[rows, f]``, ``bins[rows,
features]``); OpenCL kernels read it packed into one buffer (:meth:`SparseBins.packed`: int32 ``indptr``, int32
``indices``, then the bins), through ``tree_bin_of`` (``kernels/trees/partition.cl``, ``TREE_SPARSE_BINS``), a
binary search in the row's features. A lookup costs a few reads instead of one, so the layout is used only where it
saves most of the memory (:func:`sparse_pays`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# the sparse layout is used when it needs at most this share of the dense bin matrix's bytes
SPARSE_SHARE = 0.25


def sparse_bytes(n_rows: int, n_stored: int, itemsize: int) -> int:
    """Bytes of the packed layout: int32 row pointers, int32 features and a bin per stored entry."""
    return 4 * (n_rows + 1) + (4 + itemsize) * n_stored


def sparse_pays(n_rows: int, n_features: int, n_stored: int, itemsize: int) -> bool:
    """Whether sparse input with ``n_stored`` entries keeps its bins sparse: when that needs at most
    ``SPARSE_SHARE`` of the dense matrix, and every offset fits the kernels' int32 indices."""
    if n_stored >= 2**31 - 1 or n_rows >= 2**31 - 1 or n_features >= 2**31 - 1:
        return False
    return sparse_bytes(n_rows, n_stored, itemsize) <= SPARSE_SHARE * n_rows * n_features * itemsize


class SparseBins:
    """Compressed rows of bins (see the module docstring); ``dtype`` is the dense matrix's (uint8 or uint16)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, bins: np.ndarray, shape: tuple[int, int],
                 n_bins: int) -> None:
        self.indptr = np.ascontiguousarray(indptr, np.int32)
        self.indices = np.ascontiguousarray(indices, np.int32)
        self.bins = np.ascontiguousarray(bins)
        self.shape = (int(shape[0]), int(shape[1]))
        self.n_bins = int(n_bins)
        self.dtype = self.bins.dtype
        self.ndim = 2
        if self.indptr.shape != (self.shape[0] + 1,) or self.indices.shape != self.bins.shape:
            raise ValueError("SparseBins: indptr needs n_rows + 1 entries and one feature per stored bin")
        self._keys: np.ndarray | None = None

    @classmethod
    def from_dense(cls, bins: np.ndarray, n_bins: int) -> SparseBins:
        """The cells of a dense bin matrix that are not the missing bin."""
        rows, cols = np.nonzero(bins != n_bins - 1)
        indptr = np.zeros(bins.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=bins.shape[0]), out=indptr[1:])
        return cls(indptr, cols, bins[rows, cols], bins.shape, n_bins)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    @property
    def size(self) -> int:
        """Cells of the dense matrix (as numpy's ``size``)."""
        return self.shape[0] * self.shape[1]

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.indices.nbytes + self.bins.nbytes

    def packed(self) -> np.ndarray:
        """One byte buffer for the kernels: int32 indptr, int32 indices, then the bins (``tree_bin_t``)."""
        return np.concatenate([self.indptr.view(np.uint8), self.indices.view(np.uint8), self.bins.view(np.uint8)])

    def toarray(self) -> np.ndarray:
        out = np.full(self.shape, self.n_bins - 1, self.dtype)
        out[np.repeat(np.arange(self.shape[0]), np.diff(self.indptr)), self.indices] = self.bins
        return out

    def max(self) -> int:
        return int(self.bins.max()) if self.bins.size else self.n_bins - 1

    # ------------------------------------------------------------------------------------------ numpy indexing
    def _key(self) -> np.ndarray:
        """row * n_features + feature per stored entry: ascending (rows in order, features ascending in a row)."""
        if self._keys is None:
            rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))
            self._keys = rows * self.shape[1] + self.indices
        return self._keys

    def _lookup(self, rows: np.ndarray, features: np.ndarray) -> np.ndarray:
        keys = self._key()
        want = rows.astype(np.int64) * self.shape[1] + features
        at = np.minimum(np.searchsorted(keys, want), max(0, keys.size - 1))
        out = np.full(want.shape, self.n_bins - 1, self.dtype)
        if keys.size:
            hit = keys[at] == want
            out[hit] = self.bins[at[hit]]
        return out

    def _block(self, rows: np.ndarray, f0: int, f1: int) -> np.ndarray:
        """The dense (rows, f1 - f0) block of the listed rows and features f0 .. f1 - 1."""
        out = np.full((rows.size, max(0, f1 - f0)), self.n_bins - 1, self.dtype)
        if not rows.size or f1 <= f0:
            return out
        keys, base = self._key(), rows.astype(np.int64) * self.shape[1]
        lo, hi = np.searchsorted(keys, base + f0), np.searchsorted(keys, base + f1)
        counts = hi - lo
        total = int(counts.sum())
        if total:
            which = np.repeat(np.arange(rows.size), counts)
            entry = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)
            out[which, self.indices[entry] - f0] = self.bins[entry]
        return out

    def __getitem__(self, key: Any) -> np.ndarray:
        """``[rows, f0:f1]`` (a dense block), ``[rows, f]`` or ``[rows, features]`` (one cell per row), with
        ``rows`` an integer array or a slice."""
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError("SparseBins supports [rows, features] indexing only")
        rows, cols = key
        rows = np.arange(self.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows, np.int64)
        if isinstance(cols, slice):
            f0, f1, step = cols.indices(self.shape[1])
            if step != 1:
                raise TypeError("SparseBins: feature slices need step 1")
            return self._block(rows.reshape(-1), f0, f1).reshape(rows.shape + (max(0, f1 - f0),))
        cols = np.asarray(cols, np.int64)
        rows, cols = np.broadcast_arrays(rows, cols)
        return self._lookup(rows, cols)
