"""Objectives: base score, gradients and hessians, the link to predictions, and the name of the default metric
(computed in :mod:`mdhom.learn.metrics`).

Every loss works on raw scores of shape (n_rows, n_outputs) in float64. These functions are the numpy
references of the device gradient kernels (``kernels/trees/loss.cl``, :func:`mdhom.components.gradients.gradients`),
which a device-resident fit runs instead; so ``gradients`` is written with the kernels' operations in their
order: :func:`~mdhom.learn.portable.exp_nonpositive` (not ``np.exp``, whose last bit differs between CPUs) and
sums over outputs in index order. Double precision on a device then gives bit-identical gradients. Base scores,
links and metrics use the same portable functions (:mod:`mdhom.learn.portable`), so a model file does not
depend on the CPU it was trained on either. Sample weights multiply g and h.
"""

from __future__ import annotations

import math

import numpy as np

from mdhom.learn.portable import exp_nonpositive, log_positive, sum_in_order

# canonical name -> accepted aliases (XGBoost and LightGBM spellings)
ALIASES = {
    "reg:squarederror": ("regression", "squared_error", "l2", "mse", "reg:squared_error"),
    "binary:logistic": ("binary", "logistic"),
    "multi:softmax": ("multiclass", "softmax", "multi:softprob"),
    "multilabel:logistic": ("multilabel", "multi_label", "multilabel_logistic"),
}
_LOOKUP = {alias: name for name, aliases in ALIASES.items() for alias in (name, *aliases)}
_EPS = 1e-16
SQUARED_ERROR_LIMIT = 1e300  # the most sum(w (y - mean)^2) may reach: see SquaredError.check_target


def sigmoid_exact(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) with :func:`exp_nonpositive` (neither branch overflows): the gradient kernels' sigmoid."""
    e = exp_nonpositive(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softmax_exact(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax with :func:`exp_nonpositive` and sums over outputs in index order (the kernels')."""
    z = exp_nonpositive(x - x.max(axis=1, keepdims=True))
    return z / sum_in_order(z, axis=1)[:, None]


def canonical_objective(name: object) -> str:
    if not isinstance(name, str) or name not in _LOOKUP:
        raise ValueError(f"unknown objective {name!r}; known: {', '.join(ALIASES)} (or aliases "
                         f"{', '.join(a for v in ALIASES.values() for a in v)})")
    return _LOOKUP[name]


class Loss:
    """One objective. ``y`` is the encoded target: (n_rows, n_outputs) float64 (class index for softmax)."""

    name = ""
    metric = ""  # the default eval metric (a name in mdhom.learn.metrics)
    kind = ""  # which gradient kernel computes this loss on a device: "squared", "logistic", "softmax"
    n_outputs = 1

    def base_score(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def check_target(self, y: np.ndarray, w: np.ndarray, what: str = "y") -> None:
        """Refuse a target (``what`` names it) whose training statistics would overflow; most losses have none."""

    def gradients(self, y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw scores to predictions (probabilities for the classifiers)."""
        raise NotImplementedError


class SquaredError(Loss):
    name, metric, kind = "reg:squarederror", "rmse", "squared"

    def base_score(self, y, w):
        return np.array([np.average(y[:, 0], weights=w)])

    def check_target(self, y, w, what="y"):
        # A leaf's score G^2 / (H + lambda) is at most its rows' sum of w (y - raw)^2 (Cauchy-Schwarz), and so
        # is the rmse's sum: below this limit neither overflows float64 (1.8e308). Beyond it every gain was
        # inf, no split was ever taken and the model came out constant, silently.
        with np.errstate(over="ignore", invalid="ignore"):
            base = float(np.average(y[:, 0], weights=w))
            spread = float(np.sum(w * (y[:, 0] - base) ** 2))
        if np.isfinite(spread) and spread <= SQUARED_ERROR_LIMIT:
            return
        reach = f"reaches {spread:.3g}" if np.isfinite(spread) else "overflows float64"
        limit = math.sqrt(SQUARED_ERROR_LIMIT / float(np.sum(w)))
        raise ValueError(
            f"{what} is too large for squared-error training: sum(weight * (y - mean(y))^2) {reach}, and the split "
            f"gains and the rmse need it below {SQUARED_ERROR_LIMIT:.0e}; here (total weight {np.sum(w):.3g}) "
            f"that means |y - mean(y)| below about {limit:.2g}. Divide y by a power of ten and multiply the "
            "predictions back.")

    def gradients(self, y, raw, w):
        return (raw - y) * w[:, None], np.repeat(w[:, None], raw.shape[1], axis=1).astype(np.float64)

    def transform(self, raw):
        return raw


class Logistic(Loss):
    """Binary logistic on each output: ``binary:logistic`` (one output) and ``multilabel:logistic``."""

    metric, kind = "logloss", "logistic"

    def __init__(self, n_outputs: int = 1) -> None:
        self.n_outputs = n_outputs
        self.name = "binary:logistic" if n_outputs == 1 else "multilabel:logistic"

    def base_score(self, y, w):
        p = np.average(y, axis=0, weights=w)
        p = np.clip(p, 1e-7, 1 - 1e-7)
        return log_positive(p / (1 - p))

    def gradients(self, y, raw, w):
        p = sigmoid_exact(raw)
        return (p - y) * w[:, None], np.maximum(p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return sigmoid_exact(raw)


class Softmax(Loss):
    name, metric, kind = "multi:softmax", "mlogloss", "softmax"

    def __init__(self, n_outputs: int) -> None:
        self.n_outputs = n_outputs

    def _onehot(self, y):
        out = np.zeros((y.shape[0], self.n_outputs))
        out[np.arange(y.shape[0]), y[:, 0].astype(np.int64)] = 1.0
        return out

    def base_score(self, y, w):
        prior = np.bincount(y[:, 0].astype(np.int64), weights=w, minlength=self.n_outputs) / w.sum()
        return log_positive(np.clip(prior, 1e-7, None))

    def gradients(self, y, raw, w):
        p = softmax_exact(raw)
        # LightGBM's factor K/(K-1) on the diagonal hessian keeps the Newton step of multi-output leaves
        # from overshooting (the full softmax hessian is singular along the all-ones direction)
        factor = self.n_outputs / (self.n_outputs - 1.0)
        return (p - self._onehot(y)) * w[:, None], np.maximum(factor * p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return softmax_exact(raw)


def make_loss(objective: str, n_outputs: int) -> Loss:
    if objective == "reg:squarederror":
        return SquaredError()
    if objective in ("binary:logistic", "multilabel:logistic"):
        return Logistic(n_outputs)
    if objective == "multi:softmax":
        return Softmax(n_outputs)
    raise ValueError(f"unknown objective {objective!r}")
