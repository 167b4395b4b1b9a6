"""``mdhom demo``: build a few md_hom computations on a device and check them against numpy."""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run md_hom kernels (sum, argmax, histogram, scan) and check them")
    p.add_argument("--device", default=None, help="auto, cpu, gpu, or a device key (default: $MDHOM_DEVICE)")
    p.add_argument("--rows", type=int, default=100_003)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mdhom import get_device
    from mdhom.mdh import examples

    device = get_device(args.device)
    rng = np.random.default_rng(0)
    print(f"device: {device.key} ({device.name})")
    failures = 0
    for case in examples.demo_cases(args.rows, rng):
        t0 = time.perf_counter()
        got = case.run(device)
        dt = time.perf_counter() - t0
        ok = case.matches(got)
        failures += not ok
        print(f"  {case.name:<28} {'ok ' if ok else 'FAIL'}  {dt * 1e3:8.1f} ms (build included)")
    print("all results match numpy" if not failures else f"{failures} result(s) differ from numpy")
    return 1 if failures else 0
