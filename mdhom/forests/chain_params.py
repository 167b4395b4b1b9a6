"""The one table of ClassifierChainEnsemble options: the chains' own (how many, their label orders, the vote)
and every random-forest option of :mod:`mdhom.forests.params` for the forest at each chain position."""

from __future__ import annotations

from typing import Any

import numpy as np

from mdhom.forests import params as FP
from mdhom.learn.options import Option, OptionTable, choice, integer, real


def _orders(v: Any) -> Any:
    """None (a random order per chain), or label indices: one order for every chain or one per chain."""
    if v is None:
        return None
    try:
        a = np.asarray(v)
    except (TypeError, ValueError):
        raise ValueError(f"must be None or an array of label indices, got {v!r}") from None
    if a.ndim not in (1, 2) or a.size == 0 or a.dtype.kind not in "iu":
        raise ValueError(f"must be None, one order of label indices (1-D) or one per chain (2-D), got {v!r}")
    for row in a.reshape(-1, a.shape[-1]):
        if not np.array_equal(np.sort(row), np.arange(a.shape[-1])):
            raise ValueError(f"each order must be a permutation of 0..{a.shape[-1] - 1}, got {row.tolist()}")
    return a.astype(np.int64).tolist()


_FOREST = [o for o in FP.TABLE.options if o.name != "precision"]  # class counts are integers: nothing to choose
_CRITERION = next(o for o in _FOREST if o.name == "criterion")
_MAX_FEATURES = next(o for o in _FOREST if o.name == "max_features")

TABLE = OptionTable((
    Option("n_chains", "int", 10, "Classifier chains in the ensemble; their forests grow together, position by "
           "position, as one batch of n_chains x n_estimators trees.", integer(1)),
    Option("orders", "any", None, "Label orders: None (a random permutation per chain, from random_state), one "
           "permutation of 0..L-1 for every chain, or an (n_chains, L) array of them.", _orders),
    Option("threshold", "float", 0.5, "predict gives label j where the chains' vote for it reaches this (ECC's "
           "threshold).", real(0.0, 1.0)),
    Option("voting", "str", "proba", "What a chain votes: 'proba' (its forest's probability; predict_proba is "
           "their mean) or 'label' (its 0/1 prediction, as in Read et al.'s ECC: predict_proba is the share of "
           "chains predicting the label).", choice("proba", "label")),
    *(Option("criterion", "str", "gini", "Split quality of the forests: 'gini', 'entropy' or 'log_loss' (the same).",
             _CRITERION.check) if o.name == "criterion" else
      Option("max_features", "str", "sqrt", "Features drawn per node among a position's own features (X and the "
             "chain's earlier labels), as scikit-learn's forest on the chain's feature matrix: 'sqrt', 'log2', None, "
             "an int or a float fraction.", _MAX_FEATURES.check) if o.name == "max_features" else o
      for o in _FOREST),
))

DEFAULTS: dict[str, Any] = TABLE.defaults
BY_NAME = TABLE.by_name
validate = TABLE.validate
docstring = TABLE.docstring
FOREST_NAMES = tuple(o.name for o in _FOREST)
