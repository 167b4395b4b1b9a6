"""One table from several ``mdhom bench trees`` reports: anchors and mdhom measured in separate processes.

The GPU machine allows about nine minutes per command, so a full run is split (``--no-mdhom --anchors
xgboost-cuda``, ``--anchors none``, ...). Merging is only meaningful for the same workload on the same
machine, so both are checked: a difference in the workload (rows, leaves, bins, seed, ...) or the machine
(CPU, cores, GPUs) is an error unless explicitly allowed, and then it is recorded in the merged report.
Run settings that may differ between parts (rounds, threads, device, precision) are kept per result.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["WORKLOAD_KEYS", "MACHINE_KEYS", "merge_reports", "merge_files", "add_ratios"]

WORKLOAD_KEYS = ("rows", "test_rows", "features", "leaves", "bins", "learning_rate", "seed", "nan_fraction",
                 "grow_policy")
MACHINE_KEYS = ("cpu", "cores_usable", "memory_gib", "gpus")
RUN_KEYS = ("rounds", "threads", "device", "precision", "profile_rounds", "isolate", "quick", "repeats")
LABEL_KEYS = ("precision", "device", "threads", "rounds")
_OLD_DEFAULTS = {"grow_policy": "lossguide"}  # reports written before the key existed


def add_ratios(results: list[dict[str, Any]], baseline: str = "mdhom") -> dict[str, Any] | None:
    """Set ``ratio_to_mdhom`` on every result from the first ok result of ``baseline``; returns that one."""
    base = next((r for r in results if r.get("system") == baseline and r.get("status") == "ok"), None)
    ref = base.get("round_median_seconds") if base is not None else None
    for r in results:
        ok = ref and r.get("status") == "ok" and r.get("round_median_seconds") is not None
        r["ratio_to_mdhom"] = r["round_median_seconds"] / ref if ok else None
    return base


def _param(report: dict[str, Any], key: str) -> Any:
    return report.get("parameters", {}).get(key, _OLD_DEFAULTS.get(key))


def merge_reports(
    reports: list[dict[str, Any]], sources: list[str], allow_mismatch: bool = False, baseline: str = "mdhom"
) -> dict[str, Any]:
    """The reports' results in one report, in the order given, with ratios to ``baseline`` recomputed."""
    if not reports:
        raise ValueError("nothing to merge")
    if len(sources) != len(reports):
        raise ValueError("one source name per report")
    for rep, src in zip(reports, sources, strict=True):
        if rep.get("benchmark") != "trees" or "results" not in rep:
            raise ValueError(f"{src} is not a 'mdhom bench trees' report")
    first, first_src = reports[0], sources[0]
    problems = []
    for rep, src in zip(reports[1:], sources[1:], strict=True):
        for key in WORKLOAD_KEYS:
            if _param(rep, key) != _param(first, key):
                problems.append(f"workload {key}: {_param(first, key)!r} in {first_src}, {_param(rep, key)!r} in {src}")
        for key in MACHINE_KEYS:
            a, b = first.get("machine", {}).get(key), rep.get("machine", {}).get(key)
            if a != b:
                problems.append(f"machine {key}: {a!r} in {first_src}, {b!r} in {src}")
    if problems and not allow_mismatch:
        raise ValueError("reports differ (pass --allow-mismatch to merge anyway): " + "; ".join(problems))
    results: list[dict[str, Any]] = []
    first_run: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for i, (rep, src) in enumerate(zip(reports, sources, strict=True)):
        run = {key: _param(rep, key) for key in RUN_KEYS}
        run["date"] = rep.get("date")
        for r in rep["results"]:
            r = dict(r)
            r.setdefault("source", src)
            r.setdefault("source_index", i + 1)
            r.setdefault("run", run)
            label = r.get("label", r["system"])
            if label in seen:  # the same system again: name it by what its run changed
                earlier = first_run[r["system"]]
                changed = [f"{k}={r['run'].get(k)}" for k in LABEL_KEYS if r["run"].get(k) != earlier.get(k)]
                label = f"{r['system']} {','.join(changed)}" if changed else label
                if label in seen:
                    label = f"{label}#{i + 1}"
            seen.add(label)
            first_run.setdefault(r["system"], r["run"])
            r["label"] = label
            results.append(r)
    add_ratios(results, baseline)
    versions: dict[str, Any] = {}
    for rep in reports:
        for name, version in rep.get("versions", {}).items():
            if version is not None and versions.get(name) not in (None, version):
                versions[name] = f"{versions[name]} | {version}"
            elif versions.get(name) is None:
                versions[name] = version
    return {
        "benchmark": "trees",
        "merged": True,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": [
            {"path": src, "date": rep.get("date"), "parameters": rep.get("parameters"), "workload": rep.get("workload")}
            for rep, src in zip(reports, sources, strict=True)
        ],
        "parameters": first.get("parameters", {}),
        "workload": first.get("workload", {}),
        "machine": first.get("machine", {}),
        "versions": versions,
        "merge_warnings": problems,
        "ratio_note": f"ratio_to_mdhom = system's median seconds per round / {baseline}'s "
        "(2.0: twice as slow); parts were measured in separate processes on the same machine",
        "results": results,
    }


def merge_files(paths: list[str | os.PathLike], allow_mismatch: bool = False, baseline: str = "mdhom") -> dict:
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(Path(path).read_text()))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not JSON: {exc}") from None
    return merge_reports(reports, [os.fspath(p) for p in paths], allow_mismatch, baseline)
