"""Writing tuned configurations: merging a tune's results into a device file (atomically, re-tuning stale entries
rather than carrying them) and deriving ``defaults.json`` from the device files. The schema, the file locations and
the lookup are :mod:`mdhom.configs`'; learners import only that, tunes this too."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdhom import _files
from mdhom.config_schema import DEFAULTS_SCHEMA, SCHEMA, SCHEMA_VERSION, validate
from mdhom.configs import (
    DEFAULTS_FILE,
    class_hash,
    device_file_name,
    find_device_file,
    forget,
    load_file,
    package_dir,
    same_units,
    write_dir,
)

if TYPE_CHECKING:
    from mdhom.devices import Device


def device_facts(device: Device) -> dict[str, Any]:
    return {
        k: getattr(device, k)
        for k in ("key", "name", "platform", "vendor", "type", "driver_version", "opencl_version",
                  "compute_units", "max_work_group_size", "local_mem_size")
    }


def empty_document(device: Device) -> dict[str, Any]:
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "device": device_facts(device), "kernels": {}}


def atomic_write_json(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a tuned-config document atomically (readable layout: indented, sorted keys)."""
    _files.atomic_write_json(path, doc, indent=1, sort_keys=True)


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def store_result(
    device: Device,
    kernel: str,
    size_class: str,
    entry: Mapping[str, Any],
    description_hash_: str | None = None,
    directory: Path | None = None,
) -> Path:
    """Merge one (kernel, size class) result into the device file and write it atomically."""
    return store_results(device, [(kernel, size_class, entry, description_hash_)], directory)


def _base_document(device: Device, directory: Path | None) -> tuple[Path, dict | None]:
    """The path a tune of ``device`` writes, and the document it merges into: that file, else the first one found
    along the search path; None where there is none, or it was tuned on another number of compute units."""
    directory = Path(directory) if directory is not None else write_dir()
    path = directory / device_file_name(device.key)
    doc = load_file(path)
    if doc is None or doc.get("schema") != SCHEMA:
        found = find_device_file(device.key)
        doc = found[1] if found else None
    if doc is not None and not same_units(doc, device):
        doc = None  # another core count's configurations: replaced, not merged
    return path, doc


def stored_config(device: Device, kernel: str, size_class: str, directory: Path | None = None) -> dict[str, int] | None:
    """The configuration a tune of ``device`` into ``directory`` would replace for (kernel, size class), whatever
    version of the kernel it was tuned for (the tuner's warm start), else None. None too for a class marked as the
    heuristic kept: its numbers are the heuristic of the day it was tuned, at the class's sizes, and the study's
    baseline is today's heuristic (a warm start from them had spent a trial on a heuristic since replaced)."""
    _, doc = _base_document(device, directory)
    entry = (doc or {}).get("kernels", {}).get(kernel, {}).get("classes", {}).get(size_class)
    if entry is None or entry.get("heuristic"):
        return None
    return {k: int(v) for k, v in entry["config"].items()}


def store_results(
    device: Device,
    results: Iterable[tuple[str, str, Mapping[str, Any], str | None]],
    directory: Path | None = None,
    stale: Callable[[str, str | None], bool] | None = None,
) -> Path:
    """Merge (kernel, size class, entry, description hash) results into the device file in one atomic write.

    The existing file (in the write directory, else the first one found along the search path) is the
    base, so a tune of some kernels keeps the others; a corrupt base is replaced, after its warning, and so is a
    CPU's base tuned on another number of compute units (:func:`same_units`). Each class records its
    description hash. A kernel stored now loses its classes of other hashes (tuned for other code) except those
    ``stale(kernel, hash)`` calls current (another variant of it); every other kernel of the base loses the classes
    for which ``stale`` is true: configurations of an older kernel version are re-tuned, not carried.
    """
    path, doc = _base_document(device, directory)
    doc = json.loads(json.dumps(doc)) if doc is not None else empty_document(device)
    doc["device"] = device_facts(device)
    results = list(results)
    for body in doc["kernels"].values():  # every class names its own hash from here on
        for cls in body["classes"]:
            h = class_hash(body, cls)
            if h:
                body["classes"][cls]["description_hash"] = h
        body.pop("description_hash", None)
    if stale is not None:
        tuned_now = {r[0] for r in results}
        for kernel, body in list(doc["kernels"].items()):
            if kernel in tuned_now:
                continue
            body["classes"] = {c: e for c, e in body["classes"].items() if not stale(kernel, e.get("description_hash"))}
            if not body["classes"]:
                del doc["kernels"][kernel]
    new_hashes: dict[str, set[str | None]] = {}
    for kernel, _, _, desc_hash in results:
        new_hashes.setdefault(kernel, set()).add(desc_hash)
    for kernel, hashes in new_hashes.items():
        body = doc["kernels"].setdefault(kernel, {"classes": {}})
        if None not in hashes:  # classes tuned for other code are re-tuned, not carried (unless ``stale`` knows
            # their hash as current: another variant of the kernel, not tuned in this run)
            body["classes"] = {c: e for c, e in body["classes"].items()
                               if e.get("description_hash") in (None, *hashes)
                               or (stale is not None and not stale(kernel, e.get("description_hash")))}
    for kernel, size_class, entry, desc_hash in results:
        e = dict(entry)
        if desc_hash is not None:
            e["description_hash"] = desc_hash
        doc["kernels"][kernel]["classes"][size_class] = e
    validate(doc, str(path))
    atomic_write_json(path, doc)
    forget(path)
    return path


def rebuild_defaults(dirs: Iterable[Path] | None = None, out: Path | None = None) -> Path:
    """Derive ``defaults.json`` from the device files: for every group and (kernel, size class), the
    configuration of the device of that group with the most trials (ties: the most recent)."""
    dir_list = list(dirs) if dirs is not None else [package_dir()]
    files = sorted(
        p for d in dir_list for p in Path(d).glob("*.json") if p.name != DEFAULTS_FILE and not p.name.startswith(".")
    )
    groups: dict[str, dict[str, Any]] = {}
    for p in files:
        doc = load_file(p)
        if doc is None or doc.get("schema") != SCHEMA:
            continue
        dev = doc["device"]
        runtime = dev["key"].split("-", 1)[0]
        if runtime == "oclgrind":
            continue
        for group in (f"{runtime}-{dev.get('type', 'cpu')}", dev.get("type", "cpu")):
            body = groups.setdefault(group, {"sources": [], "kernels": {}})
            body["sources"].append(dev["key"])
            for name, kentry in doc["kernels"].items():
                gk = body["kernels"].setdefault(name, {"classes": {}})
                for cls, e in kentry["classes"].items():
                    old = gk["classes"].get(cls)
                    rank = (e.get("trials", 0), e.get("date", ""))
                    if old is None or rank > (old.get("trials", 0), old.get("date", "")):
                        h = class_hash(kentry, cls)
                        gk["classes"][cls] = {**e, "source": dev["key"], **({"description_hash": h} if h else {})}
    doc = {"schema": DEFAULTS_SCHEMA, "schema_version": SCHEMA_VERSION, "date": now_iso(), "groups": groups}
    target = Path(out) if out is not None else dir_list[0] / DEFAULTS_FILE
    validate(doc, str(target))
    atomic_write_json(target, doc)
    forget(target)
    return target
