"""Rule heads: the scores a rule predicts and their quality, from the statistics summed over covered examples.

A head works on *atoms*: per example, the statistics of the labels it may predict, laid out as ``gather``
returns them (gradients, then Hessians: one per label for decomposable statistics and single-label heads, the
packed lower triangle for complete heads over the example-wise loss). The refinement only sums atoms over
examples; the head turns a sum into scores and a quality. Quality is the loss change of the second-order
approximation, regularisation included (lower is better, as in mlrl-boomer):

    q(s) = g.s + 1/2 s'Hs + l1 |s|_1 + l2/2 |s|^2,   at the minimiser s = -(H + l2 I)^-1 soft(g, l1).

A coupled Hessian (complete heads of the example-wise loss) is solved and scored by :mod:`mdhom.rules.coupled` in
one fixed order of operations (an LDL^T solve, no LAPACK), the order the device kernels follow.

L1 enters as soft thresholding of the gradient (the exact minimiser for a diagonal Hessian); mlrl-boomer adds
its L1 term with other signs in places, which only matters for ``l1_regularization_weight > 0``.

A single-label head predicts for the label of the largest absolute score (ties to the lower label), and its
quality is that label's: mlrl-boomer's choice (``DecomposableSingleOutputRuleEvaluation``). It is not the label
of the least quality: with L2 the quality is -g^2 / 2(h + l2) and the score -g / (h + l2), so a label with a
large Hessian can have the better quality and the smaller score. Taking the least quality instead moved the
Hamming loss on enron by 0.006 against mlrl-boomer, beyond the bounds the project holds itself to.
"""

from __future__ import annotations

import numpy as np

from mdhom.learn.portable import sum_in_order
from mdhom.rules import coupled
from mdhom.rules.coupled import soft_threshold
from mdhom.rules.label_binning import LabelBinning
from mdhom.rules.label_binning import solve as binned_solve
from mdhom.rules.losses import packed_index

__all__ = ["Head", "label_qualities", "label_scores", "soft_threshold"]


def label_scores(g: np.ndarray, h: np.ndarray, l1: float, l2: float) -> np.ndarray:
    """Each label's optimal score; zero where the regularised Hessian is zero (mlrl-boomer's divideOrZero)."""
    den = h + l2
    safe = np.where(den == 0.0, 1.0, den)
    return np.where(den == 0.0, 0.0, -soft_threshold(g, l1) / safe)


def label_qualities(s: np.ndarray, g: np.ndarray, h: np.ndarray, l1: float, l2: float) -> np.ndarray:
    return g * s + 0.5 * h * s * s + l1 * np.abs(s) + 0.5 * l2 * s * s


class Head:
    """The head of one kind over ``labels`` (ascending label indices) for a loss with or without a full
    label Hessian; ``label_binning`` (coupled heads only) groups the labels as :mod:`mdhom.rules.label_binning`
    says."""

    def __init__(self, kind: str, full_hessian: bool, labels: np.ndarray, n_labels: int, l1: float,
                 l2: float, label_binning: LabelBinning | None = None) -> None:
        self.kind = kind
        self.full_hessian, self.n_labels = full_hessian, n_labels
        self.labels = np.asarray(labels, np.intp)
        self.k = self.labels.size
        self.l1, self.l2 = float(l1), float(l2)
        # complete heads over the example-wise loss need the coupled Hessian; single-label heads its diagonal
        self.coupled = full_hessian and kind == "complete" and self.k > 1
        self.label_binning = label_binning if self.coupled else None
        if full_hessian:  # packed entry (r, c), c <= r, sits at r(r+1)/2 + c (losses.packed_index's order)
            if self.coupled:
                sub_r, sub_c = packed_index(self.k)
                r, c = self.labels[sub_r], self.labels[sub_c]  # labels ascend, so r >= c
            else:
                r = c = self.labels
            self._h_cols = (r * (r + 1) // 2 + c).astype(np.intp)
        else:
            self._h_cols = self.labels

    @property
    def h_columns(self) -> np.ndarray:
        """The Hessian columns the atoms take (the labels' own, the diagonal's or the coupled block's)."""
        return self._h_cols

    @property
    def width(self) -> int:
        """Atom width: statistics per example."""
        return self.k + self._h_cols.size

    def gather(self, G: np.ndarray, H: np.ndarray) -> np.ndarray:
        """Per-example atoms (n, width): the gradients of the head's labels, then their Hessians."""
        return np.concatenate([G[:, self.labels], H[:, self._h_cols]], axis=1)

    def evaluate(self, sums: np.ndarray) -> np.ndarray:
        """Quality (lower is better) of the head for each row of summed atoms (C, width)."""
        g, h = sums[:, : self.k], sums[:, self.k :]
        if self.label_binning is not None:
            return binned_solve(g, h, self.l1, self.l2, self.label_binning)[1]
        if self.coupled:
            return coupled.quality(coupled.scores(g, h, self.l1, self.l2), g, h, self.l1, self.l2)
        s = label_scores(g, h, self.l1, self.l2)
        q = label_qualities(s, g, h, self.l1, self.l2)
        if self.kind == "single":
            return np.take_along_axis(q, np.argmax(np.abs(s), axis=1)[:, None], axis=1)[:, 0]
        return sum_in_order(q, axis=1)  # in label order, as the device kernels add (never pairwise)

    def predict(self, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(label indices, scores) of the head for one sum of atoms (width,): a single-label head predicts for the
        label of the largest absolute score (ties to the lower index)."""
        g, h = total[None, : self.k], total[None, self.k :]
        if self.label_binning is not None:
            return self.labels.copy(), binned_solve(g, h, self.l1, self.l2, self.label_binning)[0][0]
        if self.coupled:
            return self.labels.copy(), coupled.scores(g, h, self.l1, self.l2)[0]
        s = label_scores(g, h, self.l1, self.l2)
        if self.kind == "single":
            best = int(np.argmax(np.abs(s[0])))
            return self.labels[best : best + 1].copy(), s[0, best : best + 1]
        return self.labels.copy(), s[0]

    def restricted(self, labels: np.ndarray) -> Head:
        """The same kind of head over fewer labels (mlrl-boomer fixes a rule's labels after its first condition)."""
        return Head(self.kind, self.full_hessian, labels, self.n_labels, self.l1, self.l2, self.label_binning)
