"""The loss-guided walk: the best leaf first (XGBoost's ``lossguide``, LightGBM's leaf-wise growth), one leaf per
split step (:func:`grow_lossguide`, the reference) or with the split searches batched and speculative
(:func:`grow_lossguide_batched`, what OpenCL backends run), the same tree either way."""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from mdhom.components.split import SPLIT_EPS
from mdhom.trees.backend import Splits, TreeKernels
from mdhom.trees.growth import GrowParams, NodeTable, any_categorical, can_split, cat_tables, sibling_histograms
from mdhom.trees.reference import ahead_step, left_smaller

# candidate states (_Candidates.state): searched with gain > SPLIT_EPS, expanded (split on the device, its children
# searched where they may split) but not split by the walk yet, split by the walk
KNOWN, EXPANDED, SPLIT = 1, 2, 3


def grow_lossguide(kernels: TreeKernels, nodes: NodeTable, mask: np.ndarray, params: GrowParams, root: object,
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
        if not can_split(nodes.depth[lo], params) or (params.max_leaves and n_leaves >= params.max_leaves):
            continue
        small, large = (lo, hi) if left_small else (hi, lo)
        h_small = kernels.histograms(np.array([small], np.int32))
        pair = sibling_histograms(kernels, parent_hist, h_small, [at], n_in)  # [small, large], one handle
        both = kernels.best_splits(pair, mask, params.split)
        for j, child in enumerate((small, large)):
            if both.gain[j] > SPLIT_EPS:
                hist[child] = (pair, j, 2)
                found[child] = (both, j)
                heapq.heappush(heap, (-float(both.gain[j]), child))


def _siblings_from(kernels: TreeKernels, parents: list[tuple], child: object) -> object:
    """[child, parent - child] with each child's parent a node of any handle (records whose first two fields are
    ``(handle, index)``)."""
    return kernels.siblings_from([(r[0], r[1]) for r in parents], child)


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
        # per node searched, in one record (one dict write per node: a loss-guided tree searches ~700 nodes, and on
        # a GPU host the step's Python work is on the round trip): its histogram (handle, index, nodes in the
        # handle), its search (Splits, index), whether its left child is the smaller, and its best split's
        # (feature, bin, default_left) as Python scalars for expand's table
        self.rec: dict[int, tuple] = {0: (root, 0, 1, splits, bool(left_smaller(splits.left_sum, splits.right_sum)[0]),
                                          int(splits.feature[0]), int(splits.bin[0]), bool(splits.default_left[0]))}
        self.depth: dict[int, int] = {0: 0}
        self.gain: dict[int, float] = {0: float(splits.gain[0])}  # each searched node's best gain
        self.children: dict[int, tuple[int, int]] = {}
        self.floor = 0.0  # the last batch's (reachable)
        self._parent: dict[int, int] = {}
        # per candidate id: its chain value (the least gain on its path from the root, :meth:`reachable`) and its
        # state: KNOWN (searched, gain > SPLIT_EPS, neither expanded nor split), EXPANDED (not split yet), SPLIT (the
        # walk took it), else 0
        self.chain = np.full(64, -np.inf)
        self.state = np.zeros(64, np.int8)
        self.chain[0] = self.gain[0]
        self.state[0] = KNOWN if self.gain[0] > SPLIT_EPS else 0
        self.n_ids = 1
        # the searched candidates of gain > SPLIT_EPS not expanded yet, in the order searched (a batch where the
        # budget covers every candidate, :meth:`reachable`)
        self.open: dict[int, None] = {0: None} if self.gain[0] > SPLIT_EPS else {}

    @property
    def unsplit(self) -> int:
        """How many candidates of gain > SPLIT_EPS the walk has not split, expanded or not."""
        state = self.state[: self.n_ids]
        return int(np.count_nonzero((state == KNOWN) | (state == EXPANDED)))

    def split_of(self, node: int) -> tuple[Splits, int]:
        r = self.rec[node]
        return r[3], r[1]

    def took_split(self, node: int) -> None:
        """The walk split candidate ``node`` (the tree's next split)."""
        self.state[node] = SPLIT

    def expand(self, batch: list[int], then: Callable[[], object] | None = None) -> None:
        """Split every node of ``batch`` (each searched, none expanded yet) and search its children's splits
        where the depth limit allows them a split. ``then`` runs once the search is under way, before its result
        is waited for (host work that overlaps the device's), or before the look-ahead. The look-ahead splits no
        candidate of a gain below :attr:`floor`, the last :meth:`reachable`'s (0 where none chose the batch)."""
        kernels, ns = self.kernels, len(batch)
        depth = self.depth
        recs = [self.rec[node] for node in batch]
        feature = [r[5] for r in recs]
        left_small = [r[4] for r in recs]
        first = self.n_ids
        self._grow_ids(2 * ns)
        lo = np.arange(first, first + 2 * ns, 2, dtype=np.int32)
        params = self.params
        grow = [k for k, node in enumerate(batch) if can_split(depth[node] + 1, params)]
        cats = None
        if any_categorical(params, feature):  # every search of a fit with categorical features has tables
            cats = np.stack([r[3].cat_left[r[1]] for r in recs])
        kernels.apply_splits(np.array(batch, np.int32), np.array(feature, np.int32),
                             np.array([r[6] for r in recs], np.int32), np.array([r[7] for r in recs], bool),
                             lo, lo + 1, small_left=np.array(left_small) if len(grow) == ns else None, cat_left=cats)
        open_ = self.open
        for k, node in enumerate(batch):
            c = first + 2 * k
            self._expanded(node, c)
            open_.pop(node, None)
            depth[c] = depth[c + 1] = depth[node] + 1
        if not grow:
            if then is not None:
                then()
            return
        small = [first + 2 * k + (0 if left_small[k] else 1) for k in grow]
        large = [first + 2 * k + (1 if left_small[k] else 0) for k in grow]
        h_small = kernels.histograms(np.asarray(small, np.int32), transient=True)
        pair = _siblings_from(kernels, [recs[k] for k in grow], h_small)  # [smalls, larges]
        children = small + large
        levels = kernels.lookahead if len(grow) == ns else 0
        if not levels:
            self._searched(children, pair, kernels.best_splits(pair, self.mask, self.params.split, then))
            return
        if then is not None:
            then()
        # the steps after this one on the device, before the host sees this one's result: level k's entries (the
        # children's slots, 2^k each, alive or not) split by their best splits where their own children may split
        # again, children first_id[k] + 2e, first_id[k] + 2e + 1
        m = len(children)
        depth0 = [self.depth[c] for c in children]
        allow, first_id = [], []
        for k in range(levels):
            allow.append(np.array([can_split(depth0[e % m] + k + 1, self.params) for e in range(m << k)]))
            first_id.append(self.n_ids)
            self._grow_ids(2 * (m << k))
        founds, hists = kernels.look_ahead(pair, self.mask, self.params.split, np.asarray(children, np.int32),
                                           allow, first_id, min_gain=self.floor)
        ids, alive = np.asarray(children, np.int64), np.ones(m, bool)
        self._searched(children, pair, founds[0])
        for k in range(levels):
            ok, _, next_ids, next_alive = ahead_step(founds[k], alive, allow[k], first_id[k], min_gain=self.floor)
            n_k = ids.size
            for e in np.flatnonzero(ok).tolist():
                parent, c0 = int(ids[e]), first_id[k] + 2 * e
                self._expanded(parent, c0)
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
        at = range(len(nodes)) if at is None else at
        n_in = len(nodes) if n_in is None else n_in
        smaller = left_smaller(found.left_sum, found.right_sum).tolist()
        gains, feats = found.gain.tolist(), found.feature.tolist()
        bins, dls = found.bin.tolist(), found.default_left.tolist()
        rec, gain, open_, parent, chain, state = self.rec, self.gain, self.open, self._parent, self.chain, self.state
        for node, j in zip(nodes, at, strict=True):
            rec[node] = (pair, j, n_in, found, smaller[j], feats[j], bins[j], dls[j])
            g = gain[node] = gains[j]
            if g > SPLIT_EPS:
                open_[node] = None
                state[node] = KNOWN
                chain[node] = min(chain[parent[node]], g)  # searched nodes but the root have a parent
        return smaller

    def reachable(self, room: float) -> list[int]:
        """The searched, unexpanded candidates that the walk may still split within ``room`` more splits: heap
        leaves and the searched descendants of expanded ones alike, so a batch reaches a level deeper below every
        leaf the budget may reach, not only below the heap's leaves.

        A best-first walk pops nodes in non-increasing order of their chain value, the least gain on the path from
        the root (by induction: a popped node's chain value is at least every unpopped one's, as the popped one had
        the largest gain on the heap and every unpopped node sits below some node on the heap). So of the candidates
        known now (searched, gain > SPLIT_EPS) and not split, the next ``room`` pops are those of the ``room``
        largest chain values, with every candidate tied with the last of them (the walk breaks such ties by tree
        id, which the candidates do not know); unknown candidates (not searched yet) may come in between, which only
        makes the batch larger than needed. Some of a batch is searched in vain, which costs device work but no
        round trip; which candidates are searched never changes the tree. The chain values are kept as the searches
        come in, so the batch is one selection over them (it had been a walk of the candidate tree below the heap
        at every step, up to a few hundred heap pops).

        The answer does not depend on how far the walk has got: the candidates it pops before it needs another
        batch are expanded ones of the largest chain values, which leave the ``room`` largest as the budget shrinks
        by as many. So a batch can be chosen (and launched) as soon as the last one's searches are in, and the walk
        catches up while the device works (:func:`grow_lossguide_batched`). Its next leaf is always among them.

        Where the budget covers every candidate of gain > SPLIT_EPS the walk has not split, the answer is every one
        not expanded, in the order searched.

        The room-th largest chain value (:attr:`floor`; 0 where the budget covers every candidate or has no room
        left) bounds what the walk can still split: ``room`` candidates not split yet reach it, and the walk pops
        in non-increasing chain values, so it spends the budget before it could reach a candidate below the floor.
        A child's chain value is at most its gain, so a look-ahead below the batch need not split a child of a
        smaller gain (ties are kept)."""
        self.floor = 0.0
        if room < 1:  # the walk has split the budget's leaves
            return []
        n = self.n_ids
        state, chain = self.state[:n], self.chain[:n]
        unsplit = chain[(state == KNOWN) | (state == EXPANDED)]
        if unsplit.size <= room:
            return list(self.open)
        last = np.partition(unsplit, unsplit.size - int(room))[unsplit.size - int(room)]  # the room-th largest
        self.floor = float(last)
        out = np.flatnonzero((state == KNOWN) & (chain >= last))
        return out[np.lexsort((out, -chain[out]))].tolist()  # the walk's order: larger chain values first

    def _grow_ids(self, n: int) -> None:
        """``n`` more candidate ids."""
        self.n_ids += n
        if self.n_ids > self.state.size:
            size = max(self.n_ids, 2 * self.state.size)
            self.state = np.concatenate([self.state, np.zeros(size - self.state.size, np.int8)])
            self.chain = np.concatenate([self.chain, np.full(size - self.chain.size, -np.inf)])

    def _expanded(self, node: int, first: int) -> None:
        """``node`` split into ``first`` and ``first + 1`` (their searches, if any, come later)."""
        self.children[node] = (first, first + 1)
        self._parent[first] = self._parent[first + 1] = node
        if self.state[node] == KNOWN:
            self.state[node] = EXPANDED

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


class _Walk:
    """The best-first walk of a batched loss-guided tree over the candidates searched so far: the heap of the tree's
    leaves (-gain, tree id), each tree node's candidate id (``tree_of``) and the leaves so far."""

    def __init__(self, cand: _Candidates, nodes: NodeTable, params: GrowParams, splits: Splits) -> None:
        self.cand, self.nodes, self.params = cand, nodes, params
        self.tree_of = {0: 0}  # tree node id -> candidate (backend) id
        self.heap: list[tuple[float, int]] = []
        if splits.gain[0] > SPLIT_EPS:
            self.heap.append((-float(splits.gain[0]), 0))
        self.limit = params.max_leaves or np.inf
        self.n_leaves = 1

    def room(self) -> float:
        """Splits the leaf budget has left."""
        return self.limit - self.n_leaves

    def advance(self) -> int | None:
        """Pop leaves while their candidates are expanded and the children's searches are in; returns the candidate
        it stops at for want of an expansion (None: the tree is done, or the next leaf's children are still being
        searched)."""
        cand, nodes, params, heap, tree_of = self.cand, self.nodes, self.params, self.heap, self.tree_of
        children, depth, gains = cand.children, cand.depth, cand.gain
        while heap and self.n_leaves < self.limit:
            node = heap[0][1]
            at = tree_of[node]
            kids = children.get(at)
            if kids is None:
                return at
            c_lo, c_hi = kids
            grows = can_split(depth[c_lo], params) and self.n_leaves + 1 < self.limit
            if grows and c_lo not in gains:  # expanded in the batch whose search is under way
                return None
            heapq.heappop(heap)
            cand.took_split(at)
            sp, i = cand.split_of(at)
            lo, hi = nodes.defer(node, sp, i)
            tree_of[lo], tree_of[hi] = c_lo, c_hi
            self.n_leaves += 1
            if not grows:
                continue
            for child, c in ((lo, c_lo), (hi, c_hi)):
                gain = gains[c]
                if gain > SPLIT_EPS:
                    heapq.heappush(heap, (-gain, child))
        return None


def grow_lossguide_batched(kernels: TreeKernels, nodes: NodeTable, mask: np.ndarray, params: GrowParams,
                           root: object, splits: Splits) -> None:
    """The tree of :func:`grow_lossguide`, node for node, with the split searches batched.

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
    walk = _Walk(cand, nodes, params, splits)
    if kernels.speculate:
        # each batch chosen as soon as the last one's searches are in (:meth:`_Candidates.reachable` does not need
        # the walk to have caught up), and the walk's pops over the last batch's results run while this one's
        # search is on the device: they had sat between a step's read-back and its next launch
        batch = cand.reachable(walk.room())
        while batch:
            cand.expand(batch, then=walk.advance)
            batch = cand.reachable(walk.room())
        stalled = walk.advance()
        if stalled is not None:
            raise RuntimeError(f"the walk's next leaf (candidate {stalled}) was in no batch")
    else:
        while (stalled := walk.advance()) is not None:
            room = int(min(walk.room(), len(walk.heap)))
            batch = [walk.tree_of[t] for _, t in heapq.nsmallest(room, walk.heap)]
            cand.expand([b for b in batch if b not in cand.children])
    tree_of = walk.tree_of
    nodes.flush(params)
    kernels.relabel(cand.leaf_map(tree_of, nodes.left[: nodes.n].tolist()))
