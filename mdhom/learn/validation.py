"""Input checking for the tree estimators, without scikit-learn at runtime.

Accepts numpy arrays, anything with ``__array__``, pandas frames (duck-typed through ``columns`` and
``to_numpy``) and scipy.sparse matrices, which stay sparse: an absent entry is *missing*, as in XGBoost (it
takes the NaN bin and the learned default direction), an explicitly stored 0 is the value 0. Densifying would
cost 8 bytes per cell (a 20000 x 5000 matrix with 100k non-zeros became 800 MB). Messages follow
scikit-learn's wording where its estimator checks match on them.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from mdhom.learn.memory import check_host


class _NotFittedError(ValueError, AttributeError):
    """Raised when predicting with an unfitted estimator (scikit-learn's class is used when installed)."""


class _DataConversionWarning(UserWarning):
    """A column-vector y was passed where a 1-D array was expected."""


def not_fitted_error(name: str) -> Exception:
    msg = f"This {name} instance is not fitted yet. Call 'fit' with appropriate arguments before using it."
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:
        return _NotFittedError(msg)
    return NotFittedError(msg)


def warn_column_vector() -> None:
    try:
        from sklearn.exceptions import DataConversionWarning
    except ImportError:
        DataConversionWarning = _DataConversionWarning  # noqa: N806
    warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape of y to "
                  "(n_samples,), for example using ravel().", DataConversionWarning, stacklevel=3)


def feature_names(X: Any) -> np.ndarray | None:
    """Column names of a data frame when all of them are strings (scikit-learn's rule), else None."""
    cols = getattr(X, "columns", None)
    if cols is None or not hasattr(X, "to_numpy"):
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size and all(isinstance(c, str) for c in names):
        return names
    return None


def category_labels(X: Any) -> list[np.ndarray | None] | None:
    """Per column the labels of a pandas 'category' column (None for the others); None when X is not a data
    frame or has no such column. A column's category codes are positions among these labels."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns") or not hasattr(X, "to_numpy"):
        return None
    out = [np.asarray(list(dt.categories), dtype=object) if getattr(dt, "name", "") == "category" else None
           for dt in dtypes]
    return out if any(o is not None for o in out) else None


def _frame_matrix(X: Any, labels: list[np.ndarray | None] | None) -> np.ndarray:
    """A data frame as float64: numeric columns as they are, category columns as codes (NaN where missing),
    mapped by label onto ``labels`` (the training frame's) when given."""
    own = category_labels(X)
    if own is None and labels is None:
        try:
            return X.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass  # name the column below
    out = np.empty(X.shape, np.float64)
    for j, name in enumerate(X.columns):
        col = X.iloc[:, j]
        fitted = None if labels is None or j >= len(labels) else labels[j]
        if fitted is not None:
            try:
                codes = col.astype("category").cat.set_categories(list(fitted)).cat.codes.to_numpy()
            except (TypeError, ValueError) as exc:
                raise ValueError(f"column {name!r} cannot be read as the categories it had in fit: {exc}") from None
            out[:, j] = np.where(codes < 0, np.nan, codes)
        elif own is not None and own[j] is not None:
            if labels is not None:
                raise ValueError(f"column {name!r} is a 'category' column, but it was not categorical in fit")
            codes = col.cat.codes.to_numpy()
            out[:, j] = np.where(codes < 0, np.nan, codes)
        else:
            try:
                out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"column {name!r} is not numeric ({col.dtype}: {exc}); give categories the pandas "
                                 "'category' dtype") from None
    return out


def is_sparse(X: Any) -> bool:
    """A scipy.sparse matrix or array (duck-typed: scipy is imported only by those who pass one)."""
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def as_matrix(X: Any, labels: list[np.ndarray | None] | None = None, allow_empty: bool = False,
              keep_float32: bool = False) -> Any:
    """X as the learners read it: a float64 C-contiguous 2-D copy-or-view with NaN for missing values, or for
    scipy.sparse input a CSR matrix in canonical form (float64, sorted indices, no duplicates; absent entries
    missing). Infinities are refused; a dense copy that would not fit in host memory is refused before it is
    made (a broadcast view has zero strides: its copy costs the full shape). Data frames' 'category' columns
    become codes, by label onto the fitted ``labels`` where given.

    ``allow_empty`` admits zero rows: prediction on no rows has an answer (an empty array), fitting does not.
    ``keep_float32`` leaves a float32 array float32 (C-contiguous): prediction compares its values with double
    thresholds, which a float64 copy would not change."""
    if X is None:
        raise ValueError("X is None; expected a 2-D array-like")
    if is_sparse(X):
        return _as_csr(X, allow_empty)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas
        _check_shape(tuple(X.shape), allow_empty)
        check_host(8 * X.shape[0] * X.shape[1], f"a float64 copy of X {tuple(X.shape)}", 8 * X.shape[1])
        X = _frame_matrix(X, labels)
    arr = np.asarray(X)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    _check_shape(arr.shape, allow_empty)
    dtype = np.float32 if keep_float32 and arr.dtype == np.float32 else np.float64
    if not (arr.dtype == dtype and arr.flags.c_contiguous):
        size = np.dtype(dtype).itemsize
        check_host(size * arr.shape[0] * arr.shape[1], f"a {np.dtype(dtype).name} copy of X {arr.shape}",
                   size * arr.shape[1])
    if arr.dtype.kind in "OUS":
        arr = arr.astype(np.float64)  # a dict in X raises TypeError, a word ValueError: both say which value
    arr = np.ascontiguousarray(arr, dtype=dtype)
    step = max(1, (1 << 22) // max(1, arr.shape[1]))  # bounded temporaries for the check
    for lo in range(0, arr.shape[0], step):
        if np.isinf(arr[lo:lo + step]).any():
            raise ValueError("Input X contains infinity; use NaN for missing values")
    return arr


def _check_shape(shape: tuple[int, ...], allow_empty: bool = False) -> None:
    if len(shape) != 2:
        raise ValueError(f"Expected 2D array, got {len(shape)}D array instead. Reshape your data with "
                         "X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample.")
    if shape[0] == 0 and not allow_empty:
        raise ValueError(f"Found array with 0 sample(s) (shape={shape}) while a minimum of 1 is required.")
    if shape[1] == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={shape}) while a minimum of 1 is required.")


def _as_csr(X: Any, allow_empty: bool = False) -> Any:
    """Canonical float64 CSR (a copy where X is not one already: the caller's matrix is never changed)."""
    _check_shape(tuple(X.shape), allow_empty)
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    csr = X.tocsr()
    if csr.dtype != np.float64:
        csr = csr.astype(np.float64)
    if not csr.has_canonical_format:
        csr = csr.copy() if csr is X else csr
        csr.sum_duplicates()  # sorts the indices too
    if np.isinf(csr.data).any():
        raise ValueError("Input X contains infinity; use NaN for missing values")
    return csr


def sparse_chunks(X: Any, n_cells: int = 1 << 20) -> Iterator[tuple[int, int, np.ndarray]]:
    """Row blocks ``(lo, hi, dense)`` of a CSR matrix, each densified with NaN for absent entries and at most
    ``n_cells`` cells: the sparse meaning (absent = missing) for code that walks dense rows."""
    n, f = X.shape
    step = max(1, n_cells // max(1, f))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = X[lo:hi]
        dense = np.full((hi - lo, f), np.nan)
        rows = np.repeat(np.arange(hi - lo), np.diff(block.indptr))
        dense[rows, block.indices] = block.data
        yield lo, hi, dense


def check_feature_names(fitted: np.ndarray | None, X: Any, name: str) -> None:
    """scikit-learn's contract: warn when only one side has names, raise when they differ."""
    given = feature_names(X)
    if fitted is None and given is None:
        return
    if fitted is None:
        warnings.warn(f"X has feature names, but {name} was fitted without feature names", stacklevel=3)
        return
    if given is None:
        warnings.warn(f"X does not have valid feature names, but {name} was fitted with feature names",
                      stacklevel=3)
        return
    if len(fitted) == len(given) and np.all(fitted == given):
        return
    message = "The feature names should match those that were passed during fit.\n"
    unexpected = sorted(set(given) - set(fitted))
    missing = sorted(set(fitted) - set(given))

    def listing(names: list[str]) -> str:
        lines = [f"- {n}\n" for n in names[:5]]
        return "".join(lines) + ("- ...\n" if len(names) > 5 else "")

    if unexpected:
        message += "Feature names unseen at fit time:\n" + listing(unexpected)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + listing(missing)
    if not unexpected and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    raise ValueError(message)


def _check_label_types(y: np.ndarray) -> None:
    """Labels are all strings or all numbers. numpy turns a list mixing both into strings ([1, "a"] gives
    "1"), and an object array of both cannot be sorted (np.unique raised a bare TypeError)."""
    kinds = {t: "string" if issubclass(t, (str, bytes)) else "number" if issubclass(t, (numbers.Number, np.bool_))
             else "other" for t in set(map(type, y.flat))}
    names = ", ".join(sorted(t.__name__ for t in kinds))
    if "other" in kinds.values():
        raise ValueError(f"y holds values of type(s) {names}; labels must be all strings or all numbers")
    if len(set(kinds.values())) > 1:
        raise ValueError(f"y mixes strings and numbers ({names}); labels must be all strings or all numbers "
                         "(convert them all to str, for instance)")
    if any(issubclass(t, numbers.Real) and not issubclass(t, numbers.Integral) for t in kinds) and any(
            v != v for v in y.flat):
        raise ValueError("Input y contains NaN or infinity")


def as_target(y: Any, name: str) -> np.ndarray:
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None")
    if hasattr(y, "toarray") and hasattr(y, "tocsr"):
        y = y.toarray()
    elif hasattr(y, "to_numpy"):
        y = y.to_numpy()
    if isinstance(y, (list, tuple)):  # check before numpy would turn numbers into strings
        try:
            raw = np.asarray(y, dtype=object)
        except ValueError:
            raw = None  # ragged: np.asarray below says so
        if raw is not None and raw.dtype == object and raw.ndim in (1, 2):
            _check_label_types(raw)
    y = np.asarray(y)
    if y.dtype == object:
        _check_label_types(y)
    if y.ndim == 0 or y.ndim > 2:
        raise ValueError(f"y must be 1-D (or 2-D for multi-label), got shape {y.shape}")
    if y.ndim == 2 and y.shape[1] == 1:
        warn_column_vector()
        y = y[:, 0]
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        raise ValueError("Input y contains NaN or infinity")
    return y


SMALL_CLASSES = 1 << 16  # labels 0 .. SMALL_CLASSES - 1 are counted, not sorted (class_codes)


def class_codes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)`` for a 1-D label vector, as (classes, codes). Labels that are small
    non-negative integers (of any numeric dtype: 0/1 floats included) are counted instead of sorted: 10.5M float32
    labels take 0.10 s against np.unique's 0.18-0.39 s on a 2-core machine. A -0.0 among float labels takes the
    sort, whose class value it may be."""
    y = np.asarray(y).reshape(-1)
    if y.size and y.dtype.kind in "biuf":
        lo, hi = y.min(), y.max()
        if lo >= 0 and hi < SMALL_CLASSES and (y.dtype.kind != "f" or (lo > 0 or not np.signbit(y).any())):
            codes = y.astype(np.int64)
            if y.dtype.kind != "f" or np.array_equal(codes, y):  # integral values only
                present = np.flatnonzero(np.bincount(codes, minlength=int(hi) + 1))
                lookup = np.zeros(int(hi) + 1, np.int64)
                lookup[present] = np.arange(present.size)
                return present.astype(y.dtype), lookup[codes]
    classes, codes = np.unique(y, return_inverse=True)
    return classes, codes.reshape(-1)


def check_weights(sample_weight: Any, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight has shape {w.shape}, expected ({n},)")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or infinity")
    if (w < 0).any():
        raise ValueError("sample_weight must be non-negative")
    if w.sum() <= 0:
        raise ValueError("sample_weight sums to zero")
    return w


def categorical_mask(spec: Any, labels: list[np.ndarray | None] | None, names: np.ndarray | None,
                     n_features: int) -> np.ndarray:
    """Which features are categorical: the data frame's 'category' columns (``labels``), plus the indices or
    names that ``spec`` lists (``"auto"``: none more)."""
    mask = np.zeros(n_features, bool)
    if labels is not None:
        mask[[j for j, lab in enumerate(labels) if lab is not None]] = True
    if isinstance(spec, str):
        return mask
    for x in spec:
        if isinstance(x, str):
            if names is None or x not in list(names):
                raise ValueError(f"categorical_feature names {x!r}, which is not a column name of X")
            mask[list(names).index(x)] = True
        elif not 0 <= x < n_features:
            raise ValueError(f"categorical_feature lists column {x}, but X has {n_features} features")
        else:
            mask[x] = True
    return mask
