"""The one table of tree-boosting options: name, type, default, documentation and validation.

Both estimators' signatures, their docstrings, ``fit``'s validation, the CLI's ``--name value`` flags and the
saved model's ``params`` block are derived from :data:`OPTIONS`, so a new option is added in one place.
Names follow XGBoost and LightGBM so that their users can move a parameter grid over unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdhom.learn.metrics import check_spec as _eval_metric
from mdhom.learn.options import Option, OptionTable, choice, device_spec, integer, n_jobs, real, seed, verbose


def _max_leaves(v: Any) -> Any:
    v = integer(0)(v)
    if v == 1:  # a one-leaf tree has no split: every round would add a constant (XGBoost and LightGBM need 2 too)
        raise ValueError("must be 0 (no limit) or at least 2, got 1")
    return v


def _objective(v: Any) -> Any:
    if v is None:
        return None
    from mdhom.learn.losses import canonical_objective

    return canonical_objective(v)


def _categorical_feature(v: Any) -> Any:
    if v is None or (isinstance(v, str) and v.strip().lower() in ("auto", "", "none")):
        return "auto"  # pandas 'category' columns are categorical whatever else is listed
    if isinstance(v, str):
        v = [x.strip() for x in v.split(",") if x.strip()]
        v = [int(x) if x.lstrip("-").isdigit() else x for x in v]
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = [v]
    try:
        items = list(v)
    except TypeError:
        raise ValueError(f"must be 'auto', None or a list of column indices or names, got {v!r}") from None
    out = []
    for x in items:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, str)):
            raise ValueError(f"must list column indices or names, got {x!r}")
        out.append(int(x) if isinstance(x, (int, np.integer)) else x)
    return out


TABLE = OptionTable((
    Option("n_estimators", "int", 100, "Boosting rounds (one multi-output tree per round, or one tree per output with "
           "multi_strategy='one_output_per_tree').", integer(1)),
    Option("learning_rate", "float", 0.1, "Shrinkage applied to every leaf value.", real(0.0, lo_open=True)),
    Option("max_depth", "int", 6, "Deepest level a tree may reach; 0, -1 (LightGBM's spelling) or None means no "
           "limit (then bound the tree by max_leaves). It applies to 'lossguide' too, as in XGBoost: pass -1 for "
           "LightGBM's behaviour.", integer(-1, none_ok=True)),
    Option("max_leaves", "int", 0, "Most leaves per tree (at least 2); 0 means no limit. With "
           "grow_policy='lossguide' this is LightGBM's num_leaves.", _max_leaves),
    Option("grow_policy", "str", "depthwise", "'depthwise' grows level by level (XGBoost's default); "
           "'lossguide' splits the leaf of largest gain first (LightGBM's leaf-wise growth).",
           choice("depthwise", "lossguide")),
    Option("multi_strategy", "str", "multi_output_tree", "How a round fits several outputs (multiclass classes, "
           "multi-label labels; XGBoost's option and values): 'multi_output_tree' grows one tree with a leaf value "
           "per output (its gain summed over outputs); 'one_output_per_tree' grows one tree per output, each on its "
           "own output's gradients (XGBoost's and LightGBM's default), the round's trees level by level together on "
           "the device (one launch per level for all of them). 'one_output_per_tree' grows depth-wise only and "
           "refuses grow_policy='lossguide', categorical features and precision='single'. One output (binary, "
           "regression): both are the same.", choice("multi_output_tree", "one_output_per_tree")),
    Option("max_bin", "int", 255, "Most histogram bins per feature (2..65535); NaN gets one extra bin of its own. Up "
           "to 255 bins are stored in a byte per value, more in two (twice the bin matrix, and histograms grow with "
           "the bins).", integer(2, 65535)),
    Option("bin_sample", "int", 200_000, "Rows from which the bin edges are learned (LightGBM's "
           "bin_construct_sample_cnt): drawn without replacement, seeded by random_state (a fixed seed when it "
           "is None, so binning is reproducible); all rows when there are fewer, or when 0.", integer(0)),
    Option("reg_lambda", "float", 1.0, "L2 regularisation of leaf values.", real(0.0)),
    Option("reg_alpha", "float", 0.0, "L1 regularisation of leaf values.", real(0.0)),
    Option("min_split_gain", "float", 0.0, "Gain a split must exceed (XGBoost's gamma).", real(0.0)),
    Option("min_child_weight", "float", 1.0, "Least hessian sum (summed over outputs) in each child.", real(0.0)),
    Option("subsample", "float", 1.0, "Fraction of rows drawn (without replacement) for each tree.",
           real(0.0, 1.0, lo_open=True)),
    Option("colsample_bytree", "float", 1.0, "Fraction of features drawn for each tree.",
           real(0.0, 1.0, lo_open=True)),
    Option("categorical_feature", "str", "auto", "Which features hold categories (LightGBM's option): 'auto' "
           "takes the pandas 'category' columns; or a list (or comma-separated string) of column indices or "
           "names, added to those. Codes are non-negative integers (a pandas column's own codes); NaN, "
           "negative and unknown codes count as missing. Splits send a set of categories left: one category "
           "against the rest up to max_cat_to_onehot categories (and always for multi-output trees), else a "
           "prefix of the categories sorted by G / (H + cat_smooth). The max_bin - 1 most frequent categories "
           "of a feature are kept; the rest count as missing.", _categorical_feature),
    Option("max_cat_to_onehot", "int", 4, "Most categories of a feature for one-vs-rest splits (LightGBM's "
           "meaning); features with more get sorted partition splits.", integer(1)),
    Option("cat_smooth", "float", 10.0, "Added to a category's hessian sum in the sort key of partition splits "
           "(LightGBM's cat_smooth): rare categories sort toward the middle.", real(0.0)),
    Option("objective", "str", None, "None infers it from y: 'reg:squarederror' for the regressor; "
           "'binary:logistic', 'multi:softmax' or (for a 2-D 0/1 y) 'multilabel:logistic' for the classifier. "
           "LightGBM's names ('regression', 'binary', 'multiclass') are accepted too.", _objective),
    Option("early_stopping_rounds", "int", None, "Stop when the metric on the last eval_set has not improved "
           "for this many rounds; the model keeps the best round's trees.", integer(1, none_ok=True)),
    Option("eval_metric", "list", None, "Metrics computed on every eval_set each round, into evals_result_ "
           "(XGBoost's scikit-learn option): a name or list of names among 'rmse', 'mae' (regression), "
           "'logloss', 'error', 'auc' (binary and multi-label), 'mlogloss', 'merror' (multiclass), or a callable "
           "f(y_true, y_score[, sample_weight]) named by its __name__ that receives the labels and the "
           "probabilities (values for regression) and is minimised. Early stopping watches the last metric of "
           "the last eval set (maximising auc). None: rmse, logloss or mlogloss by objective. A callable is not "
           "saved in the model file.", _eval_metric),
    Option("importance_type", "str", "gain", "What feature_importances_ measures, normalised to sum 1, in "
           "XGBoost's meanings: 'gain' (average gain of the feature's splits), 'total_gain', 'weight' (number "
           "of splits; LightGBM's 'split' is the same), 'cover' (average hessian sum of the split nodes), "
           "'total_cover'. LightGBM's 'gain' is XGBoost's 'total_gain'.",
           choice("gain", "total_gain", "weight", "split", "cover", "total_cover")),
    Option("random_state", "int", None, "Seed of the row and column sampling (numpy Generator).", seed),
    Option("device", "str", None, "'numpy' (the reference backend), or an OpenCL device: None/'auto', 'cpu', "
           "'gpu', a device key or an mdhom.Device.", device_spec),
    Option("n_jobs", "int", None, "Threads of a CPU OpenCL device: the fit runs on a sub-device of this many "
           "compute units (OpenCL device fission; PoCL honours it, Intel's CPU runtime accepts it); None or -1: "
           "all. Ignored on GPUs and by device='numpy'.", n_jobs),
    Option("precision", "str", None, "'double': float64 throughout, rows summed in the reference's order "
           "(bit-identical to device='numpy'). 'quantized': float64 gradients, histograms in int32 fixed point "
           "(a power-of-two scale per round keeps every sum within 2^30; exact and deterministic in any summation "
           "order, so fully parallel, "
           "and bit-identical to device='numpy' with the same mode). 'single': float32 (fast, not reproducible "
           "bit for bit). None: 'quantized' on a GPU, 'double' elsewhere (device='numpy' included); the mode "
           "used is the fitted attribute precision_.", choice(None, "double", "single", "quantized")),
    Option("verbose", "int", 0, "Print the evaluation metrics every `verbose` rounds (0: silent).", verbose),
))

OPTIONS: tuple[Option, ...] = TABLE.options
BY_NAME: dict[str, Option] = TABLE.by_name
DEFAULTS: dict[str, Any] = TABLE.defaults
validate = TABLE.validate
docstring = TABLE.docstring
