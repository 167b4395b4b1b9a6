"""ECC quality against scikit-learn: mdhom's ClassifierChainEnsemble and an ensemble of scikit-learn
``ClassifierChain(RandomForestClassifier)`` with the same chains, label orders and forest settings, on emotions
(predefined split) and enron (rows shuffled by numpy's default_rng(1), the first 67% for training); Hamming loss,
micro-F1 and subset accuracy (issue 12's bounds: Hamming within 0.005, micro-F1 within 0.01).

    python -m mdhom.bench.chain_quality --chains 64 --trees 32 --device cpu
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"


def datasets(root: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    from mdhom.datasets import load_arff

    X, Y, _, _ = load_arff(root / "emotions-predefined_training.arff", root / "emotions.xml")
    Xt, Yt, _, _ = load_arff(root / "emotions-predefined_test.arff", root / "emotions.xml")
    out = {"emotions": (X, Y, Xt, Yt)}
    X, Y, _, _ = load_arff(root / "enron.arff", root / "enron.xml")
    idx = np.random.default_rng(1).permutation(len(X))
    cut = int(0.67 * len(X))
    out["enron"] = (X[idx[:cut]], Y[idx[:cut]], X[idx[cut:]], Y[idx[cut:]])
    return out


def compare(chains: int = 64, trees: int = 32, device: str | None = "cpu", seed: int = 0, root: Path = DATA,
            names: tuple[str, ...] = ("emotions", "enron"), log: Any = print) -> list[dict[str, Any]]:
    import mdhom
    from mdhom.bench.chains import _metrics, sklearn_chains, sklearn_proba

    rows = []
    for name, (X, Y, Xt, Yt) in datasets(root).items():
        if name not in names:
            continue
        Y, Yt = Y.astype(np.int64), Yt.astype(np.int64)
        est = mdhom.ClassifierChainEnsemble(n_chains=chains, n_estimators=trees, random_state=seed, device=device)
        t0 = time.perf_counter()
        est.fit(X, Y)
        ours_s = time.perf_counter() - t0
        ours = _metrics(Yt, est.predict(Xt))
        # scikit-learn's chain cannot fit a label with one class in training (its forest has no class-1 column):
        # such labels are predicted 0 on both sides, as mdhom's forest does (probability 0)
        const = np.flatnonzero(Y.min(axis=0) == Y.max(axis=0))
        keep = np.setdiff1d(np.arange(Y.shape[1]), const)
        remap = -np.ones(Y.shape[1], np.int64)
        remap[keep] = np.arange(keep.size)
        orders = np.stack([remap[o][remap[o] >= 0] for o in est.orders_])
        sk = sklearn_chains(orders, trees, None, -1, seed)
        t0 = time.perf_counter()
        for ch in sk:
            ch.fit(X, Y[:, keep])
        theirs_s = time.perf_counter() - t0
        P = np.zeros_like(Yt)
        P[:, keep] = sklearn_proba(sk, Xt) >= 0.5
        P[:, const] = Y[0, const]
        theirs = _metrics(Yt, P)
        row = {"data": name, "mdhom": ours, "sklearn": theirs, "fit_seconds": {"mdhom": ours_s, "sklearn": theirs_s},
               "constant_labels": int(const.size)}
        log(f"{name:9s} Hamming mdhom {ours['hamming_loss']:.4f} sklearn {theirs['hamming_loss']:.4f} "
            f"({ours['hamming_loss'] - theirs['hamming_loss']:+.4f})  micro-F1 mdhom {ours['micro_f1']:.4f} "
            f"sklearn {theirs['micro_f1']:.4f} ({ours['micro_f1'] - theirs['micro_f1']:+.4f})  subset acc "
            f"{ours['subset_accuracy']:.3f} / {theirs['subset_accuracy']:.3f}  fit s {ours_s:.1f} / {theirs_s:.1f}")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chains", type=int, default=64)
    p.add_argument("--trees", type=int, default=32, help="trees per chain position")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=str(DATA), help="folder with emotions* and enron* (ARFF + Mulan XML)")
    p.add_argument("--only", default="emotions,enron", help="comma list of emotions, enron")
    p.add_argument("--device", default="cpu", help="mdhom's device (numpy, cpu, gpu, a key)")
    args = p.parse_args(argv)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        compare(args.chains, args.trees, args.device, args.seed, Path(args.data), tuple(args.only.split(",")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
