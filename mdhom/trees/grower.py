"""Growing one tree over any :class:`~mdhom.trees.backend.TreeKernels`: depth-wise or loss-guided.

Every decision (split or not, which split, which child is smaller, leaf values) is a function of what the
kernels return, so two backends that agree on their return values grow the same tree. Histograms of a
split node's children come from one pass over the *smaller* child's rows and one subtraction
(parent - smaller = larger): the histogram subtraction trick.

A depth-wise level lives in one histogram handle; its smaller children are built in one pass and their
siblings by one subtraction (``siblings``) however many of the level's nodes split.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mdhom.components.split import SPLIT_EPS
from mdhom.learn.portable import sum_in_order
from mdhom.trees.backend import SplitParams, Splits, TreeKernels
from mdhom.trees.model import CategoryTables, Tree
from mdhom.trees.reference import (
    ahead_step,
    leaf_weight,
    left_smaller,
)


@dataclass(frozen=True)
class GrowParams:
    split: SplitParams
    learning_rate: float
    max_depth: int  # 0: no limit
    max_leaves: int  # 0: no limit
    lossguide: bool
    categorical: np.ndarray | None = None  # bool per feature; None: every feature numeric


class _Nodes:
    """Per-node arrays of the tree being built, grown by doubling (a depth-wise level adds up to 2^depth nodes
    in one step, and per-node Python there keeps the device waiting)."""

    def __init__(self, n_outputs: int) -> None:
        self.n_outputs = n_outputs
        self.n = 0
        self._alloc(64)
        self.cat_left: dict[int, np.ndarray] = {}  # the left bins of each categorical split node
        self._deferred: list[tuple[int, int, Splits, int]] = []  # splits taken by defer, not yet written

    def _alloc(self, cap: int) -> None:
        old = self.n

        def grow(a: np.ndarray | None, fill: object, shape: tuple[int, ...] = (), dtype: object = np.int32
                 ) -> np.ndarray:
            out = np.full((cap, *shape), fill, dtype)
            if a is not None:
                k = min(old, len(a))
                out[:k] = a[:k]
            return out

        get = self.__dict__.get
        self.sums = grow(get("sums"), 0.0, (self.n_outputs, 2), np.float64)
        self.depth = grow(get("depth"), 0)
        self.left, self.right = grow(get("left"), -1), grow(get("right"), -1)
        self.feature, self.bin = grow(get("feature"), -1), grow(get("bin"), 0)
        self.default_left = grow(get("default_left"), False, (), bool)
        self.gain = grow(get("gain"), 0.0, (), np.float64)

    def _new(self, k: int) -> int:
        """Room for ``k`` more nodes; returns the first new id."""
        first = self.n
        if first + k > self.depth.size:
            self._alloc(max(first + k, 2 * self.depth.size))
        self.n += k
        return first

    def add(self, sums: np.ndarray, depth: int) -> int:
        i = self._new(1)
        self.sums[i] = np.asarray(sums, np.float64).reshape(self.n_outputs, 2)
        self.depth[i] = depth
        return i

    def split(self, node: int, splits: Splits, i: int, params: GrowParams) -> tuple[int, int]:
        """:meth:`split_level` of one node, with scalars (a loss-guided tree splits one node per step)."""
        d = self.depth[node] + 1
        lo = self._new(2)
        hi = lo + 1
        self.sums[lo], self.sums[hi] = splits.left_sum[i], splits.right_sum[i]  # (n_outputs, 2) each
        self.depth[lo] = self.depth[hi] = d
        self.left[node], self.right[node] = lo, hi
        self.feature[node], self.bin[node] = int(splits.feature[i]), int(splits.bin[i])
        self.default_left[node] = bool(splits.default_left[i])
        self.gain[node] = float(splits.gain[i]) + params.split.min_split_gain
        if is_categorical(params, int(self.feature[node])):
            self.cat_left[node] = splits.cat_left[i].copy()
        return lo, hi

    def defer(self, node: int, splits: Splits, i: int) -> tuple[int, int]:
        """:meth:`split`, written later by :meth:`flush` (the loss-guided walk takes ~250 splits a tree between
        device steps; a dozen numpy item writes each add up on a GPU host)."""
        lo = self.n
        self.n += 2
        self._deferred.append((node, lo, splits, i))
        return lo, lo + 1

    def flush(self, params: GrowParams) -> None:
        """Write the deferred splits: each field gathered once from the searches' arrays laid end to end (a
        loss-guided tree defers ~250 splits from a dozen searches; a gather per search and field took 0.7 ms of
        the H200 host's time a tree, while the device waited for the tree's end)."""
        deferred, self._deferred = self._deferred, []
        if not deferred:
            return
        if self.n > self.depth.size:
            self._alloc(max(self.n, 2 * self.depth.size))
        base: dict[int, int] = {}  # id(splits) -> its first row in the concatenation
        searches: list[Splits] = []
        at = 0
        depth = self.depth[: self.n].tolist()
        nodes, los, rows = [], [], []
        for node, lo, splits, i in deferred:
            b = base.get(id(splits))
            if b is None:
                b = base[id(splits)] = at
                searches.append(splits)
                at += len(splits.gain)
            nodes.append(node)
            los.append(lo)
            rows.append(b + i)
            depth[lo] = depth[lo + 1] = depth[node] + 1  # in split order: a parent's depth is written first
        self.depth[: self.n] = depth
        node, lo, i = np.asarray(nodes), np.asarray(los), np.asarray(rows)

        def gathered(field: str) -> np.ndarray:
            parts = [getattr(sp, field) for sp in searches]
            return (parts[0] if len(parts) == 1 else np.concatenate(parts))[i]

        self.sums[lo], self.sums[lo + 1] = gathered("left_sum"), gathered("right_sum")
        self.left[node], self.right[node] = lo, lo + 1
        self.feature[node], self.bin[node] = gathered("feature"), gathered("bin")
        self.default_left[node] = gathered("default_left")
        self.gain[node] = np.asarray(gathered("gain"), np.float64) + params.split.min_split_gain
        if params.categorical is not None:
            for nd, _, sp, j in deferred:
                if is_categorical(params, int(sp.feature[j])):
                    self.cat_left[nd] = sp.cat_left[j].copy()

    def split_level(self, parents: np.ndarray, splits: Splits, chosen: np.ndarray, params: GrowParams
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Callable[[], None]]:
        """Split every ``parents[k]`` by split ``chosen[k]`` of ``splits``, in that order: the children of
        ``parents[k]`` get ids ``first + 2k`` (left) and ``first + 2k + 1``. Returns (left ids, right ids, whether
        each left child has the smaller hessian sum, the proxy for its row count, ties going left; and
        ``record``, which writes the split into the node table). The ids and the hint are what the device needs
        next; ``record`` can wait until the device is busy (a level holds up to 2^depth nodes)."""
        k = parents.size
        first = self._new(2 * k)
        lo = np.arange(first, first + 2 * k, 2, dtype=np.int32)
        hi = lo + 1
        ls = np.asarray(splits.left_sum[chosen], np.float64).reshape(k, self.n_outputs, 2)
        rs = np.asarray(splits.right_sum[chosen], np.float64).reshape(k, self.n_outputs, 2)
        left_small = left_smaller(ls, rs)

        def record() -> None:
            self.sums[lo], self.sums[hi] = ls, rs
            self.depth[lo] = self.depth[hi] = self.depth[parents] + 1
            self.left[parents], self.right[parents] = lo, hi
            self.feature[parents], self.bin[parents] = splits.feature[chosen], splits.bin[chosen]
            self.default_left[parents] = splits.default_left[chosen]
            self.gain[parents] = np.asarray(splits.gain[chosen], np.float64) + params.split.min_split_gain
            if params.categorical is not None:
                for p, f, c in zip(parents.tolist(), splits.feature[chosen].tolist(), np.asarray(chosen).tolist(),
                                   strict=True):
                    if is_categorical(params, int(f)):
                        self.cat_left[p] = splits.cat_left[c].copy()

        return lo, hi, left_small, record

    def smaller_is_left(self, node: int) -> bool:
        """:func:`left_smaller` of ``node``'s children."""
        lo, hi = self.left[node], self.right[node]
        return bool(left_smaller(self.sums[lo:lo + 1], self.sums[hi:hi + 1])[0])

    def values(self, params: GrowParams) -> np.ndarray:
        """Each node's value (n_nodes, n_outputs): learning rate x the leaf weight of its sums."""
        sums, sp = self.sums[: self.n], params.split
        return params.learning_rate * leaf_weight(sums[:, :, 0], sums[:, :, 1], sp.reg_lambda, sp.reg_alpha)

    def to_tree(self, params: GrowParams, threshold: Callable[[int, int], float],
                value: np.ndarray | None = None) -> Tree:
        n = self.n
        sums = self.sums[:n]
        value = self.values(params) if value is None else value
        feature = self.feature[:n].copy()
        thr = np.zeros(n)
        for j in np.flatnonzero(feature >= 0).tolist():
            thr[j] = threshold(int(feature[j]), int(self.bin[j]))
        tables = None
        if self.cat_left:
            row = np.full(n, -1, np.int32)
            order = sorted(self.cat_left)
            row[order] = np.arange(len(order))
            thr[order] = np.inf
            tables = CategoryTables(row, np.stack([self.cat_left[i] for i in order]))
        return Tree(
            left=self.left[:n].copy(), right=self.right[:n].copy(), feature=feature,
            threshold=thr, default_left=self.default_left[:n].copy(), value=value,
            gain=self.gain[:n].copy(), cover=sum_in_order(sums[:, :, 1], axis=1), bin=self.bin[:n].copy(),
            cat_left=tables,
        )


def is_categorical(params: GrowParams, feature: int) -> bool:
    return params.categorical is not None and bool(params.categorical[feature])


def any_categorical(params: GrowParams, features: np.ndarray | list[int]) -> bool:
    """Whether any of the listed split features is categorical (nothing to look up in an all-numeric fit)."""
    return params.categorical is not None and bool(np.any(params.categorical[np.asarray(features, np.int64)]))


def cat_tables(params: GrowParams, splits: Splits, index: list[int] | np.ndarray,
               feature: np.ndarray) -> np.ndarray | None:
    """The left-bin tables of the listed splits for ``apply_splits`` (None when none of them is categorical)."""
    if splits.cat_left is None or not any_categorical(params, feature):
        return None
    return splits.cat_left[np.asarray(index, np.int64)]


def _siblings(kernels: TreeKernels, parent: object, child: object, index: list[int] | None, n: int) -> object:
    """[child, parent[index] - child] (``parent`` has ``n`` nodes) in one backend call."""
    if index is not None and index == list(range(n)):
        index = None
    return kernels.siblings(parent, child, None if index is None else np.asarray(index, np.int32))


def _can_split(depth: int, params: GrowParams) -> bool:
    return params.max_depth == 0 or depth < params.max_depth


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
    nodes = _Nodes(np.asarray(root_sums).shape[0])
    nodes.add(root_sums, 0)
    if _can_split(0, params):
        if not params.lossguide:
            _grow_depthwise(kernels, nodes, feature_mask, params, hist, splits)
        elif kernels.batch_lossguide:
            _grow_lossguide_batched(kernels, nodes, feature_mask, params, hist, splits)
        else:
            _grow_lossguide(kernels, nodes, feature_mask, params, hist, splits)
    value = nodes.values(params)
    if on_values is not None:
        on_values(value)
    return nodes.to_tree(params, threshold, value)


def _ahead_levels(kernels: TreeKernels, params: GrowParams, depth: int, n_nodes: int, n_leaves: int) -> int:
    """How many levels below the ``n_nodes`` nodes at ``depth`` the device may split by their best splits before the
    host sees them (``kernels.lookahead`` at most): as many as the depth limit lets split, and only while the leaf
    budget cannot bind (every node of those levels splitting adds ``n_nodes * (2^levels - 1)`` leaves at most), so
    that the level-wise rule (every node of gain > SPLIT_EPS, the largest gains where the budget is short) takes the
    same splits as the device's."""
    levels = int(getattr(kernels, "lookahead", 0))
    if params.max_depth:
        levels = min(levels, params.max_depth - depth)
    if params.max_leaves:
        while levels > 0 and n_leaves + n_nodes * ((1 << levels) - 1) > params.max_leaves:
            levels -= 1
    return max(0, levels)


def _grow_depthwise(kernels: TreeKernels, nodes: _Nodes, mask: np.ndarray, params: GrowParams, hist: object,
                    splits: Splits) -> None:
    """Level by level. A level's node bookkeeping runs after the next level's split search is enqueued (the
    search's ``then``), so the device waits for the host only for what its next launches need: the chosen
    splits, the children's ids and which child is built.

    With ``kernels.lookahead``, the levels below a level whose leaf budget cannot bind are split on the device
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
    while level_t.size:
        gain = np.asarray(splits.gain)[at]
        chosen = np.flatnonzero(gain > SPLIT_EPS)
        if params.max_leaves:
            room = params.max_leaves - n_leaves
            # the largest gains first, ties to the earlier node of the level; then back to level order
            chosen = np.sort(chosen[np.argsort(-gain[chosen], kind="stable")[:room]])
        if not chosen.size:
            break
        rows = at[chosen]
        lo, hi, left_small, record = nodes.split_level(level_t[chosen].astype(np.int32), splits, rows, params)
        k = int(chosen.size)
        b_lo = np.arange(n_bid, n_bid + 2 * k, 2, dtype=np.int64)
        n_bid += 2 * k
        if names:
            names.update(zip((b_lo.tolist() + (b_lo + 1).tolist()), lo.tolist() + hi.tolist(), strict=True))
        n_leaves += k
        kernels.apply_splits(
            level_b[chosen].astype(np.int32), splits.feature[rows], splits.bin[rows], splits.default_left[rows],
            b_lo.astype(np.int32), (b_lo + 1).astype(np.int32), small_left=left_small,
            cat_left=cat_tables(params, splits, rows, splits.feature[rows]),
        )
        depth += 1
        if not _can_split(depth, params) or (params.max_leaves and n_leaves >= params.max_leaves):
            record()
            break
        b_small = np.where(left_small, b_lo, b_lo + 1)
        level_t = np.concatenate([np.where(left_small, lo, hi), np.where(left_small, hi, lo)]).astype(np.int64)
        level_b = np.concatenate([b_small, np.where(left_small, b_lo + 1, b_lo)])
        h_small = kernels.histograms(b_small.astype(np.int32), transient=True)  # one histogram pass for the level
        hist = _siblings(kernels, hist, h_small, rows.tolist(), len(splits.gain))  # [smalls, larges]
        at = np.arange(2 * k, dtype=np.int64)
        levels = _ahead_levels(kernels, params, depth, 2 * k, n_leaves)
        if not levels:
            splits = kernels.best_splits(hist, mask, params.split, then=record)
            continue
        # the next ``levels`` levels on the device: level j's entries (2k * 2^j slots, alive or not) split where
        # they may, children first_id[j] + 2e, + 1
        m = 2 * k
        allow = [np.full(m << j, _can_split(depth + j, params)) for j in range(levels)]
        first_id = []
        for j in range(levels):
            first_id.append(n_bid)
            n_bid += 2 * (m << j)
        if not names:  # from here on the backend's ids differ from the tree's
            names = {i: i for i in range(nodes.n)}
        founds, hists = kernels.look_ahead(hist, mask, params.split, level_b.astype(np.int32), allow, first_id)
        record()
        alive, ids = np.ones(m, bool), level_b
        for j in range(levels):
            splits = founds[j]
            ok, _, next_ids, next_alive = ahead_step(splits, alive, allow[j], first_id[j])
            split_at = np.flatnonzero(ok)  # entries that split, in level order: the level's chosen nodes
            if not split_at.size:
                level_t = level_t[:0]
                break
            pos = np.searchsorted(at, split_at)  # their places in the level (``at`` ascending: the live entries)
            lo, hi, left_small, record = nodes.split_level(level_t[pos].astype(np.int32), splits, split_at, params)
            record()
            n_leaves += int(split_at.size)
            depth += 1
            n_j = ok.size
            names.update(zip((first_id[j] + 2 * split_at).tolist() + (first_id[j] + 2 * split_at + 1).tolist(),
                             lo.tolist() + hi.tolist(), strict=True))
            level_t = np.concatenate([np.where(left_small, lo, hi), np.where(left_small, hi, lo)]).astype(np.int64)
            at = np.concatenate([split_at, n_j + split_at]).astype(np.int64)
            alive, ids = next_alive, next_ids
            level_b = ids[at]
        else:
            splits, hist = founds[levels], hists[levels - 1]
            if not _can_split(depth, params) or (params.max_leaves and n_leaves >= params.max_leaves):
                break
    if names:
        node_map = np.zeros(n_bid, np.int32)
        for b, t in names.items():
            node_map[b] = t
        kernels.relabel(node_map)


def _grow_lossguide(kernels: TreeKernels, nodes: _Nodes, mask: np.ndarray, params: GrowParams, root: object,
                    splits: Splits) -> None:
    hist = {0: (root, 0, 1)}
    found = {0: (splits, 0)}
    heap: list[tuple[float, int]] = []
    if found[0][0].gain[0] > SPLIT_EPS:
        heap.append((-float(found[0][0].gain[0]), 0))
    n_leaves = 1
    while heap and (params.max_leaves == 0 or n_leaves < params.max_leaves):
        _, node = heapq.heappop(heap)
        splits, i = found.pop(node)
        lo, hi = nodes.split(node, splits, i, params)
        n_leaves += 1
        left_small = nodes.smaller_is_left(node)
        kernels.apply_splits(np.array([node], np.int32), splits.feature[i:i + 1], splits.bin[i:i + 1],
                             splits.default_left[i:i + 1], np.array([lo], np.int32), np.array([hi], np.int32),
                             small_left=np.array([left_small]),
                             cat_left=cat_tables(params, splits, [i], splits.feature[i:i + 1]))
        parent_hist, at, n_in = hist.pop(node)
        if not _can_split(nodes.depth[lo], params) or (params.max_leaves and n_leaves >= params.max_leaves):
            continue
        small, large = (lo, hi) if left_small else (hi, lo)
        h_small = kernels.histograms(np.array([small], np.int32))
        pair = _siblings(kernels, parent_hist, h_small, [at], n_in)  # [small, large], one handle
        both = kernels.best_splits(pair, mask, params.split)
        for j, child in enumerate((small, large)):
            if both.gain[j] > SPLIT_EPS:
                hist[child] = (pair, j, 2)
                found[child] = (both, j)
                heapq.heappush(heap, (-float(both.gain[j]), child))


def _siblings_from(kernels: TreeKernels, parents: list[tuple[object, int, int]], child: object) -> object:
    """[child, parent - child] with each child's parent a node of any handle (``(handle, index, n_nodes)``)."""
    return kernels.siblings_from([(h, i) for h, i, _ in parents], child)


class _Candidates:
    """The candidate tree of a loss-guided walk, as far as it has been searched, in the backend's node ids.

    A node's best split depends only on its rows, so the tree of candidate splits is fixed by the data; the
    walk only chooses which of them to take. :meth:`expand` splits a batch of nodes at once (one partition,
    one histogram pass over the smaller children, one split search, one read-back) and numbers the new
    nodes as it goes, so ids here differ from the tree's.
    """

    def __init__(self, kernels: TreeKernels, mask: np.ndarray, params: GrowParams, root: object,
                 splits: Splits) -> None:
        self.kernels, self.mask, self.params = kernels, mask, params
        self.hist: dict[int, tuple[object, int, int]] = {0: (root, 0, 1)}
        self.found: dict[int, tuple[Splits, int]] = {0: (splits, 0)}
        # per node searched: whether its left child is the smaller (decided once per search, as arrays)
        self.small_left: dict[int, bool] = {0: bool(left_smaller(splits.left_sum, splits.right_sum)[0])}
        # per node searched: its best split's (feature, bin, default_left) as Python scalars, for expand's table
        # (numpy item reads per node cost more than the search's read-back on a GPU host)
        self.rule: dict[int, tuple[int, int, bool]] = {
            0: (int(splits.feature[0]), int(splits.bin[0]), bool(splits.default_left[0]))}
        self.depth: dict[int, int] = {0: 0}
        self.gain: dict[int, float] = {0: float(splits.gain[0])}  # each searched node's best gain (the walk's key)
        self.children: dict[int, tuple[int, int]] = {}
        self.n_ids = 1
        # the searched candidates of gain > SPLIT_EPS not expanded yet (in the order searched), and how many of gain >
        # SPLIT_EPS the walk has not split (expanded or not): what :meth:`reachable` needs to know when every
        # candidate is within the budget (the walk counts its splits down, :meth:`took_split`)
        self.open: dict[int, None] = {0: None} if self.gain[0] > SPLIT_EPS else {}
        self.unsplit = len(self.open)

    def split_of(self, node: int) -> tuple[Splits, int]:
        return self.found[node]

    def took_split(self) -> None:
        """The walk split one candidate (the tree's next split)."""
        self.unsplit -= 1

    def expand(self, batch: list[int]) -> None:
        """Split every node of ``batch`` (each searched, none expanded yet) and search its children's splits
        where the depth limit allows them a split."""
        kernels, ns = self.kernels, len(batch)
        rule, small_left, depth, kids = self.rule, self.small_left, self.depth, self.children
        rules = [rule[node] for node in batch]
        feature = [r[0] for r in rules]
        left_small = [small_left[node] for node in batch]
        first = self.n_ids
        self.n_ids += 2 * ns
        lo = np.arange(first, first + 2 * ns, 2, dtype=np.int32)
        grow = [k for k, node in enumerate(batch) if _can_split(depth[node] + 1, self.params)]
        cats = None
        if any_categorical(self.params, feature):  # every search of a fit with categorical features has tables
            cats = np.stack([sp.cat_left[i] for sp, i in (self.found[node] for node in batch)])
        kernels.apply_splits(np.array(batch, np.int32), np.array(feature, np.int32),
                             np.array([r[1] for r in rules], np.int32), np.array([r[2] for r in rules], bool),
                             lo, lo + 1, small_left=np.array(left_small) if len(grow) == ns else None, cat_left=cats)
        open_ = self.open
        for k, node in enumerate(batch):
            c = first + 2 * k
            kids[node] = (c, c + 1)
            open_.pop(node, None)
            depth[c] = depth[c + 1] = depth[node] + 1
        if not grow:
            return
        small = [first + 2 * k + (0 if left_small[k] else 1) for k in grow]
        large = [first + 2 * k + (1 if left_small[k] else 0) for k in grow]
        h_small = kernels.histograms(np.asarray(small, np.int32), transient=True)
        pair = _siblings_from(kernels, [self.hist.pop(batch[k]) for k in grow], h_small)  # [smalls, larges]
        children = small + large
        levels = kernels.lookahead if len(grow) == ns else 0
        if not levels:
            self._searched(children, pair, kernels.best_splits(pair, self.mask, self.params.split))
            return
        # the steps after this one on the device, before the host sees this one's result: level k's entries (the
        # children's slots, 2^k each, alive or not) split by their best splits where their own children may split
        # again, children first_id[k] + 2e, first_id[k] + 2e + 1
        m = len(children)
        depth0 = [self.depth[c] for c in children]
        allow, first_id = [], []
        for k in range(levels):
            allow.append(np.array([_can_split(depth0[e % m] + k + 1, self.params) for e in range(m << k)]))
            first_id.append(self.n_ids)
            self.n_ids += 2 * (m << k)
        founds, hists = kernels.look_ahead(pair, self.mask, self.params.split, np.asarray(children, np.int32),
                                           allow, first_id)
        ids, alive = np.asarray(children, np.int64), np.ones(m, bool)
        self._searched(children, pair, founds[0])
        for k in range(levels):
            ok, _, next_ids, next_alive = ahead_step(founds[k], alive, allow[k], first_id[k])
            n_k = ids.size
            for e in np.flatnonzero(ok).tolist():
                parent, c0 = int(ids[e]), first_id[k] + 2 * e
                self.children[parent] = (c0, c0 + 1)
                self.open.pop(parent, None)
                self.depth[c0] = self.depth[c0 + 1] = self.depth[parent] + 1
            ids, alive = next_ids, next_alive
            at = np.flatnonzero(alive).tolist()
            self._searched(ids[at].tolist(), hists[k], founds[k + 1], at, 2 * n_k)

    def _searched(self, nodes: list[int], pair: object, found: Splits, at: list[int] | None = None,
                  n_in: int | None = None) -> list[bool]:
        """Record that ``nodes`` sit at ``at`` (default: in order) of the handle ``pair`` of ``n_in`` nodes, with
        their best splits in ``found`` (by the same positions); returns, per position of ``pair``, whether the left
        child is the smaller."""
        at = list(range(len(nodes))) if at is None else at
        n_in = len(nodes) if n_in is None else n_in
        smaller = left_smaller(found.left_sum, found.right_sum).tolist()
        gains = found.gain.tolist()
        rules = list(zip(found.feature.tolist(), found.bin.tolist(), found.default_left.tolist(), strict=True))
        hist, found_, gain, small_left, rule = self.hist, self.found, self.gain, self.small_left, self.rule
        open_ = self.open
        for node, j in zip(nodes, at, strict=True):
            hist[node] = (pair, j, n_in)
            found_[node] = (found, j)
            g = gain[node] = gains[j]
            small_left[node] = smaller[j]
            rule[node] = rules[j]
            if g > SPLIT_EPS:
                open_[node] = None
                self.unsplit += 1
        return smaller

    def reachable(self, heap: list[tuple[float, int]], tree_of: dict[int, int], room: float) -> list[int]:
        """The searched, unexpanded candidates that the walk may still split within ``room`` more splits: heap
        leaves and the searched descendants of expanded ones alike, so a batch reaches a level deeper below every
        leaf the budget may reach, not only below the heap's leaves.

        A best-first walk pops a node when it tops the heap, so in non-increasing order of its chain value ``m``:
        the least gain on its path from the heap (a child of larger gain than its parent pops right after it).
        Every known candidate of strictly larger ``m`` pops before it (candidates not yet searched may add more),
        so a candidate with ``room`` or more known candidates of larger ``m`` is never split; any other may be,
        and joins the batch. They are what the same walk over the known candidates pops first: ``room`` pops,
        then every candidate tied in ``m`` with the last of them (the walk itself breaks ties by tree id, which
        this one does not know). The walk's next leaf, of the largest gain on the heap, is always among them.
        Some of a batch is searched in vain, which costs device work but no round trip; which candidates are
        searched never changes the tree.

        Where the budget covers every candidate of gain > SPLIT_EPS the walk has not split (each is reachable from
        the heap by splits of such gains), the answer is every one not expanded, known without the walk over them:
        the early, wide steps of a tree (a third of a GPU round's host time between read-back and next launch went
        to this walk on the H200)."""
        if self.unsplit <= room:
            return list(self.open)
        return self.walk(heap, tree_of, room)

    def walk(self, heap: list[tuple[float, int]], tree_of: dict[int, int], room: float) -> list[int]:
        """:meth:`reachable` by popping the known candidates in the walk's order."""
        pq = [(key, tree_of[t]) for key, t in heap]  # (-m, candidate id)
        heapq.heapify(pq)
        children, gains = self.children, self.gain
        out: list[int] = []
        left, last = room, None
        while pq and (left > 0 or pq[0][0] == last):  # and every candidate tied with the last one in the budget
            key, x = heapq.heappop(pq)
            left -= 1
            last = key
            kids = children.get(x)
            if kids is None:
                out.append(x)
                continue
            for c in kids:
                gain = gains.get(c)  # None: not searched (the depth limit rules out its split)
                if gain is not None and gain > SPLIT_EPS:
                    heapq.heappush(pq, (key if -gain < key else -gain, c))  # -min(m, gain)
        return out

    def leaf_map(self, tree_of: dict[int, int], tree_left: list[int]) -> np.ndarray:
        """Backend id -> the tree node holding its rows: the tree leaf at or above it (``tree_of``: the
        backend id of each tree node; a tree node's children in the tree are its children here; ``tree_left``:
        each tree node's left child, negative at leaves). Plain lists: ~500 tree nodes a tree, per-item numpy
        access would cost a millisecond."""
        out = [0] * self.n_ids
        children = self.children
        for t, b in tree_of.items():
            out[b] = t
            if tree_left[t] < 0 and b in children:  # candidates searched below a leaf of the tree: its rows
                stack = list(children[b])
                while stack:
                    c = stack.pop()
                    out[c] = t
                    stack.extend(children.get(c, ()))
        return np.asarray(out, np.int32)


def _grow_lossguide_batched(kernels: TreeKernels, nodes: _Nodes, mask: np.ndarray, params: GrowParams,
                            root: object, splits: Splits) -> None:
    """The tree of :func:`_grow_lossguide`, node for node, with the split searches batched.

    The walk is the same (pop the leaf of largest gain, ties to the lower tree id; push its children), over
    candidate splits that :class:`_Candidates` searches ahead. With ``kernels.speculate``, when the walk
    reaches a leaf whose children are not searched yet, every candidate it may still split joins one batch
    (:meth:`_Candidates.reachable`): about as many round trips as the tree is deep (H100, 10.5M Higgs rows,
    255 leaves: 13 instead of 46 a tree, 0.025-0.027 s a round instead of 0.045-0.063). Without it, every
    leaf on the heap that can still be split joins one batch: each leaf among the ``max_leaves - leaves``
    best of the heap (each pop takes one leaf of the budget and entries above a leaf leave the heap only by
    pops, so a leaf ranked lower can never be split). Either way some candidates of a batch end up not split
    (their budget went to children of better splits); their rows move back to the tree leaf by one relabelling
    at the end.
    """
    cand = _Candidates(kernels, mask, params, root, splits)
    tree_of = {0: 0}  # tree node id -> candidate (backend) id
    heap: list[tuple[float, int]] = []
    if splits.gain[0] > SPLIT_EPS:
        heap.append((-float(splits.gain[0]), 0))
    limit = params.max_leaves or np.inf
    n_leaves = 1
    while heap and n_leaves < limit:
        node = heap[0][1]
        at = tree_of[node]
        if at not in cand.children:
            if kernels.speculate:
                cand.expand(cand.reachable(heap, tree_of, limit - n_leaves))
                continue
            room = int(min(limit - n_leaves, len(heap)))
            batch = [tree_of[t] for _, t in heapq.nsmallest(room, heap)]
            cand.expand([b for b in batch if b not in cand.children])
            continue
        heapq.heappop(heap)
        cand.took_split()
        sp, i = cand.split_of(at)
        lo, hi = nodes.defer(node, sp, i)
        c_lo, c_hi = tree_of[lo], tree_of[hi] = cand.children[at]
        n_leaves += 1
        if not _can_split(cand.depth[c_lo], params) or n_leaves >= limit:
            continue
        for child, c in ((lo, c_lo), (hi, c_hi)):
            gain = cand.gain[c]
            if gain > SPLIT_EPS:
                heapq.heappush(heap, (-gain, child))
    nodes.flush(params)
    kernels.relabel(cand.leaf_map(tree_of, nodes.left[: nodes.n].tolist()))
