"""Rule head quality as a :class:`mdhom.components.split.Gain`: what the device refinement
(:mod:`mdhom.rules.device`) plugs into the split evaluator's score description (argmax over (feature, bin,
operator) of the gain of every candidate, from prefix sums over bins).

The evaluator's candidate "(feature, bin, dir)" is read as a condition: dir 0 is "bin <= b", dir 1 "bin > b",
NaN (the last bin) on neither side; the statistics' last output slot holds the counts (``kernels/rules/
head_quality.cl`` says how). Parameters: the L2 and L1 weights and ``min_coverage``. Decomposable head
statistics only (single-label heads, or complete heads of a label-wise loss): the labels are the evaluator's
output dimension.
"""

from __future__ import annotations

from importlib import resources

from mdhom.components.split import Gain

_CODE = "".join(resources.files("mdhom.kernels").joinpath("rules", f).read_text()
                for f in ("label_score.cl", "head_quality.cl"))  # label_score.cl: the score both start from
_PARAMS = ("l2", "l1", "min_coverage")

SINGLE_HEAD_GAIN = Gain("rule_single", "#define RULE_SINGLE 1\n" + _CODE, _PARAMS)
COMPLETE_HEAD_GAIN = Gain("rule_complete", "#define RULE_SINGLE 0\n" + _CODE, _PARAMS)


def head_gain(kind: str) -> Gain:
    """The gain of a head kind ("single" or "complete")."""
    return SINGLE_HEAD_GAIN if kind == "single" else COMPLETE_HEAD_GAIN
