"""Rule head quality as a :class:`mdhom.components.split.Gain`: what the device refinement plugs into the split
evaluator (prefix scan over bins, argmax over (feature, bin, operator), one read-back).

The evaluator's candidate "(feature, bin, dir)" is read as a condition: dir 1 is "bin <= b" and dir 0 is
"bin > b", NaN (the last bin) on neither side. Its parameters come from the evaluator's
:class:`~mdhom.components.split.SplitParams`: ``reg_lambda`` carries the L2 weight, ``reg_alpha`` the L1 weight
and ``min_child_weight`` the least hessian sum of the covered side. Label-wise (decomposable) statistics only:
the labels are the evaluator's output dimension.
"""

from __future__ import annotations

from importlib import resources

from mdhom.components.split import Gain

_CODE = resources.files("mdhom.kernels").joinpath("rules", "head_quality.cl").read_text()

SINGLE_HEAD_GAIN = Gain("rule_single", "#define RULE_SINGLE 1\n" + _CODE, ("reg_lambda", "reg_alpha",
                                                                           "min_child_weight"))
COMPLETE_HEAD_GAIN = Gain("rule_complete", "#define RULE_SINGLE 0\n" + _CODE, ("reg_lambda", "reg_alpha",
                                                                              "min_child_weight"))
