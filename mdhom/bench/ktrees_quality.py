"""One tree per output against XGBoost's: k-fold CV accuracy on ``load_digits`` of mdhom's two multiclass strategies
and XGBoost's CPU ``hist`` (``multi_strategy="one_output_per_tree"``, where installed), the same rounds, depth,
learning rate, L2 and folds on every side.

    python -m mdhom.bench.ktrees_quality --rounds 100 --max-depth 6 --folds 5 --device pocl
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np


def compare(rounds: int = 100, max_depth: int = 6, learning_rate: float = 0.3, folds: int = 5,
            device: str | None = "cpu", threads: int | None = None, log: Any = print) -> list[dict[str, Any]]:
    """Mean and spread of the held-out accuracy per system over the stratified folds (shuffled, seed 0)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import StratifiedKFold

    from mdhom import TreeBoostClassifier

    X, y = load_digits(return_X_y=True)
    kw = dict(n_estimators=rounds, max_depth=max_depth, learning_rate=learning_rate, reg_lambda=1.0)

    def systems() -> dict[str, Any]:
        out = {f"mdhom {s}": (lambda s=s: TreeBoostClassifier(device=device, n_jobs=threads, multi_strategy=s, **kw))
               for s in ("one_output_per_tree", "multi_output_tree")}
        try:
            import xgboost as xgb
        except ImportError:
            return out
        out["XGBoost CPU hist one_output_per_tree"] = lambda: xgb.XGBClassifier(
            tree_method="hist", max_bin=256, n_jobs=threads, multi_strategy="one_output_per_tree", **kw)
        return out

    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for a, b in StratifiedKFold(folds, shuffle=True, random_state=0).split(X, y):
        for name, make in systems().items():
            t0 = time.perf_counter()
            est = make().fit(X[a], y[a])
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
            scores.setdefault(name, []).append(float((est.predict(X[b]) == y[b]).mean()))
    rows = []
    for name, s in scores.items():
        rows.append({"system": name, "accuracy": float(np.mean(s)), "std": float(np.std(s)),
                     "fit_seconds": seconds[name]})
        log(f"{name:38s} accuracy {np.mean(s):.4f} +- {np.std(s):.4f}  (fit seconds, all folds: {seconds[name]:.1f})")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--max-depth", type=int, default=6)
    p.add_argument("--learning-rate", type=float, default=0.3)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--device", default="cpu", help="mdhom's device (numpy, cpu, gpu, a key)")
    p.add_argument("--threads", type=int, default=None, help="threads of a CPU device and of XGBoost (default: all)")
    args = p.parse_args(argv)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        compare(args.rounds, args.max_depth, args.learning_rate, args.folds, args.device, args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
