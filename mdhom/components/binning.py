"""Quantile binning on the device: raw features to the bins the tree kernels read (uint8, or uint16 past 256 bins).

The edges are learned on the host (:class:`mdhom.learn.binning.BinMapper`, from a sample); mapping every row
is the part that scales with the data (10.5M x 28 values for the Higgs workload), so it runs as an md_hom
computation: ``rows x features``, concatenated in both, the scalar function a binary search over the
feature's edges. It counts the edges strictly below ``x`` in double precision, which is exactly what
``np.searchsorted(edges, x, side="left")`` returns, so device and host bins are identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from mdhom.components.lanes import bin_ctype
from mdhom.components.specs import KernelSpec, Tuning, description_default
from mdhom.devices import Device, get_device
from mdhom.learn.binning import BinMapper
from mdhom.mdh import Computation, Concat, Description, Input, Param, build_within_limits
from mdhom.mdh.computation import Launch

_SEARCH = """
const double v = (double)x;
const int base = first[feat], n = count[feat];
int below = 0;                    /* the number of edges strictly below v (none below a NaN) */
#if LINEAR_SEARCH
for (int j = 0; j < n; ++j) below += (edges[base + j] < v) ? 1 : 0;
#else
int hi = n;
while (below < hi) {
    const int mid = below + (hi - below) / 2;
    if (edges[base + mid] < v) below = mid + 1; else hi = mid;
}
#endif
out = isnan(v) ? (BIN_T)nan_bin : (BIN_T)below;
"""


@lru_cache(maxsize=8)
def bin_features(x_ctype: str = "double", feature_major: bool = False, bin_ctype: str = "uchar") -> Description:
    """Bins of a (rows, features) matrix; ``feature_major`` writes (features, rows) (forests, fits of one tree per
    output and layouts whose rows move on GPUs read bins so); ``bin_ctype`` the bins' type
    (:func:`mdhom.components.lanes.bin_ctype`). The two orders are two kernels with their own tuned entries (their
    outputs' layouts differ, so the tuner times and checks each as itself): ``tree_bin_features`` and
    ``tree_bin_features_fm``.

    Its own switch, for one-byte bins (at most 255 edges a feature): ``LINEAR_SEARCH`` counts the edges below a
    value in one pass over all of the feature's edges instead of a binary search. The pass is a loop of uniform
    shape that a CPU compiler vectorises where the search's data-dependent branches are not: PoCL, 2-core EPYC,
    500k x 28 rows, 63 bins, 297-302 -> 91 ms rows-major and 295-304 -> 106 ms features-major; Intel's runtime
    there 69-78 -> 74 and 89-91 -> 233 ms (it vectorises across work-items already)."""
    dims = ["feat", "row"] if feature_major else ["row", "feat"]
    return Description(
        "tree_bin_features_fm" if feature_major else "tree_bin_features", dims, [Concat(), Concat()], bin_ctype,
        _SEARCH.replace("BIN_T", bin_ctype),
        inputs=[
            Input("x", x_ctype, ("row", "feat"), index="row * SIZE_feat + feat"),
            Input("edges", "double", ("*",), gather=True),
            Input("first", "int", ("feat",), gather=True),
            Input("count", "int", ("feat",), gather=True),
        ],
        params=[Param("nan_bin", "int")],
        switches=("LINEAR_SEARCH",) if bin_ctype == "uchar" else (),
    )


def bin_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The description's default, counting edges in one pass on PoCL's CPUs (:func:`bin_features`)."""
    cfg = description_default(desc, dev, sizes)
    if "LINEAR_SEARCH" in desc.switches:
        cfg["LINEAR_SEARCH"] = int(dev.type == "cpu" and dev.runtime == "pocl")
    return cfg


def _bin_inputs(s, rng):
    n, f = s["row"], s["feat"]
    x = rng.standard_normal((n, f))
    x[rng.random((n, f)) < 0.01] = np.nan
    x = x.astype(np.float32) if s.get("x32") else x
    edges = np.sort(rng.standard_normal((f, 62)), axis=1)
    return {"x": x, "edges": edges.reshape(-1), "first": np.arange(0, 62 * f, 62, dtype=np.int32),
            "count": np.full(f, 62, np.int32), "nan_bin": 63}


def _bin_ref(a):  # the host mapper with these edges (its NaN bin is a["nan_bin"], 63)
    mapper = BinMapper(a["nan_bin"])
    mapper.edges = list(a["edges"].reshape(a["x"].shape[1], -1))
    return mapper.transform(a["x"])


_ROWS = {f"rows_{k}": {"row": v, "feat": 28} for k, v in (("1e4", 10**4), ("1e5", 10**5), ("1e6", 10**6))}
# each again as f32_<name> with x32 1: float32 rows (what a fit of float32 rows bins: the learners keep them so), the
# float description, another kernel than the double one, tuned as itself (lanes.variant_markers)
_BIN_CLASSES = {**_ROWS, **{f"f32_{name}": {**sizes, "x32": 1} for name, sizes in _ROWS.items()}}


def _x_ctype(s: Mapping[str, int]) -> str:
    return "float" if s.get("x32") else "double"


# 63 edges per feature, in either order of the bins
BIN_FEATURES = KernelSpec(
    "tree_bin_features", bin_heuristic,
    tuning=Tuning(lambda s: bin_features(_x_ctype(s), False), _BIN_CLASSES, _bin_inputs, _bin_ref,
                  doc="raw features to bins (a binary search over each feature's edges), 28 features, rows x "
                      "features (the trees' layouts that read rows whole); float64 rows, float32 in the f32 classes"))
BIN_FEATURES_FM = KernelSpec(
    "tree_bin_features_fm", bin_heuristic,
    tuning=Tuning(lambda s: bin_features(_x_ctype(s), True), _BIN_CLASSES, _bin_inputs,
                  lambda a: np.ascontiguousarray(_bin_ref(a).T),
                  doc="raw features to bins, features x rows (forests, one tree per output, moved rows on GPUs); "
                      "float64 rows, float32 in the f32 classes"))
SPECS = (BIN_FEATURES, BIN_FEATURES_FM)


def packed_edges(mapper: BinMapper) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All features' edges in one array, with each feature's first index and count."""
    counts = np.array([e.size for e in mapper.edges], np.int32)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    flat = np.concatenate([np.asarray(e, np.float64) for e in mapper.edges] + [np.zeros(1)])
    return flat, first, counts


def sends_whole(device: Device, X: np.ndarray) -> bool:
    """Whether raw rows may go to ``device`` whole for :class:`DeviceBinner`: their bytes (float64, or float32 as the
    caller has them) within half the device's largest allocation. Larger matrices are binned on the host (the same
    bins): PoCL on a 16-core machine refused a 10.5M x 28 float64 upload (2.35 GB) with INVALID_BUFFER_SIZE."""
    return int(X.dtype.itemsize) * int(np.size(X)) <= int(device.cl_device.max_mem_alloc_size) // 2


class DeviceBinner:
    """Maps raw features to bins on a device with a fitted :class:`BinMapper`; built once, used per matrix.
    ``config_source`` says where the configuration came from (:func:`mdhom.configs.lookup`): the size class nearest
    ``rows``, the rows of the matrix it is built for (a fit's training rows; default 2^20). It had been looked up at
    2^20 rows whatever a fit's size, so the tuned classes of other sizes were never run, nor judged by a tune's check.
    """

    def __init__(self, mapper: BinMapper, device: str | Device | None = None, x_dtype: np.dtype = np.float64,
                 feature_major: bool = False, config: dict[str, int] | None = None,
                 queue: cl.CommandQueue | None = None, rows: int | None = None) -> None:
        self.mapper = mapper
        self.device = get_device(device)
        self.queue = self.device.queue if queue is None else queue  # a fit's: its workspace's (no cross-queue wait)
        self.feature_major = feature_major
        self.x_dtype = np.dtype(x_dtype)
        x_ctype = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}[self.x_dtype]
        self.desc = bin_features(x_ctype, feature_major, bin_ctype(mapper.n_bins))
        n_feat = len(mapper.edges)
        sizes = {"row": max(1, int(rows)) if rows is not None else 1 << 20, "feat": n_feat,
                 "x32": int(x_ctype == "float")}
        # a tuned configuration where one is stored (of the rows' type), else the heuristic
        spec = BIN_FEATURES_FM if feature_major else BIN_FEATURES
        config, self.config_source = spec.configure(self.device, self.desc, sizes, config)
        self.comp: Computation = build_within_limits(self.desc, self.device, config, sizes)
        flat, first, counts = packed_edges(mapper)
        q = self.queue
        self._edges = cl_array.to_device(q, flat)
        self._first = cl_array.to_device(q, first)
        self._count = cl_array.to_device(q, counts)

    def transform(self, X: np.ndarray | cl_array.Array) -> cl_array.Array:
        """Bins on the device: (rows, features), or (features, rows) when feature-major."""
        return self.launch(X).out

    def launch(self, X: np.ndarray | cl_array.Array) -> Launch:
        """:meth:`transform`'s launch: the bins (``out``) and the kernel's events (its device time where the queue
        profiles: the tuner's check of the binning times it so)."""
        q = self.queue
        if X.dtype != self.x_dtype:
            raise TypeError(f"this binner reads {self.x_dtype} rows, got {X.dtype}")
        x = X if isinstance(X, cl_array.Array) else cl_array.to_device(q, np.ascontiguousarray(X))
        n_rows, n_feat = x.shape
        if n_feat != len(self.mapper.edges):
            raise ValueError(f"X has {n_feat} features, the binning was fitted on {len(self.mapper.edges)}")
        launch = self.comp.enqueue({"row": n_rows, "feat": n_feat}, queue=q, x=x, edges=self._edges,
                                   first=self._first, count=self._count, nan_bin=self.mapper.n_bins - 1)
        return launch
