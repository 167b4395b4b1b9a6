"""Evaluation metrics for eval sets: XGBoost's names, computed in numpy, deterministic.

A metric reads the encoded target ``y`` ((n_rows, n_outputs) float64, the class index for softmax, as
:mod:`mdhom.learn.losses` encodes it), the raw scores ``raw`` ((n_rows, n_outputs)) and row weights ``w``.
Built-in metrics work on raw scores rather than probabilities: the log-losses stay exact where a probability
would round to 0 or 1, and a threshold or ranking on raw scores is the same as on probabilities (the links
are monotone). Any learner with a :class:`~mdhom.learn.losses.Loss` can use them (trees now, rules later).

A callable metric follows XGBoost's scikit-learn convention (>= 1.6): ``f(y_true, y_score)`` with the labels
(class indices for a classifier, the 0/1 matrix for multi-label) and the transformed predictions (the
positive class's probability for binary, probabilities per class or label, values for regression), plus
``sample_weight=`` when the eval set has weights; it is a cost (minimised), named by its ``__name__``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdhom.learn.losses import Loss
from mdhom.learn.portable import exp_nonpositive, log1p_nonnegative, log_positive, sum_in_order

# loss kinds (Loss.kind; "logistic" covers binary and multi-label) each built-in metric applies to
_REGRESSION, _LOGISTIC, _SOFTMAX = "squared", "logistic", "softmax"

# LightGBM's names for the same quantities
ALIASES = {"binary_logloss": "logloss", "binary_error": "error", "multi_logloss": "mlogloss",
           "multi_error": "merror", "l1": "mae", "l2_root": "rmse", "root_mean_squared_error": "rmse",
           "mean_absolute_error": "mae"}


@dataclass(frozen=True)
class Metric:
    """One metric as the boosting loop uses it: a name (the ``evals_result_`` key) and its direction."""

    name: str
    maximize: bool
    score: Callable[[np.ndarray, np.ndarray, np.ndarray], float]  # (y, raw, w) -> value


def rmse(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    return float(np.sqrt(np.average((raw[:, 0] - y[:, 0]) ** 2, weights=w)))


def mae(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    return float(np.average(np.abs(raw[:, 0] - y[:, 0]), weights=w))


def logloss(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    """Cross-entropy of logistic outputs, averaged over outputs then rows: log(1 + e^x) - y x, stable."""
    loss = (np.maximum(raw, 0.0) + log1p_nonnegative(exp_nonpositive(-np.abs(raw)))) - y * raw
    return float(np.average(sum_in_order(loss, axis=1) / loss.shape[1], weights=w))


def error(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    """Share of wrong 0/1 decisions at probability 0.5 (raw score 0), averaged over outputs."""
    return float(np.average(((raw > 0) != (y > 0.5)).mean(axis=1), weights=w))


def mlogloss(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    z = raw - raw.max(axis=1, keepdims=True)
    logp = z - log_positive(sum_in_order(exp_nonpositive(z), axis=1))[:, None]
    return float(-np.average(logp[np.arange(len(y)), y[:, 0].astype(np.int64)], weights=w))


def merror(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    return float(np.average(np.argmax(raw, axis=1) != y[:, 0].astype(np.int64), weights=w))


def roc_auc(y: np.ndarray, score: np.ndarray, w: np.ndarray) -> float:
    """Weighted area under the ROC curve of one 0/1 target, tied scores as one step of the curve (the
    trapezoid through them), as scikit-learn's ``roc_auc_score``."""
    order = np.argsort(-score, kind="stable")
    s, pos, wt = score[order], y[order] > 0.5, w[order]
    tp = np.cumsum(np.where(pos, wt, 0.0))
    fp = np.cumsum(np.where(pos, 0.0, wt))
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # the last row of each run of equal scores
    tps, fps = np.r_[0.0, tp[last]], np.r_[0.0, fp[last]]
    if tps[-1] <= 0 or fps[-1] <= 0:
        raise ValueError("AUC is undefined on an eval set whose target holds one class only")
    return float(np.sum((fps[1:] - fps[:-1]) * (tps[1:] + tps[:-1])) / (2.0 * tps[-1] * fps[-1]))


def auc(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
    """ROC AUC; for multi-label the unweighted mean over labels (scikit-learn's ``average="macro"``)."""
    return float(np.mean([roc_auc(y[:, k], raw[:, k], w) for k in range(raw.shape[1])]))


# name -> (function, loss kinds it applies to, higher is better)
BUILTIN: dict[str, tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], float], tuple[str, ...], bool]] = {
    "rmse": (rmse, (_REGRESSION,), False),
    "mae": (mae, (_REGRESSION,), False),
    "logloss": (logloss, (_LOGISTIC,), False),
    "error": (error, (_LOGISTIC,), False),
    "auc": (auc, (_LOGISTIC,), True),
    "mlogloss": (mlogloss, (_SOFTMAX,), False),
    "merror": (merror, (_SOFTMAX,), False),
}


def check_spec(spec: Any) -> Any:
    """``eval_metric`` as an option value: None, a metric name, a callable, or a list of them (names made
    canonical, a list kept as a list); objective-dependent checks wait for :func:`resolve`."""
    if spec is None:
        return None
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    if not items:
        raise ValueError("must name at least one metric (or be None for the objective's default)")
    out = []
    for item in items:
        if callable(item):
            out.append(item)
        elif isinstance(item, str) and ALIASES.get(item, item) in BUILTIN:
            out.append(ALIASES.get(item, item))
        else:
            raise ValueError(f"must be a metric name among {', '.join(BUILTIN)} (or LightGBM's "
                             f"{', '.join(ALIASES)}), a callable f(y_true, y_score) or a list of them; got {item!r}")
    return out if isinstance(spec, (list, tuple)) else out[0]


def _custom(func: Callable[..., Any], loss: Loss, weighted: bool) -> Metric:
    def score(y: np.ndarray, raw: np.ndarray, w: np.ndarray) -> float:
        if loss.kind == _REGRESSION:
            y_true = y[:, 0]
        elif y.shape[1] == 1:  # binary or softmax: the class index
            y_true = y[:, 0].astype(np.int64)
        else:  # multi-label: the 0/1 matrix
            y_true = y.astype(np.int64)
        y_score = loss.transform(raw)
        if y_score.shape[1] == 1:
            y_score = y_score[:, 0]
        value = func(y_true, y_score, sample_weight=w) if weighted else func(y_true, y_score)
        return float(value)

    return Metric(getattr(func, "__name__", type(func).__name__), False, score)


def resolve(spec: Any, loss: Loss, weighted: bool = False) -> list[Metric]:
    """The metrics ``spec`` names for ``loss``, in order (None: the loss's default metric). A built-in that
    does not apply to the objective is a ValueError naming the ones that do; ``weighted``: the eval sets
    carry weights, which a callable then receives as ``sample_weight``."""
    spec = check_spec(spec)
    items: Sequence[Any] = [loss.metric] if spec is None else (spec if isinstance(spec, list) else [spec])
    metrics: list[Metric] = []
    for item in items:
        if callable(item):
            metric = _custom(item, loss, weighted)
        else:
            func, kinds, maximize = BUILTIN[item]
            if loss.kind not in kinds:
                fits = [n for n, (_, k, _) in BUILTIN.items() if loss.kind in k]
                raise ValueError(f"eval_metric {item!r} does not apply to objective {loss.name!r}; "
                                 f"it takes {', '.join(fits)} or a callable")
            metric = Metric(item, maximize, func)
        if any(m.name == metric.name for m in metrics):
            raise ValueError(f"eval_metric names {metric.name!r} twice")
        metrics.append(metric)
    return metrics


def spec_names(spec: Any) -> Any:
    """``eval_metric`` as the model file keeps it: built-in names only (a callable cannot be saved; a model
    file is data, never code), None when nothing is left."""
    if spec is None or callable(spec):
        return None
    if isinstance(spec, str):
        return spec
    names = [m for m in spec if isinstance(m, str)]
    return names or None
