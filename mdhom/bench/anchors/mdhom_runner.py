"""mdhom itself as a system of the bench: its estimator, kernel profile, and the device prediction timed beside
the numpy walk."""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np

from mdhom.bench.anchors.base import System, _auc, _import, tree_shape

# rows of the numpy walk timed beside the device walk of mdhom's prediction (its seconds per row are compared)
NUMPY_PREDICT_ROWS = 1_000_000


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
