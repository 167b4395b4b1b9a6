"""mlrl-boomer, the anchor of the rule learner: its parameters spelled from RuleBoostClassifier's, a timed fit, and
the multi-label measures both sides are scored with.

mlrl-boomer is not a dependency (the ``[bench]`` extra installs it where it installs: its 0.12 line is the newest
for Python 3.11); every caller probes :func:`boomer_version` and reports the anchor as not installed when it is
None. Both learners take the same names for the same things, so a comparison states its settings once, in
mdhom's terms, and :func:`boomer_params` spells them for mlrl-boomer:

* ``same_as_mdhom``: every choice mdhom makes is pinned on mlrl-boomer's side: 64-bit statistics (mdhom's are
  double), no holdout set or pruning (no post-optimisation is the default), a default rule, and the label binning
  mdhom's parameters resolve to (:func:`label_binning_spelling`); the names are those mlrl-boomer 0.12 to 0.15 take;
* otherwise mlrl-boomer keeps its own defaults (``auto`` binning, label binning, holdout and statistics) for
  everything but the loss, head, rule count and the options named.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

# the (loss, head) pairs issue 10 compares: mlrl-boomer's label-wise loss with single-label heads, and the heavy
# case, the example-wise loss with complete heads: with label binning as mlrl-boomer decides ('auto': equal-width
# bins of labels there), and without
SETTINGS = {"labelwise-single": {"loss": "logistic_labelwise", "head_type": "single"},
            "examplewise-complete": {"loss": "logistic_examplewise", "head_type": "complete", "label_binning": "auto"},
            "examplewise-complete-unbinned": {"loss": "logistic_examplewise", "head_type": "complete",
                                              "label_binning": "none"}}
LOSSES = {"logistic_labelwise": "logistic-decomposable", "logistic_examplewise": "logistic-non-decomposable",
          "squared_error": "squared-error-decomposable"}


def boomer_version() -> str | None:
    """The installed mlrl-boomer's version, or None when it cannot be imported."""
    try:
        import importlib.metadata as md

        import mlrl.boosting  # noqa: F401

        return md.version("mlrl-boomer")
    except Exception:  # ImportError, or a broken install raising something else
        return None


def _options(name: str, **opts: Any) -> str:
    given = {k: v for k, v in opts.items() if v is not None}
    return name + ("{" + ",".join(f"{k}={v}" for k, v in given.items()) + "}" if given else "")


def _sampling(value: Any) -> str:
    if value is None:
        return "none"
    if value == "without-replacement":
        return value
    return _options("without-replacement", sample_size=float(value))


def label_binning_spelling(p: dict[str, Any]) -> str:
    """mlrl-boomer's ``label_binning`` for the label binning mdhom's parameters ``p`` resolve to."""
    from mdhom.rules.options import resolved_label_binning

    lb = resolved_label_binning(p["loss"], p["head_type"], p["label_binning"])
    if lb is None:
        return "none"
    return _options("equal-width", bin_ratio=lb.ratio, min_bins=lb.min_bins, max_bins=lb.max_bins)


def boomer_params(p: dict[str, Any], same_as_mdhom: bool = True, threads: int | None = None) -> dict[str, Any]:
    """BoomerClassifier's keyword arguments for RuleBoostClassifier parameters ``p`` (any omitted take mdhom's
    defaults). ``threads``: rule refinement and statistic update on that many threads (0: all cores)."""
    from mdhom.rules.options import DEFAULTS

    p = {**DEFAULTS, **p}
    out: dict[str, Any] = {
        "random_state": max(1, int(p["random_state"] or 0)),  # mlrl-boomer's seeds start at 1
        "max_rules": p["max_rules"], "shrinkage": p["shrinkage"], "loss": LOSSES[p["loss"]],
        "head_type": p["head_type"], "binary_predictor": p["binary_predictor"],
        "l1_regularization_weight": p["l1_regularization_weight"],
        "l2_regularization_weight": p["l2_regularization_weight"],
        "feature_sampling": _sampling(p["feature_sampling"]),
    }
    if p["max_conditions"] or p["min_coverage"] != 1:
        out["rule_induction"] = _options("top-down-greedy", max_conditions=p["max_conditions"] or None,
                                         min_coverage=p["min_coverage"] if p["min_coverage"] != 1 else None)
    if same_as_mdhom or p["feature_binning"] is not None:
        if p["feature_binning"] is None:
            out["feature_binning"] = "none"
        else:
            method, bins = p["feature_binning"]
            out["feature_binning"] = _options(method, min_bins=bins, max_bins=bins)
    if same_as_mdhom:
        out.update(instance_sampling=_sampling(p["instance_sampling"]), output_sampling=_sampling(p["label_sampling"]),
                   label_binning=label_binning_spelling(p), holdout="none", global_pruning="none", rule_pruning="none",
                   default_rule="true", statistic_type="64-bit")
    if threads is not None:
        out.update(parallel_rule_refinement=_options("true", num_preferred_threads=threads),
                   parallel_statistic_update=_options("true", num_preferred_threads=threads))
    return out


def fit_boomer(X: Any, Y: np.ndarray, kwargs: dict[str, Any]) -> tuple[Any, float]:
    """(fitted BoomerClassifier, fit seconds on the host clock)."""
    from mlrl.boosting import BoomerClassifier

    model = BoomerClassifier(**kwargs)
    t0 = time.perf_counter()
    model.fit(X, np.ascontiguousarray(Y, dtype=np.uint8))
    return model, time.perf_counter() - t0


def predict_boomer(model: Any, X: Any) -> np.ndarray:
    P = model.predict(X)
    return np.asarray(P.toarray() if hasattr(P, "toarray") else P)


def n_rules(model: Any) -> int | None:
    """Rules an mlrl-boomer model holds, the default rule included (None where its model cannot tell)."""
    try:
        return sum(1 for _ in model.model_)
    except Exception:
        return None


def multilabel_scores(P: np.ndarray, Y: np.ndarray) -> dict[str, float]:
    """Hamming loss, micro-averaged F1 and subset accuracy of 0/1 predictions ``P`` against labels ``Y``."""
    P, Y = np.asarray(P).astype(bool), np.asarray(Y).astype(bool)
    tp, fp, fn = int((P & Y).sum()), int((P & ~Y).sum()), int((~P & Y).sum())
    return {"hamming": float((P != Y).mean()), "micro_f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0,
            "subset_accuracy": float((P == Y).all(axis=1).mean())}
