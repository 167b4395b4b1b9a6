"""``mdhom bench forests --ecc emotions|mediamill``: mdhom's ClassifierChainEnsemble against an ensemble of
scikit-learn ``ClassifierChain(RandomForestClassifier)`` with the same label orders and forest settings (all
cores), on synthetic multi-label data of a real set's shape, in one process: fit seconds (mdhom's program builds
apart, from a tiny fit first), prediction seconds on the test rows (mdhom: first call with the predictor's builds,
then a second call), Hamming loss and micro-F1.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from mdhom.bench.trees import machine_info, versions

# (train rows, test rows, features, labels) of the real sets' standard splits
SHAPES = {"emotions": (391, 202, 72, 6), "mediamill": (30993, 12914, 120, 101)}


@dataclass(frozen=True)
class ChainsConfig:
    shape: str = "emotions"
    rows: int = 391
    test_rows: int = 202
    features: int = 72
    labels: int = 6
    chains: int = 64
    trees: int = 32  # per chain position (per label)
    max_depth: int = 0  # 0: no limit (scikit-learn's default)
    bins: int = 255
    device: str | None = None
    threads: int | None = None
    seed: int = 0
    sklearn: bool = True

    @classmethod
    def for_shape(cls, shape: str, quick: bool = False, **overrides: Any) -> ChainsConfig:
        if shape not in SHAPES:
            raise ValueError(f"unknown --ecc shape {shape!r}; known: {', '.join(SHAPES)}")
        rows, test, feat, lab = SHAPES[shape]
        base = cls(shape, rows, test, feat, lab)
        if quick:  # CI: a few hundred rows, a few labels, 4 chains x 4 trees
            base = replace(base, rows=min(rows, 300), test_rows=min(test, 100), labels=min(lab, 5), chains=4, trees=4)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def make_multilabel(rows: int, features: int, labels: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense features and labels that depend on them and on the previous label (what a chain can use); label
    frequencies from 2% to 40%, as in emotions (about 30%) and mediamill (most below 5%)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    W = rng.normal(size=(features, labels)) * (rng.random((features, labels)) < min(1.0, 8 / features))
    Z = X @ W + rng.normal(scale=0.5, size=(rows, labels))
    rate = rng.uniform(0.02, 0.4, labels)
    Y = np.zeros((rows, labels), np.int64)
    for j in range(labels):
        z = Z[:, j] + (1.5 * Y[:, j - 1] if j else 0.0)
        Y[:, j] = z > np.quantile(z, 1 - rate[j])
    return X, Y


def _metrics(Y: np.ndarray, P: np.ndarray) -> dict[str, float]:
    tp = int(np.sum((P == 1) & (Y == 1)))
    fp, fn = int(np.sum((P == 1) & (Y == 0))), int(np.sum((P == 0) & (Y == 1)))
    return {"hamming_loss": float(np.mean(P != Y)), "micro_f1": 2 * tp / max(1, 2 * tp + fp + fn),
            "subset_accuracy": float(np.mean(np.all(P == Y, axis=1)))}


def sklearn_chains(orders: np.ndarray, trees: int, max_depth: int | None, threads: int, seed: int) -> list:
    """scikit-learn's ECC with the given orders: one ClassifierChain of forests per order."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.multioutput import ClassifierChain

    return [ClassifierChain(RandomForestClassifier(n_estimators=trees, max_depth=max_depth, n_jobs=threads,
                                                   random_state=seed + c), order=list(map(int, o)))
            for c, o in enumerate(orders)]


def sklearn_proba(chains: list, X: np.ndarray) -> np.ndarray:
    return np.mean([ch.predict_proba(X) for ch in chains], axis=0)


def run_chains(cfg: ChainsConfig, log: Any = print) -> dict[str, Any]:
    import mdhom

    threads = cfg.threads or len(os.sched_getaffinity(0))
    X, Y = make_multilabel(cfg.rows + cfg.test_rows, cfg.features, cfg.labels, cfg.seed)
    X, Xt, Y, Yt = X[:cfg.rows], X[cfg.rows:], Y[:cfg.rows], Y[cfg.rows:]
    depth = cfg.max_depth or None
    kw = dict(n_chains=cfg.chains, n_estimators=cfg.trees, max_depth=depth, max_bin=cfg.bins, random_state=cfg.seed,
              device=cfg.device, n_jobs=cfg.threads)
    results = []
    t0 = time.perf_counter()
    mdhom.ClassifierChainEnsemble(**{**kw, "n_chains": 2, "n_estimators": 2}).fit(X[:200], Y[:200])
    build = time.perf_counter() - t0
    est = mdhom.ClassifierChainEnsemble(**kw)
    t0 = time.perf_counter()
    est.fit(X, Y)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    est.predict_proba(Xt)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    proba = est.predict_proba(Xt)
    pred = time.perf_counter() - t0
    res = {"system": "mdhom", "status": "ok", "fit_s": fit, "predict_s": pred, "first_predict_s": first,
           "warmup_s": build, "device": est.device_,
           "device_predict": est._device_predictor(len(Xt)) is not None, **_metrics(Yt, (proba >= 0.5).astype(int))}
    log(json.dumps(res))
    results.append(res)
    if cfg.sklearn:
        try:
            chains = sklearn_chains(est.orders_, cfg.trees, depth, threads, cfg.seed)
            t0 = time.perf_counter()
            for ch in chains:
                ch.fit(X, Y)
            fit = time.perf_counter() - t0
            t0 = time.perf_counter()
            proba = sklearn_proba(chains, Xt)
            pred = time.perf_counter() - t0
            res = {"system": "sklearn", "status": "ok", "fit_s": fit, "predict_s": pred,
                   **_metrics(Yt, (proba >= 0.5).astype(int))}
        except Exception as exc:  # noqa: BLE001 - an anchor failing is a row of the table
            res = {"system": "sklearn", "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        log(json.dumps(res))
        results.append(res)
    base = results[0]
    for r in results:
        if r["status"] == "ok":
            r["fit_vs_mdhom"] = r["fit_s"] / base["fit_s"]
            r["predict_vs_mdhom"] = r["predict_s"] / base["predict_s"]
    return {"benchmark": "forests-ecc", "config": asdict(cfg), "threads": threads, "machine": machine_info(),
            "versions": versions(), "results": results}


def format_table(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"ECC ({c['shape']}-shaped): {c['rows']} x {c['features']} rows, {c['labels']} labels, {c['test_rows']} "
             f"test rows, {c['chains']} chains x {c['trees']} trees per label, max_depth {c['max_depth'] or 'none'}, "
             f"{report['threads']} threads",
             f"{'system':9s} {'fit s':>9s} {'vs mdhom':>8s} {'predict s':>10s} {'vs mdhom':>8s} {'Hamming':>8s} "
             f"{'micro-F1':>8s} {'builds s':>8s}"]
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"{r['system']:9s} {r['status']}: {r.get('error', '')[:80]}")
            continue
        lines.append(f"{r['system']:9s} {r['fit_s']:9.3f} {r['fit_vs_mdhom']:8.2f} {r['predict_s']:10.4f} "
                     f"{r['predict_vs_mdhom']:8.1f} {r['hamming_loss']:8.4f} {r['micro_f1']:8.4f} "
                     f"{r.get('warmup_s', 0.0):8.2f}")
    return "\n".join(lines)
