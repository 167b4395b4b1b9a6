"""A fitted forest's prediction on an OpenCL device: :func:`mdhom.forests.walk_kernels.leaves` (tree x row, each
tree walked for neighbouring rows together), then :func:`mdhom.forests.walk_kernels.leaf_sums` (row x tree, the
leaves' values summed in tree order).

The node table goes up once per fitted forest (the boosting trees' record, :data:`mdhom.components.predictor.
FOREST_NODE`), the rows in blocks whose X and leaf ids fit the device's largest allocation and a budget. Each
(row, tree) is walked once for all the leaf's values, and a tree's nodes stay in cache while its rows pass; the
boosting trees' walk (row x output x tree) walks each row through every tree per output, the whole forest
passing through the cache once per row.
"""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array

from mdhom.components.predictor import forest_table
from mdhom.components.specs import KernelSpec
from mdhom.components.workspace import Workspace
from mdhom.devices import Device
from mdhom.forests import walk_kernels as WK
from mdhom.forests.model import Forest
from mdhom.mdh import Computation, Description

LEAF_BUDGET = 256 << 20  # bytes of leaf ids (rows x trees int32) per block of rows


class ForestWalker:
    """Tree sums of new rows for one fitted :class:`~mdhom.forests.model.Forest` on ``device``."""

    def __init__(self, device: Device, forest: Forest) -> None:
        if forest.value.shape[1] > WK.MAX_WALK_VALUES:
            raise ValueError(f"forest_leaf_sums carries at most {WK.MAX_WALK_VALUES} values per leaf, "
                             f"not {forest.value.shape[1]}")
        self.device = device
        # builds only: configurations tuned for the device where stored (else the heuristics), with the exact pins
        # that keep the leaf sums in tree order (the numpy walk's bits under any configuration)
        self.ws = Workspace(device, precision="double", exact=True)
        self.n_trees, self.n_values = forest.n_trees, int(forest.value.shape[1])
        raw, roots, values = forest_table(forest.as_trees(), None)
        q = device.queue
        self.d_forest = cl_array.to_device(q, raw.view(np.int32))
        self.d_root = cl_array.to_device(q, roots)
        self.d_value = cl_array.to_device(q, values.reshape(-1))
        self.c_leaves = self._build(WK.LEAVES, WK.leaves())
        self.c_sums = self._build(WK.LEAF_SUMS, WK.leaf_sums(self.n_values))

    def _build(self, spec: KernelSpec, desc: Description) -> Computation:
        return self.ws.build(spec, desc, {"row": 1 << 20, "tree": max(1, self.n_trees)})

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        """Each prediction kernel's configuration and where it came from (tuned file, defaults, heuristic)."""
        return self.ws.kernel_configs()

    def tree_sums(self, X: np.ndarray) -> np.ndarray:
        """(n_rows, n_values): per row of ``X`` (float64, or float32 taken to float64 a block at a time; NaN where
        missing), the sum over trees of its leaves' values, in tree order."""
        n, f = X.shape
        out = np.zeros((n, self.n_values))
        if n == 0 or self.n_trees == 0:
            return out
        q = self.device.queue
        limit = min(int(self.device.cl_device.max_mem_alloc_size) // 2, LEAF_BUDGET)
        block = max(1, min(n, limit // (8 * max(f, self.n_values)), limit // (4 * self.n_trees)))
        d_leaf = cl_array.empty(q, block * self.n_trees, np.int32)
        for lo in range(0, n, block):
            x = np.ascontiguousarray(X[lo:lo + block], np.float64)
            m = x.shape[0]
            d_x = cl_array.to_device(q, x.reshape(-1))
            d_out = cl_array.empty(q, m * self.n_values, np.float64)
            self.c_leaves.bind(d_leaf, q, X=d_x, forest=self.d_forest, root=self.d_root)(
                {"tree": self.n_trees, "row": m}, n_feat=f)
            self.c_sums.bind(d_out, q, leaf=d_leaf, value=self.d_value)({"row": m, "tree": self.n_trees})
            out[lo:lo + m] = d_out.get().reshape(-1, self.n_values)
        return out
