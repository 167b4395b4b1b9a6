"""The sampled level: histograms of only the features a node draws, not of every feature.

A random forest's node evaluates ``max_features`` of its F features (scikit-learn's best splitter:
:func:`mdhom.forests.split.node_split`). The dense level builds every feature's histogram and then keeps the
drawn ones; on small, deep nodes (classifier chains: a few hundred rows, a hundred features and labels, thousands
of trees) that is F / max_features times the histogram memory, zeroing and split scans the model needs, and the
cost per node no longer follows its rows. Here the node's draw comes first, and only it is binned:

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
forest_candidates      slot                 concat: the node's live drawn features, in the draw's order
forest_histogram       slot x cand x pos    as the dense one, ``feat`` read through the candidate table
forest_node_totals     slot x lane x bin    as the dense one, over candidate 0 (always folded)
forest_feature_split   slot x cand          as the dense one
forest_cand_split      slot                 concat: the best candidate (ties to the earlier drawn)
=====================  ===================  ==============================================================

``forest_candidates`` walks the node's feature order (the same hash keys as the dense node split) and tests each
drawn feature for being constant in the node straight on its rows (a row scan that stops at the first differing
bin: short on any feature that is not constant). Its table row is ``[live, f_0, f_1, ..]``: the non-constant
features among the first ``max_features`` of the order, or, when all of those are constant, the first
non-constant feature after them (one), or none. ``f_0`` is always set (the first feature of the order when none
is live), so candidate 0's histogram gives the node's totals. The split chosen is the dense node split's, bit for
bit: the same candidates, scores and tie order (:func:`node_split_reference` is the reference of the pair).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import bin_ctype
from mdhom.components.specs import KernelSpec, Tuning, pow2_at_most
from mdhom.devices import Device
from mdhom.forests import histogram as H
from mdhom.forests import split as S
from mdhom.forests import tuning_inputs as TI
from mdhom.forests.layout import lane_layout
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Scalar

MAX_CANDIDATES = 64  # beyond this many drawn features the dense level serves (the draw is most of F anyway)
# nodes of at most this many rows find their cuts straight from their rows (sorted by bin in private memory), not
# from histograms: a histogram costs n_bins x lanes per feature whatever the rows, a row scan rows^2 / 4 compares
SMALL_ROWS = 64


def cand_width(max_features: int) -> int:
    """Ints per slot in the candidate table: the live count and room for ``max_features`` features, rounded up to
    a power of two (>= 8) so that one build serves every chain position's ``max_features``."""
    w = 8
    while w < max_features + 1:
        w *= 2
    return w


def use_sampled(max_features: int, n_features: int) -> bool:
    """Whether the sampled level pays: the draw is at most half the features (and within the table's bound)."""
    return max_features <= MAX_CANDIDATES and 2 * max_features <= n_features


_NONCONST = """
/* whether a feature takes more than one bin on a node's rows: a scan that stops at the first other bin. A feature
 * constant on a node is read to its last row by one work-item; 16 independent loads per test keep that many reads
 * in flight instead of one (H100, 500 trees on 1M rows: a scan a row at a time was 4.0 of a fit's 6.3 s of
 * kernels, its three-valued features constant on many large nodes) */
inline int forest_nonconst(__global const FOREST_BIN_T* col, __global const int* ord, const int cnt) {
    if (cnt < 2) return 0;
    const FOREST_BIN_T b0 = col[ord[0]];
    int i = 1;
    for (; i + 16 <= cnt; i += 16) {
        int d = 0;
        for (int u = 0; u < 16; ++u) d |= col[ord[i + u]] != b0;
        if (d) return 1;
    }
    for (; i < cnt; ++i)
        if (col[ord[i]] != b0) return 1;
    return 0;
}
"""


def _allowed(masked: bool, n_features: int) -> str:
    if masked:
        return f"#define FOREST_ALLOWED(f) (feat_mask[(long)slot_tree[slot] * {n_features} + (f)] != 0)\n"
    return "#define FOREST_ALLOWED(f) 1\n"


@lru_cache(maxsize=16)
def candidates(n_bins: int, n_features: int, width: int, masked: bool = False) -> Description:
    """Each slot's candidate table row (module docstring). ``bins`` are feature-major (feat, row) and ``order``
    the level's position order; ``masked``: the features ``feat_mask[tree, f] == 0`` are not in the tree's order
    (a classifier chain's later labels)."""
    inputs = [Input("bins", bin_ctype(n_bins), ("*",), gather=True), Input("order", "int", ("*",), gather=True),
              Input("slot_begin", "int", ("slot",), gather=True), Input("slot_count", "int", ("slot",), gather=True),
              Input("slot_seed", "uint", ("slot",), gather=True), Input("slot_node", "int", ("slot",), gather=True)]
    if masked:
        inputs += [Input("slot_tree", "int", ("slot",), gather=True), Input("feat_mask", "uchar", ("*",), gather=True)]
    return Description(
        "forest_candidates", ["slot"], [Concat()], Array(Scalar("int"), int(width)),
        scalar="""
/* the first max_features allowed features of the node's order (keys ascending, ties to the lower feature), in one
 * pass kept sorted: features come in ascending order, so an equal key never displaces an earlier one */
const uint h = forest_mix(slot_seed[slot] + 0x9e3779b9u * (uint)(slot_node[slot] + 1));  /* forest_key's node part */
uint dk[FOREST_WIDTH];
int df[FOREST_WIDTH];
const int m = min(max_features, FOREST_WIDTH - 1);
int nd = 0;
for (int f = 0; f < FOREST_FEATURES; ++f) {
    if (!FOREST_ALLOWED(f)) continue;
    const uint k = forest_mix(h ^ (0x85ebca6bu * (uint)(f + 1)));
    if (nd == m && k >= dk[m - 1]) continue;
    int j = nd < m ? nd++ : m - 1;
    while (j > 0 && dk[j - 1] > k) { dk[j] = dk[j - 1]; df[j] = df[j - 1]; --j; }
    dk[j] = k; df[j] = f;
}
const long b = slot_begin[slot];
const int cnt = slot_count[slot];
for (int i = 0; i < FOREST_WIDTH; ++i) out.v[i] = 0;  /* the whole row defined: unused entries zero */
int live = 0;
for (int i = 0; i < nd; ++i)
    if (forest_nonconst(bins + (long)df[i] * n_rows, order + b, cnt)) { out.v[1 + live] = df[i]; live += 1; }
if (live == 0 && nd == m && nd > 0) {
    /* every drawn feature is constant: the first non-constant one after them (rare: a walk of the order) */
    uint lk = dk[nd - 1];
    int lf = df[nd - 1];
    for (;;) {
        int nf = -1;
        uint nk = 0;
        for (int f = 0; f < FOREST_FEATURES; ++f) {
            if (!FOREST_ALLOWED(f)) continue;
            const uint k = forest_key(slot_seed[slot], slot_node[slot], f);
            if (k < lk || (k == lk && f <= lf)) continue;
            if (nf < 0 || k < nk) { nf = f; nk = k; }
        }
        if (nf < 0) break;
        lk = nk; lf = nf;
        if (forest_nonconst(bins + (long)nf * n_rows, order + b, cnt)) { out.v[1] = nf; live = 1; break; }
    }
}
out.v[0] = live;
if (live == 0) out.v[1] = nd > 0 ? df[0] : 0;""",
        inputs=inputs,
        params=[Param("n_rows", "int"), Param("max_features", "int")],
        preamble=f"#define FOREST_FEATURES {int(n_features)}\n#define FOREST_WIDTH {int(width)}\n"
        f"typedef {bin_ctype(n_bins)} FOREST_BIN_T;\n" + S.FEATURE_KEY + _NONCONST + _allowed(masked, n_features),
    )


def candidates_reference(bins: np.ndarray, order: np.ndarray, slot_begin: np.ndarray, slot_count: np.ndarray,
                         slot_seed: np.ndarray, slot_node: np.ndarray, max_features: int, width: int,
                         allowed: np.ndarray | None = None) -> np.ndarray:
    """(slot, width) int32 candidate table rows; ``bins`` (rows, feat), ``order`` flat, ``allowed`` (slot, feat)."""
    n_slots, n_feat = len(slot_begin), bins.shape[1]
    out = np.zeros((n_slots, width), np.int32)
    if not n_slots:
        return out
    keys = S.feature_keys(slot_seed, slot_node, n_feat)
    flat = order.reshape(-1)
    for s in range(n_slots):
        feats = np.lexsort((np.arange(n_feat), keys[s]))
        if allowed is not None:
            feats = feats[allowed[s][feats]]
        rows = flat[int(slot_begin[s]):int(slot_begin[s]) + int(slot_count[s])]
        nonconst = [bool(rows.size > 1 and np.any(bins[rows, f] != bins[rows[0], f])) for f in feats]
        live = [f for f, c in zip(feats[:max_features], nonconst[:max_features], strict=True) if c]
        if not live:
            live = [f for f, c in zip(feats[max_features:], nonconst[max_features:], strict=True) if c][:1]
        out[s, 0] = len(live)
        out[s, 1:1 + len(live)] = live
        if not live and feats.size:
            out[s, 1] = feats[0]
    return out


_STAT_AT = {False: "(long)r * FOREST_STATS", True: "(long)r * stat_stride + tree_col[slot_tree[slot]]"}


def _stat_io(per_tree: bool) -> tuple[list[Input], list[Param]]:
    """The statistics' inputs: a row's own lanes, or (per-tree targets) its tree's column of a wider row."""
    if per_tree:
        return [Input("tree_col", "int", ("*",), gather=True)], [Param("stat_stride", "int")]
    return [], []


@lru_cache(maxsize=16)
def slot_totals(lane: str, outputs: tuple[int, ...], per_tree: bool = False) -> Description:
    """A slot's lane sums over its rows (ragged, as the histogram's fold): what the host decides leaves with and
    the split's parent score, without a histogram to sum (the sampled level builds none for small nodes)."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    stat_in, stat_params = _stat_io(per_tree)
    return Description(
        "forest_slot_totals", ["slot", "lane", "pos"], [Concat(), Concat(), Reduce(SUM)], lane,
        scalar=f"""
const int r = order[(long)slot_begin[slot] + pos];
const lane_t w = (lane_t)weight[(long)slot_tree[slot] * n_rows + r];
out = lane < FOREST_STATS ? w * stat[{_STAT_AT[per_tree]} + lane] : (lane == FOREST_W ? w : (lane_t)1);""",
        inputs=[Input("stat", lane, ("*",), gather=True), Input("weight", "int", ("*",), gather=True),
                Input("order", "int", ("*",), gather=True), Input("slot_begin", "int", ("slot",), gather=True),
                Input("slot_count", "int", ("slot",), gather=True), Input("slot_tree", "int", ("slot",), gather=True),
                *stat_in],
        params=[Param("n_rows", "int"), *stat_params],
        preamble=lane_layout(lane, n_stats, outputs),
        extents={"pos": "slot_count[slot]"},
    )



def slot_totals_reference(stat: np.ndarray, weight: np.ndarray, order: np.ndarray, slot_begin: np.ndarray,
                          slot_count: np.ndarray, slot_tree: np.ndarray,
                          per_tree: H.PerTree | None = None) -> np.ndarray:
    """(slot, lanes) int64: :func:`slot_totals`' sums straight from the rows (statistic lanes times the weight,
    the weight, one per row), without a histogram: exact integers, so any order gives the kernel's result."""
    n = weight.shape[1]
    k = stat.shape[1] if per_tree is None else per_tree.n_stats
    count = np.asarray(slot_count, np.int64)
    slot_of = np.repeat(np.arange(count.size), count)
    out = np.zeros((count.size, k + 2), np.int64)
    if not slot_of.size:
        return out
    start = np.repeat(np.asarray(slot_begin, np.int64) - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    rows = order.reshape(-1)[start + np.arange(slot_of.size)].astype(np.int64)
    tree = np.asarray(slot_tree, np.int64)[slot_of]
    w = weight.reshape(-1)[tree * n + rows].astype(np.int64)
    col = np.zeros_like(tree) if per_tree is None else per_tree.column[tree].astype(np.int64)
    for j in range(k):
        out[:, j] = H.exact_bincount(slot_of, w * stat[rows, col + j].astype(np.int64), count.size)
    out[:, k] = H.exact_bincount(slot_of, w, count.size)
    out[:, k + 1] = count
    return out


_SCAN_ROWS = """
/* the best cut of one feature over a small node's rows (cnt <= FOREST_SMALL): the rows sorted by bin (stable), then
 * the cut after each bin's last row, scored as forest_scan_bins scores its non-empty bins: the same integer lane
 * sums, the same cuts, the same record */
inline forest_fsplit_t forest_scan_rows(__global const FOREST_BIN_T* col, __global const int* ord, const int cnt,
                                        __global const int* w_row, __global const lane_t* stat, const int stride,
                                        const int col0, const int n_bins, const int min_leaf,
                                        __global const double* xlogx) {
    int rb[FOREST_SMALL], rr[FOREST_SMALL];
    for (int i = 0; i < cnt; ++i) {
        const int r = ord[i];
        const int v = (int)col[r];
        int j = i;
        while (j > 0 && rb[j - 1] > v) { rb[j] = rb[j - 1]; rr[j] = rr[j - 1]; --j; }
        rb[j] = v; rr[j] = r;
    }
    lane_t tot[FOREST_LANES], left[FOREST_LANES], right[FOREST_LANES];
    for (int j = 0; j < FOREST_LANES; ++j) { tot[j] = 0; left[j] = 0; }
    int filled = 0;
    for (int i = 0; i < cnt; ++i) {
        const lane_t w = (lane_t)w_row[rr[i]];
        for (int j = 0; j < FOREST_STATS; ++j) tot[j] += w * stat[(long)rr[i] * stride + col0 + j];
        tot[FOREST_W] += w;
        tot[FOREST_D] += 1;
        filled += i == 0 || rb[i] != rb[i - 1];
    }
    double best = -INFINITY;
    int best_bin = -1, best_left = 0;
    for (int i = 0; i < cnt; ++i) {
        const lane_t w = (lane_t)w_row[rr[i]];
        for (int j = 0; j < FOREST_STATS; ++j) left[j] += w * stat[(long)rr[i] * stride + col0 + j];
        left[FOREST_W] += w;
        left[FOREST_D] += 1;
        if ((i + 1 < cnt && rb[i + 1] == rb[i]) || rb[i] + 1 >= n_bins) continue;
        for (int j = 0; j < FOREST_LANES; ++j) right[j] = tot[j] - left[j];
        if (left[FOREST_D] < min_leaf || right[FOREST_D] < min_leaf) continue;
        const double s = forest_side(left, xlogx) + forest_side(right, xlogx);
        if (s > best) { best = s; best_bin = rb[i]; best_left = (int)left[FOREST_D]; }
    }
    forest_fsplit_t out;
    out.score = best; out.bin = best_bin; out.nonconst = filled > 1; out.left = best_left; out.pad = 0;
    return out;
}
"""


@lru_cache(maxsize=32)
def sampled_split(n_bins: int, lane: str, outputs: tuple[int, ...], criterion: str, width: int,
                  per_tree: bool = False, small: int = SMALL_ROWS) -> Description:
    """The best cut of each (slot, candidate): from the candidate histograms where the slot has them
    (``hist_index[slot] >= 0``: its row in ``hist``), else straight from the slot's rows (at most ``small``).
    Candidates past the live ones get the empty record, as a zero histogram gives."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    stat_in, stat_params = _stat_io(per_tree)
    col0 = "tree_col[slot_tree[slot]]" if per_tree else "0"
    stride = "stat_stride" if per_tree else "FOREST_STATS"
    return Description(
        "forest_sampled_split", ["slot", "feat"], [Concat(), Concat()], S.FEATURE_SPLIT,
        scalar=f"""
const int live = cand[(long)slot * {int(width)}];
out.score = -INFINITY;
out.bin = -1;
if (feat < max(live, 1)) {{
    const int hi = hist_index[slot];
    const int f = cand[(long)slot * {int(width)} + 1 + feat];
    forest_fsplit_t r;
    if (hi >= 0)
        r = forest_scan_bins(hist + ((long)hi * SIZE_feat + feat) * n_bins * FOREST_LANES, n_bins, min_leaf, xlogx);
    else
        r = forest_scan_rows(bins + (long)f * n_rows, order + slot_begin[slot], slot_count[slot],
                             weight + (long)slot_tree[slot] * n_rows, stat, {stride}, {col0}, n_bins, min_leaf, xlogx);
    FOREST_SET_FSPLIT(out, r);
}}""",
        inputs=[Input("hist", lane, ("*",), gather=True), Input("hist_index", "int", ("slot",), gather=True),
                Input("cand", "int", ("*",), gather=True), Input("bins", bin_ctype(n_bins), ("*",), gather=True),
                Input("stat", lane, ("*",), gather=True), Input("weight", "int", ("*",), gather=True),
                Input("order", "int", ("*",), gather=True), Input("slot_begin", "int", ("slot",), gather=True),
                Input("slot_count", "int", ("slot",), gather=True), Input("slot_tree", "int", ("slot",), gather=True),
                Input("xlogx", "double", ("*",), gather=True), *stat_in],
        params=[Param("n_bins", "int"), Param("min_leaf", "int"), Param("n_rows", "int"), *stat_params],
        preamble=lane_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {S.CRITERIA[criterion]}\n"
        f"#define FOREST_SMALL {int(small)}\ntypedef {bin_ctype(n_bins)} FOREST_BIN_T;\n" + S.SIDE_SCORE
        + S.FEATURE_SPLIT.declaration("forest_fsplit_t") + "\n" + S.SCAN_BINS + _SCAN_ROWS,
    )


def sampled_split_reference(bins: np.ndarray, stat: np.ndarray, weight: np.ndarray, order: np.ndarray,
                            slot_begin: np.ndarray, slot_count: np.ndarray, slot_tree: np.ndarray, cand: np.ndarray,
                            n_cand: int, n_bins: int, outputs: tuple[int, ...], criterion: str, min_leaf: int,
                            xlogx: np.ndarray, per_tree: H.PerTree | None = None) -> np.ndarray:
    """(slot, n_cand) FEATURE_SPLIT records: the feature split of each live candidate's histogram (the kernel's
    row scans give the same records, its histograms are these), the empty record past them."""
    dense = H.histogram_reference(bins, stat, weight, order, slot_begin, slot_count, slot_tree, n_bins, per_tree)
    sl = np.arange(len(slot_begin))[:, None]
    folded = np.arange(n_cand)[None, :] < np.maximum(cand[:, :1], 1)
    hist = np.where(folded[:, :, None, None], dense[sl, cand[:, 1:1 + n_cand]], 0)
    return S.feature_split_reference(hist, outputs, criterion, min_leaf, xlogx)


@lru_cache(maxsize=32)
def cand_split(lane: str, outputs: tuple[int, ...], criterion: str, width: int) -> Description:
    """The split of each slot among its live candidates (``fsplit``: (slot, n_cand) feature-split records of the
    candidate histograms): the best score, ties to the earlier drawn, as the dense node split chooses."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    return Description(
        "forest_cand_split", ["slot"], [Concat()], S.NODE_SPLIT,
        scalar=f"""
__global const forest_fsplit_t* fs = (__global const forest_fsplit_t*)fsplit + (long)slot * n_cand;
__global const int* c = cand + (long)slot * {int(width)};
lane_t t[FOREST_LANES];
for (int j = 0; j < FOREST_LANES; ++j) t[j] = totals[(long)slot * FOREST_LANES + j];
double best = -INFINITY;
int bj = -1;
for (int j = 0; j < c[0]; ++j) {{
    if (fs[j].bin < 0) continue;
    if (bj < 0 || fs[j].score > best) {{ best = fs[j].score; bj = j; }}
}}
out.feat = bj >= 0 ? c[1 + bj] : -1;
out.bin = bj >= 0 ? fs[bj].bin : -1;
out.left = bj >= 0 ? fs[bj].left : 0;
out.gain = bj >= 0 ? best - forest_side(t, xlogx) : 0.0;""",
        inputs=[Input("fsplit", "int", ("*",), gather=True), Input("totals", lane, ("*",), gather=True),
                Input("cand", "int", ("*",), gather=True), Input("xlogx", "double", ("*",), gather=True)],
        params=[Param("n_cand", "int")],
        preamble=lane_layout(lane, n_stats, outputs) + f"#define FOREST_CRITERION {S.CRITERIA[criterion]}\n"
        + S.FEATURE_SPLIT.declaration("forest_fsplit_t") + "\n" + S.SIDE_SCORE,
    )


def cand_split_reference(fsplit: np.ndarray, totals: np.ndarray, cand: np.ndarray, outputs: tuple[int, ...],
                         criterion: str, xlogx: np.ndarray) -> np.ndarray:
    """NODE_SPLIT records of (slot, n_cand) feature splits and (slot, width) candidate rows."""
    n_slots, n_cand = fsplit.shape
    out = np.zeros(n_slots, S.NODE_SPLIT.dtype)
    out["feat"], out["bin"] = -1, -1
    if not n_slots:
        return out
    ok = (np.arange(n_cand)[None, :] < cand[:, :1]) & (fsplit["bin"] >= 0)
    score = np.where(ok, fsplit["score"], -np.inf)
    best = score.max(axis=1)
    bj = np.argmax(ok & (score == best[:, None]), axis=1)  # the first of the best
    has = ok.any(axis=1)
    sl = np.arange(n_slots)
    parent = S.side_reference(totals, outputs, criterion, xlogx)
    out["feat"] = np.where(has, cand[sl, 1 + bj], -1)
    out["bin"] = np.where(has, fsplit["bin"][sl, bj], -1)
    out["left"] = np.where(has, fsplit["left"][sl, bj], 0)
    out["gain"] = np.where(has, best - parent, 0.0)
    return out


def _totals_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """CPUs: slots carry the parallelism, a work-item folds one lane of a slot's rows (no combine kernel). GPUs:
    64 work-items share a slot's rows (a root holds most of the rows; one work-item would walk them alone)."""
    cfg = S.per_slot(desc, dev, sizes)
    cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 1
    if dev.type == "gpu":
        cfg["NUM_WI_slot"], cfg["NUM_WI_pos"] = 1, 64
        cfg["NUM_WG_slot"] = pow2_at_most(int(sizes.get("slot", 1)), 1024)
    return cfg


def _scalar_slots(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Per-slot loops of data-dependent length (early exits, row sorts): on CPUs one work-item per group, as
    runtimes that vectorise across work-items run every lane to the longest (Intel's: 3x slower at 8)."""
    cfg = S.per_slot(desc, dev, sizes)
    if dev.type != "gpu":
        cfg[f"NUM_WI_{desc.dim_names[0]}"] = 1
        cfg[f"NUM_WG_{desc.dim_names[0]}"] = max(1, dev.compute_units) * 32
    return cfg


# tuned at the levels of a 500-tree forest on 1M x 28 rows and of emotions- and mediamill-shaped chain ensembles
# (mdhom.forests.tuning_inputs); every kernel here folds integers or concatenates: no order to pin
CANDIDATES = KernelSpec("forest_candidates", _scalar_slots, tuning=Tuning(
    lambda s: candidates(TI.N_BINS, TI.N_FEAT, TI.WIDTH), TI.slot_classes(), TI.candidates_inputs,
    TI.candidates_ref, quick_points=64,
    doc="each node's drawn, non-constant features (a row scan per drawn feature that stops at the first other bin)"))
SLOT_TOTALS = KernelSpec("forest_slot_totals", _totals_heuristic, tuning=Tuning(
    lambda s: slot_totals("int", TI.OUTPUTS), TI.slot_classes(pos=True, lane=True), TI.slot_totals_inputs,
    TI.slot_totals_ref, doc="class counts, weight and rows of every node of a level (ragged rows per node)"))
SAMPLED_SPLIT = KernelSpec("forest_sampled_split", _scalar_slots, tuning=Tuning(
    lambda s: sampled_split(TI.N_BINS, "int", TI.OUTPUTS, TI.CRITERION, TI.WIDTH), TI.slot_classes(feat=True),
    TI.sampled_split_inputs, TI.sampled_split_ref, quick_points=320,
    doc="the best cut of each (node, candidate): from its histogram, or from a small node's rows sorted by bin"))
CAND_SPLIT = KernelSpec("forest_cand_split", S.per_slot, tuning=Tuning(
    lambda s: cand_split("int", TI.OUTPUTS, TI.CRITERION, TI.WIDTH), TI.slot_classes(), TI.cand_split_inputs,
    TI.cand_split_ref, doc="each node's split among its candidates' cuts (ties to the earlier drawn)"))
SPECS = (CANDIDATES, SLOT_TOTALS, SAMPLED_SPLIT, CAND_SPLIT)
