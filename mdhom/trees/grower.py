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

from mdhom.components.lookahead import AHEAD_ENTRIES, within_budget
from mdhom.components.split import SPLIT_EPS
from mdhom.trees.backend import Splits, TreeKernels
from mdhom.trees.growth import (
    GrowParams,
    NodeTable,
    Thresholds,
    ahead_levels,
    can_split,
    cat_tables,
    node_values,
    sibling_histograms,
)
from mdhom.trees.lossguide import grow_lossguide, grow_lossguide_batched
from mdhom.trees.model import Tree
from mdhom.trees.reference import ahead_step

__all__ = ["GrowParams", "grow_tree", "start_tree"]


def grow_tree(kernels: TreeKernels, root_sums: np.ndarray | None, feature_mask: np.ndarray, params: GrowParams,
              threshold: Thresholds,
              on_values: Callable[[np.ndarray], None] | None = None) -> Tree:
    """Grow one tree on the gradients already set in ``kernels``; afterwards every row sits in its leaf
    (``kernels.row_nodes()``, or ``kernels.update_scores(tree.value)`` without a trip to the host).
    ``on_values`` gets the node values as soon as they are known, before the tree is assembled on the host
    (the score update can run on the device meanwhile), indexed by the node ids the rows hold then: a depth-wise
    tree calls it before the relabelling, with the backend's ids (:func:`_grow_depthwise`).

    ``root_sums`` is (n_outputs, 2), the total (g, h) of all rows; ``None`` takes them from the root's
    split search (``Splits.total``), so gradients that never left the device need no extra pass.
    """
    return start_tree(kernels, root_sums, feature_mask, params, threshold, on_values)()


def start_tree(kernels: TreeKernels, root_sums: np.ndarray | None, feature_mask: np.ndarray, params: GrowParams,
               threshold: Thresholds, on_values: Callable[[np.ndarray], None] | None = None,
               while_busy: Callable[[], None] | None = None, relabel: bool = True) -> Callable[[], Tree]:
    """:func:`grow_tree` in two parts, for a driver that overlaps one tree's host work with the next tree's device
    work: this grows the tree up to ``on_values`` (the rows in their leaves, the score update launched) and returns
    what assembles it on the host (the node table's records of the levels the device split, the tree). ``while_busy``
    runs once the device has this tree's first launches queued, before the host first waits for one of its results:
    there a driver finishes the last tree (H200, 10.5M rows, depth 8: ~0.8 ms of Python a tree that the device had
    waited for between trees). ``relabel`` False leaves the rows with the backend's ids (a depth-wise tree's, which
    ``on_values`` gets anyway): the finish may then run after the next tree has started, whose rows it must not
    rename."""
    busy = _Once(while_busy)
    kernels.reset_rows()
    hist = kernels.histograms(np.array([0], np.int32))
    root_ahead = None
    levels, final = _ahead(kernels, params, 0, 1, 1) if can_split(0, params) and not params.lossguide else (0, False)
    if levels or final:  # the root's split too is the device's: the first round trip comes after the levels below it
        allow, first_id, n_bid = _ahead_plan(params, 0, 1, levels + final, 1)
        founds, hists = kernels.look_ahead(hist, feature_mask, params.split, np.array([0], np.int32), allow, first_id,
                                           (1, params.max_leaves) if final else None, then=busy)
        root_ahead = ((levels, final, allow, first_id, founds, hists), n_bid)
        splits = founds[0]
    else:
        splits = kernels.best_splits(hist, feature_mask, params.split, then=busy)
    busy()  # (where it has not run: a backend without a device calls ``then`` at the end)
    if root_sums is None:
        root_sums = splits.total[0]
    nodes = NodeTable(np.asarray(root_sums).shape[0], _tree_size(params))
    nodes.add(root_sums, 0)
    finish_levels = None
    walk = None  # a batched loss-guided walk, written into ``nodes`` and let go in ``finish`` (after the score update)
    if can_split(0, params):
        if not params.lossguide:
            finish_levels = _grow_depthwise(kernels, nodes, feature_mask, params, hist, splits, on_values, root_ahead,
                                            relabel)
            on_values = None  # called with the rows' last ids, before the tree's bookkeeping
        elif kernels.batch_lossguide:
            walk = grow_lossguide_batched(kernels, nodes, feature_mask, params, hist, splits)
        else:
            grow_lossguide(kernels, nodes, feature_mask, params, hist, splits)
    value = None
    if on_values is not None:
        value = nodes.values(params) if walk is None else node_values(walk.sums(), params)
        on_values(value)

    def finish() -> Tree:
        nonlocal walk
        if walk is not None:
            walk.write()
            walk = None
        if finish_levels is not None:
            finish_levels()
        return nodes.to_tree(params, threshold, nodes.values(params) if value is None else value)

    return finish


class _Once:
    """A callable run at its first call only (None: nothing)."""

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self.fn = fn

    def __call__(self) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn()


def _ahead(kernels: TreeKernels, params: GrowParams, depth: int, n_nodes: int, n_leaves: int) -> tuple[int, bool]:
    """What the device splits below the ``n_nodes`` nodes at ``depth`` (the tree has ``n_leaves``) before the host sees
    it: :func:`~mdhom.trees.growth.ahead_levels` levels, and whether the tree's last level follows them
    (:func:`_final_level`)."""
    levels = ahead_levels(kernels, params, depth, n_nodes, n_leaves)
    return levels, _final_level(kernels, params, depth + levels, n_nodes << levels)


def _final_level(kernels: TreeKernels, params: GrowParams, depth: int, entries: int) -> bool:
    """Whether the device may split the level at ``depth`` (of ``entries`` slots) too, a tree's last by its depth
    limit, below the levels it splits ahead: its leaf budget then decided on the device (``look_ahead``'s ``final``),
    so a tree needs no round trip but the one that ends it (H200, 10.5M rows, depth 8 and 255 leaves: the device had
    waited ~0.7 ms a round for the host to choose the last level's splits). At most ``AHEAD_ENTRIES`` entries: the
    budget ranks each entry's gain against every other's."""
    if not kernels.depth_ahead or (params.categorical is not None and bool(np.any(params.categorical))):
        return False
    return bool(params.max_depth) and depth == params.max_depth - 1 and entries <= AHEAD_ENTRIES


def _ahead_plan(params: GrowParams, depth: int, m: int, levels: int, n_bid: int
                ) -> tuple[list[np.ndarray], list[int], int]:
    """A look-ahead of ``levels`` levels below ``m`` entries at ``depth``: which of each level's slots may split
    (``m * 2^j`` at level j, alive or not), the first backend id of each level's children (from ``n_bid`` on), and
    the next free backend id."""
    allow = [np.full(m << j, can_split(depth + j, params)) for j in range(levels)]
    first_id = []
    for j in range(levels):
        first_id.append(n_bid)
        n_bid += 2 * (m << j)
    return allow, first_id, n_bid


def _tree_size(params: GrowParams) -> int:
    """Room for a tree's nodes up front: what its leaf budget and depth allow, at most 4096 (the tables grow past
    that by doubling; a tree of 255 leaves had grown them three times)."""
    most = 4096
    if params.max_leaves:
        most = min(most, 2 * params.max_leaves - 1)
    if params.max_depth:
        most = min(most, (1 << min(params.max_depth + 1, 13)) - 1)
    return most


def _values(sums: np.ndarray, params: GrowParams) -> np.ndarray:
    """:func:`node_values` of sums by backend id, of which ids that hold no rows (a look-ahead's slots below nodes
    that did not split) are zeros: 0 / 0 where reg_lambda is 0, never read."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return node_values(sums, params)


def _name_ahead(nodes: NodeTable, params: GrowParams, tree_of: np.ndarray,
                ahead: list[tuple[Splits, np.ndarray, np.ndarray, int]], level_t: np.ndarray) -> np.ndarray:
    """Write the levels split on the device into the node table, in level order (the tree's ids are given as the
    host would have given them level by level), and map their backend ids to those in ``tree_of``; returns the tree
    ids of the last level's entries. Each level: its splits, the entries that split, the level's live entries
    (ascending) and its children's first backend id."""
    for splits, split_at, at, first_id in ahead:
        pos = np.searchsorted(at, split_at)  # their places in the level
        lo, hi, left_small, record = nodes.split_level(level_t[pos].astype(np.int32), splits, split_at, params)
        record()
        tree_of[first_id + 2 * split_at], tree_of[first_id + 2 * split_at + 1] = lo, hi
        level_t = _smaller_first(lo, hi, left_small)
    return level_t


def _room(by_id: np.ndarray, n: int) -> np.ndarray:
    """An array by backend id with room for ids below ``n`` (zeros for the new ones: ids that hold no rows)."""
    if by_id.shape[0] >= n:
        return by_id
    out = np.zeros((max(n, 2 * by_id.shape[0]), *by_id.shape[1:]), by_id.dtype)
    out[: by_id.shape[0]] = by_id
    return out


def _level_done(depth: int, n_leaves: int, params: GrowParams) -> bool:
    """Whether nodes at ``depth`` may not split (the depth limit) or the tree has its ``max_leaves``."""
    return not can_split(depth, params) or bool(params.max_leaves and n_leaves >= params.max_leaves)


def _smaller_first(lo: np.ndarray, hi: np.ndarray, left_small: np.ndarray) -> np.ndarray:
    """The next level's order: each split's built (smaller) child, then each other child."""
    return np.concatenate([np.where(left_small, lo, hi), np.where(left_small, hi, lo)]).astype(np.int64)


def _grow_depthwise(kernels: TreeKernels, nodes: NodeTable, mask: np.ndarray, params: GrowParams, hist: object,
                    splits: Splits, on_values: Callable[[np.ndarray], None] | None = None,
                    root_ahead: tuple[tuple, int] | None = None, relabel: bool = True) -> Callable[[], None]:
    """Level by level. A level's node bookkeeping runs after the next level's split search is enqueued (the
    search's ``then``), so the device waits for the host only for what its next launches need: the chosen
    splits, the children's ids and which child is built.

    With ``kernels.depth_ahead``, the levels below a level whose leaf budget cannot bind are split on the device
    (:meth:`~mdhom.trees.backend.TreeKernels.look_ahead`) before the host reads them: one round trip for several
    levels. The device numbers those nodes its own way (slots of nodes that do not split included), so the level's
    nodes carry two ids, the tree's and the backend's, and the rows learn their tree leaves by one relabelling at
    the end. Without look-ahead both ids are the same.

    ``on_values`` gets the values of the backend's ids (what the rows hold before the relabelling) as soon as the
    last partition is launched: the score update then runs while the host writes the tree (H200, 10.5M rows: the
    device had waited ~0.7 ms a round for that bookkeeping).

    ``root_ahead``: the look-ahead :func:`grow_tree` launched from the root itself ((levels, final, allow, first_id,
    founds, hists), and the next free backend id; ``splits`` is its first level's), so the root's split too is taken
    on the device. With the last level's leaf budget on the device as well (``final``, :func:`_final_level`), a tree
    of depth 8 and 255 leaves is one look-ahead: its only wait is for the tree's record at the end.

    Returns what writes the records of the levels split on the device into ``nodes`` and renames the rows with the
    tree's ids (``relabel``): the host's part after ``on_values``, which :func:`start_tree` defers."""
    level_t = np.array([0], np.int64)  # the level's nodes: tree ids ...
    level_b = np.array([0], np.int64)  # ... backend ids ...
    at = np.array([0], np.int64)  # ... and rows of ``splits`` (and nodes of ``hist``)
    tree_of: np.ndarray | None = None  # backend id -> tree id, once they differ
    n_bid = 1  # the next free backend id
    n_leaves = 1
    depth = 0
    ahead: list[tuple[Splits, np.ndarray, np.ndarray, int]] = []  # levels split on the device, tree ids not given
    ahead_record: Callable[[], None] | None = None  # ... and the record of the host's level above them
    sums_b = np.zeros((_tree_size(params), *nodes.sums.shape[1:]))  # (g, h) sums by backend id
    sums_b[0] = nodes.sums[0]
    pending = None  # a look-ahead launched, its levels not yet taken into the tree
    unread = None  # a tree's last level whose scores were updated before the host read its search (scores_ahead)
    if root_ahead is not None:
        pending, n_bid = root_ahead
        tree_of = np.arange(nodes.n, dtype=np.int32)  # from here on the backend's ids differ from the tree's
    record: Callable[[], None] | None = None  # the host's last level's record (none above the root's look-ahead)
    while at.size:
        if pending is None:  # a level of the host's: its splits chosen from its search
            gain = np.asarray(splits.gain)[at]
            # the largest gains first where the leaf budget binds, ties to the earlier node of the level
            chosen = np.flatnonzero(within_budget(gain, gain > SPLIT_EPS,
                                                  params.max_leaves - n_leaves if params.max_leaves else None))
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
                final=_level_done(depth + 1, n_leaves, params),  # the tree's last level: its children are leaves
            )
            sums_b = _room(sums_b, n_bid)
            sums_b[b_lo] = np.asarray(splits.left_sum[rows], np.float64).reshape(k, *sums_b.shape[1:])
            sums_b[b_lo + 1] = np.asarray(splits.right_sum[rows], np.float64).reshape(k, *sums_b.shape[1:])
            depth += 1
            last = _level_done(depth, n_leaves, params)
            if on_values is not None and last:  # the last partition
                on_values(_values(sums_b[:n_bid], params))
                on_values = None
            if ahead_record is not None:  # the host's level above the levels split on the device, and those
                ahead_record()  # levels' bookkeeping, now the device is busy
            if ahead:
                level_t = _name_ahead(nodes, params, tree_of, ahead, level_t)
            ahead, ahead_record = [], None
            lo, hi, _, record = nodes.split_level(level_t[chosen].astype(np.int32), splits, rows, params)
            if tree_of is not None:
                tree_of = _room(tree_of, n_bid)
                tree_of[b_lo], tree_of[b_lo + 1] = lo, hi
            if last:
                record()
                break
            level_t, level_b = _smaller_first(lo, hi, left_small), _smaller_first(b_lo, b_lo + 1, left_small)
            h_small = kernels.histograms(level_b[:k].astype(np.int32), transient=True)  # one pass for the level
            hist = sibling_histograms(kernels, hist, h_small, rows.tolist(), len(splits.gain))  # [smalls, larges]
            at = np.arange(2 * k, dtype=np.int64)
            levels, final = _ahead(kernels, params, depth, 2 * k, n_leaves)
            if not (levels or final):
                splits = kernels.best_splits(hist, mask, params.split, then=record)
                continue
            # the next ``levels`` levels on the device (and the tree's last, ``final``): level j's entries (2k * 2^j
            # slots, alive or not) split where they may, children first_id[j] + 2e, + 1
            allow, first_id, n_bid = _ahead_plan(params, depth, 2 * k, levels + final, n_bid)
            if tree_of is None:  # from here on the backend's ids differ from the tree's
                tree_of = np.arange(nodes.n, dtype=np.int32)
            founds, hists = kernels.look_ahead(hist, mask, params.split, level_b.astype(np.int32), allow,
                                               first_id, (n_leaves, params.max_leaves) if final else None)
            pending = (levels, final, allow, first_id, founds, hists)
        levels, final, allow, first_id, founds, hists = pending
        pending = None
        m = at.size  # the look-ahead's entries: the root, or the children of the host's level
        tree_of = _room(tree_of, n_bid)
        ahead_record = record  # the host's level above the look-ahead (none above the root's)
        # which entries split, level by level: what the next partition needs (the live entries, their backend ids);
        # the tree's ids of those levels wait for it (``_name_ahead``)
        alive = np.ones(m, bool)
        for j in range(levels + final):
            if final and j == levels and on_values is not None:  # the tree's last level: its leaves' values on the
                sums_b = _room(sums_b, n_bid)  # device where it can, its search read when the tree is written
                if kernels.scores_ahead(_values(sums_b[:n_bid], params), params.learning_rate, params.split):
                    on_values = None
                    unread = (founds, allow[j], first_id[j], j, alive, at, n_leaves)
                    at = at[:0]
                    break
            room = params.max_leaves - n_leaves if j == levels and params.max_leaves else None  # the last level's
            ok, _, next_ids, next_alive = ahead_step(founds[j], alive, allow[j], first_id[j], room)
            split_at = np.flatnonzero(ok)  # entries that split, in level order: the level's chosen nodes
            if not split_at.size:
                at = at[:0]
                break
            ahead.append((founds[j], split_at, at, first_id[j]))
            sums_b = _room(sums_b, n_bid)
            c = first_id[j] + 2 * split_at
            sums_b[c] = np.asarray(founds[j].left_sum[split_at], np.float64).reshape(c.size, *sums_b.shape[1:])
            sums_b[c + 1] = np.asarray(founds[j].right_sum[split_at], np.float64).reshape(c.size, *sums_b.shape[1:])
            n_leaves += int(split_at.size)
            depth += 1
            at = np.concatenate([split_at, ok.size + split_at]).astype(np.int64)
            alive, level_b = next_alive, next_ids[at]
        else:
            if final or _level_done(depth, n_leaves, params):  # (the tree's last level: nothing searched below it)
                break
            splits, hist = founds[levels], hists[levels - 1]
    if on_values is not None:
        on_values(_values(sums_b[:n_bid], params))

    def finish() -> None:  # the node table's records of the levels the device split, and the rows' tree ids
        if unread is not None:  # the last level, its scores updated before its search was read (scores_ahead)
            founds_l, allow_l, first_l, j, alive_l, at_l, leaves_l = unread
            ok = ahead_step(founds_l[j], alive_l, allow_l, first_l,
                            params.max_leaves - leaves_l if params.max_leaves else None)[0]
            split_at = np.flatnonzero(ok)
            if split_at.size:
                ahead.append((founds_l[j], split_at, at_l, first_l))
        if ahead_record is not None:  # also where the look-ahead's first level split nothing
            ahead_record()
        if ahead:
            _name_ahead(nodes, params, tree_of, ahead, level_t)
        if tree_of is not None and relabel:
            kernels.relabel(tree_of[:n_bid])

    return finish
