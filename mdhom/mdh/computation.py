"""Build an md_hom description for a device and configuration, then run it on numpy or device arrays.

Building is the expensive part (code generation and the OpenCL compiler, :mod:`~mdhom.mdh.build`), so a
:class:`Computation` builds once per (device, source, options) and every call only binds sizes and enqueues; a
configuration beyond the device's limits is shrunk to fit by :mod:`~mdhom.mdh.limits`, not here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from pytools import strtobool

from mdhom.devices import Device, get_device
from mdhom.mdh.build import build_program, program_kernel, work_group_limit
from mdhom.mdh.codegen import generate
from mdhom.mdh.description import Description
from mdhom.mdh.parts import ConfigError, KernelLimitError
from mdhom.mdh.types import CTYPES, itemsize

_INDEX32_LIMIT = 2**31 - 1


@dataclass
class Launch:
    """What one call enqueued: the output and the kernel events (for profiling)."""

    out: cl_array.Array
    events: list[cl.Event]

    def kernel_seconds(self) -> float:
        """Sum of the kernels' device times from profiling events (waits for them)."""
        cl.wait_for_events(self.events)
        return sum((e.profile.end - e.profile.start) * 1e-9 for e in self.events)


class Computation:
    """A description built for one device and one configuration. Construct once, call many times.

    >>> import numpy as np
    >>> from mdhom import mdh
    >>> row_sums = mdh.Description("row_sums", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "float",
    ...     "out = x;", inputs=[mdh.Input("x", "float", ("i", "j"))])
    >>> comp = mdh.Computation(row_sums)      # default device and configuration
    >>> comp(x=np.ones((3, 5), np.float32))
    array([5., 5., 5.], dtype=float32)
    """

    def __init__(
        self,
        desc: Description,
        device: str | Device | None = None,
        config: Mapping[str, int] | None = None,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        self.desc = desc
        self.device = get_device(device)
        base = desc.default_config(self.device, dict(sizes) if sizes else None)
        self.config = {**base, **{k: int(v) for k, v in (config or {}).items()}}
        desc.check_config(self.config, self.device)
        # what every launch needs, computed once (enqueue runs thousands of times per tree)
        self.work_group_size = math.prod(self.config[f"NUM_WI_{d}"] for d in desc.dim_names)
        self.num_groups = math.prod(self.config[f"NUM_WG_{d}"] for d in desc.dim_names)
        self.lane_groups = math.prod(self.config[f"NUM_WG_{d}"] for d in desc.lane_dims)
        # FLAT=1: the work-groups add into a zeroed output with atomics, so nothing to combine after the main kernel
        self.flat = bool(self.config.get("FLAT"))
        # the launch-independent parts of :meth:`wide_indices`: every launched work-item, and the indices of the
        # partials' lanes per output atom (none under FLAT)
        self._launched = self.num_groups * self.work_group_size
        self._zero_wi = 1 if self.device.type == "cpu" else 64  # the zero kernel's groups (FLAT="private": _zero)
        # the first dimension's work-groups are the outermost of a group's number (mdh_decompose.cl.mako): where it
        # is concatenated, a launch of fewer points along it than the build covers in one pass needs only the groups
        # that hold them (:meth:`groups`)
        first = desc.dim_names[0]
        self._trim = not self.flat and first in desc.concat_dims
        self._first_wg = self.config[f"NUM_WG_{first}"]
        self._first_wi = self.config[f"NUM_WI_{first}"]
        self._first_vec = int(self.config.get("VEC", 1)) if desc.vector and desc.vector.dim == first else 1
        self._lanes = (1 if self.flat else max(1, self.lane_groups)) * max(1, desc.combine_lanes)
        self._param_types = [(p.name, CTYPES[p.ctype].type) for p in desc.params]
        self.source = generate(desc)
        self._programs: dict[bool, cl.Program] = {}
        self._specs: dict[tuple[bool, str], tuple] = {}  # (index64, which) -> kernel_spec, its limit checked
        self._scratch: cl_array.Array | None = None
        self._work: cl.Buffer | None = None  # the description's Scratch, grown on demand
        self._work_bytes = 0
        for which in self.kernel_names():  # build now: a configuration the compiled kernels cannot run fails here
            self.kernel(which)

    # ---------------------------------------------------------------- build
    def options(self, index64: bool) -> list[str]:
        opts = [f"-D{k}={v}" for k, v in sorted(self.config.items())]
        if index64:
            opts.append("-DMDH_INDEX_64")
        if self.device.checker:
            # Oclgrind's LLVM cannot run the noalias intrinsics that optimised inlining emits, nor prefetches
            opts += ["-cl-opt-disable", "-DMDH_CHECKER=1"]
        if self.device.runtime == "nvidia":  # ptxas's registers per kernel in the log: build.work_group_limit
            opts.append("-cl-nv-verbose")
        if self.device.runtime == "pocl" and not strtobool(os.environ.get("PYOPENCL_COMPILER_OUTPUT", "False")):
            # PoCL's clang prints a build's warning count ("33 warnings generated.") straight to stderr, past the
            # log that build_program keeps quiet: a user's first fit printed two such lines. The warnings are
            # -Wpsabi's notes on the CPUs' vector forms (double8 passed to and from functions on a host without
            # AVX-512), about an ABI no call here crosses (a program is one module); PoCL refuses -Wno-psabi.
            # PYOPENCL_COMPILER_OUTPUT=1 (pyopencl's switch for showing build logs, read as pyopencl reads it)
            # keeps them.
            opts.append("-w")
        return opts

    def program(self, index64: bool = False) -> cl.Program:
        if index64 not in self._programs:
            self._programs[index64] = build_program(
                self.device, self.source, self.options(index64), self.desc.name
            )
        return self._programs[index64]

    def kernel_names(self) -> tuple[str, ...]:
        zero = ("zero",) if self.desc.flat_private else ()
        if not self.desc.lane_dims or self.desc.place is not None:
            return ("main", *zero)
        return ("main", "partials", "fixup") if self.desc.scan_dim else ("main", "combine", *zero)

    def kernel(self, which: str, index64: bool = False) -> cl.Kernel:
        """One of the generated kernels ("main", "combine", "partials", "fixup" or "zero"), the calling thread's
        (:func:`program_kernel`: ask again at each launch rather than keep it)."""
        return program_kernel(*self.kernel_spec(which, index64))

    def kernel_spec(self, which: str, index64: bool = False) -> tuple[cl.Program, str, list[np.dtype | None]]:
        """What :func:`program_kernel` makes a generated kernel from: its program, name and argument types.

        A compiled kernel may run fewer work-items per group than the device maximum (registers, private
        memory); a configuration beyond that is a :class:`ConfigError`, found before any launch. The limit is
        :func:`~mdhom.mdh.build.work_group_limit`'s: the driver's word, on NVIDIA the kernel's registers.
        """
        key = (index64, which)
        if key not in self._specs:
            spec = (self.program(index64), f"{self.desc.name}_{which}", self._arg_dtypes(index64))
            limit = work_group_limit(self.device, spec[0], spec[1], program_kernel(*spec))
            wanted = (self.work_group_size if which == "main" else self._zero_wi if which == "zero"
                      else self.config["NUM_WI_COMBINE"])
            if wanted > limit:
                raise KernelLimitError(
                    f"{self.desc.name}: kernel {which!r} runs at most {limit} work-items per group on "
                    f"{self.device.key} (registers or private memory), the configuration asks for {wanted}",
                    which, limit, wanted,
                )
            self._specs[key] = spec
        return self._specs[key]

    def _arg_dtypes(self, index64: bool) -> list[np.dtype | None]:
        """Every generated kernel's arguments: output, partials and inputs (buffers), the dimension sizes and
        the scalar parameters. Declared once, so that a launch passes all of them through pyopencl's
        generated invoker: one call sets them (a few microseconds), where ``set_arg`` costs ~10-20 us each."""
        idx = np.dtype(np.int64 if index64 else np.int32)
        n_buffers = 2 + len(self.desc.inputs) + (self.desc.scratch is not None)
        return ([None] * n_buffers + [idx] * len(self.desc.dim_names)
                + [CTYPES[p.ctype] for p in self.desc.params])

    # ---------------------------------------------------------------- geometry
    def output_shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(sizes[d] for d in self.desc.output_dims) + self.desc.atom.shape

    # ---------------------------------------------------------------- binding
    def bind_sizes(self, arrays: Mapping[str, object], sizes: Mapping[str, int] | None) -> dict[str, int]:
        """Dimension sizes from the inputs' shapes and ``sizes``; every disagreement is an error, but one: a
        gathered input may be longer along a reduced dimension whose size ``sizes`` gives. Its kernel reads it at
        indices of its own (a level's nodes at their slots' offsets in one buffer of every row, ``pos`` the longest
        node's count), so the tuner can time the calls the learner makes; along an output dimension a longer input
        would be results silently left out, and stays an error."""
        given = set(sizes or {})
        bound = {k: int(v) for k, v in (sizes or {}).items()}
        unknown = set(bound) - set(self.desc.dim_names)
        if unknown:
            raise ValueError(f"{self.desc.name}: sizes given for unknown dimension(s) {sorted(unknown)}")
        for inp in self.desc.inputs:
            arr = arrays[inp.name]
            shape = tuple(arr.shape)
            if len(shape) != len(inp.shape):
                raise ValueError(
                    f"{self.desc.name}: input {inp.name!r} must have {len(inp.shape)} dimension(s) "
                    f"{inp.shape}, got shape {shape}"
                )
            for axis, (want, got) in enumerate(zip(inp.shape, shape, strict=True)):
                if want == "*":
                    continue
                if isinstance(want, int):
                    if got != want:
                        raise ValueError(
                            f"{self.desc.name}: input {inp.name!r} axis {axis} must have extent {want}, got {got}"
                        )
                elif want in bound and bound[want] != got:
                    if inp.gather and want in given and got > bound[want] and want not in self.desc.output_dims:
                        continue
                    raise ValueError(
                        f"{self.desc.name}: input {inp.name!r} axis {axis} has extent {got}, but dimension "
                        f"{want!r} has size {bound[want]}"
                    )
                else:
                    bound[want] = got
        missing = [d for d in self.desc.dim_names if d not in bound]
        if missing:
            raise ValueError(f"{self.desc.name}: give the size of dimension(s) {missing} with sizes=")
        bad = {d: n for d, n in bound.items() if n < 1}
        if bad:
            raise ValueError(f"{self.desc.name}: dimension sizes must be at least 1, got {bad}")
        return bound

    def _check_inputs(self, arrays: Mapping[str, object]) -> None:
        names = {i.name for i in self.desc.inputs} | {p.name for p in self.desc.params}
        extra = set(arrays) - names
        if extra:
            raise TypeError(f"{self.desc.name}: unexpected argument(s) {sorted(extra)}; expects {sorted(names)}")
        missing = names - set(arrays)
        if missing:
            raise TypeError(f"{self.desc.name}: missing argument(s) {sorted(missing)}")
        for inp in self.desc.inputs:
            arr = arrays[inp.name]
            if not isinstance(arr, np.ndarray | cl_array.Array):
                raise TypeError(
                    f"{self.desc.name}: input {inp.name!r} must be a numpy or pyopencl array, "
                    f"got {type(arr).__name__}"
                )
            want = CTYPES[inp.ctype]
            if arr.dtype != want:
                raise TypeError(
                    f"{self.desc.name}: input {inp.name!r} must have dtype {want} ({inp.ctype}), got {arr.dtype}"
                )

    def wide_indices(self, points: int, n_out: int) -> bool:
        """Whether a launch over ``points`` index points (or input elements) with ``n_out`` output atoms needs the
        64-bit index build: a point index runs up to a stride (every launched work-item) past its bound, and the
        partials of the work-groups along reduced dimensions are indexed lane by lane where they combine so (none
        under FLAT: its shares' bounds are 64-bit in the kernel). The one rule of :meth:`_index64` and of bound
        launches (:meth:`BoundLaunch.index64`)."""
        return max(points + self._launched, n_out * self._lanes) > _INDEX32_LIMIT

    def _index64(self, sizes: Mapping[str, int], arrays: Mapping[str, object]) -> bool:
        n_out = math.prod(sizes[d] for d in self.desc.output_dims)
        return (self.wide_indices(math.prod(sizes.values()), n_out)
                or max([0] + [math.prod(a.shape) for a in arrays.values() if hasattr(a, "shape")]) > _INDEX32_LIMIT)

    # ---------------------------------------------------------------- running
    def groups(self, first: int) -> int:
        """Work-groups of a launch of ``first`` points along the first dimension: the build's, or where that dimension
        is concatenated and its points fit one pass of fewer groups (a point then sits at the same group and lane
        whether the shares are strided or chunked), only those. The others would find no point to compute, and on
        PoCL they cost as if one thread's run of groups were all empty ones: a split score of 32 nodes built for 128
        ran at half speed (2-core EPYC, 1.71 -> 0.85 ms). Every point is computed by the same lane and folded in the
        same order as in the full grid: results are bit for bit the same."""
        if not self._trim:
            return self.num_groups
        units = -(-first // self._first_vec)
        used = max(1, min(self._first_wg, -(-units // self._first_wi)))
        return used * (self.num_groups // self._first_wg)

    def check_line(self, sizes: Mapping[str, int]) -> None:
        """A placing scan's lines fit its local arrays (:class:`~mdhom.mdh.parts.Place`'s ``line_max``)."""
        pl = self.desc.place
        if pl is not None and int(sizes[self.desc.scan_dim]) > pl.line_max:
            raise ValueError(f"{self.desc.name}: lines of {int(sizes[self.desc.scan_dim])} points along "
                             f"{self.desc.scan_dim}, more than its line_max {pl.line_max}")

    def enqueue(
        self,
        sizes: Mapping[str, int] | None = None,
        out: cl_array.Array | None = None,
        queue: cl.CommandQueue | None = None,
        **args: object,
    ) -> Launch:
        """Enqueue on device arrays (numpy inputs are copied over) and return without waiting."""
        self._check_inputs(args)
        arrays = {i.name: args[i.name] for i in self.desc.inputs}
        bound = self.bind_sizes(arrays, sizes)
        self.check_line(bound)
        queue = queue or self.device.queue
        index64 = self._index64(bound, arrays)
        idx = np.int64 if index64 else np.int32
        shape = self.output_shape(bound)
        if out is None:  # a scatter that adds starts from zeros; every other output is written whole
            make = cl_array.zeros if self.desc.scatter_add else cl_array.empty
            out = make(queue, shape, self.desc.atom.dtype)
        elif tuple(out.shape) != shape or out.dtype != self.desc.atom.dtype:
            raise ValueError(
                f"{self.desc.name}: out must have shape {shape} and dtype {self.desc.atom.dtype}, "
                f"got {tuple(out.shape)} {out.dtype}"
            )
        n_concat = math.prod(bound[d] for d in self.desc.concat_dims)
        partial = self._partials(queue, n_concat * self.lane_groups if self.lane_groups > 1 and not self.flat else 1)
        kargs: list[object] = [out.data, partial.data]
        for inp in self.desc.inputs:
            arr = arrays[inp.name]
            if isinstance(arr, np.ndarray):
                arr = cl_array.to_device(queue, np.ascontiguousarray(arr))
            kargs.append(arr.data)
        if self.desc.scratch is not None:
            kargs.append(self.work_buffer(int(args[self.desc.scratch.length])))
        kargs.extend(idx(bound[d]) for d in self.desc.dim_names)
        for name, cast in self._param_types:
            kargs.append(cast(args[name]))
        wg = self.work_group_size
        events = self._zero(queue, index64, out.data, out.nbytes, kargs)
        events.append(self._launch("main", index64, queue, self.groups(bound[self.desc.dim_names[0]]) * wg, wg, kargs))
        if self.desc.lane_dims and self.lane_groups > 1 and not self.flat:
            wi = self.config["NUM_WI_COMBINE"]
            for which in ("partials", "fixup") if self.desc.scan_dim else ("combine",):
                events.append(self._launch(which, index64, queue, self.step_size(which, n_concat, bound), wi, kargs))
        return Launch(out, events)

    def _zero(self, queue: cl.CommandQueue, index64: bool, out: cl.Buffer, nbytes: int, kargs: list[object]
              ) -> list[cl.Event]:
        """FLAT=1's zeroed output before the main kernel: the description's zero kernel where it has one (private
        FLAT, what CPUs run: PoCL fills a buffer on one thread, a 16-core host's 3.7 MB in 0.40 ms against the
        kernel's 0.31), else a fill. The kernel runs as many work-items as the main one, a contiguous run of words
        each, in groups of one on CPUs (a group runs on one thread) and of 64 elsewhere."""
        if not self.flat:
            return []
        if self.desc.flat_private:
            wi = self._zero_wi
            return [self._launch("zero", index64, queue, -(-self._launched // wi) * wi, wi, kargs)]
        return [zero_output(queue, out, nbytes)]

    def step_size(self, which: str, n_concat: int, sizes: Mapping[str, int]) -> int:
        """The global size of a second kernel (:func:`_step_size`)."""
        scan = int(sizes[self.desc.scan_dim]) if self.desc.scan_dim else 0
        return _step_size(which, n_concat, scan, self.config["NUM_WI_COMBINE"], max(1, self.desc.combine_lanes))

    def _launch(self, which: str, index64: bool, queue: cl.CommandQueue, global_size: int, local_size: int,
                kargs: list[object]) -> cl.Event:
        return self.kernel(which, index64)(queue, (global_size,), (local_size,), *kargs)

    def bind(self, out: cl_array.Array | cl.Buffer, queue: cl.CommandQueue | None = None,
             **buffers: cl_array.Array | cl.Buffer) -> BoundLaunch:
        """Bind the output and input buffers once, for launches that change only sizes and scalar parameters.

        This is the hot path of iterative algorithms (a loss-guided tree launches thousands of kernels per
        round on buffers it allocated up front): no shape or dtype checks and no array objects per call.
        The caller guarantees that the buffers hold every element the given sizes address (the generated
        kernels never read or write outside the index space; Oclgrind checks that in the tests). Oclgrind checks a
        sub-buffer's accesses against its parent buffer only, so on checker devices each launch also checks that
        its output buffer holds the output the sizes address (a view too small for it would write into its
        neighbours unseen).
        """
        names = {i.name for i in self.desc.inputs}
        if set(buffers) != names:
            raise TypeError(f"{self.desc.name}: bind needs exactly the inputs {sorted(names)}, got {sorted(buffers)}")
        return BoundLaunch(self, out, [buffers[i.name] for i in self.desc.inputs], queue or self.device.queue)

    def _partials(self, queue: cl.CommandQueue, n: int) -> cl_array.Array:
        """Scratch for ``n`` work-group partials; more than half the device's memory is a ConfigError (a
        configuration with too many work-groups along a reduced dimension), checked before allocating."""
        nbytes = n * itemsize(self.desc.atom)
        if nbytes > self.device.global_mem_size // 2:
            raise ConfigError(f"{self.desc.name}: {n} work-group partials need {nbytes} bytes, more than half of "
                              f"{self.device.key}'s {self.device.global_mem_size} bytes")
        if self._scratch is None or self._scratch.size < n * math.prod(self.desc.atom.shape or (1,)):
            self._scratch = cl_array.empty(queue, (n,) + self.desc.atom.shape, self.desc.atom.dtype)
        return self._scratch

    def work_buffer(self, length: int) -> cl.Buffer:
        """The description's :class:`~mdhom.mdh.parts.Scratch`: ``length`` elements for each work-item of
        the main kernel, allocated once and grown on demand; a need beyond the device's largest allocation (or
        half its memory) is a :class:`ConfigError` raised before allocating (fewer work-groups need less)."""
        sc = self.desc.scratch
        if length < 0:
            raise ValueError(f"{self.desc.name}: scratch length {sc.length}={length} must not be negative")
        cap = int(self.config.get("SCRATCH_PRIVATE", 0))
        if cap > 0:  # the slice is private: the argument stays (one kernel signature), a token buffer serves
            if length > cap:
                raise ConfigError(f"{self.desc.name}: scratch length {sc.length}={length} exceeds the private "
                                  f"capacity SCRATCH_PRIVATE={cap} it was built with (0: the global slice)")
            length = 0
        items = self.num_groups * self.work_group_size
        nbytes = max(1, items * int(length)) * CTYPES[sc.ctype].itemsize
        limit = min(int(self.device.cl_device.max_mem_alloc_size), self.device.global_mem_size // 2)
        if nbytes > limit:
            raise ConfigError(
                f"{self.desc.name}: scratch of {length} {sc.ctype} for each of {items} work-items needs {nbytes} "
                f"bytes, more than {limit} on {self.device.key}; use fewer work-groups or work-items")
        if nbytes > self._work_bytes:
            self._work = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, nbytes)
            self._work_bytes = nbytes
        return self._work

    def __call__(self, sizes: Mapping[str, int] | None = None, **args: object) -> np.ndarray | cl_array.Array:
        """Run once. With numpy inputs the result is a numpy array; with device arrays it stays on the device."""
        launch = self.enqueue(sizes, **args)
        if any(isinstance(args[i.name], cl_array.Array) for i in self.desc.inputs):
            return launch.out
        return launch.out.get()



# the most launch plans a bound launch keeps (BoundLaunch._plan)
_PLANS = 4096


def _step_size(which: str, n_concat: int, scan: int, wi: int, combine: int) -> int:
    """The global size of a second kernel in groups of ``wi``: a work-group per output row for a scan's partials,
    else a work-item per element (the fixup, ``scan`` elements a row), or per lane of each output atom (a lane-wise
    combine, ``combine`` lanes)."""
    if which == "partials":
        return n_concat * wi
    n = n_concat * (scan if which == "fixup" else combine)
    return -(-n // wi) * wi


def zero_output(queue: cl.CommandQueue, buf: cl.Buffer, nbytes: int) -> cl.Event:
    """Zeroes the first ``nbytes`` of an output that FLAT=1 work-groups add into."""
    return cl.enqueue_fill_buffer(queue, buf, np.zeros(1, np.uint32), 0, -(-nbytes // 4) * 4)


def _buffer(x: cl_array.Array | cl.Buffer) -> cl.Buffer:
    if isinstance(x, cl_array.Array):
        if x.offset:
            raise ValueError("bound buffers must start at offset 0 (pass the base buffer and index by position)")
        return x.base_data
    return x


class BoundLaunch:
    """A :class:`Computation` with its buffers bound (see :meth:`Computation.bind`). Calling it with the sizes
    of every dimension and the scalar parameters enqueues the kernels and returns their events.

    Sizes past the 32-bit index range switch to the program built with 64-bit indices (built on first need),
    so a large launch costs no more host time than a small one.
    """

    def __init__(self, comp: Computation, out: cl_array.Array | cl.Buffer, inputs: list, queue: cl.CommandQueue):
        self.comp, self.queue = comp, queue
        desc = comp.desc
        dims = list(desc.dim_names)
        self._dims = desc.dim_names
        self._steps: tuple[str, ...] = ()
        if desc.lane_dims and comp.lane_groups > 1 and not comp.flat:
            self._steps = ("partials", "fixup") if desc.scan_dim else ("combine",)
        self._flat_bytes = itemsize(desc.atom) if comp.flat else 0  # per output atom, zeroed before each launch
        self._partial_n = 1
        self._buffers = [_buffer(out), comp._partials(queue, 1).base_data] + [_buffer(b) for b in inputs]
        self._buffer_at = {"out": 0} | {i.name: 2 + k for k, i in enumerate(desc.inputs)}
        self._out_check = itemsize(desc.atom) if comp.device.checker else 0  # see Computation.bind
        self._params = [name for name, _ in comp._param_types]
        self._scratch = desc.scratch.length if desc.scratch is not None else None
        if self._scratch is not None:
            self._buffers.append(comp.work_buffer(0))
        # what a launch needs besides the sizes, once: a loss-guided split step launches a dozen kernels, and on a
        # GPU host every Python call of a launch adds to the step's latency
        self._concat_at = [dims.index(d) for d in desc.concat_dims]
        self._out_at = [dims.index(d) for d in desc.output_dims]
        self._scan_at = dims.index(desc.scan_dim) if desc.scan_dim else -1
        # inputs loaded at the point (not gathered) hold their integer extents' worth of elements per point
        self._per_point = max([1] + [math.prod(e for e in i.shape if isinstance(e, int)) for i in desc.inputs
                                     if not i.gather])
        self._combine = max(1, desc.combine_lanes)
        self._wg = comp.work_group_size  # the main kernel's (its groups: Computation.groups, per launch)
        self._wi = comp.config["NUM_WI_COMBINE"] if self._steps else 1
        self._plans: dict[tuple[int, ...], tuple] = {}

    def set_buffer(self, name: str, buffer: cl_array.Array | cl.Buffer) -> None:
        """Another buffer for the output (``"out"``) or input ``name`` from the next launch on: a region of a larger
        buffer, say (a sub-buffer). Free: every launch sets all its arguments anyway."""
        self._buffers[self._buffer_at[name]] = _buffer(buffer)

    def index64(self, dims: list[int], n_out: int) -> bool:
        """Whether a launch of these dimension sizes (``n_out`` output atoms) needs the 64-bit index build
        (:meth:`Computation.wide_indices`, inputs loaded at the point counted by their elements: the buffers' sizes
        are not known here). Until 2026-11-29 bound launches counted points times the work-groups along reduced
        dimensions: the learner's 10.5M-row histograms ran the 64-bit build that its tuner never timed (H200,
        loss-guided histograms 3.10 -> 2.64 ms a round in 32 bits)."""
        return self.comp.wide_indices(math.prod(dims) * self._per_point, n_out)

    def _plan(self, dims: tuple[int, ...]) -> tuple:
        """What a launch of these sizes runs beside its arguments: whether it takes the 64-bit build (built on first
        need), the main kernel's spec (:meth:`Computation.kernel_spec`) and global size, each step's, its output atoms
        and concatenated rows. Worked out once per distinct sizes: a fit launches each kernel at a few dozen sizes,
        round after round, and on a GPU host every microsecond of a launch's Python is the device's idle time (2-core
        EPYC, a bound launch of a small kernel 9.5-18 us against pyopencl's invoker alone 4-6 us)."""
        comp = self.comp
        if self._scan_at >= 0:
            comp.check_line({comp.desc.scan_dim: dims[self._scan_at]})
        n_concat = math.prod([dims[i] for i in self._concat_at])
        n_out = math.prod([dims[i] for i in self._out_at])
        index64 = self.index64(list(dims), n_out)
        ks = [comp.kernel_spec(w, index64) for w in ("main", *self._steps)]
        scan = dims[self._scan_at] if self._scan_at >= 0 else 0
        steps = tuple((k, _step_size(which, n_concat, scan, self._wi, self._combine))
                      for k, which in zip(ks[1:], self._steps, strict=True))
        if len(self._plans) >= _PLANS:  # sizes that never repeat (a range's rows): no cache grows without bound
            self._plans.clear()
        plan = self._plans[dims] = (index64, ks[0], comp.groups(dims[0]) * self._wg, steps, n_out, n_concat)
        return plan

    def __call__(self, sizes: Mapping[str, int], zeroed: bool = False, **params: object) -> list[cl.Event]:
        """Launch at ``sizes`` with the description's ``params``. ``zeroed``: the caller knows the output the launch
        writes is zero already (another kernel zeroed it), so FLAT's zeroing before the main kernel is left out: a
        launch fewer (a depth-wise look-ahead's siblings zero the next level's histograms as they read this one's)."""
        comp = self.comp
        dims = tuple([int(sizes[d]) for d in self._dims])
        plan = self._plans.get(dims) or self._plan(dims)
        index64, main, global_size, steps, n_out, n_concat = plan
        if self._out_check and self._buffers[0].size < n_out * self._out_check:
            raise ValueError(f"{comp.desc.name}: an output buffer of {self._buffers[0].size} bytes for "
                             f"{n_out * self._out_check} bytes of output")
        if steps and n_concat * comp.lane_groups > self._partial_n:
            self._partial_n = n_concat * comp.lane_groups
            self._buffers[1] = comp._partials(self.queue, self._partial_n).base_data
        if self._scratch is not None:
            self._buffers[-1] = comp.work_buffer(int(params[self._scratch]))
        args = [*self._buffers, *dims, *[params[name] for name in self._params]]
        q = self.queue
        events = [] if zeroed else comp._zero(q, index64, self._buffers[0], n_out * self._flat_bytes, args)
        events.append(program_kernel(*main)(q, (global_size,), (self._wg,), *args))
        for k, size in steps:
            events.append(program_kernel(*k)(q, (size,), (self._wi,), *args))
        return events
