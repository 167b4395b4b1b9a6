"""``mdhom bench rules-quality``: RuleBoostClassifier against mlrl-boomer on real multi-label data, same settings.

Issue 10's quality bar: on emotions (its predefined split) and enron (a random 67/33 split, seed 1), for the
label-wise logistic loss with single-label heads and the example-wise logistic loss with complete heads, mdhom's
Hamming loss within 0.005 of mlrl-boomer's and its micro-F1 within 0.01. Both sides run the same settings
(:func:`mdhom.bench.boomer.boomer_params` with ``same_as_mdhom``: 64-bit statistics, the same label binning, no
holdout or pruning; the default settings run without label binning) and mlrl-boomer's defaults otherwise, feature
sampling included; each figure is the mean over several seeds, because with feature sampling one seed's figure moves
by about the bar itself (both libraries draw their samples from their own generators, so no seed gives both the same
draws).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mdhom.bench.boomer import SETTINGS, boomer_params, boomer_version, fit_boomer, multilabel_scores, predict_boomer

BARS = {"hamming": 0.005, "micro_f1": 0.01}
DATASETS = ("emotions", "enron")


def default_datasets_dir() -> str:
    return os.environ.get("MDHOM_DATASETS") or "../shared/datasets"


def load_split(name: str, folder: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, Y, X_test, Y_test): emotions' predefined split, or enron shuffled by numpy's default_rng(1) with the
    first round(0.67 n) rows for training (dense X: enron's 1001 binary features)."""
    from mdhom.datasets import load_arff

    d = Path(folder)
    if name == "emotions":
        X, Y, _, _ = load_arff(d / "emotions-predefined_training.arff", labels=d / "emotions.xml")
        Xt, Yt, _, _ = load_arff(d / "emotions-predefined_test.arff", labels=d / "emotions.xml")
        return X, Y, Xt, Yt
    if name == "enron":
        X, Y, _, _ = load_arff(d / "enron.arff", labels=d / "enron.xml")
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        order = np.random.default_rng(1).permutation(X.shape[0])
        k = int(round(0.67 * X.shape[0]))
        return X[order[:k]], Y[order[:k]], X[order[k:]], Y[order[k:]]
    raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")


@dataclass
class QualityConfig:
    datasets: list[str] = field(default_factory=lambda: list(DATASETS))
    # the table in the README: no label binning on either side
    settings: list[str] = field(default_factory=lambda: ["labelwise-single", "examplewise-complete-unbinned"])
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    max_rules: int = 1000
    folder: str = field(default_factory=default_datasets_dir)
    device: str = "numpy"
    extra: dict[str, Any] = field(default_factory=dict)  # further RuleBoostClassifier parameters, both sides


def _mdhom(X: np.ndarray, Y: np.ndarray, Xt: np.ndarray, params: dict[str, Any]) -> tuple[np.ndarray, float, int]:
    from mdhom import RuleBoostClassifier

    t0 = time.perf_counter()
    est = RuleBoostClassifier(**params).fit(X, Y)
    return est.predict(Xt), time.perf_counter() - t0, len(est.rules_) + 1


def run_quality(config: QualityConfig, log: Any = print) -> dict[str, Any]:
    """Every (dataset, setting, seed) on both sides; per (dataset, setting) the means and whether they meet the bar."""
    version = boomer_version()
    rows = []
    for name in config.datasets:
        X, Y, Xt, Yt = load_split(name, config.folder)
        for setting in config.settings:
            runs: dict[str, list[dict[str, Any]]] = {"mdhom": [], "mlrl-boomer": []}
            for seed in config.seeds:
                params = {**SETTINGS[setting], "max_rules": config.max_rules, "random_state": seed,
                          "device": config.device, **config.extra}
                P, seconds, rules = _mdhom(X, Y, Xt, params)
                runs["mdhom"].append({"seed": seed, "fit_seconds": seconds, "rules": rules,
                                      **multilabel_scores(P, Yt)})
                if version is not None:
                    model, seconds = fit_boomer(X, Y, boomer_params({k: v for k, v in params.items()
                                                                      if k != "device"}))
                    runs["mlrl-boomer"].append({"seed": seed, "fit_seconds": seconds,
                                                **multilabel_scores(predict_boomer(model, Xt), Yt)})
                log(f"{name} {setting} seed {seed}: " + "; ".join(
                    f"{k} {r[-1]['hamming']:.4f} / {r[-1]['micro_f1']:.4f}" for k, r in runs.items() if r))
            row: dict[str, Any] = {"dataset": name, "setting": setting, "runs": runs}
            for system, rs in runs.items():
                if rs:
                    row[system] = {m: float(np.mean([r[m] for r in rs]))
                                   for m in ("hamming", "micro_f1", "subset_accuracy", "fit_seconds")}
            if runs["mlrl-boomer"]:
                row["difference"] = {m: row["mdhom"][m] - row["mlrl-boomer"][m] for m in BARS}
                row["within_bar"] = all(abs(row["difference"][m]) <= bar for m, bar in BARS.items())
            rows.append(row)
    return {"benchmark": "rules-quality", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "config": asdict(config), "mlrl_boomer": version or "not installed", "bars": BARS,
            "boomer_settings": {setting: boomer_params({**SETTINGS[setting], "max_rules": config.max_rules,
                                                        **config.extra}) for setting in config.settings},
            "results": rows}


def format_quality(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"rules quality: mdhom vs mlrl-boomer {report['mlrl_boomer']}, {c['max_rules']} rules, mean over seeds "
             f"{','.join(map(str, c['seeds']))}; bars: Hamming +-{BARS['hamming']}, micro-F1 +-{BARS['micro_f1']}",
             f"{'dataset':<10}{'setting':<22}{'mdhom Ham':>10}{'boomer Ham':>11}{'mdhom F1':>10}{'boomer F1':>10}"
             f"{'mdhom s':>9}{'boomer s':>9}  within bar"]
    lines.append("-" * len(lines[-1]))
    for r in report["results"]:
        b = r.get("mlrl-boomer")
        m = r["mdhom"]
        cell = (lambda v: f"{v:>10.4f}") if b else (lambda v: f"{'-':>10}")
        lines.append(f"{r['dataset']:<10}{r['setting']:<22}{m['hamming']:>10.4f}{cell(b['hamming'] if b else 0):>11}"
                     f"{m['micro_f1']:>10.4f}{cell(b['micro_f1'] if b else 0)}{m['fit_seconds']:>9.1f}"
                     f"{(b['fit_seconds'] if b else float('nan')):>9.1f}  "
                     f"{('yes' if r['within_bar'] else 'NO') if b else 'mlrl-boomer not installed'}")
    lines += [f"mlrl-boomer settings for {setting} (mdhom takes the same; seeds as listed): " + json.dumps(params)
              for setting, params in report["boomer_settings"].items()]
    return "\n".join(lines)
