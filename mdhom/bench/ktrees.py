"""``mdhom bench ktrees``: a multiclass round's K trees grown together against the same K trees grown one after
another, on one K-class workload in one process.

Systems (each fits the same rows with the same parameters; program builds come from a one-round warm-up fit and
are excluded from the timings):

* ``together``: ``multi_strategy="one_output_per_tree"``, the round's K trees as one batch of slots (one launch of
  each level kernel for all K trees, one read-back per level), whatever the device's default batch (reported as
  ``default_batch``: :func:`mdhom.trees.ktrees_opencl.default_batch`);
* ``one-by-one``: the same mode through the same kernels with batches of one tree (``_ktree_batch = 1``): K times
  the launches and read-backs; its model must be the same bytes as ``together``'s (reported as ``same_model``);
* ``multi-output``: ``multi_strategy="multi_output_tree"`` (one tree per round with K-valued leaves), for reference;
* ``xgboost-cpu``: XGBoost's ``hist`` on the CPU with its default ``multi_strategy`` ("one_output_per_tree"), where
  installed.

The workload is ``load_digits`` (``--digits``: 1797 x 64, 10 classes, a fixed split) or a synthetic K-class set of
Higgs-shaped features (:func:`make_multiclass`).
"""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mdhom.bench.trees import TEST_STREAM, TRAIN_STREAM, machine_info, make_higgs_like, versions

SYSTEMS = ("together", "one-by-one", "multi-output", "xgboost-cpu")


@dataclass(frozen=True)
class KTreesConfig:
    rows: int = 1_000_000
    test_rows: int = 100_000
    features: int = 28
    classes: int = 10
    rounds: int = 20
    max_depth: int = 6
    bins: int = 63
    learning_rate: float = 0.3
    device: str | None = None
    precision: str | None = None
    threads: int | None = None
    seed: int = 0
    digits: bool = False  # sklearn's load_digits instead of the synthetic rows
    systems: tuple[str, ...] = SYSTEMS

    @classmethod
    def quick_config(cls, **overrides: Any) -> KTreesConfig:
        base = cls(rows=3000, test_rows=1000, classes=4, rounds=3, max_depth=3)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def make_multiclass(rows: int, features: int, classes: int, seed: int = 0,
                    stream: int = TRAIN_STREAM) -> tuple[np.ndarray, np.ndarray]:
    """Higgs-shaped features (:func:`mdhom.bench.trees.make_higgs_like`) and a K-class label: the argmax of K
    logits from a fixed random one-hidden-layer network of the standardised features, plus Gumbel noise (so the
    classes are learnable, nonlinear and not separable). Seeded; train and test rows come from different streams."""
    X, _ = make_higgs_like(rows, features, seed, 0.0, stream)
    net = np.random.default_rng([seed, 7, features, classes])
    a = net.normal(size=(features, 16)) / np.sqrt(features)
    b = net.normal(size=(16, classes)) * 2.0
    mu, sd = np.array([1.0] * features), np.array([1.0] * features)
    if rows:
        ref, _ = make_higgs_like(min(rows, 1 << 15), features, seed, 0.0, TRAIN_STREAM)
        mu, sd = ref.mean(axis=0), ref.std(axis=0) + 1e-9
    logits = np.tanh((X - mu) / sd @ a) @ b
    noise = np.random.default_rng([seed, stream, classes]).gumbel(size=logits.shape) * 0.5
    return X, np.argmax(logits + noise, axis=1).astype(np.int64)


def _workload(cfg: KTreesConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    if cfg.digits:
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        perm = np.random.default_rng(cfg.seed).permutation(len(y))
        cut = int(0.75 * len(y))
        return X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]], "load_digits (75/25 split)"
    X, y = make_multiclass(cfg.rows, cfg.features, cfg.classes, cfg.seed)
    Xt, yt = make_multiclass(cfg.test_rows, cfg.features, cfg.classes, cfg.seed, TEST_STREAM)
    return X, y, Xt, yt, f"synthetic {cfg.classes}-class (mdhom.bench.ktrees.make_multiclass)"


def _mdhom(name: str, cfg: KTreesConfig, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray,
           n_jobs: int | None) -> dict[str, Any]:
    from mdhom import TreeBoostClassifier

    strategy = "multi_output_tree" if name == "multi-output" else "one_output_per_tree"
    classes = len(np.unique(y))

    def make(rounds: int) -> TreeBoostClassifier:
        est = TreeBoostClassifier(n_estimators=rounds, max_depth=cfg.max_depth, max_bin=cfg.bins,
                                  learning_rate=cfg.learning_rate, multi_strategy=strategy, device=cfg.device,
                                  precision=cfg.precision, n_jobs=n_jobs, random_state=cfg.seed)
        est._ktree_batch = 1 if name == "one-by-one" else classes  # together: the whole round, whatever the device
        return est

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned devices say so once per fit
        make(1).fit(X[:2000], y[:2000])  # builds (and the pyopencl cache) before the timed fit
        est = make(cfg.rounds)
        t0 = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - t0
    rounds = np.asarray(est.round_times_)
    proba = est.predict_proba(Xt)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "m.json")
        est.save_model(path)
        doc = json.loads(path.read_text())
    doc["params"].pop("device", None)
    return {"system": name, "status": "ok", "fit_s": fit_s, "build_s": float(est.build_seconds_),
            "round_median_s": float(np.median(rounds[1:] if rounds.size > 1 else rounds)),
            "trees": len(est._ensemble.trees), "precision": est.precision_,
            "test_accuracy": float((est.classes_[np.argmax(proba, axis=1)] == yt).mean()),
            "test_mlogloss": _mlogloss(yt, proba, est.classes_), "_model": json.dumps(doc["trees"])}


def _xgboost(cfg: KTreesConfig, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray,
             threads: int | None) -> dict[str, Any]:
    try:
        import xgboost as xgb
    except ImportError:
        return {"system": "xgboost-cpu", "status": "unavailable", "reason": "xgboost is not installed"}
    marks: list[float] = []

    class Timer(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            marks.append(time.perf_counter())
            return False

    est = xgb.XGBClassifier(n_estimators=cfg.rounds, max_depth=cfg.max_depth, max_bin=cfg.bins,
                            learning_rate=cfg.learning_rate, tree_method="hist", n_jobs=threads,
                            random_state=cfg.seed, multi_strategy="one_output_per_tree", callbacks=[Timer()])
    t0 = time.perf_counter()
    est.fit(X, y)
    fit_s = time.perf_counter() - t0
    rounds = np.diff(np.concatenate([[t0], marks]))
    proba = est.predict_proba(Xt)
    return {"system": "xgboost-cpu", "status": "ok", "fit_s": fit_s, "build_s": 0.0,
            "round_median_s": float(np.median(rounds[1:] if rounds.size > 1 else rounds)),
            "trees": cfg.rounds * proba.shape[1], "test_accuracy": float((np.argmax(proba, axis=1) == yt).mean()),
            "test_mlogloss": _mlogloss(yt, proba, np.arange(proba.shape[1]))}


def _mlogloss(y: np.ndarray, proba: np.ndarray, classes: np.ndarray) -> float:
    idx = np.searchsorted(classes, y)
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), idx], 1e-15, 1.0))))


def run_ktrees(cfg: KTreesConfig, log: Any = print) -> dict[str, Any]:
    """Fit every selected system on the workload; the report (JSON-ready) with ratios to ``together``."""
    unknown = sorted(set(cfg.systems) - set(SYSTEMS))
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose among {', '.join(SYSTEMS)}")
    X, y, Xt, yt, kind = _workload(cfg)
    log(f"workload: {kind}, {X.shape[0]} x {X.shape[1]} train, {Xt.shape[0]} test, {len(np.unique(y))} classes")
    results = []
    for name in cfg.systems:
        log(f"{name}: running")
        try:
            if name == "xgboost-cpu":
                result = _xgboost(cfg, X, y, Xt, yt, cfg.threads)
            else:
                result = _mdhom(name, cfg, X, y, Xt, yt, cfg.threads)
        except Exception as exc:  # a failing system is a recorded failure, not the end of the run
            result = {"system": name, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        results.append(result)
    by = {r["system"]: r for r in results}
    default = None
    if cfg.device != "numpy":
        from mdhom.devices import get_device
        from mdhom.trees.ktrees_opencl import default_batch

        dev = get_device(cfg.device if cfg.device is not None else "auto")
        precision = by.get("together", {}).get("precision", "double")
        default = default_batch(dev, X.shape[0], len(np.unique(y)), precision == "quantized")
    base = by.get("together", {}).get("round_median_s")
    for r in results:
        if r.get("status") == "ok" and base:
            r["ratio_to_together"] = r["round_median_s"] / base
    models = {name: by[name].pop("_model", None) for name in by}
    if by.get("together", {}).get("status") == "ok" and by.get("one-by-one", {}).get("status") == "ok":
        by["one-by-one"]["same_model"] = models["together"] == models["one-by-one"]
    return {"benchmark": "ktrees", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "parameters": asdict(cfg),
            "workload": {"kind": kind, "train_rows": int(X.shape[0]), "test_rows": int(Xt.shape[0]),
                         "features": int(X.shape[1]), "classes": int(len(np.unique(y))), "default_batch": default},
            "machine": machine_info(), "versions": versions(),
            "ratio_note": "ratio_to_together = system's median seconds per round / together's", "results": results}


def format_table(report: dict[str, Any]) -> str:
    w = report["workload"]
    lines = [f"{w['kind']}: {w['train_rows']} x {w['features']} train, {w['test_rows']} test, {w['classes']} classes, "
             f"{report['parameters']['rounds']} rounds, depth {report['parameters']['max_depth']}; the device's "
             f"default batch: {w.get('default_batch') or 'all'} tree(s)",
             f"{'system':14s} {'s/round':>9s} {'ratio':>7s} {'fit s':>8s} {'build s':>8s} {'accuracy':>9s} "
             f"{'mlogloss':>9s}  note"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"{r['system']:14s} {r['status']}: {r.get('reason', '')}")
            continue
        note = ""
        if "same_model" in r:
            note = "same model as together" if r["same_model"] else "MODEL DIFFERS from together"
        ratio = r.get("ratio_to_together")
        ratio_text = "" if ratio is None else f"{ratio:.2f}"
        lines.append(f"{r['system']:14s} {r['round_median_s']:9.4f} {ratio_text:>7s} {r['fit_s']:8.2f} "
                     f"{r['build_s']:8.2f} {r['test_accuracy']:9.4f} {r['test_mlogloss']:9.4f}  {note}")
    return "\n".join(lines)
