"""The forest level's row movement: ``forest_route`` (each row's slot at the next level), ``forest_left_scan``
and ``forest_partition`` (every split node's rows stably partitioned, left first) and the bag of each tree's
root (``forest_bag_scan``, ``forest_bag_order``, ``forest_bag_slots``), with their numpy references.

These kernels keep the position order and the rows' slots on the device from level to level: the host reads
neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import bin_ctype
from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.forests import tuning_inputs as TI
from mdhom.mdh import SUM, Concat, Description, Input, Scan


# ------------------------------------------------------------------------------------------------ routing
@lru_cache(maxsize=8)
def route(n_bins: int) -> Description:
    """Each (tree, row)'s slot at the next level: its node's left child slot (even) or the right one (odd) by
    the node's split, -1 for rows of leaves and out-of-bag rows. ``split_tab``: (feat, bin, left child slot)
    per slot of this level, child -1 for a leaf; ``bins`` feature-major (feat, row)."""
    return Description(
        "forest_route", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
const int s = row_slot[(long)tree * SIZE_row + row];
out = -1;
if (s >= 0) {
    const int c = split_tab[3 * s + 2];
    if (c >= 0) out = c + ((int)bins[(long)split_tab[3 * s] * SIZE_row + row] > split_tab[3 * s + 1]);
}""",
        inputs=[Input("row_slot", "int", ("*",), gather=True), Input("split_tab", "int", ("*",), gather=True),
                Input("bins", bin_ctype(n_bins), ("*",), gather=True)],
    )


def route_reference(row_slot: np.ndarray, split_tab: np.ndarray, bins: np.ndarray) -> np.ndarray:
    s = row_slot
    out = np.full(s.shape, -1, np.int32)
    live = s >= 0
    tab = split_tab.reshape(-1, 3)
    t, r = np.nonzero(live)
    ss = s[t, r]
    child = tab[ss, 2]
    go = child >= 0
    feat = tab[ss, 0]
    right = bins[r, np.maximum(feat, 0)].astype(np.int64) > tab[ss, 1]
    out[t[go], r[go]] = (child + right)[go]
    return out


@lru_cache(maxsize=1)
def left_scan() -> Description:
    """Per tree, the exclusive prefix sum over positions of "the row at this position goes to a left child"."""
    return Description(
        "forest_left_scan", ["tree", "pos"], [Concat(), Scan(SUM, inclusive=False)], "int",
        scalar="""
const long base = (long)tree * SIZE_pos;
const int s = new_slot[base + order[base + pos]];
out = s >= 0 && (s & 1) == 0;""",
        inputs=[Input("order", "int", ("*",), gather=True), Input("new_slot", "int", ("*",), gather=True)],
    )


def left_scan_reference(order: np.ndarray, new_slot: np.ndarray) -> np.ndarray:
    s = np.take_along_axis(new_slot, order.astype(np.int64), axis=1)
    flag = ((s >= 0) & (s % 2 == 0)).astype(np.int64)
    return (np.cumsum(flag, axis=1) - flag).astype(np.int32)


@lru_cache(maxsize=1)
def partition() -> Description:
    """The stable partition of every split node's positions, left rows first (each side in its old order, so
    rows stay ascending inside a node): the row at ``pos`` moves to its place, computed from the left scan. Rows
    of leaves and out-of-bag rows stay where they are."""
    return Description(
        "forest_partition", ["tree", "pos"], [Concat(), Concat()], "int",
        scalar="""
const long base = (long)tree * SIZE_pos;
const int r = order[base + pos];
out = r;
const int s = row_slot[base + r];
if (s >= 0 && split_tab[3 * s + 2] >= 0) {
    const long b = slot_begin[s];
    const int before = scan[base + pos] - scan[b];
    const int ns = new_slot[base + r];
    if ((ns & 1) == 0) out_at = b + before;
    else out_at = b + split_left[s] + (base + pos - b - before);
}""",
        inputs=[Input("order", "int", ("*",), gather=True), Input("row_slot", "int", ("*",), gather=True),
                Input("new_slot", "int", ("*",), gather=True), Input("scan", "int", ("*",), gather=True),
                Input("split_tab", "int", ("*",), gather=True), Input("slot_begin", "int", ("*",), gather=True),
                Input("split_left", "int", ("*",), gather=True)],
        scatter=True,
    )


def partition_reference(order: np.ndarray, new_slot: np.ndarray, split_tab: np.ndarray, slot_begin: np.ndarray,
                        slot_count: np.ndarray) -> np.ndarray:
    """The new position order (trees x n): each split slot's range stably partitioned by left / right child."""
    n_trees, n = order.shape
    out = order.copy().reshape(-1)
    split = np.flatnonzero(split_tab.reshape(-1, 3)[:, 2] >= 0)
    counts = np.asarray(slot_count, np.int64)[split]
    if not counts.sum():
        return out.reshape(n_trees, n)
    seg = np.repeat(np.arange(split.size), counts)
    pos = np.repeat(np.asarray(slot_begin, np.int64)[split] - np.concatenate([[0], np.cumsum(counts)[:-1]]),
                    counts) + np.arange(seg.size)
    rows = out[pos]
    right = new_slot.reshape(-1)[(pos // n) * n + rows] % 2
    out[pos] = rows[np.argsort(2 * seg + right, kind="stable")]
    return out.reshape(n_trees, n)


# ------------------------------------------------------------------------------------------------ the bag
@lru_cache(maxsize=1)
def bag_scan() -> Description:
    """Per tree, the exclusive prefix count over rows of the in-bag ones (weight > 0): an in-bag row's position."""
    return Description(
        "forest_bag_scan", ["tree", "row"], [Concat(), Scan(SUM, inclusive=False)], "int",
        scalar="out = weight[(long)tree * SIZE_row + row] > 0;",
        inputs=[Input("weight", "int", ("*",), gather=True)],
    )


@lru_cache(maxsize=1)
def bag_order() -> Description:
    """The root's position order of every tree (:func:`mdhom.forests.grower.bag_order`): its in-bag rows
    ascending, then its out-of-bag rows ascending; each row lands at its place from :func:`bag_scan`."""
    return Description(
        "forest_bag_order", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="""
const long base = (long)tree * SIZE_row;
const int before = scan[base + row];
const int bagged = scan[base + SIZE_row - 1] + (weight[base + SIZE_row - 1] > 0);
out = row;
out_at = base + (weight[base + row] > 0 ? before : bagged + (row - before));""",
        inputs=[Input("weight", "int", ("*",), gather=True), Input("scan", "int", ("*",), gather=True)],
        scatter=True,
    )


@lru_cache(maxsize=1)
def bag_slots() -> Description:
    """Every (tree, row)'s slot at the root level: the tree's root (slot ``tree``) when in the bag, else -1."""
    return Description(
        "forest_bag_slots", ["tree", "row"], [Concat(), Concat()], "int",
        scalar="out = weight[(long)tree * SIZE_row + row] > 0 ? (int)tree : -1;",
        inputs=[Input("weight", "int", ("*",), gather=True)],
    )


def bag_slots_reference(weight: np.ndarray) -> np.ndarray:
    return np.where(weight > 0, np.arange(weight.shape[0], dtype=np.int32)[:, None], np.int32(-1))


# ------------------------------------------------------------------------------------------------ heuristics
def _rows(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """(tree, row | pos) kernels: work-items along the rows, work-groups over trees and row chunks."""
    cfg = ones(desc, dev, sizes)
    d = desc.dim_names[1]
    gpu = dev.type == "gpu"
    cfg[f"NUM_WI_{d}"] = 256 if gpu else 64
    cfg[f"NUM_WG_{d}"] = max(1, dev.compute_units) * (4 if gpu else 1)
    cfg["NUM_WG_tree"] = pow2_at_most(int(sizes.get("tree", 1)), 64 if gpu else 4)
    return cfg


def _scan(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    cfg = desc.default_config(dev, sizes)
    cfg["NUM_WG_tree"] = pow2_at_most(int(sizes.get("tree", 1)), 64)
    return cfg


# tuned at the levels of a 1M-row forest and of emotions- and mediamill-shaped chain ensembles
# (mdhom.forests.tuning_inputs); integer scans and moves of whole rows: no order to pin
_POS_CLASSES = {k: {("pos" if d == "row" else d): v for d, v in c.items()} for k, c in TI.ROW_CLASSES.items()}
ROUTE = KernelSpec("forest_route", _rows, tuning=Tuning(
    lambda s: route(TI.N_BINS), TI.ROW_CLASSES, TI.route_inputs, TI.route_ref,
    doc="every (tree, row)'s slot at the next level, by its node's split"))
LEFT_SCAN = KernelSpec("forest_left_scan", _scan, tuning=Tuning(
    lambda s: left_scan(), _POS_CLASSES, TI.left_scan_inputs, TI.left_scan_ref,
    doc="per tree, the exclusive count over positions of rows going to a left child"))
PARTITION = KernelSpec("forest_partition", _rows, tuning=Tuning(
    lambda s: partition(), _POS_CLASSES, TI.partition_inputs, TI.partition_ref,
    doc="every split node's rows stably partitioned, left first (a scatter)"))
BAG_SCAN = KernelSpec("forest_bag_scan", _scan)
BAG_ORDER = KernelSpec("forest_bag_order", _rows)
BAG_SLOTS = KernelSpec("forest_bag_slots", _rows)
SPECS = (ROUTE, LEFT_SCAN, PARTITION, BAG_SCAN, BAG_ORDER, BAG_SLOTS)
