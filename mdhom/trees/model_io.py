"""The tree estimators' model files: ``save_model`` / ``load_model`` as one mixin of both estimators (the format is
:mod:`mdhom.trees.model`'s), so the estimator module holds the fitting and predicting only."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mdhom.learn.metrics import spec_names
from mdhom.learn.model_files import decode_classes, encode_classes
from mdhom.trees import params as P
from mdhom.trees.model import FORMAT, VERSION, Ensemble, Tree, check_document, read_json, save_json


class TreeModelFiles:
    """Versioned JSON model files of a fitted tree estimator (the estimator provides ``_check_fitted``,
    ``_set_fitted``, ``set_params`` and its fitted attributes)."""

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the fitted model as versioned JSON (format in :mod:`mdhom.trees.model`), atomically."""
        self._check_fitted()
        from mdhom import __version__

        # the parameters the model was fitted with (a random_state generator saved as the seed drawn from it)
        params = {k: getattr(v, "key", v) for k, v in self._params.items()}
        params["eval_metric"] = spec_names(params["eval_metric"])
        ens = self._ensemble
        doc = {
            "format": FORMAT, "version": VERSION, "mdhom_version": __version__, "estimator": type(self).__name__,
            "objective": self.objective_, "params": params, "n_features": ens.n_features,
            "n_outputs": ens.n_outputs, "base_score": ens.base_score.tolist(),
            "classes": encode_classes(getattr(self, "classes_", None)),
            "target": self._target_info(),
            "feature_names": None if getattr(self, "feature_names_in_", None) is None
            else [str(s) for s in self.feature_names_in_],
            "best_iteration": int(self.best_iteration_),
            "precision": getattr(self, "precision_", None),
            "bin_edges": [e.tolist() for e in self._bin_edges],
            "trees": [t.to_json() for t in ens.trees],
        }
        if ens.trees and ens.trees[0].output is not None:
            doc["trees_per_round"] = ens.n_outputs
        if ens.categories is not None:
            doc["categories"] = [None if c is None else [int(x) for x in c] for c in ens.categories]
        labels = getattr(self, "_category_labels", None)
        if labels is not None:
            doc["category_labels"] = [None if c is None else encode_classes(c) for c in labels]
        save_json(path, doc)

    def load_model(self, path: str | os.PathLike) -> Any:
        """Restore a file written by ``save_model`` into this estimator (XGBoost's scikit-learn method): the
        trees, the fitted attributes and the parameters the model was fitted with; returns self. A file of
        the other estimator kind is refused (``mdhom.load_model`` picks the kind from the file)."""
        doc = read_json(path)
        kind = doc.get("estimator")
        if kind != type(self).__name__:
            raise ValueError(f"{os.fspath(path)} holds a {kind} model, not a {type(self).__name__}; load it with "
                             f"{kind}().load_model or mdhom.load_model")
        return self._restore(doc, os.fspath(path))

    def _restore(self, doc: dict[str, Any], where: str) -> Any:
        try:
            check_document(doc)
            params = P.validate({k: v for k, v in doc["params"].items() if k in P.BY_NAME})
            self.set_params(**{**P.DEFAULTS, **params})
            n_features, n_outputs = int(doc["n_features"]), int(doc["n_outputs"])
            trees = [Tree.from_json(t, n_outputs, n_features) for t in doc["trees"]]
            base = np.asarray(doc["base_score"], np.float64).reshape(n_outputs)
            cats = doc.get("categories")
            if cats is not None:
                cats = [None if c is None else np.asarray(c, np.int64).reshape(-1) for c in cats]
            ensemble = Ensemble(n_features, n_outputs, base, trees, categories=cats)
            ensemble.check_categories()
            labels = doc.get("category_labels")
            self._category_labels = None if labels is None else [None if c is None else decode_classes(c)
                                                                  for c in labels]
            self.__dict__.pop("_forest", None)
            edges = [np.asarray(e, np.float64) for e in doc["bin_edges"]]
            self._restore_target(doc["target"], decode_classes(doc["classes"]))
            self._set_fitted(ensemble, doc["objective"], {**P.DEFAULTS, **params}, edges)
            if doc.get("feature_names") is not None:
                self.feature_names_in_ = np.asarray(doc["feature_names"], dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            self.best_iteration_ = int(doc["best_iteration"])
            self.precision_ = doc.get("precision") or params.get("precision") or "double"  # older files: double
            self.evals_result_ = {}
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
            raise ValueError(f"{where}: damaged mdhom model file ({type(exc).__name__}: {exc})") from None
        return self

    def _target_info(self) -> dict[str, Any]:
        return {}

    def _restore_target(self, info: dict[str, Any], classes: np.ndarray | None) -> None:
        pass
