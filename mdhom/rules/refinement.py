"""The search for a rule's best refinement: for the covered examples, the sum of atoms on either side of every
candidate threshold of every sampled feature, each scored by the head; the best condition wins. Exact thresholds
here; binned features go to :mod:`mdhom.rules.binned` (the device kernels' order of summation).

Per feature, the covered examples' atoms (weighted by the instance weights) summed per distinct value; their
prefix sum over the values in ascending order gives the statistics of "x <= t" at every boundary between distinct
values, the total minus it those of "x > t"; the head's quality of both is the scalar function; an arg-min over
(feature, boundary, operator) in that order picks the condition, ties to the first. NaN satisfies no condition.
A sparse matrix (:class:`mdhom.rules.features.Features`) is searched from its stored entries: where 0 is the most
frequent value of the covered rows, its sum is the total less the others', so the absent rows are never visited
(the same sums, to the bit, as the dense matrix's search).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdhom.rules.binned import best_binned, bin_matrix
from mdhom.rules.features import Features, columns
from mdhom.rules.heads import Head


@dataclass(frozen=True)
class Refinement:
    quality: float
    feature: int
    op: str  # "<=" or ">"
    threshold: float
    total: np.ndarray  # the summed atoms of the examples the refined rule covers
    n_covered: int  # covered examples of non-zero weight
    bin: int = -1  # binned features: the condition is "bin <= b" or "bin > b" (threshold edges[feature][bin])


class SearchSpace:
    """What the search reads for every refinement: the training matrix and, for exact thresholds, each feature's
    examples in ascending order (NaN last) and how a boundary between two values becomes a raw threshold.

    With ``edges`` (binned features) the search runs over ``bins``, each example's bin index per feature
    (:func:`mdhom.rules.binned.bin_matrix`: NaN in the last of ``n_bins``), as :mod:`mdhom.rules.binned` and the
    device kernels do; a condition "bin <= b" is the raw threshold ``edges[f][b]``."""

    def __init__(self, X: np.ndarray | Features, edges: list[np.ndarray] | None = None) -> None:
        self.X = X = columns(X)
        self.edges = edges
        if edges is not None:
            self.bins, self.n_bins = bin_matrix(X, edges)

    def threshold(self, feature: int, lo: float, hi: float) -> float:
        """The raw threshold between neighbouring values ``lo < hi`` of ``feature``: halfway (``lo`` itself
        where halfway rounds onto ``hi``)."""
        t = lo + (hi - lo) / 2.0
        return float(lo if t >= hi else t)


def covered_by(X: np.ndarray | Features, feature: int, op: str, threshold: float) -> np.ndarray:
    """Rows of ``X`` that satisfy the condition (NaN satisfies neither operator)."""
    return columns(X).holds(feature, op, threshold)


def _value_segments(space: SearchSpace, f: int, rows: np.ndarray, A: np.ndarray, ones: np.ndarray,
                    total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(distinct values ascending, summed atoms per value (d, k), examples of non-zero weight per value) of feature
    ``f`` over the covered ``rows`` (``A``: their weighted atoms, ``total`` its column sums; ``ones``: 1.0 where
    their weight is non-zero), or None when fewer than two distinct values remain. The most frequent value's sum is
    the total less the others', so a sparse feature (mostly one value, as enron's words) costs only its other rows."""
    if space.X.sparse:
        return _stored_segments(space.X, f, rows, A, ones, total)
    return _dense_segments(space.X.X[rows, f], A, ones, total)


def _dense_segments(x: np.ndarray, A: np.ndarray, ones: np.ndarray,
                    total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_value_segments` of the covered rows' values ``x``."""
    valid = ~np.isnan(x)
    values, inv = np.unique(x[valid], return_inverse=True)
    d = values.size
    if d < 2:
        return None
    where = np.flatnonzero(valid)
    per_value = np.bincount(inv, minlength=d)
    big = int(np.argmax(per_value))
    others = np.delete(np.arange(d), big)
    pos = where[inv != big][np.argsort(inv[inv != big], kind="stable")]  # rows of the other values, value by value
    starts = np.concatenate([[0], np.cumsum(per_value[others])[:-1]]).astype(np.intp)
    sums = np.zeros((d, A.shape[1]))
    sums[others] = np.add.reduceat(A[pos], starts, axis=0)
    valid_total = total if valid.all() else total - A[~valid].sum(axis=0)
    sums[big] = valid_total - sums[others].sum(axis=0)
    return values, sums, np.bincount(inv, weights=ones[where], minlength=d)


def _stored_segments(X: Features, f: int, rows: np.ndarray, A: np.ndarray, ones: np.ndarray,
                     total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_value_segments` of a sparse feature from its stored entries among the covered ``rows``. Where 0
    (absent, or stored as 0) is the most frequent value, as in a text set's words, the other values' rows are the
    stored ones, and the arithmetic is :func:`_dense_segments`' on the same rows in the same order, so the same
    bits; otherwise the covered rows' values are built and searched as dense."""
    stored, values = X.stored(f)
    m = rows.size
    at = np.searchsorted(rows, stored)  # the stored entries among the covered rows, by position in ``rows``
    hit = at < m
    hit[hit] = rows[at[hit]] == stored[hit]
    at, values = at[hit], values[hit]
    nan = np.isnan(values)
    nz = ~nan & (values != 0.0)
    n_zero = m - at.size + int(np.count_nonzero(~nz & ~nan))  # absent rows, and stored zeros
    distinct, inv_nz, count_nz = np.unique(values[nz], return_inverse=True, return_counts=True)
    z = int(np.searchsorted(distinct, 0.0))
    if n_zero == 0 or count_nz[:z].max(initial=0) >= n_zero or count_nz[z:].max(initial=0) > n_zero:
        x = np.zeros(m)
        x[at] = values
        return _dense_segments(x, A, ones, total)  # 0 is not the first most frequent value: as dense
    d = distinct.size + 1
    if d < 2:
        return None
    per_value = np.insert(count_nz, z, n_zero)
    out_values = np.insert(distinct, z, 0.0)
    group = inv_nz.reshape(-1) + (inv_nz.reshape(-1) >= z)  # the stored non-zero rows' value index
    others = np.delete(np.arange(d), z)
    pos = at[nz][np.argsort(group, kind="stable")]  # rows of the other values, value by value
    starts = np.concatenate([[0], np.cumsum(per_value[others])[:-1]]).astype(np.intp)
    sums = np.zeros((d, A.shape[1]))
    sums[others] = np.add.reduceat(A[pos], starts, axis=0)
    valid_total = total if not nan.any() else total - A[at[nan]].sum(axis=0)
    sums[z] = valid_total - sums[others].sum(axis=0)
    counts = np.zeros(d)
    counts[others] = np.bincount(group, weights=ones[at[nz]], minlength=d)[others]
    counts[z] = ones.sum() - ones[at[nan]].sum() - counts[others].sum()
    return out_values, sums, counts


def best_refinement(space: SearchSpace, covered: np.ndarray, weights: np.ndarray, atoms: np.ndarray, head: Head,
                    features: np.ndarray, min_coverage: int,
                    evaluate: Callable[[np.ndarray], np.ndarray] | None = None) -> Refinement | None:
    """The best condition to add to a rule that covers ``covered``, or None when no candidate covers at least
    ``min_coverage`` examples of non-zero weight on its side. ``features`` ascending."""
    if space.edges is not None:
        return best_binned(space.bins, space.n_bins, space.edges, covered, weights, atoms, head, features,
                           min_coverage)
    evaluate = head.evaluate if evaluate is None else evaluate
    rows = np.flatnonzero(covered)
    if rows.size < 2:
        return None
    A = atoms[rows] * weights[rows, None]
    ones = (weights[rows] > 0).astype(np.float64)
    total = A.sum(axis=0)
    cand: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for f in features:  # per feature the prefix sums over its distinct values: "x <= t" at each boundary
        seg = _value_segments(space, int(f), rows, A, ones, total)
        if seg is not None:
            values, sums, counts = seg
            cum, cum_n = np.cumsum(sums, axis=0), np.cumsum(counts)
            cand.append((int(f), values, cum[:-1], cum[-1] - cum[:-1],
                         np.stack([cum_n[:-1], cum_n[-1] - cum_n[:-1]], axis=1)))
    if not cand:
        return None
    le = np.concatenate([c[2] for c in cand])
    gt = np.concatenate([c[3] for c in cand])
    n = np.concatenate([c[4] for c in cand])
    q = np.stack([evaluate(le), evaluate(gt)], axis=1)
    q[n < min_coverage] = np.inf
    flat = int(np.argmin(q))
    quality = float(q.flat[flat])
    if not np.isfinite(quality):
        return None
    c, side = divmod(flat, 2)
    bounds = np.cumsum([len(x[2]) for x in cand])
    which = int(np.searchsorted(bounds, c, side="right"))
    f, values = cand[which][0], cand[which][1]
    j = c - (int(bounds[which - 1]) if which else 0)
    t = space.threshold(f, float(values[j]), float(values[j + 1]))
    return Refinement(quality, f, "<=" if side == 0 else ">", t, (le if side == 0 else gt)[flat // 2].copy(),
                      int(n[flat // 2, side]))
