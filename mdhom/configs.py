"""Tuned configurations on disk: loading with validation, and lookup with fallback (writing them is
:mod:`mdhom.config_store`'s).

This is the runtime half of the tuner. Learners import it on every ``fit``, so it depends on the standard
library, numpy-free JSON and ``platformdirs`` only: never on optuna.

Where files live
    ``tuned_configs/<device-key>.json`` in the user data directory
    (``platformdirs.user_data_dir("mdhom")/tuned_configs``), where ``mdhom tune`` writes, and the same file
    name inside the package (shipped; written only by ``mdhom tune --into-package``, so a tune never edits
    the git checkout of an editable install by accident). The user directory is searched *first*, so a
    user's own tune overrides the shipped one. ``$MDHOM_TUNED_DIR`` names one more directory searched before
    both (and written to, when set); tests and CI use it.

The schema of these files, and its check, are :mod:`mdhom.config_schema`'s.

A defaults file ``tuned_configs/defaults.json`` (``"schema": "mdhom-tuned-defaults"``) holds the same
``kernels`` mapping per *group*: ``"<runtime>-<type>"`` (``"nvidia-gpu"``, ``"pocl-cpu"``) and ``"<type>"``
(``"gpu"``, ``"cpu"``). :func:`mdhom.config_store.rebuild_defaults` derives it from the device files.

One kernel name covers variants of its description (a precision's lanes, a CPU's vector form), each tuned in
classes of its own: a class records the hash of the variant it was tuned for (files written before that hold one
hash per kernel), and a lookup takes the nearest class tuned for the variant being built.

Lookup (CLBlast's layered fallback): the device's own file, then the group entries from most to least
specific, then ``None``, which means "use the description's ``default_config``". A corrupt or foreign file
gives one warning and is skipped; nothing here raises on bad files.

A class marked ``"heuristic": true`` is a tune's finding that nothing it found beats the kernel's heuristic (its
study kept the default, or the end-to-end check dropped what it found); ``config`` records the heuristic's numbers
of that day at the class's sizes. A lookup reaching it answers ``None`` (the caller runs today's heuristic at the
build's own sizes, which is what the check timed: its heuristic side runs with ``MDHOM_TUNED=0``), so a heuristic
improved since reaches tuned devices too: the H200's file had kept the forests' feature split at the numbers of a GPU
heuristic that the H100 later measured 19-27x slower than today's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdhom import _warn
from mdhom.config_schema import DEFAULTS_SCHEMA, SCHEMA, SCHEMA_VERSION, SchemaError, validate

if TYPE_CHECKING:
    from mdhom.devices import Device
    from mdhom.mdh.description import Description

DEFAULTS_FILE = "defaults.json"
TUNED_DIR_ENV = "MDHOM_TUNED_DIR"
TUNED_ENV = "MDHOM_TUNED"  # "0": ignore every stored configuration (heuristics only)


class TunedConfigWarning(UserWarning):
    """Something about the tuned configurations a user should know: a fallback, a corrupt or stale file."""


# ----------------------------------------------------------------------------------------------- locations
def package_dir() -> Path:
    """The ``tuned_configs`` directory shipped inside the package."""
    return _package_dir()


@functools.cache
def _package_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("mdhom.tuned_configs")))


# what platformdirs reads to place the per-user directory, on each platform
_USER_ENV = ("HOME", "XDG_DATA_HOME", "APPDATA", "LOCALAPPDATA", "USERPROFILE")


def user_dir() -> Path:
    """The per-user directory (platformdirs): where ``mdhom tune`` writes, and the first one searched."""
    return _user_dir(tuple(os.environ.get(v) for v in _USER_ENV))


@functools.lru_cache(maxsize=8)
def _user_dir(_env: tuple[str | None, ...]) -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("mdhom")) / "tuned_configs"


def search_dirs() -> list[Path]:
    """Directories searched for a device file, first hit wins: ``$MDHOM_TUNED_DIR``, user, package."""
    dirs = []
    env = os.environ.get(TUNED_DIR_ENV)
    if env:
        dirs.append(Path(env))
    dirs += [user_dir(), package_dir()]
    return dirs


def _writable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK | os.X_OK)


def write_dir(into_package: bool = False) -> Path:
    """Where ``mdhom tune`` writes: the package's ``tuned_configs`` with ``into_package`` (shipping
    configurations; a clear error when it is not writable), else ``$MDHOM_TUNED_DIR`` if set, else the user
    directory. Not the package directory by default: for an editable install that is the git checkout, and
    a site-packages copy is replaced by the next upgrade."""
    if into_package:
        pkg = package_dir()
        if not _writable(pkg):
            raise ValueError(f"the package directory {pkg} is not writable: tune without --into-package to "
                             f"write into {user_dir()}, or pass --out DIR")
        return pkg
    env = os.environ.get(TUNED_DIR_ENV)
    if env:
        return Path(env)
    return user_dir()


def device_file_name(key: str) -> str:
    return f"{key}.json"


# ----------------------------------------------------------------------------------------------- warnings
_WARNED: set[tuple[str, str]] = set()
_WARN_LOCK = threading.Lock()


def _warn_once(kind: str, subject: str, message: str) -> None:
    with _WARN_LOCK:
        if (kind, subject) in _WARNED:
            return
        _WARNED.add((kind, subject))
    _warn.warn(message, TunedConfigWarning)


def reset_warnings() -> None:
    """Forget which warnings were given (tests; a long-lived process after re-tuning)."""
    with _WARN_LOCK:
        _WARNED.clear()
    _CACHE.clear()
    _FOUND.clear()


# ----------------------------------------------------------------------------------------------- loading
_CACHE: dict[Path, tuple[float, int, dict | None]] = {}


def load_file(path: Path) -> dict | None:
    """The validated document at ``path``, ``None`` when it does not exist; a corrupt or foreign file
    warns once and reads as ``None``. Cached by modification time."""
    try:
        st = path.stat()
    except OSError:
        return None
    hit = _CACHE.get(path)
    if hit and hit[0] == st.st_mtime and hit[1] == st.st_size:
        return hit[2]
    doc: dict | None
    try:
        with open(path, encoding="utf-8") as fh:
            doc = validate(json.load(fh), str(path))
    except (OSError, ValueError) as exc:  # JSONDecodeError and SchemaError are ValueErrors
        _warn_once("corrupt", str(path), f"ignoring tuned-config file {path}: {exc}")
        doc = None
    _CACHE[path] = (st.st_mtime, st.st_size, doc)
    return doc


def forget(path: Path) -> None:
    """Drop ``path`` from :func:`load_file`'s cache (a writer calls it once it replaced the file: a rewrite within the
    clock's resolution can keep the modification time and size)."""
    _CACHE.pop(Path(path), None)
    _FOUND.clear()


def _stamp(paths: tuple[Path, ...]) -> tuple[tuple[int, int] | None, ...]:
    """Each file's (modification time, size), None where there is none: what a cached answer about them depends on."""
    out: list[tuple[int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


# find_device_file's answers by (key, directories): the candidate paths, their stamps when answered, the answer. A
# fit looks configurations up some 80 times (every build, every size class a layout check reads), each walking the
# directories with pathlib (~50 us) and, for a defaults group, once more for each of its classes' source files: the
# 81 lookups of a 5000-row PoCL fit took 5.3 ms of its ~50, 3.0 with the answers and the directories kept
_FOUND: dict[tuple[str, tuple[Path, ...]], tuple[tuple[Path, ...], tuple, tuple[Path, dict] | None]] = {}


def find_device_file(key: str, dirs: Iterable[Path] | None = None) -> tuple[Path, dict] | None:
    """The first valid file for ``key`` along the search directories (answered again while no candidate file
    changed)."""
    dir_key = tuple(dirs if dirs is not None else search_dirs())
    memo = _FOUND.get((key, dir_key))
    paths = memo[0] if memo is not None else tuple(Path(d) / device_file_name(key) for d in dir_key)
    stamp = _stamp(paths)
    if memo is not None and memo[1] == stamp:
        return memo[2]
    found = _find_device_file(key, paths)
    _FOUND[(key, dir_key)] = (paths, stamp, found)
    return found


def _find_device_file(key: str, paths: tuple[Path, ...]) -> tuple[Path, dict] | None:
    for p in paths:
        doc = load_file(p)
        if doc is not None and doc.get("schema") == SCHEMA:
            if doc["device"]["key"] != key:
                _warn_once("foreign", str(p), f"ignoring {p}: it holds configurations of {doc['device']['key']}")
                continue
            return p, doc
    return None


def load_device(key: str, dirs: Iterable[Path] | None = None) -> dict | None:
    hit = find_device_file(key, dirs)
    return hit[1] if hit else None


def fallback_groups(device: Device) -> list[str]:
    """The defaults groups a device falls back to, most specific first. A checker (Oclgrind) takes none: it
    simulates every work-item, and the GPU group's tuned work-group counts (forest kernels since 2026-11-24) made its
    forest runs time out; it checks kernels under the heuristics' and its tests' own configurations."""
    if getattr(device, "checker", False):
        return []
    return [f"{device.runtime}-{device.type}", device.type]


# ----------------------------------------------------------------------------------------------- lookup
def size_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Log-distance between two problem sizes over the dimensions both name (inf when they share none)."""
    common = [d for d in a if d in b]
    if not common:
        return math.inf
    return math.sqrt(sum((math.log(max(1, a[d])) - math.log(max(1, b[d]))) ** 2 for d in common))


def nearest_class(classes: Mapping[str, Mapping[str, Any]], sizes: Mapping[str, int],
                  within: float | None = None) -> str | None:
    """Name of the class whose ``sizes`` are nearest to ``sizes`` in log-distance (ties: the first).

    A class where a shared dimension has size 1 is not used for sizes where it is larger (or the other way
    round): it says nothing about parallelism along that dimension. (The histogram tuned for one node walked
    the 64 nodes of a depthwise level one after another in each work-group: 3x slower on the H200.)
    None when no class qualifies, or (``within``) none lies within that log-distance."""
    best, best_d = None, math.inf
    for name, entry in classes.items():
        theirs = entry["sizes"]
        if any((int(sizes[k]) == 1) != (int(theirs[k]) == 1) for k in sizes if k in theirs):
            continue
        d = size_distance(sizes, theirs)
        if d < best_d and (within is None or d <= within):
            best, best_d = name, d
    return best


def class_hash(entry: Mapping[str, Any], size_class: str) -> str | None:
    """The description hash a kernel entry's size class was tuned for: its own, else the entry's (older files)."""
    return entry["classes"][size_class].get("description_hash") or entry.get("description_hash")


# comments (a block one unterminated to the end) and string and character literals, in the order a compiler meets them
_TOKENS = re.compile(r"/\*.*?\*/|/\*.*\Z|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?", re.DOTALL)


def source_text(src: str) -> str:
    """The part of OpenCL C source that a compiler reads: comments out (each a space, as the preprocessor takes
    them; string and character literals kept whole), every preprocessor directive a line of its own and the code
    between two directives one line, every run of white space one space. What :func:`description_hash` covers, so
    that a comment, an indentation or a line-break edit of a kernel's file does not make every configuration tuned
    for it one "of an older version of the kernel"."""
    text = _TOKENS.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ", src)
    # preprocessor directives (with their continued lines) each a line of their own, the code between them one line
    parts: list[str] = []
    code: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.lstrip().startswith("#"):
            while line.endswith("\\"):  # a spliced line, as the preprocessor splices it
                line = line[:-1] + next(lines, "")
            parts += [" ".join(code), line]
            code = []
        else:
            code.append(line)
    parts.append(" ".join(code))
    return "\n".join(t for t in (" ".join(p.split()) for p in parts) if t)


def description_hash(desc: Description) -> str:
    """Hash of what a configuration was tuned for: the generated OpenCL source as its compiler reads it
    (:func:`source_text`) and the parameter names."""
    key = id(desc)
    hit = _HASHES.get(key)
    if hit is not None and hit[0] is desc:
        return hit[1]
    from mdhom.mdh.codegen import generate

    h = hashlib.sha256()
    h.update(source_text(generate(desc)).encode())
    h.update(",".join(desc.parameter_names()).encode())
    digest = "sha256:" + h.hexdigest()[:32]
    _HASHES[key] = (desc, digest)
    return digest


_HASHES: dict[int, tuple[Any, str]] = {}


def _pick(
    kernels: Mapping[str, Any], kernel: str, sizes: Mapping[str, int], device: Device,
    description: Description | None, source: str, within: float | None = None,
    prefer: Collection[str] | None = None,
) -> tuple[dict[str, int] | None, str] | None:
    """The configuration stored for ``kernel`` at the class nearest ``sizes`` and that class (with notes), None where
    none applies; (None, class) where the class kept the heuristic (the caller runs today's: see the module
    docstring)."""
    entry = kernels.get(kernel)
    if not entry:
        return None
    classes = same = entry["classes"]
    if description is not None:
        own = description_hash(description)
        same = {c: e for c, e in classes.items() if class_hash(entry, c) in (None, own)}
    cls = nearest_class(same, sizes, within)
    other_version = cls is None and len(same) < len(classes)
    if other_version:
        alike = {c: e for c, e in classes.items() if c in prefer} if prefer else {}
        cls = nearest_class(alike or classes, sizes, within)
    if cls is None:
        return None
    config = {k: int(v) for k, v in classes[cls]["config"].items()}
    if other_version and description is not None and ("VEC" in config) != ("VEC" in description.parameter_names()):
        # the other form of a kernel with a vector form (the split score's summed form on a GPU, its plain form on a
        # CPU): its configurations mean other code, and VEC left out is the vector form's scalar fold (H100: 0.92 ms a
        # launch against 0.03 for its tuned vector form); the heuristic rather than a warning of unknown parameters
        return None
    if classes[cls].get("heuristic"):
        return None, f"{cls}: the heuristic kept"
    if description is not None:
        from mdhom.mdh.parts import ConfigError

        if other_version:
            # Still valid (checked below) and usually still good: said in the source that learners report
            # (``kernel_configs_``), not warned, since one kernel name covers variants the tuner did not run
            # (the number of bins, a gain plugged in) and every fit would warn.
            cls = f"{cls} [tuned for another version of the kernel: re-run `mdhom tune --kernels {kernel}`]"
        from mdhom.mdh.limits import within_local_memory

        # a 0/1 switch of another variant of the kernel (a row read as words where this variant's rows are not whole
        # words) means nothing here: dropped, not a reason to throw the configuration away; so is a generator switch
        # that an entry of another version carries and this variant does not offer (INLINE of moved rows' whole-row
        # histogram on a build that reads the row index: Intel's file warned at every quantized fit)
        from mdhom.mdh.parts import GENERATOR_SWITCHES, is_generator_parameter

        names = set(description.parameter_names())
        foreign = sorted(p for p, v in config.items() if p not in names and v in (0, 1) and (
            not is_generator_parameter(p) or (other_version and p in GENERATOR_SWITCHES)))
        if foreign:
            config = {p: v for p, v in config.items() if p not in foreign}
            cls = f"{cls} ({', '.join(foreign)} not offered by this variant)"
        # atoms grow with the problem (a histogram's bins): a stored configuration drops local partials and
        # work-items where this variant's would overflow local memory (or a CPU thread's stack, with private
        # accumulators), rather than being thrown away
        fitted = within_local_memory(description, device, config)
        if fitted != config:
            config, cls = fitted, f"{cls} (fitted to the device's memory)"
        try:
            description.check_config(config, device)
        except ConfigError as exc:
            _warn_once("invalid", f"{source}/{kernel}/{cls}", f"{source}: stored {kernel}/{cls} is not usable: {exc}")
            return None
    return config, cls


def heuristic_source(source: str) -> str:
    """Where a build that runs its heuristic says its configuration came from, given :func:`lookup`'s source when it
    answered no configuration: ``heuristic`` where nothing applies, else ``heuristic (<why>)`` (tuning disabled, or
    the class whose tune kept the heuristic)."""
    return source if source == "heuristic" else f"heuristic ({source})"


def lookup_config(
    device: Device,
    kernel: str,
    sizes: Mapping[str, int],
    description: Description | None = None,
    dirs: Iterable[Path] | None = None,
) -> dict[str, int] | None:
    """The best stored configuration of ``kernel`` on ``device`` (see :func:`lookup`), or ``None`` (none stored, or the
    class kept the heuristic: the caller's own default then)."""
    return lookup(device, kernel, sizes, description, dirs)[0]


def lookup(
    device: Device,
    kernel: str,
    sizes: Mapping[str, int],
    description: Description | None = None,
    dirs: Iterable[Path] | None = None,
    warn: bool = True,
    within: float | None = None,
    prefer: Collection[str] | None = None,
) -> tuple[dict[str, int] | None, str]:
    """The best stored configuration, and where it came from (so a learner can show what it loaded).

    The source reads ``"tuned <file> <size class>"``, ``"defaults <group> <size class>"``, ``"heuristic"``,
    or ``"disabled"`` when ``$MDHOM_TUNED=0`` (for measuring what tuning buys). The configuration is the
    best stored one of ``kernel`` on ``device`` at the size class nearest ``sizes``.

    Walks the fallback chain: the device's own file, then the defaults groups ``"<runtime>-<type>"`` and
    ``"<type>"``, then ``None`` (the caller uses ``description.default_config``). With ``description``
    given, a stored configuration that fails ``description.check_config`` on this device is skipped with
    one warning and the chain goes on, so the result is always valid; without it the caller validates.
    Warns once per device when its own file has nothing for the kernel (unless ``warn`` is false: for entries
    whose absence is normal), and once per corrupt file. ``within``: only size classes within that log-distance
    count (a choice measured at one shape that says nothing about shapes far from it). ``prefer``: the size classes of
    the build's own variant (:meth:`mdhom.components.specs.KernelSpec.variant_classes`), among which a build that no
    class was tuned for (another version of the kernel: another number of bins) takes the nearest, if any.
    """
    if os.environ.get(TUNED_ENV, "1") == "0":
        return None, "disabled"
    dir_list = list(dirs) if dirs is not None else search_dirs()
    hit = find_device_file(device.key, dir_list)
    if hit is not None and not same_units(hit[1], device):
        _warn_once("units", str(hit[0]), f"{hit[0]} was tuned on {hit[1]['device']['compute_units']} compute units, "
                   f"{device.key} has {device.compute_units}: its work-group counts do not carry over, so it is not "
                   f"used; run `mdhom tune --device {device.key}` on this machine")
        hit = None
    if hit is not None:
        path, doc = hit
        picked = _pick(doc["kernels"], kernel, sizes, device, description, str(path), within, prefer)
        if picked is not None:
            return picked[0], f"tuned {path.name} {picked[1]}"
    for d in dir_list:
        doc = load_file(Path(d) / DEFAULTS_FILE)
        if doc is None or doc.get("schema") != DEFAULTS_SCHEMA:
            continue
        for group in fallback_groups(device):
            body = doc["groups"].get(group)
            if not body:
                continue
            kernels = _entries_for_units(body["kernels"], kernel, device, dir_list)
            picked = _pick(kernels, kernel, sizes, device, description, f"defaults group {group}", within,
                           prefer)
            if picked is not None:
                if warn:
                    _warn_once(
                        "untuned", device.key,
                        f"{device.key} is not tuned{'' if hit is None else f' for {kernel}'}: using the "
                        f"{group!r} defaults{'' if picked[0] is not None else ' (the heuristic, which they kept)'}; "
                        f"run `mdhom tune --device {device.key}` once for its best parameters",
                    )
                return picked[0], f"defaults {group} {picked[1]}"
    if warn:
        _warn_once(
            "untuned", device.key,
            f"{device.key} is not tuned{'' if hit is None else f' for {kernel}'} and no defaults apply: using the "
            f"heuristic configuration; run `mdhom tune --device {device.key}` once for its best parameters",
        )
    return None, "heuristic"


def same_units(doc: Mapping[str, Any] | None, device: Device) -> bool:
    """Whether the configurations of the device file ``doc`` (None: unknown) apply to ``device`` by its compute
    units. On CPUs the work-group counts that a tune finds are the machine's core count (a 2-core machine's 2
    work-groups left 14 of a 16-core machine's cores idle: PoCL, 10.5M rows, the histogram at 16% of a copy), while one
    CPU model name, and so one device key, covers machines of any core count. GPUs of one key have one count."""
    units = None if doc is None else doc["device"].get("compute_units")
    return device.type != "cpu" or units is None or int(units) == int(device.compute_units)


def _entries_for_units(kernels: Mapping[str, Any], kernel: str, device: Device,
                       dirs: list[Path]) -> Mapping[str, Any]:
    """A defaults group's ``kernel`` with only the size classes whose source device file (its ``source`` key) had
    ``device``'s compute units (:func:`same_units`; a source whose file is not found counts as the same)."""
    entry = kernels.get(kernel)
    if not entry or device.type != "cpu":
        return kernels
    units: dict[str, bool] = {}  # by source: a group's classes come from a few device files (one lookup each)

    def applies(source: str | None) -> bool:
        if not source:
            return same_units(None, device)
        if source not in units:
            units[source] = same_units(load_device(source, dirs), device)
        return units[source]

    classes = {c: e for c, e in entry["classes"].items() if applies(e.get("source"))}
    return {kernel: {**entry, "classes": classes}} if classes else {}


def tuned_status(device: Device, dirs: Iterable[Path] | None = None) -> str:
    """One short phrase for ``mdhom devices``: when the device was tuned and for how many kernels."""
    hit = find_device_file(device.key, dirs)
    if hit is None:
        return "no"
    if not same_units(hit[1], device):
        return f"no (the stored file is for {hit[1]['device']['compute_units']} compute units)"
    kernels = hit[1]["kernels"]
    dates = [e.get("date", "") for k in kernels.values() for e in k["classes"].values()]
    last = max(dates)[:10] if dates else "?"
    return f"{last} ({len(kernels)} kernels)"


__all__ = [
    "DEFAULTS_SCHEMA",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SchemaError",
    "TunedConfigWarning",
    "class_hash",
    "description_hash",
    "fallback_groups",
    "load_device",
    "lookup_config",
    "nearest_class",
    "search_dirs",
    "size_distance",
    "tuned_status",
    "validate",
    "write_dir",
]
