"""CatBoost on the GPU as a system of the bench."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mdhom.bench.anchors.base import System, _auc, _import, gpu_visible, tree_shape


class CatBoostGPU(System):
    """CatBoost on CUDA with the settings closest to the others': XGBoost's leaf-wise or level-wise trees
    (``Lossguide`` / ``Depthwise``, CatBoost's default is symmetric trees), one Newton step per leaf, L2 = 1,
    no bootstrap and no random score perturbation, ``border_count`` = bins. CatBoost's GPU trainer takes no
    per-iteration callbacks, so a round is timed as (fit of R rounds - fit of 1 round) / (R - 1), after a first
    1-round fit that pays CUDA's start-up: a mean over the rounds after the first."""

    name = "catboost-gpu"
    gpu = True

    def probe(self) -> str | None:
        self.cb, err = _import("catboost")
        if err is None and not gpu_visible():
            return "no GPU visible (nvidia-smi, /proc/driver/nvidia)"
        return err

    def params(self, cfg: Any) -> dict[str, Any]:
        policy, depth = tree_shape(cfg)
        params = {
            "loss_function": "Logloss",
            "task_type": "GPU",
            "devices": "0",
            "iterations": cfg.rounds,
            "learning_rate": cfg.learning_rate,
            "grow_policy": "Lossguide" if policy == "lossguide" else "Depthwise",
            "depth": depth or 16,  # CatBoost's deepest; lossguide trees are bounded by their leaves
            "border_count": cfg.bins,
            "l2_leaf_reg": 1.0,
            "leaf_estimation_method": "Newton",
            "leaf_estimation_iterations": 1,
            "bootstrap_type": "No",
            "random_strength": 0.0,
            "boosting_type": "Plain",
            "thread_count": cfg.threads,
            "random_seed": cfg.seed,
            "verbose": False,
            "allow_writing_files": False,
        }
        if policy == "lossguide":
            params["max_leaves"] = cfg.leaves
        return params

    def _run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        cb = self.cb
        params = self.params(cfg)
        t0 = time.perf_counter()
        cb.CatBoostClassifier(**{**params, "iterations": 1}).fit(X, y)  # CUDA's start-up, once per process
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        cb.CatBoostClassifier(**{**params, "iterations": 1}).fit(X, y)
        one = time.perf_counter() - t0
        t1 = time.perf_counter()
        model = cb.CatBoostClassifier(**params).fit(X, y)
        fit = time.perf_counter() - t1
        rounds = int(cfg.rounds)
        per = (fit - one) / max(1, rounds - 1)
        t2 = time.perf_counter()
        scores = model.predict(Xt, prediction_type="RawFormulaVal", thread_count=cfg.threads)
        predict = time.perf_counter() - t2
        out = {
            "library": "catboost",
            "version": cb.__version__,
            "params": params,
            "device": "cuda",
            "build_seconds": max(0.0, warm - per),
            "fit_seconds": fit,
            "round_seconds": [one] + [per] * max(0, rounds - 1),
            "timing_source": "(fit of R rounds - fit of 1 round) / (R - 1), host clock: a mean, not a median "
                             "(CatBoost's GPU trainer takes no per-iteration callbacks)",
            "predict_seconds": predict,
            "predict_device": "cpu",
            "test_auc": _auc(yt, np.asarray(scores)),
        }
        del model
        return out


# -------------------------------------------------------------------------------------------- choice
