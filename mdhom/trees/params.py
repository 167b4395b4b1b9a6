"""The one table of tree-boosting options: name, type, default, documentation and validation.

Both estimators' signatures, their docstrings, ``fit``'s validation, the CLI's ``--name value`` flags and the
saved model's ``params`` block are derived from :data:`OPTIONS`, so a new option is added in one place.
Names follow XGBoost and LightGBM so that their users can move a parameter grid over unchanged.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    name: str
    kind: str  # "int", "float", "str", "bool", "any": for the CLI parser and the docstring
    default: Any
    doc: str
    check: Callable[[Any], Any]  # returns the normalised value or raises ValueError


def _int(lo: int | None = None, hi: int | None = None, none_ok: bool = False) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and none_ok:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            if isinstance(v, numbers.Real) and float(v).is_integer():
                v = int(v)
            else:
                raise ValueError(f"must be an integer, got {v!r}")
        v = int(v)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"must lie in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}], "
                             f"got {v}")
        return v
    return check


def _float(lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"must be a number, got {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise ValueError(f"must be {'>' if lo_open else '>='} {lo}, got {v}")
        if hi is not None and v > hi:
            raise ValueError(f"must be <= {hi}, got {v}")
        return v
    return check


def _choice(*values: Any) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in values:
            raise ValueError(f"must be one of {', '.join(repr(x) for x in values)}; got {v!r}")
        return v
    return check


def _seed(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0:
        return int(v)
    # a numpy Generator or RandomState: draw a seed from it once, so that fit stays deterministic given it
    if hasattr(v, "integers"):
        return int(v.integers(0, 2**63 - 1))
    if hasattr(v, "randint"):
        return int(v.randint(0, 2**31 - 1))
    raise ValueError(f"must be None, a non-negative integer or a numpy random generator, got {v!r}")


def _device(v: Any) -> Any:
    if v is None or isinstance(v, str) or hasattr(v, "key"):
        return v
    raise ValueError(f"must be None, 'numpy', 'auto', 'cpu', 'gpu', a device key or an mdhom.Device; got {v!r}")


def _objective(v: Any) -> Any:
    if v is None:
        return None
    from mdhom.trees.losses import canonical_objective

    return canonical_objective(v)


def _verbose(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    return _int(0)(v)


OPTIONS: tuple[Option, ...] = (
    Option("n_estimators", "int", 100, "Boosting rounds (trees; one multi-output tree per round).", _int(1)),
    Option("learning_rate", "float", 0.1, "Shrinkage applied to every leaf value.", _float(0.0, lo_open=True)),
    Option("max_depth", "int", 6, "Deepest level a tree may reach; 0 or None means no limit (then bound the "
           "tree by max_leaves). It applies to 'lossguide' too, as in XGBoost: pass 0 for LightGBM's behaviour.",
           _int(0, none_ok=True)),
    Option("max_leaves", "int", 0, "Most leaves per tree; 0 means no limit. With grow_policy='lossguide' this "
           "is LightGBM's num_leaves.", _int(0)),
    Option("grow_policy", "str", "depthwise", "'depthwise' grows level by level (XGBoost's default); "
           "'lossguide' splits the leaf of largest gain first (LightGBM's leaf-wise growth).",
           _choice("depthwise", "lossguide")),
    Option("max_bin", "int", 255, "Most histogram bins per feature (2..255); NaN gets one extra bin of its own.",
           _int(2, 255)),
    Option("bin_sample", "int", 200_000, "Rows from which the bin edges are learned (LightGBM's "
           "bin_construct_sample_cnt): drawn without replacement, seeded by random_state (a fixed seed when it "
           "is None, so binning is reproducible); all rows when there are fewer, or when 0.", _int(0)),
    Option("reg_lambda", "float", 1.0, "L2 regularisation of leaf values.", _float(0.0)),
    Option("reg_alpha", "float", 0.0, "L1 regularisation of leaf values.", _float(0.0)),
    Option("min_split_gain", "float", 0.0, "Gain a split must exceed (XGBoost's gamma).", _float(0.0)),
    Option("min_child_weight", "float", 1.0, "Least hessian sum (summed over outputs) in each child.", _float(0.0)),
    Option("subsample", "float", 1.0, "Fraction of rows drawn (without replacement) for each tree.",
           _float(0.0, 1.0, lo_open=True)),
    Option("colsample_bytree", "float", 1.0, "Fraction of features drawn for each tree.",
           _float(0.0, 1.0, lo_open=True)),
    Option("objective", "str", None, "None infers it from y: 'reg:squarederror' for the regressor; "
           "'binary:logistic', 'multi:softmax' or (for a 2-D 0/1 y) 'multilabel:logistic' for the classifier. "
           "LightGBM's names ('regression', 'binary', 'multiclass') are accepted too.", _objective),
    Option("early_stopping_rounds", "int", None, "Stop when the metric on the last eval_set has not improved "
           "for this many rounds; the model keeps the best round's trees.", _int(1, none_ok=True)),
    Option("random_state", "int", None, "Seed of the row and column sampling (numpy Generator).", _seed),
    Option("device", "str", None, "'numpy' (the reference backend), or an OpenCL device: None/'auto', 'cpu', "
           "'gpu', a device key or an mdhom.Device.", _device),
    Option("precision", "str", None, "'double': float64 throughout, rows summed in the reference's order "
           "(bit-identical to device='numpy'). 'quantized': float64 gradients, histograms in int32 fixed point "
           "(a power-of-two scale per round keeps every sum within 2^30; exact and deterministic in any summation "
           "order, so fully parallel, "
           "and bit-identical to device='numpy' with the same mode). 'single': float32 (fast, not reproducible "
           "bit for bit). None: 'quantized' on a GPU, 'double' elsewhere (device='numpy' included); the mode "
           "used is the fitted attribute precision_.", _choice(None, "double", "single", "quantized")),
    Option("verbose", "int", 0, "Print the evaluation metrics every `verbose` rounds (0: silent).", _verbose),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
DEFAULTS: dict[str, Any] = {o.name: o.default for o in OPTIONS}


def validate(params: dict[str, Any]) -> dict[str, Any]:
    """Checked and normalised copies of ``params``; unknown names and bad values raise ValueError."""
    unknown = sorted(set(params) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    out = {}
    for name, value in params.items():
        try:
            out[name] = BY_NAME[name].check(value)
        except ValueError as exc:
            raise ValueError(f"{name} {exc}") from None
    return out


def docstring() -> str:
    """The numpydoc ``Parameters`` section for the estimators."""
    lines = ["Parameters", "----------"]
    for o in OPTIONS:
        lines.append(f"{o.name} : {o.kind}, default={o.default!r}")
        lines.append(f"    {o.doc}")
    return "\n".join(lines)
