"""XGBoost (CPU hist and CUDA) as systems of the bench."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mdhom.bench.anchors.base import System, _auc, _import, _rounds_from_marks, gpu_visible, tree_shape


class XGBoost(System):
    name = "xgboost-cpu"
    device = "cpu"

    def probe(self) -> str | None:
        self.xgb, err = _import("xgboost")
        if err is None and self.device == "cuda":
            if not self.xgb.build_info().get("USE_CUDA"):
                return "xgboost is built without CUDA"
            if not gpu_visible():
                return "no GPU visible (nvidia-smi, /proc/driver/nvidia)"
        return err

    def params(self, cfg: Any) -> dict[str, Any]:
        policy, depth = tree_shape(cfg)
        return {
            "objective": "binary:logistic",
            "tree_method": "hist",
            "device": self.device,
            "grow_policy": policy,
            "max_leaves": cfg.leaves,
            "max_depth": depth,
            "max_bin": cfg.bins,
            "eta": cfg.learning_rate,
            "nthread": cfg.threads,
            "subsample": 1.0,
            "colsample_bytree": 1.0,
            "seed": cfg.seed,
            "verbosity": 1,
        }

    def _run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        xgb = self.xgb
        params = self.params(cfg)
        t0 = time.perf_counter()
        data = xgb.QuantileDMatrix(X, y, max_bin=cfg.bins, nthread=cfg.threads)
        setup = time.perf_counter() - t0
        before: list[float] = []
        after: list[float] = []

        class Timer(xgb.callback.TrainingCallback):
            def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
                if not before:
                    before.append(time.perf_counter())
                return False

            def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
                after.append(time.perf_counter())
                return False

        t1 = time.perf_counter()
        booster = xgb.train(params, data, num_boost_round=cfg.rounds, callbacks=[Timer()])
        train = time.perf_counter() - t1
        t2 = time.perf_counter()
        scores = booster.inplace_predict(Xt)  # on the booster's device (CUDA: the host rows are copied over)
        predict = time.perf_counter() - t2
        out = {
            "library": "xgboost",
            "version": xgb.__version__,
            "params": params,
            "device": self.device,
            "setup_seconds": setup,
            "build_seconds": before[0] - t1 if before else None,
            "fit_seconds": setup + train,
            "round_seconds": _rounds_from_marks(before, after),
            "timing_source": "TrainingCallback (host clock)",
            "predict_seconds": predict,
            "test_auc": _auc(yt, scores),
        }
        del data, booster
        return out


class XGBoostCUDA(XGBoost):
    name = "xgboost-cuda"
    device = "cuda"
    gpu = True


# ------------------------------------------------------------------------------------------- CatBoost
