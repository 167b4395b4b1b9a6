"""The device refinement of complete heads over a coupled label Hessian (the example-wise loss): md_hom
descriptions driven by :class:`mdhom.rules.device.DeviceRefinement` when its head is coupled. The numpy
reference is :mod:`mdhom.rules.binned` with :mod:`mdhom.rules.coupled`'s head, to the bit.

A head over k labels has width = k + k(k+1)/2 statistics per example (the gradients, then the packed Hessian) and
two count lanes (covered; covered with non-zero weight): n_lanes = width + 2. Only the gradients live on the
device (n x L doubles, sent once per rule): the example-wise logistic loss's packed Hessian entries are products
of two gradients (:meth:`mdhom.rules.losses.LogisticExampleWise.hessian`, the same bits), so the histogram builds
each lane of a row as it adds it, and the n x L(L+1)/2 doubles (0.8 GB at 20000 x 101) exist nowhere.

=======================  ===========================  ========================================================
kernel                   index space                  combine operators
=======================  ===========================  ========================================================
rule_cover_scan          row                          exclusive prefix count of the coverage mask
rule_cover_rows          row                          concat, scattered: the covered rows in ascending order
rule_sort_count          feat x bin x tile x q        concat x3, sum over a tile's rows of "row in bin": a
                                                      stable counting sort of the covered rows by bin, pass 1
rule_sort_offsets        feat x cell                  concat, exclusive prefix sum over (bin, tile): pass 2
rule_sort_rows           feat x pos                   concat, concat, scattered: each covered row to its bin's
                                                      place (rows ascending within a bin): pass 3
rule_coupled_histogram   feat x bin x blk x pos       concat x3, sum over the bin's rows (a ragged fold over
                                                      its part of the sorted list; exact order pinned: rows
                                                      ascending, np.bincount's) of a block of lanes (an array
                                                      atom); no atomics, lanes coalesced
rule_coupled_scan        feat x lane x bin            concat, concat, inclusive prefix sum over bins (pinned:
                                                      np.cumsum's order), (feat, bin, lane) in, (feat, lane,
                                                      bin) out
rule_coupled_quality     feat x bin x dir             arg-max over all three of minus the quality: each
                                                      candidate solves its regularised k x k system in its own
                                                      scratch slice (fixed-order LDL^T, mdh.linalg)
rule_coupled_result      lane                         concat (scattered to the chunk's row): the winner's side
                                                      sums, its value and index
=======================  ===========================  ========================================================

The statistics of a (feature, bin) hold n_lanes doubles (5254 at 101 labels: 42 KB), so the sampled features go
in chunks whose histogram and scan fit the memory budget (:func:`feature_chunk`); each chunk's winner lands in
its own row of the result, and the host reads all rows at once and keeps the best (ties to the earlier chunk,
whose features come first): still one read per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

import numpy as np

from mdhom.components.lanes import split_type
from mdhom.components.specs import KernelSpec, Tuning, description_default, elementwise, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import ARGMAX, SUM, Array, Concat, Description, Input, Param, Reduce, Scalar, Scan, Scratch, linalg
from mdhom.rules import binned
from mdhom.rules.heads import Head
from mdhom.rules.label_binning import LabelBinning

_CODE = "".join(resources.files("mdhom.kernels").joinpath("rules", f).read_text()
                for f in ("label_score.cl", "coupled_quality.cl"))  # label_score.cl: the score both start from
_BEST = split_type("double").dtype
_BEST_INDEX = _BEST.fields["index"][1] // 4


def lanes_of(k: int) -> int:
    """Statistics lanes of a coupled head over ``k`` labels: gradients, packed Hessian, two counts."""
    return k + linalg.packed_size(k) + 2


def work_len(k: int, label_binning: LabelBinning | None = None) -> int:
    """Scratch doubles per work-item of the quality kernel: the packed matrix and the scores; with label binning the
    labels' bins, and per bin (at most ``max_bins_for(k)``) its count, gradient, score and two packed matrices."""
    if label_binning is None:
        return linalg.packed_size(k) + k
    b = label_binning.max_bins_for(k)
    return k + 3 * b + 2 * linalg.packed_size(b)


def binning_params(k: int, label_binning: LabelBinning | None) -> dict[str, object]:
    """The quality kernel's label-binning parameters (ratio 0: none)."""
    lb = label_binning
    if lb is None:
        return {"lb_ratio": np.float32(0.0), "lb_min": 1, "lb_max": 0, "max_bins": 0}
    return {"lb_ratio": np.float32(lb.ratio), "lb_min": lb.min_bins, "lb_max": lb.max_bins,
            "max_bins": lb.max_bins_for(k)}


def feature_chunk(n_features: int, n_lanes: int, n_bins: int, budget: int) -> int:
    """How many features' histograms (n_lanes x n_bins doubles each) fit ``budget`` bytes (at least one)."""
    per = 8 * n_lanes * n_bins
    return max(1, min(n_features, budget // per))


# ------------------------------------------------------------------------------------------------ descriptions
SORT_TILE = 64
"""Covered rows per tile of the counting sort (:func:`sort_count`): a row's rank among its tile's rows of the same
bin is counted by its own work-item, so a tile costs each row up to this many bin reads."""

# one covered row's lanes blk * BLOCK + i (i < BLOCK): the row is the pos-th of its bin's rows (srows: per
# feature, the covered rows grouped by bin, ascending within a bin); gradients from G, each packed Hessian entry of
# the example-wise logistic loss from two gradients (LogisticExampleWise.hessian: g_big * -g_small off the
# diagonal, |g| (1 - |g|) on it, the numpy reference's bits), the two count lanes last; lanes past n_lanes add
# nothing (the block's padding)
_VALUE = """
const long fo = (long)feat0 + feat;
const int row = srows[fo * n_rows + off[(fo * SIZE_bin + bin) * n_tiles] + pos];
const double w = weight[row];
const long at_g = (long)row * g_stride;
for (int i = 0; i < BLOCK; ++i) {
    const int lane = (int)blk * BLOCK + i;
    double v = 0.0;
    if (lane >= width) v = (lane == width || w != 0.0) ? 1.0 : 0.0;
    else if (w == 0.0) v = 0.0;
    else if (lane < k) v = G[at_g + gcol[lane]] * w;
    else {
        const int big = pair_r[lane - k], small = pair_c[lane - k];
        const double gb = G[at_g + big];
        double h;
        if (big == small) { const double p = fabs(gb); h = p * (1.0 - p); }
        else h = gb * -G[at_g + small];
        v = h * w;
    }
    if (lane < width + 2) ADD;
}
"""
_N_COVERED = "(at[n_rows - 1] + (covered[n_rows - 1] != 0))"  # the covered rows: the list's length


@lru_cache(maxsize=1)
def cover_scan() -> Description:
    """Where each covered row goes in the list of covered rows: an exclusive prefix count of the coverage mask
    (integers: exact in any order, so every configuration is exact)."""
    return Description(
        "rule_cover_scan", ["row"], [Scan(SUM, inclusive=False)], "int", scalar="out = covered != 0;",
        inputs=[Input("covered", "uchar", ("row",))],
    )


@lru_cache(maxsize=1)
def cover_rows() -> Description:
    """The covered rows in ascending order (scattered to their prefix count): the rows the histogram folds."""
    return Description(
        "rule_cover_rows", ["row"], [Concat()], "int",
        scalar="out = (int)row;\nout_at = covered[row] != 0 ? (idx_t)at[row] : -1;",
        inputs=[Input("covered", "uchar", ("*",), gather=True), Input("at", "int", ("*",), gather=True)],
        scatter=True,
    )


_LIST = [Input("ridx", "int", ("*",), gather=True), Input("at", "int", ("*",), gather=True),
         Input("covered", "uchar", ("*",), gather=True)]


@lru_cache(maxsize=2)
def sort_count(bin_type: str = "uchar") -> Description:
    """First pass of a stable counting sort of the covered rows by bin, per searched feature: how many rows of
    each tile of ``SIZE_q`` consecutive covered rows fall into each bin (integers: exact in any order)."""
    return Description(
        "rule_sort_count", ["feat", "bin", "tile", "q"], [Concat(), Concat(), Concat(), Reduce(SUM)], "int",
        scalar="out = bins[(long)ridx[tile * SIZE_q + q] * bin_stride + feat] == bin;",
        inputs=[Input("bins", bin_type, ("*",), gather=True), *_LIST],
        params=[Param("bin_stride", "int"), Param("n_rows", "int")],
        extents={"q": f"{_N_COVERED} - tile * SIZE_q"},
    )


@lru_cache(maxsize=1)
def sort_offsets() -> Description:
    """Second pass: per feature the exclusive prefix sum of the counts over (bin, tile), bin-major: where a tile's
    rows of a bin start in the feature's sorted list (at tile 0: where the bin starts)."""
    return Description(
        "rule_sort_offsets", ["feat", "cell"], [Concat(), Scan(SUM, inclusive=False)], "int", scalar="out = count;",
        inputs=[Input("count", "int", ("feat", "cell"))],
    )


@lru_cache(maxsize=2)
def sort_rows(bin_type: str = "uchar") -> Description:
    """Third pass: each covered row scattered to its bin's place in the feature's list (its tile's offset plus
    the tile's earlier rows of its bin): the rows grouped by bin, ascending within each bin, so a fold over a
    bin's rows adds them in the numpy reference's order (``np.bincount``'s: rows ascending)."""
    return Description(
        "rule_sort_rows", ["feat", "pos"], [Concat(), Concat()], "int",
        scalar=f"""
out_at = -1;
if (pos < {_N_COVERED}) {{
    const int r = ridx[pos];
    const int b = bins[(long)r * bin_stride + feat];
    const idx_t t = pos / tile;
    int rank = 0;
    for (idx_t q = t * tile; q < pos; ++q) rank += bins[(long)ridx[q] * bin_stride + feat] == b;
    out_at = (idx_t)feat * SIZE_pos + off[((idx_t)feat * n_bins + b) * ((n_rows + tile - 1) / tile) + t] + rank;
    out = r;
}}""",
        inputs=[Input("bins", bin_type, ("*",), gather=True), *_LIST, Input("off", "int", ("*",), gather=True)],
        params=[Param("bin_stride", "int"), Param("n_bins", "int"), Param("tile", "int"), Param("n_rows", "int")],
        scatter=True,
    )


@lru_cache(maxsize=4)
def histogram(block: int = 1) -> Description:
    """Per (feature of the chunk, bin, lane) the sum of the lane's values over the bin's covered rows (a ragged
    fold over the bin's part of the sorted list, ``srows``), rows ascending: every sum is added in the numpy
    reference's order with no atomics, neighbouring work-items read neighbouring lanes of the same row (coalesced
    on GPUs), and a step costs the rows its rule still covers. A work-item owns ``block`` neighbouring lanes (an
    array atom): it reads a row's index and weight once per block (what CPUs want; GPUs take 1). The lanes are
    built from the gradients on the fly (the packed Hessian entries of the example-wise logistic loss are
    products of two gradients), so the host neither builds nor sends them. Output (feat, bin, lane), the lanes
    padded to whole blocks (``binned.statistics``' layout)."""
    return Description(
        "rule_coupled_histogram", ["feat", "bin", "blk", "pos"], [Concat(), Concat(), Concat(), Reduce(SUM)],
        Array(Scalar("double"), int(block)),
        scalar=_VALUE.replace("ADD", "out.v[i] = v"),
        accumulate=_VALUE.replace("ADD", "acc.v[i] += v"),
        inputs=[Input("G", "double", ("*",), gather=True), Input("weight", "double", ("*",), gather=True),
                Input("gcol", "int", ("*",), gather=True), Input("pair_r", "int", ("*",), gather=True),
                Input("pair_c", "int", ("*",), gather=True), Input("srows", "int", ("*",), gather=True),
                Input("off", "int", ("*",), gather=True), Input("at", "int", ("*",), gather=True),
                Input("covered", "uchar", ("*",), gather=True)],
        params=[Param("feat0", "int"), Param("g_stride", "int"), Param("k", "int"), Param("width", "int"),
                Param("n_tiles", "int"), Param("n_rows", "int")],
        extents={"pos": f"(bin + 1 < SIZE_bin ? off[(((long)feat0 + feat) * SIZE_bin + bin + 1) * n_tiles] : "
                        f"{_N_COVERED}) - off[(((long)feat0 + feat) * SIZE_bin + bin) * n_tiles]"},
        preamble=f"#define BLOCK {int(block)}",
    )


def lane_block(dev: Device) -> int:
    """Lanes per work-item of the histogram: 1 on GPUs (neighbouring work-items, neighbouring lanes: coalesced),
    8 on CPUs (a row's index, weight and branches paid once per 8 lanes; on the shared 2-core machine 2.2-3.6 ns per
    (row, lane) with 8 or with 1 on PoCL and Intel's runtime alike, within the load's noise)."""
    return 1 if dev.type == "gpu" else 8


@lru_cache(maxsize=1)
def scan() -> Description:
    """Inclusive prefix sums over bins of every (feature, lane), from the histogram's (feat, bin, lane) layout
    (lanes ``lane_stride`` apart: padded to whole blocks) to (feat, lane, bin), what the quality kernel reads."""
    return Description(
        "rule_coupled_scan", ["feat", "lane", "bin"], [Concat(), Concat(), Scan(SUM)], "double",
        scalar="out = hist[((long)feat * SIZE_bin + bin) * lane_stride + lane];",
        inputs=[Input("hist", "double", ("*",), gather=True)],
        params=[Param("lane_stride", "int")],
    )


PRIVATE_WORK = (32, 64, 128, 256, 512)
"""Scratch lengths (doubles per work-item) at which the quality kernel may keep its work in private memory: label
binning's handful of bins (241 doubles at 101 labels and mlrl-boomer's defaults: 10 bins), or a few unbinned
labels (27 at 6). Beyond 512 (unbinned heads of more than ~30 labels: 5252 at 101) the global slice serves."""


@lru_cache(maxsize=1)
def quality() -> Description:
    """Minus the quality of every candidate (feature, bin, operator) and the arg-max (ties to the lower index
    ``(feat * SIZE_bin + bin) * 2 + dir``); ``bin`` runs over the n_bins - 2 candidate bins. With ``lb_ratio`` > 0
    the head bins its labels first (:mod:`mdhom.rules.label_binning`) and solves one unknown per bin."""
    return Description(
        "rule_coupled_quality", ["feat", "bin", "dir"], [Reduce(ARGMAX), Reduce(ARGMAX), Reduce(ARGMAX)],
        split_type("double"),
        scalar="out.index = (int)(((long)feat * SIZE_bin + bin) * 2 + dir);\n"
               "if (lb_ratio > 0.0f)\n"
               "    out.value = rule_binned_gain(scan, work, feat, (int)bin, (int)dir, (int)SIZE_bin + 2, k, n_lanes, "
               "l2, l1, min_coverage, lb_ratio, lb_min, lb_max, max_bins);\n"
               "else\n"
               "    out.value = rule_coupled_gain(scan, work, feat, (int)bin, (int)dir, (int)SIZE_bin + 2, k, n_lanes, "
               "l2, l1, min_coverage);",
        inputs=[Input("scan", "double", ("feat", "*", "*"), gather=True)],  # (feat, lane, n_bins)
        params=[Param("k", "int"), Param("n_lanes", "int"), Param("l2", "double"), Param("l1", "double"),
                Param("min_coverage", "double"), Param("lb_ratio", "float"), Param("lb_min", "int"),
                Param("lb_max", "int"), Param("max_bins", "int"), Param("work_len", "int")],
        preamble=linalg.SOURCE + _CODE, scratch=Scratch("work", "double", "work_len", private=PRIVATE_WORK),
    )


@lru_cache(maxsize=1)
def result() -> Description:
    """Row ``chunk`` of the result: the winner's side sums per lane (the prefix at its bin, or the last real bin's
    minus it), then its value and its index (as a double); zero sums where nothing is allowed (value -inf)."""
    return Description(
        "rule_coupled_result", ["lane"], [Concat()], "double",
        scalar=f"""
const int idx = best[{_BEST_INDEX}];
const int n_cand = n_bins - 2;
const double value = best_value[0];
out_at = (long)chunk * SIZE_lane + lane;
if (lane == SIZE_lane - 2) out = value;
else if (lane == SIZE_lane - 1) out = (double)idx;
else if (value > -INFINITY && idx >= 0 && idx < n_feat * n_cand * 2) {{
    const long cell = ((long)(idx / (2 * n_cand)) * (SIZE_lane - 2) + lane) * n_bins;
    const double le = scan[cell + (idx / 2) % n_cand];
    out = (idx % 2 == 0) ? le : scan[cell + n_bins - 2] - le;
}}""",
        inputs=[Input("scan", "double", ("*",), gather=True), Input("best", "int", ("*",), gather=True),
                Input("best_value", "double", ("*",), gather=True)],
        params=[Param("n_feat", "int"), Param("n_bins", "int"), Param("chunk", "int")],
        scatter=True,
    )


# ------------------------------------------------------------------------------------------------ heuristics
def histogram_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Lanes side by side (neighbouring lanes read neighbouring gradients of the same row: coalesced on GPUs), a
    work-group per (feature, bin, lane group), each work-item folding its bin's rows (pinned: the sum's order)."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    wi = pow2_at_most(sizes["blk"], 128 if gpu else (1 if dev.runtime == "intel" else 8))
    cfg["NUM_WI_blk"] = wi
    cfg["NUM_WG_blk"] = max(1, -(-int(sizes["blk"]) // wi))
    cfg["NUM_WG_bin"] = int(sizes["bin"])
    cfg["NUM_WG_feat"] = int(sizes["feat"])
    return cfg


def sort_count_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Work-items along the tiles (each counts its tile's rows of one bin), a work-group row per (feature, bin)."""
    cfg = ones(desc, dev, sizes)
    wi = pow2_at_most(sizes["tile"], 64 if dev.type == "gpu" else 16)
    cfg["NUM_WI_tile"] = wi
    cfg["NUM_WG_tile"] = max(1, -(-int(sizes["tile"]) // wi))
    cfg["NUM_WG_bin"] = int(sizes["bin"])
    cfg["NUM_WG_feat"] = int(sizes["feat"])
    return cfg


def scan_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """One work-item per (feature, lane) walks its bins (the pinned order is also the fast one at ~34 bins)."""
    cfg = ones(desc, dev, sizes)
    wi = pow2_at_most(sizes["lane"], 64 if dev.type == "gpu" else 16)
    cfg["NUM_WI_lane"] = wi
    cfg["NUM_WG_lane"] = max(1, -(-int(sizes["lane"]) // wi))
    cfg["NUM_WG_feat"] = int(sizes["feat"])
    return cfg


def quality_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Every candidate its own work-item (each solves a k x k system: the work is per candidate, not per lane), a
    few work-groups per compute unit; few work-items overall keeps the scratch (P + k doubles each) small. The
    scratch is private when ``sizes["work_len"]`` fits one of :data:`PRIVATE_WORK` (the smallest that does): a
    GPU then keeps each candidate's running sums in registers or L1 instead of a global round trip per add."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_bin"] = pow2_at_most(sizes["bin"], 32 if gpu else 1)
    cfg["NUM_WI_dir"] = 2 if gpu else 1
    cfg["NUM_WG_feat"] = int(sizes["feat"])
    per_feat = max(1, dev.compute_units // max(1, int(sizes["feat"])))
    cfg["NUM_WG_bin"] = pow2_at_most(-(-int(sizes["bin"]) // cfg["NUM_WI_bin"]), per_feat)
    cfg["NUM_WI_COMBINE"] = 1 if not gpu else cfg.get("NUM_WI_COMBINE", 64)
    # private work where it fits (sizes name work_len: the learner's build), the global slice otherwise
    cfg["SCRATCH_PRIVATE"] = desc.private_capacity(int(sizes.get("work_len", 1 << 30)))
    return cfg


# ------------------------------------------------------------------------------------------------ tuner inputs
def _quality_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    n, f, k, nb = int(s.get("rows", 500)), int(s["feat"]), int(s["n_labels"]), int(s["bin"]) + 2
    lb = LabelBinning() if s.get("label_binning") else None
    from mdhom.rules.losses import make_loss

    Y = (rng.random((n, k)) < 0.3).astype(float)
    G, H = make_loss("logistic_examplewise").statistics(Y, rng.normal(size=(n, k)) * 0.5)
    head = Head("complete", True, np.arange(k), k, 0.0, 1.0)
    bins = rng.integers(0, nb, (n, f)).astype(np.uint8)
    vals = binned.slot_values(head.gather(G, H), rng.random(n) < 0.7, np.ones(n))
    cum = np.cumsum(binned.statistics(bins, nb, vals), axis=1)  # (F, nb, lanes)
    return {"scan": np.ascontiguousarray(cum.transpose(0, 2, 1)), "k": k, "n_lanes": lanes_of(k),
            "l2": 1.0, "l1": 0.0, "min_coverage": 1.0, "work_len": work_len(k, lb), **binning_params(k, lb)}


def quality_reference(a: Mapping) -> np.ndarray:
    """The quality kernel's split_t from its inputs: binned.qualities with the coupled head, arg-min."""
    k = int(a["k"])
    cum = np.asarray(a["scan"]).transpose(0, 2, 1)  # (feat, n_bins, lanes)
    lb = None
    if a["lb_ratio"] > 0:
        lb = LabelBinning(float(np.float32(a["lb_ratio"])), int(a["lb_min"]), int(a["lb_max"]))
    head = Head("complete", True, np.arange(k), k, float(a["l1"]), float(a["l2"]), lb)
    q = binned.qualities(cum, head, int(a["min_coverage"]))
    out = np.zeros((), _BEST)  # the arg-max over every dimension: one split_t
    flat = int(np.argmin(q))
    out["value"], out["index"] = -q.flat[flat], flat
    return out


def _histogram_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    """A step's covered rows (70%, a few of weight 0) grouped by bin per feature, as the sort leaves them (one
    tile), and the example-wise loss's gradients of every label."""
    from mdhom.rules.losses import make_loss, packed_index

    n, f, nb, k = int(s["pos"]), int(s["feat"]), int(s["bin"]), int(s["n_labels"])
    G = make_loss("logistic_examplewise").gradients((rng.random((n, k)) < 0.3).astype(float),
                                                    rng.normal(size=(n, k)))
    covered = (rng.random(n) < 0.7).astype(np.uint8)
    rows = np.flatnonzero(covered)
    bins = rng.integers(0, nb, (rows.size, f))
    counts = np.stack([np.bincount(bins[:, j], minlength=nb) for j in range(f)])
    srows = np.zeros((f, n), np.int32)
    for j in range(f):
        srows[j, : rows.size] = rows[np.argsort(bins[:, j], kind="stable")]
    labels = np.arange(k, dtype=np.int32)
    sub_r, sub_c = packed_index(k)
    return {"G": G.ravel(), "weight": np.where(rng.random(n) < 0.05, 0.0, 1.0), "gcol": labels,
            "pair_r": labels[sub_r], "pair_c": labels[sub_c], "srows": srows.ravel(),
            "off": (np.cumsum(counts, axis=1) - counts).astype(np.int32).ravel(),
            "at": (np.cumsum(covered) - covered).astype(np.int32), "covered": covered, "feat0": 0, "g_stride": k,
            "k": k, "width": lanes_of(k) - 2, "n_tiles": 1, "n_rows": n}


def histogram_reference(a: Mapping) -> np.ndarray:
    """The histogram's (feat, bin, lane) from its inputs (one tile): ``binned.statistics`` of the covered rows,
    each feature's bins read back from the grouped list. The size classes' lanes are whole blocks (no padding)."""
    from mdhom.rules.losses import make_loss

    k, n = int(a["k"]), int(a["n_rows"])
    covered, at = np.asarray(a["covered"]) != 0, np.asarray(a["at"])
    n_cov = int(at[-1]) + int(covered[-1])
    f = np.asarray(a["srows"]).size // n
    nb = np.asarray(a["off"]).size // f
    off = np.append(np.asarray(a["off"]).reshape(f, nb), np.full((f, 1), n_cov), axis=1)
    srows = np.asarray(a["srows"]).reshape(f, n)
    bins = np.zeros((n, f), np.int64)
    for j in range(f):
        for b in range(nb):
            bins[srows[j, off[j, b]: off[j, b + 1]], j] = b
    G = np.asarray(a["G"]).reshape(n, k)
    head = Head("complete", True, np.arange(k), k, 0.0, 1.0)
    values = binned.slot_values(head.gather(G, make_loss("logistic_examplewise").hessian(G)), covered,
                                np.asarray(a["weight"]))
    return binned.statistics(bins, nb, values, np.flatnonzero(covered))


_HISTOGRAM_PINS = {"NUM_WI_pos": 1, "NUM_WG_pos": 1}  # each sum in the reference's order: rows ascending


def _histogram_class(n_labels: int, block: int) -> dict[str, int]:
    assert lanes_of(n_labels) % block == 0  # whole blocks: the reference has no padding lanes
    return {"feat": 7, "bin": 34, "blk": lanes_of(n_labels) // block, "pos": 4000, "n_labels": n_labels,
            "block": block}


# 20 and 100 labels (232 and 5152 lanes: whole blocks of 8; mediamill's 101 builds nearest the second), each in
# the GPUs' variant (a lane per work-item) and the CPUs' (8 lanes: lane_block)
_HISTOGRAM_CLASSES = {f"labels_{k}{'' if b == 1 else f'_lanes_{b}'}": _histogram_class(k, b)
                      for k in (20, 100) for b in (1, 8)}

_CLASSES = {"labels_6": {"feat": 7, "bin": 32, "dir": 2, "n_labels": 6},
            "labels_20": {"feat": 7, "bin": 32, "dir": 2, "n_labels": 20},
            "labels_101_binned": {"feat": 7, "bin": 32, "dir": 2, "n_labels": 101, "label_binning": 1}}

HISTOGRAM = KernelSpec("rule_coupled_histogram", histogram_heuristic, exact_pins=_HISTOGRAM_PINS, tuning=Tuning(
    lambda s: histogram(int(s["block"])), _HISTOGRAM_CLASSES, _histogram_inputs, histogram_reference,
    doc="rule refinement, example-wise loss: a step's statistics per (feature, bin, lane) over the covered rows",
    tolerances={"double": (0.0, 0.0)}, fixed=dict(_HISTOGRAM_PINS),
    applies=lambda dev, s: int(s["block"]) == lane_block(dev)))
SORT_COUNT = KernelSpec("rule_sort_count", sort_count_heuristic)
SORT_OFFSETS = KernelSpec("rule_sort_offsets", description_default)
SORT_ROWS = KernelSpec("rule_sort_rows", elementwise("pos"))
COVER_SCAN = KernelSpec("rule_cover_scan", description_default)
COVER_ROWS = KernelSpec("rule_cover_rows", elementwise("row"))
SCAN = KernelSpec("rule_coupled_scan", scan_heuristic, exact_pins={"NUM_WI_bin": 1, "NUM_WG_bin": 1})
QUALITY = KernelSpec("rule_coupled_quality", quality_heuristic, tuning=Tuning(
    lambda s: quality(), _CLASSES, _quality_inputs, quality_reference,
    doc="rule refinement, example-wise loss: each candidate's regularised k x k solve and quality, arg-max"))
RESULT = KernelSpec("rule_coupled_result", lambda d, dev, s: {**ones(d, dev, s), "NUM_WI_lane": 64 if dev.type ==
                                                              "gpu" else 16, "NUM_WG_lane": 4})
SPECS = (HISTOGRAM, SCAN, QUALITY, RESULT, COVER_SCAN, COVER_ROWS, SORT_COUNT, SORT_OFFSETS, SORT_ROWS)
