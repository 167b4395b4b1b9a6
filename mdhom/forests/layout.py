"""What every forest level kernel shares: slots, the position order, and integer lanes.

A level's nodes over all trees are *slots*: slot ``s`` belongs to tree ``slot_tree[s]`` and owns the positions
``slot_begin[s] .. + slot_count[s]`` of the position order ``order`` (``T x n`` rows: tree ``t``'s in-bag rows
in positions ``t*n ..``, grouped by node, ascending inside a node). The tree dimension is thus a concatenated
dimension of slots whose row fold is *ragged* (``Description(extents=...)``): one launch does the work of the
level's rows, not of slots x the largest node.

Every row carries integer *lanes*: ``S`` statistics (one-hot classes per output, or the target in fixed point
per output), then its bootstrap weight and 1 (its distinct count). Weighted by the bootstrap counts they stay
integers, so histograms are exact in any summation order and every device writes the reference's model file.

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
forest_histogram       slot x feat x pos    concat, concat, sum over the slot's rows (ragged)
forest_hist_siblings   slot x cell          concat: the built smaller child, or parent - it (subtraction)
forest_node_totals     slot x lane x bin    concat, concat, sum over bins (feature 0's histogram)
forest_feature_split   slot x feat          concat, concat: the best "bin <= b" of a feature (a scan in f)
forest_node_split      slot                 concat: the best candidate among the node's sampled features
forest_route           tree x row           concat: a row's slot at the next level (-1: none)
forest_left_scan       tree x pos           concat, exclusive prefix sum of the go-left flags
forest_partition       tree x pos           concat at a computed position (scatter): the stable partition
forest_bag_scan        tree x row           concat, exclusive prefix count of the in-bag rows
forest_bag_order       tree x row           concat at a computed position (scatter): in-bag rows first
forest_bag_slots       tree x row           concat: the root slot of an in-bag row, -1 out of the bag
forest_leaves          tree x row           concat, concat: the leaf a row reaches in a tree (tree-major)
forest_leaf_sums       row x tree           concat, sum over trees (tree order) of every value of the row's leaves
=====================  ===================  ==============================================================

The kernels live by what they do: :mod:`mdhom.forests.histogram` (``forest_histogram``, ``forest_hist_siblings``),
:mod:`mdhom.forests.split` (``forest_node_totals``, ``forest_feature_split``, ``forest_node_split``),
:mod:`mdhom.forests.partition` (``forest_route``, the scans, the partition and the bag) and
:mod:`mdhom.forests.walk_kernels` (``forest_leaves``, ``forest_leaf_sums``). Each holds its kernels' md_hom
descriptions, numpy references, launch heuristics and specs.

Where ``max_features`` draws few of the features, the backend runs the *sampled* level of
:mod:`mdhom.forests.sampled` instead (the histogram above over each node's drawn candidates, ``cand_width``).
"""

from __future__ import annotations

import numpy as np


def lane_layout(lane: str, n_stats: int, outputs: tuple[int, ...]) -> str:
    """Defines every forest kernel shares: the lane type and count, and where each output's lanes start."""
    offs = np.concatenate([[0], np.cumsum(outputs)]).astype(int)
    return (f"typedef {lane} lane_t;\n#define FOREST_STATS {n_stats}\n#define FOREST_LANES {n_stats + 2}\n"
            f"#define FOREST_W {n_stats}\n#define FOREST_D {n_stats + 1}\n#define FOREST_OUTPUTS {len(outputs)}\n"
            f"__constant int forest_off[] = {{{', '.join(map(str, offs))}}};\n")
