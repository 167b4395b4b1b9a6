"""The packed result of a split search, what the host reads back (one read per split step): per (node, output), the
gain and index of the node's best split, its left and right (g, h) and the node's total (g, h); its description,
reference and heuristic. Kept apart from the scan and score (:mod:`mdhom.components.split`) because two kernels write
it: ``tree_split_sums`` after a search, and a look-ahead's table maker (``tree_split_from_search``,
:mod:`mdhom.components.lookahead`), which runs the same statements (:func:`result_code`) and so launches no
``tree_split_sums``. :func:`best_layout` is how both, and the categorical partition
(:mod:`mdhom.components.split_categorical`), read the score's best records.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_split_sums        node x output                    concat: the host's packed result of a split search
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import REALS, defines, hist_ctype, real_ctype, snippet, split_type
from mdhom.components.specs import KernelSpec
from mdhom.components.split import inv_input
from mdhom.devices import Device
from mdhom.mdh import Concat, Description, Input, Param, Struct


def best_layout(precision: str) -> tuple[int, int, int]:
    """(ints per split_t, int offset of its index field, reals per split_t): how tree_split_sums reads it."""
    dt = split_type(precision).dtype
    return dt.itemsize // 4, dt.fields["index"][1] // 4, dt.itemsize // np.dtype(REALS[precision]).itemsize


def result_type(precision: str) -> Struct:
    """One (node, output) entry of a split search's result: everything the host reads back per step."""
    r = real_ctype(precision)
    return Struct("lr_t", (("lg", r), ("lh", r), ("rg", r), ("rh", r), ("tg", r), ("th", r), ("gain", r),
                           ("index", "int")))


def result_code(precision: str, summed: bool, dest: str = "out") -> str:
    """OpenCL C that fills ``dest`` (an ``lr_t``) with the packed result of (``node``, ``output``): the statements of
    ``tree_split_sums``, which the look-ahead's split table maker (``tree_split_from_search``) runs too, writing the
    records it reads back beside its table (one launch fewer a step). Reads ``scan``, ``hist``, ``best``,
    ``best_value`` (``cat_mode`` where ``summed``, ``inv_scale`` where quantized) and ``n_feat``; split.cl (and
    split_carry.cl where ``summed``) before it."""
    stride, offset, rstride = best_layout(precision)
    if summed:  # the histogram's bins added up here (a sorted feature's sums from its scan): feature 0's totals too
        totals = "tree_candidate_sums(scan, hist, cat_mode[0] != 0, cell0, 0, 1, &lg, &lh, &tg0, &th0);"
        sums = "tree_candidate_sums(scan, hist, cat_mode[feat] != 0, cell, bin, dir, &lg, &lh, &tg, &th);"
    else:
        totals = "tg0 = scan[2 * (cell0 + TREE_BINS - 1)];\nth0 = scan[2 * (cell0 + TREE_BINS - 1) + 1];"
        sums = ("tree_left_sums(scan, hist, cell, bin, dir, &lg, &lh);\n"
                "    tg = scan[2 * (cell + TREE_BINS - 1)];\n    th = scan[2 * (cell + TREE_BINS - 1) + 1];")
    return f"""
const int idx = best[node * {stride} + {offset}];
const int n_cand = TREE_BINS - 2;
const long cell0 = ((long)node * n_feat * TREE_OUTPUTS + output) * TREE_BINS;
tree_hist_t tg0, th0, lg, lh, tg, th;
{totals}
{dest}.tg = TREE_REAL_OF(tg0, output, 0);
{dest}.th = TREE_REAL_OF(th0, output, 1);
{dest}.gain = best_value[node * {rstride}];
{dest}.index = idx;
{dest}.lg = 0; {dest}.lh = 0; {dest}.rg = 0; {dest}.rh = 0;
if (idx >= 0 && idx < n_feat * n_cand * 2) {{
    const int feat = idx / (2 * n_cand), bin = (idx / 2) % n_cand, dir = idx % 2;
    const long cell = (((long)node * n_feat + feat) * TREE_OUTPUTS + output) * TREE_BINS;
    {sums}
    {dest}.lg = TREE_REAL_OF(lg, output, 0); {dest}.lh = TREE_REAL_OF(lh, output, 1);
    {dest}.rg = TREE_REAL_OF(tg - lg, output, 0); {dest}.rh = TREE_REAL_OF(th - lh, output, 1);
}}"""


def result_inputs(precision: str, summed: bool, nodes: str = "node") -> list[Input]:
    """The inputs :func:`result_code` reads, as ``tree_split_sums`` declares them (``best`` along ``nodes``)."""
    r, hc = real_ctype(precision), hist_ctype(precision)
    stride = best_layout(precision)[0]
    return [
        Input("scan", hc, (1,), gather=True),
        Input("hist", hc, (1,), gather=True),
        Input("best", "int", (nodes, stride), gather=True),
        Input("best_value", r, (1,), gather=True),
    ] + ([Input("cat_mode", "uchar", (1,), gather=True)] if summed else []) + inv_input(precision)


def result_preamble(precision: str, summed: bool) -> str:
    """What :func:`result_code` calls: split.cl's sums, and split_carry.cl's where ``summed``."""
    return snippet("split.cl") + (snippet("split_carry.cl") if summed else "")


@lru_cache(maxsize=32)
def split_sums(n_bins: int, n_outputs: int, precision: str = "double", summed: bool = False) -> Description:
    """The packed result of a split search per (node, output): gain and index of the node's best split
    (repeated over outputs), its left and right (g, h), and the node's total (g, h) (the prefix sum of
    feature 0 over all bins). One read of this array is the only sync of a split step. ``summed``: after the score's
    vector form, which no scan precedes in numeric fits: the sums are the histogram's bins added up here (the same
    bits), the scan read only for features whose ``cat_mode`` is not 0."""
    return Description(
        "tree_split_sums", ["node", "output"], [Concat(), Concat()], result_type(precision),
        scalar=result_code(precision, summed),
        inputs=result_inputs(precision, summed),
        params=[Param("n_feat", "int")],
        preamble=defines(precision, n_bins, n_outputs) + result_preamble(precision, summed),
    )


def split_sums_reference(scan: np.ndarray, hist: np.ndarray, best: np.ndarray, precision: str,
                         inv_scale: np.ndarray | None = None) -> np.ndarray:
    """``tree_split_sums`` in numpy: ``scan`` and ``hist`` (node, feat, output, bin, 2), ``best`` the score's records
    per node (``value``, ``index``), ``inv_scale`` (output, 2) where quantized; (node, output) result records. Integer
    sums are exact whatever their order; real ones follow the scan's."""
    n, n_feat, k, b = hist.shape[:4]
    n_cand = b - 2
    out = np.zeros((n, k), result_type(precision).dtype)
    inv = np.ones((k, 2)) if inv_scale is None else np.asarray(inv_scale, np.float64).reshape(k, 2)
    real = np.dtype(REALS[precision])

    def to_real(q: np.ndarray, c: int) -> np.ndarray:  # TREE_REAL_OF: (real)q * 2^-k, in the device's real
        return (q.astype(real) * inv[:, c].astype(real)).astype(real) if inv_scale is not None else q

    idx = best["index"].astype(np.int64)
    out["gain"] = best["value"][:, None]
    out["index"] = idx[:, None]
    out["tg"], out["th"] = to_real(scan[:, 0, :, b - 1, 0], 0), to_real(scan[:, 0, :, b - 1, 1], 1)
    ok = (idx >= 0) & (idx < n_feat * n_cand * 2)
    at = np.flatnonzero(ok)
    feat, bin_, dirs = idx[at] // (2 * n_cand), (idx[at] // 2) % n_cand, idx[at] % 2
    left = scan[at, feat, :, bin_] + np.where((dirs == 0)[:, None, None], hist[at, feat, :, b - 1], 0)
    tot = scan[at, feat, :, b - 1]
    out["lg"][at], out["lh"][at] = to_real(left[..., 0], 0), to_real(left[..., 1], 1)
    out["rg"][at], out["rh"][at] = to_real(tot[..., 0] - left[..., 0], 0), to_real(tot[..., 1] - left[..., 1], 1)
    return out


def sums_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """GPUs: a work-item per node, 64 a group, 4 groups (built at node=1, launched for batches of up to a few hundred
    nodes; one work-item walking a loss-guided batch's nodes took 24 us a launch on the H200, 0.34 ms a round). CPUs:
    a work-group per core, each walking its share of the nodes (one work-item walking a depth-wise level's 128 nodes
    took 129-236 us on the H200 host's 16-core PoCL; a round's 8 launches 0.44-0.75 -> 0.38-0.43 ms, three timelines
    each, alternating)."""
    cfg = desc.default_config(dev, sizes)
    if dev.type == "gpu":
        cfg["NUM_WI_node"], cfg["NUM_WG_node"] = 64, 4
    else:
        cfg["NUM_WG_node"] = max(1, dev.compute_units)
    return cfg


SUMS = KernelSpec("tree_split_sums", sums_heuristic)
SPECS = (SUMS,)
