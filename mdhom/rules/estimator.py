"""RuleBoostClassifier: gradient-boosted multi-label rules (BOOMER) as a scikit-learn style estimator.

>>> from mdhom import RuleBoostClassifier
>>> est = RuleBoostClassifier(max_rules=1000, loss="logistic_labelwise", head_type="single").fit(X, Y)
>>> est.predict(X_test); est.predict_proba(X_test); print(est.rules_)
>>> est.save_model("rules.json"); RuleBoostClassifier().load_model("rules.json").predict(X_test)
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mdhom.learn.params import OptionParams
from mdhom.learn.validation import check_feature_names, feature_names, not_fitted_error
from mdhom.rules import options as O
from mdhom.rules.features import Features, as_features
from mdhom.rules.induction import InductionParams, bin_edges, induce
from mdhom.rules.losses import make_loss
from mdhom.rules.model import FORMAT, RuleList, read_json, save_json
from mdhom.rules.predictors import LabelVectors, resolved_predictor
from mdhom.rules.pruning import resolved_holdout


def as_label_matrix(y: Any) -> tuple[np.ndarray, list[str] | None]:
    """(0/1 float64 matrix (n, labels), label names of a data frame's string columns or None)."""
    if y is None:
        raise ValueError("RuleBoostClassifier requires y to be passed, but the target y is None")
    names = None
    if hasattr(y, "toarray") and hasattr(y, "tocsr"):
        y = y.toarray()
    elif hasattr(y, "columns") and hasattr(y, "to_numpy"):
        cols = list(y.columns)
        names = [str(c) for c in cols] if all(isinstance(c, str) for c in cols) else None
        y = y.to_numpy()
    Y = np.asarray(y)
    if Y.ndim != 2:
        raise ValueError(f"y must be a 2-D 0/1 label indicator matrix (examples x labels), got shape {Y.shape}")
    if Y.shape[1] == 0:
        raise ValueError("y has no label columns")
    if Y.dtype.kind not in "biuf" or not np.isin(Y, (0, 1)).all():
        raise ValueError("y must hold only 0 and 1 (a label indicator matrix)")
    return Y.astype(np.float64), names


class RuleBoostClassifier(OptionParams):
    __doc__ = ("Gradient-boosted multi-label classification rules in the BOOMER style (mlrl-boomer's algorithm "
               "and defaults): a default rule, then one greedily grown rule per round.\n\n" + O.TABLE.docstring())
    _options = O.TABLE

    def __init__(
        self,
        max_rules: int = O.DEFAULTS["max_rules"],
        shrinkage: float = O.DEFAULTS["shrinkage"],
        l1_regularization_weight: float = O.DEFAULTS["l1_regularization_weight"],
        l2_regularization_weight: float = O.DEFAULTS["l2_regularization_weight"],
        loss: str = O.DEFAULTS["loss"],
        head_type: str = O.DEFAULTS["head_type"],
        label_binning: Any = O.DEFAULTS["label_binning"],
        binary_predictor: str = O.DEFAULTS["binary_predictor"],
        feature_binning: Any = O.DEFAULTS["feature_binning"],
        feature_sampling: Any = O.DEFAULTS["feature_sampling"],
        instance_sampling: float | None = O.DEFAULTS["instance_sampling"],
        label_sampling: float | None = O.DEFAULTS["label_sampling"],
        max_conditions: int = O.DEFAULTS["max_conditions"],
        min_coverage: int = O.DEFAULTS["min_coverage"],
        holdout: Any = O.DEFAULTS["holdout"],
        global_pruning: Any = O.DEFAULTS["global_pruning"],
        random_state: int | None = O.DEFAULTS["random_state"],
        device: Any = O.DEFAULTS["device"],
        precision: str = O.DEFAULTS["precision"],
    ) -> None:
        self.max_rules = max_rules
        self.shrinkage = shrinkage
        self.l1_regularization_weight = l1_regularization_weight
        self.l2_regularization_weight = l2_regularization_weight
        self.loss = loss
        self.head_type = head_type
        self.label_binning = label_binning
        self.binary_predictor = binary_predictor
        self.feature_binning = feature_binning
        self.feature_sampling = feature_sampling
        self.instance_sampling = instance_sampling
        self.label_sampling = label_sampling
        self.max_conditions = max_conditions
        self.min_coverage = min_coverage
        self.holdout = holdout
        self.global_pruning = global_pruning
        self.random_state = random_state
        self.device = device
        self.precision = precision

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "rules_")

    def _check_fitted(self) -> None:
        if not hasattr(self, "rules_"):
            raise not_fitted_error(type(self).__name__)

    # ------------------------------------------------------------------------------------------ fitting

    def fit(self, X: Any, y: Any) -> RuleBoostClassifier:
        """Learn the default rule and up to ``max_rules - 1`` rules; returns self."""
        p = O.validate(self.get_params())
        Xa = as_features(X)  # scipy.sparse stays sparse (CSC), an absent entry is 0: mdhom.rules.features
        Y, label_names = as_label_matrix(y)
        if Y.shape[0] != Xa.shape[0]:
            raise ValueError(f"X has {Xa.shape[0]} rows but y has {Y.shape[0]}")
        names = feature_names(X)
        loss = make_loss(p["loss"])
        head = O.resolved_head(p["loss"], p["head_type"])
        device = None
        if p["device"] != "numpy":
            from mdhom.devices import get_device

            device = get_device(p["device"])
        precision = O.resolved_precision(p["precision"], device, O.coupled_heads(p["loss"], p["head_type"]))
        ip = InductionParams(
            max_rules=p["max_rules"], shrinkage=p["shrinkage"], l1=p["l1_regularization_weight"],
            l2=p["l2_regularization_weight"], head_type=head, feature_sampling=p["feature_sampling"],
            instance_sampling=p["instance_sampling"], label_sampling=p["label_sampling"],
            max_conditions=p["max_conditions"], min_coverage=p["min_coverage"],
            seed=0 if p["random_state"] is None else p["random_state"], quantized=precision == "quantized",
            label_binning=O.resolved_label_binning(p["loss"], p["head_type"], p["label_binning"]),
            holdout=resolved_holdout(p["holdout"], p["global_pruning"]), global_pruning=p["global_pruning"])
        rules, learner = induce(Xa, Y, loss, ip, bin_edges(Xa, p["feature_binning"]), device)
        rules.feature_names = None if names is None else [str(s) for s in names]
        rules.label_names = label_names
        if resolved_predictor(p["binary_predictor"], loss) == "example-wise":
            rules.label_vectors = LabelVectors.of(Y)
        pruning = learner.pruning
        record = None if pruning is None else {"n_induced_rules": int(learner.n_induced), "rules": pruning.sizes,
                                               "loss": pruning.losses}
        self._set_fitted(rules, p, head, Xa.shape[1], record)
        self.holdout_indices_ = np.empty(0, np.intp) if learner.held is None else learner.held
        self.precision_ = precision
        # where the fit ran: each rule's host-clock seconds; on a device the kernels' configurations, the
        # seconds spent building them, and the device's key (None for device='numpy')
        self.rule_times_ = np.asarray(learner.rule_seconds)
        search = learner.search
        self.device_key_ = None if search is None else search.ws.device.key
        self.build_seconds_ = 0.0 if search is None else float(search.ws.build_seconds)
        self.kernel_configs_ = {} if search is None else search.ws.kernel_configs()
        return self

    def _set_fitted(self, rules: RuleList, p: dict[str, Any], head: str, n_features: int,
                    pruning: dict[str, Any] | None = None) -> None:
        """The fitted attributes of a fit or a model file; ``pruning``: global pruning's record (n_induced_rules,
        and the model sizes measured and their losses), None without global pruning."""
        self.rules_ = rules
        self._params = dict(p)
        self.head_type_ = head
        self.n_features_in_ = n_features
        self.n_outputs_ = rules.n_labels
        # the rules that predict and the rules learned, the default rule counted (mlrl-boomer's counting); global
        # pruning's measurements: the model sizes and the mean loss of each (empty without global pruning)
        self.n_rules_ = len(rules.used_rules) + 1
        self._pruning = pruning
        self.n_induced_rules_ = len(rules) + 1 if pruning is None else int(pruning["n_induced_rules"])
        self.pruning_rules_ = np.asarray([] if pruning is None else pruning["rules"], np.int64)
        self.pruning_loss_ = np.asarray([] if pruning is None else pruning["loss"], np.float64)
        if rules.feature_names is not None:
            self.feature_names_in_ = np.asarray(rules.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    # --------------------------------------------------------------------------------------- prediction

    def decision_function(self, X: Any) -> np.ndarray:
        """Raw scores (examples x labels): the default rule's plus those of every covering rule."""
        self._check_fitted()
        check_feature_names(getattr(self, "feature_names_in_", None), X, type(self).__name__)
        Xa: Features = as_features(X, allow_empty=True)
        if Xa.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xa.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        return self.rules_.decision_function(Xa)

    def predict(self, X: Any) -> np.ndarray:
        """0/1 labels (int8) by ``binary_predictor`` (:mod:`mdhom.rules.predictors`): output-wise, a label where its
        score is positive; example-wise, the closest training label vector."""
        S = self.decision_function(X)
        if self.rules_.label_vectors is not None:
            return self.rules_.label_vectors.closest(S, make_loss(self._params["loss"]))
        return (S > 0.0).astype(np.int8)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Label-wise probabilities, the logistic function of the scores (the logistic losses only)."""
        loss = make_loss(self._params["loss"]) if hasattr(self, "_params") else None
        if loss is not None and not loss.has_probabilities:
            raise ValueError(f"loss={self._params['loss']!r} has no probability model (as in mlrl-boomer); use "
                             "decision_function or a logistic loss")
        return make_loss("logistic_labelwise").probabilities(self.decision_function(X))

    # --------------------------------------------------------------------------------------- model files

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the fitted model as versioned JSON (format in :mod:`mdhom.rules.model`), atomically."""
        self._check_fitted()
        from mdhom import __version__

        params = {k: getattr(v, "key", v) for k, v in self._params.items()
                  if k not in O.WRITTEN_WHEN_SET or v != O.DEFAULTS[k]}
        for name in ("feature_binning", "label_binning", "holdout"):
            if isinstance(params.get(name), tuple):
                params[name] = list(params[name])
        doc = {"format": FORMAT, "version": self.rules_.version, "mdhom_version": __version__,
               "estimator": type(self).__name__, "params": params, "loss": self._params["loss"],
               "head_type": self.head_type_, "n_features": self.n_features_in_, "n_labels": self.rules_.n_labels,
               **self.rules_.to_document()}
        if self._pruning is not None:
            doc["global_pruning_result"] = self._pruning
        save_json(path, doc)

    def load_model(self, path: str | os.PathLike) -> RuleBoostClassifier:
        """Restore a file written by ``save_model`` into this estimator (parameters and rules); returns self."""
        where = os.fspath(path)
        doc = read_json(path)
        if doc.get("estimator") != type(self).__name__:
            raise ValueError(f"{where}: holds a {doc.get('estimator')!r} model, not a {type(self).__name__}")
        try:
            given = {k: v for k, v in doc["params"].items() if k in O.TABLE.by_name}
            if doc["version"] == 1:  # before the example-wise predictor every model predicted output-wise
                given["binary_predictor"] = "output-wise"
            given.setdefault("label_binning", "none")  # files from before the option: no label binning
            params = O.TABLE.validate(given)
            n_features, n_labels = int(doc["n_features"]), int(doc["n_labels"])
            head = O.resolved_head(params.get("loss", O.DEFAULTS["loss"]), doc["head_type"])
            pruning = _pruning_record(doc.get("global_pruning_result"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: damaged mdhom rule model ({exc})") from None
        rules = RuleList.from_document(doc, n_features, where)
        if rules.n_labels != n_labels:
            raise ValueError(f"{where}: damaged mdhom rule model (default rule has {rules.n_labels} scores, "
                             f"n_labels is {n_labels})")
        example_wise = resolved_predictor(params.get("binary_predictor", "auto"),
                                          make_loss(params.get("loss", O.DEFAULTS["loss"]))) == "example-wise"
        if example_wise != (rules.label_vectors is not None):
            raise ValueError(f"{where}: damaged mdhom rule model (the example-wise predictor needs label_vectors, "
                             "and only it has them)")
        self.set_params(**{**O.DEFAULTS, **params})
        self._set_fitted(rules, {**O.DEFAULTS, **params}, head, n_features, pruning)
        return self


def _pruning_record(record: Any) -> dict[str, Any] | None:
    """A model file's ``global_pruning_result``, checked (None where the file has none)."""
    if record is None:
        return None
    sizes, losses, induced = record["rules"], record["loss"], record["n_induced_rules"]
    if not (isinstance(sizes, list) and isinstance(losses, list) and len(sizes) == len(losses)
            and all(isinstance(k, int) and not isinstance(k, bool) for k in sizes)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in losses)
            and isinstance(induced, int) and not isinstance(induced, bool) and induced >= 1):
        raise ValueError("global_pruning_result must hold n_induced_rules and equally long lists of rules and loss")
    return {"n_induced_rules": induced, "rules": list(sizes), "loss": [float(v) for v in losses]}
