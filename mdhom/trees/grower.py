"""Growing one tree over any :class:`~mdhom.trees.backend.TreeKernels`: depth-wise here, loss-guided by
:mod:`mdhom.trees.lossguide` (both write into :class:`mdhom.trees.growth.NodeTable`).

Every decision (split or not, which split, which child is smaller, leaf values) is a function of what the
kernels return, so two backends that agree on their return values grow the same tree. Histograms of a
split node's children come from one pass over the *smaller* child's rows and one subtraction
(parent - smaller = larger): the histogram subtraction trick.

A depth-wise level lives in one histogram handle; its smaller children are built in one pass and their
siblings by one subtraction (``siblings``) however many of the level's nodes split.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mdhom.components.split import SPLIT_EPS
from mdhom.trees.backend import Splits, TreeKernels
from mdhom.trees.growth import GrowParams, NodeTable, can_split, cat_tables, sibling_histograms
from mdhom.trees.lossguide import grow_lossguide, grow_lossguide_batched
from mdhom.trees.model import Tree
from mdhom.trees.reference import ahead_step

__all__ = ["GrowParams", "grow_tree"]


def grow_tree(kernels: TreeKernels, root_sums: np.ndarray | None, feature_mask: np.ndarray, params: GrowParams,
              threshold: Callable[[int, int], float],
              on_values: Callable[[np.ndarray], None] | None = None) -> Tree:
    """Grow one tree on the gradients already set in ``kernels``; afterwards every row sits in its leaf
    (``kernels.row_nodes()``, or ``kernels.update_scores(tree.value)`` without a trip to the host).
    ``on_values`` gets the node values as soon as they are known, before the tree is assembled on the host
    (the score update can run on the device meanwhile).

    ``root_sums`` is (n_outputs, 2), the total (g, h) of all rows; ``None`` takes them from the root's
    split search (``Splits.total``), so gradients that never left the device need no extra pass.
    """
    kernels.reset_rows()
    hist = kernels.histograms(np.array([0], np.int32))
    splits = kernels.best_splits(hist, feature_mask, params.split)
    if root_sums is None:
        root_sums = splits.total[0]
    nodes = NodeTable(np.asarray(root_sums).shape[0])
    nodes.add(root_sums, 0)
    if can_split(0, params):
        if not params.lossguide:
            _grow_depthwise(kernels, nodes, feature_mask, params, hist, splits)
        elif kernels.batch_lossguide:
            grow_lossguide_batched(kernels, nodes, feature_mask, params, hist, splits)
        else:
            grow_lossguide(kernels, nodes, feature_mask, params, hist, splits)
    value = nodes.values(params)
    if on_values is not None:
        on_values(value)
    return nodes.to_tree(params, threshold, value)


def _ahead_levels(kernels: TreeKernels, params: GrowParams, depth: int, n_nodes: int, n_leaves: int) -> int:
    """How many levels below the ``n_nodes`` nodes at ``depth`` the device may split by their best splits before the
    host sees them (``kernels.depth_ahead`` at most; none in a fit with categorical features, the look-ahead splits
    numerically): as many as leave the level after them splittable (a level at the depth limit would be built and
    searched in vain), and only while the leaf budget cannot bind (every node of those levels splitting adds
    ``n_nodes * (2^levels - 1)`` leaves at most), so that the level-wise rule (every node of gain > SPLIT_EPS, the
    largest gains where the budget is short) takes the same splits as the device's."""
    if params.categorical is not None and bool(np.any(params.categorical)):
        return 0
    levels = int(kernels.depth_ahead)
    if params.max_depth:
        levels = min(levels, params.max_depth - depth - 1)
    if params.max_leaves:
        while levels > 0 and n_leaves + n_nodes * ((1 << levels) - 1) > params.max_leaves:
            levels -= 1
    return max(0, levels)


def _name_ahead(nodes: NodeTable, params: GrowParams, names: dict[int, int],
                ahead: list[tuple[Splits, np.ndarray, np.ndarray, int]], level_t: np.ndarray) -> np.ndarray:
    """Write the levels split on the device into the node table, in level order (the tree's ids are given as the
    host would have given them level by level), and map their backend ids to those; returns the tree ids of the
    last level's entries. Each level: its splits, the entries that split, the level's live entries (ascending)
    and its children's first backend id."""
    for splits, split_at, at, first_id in ahead:
        pos = np.searchsorted(at, split_at)  # their places in the level
        lo, hi, left_small, record = nodes.split_level(level_t[pos].astype(np.int32), splits, split_at, params)
        record()
        names.update(zip((first_id + 2 * split_at).tolist() + (first_id + 2 * split_at + 1).tolist(),
                         lo.tolist() + hi.tolist(), strict=True))
        level_t = _smaller_first(lo, hi, left_small)
    return level_t


def _level_done(depth: int, n_leaves: int, params: GrowParams) -> bool:
    """Whether nodes at ``depth`` may not split (the depth limit) or the tree has its ``max_leaves``."""
    return not can_split(depth, params) or bool(params.max_leaves and n_leaves >= params.max_leaves)


def _smaller_first(lo: np.ndarray, hi: np.ndarray, left_small: np.ndarray) -> np.ndarray:
    """The next level's order: each split's built (smaller) child, then each other child."""
    return np.concatenate([np.where(left_small, lo, hi), np.where(left_small, hi, lo)]).astype(np.int64)


def _grow_depthwise(kernels: TreeKernels, nodes: NodeTable, mask: np.ndarray, params: GrowParams, hist: object,
                    splits: Splits) -> None:
    """Level by level. A level's node bookkeeping runs after the next level's split search is enqueued (the
    search's ``then``), so the device waits for the host only for what its next launches need: the chosen
    splits, the children's ids and which child is built.

    With ``kernels.depth_ahead``, the levels below a level whose leaf budget cannot bind are split on the device
    (:meth:`~mdhom.trees.backend.TreeKernels.look_ahead`) before the host reads them: one round trip for several
    levels. The device numbers those nodes its own way (slots of nodes that do not split included), so the level's
    nodes carry two ids, the tree's and the backend's, and the rows learn their tree leaves by one relabelling at
    the end. Without look-ahead both ids are the same."""
    level_t = np.array([0], np.int64)  # the level's nodes: tree ids ...
    level_b = np.array([0], np.int64)  # ... backend ids ...
    at = np.array([0], np.int64)  # ... and rows of ``splits`` (and nodes of ``hist``)
    names: dict[int, int] = {}  # backend id -> tree id, where they differ
    n_bid = 1  # the next free backend id
    n_leaves = 1
    depth = 0
    ahead: list[tuple[Splits, np.ndarray, np.ndarray, int]] = []  # levels split on the device, tree ids not given
    while at.size:
        gain = np.asarray(splits.gain)[at]
        chosen = np.flatnonzero(gain > SPLIT_EPS)
        if params.max_leaves:
            room = params.max_leaves - n_leaves
            # the largest gains first, ties to the earlier node of the level; then back to level order
            chosen = np.sort(chosen[np.argsort(-gain[chosen], kind="stable")[:room]])
        if not chosen.size:
            break
        rows = at[chosen]
        k = int(chosen.size)
        b_lo = np.arange(n_bid, n_bid + 2 * k, 2, dtype=np.int64)
        n_bid += 2 * k
        n_leaves += k
        # the partition needs backend ids only: launched before the tree's ids of the levels split on the device
        # are given (H200, 10.5M rows: the device waited 0.76 ms a round for that bookkeeping)
        left_small = nodes.left_small(splits, rows)
        kernels.apply_splits(
            level_b[chosen].astype(np.int32), splits.feature[rows], splits.bin[rows], splits.default_left[rows],
            b_lo.astype(np.int32), (b_lo + 1).astype(np.int32), small_left=left_small,
            cat_left=cat_tables(params, splits, rows, splits.feature[rows]),
        )
        if ahead:
            level_t = _name_ahead(nodes, params, names, ahead, level_t)
            ahead = []
        lo, hi, _, record = nodes.split_level(level_t[chosen].astype(np.int32), splits, rows, params)
        if names:
            names.update(zip((b_lo.tolist() + (b_lo + 1).tolist()), lo.tolist() + hi.tolist(), strict=True))
        depth += 1
        if _level_done(depth, n_leaves, params):
            record()
            break
        level_t, level_b = _smaller_first(lo, hi, left_small), _smaller_first(b_lo, b_lo + 1, left_small)
        h_small = kernels.histograms(level_b[:k].astype(np.int32), transient=True)  # one histogram pass for the level
        hist = sibling_histograms(kernels, hist, h_small, rows.tolist(), len(splits.gain))  # [smalls, larges]
        at = np.arange(2 * k, dtype=np.int64)
        levels = _ahead_levels(kernels, params, depth, 2 * k, n_leaves)
        if not levels:
            splits = kernels.best_splits(hist, mask, params.split, then=record)
            continue
        # the next ``levels`` levels on the device: level j's entries (2k * 2^j slots, alive or not) split where
        # they may, children first_id[j] + 2e, + 1
        m = 2 * k
        allow = [np.full(m << j, can_split(depth + j, params)) for j in range(levels)]
        first_id = []
        for j in range(levels):
            first_id.append(n_bid)
            n_bid += 2 * (m << j)
        if not names:  # from here on the backend's ids differ from the tree's
            names = {i: i for i in range(nodes.n)}
        founds, hists = kernels.look_ahead(hist, mask, params.split, level_b.astype(np.int32), allow, first_id)
        record()
        # which entries split, level by level: what the next partition needs (the live entries, their backend ids);
        # the tree's ids of those levels wait for it (``_name_ahead``)
        alive = np.ones(m, bool)
        for j in range(levels):
            ok, _, next_ids, next_alive = ahead_step(founds[j], alive, allow[j], first_id[j])
            split_at = np.flatnonzero(ok)  # entries that split, in level order: the level's chosen nodes
            if not split_at.size:
                at = at[:0]
                break
            ahead.append((founds[j], split_at, at, first_id[j]))
            n_leaves += int(split_at.size)
            depth += 1
            at = np.concatenate([split_at, ok.size + split_at]).astype(np.int64)
            alive, level_b = next_alive, next_ids[at]
        else:
            splits, hist = founds[levels], hists[levels - 1]
            if _level_done(depth, n_leaves, params):
                break
    if ahead:
        _name_ahead(nodes, params, names, ahead, level_t)
    if names:
        node_map = np.zeros(n_bid, np.int32)
        node_map[np.fromiter(names, np.int64, len(names))] = np.fromiter(names.values(), np.int32, len(names))
        kernels.relabel(node_map)
