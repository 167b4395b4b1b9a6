"""The classifier chains' prediction on an OpenCL device: a thin driver over :mod:`mdhom.forests.chain_kernels`.

The ensemble's trees and the orders go up once; rows go in blocks whose chain state (chains x rows x labels
probabilities) fits the device. Per block and chain position: one ``ecc_walk`` (every chain's forest at the
position over every row) and one ``ecc_store`` (each chain's probability into its state, where its later
positions read the 0/1 label); then one ``ecc_vote``. The host reads back only the (rows x labels) votes.
Configurations come from the tuned files through the :class:`~mdhom.components.workspace.Workspace` (else the
specs' heuristics), with the exact pins: the numpy walk's bits on every device.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components.workspace import Workspace
from mdhom.devices import Device
from mdhom.forests import chain_kernels as CK
from mdhom.forests.chain_model import ChainForests

STATE_BUDGET = 256 << 20  # bytes of chain state per block of rows


class ChainPredictor:
    """Votes of new rows for a fitted :class:`ChainForests` on ``device``."""

    def __init__(self, device: str | Device | None, model: ChainForests) -> None:
        self.ws = Workspace(device, precision="double", exact=True)
        self.device = self.ws.device
        self.model = model
        fo = model.forest
        table, roots = CK.node_table(fo.feature, fo.threshold, fo.left, fo.offsets)
        q = self.ws.queue
        self.d_forest = cl_array.to_device(q, table)
        self.d_root = cl_array.to_device(q, roots)
        self.d_value = cl_array.to_device(q, np.ascontiguousarray(fo.value[:, 0]))
        self.d_orders = cl_array.to_device(q, np.ascontiguousarray(model.orders, np.int32).reshape(-1))
        c, lab = model.n_chains, model.n_labels
        limit = int(self.device.cl_device.max_mem_alloc_size) // 2
        self.block = max(1, min(STATE_BUDGET, limit) // (8 * c * max(lab, 1)))
        sizes = {"row": min(self.block, 1 << 16), "chain": c, "tree": model.n_estimators}
        self.c_walk = self.ws.build(CK.WALK, CK.walk(), sizes)
        self.c_store = self.ws.build(CK.STORE, CK.store(), {"chain": c, "row": sizes["row"]})
        self.c_vote = {v: self.ws.build(CK.VOTE, CK.vote(v == "label"), {"row": sizes["row"], "label": lab,
                                                                           "chain": c}, role=v)
                       for v in ("proba", "label")}

    def vote(self, X: np.ndarray, voting: str) -> np.ndarray:
        """(n, L) votes of ``X`` (float64, or float32 taken to float64 a block at a time; :meth:`ChainForests.vote` of
        the chains' probabilities)."""
        m = self.model
        n = X.shape[0]
        c, e, lab, f = m.n_chains, m.n_estimators, m.n_labels, m.n_features
        out = np.zeros((n, lab))
        q = self.ws.queue
        for lo in range(0, n, self.block):
            x = np.ascontiguousarray(X[lo:lo + self.block], np.float64)
            b = x.shape[0]
            d_x = cl_array.to_device(q, x.reshape(-1) if x.size else np.zeros(1))
            d_state = cl_array.zeros(q, c * b * lab, np.float64)
            d_sums = cl_array.empty(q, b * c, np.float64)
            d_votes = cl_array.empty(q, b * lab, np.float64)
            walk = self.c_walk.bind(d_sums, q, X=d_x, state=d_state, forest=self.d_forest, root=self.d_root,
                                    value=self.d_value)
            store = self.c_store.bind(d_state, q, sums=d_sums, orders=self.d_orders)
            for p in range(lab):
                self.ws.record("ecc_walk", walk({"row": b, "chain": c, "tree": e}, first_tree=np.int32(m.first_tree(p)),
                                                n_x=np.int32(f), n_labels=np.int32(lab)))
                self.ws.record("ecc_store", store({"chain": c, "row": b}, n_trees=np.int32(e),
                                                  n_labels=np.int32(lab), position=np.int32(p)))
            launch = self.c_vote[voting].bind(d_votes, q, state=d_state)
            self.ws.record("ecc_vote", launch({"row": b, "label": lab, "chain": c}))
            host = np.empty(b * lab)
            cl.enqueue_copy(q, host, d_votes.base_data, is_blocking=True)
            out[lo:lo + b] = host.reshape(b, lab) / c
        return out
