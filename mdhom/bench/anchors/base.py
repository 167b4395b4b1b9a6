"""What every system of ``mdhom bench trees`` shares: the interface (:class:`System`), GPU probing, the tree shape
the parameters map to, AUC and per-round times from a callback's marks."""

from __future__ import annotations

import gc
import glob
import importlib
import math
import os
import shutil
import subprocess
import traceback
from typing import Any

import numpy as np

GROW_POLICIES = ("lossguide", "depthwise")


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
