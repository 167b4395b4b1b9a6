"""The search for a rule's best refinement: for the covered examples, the sum of atoms on either side of every
candidate threshold of every sampled feature, each scored by the head; the best condition wins. Exact thresholds
here; binned features go to :mod:`mdhom.rules.binned` (the device kernels' order of summation).

This is the md_hom computation of the rule learner written in numpy (the reference the device kernels are held
to): per feature, the covered examples in ascending value order; a prefix sum of their atoms (weighted by the
instance weights) gives the statistics of "x <= t" at every boundary between distinct values, the total minus
it those of "x > t"; the head's quality of both is the scalar function; an arg-min over (feature, boundary,
operator) in that order picks the condition, ties to the first. NaN satisfies no condition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdhom.rules.binned import best_binned, bin_matrix
from mdhom.rules.heads import Head

# elements of the (features x examples x atom) prefix-sum block one chunk of features may take (32 MiB)
CHUNK_ELEMENTS = 1 << 22


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

    def __init__(self, X: np.ndarray, edges: list[np.ndarray] | None = None) -> None:
        self.X = X
        self.edges = edges
        if edges is None:
            self.values = X
            self.order = np.argsort(self.values, axis=0, kind="stable").T.copy()  # (features, examples)
        else:
            self.bins, self.n_bins = bin_matrix(X, edges)

    def threshold(self, feature: int, lo: float, hi: float) -> float:
        """The raw threshold between neighbouring values ``lo < hi`` of ``feature``: halfway (``lo`` itself
        where halfway rounds onto ``hi``)."""
        t = lo + (hi - lo) / 2.0
        return float(lo if t >= hi else t)


def covered_by(X: np.ndarray, feature: int, op: str, threshold: float) -> np.ndarray:
    """Rows of ``X`` that satisfy the condition (NaN satisfies neither operator)."""
    col = X[:, feature]
    return col <= threshold if op == "<=" else col > threshold


def best_refinement(space: SearchSpace, covered: np.ndarray, weights: np.ndarray, atoms: np.ndarray, head: Head,
                    features: np.ndarray, min_coverage: int,
                    evaluate: Callable[[np.ndarray], np.ndarray] | None = None) -> Refinement | None:
    """The best condition to add to a rule that covers ``covered``, or None when no candidate covers at least
    ``min_coverage`` examples of non-zero weight on its side. ``features`` ascending."""
    if space.edges is not None:
        return best_binned(space.bins, space.n_bins, space.edges, covered, weights, atoms, head, features,
                           min_coverage)
    evaluate = head.evaluate if evaluate is None else evaluate
    m = int(covered.sum())
    if m < 2:
        return None
    k = atoms.shape[1]
    chunk = max(1, CHUNK_ELEMENTS // (m * k))
    best: Refinement | None = None
    for start in range(0, len(features), chunk):
        feats = features[start : start + chunk]
        idx = space.order[feats]
        idx = idx[covered[idx]].reshape(len(feats), m)  # each row: the covered examples in ascending order
        v = space.values[idx, feats[:, None]]
        valid = ~np.isnan(v)
        w = weights[idx] * valid
        pre = np.cumsum(atoms[idx] * w[..., None], axis=1)
        cnt = np.cumsum((w > 0).astype(np.int64), axis=1)
        boundary = valid[:, :-1] & valid[:, 1:] & (v[:, :-1] < v[:, 1:])
        fi, j = np.nonzero(boundary)
        if fi.size == 0:
            continue
        le = pre[fi, j]
        gt = pre[fi, -1] - le
        le_n = cnt[fi, j]
        gt_n = cnt[fi, -1] - le_n
        q = np.stack([evaluate(le), evaluate(gt)], axis=1)
        q[:, 0][le_n < min_coverage] = np.inf
        q[:, 1][gt_n < min_coverage] = np.inf
        flat = int(np.argmin(q))
        c, side = divmod(flat, 2)
        quality = float(q[c, side])
        if not np.isfinite(quality) or (best is not None and not quality < best.quality):
            continue
        f = int(feats[fi[c]])
        t = space.threshold(f, float(v[fi[c], j[c]]), float(v[fi[c], j[c] + 1]))
        best = Refinement(quality, f, "<=" if side == 0 else ">", t, (le if side == 0 else gt)[c].copy(),
                          int(le_n[c] if side == 0 else gt_n[c]))
    return best
