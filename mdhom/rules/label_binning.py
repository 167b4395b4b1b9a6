"""Label binning for complete heads over a coupled Hessian (mlrl-boomer's ``label_binning="equal-width"``, its
choice for the example-wise loss with complete heads): a candidate's labels are grouped by their label-wise optimal
score, each group shares one score, and the head solves a system of one unknown per non-empty group instead of one
per label (a handful instead of a hundred at mediamill's 101 labels).

Per candidate, with sums ``g`` (k) and the packed Hessian ``h``:

1. criterion of each label: its label-wise score -soft(g_i, l1) / (h_ii + l2) (0 where h_ii + l2 is 0);
2. the negative criteria go to ``bounded(#negative)`` equal-width bins over [min, max] of the negative criteria, the
   positive ones likewise after them; bounded(n) = ceil(ratio * n) in float32, at least min(min_bins, n), at most
   max_bins unless 0; a criterion of 0 goes to no bin (score 0). A bin index is floor((c - min) / span) with
   span = (max - min) / bins, capped at the last bin (0 where the span is 0);
3. empty bins are dropped (the others keep their order);
4. per bin the sums of its labels' gradients and Hessian diagonals; per pair of different bins the sum of the
   Hessian entries between their labels (the entries between labels of one bin are left out, as mlrl-boomer does);
   labels in ascending order, pairs (i, j < i) row by row;
5. the bins' scores: (H_b + l2 n_b I) s = -soft(G_b, l1 n_b) by :mod:`mdhom.mdh.linalg`'s LDL^T (n_b: labels in
   the bin), and the quality sum_b [s_b (G_b + H_bb s_b / 2 + t_b) + l1 n_b |s_b| + l2 n_b s_b^2 / 2] with
   t_b = sum_{c<b} H_bc s_c (0 when no label has a non-zero criterion).

The order of every operation is the kernel's (``kernels/rules/coupled_quality.cl``), so the device search agrees
with this reference bit for bit. The numbers (ratio 0.04, min 1, max 0 bins) are mlrl-boomer's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mdhom.mdh import linalg
from mdhom.rules.coupled import soft_threshold


@dataclass(frozen=True)
class LabelBinning:
    """Equal-width label binning: ``ratio`` of the labels as bins (per sign), at least ``min_bins``, at most
    ``max_bins`` (0: no upper bound)."""

    ratio: float = 0.04
    min_bins: int = 1
    max_bins: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.ratio < 1.0:
            raise ValueError(f"label binning ratio must be in (0, 1), got {self.ratio}")
        if self.min_bins < 1 or (self.max_bins != 0 and self.max_bins < self.min_bins):
            raise ValueError(f"label binning needs min_bins >= 1 and max_bins 0 or >= min_bins, got "
                             f"{self.min_bins}, {self.max_bins}")

    def bounded(self, n: np.ndarray) -> np.ndarray:
        """Bins for ``n`` labels of one sign: ceil(ratio * n) in float32, within [min(min_bins, n), max_bins]."""
        n = np.asarray(n, np.int64)
        r = np.ceil(np.float32(self.ratio) * n.astype(np.float32)).astype(np.int64)
        lo = np.minimum(self.min_bins, n)
        r = np.where(r < lo, lo, r)
        if self.max_bins >= self.min_bins:
            r = np.where(r > self.max_bins, self.max_bins, r)
        return r

    def max_bins_for(self, k: int) -> int:
        """Most bins a head over ``k`` labels can have (both signs)."""
        return int(2 * self.bounded(np.array([k]))[0])


def _assign(crit: np.ndarray, lb: LabelBinning) -> np.ndarray:
    """(C, k) bin of each label (-1: criterion 0), before empty bins are dropped."""
    neg, pos = crit < 0, crit > 0
    n_neg, n_pos = neg.sum(axis=1), pos.sum(axis=1)
    b_neg = np.where(n_neg > 0, lb.bounded(n_neg), 0)
    b_pos = np.where(n_pos > 0, lb.bounded(n_pos), 0)
    min_neg = np.minimum(0.0, np.where(neg, crit, 0.0).min(axis=1))
    max_neg = np.where(neg, crit, -np.inf).max(axis=1)
    min_pos = np.where(pos, crit, np.inf).min(axis=1)
    max_pos = np.maximum(0.0, np.where(pos, crit, 0.0).max(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        span_neg = np.where(min_neg < 0, (max_neg - min_neg) / np.maximum(b_neg, 1), 0.0)
        span_pos = np.where(max_pos > 0, (max_pos - min_pos) / np.maximum(b_pos, 1), 0.0)
        x_neg = np.floor((crit - min_neg[:, None]) / span_neg[:, None])
        x_pos = np.floor((crit - min_pos[:, None]) / span_pos[:, None])
    i_neg = _bin_index(x_neg, b_neg[:, None])
    i_pos = b_neg[:, None] + _bin_index(x_pos, b_pos[:, None])
    return np.where(neg, i_neg, np.where(pos, i_pos, -1))


def _bin_index(x: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """floor(...) as a bin: NaN (a zero span) 0, at or past the last bin the last one."""
    top = np.maximum(bins - 1, 0)
    safe = np.where(np.isnan(x), 0.0, np.minimum(x, top.astype(np.float64)))
    return np.maximum(safe, 0.0).astype(np.int64)


def bins_of(g: np.ndarray, h: np.ndarray, l1: float, l2: float, lb: LabelBinning) -> tuple[np.ndarray, np.ndarray]:
    """((C, k) bin of each label after empty bins are dropped, -1 for none; (C,) non-empty bins)."""
    k = g.shape[-1]
    diag = np.arange(k) * (np.arange(k) + 1) // 2 + np.arange(k)
    hd = h[:, diag]
    den = hd + l2
    crit = np.where(den == 0.0, 0.0, -soft_threshold(g, l1) / np.where(den == 0.0, 1.0, den))
    raw = _assign(crit, lb)
    width = max(1, int(raw.max(initial=-1)) + 1)
    used = np.zeros((g.shape[0], width), bool)
    rows = np.repeat(np.arange(g.shape[0]), k)
    flat = raw.ravel()
    used[rows[flat >= 0], flat[flat >= 0]] = True
    new = np.cumsum(used, axis=1) - 1
    idx = np.where(raw >= 0, np.take_along_axis(new, np.maximum(raw, 0), axis=1), -1)
    return idx, used.sum(axis=1)


def solve(g: np.ndarray, h: np.ndarray, l1: float, l2: float, lb: LabelBinning) -> tuple[np.ndarray, np.ndarray]:
    """((C, k) each label's score, (C,) quality) of binned complete heads for sums ``g`` (C, k), ``h`` (C, P)."""
    C, k = g.shape
    idx, n_bins = bins_of(g, h, l1, l2, lb)
    B = max(1, int(n_bins.max(initial=0)))
    P = linalg.packed_size(B)
    ar = np.arange(C)
    dk = np.arange(k) * (np.arange(k) + 1) // 2 + np.arange(k)
    db = np.arange(B) * (np.arange(B) + 1) // 2 + np.arange(B)
    G, H, cnt = np.zeros((C, B)), np.zeros((C, P)), np.zeros((C, B))
    for i in range(k):  # gradients and Hessian diagonals, labels ascending
        b = idx[:, i]
        on = b >= 0
        bb = np.maximum(b, 0)
        G[ar, bb] = G[ar, bb] + np.where(on, g[:, i], 0.0)
        H[ar, db[bb]] = H[ar, db[bb]] + np.where(on, h[:, dk[i]], 0.0)
        cnt[ar, bb] = cnt[ar, bb] + on
    # Hessian entries between labels of different bins, pairs (i, j < i) row by row: np.add.at adds them one by
    # one in the pairs' order (a pair whose labels share a bin adds 0.0 to entry 0), the kernel's order, without a
    # Python loop over the k(k-1)/2 pairs (0.2 s per head at 101 labels: a rule's final head is one such call)
    pi, pj = np.tril_indices(k, -1)
    hp = pi * (pi + 1) // 2 + pj
    step = max(1, (1 << 21) // max(1, pi.size))  # candidates per block: bounded temporaries
    for c0 in range(0, C, step):
        bi, bj = idx[c0:c0 + step, pi], idx[c0:c0 + step, pj]
        on = (bi >= 0) & (bj >= 0) & (bi != bj)
        r, c = np.minimum(bi, bj), np.maximum(bi, bj)
        at = np.where(on, c * (c + 1) // 2 + r, 0)
        np.add.at(H, (ar[c0:c0 + step, None], at), np.where(on, h[c0:c0 + step, hp], 0.0))
    A = H.copy()
    A[:, db] = H[:, db] + cnt * l2
    rhs = -_soft_weighted(G, cnt, l1)
    s = linalg.solve_packed(A, rhs, B)
    off = np.arange(B) * (np.arange(B) + 1) // 2
    t = np.zeros_like(s)
    for j in range(B - 1):
        t[:, j + 1:] = t[:, j + 1:] + H[:, off[j + 1:] + j] * s[:, j: j + 1]
    qb = s * (G + 0.5 * H[:, db] * s + t) + l1 * cnt * np.abs(s) + 0.5 * l2 * cnt * s * s
    q = np.zeros(C)
    for b in range(B):
        q = q + qb[:, b]
    q = np.where(np.isfinite(q), q, np.inf)
    scores = np.where(idx >= 0, np.take_along_axis(s, np.maximum(idx, 0), axis=1), 0.0)
    return scores, q


def _soft_weighted(G: np.ndarray, cnt: np.ndarray, l1: float) -> np.ndarray:
    """soft(G_b, l1 n_b) per bin (the kernel's form: sign times max(|G| - t, 0))."""
    if not l1 > 0:
        return G
    m = np.maximum(np.abs(G) - l1 * cnt, 0.0)
    return np.where(G > 0, m, np.where(G < 0, -m, 0.0 * m))
