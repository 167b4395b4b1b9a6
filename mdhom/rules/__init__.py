"""Gradient-boosted multi-label rules (BOOMER): options, losses, heads, the refinement search, the boosting
loop, the rule list and its model file, and the estimator."""

from mdhom.rules.estimator import RuleBoostClassifier

__all__ = ["RuleBoostClassifier"]
