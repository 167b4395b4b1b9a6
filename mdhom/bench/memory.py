"""``mdhom bench memory``: the extra memory of one fit on wide sparse data, per device (issue 11's figure).

The workload is a seeded scipy.sparse CSR matrix (default 20000 x 5000 with 100k stored entries, values uniform in
[0, 1)) and a binary target that depends on a few of its columns. Each (device, precision) fits in a fresh Python
process, so that one fit's peak never hides another's: the process imports mdhom, makes the data and the device's
OpenCL context, then resets the kernel's peak-RSS counter (``/proc/self/clear_refs``, Linux) and reads the
baseline; the figure is the peak resident set during ``fit`` (``VmHWM``) less that baseline. Each configuration runs
twice, in two processes: the first builds the OpenCL programs (an LLVM compile per kernel the first time; the
runtimes keep the binaries in their caches) and its growth is reported as ``first_fit_growth_mib``; the second,
measured, process loads them, so the figure is what training holds and not what a compiler needed once. (A second
fit in the same process would reuse memory the first freed but the allocator kept, and read too low.) Where the
peak cannot be reset, ``ru_maxrss`` stands in and the report says so.

Resident memory does not show what a GPU holds, and CPU runtimes allocate their buffers lazily (pages never
touched are never resident), so the report adds, for OpenCL devices, the most bytes the fit's workspace had
allocated at once (:attr:`mdhom.components.workspace.Workspace.peak_bytes`).

Nothing here touches the network.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MiB = float(1 << 20)


@dataclass
class MemoryConfig:
    rows: int = 20000
    features: int = 5000
    nnz: int = 100_000
    rounds: int = 10
    seed: int = 0
    devices: list[str] | None = None  # None: numpy and every OpenCL compute device
    precisions: tuple[str, ...] = ("double", "quantized")
    grow_policy: str = "depthwise"
    max_leaves: int = 0

    @classmethod
    def quick_config(cls, **overrides: Any) -> MemoryConfig:
        base = {"rows": 2000, "features": 500, "nnz": 10_000, "rounds": 3}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


def make_sparse(rows: int, features: int, nnz: int, seed: int = 0) -> tuple[Any, np.ndarray]:
    """(CSR float64 X with ``nnz`` stored entries uniform in [0, 1), binary y): seeded. The stored positions are
    drawn by ``scipy.sparse.random`` from a numpy Generator (Floyd's sampling: no dense temporary)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    density = nnz / float(rows * features) if rows and features else 0.0
    X = sp.random(rows, features, density=density, format="csr", random_state=rng, dtype=np.float64)
    signal = np.asarray(X[:, : min(features, 20)].sum(axis=1)).ravel() - np.asarray(
        X[:, min(features, 20): min(features, 40)].sum(axis=1)).ravel()
    y = (signal + 0.1 * rng.standard_normal(rows) > 0).astype(np.int64)
    return X, y


def _status(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / MiB
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def measure_one(config: MemoryConfig, device: str, precision: str) -> dict[str, Any]:
    """One fit in this process (call it in a fresh one): peak RSS growth of ``fit`` in MiB, and more."""
    import resource
    import time

    from mdhom import TreeBoostClassifier

    X, y = make_sparse(config.rows, config.features, config.nnz, config.seed)
    seen: list[Any] = []
    if device != "numpy":
        from mdhom.components import workspace
        from mdhom.devices import get_device

        get_device(device).queue  # noqa: B018 - the context and queue exist before the baseline
        load = workspace.Workspace.load

        def spy(self: Any, *a: Any, **k: Any) -> Any:
            seen.append(self)
            return load(self, *a, **k)

        workspace.Workspace.load = spy
    params = dict(n_estimators=config.rounds, device=device, precision=precision, grow_policy=config.grow_policy,
                  max_leaves=config.max_leaves, max_depth=-1 if config.grow_policy == "lossguide" else 6,
                  random_state=config.seed)

    reset = _reset_peak()
    base = _status("VmRSS") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    t0 = time.perf_counter()
    est = TreeBoostClassifier(**params).fit(X, y)
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out = {"device": device, "precision": est.precision_, "status": "ok", "fit_seconds": round(seconds, 2),
           "baseline_mib": round(base, 1), "peak_mib": round(peak, 1), "growth_mib": round(peak - base, 1),
           "peak_source": "VmHWM" if reset else "ru_maxrss (peak not resettable: growth over the process's peak)",
           "n_bins": None, "device_peak_mib": None}
    if seen:
        ws = seen[-1]
        out["n_bins"] = int(ws.n_bins)
        out["device_peak_mib"] = round(ws.peak_bytes / MiB, 1)
        out["device_key"] = ws.device.key
    return out


def _devices(config: MemoryConfig) -> list[str]:
    if config.devices is not None:
        return list(config.devices)
    try:
        from mdhom.devices import compute_devices

        keys = [d.key for d in compute_devices()]
    except Exception:  # no OpenCL at all: numpy only
        keys = []
    return ["numpy"] + keys


def _run_child(config: MemoryConfig, device: str, precision: str) -> dict[str, Any]:
    code = ("import json, sys; from mdhom.bench.memory import MemoryConfig, measure_one; "
            "c = json.loads(sys.argv[1]); c['precisions'] = tuple(c['precisions']); "
            "print('MDHOM-MEMORY ' + json.dumps(measure_one(MemoryConfig(**c), sys.argv[2], sys.argv[3])))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(asdict(config)), device, precision],
                          capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("MDHOM-MEMORY ")), None)
    if proc.returncode == 0 and line:
        return json.loads(line[len("MDHOM-MEMORY "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"device": device, "precision": precision, "status": "failed", "error": " | ".join(tail)}


def run_memory(config: MemoryConfig, log: Any = print) -> dict[str, Any]:
    """Every (device, precision) in its own process; a failed one is recorded, not raised."""
    results = []
    for device in _devices(config):
        for precision in (("double",) if device == "numpy" else config.precisions):
            first = _run_child(config, device, precision)
            result = _run_child(config, device, precision) if first["status"] == "ok" else first
            if result["status"] == "ok":
                result["first_fit_growth_mib"] = first["growth_mib"]
            log(format_row(result))
            results.append(result)
    return {"benchmark": "memory", "parameters": asdict(config), "results": results}


def format_row(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"{r['device']:<40} {r['precision']:<10} failed: {r.get('error', '')}"
    dev = "" if r.get("device_peak_mib") is None else f"{r['device_peak_mib']:9.1f}"
    return (f"{r['device']:<40} {r['precision']:<10} {r['growth_mib']:9.1f} {r['first_fit_growth_mib']:9.1f} {dev:>9} "
            f"{'' if r.get('n_bins') is None else r['n_bins']:>6} {r['fit_seconds']:8.2f}")


def format_table(report: dict[str, Any]) -> str:
    p = report["parameters"]
    head = (f"fit of a {p['rows']} x {p['features']} CSR with {p['nnz']} stored entries, {p['rounds']} trees "
            f"({p['grow_policy']}), a fresh process per row\n"
            f"{'device':<40} {'precision':<10} {'RSS MiB':>9} {'1st fit':>9} {'dev MiB':>9} {'bins':>6} {'fit s':>8}")
    return "\n".join([head] + [format_row(r) for r in report["results"]])
