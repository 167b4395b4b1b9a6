"""Gradient-boosted trees in the XGBoost / LightGBM style, on md_hom kernels."""

from mdhom.trees.estimators import TreeBoostClassifier, TreeBoostRegressor, load_model

__all__ = ["TreeBoostClassifier", "TreeBoostRegressor", "load_model"]
