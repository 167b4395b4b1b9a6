"""The forests' quality against scikit-learn: k-fold CV on breast_cancer (AUC), digits (accuracy) and diabetes
(R^2), the same trees, depth, folds and seeds on both sides (issue 12's bounds: 0.01, 0.01, 0.03).

    python -m mdhom.bench.forest_quality --trees 100 --folds 5 --device cpu
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np


def compare(trees: int = 100, folds: int = 5, device: str | None = "cpu", max_depth: int | None = None,
            log: Any = print) -> list[dict[str, Any]]:
    from sklearn import ensemble
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score
    from sklearn.model_selection import KFold, StratifiedKFold

    import mdhom

    rows = []
    for name, load, kind in (("breast_cancer", load_breast_cancer, "auc"), ("digits", load_digits, "accuracy"),
                             ("diabetes", load_diabetes, "r2")):
        X, y = load(return_X_y=True)
        split = (KFold if kind == "r2" else StratifiedKFold)(folds, shuffle=True, random_state=0).split(X, y)
        scores: dict[str, list[float]] = {"mdhom": [], "sklearn": []}
        seconds = {"mdhom": 0.0, "sklearn": 0.0}
        for i, (a, b) in enumerate(split):
            for who in ("mdhom", "sklearn"):
                kw = dict(n_estimators=trees, max_depth=max_depth, random_state=i)
                if kind == "r2":
                    est = (mdhom.RandomForestRegressor(device=device, **kw) if who == "mdhom"
                           else ensemble.RandomForestRegressor(n_jobs=-1, **kw))
                else:
                    est = (mdhom.RandomForestClassifier(device=device, **kw) if who == "mdhom"
                           else ensemble.RandomForestClassifier(n_jobs=-1, **kw))
                t0 = time.perf_counter()
                est.fit(X[a], y[a])
                seconds[who] += time.perf_counter() - t0
                if kind == "auc":
                    s = roc_auc_score(y[b], est.predict_proba(X[b])[:, 1])
                elif kind == "accuracy":
                    s = accuracy_score(y[b], est.predict(X[b]))
                else:
                    s = r2_score(y[b], est.predict(X[b]))
                scores[who].append(float(s))
        row = {"data": name, "metric": kind, "mdhom": float(np.mean(scores["mdhom"])),
               "sklearn": float(np.mean(scores["sklearn"])), "fit_seconds": seconds}
        row["difference"] = row["mdhom"] - row["sklearn"]
        log(f"{name:14s} {kind:8s} mdhom {row['mdhom']:.4f}  scikit-learn {row['sklearn']:.4f}  "
            f"difference {row['difference']:+.4f}  (fit seconds, all folds: mdhom {seconds['mdhom']:.1f}, "
            f"scikit-learn {seconds['sklearn']:.1f})")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--max-depth", type=int, default=None)
    p.add_argument("--device", default="cpu", help="mdhom's device (numpy, cpu, gpu, a key)")
    args = p.parse_args(argv)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        compare(args.trees, args.folds, args.device, args.max_depth)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
