"""The forest's md_hom kernels: every tree of a forest grows one level per launch of each.

A level's nodes over all trees are *slots*: slot ``s`` belongs to tree ``slot_tree[s]`` and owns the positions
``slot_begin[s] .. + slot_count[s]`` of the position order ``order`` (``T x n`` rows: tree ``t``'s in-bag rows
in positions ``t*n ..``, grouped by node, ascending inside a node). The tree dimension is thus a concatenated
dimension of slots whose row fold is *ragged* (``Description(extents=...)``): one launch does the work of the
level's rows, not of slots x the largest node.

Every row carries integer *lanes*: ``S`` statistics (one-hot classes per output, or the target in fixed point
per output), then its bootstrap weight and 1 (its distinct count). Weighted by the bootstrap counts they stay
integers, so histograms are exact in any summation order and every device writes the reference's model file.

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
forest_histogram       slot x feat x pos    concat, concat, sum over the slot's rows (ragged)
forest_hist_siblings   slot x cell          concat: the built smaller child, or parent - it (subtraction)
forest_node_totals     slot x lane x bin    concat, concat, sum over bins (feature 0's histogram)
forest_feature_split   slot x feat          concat, concat: the best "bin <= b" of a feature (a scan in f)
forest_node_split      slot                 concat: the best candidate among the node's sampled features
forest_route           tree x row           concat: a row's slot at the next level (-1: none)
forest_left_scan       tree x pos           concat, exclusive prefix sum of the go-left flags
forest_partition       tree x pos           concat at a computed position (scatter): the stable partition
forest_bag_scan        tree x row           concat, exclusive prefix count of the in-bag rows
forest_bag_order       tree x row           concat at a computed position (scatter): in-bag rows first
forest_bag_slots       tree x row           concat: the root slot of an in-bag row, -1 out of the bag
forest_leaves          tree x row           concat, concat: the leaf a row reaches in a tree (tree-major)
forest_leaf_sums       row x tree           concat, sum over trees (tree order) of every value of the row's leaves
=====================  ===================  ==============================================================

Where ``max_features`` draws few of the features, the backend runs the *sampled* level of
:mod:`mdhom.forests.sampled` instead (the histogram above over each node's drawn candidates, ``cand_width``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import bin_ctype
from mdhom.components.predictor import FOREST_NODE
from mdhom.components.specs import KernelSpec, Tuning, elementwise, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Scalar, Scan, Struct

CRITERIA = {"gini": 0, "entropy": 1, "squared_error": 2}
FEATURE_SPLIT = Struct("forest_fsplit_t", (("score", "double"), ("bin", "int"), ("nonconst", "int"),
                                           ("left", "int"), ("pad", "int")))
NODE_SPLIT = Struct("forest_nsplit_t", (("gain", "double"), ("feat", "int"), ("bin", "int"), ("left", "int"),
                                        ("pad", "int")))
_MIX = """
inline uint forest_mix(uint x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}
/* the random rank key of feature f at a node: a permutation of the features per (tree seed, node) */
inline uint forest_key(uint seed, int node, int f) {
    return forest_mix(forest_mix(seed + 0x9e3779b9u * (uint)(node + 1)) ^ (0x85ebca6bu * (uint)(f + 1)));
}
"""


def _layout(lane: str, n_stats: int, outputs: tuple[int, ...]) -> str:
    """Defines every forest kernel shares: the lane type and count, and where each output's lanes start."""
    offs = np.concatenate([[0], np.cumsum(outputs)]).astype(int)
    return (f"typedef {lane} lane_t;\n#define FOREST_STATS {n_stats}\n#define FOREST_LANES {n_stats + 2}\n"
            f"#define FOREST_W {n_stats}\n#define FOREST_D {n_stats + 1}\n#define FOREST_OUTPUTS {len(outputs)}\n"
            f"__constant int forest_off[] = {{{', '.join(map(str, offs))}}};\n")


# ------------------------------------------------------------------------------------------------ histogram
_HIST = """
const long mdh_p = (long)slot_begin[slot] + pos;
const int mdh_r = order[mdh_p];
const lane_t mdh_w = (lane_t)weight[(long)slot_tree[slot] * n_rows + mdh_r];
const int mdh_c = (int)bins[(long)({feat}) * n_rows + mdh_r] * FOREST_LANES;
for (int j = 0; j < FOREST_STATS; ++j) {{
    const lane_t mdh_v = mdh_w * stat[{stat_at} + j];
    {add_v}
}}
{add_w}
{add_d}
"""


# where a row's statistics start: its own FOREST_STATS lanes, or (per-tree targets) the tree's column of a wider row
_STAT_AT = {False: "(long)mdh_r * FOREST_STATS", True: "(long)mdh_r * stat_stride + tree_col[slot_tree[slot]]"}


def _feat_at(cand_width: int) -> str:
    """The feature a histogram point bins by: its own (dense), or the slot's ``feat``-th sampled candidate."""
    return f"cand[(long)slot_id[slot] * {cand_width} + 1 + feat]" if cand_width else "feat"


def _hist_body(target: str, op: str, per_tree: bool = False, cand_width: int = 0) -> str:
    return _HIST.format(add_v=f"{target}.v[mdh_c + j] {op} mdh_v;", add_w=f"{target}.v[mdh_c + FOREST_W] {op} mdh_w;",
                        add_d=f"{target}.v[mdh_c + FOREST_D] {op} 1;", stat_at=_STAT_AT[per_tree],
                        feat=_feat_at(cand_width))


def _hist_atomic(lane: str, per_tree: bool = False, cand_width: int = 0) -> str:
    add = "atom_add" if lane == "long" else "atomic_add"
    return _HIST.format(add_v=f"if (mdh_v != 0) {add}(&acc->v[mdh_c + j], mdh_v);",
                        add_w=f"{add}(&acc->v[mdh_c + FOREST_W], mdh_w);",
                        add_d=f"{add}(&acc->v[mdh_c + FOREST_D], 1);", stat_at=_STAT_AT[per_tree],
                        feat=_feat_at(cand_width))


@lru_cache(maxsize=32)
def histogram(n_bins: int, lane: str, outputs: tuple[int, ...], per_tree: bool = False,
              cand_width: int = 0) -> Description:
    """Lane sums per (slot, feature, bin) over each slot's rows: (slot, feat) atoms of n_bins x lanes integers.
    ``bins`` are feature-major (feat, row): a work-item folding one feature of a node's ascending rows reads
    ascending addresses.

    The row fold of a slot is ragged (its own count of positions), so a level of thousands of slots of unequal
    size is one launch; integer lanes make every order of addition (and the local-memory atomics of
    ``PARTIALS_LOCAL``) give the same sums.

    ``per_tree`` (the classifier chains' forests, many targets in one batch of trees): a row holds
    ``stat_stride`` lanes, tree ``t`` reads its statistics from column ``tree_col[t]`` on, and the features
    ``feat_mask[t, f] == 0`` forbids fold no rows (a zero histogram: the extent of the fold is 0).

    ``cand_width`` (the sampled level, :mod:`mdhom.forests.sampled`): the slots are the level's large ones,
    ``slot_id[slot]`` their place in the level, and ``feat`` counts a slot's candidate features, row
    ``slot_id[slot]`` of ``cand`` (``cand_width`` ints per slot: the number of live candidates, then the
    features); only the first ``max(live, 1)`` are folded."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    lanes = n_stats + 2
    inputs = [Input("bins", bin_ctype(n_bins), ("*",), gather=True), Input("stat", lane, ("*",), gather=True),
              Input("weight", "int", ("*",), gather=True), Input("order", "int", ("*",), gather=True),
              Input("slot_begin", "int", ("slot",), gather=True), Input("slot_count", "int", ("slot",), gather=True),
              Input("slot_tree", "int", ("slot",), gather=True)]
    params = [Param("n_rows", "int")]
    extent = "slot_count[slot]"
    if per_tree:
        inputs += [Input("tree_col", "int", ("*",), gather=True)]
        params.append(Param("stat_stride", "int"))
        if not cand_width:  # sampled candidates are the tree's own features already
            inputs.append(Input("feat_mask", "uchar", ("*",), gather=True))
            extent = "(feat_mask[(long)slot_tree[slot] * SIZE_feat + feat] ? slot_count[slot] : 0)"
    if cand_width:
        inputs += [Input("cand", "int", ("*",), gather=True), Input("slot_id", "int", ("slot",), gather=True)]
        extent = f"(feat < max(cand[(long)slot_id[slot] * {int(cand_width)}], 1) ? slot_count[slot] : 0)"
    return Description(
        "forest_histogram", ["slot", "feat", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(Scalar(lane), int(n_bins) * lanes),
        scalar=_hist_body("out", "=", per_tree, cand_width), accumulate=_hist_body("acc", "+=", per_tree, cand_width),
        accumulate_atomic=_hist_atomic(lane, per_tree, cand_width), inputs=inputs, params=params,
        preamble=_layout(lane, n_stats, outputs),
        extents={"pos": extent},
    )


def exact_bincount(keys: np.ndarray, values: np.ndarray, minlength: int) -> np.ndarray:
    """Integer sums of ``values`` (int64) per key, exact: np.bincount adds in float64, so values go in 31-bit halves
    (each half's sums stay below 2^53 for up to 2^22 values)."""
    values = values.astype(np.int64)
    if values.size < 1 << 22 and np.abs(values).max(initial=0) < 1 << 31:
        return np.rint(np.bincount(keys, values.astype(np.float64), minlength)).astype(np.int64)
    out = np.zeros(minlength, np.int64)
    for lo in range(0, values.size, 1 << 21):
        k, v = keys[lo:lo + (1 << 21)], values[lo:lo + (1 << 21)]
        low, high = v & ((1 << 31) - 1), v >> 31
        out += np.rint(np.bincount(k, low.astype(np.float64), minlength)).astype(np.int64)
        out += np.rint(np.bincount(k, high.astype(np.float64), minlength)).astype(np.int64) << 31
    return out


def histogram_reference(bins: np.ndarray, stat: np.ndarray, weight: np.ndarray, order: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, slot_tree: np.ndarray,
                        n_bins: int, per_tree: PerTree | None = None) -> np.ndarray:
    """(slot, feat, bin, lanes) int64: exact integer sums, the kernel's result in any order of addition
    (``per_tree``: each tree's target columns, and zeros for the features its mask forbids)."""
    n, f = bins.shape
    if per_tree is not None:
        out = _per_tree_histogram(bins, stat, weight, order, slot_begin, slot_count, slot_tree, n_bins, per_tree)
        return out
    lanes = stat.shape[1] + 2
    n_slots = len(slot_begin)
    if not n_slots or not int(np.sum(slot_count)):
        return np.zeros((n_slots, f, n_bins, lanes), np.int64)
    slot_of = np.repeat(np.arange(n_slots), slot_count)
    start = np.repeat(np.asarray(slot_begin, np.int64) - np.concatenate([[0], np.cumsum(slot_count)[:-1]]),
                      slot_count)
    pos = start + np.arange(slot_of.size)
    rows = order.reshape(-1)[pos]
    w = weight.reshape(-1)[slot_tree[slot_of].astype(np.int64) * n + rows].astype(np.int64)
    keys = ((slot_of[:, None] * f + np.arange(f)[None, :]) * n_bins + bins[rows]).reshape(-1)
    size = n_slots * f * n_bins
    out = np.empty((size, lanes), np.int64)
    for j in range(lanes):
        v = w * stat[rows, j].astype(np.int64) if j < lanes - 2 else (w if j == lanes - 2 else np.ones_like(w))
        out[:, j] = exact_bincount(keys, np.repeat(v, f), size)
    return out.reshape(n_slots, f, n_bins, lanes)


@dataclass(frozen=True)
class PerTree:
    """Trees of one batch with targets and features of their own (a classifier chain's forest per chain): tree
    ``t`` reads its ``n_stats`` statistics from ``stat[:, column[t]:]`` and searches only the features
    ``mask[t] != 0``."""

    column: np.ndarray  # (T,) int32
    mask: np.ndarray  # (T, F) uint8
    n_stats: int


def _per_tree_histogram(bins: np.ndarray, stat: np.ndarray, weight: np.ndarray, order: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, slot_tree: np.ndarray, n_bins: int,
                        per_tree: PerTree) -> np.ndarray:
    """The per-tree histogram from the plain one: each slot's own statistic columns gathered into a row-local
    matrix is not possible (rows are shared), so slots are grouped by target column."""
    n_slots, f = len(slot_begin), bins.shape[1]
    k = per_tree.n_stats
    out = np.zeros((n_slots, f, n_bins, k + 2), np.int64)
    col = per_tree.column[np.asarray(slot_tree, np.int64)]
    for c in np.unique(col):
        at = np.flatnonzero(col == c)
        out[at] = histogram_reference(bins, stat[:, c:c + k], weight, order, np.asarray(slot_begin)[at],
                                      np.asarray(slot_count)[at], np.asarray(slot_tree)[at], n_bins)
    out *= (per_tree.mask[np.asarray(slot_tree, np.int64)] != 0)[:, :, None, None]
    return out


# ------------------------------------------------------------------------------------------------ subtraction
@lru_cache(maxsize=4)
def hist_siblings(lane: str) -> Description:
    """A level's histograms from the smaller child of each split (built) and the parents' (histogram subtraction,
    exact in integers): slot ``2k + side`` is the built ``small[k]`` where ``side`` is the built one
    (``pair[2k + 1]``), else ``prev[pair[2k]] - small[k]``. Halves the histogram's work on every level below the
    root."""
    return Description(
        "forest_hist_siblings", ["slot", "cell"], [Concat(), Concat()], lane,
        scalar="""
const long k = slot >> 1;
const atom_t c = small[k * SIZE_cell + cell];
out = ((slot & 1) == pair[2 * k + 1]) ? c : prev[(long)pair[2 * k] * SIZE_cell + cell] - c;""",
        inputs=[Input("small", lane, ("*",), gather=True), Input("prev", lane, ("*",), gather=True),
                Input("pair", "int", ("*",), gather=True)],
    )


def hist_siblings_reference(small: np.ndarray, prev: np.ndarray, pair: np.ndarray) -> np.ndarray:
    pair = pair.reshape(-1, 2)
    out = np.empty((2 * len(pair),) + small.shape[1:], small.dtype)
    side = pair[:, 1].astype(bool)
    other = prev[pair[:, 0]] - small
    out[0::2] = np.where(side.reshape((-1,) + (1,) * (small.ndim - 1)), other, small)
    out[1::2] = np.where(side.reshape((-1,) + (1,) * (small.ndim - 1)), small, other)
    return out


# ------------------------------------------------------------------------------------------------ node totals
@lru_cache(maxsize=32)
def node_totals(lane: str) -> Description:
    """A slot's lane sums (its class counts or target sums, weight and rows): feature 0's histogram summed over
    bins. What the host decides leaves and leaf values with."""
    return Description(
        "forest_node_totals", ["slot", "lane", "bin"], [Concat(), Concat(), Reduce(SUM)], lane,
        scalar="out = hist[((long)slot * n_feat * SIZE_bin + bin) * SIZE_lane + lane];",
        inputs=[Input("hist", lane, ("*",), gather=True)], params=[Param("n_feat", "int")],
    )


def node_totals_reference(hist: np.ndarray) -> np.ndarray:
    return hist[:, 0].sum(axis=1)


# ------------------------------------------------------------------------------------------------ split scores
_SCORE = """
/* the score of one side (to maximise; a split's is left + right): per output in order, gini sum_c n_c^2 / w,
 * entropy sum_c n_c log n_c - w log w (a table of x log x), squared error s^2 / w */
inline double forest_side(const lane_t* v, __global const double* xlogx) {
    double s = 0.0;
    const double w = (double)v[FOREST_W];
    for (int o = 0; o < FOREST_OUTPUTS; ++o) {
#if FOREST_CRITERION == 0
        long q = 0;
        for (int c = forest_off[o]; c < forest_off[o + 1]; ++c) q += (long)v[c] * (long)v[c];
        s = s + (double)q / w;
#elif FOREST_CRITERION == 1
        double e = 0.0;
        for (int c = forest_off[o]; c < forest_off[o + 1]; ++c) e = e + xlogx[v[c]];
        e = e - xlogx[v[FOREST_W]];
        s = s + e;
#else
        const double a = (double)v[o];
        s = s + a * a / w;
#endif
    }
    return s;
}
"""


# the best cut of one feature's histogram h (n_bins x FOREST_LANES): shared by the dense and the sampled level
SCAN_BINS = """
inline forest_fsplit_t forest_scan_bins(__global const lane_t* h, const int n_bins, const int min_leaf,
                                        __global const double* xlogx) {
    lane_t tot[FOREST_LANES], left[FOREST_LANES], right[FOREST_LANES];
    for (int j = 0; j < FOREST_LANES; ++j) { tot[j] = 0; left[j] = 0; }
    int filled = 0;
    for (int b = 0; b < n_bins; ++b) {
        if (h[b * FOREST_LANES + FOREST_D] == 0) continue;
        for (int j = 0; j < FOREST_LANES; ++j) tot[j] += h[b * FOREST_LANES + j];
        filled += 1;
    }
    double best = -INFINITY;
    int best_bin = -1, best_left = 0;
    for (int b = 0; b + 1 < n_bins; ++b) {
        /* an empty bin leaves the cut as the one before it: the same score, which cannot win (ties go to the lower
           bin), or the same min_leaf failure; skipping it keeps the result and the work proportional to the node */
        if (h[b * FOREST_LANES + FOREST_D] == 0) continue;
        for (int j = 0; j < FOREST_LANES; ++j) { left[j] += h[b * FOREST_LANES + j]; right[j] = tot[j] - left[j]; }
        if (left[FOREST_D] < min_leaf || right[FOREST_D] < min_leaf) continue;
        const double s = forest_side(left, xlogx) + forest_side(right, xlogx);
        if (s > best) { best = s; best_bin = b; best_left = (int)left[FOREST_D]; }
    }
    forest_fsplit_t out;
    out.score = best; out.bin = best_bin; out.nonconst = filled > 1; out.left = best_left; out.pad = 0;
    return out;
}
/* a record into the kernel's own atom type (a struct of the same fields) */
#define FOREST_SET_FSPLIT(o, r) do { (o).score = (r).score; (o).bin = (r).bin; (o).nonconst = (r).nonconst; \
    (o).left = (r).left; } while (0)
"""


@lru_cache(maxsize=32)
def feature_split(lane: str, outputs: tuple[int, ...], criterion: str) -> Description:
    """The best threshold "bin <= b" of each (slot, feature): the scalar function scans the feature's
    histogram over bins (prefix sums in private memory), scoring every cut both children of which hold at least
    ``min_leaf`` rows; the lowest bin wins ties. Also: whether the feature takes more than one bin in the node
    (scikit-learn skips constant features) and the rows going left."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    return Description(
        "forest_feature_split", ["slot", "feat"], [Concat(), Concat()], FEATURE_SPLIT,
        scalar="""
const forest_fsplit_t r = forest_scan_bins(hist + ((long)slot * SIZE_feat + feat) * n_bins * FOREST_LANES, n_bins,
                                           min_leaf, xlogx);
FOREST_SET_FSPLIT(out, r);""",
        inputs=[Input("hist", lane, ("*",), gather=True), Input("xlogx", "double", ("*",), gather=True)],
        params=[Param("n_bins", "int"), Param("min_leaf", "int")],
        preamble=_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {CRITERIA[criterion]}\n" + _SCORE
        + FEATURE_SPLIT.declaration("forest_fsplit_t") + "\n" + SCAN_BINS,
    )


def xlogx_table(n: int) -> np.ndarray:
    """x log x for x = 0..n (0 at 0): the entropy's terms as a table, so every device adds the same bits."""
    x = np.arange(n + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = x * np.log(x)
    out[0] = 0.0
    return out


def side_reference(v: np.ndarray, outputs: tuple[int, ...], criterion: str, xlogx: np.ndarray) -> np.ndarray:
    """:c:func:`forest_side` over the last axis (lanes), in the kernel's order of operations."""
    n_stats = v.shape[-1] - 2
    w = v[..., n_stats].astype(np.float64)
    s = np.zeros(v.shape[:-1])
    offs = np.concatenate([[0], np.cumsum(outputs)]).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        for o in range(len(outputs)):
            if criterion == "gini":
                q = (v[..., offs[o]:offs[o + 1]].astype(np.int64) ** 2).sum(axis=-1)
                s = s + q.astype(np.float64) / w
            elif criterion == "entropy":
                e = np.zeros(v.shape[:-1])
                for c in range(offs[o], offs[o + 1]):
                    e = e + xlogx[v[..., c]]
                e = e - xlogx[v[..., n_stats]]
                s = s + e
            else:
                a = v[..., o].astype(np.float64)
                s = s + a * a / w
    return s


def feature_split_reference(hist: np.ndarray, outputs: tuple[int, ...], criterion: str, min_leaf: int,
                            xlogx: np.ndarray) -> np.ndarray:
    """(slot, feat) FEATURE_SPLIT records, as the kernel computes them."""
    n_slots, n_feat, n_bins, lanes = hist.shape
    d = lanes - 1
    out = np.zeros((n_slots, n_feat), FEATURE_SPLIT.dtype)
    cum = np.cumsum(hist, axis=2)
    left, tot = cum[:, :, :-1], cum[:, :, -1:]
    right = tot - left
    valid = (left[..., d] >= min_leaf) & (right[..., d] >= min_leaf)
    score = side_reference(left, outputs, criterion, xlogx) + side_reference(right, outputs, criterion, xlogx)
    score = np.where(valid, score, -np.inf)
    best = np.argmax(score, axis=2) if n_bins > 1 else np.zeros((n_slots, n_feat), np.int64)
    any_valid = valid.any(axis=2)
    sl, fe = np.indices((n_slots, n_feat))
    out["score"] = np.where(any_valid, score[sl, fe, best] if n_bins > 1 else -np.inf, -np.inf)
    out["bin"] = np.where(any_valid, best, -1)
    out["left"] = np.where(any_valid, left[sl, fe, best, d] if n_bins > 1 else 0, 0)
    out["nonconst"] = (hist[..., d] > 0).sum(axis=2) > 1
    return out


# ------------------------------------------------------------------------------------------------ node split
@lru_cache(maxsize=32)
def node_split(lane: str, outputs: tuple[int, ...], criterion: str, n_features: int,
               masked: bool = False) -> Description:
    """The split of each slot, as scikit-learn's best splitter chooses: the features in a random order per node
    (a hash of the tree's seed, the node and the feature: the same permutation on every device), the non-constant
    ones among the first ``max_features`` evaluated (or, when all of those are constant, the first non-constant
    one), the best score winning and ties going to the earlier feature in that order. ``gain`` is the score less
    the parent's; ``feat`` is -1 when no candidate has a valid cut.

    ``masked`` (per-tree features, :class:`PerTree`): the features ``feat_mask[tree, f] == 0`` are not in the
    tree's order at all, as if its feature matrix lacked them (a chain's forest sees only the earlier labels)."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    inputs = [Input("fsplit", "int", ("*",), gather=True), Input("totals", lane, ("*",), gather=True),
              Input("slot_seed", "uint", ("slot",), gather=True), Input("slot_node", "int", ("slot",), gather=True),
              Input("xlogx", "double", ("*",), gather=True)]
    if masked:
        inputs += [Input("slot_tree", "int", ("slot",), gather=True), Input("feat_mask", "uchar", ("*",), gather=True)]
        allowed = "#define FOREST_ALLOWED(f) (feat_mask[(long)slot_tree[slot] * FOREST_FEATURES + (f)] != 0)\n"
    else:
        allowed = "#define FOREST_ALLOWED(f) 1\n"
    return Description(
        "forest_node_split", ["slot"], [Concat()], NODE_SPLIT,
        scalar="""
__global const forest_fsplit_t* fs = (__global const forest_fsplit_t*)fsplit + (long)slot * FOREST_FEATURES;
lane_t t[FOREST_LANES];
for (int j = 0; j < FOREST_LANES; ++j) t[j] = totals[(long)slot * FOREST_LANES + j];
uint key[FOREST_FEATURES];
for (int f = 0; f < FOREST_FEATURES; ++f) key[f] = forest_key(slot_seed[slot], slot_node[slot], f);
/* f before g in the node's order: keys ascending, ties to the lower feature */
#define FOREST_BEFORE(f, g) (key[f] < key[g] || (key[f] == key[g] && (f) < (g)))
/* the features in the tree's order, non-constant in the node */
int n_allowed = 0, live[FOREST_FEATURES];
for (int f = 0; f < FOREST_FEATURES; ++f) {
    n_allowed += FOREST_ALLOWED(f);
    live[f] = FOREST_ALLOWED(f) && fs[f].nonconst;
}
/* each feature's rank in that order (capped at max_features), needed only when fewer than all features are drawn */
const int every = max_features >= n_allowed;
int rank[FOREST_FEATURES];
for (int f = 0; f < FOREST_FEATURES; ++f) {
    rank[f] = 0;
    if (!every && live[f])  /* only rank < max_features is asked: count up to it */
        for (int g = 0; g < FOREST_FEATURES && rank[f] < max_features; ++g)
            rank[f] += FOREST_ALLOWED(g) && FOREST_BEFORE(g, f);
}
/* is some non-constant feature among the first max_features of the order? else the first non-constant one */
int any_first = 0, first_f = -1;
for (int f = 0; f < FOREST_FEATURES; ++f) {
    if (!live[f]) continue;
    if (rank[f] < max_features) any_first = 1;
    if (first_f < 0 || FOREST_BEFORE(f, first_f)) first_f = f;
}
double best = -INFINITY;
int bf = -1;
for (int f = 0; f < FOREST_FEATURES; ++f) {
    if (!live[f] || fs[f].bin < 0) continue;
    if (any_first ? rank[f] >= max_features : f != first_f) continue;
    const double s = fs[f].score;
    if (bf < 0 || s > best || (s == best && FOREST_BEFORE(f, bf))) { best = s; bf = f; }
}
#undef FOREST_BEFORE
#undef FOREST_ALLOWED
out.feat = bf;
out.bin = bf >= 0 ? fs[bf].bin : -1;
out.left = bf >= 0 ? fs[bf].left : 0;
out.gain = bf >= 0 ? best - forest_side(t, xlogx) : 0.0;""",
        inputs=inputs,
        params=[Param("max_features", "int")],
        preamble=_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {CRITERIA[criterion]}\n"
        f"#define FOREST_FEATURES {int(n_features)}\n" + FEATURE_SPLIT.declaration("forest_fsplit_t") + "\n"
        + _MIX + _SCORE + allowed,
    )


def mix_reference(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def feature_keys(seed: np.ndarray, node: np.ndarray, n_features: int) -> np.ndarray:
    """(slot, feat) uint32 keys of :c:func:`forest_key`."""
    with np.errstate(over="ignore"):
        h = mix_reference(np.asarray(seed, np.uint32) + np.uint32(0x9E3779B9) * (np.asarray(node).astype(np.uint32)
                                                                               + np.uint32(1)))
        f = np.uint32(0x85EBCA6B) * (np.arange(n_features, dtype=np.uint32) + np.uint32(1))
        return mix_reference(h[:, None] ^ f[None, :])


def node_split_reference(fsplit: np.ndarray, totals: np.ndarray, slot_seed: np.ndarray, slot_node: np.ndarray,
                         max_features: int, outputs: tuple[int, ...], criterion: str,
                         xlogx: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """``allowed``: (slot, feat) bool, the features in each slot's tree (None: all)."""
    n_slots, n_feat = fsplit.shape
    out = np.zeros(n_slots, NODE_SPLIT.dtype)
    out["feat"], out["bin"] = -1, -1
    if not n_slots:
        return out
    if allowed is None:
        allowed = np.ones((n_slots, n_feat), bool)
    keys = feature_keys(slot_seed, slot_node, n_feat)
    # rank of each feature in its node's order among the allowed ones: keys ascending, ties to the lower feature
    order = np.lexsort((np.broadcast_to(np.arange(n_feat), keys.shape), keys), axis=1)
    in_order = np.take_along_axis(allowed, order, axis=1).astype(np.int64)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.cumsum(in_order, axis=1) - in_order, axis=1)
    nonconst = fsplit["nonconst"].astype(bool) & allowed
    any_first = (nonconst & (rank < max_features)).any(axis=1)
    first_rank = np.where(nonconst, rank, n_feat).min(axis=1)
    cand = np.where(any_first[:, None], rank < max_features, rank == first_rank[:, None]) & nonconst
    cand &= fsplit["bin"] >= 0
    score = np.where(cand, fsplit["score"], -np.inf)
    best = score.max(axis=1)
    # the best score, ties to the lowest rank
    tie_rank = np.where(cand & (score == best[:, None]), rank, n_feat)
    bf = np.argmin(tie_rank, axis=1)
    has = cand.any(axis=1)
    sl = np.arange(n_slots)
    parent = side_reference(totals, outputs, criterion, xlogx)
    out["feat"] = np.where(has, bf, -1)
    out["bin"] = np.where(has, fsplit["bin"][sl, bf], -1)
    out["left"] = np.where(has, fsplit["left"][sl, bf], 0)
    out["gain"] = np.where(has, best - parent, 0.0)
    return out


# ------------------------------------------------------------------------------------------------ routing
@lru_cache(maxsize=8)
def route(n_bins: int) -> Description:
    """Each (tree, row)'s slot at the next level: its node's left child slot (even) or the right one (odd) by
    the node's split, -1 for rows of leaves and out-of-bag rows. ``split_tab``: (feat, bin, left child slot)
    per slot of this level, child -1 for a leaf; ``bins`` feature-major (feat, row)."""
    return Description(
        "forest_route", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
const int s = row_slot[(long)tree * SIZE_row + row];
out = -1;
if (s >= 0) {
    const int c = split_tab[3 * s + 2];
    if (c >= 0) out = c + ((int)bins[(long)split_tab[3 * s] * SIZE_row + row] > split_tab[3 * s + 1]);
}""",
        inputs=[Input("row_slot", "int", ("*",), gather=True), Input("split_tab", "int", ("*",), gather=True),
                Input("bins", bin_ctype(n_bins), ("*",), gather=True)],
    )


def route_reference(row_slot: np.ndarray, split_tab: np.ndarray, bins: np.ndarray) -> np.ndarray:
    s = row_slot
    out = np.full(s.shape, -1, np.int32)
    live = s >= 0
    tab = split_tab.reshape(-1, 3)
    t, r = np.nonzero(live)
    ss = s[t, r]
    child = tab[ss, 2]
    go = child >= 0
    feat = tab[ss, 0]
    right = bins[r, np.maximum(feat, 0)].astype(np.int64) > tab[ss, 1]
    out[t[go], r[go]] = (child + right)[go]
    return out


@lru_cache(maxsize=1)
def left_scan() -> Description:
    """Per tree, the exclusive prefix sum over positions of "the row at this position goes to a left child"."""
    return Description(
        "forest_left_scan", ["tree", "pos"], [Concat(), Scan(SUM, inclusive=False)], "int",
        scalar="""
const long base = (long)tree * SIZE_pos;
const int s = new_slot[base + order[base + pos]];
out = s >= 0 && (s & 1) == 0;""",
        inputs=[Input("order", "int", ("*",), gather=True), Input("new_slot", "int", ("*",), gather=True)],
    )


def left_scan_reference(order: np.ndarray, new_slot: np.ndarray) -> np.ndarray:
    s = np.take_along_axis(new_slot, order.astype(np.int64), axis=1)
    flag = ((s >= 0) & (s % 2 == 0)).astype(np.int64)
    return (np.cumsum(flag, axis=1) - flag).astype(np.int32)


@lru_cache(maxsize=1)
def partition() -> Description:
    """The stable partition of every split node's positions, left rows first (each side in its old order, so
    rows stay ascending inside a node): the row at ``pos`` moves to its place, computed from the left scan. Rows
    of leaves and out-of-bag rows stay where they are."""
    return Description(
        "forest_partition", ["tree", "pos"], [Concat(), Concat()], "int",
        scalar="""
const long base = (long)tree * SIZE_pos;
const int r = order[base + pos];
out = r;
const int s = row_slot[base + r];
if (s >= 0 && split_tab[3 * s + 2] >= 0) {
    const long b = slot_begin[s];
    const int before = scan[base + pos] - scan[b];
    const int ns = new_slot[base + r];
    if ((ns & 1) == 0) out_at = b + before;
    else out_at = b + split_left[s] + (base + pos - b - before);
}""",
        inputs=[Input("order", "int", ("*",), gather=True), Input("row_slot", "int", ("*",), gather=True),
                Input("new_slot", "int", ("*",), gather=True), Input("scan", "int", ("*",), gather=True),
                Input("split_tab", "int", ("*",), gather=True), Input("slot_begin", "int", ("*",), gather=True),
                Input("split_left", "int", ("*",), gather=True)],
        scatter=True,
    )


def partition_reference(order: np.ndarray, new_slot: np.ndarray, split_tab: np.ndarray, slot_begin: np.ndarray,
                        slot_count: np.ndarray) -> np.ndarray:
    """The new position order (trees x n): each split slot's range stably partitioned by left / right child."""
    n_trees, n = order.shape
    out = order.copy().reshape(-1)
    split = np.flatnonzero(split_tab.reshape(-1, 3)[:, 2] >= 0)
    counts = np.asarray(slot_count, np.int64)[split]
    if not counts.sum():
        return out.reshape(n_trees, n)
    seg = np.repeat(np.arange(split.size), counts)
    pos = np.repeat(np.asarray(slot_begin, np.int64)[split] - np.concatenate([[0], np.cumsum(counts)[:-1]]),
                    counts) + np.arange(seg.size)
    rows = out[pos]
    right = new_slot.reshape(-1)[(pos // n) * n + rows] % 2
    out[pos] = rows[np.argsort(2 * seg + right, kind="stable")]
    return out.reshape(n_trees, n)


# ------------------------------------------------------------------------------------------------ the bag
@lru_cache(maxsize=1)
def bag_scan() -> Description:
    """Per tree, the exclusive prefix count over rows of the in-bag ones (weight > 0): an in-bag row's position."""
    return Description(
        "forest_bag_scan", ["tree", "row"], [Concat(), Scan(SUM, inclusive=False)], "int",
        scalar="out = weight[(long)tree * SIZE_row + row] > 0;",
        inputs=[Input("weight", "int", ("*",), gather=True)],
    )


@lru_cache(maxsize=1)
def bag_order() -> Description:
    """The root's position order of every tree (:func:`mdhom.forests.grower.bag_order`): its in-bag rows
    ascending, then its out-of-bag rows ascending; each row lands at its place from :func:`bag_scan`."""
    return Description(
        "forest_bag_order", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
const long base = (long)tree * SIZE_row;
const int before = scan[base + row];
const int bagged = scan[base + SIZE_row - 1] + (weight[base + SIZE_row - 1] > 0);
out = row;
out_at = base + (weight[base + row] > 0 ? before : bagged + (row - before));""",
        inputs=[Input("weight", "int", ("*",), gather=True), Input("scan", "int", ("*",), gather=True)],
        scatter=True,
    )


@lru_cache(maxsize=1)
def bag_slots() -> Description:
    """Every (tree, row)'s slot at the root level: the tree's root (slot ``tree``) when in the bag, else -1."""
    return Description(
        "forest_bag_slots", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="out = weight[(long)tree * SIZE_row + row] > 0 ? (int)tree : -1;",
        inputs=[Input("weight", "int", ("*",), gather=True)],
    )


def bag_slots_reference(weight: np.ndarray) -> np.ndarray:
    return np.where(weight > 0, np.arange(weight.shape[0], dtype=np.int32)[:, None], np.int32(-1))


# ------------------------------------------------------------------------------------------------ heuristics
def histogram_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """CPUs: a work-group per (slot chunk, feature), a slot's rows folded in one lane (no combine kernel).
    GPUs: a slot's histogram in local memory (``PARTIALS_LOCAL``: integer atomics), 128 work-items over its rows,
    a few work-groups per slot."""
    cfg = ones(desc, dev, sizes)
    cfg["NUM_WG_feat"] = max(1, int(sizes.get("feat", 1)))
    if dev.type == "gpu":
        cfg["NUM_WG_slot"] = pow2_at_most(int(sizes.get("slot", 1)), 256)
        if cfg.get("PARTIALS_LOCAL"):
            cfg["NUM_WI_pos"], cfg["NUM_WG_pos"] = 128, 2
    else:
        cfg["NUM_WG_slot"] = pow2_at_most(max(1, 4 * dev.compute_units), 64)
        cfg["PARTIALS_LOCAL"] = 0
    return cfg


def _per_slot(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Concatenation kernels over slots (x features): the first dimension in groups of 64 (GPU) or 8 (CPU)."""
    cfg = ones(desc, dev, sizes)
    d = desc.dim_names[0]
    gpu = dev.type == "gpu"
    cfg[f"NUM_WI_{d}"] = 64 if gpu else 8
    cfg[f"NUM_WG_{d}"] = max(1, dev.compute_units) * (16 if gpu else 4)
    if "NUM_WI_COMBINE" in cfg:
        cfg["NUM_WI_COMBINE"] = 64 if gpu else 8
    return cfg


def _rows(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """(tree, row | pos) kernels: work-items along the rows, work-groups over trees and row chunks."""
    cfg = ones(desc, dev, sizes)
    d = desc.dim_names[1]
    gpu = dev.type == "gpu"
    cfg[f"NUM_WI_{d}"] = 256 if gpu else 64
    cfg[f"NUM_WG_{d}"] = max(1, dev.compute_units) * (4 if gpu else 1)
    cfg["NUM_WG_tree"] = pow2_at_most(int(sizes.get("tree", 1)), 64 if gpu else 4)
    return cfg


def _scan(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    cfg = desc.default_config(dev, sizes)
    cfg["NUM_WG_tree"] = pow2_at_most(int(sizes.get("tree", 1)), 64)
    return cfg


def _hist_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    """A level of ``slot`` nodes spread over ``trees`` bootstrapped trees of ``rows`` rows, binary classes."""
    n, f, t, b = int(s["rows"]), int(s["feat"]), int(s["trees"]), int(s.get("n_bins", 64))
    per = max(1, int(s["slot"]) // t)
    weight = rng.poisson(1.0, (t, n)).astype(np.int32)
    order = np.argsort(weight == 0, axis=1, kind="stable").astype(np.int32)
    cnt = (weight > 0).sum(1)
    begin = np.concatenate([k * n + (np.arange(per) * cnt[k]) // per for k in range(t)]).astype(np.int32)
    count = np.concatenate([np.diff(np.append((np.arange(per) * cnt[k]) // per, cnt[k])) for k in range(t)])
    return {"bins": rng.integers(0, b, (f, n)).astype(np.uint8).reshape(-1),
            "stat": np.eye(2, dtype=np.int32)[rng.integers(0, 2, n)].reshape(-1), "weight": weight.reshape(-1),
            "order": order.reshape(-1), "slot_begin": begin, "slot_count": count.astype(np.int32),
            "slot_tree": np.repeat(np.arange(t), per).astype(np.int32), "n_rows": np.int32(n)}


def _hist_ref(a: Mapping[str, np.ndarray], n_bins: int = 64) -> np.ndarray:
    n = int(a["n_rows"])
    bins = a["bins"].reshape(-1, n).T
    h = histogram_reference(bins, a["stat"].reshape(n, -1), a["weight"].reshape(-1, n), a["order"].reshape(-1, n),
                            a["slot_begin"], a["slot_count"], a["slot_tree"], n_bins)
    return h.reshape(h.shape[0], h.shape[1], -1).astype(np.int32)


# a forest's root level (every tree's in-bag rows) and a deep level (many small nodes), 28 features, 64 bins
_HIST_CLASSES = {
    "roots_64x1e5": {"slot": 64, "feat": 28, "pos": 64500, "rows": 10**5, "trees": 64, "n_bins": 64},
    "level_4096x1e5": {"slot": 4096, "feat": 28, "pos": 1100, "rows": 10**5, "trees": 64, "n_bins": 64},
}
def _cells(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_cell"] = 256 if gpu else 64
    cfg["NUM_WG_cell"] = max(1, dev.compute_units) * (4 if gpu else 1)
    cfg["NUM_WG_slot"] = pow2_at_most(int(sizes.get("slot", 1)), 64 if gpu else 4)
    return cfg


# ------------------------------------------------------------------------------------------------ prediction
@lru_cache(maxsize=1)
def leaves() -> Description:
    """The leaf each row reaches in each tree (NaN goes right, as in training), tree-major: neighbouring work-items
    walk one tree for neighbouring rows, so a tree's nodes stay in cache while its rows pass (a walk of every
    tree per row cycles the whole forest through the cache once per row)."""
    return Description(
        "forest_leaves", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
__global const forest_node_t* nodes = (__global const forest_node_t*)forest;
int node = root[tree];
while (nodes[node].left >= 0) {
    __global const forest_node_t* t = nodes + node;
    node = X[(long)row * n_feat + t->feature] <= t->threshold ? t->left : t->right;
}
out = node;""",
        inputs=[Input("X", "double", ("*",), gather=True), Input("forest", "int", ("*",), gather=True),
                Input("root", "int", ("tree",), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=FOREST_NODE.declaration("forest_node_t") + "\n",
    )


# most leaf values (classes of every output, or regression outputs) a leaf sum carries in private memory; more go
# through the boosting trees' per-output walk (mdhom.components.predictor.ForestPredictor)
MAX_WALK_VALUES = 32


@lru_cache(maxsize=8)
def leaf_sums(n_values: int) -> Description:
    """Per row, the sum over trees of the ``n_values`` values of its leaf in each (:func:`leaves`). Exact pins keep
    the sum in tree order from zero, the numpy walk's order (:meth:`mdhom.forests.model.Forest.tree_sums`), so
    both give the same bits."""
    n = int(n_values)
    return Description(
        "forest_leaf_sums", ["row", "tree"], [Concat(), Reduce(SUM)], Array(Scalar("double"), n),
        scalar=f"""
const long node = leaf[(long)tree * SIZE_row + row];
for (int k = 0; k < {n}; ++k) out.v[k] = value[node * {n} + k];""",
        accumulate=f"""
const long node = leaf[(long)tree * SIZE_row + row];
for (int k = 0; k < {n}; ++k) acc.v[k] += value[node * {n} + k];""",
        inputs=[Input("leaf", "int", ("*",), gather=True), Input("value", "double", ("*",), gather=True)],
    )


def _rows_of_trees(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Element-wise over rows on GPUs. On CPUs one work-item per group: a walk's length differs from row to row,
    and runtimes that vectorise across work-items run every lane to the longest (PoCL, 200k rows x 50 trees of
    depth 10: forest_leaves 0.42 s at one work-item per group against 0.85 s at 64)."""
    cfg = elementwise("row")(desc, dev, sizes)
    if dev.type != "gpu":
        cfg["NUM_WI_row"] = 1
        cfg["NUM_WG_row"] = max(1, dev.compute_units) * 64
    return cfg


SIBLINGS = KernelSpec("forest_hist_siblings", _cells)
HISTOGRAM = KernelSpec("forest_histogram", histogram_heuristic, tuning=Tuning(
    lambda s: histogram(int(s.get("n_bins", 64)), "int", (2,)), _HIST_CLASSES, _hist_inputs, _hist_ref,
    doc="bootstrap-weighted class-count histograms of every node of a forest level (ragged rows per node)"))
NODE_TOTALS = KernelSpec("forest_node_totals", _per_slot)
FEATURE_SPLIT_SPEC = KernelSpec("forest_feature_split", _per_slot)
NODE_SPLIT_SPEC = KernelSpec("forest_node_split", _per_slot)
ROUTE = KernelSpec("forest_route", _rows)
LEFT_SCAN = KernelSpec("forest_left_scan", _scan)
PARTITION = KernelSpec("forest_partition", _rows)
BAG_SCAN = KernelSpec("forest_bag_scan", _scan)
BAG_ORDER = KernelSpec("forest_bag_order", _rows)
BAG_SLOTS = KernelSpec("forest_bag_slots", _rows)
# read whole lookup buffers (the node table, X by feature): not tunable until the generator has any-extent inputs
LEAVES = KernelSpec("forest_leaves", _rows_of_trees)
LEAF_SUMS = KernelSpec("forest_leaf_sums", _rows_of_trees, exact_pins={"NUM_WI_tree": 1, "NUM_WG_tree": 1})
SPECS = (HISTOGRAM, SIBLINGS, NODE_TOTALS, FEATURE_SPLIT_SPEC, NODE_SPLIT_SPEC, ROUTE, LEFT_SCAN, PARTITION, BAG_SCAN,
         BAG_ORDER, BAG_SLOTS, LEAVES, LEAF_SUMS)
