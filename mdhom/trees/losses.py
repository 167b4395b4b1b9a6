"""Objectives: base score, gradients and hessians, the link to predictions, and the metric early stopping watches.

Every loss works on raw scores of shape (n_rows, n_outputs) in float64 on the host; the gradients are handed
to the kernels, which never need to know which loss produced them. Sample weights multiply g and h.
"""

from __future__ import annotations

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
    metric = ""
    n_outputs = 1

    def base_score(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def gradients(self, y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw scores to predictions (probabilities for the classifiers)."""
        raise NotImplementedError

    def evaluate(self, y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
        """The early-stopping metric (smaller is better)."""
        raise NotImplementedError


class SquaredError(Loss):
    name, metric = "reg:squarederror", "rmse"

    def base_score(self, y, w):
        return np.array([np.average(y[:, 0], weights=w)])

    def gradients(self, y, raw, w):
        return (raw - y) * w[:, None], np.repeat(w[:, None], raw.shape[1], axis=1).astype(np.float64)

    def transform(self, raw):
        return raw

    def evaluate(self, y, raw, w):
        return float(np.sqrt(np.average((raw[:, 0] - y[:, 0]) ** 2, weights=w)))


class Logistic(Loss):
    """Binary logistic on each output: ``binary:logistic`` (one output) and ``multilabel:logistic``."""

    metric = "logloss"

    def __init__(self, n_outputs: int = 1) -> None:
        self.n_outputs = n_outputs
        self.name = "binary:logistic" if n_outputs == 1 else "multilabel:logistic"

    def base_score(self, y, w):
        p = np.average(y, axis=0, weights=w)
        p = np.clip(p, 1e-7, 1 - 1e-7)
        return np.log(p / (1 - p))

    def gradients(self, y, raw, w):
        p = _sigmoid(raw)
        return (p - y) * w[:, None], np.maximum(p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return _sigmoid(raw)

    def evaluate(self, y, raw, w):
        # log(1 + exp(-|x|)) + max(x, 0) - y x: the stable form of the cross-entropy
        loss = np.logaddexp(0.0, raw) - y * raw
        return float(np.average(loss.mean(axis=1), weights=w))


class Softmax(Loss):
    name, metric = "multi:softmax", "mlogloss"

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
        p = _softmax(raw)
        # LightGBM's factor K/(K-1) on the diagonal hessian keeps the Newton step of multi-output leaves
        # from overshooting (the full softmax hessian is singular along the all-ones direction)
        factor = self.n_outputs / (self.n_outputs - 1.0)
        return (p - self._onehot(y)) * w[:, None], np.maximum(factor * p * (1 - p), _EPS) * w[:, None]

    def transform(self, raw):
        return _softmax(raw)

    def evaluate(self, y, raw, w):
        z = raw - raw.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-np.average(logp[np.arange(len(y)), y[:, 0].astype(np.int64)], weights=w))


def make_loss(objective: str, n_outputs: int) -> Loss:
    if objective == "reg:squarederror":
        return SquaredError()
    if objective in ("binary:logistic", "multilabel:logistic"):
        return Logistic(n_outputs)
    if objective == "multi:softmax":
        return Softmax(n_outputs)
    raise ValueError(f"unknown objective {objective!r}")
