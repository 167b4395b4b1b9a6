"""The forest level's split search: ``forest_node_totals`` (a node's lane sums), ``forest_feature_split`` (the
best cut of each node's feature histograms) and ``forest_node_split`` (scikit-learn's choice among a node's
features in a random order), with the split records, the criteria's scores and their numpy references.

The scores (:data:`SIDE_SCORE`), the bin scan (:data:`SCAN_BINS`) and the feature order (:data:`FEATURE_KEY`)
are OpenCL snippets the sampled level (:mod:`mdhom.forests.sampled`) builds on too, so both levels choose the same
splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.forests import tuning_inputs as TI
from mdhom.forests.layout import lane_layout
from mdhom.mdh import SUM, Concat, Description, Input, Param, Reduce, Struct

CRITERIA = {"gini": 0, "entropy": 1, "squared_error": 2}
FEATURE_SPLIT = Struct("forest_fsplit_t", (("score", "double"), ("bin", "int"), ("nonconst", "int"),
                                           ("left", "int"), ("pad", "int")))
NODE_SPLIT = Struct("forest_nsplit_t", (("gain", "double"), ("feat", "int"), ("bin", "int"), ("left", "int"),
                                        ("pad", "int")))
FEATURE_KEY = """
inline uint forest_mix(uint x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}
/* the random rank key of feature f at a node: a permutation of the features per (tree seed, node) */
inline uint forest_key(uint seed, int node, int f) {
    return forest_mix(forest_mix(seed + 0x9e3779b9u * (uint)(node + 1)) ^ (0x85ebca6bu * (uint)(f + 1)));
}
"""


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
SIDE_SCORE = """
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
        preamble=lane_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {CRITERIA[criterion]}\n" + SIDE_SCORE
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

    ``masked`` (per-tree features, :class:`mdhom.forests.histogram.PerTree`): the features
    ``feat_mask[tree, f] == 0`` are not in the tree's order at all, as if its feature matrix lacked them (a
    chain's forest sees only the earlier labels)."""
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
        preamble=lane_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {CRITERIA[criterion]}\n"
        f"#define FOREST_FEATURES {int(n_features)}\n" + FEATURE_SPLIT.declaration("forest_fsplit_t") + "\n"
        + FEATURE_KEY + SIDE_SCORE + allowed,
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


# ------------------------------------------------------------------------------------------------ heuristics
def per_slot(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Concatenation kernels over slots (x features): the first dimension in groups of 64 (GPU) or 8 (CPU)."""
    cfg = ones(desc, dev, sizes)
    d = desc.dim_names[0]
    gpu = dev.type == "gpu"
    cfg[f"NUM_WI_{d}"] = 64 if gpu else 8
    cfg[f"NUM_WG_{d}"] = max(1, dev.compute_units) * (16 if gpu else 4)
    if "NUM_WI_COMBINE" in cfg:
        cfg["NUM_WI_COMBINE"] = 64 if gpu else 8
    return cfg


def per_slot_feature(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Each (slot, feature) scan of bins on its own work-item on GPUs: a slot's features across up to 32 work-items
    of a group of 64, the groups covering every pair; CPUs as :func:`per_slot` (their groups' work-items loop over a
    slot's features). :func:`per_slot` gave a GPU's work-item a slot's every feature: a forest's 64 roots ran on 64
    work-items (H100, 28 features, 256 bins: 3.9 ms at the roots and 4.7 ms at a level of 1024 nodes, where tunes
    found 0.08 and 0.23 ms spreading the features as here; this heuristic, its grid sized then by the tuner's classes,
    0.146 and 0.248 ms)."""
    cfg = per_slot(desc, dev, sizes)
    if dev.type != "gpu":
        return cfg
    slot, feat = desc.dim_names[:2]
    n_slot, n_feat = max(1, int(sizes.get(slot, 1))), max(1, int(sizes.get(feat, 1)))
    wi_feat = pow2_at_most(n_feat, 32)
    wi_slot = max(1, 64 // wi_feat)
    cfg[f"NUM_WI_{feat}"], cfg[f"NUM_WG_{feat}"] = wi_feat, -(-n_feat // wi_feat)
    cfg[f"NUM_WI_{slot}"] = wi_slot
    # the grid does not follow the slots it is built for: a fit builds it for a level of one node a tree and launches
    # it at every level's width (thousands of nodes deep down), where a grid sized for the build's few slots would
    # leave each work-item dozens of scans on a few compute units
    cfg[f"NUM_WG_{slot}"] = max(-(-n_slot // wi_slot), max(1, dev.compute_units) * 8)
    return cfg


# the dense level's split search (tuned at a forest's roots and a deeper level: mdhom.forests.tuning_inputs)
NODE_TOTALS = KernelSpec("forest_node_totals", per_slot, tuning=Tuning(
    lambda s: node_totals("int"), TI.dense_classes(totals=True), TI.node_totals_inputs, TI.node_totals_ref,
    doc="a node's class counts, weight and rows: its first feature's histogram summed over bins (dense level)"))
FEATURE_SPLIT_SPEC = KernelSpec("forest_feature_split", per_slot_feature, tuning=Tuning(
    lambda s: feature_split("int", TI.OUTPUTS, TI.CRITERION), TI.dense_classes(feat=True), TI.feature_split_inputs,
    TI.feature_split_ref, doc="the best cut of every (node, feature) histogram (dense level)"))
NODE_SPLIT_SPEC = KernelSpec("forest_node_split", per_slot, tuning=Tuning(
    lambda s: node_split("int", TI.OUTPUTS, TI.CRITERION, TI.N_FEAT), TI.dense_classes(), TI.node_split_inputs,
    TI.node_split_ref, doc="each node's split among its features in a random order, as scikit-learn's splitter"))
SPECS = (NODE_TOTALS, FEATURE_SPLIT_SPEC, NODE_SPLIT_SPEC)
