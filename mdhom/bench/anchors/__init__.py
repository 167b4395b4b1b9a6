"""The systems ``mdhom bench trees`` times: mdhom and the anchor libraries, each behind the same small interface.

Every system maps the benchmark's parameters (leaves, bins, rounds, learning rate, threads) to its own names,
times each boosting round from a callback (or from the estimator's ``round_times_`` for mdhom), and reports a
dict; none of the anchors is a dependency, so each is probed by import and reported as unavailable, with the
reason, when it cannot run. A failure inside one system is recorded and the others still run.
"""

from __future__ import annotations

from mdhom.bench.anchors.base import GROW_POLICIES, System, gpu_names, gpu_visible, tree_shape
from mdhom.bench.anchors.catboost_runner import CatBoostGPU
from mdhom.bench.anchors.lightgbm_runner import LightGBM, LightGBMOpenCL
from mdhom.bench.anchors.mdhom_runner import Mdhom
from mdhom.bench.anchors.xgboost_runner import XGBoost, XGBoostCUDA

__all__ = ["ANCHORS", "GROW_POLICIES", "System", "select", "gpu_visible", "gpu_names", "tree_shape", "Mdhom",
           "LightGBM", "LightGBMOpenCL", "XGBoost", "XGBoostCUDA", "CatBoostGPU"]

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
