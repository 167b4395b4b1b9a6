"""The boosting level over the tree dimension: the K trees of a multiclass round (one per class, each on its own
class's (g, h)) grow level by level together, as the trees of a forest do (:mod:`mdhom.forests.layout`).

A level's nodes over the round's trees are slots: slot ``s`` belongs to batch tree ``slot_tree[s]``, which scores
class ``tree_col[tree]`` and owns the positions ``slot_begin[s] .. + slot_count[s]`` of the position order (tree
``t``'s rows in positions ``t*n ..``, grouped by node, ascending inside a node). The forests' sibling subtraction,
left scan and stable partition (:mod:`mdhom.forests.histogram`, :mod:`mdhom.forests.partition`) move the rows;
these kernels add what boosting needs: (g, h) lanes per tree, XGBoost's gain with a learned default direction for
missing values, leaves recorded in the row's slot, and the score update.

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
boost_roots            tree x row           concat: the root level (position order, every row in its root)
boost_histogram        slot x feat x pos    concat, concat, sum of (g, h) over the slot's rows (ragged)
boost_feature_split    slot x feat          concat, concat: a feature's best (bin, direction) (a scan over bins)
boost_node_split       slot                 concat: the best feature, ties to the lower
boost_route            tree x row           concat: a row's child slot, or the leaf it ends in (-2 - leaf)
boost_split_left       slot                 concat: rows going left, from the forests' left scan
boost_child_slots      slot                 concat: the next level's slot ranges from those counts
boost_score_update     row x class          concat: + the leaf value of the class's tree (once a round)
=====================  ===================  ==============================================================

Double precision is the numpy reference's arithmetic exactly (the histogram folds a slot's rows in position order
under exact mode's pins, the gain is :func:`mdhom.trees.numpy_backend.fast_best_splits`'s operations in its order), and
quantized histograms are int32 sums, exact in any order: either way the trees are the existing grower's bit for
bit (``tests/test_ktrees.py`` grows each class's tree with :func:`mdhom.trees.grower.grow_tree` to check).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components import histogram_blocks
from mdhom.components.lanes import bin_ctype, defines, snippet
from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.devices import Device
from mdhom.forests.histogram import histogram_heuristic
from mdhom.forests.split import per_slot, per_slot_feature
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Scalar, Struct

FEATURE_SPLIT = Struct("boost_fsplit_t", (("gain", "double"), ("lg", "double"), ("lh", "double"), ("rg", "double"),
                                          ("rh", "double"), ("tg", "double"), ("th", "double"), ("bin", "int"),
                                          ("dir", "int")))
NODE_SPLIT = Struct("boost_nsplit_t", (("gain", "double"), ("lg", "double"), ("lh", "double"), ("rg", "double"),
                                       ("rh", "double"), ("tg", "double"), ("th", "double"), ("feat", "int"),
                                       ("bin", "int"), ("dir", "int"), ("count", "int")))
# route table flags (4 ints per slot: feat, bin, target, flags)
DEFAULT_LEFT, SPLITS, TO_LEAVES = 1, 2, 4
GAIN_PARAMS = ("reg_lambda", "reg_alpha", "min_split_gain", "min_child_weight")


def lane_ctype(precision: str) -> str:
    """The histogram lane of a precision: int32 fixed point ("quantized") or double ("double")."""
    if precision not in ("double", "quantized"):
        raise ValueError(f"the boosting level runs in 'double' or 'quantized' precision, not {precision!r}")
    return "int" if precision == "quantized" else "double"


# ------------------------------------------------------------------------------------------------ the root level
@lru_cache(maxsize=1)
def roots() -> Description:
    """The root level of a batch of trees: ``field`` 0 gives the position order (each tree's rows ascending), 1 every
    row's slot (its tree's root, slot ``tree``). Two launches of one kernel."""
    return Description(
        "boost_roots", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="out = field ? (int)tree : (int)row;", params=[Param("field", "int")],
    )


# ------------------------------------------------------------------------------------------------ histogram
_HIST = """
const int mdh_s = slot_id[slot];
const int mdh_r = order[(long)slot_begin[mdh_s] + pos];
const int mdh_b = 2 * (int)bins[(long)feat * n_rows + mdh_r];
const long mdh_i = 2 * ((long)tree_col[slot_tree[mdh_s]] * n_rows + mdh_r);
{body}
"""


@lru_cache(maxsize=16)
def histogram(n_bins: int, lane: str) -> Description:
    """(g, h) sums per (slot, feature, bin) over each slot's rows: atoms of n_bins x 2 lanes (``lane``: double, or
    int32 fixed point). ``slot_id[slot]`` is the level slot whose histogram is built (a level builds only each
    split's smaller child; its sibling comes by subtraction); ``gh`` is (class, row, 2), class-major
    (:mod:`mdhom.forests.boost_gradients`: a tree's rows contiguous), and the bins are feature-major (feat, row).
    The row fold is ragged (the slot's own count), so one launch serves every node of every tree; double sums follow
    the position order under exact mode's pins (the reference's ascending rows), integer sums are exact in any order
    (``PARTIALS_LOCAL``: local-memory atomics)."""
    set_ = "out.v[mdh_b] = gh[mdh_i]; out.v[mdh_b + 1] = gh[mdh_i + 1];"
    add = "acc.v[mdh_b] += gh[mdh_i]; acc.v[mdh_b + 1] += gh[mdh_i + 1];"
    atomic = None
    if lane == "int":
        atomic = _HIST.format(body="if (gh[mdh_i] != 0) atomic_add(&acc->v[mdh_b], gh[mdh_i]);\n"
                                   "if (gh[mdh_i + 1] != 0) atomic_add(&acc->v[mdh_b + 1], gh[mdh_i + 1]);")
    return Description(
        "boost_histogram", ["slot", "feat", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(Scalar(lane), 2 * int(n_bins)),
        scalar=_HIST.format(body=set_), accumulate=_HIST.format(body=add), accumulate_atomic=atomic,
        inputs=[Input("bins", bin_ctype(n_bins), ("*",), gather=True), Input("gh", lane, ("*",), gather=True),
                Input("order", "int", ("*",), gather=True), Input("slot_begin", "int", ("*",), gather=True),
                Input("slot_count", "int", ("*",), gather=True), Input("slot_id", "int", ("slot",), gather=True),
                Input("slot_tree", "int", ("*",), gather=True), Input("tree_col", "int", ("*",), gather=True)],
        params=[Param("n_rows", "int")],
        extents={"pos": "slot_count[slot_id[slot]]"},
    )


def histogram_reference(bins: np.ndarray, gh: np.ndarray, order: np.ndarray, slot_begin: np.ndarray,
                        slot_count: np.ndarray, slot_id: np.ndarray, slot_tree: np.ndarray, tree_col: np.ndarray,
                        n_bins: int, blocked: bool = True) -> np.ndarray:
    """(slot, feat, bin, 2): each built slot's rows summed in position order (``gh`` (n, K, 2) float64, or int64
    when quantized: exact), as :func:`mdhom.trees.reference.histograms` adds a node's rows: float64 sums of a slot of
    more than :data:`~mdhom.components.histogram_blocks.BLOCK_ROWS` rows block by block, the blocks' sums in order
    (``blocked=False``: whole, what one launch of the kernel adds)."""
    n, f = bins.shape
    out = np.zeros((len(slot_id), f, n_bins, 2), gh.dtype)
    flat = order.reshape(-1)
    offsets = (np.arange(f) * n_bins)[None, :]
    step = histogram_blocks.BLOCK_ROWS if blocked and gh.dtype.kind == "f" else max(1, flat.size)
    for i, s in enumerate(np.asarray(slot_id, np.int64)):
        col = int(tree_col[slot_tree[s]])
        for at in range(0, int(slot_count[s]), step):
            rows = flat[slot_begin[s] + at:slot_begin[s] + min(int(slot_count[s]), at + step)]
            idx = (bins[rows].astype(np.int64) + offsets).ravel()
            for c in range(2):
                w = np.repeat(gh[rows, col, c], f)
                if gh.dtype.kind in "iu":
                    sums = np.bincount(idx, w.astype(np.float64), f * n_bins)  # |sums| < 2^31: exact in float64
                    out[i, :, :, c] = np.rint(sums).astype(np.int64).reshape(f, n_bins)
                else:
                    out[i, :, :, c] = out[i, :, :, c] + np.bincount(idx, w, f * n_bins).reshape(f, n_bins)
    return out


@lru_cache(maxsize=1)
def row_blocks() -> Description:
    """The block table of ``n_built`` built slots (level slot ``slot_id[i]``, its range in ``slot_begin`` and
    ``slot_count``, its tree ``slot_tree``), as :func:`mdhom.components.histogram_blocks.row_blocks` lays out a
    node's (the same :func:`~mdhom.components.histogram_blocks.block_table`, writing each block's tree and each built
    slot's rows besides): block slot ``v`` holds ``out[v]`` rows from position ``begin[v]`` of tree ``tree[v]``,
    slot i < ``n_built`` built slot i's last block, the earlier (whole) ones from slot ``n_built`` on, ``first[i]``
    its first, ``cnt[i]`` its rows; slots past them empty. A K-trees level's float64 histogram builds the block slots
    (``boost_histogram`` through an identity ``slot_id``) and adds them up with ``tree_hist_blocks``."""
    return Description(
        "boost_row_blocks", ["v"], [Concat()], "int",
        scalar=histogram_blocks.block_table("n_built", "slot_id[mdh_i]",
                                            last="\n        cnt[v] = mdh_cnt;\n        tree[v] = slot_tree[mdh_s];",
                                            earlier="\n        tree[v] = slot_tree[mdh_s];",
                                            empty="\n    tree[v] = 0;"),
        inputs=[Input("slot_begin", "int", ("*",), gather=True), Input("slot_count", "int", ("*",), gather=True),
                Input("slot_id", "int", ("*",), gather=True), Input("slot_tree", "int", ("*",), gather=True),
                Input("begin", "int", ("*",), gather=True, writes=True),
                Input("tree", "int", ("*",), gather=True, writes=True),
                Input("first", "int", ("*",), gather=True, writes=True),
                Input("cnt", "int", ("*",), gather=True, writes=True)],
        params=[Param("n_built", "int"), Param("block_rows", "int")],
    )


def row_blocks_reference(slot_begin: np.ndarray, slot_count: np.ndarray, slot_id: np.ndarray, slot_tree: np.ndarray,
                         n_slots: int, block_rows: int) -> dict[str, np.ndarray]:
    """``boost_row_blocks``' outputs (count, begin, tree of ``n_slots`` block slots; first, cnt of each built slot)."""
    from mdhom.components.histogram_blocks import row_blocks_reference as node_blocks

    ids = np.asarray(slot_id, np.int64)
    count, begin, first = node_blocks(np.asarray(slot_begin)[ids], np.asarray(slot_count)[ids], n_slots, block_rows)
    tree = np.zeros(n_slots, np.int32)
    more = np.maximum(histogram_blocks.block_count(np.asarray(slot_count)[ids].astype(np.int64), block_rows) - 1, 0)
    for i, s in enumerate(ids):
        tree[i] = slot_tree[s]
        tree[first[i]:first[i] + more[i]] = slot_tree[s]
    return {"count": count, "begin": begin, "tree": tree, "first": first,
            "cnt": np.asarray(slot_count)[ids].astype(np.int32)}


# ------------------------------------------------------------------------------------------------ split search
def _preamble(precision: str, n_bins: int) -> str:
    """XGBoost's score (``tree_score``, ``kernels/trees/gain_xgboost.cl``) and the lane types; ``BOOST_REAL`` turns a
    histogram sum into a real: ``(double)q * 2^-k`` with the scale of the tree's class when quantized."""
    real = ("#define BOOST_REAL(q, c) ((double)(q) * inv_scale[2 * col + (c)])\n" if precision == "quantized"
            else "#define BOOST_REAL(q, c) (q)\n")
    return defines(precision, n_bins) + snippet("split.cl") + snippet("gain_xgboost.cl") + real


_FEATURE_SPLIT = """
const int col = tree_col[slot_tree[slot]];
__global const tree_hist_t* h = hist + ((long)slot * SIZE_feat + feat) * (2 * TREE_BINS);
tree_hist_t tg = 0, th = 0;
for (int b = 0; b < TREE_BINS; ++b) { tg = tg + h[2 * b]; th = th + h[2 * b + 1]; }
const tree_hist_t mg = h[2 * (TREE_BINS - 1)], mh = h[2 * (TREE_BINS - 1) + 1];
out.tg = BOOST_REAL(tg, 0);
out.th = BOOST_REAL(th, 1);
out.gain = -INFINITY; out.lg = 0; out.lh = 0; out.rg = 0; out.rh = 0; out.bin = 0; out.dir = 0;
if (feature_mask[feat]) {
    const double parent = tree_score(out.tg, out.th, reg_lambda, reg_alpha);
    tree_hist_t cg = 0, ch = 0;
    for (int b = 0; b < TREE_BINS - 2; ++b) {
        cg = cg + h[2 * b];
        ch = ch + h[2 * b + 1];
        for (int d = 0; d < 2; ++d) {  /* default left (missing values go left) first, as the reference */
            const tree_hist_t lgq = d == 0 ? cg + mg : cg, lhq = d == 0 ? ch + mh : ch;
            const double lg = BOOST_REAL(lgq, 0), lh = BOOST_REAL(lhq, 1);
            const double rg = BOOST_REAL(tg - lgq, 0), rh = BOOST_REAL(th - lhq, 1);
            if (!(lh >= min_child_weight && rh >= min_child_weight)) continue;
            const double gain = 0.5 * ((tree_score(lg, lh, reg_lambda, reg_alpha)
                                        + tree_score(rg, rh, reg_lambda, reg_alpha)) - parent) - min_split_gain;
            if (!isfinite(gain) || !(gain > out.gain)) continue;  /* ties: the lower bin, then default left */
            out.gain = gain; out.lg = lg; out.lh = lh; out.rg = rg; out.rh = rh; out.bin = b; out.dir = d;
        }
    }
}"""


@lru_cache(maxsize=16)
def feature_split(n_bins: int, precision: str) -> Description:
    """The best split "bin <= b" of each (slot, feature), both default directions for the missing bin (the last),
    by XGBoost's gain ``0.5 * [S(G_L)^2/(H_L+l) + S(G_R)^2/(H_R+l) - S(G)^2/(H+l)] - gamma`` with both hessian sums
    at least ``min_child_weight``; and the feature's (g, h) totals. The scalar function scans the bins in private
    memory (np.cumsum's order); gain ``-inf`` where no candidate is allowed or the feature is masked out."""
    lane = lane_ctype(precision)
    inputs = [Input("hist", lane, ("*",), gather=True), Input("feature_mask", "uchar", ("*",), gather=True),
              Input("slot_tree", "int", ("*",), gather=True), Input("tree_col", "int", ("*",), gather=True)]
    if precision == "quantized":
        inputs.append(Input("inv_scale", "double", ("*",), gather=True))
    return Description(
        "boost_feature_split", ["slot", "feat"], [Concat(), Concat()], FEATURE_SPLIT, scalar=_FEATURE_SPLIT,
        inputs=inputs, params=[Param(p, "double") for p in GAIN_PARAMS], preamble=_preamble(precision, n_bins),
    )


@lru_cache(maxsize=1)
def node_split() -> Description:
    """The best of a slot's feature splits (ties to the lower feature: with the bin and direction order inside a
    feature, the reference's flat candidate order), the node's totals (feature 0's, as the reference's
    ``node_totals``) and its row count (what bounds its children's launches)."""
    return Description(
        "boost_node_split", ["slot"], [Concat()], NODE_SPLIT,
        scalar="""
__global const boost_fsplit_t* fs = (__global const boost_fsplit_t*)fsplit + (long)slot * n_feat;
int best = 0;
for (int f = 1; f < n_feat; ++f)
    if (fs[f].gain > fs[best].gain) best = f;
out.gain = fs[best].gain; out.lg = fs[best].lg; out.lh = fs[best].lh; out.rg = fs[best].rg; out.rh = fs[best].rh;
out.feat = best; out.bin = fs[best].bin; out.dir = fs[best].dir;
out.tg = fs[0].tg; out.th = fs[0].th;
out.count = slot_count[slot];""",
        inputs=[Input("fsplit", "int", ("*",), gather=True), Input("slot_count", "int", ("*",), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=FEATURE_SPLIT.declaration("boost_fsplit_t") + "\n",
    )


def _real(q: np.ndarray, inv: float | None) -> np.ndarray:
    return q if inv is None else q.astype(np.float64) * inv


def feature_split_reference(hist: np.ndarray, feature_mask: np.ndarray, slot_tree: np.ndarray, tree_col: np.ndarray,
                            params: Mapping[str, float], inv_scale: np.ndarray | None = None) -> np.ndarray:
    """(slot, feat) FEATURE_SPLIT records in the kernel's (and :func:`mdhom.trees.numpy_backend.fast_best_splits`')
    operations and order."""
    from mdhom.trees.numpy_backend import _score

    n_slots, n_feat, n_bins, _ = hist.shape
    lam, alpha = params["reg_lambda"], params["reg_alpha"]
    out = np.zeros((n_slots, n_feat), FEATURE_SPLIT.dtype)
    out["gain"] = -np.inf
    if not n_slots:
        return out
    cols = np.asarray(tree_col)[np.asarray(slot_tree)[:n_slots]]
    for s in range(n_slots):
        ig, ih = (None, None) if inv_scale is None else inv_scale.reshape(-1, 2)[cols[s]]
        tot = np.cumsum(hist[s], axis=1)[:, -1]  # (F, 2) in bin order
        out["tg"][s], out["th"][s] = _real(tot[:, 0], ig), _real(tot[:, 1], ih)
        n_cand = max(n_bins - 2, 0)
        if not n_cand:
            continue
        cum = np.cumsum(hist[s, :, :n_cand], axis=1)  # (F, b, 2)
        miss = hist[s, :, n_bins - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            # _score sums over a last (output) axis: here one output
            parent = _score(out["tg"][s][:, None], out["th"][s][:, None], lam, alpha)[:, None]  # (F, 1)
            gains = []
            for left in (cum + miss[:, None], cum):  # default left first
                lg, lh = _real(left[..., 0], ig), _real(left[..., 1], ih)
                rg, rh = _real(tot[:, None, 0] - left[..., 0], ig), _real(tot[:, None, 1] - left[..., 1], ih)
                gain = 0.5 * (_score(lg[..., None], lh[..., None], lam, alpha)
                              + _score(rg[..., None], rh[..., None], lam, alpha) - parent) - params["min_split_gain"]
                ok = (lh >= params["min_child_weight"]) & (rh >= params["min_child_weight"]) & np.isfinite(gain)
                gains.append((np.where(ok, gain, -np.inf), lg, lh, rg, rh))
        g = np.stack([x[0] for x in gains], axis=2).reshape(n_feat, -1)  # (F, bin * 2 + dir)
        best = np.argmax(g, axis=1)
        for f in np.flatnonzero(np.asarray(feature_mask, bool) & np.isfinite(g[np.arange(n_feat), best])):
            b, d = divmod(int(best[f]), 2)
            rec = out[s, f]
            rec["gain"] = g[f, best[f]]
            rec["lg"], rec["lh"], rec["rg"], rec["rh"] = (float(x[f, b]) for x in gains[d][1:])
            rec["bin"], rec["dir"] = b, d
    return out


def node_split_reference(fsplit: np.ndarray, slot_count: np.ndarray) -> np.ndarray:
    n_slots = fsplit.shape[0]
    out = np.zeros(n_slots, NODE_SPLIT.dtype)
    if not n_slots:
        return out
    best = np.argmax(fsplit["gain"], axis=1)  # the first maximum: ties to the lower feature
    rec = fsplit[np.arange(n_slots), best]
    for k in ("gain", "lg", "lh", "rg", "rh", "bin", "dir"):
        out[k] = rec[k]
    out["feat"] = best
    out["tg"], out["th"] = fsplit["tg"][:, 0], fsplit["th"][:, 0]
    out["count"] = np.asarray(slot_count)[:n_slots]
    return out


# ------------------------------------------------------------------------------------------------ rows
@lru_cache(maxsize=8)
def route(n_bins: int) -> Description:
    """Each (tree, row)'s next place: the child slot of its node's split, or, where the node (or its split's
    children) ends the tree, ``-2 - leaf``; rows already in a leaf keep it. ``route_tab`` per slot: (feat, bin,
    target, flags): flags ``SPLITS`` (else the slot is leaf ``target``), ``TO_LEAVES`` (the children are leaves
    ``target``, ``target + 1``, else slots), ``DEFAULT_LEFT`` (missing values, the last bin, go left)."""
    return Description(
        "boost_route", ["tree", "row"], [Concat(), Concat()], "int",
        scalar=f"""
const int s = row_slot[(long)tree * SIZE_row + row];
out = s;
if (s >= 0) {{
    const int flags = route_tab[4 * s + 3], target = route_tab[4 * s + 2];
    if (flags & {SPLITS}) {{
        const int b = (int)bins[(long)route_tab[4 * s] * SIZE_row + row];
        const int right = (b == {int(n_bins) - 1}) ? !(flags & {DEFAULT_LEFT}) : (b > route_tab[4 * s + 1]);
        out = (flags & {TO_LEAVES}) ? -2 - (target + right) : target + right;
    }} else {{
        out = -2 - target;
    }}
}}""",
        inputs=[Input("row_slot", "int", ("*",), gather=True), Input("route_tab", "int", ("*",), gather=True),
                Input("bins", bin_ctype(n_bins), ("*",), gather=True)],
    )


def route_reference(row_slot: np.ndarray, route_tab: np.ndarray, bins: np.ndarray, n_bins: int) -> np.ndarray:
    out = row_slot.copy()
    tab = route_tab.reshape(-1, 4)
    t, r = np.nonzero(row_slot >= 0)
    s = row_slot[t, r]
    feat, sbin, target, flags = tab[s, 0], tab[s, 1], tab[s, 2], tab[s, 3]
    b = bins[r, np.maximum(feat, 0)].astype(np.int64)
    right = np.where(b == n_bins - 1, (flags & DEFAULT_LEFT) == 0, b > sbin).astype(np.int64)
    split = (flags & SPLITS) != 0
    child = np.where((flags & TO_LEAVES) != 0, -2 - (target + right), target + right)
    out[t, r] = np.where(split, child, -2 - target)
    return out


@lru_cache(maxsize=1)
def split_left() -> Description:
    """Rows of each partitioned slot (``part_tab``'s child >= 0) going to its left child: the forests' exclusive
    left scan at the slot's last position, plus that row's own flag, less the scan at its first."""
    return Description(
        "boost_split_left", ["slot"], [Concat()], "int",
        scalar="""
out = 0;
const int c = slot_count[slot];
if (part_tab[3 * slot + 2] >= 0 && c > 0) {
    const long b = slot_begin[slot];
    const long last = b + c - 1;
    const int ns = new_slot[(last / n_rows) * n_rows + order[last]];
    out = scan[last] + (ns >= 0 && (ns & 1) == 0) - scan[b];
}""",
        inputs=[Input("part_tab", "int", ("*",), gather=True), Input("slot_begin", "int", ("*",), gather=True),
                Input("slot_count", "int", ("*",), gather=True), Input("scan", "int", ("*",), gather=True),
                Input("order", "int", ("*",), gather=True), Input("new_slot", "int", ("*",), gather=True)],
        params=[Param("n_rows", "int")],
    )


def split_left_reference(new_slot: np.ndarray, order: np.ndarray, part_tab: np.ndarray, slot_begin: np.ndarray,
                         slot_count: np.ndarray) -> np.ndarray:
    n = order.shape[1]
    flat = order.reshape(-1)
    out = np.zeros(len(slot_begin), np.int32)
    for s in np.flatnonzero(part_tab.reshape(-1, 3)[:, 2] >= 0):
        b, c = int(slot_begin[s]), int(slot_count[s])
        ns = new_slot.reshape(-1)[(b // n) * n + flat[b:b + c]]
        out[s] = int(np.count_nonzero((ns >= 0) & (ns % 2 == 0)))
    return out


@lru_cache(maxsize=1)
def child_slots() -> Description:
    """The next level's slot ranges: slot ``2k`` (left) and ``2k + 1`` of the k-th partitioned slot
    ``pair_parent[k]``; ``field`` 0 gives the begins, 1 the counts (two launches of one kernel)."""
    return Description(
        "boost_child_slots", ["slot"], [Concat()], "int",
        scalar="""
const int s = pair_parent[slot >> 1];
const int l = split_left[s];
const int right = (int)(slot & 1);
out = field == 0 ? slot_begin[s] + (right ? l : 0) : (right ? slot_count[s] - l : l);""",
        inputs=[Input("pair_parent", "int", ("*",), gather=True), Input("slot_begin", "int", ("*",), gather=True),
                Input("slot_count", "int", ("*",), gather=True), Input("split_left", "int", ("*",), gather=True)],
        params=[Param("field", "int")],
    )


def child_slots_reference(pair_parent: np.ndarray, slot_begin: np.ndarray, slot_count: np.ndarray,
                          left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.repeat(np.asarray(pair_parent, np.int64), 2)
    right = np.tile([0, 1], len(pair_parent)).astype(bool)
    lft = np.asarray(left)[p]
    begin = np.asarray(slot_begin)[p] + np.where(right, lft, 0)
    count = np.where(right, np.asarray(slot_count)[p] - lft, lft)
    return begin.astype(np.int32), count.astype(np.int32)


@lru_cache(maxsize=1)
def score_update() -> Description:
    """scores (row, class) + the value of the leaf the row ends in, in the round's tree of that class: ``leaf``
    (class, row) holds the leaf codes the routing left (``-2 - leaf``), ``leaf_value`` the round's leaf table."""
    return Description(
        "boost_score_update", ["row", "cls"], [Concat(), Concat()], "double",
        scalar="out = scores[(long)row * SIZE_cls + cls] + leaf_value[-2 - leaf[(long)cls * SIZE_row + row]];",
        inputs=[Input("scores", "double", ("*",), gather=True), Input("leaf", "int", ("*",), gather=True),
                Input("leaf_value", "double", ("*",), gather=True)],
    )


def score_update_reference(scores: np.ndarray, leaf: np.ndarray, leaf_value: np.ndarray) -> np.ndarray:
    return scores + leaf_value[-2 - leaf.T]


# ------------------------------------------------------------------------------------------------ specs
def _hist_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    """A level of ``slot`` nodes over ``trees`` trees (classes) of ``rows`` rows, int32 (g, h) lanes."""
    n, f, t, b = int(s["rows"]), int(s["feat"]), int(s["trees"]), int(s.get("n_bins", 64))
    per = max(1, int(s["slot"]) // t)
    edges = [(np.arange(per + 1) * n) // per for _ in range(t)]
    begin = np.concatenate([k * n + e[:-1] for k, e in enumerate(edges)]).astype(np.int32)
    count = np.concatenate([np.diff(e) for e in edges]).astype(np.int32)
    return {"bins": rng.integers(0, b, (f, n)).astype(np.uint8).reshape(-1),
            "gh": rng.integers(-1000, 1000, (t, n, 2)).astype(np.int32).reshape(-1),
            "order": np.tile(np.arange(n, dtype=np.int32), t), "slot_begin": begin, "slot_count": count,
            "slot_id": np.arange(begin.size, dtype=np.int32),
            "slot_tree": np.repeat(np.arange(t), per).astype(np.int32),
            "tree_col": np.arange(t, dtype=np.int32), "n_rows": np.int32(n)}


def _hist_ref(a: Mapping[str, np.ndarray], n_bins: int = 64) -> np.ndarray:
    n = int(a["n_rows"])
    gh = a["gh"].reshape(-1, n, 2).transpose(1, 0, 2).astype(np.int64)  # the reference's (row, class, 2)
    h = histogram_reference(a["bins"].reshape(-1, n).T, gh,
                            a["order"].reshape(-1, n), a["slot_begin"], a["slot_count"], a["slot_id"], a["slot_tree"],
                            a["tree_col"], n_bins, blocked=False)
    return h.reshape(h.shape[0], h.shape[1], -1).astype(np.int32)


# a multiclass round's root level (ten trees over every row) and a deep level (many small nodes), 28 features
_HIST_CLASSES = {
    "roots_10x1e5": {"slot": 10, "feat": 28, "pos": 10**5, "rows": 10**5, "trees": 10, "n_bins": 64},
    "level_640x1e5": {"slot": 640, "feat": 28, "pos": 2000, "rows": 10**5, "trees": 10, "n_bins": 64},
}
_SEQUENTIAL = {"NUM_WI_pos": 1, "NUM_WG_pos": 1}  # exact (double): a slot's rows added in position order

def _hist_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The forest histogram's heuristic (:func:`mdhom.forests.histogram.histogram_heuristic`); double lanes have no
    local-memory atomics to choose. CPUs: 64 slot groups, so that the work-groups that run one after another (a slot's
    features, groups numbered row-major) read one slot's rows, which stay in cache, instead of a share of every
    tree's (PoCL, 1M rows x ten classes, depth 6: the histograms of three rounds took 9.0 s with the forests' 8 slot
    groups, 6.2-6.7 s with 64 or 256)."""
    cfg = histogram_heuristic(desc, dev, sizes)
    if dev.type != "gpu":
        cfg["NUM_WG_slot"] = 64
    if not desc.accumulate_atomic:
        cfg.pop("PARTIALS_LOCAL", None)
    return cfg


HISTOGRAM = KernelSpec("boost_histogram", _hist_heuristic, exact_pins=_SEQUENTIAL, tuning=Tuning(
    lambda s: histogram(int(s.get("n_bins", 64)), "int"), _HIST_CLASSES, _hist_inputs, _hist_ref,
    doc="quantized (g, h) histograms of every node of a multiclass round's trees (ragged rows per node)"))
ROOTS = KernelSpec("boost_roots", elementwise("row"))
FEATURE_SPLIT_SPEC = KernelSpec("boost_feature_split", per_slot_feature)
NODE_SPLIT_SPEC = KernelSpec("boost_node_split", per_slot)
ROUTE = KernelSpec("boost_route", elementwise("row"))
SPLIT_LEFT = KernelSpec("boost_split_left", per_slot)
CHILD_SLOTS = KernelSpec("boost_child_slots", per_slot)
SCORE_UPDATE = KernelSpec("boost_score_update", elementwise("row"))
ROW_BLOCKS = KernelSpec("boost_row_blocks", elementwise())
SPECS = (HISTOGRAM, ROW_BLOCKS, ROOTS, FEATURE_SPLIT_SPEC, NODE_SPLIT_SPEC, ROUTE, SPLIT_LEFT, CHILD_SLOTS,
         SCORE_UPDATE)

