"""LightGBM (CPU and its OpenCL learner) as systems of the bench."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mdhom.bench.anchors.base import System, _auc, _import, _rounds_from_marks, tree_shape


class _LogCapture:
    """LightGBM routes its C++ log through a registered Python logger; keep the lines to find the device."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.extend(ln for ln in str(msg).splitlines() if ln.strip())

    warning = info


class LightGBM(System):
    name = "lightgbm-cpu"
    device_type = "cpu"

    choice: Any = None  # the probed or given OpenCL platform (LightGBMOpenCL)

    def probe(self) -> str | None:
        self.lgb, err = _import("lightgbm")
        return err

    def params(self, cfg: Any) -> dict[str, Any]:
        _, depth = tree_shape(cfg)
        p = {
            "objective": "binary",
            "num_leaves": cfg.leaves,
            "max_depth": depth or -1,
            "max_bin": cfg.bins,
            "learning_rate": cfg.learning_rate,
            "num_threads": cfg.threads,
            "bagging_fraction": 1.0,
            "feature_fraction": 1.0,
            "seed": cfg.seed,
            "device_type": self.device_type,
            "verbose": 1,
        }
        if self.device_type == "gpu" and self.choice is not None:
            p["gpu_platform_id"] = self.choice.platform
            p["gpu_device_id"] = cfg.lightgbm_device if cfg.lightgbm_device is not None else 0
        return p

    def _run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        lgb = self.lgb
        capture = _LogCapture()
        lgb.register_logger(capture)
        params = self.params(cfg)
        t0 = time.perf_counter()
        data = lgb.Dataset(
            X, y, params={"max_bin": cfg.bins, "verbose": 1, "num_threads": cfg.threads}, free_raw_data=False
        )
        data.construct()
        setup = time.perf_counter() - t0
        before: list[float] = []
        after: list[float] = []

        def mark_before(env: Any) -> None:
            if not before:
                before.append(time.perf_counter())

        def mark_after(env: Any) -> None:
            after.append(time.perf_counter())

        mark_before.before_iteration = True  # type: ignore[attr-defined]
        mark_before.order = 0  # type: ignore[attr-defined]
        mark_after.order = 100  # type: ignore[attr-defined]
        t1 = time.perf_counter()
        booster = lgb.train(params, data, num_boost_round=cfg.rounds, callbacks=[mark_before, mark_after])
        train = time.perf_counter() - t1
        t2 = time.perf_counter()
        scores = booster.predict(Xt, num_threads=cfg.threads)
        predict = time.perf_counter() - t2
        out: dict[str, Any] = {
            "library": "lightgbm",
            "version": lgb.__version__,
            "params": params,
            "setup_seconds": setup,
            "build_seconds": before[0] - t1 if before else None,
            "fit_seconds": setup + train,
            "round_seconds": _rounds_from_marks(before, after),
            "timing_source": "callbacks (host clock)",
            "predict_seconds": predict,
            "test_auc": _auc(yt, scores),
            "log": [ln for ln in capture.lines if "[Warning]" in ln or "GPU" in ln or "OpenCL" in ln][:40],
            "warnings": [],
        }
        if tree_shape(cfg)[0] == "depthwise":
            out["warnings"].append("LightGBM grows leaf-wise only: depthwise is approximated by max_depth")
        if self.device_type == "gpu":
            from mdhom.bench.lightgbm_gpu import parse_log

            _, device = parse_log(capture.lines, params.get("gpu_platform_id", -1))
            out["device"] = device
            out["platform_choice"] = self.choice.to_json() if self.choice is not None else None
            if device is None:
                out["warnings"].append("LightGBM logged no 'Using GPU Device' line: check that it ran on the GPU")
            elif self.choice is not None and self.choice.device_name and device != self.choice.device_name:
                out["warnings"].append(f"the probe saw {self.choice.device_name}, the run used {device}")
        else:
            out["device"] = "cpu"
        del data, booster
        return out


class LightGBMOpenCL(LightGBM):
    """LightGBM's OpenCL learner, on the platform id LightGBM itself reports as the GPU (lightgbm_gpu.py).

    ``--lightgbm-platform`` skips the probe (and then may name a CPU runtime on purpose); without a match
    the system is reported unavailable with the probe's findings rather than timed on a CPU.
    """

    name = "lightgbm-opencl"
    device_type = "gpu"
    gpu = True

    def run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        if self.reason is None and cfg is not None:
            from mdhom.bench import lightgbm_gpu

            device = cfg.lightgbm_device if cfg.lightgbm_device is not None else 0
            if cfg.lightgbm_platform is not None:
                self.choice = lightgbm_gpu.PlatformChoice(cfg.lightgbm_platform, None, None, reason=None)
                self.choice.tried = [{"platform": cfg.lightgbm_platform, "given": "--lightgbm-platform"}]
            else:
                self.choice = lightgbm_gpu.probe_lightgbm_platform(device)
            if self.choice.platform is None:
                return {
                    "system": self.name,
                    "status": "unavailable",
                    "reason": self.choice.reason,
                    "platform_choice": self.choice.to_json(),
                }
        return super().run(X, y, Xt, yt, cfg)


# ------------------------------------------------------------------------------------------- XGBoost
