"""The real-lane whole-row histogram: a node's float64 (or float32) (g, h) histogram with a group of a row's features
per point, what CPUs' float64 fits (their default precision) build, with its heuristic, size classes and tuner inputs.
Real sums depend on their order and have no atomics, so it adds a node's rows in order, one work-item a (node, group),
instead of scattering them into local memory as the int32 builds do; it reuses their bodies, size classes and tuner
inputs (:mod:`mdhom.components.row_histogram`).

========================  ===============================  ======================================================
kernel                    index space                      combine operators
========================  ===============================  ======================================================
tree_histogram_rows_real  node x grp x pos                 concat, concat, sum of a feature group's part of rows
========================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.histogram import EXACT_ROWS
from mdhom.components.histogram_blocks import BLOCK_ROWS
from mdhom.components.lanes import (
    DEFAULT_BINS,
    bin_ctype,
    bins_reader,
    defines,
    hist_ctype,
    hist_gh_type,
    padded_stride,
    with_default_bins,
)
from mdhom.components.row_histogram import (
    _GROUPS_BODY,
    _ROW_CLASSES,
    _ROW_GH,
    _ROWS_ADD,
    _layout_reads,
    _rows_inputs,
    _rows_ref,
    _zero_cells,
    row_words,
    rows_prefetch,
)
from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.learn.binning import bin_dtype
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce

# a row's (g, h) per output in real lanes (float64 or float32), each row added (a row left out by subsampling adds
# zeros, as the reference's bincount does)
_ROW_GH_REAL = """    for (int mdh_k = 0; mdh_k < TREE_OUTPUTS; ++mdh_k) {{
        const long mdh_gi = 2 * (mdh_r * TREE_OUTPUTS + mdh_k);
        const tree_hist_t mdh_g = gh[mdh_gi], mdh_h = gh[mdh_gi + 1];
"""


# a row's (g, h) added to a bin: two scalar adds, or with PAIR_VEC one add of a two-lane vector (one load and one store
# of the pair instead of two each). Lane by lane the same correctly rounded adds in the same order (the source has
# FP_CONTRACT off, and the add no multiply): the same bits either way. The accumulator's (g, h) structs are aligned to
# their lane only, so the vector type is lowered to that alignment in its typedef, and it may alias them (the zeroing,
# the combine and the copy-out read and write the structs' scalars): both are GCC / clang extensions that OpenCL C
# leaves out (its ``aligned`` only raises alignment), which every clang-based runtime (PoCL, Intel's, Oclgrind) honours;
# PAIR_VEC is a CPU runtime's choice, 0 elsewhere. 2-core Xeon, 500k Higgs rows, 63 bins, float64 depth-wise fits
# alternating (identical models): Intel's CPU runtime 44.8 off -> 39.1 ms on a round, loss-guided 55.6 -> 49.4; PoCL
# 32.9 off against 34.1 on (the kernel alone 0.96-1.03x: its LLVM pairs the scalar adds itself, or the gathers bound it)
_ROWS_ADD_REAL = """#if PAIR_VEC
            *(tree_pair_t*)&acc.v[mdh_c].g += (tree_pair_t)(mdh_g, mdh_h);
#else
""" + _ROWS_ADD + """
#endif"""


# With ``blocks`` 1, a work-item folds its node's blocks in turn and adds their sums up itself, in the reference's order
# (mdhom.components.histogram_blocks): at the first row of each block but the first (position a multiple of
# TREE_BLOCK_ROWS) the block just folded goes into the node's running sum (``part``'s slot SIZE_node + node, past the
# nodes' own: the first block stored, each later one added to it) and the fold starts the next from zero; at the node's
# last row the running sum is added to the last block's, which the kernel then writes as the node's histogram. Nodes
# of one block, and launches with ``blocks`` 0, fold as before.
_BLOCK_CELLS = "TREE_GROUP_FEATURES * TREE_OUTPUTS * TREE_BINS"
_BLOCK_SUM_AT = f"part + (((long)SIZE_node + node) * SIZE_grp + grp) * (2 * {_BLOCK_CELLS})"
_BLOCK_FLUSH = f"""
if (blocks && pos > 0 && (pos & (TREE_BLOCK_ROWS - 1)) == 0 && pos < slot_count[node]) {{
    __global tree_hist_t* mdh_dst = {_BLOCK_SUM_AT};
    const int mdh_first = pos == TREE_BLOCK_ROWS;
    for (int mdh_c = 0; mdh_c < {_BLOCK_CELLS}; ++mdh_c) {{
        mdh_dst[2 * mdh_c] = mdh_first ? acc.v[mdh_c].g : mdh_dst[2 * mdh_c] + acc.v[mdh_c].g;
        mdh_dst[2 * mdh_c + 1] = mdh_first ? acc.v[mdh_c].h : mdh_dst[2 * mdh_c + 1] + acc.v[mdh_c].h;
        acc.v[mdh_c].g = 0;
        acc.v[mdh_c].h = 0;
    }}
}}
"""
_BLOCK_FINISH = f"""
if (blocks && pos >= TREE_BLOCK_ROWS && pos == slot_count[node] - 1) {{
    __global const tree_hist_t* mdh_src = {_BLOCK_SUM_AT};
    for (int mdh_c = 0; mdh_c < {_BLOCK_CELLS}; ++mdh_c) {{
        acc.v[mdh_c].g = mdh_src[2 * mdh_c] + acc.v[mdh_c].g;
        acc.v[mdh_c].h = mdh_src[2 * mdh_c + 1] + acc.v[mdh_c].h;
    }}
}}
"""


@lru_cache(maxsize=32)
def histogram_rows_real(n_bins: int, n_features: int, n_outputs: int, groups: int, precision: str = "double",
                        feature_major: bool = False, row_index: bool = False, sparse: bool = False,
                        block_rows: int = BLOCK_ROWS, row_stride: int = 0) -> Description:
    """The float64 (or float32) histogram of whole rows: (node, grp, pos), each work-item reading a row's (g, h) once
    per group of ``n_features / groups`` features and adding it to the group's bins, the output the node's
    (feat, output, bin) layout as :func:`mdhom.components.row_histogram.histogram_groups` writes it (``groups`` 1:
    the whole row).

    Real sums depend on their order, so exact fits pin the row fold to one work-item a (node, group), which adds the
    node's rows in ascending position order: every bin's sum in the reference's order (``np.bincount``'s), whatever
    ``groups`` is, the same bits as the per-feature kernel (:func:`mdhom.components.histogram.histogram`), which reads
    (g, h) once per feature and row instead of once per group and row. The groups are the build's parallelism besides
    the nodes (one work-item a node at the root otherwise). No local atomics (none for reals): no ``PARTIALS_LOCAL``,
    ``FLAT`` or ``PACKED``; the same ``ROW_WORDS`` (a group's bins read as words), ``PREFETCH`` (row-index builds of
    dense rows) and ``INLINE`` as the quantized whole-row builds; ``PAIR_VEC`` adds a row's (g, h) to a bin as one
    two-lane vector (``_ROWS_ADD_REAL``), the real lanes' counterpart of the int builds' ``PACKED``.

    A fit's nodes of more than ``block_rows`` rows are summed in blocks (:mod:`mdhom.components.histogram_blocks`):
    launched with ``blocks`` 1, a work-item folds its node's blocks in turn and adds their sums up in order, the sum of
    the earlier ones kept in ``part`` past the nodes' slots (``_BLOCK_FLUSH``, ``_BLOCK_FINISH``); with ``blocks`` 0
    it folds the node whole (a block's slot, or a node of one block).

    ``row_stride`` > ``n_features``: the rows lie that many bins apart (rows gathered through the row index, padded
    to whole sectors: :func:`mdhom.components.lanes.padded_stride`); 0, or the features: rows end to end, the source
    as it was."""
    f, k, b, g = int(n_features), int(n_outputs), int(n_bins), int(groups)
    stride = int(row_stride) or f
    if stride < f or (stride != f and (feature_major or sparse)):
        raise ValueError(f"row_stride: at least the {f} features, and only for dense rows x features bins; got "
                         f"{row_stride}")
    if g < 1 or f % g:
        raise ValueError(f"feature groups: at least 1, dividing the {f} features; got {g}")
    if block_rows < 1 or block_rows & (block_rows - 1):
        raise ValueError(f"block_rows: a power of two; got {block_rows}")
    width = np.dtype(bin_dtype(b)).itemsize
    padded = stride != f
    words = row_words(b, f, feature_major, sparse, stride)  # (the group body adds no bin past its group's features)
    per_word = 4 // width
    body = _GROUPS_BODY.replace(_ROW_GH, _ROW_GH_REAL)
    lane, lane_bytes = hist_ctype(precision), hist_gh_type(precision).dtype.itemsize // 2
    prefetch = row_index and not feature_major and not sparse
    at = "TREE_ROW_STRIDE" if padded else "TREE_FEATURES"  # a row's bins from the last row's
    fmt = {"prefetch": rows_prefetch(at) if prefetch else "", "stride": at}
    zero = _zero_cells("TREE_GROUP_FEATURES * TREE_OUTPUTS * TREE_BINS")
    return Description(
        "tree_histogram_rows_real", ["node", "grp", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(hist_gh_type(precision), (f // g) * k * b),
        switches=(("ROW_WORDS",) if words else ()) + ("PAIR_VEC",),
        scalar=zero + body.format(body=_ROWS_ADD_REAL.replace("acc.", "out."), **fmt),
        accumulate=_BLOCK_FLUSH + body.format(body=_ROWS_ADD_REAL, **fmt) + _BLOCK_FINISH,
        extents={"pos": "slot_count[node]"},
        chunked=True,
        inline_fold=not row_index, prefetch=prefetch,
        inputs=[
            Input("bins", bin_ctype(b), ("*",), gather=True),
            Input("gh", hist_ctype(precision), ("*",), gather=True),
            Input("slot_begin", "int", ("node",), gather=True),
            Input("slot_count", "int", ("node",), gather=True),
        ] + ([Input("ridx", "int", ("*",), gather=True)] if row_index else []) + [
            Input("part", hist_ctype(precision), ("*",), gather=True, writes=True),
        ],
        params=[Param("n_rows", "int"), Param("blocks", "int")],
        preamble=defines(precision, b, k, feature_major) + f"#define TREE_FEATURES {f}\n"
        f"#define TREE_BLOCK_ROWS {int(block_rows)}\n"
        f"#define TREE_GROUP_FEATURES {f // g}\n#define TREE_ROW_INDEX {int(row_index)}\n"
        f"#define TREE_ROW_WORDS {words}\n#define TREE_PER_WORD {per_word}\n"
        f"#define TREE_GROUP_WORDS {-(-(f // g) // per_word)}\n"
        f"typedef {lane}2 tree_pair_t __attribute__((aligned({lane_bytes}), may_alias));\n"
        + (f"#define TREE_ROW_STRIDE {stride}\n" if padded else "") + bins_reader(sparse),
    )


def real_groups(dev: Device, n_features: int, nodes: int, feature_bytes: int = 0) -> int:
    """Feature groups of a real-lane whole-row build for ``nodes`` nodes: the fewest dividing ``n_features`` that give
    every compute unit a (node, group) at least (each reads a row's (g, h) once a group), a feature each where none
    does; and whose histogram (``feature_bytes`` a feature) a work-item keeps privately, within half the device's
    local memory as :func:`mdhom.components.row_histogram.rows_fit` holds a CPU's (a CPU runtime keeps it on a
    thread's stack: a fit of many classes at 256 bins takes more groups). 0 where not even one feature's fits (a
    feature per lane then)."""
    units = max(1, int(dev.compute_units))
    room = int(getattr(dev, "local_mem_size", 1 << 30)) // 2
    fits = [g for g in range(1, n_features + 1) if n_features % g == 0 and (n_features // g) * feature_bytes <= room]
    return next((g for g in fits if nodes * g >= units), fits[-1] if fits else 0)


def rows_real_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """A work-item and a work-group per (node, group): the exact fold's pins anyway (one work-item folds a node's rows
    in order), and a group's histogram is the work-item's private accumulator. ``ROW_WORDS`` for a whole row (one
    group), bytes for a group's part of it, as the quantized builds read them on CPUs
    (:func:`mdhom.components.row_histogram.rows_heuristic`): 2-core EPYC, 10^6 rows, 63 bins, kernel alone, whole rows
    as words 1.2-1.5x faster on PoCL and Intel's runtime (one node: 18.8 / 25.4 -> 14.7 / 17.4 ms on PoCL, 19.5 ->
    16.6 on Intel's; 8 nodes: 12.3 -> 9.7 and 10.4 -> 8.7), two groups' words no faster or slower (13.2 / 13.1 and
    9.7 -> 13.8 ms). ``PAIR_VEC`` on Intel's CPU runtime: 2-core Xeon, 500k rows, 63 bins, the kernel alone 1.25-1.8x
    faster (the root in two groups 5.9 -> 3.7 ms, 8 nodes of 165k rows 2.1 -> 1.7), PoCL's 0.96-1.03x."""
    cfg = ones(desc, dev, sizes)
    cfg["NUM_WG_node"] = pow2_at_most(max(1, int(sizes["node"])), 1 << 12)
    cfg["NUM_WG_grp"] = int(sizes["grp"])
    if "ROW_WORDS" in desc.switches:
        cfg["ROW_WORDS"] = int(int(sizes["grp"]) == 1)
    # (g, h) as one vector add (every build offers it): Intel's CPU runtime only so far (``_ROWS_ADD_REAL``)
    cfg["PAIR_VEC"] = int(dev.runtime == "intel" and dev.type == "cpu")
    return cfg


def _real_inputs(s, rng):
    """:func:`~mdhom.components.row_histogram._rows_inputs` with float64 (g, h): the reference's gradients and
    Hessians at their usual scale."""
    out = _rows_inputs(s, rng)
    n = out["n_rows"]
    f, b = int(s["feat"]), int(s.get("n_bins", 64))
    stride = _stride(s)
    if stride != f:  # rows padded as a fit lays them out, the padding random bins that no feature reads
        bins = rng.integers(0, b, (n, stride)).astype(out["bins"].dtype)
        bins[:, :f] = out["bins"].reshape(n, f)
        out.update(bins=bins.reshape(-1), row_features=f)
    gh = np.empty((n, 2))
    gh[:, 0] = rng.standard_normal(n)
    gh[:, 1] = rng.random(n) * 0.25
    out["gh"] = gh.reshape(-1)
    # each node folded whole (blocks 0: the kernel alone, the reference's plain fold); nothing stored in part
    out.update(part=np.zeros(1), blocks=0)
    return out


def _stride(s: Mapping[str, int]) -> int:
    """The row stride of a class's bins: padded where a fit reads them through the row index (the fit's own)."""
    f = int(s["feat"])
    return padded_stride(f, int(s.get("n_bins", 64))) if int(s.get("row_index", 0)) else f


def _real_ref(a):
    """:func:`~mdhom.components.row_histogram._rows_ref` of the row's features (padded rows: their first ones)."""
    f = a.get("row_features")
    return _rows_ref(a if f is None else {**a, "bins": a["bins"].reshape(a["n_rows"], -1)[:, :f]})


def _real_variant_applies(device: Device, s: Mapping[str, int]) -> bool:
    """The classes of the CPUs' float64 fits, read as the device's float64 layout reads them
    (:func:`~mdhom.components.row_histogram._layout_reads`; a layout of a feature per lane builds none), in the groups
    a build for that many nodes takes there (:func:`real_groups`)."""
    if device.type != "cpu":
        return False
    row_index, whole = _layout_reads(device, "double", int(s["feat"]))
    feature_bytes = int(s.get("n_bins", 64)) * hist_gh_type("double").dtype.itemsize
    return (bool(whole) and int(s.get("row_index", 0)) == row_index
            and real_groups(device, int(s["feat"]), int(s["node"]), feature_bytes) == int(s["grp"]))


# float64 fits on CPUs (their default precision): 10^6 rows in 1, 8 and 64 nodes at 64 and 256 bins, moved or read
# through the row index (``index_*``, the root ``rows_1e6_nodes_1``), in the groups a CPU of 2, 4, 8 or 16 cores takes
# for them (real_groups)
_REAL_NAMES = ("moved_1e6_nodes_1", "moved_1e6_nodes_8", "moved_1e6_nodes_64", "rows_1e6_nodes_1",
               "index_1e6_nodes_8", "index_1e6_nodes_64")
_REAL_CLASSES = {f"real{g}_{name}": {**sizes, "grp": g}
                 for name, sizes in with_default_bins({n: _ROW_CLASSES[n] for n in _REAL_NAMES}, _REAL_NAMES,
                                                      n_bins=DEFAULT_BINS).items()
                 for g in (1, 2, 4, 14, 28) if 28 % g == 0}
HISTOGRAM_ROWS_REAL = KernelSpec(
    "tree_histogram_rows_real", rows_real_heuristic, exact_pins=EXACT_ROWS,
    tuning=Tuning(lambda s: histogram_rows_real(int(s.get("n_bins", 64)), int(s["feat"]), 1, int(s["grp"]),
                                                row_index=bool(s.get("row_index", 0)), row_stride=_stride(s)),
                  _REAL_CLASSES, _real_inputs, _real_ref, fixed=EXACT_ROWS, applies=_real_variant_applies,
                  doc="float64 (g, h) histograms of whole rows in feature groups (exact: a row at a time, in order), "
                      "moved or read through the row index, in 1 to 64 nodes, 64 or 256 bins"))

SPECS = (HISTOGRAM_ROWS_REAL,)
