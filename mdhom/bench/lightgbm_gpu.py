"""Which ``gpu_platform_id`` makes LightGBM's OpenCL learner run on the GPU, asked of LightGBM itself.

LightGBM numbers OpenCL platforms by its own ICD loader's listing, which need not match pyopencl's (pyopencl's
wheel adds its bundled PoCL and Oclgrind, so "platform 0" differs between the two), and an id it does not
know silently falls back to the loader's default device. On the GPU machine that put the "GPU" anchor on a
CPU PoCL device. The only reliable answer is LightGBM's own log: train a tiny model per candidate id and
read ``Using requested OpenCL platform P device D`` and ``Using GPU Device: NAME, Vendor: ...``.

Each probe runs in a child process that is stopped as soon as the device line appears (before LightGBM
compiles its kernels), so a probe costs about a second, and a driver that hangs or crashes costs nothing
but that one candidate. The answer is cached per process.
"""

from __future__ import annotations

import importlib
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "PlatformChoice",
    "choose_platform",
    "parse_log",
    "probe_lightgbm_platform",
    "subprocess_trainer",
    "target_gpu_name",
]

DEVICE_LINE = "Using GPU Device:"
_REQUESTED = re.compile(r"Using requested OpenCL platform (\d+) device (\d+)")

Trainer = Callable[[int], list[str]]  # platform id -> LightGBM's log lines of a tiny training run


@dataclass
class PlatformChoice:
    """The outcome of a probe: ``platform`` is None when no candidate ran on the target GPU (see ``reason``)."""

    platform: int | None
    device_name: str | None
    target: str | None
    confirmed: bool = False  # LightGBM logged "Using requested OpenCL platform" for the id, not a fallback
    tried: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_log(lines: Iterable[str], platform: int) -> tuple[bool, str | None]:
    """(whether LightGBM confirmed ``platform`` as requested, the device name it logged, or None)."""
    requested, device = False, None
    for line in lines:
        m = _REQUESTED.search(line)
        if m and int(m.group(1)) == platform:
            requested = True
        if DEVICE_LINE in line and device is None:
            device = line.split(DEVICE_LINE, 1)[1].split(", Vendor:", 1)[0].strip()
    return requested, device


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _matches(device: str, target: str) -> bool:
    d, t = _norm(device), _norm(target)
    return bool(d) and bool(t) and (t in d or d in t)


def choose_platform(target: str, candidates: Iterable[int], trainer: Trainer) -> PlatformChoice:
    """The first candidate id whose LightGBM log names ``target``, preferring ids LightGBM confirmed.

    A candidate that matched only through LightGBM's fallback to its default device is kept as a second
    choice: passing it reproduces what was observed, but it is marked ``confirmed=False``.
    """
    t0 = time.perf_counter()
    tried: list[dict[str, Any]] = []
    fallback: tuple[int, str] | None = None
    for p in candidates:
        error = None
        try:
            lines = trainer(p)
        except Exception as exc:  # a broken driver or a timeout rules out this candidate only
            lines, error = [], f"{type(exc).__name__}: {exc}"
        requested, device = parse_log(lines, p)
        if device is None and error is None:
            tail = [ln for ln in lines if ln.strip()][-1:]
            error = f"no '{DEVICE_LINE}' line" + (f" (last: {tail[0].strip()[:200]})" if tail else "")
        tried.append({"platform": p, "requested": requested, "device": device, "error": error})
        if device is not None and _matches(device, target):
            if requested:
                return PlatformChoice(p, device, target, True, tried, None, time.perf_counter() - t0)
            if fallback is None:
                fallback = (p, device)
    if fallback is not None:
        return PlatformChoice(fallback[0], fallback[1], target, False, tried, None, time.perf_counter() - t0)
    seen = sorted({str(t["device"]) for t in tried if t["device"]})
    reason = (
        f"LightGBM's OpenCL learner ran on no device named like {target!r} for gpu_platform_id "
        f"{', '.join(str(t['platform']) for t in tried) or '(none)'}"
        + (f"; it used {', '.join(seen)}" if seen else "")
        + " (pass --lightgbm-platform to time it on one of those anyway)"
    )
    return PlatformChoice(None, None, target, False, tried, reason, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------- live probing

_PROBE_CODE = """
import sys
import mdhom  # the ICD environment the benchmark's LightGBM run sees (mdhom sets OCL_ICD_VENDORS)
import pyopencl  # loaded before LightGBM, as in the benchmark process
import numpy as np
import lightgbm as lgb

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 4))
y = (X[:, 0] > 0).astype(float)
params = {"objective": "binary", "device_type": "gpu", "gpu_platform_id": int(sys.argv[1]),
          "gpu_device_id": int(sys.argv[2]), "num_leaves": 4, "min_data_in_leaf": 5, "num_threads": 1,
          "verbose": 1}
lgb.train(params, lgb.Dataset(X, y), num_boost_round=1)
"""


def subprocess_trainer(platform: int, device: int = 0, timeout: float = 120.0) -> list[str]:
    """LightGBM's log for a 200-row, 1-round GPU model on (``platform``, ``device``), from a child process.

    The child is stopped once the device line is logged: what follows is kernel compilation, which takes
    tens of seconds on a CPU runtime and tells nothing more. Raises TimeoutError when no line comes in time.
    """
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", _PROBE_CODE, str(platform), str(device)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )
    lines: list[str] = []
    pipe: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            pipe.put(line)
        pipe.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no '{DEVICE_LINE}' line within {timeout:g} s")
            try:
                line = pipe.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                break
            lines.append(line.rstrip("\n"))
            if DEVICE_LINE in line:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return lines


def target_gpu_name() -> str | None:
    """Name of the first OpenCL GPU mdhom lists (simulators such as Oclgrind excluded), e.g. "NVIDIA H200"."""
    try:
        from mdhom import devices

        return next((d.name for d in devices() if d.type == "gpu" and not d.checker), None)
    except Exception:  # no OpenCL at all
        return None


def _platform_count() -> int:
    try:
        importlib.import_module("mdhom")  # first: it sets the ICD environment pyopencl's loader reads
        import pyopencl as cl

        return len(cl.get_platforms())
    except Exception:
        return 0


_CACHE: dict[tuple[Any, ...], PlatformChoice] = {}


def probe_lightgbm_platform(
    device: int = 0,
    target: str | None = None,
    n_candidates: int | None = None,
    trainer: Trainer | None = None,
) -> PlatformChoice:
    """The ``gpu_platform_id`` that puts LightGBM on mdhom's first OpenCL GPU, probed once per process.

    Candidates are ids 0 .. (pyopencl's platform count + 1): LightGBM's loader may list more or fewer
    platforms than pyopencl's. ``target`` defaults to :func:`target_gpu_name`; without one there is nothing
    to look for and the choice carries the reason.
    """
    target = target if target is not None else target_gpu_name()
    n = n_candidates if n_candidates is not None else _platform_count() + 2
    key = (device, target, n)
    if key in _CACHE:
        return _CACHE[key]
    if target is None:
        choice = PlatformChoice(
            None, None, None, reason="mdhom lists no OpenCL GPU (simulators excluded): nothing to run LightGBM's "
            "OpenCL learner on (pass --lightgbm-platform to time it on a CPU runtime anyway)"
        )
    else:
        run = trainer or (lambda p: subprocess_trainer(p, device))
        choice = choose_platform(target, range(n), run)
    _CACHE[key] = choice
    return choice


def clear_cache() -> None:
    _CACHE.clear()
