"""``mdhom.load_model``: a fitted estimator of whichever learner a model file holds (trees, forests, classifier
chains or rules)."""

from __future__ import annotations

import json
import os
from typing import Any


def load_model(path: str | os.PathLike) -> Any:
    """A fitted TreeBoostClassifier, TreeBoostRegressor, RandomForestClassifier, RandomForestRegressor,
    ClassifierChainEnsemble or RuleBoostClassifier, whichever ``path`` (written by ``save_model``) holds; a damaged
    or foreign file is a ValueError naming it."""
    from mdhom.forests.chain_model import FORMAT as CHAINS
    from mdhom.rules import RuleBoostClassifier
    from mdhom.rules.model import FORMAT as RULES
    from mdhom.trees import load_model as load_trees

    try:
        with open(path, encoding="utf-8") as handle:
            fmt = json.load(handle).get("format")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        fmt = None  # the tree reader names the damage
    if fmt == RULES:
        return RuleBoostClassifier().load_model(path)
    if fmt == CHAINS:
        from mdhom.forests.chains import ClassifierChainEnsemble

        return ClassifierChainEnsemble().load_model(path)
    return load_trees(path)
