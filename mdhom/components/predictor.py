"""The predictor: the scores of binned rows (eval sets during training) updated tree by tree on the device, by
walking each new tree's table (:data:`mdhom.components.tables.TREE_NODE`) with the training split rule on bins.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_predict_bins      row x output                     concat: score + value of the leaf a binned row reaches
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components.lanes import bin_ctype, defines, real_ctype, snippet
from mdhom.components.specs import KernelSpec, elementwise
from mdhom.components.tables import TREE_NODE, tree_table
from mdhom.components.workspace import Bound, Workspace
from mdhom.mdh import Concat, Description, Input, Param


@lru_cache(maxsize=32)
def predict_bins(n_bins: int, precision: str = "double", feature_major: bool = False) -> Description:
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
    const int go_left = (b == TREE_BINS - 1) ? (t->default_left != 0) : ((int)b <= t->bin);
    node = go_left ? t->left : t->right;
}
out = scores[(long)row * SIZE_output + output] + value[(long)node * SIZE_output + output];""",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("bins", bin_ctype(n_bins), (1,), gather=True),
                Input("tree", "int", (1,), gather=True), Input("value", r, (1,), gather=True)],
        params=[Param("n_feat", "int")],
        preamble=defines(precision, n_bins, feature_major=feature_major) + snippet("partition.cl"),
    )


# reads whole lookup buffers (bins, the tree table): not tunable until the generator has any-extent inputs
PREDICT = KernelSpec("tree_predict_bins", elementwise("row"))
SPECS = (PREDICT,)


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
        self.d_predict = predict_bins(ws.n_bins, ws.rp, ws.feature_major)
        self.sets: list[_EvalSet] = []

    def add(self, bins: np.ndarray | cl_array.Array, base_score: np.ndarray) -> int:
        """Keep an evaluation matrix: numpy bins (n_rows, n_features) of the training bins' dtype, or a device
        array in the training layout; its raw scores start at ``base_score``. Returns its handle."""
        ws = self.ws
        on_device = isinstance(bins, cl_array.Array)
        shape = bins.shape[::-1] if on_device and ws.feature_major else bins.shape
        if bins.dtype != ws.bin_dtype or len(shape) != 2 or shape[1] != ws.n_features:
            raise ValueError(f"eval bins must be {ws.bin_dtype} (n_rows, n_features) like the training bins")
        n, k = int(shape[0]), ws.n_outputs
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(ws.real)
        comp = ws.build(PREDICT, self.d_predict, {"row": max(1, n), "output": k})
        q = ws.queue
        if on_device:
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
            ws.ensure("tree_value", table.size * ws.n_outputs * ws.real.itemsize)
            ws.put("tree", ws["tree_table"], table, TREE_NODE.dtype)
            ws.put("tree_value", ws["tree_value"], np.asarray(tree.value, np.float64), ws.real)
            ws.record("tree_predict_bins", ev.launch[ev.cur]({"row": ev.n, "output": ws.n_outputs},
                                                            n_feat=ws.n_features))
            ev.cur = 1 - ev.cur
        out = np.empty((max(1, ev.n), ws.n_outputs), ws.real)
        return ws.read(out, ev.buffers[ev.cur])[: ev.n]
