"""``mdhom devices``: every OpenCL device found, with its key and role."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the OpenCL devices mdhom can use, with their keys")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import mdhom
    from mdhom.configs import tuned_status

    devs = mdhom.devices()
    if args.json:
        print(json.dumps([
            {k: getattr(d, k) for k in ("key", "platform", "name", "vendor", "type", "driver_version",
                                          "checker", "max_work_group_size", "local_mem_size", "compute_units")}
            | {"tuned": tuned_status(d)}
            for d in devs
        ], indent=2))
        return 0 if devs else 1
    if not devs:
        print("no OpenCL device found (is pyopencl[pocl] installed?)")
        return 1
    default = mdhom.get_device().key if mdhom.compute_devices() else None
    for d in devs:
        tuned = "" if d.checker else f"\n      tuned: {tuned_status(d)}"
        print(("* " if d.key == default else "  ") + d.describe() + tuned)
    print("\n* the default device (device='auto', or $MDHOM_DEVICE); tuned: date of `mdhom tune` on it, or no")
    return 0
