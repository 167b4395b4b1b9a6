"""Fitting a configuration to a device's limits: a heuristic's configuration, one tuned on a sibling device, or a stored
one read for a larger problem (:mod:`mdhom.configs`) may ask for more local memory, private memory or work-items per
group than the device or a compiled kernel allows, and is shrunk step by step until it runs rather than refused. Kept
apart from :mod:`~mdhom.mdh.computation`, which builds exactly the configuration it is given (and reports what does
not fit as a :class:`~mdhom.mdh.parts.ConfigError`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from mdhom.devices import Device, get_device
from mdhom.mdh.computation import Computation
from mdhom.mdh.configuration import CPU_PRIVATE_BYTES
from mdhom.mdh.description import Description
from mdhom.mdh.parts import KernelLimitError


def build_within_limits(
    desc: Description,
    device: str | Device | None,
    config: Mapping[str, int] | None,
    sizes: Mapping[str, int] | None = None,
) -> Computation:
    """Build ``config``; where a compiled kernel refuses its work-group size, or the configuration needs more
    local memory than the device has, shrink it until it fits.

    The widest ``NUM_WI_<dim>`` is halved (or ``NUM_WI_COMBINE`` lowered) step by step, so a configuration
    chosen by a heuristic or tuned on a sibling device still runs; local memory first drops ``PARTIALS_LOCAL``
    (atoms grow with the problem: a histogram of 5000 bins is 40 KB, more than many devices' local memory).
    Other configuration errors propagate.
    """
    device = get_device(device)
    cfg = {**desc.default_config(device, dict(sizes) if sizes else None), **(config or {})}
    if desc.packed_pairs and "PACKED" not in (config or {}):  # the default for this configuration's partials
        cfg["PACKED"] = desc.packed_default(device, cfg)
    cfg = within_local_memory(desc, device, cfg)
    for _ in range(64):
        try:
            return Computation(desc, device, cfg, sizes)
        except KernelLimitError as exc:
            if exc.kernel != "main":
                cfg["NUM_WI_COMBINE"] = 1 << (exc.limit.bit_length() - 1)
                continue
            _halve_widest(cfg)
    raise AssertionError("unreachable: work-group sizes cannot shrink below 1")


def within_local_memory(desc: Description, device: Device, config: Mapping[str, int]) -> dict[str, int]:
    """``config`` with ``PARTIALS_LOCAL`` off, then its widest ``NUM_WI_<dim>`` (then ``NUM_WI_COMBINE``) halved,
    until its local memory fits ``device``, and on CPUs its private accumulators a thread's stack
    (:data:`~mdhom.mdh.configuration.CPU_PRIVATE_BYTES`); unchanged when it fits already, lacks work-item counts or
    exceeds the device's work-group size (an error of its own, which :meth:`Description.check_config` reports)."""
    cfg = dict(config)
    names = desc.parameter_names()
    if any(p not in cfg for p in names if p.startswith("NUM_WI_")):
        return cfg  # incomplete: check_config names what is missing
    limit = device.local_mem_size
    wg = math.prod(int(cfg[f"NUM_WI_{d}"]) for d in desc.dim_names)
    if wg > min(device.max_work_group_size, device.max_work_item_sizes[0]):
        return cfg  # breaks the work-group limit first (check_config names that)
    if desc.local_mem_bytes(cfg) <= limit:
        return _within_private(desc, device, cfg)
    if cfg.get("PARTIALS_LOCAL"):
        cfg["PARTIALS_LOCAL"] = 0
        if cfg.get("FLAT") and not desc.flat_private:  # FLAT folds into local memory, or privately where offered
            cfg["FLAT"] = 0
    while desc.local_mem_bytes(cfg) > limit:
        if _halve_widest(cfg):
            continue
        if int(cfg.get("NUM_WI_COMBINE", 1)) <= 1:
            break  # nothing left to shrink: check_config names the need
        cfg["NUM_WI_COMBINE"] = int(cfg["NUM_WI_COMBINE"]) // 2
    return _within_private(desc, device, cfg)


def _within_private(desc: Description, device: Device, cfg: dict[str, int]) -> dict[str, int]:
    """``cfg`` with its widest ``NUM_WI_<dim>`` halved until a CPU thread's stack holds its private accumulators."""
    while desc.private_bytes(cfg, device) > CPU_PRIVATE_BYTES:  # > 0 only for more than one work-item a group
        _halve_widest(cfg)
    return cfg


def _halve_widest(cfg: dict[str, int]) -> bool:
    """Halve ``cfg``'s widest ``NUM_WI_<dim>`` in place (the first of equals); False where every one is 1 already."""
    wi = {k: int(v) for k, v in cfg.items() if k.startswith("NUM_WI_") and k != "NUM_WI_COMBINE" and int(v) > 1}
    if not wi:
        return False
    widest = max(wi, key=lambda k: wi[k])
    cfg[widest] = wi[widest] // 2
    return True

