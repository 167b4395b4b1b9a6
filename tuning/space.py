"""The search space of one kernel at one size class on one device, derived from its md_hom description.

Every parameter comes from ``desc.parameter_space(device, sizes)`` (powers of two within the device
limits); the tuner samples their base-2 exponents as integers. Joint constraints are checked before
anything is built:

* ``desc.check_config``: work-group size, local memory, fp64 support (the description's own rules);
* per dimension, ``NUM_WG_d * NUM_WI_d <= next_pow2(size_d)``: more work-items than points along a
  dimension only adds idle ones (the heuristic default is exempt, so it is always measurable);
* the buffer of per-work-group partials must fit one device allocation;
* at most :data:`MAX_GROUPS_PER_CU` work-groups per compute unit on CPUs (each group is a task with its
  own start-up cost there; far more groups than cores only adds overhead), and at most
  :data:`MAX_SCAN_GROUPS` work-groups along a scanned dimension (the fix-up pass reads the partials of
  every preceding group, so its cost grows with their number).

``NUM_WI_COMBINE`` only matters when partials of several work-groups are combined, so it is a conditional
parameter: sampled only then, otherwise fixed at its default (no duplicate points in the space).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mdhom.devices import Device
from mdhom.mdh.description import Description
from mdhom.mdh.parts import ConfigError, Parameter
from mdhom.mdh.types import itemsize

COMBINE = "NUM_WI_COMBINE"
MAX_GROUPS_PER_CU = {"cpu": 256}
MAX_GROUPS = 1 << 22
MAX_SCAN_GROUPS = 256


def _log2(v: int) -> int:
    return int(v).bit_length() - 1


def _next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def _is_pow2_range(p: Parameter) -> bool:
    """Work-group and work-item counts are powers of two (searched by exponent); switches such as
    PARTIALS_LOCAL (0 or 1) are categorical."""
    return all(v >= 1 and v & (v - 1) == 0 for v in p.values)


def config_key(config: Mapping[str, int]) -> str:
    """A stable text key for a configuration (dict keys in JSON, cache keys)."""
    return ",".join(f"{k}={int(v)}" for k, v in sorted(config.items()))


def parse_key(key: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in key.split(","))}


@dataclass
class SearchSpace:
    """The valid configurations of ``description`` on ``device`` at ``sizes``; ``fixed`` pins parameters."""

    description: Description
    device: Device
    sizes: dict[str, int]
    fixed: dict[str, int] = field(default_factory=dict)
    baseline: dict[str, int] | None = None  # what the kernel's user runs untuned (default: the description's)

    def __post_init__(self) -> None:
        self.parameters: list[Parameter] = self.description.parameter_space(self.device, self.sizes)
        start = self.baseline if self.baseline is not None else self.description.default_config(self.device, self.sizes)
        self.default: dict[str, int] = {**start, **self.fixed}
        unknown = set(self.fixed) - {p.name for p in self.parameters}
        if unknown:
            raise ValueError(f"{self.description.name}: cannot fix unknown parameter(s) {sorted(unknown)}")
        # per variant of the code (its 0/1 parameters): the most work-items per group its built kernels ran
        self.limits: dict[tuple, dict[str, int]] = {}
        try:
            self._max_alloc = int(self.device.cl_device.max_mem_alloc_size)
        except Exception:  # noqa: BLE001 - a device object without the OpenCL handle (tests): global memory
            self._max_alloc = self.device.global_mem_size // 4

    @property
    def free(self) -> list[Parameter]:
        return [p for p in self.parameters if p.name not in self.fixed]

    def _combine_matters(self, config: Mapping[str, int]) -> bool:
        return math.prod(int(config[f"NUM_WG_{d}"]) for d in self.description.lane_dims) > 1

    # ------------------------------------------------------------------ validity
    def _variant(self, config: Mapping[str, int]) -> tuple:
        """The parameters that choose the code rather than its work-groups: a kernel's registers, and so the most
        work-items per group it runs, follow them."""
        return tuple(sorted((k, int(v)) for k, v in config.items() if not k.startswith("NUM_")))

    def learn_limit(self, config: Mapping[str, int], kernel: str, limit: int) -> None:
        """A built kernel of ``config``'s variant runs at most ``limit`` work-items per group: configurations of
        that variant asking for more are rejected from now on instead of each costing a build (on the H100 most
        failed trials of the whole-row histogram were such: 256 at most where 1024 were asked)."""
        known = self.limits.setdefault(self._variant(config), {})
        known[kernel] = max(known.get(kernel, 0), int(limit))

    def check(self, config: Mapping[str, int]) -> str | None:
        """``None`` when ``config`` may be built, else the reason it is rejected."""
        cfg = {k: int(v) for k, v in config.items()}
        try:
            self.description.check_config(cfg, self.device)
        except ConfigError as exc:
            return str(exc)
        if cfg == self.default:
            return None
        known = self.limits.get(self._variant(cfg), {})
        wg = math.prod(cfg[f"NUM_WI_{d}"] for d in self.description.dim_names)
        if wg > known.get("main", wg):
            return f"{wg} work-items per group, above the {known['main']} this variant's main kernel runs"
        combine = cfg.get("NUM_WI_COMBINE", 1)
        if combine > known.get("combine", combine):
            return f"NUM_WI_COMBINE={combine}, above the {known['combine']} this variant's combining kernel runs"
        for d in self.description.dim_names:
            n = self.sizes.get(d)
            if n is not None and cfg[f"NUM_WG_{d}"] * cfg[f"NUM_WI_{d}"] > _next_pow2(n):
                return f"NUM_WG_{d} * NUM_WI_{d} = {cfg[f'NUM_WG_{d}'] * cfg[f'NUM_WI_{d}']} exceeds {d}={n}"
        groups = math.prod(cfg[f"NUM_WG_{d}"] for d in self.description.dim_names)
        per_cu = MAX_GROUPS_PER_CU.get(self.device.type)
        cap = MAX_GROUPS if per_cu is None else per_cu * max(1, self.device.compute_units)
        if groups > cap:
            return f"{groups} work-groups, above {cap} for a {self.device.type} of {self.device.compute_units} CUs"
        scan = self.description.scan_dim
        if scan is not None and cfg[f"NUM_WG_{scan}"] > MAX_SCAN_GROUPS:
            return f"NUM_WG_{scan}={cfg[f'NUM_WG_{scan}']} work-groups along the scan, above {MAX_SCAN_GROUPS}"
        lane_groups = math.prod(cfg[f"NUM_WG_{d}"] for d in self.description.lane_dims)
        if lane_groups > 1:
            n_out = math.prod(self.sizes.get(d, 1) for d in self.description.concat_dims)
            need = n_out * lane_groups * itemsize(self.description.atom)
            if need > self._max_alloc:
                return f"partials need {need} bytes, above the device's largest allocation {self._max_alloc}"
        return None

    # ------------------------------------------------------------------ Optuna
    def suggest(self, trial: Any) -> dict[str, int]:
        """Sample a configuration in ``trial`` (exponents as integers; ``NUM_WI_COMBINE`` conditionally)."""
        cfg = dict(self.fixed)
        for p in self.free:
            if p.name == COMBINE:
                continue
            if not _is_pow2_range(p):
                cfg[p.name] = int(trial.suggest_categorical(p.name, list(p.values)))
                continue
            e = trial.suggest_int(f"log2_{p.name}", _log2(p.values[0]), _log2(p.values[-1]))
            cfg[p.name] = 1 << e
        if any(p.name == COMBINE for p in self.parameters):
            if COMBINE not in self.fixed:
                p = next(p for p in self.parameters if p.name == COMBINE)
                if self._combine_matters(cfg):
                    cfg[COMBINE] = 1 << trial.suggest_int(f"log2_{COMBINE}", _log2(p.values[0]), _log2(p.values[-1]))
                else:
                    cfg[COMBINE] = self.default[COMBINE]
        return cfg

    def trial_params(self, config: Mapping[str, int]) -> dict[str, int]:
        """The Optuna parameters (exponents) that make :meth:`suggest` return ``config``."""
        out = {}
        for p in self.free:
            if p.name == COMBINE and not self._combine_matters(config):
                continue
            if not _is_pow2_range(p):
                out[p.name] = int(config[p.name])
                continue
            # a heuristic may launch more work-groups than the size class's range holds (the objective runs the
            # heuristic itself for its trial): clamped, Optuna records it without an out-of-range warning
            e = _log2(int(config[p.name]))
            out[f"log2_{p.name}"] = min(max(e, _log2(p.values[0])), _log2(p.values[-1]))
        return out

    # ------------------------------------------------------------------ enumeration
    def canonical(self, config: Mapping[str, int]) -> dict[str, int]:
        cfg = {k: int(v) for k, v in config.items()}
        if COMBINE in cfg and COMBINE not in self.fixed and not self._combine_matters(cfg):
            cfg[COMBINE] = self.default[COMBINE]
        return cfg

    def enumerate(self) -> Iterator[dict[str, int]]:
        """Every valid configuration once (for exhaustive search on small spaces)."""
        seen: set[str] = set()
        free = [p for p in self.free]
        for values in itertools.product(*(p.values for p in free)):
            cfg = self.canonical({**self.fixed, **dict(zip((p.name for p in free), values, strict=True))})
            key = config_key(cfg)
            if key in seen:
                continue
            seen.add(key)
            if self.check(cfg) is None:
                yield cfg

    def size(self) -> int:
        """Number of points before any constraint (the product of the free parameters' value counts)."""
        return math.prod(len(p.values) for p in self.free)


__all__ = ["SearchSpace", "config_key", "parse_key"]
