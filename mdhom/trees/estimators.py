"""TreeBoostClassifier and TreeBoostRegressor: scikit-learn style estimators over any TreeKernels backend.

``device="numpy"`` runs the numpy reference kernels; every other value runs the md_hom OpenCL kernels of
:mod:`mdhom.trees.opencl_backend`. The boosting loop, the binning and the model live on the host and are
shared, so the two backends grow the same trees in double precision.

>>> from mdhom import TreeBoostClassifier, load_model
>>> est = TreeBoostClassifier(n_estimators=200, grow_policy="lossguide", max_leaves=63, max_depth=0,
...                           early_stopping_rounds=20).fit(X, y, eval_set=[(X_val, y_val)])
>>> est.predict_proba(X_test); est.best_iteration_; est.round_times_
>>> est.save_model("model.json"); load_model("model.json").predict(X_test)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mdhom.learn.binning import BinMapper, sample_rows
from mdhom.learn.losses import make_loss
from mdhom.learn.metrics import resolve
from mdhom.learn.params import OptionParams
from mdhom.learn.validation import (
    as_matrix,
    as_target,
    categorical_mask,
    category_labels,
    check_feature_names,
    check_weights,
    class_codes,
    feature_names,
    is_sparse,
    not_fitted_error,
    sparse_chunks,
)
from mdhom.trees import params as P
from mdhom.trees.backend import TreeKernels
from mdhom.trees.boosting import boost, trees_per_round
from mdhom.trees.model import (
    Ensemble,
    read_json,
)
from mdhom.trees.model_io import TreeModelFiles
from mdhom.trees.numpy_backend import NumpyKernels
from mdhom.trees.reference import category_modes

# rows x trees from which predict walks the trees on the fit's OpenCL device (below, the numpy walk is faster
# than the predictor's set-up: its tables and its build, which pyopencl caches on disk). 2-core AMD EPYC, Higgs
# rows x 12 trees of 255 leaves, the walks alone: from 10 rows on the device's is the faster (PoCL 5000 rows 1.4 ms
# against numpy's 10.2, 20000 rows 3.5 against 48.4; Intel's runtime 1.0 and 2.9); the set-up, once per fitted
# model, 26 ms on PoCL and 8 on Intel's runtime with a cached build, so the first call pays from ~10^4 rows x 12
# trees; a build the first time ever ~0.4-0.6 s on PoCL
DEVICE_PREDICT_MIN = 1 << 17


def resolve_precision(device: Any, precision: str | None) -> str:
    """The precision a fit runs in: ``precision`` itself, or for None "quantized" on a GPU (exact and fully
    parallel: what a GPU wants) and "double" elsewhere, the numpy reference included. A device without
    double precision gets "single"."""
    if precision is not None:
        return precision
    if device == "numpy":
        return "double"
    from mdhom.devices import get_device

    dev = get_device(device if device is not None else "auto")
    if not getattr(dev, "has_fp64", True):
        return "single"
    return "quantized" if dev.type == "gpu" else "double"


def make_kernels(device: Any, precision: str | None) -> TreeKernels:
    """The backend for ``device``: the numpy reference for "numpy", else the OpenCL kernels (``precision``
    resolved by :func:`resolve_precision`; numpy honours "quantized" and computes everything else in float64)."""
    precision = resolve_precision(device, precision)
    if device == "numpy":
        return NumpyKernels("quantized" if precision == "quantized" else "double")
    try:
        from mdhom.trees.opencl_backend import OpenCLTreeKernels
    except ModuleNotFoundError as exc:
        if exc.name != "mdhom.trees.opencl_backend":
            raise
        raise ValueError(f"device={device!r} needs the OpenCL tree backend (mdhom.trees.opencl_backend), which "
                         "this installation lacks; pass device='numpy' for the numpy reference") from None
    return OpenCLTreeKernels(device=device if device is not None else "auto", precision=precision)


def limit_threads(device: Any, n_jobs: int | None) -> Any:
    """``device`` as :func:`make_kernels` takes it, on ``n_jobs`` threads where that applies: an OpenCL CPU
    device becomes its sub-device (:func:`mdhom.devices.with_threads`); "numpy", GPUs and n_jobs None or -1
    are passed through unchanged."""
    if device == "numpy" or n_jobs is None or n_jobs == -1:
        return device
    from mdhom.devices import get_device, with_threads

    return with_threads(get_device(device if device is not None else "auto"), n_jobs)


class _TreeBoost(TreeModelFiles, OptionParams):
    """What both estimators share: parameters, the fit (its boosting loop: :mod:`mdhom.trees.boosting`), prediction
    of raw scores, model files."""

    _options = P.TABLE
    # one_output_per_tree: trees grown together per batch (None: a round's all; the benchmark's 1: one after another)
    _ktree_batch: int | None = None

    def __init__(
        self,
        n_estimators: int = P.DEFAULTS["n_estimators"],
        learning_rate: float = P.DEFAULTS["learning_rate"],
        max_depth: int | None = P.DEFAULTS["max_depth"],
        max_leaves: int = P.DEFAULTS["max_leaves"],
        grow_policy: str = P.DEFAULTS["grow_policy"],
        multi_strategy: str = P.DEFAULTS["multi_strategy"],
        max_bin: int = P.DEFAULTS["max_bin"],
        bin_sample: int = P.DEFAULTS["bin_sample"],
        reg_lambda: float = P.DEFAULTS["reg_lambda"],
        reg_alpha: float = P.DEFAULTS["reg_alpha"],
        min_split_gain: float = P.DEFAULTS["min_split_gain"],
        min_child_weight: float = P.DEFAULTS["min_child_weight"],
        subsample: float = P.DEFAULTS["subsample"],
        colsample_bytree: float = P.DEFAULTS["colsample_bytree"],
        categorical_feature: Any = P.DEFAULTS["categorical_feature"],
        max_cat_to_onehot: int = P.DEFAULTS["max_cat_to_onehot"],
        cat_smooth: float = P.DEFAULTS["cat_smooth"],
        objective: str | None = P.DEFAULTS["objective"],
        early_stopping_rounds: int | None = P.DEFAULTS["early_stopping_rounds"],
        eval_metric: str | list | Callable | None = P.DEFAULTS["eval_metric"],
        importance_type: str = P.DEFAULTS["importance_type"],
        random_state: int | None = P.DEFAULTS["random_state"],
        device: Any = P.DEFAULTS["device"],
        n_jobs: int | None = P.DEFAULTS["n_jobs"],
        precision: str | None = P.DEFAULTS["precision"],
        verbose: int = P.DEFAULTS["verbose"],
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.multi_strategy = multi_strategy
        self.max_bin = max_bin
        self.bin_sample = bin_sample
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.min_split_gain = min_split_gain
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.categorical_feature = categorical_feature
        self.max_cat_to_onehot = max_cat_to_onehot
        self.cat_smooth = cat_smooth
        self.objective = objective
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.importance_type = importance_type
        self.random_state = random_state
        self.device = device
        self.n_jobs = n_jobs
        self.precision = precision
        self.verbose = verbose

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "_ensemble")

    def _check_fitted(self) -> None:
        if not hasattr(self, "_ensemble"):
            raise not_fitted_error(type(self).__name__)

    # ------------------------------------------------------------------------------------------ fitting

    def _encode_target(self, y: Any, objective: str | None, fitting: bool) -> tuple[np.ndarray, str]:
        """(encoded y of shape (n_rows, n_outputs) float64, objective); sets the label attributes when fitting."""
        raise NotImplementedError

    def fit(self, X: Any, y: Any, sample_weight: Any = None, eval_set: list | None = None,
            eval_sample_weight: list | None = None) -> _TreeBoost:
        """Grow ``n_estimators`` trees (fewer with early stopping on the last ``eval_set``); returns self."""
        p = P.validate(self.get_params())
        name = type(self).__name__
        labels = category_labels(X)
        # float32 rows stay float32 (XGBoost's and LightGBM's input as it comes): their float64 copy was twice their
        # memory and, at 10.5M x 28 rows, the largest part of a GPU fit's setup; the edges and bins are the same
        Xa = as_matrix(X, keep_float32=True)
        y_enc, objective = self._encode_target(y, p["objective"], fitting=True)
        if y_enc.shape[0] != Xa.shape[0]:
            raise ValueError(f"X has {Xa.shape[0]} rows but y has {y_enc.shape[0]}")
        w = check_weights(sample_weight, Xa.shape[0])
        if p["early_stopping_rounds"] and not eval_set:
            raise ValueError("early_stopping_rounds needs at least one eval_set=[(X, y)]")
        names = feature_names(X)
        self.n_features_in_ = Xa.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        categorical = categorical_mask(p["categorical_feature"], labels, names, Xa.shape[1])
        self._category_labels = labels
        loss = make_loss(objective, self.n_classes_ if objective == "multi:softmax" else y_enc.shape[1])
        metrics = resolve(p["eval_metric"], loss, weighted=eval_sample_weight is not None)
        loss.check_target(y_enc, w)
        evals = self._prepare_evals(eval_set, eval_sample_weight, name)
        for i, (_, ye, we) in enumerate(evals):
            loss.check_target(ye, we, f"eval_set[{i}] y")

        t0 = time.perf_counter()
        device = limit_threads(p["device"], p["n_jobs"])
        precision = resolve_precision(device, p["precision"])
        if trees_per_round(p, loss) > 1:
            from mdhom.trees.ktrees import make_ktree_kernels

            kernels = make_ktree_kernels(device, precision, p, categorical, self._ktree_batch)
        else:
            kernels = make_kernels(device, precision)
        # before the edges are learned (a loop over features), with the fewest bins any data needs; then exactly
        stored = int(Xa.nnz) if is_sparse(Xa) else None
        kernels.check_size(Xa.shape[0], Xa.shape[1], 2, loss.n_outputs, stored)
        mapper = BinMapper(p["max_bin"], categorical).fit(Xa, w, sample_rows(Xa.shape[0], p["bin_sample"],
                                                                              p["random_state"]))
        kernels.check_size(Xa.shape[0], Xa.shape[1], mapper.n_bins, loss.n_outputs, stored)
        to_bins = kernels.bin_rows(mapper)
        cat_mode = category_modes(mapper.categories, loss.n_outputs, p["max_cat_to_onehot"])
        kernels.load(to_bins(Xa), mapper.n_bins, loss.n_outputs, cat_mode)
        self.bin_seconds_ = time.perf_counter() - t0
        ensemble = Ensemble(Xa.shape[1], loss.n_outputs, loss.base_score(y_enc, w),
                            categories=mapper.categories if cat_mode is not None else None)
        fitted = boost(kernels, to_bins, loss, ensemble, Xa, y_enc, w, evals, metrics, p, mapper.thresholds)
        ensemble.trees = fitted.trees
        self._set_fitted(ensemble, objective, p, mapper.edges)
        self.precision_ = precision
        self.best_iteration_ = fitted.best
        self.evals_result_ = fitted.results
        self.round_times_ = np.asarray(fitted.round_times)
        self.build_seconds_ = float(kernels.build_seconds)
        self.kernel_configs_ = kernels.kernel_configs()
        # the compute units (CPU threads) the fit ran on: n_jobs's effect, None for device="numpy"
        device = getattr(kernels, "device", None)
        self.compute_units_ = None if device is None else int(device.compute_units)
        return self

    def _prepare_evals(self, eval_set: list | None, eval_sample_weight: list | None, name: str) -> list:
        evals = []
        for i, pair in enumerate(eval_set or []):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError("eval_set must be a list of (X, y) pairs")
            Xe = as_matrix(pair[0], self._fitted_labels(), keep_float32=True)
            if Xe.shape[1] != self.n_features_in_:
                raise ValueError(f"eval_set[{i}] has {Xe.shape[1]} features, the training data "
                                 f"{self.n_features_in_}")
            ye, _ = self._encode_target(pair[1], None, fitting=False)
            if ye.shape[0] != Xe.shape[0]:
                raise ValueError(f"eval_set[{i}]: X has {Xe.shape[0]} rows but y has {ye.shape[0]}")
            we = check_weights(None if eval_sample_weight is None else eval_sample_weight[i], Xe.shape[0])
            evals.append((Xe, ye, we))
        return evals

    def _set_fitted(self, ensemble: Ensemble, objective: str, p: dict[str, Any], edges: list[np.ndarray]) -> None:
        self._ensemble = ensemble
        self._bin_edges = edges
        self._params = dict(p)
        self.objective_ = objective
        self.n_features_in_ = ensemble.n_features
        scores = ensemble.feature_scores(p["importance_type"])
        total = scores.sum()
        self.feature_importances_ = scores / total if total > 0 else scores

    def get_score(self, importance_type: str | None = None) -> dict[str, float]:
        """Unnormalised importance per feature that has a split, keyed by feature name (``f0``, ``f1``, ...
        without names), as XGBoost's ``Booster.get_score``; ``importance_type`` defaults to the estimator's."""
        self._check_fitted()
        kind = P.validate({"importance_type": importance_type or self.importance_type})["importance_type"]
        scores = self._ensemble.feature_scores(kind)
        used = self._ensemble.feature_scores("weight") > 0
        names = getattr(self, "feature_names_in_", None)
        keys = [str(n) for n in names] if names is not None else [f"f{i}" for i in range(len(scores))]
        return {keys[i]: float(scores[i]) for i in np.flatnonzero(used)}

    # --------------------------------------------------------------------------------------- prediction

    def _fitted_labels(self) -> list[np.ndarray | None]:
        """Per feature the category labels of fit's data frame: how a frame's 'category' columns map to codes
        (a column that had none is not categorical)."""
        labels = getattr(self, "_category_labels", None)
        return [None] * self.n_features_in_ if labels is None else labels

    def _raw(self, X: Any) -> np.ndarray:
        self._check_fitted()
        check_feature_names(getattr(self, "feature_names_in_", None), X, type(self).__name__)
        # float32 rows stay float32 for the device walk (the same leaves: see predict_forest)
        Xa = as_matrix(X, self._fitted_labels(), allow_empty=True, keep_float32=True)
        if Xa.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xa.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        ens = self._ensemble
        predictor = self._device_predictor(Xa.shape[0])
        if Xa.dtype == np.float32 and (predictor is None or ens.categories is not None):
            Xa = Xa.astype(np.float64)  # the numpy walk and the categories' positions read float64
        if predictor is None:
            return ens.raw_predict(Xa)
        if not is_sparse(Xa):
            return ens.base_score + predictor.tree_sums(ens.category_positions(Xa))
        out = np.empty((Xa.shape[0], ens.n_outputs))
        for lo, hi, dense in sparse_chunks(Xa, 1 << 24):  # absent entries missing, a bounded block at a time
            out[lo:hi] = ens.base_score + predictor.tree_sums(ens.category_positions(dense))
        return out

    def _device_predictor(self, n_rows: int) -> Any:
        """The fit's OpenCL device walks the trees when the walk is large enough to pay for the kernel build
        (same bits as the numpy walk: the sums over trees run in the same order); None: numpy."""
        ens = self._ensemble
        device = self._params.get("device")
        if device == "numpy" or n_rows * max(1, len(ens.trees)) < DEVICE_PREDICT_MIN or not ens.trees:
            return None
        cached = getattr(self, "_forest", None)
        if cached is not None and cached[0] is ens and cached[1] == repr(device):
            return cached[2]
        try:
            from mdhom.components.predictor import ForestPredictor
            from mdhom.devices import get_device

            dev = get_device(limit_threads(device, self._params.get("n_jobs")))
        except (ImportError, ValueError, RuntimeError):
            return None  # no OpenCL device here (a model trained elsewhere): the numpy walk
        if not dev.has_fp64:
            return None
        predictor = ForestPredictor(dev, ens.trees, ens.categories, ens.n_outputs)
        self._forest = (ens, repr(device), predictor)  # the ensemble itself: a refit makes a new one
        return predictor

class TreeBoostClassifier(_TreeBoost):
    """Gradient-boosted trees for classification: binary, multiclass (softmax) and multi-label.

    A 1-D ``y`` of any label values (numbers, strings) gives ``classes_``; two classes train a binary
    logistic model, more a softmax model with one multi-output tree per round, or with
    ``multi_strategy="one_output_per_tree"`` one tree per class and round, the round's trees grown together
    (depth-wise only; :mod:`mdhom.trees.ktrees`). A 2-D 0/1 indicator ``y`` trains the multi-label logistic
    objective, one output per label in the leaves (or one tree per label); ``predict`` then returns the 0/1 matrix
    and ``predict_proba`` the per-label probabilities.

    ``X`` may be a numpy array, a data frame or a scipy.sparse matrix; NaN is missing, and so is an entry a
    sparse matrix does not store (XGBoost's meaning: it takes the learned default direction), while a stored 0
    is the value 0. Sparse input is binned from its stored entries and never densified as float64.

    Fitted attributes: ``classes_``, ``n_classes_``, ``n_features_in_``, ``feature_names_in_`` (data
    frames with string columns), ``objective_``, ``feature_importances_`` (by ``importance_type``, normalised
    to sum 1; ``get_score`` gives them unnormalised by name), ``best_iteration_``, ``evals_result_`` (per eval
    set, per metric, one value per round), ``round_times_`` (host seconds per round), ``build_seconds_`` (OpenCL
    program builds, 0 for numpy), ``precision_`` (the arithmetic mode used), ``compute_units_`` (of the device
    the fit ran on, ``n_jobs`` applied; None for numpy).

    {params}
    """

    _estimator_type = "classifier"  # what scikit-learn before 1.6 reads

    def __sklearn_tags__(self):  # noqa: ANN204 - scikit-learn's Tags, imported only when sklearn asks
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True, multi_output=True),
                    classifier_tags=ClassifierTags(multi_label=True),
                    input_tags=InputTags(allow_nan=True, sparse=True))

    def _encode_target(self, y, objective, fitting):
        y = as_target(y, type(self).__name__)
        if y.ndim == 2:
            try:
                values = y.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError("a 2-D y must be a 0/1 label indicator matrix") from None
            if not np.isin(values, (0.0, 1.0)).all():
                raise ValueError("a 2-D y must be a 0/1 label indicator matrix (multi-label); "
                                 "multi-output multiclass is not supported")
            if fitting:
                if objective not in (None, "multilabel:logistic"):
                    raise ValueError(f"objective {objective!r} does not fit a 2-D (multi-label) y")
                self.classes_ = np.arange(y.shape[1])
                self.n_classes_ = y.shape[1]
                self._multilabel = True
                self._label_dtype = y.dtype
            elif not getattr(self, "_multilabel", False) or y.shape[1] != len(self.classes_):
                raise ValueError("eval_set y does not have the training labels' shape")
            return values, "multilabel:logistic"
        if y.dtype.kind == "f" and np.any(y != np.round(y)):
            raise ValueError("Unknown label type: continuous. TreeBoostClassifier needs class labels; use "
                             "TreeBoostRegressor for a continuous target")
        if not fitting:
            if getattr(self, "_multilabel", False):
                raise ValueError("eval_set y must be 2-D like the training labels")
            idx = np.searchsorted(self.classes_, y)
            idx = np.clip(idx, 0, len(self.classes_) - 1)
            if np.any(self.classes_[idx] != y):
                raise ValueError("eval_set y holds labels not seen in training")
            return idx.astype(np.float64)[:, None], ""
        classes, idx = class_codes(y)
        if len(classes) < 2:
            raise ValueError(f"y contains only one class ({classes[0]!r} if any); a classifier needs at least "
                             "two classes" if len(classes) else "y is empty")
        if objective == "multilabel:logistic" or objective == "reg:squarederror":
            raise ValueError(f"objective {objective!r} does not fit a 1-D class label y")
        if objective == "binary:logistic" and len(classes) > 2:
            raise ValueError(f"objective 'binary:logistic' needs two classes, y has {len(classes)}")
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self._multilabel = False
        objective = objective or ("binary:logistic" if len(classes) == 2 else "multi:softmax")
        return idx.reshape(-1).astype(np.float64)[:, None], objective

    def _target_info(self):
        info = {"kind": "multilabel" if self._multilabel else "classes"}
        if self._multilabel:
            info["label_dtype"] = np.dtype(self._label_dtype).str
        return info

    def _restore_target(self, info, classes):
        if classes is None:
            raise ValueError("a classifier model lacks its classes")
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self._multilabel = info.get("kind") == "multilabel"
        if self._multilabel:
            self._label_dtype = np.dtype(info["label_dtype"])

    def decision_function(self, X: Any) -> np.ndarray:
        """Raw scores: (n,) log-odds for two classes, else (n, n_classes) (margins or per-label log-odds)."""
        raw = self._raw(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, n_classes) class probabilities; for multi-label, (n, n_labels) probabilities per label."""
        raw = self._raw(X)
        p = make_loss(self.objective_, raw.shape[1]).transform(raw)
        if self.objective_ == "binary:logistic":
            return np.column_stack([1.0 - p[:, 0], p[:, 0]])
        return p

    def predict(self, X: Any) -> np.ndarray:
        raw = self._raw(X)
        if self._multilabel:
            return (raw > 0).astype(self._label_dtype)
        if raw.shape[1] == 1:
            return self.classes_[(raw[:, 0] > 0).astype(np.int64)]
        return self.classes_[np.argmax(raw, axis=1)]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy (subset accuracy for multi-label), as scikit-learn's ClassifierMixin."""
        pred = self.predict(X)
        y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
        hit = np.all(pred == y, axis=1) if pred.ndim == 2 else pred == y.reshape(pred.shape)
        return float(np.average(hit, weights=sample_weight))


class TreeBoostRegressor(_TreeBoost):
    """Gradient-boosted trees for regression (squared error).

    ``X`` as for :class:`TreeBoostClassifier`: NaN and entries a scipy.sparse matrix does not store are missing
    (XGBoost's meaning); a stored 0 is the value 0.

    Fitted attributes: ``n_features_in_``, ``feature_names_in_`` (data frames with string columns),
    ``objective_``, ``feature_importances_`` (by ``importance_type``, normalised to sum 1), ``best_iteration_``,
    ``evals_result_``, ``round_times_`` (host seconds per round), ``build_seconds_``, ``precision_``,
    ``compute_units_``.

    {params}
    """

    _estimator_type = "regressor"

    def __sklearn_tags__(self):  # noqa: ANN204
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags

        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True),
                    regressor_tags=RegressorTags(), input_tags=InputTags(allow_nan=True, sparse=True))

    def _encode_target(self, y, objective, fitting):
        y = as_target(y, type(self).__name__)
        if y.ndim != 1:
            raise ValueError(f"TreeBoostRegressor needs a 1-D y, got shape {y.shape}")
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("y must be numeric for regression") from None
        if not np.isfinite(y).all():
            raise ValueError("Input y contains NaN or infinity")
        if fitting and objective not in (None, "reg:squarederror"):
            raise ValueError(f"objective {objective!r} is not a regression objective")
        return y[:, None], "reg:squarederror"

    def predict(self, X: Any) -> np.ndarray:
        return self._raw(X)[:, 0]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R^2, as scikit-learn's RegressorMixin."""
        y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y, dtype=np.float64).reshape(-1)
        pred = self.predict(X)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, np.float64)
        resid = np.average((y - pred) ** 2, weights=w)
        var = np.average((y - np.average(y, weights=w)) ** 2, weights=w)
        return float(1.0 - resid / var) if var > 0 else (1.0 if resid == 0 else 0.0)


for _cls in (TreeBoostClassifier, TreeBoostRegressor):
    _cls.__doc__ = _cls.__doc__.replace("{params}", P.docstring().replace("\n", "\n    "))


_ESTIMATORS = {"TreeBoostClassifier": TreeBoostClassifier, "TreeBoostRegressor": TreeBoostRegressor}


def load_model(path: str | os.PathLike) -> Any:
    """A fitted TreeBoostClassifier or TreeBoostRegressor (whichever the file holds) from ``save_model``; a random
    forest's file gives its RandomForestClassifier or RandomForestRegressor."""
    from mdhom.forests.model import FORMAT as FOREST_FORMAT
    from mdhom.learn.model_files import format_of

    if format_of(path) == FOREST_FORMAT:
        from mdhom.forests.estimators import load_forest

        return load_forest(path)
    doc = read_json(path)
    cls = _ESTIMATORS.get(doc.get("estimator"))
    if cls is None:
        raise ValueError(f"{os.fspath(path)}: damaged mdhom model file (unknown estimator {doc.get('estimator')!r})")
    return cls()._restore(doc, os.fspath(path))
