"""The one table of rule-boosting options: name, type, default, documentation and validation.

Names and defaults follow mlrl-boomer's ``BoomerClassifier`` so that its users can move a configuration over;
where mlrl-boomer takes a string spelling of a number (``"equal-width{bin_ratio=0.33}"``), we take the number.
"""

from __future__ import annotations

import numbers
from typing import Any

from mdhom.learn.options import Option, OptionTable, choice, device_spec, integer, real, seed
from mdhom.rules.pruning import check_global_pruning, check_holdout

LOSSES = ("logistic_labelwise", "logistic_examplewise", "squared_error")
HEAD_TYPES = ("auto", "single", "complete")
BINNINGS = ("equal-width", "equal-frequency")


def _fraction(v: Any) -> Any:
    """None (no sampling) or the fraction of items drawn, in (0, 1]."""
    if v is None:
        return None
    return real(0.0, 1.0, lo_open=True)(v)


def _feature_fraction(v: Any) -> Any:
    if v == "without-replacement":
        return v
    try:
        return _fraction(v)
    except ValueError:
        raise ValueError(f"must be None, 'without-replacement' or a fraction in (0, 1], got {v!r}") from None


def _label_binning(v: Any) -> Any:
    """'auto', 'none', 'equal-width' (mlrl-boomer's bin ratio 0.04, at least 1 bin, no maximum) or
    ('equal-width', bin_ratio, min_bins, max_bins), also written ``equal-width:bin_ratio:min_bins:max_bins``."""
    if v is None:
        return "none"
    if isinstance(v, str) and ":" in v:
        parts = v.split(":")
        if len(parts) != 4:
            raise ValueError(f"must be written equal-width:bin_ratio:min_bins:max_bins, got {v!r}")
        try:
            v = (parts[0], float(parts[1]), int(parts[2]), int(parts[3]))
        except ValueError:
            raise ValueError(f"must be written equal-width:bin_ratio:min_bins:max_bins, got {v!r}") from None
    if isinstance(v, str):
        return choice("auto", "none", "equal-width")(v)
    try:
        method, ratio, lo, hi = v
    except (TypeError, ValueError):
        raise ValueError(f"must be 'auto', 'none', 'equal-width' or ('equal-width', bin_ratio, min_bins, max_bins), "
                         f"got {v!r}") from None
    from mdhom.rules.label_binning import LabelBinning

    method = choice("equal-width")(method)
    out = (method, real(0.0, 1.0, lo_open=True)(ratio), integer(1)(lo), integer(0)(hi))
    LabelBinning(*out[1:])  # the checks between the numbers
    return out


def _binning(v: Any) -> Any:
    """None (exact thresholds) or (method, bin count); a bare count means equal-frequency bins."""
    if v is None:
        return None
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = ("equal-frequency", v)
    if isinstance(v, str):
        raise ValueError(f"must be None or a (method, bins) pair such as ('equal-width', 32), got {v!r}")
    try:
        method, bins = v
    except (TypeError, ValueError):
        raise ValueError(f"must be None, a bin count or a (method, bins) pair, got {v!r}") from None
    method = choice(*BINNINGS)(method)
    return (method, integer(2, 1 << 20)(bins))


TABLE = OptionTable((
    Option("max_rules", "int", 1000, "Most rules, the default rule included (mlrl-boomer's meaning).", integer(1)),
    Option("shrinkage", "float", 0.3, "Factor every rule's head is multiplied by (the learning rate); the default "
           "rule is not shrunk.", real(0.0, 1.0, lo_open=True)),
    Option("l1_regularization_weight", "float", 0.0, "L1 regularisation of the scores a head predicts.", real(0.0)),
    Option("l2_regularization_weight", "float", 1.0, "L2 regularisation of the scores a head predicts.", real(0.0)),
    Option("loss", "str", "logistic_labelwise", "'logistic_labelwise' (decomposable: one logistic loss per "
           "label), 'logistic_examplewise' (non-decomposable: log(1 + sum_l exp(-y_l s_l)) over an example's "
           "labels, with the full label Hessian) or 'squared_error' (decomposable, labels as -1/+1).",
           choice(*LOSSES)),
    Option("head_type", "str", "auto", "'single' (the best single label), 'complete' (every label) or 'auto', "
           "which is 'complete' for every loss here, as in mlrl-boomer (it picks single-label heads only for "
           "sparse decomposable losses, which mdhom does not have).", choice(*HEAD_TYPES)),
    Option("label_binning", "any", "auto", "Label binning of complete heads over the example-wise loss's coupled "
           "Hessian (mlrl-boomer's label_binning): 'auto' (mlrl-boomer's choice: 'equal-width' for the example-wise "
           "loss with complete heads, else none), 'none', 'equal-width' (labels grouped by their label-wise score "
           "into ceil(0.04 x labels) bins per sign, one score per bin: a system of a few unknowns per candidate "
           "instead of one per label) or ('equal-width', bin_ratio, min_bins, max_bins).", _label_binning),
    Option("binary_predictor", "str", "auto", "How scores become 0/1 labels (mlrl-boomer's binary_predictor): "
           "'output-wise' (a label where its score is positive), 'example-wise' (the training label vector of least "
           "loss at the example's scores; the model keeps the training label vectors) or 'auto': example-wise for "
           "the example-wise loss, else output-wise.", choice("auto", "output-wise", "example-wise")),
    Option("feature_binning", "any", None, "None: exact thresholds halfway between neighbouring distinct values "
           "of the covered examples; or ('equal-width' | 'equal-frequency', bins): thresholds only at the bin "
           "edges learned once before training (a bare count means equal-frequency).", _binning),
    Option("feature_sampling", "any", "without-replacement", "Features drawn without replacement for each "
           "refinement step: 'without-replacement' draws mlrl-boomer's default floor(log2(F - 1) + 1) of the F "
           "features, a number in (0, 1] that fraction of them; None uses every feature.", _feature_fraction),
    Option("instance_sampling", "float", None, "None, or the fraction of training examples drawn without "
           "replacement for each rule; the head is then recomputed on every covered example (mlrl-boomer's "
           "recalculate_predictions).", _fraction),
    Option("label_sampling", "float", None, "None, or the fraction of labels drawn without replacement for each "
           "rule; heads predict only for those labels.", _fraction),
    Option("max_conditions", "int", 0, "Most conditions in a rule's body; 0 means no limit.", integer(0)),
    Option("min_coverage", "int", 1, "Fewest training examples a rule must cover (mlrl-boomer's min_coverage); "
           "refinement stops once a rule covers this many or fewer.", integer(1)),
    Option("holdout", "any", "auto", "mlrl-boomer's holdout set, split off once before training: its examples "
           "take part in no rule's search (their weight is 0) but their scores follow the model, for global_pruning "
           "to measure the loss on. 'auto' (a stratified output-wise holdout of 0.33 where global_pruning measures on "
           "a holdout set, else none), 'none', 'random', 'stratified-output-wise' (each label's share of relevant "
           "examples kept), 'stratified-example-wise' (each label vector's share kept), with holdout_set_size 0.33, "
           "or (method, holdout_set_size) (also 'method:size' or mlrl-boomer's 'random{holdout_set_size=0.2}'). "
           "Drawn from random_state; the held-out rows are the fitted attribute holdout_indices_.", check_holdout),
    Option("global_pruning", "any", "none", "mlrl-boomer's global pruning (early stopping): 'none', "
           "'pre-pruning' (stop once the loss, measured every update_interval rules, improves by less than "
           "min_improvement between the num_past and the num_recent last measurements, aggregated by 'min', 'max' "
           "or 'avg', tested every stop_interval rules; defaults use_holdout_set=true, remove_unused_rules=true, "
           "min_rules=100, update_interval=1, stop_interval=1, num_past=50, num_recent=50, aggregation='avg', "
           "min_improvement=0.005) or 'post-pruning' (learn max_rules, keep the number of least loss, a multiple of "
           "interval and at least min_rules; defaults use_holdout_set=true, remove_unused_rules=true, min_rules=100, "
           "interval=1). Options in mlrl-boomer's bracket notation ('pre-pruning{min_rules=50,num_recent=20}') or "
           "as a dict with 'method'. Rule counts include the default rule. The loss is measured on the holdout set "
           "(use_holdout_set, with holdout='auto' or a method) or on the training examples; what happened is in the "
           "fitted attributes n_rules_, n_induced_rules_, pruning_rules_ and pruning_loss_ (mlrl-boomer's "
           "evaluation measure, the mean loss per example and label).", check_global_pruning),
    Option("random_state", "int", None, "Seed of the sampling draws (None draws from seed 0: fits are "
           "reproducible).", seed),
    Option("device", "any", "numpy", "Where the refinement search runs: 'numpy' (the reference), or an OpenCL "
           "device: 'auto' (a GPU, else a CPU runtime), 'cpu', 'gpu', a device key or an mdhom.Device. A device "
           "needs binned features (feature_binning); it writes the same model as 'numpy' (with the same precision), "
           "bit for bit, for every loss and head (complete heads of the example-wise loss solve each candidate's "
           "system on the device).", device_spec),
    Option("precision", "str", None, "'double': the refinement sums float64 statistics in the numpy reference's "
           "order (one lane per sum on a device). 'quantized': each rule's statistics in fixed point (int32, a "
           "power-of-two scale per label column that keeps every sum within 2^30), summed exactly in any order, "
           "so in parallel on a device; the same model as device='numpy' with this mode, bit for bit (on a device "
           "for decomposable head statistics: single-label heads or a label-wise loss). None: 'quantized' on a "
           "GPU for those, 'double' elsewhere (device='numpy' and complete heads of the example-wise loss "
           "included); the mode used is the fitted attribute precision_.", choice(None, "double", "quantized")),
))

DEFAULTS = TABLE.defaults
# options a model file's params block holds only where they differ from the default, so that a fit that does not use
# them writes the bytes it wrote before they existed (files without them read as the defaults)
WRITTEN_WHEN_SET = ("holdout", "global_pruning")


def validate(params: dict[str, Any]) -> dict[str, Any]:
    """Checked, normalised parameters; also the checks that tie options together."""
    p = TABLE.validate(params)
    if p["device"] != "numpy":
        where = f"device={getattr(p['device'], 'key', p['device'])!r}"
        if p["feature_binning"] is None:
            raise ValueError(f"{where}: the device refinement searches binned features; set feature_binning (for "
                             "example ('equal-frequency', 32)), or pass device='numpy' for exact thresholds")
    resolved_label_binning(p.get("loss", DEFAULTS["loss"]), p.get("head_type", DEFAULTS["head_type"]),
                           p.get("label_binning", DEFAULTS["label_binning"]))
    return p


def coupled_heads(loss: str, head_type: str) -> bool:
    """Whether a fit's heads read the coupled label Hessian (complete heads of the example-wise loss)."""
    return loss == "logistic_examplewise" and resolved_head(loss, head_type) == "complete"


def resolved_precision(precision: str | None, device: Any, coupled: bool = False) -> str:
    """What None means: 'quantized' on a GPU (``device`` an mdhom.Device, or None for device='numpy') for
    decomposable head statistics; a device's coupled heads sum float64 statistics only."""
    if precision is None:
        return "quantized" if device is not None and device.type == "gpu" and not coupled else "double"
    if precision == "quantized" and coupled and device is not None:
        raise ValueError("precision='quantized': complete heads of the example-wise loss (a coupled label Hessian) "
                         "sum float64 statistics on a device in this release; pass precision='double' or "
                         "device='numpy'")
    return precision


def resolved_label_binning(loss: str, head_type: str, value: Any):  # noqa: ANN201 - LabelBinning or None
    """The label binning a fit uses: 'auto' is equal-width for complete heads of the example-wise loss (mlrl-boomer's
    default there), else none; binning elsewhere is refused (mdhom bins only coupled heads)."""
    from mdhom.rules.label_binning import LabelBinning

    coupled = coupled_heads(loss, head_type)
    if value == "none" or (value == "auto" and not coupled):
        return None
    if not coupled:
        raise ValueError(f"label_binning={value!r}: label binning applies to complete heads of the example-wise loss "
                         "only in this release; pass label_binning='none' or 'auto'")
    return LabelBinning() if value in ("auto", "equal-width") else LabelBinning(*value[1:])


def resolved_head(loss: str, head_type: str) -> str:
    """What 'auto' means: complete heads (mlrl-boomer's choice for dense statistics, whatever the loss)."""
    return "complete" if head_type == "auto" else head_type
