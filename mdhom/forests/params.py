"""The one table of random-forest options: scikit-learn's names and meanings, plus mdhom's device options.

Both estimators' signatures, docstrings, ``fit``'s validation and the model file's ``params`` block come from
:data:`TABLE`; the classifier and regressor differ only in the defaults of ``criterion`` and ``max_features``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from mdhom.learn.options import Option, OptionTable, choice, device_spec, integer, n_jobs, seed


def _count_or_fraction(lo: int, what: str, fraction_max: float = 1.0, open_one: bool = False):  # noqa: ANN202
    def check(v: Any) -> Any:
        if isinstance(v, numbers.Integral) and not isinstance(v, bool):
            if v < lo:
                raise ValueError(f"must be an int >= {lo} or a float in (0, {fraction_max}], got {v}")
            return int(v)
        if isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 < float(v) <= fraction_max and not (
                open_one and float(v) == 1.0):
            return float(v)
        raise ValueError(f"must be an int >= {lo} or a float in (0, {fraction_max}{')' if open_one else ']'}, "
                         f"got {v!r}")
    return check


def _max_features(v: Any) -> Any:
    if v is None or v in ("sqrt", "log2"):
        return v
    return _count_or_fraction(1, "max_features")(v)


def _max_samples(v: Any) -> Any:
    return None if v is None else _count_or_fraction(1, "max_samples")(v)


def _max_depth(v: Any) -> Any:
    return integer(1, none_ok=True)(v)


def _bool(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    raise ValueError(f"must be True or False, got {v!r}")


def _criterion(v: Any) -> Any:
    v = choice("gini", "entropy", "log_loss", "squared_error")(v)
    return "entropy" if v == "log_loss" else v  # scikit-learn's two names of one criterion


TABLE = OptionTable((
    Option("n_estimators", "int", 100, "Trees in the forest, all grown together level by level.", integer(1)),
    Option("criterion", "str", None, "Split quality: 'gini' (classifier default), 'entropy' or 'log_loss' (the same), "
           "'squared_error' (regressor, the only one there).", lambda v: None if v is None else _criterion(v)),
    Option("max_depth", "int", None, "Deepest level; None: grow until leaves are pure or min_samples_* stops them.",
           _max_depth),
    Option("min_samples_split", "int", 2, "Least rows (distinct rows of the bootstrap sample) a node needs to be "
           "split; a float is a fraction of the training rows (rounded up).",
           _count_or_fraction(2, "min_samples_split")),
    Option("min_samples_leaf", "int", 1, "Least rows (distinct, as above) in each child of a split; a float is a "
           "fraction of the training rows (rounded up).", _count_or_fraction(1, "min_samples_leaf", 1.0, True)),
    Option("max_features", "str", None, "Features drawn per node (scikit-learn's meaning: the non-constant ones among "
           "them are searched; all constant: drawing goes on to the first non-constant one): 'sqrt', 'log2', None "
           "(all), an int, or a float fraction. Default 'sqrt' for the classifier, 1.0 for the regressor.",
           _max_features),
    Option("bootstrap", "bool", True, "Each tree sees a bootstrap sample (rows drawn with replacement, as counts); "
           "False: every row once.", _bool),
    Option("max_samples", "int", None, "Rows drawn per bootstrap sample: None (as many as rows), an int, or a float "
           "fraction. Only with bootstrap=True.", _max_samples),
    Option("max_bin", "int", 255, "Most histogram bins per feature (quantile cuts between distinct training values, "
           "as the boosting trees bin); NaN gets a bin of its own and goes right at every split.", integer(2, 65535)),
    Option("random_state", "int", None, "Seed of the bootstrap samples and the per-node feature orders.", seed),
    Option("device", "str", None, "'numpy' (the reference), or an OpenCL device: None/'auto', 'cpu', 'gpu', a device "
           "key or an mdhom.Device. Every device writes the same model file.", device_spec),
    Option("n_jobs", "int", None, "Threads of a CPU OpenCL device (device fission); None or -1: all. Ignored on GPUs "
           "and by device='numpy'.", n_jobs),
    Option("precision", "str", None, "Regression targets are summed as integers in fixed point: 'double' (None, "
           "64-bit, ~2^-40 of the target range) or 'quantized' (32-bit: half the histogram memory, coarser). "
           "Class counts are integers in either.", choice(None, "double", "quantized")),
))

DEFAULTS: dict[str, Any] = TABLE.defaults
BY_NAME = TABLE.by_name
validate = TABLE.validate
docstring = TABLE.docstring


def resolve_max_features(v: Any, n_features: int) -> int:
    """scikit-learn's count: sqrt and log2 rounded down, a fraction of the features rounded down, at least 1."""
    if v is None:
        return n_features
    if v == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    if v == "log2":
        return max(1, int(math.log2(n_features)))
    if isinstance(v, float):
        return max(1, int(v * n_features))
    if v > n_features:
        raise ValueError(f"max_features={v} exceeds the {n_features} features of X")
    return int(v)


def resolve_count(v: int | float, n_rows: int) -> int:
    """min_samples_split / min_samples_leaf: an int as is, a fraction of the rows rounded up."""
    return int(math.ceil(v * n_rows)) if isinstance(v, float) else int(v)
