"""The predictor: the scores of binned rows (eval sets during training) updated tree by tree on the device, by
walking each new tree's table (:data:`mdhom.components.tables.TREE_NODE`) with the training split rule on bins.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_predict_bins      row x output                     concat: score + value of the leaf a binned row reaches
tree_predict_forest    row x output x tree              concat, concat, sum over trees: new rows' raw scores
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components.lanes import bin_ctype, bins_reader, defines, real_ctype, vector_forms
from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.components.tables import TREE_NODE, tree_table, with_left_tables
from mdhom.components.workspace import Bound, Workspace
from mdhom.devices import Device
from mdhom.learn.binning import category_tables
from mdhom.learn.sparse_bins import SparseBins
from mdhom.mdh import SUM, Concat, Description, Input, Param, Reduce, Struct, Vector


@lru_cache(maxsize=32)
def predict_bins(n_bins: int, precision: str = "double", feature_major: bool = False,
                 sparse: bool = False) -> Description:
    """scores + value of the leaf each binned row reaches in one tree (the eval sets' scores, per round).

    Walks the tree table (TREE_NODE records, :mod:`mdhom.components.tables`) with the training split rule on
    bins; ``bins`` is (row, feat) or (feat, row) as the training matrix."""
    r = real_ctype(precision)
    return Description(
        "tree_predict_bins", ["row", "output"], [Concat(), Concat()], r,
        scalar="""
__global const tree_node_t* nodes = (__global const tree_node_t*)tree;
int node = 0;
while (nodes[node].left >= 0) {
    __global const tree_node_t* t = nodes + node;
    const tree_bin_t b = tree_bin_of(bins, row, t->feature, SIZE_row, n_feat);
    const int go_left = (b == TREE_BINS - 1) ? (t->default_left != 0)
        : (t->cats >= 0) ? (((__global const uchar*)tree)[t->cats + b] != 0) : ((int)b <= t->bin);
    node = go_left ? t->left : t->right;
}
out = scores[(long)row * SIZE_output + output] + value[(long)node * SIZE_output + output];""",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("bins", bin_ctype(n_bins), (1,), gather=True),
                Input("tree", "int", (1,), gather=True), Input("value", r, (1,), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=defines(precision, n_bins, feature_major=feature_major) + bins_reader(sparse),
    )


# reads whole lookup buffers (bins, the tree table): not tunable until the generator has any-extent inputs
PREDICT = KernelSpec("tree_predict_bins", elementwise("row"))


@dataclass
class _EvalSet:
    n: int
    bins: cl.Buffer
    buffers: tuple[cl.Buffer, cl.Buffer]
    launch: list[Bound]
    cur: int = 0


class Predictor:
    """Binned evaluation matrices kept on the device with their raw scores, updated by each new tree."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.d_predict = predict_bins(ws.n_bins, ws.rp, ws.feature_major, ws.sparse)
        self.sets: list[_EvalSet] = []

    def add(self, bins: np.ndarray | cl_array.Array | SparseBins, base_score: np.ndarray) -> int:
        """Keep an evaluation matrix: numpy bins (n_rows, n_features) of the training bins' dtype, a device
        array in the training layout, or :class:`mdhom.learn.sparse_bins.SparseBins`; its raw scores start at
        ``base_score``. Returns its handle. Sets are kept in the training bins' layout (compressed rows where the
        training bins are)."""
        ws = self.ws
        if isinstance(bins, SparseBins) and not ws.sparse:
            bins = bins.toarray()
        elif ws.sparse and not isinstance(bins, SparseBins):
            # a dense set (the device binner's output is rows x features: sparse fits read rows x features)
            bins = SparseBins.from_dense(bins.get() if isinstance(bins, cl_array.Array) else np.asarray(bins),
                                         ws.n_bins)
        on_device = isinstance(bins, cl_array.Array)
        if on_device:
            self.ws.adopt(bins)
        shape = bins.shape[::-1] if on_device and ws.feature_major else bins.shape
        if bins.dtype != ws.bin_dtype or len(shape) != 2 or shape[1] != ws.n_features:
            raise ValueError(f"eval bins must be {ws.bin_dtype} (n_rows, n_features) like the training bins")
        n, k = int(shape[0]), ws.n_outputs
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(ws.real)
        comp = ws.build(PREDICT, self.d_predict, {"row": max(1, n), "output": k})
        q = ws.queue
        if isinstance(bins, SparseBins):
            d_bins = cl_array.to_device(q, bins.packed()).base_data
        elif on_device:
            d_bins = ws.buf(bins.nbytes)
            if bins.nbytes:
                cl.enqueue_copy(q, d_bins, bins.base_data, byte_count=bins.nbytes, src_offset=bins.offset)
        else:
            host = np.ascontiguousarray(bins.T if ws.feature_major else bins)
            d_bins = cl_array.to_device(q, host if host.size else np.zeros(1, ws.bin_dtype)).base_data
        mf = cl.mem_flags
        bufs = (cl.Buffer(ws.device.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=base), ws.buf(base.nbytes))
        ws.ensure("tree_table", 64 * TREE_NODE.dtype.itemsize)
        ws.ensure("tree_value", 64 * k * ws.real.itemsize)
        launch = [Bound(ws, comp, lambda s=s, o=o: (o, dict(scores=s, bins=d_bins, tree=ws["tree_table"],
                                                            value=ws["tree_value"])))
                  for s, o in (bufs, bufs[::-1])]
        self.sets.append(_EvalSet(n, d_bins, bufs, launch))
        return len(self.sets) - 1

    def update(self, handle: int, tree: object) -> np.ndarray:
        """Add the leaf values ``tree`` (a model Tree with split bins) gives each row of the set; the new scores."""
        ws = self.ws
        ev = self.sets[handle]
        if ev.n:
            table = tree_table(tree)
            ws.ensure("tree_table", table.nbytes)
            ws.ensure("tree_value", tree.n_nodes * ws.n_outputs * ws.real.itemsize)
            ws.put("tree", ws["tree_table"], table, np.uint8)
            ws.put("tree_value", ws["tree_value"], np.asarray(tree.value, np.float64), ws.real)
            ws.record("tree_predict_bins", ev.launch[ev.cur]({"row": ev.n, "output": ws.n_outputs},
                                                            n_feat=ws.n_features))
            ev.cur = 1 - ev.cur
        out = np.empty((max(1, ev.n), ws.n_outputs), ws.real)
        return ws.read(out, ev.buffers[ev.cur])[: ev.n]


# ------------------------------------------------------------------------------------------------ raw rows
# one node of a fitted forest, walked on raw features: go left when x <= threshold, NaN by default_left, and for a
# categorical split (cats >= 0) by the byte of its left table at offset cats (x is then the position of the code
# among the feature's known codes); left and right are ids in the whole forest, left < 0 at leaves
FOREST_NODE = Struct("forest_node_t", (("threshold", "double"), ("feature", "int"), ("default_left", "int"),
                                       ("left", "int"), ("right", "int"), ("cats", "int")))


# the split of node t for a row's value x (t a __global const forest_node_t*, forest the table's bytes)
_FOREST_GO_LEFT = """
int go_left;
if (isnan(x)) go_left = t->default_left;
else if (t->cats >= 0) go_left = ((__global const uchar*)forest)[t->cats + (int)x] != 0;
else go_left = x <= t->threshold;"""
# VEC rows' walks of one tree at once: a CPU core overlaps their chains of dependent loads, where one row's walk waits
# for each node before it can load the next (XGBoost's CPU predictor walks blocks of 64 rows a tree). FIXED_DEPTH 0:
# a step moves every row not yet at a leaf, until none moves; 1: the tree's depth in steps, a leaf's row staying put
# by a select, no branch on whether a row is done. 2-core EPYC, 200k rows x 100 trees of depth 6, 8 rows a block:
# PoCL 581 ms a row at a time, 224 stepping, 540 at the fixed depth; Intel's runtime 285, 118, 241 (a hand-written
# walk in work-groups of 8 had Intel's the other way round, 566 against 140): a tuning parameter
_FOREST_VEC = """
__global const forest_node_t* nodes = (__global const forest_node_t*)forest;
int at[VEC];
for (int s = 0; s < VEC; ++s) at[s] = root[tree];
#if FIXED_DEPTH
for (int step = 0; step < depth[tree]; ++step) {
    for (int s = 0; s < VEC; ++s) {
        __global const forest_node_t* t = nodes + at[s];
        const double x = X[(long)(row + s) * n_feat + t->feature];""" + _FOREST_GO_LEFT + """
        const int next = go_left ? t->left : t->right;
        at[s] = t->left >= 0 ? next : at[s];
    }
}
#else
for (int moved = 1; moved;) {
    moved = 0;
    for (int s = 0; s < VEC; ++s) {
        __global const forest_node_t* t = nodes + at[s];
        if (t->left >= 0) {
            const double x = X[(long)(row + s) * n_feat + t->feature];""" + _FOREST_GO_LEFT + """
            at[s] = go_left ? t->left : t->right;
            moved = 1;
        }
    }
}
#endif
for (int s = 0; s < VEC; ++s) out[s] = value[(long)at[s] * SIZE_output + output];"""


@lru_cache(maxsize=8)
def predict_forest(x_ctype: str = "double") -> Description:
    """The raw scores' tree part of new rows: per (row, output), the sum over trees of the value of the leaf the
    row reaches, added from zero in tree order (exact mode pins the tree dimension to one lane: the numpy path's
    order, so both give the same bits).

    Its vector form along ``row`` (what CPUs build, :func:`mdhom.components.lanes.vector_forms`) walks ``VEC`` rows'
    paths through a tree at once and keeps their sums apart, each in tree order (the same bits); ``FIXED_DEPTH``
    chooses how (``_FOREST_VEC``); ``depth`` holds each tree's depth (:func:`tree_depths`).

    ``x_ctype`` "float" reads float32 rows as the caller has them: a float's value is a double's exactly, so every
    comparison with a split's double threshold, and so every leaf, is what the float64 copy would give, without the
    copy (twice the rows' bytes on the host and across the bus: XGBoost's ``inplace_predict`` takes float32 too)."""
    return Description(
        "tree_predict_forest", ["row", "output", "tree"], [Concat(), Concat(), Reduce(SUM)], "double",
        scalar="""
__global const forest_node_t* nodes = (__global const forest_node_t*)forest;
int node = root[tree];
while (nodes[node].left >= 0) {
    __global const forest_node_t* t = nodes + node;
    const double x = X[(long)row * n_feat + t->feature];""" + _FOREST_GO_LEFT.replace("\n", "\n    ") + """
    node = go_left ? t->left : t->right;
}
out = value[(long)node * SIZE_output + output];""",
        inputs=[Input("X", x_ctype, ("*",), gather=True), Input("forest", "int", ("*",), gather=True),
                Input("root", "int", ("tree",), gather=True), Input("value", "double", ("*",), gather=True),
                Input("depth", "int", ("tree",), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=FOREST_NODE.declaration("forest_node_t") + "\n",
        switches=("FIXED_DEPTH",), chunked=True, vector=Vector("row", _FOREST_VEC),
    )


def forest_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """Rows over work-items; CPUs walk 8 rows a block, stepped until none moves (2-core EPYC, 200k rows x 100 trees
    of depth 6, the walk with its copies: PoCL 581 -> 224 ms, Intel's runtime 285 -> 118 ms; the fixed depth 540 and
    241 ms)."""
    cfg = elementwise("row")(desc, dev, sizes)
    cfg["CHUNKED"] = int(dev.type == "cpu")
    cfg["VEC"] = 8 if vector_forms(dev) else 1
    cfg["FIXED_DEPTH"] = 0
    return cfg


def random_forest_inputs(s: Mapping[str, int], rng: np.random.Generator, n_feat: int = 28,
                         max_depth: int = 6) -> dict[str, object]:
    """A forest of ``s["tree"]`` random trees of up to ``max_depth`` levels (a node splits with probability 0.85, the
    root always), ``s["output"]`` values a leaf, and ``s["row"]`` rows of ``n_feat`` features, 2% missing: the
    tuner's inputs of the predictor (a boosted forest's shape at the defaults: depth 6)."""
    recs, roots, depths = [], [], []
    at = 0
    for _ in range(s["tree"]):
        roots.append(at)
        level = {0: 0}  # node id (in this tree) -> its depth
        nodes: list[tuple[int, int, float, int, int]] = []  # (left, right, threshold, feature, default_left)
        i = 0
        while i < len(level):
            d = level[i]
            if d < max_depth and (i == 0 or rng.random() < 0.85):
                left, right = len(level), len(level) + 1
                level[left] = level[right] = d + 1
                nodes.append((at + left, at + right, float(rng.standard_normal()), int(rng.integers(n_feat)),
                              int(rng.integers(2))))
            else:
                nodes.append((-1, -1, 0.0, 0, 0))
            i += 1
        depths.append(max(level.values()))
        rec = np.zeros(len(nodes), FOREST_NODE.dtype)
        rec["left"], rec["right"], rec["threshold"], rec["feature"], rec["default_left"] = zip(*nodes, strict=True)
        rec["cats"] = -1
        recs.append(rec)
        at += len(nodes)
    raw = with_left_tables(np.concatenate(recs), None, None)
    X = rng.standard_normal((s["row"], n_feat))
    X[rng.random(X.shape) < 0.02] = np.nan
    return {"X": X.reshape(-1), "forest": raw.view(np.int32), "root": np.asarray(roots, np.int32),
            "value": rng.standard_normal(at * s["output"]), "depth": np.asarray(depths, np.int32), "n_feat": n_feat}


def forest_reference(a: Mapping[str, object]) -> np.ndarray:
    """The numpy walk of :func:`random_forest_inputs`' forest (numeric splits), sums over trees in tree order."""
    roots, n_feat = np.asarray(a["root"]), int(a["n_feat"])
    X = np.asarray(a["X"]).reshape(-1, n_feat)
    raw = np.asarray(a["forest"]).view(np.uint8)  # the records alone: no categorical split
    n_nodes = len(raw) // FOREST_NODE.dtype.itemsize
    nodes = raw[: n_nodes * FOREST_NODE.dtype.itemsize].view(FOREST_NODE.dtype)
    value = np.asarray(a["value"]).reshape(n_nodes, -1)
    left, right, feature, threshold, default_left = (np.ascontiguousarray(nodes[f]) for f in (
        "left", "right", "feature", "threshold", "default_left"))
    flat, base = X.reshape(-1), np.arange(len(X), dtype=np.int64) * n_feat
    out = np.zeros((len(X), value.shape[1]))
    for root in roots:
        at = np.full(len(X), root)
        live = np.arange(len(X)) if left[root] >= 0 else np.arange(0)  # the rows not at a leaf yet
        while live.size:
            node = at[live]
            x = flat[base[live] + feature[node]]
            go_left = np.where(np.isnan(x), default_left[node] != 0, x <= threshold[node])
            at[live] = np.where(go_left, left[node], right[node])
            live = live[left[at[live]] >= 0]
        out = out + value[at]
    return out


# new rows' predictions: 10^5 and 10^6 rows of 100 trees, binary and 4 outputs, the cheap classes first (a CPU's
# 10^6-row trials take seconds, and the last class is the one a tune's deadline cuts: PoCL's had no 4-output class,
# and every multiclass prediction warned); 10^7 rows took the H200's tune minutes to make and walk in numpy
_FOREST_CLASSES = {"rows_1e5_trees_100": {"row": 10**5, "output": 1, "tree": 100},
                   "rows_1e5_trees_100_out4": {"row": 10**5, "output": 4, "tree": 100},
                   "rows_1e6_trees_100": {"row": 10**6, "output": 1, "tree": 100}}
FOREST = KernelSpec("tree_predict_forest", forest_heuristic, exact_pins={"NUM_WI_tree": 1, "NUM_WG_tree": 1},
                    tuning=Tuning(lambda s: predict_forest(), _FOREST_CLASSES, random_forest_inputs, forest_reference,
                                  doc="new rows' raw scores: the sums over trees of their leaves' values",
                                  fixed={"NUM_WI_tree": 1, "NUM_WG_tree": 1}))
SPECS = (PREDICT, FOREST)


def forest_table(trees: list, categories: list[np.ndarray | None] | None) -> tuple[np.ndarray, np.ndarray,
                                                                                   np.ndarray]:
    """(node table as bytes, root of each tree, leaf values (n_nodes, n_outputs)) of fitted model trees: node ids
    run over the whole forest; categorical splits' left tables follow the records (over the feature's known
    codes' positions)."""
    n = sum(t.n_nodes for t in trees)
    rec = np.zeros(n, FOREST_NODE.dtype)
    roots = np.zeros(max(1, len(trees)), np.int32)
    at = 0
    for i, t in enumerate(trees):
        sl = slice(at, at + t.n_nodes)
        roots[i] = at
        rec["threshold"][sl] = t.threshold
        rec["feature"][sl] = np.maximum(t.feature, 0)
        rec["default_left"][sl] = t.default_left
        rec["left"][sl] = np.where(t.left >= 0, t.left + at, -1)
        rec["right"][sl] = np.where(t.right >= 0, t.right + at, -1)
        at += t.n_nodes
    row, table = category_tables(trees, categories) if categories is not None else (None, None)
    raw = with_left_tables(rec, row, table)
    raw = np.concatenate([raw, np.zeros((-raw.size) % 4, np.uint8)])  # whole ints for the kernel's int view
    values = np.concatenate([t.value for t in trees]) if trees else np.zeros((1, 1))
    return raw, roots, np.ascontiguousarray(values, np.float64)


def tree_depths(trees: list) -> np.ndarray:
    """Each tree's depth (edges from the root to its deepest leaf; 0 for a lone leaf), int32: the steps of the
    vector form's fixed-depth walk."""
    out = np.zeros(max(1, len(trees)), np.int32)
    for i, t in enumerate(trees):
        inner = np.flatnonzero(np.asarray(t.left) >= 0)
        kids = np.concatenate([np.asarray(t.left)[inner], np.asarray(t.right)[inner]])
        depth = np.zeros(t.n_nodes, np.int32)
        while True:  # a level a pass, all nodes at once (a random forest's trees hold thousands)
            new = depth.copy()
            new[kids] = np.concatenate([depth[inner], depth[inner]]) + 1
            if np.array_equal(new, depth):
                break
            depth = new
        out[i] = depth.max(initial=0)
    return out


class ForestPredictor:
    """Raw scores of new rows on a device (``predict`` of a fitted model): the forest's tables go up once, the
    rows in blocks that fit the device's largest allocation. ``config`` overrides the device's configuration
    (tests); it is looked up like a fit's kernels' otherwise, exact order pinned."""

    def __init__(self, device: object, trees: list, categories: list[np.ndarray | None] | None,
                 n_outputs: int, config: Mapping[str, int] | None = None) -> None:
        from mdhom.devices import get_device

        self.device = get_device(device)
        self.n_trees, self.n_outputs = len(trees), int(n_outputs)
        raw, roots, values = forest_table(trees, categories)
        q = self.device.queue
        self.d_forest = cl_array.to_device(q, raw.view(np.int32))
        self.d_root = cl_array.to_device(q, roots)
        self.d_value = cl_array.to_device(q, values.reshape(-1))
        self.d_depth = cl_array.to_device(q, tree_depths(trees))
        self.desc = predict_forest()
        self.ws = Workspace(self.device, exact=True, configs={self.desc.name: config} if config is not None else None)

    def _build(self, dtype: np.dtype):  # noqa: ANN202 - a mdhom.mdh.Computation
        """The walk of rows of ``dtype`` (float64, or float32 as the caller has them), built at its first use (the
        workspace keeps it): a caller of float32 rows never builds the float64 walk."""
        sizes = {"row": 1 << 20, "output": self.n_outputs, "tree": max(1, self.n_trees)}
        desc = predict_forest("float" if dtype == np.float32 else "double")
        return self.ws.build(FOREST, desc, sizes, role=str(dtype))

    @property
    def config_source(self) -> str:
        """Where the float64 walk's configuration came from (tuned file, defaults, heuristic, override)."""
        self._build(np.dtype(np.float64))
        return self.ws.config_sources[f"{self.desc.name} (float64)"]

    def tree_sums(self, X: np.ndarray) -> np.ndarray:
        """(n_rows, n_outputs) sums over trees of the leaf values of float64 or float32 ``X`` (categorical columns
        already as positions among their known codes, NaN where missing); other types are read as float64."""
        n, f = X.shape
        out = np.zeros((n, self.n_outputs))
        if n == 0 or self.n_trees == 0:
            return out
        dtype = np.dtype(np.float32 if X.dtype == np.float32 else np.float64)
        comp = self._build(dtype)
        dev = self.device
        block = max(1, min(n, int(dev.cl_device.max_mem_alloc_size) // (8 * max(f, self.n_outputs)) // 2))
        q = dev.queue
        for lo in range(0, n, block):
            x = np.ascontiguousarray(X[lo:lo + block], dtype)
            d_x = cl_array.to_device(q, x.reshape(-1))
            d_out = cl_array.empty(q, x.shape[0] * self.n_outputs, np.float64)
            launch = comp.bind(d_out, q, X=d_x, forest=self.d_forest, root=self.d_root, value=self.d_value,
                               depth=self.d_depth)
            launch({"row": x.shape[0], "output": self.n_outputs, "tree": self.n_trees}, n_feat=f)
            out[lo:lo + x.shape[0]] = d_out.get().reshape(-1, self.n_outputs)
        return out
