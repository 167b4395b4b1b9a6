"""Quantile binning of features into the bins the kernels read: uint8 up to 256 bins, uint16 beyond
(``max_bin`` up to 65535; :func:`bin_dtype`), so the common case keeps a byte per cell.

Bin ``b`` of a feature holds the values ``edges[b-1] < x <= edges[b]`` (bin 0 everything up to ``edges[0]``,
the last real bin everything above the last edge), so the split "bin <= b" is the raw-value test
"x <= edges[b]" and a saved model predicts on raw features without binning. Edges lie halfway between two
distinct training values (LightGBM's choice), so equal values never straddle bins, and a feature with at
most ``max_bin`` distinct values gets one bin per value. NaN goes to the global bin ``n_bins - 1``.

A feature with NaN in the training data gets at most ``max_bin - 1`` real bins: the kernels' candidate
splits stop at bin ``n_bins - 3``, and the split "every value left, NaN right" needs the last real bin to be
a candidate.

Categorical features (LightGBM's ``categorical_feature``) hold non-negative integer category codes. Bin ``b``
of such a feature is its ``b``-th known category in ascending code order (``categories[j]``): the
``max_bin - 1`` most frequent codes of the training data (ties to the smaller code), so that every category is
a split candidate. NaN, negative codes and codes outside the known ones share the missing bin: they follow a
split's default direction, in training and in prediction alike.

``n_bins``, the kernels' global bin count, is what the data needs, not ``max_bin + 1``: the most real bins of
any feature, one more where that feature has NaN (its last real bin must stay a candidate), plus the NaN bin.
Histograms, split scans and the local-memory fit of a node's histogram all scale with it: 5000 sparse features
of ~20 values each need 22 bins, not 256. The candidates it drops are empty bins above every feature's last
real bin, which never win (an empty bin repeats the sums of the bin below it, and ties go to the lower bin).

Sparse input (scipy.sparse) is binned from its stored entries: an absent entry is missing (XGBoost's meaning),
so a feature's edges come from its stored values and the bin matrix starts as the NaN bin everywhere, with the
stored entries' bins scattered into it. Memory beyond the bin matrix is proportional to the stored entries.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mdhom.learn.memory import check_host
from mdhom.learn.sparse_bins import SparseBins

MAX_BIN = 65535  # real bins per feature: with NaN's bin, a global count up to 65536 still fits uint16


def bin_dtype(n_bins: int) -> np.dtype:
    """The bins' storage for a global bin count: uint8 up to 256, uint16 up to 65536 (the kernels' ``tree_bin_t``,
    :func:`mdhom.components.lanes.bin_ctype`)."""
    if not 2 <= n_bins <= MAX_BIN + 1:
        raise ValueError(f"n_bins must lie in [2, {MAX_BIN + 1}], got {n_bins}")
    return np.dtype(np.uint8 if n_bins <= 256 else np.uint16)


def _page_aligned(shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """An empty array starting on a page boundary: CPU OpenCL runtimes use such host memory in place
    (``USE_HOST_PTR``; Intel's copies an array numpy's allocator placed 16 bytes past a boundary)."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 4096, np.uint8)
    start = -raw.ctypes.data % 4096
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def feature_edges(values: np.ndarray, weights: np.ndarray, max_bin: int) -> np.ndarray:
    """Bin edges (ascending float64, at most ``max_bin - 1``) of one feature's non-NaN training values.

    Cuts fall at the weighted quantiles k/max_bin of the distinct values, so heavy values get bins of their
    own and the rest share evenly; a cut is only ever placed between two distinct values.
    """
    keep = ~np.isnan(values) & (weights > 0)
    v, w = values[keep], weights[keep]
    if v.size == 0 or max_bin < 2:
        return np.empty(0)
    unit = bool((w == 1.0).all())  # no weights (the usual fit): each value's weight is its count
    if unit:  # a sort of the values alone: 200k values 8.7 ms against 23.8 for the stable argsort and its gathers
        v = np.sort(v)
    else:
        order = np.argsort(v, kind="stable")
        v, w = v[order], w[order]
    # the distinct values and where each one's run starts: np.unique's result, without sorting the sorted again
    start = np.concatenate([[0], np.flatnonzero(v[1:] != v[:-1]) + 1])
    # halfway points in float64 whatever the input's type: float32 values are doubles exactly, so a float32 matrix
    # and its float64 copy get the same edges (a float32 halfway would round elsewhere)
    distinct = v[start].astype(np.float64, copy=False)
    if distinct.size <= 1:
        return np.empty(0)
    if distinct.size <= max_bin:
        cut = np.arange(distinct.size - 1)
    else:
        # run lengths are the sums of unit weights exactly (integers below 2^53)
        counts = np.diff(np.append(start, v.size)).astype(np.float64) if unit else np.add.reduceat(w, start)
        cum = np.cumsum(counts)
        targets = cum[-1] * np.arange(1, max_bin) / max_bin
        # the cut after distinct value i when the cumulative weight first reaches the target
        cut = np.unique(np.searchsorted(cum, targets, side="left"))
        cut = cut[cut < distinct.size - 1]
    lo, hi = distinct[cut], distinct[cut + 1]
    edges = lo + (hi - lo) / 2.0
    # halfway can round onto hi for neighbouring floats; then lo itself separates the two values
    edges = np.where(edges >= hi, lo, edges)
    return edges


def nan_columns(X: np.ndarray) -> np.ndarray:
    """Which columns of a dense 2-D matrix hold a NaN. In blocks of rows that stay in cache, each viewed as rows of
    64 matrix rows, so the reduction's inner loop runs over 64 x features values, not over the few features of one
    row (numpy's ``np.isnan(X).any(axis=0)``: 4M x 28 float32 rows 104 ms, this 23 ms, on a 2-core EPYC)."""
    n, f = X.shape
    out = np.zeros(f, bool)
    step = max(64, (1 << 20) // max(1, f) // 64 * 64)  # rows a block: ~1M values, a multiple of 64
    for lo in range(0, n, step):
        block = X[lo:lo + step]
        whole = block.shape[0] // 64 * 64
        if whole:
            out |= np.isnan(block[:whole].reshape(-1, 64 * f)).any(axis=0).reshape(64, f).any(axis=0)
        if whole < block.shape[0]:
            out |= np.isnan(block[whole:]).any(axis=0)
    return out


def sample_rows(n_rows: int, n_sample: int, seed: int | None) -> np.ndarray | None:
    """Ascending row indices of a seeded sample without replacement for learning bin edges, or ``None`` for all
    rows (``n_sample`` 0 or at least ``n_rows``). Quantiles of 200k rows place edges as well as the full data
    does (LightGBM's default), and the sort over each feature is what fitting the edges costs.

    The sample has its own random stream (``seed``; 0 when None), so it moves no other draw of a fit."""
    if n_sample <= 0 or n_sample >= n_rows:
        return None
    rng = np.random.default_rng([0 if seed is None else int(seed), 0x62696E])  # "bin": apart from the fit's rng
    return np.sort(rng.choice(n_rows, n_sample, replace=False))


def check_codes(values: np.ndarray, feature: int | str) -> None:
    """Category codes must be integers (negative ones and NaN mean missing); a fraction is a mistake worth
    naming, not something to round."""
    v = values[np.isfinite(values)]
    if v.size and np.any(v != np.floor(v)):
        bad = float(v[v != np.floor(v)][0])
        raise ValueError(f"categorical feature {feature} holds {bad!r}: categories must be integer codes "
                         "(negative codes and NaN mean missing), or pass a pandas 'category' column")
    if v.size and np.abs(v).max() >= 2.0**53:
        raise ValueError(f"categorical feature {feature} holds codes beyond 2^53, which float64 cannot tell apart")


def feature_categories(values: np.ndarray, weights: np.ndarray, max_cats: int) -> np.ndarray:
    """The known category codes of one categorical feature (ascending int64): its ``max_cats`` most frequent
    non-negative codes by weight, ties to the smaller code."""
    keep = np.isfinite(values) & (values >= 0) & (weights > 0)
    codes, inverse = np.unique(values[keep], return_inverse=True)
    if codes.size > max_cats:
        freq = np.bincount(inverse, weights=weights[keep])
        top = np.lexsort((codes, -freq))[:max_cats]  # by weight descending, then code ascending
        codes = np.sort(codes[top])
    return codes.astype(np.int64)


class BinMapper:
    """Per-feature edges (or known categories) learned on the training data; ``transform`` maps raw values (dense,
    or scipy.sparse with absent entries missing) to bins of :func:`bin_dtype` (uint8 unless more than 256 bins are
    needed)."""

    def __init__(self, max_bin: int, categorical: np.ndarray | None = None) -> None:
        if not 2 <= max_bin <= MAX_BIN:
            raise ValueError(f"max_bin must lie in [2, {MAX_BIN}], got {max_bin}")
        self.max_bin = int(max_bin)
        self.n_bins = self.max_bin + 1  # the kernels' global bin count (the last one is NaN's); fit sets the need
        self.edges: list[np.ndarray] = []
        # per feature: None for a numeric feature, else its known category codes (bin b = categories[j][b])
        self.categories: list[np.ndarray | None] = []
        self._categorical = None if categorical is None else np.asarray(categorical, bool)

    @property
    def categorical(self) -> np.ndarray:
        """Which features are categorical (bool per feature)."""
        return np.array([c is not None for c in self.categories], bool)

    def fit(self, X: Any, sample_weight: np.ndarray | None = None, rows: np.ndarray | None = None) -> BinMapper:
        """Learn the edges (known categories, for categorical features) from ``X`` (from its ``rows`` only, when
        given: see :func:`sample_rows`); a sparse ``X`` (CSR with sorted indices,
        :func:`mdhom.learn.validation.as_matrix`) from its stored entries."""
        cat = np.zeros(X.shape[1], bool) if self._categorical is None else self._categorical
        if cat.shape != (X.shape[1],):
            raise ValueError(f"categorical mask has {cat.size} entries, X has {X.shape[1]} features")
        if cat.any() and self.max_bin > 255:
            raise ValueError(f"categorical features need max_bin <= 255 (got {self.max_bin}): their split search "
                             "compares every pair of bins")
        if hasattr(X, "tocsc"):
            nan, columns = self._sparse_columns(X, sample_weight, rows)
            stored = X.data
            for j in np.flatnonzero(cat):
                check_codes(stored[X.indices == j], j)
        else:
            for j in np.flatnonzero(cat):
                check_codes(X[:, j], j)
            nan = nan_columns(X)  # over every row: NaN outside the sample still needs its split candidate
            if rows is not None:
                X = X[rows]
                sample_weight = None if sample_weight is None else np.asarray(sample_weight)[rows]
            w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
            columns = ((X[:, j], w) for j in range(X.shape[1]))
        def learn(j: int, col: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            if cat[j]:  # every category a candidate: the last real bin (never one) stays empty
                return np.empty(0), feature_categories(col, w, self.max_bin - 1)
            return feature_edges(col, w, max(self.max_bin - 1 if nan[j] else self.max_bin, 1)), None

        # features apart on the usable cores: numpy's sorts release the GIL (1M x 28 rows, 200k sampled: 0.9 s
        # one feature after another on one core); each feature's edges are the same either way
        usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        with ThreadPoolExecutor(max(1, min(X.shape[1], len(usable)))) as pool:
            learned = list(pool.map(lambda a: learn(*a), ((j, c, w) for j, (c, w) in enumerate(columns))))
        self.edges = [e for e, _ in learned]
        self.categories = [c for _, c in learned]
        need = 1
        for j, (edges, codes) in enumerate(learned):
            need = max(need, codes.size + 1 if codes is not None else edges.size + 1 + int(nan[j]))
        self.n_bins = max(2, need + 1)
        return self

    @staticmethod
    def _sparse_columns(X: Any, sample_weight: np.ndarray | None, rows: np.ndarray | None) -> tuple:
        """(has NaN per feature, per feature its stored values in row order with their weights): exactly the
        dense column with NaN where X has no entry, less the NaN that :func:`feature_edges` drops anyway."""
        n = X.shape[0]
        csc = X.tocsc()
        csc.sort_indices()
        stored = np.diff(csc.indptr)
        nan = stored < n
        stored_nan = np.flatnonzero(np.isnan(csc.data))
        nan[np.searchsorted(csc.indptr, stored_nan, side="right") - 1] = True  # the columns of stored NaN
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
        if rows is not None:
            csc = X[rows].tocsc()
            csc.sort_indices()
            w = w[rows]
        ptr, data, idx = csc.indptr, csc.data, csc.indices
        return nan, ((data[ptr[j]:ptr[j + 1]], w[idx[ptr[j]:ptr[j + 1]]]) for j in range(X.shape[1]))

    def transform(self, X: Any, feature_major: bool = False) -> np.ndarray:
        """Bins (n_rows, n_features), or (n_features, n_rows) when ``feature_major`` (the GPU layout, made
        directly: no transposed copy). A sparse ``X`` never becomes a float64 dense matrix."""
        n, f = X.shape
        dtype = bin_dtype(self.n_bins)
        check_host(n * f * dtype.itemsize, f"the bin matrix of X ({n} x {f} {dtype})", f * dtype.itemsize)
        out = _page_aligned((f, n) if feature_major else (n, f), dtype)
        if hasattr(X, "tocsc"):
            out.fill(self.n_bins - 1)
            csc = X.tocsc()
            ptr = csc.indptr
            for j in range(len(self.edges)):
                lo, hi = ptr[j], ptr[j + 1]
                if lo == hi:
                    continue
                b = self._column_bins(j, csc.data[lo:hi])
                if feature_major:
                    out[j, csc.indices[lo:hi]] = b
                else:
                    out[csc.indices[lo:hi], j] = b
            return out
        for j in range(len(self.edges)):
            b = self._column_bins(j, X[:, j])
            if feature_major:
                out[j] = b
            else:
                out[:, j] = b
        return out

    def _column_bins(self, j: int, col: np.ndarray) -> np.ndarray:
        """The bins of values ``col`` of feature ``j``: its category bins, or the number of edges below each value
        (x <= edges[b]); NaN in the missing bin. One rule for dense columns and stored sparse entries alike."""
        cats = self.categories[j] if self.categories else None
        if cats is not None:
            return category_bins(col, cats, self.n_bins - 1)
        b = np.searchsorted(self.edges[j], col, side="left")
        b[np.isnan(col)] = self.n_bins - 1
        return b

    def transform_sparse(self, X: Any) -> SparseBins:
        """The bins of a scipy.sparse ``X`` kept sparse (:class:`mdhom.learn.sparse_bins.SparseBins`): the bin of
        every stored entry, less those in the missing bin (stored NaN, unknown categories), as compressed rows.
        Memory proportional to the stored entries; the same cells as :meth:`transform`."""
        n, f = X.shape
        dtype = bin_dtype(self.n_bins)
        csr = X.tocsr()
        if not csr.has_sorted_indices:
            csr = csr.sorted_indices()
        indptr, indices, data = csr.indptr, csr.indices, csr.data
        by_feature = np.argsort(indices, kind="stable")  # each feature's entries, in row order
        starts = np.searchsorted(indices[by_feature], np.arange(f + 1))
        out = np.empty(indices.size, dtype)
        for j in range(len(self.edges)):
            lo, hi = starts[j], starts[j + 1]
            if lo == hi:
                continue
            at = by_feature[lo:hi]
            out[at] = self._column_bins(j, data[at])
        keep = out != self.n_bins - 1
        rows = np.repeat(np.arange(n), np.diff(indptr))
        kept = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=n), out=kept[1:])
        return SparseBins(kept, indices[keep], out[keep], (n, f), self.n_bins)

    def threshold(self, feature: int, split_bin: int) -> float:
        """The raw-value threshold of "bin <= split_bin": +inf when no edge lies above the bin."""
        return float(self.thresholds(np.array([feature]), np.array([split_bin]))[0])

    def thresholds(self, feature: np.ndarray, split_bin: np.ndarray) -> np.ndarray:
        """:meth:`threshold` of each (feature, split bin) pair (a tree's or a forest's split nodes) at once: a lookup
        in a table of every feature's edges, +inf past each one's last (a call per node had cost a tree's assembly
        ~1 us a split node on a 2-core EPYC)."""
        feature = np.asarray(feature, np.int64)
        split_bin = np.asarray(split_bin, np.int64)
        width = 1 + max((e.size for e in self.edges), default=0)
        table = np.full((max(1, len(self.edges)), width), np.inf)
        for j, e in enumerate(self.edges):
            table[j, : e.size] = e
        return table[feature, np.minimum(split_bin, width - 1)]


def category_bins(values: np.ndarray, categories: np.ndarray, missing_bin: int) -> np.ndarray:
    """The bin of each category code: its index among ``categories``; NaN, negative and unknown codes get
    ``missing_bin``."""
    out = np.full(values.shape, missing_bin, np.int64)
    if categories.size == 0:
        return out
    ok = np.isfinite(values) & (values >= 0)
    idx = np.searchsorted(categories, values[ok])
    idx = np.minimum(idx, categories.size - 1)
    found = categories[idx] == values[ok]
    out[np.flatnonzero(ok)[found]] = idx[found]
    return out


def category_tables(trees: list, categories: list[np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    """The categorical splits of ``trees`` (model trees: ``n_nodes``, ``feature``, ``categories``) as membership
    tables over their features' known codes' positions: (per node of the trees laid end to end, its table's row
    or -1; bool tables (n_splits, width)), width one more than the most known codes of any feature. The numpy
    walk and the device predictor both read them."""
    width = 1 + max((c.size for c in categories if c is not None), default=0)
    rows, tables = [], []
    for t in trees:
        row = np.full(t.n_nodes, -1, np.int64)
        for node, codes in enumerate(t.categories or []):
            if codes is not None:
                table = np.zeros(width, bool)
                table[np.searchsorted(categories[int(t.feature[node])], codes)] = True
                row[node] = len(tables)
                tables.append(table)
        rows.append(row)
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64)), np.array(tables, bool).reshape(-1, width)
