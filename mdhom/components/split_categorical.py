"""The split search's scan and partition of fits with categorical features: each candidate's left sums as a
reduction over the bins that go left under it (every bin at or below it for numeric features, the candidate alone or
the bins sorted before it for categorical ones: ``tree_cat_goes_left``, ``kernels/trees/split.cl``), and the bins that
go left at each node's best categorical split, which the host reads for the partition and the model. Kept apart from
the numeric scan (:mod:`mdhom.components.split`): O(bins^2) where that one is O(bins), and only fits with
categorical features run it. Not tuned: a fit's categories decide their cost.

=====================  =================================  ==========================================================
kernel                 index space                        combine operators
=====================  =================================  ==========================================================
tree_split_scan_cat    node x feat x output x bin x bin2  concat, concat, concat, concat, sum over bin2
tree_split_cat_left    node x bin                         concat, concat: the bins going left at a node's best split
=====================  =================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from mdhom.components.lanes import defines, hist_ctype, hist_gh_type, real_ctype, snippet
from mdhom.components.specs import KernelSpec, description_default, ones, pow2_at_most
from mdhom.components.split import inv_input
from mdhom.components.split_result import best_layout
from mdhom.devices import Device
from mdhom.mdh import SUM, Concat, Description, Input, Param, Reduce


@lru_cache(maxsize=32)
def split_scan_cat(n_bins: int, precision: str = "double") -> Description:
    """The split scan of a fit with categorical features: each candidate's left sums as a reduction over the
    bins that go left under it (``tree_cat_goes_left``: every bin at or below it for numeric features, the
    candidate alone or the bins sorted before it for categorical ones), and the node total at the missing bin.

    O(bins^2) per (node, feature, output) where the numeric scan is O(bins): only fits with categorical features
    run it. Exact mode pins the reduction to one lane (each sum added from zero in bin order, as the reference)."""
    r = hist_ctype(precision)
    return Description(
        "tree_split_scan_cat", ["node", "feat", "output", "bin", "bin2"],
        [Concat(), Concat(), Concat(), Concat(), Reduce(SUM)], hist_gh_type(precision),
        scalar="""
const long cell0 = ((long)node * SIZE_feat + feat) * SIZE_output * SIZE_bin;
const long c2 = cell0 + (long)output * SIZE_bin + bin2;
const int take = (bin == SIZE_bin - 1)
    || (bin2 < SIZE_bin - 1 && tree_cat_goes_left(hist, cell0, cat_mode[feat], (int)bin2, (int)bin, cat_smooth
                                                  TREE_INV_ARG));
out.g = take ? hist[2 * c2] : 0;
out.h = take ? hist[2 * c2 + 1] : 0;""",
        inputs=[Input("hist", r, ("node", "feat", "output", "bin", 2), gather=True),
                Input("cat_mode", "uchar", ("feat",), gather=True)] + inv_input(precision),
        params=[Param("cat_smooth", real_ctype(precision))],
        preamble=defines(precision, n_bins) + snippet("split.cl"),
    )


@lru_cache(maxsize=32)
def split_cat_left(n_bins: int, n_outputs: int, precision: str = "double") -> Description:
    """The bins that go left at each node's best split where it is categorical (0 elsewhere): the host reads
    them for the partition and the model only when a search chose a categorical split."""
    stride, offset, _ = best_layout(precision)
    return Description(
        "tree_split_cat_left", ["node", "bin"], [Concat(), Concat()], "uchar",
        scalar=f"""
const int idx = best[node * {stride} + {offset}];
const int n_cand = TREE_BINS - 2;
out = 0;
if (idx >= 0 && idx < n_feat * n_cand * 2 && bin < TREE_BINS - 1) {{
    const int feat = idx / (2 * n_cand);
    const int mode = cat_mode[feat];
    const long cell0 = ((long)node * n_feat + feat) * TREE_OUTPUTS * TREE_BINS;
    if (mode != 0) out = (uchar)tree_cat_goes_left(hist, cell0, mode, (int)bin, (idx / 2) % n_cand, cat_smooth
                                                   TREE_INV_ARG);
}}""",
        inputs=[Input("hist", hist_ctype(precision), (1,), gather=True), Input("best", "int", ("node", stride),
                                                                              gather=True),
                Input("cat_mode", "uchar", (1,), gather=True)] + inv_input(precision),
        params=[Param("n_feat", "int"), Param("cat_smooth", real_ctype(precision))],
        preamble=defines(precision, n_bins, n_outputs) + snippet("split.cl"),
    )


def cat_scan_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_bin"] = pow2_at_most(sizes["bin"], 64 if gpu else 16)
    cfg["NUM_WG_node"] = 64 if gpu else 2 * max(1, dev.compute_units)  # built at node=1, launched for batches
    return cfg


# categorical fits only: not tuned (a fit's categories decide their cost)
CAT_SCAN = KernelSpec("tree_split_scan_cat", cat_scan_heuristic, exact_pins={"NUM_WI_bin2": 1, "NUM_WG_bin2": 1})
CAT_LEFT = KernelSpec("tree_split_cat_left", description_default)
SPECS = (CAT_SCAN, CAT_LEFT)
