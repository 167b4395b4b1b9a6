"""Compiling generated OpenCL source: the programs of the process, each built once per (device, source, options)
and kept, and their kernels, made once per thread. Building is the expensive part of a computation (the OpenCL
compiler), and the one place whose failure names the generated lines (:class:`BuildError`); a
:class:`~mdhom.mdh.computation.Computation` builds here.
"""

from __future__ import annotations

import hashlib
import re
import threading
import warnings

import numpy as np
import pyopencl as cl

from mdhom.devices import Device


class BuildError(RuntimeError):
    """The OpenCL compiler rejected generated source: the message has the log and the failing lines."""

    def __init__(self, name: str, device: Device, log: str, source: str, options: list[str]):
        self.log, self.source, self.options = log, source, options
        super().__init__(
            f"OpenCL build of {name!r} failed on {device.key} with options {' '.join(options)}\n"
            f"--- compiler log ---\n{log.strip()}\n--- generated source near the errors ---\n"
            f"{_excerpt(source, log)}"
        )


def _excerpt(source: str, log: str, context: int = 2) -> str:
    lines = source.splitlines()
    wanted = sorted({int(m) for m in re.findall(r":(\d+):\d+:\s*(?:fatal )?error", log)})
    if not wanted:
        wanted = sorted({int(m) for m in re.findall(r":(\d+):\d+:", log)})[:5]
    if not wanted:
        return "(the log names no line; the whole source is in BuildError.source)"
    shown: list[str] = []
    for n in wanted[:8]:
        for i in range(max(1, n - context), min(len(lines), n + context) + 1):
            mark = ">>" if i == n else "  "
            shown.append(f"{mark}{i:5d} | {lines[i - 1]}")
        shown.append("   ...")
    return "\n".join(shown)


_PROGRAMS: dict[tuple[str, str, tuple[str, ...]], cl.Program] = {}
_BUILD_TURN = threading.Lock()  # one build at a time in the process (build_program)
# kernels of the cached programs with their argument types declared, per thread (a kernel object's arguments are set
# at each launch: two threads' fits must not share one); see program_kernel
_THREAD_KERNELS = threading.local()


def build_program(device: Device, source: str, options: list[str], name: str = "kernel") -> cl.Program:
    """Build (or fetch from the in-process cache) a program; raise :class:`BuildError` on failure.

    Builds take turns (:data:`_BUILD_TURN`): each silences pyopencl's warning of a non-empty build log with
    ``warnings.catch_warnings``, which puts back the process's filters as it found them, so two at once (fits in a
    thread pool) put back each other's and left a filter ignoring CompilerWarning behind."""
    key = (device.build_key, hashlib.sha256(source.encode()).hexdigest(), tuple(options))
    prg = _PROGRAMS.get(key)
    if prg is None:
        with _BUILD_TURN:
            prg = _PROGRAMS.get(key)  # (another thread's build of the same program, while this one waited)
            if prg is None:
                try:
                    with warnings.catch_warnings():
                        # Successful builds log remarks (Intel prints vectorisation reports); failures raise below.
                        warnings.simplefilter("ignore", cl.CompilerWarning)
                        prg = cl.Program(device.context, source).build(options=options)
                except cl.RuntimeError as exc:
                    raise BuildError(name, device, str(exc), source, options) from None
                _PROGRAMS[key] = prg
    return prg


def program_kernel(program: cl.Program, name: str, arg_dtypes: list[np.dtype | None]) -> cl.Kernel:
    """Kernel ``name`` of a cached program with ``arg_dtypes`` declared, made once per thread and asked for at each
    launch, so that a kernel object is only ever launched by the thread it belongs to (each launch sets its
    arguments, then enqueues it: two threads launching one object could mix their arguments). Declaring the types has
    pyopencl fetch its generated invoker from its on-disk cache (no in-memory one): ~0.2 ms a kernel, ~15 ms of every
    fit's fixed cost (66 kernels: 2-core EPYC, PoCL, a one-round fit of 5k rows) where each fit made its own."""
    cache = getattr(_THREAD_KERNELS, "kernels", None)
    if cache is None:
        cache = _THREAD_KERNELS.kernels = {}
    key = (id(program), name)
    hit = cache.get(key)
    if hit is None:  # the entry holds its program: no other program can take its id while it is kept
        hit = cache[key] = (program, cl.Kernel(program, name))
        hit[1].set_scalar_arg_dtypes(arg_dtypes)
    return hit[1]


# ptxas's report under -cl-nv-verbose (NVIDIA): "Compiling entry function 'name' for 'sm_90'", then that function's
# "Used N registers, ..."
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")
# registers are given out to a warp in units of this many (compute capability 5.0 and later)
_NV_REGISTER_UNIT = 256


def nvidia_registers(log: str) -> dict[str, int]:
    """Each kernel's registers per work-item, from a program's build log under ``-cl-nv-verbose``; empty where the
    log has no ptxas report."""
    registers: dict[str, int] = {}
    entry = None
    for line in log.splitlines():
        if (m := _PTXAS_ENTRY.search(line)) is not None:
            entry = m.group(1)
        elif entry is not None and (m := _PTXAS_REGISTERS.search(line)) is not None:
            registers[entry] = int(m.group(1))
            entry = None
    return registers


def work_group_limit(device: Device, program: cl.Program, name: str, kernel: cl.Kernel) -> int:
    """The most work-items a group of kernel ``name`` runs with on ``device``: the driver's
    ``CL_KERNEL_WORK_GROUP_SIZE``, but on NVIDIA the limit its registers set, read from ptxas's report in the build
    log (the options carry ``-cl-nv-verbose`` there: :meth:`Computation.options
    <mdhom.mdh.computation.Computation.options>`). NVIDIA's 580 driver reports 256 for every kernel, the limit of a
    kernel of 255 registers (65536 a block, 256-register units a warp), whatever the kernel holds: a trivial kernel of
    10 registers as well, which runs 512 and 1024 work-items a group correctly (H100). Registers allow
    ``65536 // (ceil(32 r / 256) * 256)`` warps of 32 work-items a group, at most the device's maximum."""
    reported = int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device.cl_device))
    if device.runtime != "nvidia":
        return reported
    log = program.get_build_info(device.cl_device, cl.program_build_info.LOG) or ""
    registers = nvidia_registers(log).get(name)
    if registers is None:
        return reported
    try:
        per_block = int(device.cl_device.registers_per_block_nv)
        warp = int(device.cl_device.warp_size_nv)
    except cl.Error:
        return reported
    per_warp = -(-max(1, registers) * warp // _NV_REGISTER_UNIT) * _NV_REGISTER_UNIT
    return max(reported, min(device.max_work_group_size, per_block // per_warp * warp))
