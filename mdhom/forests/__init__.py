"""Random forests on the md_hom kernels: every tree of a forest grows level by level in one batch of launches
(the tree dimension of :mod:`mdhom.forests.kernels`), driven by :mod:`mdhom.forests.grower`."""

from mdhom.forests.estimators import RandomForestClassifier, RandomForestRegressor

__all__ = ["RandomForestClassifier", "RandomForestRegressor"]
