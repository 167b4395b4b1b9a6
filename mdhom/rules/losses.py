"""The rule learners' losses: gradients and Hessians of every (example, label) from the current scores.

Labels are 0/1; each loss reads them as expected scores -1/+1, as mlrl-boomer does. Decomposable losses give a
gradient and a Hessian per (example, label); the example-wise logistic loss couples an example's labels, so its
Hessian is the full symmetric L x L matrix per example, kept packed (row-major lower triangle, L(L+1)/2 entries:
entry (c, r) with r <= c at c(c+1)/2 + r).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mdhom.learn.losses import sigmoid_exact


class RuleLoss:
    name: str
    decomposable: bool = True
    # the Hessians are a function of the gradients (:meth:`hessian`): a device keeps the gradients only
    hessian_from_gradients: bool = False
    has_probabilities: bool = True

    def statistics(self, Y: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(gradients (n, L), Hessians (n, L) or packed (n, L(L+1)/2)) at scores ``S`` for 0/1 labels ``Y``."""
        raise NotImplementedError

    def value(self, Y: np.ndarray, S: np.ndarray) -> np.ndarray:
        """The loss of each example (summed over its labels for a decomposable loss)."""
        raise NotImplementedError

    def probabilities(self, S: np.ndarray) -> np.ndarray:
        """Label-wise probabilities from scores."""
        return sigmoid_exact(S)


class LogisticLabelWise(RuleLoss):
    name = "logistic_labelwise"

    def statistics(self, Y, S):
        p = sigmoid_exact(S)
        return p - Y, p * (1.0 - p)

    def value(self, Y, S):
        x = np.where(Y > 0, -S, S)
        return np.logaddexp(0.0, x).sum(axis=1)


class SquaredError(RuleLoss):
    name = "squared_error"
    has_probabilities = False

    def statistics(self, Y, S):
        return S - (2.0 * Y - 1.0), np.ones_like(S)

    def value(self, Y, S):
        # half the squared error: the loss whose derivatives mlrl-boomer uses (gradient s - e, Hessian 1)
        return 0.5 * ((2.0 * Y - 1.0 - S) ** 2).sum(axis=1)


@lru_cache(maxsize=8)
def packed_index(n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the packed lower triangle's entries, in storage order (read-only; cached: every Hessian
    update and head asks)."""
    rows, cols = np.tril_indices(n_labels)
    rows, cols = rows.astype(np.intp), cols.astype(np.intp)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def unpack(packed: np.ndarray, n_labels: int) -> np.ndarray:
    """Full symmetric matrices (..., L, L) from packed lower triangles (..., L(L+1)/2)."""
    rows, cols = packed_index(n_labels)
    out = np.zeros(packed.shape[:-1] + (n_labels, n_labels))
    out[..., rows, cols] = packed
    out[..., cols, rows] = packed
    return out


class LogisticExampleWise(RuleLoss):
    """log(1 + sum_l exp(x_l)), x_l = -e_l s_l with e_l = +-1: the gradient is -e_c p_c and the Hessian
    p_c (1 - p_c) on the diagonal and -e_c e_r p_c p_r off it, where p_c = exp(x_c) / (1 + sum_l exp(x_l))."""

    name = "logistic_examplewise"
    decomposable = False
    hessian_from_gradients = True

    def _shares(self, Y: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = 2.0 * Y - 1.0
        x = -e * S
        top = np.maximum(x.max(axis=1, keepdims=True), 0.0)  # exp-normalise: the 1 is exp(0)
        ex = np.exp(x - top)
        z = np.exp(-top) + ex.sum(axis=1, keepdims=True)
        return e, ex / z

    def gradients(self, Y: np.ndarray, S: np.ndarray) -> np.ndarray:
        """The gradients (n, L) alone: all a device search of complete heads needs (see :meth:`hessian`)."""
        e, p = self._shares(Y, S)
        return -e * p

    def hessian(self, g: np.ndarray) -> np.ndarray:
        """The packed Hessians (n, L(L+1)/2) from the gradients alone, the same bits as from the scores: e is +-1,
        so p_c = |g_c| and e_r p_r = -g_r exactly, and -(e_c p_c)(e_r p_r) = g_c (-g_r) rounds once. This is
        why the device never needs the 840 MB of packed Hessians of a 20000 x 101 fit: its histogram builds each
        entry from two gradients with one multiply (:mod:`mdhom.rules.device_coupled`), as here."""
        L = g.shape[1]
        ep, p = -g, np.abs(g)
        # packed row by row, no gathered (n, L(L+1)/2) temporaries: 6x faster at 101 labels
        h = np.empty((g.shape[0], L * (L + 1) // 2))
        for c in range(L):
            at = c * (c + 1) // 2
            np.multiply(g[:, c:c + 1], ep[:, : c + 1], out=h[:, at: at + c + 1])
            h[:, at + c] = p[:, c] * (1.0 - p[:, c])
        return h

    def statistics(self, Y, S):
        g = self.gradients(Y, S)
        return g, self.hessian(g)

    def value(self, Y, S):
        x = -(2.0 * Y - 1.0) * S
        top = np.maximum(x.max(axis=1), 0.0)
        return top + np.log(np.exp(-top) + np.exp(x - top[:, None]).sum(axis=1))


def make_loss(name: str) -> RuleLoss:
    return {"logistic_labelwise": LogisticLabelWise, "logistic_examplewise": LogisticExampleWise,
            "squared_error": SquaredError}[name]()
