"""The feature matrix as the rule learner reads it: a dense float64 array, or a scipy.sparse matrix kept sparse.

An absent entry of a sparse matrix is 0 (mlrl-boomer's meaning; the trees read it as missing), NaN is missing in
both. The learner reads the matrix column by column (a condition's mask, a feature's values for the exact search
or for its bin edges), so a sparse matrix is kept in CSC form: a column is its stored entries, and a condition
holds on all absent rows alike (whether 0 satisfies it), so nothing of size n x features is built in float64. A
binned fit (``feature_binning``) keeps the bins of every (row, feature) as small integers (uint8 up to 256 bins),
an eighth of the float64 matrix, which is also what a device holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdhom.learn.validation import _check_shape, as_matrix, is_sparse


class Features:
    """A dense (n, F) float64 array or a CSC matrix (canonical: sorted indices, no duplicates), by columns. A
    canonical float64 CSC matrix is used as it is (never changed); other sparse forms are converted once."""

    def __init__(self, X: Any) -> None:
        self.sparse = is_sparse(X)
        if self.sparse:
            given = X
            X = X.tocsc()
            if X.dtype != np.float64:
                X = X.astype(np.float64)
            if not X.has_canonical_format:
                X = X.copy() if X is given else X  # the caller's matrix is never changed
                X.sum_duplicates()  # sorts the indices too
            self.indptr = X.indptr.astype(np.int64, copy=False)
            self.indices, self.data = X.indices, np.asarray(X.data, np.float64)
        else:
            X = np.asarray(X, np.float64)
            if X.ndim != 2:
                raise ValueError(f"the feature matrix must be 2-D, got shape {X.shape}")
        self.X = X
        self.shape: tuple[int, int] = (int(X.shape[0]), int(X.shape[1]))

    @property
    def nbytes(self) -> int:
        """The bytes the matrix holds (for the sparse form: its three arrays)."""
        if self.sparse:
            return int(self.indptr.nbytes + self.indices.nbytes + self.data.nbytes)
        return int(self.X.nbytes)

    def stored(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """(ascending rows, values) of feature ``f``'s stored entries (sparse only)."""
        a, b = int(self.indptr[f]), int(self.indptr[f + 1])
        return self.indices[a:b], self.data[a:b]

    def column(self, f: int) -> np.ndarray:
        """Feature ``f``'s values of every row, float64 (a view of a dense matrix; built for a sparse one)."""
        if not self.sparse:
            return self.X[:, f]
        out = np.zeros(self.shape[0])
        rows, values = self.stored(f)
        out[rows] = values
        return out

    def holds(self, f: int, op: str, threshold: float) -> np.ndarray:
        """Rows whose value of ``f`` satisfies ``op threshold`` (NaN satisfies neither operator)."""
        if not self.sparse:
            col = self.X[:, f]
            return col <= threshold if op == "<=" else col > threshold
        out = np.full(self.shape[0], (0.0 <= threshold) if op == "<=" else (0.0 > threshold))
        rows, values = self.stored(f)
        out[rows] = values <= threshold if op == "<=" else values > threshold
        return out

    def distribution(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, weights): feature ``f``'s values as weighted points, the same distribution as its column: for a
        sparse matrix the stored entries with weight 1 and one 0.0 weighing as many rows as are absent."""
        if not self.sparse:
            col = self.X[:, f]
            return col, np.ones(col.size)
        rows, values = self.stored(f)
        absent = self.shape[0] - rows.size
        if absent == 0:
            return values, np.ones(values.size)
        return np.append(values, 0.0), np.append(np.ones(values.size), float(absent))


def as_features(X: Any, allow_empty: bool = False) -> Features:
    """User input (numpy, pandas, scipy.sparse) as :class:`Features`, checked as the learners' common validation
    checks it (:func:`mdhom.learn.validation.as_matrix`); scipy.sparse input stays sparse, and a CSC matrix is not
    converted to CSR and back (a canonical float64 one is not copied at all)."""
    if isinstance(X, Features):
        return X
    if not is_sparse(X):
        return Features(as_matrix(X, allow_empty=allow_empty))
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    _check_shape(tuple(X.shape), allow_empty)
    out = Features(X)
    if np.isinf(out.data).any():
        raise ValueError("Input X contains infinity; use NaN for missing values")
    return out


def columns(X: np.ndarray | Features) -> Features:
    """``X`` as :class:`Features` (a dense array is wrapped, not copied)."""
    return X if isinstance(X, Features) else Features(X)
