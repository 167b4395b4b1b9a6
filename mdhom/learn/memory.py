"""Size checks before large allocations: a clear error naming what would fit, instead of an allocation that the
kernel's OOM killer ends (a broadcast 2^31-row view copied blindly) or that asks for tens of GiB.

Host memory is what Linux reports as available (``MemAvailable``: free memory plus what the page cache can give
back), bounded by the cgroup's limit where the process runs in one (containers); ``os.sysconf`` pages elsewhere.
psutil would say the same; it is not a dependency.
"""

from __future__ import annotations

import os

GiB = float(1 << 30)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """What the cgroup (v2, else v1) still lets this process allocate, or None without a limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f:
                text = f.read().strip()
            if text == "max":
                return None
            limit = int(text)
            with open(usage_file) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit >= 1 << 60:  # v1's "no limit" is a huge number
            return None
        return max(0, limit - usage)
    return None


def available_host_bytes() -> int:
    """Bytes this process can still allocate on the host without swapping or being killed (an estimate)."""
    avail = _meminfo_available()
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return 1 << 62  # unknown: do not refuse
    room = _cgroup_room()
    return avail if room is None else min(avail, room)


def size_text(nbytes: float) -> str:
    """Bytes for a message: ``1.5 GiB``, ``320.0 MiB``."""
    for unit, scale in (("TiB", GiB * 1024), ("GiB", GiB), ("MiB", float(1 << 20)), ("KiB", 1024.0)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} bytes"


def check_host(nbytes: int, what: str, per_row: int | None = None) -> None:
    """Refuse ``nbytes`` of host memory for ``what`` when it exceeds what is available; ``per_row`` (bytes per
    row) names the most rows that would fit."""
    avail = available_host_bytes()
    if nbytes <= avail:
        return
    fits = f"; about {avail // per_row} rows of this width would fit" if per_row else ""
    raise MemoryError(f"{what} needs {size_text(nbytes)}, but only {size_text(avail)} of host memory is "
                      f"available{fits}")
