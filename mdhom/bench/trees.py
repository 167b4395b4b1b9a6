"""``mdhom bench trees``: the Higgs-shaped boosting benchmark (the README's Tuning and benchmarks section).

The real HIGGS file (11M rows, 2.6 GB) cannot ship with the package or be fetched on the GPU machine, so the
workload is synthetic but shaped like it: 28 dense float32 features, of which 21 are "low-level" kinematics
of five objects (a positive skewed pT, a bounded eta, a uniform phi and a discrete b-tag each) and 7 are
"high-level" invariant masses computed from them, as in the physics data; the label depends on a resonance
in one pair mass, b-tags and angular terms, so it is learnable but nonlinear and AUC means something. Data is
generated block by block, each block from its own seeded stream, so any slice can be produced on its own
(bounded memory, threads) and a chunked generation equals the one-shot one bit for bit.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BLOCK_ROWS", "TreesConfig", "make_higgs_like", "roc_auc", "run_trees", "format_table", "write_json"]

BLOCK_ROWS = 1 << 15  # rows drawn from one random stream; fixed so that a row's values never depend on chunking

TRAIN_STREAM, TEST_STREAM = 0, 1
_RESONANCE = 1.0  # the pair mass around which the signal concentrates (units of the standardised pT)
_OFFSET = 0.95  # centres the logit so that about 53% of rows are positive (28 features), as in HIGGS


# ------------------------------------------------------------------------------------------- workload


def _objects(features: int) -> int:
    low = features - features // 4
    return low // 4


def _pair_mass(pt: np.ndarray, eta: np.ndarray, phi: np.ndarray, i: int, j: int) -> np.ndarray:
    """Massless two-body invariant mass: sqrt(2 pT_i pT_j (cosh(d eta) - cos(d phi)))."""
    return np.sqrt(2.0 * pt[:, i] * pt[:, j] * (np.cosh(eta[:, i] - eta[:, j]) - np.cos(phi[:, i] - phi[:, j])))


def _block(seed: int, stream: int, block: int, features: int, nan_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """One full block of ``BLOCK_ROWS`` rows; the draws happen in a fixed order, whatever slice is wanted."""
    rng = np.random.default_rng([seed, stream, block])
    n = BLOCK_ROWS
    high = features // 4
    low = features - high
    n_obj = low // 4
    X = np.empty((n, features), dtype=np.float64)
    if n_obj >= 2:
        pt = rng.lognormal(0.0, 0.5, size=(n, n_obj))
        eta = np.clip(rng.normal(0.0, 1.0, size=(n, n_obj)), -2.5, 2.5)
        phi = rng.uniform(-math.pi, math.pi, size=(n, n_obj))
        btag = rng.choice(np.array([0.0, 1.1, 2.2]), p=[0.6, 0.25, 0.15], size=(n, n_obj))
        X[:, 0 : 4 * n_obj : 4] = pt
        X[:, 1 : 4 * n_obj : 4] = eta
        X[:, 2 : 4 * n_obj : 4] = phi
        X[:, 3 : 4 * n_obj : 4] = btag
        for j in range(4 * n_obj, low):  # leftover low-level columns: missing-energy-like magnitudes
            X[:, j] = rng.exponential(1.0, size=n)
        pairs = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3), (0, 4)]
        for k in range(high):
            i, j = (v % n_obj for v in pairs[k % len(pairs)])
            if i == j:
                j = (i + 1) % n_obj
            X[:, low + k] = _pair_mass(pt, eta, phi, i, j) * rng.lognormal(0.0, 0.05, size=n)
        m01 = _pair_mass(pt, eta, phi, 0, 1)
        score = (
            2.2 * np.exp(-(((m01 - _RESONANCE) / 0.3) ** 2))
            + 0.45 * (btag[:, 0] + btag[:, 1])
            - 0.35 * np.abs(eta[:, 0] - eta[:, 1])
            + 0.6 * np.tanh(pt[:, 0] + pt[:, 1] - pt[:, 2:].sum(axis=1) / max(n_obj - 2, 1))
            + 0.4 * np.cos(phi[:, 0] - phi[:, 1]) * np.sign(eta[:, 0] * eta[:, 1])
        )
        if n_obj >= 4:
            score += 0.8 * np.exp(-(((_pair_mass(pt, eta, phi, 2, 3) - 1.3) / 0.4) ** 2))
    else:  # too few columns for objects: a plain nonlinear function of normal features
        X[:] = rng.normal(size=(n, features))
        a, b, c = X[:, 0], X[:, 1 % features], X[:, 2 % features]
        score = 1.5 * np.sin(2.0 * a) + a * b + 0.8 * (c > 0.5) + _OFFSET
    logit = 1.6 * (score - _OFFSET)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    if nan_fraction > 0.0:
        X[rng.random((n, features)) < nan_fraction] = np.nan
    return X.astype(np.float32), y


def make_higgs_like(
    rows: int,
    features: int = 28,
    seed: int = 0,
    nan_fraction: float = 0.0,
    stream: int = TRAIN_STREAM,
    start: int = 0,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start .. start+rows`` of the seeded Higgs-shaped stream: ``(X float32 (rows, features), y)``.

    ``y`` is float32 0/1. Use another ``stream`` for test data (train and test then never share rows).
    ``nan_fraction`` blanks that share of cells at random after the label is drawn (missing at random).
    Memory beyond the output is one block per thread.
    """
    if rows < 0 or start < 0 or features < 1:
        raise ValueError(f"rows, start must be >= 0 and features >= 1 (got {rows}, {start}, {features})")
    if not 0.0 <= nan_fraction < 1.0:
        raise ValueError(f"nan_fraction must lie in [0, 1), got {nan_fraction}")
    X = np.empty((rows, features), dtype=np.float32)
    y = np.empty(rows, dtype=np.float32)
    if rows == 0:
        return X, y
    first, last = start // BLOCK_ROWS, (start + rows - 1) // BLOCK_ROWS

    def fill(block: int) -> None:
        bx, by = _block(seed, stream, block, features, nan_fraction)
        lo = max(start, block * BLOCK_ROWS)
        hi = min(start + rows, (block + 1) * BLOCK_ROWS)
        X[lo - start : hi - start] = bx[lo - block * BLOCK_ROWS : hi - block * BLOCK_ROWS]
        y[lo - start : hi - start] = by[lo - block * BLOCK_ROWS : hi - block * BLOCK_ROWS]

    blocks = range(first, last + 1)
    if threads > 1 and len(blocks) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(fill, blocks))
    else:
        for block in blocks:
            fill(block)
    return X, y


# ------------------------------------------------------------------------------------------------ AUC


def roc_auc(y_true: Any, y_score: Any) -> float:
    """Area under the ROC curve by the rank-sum (Mann-Whitney) formula, tied scores sharing their mean rank.

    Numpy only, so that benchmarks need no scikit-learn; equals ``sklearn.metrics.roc_auc_score`` for
    binary labels (any two values; the larger is the positive class).
    """
    y = np.asarray(y_true).ravel()
    s = np.asarray(y_score, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"y_true has {y.size} entries, y_score {s.size}")
    if np.isnan(s).any():
        raise ValueError("y_score contains NaN")
    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"roc_auc needs exactly two classes in y_true, found {classes.size}")
    positive = y == classes[1]
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    # mean rank (1-based) of each run of equal scores
    edges = np.flatnonzero(np.diff(sorted_s)) + 1
    starts = np.concatenate(([0], edges))
    ends = np.concatenate((edges, [s.size]))
    mean_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(s.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    n_pos = int(positive.sum())
    n_neg = s.size - n_pos
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


# ------------------------------------------------------------------------------------------- the run


@dataclass
class TreesConfig:
    """Everything that defines one benchmark run; written verbatim into the JSON report."""

    rows: int = 10_500_000
    test_rows: int = 500_000
    features: int = 28
    leaves: int = 255
    bins: int = 63
    rounds: int = 100
    learning_rate: float = 0.1
    threads: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    device: str | None = None  # mdhom device spec
    precision: str | None = None  # mdhom precision; None = the estimator's default
    anchors: list[str] | None = None  # None = every installed anchor (GPU ones only when a GPU is visible)
    seed: int = 0
    nan_fraction: float = 0.0
    grow_policy: str = "lossguide"  # LightGBM's leaf-wise growth, the anchors' own default
    max_depth: int | None = None  # depth limit for every system; None: none for lossguide, log2(leaves) else
    profile_rounds: int = 20  # rounds of the extra, profiled mdhom fit (0: none)
    include_mdhom: bool = True
    lightgbm_platform: int | None = None
    lightgbm_device: int | None = None
    quick: bool = False
    isolate: bool = True  # one process per system (see _run_isolated); --quick runs in-process
    repeats: int = 1  # runs of every system, alternating (see run_trees); s/round is the median of their medians

    @classmethod
    def quick_config(cls, **overrides: Any) -> TreesConfig:
        """The CI size: seconds per system, still enough rows for an AUC well above chance."""
        base = {
            "rows": 20_000,
            "test_rows": 5_000,
            "leaves": 15,
            "rounds": 5,
            "profile_rounds": 5,
            "quick": True,
            "isolate": False,
        }
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


def _round_stats(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"round_median_seconds": None, "first_round_seconds": None}
    rest = seconds[1:] if len(seconds) > 1 else seconds
    return {
        "round_median_seconds": float(np.median(rest)),
        "first_round_seconds": float(seconds[0]),
        "rounds_in_median": len(rest),
    }


def _workload(config: TreesConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    t0 = time.perf_counter()
    X, y = make_higgs_like(
        config.rows, config.features, config.seed, config.nan_fraction, TRAIN_STREAM, threads=config.threads
    )
    Xt, yt = make_higgs_like(
        config.test_rows, config.features, config.seed, config.nan_fraction, TEST_STREAM, threads=config.threads
    )
    stats = {
        "positive_fraction": float(y.mean()) if y.size else None,
        "generate_seconds": time.perf_counter() - t0,
    }
    return X, y, Xt, yt, stats


def _run_isolated(name: str, config: TreesConfig) -> dict[str, Any]:
    """Run one system in a fresh interpreter that regenerates the (seeded) workload itself.

    Thread pools (OpenMP in LightGBM and XGBoost, PoCL's pthreads, TBB in Intel's runtime), allocator state
    and GPU contexts of one system then cannot slow the next, and a crash in one is a recorded failure.
    """
    with tempfile.TemporaryDirectory(prefix="mdhom-bench-") as tmp:
        cfg_path, out_path = Path(tmp, "config.json"), Path(tmp, "result.json")
        cfg_path.write_text(json.dumps(asdict(config)))
        code = "import sys; from mdhom.bench.trees import _worker; _worker(*sys.argv[1:])"
        proc = subprocess.run(
            [sys.executable, "-c", code, str(cfg_path), name, str(out_path)], capture_output=True, text=True
        )
        if proc.returncode != 0 or not out_path.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
            return {
                "system": name,
                "status": "failed",
                "reason": f"worker process exited with status {proc.returncode}: {' | '.join(tail)}",
            }
        return json.loads(out_path.read_text())


def _worker(config_path: str, name: str, out_path: str) -> None:
    """Entry point of the isolated run: same data (same seed), one system, result as JSON."""
    from mdhom.bench import anchors

    config = TreesConfig(**json.loads(Path(config_path).read_text()))
    system = anchors.Mdhom() if name == "mdhom" else anchors.ANCHORS[name]()
    X, y, Xt, yt, stats = _workload(config)
    result = system.run(X, y, Xt, yt, config)
    result["workload"] = stats
    write_json(result, out_path)


def run_trees(config: TreesConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Generate the workload, train every selected system on it, and return the report (JSON-ready).

    With ``config.isolate`` each system runs in its own process on a regenerated copy of the data (the
    generator is seeded and block-deterministic, so every copy is identical); otherwise all share this one.

    With ``config.repeats`` > 1 every system runs that many times, the systems taking turns and every other
    repeat in reverse order (mdhom, anchors, anchors, mdhom, ...): a shared machine's drift, which moved a 2-core
    host's rounds by 38% between two runs of the same fit, then falls on every system alike. A system's s/round is
    the median of its runs' medians, and each anchor's runs are also compared with mdhom's run by run
    (``paired_ratios``); only the first repeat profiles mdhom's rounds.
    """
    from mdhom.bench import anchors
    from mdhom.bench.merge import add_ratios

    systems = anchors.select(config.anchors, include_mdhom=config.include_mdhom)
    stats: dict[str, Any] = {"positive_fraction": None, "generate_seconds": None}
    if not config.isolate:
        X, y, Xt, yt, stats = _workload(config)
        log(
            f"workload: {config.rows} x {config.features} train, {config.test_rows} test, "
            f"{stats['positive_fraction']:.3f} positive, generated in {stats['generate_seconds']:.1f} s"
        )
    runs: dict[str, list[dict[str, Any]]] = {system.name: [] for system in systems}
    for rep in range(config.repeats):
        cfg = config if rep == 0 else replace(config, profile_rounds=0)
        which = f" (repeat {rep + 1} of {config.repeats})" if config.repeats > 1 else ""
        for system in systems if rep % 2 == 0 else systems[::-1]:
            if system.reason is not None:
                if rep == 0:
                    runs[system.name].append(system.run(None, None, None, None, cfg))
                continue
            if runs[system.name] and runs[system.name][-1]["status"] != "ok":
                continue  # failed once: not run again
            log(f"{system.name}: running{which}")
            if cfg.isolate:
                result = _run_isolated(system.name, cfg)
                if "workload" in result and stats["generate_seconds"] is None:
                    stats = result["workload"]
            else:
                result = system.run(X, y, Xt, yt, cfg)
            result.update(_round_stats(result.get("round_seconds") or []))
            runs[system.name].append(result)
    results = [_repeated(runs[system.name], config.repeats) for system in systems]
    for result in results:
        if result["status"] == "ok":
            log(f"{result['system']}: {result['round_median_seconds']:.4g} s/round, AUC {result['test_auc']:.4f}")
        elif result["status"] == "unavailable":  # why goes once, under the table (it printed twice here)
            log(f"{result['system']}: unavailable")
        else:
            log(f"{result['system']}: {result['status']}: {result['reason']}")
    add_ratios(results)
    _paired_ratios(results)
    return {
        "benchmark": "trees",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "parameters": asdict(config),
        "workload": {
            "kind": "higgs-like synthetic (mdhom.bench.trees.make_higgs_like)",
            "train_rows": config.rows,
            "test_rows": config.test_rows,
            "features": config.features,
            "nan_fraction": config.nan_fraction,
            "isolated_processes": config.isolate,
            **stats,
        },
        "machine": machine_info(),
        "versions": versions(),
        "ratio_note": "ratio_to_mdhom = system's median seconds per round / mdhom's (2.0: twice as slow as mdhom)",
        "results": results,
    }


def _repeated(results: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """One system's result from its runs (of ``repeats`` asked for): the first run's, with ``repeats`` (each run's
    rounds and median) and s/round the median of the runs' medians where it ran more than once; a failed run's result
    where one failed (the system was not run again)."""
    failed = next((r for r in results if r["status"] != "ok"), None)
    if failed is not None or len(results) == 1:
        out = dict(failed if failed is not None else results[0])
        if out["status"] == "failed" and repeats > 1:  # (an unavailable system ran in no repeat)
            out["reason"] = f"run {results.index(failed) + 1} of {repeats}: {out.get('reason')}"
        return out
    out = dict(results[0])
    out["repeats"] = [{key: r.get(key) for key in ("round_median_seconds", "first_round_seconds", "fit_seconds",
                                                   "round_seconds")} for r in results]
    out["round_median_seconds"] = float(np.median([r["round_median_seconds"] for r in results]))
    return out


def _paired_ratios(results: list[dict[str, Any]], baseline: str = "mdhom") -> None:
    """Each repeated system's runs against the baseline's run for run (``paired_ratios``, its median in
    ``paired_ratio_median``): the same repeat ran them next to each other."""
    base = next((r for r in results if r.get("system") == baseline and r.get("repeats")), None)
    if base is None:
        return
    ref = [run["round_median_seconds"] for run in base["repeats"]]
    for r in results:
        if r.get("repeats") and len(r["repeats"]) == len(ref):
            ratios = [run["round_median_seconds"] / b for run, b in zip(r["repeats"], ref, strict=True)]
            r["paired_ratios"] = ratios
            r["paired_ratio_median"] = float(np.median(ratios))


def machine_info() -> dict[str, Any]:
    """Enough to tell runs apart later: CPU model, cores usable, memory, visible GPUs."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
        with open("/proc/meminfo") as f:
            kib = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
            info["memory_gib"] = round(kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    from mdhom.bench.anchors import gpu_names

    info["gpus"] = gpu_names()
    info["host_probe"] = host_probe()
    return info


HOST_PROBE_LOOPS = 100_000


def host_probe(loops: int = HOST_PROBE_LOOPS) -> dict[str, Any] | None:
    """Milliseconds a fixed pure-Python loop takes on each usable CPU, the calling thread pinned to each in turn (its
    affinity restored after; a CPU that refuses the pin is left out); None where no CPU can be pinned.

    A GPU fit's round is bound by its host thread (launches, Python per split step), so it runs as fast as the CPU
    under that thread. On shared virtual machines CPUs differ and which ones are slow changes within seconds (the
    H200 machine: this loop 5.9-11.5 ms across its 16 vCPUs in one report, a loop 20x longer 199-389 ms, other CPUs
    slow a minute later), which moves a GPU fit's rounds between fits of one process by as much (13 vs 18-20 ms a
    loss-guided round). Reports take it after the fits: it shows how uneven the host is, not what each fit ran on."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return None
    ms: dict[int, float] = {}
    pinned = False
    try:
        for c in cpus:
            try:
                os.sched_setaffinity(0, {c})
            except OSError:  # a CPU the process may not pin to (a sandbox, a CPU gone offline)
                continue
            pinned = True
            t0 = time.perf_counter()
            acc = 0
            for i in range(loops):
                acc += i * i
            ms[c] = (time.perf_counter() - t0) * 1e3
    finally:
        if pinned:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus)
    if not ms:
        return None
    v = sorted(ms.values())
    return {"loops": loops, "cpus": len(v), "min_ms": round(v[0], 2), "median_ms": round(float(np.median(v)), 2),
            "max_ms": round(v[-1], 2), "per_cpu_ms": {str(c): round(t, 2) for c, t in ms.items()}}


# The distributions a module may come from: XGBoost's CPU-only wheel is the distribution ``xgboost-cpu``.
DISTRIBUTIONS = {"xgboost": ("xgboost", "xgboost-cpu")}


def versions() -> dict[str, str | None]:
    """Versions of mdhom and the anchors: the imported module's ``__version__`` (what actually ran), else the
    installed distribution's, under each name the module ships as; ``None`` when not installed."""
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for name in ("mdhom", "numpy", "pyopencl", "lightgbm", "xgboost"):
        version = getattr(sys.modules.get(name), "__version__", None)
        for dist in () if version else DISTRIBUTIONS.get(name, (name,)):
            try:
                version = md.version(dist)
                break
            except md.PackageNotFoundError:
                continue
        out[name] = None if version is None else str(version)
    return out


# ------------------------------------------------------------------------------------------- output


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return format("-", ">" + spec.split(".")[0])
    return format(value, spec)


def format_table(report: dict[str, Any]) -> str:
    """The report as a fixed-width table, one line per system, reasons for the absent ones below."""
    p = report["parameters"]
    merged = bool(report.get("merged"))
    head = (
        f"trees: {report['workload']['train_rows']} x {report['workload']['features']} rows, "
        f"{p['leaves']} leaves ({p.get('grow_policy', 'lossguide')}), {p['bins']} bins, "
        + ("" if merged else f"{p['rounds']} rounds, ")
        + f"lr {p['learning_rate']}"
        + ("" if merged else f", {p['threads']} threads")
    )
    w = max([18, *(len(str(r.get("label", r["system"]))) + 2 for r in report["results"])])
    cols = f"{'system':<{w}}{'s/round':>10}{'1st round':>11}{'build s':>9}{'fit s':>9}{'AUC':>8}{'vs mdhom':>10}"
    cols += f"{'run':>5}" if merged else ""
    lines = [head, cols, "-" * len(cols)]
    notes = []
    for r in report["results"]:
        name = r.get("label", r["system"])
        run = f"{'[' + str(r.get('source_index', '?')) + ']':>5}" if merged else ""
        if r["status"] != "ok":
            lines.append(f"{name:<{w}}{r['status']:>12}{'':>48}{run}")
            notes.append(f"  {name}: {r['reason']}")
            continue
        lines.append(
            f"{name:<{w}}{_fmt(r['round_median_seconds'], '10.4g')}{_fmt(r['first_round_seconds'], '11.4g')}"
            f"{_fmt(r.get('build_seconds'), '9.3g')}{_fmt(r.get('fit_seconds'), '9.3g')}"
            f"{_fmt(r.get('test_auc'), '8.4f')}{_fmt(r.get('ratio_to_mdhom'), '10.3g')}{run}"
        )
        if r.get("timing_source", "").startswith("fit"):
            notes.append(f"  {name}: per-round time is {r['timing_source']}")
        for warning in r.get("warnings", []):
            notes.append(f"  {name}: {warning}")
    lines.append("s/round: median over rounds 2..n (round 1 is warm-up); build s: program builds / booster init")
    repeated = [r for r in report["results"] if r["status"] == "ok" and r.get("repeats")]
    if repeated:
        lines.append(f"repeats: {len(repeated[0]['repeats'])} runs of every system taking turns (every other in "
                     "reverse order); s/round is the median of its runs' medians, 1st round, build and fit the "
                     "first run's")
        base = "its own report's mdhom" if merged else "mdhom"  # (paired within the run that measured them)
        for r in repeated:
            per_run = " ".join(f"{run['round_median_seconds']:.4g}" for run in r["repeats"])
            paired = r.get("paired_ratios")
            vs = "" if not paired or r["system"] == "mdhom" else (
                f"; vs {base} run by run {' '.join(f'{x:.3g}' for x in paired)} "
                f"(median {r['paired_ratio_median']:.3g})")
            lines.append(f"  {r.get('label', r['system'])}: s/round per run {per_run}{vs}")
    probe = (report.get("machine") or {}).get("host_probe")
    if probe:
        lines.append(f"host CPUs: a fixed Python loop took {probe['min_ms']:.4g}-{probe['max_ms']:.4g} ms across "
                     f"{probe['cpus']} CPUs (median {probe['median_ms']:.4g}); host-bound rounds (GPU fits) run at "
                     "the speed of the CPU under the fit's thread")
    predict = [r for r in report["results"] if r["status"] == "ok" and r.get("predict_seconds") is not None]
    if predict:
        lines.append("prediction of the test rows (s): " + ", ".join(
            f"{r.get('label', r['system'])} {r['predict_seconds']:.4g}" for r in predict))
    for r in predict:
        if r.get("predict_numpy_seconds") is not None:
            lines.append(
                f"  {r.get('label', r['system'])}: device walk {r['predict_seconds']:.4g} s for {r['predict_rows']} "
                f"rows (first call with its build {r['predict_first_seconds']:.4g} s); numpy walk "
                f"{r['predict_numpy_seconds']:.4g} s for {r['predict_numpy_rows']} rows: "
                f"{_fmt(r.get('predict_device_speedup'), '.3g').strip()}x per row, "
                f"identical: {r['predict_identical']}")
    if merged:
        for i, src in enumerate(report.get("sources", []), 1):
            sp = src.get("parameters") or {}
            lines.append(
                f"[{i}] {src['path']} ({src.get('date')}): {sp.get('rounds')} rounds, {sp.get('threads')} threads, "
                f"device {sp.get('device')}, precision {sp.get('precision')}"
            )
        lines += [f"  merge warning: {w}" for w in report.get("merge_warnings", [])]
    lines += notes
    for r in report["results"]:
        if r["status"] == "ok" and r.get("profile"):
            from mdhom.bench.profile import format_profile

            title = r.get("label", r["system"]) if merged else r["system"]
            lines += ["", format_profile(r["profile"], r.get("round_median_seconds"), title)]
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Atomic: a reader never sees half a report."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, path)
