"""The lane types of the device components per precision mode, and the preamble every tree kernel shares.

``precision`` is ``"double"`` (the reference), ``"single"`` or ``"quantized"`` (gradients, scores and gains in
double, histograms and their scans and differences as int32 fixed point).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from importlib import resources

import numpy as np

from mdhom import tunable
from mdhom.components.tables import TABLE_TYPEDEFS
from mdhom.devices import Device
from mdhom.learn.binning import bin_dtype
from mdhom.mdh import Struct

PRECISIONS = ("double", "single", "quantized")
# the real type of gradients, scores and gains per mode: "quantized" computes them in double and keeps only the
# histograms (and their scans and differences) as int32 fixed point
REALS = {"double": np.float64, "single": np.float32, "quantized": np.float64}


def real_ctype(precision: str) -> str:
    if precision not in REALS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return "float" if precision == "single" else "double"


def is_quantized(precision: str) -> bool:
    real_ctype(precision)
    return precision == "quantized"


def hist_ctype(precision: str) -> str:
    """The lane type of histograms, their prefix sums and differences: int32 fixed point when quantized (the scale
    keeps every sum within 2^30; 32-bit local atomics are core OpenCL and, on the H200, 3.5x faster than 64-bit
    ones)."""
    return "int" if is_quantized(precision) else real_ctype(precision)


def gh_type(precision: str) -> Struct:
    r = real_ctype(precision)
    return Struct("gh_t", (("g", r), ("h", r)))


GHQ = Struct("ghq_t", (("g", "int"), ("h", "int")))


def hist_gh_type(precision: str) -> Struct:
    """One histogram cell: (sum g, sum h) in the mode's histogram lanes."""
    return GHQ if is_quantized(precision) else gh_type(precision)


def bin_ctype(n_bins: int) -> str:
    """The kernels' bin type for a global bin count: ``uchar`` up to 256 bins (the fast path: a byte per cell),
    ``ushort`` up to 65536 (``max_bin`` above 255). :func:`mdhom.learn.binning.bin_dtype` is the host's."""
    return "uchar" if bin_dtype(n_bins) == np.uint8 else "ushort"


def split_type(precision: str) -> Struct:
    return Struct("split_t", (("value", real_ctype(precision)), ("index", "int")))


def vector_forms(device: Device) -> bool:
    """Whether ``device`` builds the descriptions' vector forms (:class:`mdhom.mdh.Vector`): not GPUs, which spread a
    dimension over work-items instead (and keep the kernels their stored configurations were tuned for); CPUs and the
    checker (Oclgrind checks the vector forms' reads too)."""
    return device.type != "gpu" or device.checker


def with_quantized_classes(classes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """A kernel's size classes, and each again as ``q_<name>`` with ``quantized`` 1: its int32 lanes are other code
    (what GPU fits and ``precision="quantized"`` build), tuned in classes of their own."""
    return {**classes, **{f"q_{name}": {**sizes, "quantized": 1} for name, sizes in classes.items()}}


# max_bin=255 (the learners' default) builds 256-bin code, another version of each kernel whose description holds the
# number of bins (the histograms, the split score) than the 64-bin code the tuner's classes had: every CPU fit at the
# default ran the 64-bin classes' configurations under a "tuned for another version" note that no re-run could silence
DEFAULT_BINS = tunable.DEFAULT_BINS


def with_default_bins(classes: dict[str, dict[str, int]], names: Collection[str],
                      **sizes: int) -> dict[str, dict[str, int]]:
    """A kernel's size classes, and those in ``names`` again as ``<name>_bins256`` with ``sizes`` (the class's number
    of bins, under the key its description factory reads): the code that fits at the default ``max_bin`` build."""
    return {**classes, **{tunable.at_default_bins(name): {**classes[name], **sizes} for name in names}}


def defined(desc, name: str) -> int | None:  # noqa: ANN001 - a mdhom.mdh.Description
    """The integer a tree description's preamble defines as ``name`` (:func:`defines` and the descriptions' own
    ``#define``s), None where it defines none."""
    hit = re.search(rf"#define {name} (\d+)", desc.preamble)
    return int(hit.group(1)) if hit else None


def variant_markers(desc) -> dict[str, int]:  # noqa: ANN001 - a mdhom.mdh.Description
    """The variant a tree kernel's build is of, in the markers its tuner classes carry (:func:`with_quantized_classes`,
    :func:`with_vector_classes`, the whole-row histogram's ``row_index``, the binning's ``x32``): how a build of
    another version of the kernel (another number of bins, none of its classes tuned for its code) picks a class of
    its own variant (:meth:`mdhom.components.specs.KernelSpec.variant_classes`, :func:`mdhom.configs.lookup`'s
    ``prefer``)."""
    out = {"vector": int(getattr(desc, "vector", None) is not None)}
    for key, name in (("quantized", "TREE_QUANTIZED"), ("row_index", "TREE_ROW_INDEX")):
        value = defined(desc, name)
        if value is not None:
            out[key] = value
    raw = next((i for i in desc.inputs if i.name == "x"), None)  # the binning's raw rows: float32 or float64
    if raw is not None:
        out["x32"] = int(raw.ctype == "float")
    return out


def class_precision(sizes: Mapping[str, int]) -> str:
    """The precision a size class of :func:`with_quantized_classes` builds."""
    return "quantized" if sizes.get("quantized") else "double"


def with_vector_classes(classes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """A kernel's size classes, and each again as ``vec_<name>`` with ``vector`` 1: the tuner's classes of a kernel
    whose CPUs build its vector form (:func:`vector_class_applies` says which device tunes which)."""
    return {**classes, **{f"vec_{name}": {**sizes, "vector": 1} for name, sizes in classes.items()}}


def vector_class_applies(device: Device, sizes: dict[str, int]) -> bool:
    """``Tuning.applies`` of a kernel tuned in both variants: a size class with ``vector`` 1 is the vector form's
    (CPUs), one without it the plain description's (GPUs)."""
    return bool(sizes.get("vector")) == vector_forms(device)


def vector_defines(precision: str) -> str:
    """The vector types of a vector form's code (:class:`mdhom.mdh.Vector`, built with ``VEC > 1``): ``tree_real_v``
    and ``tree_hist_v`` (VEC lanes), ``tree_hist_v2`` (a block's (g, h) pairs), and their loads, stores and the
    conversion of histogram lanes to reals."""
    r, hc = real_ctype(precision), hist_ctype(precision)
    return (
        "#if VEC > 1\n"
        f"typedef MDH_VT({r}) tree_real_v;\ntypedef MDH_VT({hc}) tree_hist_v;\ntypedef MDH_VT2({hc}) tree_hist_v2;\n"
        f"#define vload_tree_hist_v2 mdh_vload2_{hc}\n#define vstore_tree_real_v mdh_vstore_{r}\n"
        f"#define convert_tree_real_v mdh_convert_{r}_{hc}\n"
        "#endif\n"
    )


def snippet(name: str) -> str:
    return resources.files("mdhom.kernels").joinpath("trees", name).read_text()


def bins_reader(sparse: bool = False) -> str:
    """partition.cl (the bin type, ``tree_bin_of`` and the split rule), and where the bins are compressed rows
    (sparse input, :class:`mdhom.learn.sparse_bins.SparseBins`) the reader that takes over ``tree_bin_of``."""
    return snippet("partition.cl") + ("\n" + snippet("sparse_bins.cl") if sparse else "")


def padded_stride(n_features: int, n_bins: int) -> int:
    """Bins a row takes in a rows x features matrix whose rows are gathered through the row index: the row's bytes
    rounded up to a multiple of 32 where that adds at most a quarter, else the row as it is.

    A gathered row is fetched as whole cache lines (64 bytes on CPUs, 32-byte sectors on GPUs); rows of 28 one-byte
    bins at a stride of 28 straddle two lines 27 times in 64, at 32 never. The float64 whole-row histogram of a
    depth-wise level reads its nodes' rows through the row index, ascending but sparse: a line per row, two where it
    straddles (PoCL, 2-core Xeon, 500k Higgs rows, a histogram a work-item over 32 nodes' random rows, a standalone
    kernel: 4.55 -> 3.17 ms at stride 32 for 30% of the rows, 2.42 -> 1.60 for 10%; the same rows in order 2.85 /
    2.82)."""
    width = np.dtype(bin_dtype(n_bins)).itemsize
    row = n_features * width
    padded = -(-row // 32) * 32
    return padded // width if 4 * (padded - row) <= row else n_features


def defines(precision: str, n_bins: int, n_outputs: int = 1, feature_major: bool = False) -> str:
    r = real_ctype(precision)
    return (
        f"typedef {r} tree_real_t;\ntypedef {hist_ctype(precision)} tree_hist_t;\n"
        f"#define TREE_QUANTIZED {int(is_quantized(precision))}\n"
        f"#define TREE_BINS {int(n_bins)}\n#define TREE_BIN_WIDE {int(bin_ctype(n_bins) != 'uchar')}\n"
        f"#define TREE_OUTPUTS {int(n_outputs)}\n"
        f"#define TREE_FEATURE_MAJOR {int(bool(feature_major))}\n{TABLE_TYPEDEFS}"
    )



def gh_struct(x: np.ndarray) -> np.ndarray:
    """(..., 2) (g, h) values as an array of gh records: integer lanes stay integers (quantized), else double."""
    out = np.zeros(x.shape[:-1], (GHQ if x.dtype.kind in "iu" else gh_type("double")).dtype)
    out["g"], out["h"] = x[..., 0], x[..., 1]
    return out
