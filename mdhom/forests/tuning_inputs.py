"""What ``mdhom tune`` runs the forest kernels on: synthetic levels shaped as real fits launch them, and the numpy
references the tuner checks each configuration against.

The size classes are read off the launches of the fits issue 12 benchmarks (``python -m mdhom.bench.forest_profile``):

- a random forest of 500 trees on 1M x 28 rows (sqrt features: the sampled level with 5 candidates, 255 bins),
  whose builds present ``slot``/``tree`` = the trees and ``pos``/``row`` = the rows; a level deeper down holds
  64 nodes per tree (depth 6, about 10k in-bag rows each, tuned at 64 of the 500 trees);
- a classifier-chain ensemble of 64 chains x 32 trees (2048 trees per position) on an emotions-shaped set (391 rows,
  72 features + labels: 8 nodes per tree of ~30 rows, below the sampled level's row-scan bound) and on a
  mediamill-shaped one (30k rows, 120 features + 101 labels: 1024 trees per batch, 4 to 16 nodes per tree).

One description per kernel serves every class (a stored entry carries one description hash per kernel): 28
features, 256 bins, binary classes (two count lanes, the weight, the rows), gini, 5 candidates in tables of 8.
Learner variants (other bins, classes, chains' per-tree columns) load these configurations by kernel name and
size (:func:`mdhom.configs.lookup`; the source says when the variant's code differs).

Every input is valid for its kernel: slots are ragged row ranges of each tree's in-bag rows (bootstrap weights),
candidate and split tables name real features and slots, routes follow the split table, and the partition's scan
and left counts are those of the routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

N_FEAT, N_BINS, OUTPUTS, CRITERION, N_CAND, WIDTH = 28, 256, (2,), "gini", 5, 8
LANES = sum(OUTPUTS) + 2
DEPTH = 10  # the prediction classes' trees (complete: the tree count follows from the value table's size)

# --------------------------------------------------------------------------------------------------- size classes
# slot kernels (forest_candidates, forest_slot_totals, forest_sampled_split, forest_cand_split): ``slot`` slots of
# ``trees`` trees over ``rows`` rows; ``pos`` the longest slot's rows (the ragged fold's launch size)
SLOT_CLASSES: dict[str, dict[str, int]] = {
    "forest_roots_64x1e6": {"slot": 64, "trees": 64, "rows": 10**6, "pos": 640000},
    "forest_level_4096x1e6": {"slot": 4096, "trees": 64, "rows": 10**6, "pos": 10100},
    "emotions_16384x400": {"slot": 16384, "trees": 2048, "rows": 400, "pos": 64},
    "mediamill_4096x3e4": {"slot": 4096, "trees": 1024, "rows": 30000, "pos": 4800},
}
# (tree, row) kernels (forest_route, forest_left_scan, forest_partition): a level of ``per`` nodes per tree
ROW_CLASSES: dict[str, dict[str, int]] = {
    "forest_64x1e6": {"tree": 64, "row": 10**6, "per": 64},
    "emotions_2048x400": {"tree": 2048, "row": 400, "per": 8},
    "mediamill_1024x3e4": {"tree": 1024, "row": 30000, "per": 16},
}
# the dense level (forest_node_totals, forest_feature_split, forest_node_split: a split search over every feature,
# the regressor's default and max_features above half the features): 28 features' histograms of 256 bins per node,
# a forest's roots and a level of 16 nodes per tree (``per_bin``: rows per bin, about a node's rows / 256)
DENSE_CLASSES: dict[str, dict[str, int]] = {
    "dense_roots_64": {"slot": 64, "per_bin": 2500},
    "dense_level_1024": {"slot": 1024, "per_bin": 40},
}
# prediction (forest_leaves: tree x row, forest_leaf_sums: row x tree): the 500-tree forest of depth 10
WALK_CLASSES: dict[str, dict[str, int]] = {
    "forest_500x8192": {"tree": 500, "row": 8192},
    "forest_500x65536": {"tree": 500, "row": 65536},
}


def slot_classes(*, pos: bool = False, feat: bool = False, lane: bool = False) -> dict[str, dict[str, int]]:
    """:data:`SLOT_CLASSES` with the dimensions a kernel has beside ``slot``."""
    out = {}
    for name, s in SLOT_CLASSES.items():
        c = {k: v for k, v in s.items() if k != "pos" or pos}
        if feat:
            c["feat"] = N_CAND
        if lane:
            c["lane"] = LANES
        out[name] = c
    return out


# --------------------------------------------------------------------------------------------------- a level
def level(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    """A level of ``slot`` nodes, ``slot / trees`` per tree, each a contiguous range of its tree's in-bag rows
    (bootstrap weights, the root order: in-bag rows ascending first), at most ``pos`` rows each (rows past that
    belong to no slot: a leaf's). Bins feature-major, two classes one-hot."""
    n, t = int(s["rows"]), int(s["trees"])
    per = max(1, int(s["slot"]) // t)
    cap = int(s.get("pos", n))
    weight = rng.poisson(1.0, (t, n)).astype(np.int32)
    order = np.argsort(weight == 0, axis=1, kind="stable").astype(np.int32)
    cnt = (weight > 0).sum(1)
    edges = (np.arange(per + 1)[None, :] * cnt[:, None]) // per  # (t, per + 1)
    begin = (np.arange(t)[:, None] * n + edges[:, :-1]).reshape(-1).astype(np.int32)
    count = np.minimum(np.diff(edges, axis=1), cap).reshape(-1).astype(np.int32)
    return {"bins": rng.integers(0, N_BINS, (N_FEAT, n)).astype(np.uint8),
            "stat": np.eye(2, dtype=np.int32)[rng.integers(0, 2, n)], "weight": weight, "order": order,
            "slot_begin": begin, "slot_count": count, "slot_tree": np.repeat(np.arange(t), per).astype(np.int32)}


def _positions(begin: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slot of each position in a slot's range, the position) over all slots."""
    count = np.asarray(count, np.int64)
    slot_of = np.repeat(np.arange(count.size), count)
    start = np.repeat(np.asarray(begin, np.int64) - np.concatenate([[0], np.cumsum(count)[:-1]]), count)
    return slot_of, start + np.arange(slot_of.size)


def _flat(a: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The level's arrays as the kernels take them (flat, ``n_rows``)."""
    return {"bins": a["bins"].reshape(-1), "stat": a["stat"].reshape(-1), "weight": a["weight"].reshape(-1),
            "order": a["order"].reshape(-1), "slot_begin": a["slot_begin"], "slot_count": a["slot_count"],
            "slot_tree": a["slot_tree"], "n_rows": np.int32(n)}


def _unflat(a: Mapping[str, Any]) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = int(a["n_rows"])
    return (n, a["bins"].reshape(-1, n).T, a["stat"].reshape(n, -1), a["weight"].reshape(-1, n),
            a["order"].reshape(-1, n))


# --------------------------------------------------------------------------------------------------- candidates
def candidates_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    a = level(s, rng)
    n_slots = a["slot_begin"].size
    per = n_slots // int(s["trees"])
    return {**{k: v for k, v in _flat(a, int(s["rows"])).items() if k not in ("stat", "weight", "slot_tree")},
            "slot_seed": rng.integers(0, 2**32, n_slots, dtype=np.uint32),
            "slot_node": (np.arange(n_slots) % per + per - 1).astype(np.int32), "max_features": np.int32(N_CAND)}


def candidates_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import sampled as SM

    n = int(a["n_rows"])
    return SM.candidates_reference(a["bins"].reshape(-1, n).T, a["order"], a["slot_begin"], a["slot_count"],
                                   a["slot_seed"], a["slot_node"], int(a["max_features"]), WIDTH)


# --------------------------------------------------------------------------------------------------- slot totals
def slot_totals_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    a = _flat(level(s, rng), int(s["rows"]))
    del a["bins"]
    return a


def slot_totals_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import sampled as SM

    n = int(a["n_rows"])
    return SM.slot_totals_reference(a["stat"].reshape(n, -1), a["weight"].reshape(-1, n), a["order"],
                                    a["slot_begin"], a["slot_count"], a["slot_tree"]).astype(np.int32)


# --------------------------------------------------------------------------------------------------- sampled split
def _cand_table(n_slots: int, rng: np.random.Generator) -> np.ndarray:
    """Candidate table rows: mostly ``N_CAND`` live features, some fewer (none: the first drawn is still named)."""
    cand = np.zeros((n_slots, WIDTH), np.int32)
    cand[:, 0] = np.where(rng.random(n_slots) < 0.85, N_CAND, rng.integers(0, N_CAND, n_slots))
    cand[:, 1:1 + N_CAND] = np.argsort(rng.random((n_slots, N_FEAT)), axis=1)[:, :N_CAND]
    return cand


def cand_histograms(a: Mapping[str, Any], slots: np.ndarray) -> np.ndarray:
    """(len(slots), N_CAND, N_BINS, LANES) int64: the candidate histograms ``forest_histogram`` builds for those
    slots (their first max(live, 1) candidates; the others zero)."""
    from mdhom.forests.histogram import exact_bincount

    n, bins, stat, weight, order = _unflat(a)
    cand = a["cand"].reshape(-1, WIDTH)[slots]
    sl, pos = _positions(a["slot_begin"][slots], a["slot_count"][slots])
    rows = order.reshape(-1)[pos].astype(np.int64)
    w = weight.reshape(-1)[a["slot_tree"][slots][sl].astype(np.int64) * n + rows].astype(np.int64)
    size = slots.size * N_CAND * N_BINS
    out = np.zeros((size, LANES), np.int64)
    for j in range(N_CAND):
        keep = j < np.maximum(cand[sl, 0], 1)
        key = ((sl * N_CAND + j) * N_BINS + bins[rows, cand[sl, 1 + j]])[keep]
        for lane in range(LANES):
            v = (w * stat[rows, lane] if lane < LANES - 2 else (w if lane == LANES - 2 else np.ones_like(w)))[keep]
            out[:, lane] += exact_bincount(key, v, size)
    return out.reshape(slots.size, N_CAND, N_BINS, LANES)


def sampled_split_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    from mdhom.forests import sampled as SM
    from mdhom.forests import split as S

    a = _flat(level(s, rng), int(s["rows"]))
    n_slots = a["slot_begin"].size
    a["cand"] = _cand_table(n_slots, rng).reshape(-1)
    large = np.flatnonzero(a["slot_count"] > SM.SMALL_ROWS)
    index = np.full(n_slots, -1, np.int32)
    index[large] = np.arange(large.size, dtype=np.int32)
    hist = cand_histograms(a, large).astype(np.int32).reshape(-1)
    return {**a, "hist": hist if hist.size else np.zeros(1, np.int32), "hist_index": index,
            "xlogx": S.xlogx_table(0), "n_bins": np.int32(N_BINS), "min_leaf": np.int32(1)}


def sampled_split_ref(a: Mapping[str, Any], chunk: int = 512) -> np.ndarray:
    """Each slot's candidate splits from its candidate histograms (the kernel's row scans of small slots give the
    same records), in chunks of slots: a level's histograms at once would take gigabytes."""
    from mdhom.forests import split as S

    n_slots = a["slot_begin"].size
    out = np.zeros((n_slots, N_CAND), S.FEATURE_SPLIT.dtype)
    for lo in range(0, n_slots, chunk):
        slots = np.arange(lo, min(n_slots, lo + chunk))
        hist = cand_histograms(a, slots)
        out[slots] = S.feature_split_reference(hist, OUTPUTS, CRITERION, int(a["min_leaf"]), a["xlogx"])
    return out


# --------------------------------------------------------------------------------------------------- cand split
def cand_split_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    """Random candidate records (scores with ties, some without a cut) and totals of positive weight."""
    from mdhom.forests import split as S

    n_slots = int(s["slot"])
    fs = np.zeros((n_slots, N_CAND), S.FEATURE_SPLIT.dtype)
    fs["score"] = np.round(rng.random((n_slots, N_CAND)) * 8) * 37.5
    fs["bin"] = np.where(rng.random((n_slots, N_CAND)) < 0.9, rng.integers(0, N_BINS - 1, (n_slots, N_CAND)), -1)
    fs["left"] = rng.integers(1, 1000, (n_slots, N_CAND))
    fs["nonconst"] = 1
    tot = rng.integers(0, 500, (n_slots, LANES)).astype(np.int32)
    tot[:, LANES - 2] = tot[:, :LANES - 2].sum(1) + 1
    tot[:, LANES - 1] = rng.integers(1, 800, n_slots)
    return {"fsplit": fs.view(np.int32).reshape(-1), "totals": tot.reshape(-1),
            "cand": _cand_table(n_slots, rng).reshape(-1), "xlogx": S.xlogx_table(0), "n_cand": np.int32(N_CAND)}


def cand_split_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import sampled as SM
    from mdhom.forests import split as S

    fs = a["fsplit"].view(S.FEATURE_SPLIT.dtype).reshape(-1, N_CAND)
    return SM.cand_split_reference(fs, a["totals"].reshape(-1, LANES).astype(np.int64), a["cand"].reshape(-1, WIDTH),
                                   OUTPUTS, CRITERION, a["xlogx"])


# --------------------------------------------------------------------------------------------------- route, partition
def _routed(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    """A level of ``per`` nodes per tree, 85% of them split on a random (feature, bin), and every (tree, row)'s
    slot, new slot, left scan and each split's left count as the fit computes them."""
    from mdhom.forests import partition as P

    t, n, per = int(s["tree"]), int(s["row"]), int(s["per"])
    a = level({"rows": n, "trees": t, "slot": t * per}, rng)
    sb, sc = a["slot_begin"], a["slot_count"]
    n_slots = sb.size
    sl, pos = _positions(sb, sc)
    row_slot = np.full(t * n, -1, np.int32)
    row_slot[(pos // n) * n + a["order"].reshape(-1)[pos]] = sl
    split = rng.random(n_slots) < 0.85
    child = np.where(split, 2 * (np.cumsum(split) - 1), -1).astype(np.int32)
    tab = np.stack([rng.integers(0, N_FEAT, n_slots), rng.integers(0, N_BINS, n_slots), child], 1).astype(np.int32)
    row_slot = row_slot.reshape(t, n)
    new = P.route_reference(row_slot, tab, a["bins"].T)
    moved = new.reshape(-1)[(pos // n) * n + a["order"].reshape(-1)[pos]]
    left = np.bincount(sl, (moved >= 0) & (moved % 2 == 0), n_slots).astype(np.int32)
    return {"bins": a["bins"], "order": a["order"], "row_slot": row_slot, "new_slot": new, "split_tab": tab,
            "slot_begin": sb, "slot_count": sc, "split_left": left}


def route_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    r = _routed(s, rng)
    return {"row_slot": r["row_slot"].reshape(-1), "split_tab": r["split_tab"].reshape(-1),
            "bins": r["bins"].reshape(-1)}


def route_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import partition as P

    n = a["bins"].size // N_FEAT
    return P.route_reference(a["row_slot"].reshape(-1, n), a["split_tab"], a["bins"].reshape(N_FEAT, n).T)


def left_scan_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    r = _routed({**s, "row": s["pos"]}, rng)
    return {"order": r["order"].reshape(-1), "new_slot": r["new_slot"].reshape(-1)}


def _trees_rows(order: np.ndarray) -> tuple[int, int]:
    """(trees, rows) of a flat position order: each tree's is a permutation of its rows."""
    n = int(order.max()) + 1 if order.size else 1
    return order.size // n, n


def left_scan_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import partition as P

    t, n = _trees_rows(a["order"])
    return P.left_scan_reference(a["order"].reshape(t, n), a["new_slot"].reshape(t, n))


def partition_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    from mdhom.forests import partition as P

    r = _routed({**s, "row": s["pos"]}, rng)
    scan = P.left_scan_reference(r["order"], r["new_slot"])
    return {"order": r["order"].reshape(-1), "row_slot": r["row_slot"].reshape(-1),
            "new_slot": r["new_slot"].reshape(-1), "scan": scan.reshape(-1), "split_tab": r["split_tab"].reshape(-1),
            "slot_begin": r["slot_begin"], "split_left": r["split_left"]}


def partition_ref(a: Mapping[str, Any]) -> np.ndarray:
    """The stable partition; each slot's rows are those whose slot it is (ranges tile the slots' rows)."""
    from mdhom.forests import partition as P

    t, n = _trees_rows(a["order"])
    rs = a["row_slot"]
    count = np.bincount(rs[rs >= 0], minlength=a["slot_begin"].size).astype(np.int32)
    return P.partition_reference(a["order"].reshape(t, n), a["new_slot"].reshape(t, n), a["split_tab"],
                                 a["slot_begin"], count)


# --------------------------------------------------------------------------------------------------- prediction
def _forest(t: int, depth: int, n_feat: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Complete random trees (FOREST_NODE words, roots, nodes per tree)."""
    from mdhom.forests.chain_kernels import node_table

    per = 2 ** (depth + 1) - 1
    local = np.arange(per)
    inner = local < 2 ** depth - 1
    feature = np.where(inner[None, :], rng.integers(0, n_feat, (t, per)), -1).reshape(-1).astype(np.int32)
    left = np.tile(np.where(inner, 2 * local + 1, -1), t).astype(np.int32)
    threshold = rng.normal(size=feature.size)
    table, root = node_table(feature, threshold, left, np.arange(t + 1, dtype=np.int64) * per)
    return table, root, per


def leaves_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    t, n = int(s["tree"]), int(s["row"])
    table, root, _ = _forest(t, DEPTH, N_FEAT, rng)
    X = rng.normal(size=(n, N_FEAT))
    X[rng.random(X.shape) < 0.05] = np.nan  # missing values go right
    return {"X": X.reshape(-1), "forest": table, "root": root, "n_feat": np.int32(N_FEAT)}


def leaves_ref(a: Mapping[str, Any]) -> np.ndarray:
    """(tree, row) leaf ids: each tree walked for every row (NaN fails ``<=``: right)."""
    from mdhom.components.predictor import FOREST_NODE

    rec_size = FOREST_NODE.dtype.itemsize
    raw = a["forest"].view(np.uint8)
    rec = raw[: raw.size // rec_size * rec_size].view(FOREST_NODE.dtype)
    f = int(a["n_feat"])
    X = a["X"].reshape(-1, f)
    node = np.repeat(a["root"].astype(np.int64)[:, None], X.shape[0], axis=1)
    rows = np.broadcast_to(np.arange(X.shape[0]), node.shape)
    while True:
        inner = rec["left"][node] >= 0
        if not inner.any():
            return node.astype(np.int32)
        nd = node[inner]
        go_left = X[rows[inner], rec["feature"][nd]] <= rec["threshold"][nd]
        node[inner] = np.where(go_left, rec["left"][nd], rec["right"][nd])


LEAF_VALUES = 2  # a binary classifier's leaf: two class probabilities


def leaf_sums_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    t, n = int(s["tree"]), int(s["row"])
    per = 2 ** (DEPTH + 1) - 1
    leaf = (np.arange(t)[:, None] * per + rng.integers(per // 2, per, (t, n))).astype(np.int32)
    return {"leaf": leaf.reshape(-1), "value": rng.random(t * per * LEAF_VALUES)}


def leaf_sums_ref(a: Mapping[str, Any]) -> np.ndarray:
    """Per row, its leaves' values added in tree order from zero (the numpy walk's order, the exact pins')."""
    value = a["value"].reshape(-1, LEAF_VALUES)
    t = value.shape[0] // (2 ** (DEPTH + 1) - 1)
    leaf = a["leaf"].reshape(t, -1)
    acc = np.zeros((leaf.shape[1], LEAF_VALUES))
    for k in range(t):
        acc += value[leaf[k]]
    return acc


# --------------------------------------------------------------------------------------------------- dense level
def dense_classes(*, feat: bool = False, totals: bool = False) -> dict[str, dict[str, int]]:
    """:data:`DENSE_CLASSES` with the dimensions a dense-level kernel has beside ``slot``."""
    out = {}
    for name, c in DENSE_CLASSES.items():
        d = dict(c)
        if feat:
            d["feat"] = N_FEAT
        if totals:
            d.update(lane=LANES, bin=N_BINS)
        out[name] = d
    return out


def dense_histograms(s: Mapping[str, int], rng: np.random.Generator) -> np.ndarray:
    """(slot, feat, bin, lanes) int32 class-count histograms: each feature's bins hold a node's rows (a random
    share of the bins in use, Poisson counts of ``per_bin``), lanes class 0, class 1, their weight, the rows."""
    n_slots, per_bin = int(s["slot"]), int(s["per_bin"])
    used = rng.random((n_slots, N_FEAT, N_BINS)) < 0.7
    used[:, :3] = False  # a few features constant on some nodes: one bin in use
    used[:, :3, 0] = True
    counts = rng.poisson(per_bin / 2, (n_slots, N_FEAT, N_BINS, 2)) * used[..., None]
    hist = np.zeros((n_slots, N_FEAT, N_BINS, LANES), np.int32)
    hist[..., :2] = counts
    hist[..., 2] = counts.sum(-1)
    hist[..., 3] = (hist[..., 2] * 2 + 2) // 3  # distinct rows of the bootstrap sample
    return hist


def node_totals_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    return {"hist": dense_histograms(s, rng).reshape(-1), "n_feat": np.int32(N_FEAT)}


def node_totals_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import split as S

    hist = a["hist"].reshape(-1, int(a["n_feat"]), N_BINS, LANES)
    return S.node_totals_reference(hist).astype(np.int32)


def feature_split_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    from mdhom.forests import split as S

    return {"hist": dense_histograms(s, rng).reshape(-1), "xlogx": S.xlogx_table(0), "n_bins": np.int32(N_BINS),
            "min_leaf": np.int32(1)}


def feature_split_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import split as S

    hist = a["hist"].reshape(-1, N_FEAT, N_BINS, LANES).astype(np.int64)
    return S.feature_split_reference(hist, OUTPUTS, CRITERION, int(a["min_leaf"]), a["xlogx"])


def node_split_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, Any]:
    """The split records and node totals a dense level hands ``forest_node_split``: of random histograms, drawing
    ``N_CAND`` features per node (sqrt of 28) by each node's seed and id."""
    from mdhom.forests import split as S

    hist = dense_histograms(s, rng).astype(np.int64)
    n_slots = hist.shape[0]
    xlogx = S.xlogx_table(0)
    return {"fsplit": S.feature_split_reference(hist, OUTPUTS, CRITERION, 1, xlogx).view(np.int32).reshape(-1),
            "totals": S.node_totals_reference(hist).astype(np.int32).reshape(-1),
            "slot_seed": rng.integers(0, 2**32, n_slots, dtype=np.uint32),
            "slot_node": rng.integers(0, 1024, n_slots).astype(np.int32), "xlogx": xlogx,
            "max_features": np.int32(N_CAND)}


def node_split_ref(a: Mapping[str, Any]) -> np.ndarray:
    from mdhom.forests import split as S

    fsplit = a["fsplit"].view(S.FEATURE_SPLIT.dtype).reshape(-1, N_FEAT)
    return S.node_split_reference(fsplit, a["totals"].reshape(-1, LANES).astype(np.int64), a["slot_seed"],
                                  a["slot_node"], int(a["max_features"]), OUTPUTS, CRITERION, a["xlogx"])
