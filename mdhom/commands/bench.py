"""``mdhom bench trees``: time mdhom against the installed anchors on one Higgs-shaped workload (JSON + table).

``mdhom bench merge`` joins reports of parts run separately (the GPU machine's ~9 minutes per command) into
one table with ratios, after checking that they share the workload and the machine.
"""

from __future__ import annotations

import argparse

SPLIT_RECIPE = """\
a full run in parts (each one command on the GPU machine), then one table:
  mdhom bench trees --no-mdhom --out anchors.json          # every anchor, each in its own process
  mdhom bench trees --anchors none --out mdhom.json        # mdhom: 100 timed rounds + 20 profiled
  mdhom bench trees --anchors none --precision single --out mdhom-single.json
  mdhom bench merge anchors.json mdhom.json mdhom-single.json --out bench-trees.json
parts must share the workload options (rows, leaves, bins, seed, ...); --rounds may differ per part."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks against the anchor libraries in the same run")
    kinds = p.add_subparsers(dest="benchmark", required=True)
    t = kinds.add_parser(
        "trees",
        help="gradient-boosted trees on Higgs-shaped data: mdhom, LightGBM, XGBoost",
        description="Trains mdhom and every installed anchor on the same synthetic Higgs-shaped "
        "data in one run; reports per-round medians (round 1 excluded), build times, test AUC "
        "and ratios to mdhom, and a profile of mdhom's rounds (kernels, launches + transfers, host work).",
        epilog=SPLIT_RECIPE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("--rows", type=int, default=None, help="training rows (default 10500000; --quick: 20000)")
    t.add_argument("--test-rows", type=int, default=None, help="test rows (default 500000; --quick: 5000)")
    t.add_argument("--features", type=int, default=None, help="dense features (default 28)")
    t.add_argument("--leaves", type=int, default=None, help="leaves per tree (default 255; --quick: 15)")
    t.add_argument("--bins", type=int, default=None, help="histogram bins per feature (default 63)")
    t.add_argument("--rounds", type=int, default=None, help="boosting rounds (default 100; --quick: 5)")
    t.add_argument("--learning-rate", type=float, default=None, help="shrinkage (default 0.1)")
    t.add_argument("--threads", type=int, default=None, help="CPU threads for the anchors (default: all usable)")
    t.add_argument("--device", default=None, help="mdhom device spec: auto, cpu, gpu, numpy, a key or substring")
    t.add_argument("--precision", default=None, help="mdhom precision (double, single); default: the estimator's")
    t.add_argument(
        "--grow-policy",
        choices=("lossguide", "depthwise"),
        default=None,
        help="lossguide (default: leaf-wise up to --leaves, as the anchors ran) or depthwise (levels up to the "
        "depth that holds --leaves leaves; LightGBM approximates it by max_depth)",
    )
    t.add_argument("--max-depth", type=int, default=None,
                   help="depth limit for every system (default: none for lossguide, the depth that holds --leaves "
                   "for depthwise); trees stay capped at --leaves")
    t.add_argument(
        "--profile-rounds",
        type=int,
        default=None,
        help="rounds of an extra mdhom fit with OpenCL profiling: time per kernel, launches+transfers, host work; "
        "and of one at full speed: how much of a round the device is busy, and where it waits (the idle time "
        "between two kernels) (default 20; --quick: 5; 0: none)",
    )
    t.add_argument(
        "--no-mdhom",
        dest="include_mdhom",
        action="store_false",
        default=None,
        help="time only the anchors (merge with a run of mdhom later: mdhom bench merge)",
    )
    t.add_argument(
        "--anchors",
        default=None,
        help="comma list of lightgbm-cpu, lightgbm-opencl, xgboost-cpu, xgboost-cuda, catboost-gpu (or none); "
        "default: every installed one, GPU ones only when a GPU is visible",
    )
    t.add_argument("--nan-fraction", type=float, default=None, help="share of cells set to NaN (default 0)")
    t.add_argument("--seed", type=int, default=None, help="workload and library seed (default 0)")
    t.add_argument(
        "--lightgbm-platform",
        type=int,
        default=None,
        help="OpenCL platform id for lightgbm-opencl as LightGBM numbers them (default: probed from its log)",
    )
    t.add_argument("--lightgbm-device", type=int, default=None, help="OpenCL device id for lightgbm-opencl")
    t.add_argument("--out", default="bench-trees.json", help="JSON report path (default bench-trees.json)")
    t.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run each system in its own process on regenerated data (default: on, off with --quick)",
    )
    t.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="runs of every system, taking turns, every other in reverse order (default 1): s/round is the median "
        "of a system's runs, and each anchor is also compared with mdhom run by run (noisy, shared machines)",
    )
    t.add_argument(
        "--quick", action="store_true", help="CI size: 20000 rows, 5 rounds, 15 leaves, 5 profiled rounds, in-process"
    )
    t.set_defaults(func=run_trees)
    kt = kinds.add_parser(
        "ktrees",
        help="multiclass boosting: a round's K trees grown together against one after another (and XGBoost)",
        description="Fits mdhom's one_output_per_tree mode with the round's K trees grown together and with the "
        "same trees grown one after another through the same kernels (their models must be the same bytes), the "
        "multi_output_tree mode and XGBoost's CPU hist (one_output_per_tree) on one K-class workload; reports the "
        "median seconds per round (builds excluded), fit seconds, test accuracy and log loss.",
    )
    kt.add_argument("--rows", type=int, default=None, help="training rows (default 1000000; --quick: 3000)")
    kt.add_argument("--test-rows", type=int, default=None, help="test rows (default 100000; --quick: 1000)")
    kt.add_argument("--features", type=int, default=None, help="features (default 28)")
    kt.add_argument("--classes", type=int, default=None, help="classes K (default 10; --quick: 4)")
    kt.add_argument("--rounds", type=int, default=None, help="boosting rounds (default 20; --quick: 3)")
    kt.add_argument("--max-depth", type=int, default=None, help="depth of every tree (default 6; --quick: 3)")
    kt.add_argument("--bins", type=int, default=None, help="histogram bins per feature (default 63)")
    kt.add_argument("--learning-rate", type=float, default=None, help="shrinkage (default 0.3)")
    kt.add_argument("--device", default=None, help="mdhom device spec: auto, cpu, gpu, numpy, a key or substring")
    kt.add_argument("--precision", default=None, help="mdhom precision (double, quantized); default: the device's")
    kt.add_argument("--threads", type=int, default=None, help="threads of a CPU device and of XGBoost (default: all)")
    kt.add_argument("--seed", type=int, default=None, help="workload and library seed (default 0)")
    kt.add_argument("--digits", action="store_true", default=None,
                    help="sklearn's load_digits (1797 x 64, 10 classes, a 75/25 split) instead of synthetic rows")
    kt.add_argument("--systems", default=None,
                    help="comma list of together, one-by-one, multi-output, xgboost-cpu (default: all)")
    kt.add_argument("--out", default=None, help="JSON report path")
    kt.add_argument("--quick", action="store_true", help="CI size: 3000 rows, 4 classes, 3 rounds of depth 3")
    kt.set_defaults(func=run_ktrees)
    fr = kinds.add_parser(
        "forests",
        help="random forests on Higgs-shaped data: mdhom against scikit-learn (all cores) and XGBoost's RF mode",
        description="Fits mdhom's RandomForestClassifier and each anchor on the same data in one process; reports "
        "fit seconds (mdhom's program builds apart, from a two-tree fit first), prediction seconds on the test rows, "
        "test AUC and ratios to mdhom.",
    )
    fr.add_argument("--rows", type=int, default=None, help="training rows (default 1000000; --quick: 20000)")
    fr.add_argument("--test-rows", type=int, default=None, help="test rows (default 100000; --quick: 5000)")
    fr.add_argument("--features", type=int, default=None, help="dense features (default 28)")
    fr.add_argument("--trees", type=int, default=None, help="trees per forest (default 500; --quick: 20)")
    fr.add_argument("--max-depth", type=int, default=None, help="deepest level (default 10; --quick: 8; 0: none)")
    fr.add_argument("--bins", type=int, default=None, help="mdhom's (and XGBoost's) max_bin (default 255)")
    fr.add_argument("--device", default=None, help="mdhom device spec: auto, cpu, gpu, numpy, a key or substring")
    fr.add_argument("--threads", type=int, default=None, help="threads of every system (default: all usable)")
    fr.add_argument("--seed", type=int, default=None, help="data and model seed (default 0)")
    fr.add_argument("--anchors", default=None,
                    help="comma list of sklearn, xgboost-cpu, xgboost-cuda (or none); default sklearn")
    fr.add_argument("--out", default=None, help="JSON report path (default: print only)")
    fr.add_argument("--quick", action="store_true", help="CI size: 20000 rows, 20 trees of depth 8 (--ecc: 300 rows, "
                    "5 labels, 4 chains x 4 trees)")
    fr.add_argument("--ecc", choices=("emotions", "mediamill"), default=None,
                    help="ensembles of classifier chains instead: mdhom's ClassifierChainEnsemble against "
                    "scikit-learn's "
                    "ClassifierChain(RandomForestClassifier) ensemble with the same orders, on synthetic data of the "
                    "set's shape (emotions: 391 + 202 test rows x 72 features, 6 labels; mediamill: 30993 + 12914 x "
                    "120, 101 labels); --rows, --test-rows, --features, --trees (per chain position), --max-depth "
                    "(default none), --bins apply")
    fr.add_argument("--labels", type=int, default=None, help="--ecc: labels (default: the shape's)")
    fr.add_argument("--chains", type=int, default=None, help="--ecc: chains (default 64)")
    fr.add_argument("--no-sklearn", dest="sklearn", action="store_false", default=None,
                    help="--ecc: time mdhom only")
    fr.set_defaults(func=run_forests)
    mem = kinds.add_parser(
        "memory",
        help="extra memory of a fit on a wide sparse CSR matrix, per device (a fresh process each)",
        description="Fits TreeBoostClassifier on a seeded scipy.sparse CSR matrix (default 20000 x 5000, 100k "
        "stored entries, issue 11's shape) once per device and precision, each in a fresh process, and reports the "
        "peak resident memory during fit less the baseline after imports, data and device context (MiB), and "
        "for OpenCL devices the most bytes of device buffers allocated at once.",
    )
    mem.add_argument("--rows", type=int, default=None, help="rows (default 20000; --quick: 2000)")
    mem.add_argument("--features", type=int, default=None, help="features (default 5000; --quick: 500)")
    mem.add_argument("--nnz", type=int, default=None, help="stored entries (default 100000; --quick: 10000)")
    mem.add_argument("--rounds", type=int, default=None, help="trees (default 10; --quick: 3)")
    mem.add_argument("--seed", type=int, default=None, help="data and model seed (default 0)")
    mem.add_argument("--devices", default=None,
                     help="comma list of devices (numpy, cpu, intel, a key...); default: numpy and every OpenCL one")
    mem.add_argument("--precisions", default=None,
                     help="comma list of precisions for OpenCL devices (default double,quantized; numpy: double)")
    mem.add_argument("--grow-policy", choices=("depthwise", "lossguide"), default=None,
                     help="depthwise (default, max_depth 6) or lossguide (no depth limit, --max-leaves)")
    mem.add_argument("--max-leaves", type=int, default=None, help="most leaves per tree (default 0: no limit)")
    mem.add_argument("--out", default=None, help="JSON report path (default: print only)")
    mem.add_argument("--quick", action="store_true", help="CI size: 2000 x 500, 10000 stored entries, 3 trees")
    mem.set_defaults(func=run_memory)
    r = kinds.add_parser(
        "rules",
        help="multi-label rules on mediamill-shaped data: mdhom against mlrl-boomer, seconds per rule and quality",
        description="Fits RuleBoostClassifier and, when installed, mlrl-boomer (its defaults, and mdhom's settings) on "
        "the same synthetic multi-label data in one run, for the label-wise loss with single-label heads and the "
        "example-wise loss with complete heads; reports seconds per rule, ratios, Hamming loss and micro-F1, and "
        "where an mdhom rule's time goes (kernels, launches, host) on an OpenCL device.",
    )
    r.add_argument("--rows", type=int, default=None, help="training rows (default 20000; --quick: 1500)")
    r.add_argument("--test-rows", type=int, default=None, help="test rows (default 5000; --quick: 500)")
    r.add_argument("--features", type=int, default=None, help="dense features (default 120; --quick: 12)")
    r.add_argument("--labels", type=int, default=None, help="labels (default 101; --quick: 6)")
    r.add_argument("--rules", type=int, default=None, help="rules per fit, the default rule included (default 50)")
    r.add_argument("--settings", default=None,
                   help="comma list of labelwise-single, examplewise-complete (label binning as mlrl-boomer decides: "
                        "equal-width), examplewise-complete-unbinned (default: the first two)")
    r.add_argument("--bins", type=int, default=None, help="mdhom's equal-width bins per feature (default 32)")
    r.add_argument("--device", default=None, help="mdhom's device (default auto; --quick: numpy)")
    r.add_argument("--threads", type=int, default=None, help="mlrl-boomer's threads (default 0: every core)")
    r.add_argument("--seed", type=int, default=None, help="data and learner seed (default 0)")
    r.add_argument("--precision", choices=["double", "quantized"], default=None,
                   help="mdhom's statistics (default: quantized on a GPU, double elsewhere, as RuleBoostClassifier)")
    r.add_argument("--profile-rules", type=int, default=None,
                   help="rules of an extra, profiled mdhom fit on an OpenCL device (default 10; --quick: 0)")
    r.add_argument("--anchors", choices=("mlrl-boomer", "none"), default=None,
                   help="run mlrl-boomer when installed (default) or not")
    r.add_argument("--no-numpy-line", action="store_true",
                   help="skip the mdhom fit on the numpy reference that runs beside a device's (same model)")
    r.add_argument("--out", default=None, help="JSON report path (default: print only)")
    r.add_argument("--quick", action="store_true", help="CI size: 1500 x 12, 6 labels, 8 rules, numpy")
    r.set_defaults(func=run_rules)
    q = kinds.add_parser(
        "rules-quality",
        help="RuleBoostClassifier against mlrl-boomer on emotions and enron (Hamming loss, micro-F1), same settings",
        description="Fits mdhom and mlrl-boomer (when installed) with the same settings on emotions' predefined split "
        "and a random 67/33 split of enron (seed 1), for the label-wise loss with single-label heads and the "
        "example-wise loss with complete heads; prints per-seed figures, their means and whether mdhom is within "
        "issue 10's bars (Hamming loss 0.005, micro-F1 0.01).",
    )
    q.add_argument("--datasets-dir", default=None,
                   help="folder with emotions-predefined_*.arff, emotions.xml, enron.arff, enron.xml "
                        "(default: $MDHOM_DATASETS, else ../shared/datasets)")
    q.add_argument("--datasets", default=None, help="comma list of emotions, enron (default both)")
    q.add_argument("--settings", default=None,
                   help="comma list of labelwise-single, examplewise-complete-unbinned (default both: no label "
                        "binning on either side), examplewise-complete (label binning as mlrl-boomer decides)")
    q.add_argument("--seeds", default=None, help="comma list of seeds, both sides (default 1,2,3,4,5)")
    q.add_argument("--max-rules", type=int, default=None, help="rules, the default rule included (default 1000)")
    q.add_argument("--device", default=None, help="mdhom's device (default numpy: exact thresholds)")
    q.add_argument("--feature-binning", default=None,
                   help="both sides: METHOD:BINS such as equal-width:32 (default none: exact thresholds)")
    q.add_argument("--precision", choices=["double", "quantized"], default=None,
                   help="mdhom's statistics (default: as RuleBoostClassifier resolves it for the device)")
    q.add_argument("--out", default=None, help="JSON report path (default: print only)")
    q.set_defaults(func=run_rules_quality)
    m = kinds.add_parser(
        "merge",
        help="join 'bench trees' reports of separate runs into one table with ratios",
        description="Joins reports of the same workload on the same machine (checked), in the order given; "
        "ratios are to the first mdhom result.",
    )
    m.add_argument("reports", nargs="+", help="JSON reports of 'mdhom bench trees' (or of an earlier merge)")
    m.add_argument("--out", default=None, help="merged JSON report path (default: print only)")
    m.add_argument("--baseline", default="mdhom", help="system the ratios refer to (default mdhom)")
    m.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="merge even if workload or machine differ (the differences are recorded)",
    )
    m.set_defaults(func=merge)


def run_trees(args: argparse.Namespace) -> int:
    from mdhom.bench.trees import TreesConfig, format_table, run_trees, write_json

    overrides = {
        name: getattr(args, name)
        for name in (
            "rows",
            "test_rows",
            "features",
            "leaves",
            "bins",
            "rounds",
            "learning_rate",
            "threads",
            "device",
            "precision",
            "grow_policy",
            "max_depth",
            "profile_rounds",
            "include_mdhom",
            "nan_fraction",
            "seed",
            "lightgbm_platform",
            "lightgbm_device",
            "isolate",
            "repeats",
        )
    }
    if args.anchors is not None:
        overrides["anchors"] = [a for a in args.anchors.split(",") if a.strip()]
    if args.quick:
        config = TreesConfig.quick_config(**overrides)
    else:
        config = TreesConfig(**{k: v for k, v in overrides.items() if v is not None})
    for name in ("rows", "test_rows", "features", "leaves", "bins", "rounds", "threads", "profile_rounds",
                 "repeats"):
        zero_ok = name in ("test_rows", "profile_rounds")
        if getattr(config, name) < (0 if zero_ok else 1):
            kind = "non-negative" if zero_ok else "positive"
            raise ValueError(f"--{name.replace('_', '-')} must be {kind}, got {getattr(config, name)}")
    report = run_trees(config)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    failed = [r["system"] for r in report["results"] if r["status"] == "failed"]
    return 1 if failed else 0


def _check_positive(config: object, names: tuple[str, ...]) -> None:
    """A clear error for a size option below 1, named as on the command line."""
    for name in names:
        if getattr(config, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(config, name)}")


def run_ktrees(args: argparse.Namespace) -> int:
    from mdhom.bench.ktrees import KTreesConfig, format_table, run_ktrees
    from mdhom.bench.trees import write_json

    overrides = {name: getattr(args, name) for name in ("rows", "test_rows", "features", "classes", "rounds",
                                                        "max_depth", "bins", "learning_rate", "device", "precision",
                                                        "threads", "seed", "digits")}
    if args.systems is not None:
        overrides["systems"] = tuple(a.strip() for a in args.systems.split(",") if a.strip())
    config = KTreesConfig.quick_config(**overrides) if args.quick else \
        KTreesConfig(**{k: v for k, v in overrides.items() if v is not None})
    _check_positive(config, ("rows", "test_rows", "features", "rounds", "max_depth", "bins"))
    if config.classes < 2:
        raise ValueError(f"--classes must be at least 2, got {config.classes}")
    report = run_ktrees(config, log=lambda _: None)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 1 if any(r["status"] == "failed" for r in report["results"]) else 0


def run_forests(args: argparse.Namespace) -> int:
    from mdhom.bench.forests import ForestsConfig, format_table, run_forests
    from mdhom.bench.trees import write_json

    if args.ecc is not None:
        return _run_chains(args)
    overrides = {name: getattr(args, name) for name in ("rows", "test_rows", "features", "trees", "max_depth", "bins",
                                                        "device", "threads", "seed")}
    if args.anchors is not None:
        overrides["anchors"] = tuple(a.strip() for a in args.anchors.split(",") if a.strip() and a.strip() != "none")
    if args.quick:
        config = ForestsConfig.quick_config(**overrides)
    else:
        config = ForestsConfig(**{k: v for k, v in overrides.items() if v is not None})
    _check_positive(config, ("rows", "test_rows", "features", "trees", "bins"))
    report = run_forests(config, log=lambda _: None)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 1 if any(r["status"] == "failed" for r in report["results"]) else 0


def _run_chains(args: argparse.Namespace) -> int:
    from mdhom.bench.chains import ChainsConfig, format_table, run_chains
    from mdhom.bench.trees import write_json

    overrides = {name: getattr(args, name) for name in ("rows", "test_rows", "features", "labels", "chains", "trees",
                                                        "max_depth", "bins", "device", "threads", "seed", "sklearn")}
    config = ChainsConfig.for_shape(args.ecc, args.quick, **overrides)
    _check_positive(config, ("rows", "test_rows", "features", "labels", "chains", "trees", "bins"))
    report = run_chains(config, log=lambda _: None)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 1 if any(r["status"] == "failed" for r in report["results"]) else 0


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def run_rules(args: argparse.Namespace) -> int:
    from mdhom.bench.rules import RulesConfig, format_rules, run_rules
    from mdhom.bench.trees import write_json

    given = {name: getattr(args, name) for name in ("rows", "test_rows", "features", "labels", "rules", "bins",
                                                     "device", "precision", "threads", "seed", "profile_rules")}
    given["settings"] = _list(args.settings)
    given["anchors"] = None if args.anchors is None else args.anchors != "none"
    given["numpy_line"] = False if args.no_numpy_line else None
    config = RulesConfig.quick_config(**given) if args.quick else \
        RulesConfig(**{k: v for k, v in given.items() if v is not None})
    for name in ("rows", "features", "labels", "rules", "bins"):
        if getattr(config, name) < (2 if name in ("rules", "bins") else 1):
            raise ValueError(f"--{name} must be at least {2 if name in ('rules', 'bins') else 1}, "
                             f"got {getattr(config, name)}")
    report = run_rules(config)
    print(format_rules(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 1 if any(r["status"] == "failed" and r["system"] == "mdhom" for r in report["results"]) else 0


def run_rules_quality(args: argparse.Namespace) -> int:
    from mdhom.bench.rules_quality import QualityConfig, format_quality, run_quality
    from mdhom.bench.trees import write_json

    given: dict = {"datasets": _list(args.datasets), "settings": _list(args.settings), "max_rules": args.max_rules,
                   "folder": args.datasets_dir, "device": args.device}
    if args.seeds is not None:
        given["seeds"] = [int(s) for s in _list(args.seeds)]
    extra: dict = {}
    if args.feature_binning is not None:
        method, _, bins = args.feature_binning.partition(":")
        extra["feature_binning"] = (method, int(bins or 32))
    if args.precision is not None:
        extra["precision"] = args.precision
    given["extra"] = extra or None
    report = run_quality(QualityConfig(**{k: v for k, v in given.items() if v is not None}))
    print(format_quality(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 0


def run_memory(args: argparse.Namespace) -> int:
    from mdhom.bench.memory import MemoryConfig, format_table, run_memory
    from mdhom.bench.trees import write_json

    overrides = {name: getattr(args, name) for name in ("rows", "features", "nnz", "rounds", "seed", "grow_policy",
                                                        "max_leaves")}
    if args.devices is not None:
        overrides["devices"] = [d.strip() for d in args.devices.split(",") if d.strip()]
    if args.precisions is not None:
        overrides["precisions"] = tuple(p.strip() for p in args.precisions.split(",") if p.strip())
    if args.quick:
        config = MemoryConfig.quick_config(**overrides)
    else:
        config = MemoryConfig(**{k: v for k, v in overrides.items() if v is not None})
    _check_positive(config, ("rows", "features", "rounds"))
    if not 0 <= config.nnz <= config.rows * config.features:
        raise ValueError(f"--nnz must lie in [0, rows x features], got {config.nnz}")
    report = run_memory(config, log=lambda _: None)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"report written to {args.out}")
    return 1 if any(r["status"] != "ok" for r in report["results"]) else 0


def merge(args: argparse.Namespace) -> int:
    from mdhom.bench.merge import merge_files
    from mdhom.bench.trees import format_table, write_json

    report = merge_files(args.reports, allow_mismatch=args.allow_mismatch, baseline=args.baseline)
    print(format_table(report))
    if args.out:
        write_json(report, args.out)
        print(f"merged report written to {args.out}")
    return 0
