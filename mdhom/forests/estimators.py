"""RandomForestClassifier and RandomForestRegressor: scikit-learn's random forests on histogram-binned features,
every tree of the forest grown together on the device (:mod:`mdhom.forests.grower`).

>>> from mdhom import RandomForestClassifier
>>> est = RandomForestClassifier(n_estimators=500, random_state=0).fit(X, y)
>>> est.predict_proba(X_test); est.feature_importances_
>>> est.save_model("forest.json"); RandomForestClassifier().load_model("forest.json").predict(X_test)

What differs from scikit-learn: features are binned (``max_bin``, as the boosting trees: thresholds fall between
distinct training values, so up to ``max_bin`` distinct values a feature splits exactly as scikit-learn's would),
NaN goes right at every split, the random streams are mdhom's own (the same seed gives the same model on every
device, not scikit-learn's model), and ``sample_weight`` must hold whole numbers (counts).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mdhom.forests import grower as G
from mdhom.forests import params as P
from mdhom.forests.model import FORMAT, VERSION, Forest
from mdhom.learn import model_files
from mdhom.learn.binning import BinMapper, sample_rows
from mdhom.learn.params import OptionParams
from mdhom.learn.validation import (
    as_matrix,
    as_target,
    check_feature_names,
    check_weights,
    class_codes,
    feature_names,
    is_sparse,
    not_fitted_error,
)

# rows x trees from which prediction walks the trees on the fit's OpenCL device (the boosting trees' threshold:
# below it the numpy walk is faster than building the kernel)
DEVICE_PREDICT_MIN = 1 << 22
BIN_SAMPLE = 200_000  # rows the bin edges are learned from (the boosting trees' default bin_sample)
_INT32 = 2**31 - 1


def make_backend(device: Any, n_jobs: int | None) -> G.ForestBackend:
    """The numpy reference for "numpy", else the OpenCL backend on ``device`` (``n_jobs`` threads on a CPU)."""
    if device == "numpy":
        return G.NumpyForest()
    from mdhom.forests.opencl_backend import OpenCLForest
    from mdhom.trees.estimators import limit_threads

    return OpenCLForest(limit_threads(device if device is not None else "auto", n_jobs))


class _Forest(OptionParams):
    _options = P.TABLE
    _default_criterion = "gini"
    _default_max_features: Any = "sqrt"

    def __init__(
        self,
        n_estimators: int = P.DEFAULTS["n_estimators"],
        criterion: str | None = None,
        max_depth: int | None = P.DEFAULTS["max_depth"],
        min_samples_split: int | float = P.DEFAULTS["min_samples_split"],
        min_samples_leaf: int | float = P.DEFAULTS["min_samples_leaf"],
        max_features: Any = "default",
        bootstrap: bool = P.DEFAULTS["bootstrap"],
        max_samples: int | float | None = P.DEFAULTS["max_samples"],
        max_bin: int = P.DEFAULTS["max_bin"],
        random_state: Any = P.DEFAULTS["random_state"],
        device: Any = P.DEFAULTS["device"],
        n_jobs: int | None = P.DEFAULTS["n_jobs"],
        precision: str | None = P.DEFAULTS["precision"],
    ) -> None:
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.max_bin = max_bin
        self.random_state = random_state
        self.device = device
        self.n_jobs = n_jobs
        self.precision = precision

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "_forest")

    def _check_fitted(self) -> None:
        if not hasattr(self, "_forest"):
            raise not_fitted_error(type(self).__name__)

    def _params(self) -> dict[str, Any]:
        """The validated parameters, the estimator's own defaults filled in."""
        raw = self.get_params()
        if raw["criterion"] is None:
            raw["criterion"] = self._default_criterion
        if isinstance(raw["max_features"], str) and raw["max_features"] == "default":
            raw["max_features"] = self._default_max_features
        p = P.validate(raw)
        allowed = ("squared_error",) if self._default_criterion == "squared_error" else ("gini", "entropy")
        if p["criterion"] not in allowed:
            raise ValueError(f"criterion {p['criterion']!r} is not one of {type(self).__name__}'s: "
                             f"{', '.join(allowed)}")
        if not p["bootstrap"] and p["max_samples"] is not None:
            raise ValueError("max_samples cannot be set if bootstrap=False (every row is used once)")
        return p

    # ------------------------------------------------------------------------------------------ fitting
    def _encode_target(self, y: Any, n: int) -> tuple[np.ndarray, tuple[int, ...]]:
        """(the target as the statistics are made from, lanes per output); sets the target's fitted attributes."""
        raise NotImplementedError

    def _statistics(self, target: np.ndarray, tree_weight: int, precision: str | None) -> np.ndarray:
        """Integer statistics per row; ``tree_weight`` bounds a tree's sum of weights."""
        return target

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _Forest:
        """Grow the forest on ``X`` (array or data frame; NaN is missing) and ``y``; returns self."""
        p = self._params()
        if is_sparse(X):
            raise ValueError(f"{type(self).__name__} does not take scipy.sparse X yet; pass X.toarray() (an absent "
                             "entry then is 0, as in scikit-learn)")
        Xa = as_matrix(X, keep_float32=True)  # float32 rows binned as they are: the float64 copy's bins
        n, n_feat = Xa.shape
        target, outputs = self._encode_target(y, n)
        sw = check_weights(sample_weight, n)
        if np.any(sw != np.round(sw)):
            raise ValueError("sample_weight must hold whole numbers (counts): the forest's sums are exact integers")
        sw = sw.astype(np.int64)
        mapper = BinMapper(p["max_bin"]).fit(Xa, sample_weight=sw.astype(np.float64),
                                             rows=sample_rows(n, BIN_SAMPLE, p["random_state"]))
        backend = make_backend(p["device"], p["n_jobs"])
        bins = backend.bin_rows(mapper, Xa)  # on an OpenCL device: binned there, in the kernels' layout
        rng = np.random.default_rng(p["random_state"])
        n_draw = self._n_draw(p, n)
        t = p["n_estimators"]
        # each tree's bag: its draw stream, drawn and counted (times the sample weights) where the trees grow
        if int(sw.max(initial=0)) * max(1, n_draw) > _INT32 or int(sw.sum()) > _INT32:
            raise ValueError("the bootstrap weights of a tree could sum beyond 2^31: use fewer rows or smaller "
                             "sample weights")
        bag = G.Bag(rng.integers(0, 2**64, t, dtype=np.uint64, endpoint=False), n, n_draw, p["bootstrap"], sw)
        stat = self._statistics(target, bag.max_tree_weight, p["precision"])
        seeds = rng.integers(0, 2**32, t, dtype=np.uint32)
        leaf = P.resolve_count(p["min_samples_leaf"], n)
        spec = G.GrowSpec(outputs, p["criterion"], p["max_depth"],
                          max(P.resolve_count(p["min_samples_split"], n), 2 * leaf), leaf,
                          P.resolve_max_features(p["max_features"], n_feat))
        grown = G.grow(backend, bins, mapper.n_bins, stat, bag, seeds, spec)
        thresholds = _thresholds(mapper, grown)
        self._forest = Forest(n_feat, grown.offsets, grown.feature, thresholds, grown.left,
                              self._leaf_values(grown.totals, outputs), _importances(grown, n_feat))
        self._fit_params = p
        self.n_features_in_ = n_feat
        names = feature_names(X)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        device = getattr(backend, "device", None)
        self.device_ = "numpy" if device is None else device.key
        # what each kernel ran with and where that came from (a tuned file, defaults, the heuristic), as the
        # boosting trees' kernel_configs_: a user sees whether the device's tuned configurations were used
        ws = getattr(backend, "ws", None)
        self.kernel_configs_ = {} if ws is None else ws.kernel_configs()
        return self

    @staticmethod
    def _n_draw(p: dict[str, Any], n: int) -> int:
        m = p["max_samples"]
        if m is None or not p["bootstrap"]:
            return n
        if isinstance(m, float):
            return max(1, round(n * m))
        if m > n:
            raise ValueError(f"max_samples={m} exceeds the {n} rows of X")
        return int(m)

    def _leaf_values(self, totals: np.ndarray, outputs: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    @property
    def feature_importances_(self) -> np.ndarray:
        """Mean decrease in impurity per feature (scikit-learn's MDI): each tree's split gains per feature,
        normalised per tree, averaged over the trees and normalised to sum 1."""
        self._check_fitted()
        return self._forest.importances.copy()

    # ------------------------------------------------------------------------------------------ prediction
    def _mean(self, X: Any) -> np.ndarray:
        self._check_fitted()
        check_feature_names(getattr(self, "feature_names_in_", None), X, type(self).__name__)
        if is_sparse(X):
            raise ValueError(f"{type(self).__name__} does not take scipy.sparse X yet; pass X.toarray()")
        # float32 rows stay so: the boosting trees' walk (more values than a walk carries) reads them as floats, the
        # forest's walk takes them to float64 in its blocks of rows (as many as the device takes at once: 2M x 28 rows
        # are one block, as large a copy as before; blocks of 300k rows measured 1.3x slower on PoCL), numpy whole
        Xa = as_matrix(X, allow_empty=True, keep_float32=True)
        if Xa.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xa.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        predictor = self._device_predictor(Xa.shape[0])
        if predictor is None:
            return self._forest.predict_sum(np.asarray(Xa, np.float64))
        # the md_hom walk (rows x trees, summed over trees in tree order), then the mean: the numpy walk's bits
        return predictor.tree_sums(Xa) / self._forest.n_trees

    def _device_predictor(self, n_rows: int) -> Any:
        """The predictor on the fit's OpenCL device where rows x trees pay for it (None: the numpy walk)."""
        device = getattr(self, "_fit_params", {}).get("device")
        if device == "numpy" or n_rows * self._forest.n_trees < DEVICE_PREDICT_MIN:
            return None
        cached = self.__dict__.get("_predictor")
        if cached is not None and cached[0] is self._forest:
            return cached[1]
        from mdhom.components.predictor import ForestPredictor
        from mdhom.devices import get_device
        from mdhom.forests.walk_kernels import MAX_WALK_VALUES
        from mdhom.forests.walker import ForestWalker
        from mdhom.trees.estimators import limit_threads

        try:
            dev = get_device(limit_threads(device if device is not None else "auto", self._fit_params.get("n_jobs")))
        except (RuntimeError, ValueError):
            return None  # no OpenCL device here (a model trained elsewhere): the numpy walk
        if self._forest.value.shape[1] <= MAX_WALK_VALUES:  # one walk per (row, tree) for all the leaf's values
            predictor = ForestWalker(dev, self._forest)
        else:  # more values than a walk carries: the boosting trees' walk, once per (row, output, tree)
            predictor = ForestPredictor(dev, self._forest.as_trees(), None, self._forest.value.shape[1])
        self._predictor = (self._forest, predictor)
        return predictor

    # ------------------------------------------------------------------------------------------ model files
    def save_model(self, path: str | os.PathLike) -> None:
        """Versioned JSON, written atomically with the user's umask (:mod:`mdhom.learn.model_files`). The device
        options are left out: every device writes the same file for the same seed."""
        self._check_fitted()
        from mdhom import __version__

        params = {k: v for k, v in self._fit_params.items() if k not in ("device", "n_jobs")}
        doc = {"format": FORMAT, "version": VERSION, "mdhom_version": __version__, "estimator": type(self).__name__,
               "params": params, "target": self._target_info(),
               "feature_names": None if getattr(self, "feature_names_in_", None) is None
               else [str(s) for s in self.feature_names_in_],
               "forest": self._forest.to_json()}
        model_files.save_json(path, doc)

    def load_model(self, path: str | os.PathLike) -> _Forest:
        """Restore a file written by ``save_model`` into this estimator; returns self. A file of the other kind
        of forest is refused."""
        doc = model_files.read_json(path, FORMAT, VERSION, "an mdhom forest model")
        if doc.get("estimator") != type(self).__name__:
            raise ValueError(f"{os.fspath(path)} holds a {doc.get('estimator')} model, not a {type(self).__name__}")
        try:
            params = P.validate({k: v for k, v in doc["params"].items() if k in P.BY_NAME})
            self.set_params(**params)
            self._fit_params = {**self._params(), **params}
            self._restore_target(doc["target"])
            self._forest = Forest.from_json(doc["forest"], self._n_values())
            self.n_features_in_ = self._forest.n_features
            if doc.get("feature_names") is not None:
                self.feature_names_in_ = np.asarray(doc["feature_names"], dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
            self.__dict__.pop("_forest", None)
            raise ValueError(f"{os.fspath(path)}: damaged mdhom forest model file ({type(exc).__name__}: {exc})") \
                from None
        return self


def _thresholds(mapper: BinMapper, grown: G.GrownForest) -> np.ndarray:
    """Every split node's raw threshold (:meth:`BinMapper.thresholds` of its feature and bin: the edge above the
    bin, +inf past the last); leaves 0."""
    out = np.zeros(grown.feature.size)  # leaves: 0, never read
    inner = np.flatnonzero(grown.feature >= 0)
    out[inner] = mapper.thresholds(grown.feature[inner], grown.split_bin[inner])
    return out


def _importances(grown: G.GrownForest, n_features: int) -> np.ndarray:
    """Each tree's gains per feature, normalised per tree, added in tree order, normalised: one bincount over
    (tree, feature) keys in node order (each tree's sums in its own bincount's order) instead of a pass over
    every node per tree."""
    n_trees = grown.offsets.size - 1
    trees = np.repeat(np.arange(n_trees), np.diff(grown.offsets))
    inner = grown.feature >= 0
    imp = np.bincount(trees[inner] * n_features + grown.feature[inner], weights=grown.gain[inner],
                      minlength=n_trees * n_features).reshape(n_trees, n_features)
    per_tree = np.zeros(n_features)
    for row in imp:
        if row.sum() > 0:
            per_tree += row / row.sum()
    total = per_tree.sum()
    return per_tree / total if total > 0 else per_tree


class RandomForestClassifier(_Forest):
    """A random forest classifier (scikit-learn's RandomForestClassifier, histogram-binned; module docstring).

    ``y``: class labels (1-D), or one column of labels per output (2-D: multi-output, multi-label as 0/1
    columns). ``predict_proba`` gives the mean of the trees' class frequencies: an (n, n_classes) array, or a list
    of them per output for a 2-D ``y``, as scikit-learn's.

    Fitted attributes: ``classes_``, ``n_classes_``, ``n_outputs_``, ``n_features_in_``, ``feature_names_in_``,
    ``feature_importances_``, ``device_`` (the device key, or "numpy").

    {params}
    """

    _estimator_type = "classifier"

    def __sklearn_tags__(self):  # noqa: ANN204
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True, multi_output=True),
                    classifier_tags=ClassifierTags(multi_label=True), input_tags=InputTags(allow_nan=True))

    def _encode_target(self, y, n):  # noqa: ANN001, ANN202
        y = as_target(y, type(self).__name__)
        if y.shape[0] != n:
            raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
        cols = y.reshape(n, -1)
        if cols.dtype.kind == "f" and np.any(cols != np.round(cols)):
            raise ValueError("Unknown label type: continuous. RandomForestClassifier needs class labels; use "
                             "RandomForestRegressor for a continuous target")
        classes, stats = [], []
        for j in range(cols.shape[1]):
            c, idx = class_codes(cols[:, j])
            classes.append(c)
            stats.append(np.eye(len(c), dtype=np.int32)[idx.reshape(-1)])
        self._multi = y.ndim == 2
        self.n_outputs_ = len(classes)
        self.classes_ = classes if self._multi else classes[0]
        self.n_classes_ = [len(c) for c in classes] if self._multi else len(classes[0])
        return np.concatenate(stats, axis=1), tuple(len(c) for c in classes)

    def _outputs(self) -> list[int]:
        return list(self.n_classes_) if self._multi else [self.n_classes_]

    def _n_values(self) -> int:
        return int(sum(self._outputs()))

    def _leaf_values(self, totals, outputs):  # noqa: ANN001, ANN202
        w = totals[:, -2].astype(np.float64)[:, None]
        # a tree whose bootstrap drew only rows of weight 0 has an empty root: it predicts 0
        return np.divide(totals[:, :sum(outputs)].astype(np.float64), w, out=np.zeros((len(w), sum(outputs))),
                         where=w > 0)

    def _target_info(self) -> dict[str, Any]:
        classes = self.classes_ if self._multi else [self.classes_]
        return {"kind": "classes", "multi_output": self._multi,
                "classes": [model_files.encode_classes(np.asarray(c)) for c in classes]}

    def _restore_target(self, info: dict[str, Any]) -> None:
        if info.get("kind") != "classes":
            raise ValueError("a classifier model lacks its classes")
        classes = [model_files.decode_classes(c) for c in info["classes"]]
        self._multi = bool(info["multi_output"])
        self.n_outputs_ = len(classes)
        self.classes_ = classes if self._multi else classes[0]
        self.n_classes_ = [len(c) for c in classes] if self._multi else len(classes[0])

    def predict_proba(self, X: Any) -> np.ndarray | list[np.ndarray]:
        """Class probabilities: (n, n_classes), or a list of them per output for a 2-D ``y``."""
        mean = self._mean(X)
        offs = np.concatenate([[0], np.cumsum(self._outputs())])
        per = [mean[:, offs[o]:offs[o + 1]] for o in range(len(offs) - 1)]
        return per if self._multi else per[0]

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        if not self._multi:
            return self.classes_[np.argmax(proba, axis=1)]
        return np.stack([c[np.argmax(p, axis=1)] for c, p in zip(self.classes_, proba, strict=True)], axis=1)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy (every output right, for a 2-D ``y``), as scikit-learn's ClassifierMixin."""
        pred = self.predict(X)
        y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
        hit = np.all(pred == y, axis=1) if pred.ndim == 2 else pred == y.reshape(pred.shape)
        return float(np.average(hit, weights=sample_weight))


class RandomForestRegressor(_Forest):
    """A random forest regressor (scikit-learn's RandomForestRegressor, histogram-binned; module docstring).

    ``y``: 1-D, or 2-D for several outputs (one forest, multi-output leaves, as scikit-learn's). Targets are summed
    in fixed point (``precision``): centred on their mean and scaled by one power of two so that no sum can
    overflow, which makes every device's sums, and so its model file, the same.

    Fitted attributes: ``n_outputs_``, ``n_features_in_``, ``feature_names_in_``, ``feature_importances_``,
    ``device_``.

    {params}
    """

    _estimator_type = "regressor"
    _default_criterion = "squared_error"
    _default_max_features = 1.0

    def __sklearn_tags__(self):  # noqa: ANN204
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags

        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True, multi_output=True),
                    regressor_tags=RegressorTags(), input_tags=InputTags(allow_nan=True))

    def _encode_target(self, y, n):  # noqa: ANN001, ANN202
        y = as_target(y, type(self).__name__)
        if y.shape[0] != n:
            raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
        try:
            cols = y.astype(np.float64).reshape(n, -1)
        except (TypeError, ValueError):
            raise ValueError("y must be numeric for regression") from None
        self._multi = y.ndim == 2
        self.n_outputs_ = cols.shape[1]
        return cols, (1,) * cols.shape[1]

    def _statistics(self, target, tree_weight, precision):  # noqa: ANN001, ANN202
        """Centred targets in fixed point: |row| * tree_weight < 2^62 (2^30 quantized), so no sum overflows."""
        self._center = target.mean(axis=0)
        dev = float(np.abs(target - self._center).max())
        bits = 30 if precision == "quantized" else 62
        self._shift = 0 if dev == 0 else int(np.floor(bits - np.log2(dev * max(1, tree_weight))))
        dtype = np.int32 if precision == "quantized" else np.int64
        return np.rint(np.ldexp(target - self._center, self._shift)).astype(dtype)

    def _n_values(self) -> int:
        return int(self.n_outputs_)

    def _leaf_values(self, totals, outputs):  # noqa: ANN001, ANN202
        w = totals[:, -2].astype(np.float64)[:, None]
        mean = np.divide(totals[:, :len(outputs)].astype(np.float64), w, out=np.zeros((len(w), len(outputs))),
                         where=w > 0)
        return self._center[None, :] + np.ldexp(mean, -self._shift)

    def _target_info(self) -> dict[str, Any]:
        return {"kind": "regression", "multi_output": self._multi, "n_outputs": int(self.n_outputs_)}

    def _restore_target(self, info: dict[str, Any]) -> None:
        if info.get("kind") != "regression":
            raise ValueError("a regressor model lacks its target description")
        self._multi = bool(info["multi_output"])
        self.n_outputs_ = int(info["n_outputs"])

    def predict(self, X: Any) -> np.ndarray:
        mean = self._mean(X)
        return mean if self._multi else mean[:, 0]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R^2 (averaged over outputs), as scikit-learn's RegressorMixin."""
        y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y, dtype=np.float64)
        pred = self.predict(X).reshape(y.shape[0], -1)
        y = y.reshape(pred.shape)
        w = np.ones(y.shape[0]) if sample_weight is None else np.asarray(sample_weight, np.float64)
        resid = np.average((y - pred) ** 2, weights=w, axis=0)
        var = np.average((y - np.average(y, weights=w, axis=0)) ** 2, weights=w, axis=0)
        r2 = np.where(var > 0, 1.0 - resid / np.where(var > 0, var, 1.0), np.where(resid == 0, 1.0, 0.0))
        return float(r2.mean())


for _cls in (RandomForestClassifier, RandomForestRegressor):
    _cls.__doc__ = _cls.__doc__.replace("{params}", P.docstring().replace("\n", "\n    "))


def load_forest(path: str | os.PathLike) -> _Forest:
    """The fitted forest a ``save_model`` file holds (``mdhom.load_model`` calls this for forest files)."""
    doc = model_files.read_json(path, FORMAT, VERSION, "an mdhom forest model")
    cls = {c.__name__: c for c in (RandomForestClassifier, RandomForestRegressor)}.get(doc.get("estimator"))
    if cls is None:
        raise ValueError(f"{os.fspath(path)}: damaged mdhom forest model file (unknown estimator "
                         f"{doc.get('estimator')!r})")
    return cls().load_model(path)
