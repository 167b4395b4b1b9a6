"""The refinement search over binned features, written as the device computes it (the numpy reference of
:mod:`mdhom.rules.device`, and the numpy path of every fit with ``feature_binning``).

Each feature's values are bin indices ``0 .. len(edges[f])`` (bin ``b`` holds ``edges[f][b-1] < x <=
edges[f][b]``), one bin count ``n_bins = max_f len(edges[f]) + 2`` for all features, and NaN in the last bin
(``n_bins - 1``), which satisfies no condition. One refinement step is three md_hom computations and an arg-max:

1. statistics per (feature, slot, bin) summed over the examples: a slot is one lane pair of a head's atom
   (gradient, Hessian of one label) or the count slot (covered examples, and those of non-zero weight); an
   uncovered example adds nothing. Sums start at 0.0 and add examples in ascending index order (``np.bincount``'s
   order, the order the histogram kernel's pinned fold adds in), so double precision agrees to the bit;
2. an inclusive prefix sum over bins (``np.cumsum``'s order);
3. for every candidate (feature, bin b, operator): the side "bin <= b" is the prefix at b, the side "bin > b" the
   prefix at the last real bin minus it; the head's quality of that side is the scalar function;
4. the arg-min over (feature, bin, operator) in that order (``<=`` first), ties to the first.

A candidate needs covered examples with a real value on both sides of ``b`` (a boundary between occupied bins,
as the exact search asks for a boundary between distinct values) and at least ``min_coverage`` examples of
non-zero weight on its own side. Of several bins between the same two occupied bins the lowest wins the tie,
whose edge is the exact search's threshold too.
"""

from __future__ import annotations

import numpy as np

from mdhom.learn.binning import bin_dtype
from mdhom.rules.features import Features, columns
from mdhom.rules.heads import Head


def bin_matrix(X: np.ndarray | Features, edges: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """(bins (n, F) of :func:`mdhom.learn.binning.bin_dtype`, n_bins): each value's bin, NaN in the last one. A
    sparse matrix is binned column by column from its stored entries (the absent rows take the bin of 0), never
    densified to float64."""
    X = columns(X)
    n_bins = max((e.size for e in edges), default=0) + 2
    out = np.empty(X.shape, bin_dtype(n_bins))
    for f, e in enumerate(edges):
        if X.sparse:
            rows, values = X.stored(f)
            out[:, f] = np.searchsorted(e, 0.0, side="left")
            b = np.searchsorted(e, values, side="left")
            b[np.isnan(values)] = n_bins - 1
            out[rows, f] = b
            continue
        col = X.column(f)
        b = np.searchsorted(e, col, side="left")
        b[np.isnan(col)] = n_bins - 1
        out[:, f] = b
    return out, n_bins


def slot_values(atoms: np.ndarray, covered: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(n, lanes) values the statistics add per example: the weighted atoms where covered with non-zero weight
    (else 0.0, never -0.0), then the count lanes (covered; covered with non-zero weight) as 1.0 / 0.0."""
    sel = covered & (weights != 0)
    vals = np.where(sel[:, None], atoms * weights[:, None], 0.0)
    return np.concatenate([vals, covered[:, None].astype(np.float64), sel[:, None].astype(np.float64)], axis=1)


def statistics(bins: np.ndarray, n_bins: int, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """(F, n_bins, lanes) sums of ``values`` (n, lanes) per feature and bin, examples added in ascending order
    from 0.0; ``rows`` (ascending) limits the sum to them (the others add exactly 0.0)."""
    if rows is not None:
        bins, values = bins[rows], values[rows]
    m, n_feat = bins.shape
    idx = (bins.astype(np.int64) + (np.arange(n_feat, dtype=np.int64) * n_bins)[None, :]).ravel()
    out = np.empty((n_feat, n_bins, values.shape[1]))
    for lane in range(values.shape[1]):
        out[:, :, lane] = np.bincount(idx, weights=np.repeat(values[:, lane], n_feat),
                                      minlength=n_feat * n_bins).reshape(n_feat, n_bins)
    return out


def qualities(cum: np.ndarray, head: Head, min_coverage: int) -> np.ndarray:
    """(F, n_bins - 2, 2) quality of every candidate (operator 0: ``<=``, 1: ``>``) from the prefix sums
    (F, n_bins, lanes); +inf where a candidate is not allowed."""
    n_feat, n_bins, lanes = cum.shape
    width = lanes - 2
    le = cum[:, : n_bins - 2, :]
    total = cum[:, n_bins - 2, :]
    gt = total[:, None, :] - le
    boundary = (le[..., width] >= 1.0) & (gt[..., width] >= 1.0)
    q = np.empty((n_feat, n_bins - 2, 2))
    for op, side in enumerate((le, gt)):
        qs = head.evaluate(side[..., :width].reshape(-1, width)).reshape(n_feat, n_bins - 2)
        q[..., op] = np.where(boundary & (side[..., width + 1] >= min_coverage), qs, np.inf)
    return q


def best_binned(bins: np.ndarray, n_bins: int, edges: list[np.ndarray], covered: np.ndarray, weights: np.ndarray,
                atoms: np.ndarray, head: Head, features: np.ndarray, min_coverage: int):  # noqa: ANN201
    """The best condition (a :class:`mdhom.rules.refinement.Refinement`) or None; ``features`` ascending."""
    from mdhom.rules.refinement import Refinement

    if n_bins <= 2 or len(features) == 0:
        return None
    values = slot_values(atoms, covered, weights)
    stats = statistics(bins[:, features], n_bins, values, np.flatnonzero(covered))
    cum = np.cumsum(stats, axis=1)
    q = qualities(cum, head, min_coverage)
    flat = int(np.argmin(q))
    quality = float(q.flat[flat])
    if not np.isfinite(quality):
        return None
    fi, rest = divmod(flat, 2 * (n_bins - 2))
    b, op = divmod(rest, 2)
    f = int(features[fi])
    width = atoms.shape[1]
    side = cum[fi, b] if op == 0 else cum[fi, n_bins - 2] - cum[fi, b]
    return Refinement(quality, f, "<=" if op == 0 else ">", float(edges[f][b]), side[:width].copy(),
                      int(side[width + 1]), int(b))
