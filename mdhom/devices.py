"""OpenCL devices as mdhom sees them: discovery, stable device keys, and picking one by a short spec.

The device key names the runtime, the device and the driver's major version. It keys the tuned
configurations, so it must not change between runs on one machine and must be safe as a file name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from mdhom import _icd

_icd.configure()

import pyopencl as cl  # noqa: E402  (the ICD environment must be set before the loader starts)

DEVICE_ENV = "MDHOM_DEVICE"

_PLATFORM_SHORT = (
    ("portable computing language", "pocl"),
    ("oclgrind", "oclgrind"),
    ("nvidia", "nvidia"),
    ("amd", "amd"),
    ("intel", "intel"),
    ("apple", "apple"),
)


def _slug(text: str) -> str:
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def _platform_short(platform_name: str) -> str:
    low = platform_name.lower()
    for needle, short in _PLATFORM_SHORT:
        if needle in low:
            return short
    return _slug(platform_name).split("-")[0] or "opencl"


def _major_version(driver_version: str) -> str:
    m = re.search(r"\d+", driver_version)
    return m.group(0) if m else "0"


@dataclass(frozen=True)
class Device:
    """One OpenCL device, with the facts the generator and the tuner need.

    ``checker`` marks simulators (Oclgrind): correct but far too slow to compute with, so never picked by
    ``"auto"``, ``"cpu"`` or ``"gpu"``, only by name.
    """

    key: str
    platform: str
    name: str
    vendor: str
    type: str  # "gpu", "cpu" or "accelerator"
    driver_version: str
    opencl_version: str
    checker: bool
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    local_mem_size: int
    global_mem_size: int
    compute_units: int
    has_fp64: bool
    has_int64_atomics: bool
    cl_device: cl.Device = field(repr=False, compare=False)
    # set on a sub-device made by :func:`with_threads`: the root device's compute units (0 on a root device);
    # the key stays the root's (same tuned configurations) but builds are cached per context
    root_units: int = 0

    @property
    def build_key(self) -> str:
        """What keys built programs: a program belongs to one context, and a sub-device has its own."""
        return f"{self.key}@{self.compute_units}" if self.root_units else self.key

    @property
    def runtime(self) -> str:
        """Short runtime name: pocl, intel, nvidia, amd, oclgrind, ..."""
        return self.key.split("-", 1)[0]

    @cached_property
    def context(self) -> cl.Context:
        return cl.Context([self.cl_device])

    @cached_property
    def queue(self) -> cl.CommandQueue:
        """The device's in-order queue, with profiling on so kernels can be timed by events."""
        return cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)

    @cached_property
    def fast_queue(self) -> cl.CommandQueue:
        """An in-order queue without profiling: each command costs the host less (H100 machine: a launch 11.7
        instead of 18.1 us, a 64-byte upload 8.5 instead of 15.5 us), which a learner's many small launches feel.
        Its events carry no timestamps."""
        return cl.CommandQueue(self.context)

    @property
    def sub_buffers(self) -> bool:
        """Whether kernels may read and write regions of a buffer as sub-buffers (:meth:`Workspace.view
        <mdhom.components.workspace.Workspace.view>`). Not on NVIDIA: its driver (580, H200) crashed the process,
        with a segfault at a later launch or release, once sub-buffers made after a kernel had used their buffer were
        released (a loss-guided fit's third fit of 2M rows; a script making 2000 such sub-buffers and releasing them,
        idle or not, in either order with their buffer); sub-buffers all made before any kernel ran did not. The
        histogram arena's views follow this; the rule learner's few sub-buffers, each made right after its buffer is
        allocated, do not (30 rule fits in one process on the H200 ran clean)."""
        return self.runtime != "nvidia"

    @property
    def known_faults(self) -> tuple[str, ...]:
        """Faults of this runtime's version that change results (:func:`known_faults`)."""
        return known_faults(self.runtime, self.driver_version)

    def describe(self) -> str:
        role = "checker" if self.checker else self.type
        return (
            f"{self.key:<48} {role:<8} {self.name} ({self.platform}, driver {self.driver_version}, "
            f"{self.compute_units} CUs, max WG {self.max_work_group_size}, local {self.local_mem_size // 1024} KiB)"
        )


# PoCL 4.0 (pocl issue 1390, fixed in 6.0) and the H200 machine's PoCL 5.0 (Debian) run a tree reduction in local
# memory whose loop holds a barrier wrong: that issue's own kernel returned another maximum there, and 12 of 40
# random configurations of the generator's column maximum wrote wrong maxima (POCL_WORK_GROUP_METHOD=cbs: more).
_POCL_BARRIER_LOOPS = ("PoCL {version} runs some local-memory reductions whose loop holds a barrier wrong (pocl issue "
                       "1390, fixed in PoCL 6.0): some kernel configurations return wrong results. The tuner rejects "
                       "those it measures, but use PoCL 6 or later, or the PoCL that pyopencl[pocl] bundles.")


def known_faults(runtime: str, driver_version: str) -> tuple[str, ...]:
    """Sentences naming the faults known of ``runtime`` at ``driver_version`` that change results (none: empty)."""
    if runtime == "pocl" and _major_version(driver_version) in ("4", "5"):
        return (_POCL_BARRIER_LOOPS.format(version=driver_version),)
    return ()


_WARNED: set[str] = set()


def warn_known_faults(device: Device) -> None:
    """Warn, once per device and process, of the faults :func:`known_faults` knows of its runtime's version."""
    if device.key in _WARNED:
        return
    _WARNED.add(device.key)
    from mdhom._warn import warn

    for fault in device.known_faults:
        warn(f"{device.key}: {fault}")


def _type_name(t: int) -> str:
    if t & cl.device_type.GPU:
        return "gpu"
    if t & cl.device_type.CPU:
        return "cpu"
    return "accelerator"


_DEVICES: list[Device] | None = None


def devices() -> list[Device]:
    """Every OpenCL device usable on this machine, in a stable order (GPUs, CPUs, then checkers)."""
    global _DEVICES
    if _DEVICES is not None:
        return list(_DEVICES)
    found: list[Device] = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    keys: dict[str, int] = {}
    for platform in platforms:
        try:
            cl_devices = platform.get_devices()
        except cl.Error:
            continue
        short = _platform_short(platform.name)
        for d in cl_devices:
            key = f"{short}-{_slug(d.name)}-v{_major_version(d.driver_version)}"
            keys[key] = keys.get(key, 0) + 1
            if keys[key] > 1:
                key = f"{key}-{keys[key]}"
            found.append(
                Device(
                    key=key,
                    platform=platform.name.strip(),
                    name=d.name.strip(),
                    vendor=d.vendor.strip(),
                    type=_type_name(d.type),
                    driver_version=d.driver_version.strip(),
                    opencl_version=d.version.strip(),
                    checker=short == "oclgrind",
                    max_work_group_size=int(d.max_work_group_size),
                    max_work_item_sizes=tuple(int(s) for s in d.max_work_item_sizes),
                    local_mem_size=int(d.local_mem_size),
                    global_mem_size=int(d.global_mem_size),
                    compute_units=int(d.max_compute_units),
                    has_fp64="cl_khr_fp64" in d.extensions or d.double_fp_config != 0,
                    has_int64_atomics="cl_khr_int64_base_atomics" in d.extensions,
                    cl_device=d,
                )
            )
    order = {"gpu": 0, "accelerator": 1, "cpu": 2}
    # PoCL first among CPUs: it is the embedded default that every installation has.
    found.sort(key=lambda dev: (dev.checker, order[dev.type], dev.runtime != "pocl"))
    _DEVICES = found
    return list(found)


def compute_devices() -> list[Device]:
    """Devices that do real work (everything but checkers such as Oclgrind)."""
    return [d for d in devices() if not d.checker]


def get_device(spec: str | Device | None = None) -> Device:
    """Resolve a device spec: ``"auto"`` (GPU, else CPU), ``"cpu"``, ``"gpu"``, a key, or a substring.

    ``None`` reads ``$MDHOM_DEVICE`` and falls back to ``"auto"``. A substring matches keys and device
    names, case-insensitively; when it matches several devices the error lists them.
    """
    if isinstance(spec, Device):
        warn_known_faults(spec)
        return spec
    if spec is None:
        spec = os.environ.get(DEVICE_ENV) or "auto"
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string or mdhom.Device, got {type(spec).__name__}")
    want = spec.strip().lower()
    every = devices()
    usable = [d for d in every if not d.checker]
    found = _resolve(want, every, usable)
    if found is not None:
        warn_known_faults(found)
        return found
    hits = [d for d in every if want in d.key or want in d.name.lower()]
    if not hits:
        raise ValueError(f"unknown device {spec!r}; devices present: {_listing(every)}")
    raise ValueError(f"device {spec!r} is ambiguous, it matches: {_listing(hits)}")


def _resolve(want: str, every: list[Device], usable: list[Device]) -> Device | None:
    """The one device ``want`` names (a kind, a key, a runtime, a unique substring), else None."""
    if want in ("auto", "gpu", "cpu"):
        kinds = ["gpu", "cpu"] if want == "auto" else [want]
        for kind in kinds:
            for d in usable:
                if d.type == kind:
                    return d
        raise ValueError(f"no OpenCL {want} device found; devices present: {_listing(every)}")
    for d in every:
        if d.key == want:
            return d
    # a runtime's name ("intel", "pocl", "nvidia") picks that runtime before any substring match
    prefixed = [d for d in every if d.key.startswith(want + "-")]
    if len(prefixed) == 1:
        return prefixed[0]
    hits = [d for d in every if want in d.key or want in d.name.lower()]
    return hits[0] if len(hits) == 1 else None


_SUBDEVICES: dict[tuple[str, int], Device] = {}


def with_threads(device: Device, n_jobs: int | None) -> Device:
    """``device`` limited to ``n_jobs`` compute units (threads, on a CPU runtime) by OpenCL device fission:
    a sub-device made with ``CL_DEVICE_PARTITION_BY_COUNTS``, kept for the process so its builds are reused.

    ``None``, -1, or at least the device's own count give the device itself, as do GPUs (their compute units
    are not threads) and runtimes without partitioning by counts. PoCL runs a sub-device's work-groups on that
    many threads; Intel's CPU runtime reports the sub-device's count but was seen running kernels on two
    threads of a 2-core machine with one compute unit asked for (the waiting host thread may join in).
    """
    if n_jobs is None or n_jobs == -1 or device.type != "cpu" or device.root_units:
        return device
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be None, -1 or a positive number of threads, got {n_jobs}")
    if n_jobs >= device.compute_units:
        return device
    key = (device.key, n_jobs)
    if key in _SUBDEVICES:
        return _SUBDEVICES[key]
    by_counts = cl.device_partition_property.BY_COUNTS
    try:
        if by_counts not in (device.cl_device.partition_properties or []):
            return device
        sub = device.cl_device.create_sub_devices([by_counts, n_jobs, cl.device_partition_property.BY_COUNTS_LIST_END])
    except cl.Error:
        return device
    limited = replace(device, cl_device=sub[0], compute_units=int(sub[0].max_compute_units),
                      root_units=device.compute_units)
    _SUBDEVICES[key] = limited
    return limited


def _listing(devs: list[Device]) -> str:
    return ", ".join(d.key for d in devs) or "none (is pyopencl[pocl] installed?)"
