"""``mdhom bench forests``: random forests of mdhom against scikit-learn (all cores) and, where installed, XGBoost's
random-forest mode, on one Higgs-shaped workload in one process: fit seconds (program builds excluded and
reported apart), prediction seconds on the test rows, and test AUC.

Prediction is timed twice per system: ``first_predict_s`` is the first call (mdhom: the predictor's program build,
which the warm-up fit does not make, and its tables' upload; a fresh machine compiles the program, a warm one
reads pyopencl's cache, so this figure moves with the machine's history), ``predict_s`` a second call on the same
rows (builds excluded, as for the fit). mdhom's row says which walk served it (``predict_path``: the OpenCL
device's, or numpy's below the rows x trees threshold) and what the fit cost in launches and blocking reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from mdhom.bench.trees import TEST_STREAM, machine_info, make_higgs_like, roc_auc, versions

ANCHORS = ("sklearn", "xgboost-cpu", "xgboost-cuda")


@dataclass(frozen=True)
class ForestsConfig:
    rows: int = 1_000_000
    test_rows: int = 100_000
    features: int = 28
    trees: int = 500
    max_depth: int = 10  # 0: no limit
    bins: int = 255
    device: str | None = None
    threads: int | None = None
    seed: int = 0
    anchors: tuple[str, ...] = ("sklearn",)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def quick_config(cls, **overrides: Any) -> ForestsConfig:
        base = cls(rows=20_000, test_rows=5_000, trees=20, max_depth=8)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def _anchor(name: str, cfg: ForestsConfig, threads: int) -> Any:
    depth = cfg.max_depth or None
    if name == "sklearn":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=cfg.trees, max_depth=depth, n_jobs=threads, random_state=cfg.seed)
    import xgboost as xgb

    # XGBoost's random forest: one round of num_parallel_tree trees, bootstrap-like row sampling, sqrt features
    # per node, the bins mdhom uses
    return xgb.XGBRFClassifier(n_estimators=cfg.trees, max_depth=cfg.max_depth or 0, subsample=0.632,
                               colsample_bynode=max(1, int(np.sqrt(cfg.features))) / cfg.features,
                               max_bin=cfg.bins, tree_method="hist", n_jobs=threads, random_state=cfg.seed,
                               device="cuda" if name == "xgboost-cuda" else "cpu")


@contextlib.contextmanager
def _backends() -> Iterator[list[Any]]:
    """The forest backends made while inside (the estimator keeps none), for their launch and sync counts."""
    from mdhom.forests import estimators

    made: list[Any] = []
    original = estimators.make_backend

    def recording(*args: Any) -> Any:
        backend = original(*args)
        made.append(backend)
        return backend

    estimators.make_backend = recording
    try:
        yield made
    finally:
        estimators.make_backend = original


def _mdhom_facts(est: Any, n_test: int, backends: list[Any]) -> dict[str, Any]:
    """Which walk predicted, and the fit's kernel launches and blocking reads (a regression in either shows in
    the report, not only in the seconds)."""
    facts: dict[str, Any] = {"predict_path": "device" if est._device_predictor(n_test) is not None else "numpy"}
    ws = getattr(backends[-1], "ws", None) if backends else None
    if ws is not None:
        facts.update(launches=ws.launches, syncs=ws.syncs)
    return facts


def run_forests(cfg: ForestsConfig, log: Any = print) -> dict[str, Any]:
    import mdhom

    threads = cfg.threads or len(os.sched_getaffinity(0))
    X, y = make_higgs_like(cfg.rows, cfg.features, cfg.seed, threads=threads)
    Xt, yt = make_higgs_like(cfg.test_rows, cfg.features, cfg.seed, stream=TEST_STREAM, threads=threads)
    X, Xt = X.astype(np.float64), Xt.astype(np.float64)
    results = []

    def timed(name: str, est: Any, warm: Any = None) -> None:
        try:
            build = 0.0
            if warm is not None:  # a two-tree fit first: the program builds, reported apart
                t0 = time.perf_counter()
                warm.fit(X[:2000], y[:2000])
                build = time.perf_counter() - t0
            with _backends() as backends:
                t0 = time.perf_counter()
                est.fit(X, y)
                fit = time.perf_counter() - t0
            t0 = time.perf_counter()
            p = est.predict_proba(Xt)[:, 1]
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            p2 = est.predict_proba(Xt)[:, 1]
            pred = time.perf_counter() - t0
            if name == "mdhom" and not np.array_equal(p, p2):  # scikit-learn's threads add in any order
                raise RuntimeError("a second prediction of the same rows differs from the first")
            res = {"system": name, "status": "ok", "fit_s": fit, "predict_s": pred, "first_predict_s": first,
                   "warmup_s": build, "auc": roc_auc(yt, p)}
            if name == "mdhom":
                res.update(_mdhom_facts(est, len(Xt), backends))
        except Exception as exc:  # noqa: BLE001 - an anchor failing is a row of the table, not the end of the run
            res = {"system": name, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        log(json.dumps(res))
        results.append(res)

    kw = dict(n_estimators=cfg.trees, max_depth=cfg.max_depth or None, max_bin=cfg.bins, random_state=cfg.seed,
              device=cfg.device, n_jobs=cfg.threads)
    timed("mdhom", mdhom.RandomForestClassifier(**kw), mdhom.RandomForestClassifier(**{**kw, "n_estimators": 2}))
    for name in cfg.anchors:
        if name not in ANCHORS:
            raise ValueError(f"unknown anchor {name!r}; known: {', '.join(ANCHORS)}")
        try:
            est = _anchor(name, cfg, threads)
        except ImportError as exc:
            results.append({"system": name, "status": "skipped", "error": str(exc)})
            continue
        timed(name, est)
    base = next((r for r in results if r["system"] == "mdhom" and r["status"] == "ok"), None)
    for r in results:
        if base and r["status"] == "ok":
            r["fit_vs_mdhom"] = r["fit_s"] / base["fit_s"]
            r["predict_vs_mdhom"] = r["predict_s"] / base["predict_s"]
    return {"benchmark": "forests", "config": asdict(cfg), "threads": threads, "machine": machine_info(),
            "versions": versions(), "results": results}


def format_table(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"forests: {c['rows']} x {c['features']} rows, {c['test_rows']} test rows, {c['trees']} trees, "
             f"max_depth {c['max_depth'] or 'none'}, {report['threads']} threads",
             f"{'system':14s} {'fit s':>9s} {'vs mdhom':>8s} {'predict s':>9s} {'vs mdhom':>8s} {'1st pred':>8s} "
             f"{'AUC':>7s} {'builds s':>8s}  notes"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"{r['system']:14s} {r['status']}: {r.get('error', '')[:80]}")
            continue
        notes = ""
        if "predict_path" in r:
            notes = f"{r['predict_path']} walk"
            if "launches" in r:
                notes += f", {r['launches']} launches, {r['syncs']} syncs"
        lines.append(f"{r['system']:14s} {r['fit_s']:9.3f} {r.get('fit_vs_mdhom', 1):8.2f} {r['predict_s']:9.3f} "
                     f"{r.get('predict_vs_mdhom', 1):8.2f} {r['first_predict_s']:8.3f} {r['auc']:7.4f} "
                     f"{r['warmup_s']:8.2f}  {notes}".rstrip())
    return "\n".join(lines)
