"""The one table of tree-boosting options: name, type, default, documentation and validation.

Both estimators' signatures, their docstrings, ``fit``'s validation, the CLI's ``--name value`` flags and the
saved model's ``params`` block are derived from :data:`OPTIONS`, so a new option is added in one place.
Names follow XGBoost and LightGBM so that their users can move a parameter grid over unchanged.
"""

from __future__ import annotations

from typing import Any

from mdhom.learn.options import Option, OptionTable, choice, device_spec, integer, real, seed, verbose


def _objective(v: Any) -> Any:
    if v is None:
        return None
    from mdhom.learn.losses import canonical_objective

    return canonical_objective(v)


TABLE = OptionTable((
    Option("n_estimators", "int", 100, "Boosting rounds (trees; one multi-output tree per round).", integer(1)),
    Option("learning_rate", "float", 0.1, "Shrinkage applied to every leaf value.", real(0.0, lo_open=True)),
    Option("max_depth", "int", 6, "Deepest level a tree may reach; 0 or None means no limit (then bound the "
           "tree by max_leaves). It applies to 'lossguide' too, as in XGBoost: pass 0 for LightGBM's behaviour.",
           integer(0, none_ok=True)),
    Option("max_leaves", "int", 0, "Most leaves per tree; 0 means no limit. With grow_policy='lossguide' this "
           "is LightGBM's num_leaves.", integer(0)),
    Option("grow_policy", "str", "depthwise", "'depthwise' grows level by level (XGBoost's default); "
           "'lossguide' splits the leaf of largest gain first (LightGBM's leaf-wise growth).",
           choice("depthwise", "lossguide")),
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
    Option("objective", "str", None, "None infers it from y: 'reg:squarederror' for the regressor; "
           "'binary:logistic', 'multi:softmax' or (for a 2-D 0/1 y) 'multilabel:logistic' for the classifier. "
           "LightGBM's names ('regression', 'binary', 'multiclass') are accepted too.", _objective),
    Option("early_stopping_rounds", "int", None, "Stop when the metric on the last eval_set has not improved "
           "for this many rounds; the model keeps the best round's trees.", integer(1, none_ok=True)),
    Option("random_state", "int", None, "Seed of the row and column sampling (numpy Generator).", seed),
    Option("device", "str", None, "'numpy' (the reference backend), or an OpenCL device: None/'auto', 'cpu', "
           "'gpu', a device key or an mdhom.Device.", device_spec),
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
