"""Random forests on the md_hom kernels: every tree of a forest grows level by level in one batch of launches
(the tree dimension of :mod:`mdhom.forests.layout`), driven by :mod:`mdhom.forests.grower`; ensembles of
classifier chains grow every chain's forest at a chain position in one such batch (:mod:`mdhom.forests.chains`)."""

from mdhom.forests.chains import ClassifierChainEnsemble
from mdhom.forests.estimators import RandomForestClassifier, RandomForestRegressor

__all__ = ["ClassifierChainEnsemble", "RandomForestClassifier", "RandomForestRegressor"]
