"""The score updater: the raw training scores stay on the device for the whole fit; a tree adds its leaf values to
every row through the row -> node map the partition left behind (no leaf indices go to the host).

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_score_update      row x output                     concat: score + value of the row's leaf
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyopencl as cl

from mdhom.components.lanes import real_ctype
from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.components.workspace import Bound, Workspace
from mdhom.mdh import Computation, Concat, Description, Input


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


_ROWS = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}
# the tuner's inputs have the declared extents, so its score update puts every row in leaf 0 of a one-value table
UPDATE = KernelSpec(
    "tree_score_update", elementwise("row"),
    tuning=Tuning(lambda s: score_update("double"), {f"rows_{k}": {"row": v, "output": 1} for k, v in _ROWS.items()},
                  lambda s, rng: {"scores": rng.standard_normal((s["row"], 1)),
                                  "row_node": np.zeros(s["row"], np.int32), "value": rng.standard_normal(1)},
                  lambda a: a["scores"] + a["value"][a["row_node"]][:, None],
                  doc="training scores + the new tree's leaf values"))
SPECS = (UPDATE,)


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

    @staticmethod
    def build(ws: Workspace) -> Computation:
        return ws.build(UPDATE, score_update(ws.rp), {"row": max(1, ws.n_rows), "output": ws.n_outputs})

    def update(self, value: np.ndarray) -> None:
        """Add ``value[node of the row]`` ((n_nodes, n_outputs)) to every row's score."""
        ws = self.ws
        if not ws.n_rows:
            return
        value = np.asarray(value, np.float64).reshape(-1, ws.n_outputs)
        ws.ensure("value", value.size * ws.real.itemsize)
        ws.put("value", ws["value"], value, ws.real)
        ws.record("tree_score_update", self.k_update[self.cur]({"row": ws.n_rows, "output": ws.n_outputs}))
        self.cur = 1 - self.cur

    def scores(self) -> np.ndarray:
        ws = self.ws
        out = np.empty((max(1, ws.n_rows), ws.n_outputs), ws.real)
        ws.read(out, self.buffers[self.cur])
        return out[: ws.n_rows].astype(np.float64)
