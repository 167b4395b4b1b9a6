"""Where a random forest's fit goes: ``python -m mdhom.bench.forest_profile --rows 1000000 --trees 50 --device gpu``.

Two fits of mdhom's RandomForestClassifier on the Higgs-shaped data of ``mdhom bench forests`` (same sizes, same
seed, after a two-tree warm-up that makes the program builds):

- a timed fit, its wall time split into phases by timing the calls that make them up: the bin edges
  (``BinMapper.fit``), binning the rows (``bin_rows``: on the device for OpenCL), the bag order (on the host:
  the numpy backend, and OpenCL CPUs inside ``start``), the backend's start (the bag's draws and counts, uploads,
  builds, the root level), the levels' split searches, the deepest level's totals, the routing, and the rest
  (the estimator's and grower's own host work: bookkeeping, thresholds, importances); with the launches and
  blocking reads per level. Launches return at once, so a phase also holds the device time of earlier launches
  it waits for (a level's first blocking step waits for the previous level's routing and partition;
  ``bin_rows`` only enqueues, ``start`` waits for it);
- a profiled fit (``Workspace.profile``: each launch waits for its events), for every kernel's device seconds
  and launch count. Profiling serialises launches, so its wall time is not the timed fit's.

The forests' sums are exact integers, so both fits grow the same trees; the report says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mdhom.bench.forests import ForestsConfig
from mdhom.bench.trees import machine_info, make_higgs_like, versions, write_json

PHASES = ("bin_edges", "bin_rows", "bag_order", "start", "levels", "deepest_totals", "route")


@contextlib.contextmanager
def _patched(obj: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    original = getattr(obj, name)
    setattr(obj, name, wrap(original))
    try:
        yield
    finally:
        setattr(obj, name, original)


def _timer(seconds: dict[str, float], key: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t0
        return timed
    return wrap


def _fit(est: Any, X: np.ndarray, y: np.ndarray, profile: bool) -> dict[str, Any]:
    """Fit with the phases timed (and, ``profile``, the kernels); the phase seconds, launches and levels."""
    from mdhom.forests import estimators as E
    from mdhom.forests import grower as G
    from mdhom.learn.binning import BinMapper

    seconds: dict[str, float] = {}
    per_level: list[dict[str, Any]] = []
    made: list[Any] = []

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            backend = original(*args)
            made.append(backend)
            ws = getattr(backend, "ws", None)
            if ws is not None:
                ws.profile = profile
            for name, key in (("bin_rows", "bin_rows"), ("start", "start"), ("route", "route"),
                              ("totals", "deepest_totals"), ("level", "levels")):
                if not hasattr(backend, name):  # a backend of another version (comparing commits)
                    continue
                method = _timer(seconds, key)(getattr(backend, name))
                if name in ("start", "level", "totals", "route") and ws is not None:
                    method = _counted(method, name, ws, per_level)
                setattr(backend, name, method)
            return backend
        return wrapped

    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(E, "make_backend", make))
        stack.enter_context(_patched(BinMapper, "fit", _timer(seconds, "bin_edges")))
        stack.enter_context(_patched(G, "bag_order", _timer(seconds, "bag_order")))
        t0 = time.perf_counter()
        est.fit(X, y)
        fit = time.perf_counter() - t0
    phases = {k: seconds.get(k, 0.0) for k in PHASES}
    phases["other_host"] = fit - sum(phases.values())
    out: dict[str, Any] = {"fit_s": fit, "phases_s": phases, "calls": per_level}
    ws = getattr(made[-1], "ws", None) if made else None
    if ws is not None:
        out.update(launches=ws.launches, syncs=ws.syncs)
        if profile:
            out["kernel_s"] = dict(sorted(ws.kernel_seconds.items(), key=lambda kv: -kv[1]))
    forest = est._forest
    out["trees_digest"] = [int(forest.offsets[-1]), float(forest.threshold.sum()), float(forest.value.sum())]
    return out


def _counted(f: Callable[..., Any], name: str, ws: Any, log: list[dict[str, Any]]) -> Callable[..., Any]:
    def counted(*args: Any) -> Any:
        launches, syncs, t0 = ws.launches, ws.syncs, time.perf_counter()
        result = f(*args)
        # slots: the level's (route: its last argument), or at the start every tree's root (its bag, argument 3)
        slots = args[3].n_trees if name == "start" else len(args[-1] if name == "route" else args[0])
        log.append({"call": name, "slots": slots, "s": time.perf_counter() - t0,
                    "launches": ws.launches - launches, "syncs": ws.syncs - syncs})
        return result
    return counted


def run_profile(cfg: ForestsConfig) -> dict[str, Any]:
    import mdhom

    threads = cfg.threads or len(os.sched_getaffinity(0))
    X, y = make_higgs_like(cfg.rows, cfg.features, cfg.seed, threads=threads)
    X = X.astype(np.float64)
    kw = dict(n_estimators=cfg.trees, max_depth=cfg.max_depth or None, max_bin=cfg.bins, random_state=cfg.seed,
              device=cfg.device, n_jobs=cfg.threads)
    t0 = time.perf_counter()
    mdhom.RandomForestClassifier(**{**kw, "n_estimators": 2}).fit(X[:2000], y[:2000])
    warm = time.perf_counter() - t0
    timed = _fit(mdhom.RandomForestClassifier(**kw), X, y, profile=False)
    profiled = _fit(mdhom.RandomForestClassifier(**kw), X, y, profile=True)
    return {"benchmark": "forest_profile", "config": {k: v for k, v in vars(cfg).items() if k != "extra"},
            "threads": threads, "warmup_s": warm, "timed": timed, "profiled": profiled,
            "same_trees": timed["trees_digest"] == profiled["trees_digest"], "machine": machine_info(),
            "versions": versions()}


def format_report(r: dict[str, Any]) -> str:
    c, t, p = r["config"], r["timed"], r["profiled"]
    lines = [f"forest fit profile: {c['rows']} x {c['features']} rows, {c['trees']} trees, max_depth "
             f"{c['max_depth'] or 'none'}, device {c['device']}; builds (warm-up) {r['warmup_s']:.2f} s",
             f"timed fit {t['fit_s']:.3f} s: {t.get('launches', 0)} launches, {t.get('syncs', 0)} blocking reads",
             "  phase              seconds   share"]
    for k, v in t["phases_s"].items():
        lines.append(f"  {k:18s} {v:8.3f} {100 * v / t['fit_s']:6.1f}%")
    lines.append("  per call (timed fit): call, slots, seconds, launches, syncs")
    for e in t["calls"]:
        lines.append(f"    {e['call']:7s} {e['slots']:8d} {e['s']:8.4f} {e['launches']:4d} {e['syncs']:3d}")
    lines.append(f"profiled fit {p['fit_s']:.3f} s (launches serialised); device seconds per kernel:")
    for k, v in p.get("kernel_s", {}).items():
        lines.append(f"  {k:28s} {v:8.4f}")
    lines.append(f"kernels {sum(p.get('kernel_s', {}).values()):.3f} s in all; same trees in both fits: "
                 f"{r['same_trees']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mdhom.bench.forest_profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--max-depth", type=int, default=10, help="0: none")
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("--bins", type=int, default=255)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="JSON report path")
    a = ap.parse_args(argv)
    cfg = ForestsConfig(rows=a.rows, trees=a.trees, max_depth=a.max_depth, features=a.features, bins=a.bins,
                        device=a.device, threads=a.threads, seed=a.seed, anchors=())
    report = run_profile(cfg)
    print(format_report(report))
    if a.out:
        write_json(report, a.out)
        print(f"report written to {a.out}")
    return 0 if report["same_trees"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
