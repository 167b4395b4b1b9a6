"""mdhom: auto-tuned md_hom OpenCL kernels and the gradient-boosting learners built on them."""

from mdhom.devices import Device, compute_devices, devices, get_device
from mdhom.forests import ClassifierChainEnsemble, RandomForestClassifier, RandomForestRegressor
from mdhom.models import load_model
from mdhom.plotting import plot_importance, plot_metric, plot_tree, to_graphviz
from mdhom.rules import RuleBoostClassifier
from mdhom.trees import TreeBoostClassifier, TreeBoostRegressor

__version__ = "0.1.0"

__all__ = [
    "Device", "compute_devices", "devices", "get_device", "__version__",
    "TreeBoostClassifier", "TreeBoostRegressor", "RuleBoostClassifier", "RandomForestClassifier",
    "RandomForestRegressor", "ClassifierChainEnsemble", "load_model",
    "plot_importance", "plot_metric", "plot_tree", "to_graphviz",
]
