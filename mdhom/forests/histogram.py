"""The forest level's histograms: ``forest_histogram`` (lane sums per slot, feature and bin over each slot's
ragged rows) and ``forest_hist_siblings`` (a split's other child by subtraction), with their numpy references,
launch heuristics and the histogram's tuning.

The histogram is most of a level's work and the one forest kernel worth tuning; the lane layout it sums is
:func:`mdhom.forests.layout.lane_layout`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import bin_ctype
from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.forests.layout import lane_layout
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Scalar

# ------------------------------------------------------------------------------------------------ histogram
_HIST = """
const long mdh_p = (long)slot_begin[slot] + pos;
const int mdh_r = order[mdh_p];
const lane_t mdh_w = (lane_t)weight[(long)slot_tree[slot] * n_rows + mdh_r];
const int mdh_c = (int)bins[(long)({feat}) * n_rows + mdh_r] * FOREST_LANES;
for (int j = 0; j < FOREST_STATS; ++j) {{
    const lane_t mdh_v = mdh_w * stat[{stat_at} + j];
    {add_v}
}}
{add_w}
{add_d}
"""


# where a row's statistics start: its own FOREST_STATS lanes, or (per-tree targets) the tree's column of a wider row
_STAT_AT = {False: "(long)mdh_r * FOREST_STATS", True: "(long)mdh_r * stat_stride + tree_col[slot_tree[slot]]"}


def _feat_at(cand_width: int) -> str:
    """The feature a histogram point bins by: its own (dense), or the slot's ``feat``-th sampled candidate."""
    return f"cand[(long)slot_id[slot] * {cand_width} + 1 + feat]" if cand_width else "feat"


def _hist_body(target: str, op: str, per_tree: bool = False, cand_width: int = 0) -> str:
    return _HIST.format(add_v=f"{target}.v[mdh_c + j] {op} mdh_v;", add_w=f"{target}.v[mdh_c + FOREST_W] {op} mdh_w;",
                        add_d=f"{target}.v[mdh_c + FOREST_D] {op} 1;", stat_at=_STAT_AT[per_tree],
                        feat=_feat_at(cand_width))


def _hist_atomic(lane: str, per_tree: bool = False, cand_width: int = 0) -> str:
    add = "atom_add" if lane == "long" else "atomic_add"
    return _HIST.format(add_v=f"if (mdh_v != 0) {add}(&acc->v[mdh_c + j], mdh_v);",
                        add_w=f"{add}(&acc->v[mdh_c + FOREST_W], mdh_w);",
                        add_d=f"{add}(&acc->v[mdh_c + FOREST_D], 1);", stat_at=_STAT_AT[per_tree],
                        feat=_feat_at(cand_width))


@lru_cache(maxsize=32)
def histogram(n_bins: int, lane: str, outputs: tuple[int, ...], per_tree: bool = False,
              cand_width: int = 0) -> Description:
    """Lane sums per (slot, feature, bin) over each slot's rows: (slot, feat) atoms of n_bins x lanes integers.
    ``bins`` are feature-major (feat, row): a work-item folding one feature of a node's ascending rows reads
    ascending addresses.

    The row fold of a slot is ragged (its own count of positions), so a level of thousands of slots of unequal
    size is one launch; integer lanes make every order of addition (and the local-memory atomics of
    ``PARTIALS_LOCAL``) give the same sums.

    ``per_tree`` (the classifier chains' forests, many targets in one batch of trees): a row holds
    ``stat_stride`` lanes, tree ``t`` reads its statistics from column ``tree_col[t]`` on, and the features
    ``feat_mask[t, f] == 0`` forbids fold no rows (a zero histogram: the extent of the fold is 0).

    ``cand_width`` (the sampled level, :mod:`mdhom.forests.sampled`): the slots are the level's large ones,
    ``slot_id[slot]`` their place in the level, and ``feat`` counts a slot's candidate features, row
    ``slot_id[slot]`` of ``cand`` (``cand_width`` ints per slot: the number of live candidates, then the
    features); only the first ``max(live, 1)`` are folded."""
    n_stats = int(sum(outputs)) if lane == "int" else len(outputs)
    lanes = n_stats + 2
    inputs = [Input("bins", bin_ctype(n_bins), ("*",), gather=True), Input("stat", lane, ("*",), gather=True),
              Input("weight", "int", ("*",), gather=True), Input("order", "int", ("*",), gather=True),
              Input("slot_begin", "int", ("slot",), gather=True), Input("slot_count", "int", ("slot",), gather=True),
              Input("slot_tree", "int", ("slot",), gather=True)]
    params = [Param("n_rows", "int")]
    extent = "slot_count[slot]"
    if per_tree:
        inputs += [Input("tree_col", "int", ("*",), gather=True)]
        params.append(Param("stat_stride", "int"))
        if not cand_width:  # sampled candidates are the tree's own features already
            inputs.append(Input("feat_mask", "uchar", ("*",), gather=True))
            extent = "(feat_mask[(long)slot_tree[slot] * SIZE_feat + feat] ? slot_count[slot] : 0)"
    if cand_width:
        inputs += [Input("cand", "int", ("*",), gather=True), Input("slot_id", "int", ("slot",), gather=True)]
        extent = f"(feat < max(cand[(long)slot_id[slot] * {int(cand_width)}], 1) ? slot_count[slot] : 0)"
    return Description(
        "forest_histogram", ["slot", "feat", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(Scalar(lane), int(n_bins) * lanes),
        scalar=_hist_body("out", "=", per_tree, cand_width), accumulate=_hist_body("acc", "+=", per_tree, cand_width),
        accumulate_atomic=_hist_atomic(lane, per_tree, cand_width), inputs=inputs, params=params,
        preamble=lane_layout(lane, n_stats, outputs),
        extents={"pos": extent},
    )


def exact_bincount(keys: np.ndarray, values: np.ndarray, minlength: int) -> np.ndarray:
    """Integer sums of ``values`` (int64) per key, exact: np.bincount adds in float64, so values go in 31-bit halves
    (each half's sums stay below 2^53 for up to 2^22 values)."""
    values = values.astype(np.int64)
    if values.size < 1 << 22 and np.abs(values).max(initial=0) < 1 << 31:
        return np.rint(np.bincount(keys, values.astype(np.float64), minlength)).astype(np.int64)
    out = np.zeros(minlength, np.int64)
    for lo in range(0, values.size, 1 << 21):
        k, v = keys[lo:lo + (1 << 21)], values[lo:lo + (1 << 21)]
        low, high = v & ((1 << 31) - 1), v >> 31
        out += np.rint(np.bincount(k, low.astype(np.float64), minlength)).astype(np.int64)
        out += np.rint(np.bincount(k, high.astype(np.float64), minlength)).astype(np.int64) << 31
    return out


def histogram_reference(bins: np.ndarray, stat: np.ndarray, weight: np.ndarray, order: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, slot_tree: np.ndarray,
                        n_bins: int, per_tree: PerTree | None = None) -> np.ndarray:
    """(slot, feat, bin, lanes) int64: exact integer sums, the kernel's result in any order of addition
    (``per_tree``: each tree's target columns, and zeros for the features its mask forbids)."""
    n, f = bins.shape
    if per_tree is not None:
        out = _per_tree_histogram(bins, stat, weight, order, slot_begin, slot_count, slot_tree, n_bins, per_tree)
        return out
    lanes = stat.shape[1] + 2
    n_slots = len(slot_begin)
    if not n_slots or not int(np.sum(slot_count)):
        return np.zeros((n_slots, f, n_bins, lanes), np.int64)
    slot_of = np.repeat(np.arange(n_slots), slot_count)
    start = np.repeat(np.asarray(slot_begin, np.int64) - np.concatenate([[0], np.cumsum(slot_count)[:-1]]),
                      slot_count)
    pos = start + np.arange(slot_of.size)
    rows = order.reshape(-1)[pos]
    w = weight.reshape(-1)[slot_tree[slot_of].astype(np.int64) * n + rows].astype(np.int64)
    keys = ((slot_of[:, None] * f + np.arange(f)[None, :]) * n_bins + bins[rows]).reshape(-1)
    size = n_slots * f * n_bins
    out = np.empty((size, lanes), np.int64)
    for j in range(lanes):
        v = w * stat[rows, j].astype(np.int64) if j < lanes - 2 else (w if j == lanes - 2 else np.ones_like(w))
        out[:, j] = exact_bincount(keys, np.repeat(v, f), size)
    return out.reshape(n_slots, f, n_bins, lanes)


@dataclass(frozen=True)
class PerTree:
    """Trees of one batch with targets and features of their own (a classifier chain's forest per chain): tree
    ``t`` reads its ``n_stats`` statistics from ``stat[:, column[t]:]`` and searches only the features
    ``mask[t] != 0``."""

    column: np.ndarray  # (T,) int32
    mask: np.ndarray  # (T, F) uint8
    n_stats: int


def _per_tree_histogram(bins: np.ndarray, stat: np.ndarray, weight: np.ndarray, order: np.ndarray,
                        slot_begin: np.ndarray, slot_count: np.ndarray, slot_tree: np.ndarray, n_bins: int,
                        per_tree: PerTree) -> np.ndarray:
    """The per-tree histogram from the plain one: each slot's own statistic columns gathered into a row-local
    matrix is not possible (rows are shared), so slots are grouped by target column."""
    n_slots, f = len(slot_begin), bins.shape[1]
    k = per_tree.n_stats
    out = np.zeros((n_slots, f, n_bins, k + 2), np.int64)
    col = per_tree.column[np.asarray(slot_tree, np.int64)]
    for c in np.unique(col):
        at = np.flatnonzero(col == c)
        out[at] = histogram_reference(bins, stat[:, c:c + k], weight, order, np.asarray(slot_begin)[at],
                                      np.asarray(slot_count)[at], np.asarray(slot_tree)[at], n_bins)
    out *= (per_tree.mask[np.asarray(slot_tree, np.int64)] != 0)[:, :, None, None]
    return out


# ------------------------------------------------------------------------------------------------ subtraction
@lru_cache(maxsize=4)
def hist_siblings(lane: str) -> Description:
    """A level's histograms from the smaller child of each split (built) and the parents' (histogram subtraction,
    exact in integers): slot ``2k + side`` is the built ``small[k]`` where ``side`` is the built one
    (``pair[2k + 1]``), else ``prev[pair[2k]] - small[k]``. Halves the histogram's work on every level below the
    root."""
    return Description(
        "forest_hist_siblings", ["slot", "cell"], [Concat(), Concat()], lane,
        scalar="""
const long k = slot >> 1;
const atom_t c = small[k * SIZE_cell + cell];
out = ((slot & 1) == pair[2 * k + 1]) ? c : prev[(long)pair[2 * k] * SIZE_cell + cell] - c;""",
        inputs=[Input("small", lane, ("*",), gather=True), Input("prev", lane, ("*",), gather=True),
                Input("pair", "int", ("*",), gather=True)],
    )


def hist_siblings_reference(small: np.ndarray, prev: np.ndarray, pair: np.ndarray) -> np.ndarray:
    pair = pair.reshape(-1, 2)
    out = np.empty((2 * len(pair),) + small.shape[1:], small.dtype)
    side = pair[:, 1].astype(bool)
    other = prev[pair[:, 0]] - small
    out[0::2] = np.where(side.reshape((-1,) + (1,) * (small.ndim - 1)), other, small)
    out[1::2] = np.where(side.reshape((-1,) + (1,) * (small.ndim - 1)), small, other)
    return out


# ------------------------------------------------------------------------------------------------ heuristics
def histogram_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """CPUs: a work-group per (slot chunk, feature), a slot's rows folded in one lane (no combine kernel).
    GPUs: a slot's histogram in local memory (``PARTIALS_LOCAL``: integer atomics), 128 work-items over its rows,
    a few work-groups per slot."""
    cfg = ones(desc, dev, sizes)
    cfg["NUM_WG_feat"] = max(1, int(sizes.get("feat", 1)))
    if dev.type == "gpu":
        cfg["NUM_WG_slot"] = pow2_at_most(int(sizes.get("slot", 1)), 256)
        if cfg.get("PARTIALS_LOCAL"):
            cfg["NUM_WI_pos"], cfg["NUM_WG_pos"] = 128, 2
    else:
        cfg["NUM_WG_slot"] = pow2_at_most(max(1, 4 * dev.compute_units), 64)
        cfg["PARTIALS_LOCAL"] = 0
    return cfg


def _hist_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict:
    """A level of ``slot`` nodes spread over ``trees`` bootstrapped trees of ``rows`` rows, binary classes."""
    n, f, t, b = int(s["rows"]), int(s["feat"]), int(s["trees"]), int(s.get("n_bins", 64))
    per = max(1, int(s["slot"]) // t)
    weight = rng.poisson(1.0, (t, n)).astype(np.int32)
    order = np.argsort(weight == 0, axis=1, kind="stable").astype(np.int32)
    cnt = (weight > 0).sum(1)
    begin = np.concatenate([k * n + (np.arange(per) * cnt[k]) // per for k in range(t)]).astype(np.int32)
    count = np.concatenate([np.diff(np.append((np.arange(per) * cnt[k]) // per, cnt[k])) for k in range(t)])
    return {"bins": rng.integers(0, b, (f, n)).astype(np.uint8).reshape(-1),
            "stat": np.eye(2, dtype=np.int32)[rng.integers(0, 2, n)].reshape(-1), "weight": weight.reshape(-1),
            "order": order.reshape(-1), "slot_begin": begin, "slot_count": count.astype(np.int32),
            "slot_tree": np.repeat(np.arange(t), per).astype(np.int32), "n_rows": np.int32(n)}


def _hist_ref(a: Mapping[str, np.ndarray], n_bins: int = 64) -> np.ndarray:
    n = int(a["n_rows"])
    bins = a["bins"].reshape(-1, n).T
    h = histogram_reference(bins, a["stat"].reshape(n, -1), a["weight"].reshape(-1, n), a["order"].reshape(-1, n),
                            a["slot_begin"], a["slot_count"], a["slot_tree"], n_bins)
    return h.reshape(h.shape[0], h.shape[1], -1).astype(np.int32)


# a forest's root level (every tree's in-bag rows) and a deep level (many small nodes), 28 features, 64 bins
_HIST_CLASSES = {
    "roots_64x1e5": {"slot": 64, "feat": 28, "pos": 64500, "rows": 10**5, "trees": 64, "n_bins": 64},
    "level_4096x1e5": {"slot": 4096, "feat": 28, "pos": 1100, "rows": 10**5, "trees": 64, "n_bins": 64},
}


def _cells(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_cell"] = 256 if gpu else 64
    cfg["NUM_WG_cell"] = max(1, dev.compute_units) * (4 if gpu else 1)
    cfg["NUM_WG_slot"] = pow2_at_most(int(sizes.get("slot", 1)), 64 if gpu else 4)
    return cfg


SIBLINGS = KernelSpec("forest_hist_siblings", _cells)
HISTOGRAM = KernelSpec("forest_histogram", histogram_heuristic, tuning=Tuning(
    lambda s: histogram(int(s.get("n_bins", 64)), "int", (2,)), _HIST_CLASSES, _hist_inputs, _hist_ref,
    doc="bootstrap-weighted class-count histograms of every node of a forest level (ragged rows per node)"))
SPECS = (HISTOGRAM, SIBLINGS)
