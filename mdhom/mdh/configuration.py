"""What a description's configurations may be: its tuning parameters, whether a configuration is valid on a device
(work-group and local-memory limits, the generator's switches), the tuner's space and the heuristic defaults.

Mixed into :class:`mdhom.mdh.description.Description`, whose fields (dimensions, atom, opt-in capabilities) it reads;
the description module keeps what a computation is, this one what its kernels may be built as.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mdhom.mdh.parts import (
    FLAT_SPAN,
    GENERATOR_SWITCHES,
    LOCAL_PADS,
    ConfigError,
    Parameter,
    pow2_upto,
)
from mdhom.mdh.types import CTYPES, itemsize

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mdhom.devices import Device

# Most bytes of private accumulators (an atom per work-item) one work-group may hold on a CPU. CPU runtimes run a
# work-group's work-items in a loop on one thread and keep each work-item's private values in arrays on that
# thread's stack, 8 MiB by default on Linux: PoCL 3 and 5 crashed (SIGSEGV, which ended `mdhom tune`) on whole-row
# histograms of 256 bins (57 KB an atom) at 256 work-items a group, 14.7 MB, and ran them at 128 (7.3 MB). Half of
# it leaves the thread's other frames room; the configurations CPUs run hold one to 16 work-items a group.
CPU_PRIVATE_BYTES = 4 << 20


class Configurable:
    """The configuration side of a :class:`~mdhom.mdh.description.Description` (see the module docstring)."""

    @property
    def inlines(self) -> bool:
        """Whether the description offers ``INLINE`` (its folds', or without a fold its scalar function's)."""
        return self.inline_fold or self.inline_scalar

    def parameter_names(self) -> tuple[str, ...]:
        """``NUM_WG_<dim>`` and ``NUM_WI_<dim>`` per dimension, plus ``NUM_WI_COMBINE`` (the work-group
        size of the second kernel) where partials of several work-groups may need combining."""
        names = tuple(f"NUM_{w}_{d}" for d in self.dim_names for w in ("WG", "WI"))
        names += ("NUM_WI_COMBINE",) if self.lane_dims and self.place is None else ()
        names += ("SCAN_TILED",) if self.scan_dim and self.place is None else ()
        names += ("SCRATCH_PRIVATE",) if self.private_scratch else ()
        names += ("CHUNKED",) if self.chunked else ()
        names += ("PACKED", "SPLIT_PAIRS") if self.packed_pairs else ()
        names += self.switches
        names += ("VEC",) if self.vector else ()
        names += ("INLINE",) if self.inlines else ()
        names += ("PREFETCH",) if self.prefetch else ()
        names += ("FLAT",) if self.flat else ()
        names += ("LOCAL_PAD",) if self.padded else ()
        return names + (("PARTIALS_LOCAL",) if self.accumulate_atomic else ())

    def fit_scratch(self, config: Mapping[str, int], length: int) -> dict[str, int]:
        """``config`` with ``SCRATCH_PRIVATE`` able to hold ``length`` elements: kept where it does (or is 0, the
        global slice, which holds any length), else the smallest offered capacity that does, else 0. The
        build-time size check behind "private when small": a configuration chosen without the length (a tuned
        size class, the tuner's baseline) still builds a kernel its launches fit."""
        cfg = dict(config)
        if not self.private_scratch:
            return cfg
        cap = int(cfg.get("SCRATCH_PRIVATE", 0))
        if cap == 0 or cap >= length:
            return cfg
        cfg["SCRATCH_PRIVATE"] = self.private_capacity(length)
        return cfg

    def private_capacity(self, length: int) -> int:
        """The smallest offered private capacity holding ``length`` elements, else 0 (the global slice)."""
        return next((c for c in self.private_scratch if c >= length), 0)

    def packed_default(self, device: Device, config: Mapping[str, int]) -> int:
        """``PACKED`` for a configuration that does not say: CPUs pack their private adds (the whole-row histogram
        1.15-1.6x faster on PoCL, 1.5-1.7x on Intel's runtime, 2-core EPYC); local atomics stay 32-bit (the H100 ran
        packed 64-bit local atomics 2.5x slower than two 32-bit ones)."""
        return int(device.type == "cpu" and not config.get("PARTIALS_LOCAL"))

    def vec_default(self, device: Device) -> int:
        """``VEC`` for a configuration that does not say: PoCL on CPUs the widest vector form (it vectorises no
        work-item's own loop: on a 2-core Xeon the split search, 256 nodes, 6.0-6.3 -> 2.4-2.7 ms in the form of 8
        bins a vector it had then;
        the logistic gradients of 500k rows 7.1-9.3 -> 3.9-6.0 ms at 8 rows), 1 elsewhere: GPUs spread dimensions
        over work-items, and Intel's CPU compiler vectorises work-items itself (its gradients 4.1-4.5 -> 5.2-5.9 ms
        in vector form; its split search, 2.4 -> 1.8 ms, asks for it in its heuristic)."""
        wide = self.vector and device.type == "cpu" and device.runtime == "pocl"
        return max(self.vector.widths) if wide else 1

    def local_atom_bytes(self, config: Mapping[str, int]) -> int:
        """Bytes of one atom's accumulator in local memory (``PARTIALS_LOCAL``): the atom, or with ``LOCAL_PAD`` its
        padded words (the generator's MDH_LANE_WORDS)."""
        pad = int(config.get("LOCAL_PAD", 0)) if self.padded else 0
        if not pad:
            return itemsize(self.atom)
        pairs = itemsize(self.atom) // 8
        return 8 * (pairs + (pairs >> pad) + 1)

    def local_mem_bytes(self, config: dict[str, int]) -> int:
        """Local memory one work-group needs under ``config``: one atom per work-item when lanes combine
        privately, or one atom per concatenation lane with ``PARTIALS_LOCAL``."""
        if self.place is not None:  # the line's atoms, each place's point, the scan's totals and the line sums (longs)
            wg = math.prod(config[f"NUM_WI_{d}"] for d in self.dim_names)
            values = CTYPES[self.place.local_values].itemsize if self.place.local_values else itemsize(self.atom)
            return self.place.line_max * (values + 4) + wg * (itemsize(self.atom) + 8)
        # a scan's partials kernel scans NUM_WI_COMBINE totals in local memory
        combine = int(config.get("NUM_WI_COMBINE", 1)) * itemsize(self.atom) if self.scan_dim else 0
        if config.get("PARTIALS_LOCAL"):
            acc = math.prod(config[f"NUM_WI_{d}"] for d in self.concat_dims) * self.local_atom_bytes(config)
            if config.get("FLAT"):  # the window's prefix and the work-items' run sums (64-bit indices at most)
                acc += 8 * (FLAT_SPAN + 1 + math.prod(config[f"NUM_WI_{d}"] for d in self.dim_names))
            return acc
        lanes = math.prod(config[f"NUM_WI_{d}"] for d in self.lane_dims)
        if lanes <= 1 or config.get("FLAT"):  # FLAT's private accumulators combine through global memory
            return combine
        wg = math.prod(config[f"NUM_WI_{d}"] for d in self.dim_names)
        return max(wg * itemsize(self.atom), combine)

    def private_bytes(self, config: Mapping[str, int], device: Device) -> int:
        """Bytes of private accumulators a work-group of ``config`` keeps on a CPU thread's stack (one atom per
        work-item without ``PARTIALS_LOCAL``); 0 on other devices, and for one work-item a group (its accumulator is
        the kernel's own stack variable, not one of a work-group's copies)."""
        wg = math.prod(int(config[f"NUM_WI_{d}"]) for d in self.dim_names)
        if device.type != "cpu" or config.get("PARTIALS_LOCAL") or wg <= 1:
            return 0
        return wg * itemsize(self.atom)

    @staticmethod
    def _prefetches(device: Device) -> bool:
        """Whether ``PREFETCH=1`` builds on ``device``: CPUs, and checkers (whose prefetch is a checked read)."""
        return device.type == "cpu" or device.checker

    def check_config(self, config: dict[str, int], device: Device) -> None:
        """Raise :class:`ConfigError` naming the limit that ``config`` exceeds on ``device``."""
        # SCAN_TILED came later than stored configurations: absent means 0 (each work-item a contiguous chunk)
        # ... and SCRATCH_PRIVATE (absent means 0: the global slice)
        # ... and CHUNKED (absent means 0: strided shares), PACKED (absent: builds take packed_default), SPLIT_PAIRS
        # (absent means 0: interleaved pairs) and switches, and VEC, INLINE and PREFETCH (absent: builds take their
        # defaults)
        missing = [p for p in self.parameter_names() if p not in config and p not in (
            "SCAN_TILED", "SCRATCH_PRIVATE", "CHUNKED", "PACKED", "SPLIT_PAIRS", "VEC", "INLINE", "PREFETCH", "FLAT",
            "LOCAL_PAD", *self.switches)]
        if missing:
            raise ConfigError(f"{self.name}: configuration lacks {', '.join(missing)}")
        extra = [p for p in config if p not in self.parameter_names()]
        if extra:
            raise ConfigError(f"{self.name}: unknown configuration parameter(s) {', '.join(extra)}")
        for k, v in config.items():
            if not isinstance(v, int | bool) and not (hasattr(v, "__index__")):
                raise ConfigError(f"{self.name}: {k}={v!r} is not an integer")
            if int(v) < 1 and k.startswith("NUM_"):
                raise ConfigError(f"{self.name}: {k}={v} must be at least 1")
        wg = math.prod(int(config[f"NUM_WI_{d}"]) for d in self.dim_names)
        limit = min(device.max_work_group_size, device.max_work_item_sizes[0])
        if wg > limit:
            raise ConfigError(
                f"{self.name}: work-group size {wg} (product of NUM_WI_*) exceeds the device limit {limit} "
                f"on {device.key}"
            )
        if int(config.get("NUM_WI_COMBINE", 1)) > limit:
            raise ConfigError(f"{self.name}: NUM_WI_COMBINE exceeds the device limit {limit}")
        need = self.local_mem_bytes({k: int(v) for k, v in config.items()})
        if need > device.local_mem_size:
            raise ConfigError(
                f"{self.name}: configuration needs {need} bytes of local memory, device {device.key} has "
                f"{device.local_mem_size}"
            )
        private = self.private_bytes(config, device)
        if private > CPU_PRIVATE_BYTES:
            raise ConfigError(
                f"{self.name}: {wg} work-items a group with a private accumulator of {itemsize(self.atom)} bytes each "
                f"({private} bytes) exceed the {CPU_PRIVATE_BYTES} bytes a CPU's work-group may "
                "keep on its thread's stack"
            )
        if self.double_fp and not device.has_fp64:
            raise ConfigError(f"{self.name}: uses double precision, which {device.key} does not support")
        for switch in (*GENERATOR_SWITCHES, *self.switches):
            if int(config.get(switch, 0)) not in (0, 1):
                raise ConfigError(f"{self.name}: {switch} must be 0 or 1")
        if int(config.get("PREFETCH", 0)) and not self._prefetches(device):
            raise ConfigError(f"{self.name}: PREFETCH=1 on {device.key}: prefetches are for CPUs (NVIDIA's compiler "
                              "refuses __builtin_prefetch of a __global pointer; a GPU hides a gather's latency "
                              "behind its other warps)")
        if int(config.get("INLINE", 0)) and device.checker:
            raise ConfigError(f"{self.name}: INLINE=1 on {device.key}: Oclgrind cannot run what LLVM's inliner makes "
                              "of the fold (llvm.experimental.noalias.scope.decl); INLINE=0 runs it as calls")
        if self.padded and int(config.get("LOCAL_PAD", 0)) not in LOCAL_PADS:
            raise ConfigError(f"{self.name}: LOCAL_PAD must be one of {LOCAL_PADS} (a word of padding after every "
                              f"2^LOCAL_PAD words, 0: none), got {config['LOCAL_PAD']}")
        if self.vector and int(config.get("VEC", 1)) not in (1, *self.vector.widths):
            raise ConfigError(f"{self.name}: VEC must be 1 or one of the vector widths {self.vector.widths}, got "
                              f"{config['VEC']}")
        if (self.vector and int(config.get("VEC", 1)) > 1 and self.kind(self.vector.dim) == "concat"
                and any(int(config[f"NUM_WI_{d}"]) > 1 for d in self.lane_dims)):
            raise ConfigError(f"{self.name}: a vector form along {self.vector.dim} keeps a block's accumulators in "
                              "one work-item: VEC > 1 needs one work-item along the reduced dimensions")
        if int(config.get("SCRATCH_PRIVATE", 0)) not in (0, *self.private_scratch):
            raise ConfigError(f"{self.name}: SCRATCH_PRIVATE must be 0 or one of the scratch's private capacities "
                              f"{self.private_scratch}, got {config['SCRATCH_PRIVATE']}")
        if config.get("PARTIALS_LOCAL") and self.atomic_64 and not device.has_int64_atomics:
            raise ConfigError(f"{self.name}: local 64-bit atomics (cl_khr_int64_base_atomics) missing on {device.key}")
        if int(config.get("PACKED", 0)) and config.get("PARTIALS_LOCAL") and not device.has_int64_atomics:
            raise ConfigError(f"{self.name}: PACKED=1 needs local 64-bit atomics (cl_khr_int64_base_atomics), "
                              f"missing on {device.key}")
        if int(config.get("FLAT", 0)) and not (config.get("PARTIALS_LOCAL") and all(
                int(config[f"NUM_WI_{d}"]) == 1 for d in self.concat_dims)) and not (
                self.flat_private and not config.get("PARTIALS_LOCAL")):
            raise ConfigError(f"{self.name}: FLAT=1 folds into one local accumulator per work-group: it needs "
                              "PARTIALS_LOCAL=1 and one work-item along the concatenated dimensions"
                              + ("" if not self.flat_private else ", or PARTIALS_LOCAL=0 (private accumulators)"))
        if self.place is not None and (int(config[f"NUM_WG_{self.scan_dim}"]) != 1
                                       or any(int(config[f"NUM_WI_{d}"]) != 1 for d in self.concat_dims)):
            raise ConfigError(f"{self.name}: a placing scan takes a line a work-group: NUM_WG_{self.scan_dim} and "
                              "NUM_WI along the concatenated dimensions must be 1")
        if int(config.get("PACKED", 0)) and int(config.get("SPLIT_PAIRS", 0)) and config.get("PARTIALS_LOCAL"):
            raise ConfigError(f"{self.name}: PACKED=1 adds a pair in local memory as one 64-bit word, which "
                              "SPLIT_PAIRS=1 keeps apart: at most one of them")

    def parameter_space(self, device: Device, sizes: dict[str, int] | None = None) -> list[Parameter]:
        """The tuning parameters and their valid values on ``device`` (powers of two, bounded by the
        device limits and, where known, the dimension sizes). Joint constraints (work-group size, local
        memory) are checked by :meth:`check_config`; the tuner rejects such points before building."""
        limit = min(device.max_work_group_size, device.max_work_item_sizes[0])
        default = self.default_config(device, sizes)
        space = []
        for d in self.dim_names:
            n = (sizes or {}).get(d)
            wg_cap = 1 << 16 if n is None else max(1, 1 << math.ceil(math.log2(max(1, n))))
            wi_cap = limit if n is None else min(limit, max(1, 1 << math.ceil(math.log2(max(1, n)))))
            if self.place is not None:  # a line a work-group (check_config)
                wg_cap, wi_cap = (1, wi_cap) if d == self.scan_dim else (wg_cap, 1)
            space.append(Parameter(f"NUM_WG_{d}", pow2_upto(wg_cap), default[f"NUM_WG_{d}"]))
            space.append(Parameter(f"NUM_WI_{d}", pow2_upto(wi_cap), default[f"NUM_WI_{d}"]))
        if self.lane_dims and self.place is None:
            space.append(Parameter("NUM_WI_COMBINE", pow2_upto(min(limit, 1024)), default["NUM_WI_COMBINE"]))
        if self.scan_dim and self.place is None:
            space.append(Parameter("SCAN_TILED", (0, 1), default["SCAN_TILED"]))
        if self.accumulate_atomic:
            space.append(Parameter("PARTIALS_LOCAL", (0, 1), default["PARTIALS_LOCAL"]))
        if self.chunked:
            space.append(Parameter("CHUNKED", (0, 1), default["CHUNKED"]))
        if self.packed_pairs:
            space.append(Parameter("PACKED", (0, 1), default["PACKED"]))
            space.append(Parameter("SPLIT_PAIRS", (0, 1), default["SPLIT_PAIRS"]))
        space += [Parameter(sw, (0, 1), default[sw]) for sw in self.switches]
        if self.inlines:
            space.append(Parameter("INLINE", (0, 1), default["INLINE"]))
        if self.prefetch and self._prefetches(device):
            space.append(Parameter("PREFETCH", (0, 1), default["PREFETCH"]))
        if self.flat:
            space.append(Parameter("FLAT", (0, 1), default["FLAT"]))
        if self.padded:
            space.append(Parameter("LOCAL_PAD", LOCAL_PADS, default["LOCAL_PAD"]))
        if self.vector:
            space.append(Parameter("VEC", (1, *self.vector.widths), default["VEC"]))
        if self.private_scratch:  # a capacity below a launch's length is refused at launch: an infeasible trial
            space.append(Parameter("SCRATCH_PRIVATE", (0, *self.private_scratch), default["SCRATCH_PRIVATE"]))
        return space

    def default_config(self, device: Device, sizes: dict[str, int] | None = None) -> dict[str, int]:
        """A heuristic configuration that is valid on ``device``: lanes along the reduced (or scanned)
        dimension, work-groups to fill the compute units. The tuner starts from it."""
        sizes = sizes or {}
        limit = min(device.max_work_group_size, device.max_work_item_sizes[0])
        target_wg = 64 if device.type == "cpu" else 256
        wi_total = 1
        cfg: dict[str, int] = {}
        if self.lane_dims:
            lane = self.lane_dims[-1]
        else:  # concatenation only: work-items along the largest dimension (the first, when sizes are unknown)
            lane = max(self.dim_names, key=lambda d: (sizes.get(d, 1 << 20), -self.dim_names.index(d)))
        for d in self.dim_names:
            cfg[f"NUM_WI_{d}"] = 1
            cfg[f"NUM_WG_{d}"] = 1
        n_lane = sizes.get(lane, 1 << 20)
        wi = 1
        while wi * 2 <= min(target_wg, limit) and wi * 2 <= max(1, n_lane):
            wi *= 2
        # keep the local-memory need within the device
        while wi > 1 and self.local_mem_bytes({**cfg, f"NUM_WI_{lane}": wi}) > device.local_mem_size // 2:
            wi //= 2
        cfg[f"NUM_WI_{lane}"] = wi
        wi_total *= wi
        want_groups = max(1, device.compute_units * (4 if device.type == "gpu" else 1))
        for d in self.dim_names:
            n = sizes.get(d, 1 << 20)
            if self.kind(d) == "concat":
                per = cfg[f"NUM_WI_{d}"]
                cfg[f"NUM_WG_{d}"] = max(1, min(want_groups, math.ceil(n / per)))
                want_groups = max(1, want_groups // cfg[f"NUM_WG_{d}"])
        if self.scan_dim is None and want_groups > 1 and self.reduce_dims:
            d = self.reduce_dims[-1]
            n = sizes.get(d, 1 << 20)
            cfg[f"NUM_WG_{d}"] = max(1, min(want_groups, math.ceil(n / (cfg[f"NUM_WI_{d}"] * 16))))
        if self.lane_dims and self.place is None:
            cfg["NUM_WI_COMBINE"] = min(64, limit)
        if self.scan_dim and self.place is None:  # GPUs want neighbouring work-items on neighbouring elements
            cfg["SCAN_TILED"] = int(device.type == "gpu")
        if self.accumulate_atomic:
            usable = device.type == "gpu" and (device.has_int64_atomics or not self.atomic_64)
            cfg["PARTIALS_LOCAL"] = int(usable)
        if self.private_scratch:  # the length is a launch argument: only the global slice holds every length
            cfg["SCRATCH_PRIVATE"] = 0
        if self.chunked:  # CPUs run a work-group's items one after another: contiguous runs stream
            cfg["CHUNKED"] = int(device.type == "cpu")
        if self.packed_pairs:
            cfg["PACKED"] = self.packed_default(device, cfg)
            cfg["SPLIT_PAIRS"] = 0
        cfg.update(dict.fromkeys(self.switches, 0))  # the description's heuristic decides them
        if self.vector:
            cfg["VEC"] = self.vec_default(device)
            if self.kind(self.vector.dim) == "concat" and any(cfg[f"NUM_WI_{d}"] > 1 for d in self.lane_dims):
                cfg["VEC"] = 1  # a block's accumulators stay in one work-item (check_config)
        if self.inlines:
            cfg["INLINE"] = int(device.type == "cpu")
        if self.prefetch:
            cfg["PREFETCH"] = int(device.type == "cpu")
        if self.flat:  # the description's heuristic decides it
            cfg["FLAT"] = 0
        if self.padded:  # ... and this
            cfg["LOCAL_PAD"] = 0
        return cfg
