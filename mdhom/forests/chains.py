"""ClassifierChainEnsemble: an ensemble of classifier chains (ECC, Read et al. 2009/2011) with a random forest per
chain position, the forests of every chain grown together on the device.

>>> from mdhom import ClassifierChainEnsemble
>>> ecc = ClassifierChainEnsemble(n_chains=64, n_estimators=32, random_state=0).fit(X, Y)   # Y: (n, L) 0/1
>>> ecc.predict_proba(X_test); ecc.predict(X_test); ecc.save_model("ecc.json")

Chain ``c`` predicts its labels in its order ``orders_[c]``; at position ``p`` its forest predicts label
``orders_[c, p]`` from X and the chain's earlier labels (the true ones in training, as scikit-learn's
ClassifierChain; its own 0/1 predictions at prediction time). Training goes position by position: the forests of
all chains at a position are one batch of ``n_chains x n_estimators`` trees for the forest grower
(:func:`mdhom.forests.grower.grow`), every tree with its own target column and its own features (X plus its
chain's earlier labels: the label columns of X+Y binned once, masked per tree; ``max_features`` is drawn among
a tree's own features). Prediction walks every chain's forest at a position in one md_hom launch
(:mod:`mdhom.forests.chain_kernels`), or in numpy.

Differences from scikit-learn's ClassifierChain(RandomForestClassifier): the forests' (binned thresholds, NaN
right, mdhom's random streams; :mod:`mdhom.forests.estimators`), and a label constant in training predicts its
one value (probability 0 or 1) where scikit-learn's chain fails.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mdhom.forests import chain_params as CP
from mdhom.forests import grower as G
from mdhom.forests import histogram as H
from mdhom.forests import params as FP
from mdhom.forests.chain_model import FORMAT, VERSION, ChainForests
from mdhom.forests.estimators import BIN_SAMPLE, make_backend
from mdhom.forests.model import Forest
from mdhom.learn import model_files
from mdhom.learn.binning import BinMapper, sample_rows
from mdhom.learn.params import OptionParams
from mdhom.learn.validation import as_matrix, check_feature_names, feature_names, is_sparse, not_fitted_error

BATCH_BYTES = 1 << 30  # device bytes of per-(tree, row) state (weights, orders, slots) per batch of chains
# rows x trees from which prediction runs on the fit's OpenCL device: a chain position is one launch over every
# chain's forest, where numpy walks position by position in Python (measured on PoCL, emotions-sized: the device
# from about 200 rows x 3000 trees)
DEVICE_PREDICT_MIN = 1 << 18


class ClassifierChainEnsemble(OptionParams):
    """An ensemble of classifier chains with a random forest per chain position (module docstring).

    ``Y``: (n, L) 0/1 labels. ``predict_proba`` gives (n, L): the chains' mean probability of each label
    (``voting="label"``: the share of chains predicting it); ``predict`` the labels whose vote reaches
    ``threshold``.

    Fitted attributes: ``orders_`` ((n_chains, L) label orders), ``n_labels_``, ``n_features_in_``,
    ``feature_names_in_``, ``device_`` (the device key, or "numpy").

    {params}
    """

    _options = CP.TABLE
    _estimator_type = "classifier"

    def __init__(
        self,
        n_chains: int = CP.DEFAULTS["n_chains"],
        orders: Any = CP.DEFAULTS["orders"],
        threshold: float = CP.DEFAULTS["threshold"],
        voting: str = CP.DEFAULTS["voting"],
        n_estimators: int = CP.DEFAULTS["n_estimators"],
        criterion: str = CP.DEFAULTS["criterion"],
        max_depth: int | None = CP.DEFAULTS["max_depth"],
        min_samples_split: int | float = CP.DEFAULTS["min_samples_split"],
        min_samples_leaf: int | float = CP.DEFAULTS["min_samples_leaf"],
        max_features: Any = CP.DEFAULTS["max_features"],
        bootstrap: bool = CP.DEFAULTS["bootstrap"],
        max_samples: int | float | None = CP.DEFAULTS["max_samples"],
        max_bin: int = CP.DEFAULTS["max_bin"],
        random_state: Any = CP.DEFAULTS["random_state"],
        device: Any = CP.DEFAULTS["device"],
        n_jobs: int | None = CP.DEFAULTS["n_jobs"],
    ) -> None:
        self.n_chains = n_chains
        self.orders = orders
        self.threshold = threshold
        self.voting = voting
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

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "_model")

    def _check_fitted(self) -> None:
        if not hasattr(self, "_model"):
            raise not_fitted_error(type(self).__name__)

    def _params(self) -> dict[str, Any]:
        p = CP.validate(self.get_params())
        if p["criterion"] not in ("gini", "entropy"):
            raise ValueError(f"criterion {p['criterion']!r} is not one of ClassifierChainEnsemble's: gini, entropy")
        if not p["bootstrap"] and p["max_samples"] is not None:
            raise ValueError("max_samples cannot be set if bootstrap=False (every row is used once)")
        return p

    # ------------------------------------------------------------------------------------------ fitting
    @staticmethod
    def _labels(Y: Any, n: int) -> np.ndarray:
        if Y is None:
            raise ValueError("ClassifierChainEnsemble requires Y, an (n, L) array of 0/1 labels")
        if hasattr(Y, "toarray") and hasattr(Y, "tocsr"):
            Y = Y.toarray()
        Y = np.asarray(Y.to_numpy() if hasattr(Y, "to_numpy") else Y)
        if Y.ndim != 2 or Y.shape[1] < 1:
            raise ValueError(f"Y must be 2-D (n_samples, n_labels) of 0/1 labels, got shape {Y.shape}")
        if Y.shape[0] != n:
            raise ValueError(f"X has {n} rows but Y has {Y.shape[0]}")
        if Y.dtype.kind not in "biuf" or not np.all((Y == 0) | (Y == 1)):
            raise ValueError("Y must hold only 0 and 1 (one column per label)")
        return Y.astype(np.int64)

    def _chain_orders(self, p: dict[str, Any], n_labels: int, rng: np.random.Generator) -> np.ndarray:
        c = p["n_chains"]
        if p["orders"] is None:
            return np.stack([rng.permutation(n_labels) for _ in range(c)]).astype(np.int64)
        o = np.asarray(p["orders"], np.int64)
        if o.shape[-1] != n_labels:
            raise ValueError(f"orders have {o.shape[-1]} labels, Y has {n_labels}")
        if o.ndim == 1:
            return np.tile(o, (c, 1))
        if o.shape[0] != c:
            raise ValueError(f"orders give {o.shape[0]} chains, n_chains is {c}")
        return o

    def fit(self, X: Any, Y: Any) -> ClassifierChainEnsemble:
        """Grow every chain's forests on ``X`` (array or data frame; NaN is missing) and ``Y`` (n, L) 0/1."""
        p = self._params()
        if is_sparse(X):
            raise ValueError("ClassifierChainEnsemble does not take scipy.sparse X yet; pass X.toarray()")
        Xa = as_matrix(X, keep_float32=True)  # float32 rows binned as they are: the float64 copy's bins
        n, n_x = Xa.shape
        Yl = self._labels(Y, n)
        n_lab = Yl.shape[1]
        rng = np.random.default_rng(p["random_state"])
        orders = self._chain_orders(p, n_lab, rng)
        XY = np.hstack([Xa, Yl.astype(Xa.dtype)])  # 0/1 labels: exact in float32 too
        mapper = BinMapper(p["max_bin"]).fit(XY, rows=sample_rows(n, BIN_SAMPLE, p["random_state"]))
        bins = mapper.transform(XY)
        # each label's two class lanes: row r's statistics are stat[r, 2j:2j+2] for label j
        stat = np.zeros((n, 2 * n_lab), np.int32)
        stat[np.arange(n)[:, None], 2 * np.arange(n_lab)[None, :] + Yl] = 1
        c, e = p["n_chains"], p["n_estimators"]
        n_draw = self._n_draw(p, n)
        leaf = FP.resolve_count(p["min_samples_leaf"], n)
        split = max(FP.resolve_count(p["min_samples_split"], n), 2 * leaf)
        backend = make_backend(p["device"], p["n_jobs"])
        group = max(1, BATCH_BYTES // max(1, e * n * 28))  # chains per batch
        # label j's column is feature n_x + j; tree (c, e)'s mask: X and its chain's earlier labels
        rank = np.argsort(orders, axis=1)  # position of each label in each chain
        parts: list[tuple[G.GrownForest, np.ndarray]] = []
        for pos in range(n_lab):
            bag = G.Bag(rng.integers(0, 2**64, c * e, dtype=np.uint64, endpoint=False), n, n_draw, p["bootstrap"],
                        np.ones(n, np.int32))
            seeds = rng.integers(0, 2**32, c * e, dtype=np.uint32)
            spec = G.GrowSpec((2,), p["criterion"], p["max_depth"], split, leaf,
                              FP.resolve_max_features(p["max_features"], n_x + pos))
            mask = np.ones((c, n_x + n_lab), np.uint8)
            mask[:, n_x:] = rank < pos
            for lo in range(0, c, group):
                hi = min(c, lo + group)
                trees = slice(lo * e, hi * e)
                per_tree = H.PerTree(np.repeat(2 * orders[lo:hi, pos], e).astype(np.int32),
                                     np.repeat(mask[lo:hi], e, axis=0), 2)
                grown = G.grow(backend, bins, mapper.n_bins, stat, bag.take(trees), seeds[trees], spec, per_tree)
                parts.append(grown)
        self._model = ChainForests(n_x, orders, e, _assemble(parts, mapper, n_x + n_lab))
        self._fit_params = p
        self.orders_ = orders.copy()
        self.n_labels_ = n_lab
        self.n_features_in_ = n_x
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

    # ------------------------------------------------------------------------------------------ prediction
    def _votes(self, X: Any) -> np.ndarray:
        self._check_fitted()
        check_feature_names(getattr(self, "feature_names_in_", None), X, type(self).__name__)
        if is_sparse(X):
            raise ValueError("ClassifierChainEnsemble does not take scipy.sparse X yet; pass X.toarray()")
        # float32 rows stay so: the device walk takes them to float64 in its blocks of rows, the numpy walk whole
        Xa = as_matrix(X, allow_empty=True, keep_float32=True)
        if Xa.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xa.shape[1]} features, but ClassifierChainEnsemble is expecting "
                             f"{self.n_features_in_} features as input")
        voting = CP.validate({"voting": self.voting})["voting"]
        predictor = self._device_predictor(Xa.shape[0])
        if predictor is None:
            return ChainForests.vote(self._model.chain_probabilities(np.asarray(Xa, np.float64)), voting)
        return predictor.vote(Xa, voting)

    def _device_predictor(self, n_rows: int) -> Any:
        """The predictor on the fit's OpenCL device where rows x trees pay for it (None: the numpy walk)."""
        device = getattr(self, "_fit_params", {}).get("device")
        if device == "numpy" or n_rows * self._model.forest.n_trees < DEVICE_PREDICT_MIN:
            return None
        cached = self.__dict__.get("_predictor")
        if cached is not None and cached[0] is self._model:
            return cached[1]
        from mdhom.forests.chain_predictor import ChainPredictor
        from mdhom.trees.estimators import limit_threads

        try:
            predictor = ChainPredictor(limit_threads(device if device is not None else "auto",
                                                     self._fit_params.get("n_jobs")), self._model)
        except (RuntimeError, ValueError):
            return None  # no OpenCL device here (a model trained elsewhere): the numpy walk
        self._predictor = (self._model, predictor)
        return predictor

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, L): each label's vote, the chains' mean probability (or share of 0/1 votes, ``voting="label"``)."""
        return self._votes(X)

    def predict(self, X: Any) -> np.ndarray:
        """(n, L) 0/1: the labels whose vote reaches ``threshold``."""
        threshold = CP.validate({"threshold": self.threshold})["threshold"]
        return (self._votes(X) >= threshold).astype(np.int64)

    def score(self, X: Any, Y: Any) -> float:
        """Subset accuracy (every label of a row right), as scikit-learn's ClassifierMixin on multi-label Y."""
        pred = self.predict(X)
        return float(np.mean(np.all(pred == self._labels(Y, pred.shape[0]), axis=1)))

    # ------------------------------------------------------------------------------------------ model files
    def save_model(self, path: str | os.PathLike) -> None:
        """Versioned JSON, written atomically (:mod:`mdhom.learn.model_files`); the device options are left out:
        every device writes the same file for the same seed."""
        self._check_fitted()
        from mdhom import __version__

        params = {k: v for k, v in self._fit_params.items() if k not in ("device", "n_jobs")}
        doc = {"format": FORMAT, "version": VERSION, "mdhom_version": __version__, "estimator": type(self).__name__,
               "params": params, "feature_names": None if getattr(self, "feature_names_in_", None) is None
               else [str(s) for s in self.feature_names_in_], "chains": self._model.to_json()}
        model_files.save_json(path, doc)

    def load_model(self, path: str | os.PathLike) -> ClassifierChainEnsemble:
        """Restore a file written by ``save_model`` into this estimator; returns self."""
        doc = model_files.read_json(path, FORMAT, VERSION, "an mdhom classifier-chain ensemble")
        try:
            if doc.get("estimator") != type(self).__name__:
                raise ValueError(f"unknown estimator {doc.get('estimator')!r}")
            params = CP.validate({k: v for k, v in doc["params"].items() if k in CP.BY_NAME})
            self.set_params(**params)
            self._fit_params = {**self._params(), **params}
            model = ChainForests.from_json(doc["chains"])
            self._model = model
            self.orders_ = model.orders.copy()
            self.n_labels_ = model.n_labels
            self.n_features_in_ = model.n_features
            if doc.get("feature_names") is not None:
                self.feature_names_in_ = np.asarray(doc["feature_names"], dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
            self.__dict__.pop("_model", None)
            raise ValueError(f"{os.fspath(path)}: damaged mdhom classifier-chain model file "
                             f"({type(exc).__name__}: {exc})") from None
        return self


ClassifierChainEnsemble.__doc__ = ClassifierChainEnsemble.__doc__.replace(
    "{params}", CP.docstring().replace("\n", "\n    "))


def _assemble(parts: list[G.GrownForest], mapper: BinMapper, n_features: int) -> Forest:
    """One flat forest of the grown batches, in order, with raw thresholds and each leaf's probability of 1."""
    sizes = np.concatenate([np.diff(g.offsets) for g in parts])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    feature = np.concatenate([g.feature for g in parts]).astype(np.int32)
    split_bin = np.concatenate([g.split_bin for g in parts])
    left = np.concatenate([g.left for g in parts]).astype(np.int32)
    totals = np.concatenate([g.totals for g in parts])
    width = max(e.size for e in mapper.edges) + 1
    edges = np.full((len(mapper.edges), width), np.inf)
    for j, e in enumerate(mapper.edges):
        edges[j, :e.size] = e
    inner = feature >= 0
    threshold = np.zeros(feature.size)  # leaves: 0, never read
    threshold[inner] = edges[feature[inner], np.minimum(split_bin[inner], width - 1)]
    w = totals[:, 2].astype(np.float64)  # lanes: class 0, class 1, weight, rows
    value = np.divide(totals[:, 1].astype(np.float64), w, out=np.zeros(w.size), where=w > 0)
    return Forest(n_features, offsets, feature, threshold, left, value[:, None], np.zeros(n_features))
