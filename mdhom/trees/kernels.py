"""The tree learner's kernels as md_hom descriptions, each next to the numpy function it must reproduce.

Every kernel is an index space, a scalar function and one combine operator per dimension (DESIGN.md
section 3); what varies per fit (number of bins, outputs, precision, bin layout) is fixed when the
description is made, what varies per call (rows, nodes) is a size, so one build serves a whole fit.

Rows are kept grouped by node in ``ridx`` (XGBoost's GPU-hist layout): node ``n`` owns positions
``begin[n] .. begin[n] + count[n]`` and, because partitioning is stable, its rows stay in ascending order.
The binned matrix and the (g, h) pairs are kept in the same position order (LightGBM's ordered bins and
ordered gradients), so a node's histogram streams through one contiguous range instead of gathering rows.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_histogram         node x feat x output x pos       concat, concat, concat, sum over the node's rows
tree_hist_subtract     i (flat histogram cells)         concat: parent - child
tree_split_scan        node x feat x output x bin       concat, concat, concat, inclusive prefix sum over bins
tree_split_score       node x feat x bin x dir          concat, argmax over (feat, bin, dir)
tree_split_sums        node x output                    concat: the host's packed result of a split search
tree_hist_siblings     side x node x cell               concat: [child, parent - child] (the level's histograms)
tree_partition_flags   pos                              inclusive prefix sum of the go-left flags
tree_partition_dest    pos                              concat: new position and node of the row at pos
tree_gather_gh         pos x output                     concat: (g, h) of row ridx[pos]
tree_gradients_<loss>  row x output                     concat, concat: (g, h) from the resident scores
tree_score_update      row x output                     concat: score + value of the row's leaf
tree_predict_bins      row x output                     concat: score + value of the leaf a binned row reaches
=====================  ===============================  ======================================================

Some inputs are lookup buffers whose extent is no dimension (the binned matrix and (g, h) pairs, the
node -> split-table map). The generator checks every input's extent against a dimension or a fixed integer,
so such inputs are declared ``shape=(1,)`` and bound to a one-element view of the whole buffer
(:func:`opaque`); see the report for the generator feature this works around.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import lru_cache
from importlib import resources

import numpy as np

from mdhom.mdh import ARGMAX, MAX, SUM, Array, Concat, Description, Input, Param, Reduce, Scan, Struct
from mdhom.trees import reference as ref
from mdhom.trees.backend import SplitParams

PRECISIONS = ("double", "single", "quantized")
# the real type of gradients, scores and gains per mode: "quantized" computes them in double and keeps only the
# histograms (and their scans and differences) as int32 fixed point
REALS = {"double": np.float64, "single": np.float32, "quantized": np.float64}
# ints per row of the split table: node, feature, bin, default_left, left, right, begin, count, which child's
# range goes to the next histogram's slot table (0 left, 1 right, -1 neither), and the split's first index in the
# partition's compact index space (the split nodes' ranges end to end: the running sum of count)
SPLIT_FIELDS = 10


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


def split_type(precision: str) -> Struct:
    return Struct("split_t", (("value", real_ctype(precision)), ("index", "int")))


def _snippet(name: str) -> str:
    return resources.files("mdhom.kernels").joinpath("trees", name).read_text()


def _defines(precision: str, n_bins: int, n_outputs: int = 1, feature_major: bool = False) -> str:
    r = real_ctype(precision)
    return (
        f"typedef {r} tree_real_t;\ntypedef {hist_ctype(precision)} tree_hist_t;\n"
        f"#define TREE_QUANTIZED {int(is_quantized(precision))}\n"
        f"#define TREE_BINS {int(n_bins)}\n#define TREE_OUTPUTS {int(n_outputs)}\n"
        f"#define TREE_FEATURE_MAJOR {int(bool(feature_major))}\n#define TREE_SPLIT_FIELDS {SPLIT_FIELDS}\n"
    )


# ------------------------------------------------------------------------------------------------ histogram
_HIST_BODY = """
const int mdh_cnt = slot_count[node];
if (pos < mdh_cnt) {{
    const long mdh_p = slot_begin[node] + pos;
    const uchar mdh_b = tree_bin_of(bins, mdh_p, feat, n_rows, SIZE_feat);
    const long mdh_gi = 2 * (mdh_p * SIZE_output + output);
{body}
}}
"""
_HIST_ADD = "    {target}.v[mdh_b].g {op} gh[mdh_gi];\n    {target}.v[mdh_b].h {op} gh[mdh_gi + 1];"
# rows left out by subsampling quantise to (0, 0): no atomics for them
_HIST_ATOMIC = """    const int mdh_g = gh[mdh_gi], mdh_h = gh[mdh_gi + 1];
    if (mdh_g != 0) atomic_add(&acc->v[mdh_b].g, mdh_g);
    if (mdh_h != 0) atomic_add(&acc->v[mdh_b].h, mdh_h);"""


def histogram_name(precision: str) -> str:
    """The quantized histogram is a kernel of its own for the tuner (integer lanes, PARTIALS_LOCAL)."""
    return "tree_histogram_q" if is_quantized(precision) else "tree_histogram"


@lru_cache(maxsize=32)
def histogram(n_bins: int, precision: str = "double", feature_major: bool = False) -> Description:
    """Sum of (g, h) per (node, feature, output, bin) over the rows of each listed node.

    ``bins`` and ``gh`` are in *position* order (row ``ridx[p]`` at position ``p``), so a node's rows are
    one contiguous range ``slot_begin .. slot_begin + slot_count`` and the pass streams through memory.
    Output: (node, feat, output) atoms of ``n_bins`` (g, h) pairs, i.e. (node, feat, output, bin, 2).

    Quantized (``precision="quantized"``): (g, h) are int32 fixed point and so are the sums, which are then
    exact and independent of the order of addition; the fold may also run as integer atomics into one
    accumulator per work-group in local memory (tuning parameter ``PARTIALS_LOCAL``).
    """
    hc = hist_ctype(precision)
    q = is_quantized(precision)
    return Description(
        histogram_name(precision), ["node", "feat", "output", "pos"], [Concat(), Concat(), Concat(), Reduce(SUM)],
        Array(hist_gh_type(precision), int(n_bins)),
        scalar=_HIST_BODY.format(body=_HIST_ADD.format(target="out", op="=")),
        accumulate=_HIST_BODY.format(body=_HIST_ADD.format(target="acc", op="+=")),
        accumulate_atomic=_HIST_BODY.format(body=_HIST_ATOMIC) if q else None,
        # Declared as the root pass sees them (node 0 owns positions 0 .. SIZE_pos), so the tuner can make
        # inputs; deeper levels pass views of the same buffers whose leading extent is the largest count.
        inputs=[
            Input("bins", "uchar", ("feat", "pos") if feature_major else ("pos", "feat"), gather=True),
            Input("gh", hc, ("pos", "output", 2), gather=True),
            Input("slot_begin", "int", ("node",), gather=True),
            Input("slot_count", "int", ("node",), gather=True),
        ],
        params=[Param("n_rows", "int")],
        preamble=_defines(precision, n_bins, feature_major=feature_major) + _snippet("partition.cl"),
    )


def histogram_reference(bins: np.ndarray, grad: np.ndarray, hess: np.ndarray, ridx: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, n_bins: int) -> np.ndarray:
    """(node, feat, output, bin, 2): :func:`mdhom.trees.reference.histograms` on ridx ranges (``bins``,
    ``grad``, ``hess`` in row order; the kernel reads them permuted by ``ridx``); float64, or integers for
    quantized gradients."""
    row_node = np.full(bins.shape[0], -1, np.int64)
    for i, (b, c) in enumerate(zip(slot_begin, slot_count, strict=True)):
        row_node[ridx[b:b + c]] = i
    h = ref.histograms(bins, grad, hess, row_node, np.arange(len(slot_begin)), n_bins)  # (N, F, B, K, 2)
    return np.ascontiguousarray(h.transpose(0, 1, 3, 2, 4))


@lru_cache(maxsize=4)
def gather_gh(precision: str = "double") -> Description:
    """Gradients and hessians in position order: (g, h) of row ``ridx[pos]`` for every output."""
    r = real_ctype(precision)
    return Description(
        "tree_gather_gh", ["pos", "output"], [Concat(), Concat()], gh_type(precision),
        scalar="const long i = (long)ridx[pos] * SIZE_output + output; out.g = grad[i]; out.h = hess[i];",
        inputs=[Input("ridx", "int", ("pos",), gather=True), Input("grad", r, (1,), gather=True),
                Input("hess", r, (1,), gather=True)],
    )


# ------------------------------------------------------------------------------------------------ quantisation
@lru_cache(maxsize=1)
def gh_absmax() -> Description:
    """max |g| and max |h| per output over the positions (NaN counts as +inf, so the host sees it): what the
    fixed-point scale of a round is chosen from. MAX is exact, so the result does not depend on the order."""
    return Description(
        "tree_gh_absmax", ["pos", "output"], [Reduce(MAX), Concat()], gh_type("double"),
        scalar="const long i = 2 * ((long)pos * SIZE_output + output);\n"
               "out.g = isnan(gh[i]) ? INFINITY : fabs(gh[i]);\n"
               "out.h = isnan(gh[i + 1]) ? INFINITY : fabs(gh[i + 1]);",
        inputs=[Input("gh", "double", ("pos", "output", 2), gather=True)],
    )


@lru_cache(maxsize=1)
def quantize_gh() -> Description:
    """(g, h) as int32 fixed point: ``rint(g * scale)`` with ``scale`` a power of two per (output, g|h).

    Multiplying by a power of two is exact and rint is correctly rounded, so every device and numpy
    (:func:`mdhom.trees.reference.quantize`) produce the same integers."""
    return Description(
        "tree_quantize_gh", ["pos", "output"], [Concat(), Concat()], GHQ,
        scalar="const long i = 2 * ((long)pos * SIZE_output + output);\n"
               "out.g = (int)rint(gh[i] * scale[2 * output]);\n"
               "out.h = (int)rint(gh[i + 1] * scale[2 * output + 1]);",
        inputs=[Input("gh", "double", ("pos", "output", 2), gather=True),
                Input("scale", "double", ("output", 2), gather=True)],
    )


# ------------------------------------------------------------------------------------------------ subtraction
@lru_cache(maxsize=4)
def hist_subtract(precision: str = "double") -> Description:
    """parent - child over flat histogram cells: the sibling's histogram without a pass over rows."""
    r = hist_ctype(precision)
    return Description(
        "tree_hist_subtract", ["i"], [Concat()], r, "out = parent - child;",
        inputs=[Input("parent", r, ("i",)), Input("child", r, ("i",))],
    )


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
def _split_params(precision: str) -> list[Param]:
    r = real_ctype(precision)
    return [Param("reg_lambda", r), Param("reg_alpha", r), Param("min_split_gain", r), Param("min_child_weight", r)]


@lru_cache(maxsize=32)
def split_score(n_bins: int, n_outputs: int, precision: str = "double") -> Description:
    """Gain of every candidate (feature, bin, default direction) and the best per node.

    The argmax index ``(feat * n_cand + bin) * 2 + dir`` (dir 0 = default left) orders candidates exactly
    as the tie rule of :mod:`mdhom.trees.backend` does, and ARGMAX keeps the lower index on equal values,
    so the winner does not depend on the order of combination. ``bin`` has ``n_bins - 2`` candidates.
    Quantized: left, right and total sums are formed in int32 and converted to double as ``(double)q *
    inv_scale`` (``inv_scale`` (output, 2), powers of two) just before the gain, as the reference does.
    """
    hc = hist_ctype(precision)
    k, b = int(n_outputs), int(n_bins)
    return Description(
        "tree_split_score", ["node", "feat", "bin", "dir"], [Concat(), Reduce(ARGMAX), Reduce(ARGMAX), Reduce(ARGMAX)],
        split_type(precision),
        scalar="out.index = (int)(((long)feat * SIZE_bin + bin) * 2 + dir);\n"
               "out.value = -INFINITY;\n"
               "if (feature_mask[feat]) out.value = tree_gain(scan, hist, node, SIZE_feat, feat, (int)bin, (int)dir,"
               " reg_lambda, reg_alpha, min_split_gain, min_child_weight TREE_INV_ARG);",
        inputs=[
            Input("scan", hc, ("node", "feat", k, b, 2), gather=True),
            Input("hist", hc, ("node", "feat", k, b, 2), gather=True),
            Input("feature_mask", "uchar", ("feat",), gather=True),
        ] + _inv_input(precision),
        params=_split_params(precision),
        preamble=_defines(precision, b, k) + _snippet("split.cl"),
    )


def _inv_input(precision: str) -> list[Input]:
    """The quantized split kernels' extra input: 2^-k per (output, g|h), to turn integer sums into reals."""
    return [Input("inv_scale", "double", (1,), gather=True)] if is_quantized(precision) else []


def _best_layout(precision: str) -> tuple[int, int, int]:
    """(ints per split_t, int offset of its index field, reals per split_t): how tree_split_sums reads it."""
    dt = split_type(precision).dtype
    return dt.itemsize // 4, dt.fields["index"][1] // 4, dt.itemsize // np.dtype(REALS[precision]).itemsize


def result_type(precision: str) -> Struct:
    """One (node, output) entry of a split search's result: everything the host reads back per step."""
    r = real_ctype(precision)
    return Struct("lr_t", (("lg", r), ("lh", r), ("rg", r), ("rh", r), ("tg", r), ("th", r), ("gain", r),
                           ("index", "int")))


@lru_cache(maxsize=32)
def split_sums(n_bins: int, n_outputs: int, precision: str = "double") -> Description:
    """The packed result of a split search per (node, output): gain and index of the node's best split
    (repeated over outputs), its left and right (g, h), and the node's total (g, h) (the prefix sum of
    feature 0 over all bins). One read of this array is the only sync of a split step."""
    r, hc = real_ctype(precision), hist_ctype(precision)
    k, b = int(n_outputs), int(n_bins)
    stride, offset, rstride = _best_layout(precision)
    return Description(
        "tree_split_sums", ["node", "output"], [Concat(), Concat()], result_type(precision),
        scalar=f"""
const int idx = best[node * {stride} + {offset}];
const int n_cand = TREE_BINS - 2;
const long cell0 = ((long)node * n_feat * TREE_OUTPUTS + output) * TREE_BINS;
const tree_hist_t tg0 = scan[2 * (cell0 + TREE_BINS - 1)];
const tree_hist_t th0 = scan[2 * (cell0 + TREE_BINS - 1) + 1];
out.tg = TREE_REAL_OF(tg0, output, 0);
out.th = TREE_REAL_OF(th0, output, 1);
out.gain = best_value[node * {rstride}];
out.index = idx;
out.lg = 0; out.lh = 0; out.rg = 0; out.rh = 0;
if (idx >= 0 && idx < n_feat * n_cand * 2) {{
    const long cell = (((long)node * n_feat + idx / (2 * n_cand)) * TREE_OUTPUTS + output) * TREE_BINS;
    tree_hist_t lg, lh;
    tree_left_sums(scan, hist, cell, (idx / 2) % n_cand, idx % 2, &lg, &lh);
    const tree_hist_t tg = scan[2 * (cell + TREE_BINS - 1)];
    const tree_hist_t th = scan[2 * (cell + TREE_BINS - 1) + 1];
    out.lg = TREE_REAL_OF(lg, output, 0); out.lh = TREE_REAL_OF(lh, output, 1);
    out.rg = TREE_REAL_OF(tg - lg, output, 0); out.rh = TREE_REAL_OF(th - lh, output, 1);
}}""",
        inputs=[
            Input("scan", hc, (1,), gather=True),
            Input("hist", hc, (1,), gather=True),
            Input("best", "int", ("node", stride), gather=True),
            Input("best_value", r, (1,), gather=True),
        ] + _inv_input(precision),
        params=[Param("n_feat", "int")],
        preamble=_defines(precision, b, k) + _snippet("split.cl"),
    )


# ------------------------------------------------------------------------------------------------ siblings
@lru_cache(maxsize=4)
def hist_siblings(precision: str = "double") -> Description:
    """[child, parent - child] over flat histogram cells: a split level's histograms in one launch.

    ``child`` holds the built (smaller) children, one node each; their parents are ``parent[pidx[node]]``
    (``use_index``) or ``parent[pnode0 + node]``. Replaces a take, a subtraction and a concatenation.
    """
    r = hist_ctype(precision)
    return Description(
        "tree_hist_siblings", ["side", "node", "cell"], [Concat(), Concat(), Concat()], r,
        scalar="""
const long c = (long)node * SIZE_cell + cell;
if (side == 0) {
    out = child[c];
} else {
    const long pn = use_index ? (long)pidx[node] : (long)pnode0 + node;
    out = parent[pn * SIZE_cell + cell] - child[c];
}""",
        inputs=[Input("child", r, ("node", "cell"), gather=True), Input("parent", r, (1,), gather=True),
                Input("pidx", "int", (1,), gather=True)],
        params=[Param("use_index", "int"), Param("pnode0", "int")],
    )


def hist_siblings_reference(parent: np.ndarray, child: np.ndarray, index: np.ndarray | None) -> np.ndarray:
    p = parent if index is None else parent[np.asarray(index, np.int64)]
    return np.concatenate([child, p - child], axis=0)


# ------------------------------------------------------------------------------------------------ a round
LOSS_KINDS = {"squared": 0, "logistic": 1, "softmax": 2}


def _hex(x: float) -> str:
    return float(x).hex()


def _loss_defines(kind: str, precision: str) -> str:
    from mdhom.learn import losses

    exact = precision == "double"
    lines = [f"#define TREE_LOSS {LOSS_KINDS[kind]}", f"#define TREE_EXP_EXACT {int(exact)}",
             f"#define TREE_EPS {_hex(losses._EPS)}"]
    if exact:
        lines += [f"#define TREE_INV_LN2 {_hex(losses.INV_LN2)}", f"#define TREE_LN2_HI {_hex(losses.LN2_HI)}",
                  f"#define TREE_LN2_LO {_hex(losses.LN2_LO)}", f"#define TREE_EXP_MIN {_hex(losses.EXP_MIN)}"]
        lines += [f"#define TREE_EXP_C{i} {_hex(c)}" for i, c in enumerate(losses.EXP_COEFFS)]
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=16)
def gradients(kind: str, precision: str = "double") -> Description:
    """(g, h) at every (row, output) from the resident raw scores: :meth:`mdhom.learn.losses.Loss.gradients`.

    Rows with ``keep[row] == 0`` (row subsampling, when ``use_keep``) get g = h = 0; weights multiply both.
    ``y`` is (row, output) for squared error and logistic, (row, 1) class indices for softmax; ``factor``
    is softmax's K / (K - 1). Written in position order = row order (the state right after reset_rows).
    """
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be one of {', '.join(LOSS_KINDS)}, got {kind!r}")
    r = real_ctype(precision)
    ycols: int | str = 1 if kind == "softmax" else "output"
    return Description(
        f"tree_gradients_{kind}", ["row", "output"], [Concat(), Concat()], gh_type(precision),
        scalar="""
tree_real_t g = 0, h = 0;
if (keep[use_keep ? row : 0]) {
    tree_loss_gh(scores, y, (long)row, (int)output, (int)SIZE_output, factor, &g, &h);
    g = g * w[row];
    h = h * w[row];
}
out.g = g; out.h = h;""",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("y", r, ("row", ycols), gather=True),
                Input("w", r, ("row",), gather=True), Input("keep", "uchar", (1,), gather=True)],
        params=[Param("use_keep", "int"), Param("factor", r)],
        preamble=f"typedef {r} tree_real_t;\n" + _loss_defines(kind, precision) + _snippet("loss.cl"),
    )


@lru_cache(maxsize=4)
def score_update(precision: str = "double") -> Description:
    """scores + value[leaf of the row]: a tree's contribution to the training scores, by the row -> node map
    the partition left behind (no leaf indices go to the host)."""
    r = real_ctype(precision)
    return Description(
        "tree_score_update", ["row", "output"], [Concat(), Concat()], r,
        scalar="out = scores[(long)row * SIZE_output + output] + value[(long)row_node[row] * SIZE_output + output];",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("row_node", "int", ("row",), gather=True),
                Input("value", r, (1,), gather=True)],
    )


@lru_cache(maxsize=1)
def relabel() -> Description:
    """node_map[row_node[row]]: every row's node renamed in one pass. Loss-guided growth searches the splits
    of several leaves per launch, some of them speculatively, and numbers nodes as it goes; at the end of a tree
    the rows move to the final tree's leaf ids (``mdhom.trees.grower``)."""
    return Description(
        "tree_relabel", ["row"], [Concat()], "int",
        scalar="out = node_map[row_node[row]];",
        inputs=[Input("row_node", "int", ("row",), gather=True), Input("node_map", "int", (1,), gather=True)],
    )


TREE_FIELDS = 5  # ints per node of a tree table: feature, bin, default_left, left, right (-1 at leaves)


@lru_cache(maxsize=32)
def predict_bins(n_bins: int, precision: str = "double", feature_major: bool = False) -> Description:
    """scores + value of the leaf each binned row reaches in one tree (the eval sets' scores, per round).

    Walks the tree table (TREE_FIELDS ints per node) with the training split rule on bins; ``bins`` is
    (row, feat) or (feat, row) as the training matrix."""
    r = real_ctype(precision)
    return Description(
        "tree_predict_bins", ["row", "output"], [Concat(), Concat()], r,
        scalar=f"""
int node = 0;
while (tree[{TREE_FIELDS} * node + 3] >= 0) {{
    __global const int* t = tree + {TREE_FIELDS} * node;
    const uchar b = tree_bin_of(bins, row, t[0], SIZE_row, n_feat);
    const int go_left = (b == TREE_BINS - 1) ? (t[2] != 0) : ((int)b <= t[1]);
    node = go_left ? t[3] : t[4];
}}
out = scores[(long)row * SIZE_output + output] + value[(long)node * SIZE_output + output];""",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("bins", "uchar", (1,), gather=True),
                Input("tree", "int", (1,), gather=True), Input("value", r, (1,), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=_defines(precision, n_bins, feature_major=feature_major) + _snippet("partition.cl"),
    )


def tree_table(tree) -> np.ndarray:  # noqa: ANN001 - a mdhom.trees.model.Tree
    """(n_nodes, TREE_FIELDS) int32: the table tree_predict_bins walks."""
    return np.stack([tree.feature, tree.bin, tree.default_left.astype(np.int32), tree.left, tree.right],
                    axis=1).astype(np.int32)


def split_reference(hist: np.ndarray, feature_mask: np.ndarray, params: SplitParams):
    """:func:`mdhom.trees.reference.best_splits` on the kernels' (node, feat, output, bin, 2) layout."""
    return ref.best_splits(np.ascontiguousarray(hist.transpose(0, 1, 3, 2, 4)), feature_mask, params)


# ------------------------------------------------------------------------------------------------ partition
_PART_TAB = Input("split_tab", "int", (1,), gather=True)  # kernels/trees/partition.cl


@lru_cache(maxsize=32)
def partition_flags(n_bins: int, feature_major: bool = False) -> Description:
    """Inclusive prefix count of the rows that go to a left child, over the split nodes' rows laid end to end
    (index ``pos`` of split ``s`` is position ``begin + pos - first``; ``bins`` in position order, as for the
    histogram). Only the rows of split nodes are visited, wherever their ranges lie."""
    return Description(
        "tree_partition_flags", ["pos"], [Scan(SUM)], "int",
        scalar="""
__global const int* t = split_tab + TREE_SPLIT_FIELDS * tree_split_at(pos, split_tab, n_split);
out = tree_goes_left(tree_bin_of(bins, t[6] + (pos - t[9]), t[1], n_rows, n_feat), t);""",
        inputs=[Input("bins", "uchar", (1,), gather=True), _PART_TAB],
        params=[Param("n_split", "int"), Param("n_rows", "int"), Param("n_feat", "int")],
        preamble=_defines("double", n_bins, feature_major=feature_major) + _snippet("partition.cl"),
    )


DEST = Struct("dest_t", (("pos", "int"), ("node", "int")))


@lru_cache(maxsize=32)
def partition_dest(n_bins: int, feature_major: bool = False) -> Description:
    """Where the row at compact index pos goes, as a compact index (the same split's range), and its new node: a
    stable partition of each split node's rows (left rows first, in their old order), from the inclusive flag
    counts ``incl``."""
    return Description(
        "tree_partition_dest", ["pos"], [Concat()], DEST,
        scalar="""
__global const int* t = split_tab + TREE_SPLIT_FIELDS * tree_split_at(pos, split_tab, n_split);
const int first = t[9], count = t[7];
const int base = (first > 0) ? incl[first - 1] : 0;
const int n_left = incl[first + count - 1] - base;
const int f = incl[pos] - ((pos > 0) ? incl[pos - 1] : 0);
const int left_before = incl[pos] - f - base;
if (f) { out.pos = first + left_before; out.node = t[4]; }
else { out.pos = first + n_left + (pos - first - left_before); out.node = t[5]; }""",
        inputs=[_PART_TAB, Input("incl", "int", ("pos",), gather=True)], params=[Param("n_split", "int")],
        preamble=_defines("double", n_bins, feature_major=feature_major) + _snippet("partition.cl"),
    )


def partition_reference(bins: np.ndarray, ridx: np.ndarray, row_node: np.ndarray, split_tab: np.ndarray,
                        n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(new ridx, new row_node, left count per split) after a stable partition of every split node's range."""
    ridx, row_node = ridx.copy(), row_node.copy()
    counts = np.zeros(len(split_tab), np.int32)
    for s, (node, f, b, d, lo, hi, begin, count) in enumerate(split_tab[:, :8]):
        rows = ridx[begin:begin + count].copy()
        assert np.all(row_node[rows] == node)
        go = ref.goes_left(bins[rows, f], b, bool(d), n_bins)
        ridx[begin:begin + count] = np.concatenate([rows[go], rows[~go]])
        row_node[rows] = np.where(go, lo, hi)
        counts[s] = int(go.sum())
    return ridx, row_node, counts


# ------------------------------------------------------------------------------------------------ tuner
def _hist_inputs(s, rng):
    n, f, k, b = s["pos"], s["feat"], s["output"], s.get("n_bins", 64)
    bins = rng.integers(0, b, size=(n, f)).astype(np.uint8)
    gh = np.stack([rng.standard_normal((n, k)), rng.random((n, k))], axis=-1)
    return {"bins": bins, "gh": gh, "slot_begin": np.array([0], np.int32), "slot_count": np.array([n], np.int32),
            "n_rows": n}


def _hist_ref(a, n_bins: int = 64):
    bins, gh = a["bins"], a["gh"]
    h = histogram_reference(bins, gh[..., 0], gh[..., 1], np.arange(gh.shape[0]), a["slot_begin"],
                            a["slot_count"], n_bins)
    return _gh_struct(h)


def _hist_q_inputs(s, rng):
    """The root pass of a round in quantized mode: int32 (g, h) at the scale a round of ``pos`` rows uses."""
    n, f, k, b = s["pos"], s["feat"], s["output"], s.get("n_bins", 64)
    g, h = rng.standard_normal((n, k)), rng.random((n, k))
    am = np.stack([np.abs(g).max(0), np.abs(h).max(0)], -1)
    scale, _ = ref.quantization_scales(ref.quantization_exponents(am, n))
    gh = np.stack([ref.quantize(g, scale[:, 0]), ref.quantize(h, scale[:, 1])], axis=-1).astype(np.int32)
    return {"bins": rng.integers(0, b, size=(n, f)).astype(np.uint8), "gh": gh,
            "slot_begin": np.array([0], np.int32), "slot_count": np.array([n], np.int32), "n_rows": n}


def _hist_q_ref(a, n_bins: int = 64):
    bins, gh = a["bins"], a["gh"]
    h = histogram_reference(bins, gh[..., 0], gh[..., 1], np.arange(gh.shape[0]), a["slot_begin"],
                            a["slot_count"], n_bins)
    return _gh_struct(h)


def _gh_struct(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape[:-1], (GHQ if x.dtype.kind in "iu" else gh_type("double")).dtype)
    out["g"], out["h"] = x[..., 0], x[..., 1]
    return out


def _score_inputs(s, rng):
    n, f, k, b = s["node"], s["feat"], s.get("n_outputs", 1), s["bin"] + 2
    g = rng.integers(-4, 5, size=(n, f, k, b)).astype(np.float64)
    h = rng.integers(0, 4, size=(n, f, k, b)).astype(np.float64)
    hist = np.stack([g, h], axis=-1)
    mask = np.ones(f, np.uint8)
    return {"scan": split_scan_reference(hist), "hist": hist, "feature_mask": mask, "reg_lambda": 1.0,
            "reg_alpha": 0.0, "min_split_gain": 0.0, "min_child_weight": 1.0}


def _score_ref(a):
    hist = a["hist"]
    params = SplitParams(a["reg_lambda"], a["reg_alpha"], a["min_split_gain"], a["min_child_weight"])
    sp = split_reference(hist, a["feature_mask"].astype(bool), params)
    n_cand = hist.shape[3] - 2
    out = np.zeros(hist.shape[0], split_type("double").dtype)
    out["value"] = sp.gain
    out["index"] = (sp.feature * n_cand + sp.bin) * 2 + np.where(sp.default_left, 0, 1)
    return out


def _backend_heuristic(desc: Description, device, sizes) -> dict[str, int]:  # noqa: ANN001
    from mdhom.trees.opencl_backend import heuristic_config  # late: the backend imports this module

    return heuristic_config(desc, device, sizes)


def register_tunables() -> None:
    """Register the tree kernels with :mod:`mdhom.tunable` (under the names the backend looks up).

    ``tree_histogram`` is tuned on the root pass (one node owning every row), the only level whose inputs
    the generic tuner can make with the declared extents. Exact mode pins its row folds to one lane, so a
    tuned histogram configuration only serves ``exact=False``.
    """
    from mdhom import tunable

    def _register(kernel: tunable.TunableKernel, replace: bool = False) -> None:
        # the tuner starts from, and must beat, what the backend runs untuned
        tunable.register(dataclasses.replace(kernel, baseline=_backend_heuristic), replace=replace)

    rows = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}
    _register(tunable.TunableKernel(
        "tree_histogram", lambda s: histogram(int(s.get("n_bins", 64))),
        {f"root_{k}": {"node": 1, "feat": 28, "output": 1, "pos": v, "n_bins": 64} for k, v in rows.items()},
        _hist_inputs, _hist_ref, doc="(g, h) histograms of 63 bins + missing, 28 features, one node's rows",
    ), replace=True)
    # the quantized histogram (int32 lanes, exact: the tuner compares bit for bit); its space includes
    # PARTIALS_LOCAL (local-memory partials with 32-bit atomics) from the description itself
    _register(tunable.TunableKernel(
        "tree_histogram_q", lambda s: histogram(int(s.get("n_bins", 64)), "quantized"),
        {f"root_{k}": {"node": 1, "feat": 28, "output": 1, "pos": v, "n_bins": 64} for k, v in rows.items()},
        _hist_q_inputs, _hist_q_ref,
        doc="int32 fixed-point (g, h) histograms (precision='quantized'), 63 bins + missing, 28 features",
    ), replace=True)
    _register(tunable.TunableKernel(
        "tree_split_scan", lambda s: split_scan(int(s["bin"])),
        {f"nodes_{n}": {"node": n, "feat": 28, "output": 1, "bin": 64} for n in (1, 16, 128)},
        lambda s, rng: {"hist": rng.standard_normal((s["node"], s["feat"], s["output"], s["bin"], 2))},
        lambda a: _gh_struct(split_scan_reference(a["hist"])),
        doc="prefix sums of (g, h) over 64 bins per node, feature and output",
    ), replace=True)
    _register(tunable.TunableKernel(
        "tree_split_score", lambda s: split_score(int(s["bin"]) + 2, int(s.get("n_outputs", 1))),
        {f"nodes_{n}": {"node": n, "feat": 28, "bin": 62, "dir": 2, "n_outputs": 1} for n in (1, 16, 128)},
        _score_inputs, _score_ref, doc="gain of every (feature, bin, direction) and the argmax per node",
    ), replace=True)
    _register(tunable.TunableKernel(
        "tree_hist_subtract", hist_subtract("double"),
        {f"nodes_{n}": {"i": n * 28 * 64 * 2} for n in (1, 16, 128)},
        lambda s, rng: {"parent": rng.standard_normal(s["i"]), "child": rng.standard_normal(s["i"])},
        lambda a: a["parent"] - a["child"], doc="sibling histograms by subtraction",
    ), replace=True)

    # the per-round kernels: element-wise over rows (x outputs); tuned at the Higgs shape (one output) and a
    # softmax shape. The tuner's inputs have the declared extents, so its score update puts every row in
    # leaf 0 of a one-value table (the kernel's lookup is still exercised); tree_predict_bins and
    # tree_hist_siblings read whole lookup buffers and wait for the generator's any-extent inputs.
    from mdhom.learn import losses

    def grad_inputs(kind: str) -> Callable:
        def make(s, rng):
            n, k = s["row"], s["output"]
            y = rng.integers(0, k, (n, 1)) if kind == "softmax" else rng.integers(0, 2, (n, k))
            return {"scores": rng.standard_normal((n, k)), "y": y.astype(np.float64), "w": rng.random(n) + 0.5,
                    "keep": np.ones(1, np.uint8), "use_keep": 0, "factor": k / (k - 1.0) if kind == "softmax" else 1.0}
        return make

    def grad_ref(kind: str) -> Callable:
        def reference(a):
            k = a["scores"].shape[1]
            loss = losses.make_loss({"squared": "reg:squarederror", "logistic": "binary:logistic",
                                     "softmax": "multi:softmax"}[kind], k)
            g, h = loss.gradients(a["y"], a["scores"], a["w"])
            return _gh_struct(np.stack([g, h], axis=-1))
        return reference

    for kind in LOSS_KINDS:
        outs = {"squared": (1,), "logistic": (1, 4), "softmax": (4,)}[kind]
        _register(tunable.TunableKernel(
            f"tree_gradients_{kind}", gradients(kind),
            {f"rows_{k}_out{o}": {"row": v, "output": o} for k, v in rows.items() for o in outs},
            grad_inputs(kind), grad_ref(kind), doc=f"(g, h) of the {kind} loss from the resident scores",
        ), replace=True)
    _register(tunable.TunableKernel(
        "tree_score_update", score_update("double"),
        {f"rows_{k}": {"row": v, "output": 1} for k, v in rows.items()},
        lambda s, rng: {"scores": rng.standard_normal((s["row"], 1)), "row_node": np.zeros(s["row"], np.int32),
                        "value": rng.standard_normal(1)},
        lambda a: a["scores"] + a["value"][a["row_node"]][:, None], doc="training scores + the new tree's leaf values",
    ), replace=True)

    # binning raw features on the device (mdhom.trees.bin_kernel), row-major as CPUs run it: 63 edges per feature
    from mdhom.learn.binning import BinMapper
    from mdhom.trees.bin_kernel import bin_features

    def bin_inputs(s, rng):
        n, f = s["row"], s["feat"]
        x = rng.standard_normal((n, f))
        x[rng.random((n, f)) < 0.01] = np.nan
        edges = np.sort(rng.standard_normal((f, 62)), axis=1)
        return {"x": x, "edges": edges.reshape(-1), "first": np.arange(0, 62 * f, 62, dtype=np.int32),
                "count": np.full(f, 62, np.int32), "nan_bin": 63}

    def bin_ref(a):  # the host mapper with these edges (its NaN bin is a["nan_bin"], 63)
        mapper = BinMapper(a["nan_bin"])
        mapper.edges = list(a["edges"].reshape(a["x"].shape[1], -1))
        return mapper.transform(a["x"])

    _register(tunable.TunableKernel(
        "tree_bin_features", bin_features("double", False),
        {f"rows_{k}": {"row": v, "feat": 28} for k, v in rows.items() if v <= 10**6},
        bin_inputs, bin_ref, doc="raw features to bins (a binary search over each feature's edges), 28 features",
    ), replace=True)


try:
    register_tunables()
except ImportError:  # the registry is optional for the learner
    pass
