"""``mdhom tune``: search each kernel's parameters on a device once, so every later run there is fast."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="auto-tune the kernels for a device (once per device) and store the best parameters",
        description="Tune every registered kernel at each size class on one device with Optuna, then write "
        "tuned_configs/<device-key>.json in the user data directory (searched before the configurations "
        "shipped in the package). Interrupted tunes resume from the study storage.",
    )
    p.add_argument("--device", default="auto", help="device key, substring, 'cpu', 'gpu' or 'auto' (default)")
    p.add_argument("--kernels", nargs="+", metavar="K",
                   help="kernels to tune, and the tree layouts (tree_layout_<precision>, timed as training "
                        "rounds with the end-to-end check); default: all registered kernels and layouts")
    p.add_argument("--trials", type=int, help="distinct configurations measured per study (default 60, quick 12)")
    p.add_argument("--minutes", type=float, help="time budget for the whole tune: the studies (the learner's "
                   "heaviest kernels first), the layouts, the end-to-end check")
    p.add_argument("--quick", action="store_true",
                   help="small size classes and 12 trials a study (every kernel, the layouts and the checks: ~14 "
                   "minutes on a 2-core CPU with PoCL; --minutes bounds it)")
    p.add_argument("--sampler", choices=("tpe", "random"), default="tpe", help="Optuna sampler (default tpe)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    p.add_argument("--storage", help="Optuna storage: a journal file path, or an RDB URL such as sqlite:///f.db "
                   "(default: a journal file in the user data directory)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="directory for the device file (default: $MDHOM_TUNED_DIR if set, "
                       "else <user data dir>/tuned_configs)")
    where.add_argument("--into-package", action="store_true",
                       help="write into the package's own tuned_configs/ (to ship the configurations with mdhom)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the end-to-end check (training rounds with the new configurations against the "
                   "heuristics, keeping only the kernels whose configurations pay)")
    p.add_argument("--recheck", action="store_true",
                   help="run only the end-to-end check on the device's stored file (its tuned configurations "
                   "against their heuristics, no new studies) and store what pays")
    p.add_argument("--report", action="store_true", help="print the stored table instead of tuning")
    p.add_argument("--plot", type=Path, metavar="DIR", help="with --report: optimisation-history plots into DIR")
    p.add_argument("--update-defaults", action="store_true",
                   help="after tuning, rebuild the vendor/type defaults.json from the device files where it wrote")
    p.add_argument("--list", action="store_true", help="list the tunable kernels and their size classes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import mdhom
    from mdhom import config_store, configs

    if args.list:
        from mdhom import tunable

        present = [d for d in mdhom.devices() if not d.checker]

        def where(k: tunable.TunableKernel, sizes: dict[str, int]) -> str:
            """For a class that applies only to some devices, which of this machine's it is tuned on."""
            if k.applies is None:
                return ""
            keys = [d.key for d in present if k.applies(d, sizes)]
            return f" (tuned on {', '.join(keys) if keys else 'none of the devices here'})"

        for name, k in sorted(tunable.registered().items()):
            classes = ", ".join(f"{c} {s}{where(k, s)}" for c, s in k.size_classes.items())
            print(f"{name:<16} {k.doc}\n{'':<16} {classes}")
        from mdhom.trees.layouts import FIELDS, PRECISIONS, kernel_name

        for precision in PRECISIONS:
            print(f"{kernel_name(precision):<16} the tree backend's layout ({', '.join(FIELDS)}) for {precision} "
                  f"fits, timed as training rounds")
        return 0
    if args.report:
        from mdhom.tuning.report import plot_histories, report

        dirs = [args.out] if args.out else None
        keys = None if args.device == "auto" else [mdhom.get_device(args.device).key]
        print(report(keys, dirs))
        if args.plot:
            from mdhom.tuning.study import default_storage

            paths = plot_histories(args.storage or default_storage(), args.plot, keys[0] if keys else None)
            print(f"\n{len(paths)} plots written to {args.plot}")
        return 0
    if args.trials is not None and args.trials < 1:
        raise ValueError("--trials must be at least 1")
    from mdhom.tuning.driver import tune_device
    from mdhom.tuning.study import default_storage
    from mdhom.tuning.workload import Workload

    device = mdhom.get_device(args.device)
    directory = args.out or configs.write_dir(into_package=args.into_package)
    storage = args.storage or default_storage()
    if args.recheck:
        from mdhom.tuning.driver import recheck

        _, path = recheck(device, Workload.for_tune(args.quick, device.type == "gpu"), directory,
                          echo=lambda line: print(line, flush=True))
        print(f"wrote {path}")
        return 0
    print(f"tuning {device.key} ({device.name}) into {directory}; studies in {storage}", flush=True)
    try:
        results, path = tune_device(
            device, args.kernels, trials=args.trials, minutes=args.minutes, quick=args.quick, storage=storage,
            directory=directory, seed=args.seed, sampler=args.sampler,
            echo=lambda line: print(line, flush=True),
            end_to_end=None if args.no_check else Workload.for_tune(args.quick, device.type == "gpu"),
        )
    except KeyboardInterrupt:
        print("\ninterrupted: the tuned-config file was not changed; the studies keep their trials, run the "
              "same command again to resume", file=sys.stderr)
        return 130
    except OSError as exc:  # a full disk, a read-only directory: one line, not a traceback
        print(f"mdhom tune: error: {_os_error(exc)}", file=sys.stderr)
        return 1
    if path is None:
        print("nothing to store (no configuration measured)")
        return 1
    print(f"wrote {path}")
    if args.update_defaults:
        try:
            print(f"wrote {config_store.rebuild_defaults([path.parent])}")
        except OSError as exc:
            print(f"mdhom tune: error: {_os_error(exc, 'defaults.json')}", file=sys.stderr)
            return 1
    return 0


def _os_error(exc: OSError, unchanged: str = "the tuned-config file") -> str:
    """One line saying what failed, that nothing on disk was damaged (the writes are atomic), how to go on."""
    what = exc.strerror or str(exc)
    where = f"cannot write {exc.filename}: {what}" if exc.filename else what
    fix = "free some space" if exc.errno == errno.ENOSPC else "fix that"
    return (f"{where}; {unchanged} on disk is unchanged and the studies keep their trials: {fix} and run the "
            "same command again to resume")
