"""Search quality: on a space small enough to enumerate, how close does Optuna get, and how fast?

Measures every valid configuration of one kernel at one size live (once, saved as a replay table), takes
the exhaustive optimum, then replays TPE and random search at 10%, 25% and 50% of the evaluations, over
several seeds, and reports best-found / optimum. The replay makes the comparison cheap to repeat::

    python -m mdhom.tuning.search_quality --device pocl --out search_quality.json
    python -m mdhom.tuning.search_quality --table search_quality_table.json   # replay only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

FRACTIONS = (0.10, 0.25, 0.50)


def space_for(kernel_name: str, rows: int, device):
    """The experiment's space: the row dimension's work-groups and work-items free, the rest pinned at
    the default (a few hundred points: enumerable live in minutes on a CPU)."""
    from mdhom import tunable
    from mdhom.tuning.space import SearchSpace

    k = tunable.get(kernel_name)
    sizes = {**next(iter(k.size_classes.values())), "row": rows} if kernel_name in ("histogram", "gh_sum") else None
    if sizes is None:
        raise ValueError("the experiment is set up for the row-reduction kernels histogram and gh_sum")
    dims = k.dim_sizes(sizes)
    desc = k.describe(sizes)
    base = SearchSpace(desc, device, dims)
    fixed = {p: v for p, v in base.default.items() if p not in ("NUM_WG_row", "NUM_WI_row")}
    return k, sizes, SearchSpace(desc, device, dims, fixed)


def measure_all(kernel, sizes, space, device, repeats: int) -> dict[str, dict]:
    from dataclasses import asdict

    from mdhom.tuning.measure import LiveRunner
    from mdhom.tuning.space import config_key

    runner = LiveRunner(kernel, device, sizes, repeats=repeats, warmup=1)
    points = list(space.enumerate())
    table = {}
    t0 = time.perf_counter()
    for i, cfg in enumerate(points, 1):
        table[config_key(cfg)] = asdict(runner.evaluate(cfg))
        if i % 20 == 0 or i == len(points):
            print(f"  measured {i}/{len(points)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return table


def replay(space, table: dict[str, dict], seeds: int, fractions=FRACTIONS) -> dict:
    from mdhom.tuning.measure import ReplayRunner
    from mdhom.tuning.study import run_study

    ok = {k: v["seconds"] for k, v in table.items() if v["status"] == "ok"}
    optimum = min(ok.values())
    n = len(table)
    out = {"space_size": n, "valid_measured": len(ok), "optimum_s": optimum,
           "optimum_config": min(ok, key=ok.get), "default_s": None, "budgets": {}}
    from mdhom.tuning.space import config_key

    out["default_s"] = ok.get(config_key(space.default))
    out["within_5pct_of_optimum"] = sum(v <= 1.05 * optimum for v in ok.values())
    out["median_config_ratio"] = statistics.median(ok.values()) / optimum
    for frac in fractions:
        budget = max(2, round(frac * n))
        row = {}
        for sampler in ("tpe", "random"):
            ratios = []
            for seed in range(seeds):
                res = run_study(space, ReplayRunner(table), kernel="sq", size_class=f"{frac}", device_key="replay",
                                desc_hash=f"{sampler}{seed}", budget=budget, sampler=sampler, seed=seed)
                ratios.append(res.seconds / optimum)
            row[sampler] = {
                "median_ratio": statistics.median(ratios), "worst_ratio": max(ratios),
                "found_optimum": sum(r == 1.0 for r in ratios) / len(ratios), "ratios": ratios,
            }
        out["budgets"][f"{int(frac * 100)}%"] = {"evaluations": budget, **row}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--kernel", default="histogram")
    ap.add_argument("--rows", type=int, default=1 << 16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--table", type=Path, help="replay table: read if it exists, else measured live and written")
    ap.add_argument("--out", type=Path, help="write the summary JSON here")
    args = ap.parse_args(argv)

    import mdhom

    device = mdhom.get_device(args.device)
    kernel, sizes, space = space_for(args.kernel, args.rows, device)
    if args.table and args.table.exists():
        doc = json.loads(args.table.read_text())
        table = doc["measurements"]
        meta = doc.get("meta", {})
    else:
        print(f"measuring {len(list(space.enumerate()))} configurations of {args.kernel} {sizes} on {device.key}",
              file=sys.stderr)
        table = measure_all(kernel, sizes, space, device, args.repeats)
        meta = {"device": device.key, "kernel": args.kernel, "sizes": sizes, "fixed": space.fixed,
                "repeats": args.repeats}
        if args.table:
            from mdhom.configs import atomic_write_json

            atomic_write_json(args.table, {"meta": meta, "measurements": table})
    summary = {"meta": meta, **replay(space, table, args.seeds)}
    print(f"{meta.get('kernel')} {meta.get('sizes')} on {meta.get('device')}: {summary['space_size']} configurations, "
          f"exhaustive optimum {summary['optimum_s'] * 1e3:.3f} ms ({summary['optimum_config']}), default "
          f"{(summary['default_s'] or float('nan')) * 1e3:.3f} ms; {summary['within_5pct_of_optimum']} configurations "
          f"within 5% of it, the median configuration {summary['median_config_ratio']:.2f}x slower")
    print(f"{'budget':>8} {'evals':>6}  {'TPE median/worst best÷opt':>26} {'hit opt':>8}  "
          f"{'random median/worst':>20} {'hit opt':>8}   ({args.seeds} seeds)")
    for name, b in summary["budgets"].items():
        t, r = b["tpe"], b["random"]
        print(f"{name:>8} {b['evaluations']:>6}  {t['median_ratio']:>13.3f} / {t['worst_ratio']:<10.3f} "
              f"{t['found_optimum']:>8.0%}  "
              f"{r['median_ratio']:>9.3f} / {r['worst_ratio']:<8.3f} {r['found_optimum']:>8.0%}")
    if args.out:
        from mdhom.configs import atomic_write_json

        atomic_write_json(args.out, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
