"""The histogram descriptions: (g, h) sums per (node, feature, output, bin) over a node's rows and sibling histograms
by subtraction, with their heuristics and tuner inputs (the arena that holds a tree's histograms on the device and
launches them is :mod:`mdhom.components.histogram_builder`).

The rows are kept grouped by node in position order (XGBoost's GPU-hist layout, LightGBM's ordered bins and
gradients; :mod:`mdhom.components.partition` keeps them so), so a node's histogram streams through one
contiguous range instead of gathering rows. A histogram of a split's larger child is parent - smaller child
(histogram subtraction), one launch for a whole batch of splits (``tree_hist_siblings``). The histograms of a whole
row (or a group of its features) per point are :mod:`mdhom.components.row_histogram`'s (int32) and
:mod:`mdhom.components.row_histogram_real`'s (float64 or float32).

Exact mode pins the row fold of ``tree_histogram`` to one lane, which adds rows in ascending order: the order
``np.bincount`` adds them in, so double-precision sums are the reference's bit for bit. Quantized histograms
(int32 fixed point) are exact in any order, so every configuration gives the reference's sums.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_histogram(_q)     node x feat x output x pos       concat, concat, concat, sum over the node's rows
tree_hist_subtract     i (flat histogram cells)         concat: parent - child
tree_hist_siblings     side x node x cell               concat: [child, parent - child] (a batch's histograms)
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import (
    DEFAULT_BINS,
    bin_ctype,
    bins_reader,
    defines,
    gh_struct,
    hist_ctype,
    hist_gh_type,
    is_quantized,
    with_default_bins,
)
from mdhom.components.quantize import quantize_gh
from mdhom.components.specs import KernelSpec, Tuning, elementwise, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce

# ------------------------------------------------------------------------------------------------ histogram
_HIST_BODY = """
const int mdh_cnt = slot_count[node];
if (pos < mdh_cnt) {{
    const long mdh_p = slot_begin[node] + pos;
#if TREE_ROW_INDEX
    const long mdh_r = ridx[mdh_p];
#else
    const long mdh_r = mdh_p;
#endif
    const tree_bin_t mdh_b = tree_bin_of(bins, mdh_r, feat, n_rows, SIZE_feat);
    const long mdh_gi = 2 * (mdh_r * SIZE_output + output);
{body}
}}
"""
_HIST_ADD = "    {target}.v[mdh_b].g {op} gh[mdh_gi];\n    {target}.v[mdh_b].h {op} gh[mdh_gi + 1];"
_HIST_ADD_PAIR = "    mdh_add_pair(&acc.v[mdh_b].g, gh[mdh_gi], gh[mdh_gi + 1]);"  # int32 lanes: PACKED may pack them
# rows left out by subsampling quantise to (0, 0): no atomics for them
_HIST_ATOMIC = "    mdh_atomic_add_pair(acc, mdh_b, gh[mdh_gi], gh[mdh_gi + 1]);"


def histogram_name(precision: str) -> str:
    """The quantized histogram is a kernel of its own for the tuner (integer lanes, PARTIALS_LOCAL)."""
    return "tree_histogram_q" if is_quantized(precision) else "tree_histogram"


@lru_cache(maxsize=32)
def histogram(n_bins: int, precision: str = "double", feature_major: bool = False,
              row_index: bool = False, sparse: bool = False) -> Description:
    """Sum of (g, h) per (node, feature, output, bin) over the rows of each listed node.

    ``bins`` and ``gh`` are in *position* order (row ``ridx[p]`` at position ``p``), so a node's rows are
    one contiguous range ``slot_begin .. slot_begin + slot_count`` and the pass streams through memory.
    ``row_index``: they stay in row order and are read through ``ridx`` (one copy of the bin matrix instead of
    three: wide data, where moving a row costs a byte per feature; :meth:`OpenCLTreeKernels._resolve_rows`).
    A node's positions hold its rows in ascending order either way (the partition is stable), so a pinned fold
    adds them in the reference's order. Output: (node, feat, output) atoms of ``n_bins`` (g, h) pairs, i.e.
    (node, feat, output, bin, 2).

    ``sparse``: ``bins`` are compressed rows in row order (:class:`mdhom.learn.sparse_bins.SparseBins`, with
    ``row_index``): the same cells, so the same sums.

    Quantized (``precision="quantized"``): (g, h) are int32 fixed point and so are the sums, which are then
    exact and independent of the order of addition; the fold may also run as integer atomics into one
    accumulator per work-group in local memory (tuning parameter ``PARTIALS_LOCAL``).

    Float64 builds are ragged along ``pos`` (each node folds its own ``slot_count`` rows, not the longest node's
    count): their exact fold is one work-item walking a (node, feature) in position order, which had walked every
    node to the longest one's count, testing each position. PoCL, 2-core EPYC, 20k rows, depth 6: a deep level's
    histograms 1.4-1.6 -> 0.5-0.8 ms. The quantized build keeps its source (and the GPUs' stored configurations
    their hash): its fits on CPUs read whole rows (:mod:`mdhom.components.row_histogram`).
    """
    hc = hist_ctype(precision)
    q = is_quantized(precision)
    return Description(
        histogram_name(precision), ["node", "feat", "output", "pos"], [Concat(), Concat(), Concat(), Reduce(SUM)],
        Array(hist_gh_type(precision), int(n_bins)),
        scalar=_HIST_BODY.format(body=_HIST_ADD.format(target="out", op="=")),
        accumulate=_HIST_BODY.format(body=_HIST_ADD_PAIR if q else _HIST_ADD.format(target="acc", op="+=")),
        accumulate_atomic=_HIST_BODY.format(body=_HIST_ATOMIC) if q else None, packed_pairs=q,
        extents={} if q else {"pos": "slot_count[node]"},
        # Declared as the root pass sees them (node 0 owns positions 0 .. SIZE_pos); a level's call passes the
        # buffers of every row with SIZE_pos its longest node's count (bind_sizes lets a gathered input be longer).
        inputs=[
            Input("bins", bin_ctype(n_bins), ("feat", "pos") if feature_major else ("pos", "feat"), gather=True),
            Input("gh", hc, ("pos", "output", 2), gather=True),
            Input("slot_begin", "int", ("node",), gather=True),
            Input("slot_count", "int", ("node",), gather=True),
        ] + ([Input("ridx", "int", ("*",), gather=True)] if row_index else []),
        params=[Param("n_rows", "int")],
        preamble=defines(precision, n_bins, feature_major=feature_major) + f"#define TREE_ROW_INDEX {int(row_index)}\n"
        + bins_reader(sparse),
    )



def histogram_reference(bins: np.ndarray, grad: np.ndarray, hess: np.ndarray, ridx: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, n_bins: int) -> np.ndarray:
    """(node, feat, output, bin, 2): :func:`mdhom.trees.reference.histograms` on ridx ranges (``bins``,
    ``grad``, ``hess`` in row order; the kernel reads them permuted by ``ridx``); float64, or integers for
    quantized gradients. Each node folded whole, as one launch of a histogram kernel adds its rows (a fit's real-lane
    nodes of more than a block go in blocks: :mod:`mdhom.components.histogram_blocks`)."""
    from mdhom.trees import reference as ref  # the tree learner's numpy reference

    row_node = np.full(bins.shape[0], -1, np.int64)
    for i, (b, c) in enumerate(zip(slot_begin, slot_count, strict=True)):
        row_node[ridx[b:b + c]] = i
    h = ref.histograms(bins, grad, hess, row_node, np.arange(len(slot_begin)), n_bins, blocked=False)  # (N, F, B, K, 2)
    return np.ascontiguousarray(h.transpose(0, 1, 3, 2, 4))


# ------------------------------------------------------------------------------------------------ subtraction
@lru_cache(maxsize=4)
def hist_subtract(precision: str = "double") -> Description:
    """parent - child over flat histogram cells: the sibling's histogram without a pass over rows."""
    r = hist_ctype(precision)
    return Description(
        "tree_hist_subtract", ["i"], [Concat()], r, "out = parent - child;",
        inputs=[Input("parent", r, ("i",)), Input("child", r, ("i",))],
    )


# ------------------------------------------------------------------------------------------------ siblings
@lru_cache(maxsize=4)
def hist_siblings(precision: str = "double") -> Description:
    """[child, parent - child] over flat histogram cells: a split level's histograms in one launch.

    ``child`` holds the built (smaller) children, one node each; their parents are ``parent[pidx[node]]``
    (``use_index``) or ``parent[pnode0 + node]``. Replaces a take, a subtraction and a concatenation. ``zero_next``:
    each point also zeroes its own cell of ``zero`` (written: 2 x nodes x cells, as many as it writes), where the
    next level's histograms (one a node of this level) will be added up, so their build launches no zeroing of its
    own (FLAT: a depth-wise look-ahead's levels launch one kernel fewer each). ``store_at`` >= 0: each point also
    writes its cell into ``store`` from cell ``store_at`` on, the region of the histogram arena that the output stands
    in for on a device whose views of the arena are copies (NVIDIA: ``Device.sub_buffers``): the launch fills both,
    and no copy of the output into the arena follows (a launch fewer a level; the search reads the output). ``store``
    may be the buffer ``parent`` reads: the parents' cells lie below ``store_at``.
    """
    r = hist_ctype(precision)
    return Description(
        "tree_hist_siblings", ["side", "node", "cell"], [Concat(), Concat(), Concat()], r,
        scalar="""
const long c = (long)node * SIZE_cell + cell;
const long at = ((long)side * SIZE_node + node) * SIZE_cell + cell;
if (zero_next) zero[at] = 0;
if (side == 0) {
    out = child[c];
} else {
    const long pn = use_index ? (long)pidx[node] : (long)pnode0 + node;
    out = parent[pn * SIZE_cell + cell] - child[c];
}
if (store_at >= 0) store[store_at + at] = out;""",
        inputs=[Input("child", r, ("node", "cell"), gather=True), Input("parent", r, (1,), gather=True),
                Input("pidx", "int", (1,), gather=True), Input("zero", r, (1,), gather=True, writes=True),
                Input("store", r, (1,), gather=True, writes=True)],
        params=[Param("use_index", "int"), Param("pnode0", "int"), Param("zero_next", "int"),
                Param("store_at", "long")],
        chunked=True,
    )


def hist_siblings_reference(parent: np.ndarray, child: np.ndarray, index: np.ndarray | None) -> np.ndarray:
    p = parent if index is None else parent[np.asarray(index, np.int64)]
    return np.concatenate([child, p - child], axis=0)



# ------------------------------------------------------------------------------------------------ heuristics
def histogram_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """One work-group per (feature, row chunk); quantized on a GPU with PARTIALS_LOCAL (the description's default
    where local atomics exist), its work-items scatter into one local histogram."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cu = max(1, dev.compute_units)
    cfg["NUM_WG_feat"] = sizes["feat"]
    if desc.name == "tree_histogram":
        cfg["NUM_WG_node"] = pow2_at_most(sizes["node"], 4 if gpu else 2)
        if gpu:
            cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 16
        else:
            # (node, feature) work-groups fill a CPU; rows over more groups made each group read every few rows of
            # the whole range (PoCL, 2-core EPYC, one node's float64 histogram of 28 features: 200k rows 5.09 -> 4.56
            # ms, 500k 19.2 -> 12.0, 1M 82.7 -> 25.2 against 4 groups over the rows); exact fits pin this anyway
            groups = sizes["feat"] * cfg["NUM_WG_node"]
            cfg["NUM_WG_pos"] = pow2_at_most(max(1, 2 * cu // groups), 64)
        return cfg
    cfg["NUM_WG_node"] = pow2_at_most(sizes["node"], 4 if gpu else 1)
    if gpu and cfg.get("PARTIALS_LOCAL"):
        cfg["NUM_WI_pos"], cfg["NUM_WG_pos"] = 256, 16
    elif gpu:
        cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 16
    else:
        # CPUs: (node, feature) work-groups are parallelism enough; rows folded in one lane per group
        # (PoCL, 200k x 28, 255 leaves: 24 ms per round vs 40 ms with rows over 4 groups and a combine)
        cfg["NUM_WG_pos"] = pow2_at_most(max(1, 2 * cu // max(1, sizes["feat"])), 64)
    return cfg


# ------------------------------------------------------------------------------------------------ tuner inputs
def _binned_like_higgs(rng: np.random.Generator, n: int, n_features: int, n_bins: int = 64) -> np.ndarray:
    """(n, n_features) uint8 bins shaped like the bench's Higgs data binned at ``n_bins`` - 1 + missing: most features
    spread evenly over the bins, every fourth one from the fourth (a fifth of them) three-valued with 60 / 25 / 15% of
    the rows (the b-tag-like features). Local atomics contend on such features (a warp's rows mostly share one bin), so
    the tuner must see them. H200, whole-row histogram of 10^7 rows in 64 nodes: on uniform bins 0.32 ms without
    ROTATE against 0.52 with it, which a tune would have kept, while a fit of the bench's rows ran its histograms
    slower without (3.25 -> 3.47 ms a lossguide round, 10.5M rows); on these bins 0.28 without, 0.24 with."""
    bins = rng.integers(0, n_bins, size=(n, n_features), dtype=np.uint8)
    for f in range(3, n_features, 4)[: max(1, n_features // 5)]:
        bins[:, f] = rng.choice(np.arange(3, dtype=np.uint8), size=n, p=(0.6, 0.25, 0.15))
    return bins


def node_slots(n_nodes: int, per: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(slot_begin, slot_count) of ``n_nodes`` nodes packed into ``n_nodes * per`` positions, as a level of a tree
    holds them: the first node ``per`` rows (the extent the build is sized for), the others from ``per`` down to a
    64th of it (children of uneven splits)."""
    count = np.full(n_nodes, per, np.int64)
    count[1:] = np.maximum(1, per * np.exp(-rng.random(n_nodes - 1) * np.log(64))).astype(np.int64)
    begin = np.cumsum(count) - count
    return begin.astype(np.int32), count.astype(np.int32)


def _hist_inputs(s, rng):
    """Float64 (g, h) of ``node`` nodes of up to ``pos`` rows each (:func:`node_slots`)."""
    nodes, per, f, k, b = s.get("node", 1), s["pos"], s["feat"], s["output"], s.get("n_bins", 64)
    n = nodes * per
    gh = np.stack([rng.standard_normal((n, k)), rng.random((n, k))], axis=-1)
    begin, count = node_slots(nodes, per, rng)
    return {"bins": _binned_like_higgs(rng, n, f, b), "gh": gh, "slot_begin": begin, "slot_count": count,
            "n_rows": n, "n_bins": b}


def hist_q_inputs(s, rng):
    """Int32 (g, h) at the scale a round of ``node * pos`` rows uses, in ``node`` nodes (:func:`node_slots`)."""
    nodes, per, f, k, b = s.get("node", 1), s["pos"], s["feat"], s["output"], s.get("n_bins", 64)
    n = nodes * per
    gq, hq, _ = quantize_gh(rng.standard_normal((n, k)), rng.random((n, k)))
    gh = np.stack([gq, hq], axis=-1).astype(np.int32)
    begin, count = node_slots(nodes, per, rng)
    return {"bins": _binned_like_higgs(rng, n, f, b), "gh": gh, "slot_begin": begin, "slot_count": count,
            "n_rows": n, "n_bins": b}


def _hist_ref(a):
    bins, gh = a["bins"], a["gh"]
    h = histogram_reference(bins, gh[..., 0], gh[..., 1], np.arange(gh.shape[0]), a["slot_begin"],
                            a["slot_count"], a["n_bins"])
    return gh_struct(h)


_ROWS = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}
# the builds the learner makes (HistogramBuilder, NODE_CLASSES): the root pass (one node owning every row) and a
# level's few and many nodes sharing 10^6 rows. Without the node classes a fit's two level builds found no class
# (a class of one node says nothing of parallelism over nodes), so every CPU fit in double precision warned "not
# tuned for tree_histogram: run mdhom tune", which no tune could silence.
_CLASSES = ({f"root_{k}": {"node": 1, "feat": 28, "output": 1, "pos": v, "n_bins": 64} for k, v in _ROWS.items()}
            | {f"rows_1e6_nodes_{c}": {"node": c, "feat": 28, "output": 1, "pos": 10**6 // c, "n_bins": 64}
               for c in (8, 64)})
# float64 fits (a CPU's default precision) at the default max_bin=255 build 256-bin code: its own classes, the root
# of 10^5 and 10^6 rows and a level's 8 and 64 nodes
_DOUBLE_CLASSES = with_default_bins(_CLASSES, ("root_1e5", "root_1e6", "rows_1e6_nodes_8", "rows_1e6_nodes_64"),
                                    n_bins=DEFAULT_BINS)


def _double_applies(device: Device, s: Mapping[str, int]) -> bool:
    """The 256-bin classes where fits run float64 by default (CPUs; a GPU's default is quantized, its float64 fits
    take the 64-bin classes' configurations)."""
    from mdhom.trees.estimators import resolve_precision  # here: importing mdhom.trees imports the components

    return int(s.get("n_bins", 64)) != DEFAULT_BINS or resolve_precision(device, None) == "double"

EXACT_ROWS = {"NUM_WI_pos": 1, "NUM_WG_pos": 1}  # a row at a time, in order: the numpy reference's sums
HISTOGRAM = KernelSpec(
    "tree_histogram", histogram_heuristic, exact_pins=EXACT_ROWS,
    # float64 histograms run in exact fits (the default of precision="double"), under the pins: tuned under them (a
    # 3-minute PoCL tune had timed its 1M-row class at 73 ms with the rows over 4 groups, an order no fit runs)
    tuning=Tuning(lambda s: histogram(int(s.get("n_bins", 64))), _DOUBLE_CLASSES, _hist_inputs, _hist_ref,
                  fixed=EXACT_ROWS, applies=_double_applies,
                  doc="(g, h) histograms of 63 or 255 bins + missing, 28 features, of one node's rows or a level's"))
# int32 lanes, exact: the tuner compares bit for bit; its space includes PARTIALS_LOCAL from the description
HISTOGRAM_Q = KernelSpec(
    "tree_histogram_q", histogram_heuristic,
    tuning=Tuning(lambda s: histogram(int(s.get("n_bins", 64)), "quantized"), _CLASSES, hist_q_inputs, _hist_ref,
                  doc="int32 fixed-point (g, h) histograms (precision='quantized'), 63 bins + missing, 28 features"))
# the learner subtracts with tree_hist_siblings (a batch's children in one launch); kept as the plain md_hom
# form of the subtraction, tested on every device, and not tuned: nothing runs it in a fit
SUBTRACT = KernelSpec("tree_hist_subtract", elementwise(gpu_groups_per_cu=4))
def siblings_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """GPUs: a batch's histograms are a few hundred thousand cells, 256 work-items a group, 4 groups per compute
    unit (H100, 10.5M rows, lossguide: 3.7 ms per round with 64 per compute unit, 0.6 ms with 4), spread over the
    cells and the (side, node) pairs. CPUs: a work-item
    walks one (side, node)'s cells, a loop the compiler vectorises, with work-groups over sides and nodes (PoCL, 2-core
    Xeon, kernel alone: 26 nodes 0.37-0.41 -> 0.06-0.07 ms, 64 nodes 1.15-1.21 -> 0.19-0.20 ms, 2 nodes 0.017 ->
    0.005 ms against 64 work-items a group strided over the cells; Intel's runtime 0.49-0.58 -> 0.39-0.43 ms)."""
    cfg = ones(desc, dev, sizes)
    if dev.type == "gpu":
        # a node's cells across work-groups of 256 and the (side, node) pairs across the rest of 4 groups a compute
        # unit: with every group on the cells (the elementwise heuristic), a node's 3584 cells kept 14 of 528 groups
        # busy, each walking every (side, node) pair in turn (H200, 10.5M rows: 0.42 -> 0.13 ms a loss-guided round,
        # 0.15 -> 0.08 depth-wise)
        cfg["NUM_WI_cell"] = 256
        cfg["NUM_WG_cell"] = max(1, -(-int(sizes["cell"]) // 256))
        cfg["NUM_WG_side"] = 2
        cfg["NUM_WG_node"] = max(1, 4 * max(1, dev.compute_units) // (2 * cfg["NUM_WG_cell"]))
        return cfg
    cfg["NUM_WG_side"] = 2
    cfg["NUM_WG_node"] = 4 * max(1, dev.compute_units)
    return cfg


# reads whole lookup buffers (the arena): not tunable until the generator has any-extent inputs
SIBLINGS = KernelSpec("tree_hist_siblings", siblings_heuristic)
SPECS = (HISTOGRAM, HISTOGRAM_Q, SUBTRACT, SIBLINGS)


def histogram_spec(precision: str) -> KernelSpec:
    return HISTOGRAM_Q if is_quantized(precision) else HISTOGRAM
