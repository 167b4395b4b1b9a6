"""The score updater: the raw training scores stay on the device for the whole fit; a tree adds its leaf values to
every row through the row -> node map the partition left behind (no leaf indices go to the host).

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_score_update      row x output                     concat: score + value of the row's leaf
tree_leaf_values       node x output                    concat: a node's value, from the last search's sums
=====================  ===============================  ======================================================

A depth-wise tree decided on the device (the look-ahead down to its last level) has its last level's leaf values
made there too (``tree_leaf_values``, :meth:`ScoreUpdater.update_ahead`): the host gives the values of the nodes it
knows, the kernel adds the last level's children from the last split search's sums, and the score update follows
without the host reading that search.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyopencl as cl

from mdhom.components.lanes import real_ctype
from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.components.split_result import result_type
from mdhom.components.workspace import Bound, Workspace
from mdhom.mdh import Computation, Concat, Description, Input, Param


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
        chunked=True,
    )


@lru_cache(maxsize=4)
def leaf_values(precision: str = "double") -> Description:
    """The value table by node id: ``known`` (the host's), with the ``2 n_entries`` nodes from ``base`` on (the
    children of a split search's entries, left then right for each) made from that search's packed result ``res``:
    learning_rate x -S(G) / (H + lambda) per output, S the L1 shrinkage sign(G) max(|G| - alpha, 0), the host's
    operations (:func:`leaf_values_reference`) in double, so the bits are the host's. Children of entries that did not
    split get a value too, which no row reads."""
    r = real_ctype(precision)
    return Description(
        "tree_leaf_values", ["node", "output"], [Concat(), Concat()], r,
        scalar="""
const long c = (long)node - base;
if (c >= 0 && c < 2 * (long)n_entries) {
    __global const lr_t* rs = (__global const lr_t*)res + (c >> 1) * SIZE_output + output;
    const double g = (c & 1) ? (double)rs->rg : (double)rs->lg;
    const double h = (c & 1) ? (double)rs->rh : (double)rs->lh;
    const double sg = g > 0.0 ? 1.0 : (g < 0.0 ? -1.0 : (g != g ? g : 0.0));  /* np.sign: +0 at zeros */
    double t = fabs(g) - reg_alpha;
    t = (t > 0.0 || t != t) ? t : 0.0;  /* np.maximum(t, 0): NaN kept */
    out = learning_rate * (-(sg * t) / (h + reg_lambda));
} else {
    out = known[(long)node * SIZE_output + output];
}""",
        inputs=[Input("known", r, ("node", "output"), gather=True), Input("res", "uchar", (1,), gather=True)],
        params=[Param("base", "int"), Param("n_entries", "int"), Param("learning_rate", "double"),
                Param("reg_lambda", "double"), Param("reg_alpha", "double")],
        preamble="#pragma OPENCL FP_CONTRACT OFF\n" + result_type(precision).declaration("lr_t"),
    )


def leaf_values_reference(known: np.ndarray, left: np.ndarray, right: np.ndarray, base: int, learning_rate: float,
                          reg_lambda: float, reg_alpha: float) -> np.ndarray:
    """``tree_leaf_values`` in numpy: ``known`` (n_nodes, n_outputs), ``left`` and ``right`` (n_entries, n_outputs, 2)
    the (g, h) sums of each entry's children: the host's node values (:func:`mdhom.trees.growth.node_values`)."""
    from mdhom.trees.reference import leaf_weight

    out = np.array(known, np.float64)
    sums = np.stack([left, right], axis=1).reshape(-1, *np.shape(left)[1:])  # left, right of each entry in turn
    with np.errstate(divide="ignore", invalid="ignore"):
        out[base:base + sums.shape[0]] = learning_rate * leaf_weight(sums[..., 0], sums[..., 1], reg_lambda,
                                                                     reg_alpha)
    return out


_ROWS = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}
# the tuner's inputs have the declared extents, so its score update puts every row in leaf 0 of a one-value table
UPDATE = KernelSpec(
    "tree_score_update", elementwise("row"),
    tuning=Tuning(lambda s: score_update("double"), {f"rows_{k}": {"row": v, "output": 1} for k, v in _ROWS.items()},
                  lambda s, rng: {"scores": rng.standard_normal((s["row"], 1)),
                                  "row_node": np.zeros(s["row"], np.int32), "value": rng.standard_normal(1)},
                  lambda a: a["scores"] + a["value"][a["row_node"]][:, None],
                  doc="training scores + the new tree's leaf values"))
LEAF_VALUES = KernelSpec("tree_leaf_values", elementwise())
SPECS = (UPDATE, LEAF_VALUES)


class ScoreUpdater:
    """The raw scores (n_rows, n_outputs), ping-ponging between two buffers: an update reads one and writes the
    other; :attr:`buffers` and :attr:`cur` say which holds the current scores (the gradient source reads it)."""

    def __init__(self, ws: Workspace, base_score: np.ndarray) -> None:
        self.ws = ws
        n, k = ws.n_rows, ws.n_outputs
        base = np.tile(np.asarray(base_score, np.float64).reshape(1, k), (max(1, n), 1)).astype(ws.real)
        mf = cl.mem_flags
        self.buffers = (cl.Buffer(ws.device.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=base),
                        ws.buf(base.nbytes))
        self.cur = 0
        ws.ensure("value", 64 * k * ws.real.itemsize)
        comp = self.build(ws)
        self.k_update = [Bound(ws, comp, lambda s=s, o=o: (o, dict(scores=s, row_node=ws.row_node, value=ws["value"])))
                         for s, o in (self.buffers, self.buffers[::-1])]
        self.k_values: Bound | None = None  # tree_leaf_values, built at its first use (update_ahead)

    @staticmethod
    def build(ws: Workspace) -> Computation:
        return ws.build(UPDATE, score_update(ws.rp), {"row": max(1, ws.n_rows), "output": ws.n_outputs})

    def update(self, value: np.ndarray) -> None:
        """Add ``value[node of the row]`` ((n_nodes, n_outputs)) to every row's score."""
        ws = self.ws
        if not ws.n_rows:
            return
        self._put("value", value)
        self._add()

    def update_ahead(self, known: np.ndarray, base: int, n_entries: int, learning_rate: float, reg_lambda: float,
                     reg_alpha: float) -> None:
        """:meth:`update` with the values of nodes ``base .. base + 2 n_entries - 1`` made on the device from the
        last split search's result (``res``: the children of its entries), the others ``known`` ((n_nodes,
        n_outputs)): a tree's last level decided on the device needs no read of its search before the update."""
        ws = self.ws
        if not ws.n_rows:
            return
        n = np.asarray(known).size // ws.n_outputs
        if not (0 <= base and base + 2 * n_entries <= n):
            raise ValueError(f"update_ahead: nodes {base}..{base + 2 * n_entries - 1} outside the {n} known")
        self._put("value_known", known)
        ws.ensure("value", n * ws.n_outputs * ws.real.itemsize)
        if self.k_values is None:
            comp = ws.build(LEAF_VALUES, leaf_values(ws.rp), {"node": 1024, "output": ws.n_outputs})
            self.k_values = Bound(ws, comp, lambda: (ws["value"], dict(known=ws["value_known"], res=ws["res"])))
        ws.record("tree_leaf_values", self.k_values({"node": n, "output": ws.n_outputs}, base=int(base),
                                                    n_entries=int(n_entries), learning_rate=float(learning_rate),
                                                    reg_lambda=float(reg_lambda), reg_alpha=float(reg_alpha)))
        self._add()

    def _put(self, name: str, value: np.ndarray) -> None:
        """A value table ((n_nodes, n_outputs), float64) into buffer ``name`` as the device's reals."""
        ws = self.ws
        value = np.asarray(value, np.float64).reshape(-1, ws.n_outputs)
        ws.ensure(name, value.size * ws.real.itemsize)
        ws.put(name, ws[name], value, ws.real)

    def _add(self) -> None:
        """The score update from the value table in ``value``: the current scores into the other buffer."""
        ws = self.ws
        ws.record("tree_score_update", self.k_update[self.cur]({"row": ws.n_rows, "output": ws.n_outputs}))
        self.cur = 1 - self.cur

    def scores(self) -> np.ndarray:
        ws = self.ws
        out = np.empty((max(1, ws.n_rows), ws.n_outputs), ws.real)
        ws.read(out, self.buffers[self.cur])
        return out[: ws.n_rows].astype(np.float64)
