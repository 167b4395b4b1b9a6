"""The split search's descriptions: prefix sums of a batch of histograms over bins, and the gain of every candidate
split with the best per node; their references, heuristics and tuner inputs. :mod:`mdhom.components.split_evaluator`
launches them; the packed result the host reads back is :mod:`mdhom.components.split_result`'s, and the scans of fits
with categorical features are :mod:`mdhom.components.split_categorical`'s.

The gain is a pluggable scalar function (:class:`Gain`): OpenCL C defining ``tree_gain`` over a candidate's
left and total sums, and its scalar parameters. Trees plug in XGBoost's (``kernels/trees/gain_xgboost.cl``);
another learner (rules) plugs in its own head quality with the same scan, argmax and read-back.

The argmax index ``(feat * n_cand + bin) * 2 + dir`` orders candidates as the tie rule of
:mod:`mdhom.trees.backend` does, and ARGMAX keeps the lower index on equal values, so the winner does not
depend on the order of combination. Exact mode pins the scan to one lane along ``bin`` (np.cumsum's order). The
score's CPU form sums the bins itself in that order (``kernels/trees/split_carry.cl``): numeric fits on CPUs launch no
scan.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_split_scan        node x feat x output x bin       concat, concat, concat, inclusive prefix sum over bins
tree_split_score       node x feat x bin x dir          concat, argmax over (feat, bin, dir)
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import (
    DEFAULT_BINS,
    class_precision,
    defines,
    gh_struct,
    hist_ctype,
    hist_gh_type,
    is_quantized,
    real_ctype,
    snippet,
    split_type,
    vector_class_applies,
    vector_defines,
    with_default_bins,
    with_quantized_classes,
    with_vector_classes,
)
from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import ARGMAX, SUM, Concat, Description, Input, Param, Reduce, Scan, Vector

# A split must gain more than this (XGBoost's kRtEps): gains of a few ulps on pure nodes are rounding noise,
# and splitting on them makes the tree depend on summation order (double and quantized modes then diverge).
# The growers decide by it, and so does the device where it splits ahead of the host (partition.split_from_search).
SPLIT_EPS = 1e-6


@dataclass(frozen=True)
class SplitParams:
    reg_lambda: float
    reg_alpha: float
    min_split_gain: float
    min_child_weight: float
    cat_smooth: float = 10.0  # added to H in the sort key of categorical partitions (LightGBM's cat_smooth)


@dataclass
class Splits:
    """Best split per node (host arrays, one entry per node asked for): what a split search returns to the
    driver.

    ``gain`` is -inf where no valid split exists. ``left_sum``/``right_sum`` are (n_nodes, n_outputs, 2)
    sums of (g, h), so the driver knows child totals and leaf values without another pass.
    """

    gain: np.ndarray  # float64 (n_nodes,)
    feature: np.ndarray  # int32 (n_nodes,)
    bin: np.ndarray  # int32 (n_nodes,)
    default_left: np.ndarray  # bool (n_nodes,)
    left_sum: np.ndarray  # float64 (n_nodes, n_outputs, 2)
    right_sum: np.ndarray  # float64 (n_nodes, n_outputs, 2)
    # (n_nodes, n_outputs, 2): the node's own (g, h) sums, the prefix sum over all bins of feature 0 (in bin
    # order, as np.cumsum adds): what the root's sums are taken from when the host has no gradients
    total: np.ndarray | None = None
    # (n_nodes, n_bins) bool, where the fit has categorical features: the bins that go left at each node whose
    # best split is categorical (its ``bin`` is then the candidate's index, not a threshold)
    cat_left: np.ndarray | None = None
    # the look-ahead step made of this search (:func:`mdhom.trees.reference.ahead_step`, which keeps it)
    ahead: tuple | None = field(default=None, repr=False, compare=False)

    @classmethod
    def none(cls, n_nodes: int, n_outputs: int, total: np.ndarray | None = None) -> Splits:
        """No valid split for any node yet (gain -inf), to be filled in node by node."""
        return cls(
            gain=np.full(n_nodes, -np.inf), feature=np.zeros(n_nodes, np.int32), bin=np.zeros(n_nodes, np.int32),
            default_left=np.zeros(n_nodes, bool), left_sum=np.zeros((n_nodes, n_outputs, 2)),
            right_sum=np.zeros((n_nodes, n_outputs, 2)), total=total,
        )


@dataclass(frozen=True)
class Gain:
    """The split evaluator's scalar function. ``code`` (OpenCL C, built after ``kernels/trees/split.cl``)
    defines ``tree_gain(scan, hist, node, n_feat, feat, bin, dir, <params> TREE_INV_DECL)``: a candidate's
    gain, or -INFINITY where it is not allowed; ``params`` are its real-valued parameters in order. The kernel
    is tuned and looked up as ``tree_split_score`` for XGBoost's gain, ``tree_split_score_<name>`` for others.
    ``vector_code``, optional, defines ``tree_gain_vec`` (built after ``code``), the gains of ``VEC`` candidates, one
    a lane, each from its own left sums and totals and ``tree_parent_vec`` of those totals (the part of the gain a
    feature's bins share, computed once a walk), in vector types: the score kernel's :class:`mdhom.mdh.Vector`
    form, what CPUs build, whose fold takes a block's best lane (a NaN lane loses, as in the scalar fold)."""

    name: str
    code: str
    params: tuple[str, ...]
    vector_code: str = ""

    @property
    def kernel_name(self) -> str:
        return "tree_split_score" if self.name == "xgboost" else f"tree_split_score_{self.name}"


XGBOOST_GAIN = Gain("xgboost", snippet("gain_xgboost.cl"),
                    ("reg_lambda", "reg_alpha", "min_split_gain", "min_child_weight"), snippet("gain_xgboost_vec.cl"))


# ------------------------------------------------------------------------------------------------ split scan
@lru_cache(maxsize=32)
def split_scan(n_bins: int, precision: str = "double") -> Description:
    """Inclusive prefix sums of (g, h) over bins, per (node, feature, output).

    For bit-exact agreement with the reference (``np.cumsum``) the backend runs it with one lane per
    (node, feature, output) along ``bin`` (sequential order); other configurations are correct to rounding.
    Quantized histograms scan in int32 (the scale bounds every sum): exact under every configuration.
    """
    r = hist_ctype(precision)
    return Description(
        "tree_split_scan", ["node", "feat", "output", "bin"], [Concat(), Concat(), Concat(), Scan(SUM)],
        hist_gh_type(precision),
        scalar="const long c = (((long)node * SIZE_feat + feat) * SIZE_output + output) * SIZE_bin + bin;\n"
               "out.g = hist[2 * c]; out.h = hist[2 * c + 1];",
        inputs=[Input("hist", r, ("node", "feat", "output", "bin", 2), gather=True)],
    )


def split_scan_reference(hist: np.ndarray) -> np.ndarray:
    """(node, feat, output, bin, 2) -> the same shape and lane type, cumulated over bins."""
    return np.cumsum(hist, axis=3, dtype=hist.dtype)


# ------------------------------------------------------------------------------------------------ split score
@lru_cache(maxsize=32)
def split_score(n_bins: int, n_outputs: int, precision: str = "double", gain: Gain | None = None,
                vector: bool = False) -> Description:
    """Gain of every candidate (feature, bin, default direction) and the best per node.

    The argmax index ``(feat * n_cand + bin) * 2 + dir`` (dir 0 = default left) orders candidates exactly
    as the tie rule of :mod:`mdhom.trees.backend` does, and ARGMAX keeps the lower index on equal values,
    so the winner does not depend on the order of combination. ``bin`` has ``n_bins - 2`` candidates.
    Quantized: left, right and total sums are formed in int32 and converted to double as ``(double)q *
    inv_scale`` (``inv_scale`` (output, 2), powers of two) just before the gain, as the reference does.
    ``vector`` (a gain with a vector form; what CPUs build, :func:`mdhom.components.lanes.vector_forms`): scores
    ``VEC`` features at once (:class:`mdhom.mdh.Vector` along ``feat``), each lane walking its own feature's bins in
    order, where the reals are doubles: OpenCL lets a float division be 2.5 ulp off, and the H200's vector float
    division gave other last bits than its scalar one. Each lane sums its feature's bins itself as it walks them (the
    fold's carry, ``kernels/trees/split_carry.cl``), so a numeric fit launches no scan before it: the scan wrote a
    node's histogram again as prefix sums for the score to read back, a memory pass as long as the score's own on a
    CPU. Lanes along features rather than bins (kernel alone, 28 features of 256 bins, 32 nodes, PoCL, 2-core EPYC):
    along bins a block's running sums were added lane after lane and its best lane found across the vector at every
    block, ~22-45 us a node; a hand-written walk of one feature a work-item ~14; four features a lane ~10, each a
    block's gains one vector compare against the best so far. It reads ``scan`` only for the features whose
    ``cat_mode`` is not 0 (a categorical fit's sorted candidates). GPUs build the description without it (their
    layouts scan first, :mod:`mdhom.trees.layouts`) unless a fit asks for ``summed``; their tunes study the plain form.
    """
    gain = gain or XGBOOST_GAIN
    hc = hist_ctype(precision)
    k, b = int(n_outputs), int(n_bins)
    r = real_ctype(precision)
    args = "".join(f", {p}" for p in gain.params)
    inputs = [Input("scan", hc, ("node", "feat", k, b, 2), gather=True),
              Input("hist", hc, ("node", "feat", k, b, 2), gather=True),
              Input("feature_mask", "uchar", ("feat",), gather=True)]
    if vector and gain.vector_code and r == "double":  # single: float division may round either way (below)
        return Description(
            gain.kernel_name, ["node", "feat", "bin", "dir"],
            [Concat(), Reduce(ARGMAX), Reduce(ARGMAX), Reduce(ARGMAX)], split_type(precision),
            scalar=f"""out.index = (int)(((long)feat * SIZE_bin + bin) * 2 + dir);
out.value = -INFINITY;
if (feature_mask[feat] && (dir == 0 || tree_has_missing(hist, node, SIZE_feat, feat))) {{
    tree_hist_t lg[TREE_OUTPUTS], lh[TREE_OUTPUTS], tg[TREE_OUTPUTS], th[TREE_OUTPUTS];
    for (int k = 0; k < TREE_OUTPUTS; ++k)
        tree_candidate_sums(scan, hist, cat_mode[feat] != 0, tree_cell(node, SIZE_feat, feat, k), (int)bin, (int)dir,
                            &lg[k], &lh[k], &tg[k], &th[k]);
    out.value = tree_gain_sums(lg, lh, tg, th{args} TREE_INV_ARG);
}}""",
            inputs=inputs + [Input("cat_mode", "uchar", ("feat",), gather=True)] + inv_input(precision),
            params=[Param(p, r) for p in gain.params],
            preamble=defines(precision, b, k) + vector_defines(precision) + snippet("split.cl")
            + snippet("split_carry.cl") + gain.code + gain.vector_code + _ARGMAX_MAX,
            # every block in vector form (lanes past the features read the last and are never folded), each lane's
            # running sums carried from bin to bin
            vector=Vector("feat", reach="SIZE_feat + 8", fold=_CARRIED_GAINS.replace("ARGS", args) + _ARGMAX_BLOCK,
                          carry=_CARRY),
            inline_fold=True,
        )
    return Description(
        gain.kernel_name, ["node", "feat", "bin", "dir"], [Concat(), Reduce(ARGMAX), Reduce(ARGMAX), Reduce(ARGMAX)],
        split_type(precision),
        scalar="out.index = (int)(((long)feat * SIZE_bin + bin) * 2 + dir);\n"
               "out.value = -INFINITY;\n"
               "if (feature_mask[feat]) out.value = tree_gain(scan, hist, node, SIZE_feat, feat, (int)bin, (int)dir"
               f"{args} TREE_INV_ARG);",
        inputs=inputs + inv_input(precision),
        params=[Param(p, r) for p in gain.params],
        preamble=defines(precision, b, k) + snippet("split.cl") + gain.code,
    )


# The vector form's carry: a block of features (one a lane), the running sums of each lane's bins walked so far, its
# totals and its missing bin
_CARRY = """    long key;                                        /* 1 + (node, its first feature); 0: none yet */
    int at;                                          /* the bins summed in g and h: 0 .. at - 1 */
    int any_missing;                                 /* a lane scores default-right (its missing bin holds rows) */
    int cat;                                         /* a lane's feature is categorical (sums from the scan) */
    MDH_VT(long) on0, on1;                           /* the lanes scored default-left, default-right (-1) */
    tree_hist_v g[TREE_OUTPUTS], h[TREE_OUTPUTS];    /* each lane's sums of bins 0 .. at - 1 */
    tree_hist_v tg[TREE_OUTPUTS], th[TREE_OUTPUTS];  /* each lane's sums of all its bins */
    tree_hist_v mg[TREE_OUTPUTS], mh[TREE_OUTPUTS];  /* each lane's missing bin */
    tree_real_v sp;                                  /* each lane's parent part of the gain (tree_parent_vec) */"""
# The vector form's gains of a block of features at (bin, dir): the lanes' left sums from the carried sums (a walk
# handed a bin behind the carried ones sums from bin 0 again), or from the categorical scan for a sorted feature
# (cat_mode), and the gain of each lane (-inf where the feature is masked, past the features, or where default-right
# has an empty missing bin); default-right not at all where no lane's missing bin holds rows (its candidates never
# win: default-left's of the same bin hold the same rows, one index lower)
_CARRIED_GAINS = """
const int mdh_i0 = (int)(((long)feat * SIZE_bin + bin) * 2 + dir);
const int mdh_n = (int)mdh_vn;
const long mdh_key = 1 + (long)node * SIZE_feat + feat;
if (mdh_carry->key != mdh_key) {
    union { long s[VEC]; MDH_VT(long) v; } mdh_on0, mdh_on1;
    mdh_carry->key = mdh_key;
    mdh_carry->at = 0;
    mdh_carry->any_missing = 0;
    mdh_carry->cat = 0;
    for (int s = 0; s < VEC; ++s) {
        const long f = feat + (s < mdh_n ? s : mdh_n - 1);
        const int on = s < mdh_n && feature_mask[f];
        const int missing = on && tree_has_missing(hist, node, SIZE_feat, f);
        mdh_on0.s[s] = on ? -1 : 0;
        mdh_on1.s[s] = missing ? -1 : 0;
        mdh_carry->any_missing |= missing;
        mdh_carry->cat |= on && cat_mode[f] != 0;
    }
    mdh_carry->on0 = mdh_on0.v;
    mdh_carry->on1 = mdh_on1.v;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long cell = tree_cell(node, SIZE_feat, feat, k);
        tree_feat_sum_bins(hist, cell, mdh_n, 0, TREE_BINS, &mdh_carry->tg[k], &mdh_carry->th[k]);
        mdh_carry->mg[k] = tree_feat_lanes(hist + 2 * (cell + TREE_BINS - 1), mdh_n);
        mdh_carry->mh[k] = tree_feat_lanes(hist + 2 * (cell + TREE_BINS - 1) + 1, mdh_n);
        if (mdh_carry->cat) {  /* a sorted feature's totals: its scan's last */
            union { tree_hist_t s[VEC]; tree_hist_v v; } mdh_ug, mdh_uh;
            mdh_ug.v = mdh_carry->tg[k];
            mdh_uh.v = mdh_carry->th[k];
            for (int s = 0; s < mdh_n; ++s) {
                if (cat_mode[feat + s] == 0) continue;
                const long c = tree_cell(node, SIZE_feat, feat + s, k);
                mdh_ug.s[s] = scan[2 * (c + TREE_BINS - 1)];
                mdh_uh.s[s] = scan[2 * (c + TREE_BINS - 1) + 1];
            }
            mdh_carry->tg[k] = mdh_ug.v;
            mdh_carry->th[k] = mdh_uh.v;
        }
    }
    mdh_carry->sp = tree_parent_vec(mdh_carry->tg, mdh_carry->th ARGS TREE_INV_ARG);
}
if (dir == 0 || mdh_carry->any_missing) {
    if ((int)bin < mdh_carry->at - 1) mdh_carry->at = 0;  /* behind the carried bins */
    if (mdh_carry->at == (int)bin && bin > 0) {  /* the next bin: one add a lane */
        for (int k = 0; k < TREE_OUTPUTS; ++k) {
            __global const tree_hist_t* p = hist + 2 * (tree_cell(node, SIZE_feat, feat, k) + bin);
            mdh_carry->g[k] = mdh_carry->g[k] + tree_feat_lanes(p, mdh_n);
            mdh_carry->h[k] = mdh_carry->h[k] + tree_feat_lanes(p + 1, mdh_n);
        }
        mdh_carry->at = (int)bin + 1;
    } else if (mdh_carry->at <= (int)bin) {
        for (int k = 0; k < TREE_OUTPUTS; ++k)
            tree_feat_sum_bins(hist, tree_cell(node, SIZE_feat, feat, k), mdh_n, mdh_carry->at, (int)bin + 1,
                               &mdh_carry->g[k], &mdh_carry->h[k]);
        mdh_carry->at = (int)bin + 1;
    }
    tree_hist_v mdh_lg[TREE_OUTPUTS], mdh_lh[TREE_OUTPUTS];
    for (int k = 0; k < TREE_OUTPUTS; ++k) {  /* the missing bin goes left */
        mdh_lg[k] = (dir == 0) ? mdh_carry->g[k] + mdh_carry->mg[k] : mdh_carry->g[k];
        mdh_lh[k] = (dir == 0) ? mdh_carry->h[k] + mdh_carry->mh[k] : mdh_carry->h[k];
        if (mdh_carry->cat) {
            union { tree_hist_t s[VEC]; tree_hist_v v; } mdh_ug, mdh_uh;
            mdh_ug.v = mdh_lg[k];
            mdh_uh.v = mdh_lh[k];
            for (int s = 0; s < mdh_n; ++s)
                if (cat_mode[feat + s] != 0)
                    tree_left_sums(scan, hist, tree_cell(node, SIZE_feat, feat + s, k), (int)bin, (int)dir,
                                   &mdh_ug.s[s], &mdh_uh.s[s]);
            mdh_lg[k] = mdh_ug.v;
            mdh_lh[k] = mdh_uh.v;
        }
    }
    tree_real_v mdh_g = tree_gain_vec(mdh_lg, mdh_lh, mdh_carry->tg, mdh_carry->th, mdh_carry->sp ARGS TREE_INV_ARG);
    mdh_g = ((dir == 0) ? mdh_carry->on0 : mdh_carry->on1) ? mdh_g : (tree_real_v)(-INFINITY);"""


# The largest of two lanes, and of a vector's, a NaN lane losing as the combine lets it (of +0 and -0 either).
_ARGMAX_MAX = """
#define TREE_MAX2(a, b) ((a) > (b) || (b) != (b) ? (a) : (b))
#if VEC == 2
#define TREE_HMAX(v) TREE_MAX2((v).s0, (v).s1)
#elif VEC == 4
#define TREE_HMAX(v) TREE_MAX2(TREE_MAX2((v).s0, (v).s1), TREE_MAX2((v).s2, (v).s3))
#else
#define TREE_HMAX(v) TREE_MAX2(TREE_MAX2(TREE_MAX2((v).s0, (v).s1), TREE_MAX2((v).s2, (v).s3)), \\
                               TREE_MAX2(TREE_MAX2((v).s4, (v).s5), TREE_MAX2((v).s6, (v).s7)))
#endif
/* Whether any lane is at least x (a NaN lane is not): the lanes' compare masks or-ed together, operators only */
#define TREE_GE_LANE(m, i) (m).s##i
#if VEC == 2
#define TREE_ANY_MASK(m) (TREE_GE_LANE(m, 0) | TREE_GE_LANE(m, 1))
#elif VEC == 4
#define TREE_ANY_MASK(m) (TREE_GE_LANE(m, 0) | TREE_GE_LANE(m, 1) | TREE_GE_LANE(m, 2) | TREE_GE_LANE(m, 3))
#else
#define TREE_ANY_MASK(m) (TREE_GE_LANE(m, 0) | TREE_GE_LANE(m, 1) | TREE_GE_LANE(m, 2) | TREE_GE_LANE(m, 3) \\
                          | TREE_GE_LANE(m, 4) | TREE_GE_LANE(m, 5) | TREE_GE_LANE(m, 6) | TREE_GE_LANE(m, 7))
#endif
#define TREE_ANY_GE(v, x) (TREE_ANY_MASK((v) >= (x)) != 0)
"""
# The vector form's fold of a block's gains (mdh_g, lane s the candidate mdh_i0 + 2 s SIZE_bin: feature feat + s):
# its best lane, the lowest of those of the largest gain (the lowest index among them), combined once, and only
# where it may win; its value the lane's own bits (equal gains, -0 and +0 among them, tie by index as the combine
# does). Lanes that are not scored hold -inf: the lowest lane of a block holds a feature.
_ARGMAX_BLOCK = """
    if (TREE_ANY_GE(mdh_g, acc.value)) {
        const tree_real_t mdh_m = TREE_HMAX(mdh_g);
        if (mdh_m >= acc.value) {
            tree_real_t mdh_gains[VEC];
            vstore_tree_real_v(mdh_g, mdh_gains);
            int s = 0;
            while (mdh_gains[s] != mdh_m) ++s;
            atom_t mdh_b;
            mdh_b.value = mdh_gains[s];
            mdh_b.index = mdh_i0 + 2 * s * (int)SIZE_bin;
            acc = mdh_combine(acc, mdh_b);
        }
    }
}"""


def inv_input(precision: str) -> list[Input]:
    """The quantized split kernels' extra input: 2^-k per (output, g|h), to turn integer sums into reals."""
    return [Input("inv_scale", "double", ("*",), gather=True)] if is_quantized(precision) else []


def split_reference(hist: np.ndarray, feature_mask: np.ndarray, params: SplitParams) -> Splits:
    """:func:`mdhom.trees.reference.best_splits` (the tree learner's reference of XGBoost's gain) on the kernels'
    (node, feat, output, bin, 2) layout."""
    from mdhom.trees import reference as ref
    return ref.best_splits(np.ascontiguousarray(hist.transpose(0, 1, 3, 2, 4)), feature_mask, params)


# ------------------------------------------------------------------------------------------------ heuristics
def scan_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """CPUs, and real-valued fits (exact in double: one lane along bins): a work-item walks a (node, feature)'s bins.
    GPUs' integer scans go along bins: a run of 4 bins a work-item (64 at most), 64 work-items a group, the features
    over as many groups as make them one step each (64 groups at most). H200, quantized, kernel alone at the learner's
    grid (64 groups of nodes), 1 / 128 nodes: 256 bins (the default max_bin=255 build) 0.036 / 0.065 ms a bin at a
    time with 16 features a group, 0.007 / 0.017 so; 64 bins 0.013 / 0.021 against 0.006 / 0.010 (chosen among 90
    configurations a bin count at 1, 8, 64 and 128 nodes)."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_feat"] = pow2_at_most(sizes["feat"], 64 if gpu else 8)
    cfg["NUM_WG_node"] = 64 if gpu else 2 * max(1, dev.compute_units)  # built at node=1, launched for batches
    if gpu and desc.atom == hist_gh_type("quantized"):
        items = pow2_at_most(min(dev.max_work_group_size, dev.max_work_item_sizes[0]), 64)
        wb = min(items, max(1, int(sizes.get("bin", 64)) // 4))
        wf = pow2_at_most(sizes["feat"], max(1, items // wb))
        steps = -(-int(sizes["feat"]) // wf)  # wide rows: at most 64 groups of features, each walking its share
        cfg["NUM_WI_bin"], cfg["NUM_WI_feat"], cfg["NUM_WG_feat"] = wb, wf, min(64, 1 << (steps - 1).bit_length())
        cfg["SCAN_TILED"] = 0
    return cfg


def score_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The nodes the build is sized for across work-groups (two a compute unit), and the features across as many more
    as make up that many (the root's build: 16 groups of features). Each work-group had walked all of a node's
    features, 256 groups whatever the nodes on GPUs (the H200's tune found 2.7-5.4x over that at kernel level, with
    features over 2-16 groups) and two a core on CPUs, where the searches of one split's two children then ran on two
    of a 16-core host's cores (its PoCL, 256 bins, kernel alone: 1, 2 and 8 nodes 0.17, 0.31 and 0.33 ms -> 0.06, 0.07
    and 0.14 with 16 groups of features).
    GPUs: bins and both directions across a work-group's items (the summed form: a block of two features a work-item,
    its bins walked in order). CPUs: one work-item walks a node's candidates
    (no barriers, no items idling on the default-right candidates a feature without missing values skips): 2-core
    EPYC, 64 nodes x 28 features x 61 bins, PoCL 3.47 -> 1.83 ms, Intel's runtime 1.62 -> 0.68 ms against 16 x 2
    items; and scores ``VEC`` features at once in vector types where the gain has a vector form (one a lane: 2-core
    Xeon, AVX-512, 256 nodes of binned Higgs rows, kernel alone, 8 bins a vector as the form was then: PoCL 6.0-6.3 ->
    2.4-2.7 ms, Intel's runtime 2.4 -> 1.8 ms), the widest whose blocks still give every group one, else the narrowest
    (a node's 28 features are 4 blocks of 8; at the root of a 16-core fit, 14 blocks of 2 over 8 groups). The
    checker (a GPU by its type) runs the vector form as CPUs do: spread over 64 lanes of one bin each, every lane
    walked its feature's bins again from the first, and a loss-guided round at 600 bins took Oclgrind 204 s in the
    score (3 s so)."""
    cfg = ones(desc, dev, sizes)
    groups = 2 * max(1, dev.compute_units)
    nodes, feat = max(1, int(sizes["node"])), max(1, int(sizes["feat"]))
    if desc.vector is not None and dev.type == "gpu" and not dev.checker:
        # a GPU's summed score (asked for: no GPU layout has it, :mod:`mdhom.trees.layouts`): a work-group a node, a
        # work-item a block of the narrowest vector walking its features' bins. Not VEC=1: that is the scalar fold,
        # which sums each candidate's bins from the first again (H100, 28 features: 0.92 ms a launch at 64 bins, 12.4
        # at 256; this 0.13 at 64)
        cfg["VEC"] = min(desc.vector.widths)
        blocks = -(-feat // cfg["VEC"])
        cfg["NUM_WI_feat"] = pow2_at_most(blocks, 32)
        cfg["NUM_WG_node"] = pow2_at_most(nodes, groups)
        cfg["NUM_WG_feat"] = pow2_at_most(-(-blocks // cfg["NUM_WI_feat"]), max(1, groups // cfg["NUM_WG_node"]))
        return cfg
    if desc.vector is not None:  # CPUs, and the checker as CPUs run it (Intel's runtime too: its default VEC is 1)
        # the widest blocks of features that still give the groups a block each (few nodes on many cores: narrower)
        widths = sorted(desc.vector.widths)
        cfg["VEC"] = next((w for w in reversed(widths) if nodes * -(-feat // w) >= groups), widths[0])
        feat = -(-feat // cfg["VEC"])  # blocks of features are what the groups share
    elif dev.type == "gpu":
        cfg["NUM_WI_bin"] = pow2_at_most(sizes["bin"], 64)
        cfg["NUM_WI_dir"] = 2
    cfg["NUM_WG_node"] = pow2_at_most(nodes, groups)  # built for 1 or a level's nodes, launched for more
    cfg["NUM_WG_feat"] = pow2_at_most(feat, min(16, max(1, groups // cfg["NUM_WG_node"])))
    return cfg


# ------------------------------------------------------------------------------------------------ tuner inputs
def _scan_inputs(s, rng):
    shape = (s["node"], s["feat"], s["output"], s["bin"], 2)
    if s.get("quantized"):  # a round's int32 lanes: every prefix sum within 2^30
        return {"hist": rng.integers(-(1 << 20), 1 << 20, size=shape).astype(np.int32)}
    return {"hist": rng.standard_normal(shape)}


def _score_inputs(s, rng):
    n, f, k, b = s["node"], s["feat"], s.get("n_outputs", 1), s["bin"] + 2
    g = rng.integers(-4, 5, size=(n, f, k, b))
    h = rng.integers(0, 4, size=(n, f, k, b))
    hist = np.stack([g, h], axis=-1)
    mask = np.ones(f, np.uint8)
    params = {"reg_lambda": 1.0, "reg_alpha": 0.0, "min_split_gain": 0.0, "min_child_weight": 1.0}
    if s.get("vector"):  # a numeric fit's: every feature's bins summed in the kernel (the scan is not read)
        params["cat_mode"] = np.zeros(f, np.uint8)
    if s.get("quantized"):  # integer sums, read as reals through 2^-k per (output, g|h)
        hist = hist.astype(np.int32)
        inv = np.ldexp(1.0, -np.array([[2, 1]] * k)).reshape(-1)
        return {"scan": split_scan_reference(hist), "hist": hist, "feature_mask": mask, "inv_scale": inv, **params}
    hist = hist.astype(np.float64)
    return {"scan": split_scan_reference(hist), "hist": hist, "feature_mask": mask, **params}


def _score_ref(a):
    hist = a["hist"]
    if "inv_scale" in a:
        hist = hist * a["inv_scale"].reshape(-1, 2)[None, None, :, None, :]
    params = SplitParams(a["reg_lambda"], a["reg_alpha"], a["min_split_gain"], a["min_child_weight"])
    sp = split_reference(hist, a["feature_mask"].astype(bool), params)
    n_cand = hist.shape[3] - 2
    out = np.zeros(hist.shape[0], split_type("double").dtype)
    out["value"] = sp.gain
    out["index"] = (sp.feature * n_cand + sp.bin) * 2 + np.where(sp.default_left, 0, 1)
    return out


_NODES = (1, 16, 128)
_SCAN_PINS = {"NUM_WI_bin": 1, "NUM_WG_bin": 1}  # np.cumsum's order
SCAN = KernelSpec(
    "tree_split_scan", scan_heuristic, exact_pins=_SCAN_PINS,
    # the float64 classes run in exact fits (precision="double"), under the pins: tuned under them
    # the classes of 64 bins, and (a fit at the default max_bin=255 scans 256) the root's and a level's again at 256
    tuning=Tuning(lambda s: split_scan(int(s["bin"]), class_precision(s)),
                  with_default_bins(with_quantized_classes({f"nodes_{n}": {"node": n, "feat": 28, "output": 1,
                                                                           "bin": 64} for n in _NODES}),
                                    [f"{v}nodes_{n}" for v in ("", "q_") for n in (_NODES[0], _NODES[-1])],
                                    bin=DEFAULT_BINS),
                  _scan_inputs, lambda a: gh_struct(split_scan_reference(a["hist"])),
                  fixed=lambda s: dict(_SCAN_PINS) if class_precision(s) == "double" else {},
                  doc="prefix sums of (g, h) over 64 or 256 bins per node, feature and output (float64, int32 lanes)"))
# each variant's classes of 64 bins, and (a fit at the default max_bin=255 scores 254 candidates a feature) the root's
# and a level's again at 256
_SCORE_CLASSES = with_default_bins(
    with_vector_classes(with_quantized_classes({f"nodes_{n}": {"node": n, "feat": 28, "bin": 62, "dir": 2,
                                                               "n_outputs": 1} for n in _NODES})),
    [f"{v}nodes_{n}" for v in ("", "q_", "vec_", "vec_q_") for n in (_NODES[0], _NODES[-1])], bin=DEFAULT_BINS - 2)
SCORE = KernelSpec(
    "tree_split_score", score_heuristic,
    tuning=Tuning(lambda s: split_score(int(s["bin"]) + 2, int(s.get("n_outputs", 1)), class_precision(s),
                                        vector=bool(s.get("vector"))),
                  _SCORE_CLASSES,
                  _score_inputs, _score_ref, applies=vector_class_applies,
                  doc="gain of every (feature, bin, direction) and the argmax per node, from float64 or int32 sums "
                      "of 64 or 256 bins (CPUs: in vector form)"))
SPECS = (SCAN, SCORE)


def score_spec(gain: Gain) -> KernelSpec:
    """The score kernel's spec for a gain (a plugged-in gain runs the XGBoost gain's heuristic, untuned)."""
    return SCORE if gain is XGBOOST_GAIN else KernelSpec(gain.kernel_name, score_heuristic)
