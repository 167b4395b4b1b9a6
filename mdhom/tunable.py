"""The registry of tunable kernels: what ``mdhom tune`` searches and what learners look configurations up for.

A :class:`TunableKernel` is everything the tuner needs beyond the md_hom description: the problem sizes to
tune at (size classes), how to make inputs of a given size, the numpy reference, and how close a result
must be to count as correct. The learners' kernels come from their specs
(:func:`mdhom.components.specs.all_specs`, each spec with tuning inputs), the md_hom examples from
:mod:`mdhom.mdh.examples`; both are collected explicitly the first time :func:`registered` is asked, so
importing this module stays cheap. :func:`register` adds more (tests, experiments).

>>> from mdhom import tunable
>>> sorted(tunable.registered())[:3]
['argmax_rows', 'gh_sum', 'histogram']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdhom.devices import Device
from mdhom.mdh.description import Description

# the bins of a fit at the default max_bin=255 (its missing-value bin included): kernels whose code holds the number
# of bins have a class ``<name>_bins256`` beside a 64-bin one for those fits (mdhom.components.lanes.with_default_bins)
DEFAULT_BINS = 256


def at_default_bins(size_class: str) -> str:
    """The name of ``size_class``'s twin at :data:`DEFAULT_BINS` bins."""
    return f"{size_class}_bins{DEFAULT_BINS}"

# (rtol, atol) per precision mode. ``atol`` is relative to the largest magnitude in the reference, so sums
# that cancel to near zero are judged against the scale of the data, not against zero.
# "double": float64 accumulation; reassociation over 10^7 terms costs a few ulps times sqrt(n).
# "single": float32 accumulation; error grows like sqrt(n) * 2^-24, i.e. about 1e-4 relative at 10^7 terms.
# "exact": integers (and integer indices in structs): bit-identical.
TOLERANCES: dict[str, tuple[float, float]] = {
    "double": (1e-9, 1e-11),
    "single": (2e-4, 2e-5),
    "exact": (0.0, 0.0),
}


def precision_of(dtype: np.dtype) -> str:
    """The precision mode that judges a (scalar) dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return "exact"
    if dtype.kind in "fc" and dtype.itemsize <= 4 * (2 if dtype.kind == "c" else 1):
        return "single"
    return "double"


def _leaves(arr: np.ndarray, prefix: str = "") -> list[tuple[str, np.ndarray]]:
    """Flatten a (possibly nested, possibly sub-array) struct array into its scalar fields."""
    if arr.dtype.names is None:
        if arr.dtype.subdtype is not None:
            return [(prefix, arr)]
        return [(prefix or "value", arr)]
    out: list[tuple[str, np.ndarray]] = []
    for name in arr.dtype.names:
        out += _leaves(arr[name], f"{prefix}.{name}" if prefix else name)
    return out


def compare(
    got: np.ndarray, want: np.ndarray, tolerances: Mapping[str, tuple[float, float]] | None = None
) -> str | None:
    """``None`` when ``got`` matches ``want`` field by field within the tolerance of each field's precision,
    else a message naming the first field that differs, where and by how much."""
    tol = {**TOLERANCES, **(tolerances or {})}
    got, want = np.asarray(got), np.asarray(want)
    k = want.ndim - 1
    if (got.shape != want.shape and got.dtype == want.dtype and want.ndim and got.shape[:k] == want.shape[:k]
            and math.prod(got.shape[k:]) == want.shape[-1]):
        want = want.reshape(got.shape)  # the reference's last axis split into the result's (an array atom's lanes)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if (got.dtype.names is None) != (want.dtype.names is None) or (
        got.dtype.names is not None and got.dtype.names != want.dtype.names
    ):
        return f"dtype {got.dtype}, expected {want.dtype}"
    for (name, g), (_, w) in zip(_leaves(got), _leaves(want), strict=True):
        mode = precision_of(w.dtype.base)
        rtol, atol = tol[mode]
        g64 = np.asarray(g, dtype=np.float64 if mode != "exact" else np.int64)
        w64 = np.asarray(w, dtype=g64.dtype)
        if mode == "exact":
            bad = g64 != w64
        else:
            scale = float(np.max(np.abs(w64))) if w64.size else 0.0
            with np.errstate(invalid="ignore"):
                bad = ~(np.isclose(g64, w64, rtol=rtol, atol=atol * max(scale, 1e-300), equal_nan=True))
        if np.any(bad):
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            n = int(np.count_nonzero(bad))
            return (
                f"field {name!r} ({mode}, rtol={rtol}, atol={atol} x scale): {n} of {bad.size} elements differ, "
                f"first at {idx}: got {g64[idx]!r}, expected {w64[idx]!r}"
            )
    return None


def applicable_classes(size_classes: Mapping[str, dict[str, int]],
                       applies: Callable[[Device, dict[str, int]], bool] | None,
                       device: Device | None) -> dict[str, dict[str, int]]:
    """The size classes of a kernel that apply to ``device`` (all, without a rule or a device): what a tune of that
    device stores, and so what its learner may ask a warning about."""
    return {c: s for c, s in size_classes.items() if device is None or applies is None or applies(device, s)}


@dataclass
class TunableKernel:
    """A kernel the tuner can search.

    ``description`` is a :class:`Description`, or a factory taking the size class's sizes (for kernels
    whose description depends on, say, the number of bins). ``size_classes`` maps a class name to the
    dimension sizes (and any extra size-like knobs the factory reads) it is tuned at. ``make_inputs(sizes,
    rng)`` returns the numpy inputs and scalar params for one call (and anything else the reference needs:
    :meth:`arguments` picks the kernel's); ``reference(inputs)`` the numpy result.
    ``quick_points`` caps the problem size (product of the sizes) in ``--quick`` mode.
    """

    name: str
    description: Description | Callable[[Mapping[str, int]], Description]
    size_classes: dict[str, dict[str, int]]
    make_inputs: Callable[[Mapping[str, int], np.random.Generator], dict[str, Any]]
    reference: Callable[[Mapping[str, Any]], np.ndarray]
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    quick_points: int = 1 << 22
    doc: str = ""
    # The configuration the user of the kernel runs when nothing is tuned (a learner's own heuristic); the
    # tuner starts from it and keeps it unless a configuration beats it. None: the description's default.
    baseline: Callable[[Description, Device, Mapping[str, int]], dict[str, int]] | None = None
    # parameters held fixed in the search (the exact pins the kernel's learner always runs it under), or per size
    # class a function of its sizes (where only some classes, such as float64 lanes, run in exact fits)
    fixed: dict[str, int] | Callable[[Mapping[str, int]], dict[str, int]] = field(default_factory=dict)
    # applies(device, sizes): whether a class is the variant that device's learner builds (None: all are)
    applies: Callable[[Device, Mapping[str, int]], bool] | None = None

    def baseline_config(self, device: Device, sizes: Mapping[str, int]) -> dict[str, int]:
        desc = self.describe(sizes)
        dims = self.dim_sizes(sizes)
        cfg = self.baseline(desc, device, dims) if self.baseline else desc.default_config(device, dims)
        return {**cfg, **self.fixed_at(sizes)}

    def fixed_at(self, sizes: Mapping[str, int]) -> dict[str, int]:
        """The parameters held fixed in a study of the size class of ``sizes``."""
        return dict(self.fixed(sizes) if callable(self.fixed) else self.fixed)

    def describe(self, sizes: Mapping[str, int]) -> Description:
        """The description for a size class."""
        d = self.description
        return d if isinstance(d, Description) else d(sizes)

    def dim_sizes(self, sizes: Mapping[str, int]) -> dict[str, int]:
        """Only the sizes of the description's dimensions (a class may carry extra knobs)."""
        desc = self.describe(sizes)
        return {d: int(sizes[d]) for d in desc.dim_names if d in sizes}

    def arguments(self, sizes: Mapping[str, int], inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The kernel's arguments among ``make_inputs``' ``inputs``, which may also hold what only the reference reads
        (the number of bins a histogram's class is tuned at: its output's width)."""
        desc = self.describe(sizes)
        names = {i.name for i in desc.inputs} | {p.name for p in desc.params}
        return {k: v for k, v in inputs.items() if k in names}

    def points(self, size_class: str) -> int:
        desc = self.describe(self.size_classes[size_class])
        return math.prod(int(self.size_classes[size_class].get(d, 1)) for d in desc.dim_names)

    def classes(self, quick: bool = False, device: Device | None = None) -> dict[str, dict[str, int]]:
        """The size classes to tune; in quick mode only those within ``quick_points`` (at least the smallest), and
        of a class with a twin at the default bins there only the twin (a quick tune studies what a fit at the
        default ``max_bin`` runs, not both); for a ``device``, only the classes that apply to it (all, without one:
        every variant any device builds)."""
        pool = applicable_classes(self.size_classes, self.applies, device)
        if not quick or not pool:
            return dict(pool)
        ordered = sorted(pool, key=self.points)
        kept = [c for c in ordered if self.points(c) <= self.quick_points] or ordered[:1]
        return {c: pool[c] for c in kept if at_default_bins(c) not in kept}

    def compare(self, got: np.ndarray, want: np.ndarray) -> str | None:
        """``None`` if ``got`` is correct, else why not (see :func:`compare`)."""
        return compare(got, want, self.tolerances)


_REGISTRY: dict[str, TunableKernel] = {}
_LOADED = False


def register(kernel: TunableKernel, replace: bool = False) -> TunableKernel:
    """Add a kernel to the registry; a second kernel under one name is an error unless ``replace``."""
    if not isinstance(kernel, TunableKernel):
        raise TypeError(f"register() takes a TunableKernel, got {type(kernel).__name__}")
    old = _REGISTRY.get(kernel.name)
    if old is not None and old is not kernel and not replace:
        raise ValueError(f"a tunable kernel named {kernel.name!r} is already registered")
    if not kernel.size_classes:
        raise ValueError(f"{kernel.name}: at least one size class is needed")
    _REGISTRY[kernel.name] = kernel
    return kernel


def registered() -> dict[str, TunableKernel]:
    """Every registered kernel by name (imports the kernel modules on first use)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        _register_examples()
        from mdhom.components.specs import all_specs

        for spec in all_specs().values():
            if spec.tuning is not None:
                register(spec.tunable(), replace=True)
    return dict(_REGISTRY)


def get(name: str) -> TunableKernel:
    kernels = registered()
    if name not in kernels:
        raise ValueError(f"unknown tunable kernel {name!r}; known: {', '.join(sorted(kernels))}")
    return kernels[name]


# ------------------------------------------------------------------------------------ the md_hom examples
def _register_examples() -> None:
    from mdhom.mdh import examples as ex

    def rows(n: int, **extra: int) -> dict[str, int]:
        return {"row": n, **extra}

    decades = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}
    register(TunableKernel(
        "histogram", ex.HISTOGRAM,
        {f"rows_{k}": rows(v, feat=28) for k, v in decades.items()},
        ex._hist_inputs, ex._hist_ref,
        doc="(g, h) histogram of 16 bins per feature, 28 features: the tree learner's hot loop",
    ))
    register(TunableKernel(
        "histogram_q32", ex.HISTOGRAM_Q32,
        {f"rows_{k}": rows(v, feat=28) for k, v in decades.items()},
        ex._hist_q_inputs(np.int32, 127), ex._hist_q_ref(ex.GHQ32.dtype),
        doc="quantised (int32) (g, h) histogram, 16 bins x 28 features: private or local-atomic partials",
    ))
    register(TunableKernel(
        "gh_sum", ex.GH_SUM,
        {f"rows_{k}": {"row": v, "out_k": 1} for k, v in decades.items()},
        ex._gh_inputs, ex._gh_ref,
        doc="sum of (g, h) over rows: node totals",
    ))
    register(TunableKernel(
        "row_sum", ex.ROW_SUM,
        {"rows_1e4": {"i": 10**4, "j": 28}, "rows_1e6": {"i": 10**6, "j": 28},
         "long_1e5": {"i": 64, "j": 10**5}, "long_1e6": {"i": 64, "j": 10**6}},
        lambda s, rng: {"x": rng.standard_normal((s["i"], s["j"]))},
        lambda a: a["x"].sum(1),
        doc="per-row sums of a float64 matrix (short rows, or few long rows)",
    ))
    register(TunableKernel(
        "scan_inclusive", ex.SCAN_INCLUSIVE,
        {"feat28_1e4": {"i": 28, "j": 10**4}, "feat28_1e5": {"i": 28, "j": 10**5},
         "feat28_1e6": {"i": 28, "j": 10**6}, "bins64_1e5": {"i": 10**5, "j": 64}},
        lambda s, rng: {"x": rng.integers(-1000, 1000, size=(s["i"], s["j"])).astype(np.int32)},
        lambda a: np.cumsum(a["x"].astype(np.int64), 1),
        doc="inclusive int64 prefix sums along rows (split scan over bins, or long scans)",
    ))
    register(TunableKernel(
        "argmax_rows", ex.ARGMAX_ROWS,
        {"cand64_1e4": {"i": 64, "j": 10**4}, "cand64_1e5": {"i": 64, "j": 10**5},
         "cand64_1e6": {"i": 64, "j": 10**6}, "rows_1e5": {"i": 10**5, "j": 64}},
        ex._argmax_inputs, ex._argmax_ref,
        doc="(value, index) argmax per row, ties to the lower index: split and head selection",
    ))


__all__ = [
    "TOLERANCES",
    "TunableKernel",
    "compare",
    "get",
    "precision_of",
    "register",
    "registered",
]
