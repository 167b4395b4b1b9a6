"""The forest level's row movement: ``forest_route`` (each row's slot at the next level), ``forest_left_scan``
and ``forest_partition`` (every split node's rows stably partitioned, left first) and the bag of each tree's
root (``forest_bootstrap``, ``forest_bag_counts``, ``forest_bag_scan``, ``forest_bag_order``,
``forest_bag_slots``), with their numpy references.

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
from mdhom.mdh import SUM, Concat, Description, Input, Param, Reduce, Scan


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
# A tree's draws are a counter-based stream: draw j of the tree with 64-bit seed s is row
# floor(mix64(s + (j + 1) * golden) * n / 2^64) (splitmix64's finaliser, a 64 x 64 -> high 64 product), so every
# device and numpy draw the same rows without a generator's state. A 500-tree forest on 1M rows makes 5 x 10^8
# draws: counted on the host by numpy (a bincount per tree) they were 43% of an H100 fit, plus 2 GB of uploads.
DRAW = """
inline ulong forest_mix64(ulong z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    return z ^ (z >> 31);
}
inline int forest_draw(ulong seed, long j, int n) {
    return (int)mul_hi(forest_mix64(seed + 0x9e3779b97f4a7c15UL * (ulong)(j + 1)), (ulong)n);
}
"""
_U64 = np.uint64


def draw_rows(seed: int, n_draw: int, n_rows: int) -> np.ndarray:
    """The rows a tree's stream draws (:c:func:`forest_draw` for j < ``n_draw``), int64."""
    with np.errstate(over="ignore"):
        z = _U64(seed) + _U64(0x9E3779B97F4A7C15) * np.arange(1, n_draw + 1, dtype=_U64)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        z ^= z >> _U64(31)
        # the high 64 bits of z * n (n < 2^31): from z's 32-bit halves, each product below 2^63
        n = _U64(n_rows)
        hi = (z >> _U64(32)) * n + (((z & _U64(0xFFFFFFFF)) * n) >> _U64(32))
        return (hi >> _U64(32)).astype(np.int64)


@lru_cache(maxsize=1)
def bootstrap() -> Description:
    """Every tree's bag weights (tree x row int32): the sample weight of a row times the number of the tree's
    ``n_draw`` (at most the rows) draws that hit it, or (``bootstrap`` 0) the sample weight. Launched over
    (tree, draw) with ``SIZE_draw`` = the rows, so the output is the index space; draws past ``n_draw`` add nothing.
    The output
    starts at zero; counts are integer atomics, the same in every order."""
    return Description(
        "forest_bootstrap", ["tree", "draw"], [Concat(), Concat()], "int",
        scalar="""
out_at = -1;
if (draw < n_draw) {
    const int r = bootstrap ? forest_draw(seed[tree], draw, (int)SIZE_draw) : (int)draw;
    out_at = (idx_t)tree * SIZE_draw + r;
    out = sample_weight[r];
}""",
        inputs=[Input("seed", "ulong", ("*",), gather=True), Input("sample_weight", "int", ("*",), gather=True)],
        params=[Param("n_draw", "int"), Param("bootstrap", "int")],
        preamble=DRAW, scatter="add",
    )


def bootstrap_reference(seeds: np.ndarray, n_rows: int, n_draw: int, bootstrap: bool,
                        sample_weight: np.ndarray) -> np.ndarray:
    """(trees, rows) int32 bag weights of :func:`bootstrap` (``n_draw`` at most the rows)."""
    sw = np.asarray(sample_weight, np.int32)
    if not bootstrap or not len(seeds):
        return np.broadcast_to(sw, (len(seeds), n_rows)).copy()
    return np.stack([np.bincount(draw_rows(int(s), n_draw, n_rows), minlength=n_rows).astype(np.int32) * sw
                     for s in np.asarray(seeds, np.uint64)]).reshape(len(seeds), n_rows)


@lru_cache(maxsize=1)
def bag_counts() -> Description:
    """Per tree, its in-bag rows (weight > 0): the root slot's row count."""
    return Description(
        "forest_bag_counts", ["tree", "row"], [Concat(), Reduce(SUM)], "int",
        scalar="out = weight[(long)tree * SIZE_row + row] > 0;",
        inputs=[Input("weight", "int", ("*",), gather=True)],
    )


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
BOOTSTRAP = KernelSpec("forest_bootstrap", _rows)
BAG_COUNTS = KernelSpec("forest_bag_counts", _rows)
BAG_SCAN = KernelSpec("forest_bag_scan", _scan)
BAG_ORDER = KernelSpec("forest_bag_order", _rows)
BAG_SLOTS = KernelSpec("forest_bag_slots", _rows)
SPECS = (ROUTE, LEFT_SCAN, PARTITION, BOOTSTRAP, BAG_COUNTS, BAG_SCAN, BAG_ORDER, BAG_SLOTS)
