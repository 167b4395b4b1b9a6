"""One declaration per kernel family: its md_hom description, the heuristic it runs untuned, the parameters
exact mode pins, and what ``mdhom tune`` needs to search it (size classes, inputs, numpy reference).

Component modules declare their kernels as ``SPECS``; :func:`all_specs` collects the modules listed in
:data:`COMPONENT_MODULES`, explicitly, when asked (nothing registers itself on import). The learners build
through :meth:`mdhom.components.workspace.Workspace.build` with a spec, and the tuner reads the same spec
(:meth:`KernelSpec.tunable`): what the learner runs untuned is what tuning must beat.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdhom.devices import Device
from mdhom.mdh import Description

COMPONENT_MODULES: tuple[str, ...] = (
    "mdhom.components.histogram",
    "mdhom.components.row_histogram",
    "mdhom.components.row_histogram_real",
    "mdhom.components.histogram_blocks",
    "mdhom.components.split",
    "mdhom.components.split_result",
    "mdhom.components.split_categorical",
    "mdhom.components.partition_kernels",
    "mdhom.components.leaf_rows",
    "mdhom.components.row_copy",
    "mdhom.components.lookahead",
    "mdhom.components.gradients",
    "mdhom.components.scores",
    "mdhom.components.predictor",
    "mdhom.components.binning",
    "mdhom.rules.device_kernels",  # the rule refinement's own kernels (it reuses the histogram and the split scan)
    "mdhom.rules.device_coupled",  # ... and those of complete heads over the example-wise loss's coupled Hessian
    "mdhom.forests.histogram",  # the random forests' level kernels (the tree dimension): histograms,
    "mdhom.forests.split",  # ... the split search,
    "mdhom.forests.partition",  # ... routing, partition and bag,
    "mdhom.forests.walk_kernels",  # ... and the fitted forest's prediction walk
    "mdhom.forests.sampled",  # ... and the sampled level (only the drawn features binned)
    "mdhom.forests.chain_kernels",  # the classifier chains' prediction (rows x chains x trees)
    "mdhom.forests.boost_level",  # a multiclass boosting round's K trees over the tree dimension (one per output)
    "mdhom.forests.boost_gradients",  # ... and their gradients, class-major
)

Heuristic = Callable[[Description, Device, Mapping[str, int]], dict[str, int]]


def pow2_at_most(n: int, cap: int) -> int:
    """The largest power of two <= min(n, cap) (at least 1)."""
    v = 1
    while v * 2 <= min(max(1, n), cap):
        v *= 2
    return v


def ones(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The description's default with one work-group and one work-item per dimension: heuristics start here."""
    cfg = desc.default_config(dev, sizes)
    for d in desc.dim_names:
        cfg[f"NUM_WI_{d}"] = cfg[f"NUM_WG_{d}"] = 1
    return cfg


def description_default(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The description's own default configuration, for kernels with no heuristic of their own."""
    return desc.default_config(dev, sizes)


def elementwise(dim: str | None = None, gpu_groups_per_cu: int = 64) -> Heuristic:
    """Element-wise kernels: one dimension (``dim``, default the first) carries the parallelism, in work-groups
    of 256 (GPUs) or 64 (CPUs) work-items, ``gpu_groups_per_cu`` (GPUs) or 4 (CPUs) per compute unit. A launch of
    fewer points than that grid holds runs only the groups they fill (:meth:`mdhom.mdh.Computation.groups`)."""

    def heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
        cfg = ones(desc, dev, sizes)
        d = dim or desc.dim_names[0]
        gpu = dev.type == "gpu"
        cfg[f"NUM_WI_{d}"] = 256 if gpu else 64
        cfg[f"NUM_WG_{d}"] = max(1, dev.compute_units) * (gpu_groups_per_cu if gpu else 4)
        return cfg

    return heuristic


@dataclass(frozen=True)
class Tuning:
    """What the tuner needs beyond the description: the sizes to tune at (a class may carry extra knobs the
    description factory reads, such as ``n_bins``), inputs of a size and the numpy result they must give."""

    describe: Callable[[Mapping[str, int]], Description]
    size_classes: dict[str, dict[str, int]]
    make_inputs: Callable[[Mapping[str, int], np.random.Generator], dict[str, Any]]
    reference: Callable[[Mapping[str, Any]], np.ndarray]
    doc: str = ""
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    quick_points: int = 1 << 22
    # parameters the search holds at these values: a kernel whose learner always runs it under its exact pins is
    # tuned under them (else the tuner times, and stores, an order of summation no fit would run)
    fixed: dict[str, int] | Callable[[Mapping[str, int]], dict[str, int]] = field(default_factory=dict)
    # whether a size class is the variant a device's learner builds (a class may name a description variant, such
    # as lanes per work-item, that learners choose by device type); None: every class on every device
    applies: Callable[[Device, Mapping[str, int]], bool] | None = None


@dataclass(frozen=True)
class KernelSpec:
    """A kernel family, declared once. ``name`` is the name configurations are stored under (the
    description's name); ``heuristic`` the configuration run when nothing is tuned (and the tuner's baseline);
    ``exact_pins`` the parameters that exact mode fixes so that sums follow the numpy reference's order."""

    name: str
    heuristic: Heuristic
    exact_pins: Mapping[str, int] = field(default_factory=dict)
    tuning: Tuning | None = None

    def configure(self, device: Device, desc: Description, sizes: Mapping[str, int],
                  override: Mapping[str, int] | None = None) -> tuple[dict[str, int], str]:
        """The configuration a build of ``desc`` at ``sizes`` runs, and where it came from: ``override`` where given,
        else the tuned or default one stored for these sizes (:func:`mdhom.configs.lookup`, of the build's own
        variant, warning of a missing entry only where a tune would store one: :meth:`tuned_on`), else the
        heuristic. The one resolution of every component's builds (:meth:`mdhom.components.workspace.Workspace.config`)
        and of the binner's."""
        if override is not None:
            return dict(override), "override"
        from mdhom.configs import heuristic_source, lookup

        cfg, source = lookup(device, desc.name, sizes, desc, warn=self.tuned_on(device, sizes, desc),
                             prefer=self.variant_classes(desc))
        if cfg is None:
            cfg, source = self.heuristic(desc, device, sizes), heuristic_source(source)
        return dict(cfg), source

    def tuned_on(self, device: Device, sizes: Mapping[str, int] | None = None, desc: Description | None = None
                 ) -> bool:
        """Whether a tune of ``device`` stores this kernel: some size class of it applies there (a kernel a device's
        learner builds but runs only on other devices, such as the GPUs' per-row partition flags on a CPU, is not
        tuned there, and no re-run of the tuner would stop a warning that it is not); with ``sizes``, one that a
        build of those sizes may take (:func:`mdhom.configs.nearest_class`: a GPU fit of under 4096 rows has one
        block of the group partition, which no class of many blocks serves); with ``desc``, one of its variant
        (:meth:`variant_classes`: a CPU tunes the split score's vector form only, so a fit told to scan first runs
        the plain score's heuristic unwarned)."""
        from mdhom.configs import nearest_class
        from mdhom.tunable import applicable_classes

        t = self.tuning
        pool = applicable_classes(t.size_classes, t.applies, device) if t is not None else {}
        variant = self.variant_classes(desc) if desc is not None else None
        if variant is not None:
            pool = {c: s for c, s in pool.items() if c in variant}
        if sizes is None or not pool:
            return bool(pool)
        return nearest_class({c: {"sizes": s} for c, s in pool.items()}, sizes) is not None

    def variant_classes(self, desc: Description) -> frozenset[str] | None:
        """The tuner's size classes of ``desc``'s variant: those whose markers (0/1 sizes such as ``quantized`` and
        ``vector`` that some of the kernel's classes carry; absent: 0) are the build's
        (:func:`mdhom.components.lanes.variant_markers`). A build that none of the stored classes was tuned for
        (another number of bins) takes the nearest of these (PoCL, the split score at 256 bins, quantized in vector
        form: its int32 vector classes' configurations 2.3-2.4x faster than the float64 ones the nearest size had
        picked). None where the kernel has no classes."""
        from mdhom.components.lanes import variant_markers

        if self.tuning is None:
            return None
        classes = self.tuning.size_classes
        mine = variant_markers(desc)
        keys = [m for m in mine if any(m in s for s in classes.values())]
        return frozenset(c for c, s in classes.items() if all(int(s.get(m, 0)) == mine[m] for m in keys))

    def tunable(self):  # noqa: ANN201 - a mdhom.tunable.TunableKernel (imported late: the tuner is optional)
        from mdhom.tunable import TunableKernel

        t = self.tuning
        return TunableKernel(self.name, t.describe, t.size_classes, t.make_inputs, t.reference,
                             tolerances=dict(t.tolerances), quick_points=t.quick_points, doc=t.doc,
                             baseline=self.heuristic, fixed=t.fixed if callable(t.fixed) else dict(t.fixed),
                             applies=t.applies)


def all_specs() -> dict[str, KernelSpec]:
    """Every declared kernel family by name (imports the component modules)."""
    out: dict[str, KernelSpec] = {}
    for mod in COMPONENT_MODULES:
        for spec in importlib.import_module(mod).SPECS:
            if spec.name in out:
                raise ValueError(f"kernel {spec.name!r} is declared twice")
            out[spec.name] = spec
    return out
