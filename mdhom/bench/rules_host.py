"""Where a rule's host time goes: a rule fit's boosting loop under cProfile, with the device refinement's counters.

``python -m mdhom.bench.rules_host --device pocl --rules 40`` (``--timed --lookahead 1,8``: without cProfile, one
fit per lookahead, side by side): fits :class:`mdhom.RuleBoostClassifier` on
:func:`mdhom.bench.rules.make_multilabel`'s data (mediamill's shape by default) with 32 equal-width bins, as
``mdhom bench rules`` does, lets the first ``--warmup`` rules build the kernels, then profiles the rest and reports
per rule: Python-level calls (cProfile's count, builtins included), kernel launches and blocking waits
(``Workspace.launches`` / ``syncs``), copies (``enqueue_copy`` calls, the blocking reads included), refinement
steps, ``Workspace.put`` calls (each waits for its copy: pyopencl's NannyEvent of a copy from host memory waits
when deleted, and put drops it), and seconds: the profiled wall time, the time inside the blocking
``Workspace.read`` / ``sync`` (waiting for the device), the rest, the host's own work (with cProfile's overhead),
and the Python thread's CPU time (``time.thread_time``: a CPU runtime's kernels run on its own threads). On a CPU
device the kernels run on the same cores as the host, so compare the counts and the host seconds, not the wall
time. The model file's SHA-256 says whether a change kept the model bit for bit (one file per lookahead: they must
agree)."""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import tempfile
import time
from typing import Any

import numpy as np


def profile_fit(rows: int = 20_000, features: int = 120, labels: int = 101, rules: int = 40, warmup: int = 3,
                device: str = "pocl", setting: str = "labelwise-single", precision: str | None = "quantized",
                bins: int = 32, seed: int = 0, top: int = 25, lookahead: int | None = None,
                profile: bool = True) -> dict[str, Any]:
    """Fit ``rules`` rules (the default rule included), profile all but the first ``warmup`` of them (``profile``
    False: count and time them without cProfile); ``lookahead``: the device's most steps per read-back (None: the
    default, :data:`mdhom.rules.device.LOOKAHEAD`; 1: one read per step, as before batches)."""
    from mdhom import RuleBoostClassifier
    from mdhom.bench.boomer import SETTINGS
    from mdhom.bench.rules import make_multilabel
    from mdhom.rules import device as rd
    from mdhom.rules import estimator, induction
    from mdhom.rules.model import RuleList

    X, Y, _, _ = make_multilabel(rows, features, labels, seed)
    prof = cProfile.Profile() if profile else None
    seen: dict[str, Any] = {}

    def induce(X, Y, loss, p, edges, device=None):  # noqa: ANN001, ANN202 - induction.induce, profiled
        learner = induction.Learner(X, Y, loss, p, edges, device)
        model = RuleList(learner.default_rule())
        learner.rule_seconds = []
        ws = None if learner.search is None else learner.search.ws
        for i in range(p.max_rules - 1):
            if i == warmup:
                waited[0] = 0.0
                seen.update(launches=ws.launches if ws else 0, syncs=ws.syncs if ws else 0,
                            steps=learner.search.steps if ws else 0, t0=time.perf_counter(), cpu0=time.thread_time(),
                            rules=0)
                if prof is not None:
                    prof.enable()
            t0 = time.perf_counter()
            rule = learner.grow()
            learner.rule_seconds.append(time.perf_counter() - t0)
            if i >= warmup:
                seen["rules"] += 1
            if rule is None:
                break
            model.rules.append(rule)
        if prof is not None:
            prof.disable()
        seen["blocked"] = waited[0]
        seen["cpu"] = time.thread_time() - seen.get("cpu0", time.thread_time())
        seen["wall"] = time.perf_counter() - seen.get("t0", time.perf_counter())
        if ws is not None and "launches" in seen:
            seen.update(launches=ws.launches - seen["launches"], syncs=ws.syncs - seen["syncs"],
                        steps=learner.search.steps - seen["steps"])
        learner.pruning, learner.n_induced = None, len(model.rules) + 1  # what induction.induce leaves (no pruning)
        return model, learner

    params = {**SETTINGS[setting], "max_rules": rules, "random_state": seed, "feature_binning": ("equal-width", bins),
              "device": device, "precision": precision}
    from mdhom.components.workspace import Workspace

    waited = [0.0]

    def timed(method):  # noqa: ANN001, ANN202 - a blocking Workspace call, its seconds counted as blocked
        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                waited[0] += time.perf_counter() - t0
        return call

    original = estimator.induce, Workspace.read, Workspace.sync, getattr(rd, "LOOKAHEAD", None)
    estimator.induce = induce
    Workspace.read, Workspace.sync = timed(Workspace.read), timed(Workspace.sync)
    if lookahead is not None:
        rd.LOOKAHEAD = int(lookahead)
    try:
        est = RuleBoostClassifier(**params).fit(X, Y)
    finally:
        estimator.induce, Workspace.read, Workspace.sync = original[:3]
        if original[3] is not None:
            rd.LOOKAHEAD = original[3]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rules.json")
        est.save_model(path)
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    n = max(1, seen.get("rules", 0))
    blocked = seen.get("blocked", 0.0)
    times = est.rule_times_[warmup:]
    per_rule: dict[str, float] = {"launches": seen.get("launches", 0) / n, "blocking_waits": seen.get("syncs", 0) / n,
                                  "steps": seen.get("steps", 0) / n, "thread_cpu_seconds": seen.get("cpu", 0.0) / n}
    out = {"params": {**params, "feature_binning": list(params["feature_binning"])}, "lookahead": lookahead,
           "shape": [rows, features, labels], "profiled_rules": seen.get("rules", 0), "model_sha256": digest,
           "per_rule": per_rule, "conditions": sum(len(r.conditions) for r in est.rules_.rules), "top": ""}
    if prof is None:
        per_rule.update(median_seconds=float(np.median(times)) if len(times) else 0.0,
                        mean_seconds=seen.get("wall", 0.0) / n, blocked_seconds=blocked / n,
                        host_seconds=(seen.get("wall", 0.0) - blocked) / n)
        return out
    st = pstats.Stats(prof)
    copies = sum(nc for (file, _line, name), (_cc, nc, *_rest) in st.stats.items()
                 if name == "enqueue_copy" and "pyopencl" in file)
    # Workspace.put drops the event of its copy from host memory, and pyopencl's NannyEvent waits for the copy
    # when deleted: each such put is a wait for the queue up to it, which Workspace.syncs does not count
    puts = sum(nc for (file, _line, name), (_cc, nc, *_rest) in st.stats.items()
               if name == "put" and file.endswith("workspace.py"))
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    total = st.total_tt
    per_rule.update(python_calls=st.total_calls / n, enqueue_copy=copies / n, waiting_puts=puts / n,
                    profiled_seconds=total / n,
                    blocked_seconds=blocked / n, host_seconds=(total - blocked) / n)
    out["top"] = buf.getvalue()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mdhom.bench.rules_host", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--features", type=int, default=120)
    ap.add_argument("--labels", type=int, default=101)
    ap.add_argument("--rules", type=int, default=40, help="rules of the fit, the default rule included")
    ap.add_argument("--warmup", type=int, default=3, help="rules grown before profiling starts (kernel builds)")
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--setting", default="labelwise-single")
    ap.add_argument("--precision", default="quantized")
    ap.add_argument("--bins", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=25, help="functions of the cProfile table, by own time")
    ap.add_argument("--lookahead", default=None,
                    help="comma-separated most steps per read-back to run one after the other (1: a read per step; "
                         "default: the library's)")
    ap.add_argument("--timed", action="store_true",
                    help="no cProfile: each rule's wall time (median, mean) and the counters only")
    ap.add_argument("--json", default=None, help="write the report(s) here")
    a = ap.parse_args(argv)
    reports = []
    for la in ([None] if a.lookahead is None else [int(v) for v in a.lookahead.split(",")]):
        report = profile_fit(a.rows, a.features, a.labels, a.rules, a.warmup, a.device, a.setting,
                             None if a.precision == "auto" else a.precision, a.bins, a.seed, a.top, la,
                             profile=not a.timed)
        if report["top"]:
            print(report["top"])
        print(json.dumps({k: v for k, v in report.items() if k != "top"}, indent=1), flush=True)
        reports.append(report)
    if len(reports) > 1:
        keys = list(reports[0]["per_rule"])
        print(f"{'lookahead':>10}" + "".join(f"{k:>18}" for k in keys) + "  model")
        for r in reports:
            print(f"{str(r['lookahead']):>10}" + "".join(f"{r['per_rule'][k]:>18.4g}" for k in keys)
                  + f"  {r['model_sha256'][:12]}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(reports if len(reports) > 1 else reports[0], fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
