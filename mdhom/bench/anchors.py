"""The systems ``mdhom bench trees`` times: mdhom and the anchor libraries, each behind the same small interface.

Every system maps the benchmark's parameters (leaves, bins, rounds, learning rate, threads) to its own names,
times each boosting round from a callback (or from the estimator's ``round_times_`` for mdhom), and reports a
dict; none of the anchors is a dependency, so each is probed by import and reported as unavailable, with the
reason, when it cannot run. A failure inside one system is recorded and the others still run.
"""

from __future__ import annotations

import gc
import glob
import importlib
import math
import os
import shutil
import subprocess
import time
import traceback
from typing import Any

import numpy as np

__all__ = ["ANCHORS", "GROW_POLICIES", "System", "select", "gpu_visible", "gpu_names", "tree_shape"]

GROW_POLICIES = ("lossguide", "depthwise")
# rows of the numpy walk timed beside the device walk of mdhom's prediction (its seconds per row are compared)
NUMPY_PREDICT_ROWS = 1_000_000


def gpu_names() -> list[str]:
    """Names of visible NVIDIA GPUs (via nvidia-smi when present), or the AMD KFD node; [] when none."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
            if names:
                return names
        except (OSError, subprocess.SubprocessError):
            pass
    if glob.glob("/proc/driver/nvidia/gpus/*"):
        return ["NVIDIA GPU"]
    if os.path.exists("/dev/kfd"):
        return ["AMD GPU (/dev/kfd)"]
    return []


def gpu_visible() -> bool:
    return bool(gpu_names())


class System:
    """One trainable system; ``reason`` is None when it can run, else why not."""

    name = "system"
    gpu = False

    def __init__(self) -> None:
        self.reason: str | None = self.probe()

    def probe(self) -> str | None:
        return None

    def run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        result: dict[str, Any] = {"system": self.name, "status": "unavailable", "reason": self.reason}
        if self.reason is not None:
            return result
        try:
            result.update(self._run(X, y, Xt, yt, cfg))
            result["status"] = "ok"
        except Exception as exc:  # one broken system must not take the benchmark down
            result.update(
                status="failed",
                reason=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=8).splitlines()[-12:],
            )
        finally:
            gc.collect()
        return result

    def _run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        raise NotImplementedError


def _import(module: str) -> tuple[Any, str | None]:
    try:
        return importlib.import_module(module), None
    except Exception as exc:  # ImportError, or a broken install raising something else
        return None, f"cannot import {module}: {type(exc).__name__}: {exc}"


def _auc(yt: np.ndarray, scores: np.ndarray) -> float | None:
    from mdhom.bench.trees import roc_auc

    return roc_auc(yt, scores) if np.unique(yt).size == 2 else None


def tree_shape(cfg: Any) -> tuple[str, int]:
    """(grow policy, depth limit; 0 = none): lossguide bounds a tree by its leaves only, as LightGBM does;
    depthwise grows full levels up to the depth that holds ``leaves`` leaves (255 -> 8), as XGBoost's
    default policy does, still capped at ``leaves``."""
    policy = getattr(cfg, "grow_policy", None) or "lossguide"
    if policy not in GROW_POLICIES:
        raise ValueError(f"grow_policy must be one of {', '.join(GROW_POLICIES)}, got {policy!r}")
    given = getattr(cfg, "max_depth", None)
    if given is not None:
        return policy, int(given)
    return policy, (0 if policy == "lossguide" else max(1, math.ceil(math.log2(max(2, cfg.leaves)))))


def _rounds_from_marks(before: list[float], after: list[float]) -> list[float]:
    """Round i lasts from the end of round i-1 (the start of round 0) to the end of round i."""
    if not after:
        return []
    return [after[0] - before[0]] + [b - a for a, b in zip(after[:-1], after[1:], strict=True)]


# --------------------------------------------------------------------------------------------- mdhom


class Mdhom(System):
    name = "mdhom"

    def probe(self) -> str | None:
        errors = []
        for module in ("mdhom", "mdhom.trees"):
            mod, err = _import(module)
            if mod is not None and hasattr(mod, "TreeBoostClassifier"):
                self.cls = mod.TreeBoostClassifier
                return None
            errors.append(err or f"{module} has no TreeBoostClassifier")
        return "; ".join(errors)

    def params(self, cfg: Any) -> tuple[dict[str, Any], list[str]]:
        policy, depth = tree_shape(cfg)
        wanted = {
            "n_estimators": cfg.rounds,
            "learning_rate": cfg.learning_rate,
            "grow_policy": policy,
            "max_leaves": cfg.leaves,
            "max_depth": depth,
            "max_bin": cfg.bins,
            "subsample": 1.0,
            "colsample_bytree": 1.0,
            "random_state": cfg.seed,
            "device": cfg.device,
            "precision": cfg.precision,
        }
        blank = self.cls()
        known = set(blank.get_params()) if hasattr(blank, "get_params") else set(wanted)
        dropped = [k for k, v in wanted.items() if k not in known and v is not None]
        return {k: v for k, v in wanted.items() if k in known and v is not None}, dropped

    @staticmethod
    def _device_name(model: Any, cfg: Any) -> str | None:
        """The estimator's ``device_`` if it has one, else the device the same spec resolves to here."""
        device = getattr(model, "device_", None)
        if device is not None:
            return getattr(device, "key", None) or str(device)
        if cfg.device == "numpy":
            return "numpy"
        try:
            from mdhom import get_device

            return f"{get_device(cfg.device if cfg.device is not None else 'auto').key} (resolved by the benchmark)"
        except Exception as exc:
            return f"unknown ({type(exc).__name__}: {exc})"

    def _run(self, X: np.ndarray, y: np.ndarray, Xt: np.ndarray, yt: np.ndarray, cfg: Any) -> dict[str, Any]:
        params, dropped = self.params(cfg)
        model = self.cls(**params)
        t0 = time.perf_counter()
        model.fit(X, y)
        fit_seconds = time.perf_counter() - t0
        out: dict[str, Any] = {"library": "mdhom", "params": params, "fit_seconds": fit_seconds, "warnings": []}
        if dropped:
            out["warnings"].append(f"estimator does not take {', '.join(dropped)}: left at its defaults")
        rounds = getattr(model, "round_times_", None)
        if rounds is not None and len(rounds) > 0:
            out["round_seconds"] = [float(t) for t in rounds]
            out["timing_source"] = "estimator round_times_ (host clock)"
        else:
            n = int(getattr(model, "n_estimators", cfg.rounds))
            out["round_seconds"] = [fit_seconds / n] * n
            out["timing_source"] = "fit_seconds / rounds (estimator exposes no round_times_)"
        build = getattr(model, "build_seconds_", None)
        out["build_seconds"] = float(build) if build is not None else None
        out["device"] = self._device_name(model, cfg)
        t0 = time.perf_counter()
        if hasattr(model, "decision_function"):
            scores = np.asarray(model.decision_function(Xt))
        else:
            scores = np.asarray(model.predict_proba(Xt))[:, 1]
        out["predict_seconds"] = time.perf_counter() - t0
        out["test_auc"] = _auc(yt, scores.reshape(len(yt), -1)[:, -1])
        if hasattr(model, "_device_predictor") and model._device_predictor(len(Xt)) is not None:
            out.update(self._predict_paths(model, Xt, out["predict_seconds"]))
        del model
        gc.collect()  # the timed fit's device buffers go before the profiled fit allocates its own
        if getattr(cfg, "profile_rounds", 0):
            out["profile"] = self._profile(X, y, cfg, params)
        return out

    @staticmethod
    def _predict_paths(model: Any, Xt: np.ndarray, first: float) -> dict[str, Any]:
        """The device walk of the test rows (built already, timed again) against the numpy walk on the first
        NUMPY_PREDICT_ROWS of them (all of them would take minutes at 10M rows): seconds per row of each, and
        whether they agree bit for bit."""
        from mdhom.trees import estimators

        t0 = time.perf_counter()
        device_raw = model._raw(Xt)
        warm = time.perf_counter() - t0
        n = min(len(Xt), NUMPY_PREDICT_ROWS)
        saved = estimators.DEVICE_PREDICT_MIN
        estimators.DEVICE_PREDICT_MIN = 1 << 62
        try:
            t0 = time.perf_counter()
            numpy_raw = model._raw(Xt[:n])
            numpy_s = time.perf_counter() - t0
        finally:
            estimators.DEVICE_PREDICT_MIN = saved
        return {"predict_first_seconds": first, "predict_seconds": warm, "predict_rows": len(Xt),
                "predict_numpy_rows": n, "predict_numpy_seconds": numpy_s,
                "predict_device_speedup": (numpy_s / n) / (warm / len(Xt)) if warm > 0 else None,
                "predict_identical": bool(np.array_equal(device_raw[:n], numpy_raw))}

    def _profile(self, X: np.ndarray, y: np.ndarray, cfg: Any, params: dict[str, Any]) -> dict[str, Any]:
        """A second, shorter fit with OpenCL profiling on: where a round's time goes (mdhom/bench/profile.py); then
        its timeline (a third fit of as many rounds)."""
        from mdhom.bench.profile import record_fit, summarize

        rounds = max(1, min(cfg.profile_rounds, cfg.rounds))
        try:
            with record_fit() as recorder:
                model = self.cls(**{**params, "n_estimators": rounds}).fit(X, y)
            if recorder.backend is None:
                reason = recorder.unsupported or "the estimator built no backend through make_kernels"
                return {"status": "unavailable", "reason": reason}
            from mdhom.bench.profile import copy_bandwidth

            copy = copy_bandwidth(recorder.backend.device)
            out = {"status": "ok", **summarize(list(model.round_times_), recorder.rounds()),
                   "copy_bytes_per_second": copy}
            del model, recorder
            gc.collect()
        except Exception as exc:  # the timed run stands without its profile
            return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        try:
            out["timeline"] = self._timeline(X, y, params, rounds)
        except Exception as exc:  # the profile stands without its timeline
            out["timeline"] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        return out


    def _timeline(self, X: np.ndarray, y: np.ndarray, params: dict[str, Any], rounds: int) -> dict[str, Any]:
        """A third fit, at full speed, whose launches' events tell how much of each round the device was busy."""
        from mdhom.bench.profile import record_timeline, summarize_timeline

        with record_timeline() as recorder:
            model = self.cls(**{**params, "n_estimators": rounds}).fit(X, y)
        if recorder.backend is None:
            return {"status": "unavailable", "reason": recorder.unsupported or "no backend made through make_kernels"}
        return {"status": "ok", **summarize_timeline(list(model.round_times_), recorder.rounds)}


# ------------------------------------------------------------------------------------------ LightGBM


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

ANCHORS: dict[str, type[System]] = {
    "lightgbm-cpu": LightGBM,
    "lightgbm-opencl": LightGBMOpenCL,
    "xgboost-cpu": XGBoost,
    "xgboost-cuda": XGBoostCUDA,
    "catboost-gpu": CatBoostGPU,
}
ALIASES = {
    "lightgbm": "lightgbm-cpu",
    "xgboost": "xgboost-cpu",
    "lightgbm-gpu": "lightgbm-opencl",
    "xgboost-gpu": "xgboost-cuda",
    "catboost": "catboost-gpu",
}


def select(names: list[str] | None, include_mdhom: bool = True) -> list[System]:
    """mdhom first, then the anchors asked for; ``None`` = every installed one (GPU ones if a GPU is visible).

    An anchor named explicitly is always listed, as unavailable with its reason if it cannot run; under the
    default an anchor that is not installed is listed the same way, so the report says what was missing.
    """
    chosen: list[System] = [Mdhom()] if include_mdhom else []
    if names is None:
        has_gpu = gpu_visible()
        for cls in ANCHORS.values():
            system = cls()
            if system.gpu and not has_gpu:
                continue
            chosen.append(system)
        return chosen
    seen = set()
    for raw in names:
        key = ALIASES.get(raw.strip().lower(), raw.strip().lower())
        if key in ("", "none") or key in seen:
            continue
        if key not in ANCHORS:
            raise ValueError(f"unknown anchor {raw!r}; known: {', '.join([*ANCHORS, *ALIASES])}, none")
        seen.add(key)
        chosen.append(ANCHORS[key]())
    return chosen
