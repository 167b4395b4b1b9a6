"""Objectives: base score, gradients and hessians, the link to predictions, and the name of the default metric
(computed in :mod:`mdhom.learn.metrics`).

Every loss works on raw scores of shape (n_rows, n_outputs) in float64. These functions are the numpy
references of the device gradient kernels (``kernels/trees/loss.cl``, :func:`mdhom.components.gradients.gradients`),
which a device-resident fit runs instead; so ``gradients`` is written with the kernels' operations in their
order: :func:`exp_nonpositive` (not ``np.exp``, whose last bit differs between libraries) and sequential sums
over outputs. Double precision on a device then gives bit-identical gradients. Sample weights multiply g and h.
"""

from __future__ import annotations

import math

import numpy as np

# canonical name -> accepted aliases (XGBoost and LightGBM spellings)
ALIASES = {
    "reg:squarederror": ("regression", "squared_error", "l2", "mse", "reg:squared_error"),
    "binary:logistic": ("binary", "logistic"),
    "multi:softmax": ("multiclass", "softmax", "multi:softprob"),
    "multilabel:logistic": ("multilabel", "multi_label", "multilabel_logistic"),
}
_LOOKUP = {alias: name for name, aliases in ALIASES.items() for alias in (name, *aliases)}
_EPS = 1e-16

# exp(x) = 2^k exp(r), x = k ln2 + r, |r| <= ln2 / 2 (fdlibm's two-part ln2: k * LN2_HI is exact), and exp(r) as
# its Taylor polynomial of degree 13 (error below 1e-17 on that interval) by Horner's rule. Only +, -, *,
# rint and ldexp: IEEE correctly rounded operations, so numpy and OpenCL (FP_CONTRACT OFF) agree to the bit.
INV_LN2 = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
EXP_COEFFS = tuple(1.0 / math.factorial(n) for n in range(13, -1, -1))  # highest degree first
EXP_MIN = -746.0  # exp(-746) rounds to 0 in double


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 (the only arguments the losses need), bit-reproducible on OpenCL devices."""
    x = np.maximum(np.asarray(x, np.float64), EXP_MIN)
    k = np.rint(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = np.full_like(r, EXP_COEFFS[0])
    for c in EXP_COEFFS[1:]:
        p = p * r + c
    return np.ldexp(p, k.astype(np.int32))


def sigmoid_exact(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) with :func:`exp_nonpositive`: the gradient kernels' sigmoid."""
    e = exp_nonpositive(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def softmax_exact(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax with :func:`exp_nonpositive` and sums over outputs in index order (the kernels')."""
    z = exp_nonpositive(x - x.max(axis=1, keepdims=True))
    total = z[:, 0].copy()
    for k in range(1, z.shape[1]):
        total = total + z[:, k]
    return z / total[:, None]


def canonical_objective(name: object) -> str:
    if not isinstance(name, str) or name not in _LOOKUP:
        raise ValueError(f"unknown objective {name!r}; known: {', '.join(ALIASES)} (or aliases "
                         f"{', '.join(a for v in ALIASES.values() for a in v)})")
    return _LOOKUP[name]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # written so that neither branch overflows
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


class Loss:
    """One objective. ``y`` is the encoded target: (n_rows, n_outputs) float64 (class index for softmax)."""

    name = ""
    metric = ""  # the default eval metric (a name in mdhom.learn.metrics)
    kind = ""  # which gradient kernel computes this loss on a device: "squared", "logistic", "softmax"
    n_outputs = 1

    def base_score(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gradients(self, y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw scores to predictions (probabilities for the classifiers)."""
        raise NotImplementedError


class SquaredError(Loss):
    name, metric, kind = "reg:squarederror", "rmse", "squared"

    def base_score(self, y, w):
        return np.array([np.average(y[:, 0], weights=w)])

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
        return np.log(p / (1 - p))

    def gradients(self, y, raw, w):
        p = sigmoid_exact(raw)
        return (p - y) * w[:, None], np.maximum(p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return _sigmoid(raw)


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
        return np.log(np.clip(prior, 1e-7, None))

    def gradients(self, y, raw, w):
        p = softmax_exact(raw)
        # LightGBM's factor K/(K-1) on the diagonal hessian keeps the Newton step of multi-output leaves
        # from overshooting (the full softmax hessian is singular along the all-ones direction)
        factor = self.n_outputs / (self.n_outputs - 1.0)
        return (p - self._onehot(y)) * w[:, None], np.maximum(factor * p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return _softmax(raw)


def make_loss(objective: str, n_outputs: int) -> Loss:
    if objective == "reg:squarederror":
        return SquaredError()
    if objective in ("binary:logistic", "multilabel:logistic"):
        return Logistic(n_outputs)
    if objective == "multi:softmax":
        return Softmax(n_outputs)
    raise ValueError(f"unknown objective {objective!r}")
