"""The loss-guided walk: the best leaf first (XGBoost's ``lossguide``, LightGBM's leaf-wise growth), one leaf per
split step (:func:`grow_lossguide`, the reference) or with the split searches batched and speculative
(:func:`grow_lossguide_batched`, what OpenCL backends run), the same tree either way."""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from mdhom.components.split import SPLIT_EPS
from mdhom.trees.backend import Splits, TreeKernels
from mdhom.trees.growth import (
    GrowParams,
    NodeTable,
    ahead_levels,
    any_categorical,
    can_split,
    can_split_each,
    cat_tables,
    sibling_histograms,
)
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


class _Candidates:
    """The candidate tree of a loss-guided walk, as far as it has been searched, in the backend's node ids.

    A node's best split depends only on its rows, so the tree of candidate splits is fixed by the data; the
    walk only chooses which of them to take. :meth:`expand` splits a batch of nodes at once (one partition,
    one histogram pass over the smaller children, one split search, one read-back) and numbers the new
    nodes as it goes, so ids here differ from the tree's.

    Each candidate's record is a row of arrays indexed by its id, written and read a batch at a time: the
    bookkeeping between a step's read-back and its next launch is the device's idle time on a GPU host, and a
    per-node Python loop there had made it grow with the batch (H200, 10.5M rows: 0.2-0.8 ms a step).
    """

    def __init__(self, kernels: TreeKernels, mask: np.ndarray, params: GrowParams, root: object,
                 splits: Splits) -> None:
        self.kernels, self.mask, self.params = kernels, mask, params
        self.n_ids = 0
        self.n_outputs = splits.left_sum.shape[1]
        # room for the ids of a tree's usual candidates at once (255 leaves: ~700-1500 ids; grown by doubling from 64
        # the arrays had been reallocated five times a tree), within what a depth limit allows and at most 2^14 (a
        # leaf budget far above the depth limit's is only a bound); more grow as needed
        room = 8 * params.max_leaves if params.max_leaves else 1024
        if params.max_depth:
            room = min(room, 1 << min(params.max_depth + 2, 14))
        self._alloc(min(room, 1 << 14))
        self.floor = 0.0  # the last batch's (reachable)
        self._seq = 0  # candidates of gain > SPLIT_EPS searched so far (seq: the order searched)
        # what the walk reads a node at a time (:meth:`_Walk.advance`, ~250 pops a tree), as Python lists by id: an
        # item of a list costs a tenth of a numpy scalar's read: each candidate's first child (-1: not expanded),
        # depth, best gain (NaN until searched), (its search's Splits, its position there) and (its histogram's handle,
        # its position there)
        self.kid_of: list[int] = []
        self.depth_of: list[int] = []
        self.gain_of: list[float] = []
        self.split_at: list[tuple[Splits, int] | None] = []
        self.hist_at: list[tuple[object, int] | None] = []
        # searches recorded by :meth:`_searched` whose Python lists and child sums :meth:`settle` has not filled yet
        self._fresh: list[tuple] = []
        self._grow_ids(1)
        self._searched(np.zeros(1, np.int64), root, splits)

    def _alloc(self, size: int) -> None:
        """Room for ``size`` candidate ids (the records so far kept)."""
        def grown(old: np.ndarray | None, dtype: type, fill: object, shape: tuple[int, ...] = ()) -> np.ndarray:
            new = np.full((size, *shape), fill, dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        get = self.__dict__.get
        # per candidate id: its chain value (the least gain on its path from the root, :meth:`reachable`) and its
        # state: KNOWN (searched, gain > SPLIT_EPS, neither expanded nor split), EXPANDED (not split yet), SPLIT (the
        # walk took it), else 0; its best gain (NaN until searched), parent (-1: the root), depth and first child
        # (-1: not expanded); its best split (feature, bin, default_left) and whether its left child is the smaller;
        # its rank in the order searched
        for name, dtype, fill in (("chain", np.float64, -np.inf), ("state", np.int8, 0), ("gain", np.float64, np.nan),
                                  ("parent", np.int64, -1), ("depth", np.int64, 0), ("kid", np.int64, -1),
                                  ("feature", np.int32, 0), ("bin", np.int32, 0), ("default_left", bool, False),
                                  ("left_small", bool, False), ("seq", np.int64, 0)):
            setattr(self, name, grown(get(name), dtype, fill))
        for name in ("left_sum", "right_sum"):  # its best split's children's (g, h) sums per output
            setattr(self, name, grown(get(name), np.float64, 0.0, (self.n_outputs, 2)))

    def _grow_ids(self, n: int) -> None:
        """``n`` more candidate ids."""
        self.n_ids += n
        self.kid_of.extend([-1] * n)
        self.depth_of.extend([0] * n)
        self.gain_of.extend([np.nan] * n)
        self.split_at.extend([None] * n)
        self.hist_at.extend([None] * n)
        if self.n_ids > self.state.size:
            self._alloc(max(self.n_ids, 2 * self.state.size))

    @property
    def unsplit(self) -> int:
        """How many candidates of gain > SPLIT_EPS the walk has not split, expanded or not."""
        state = self.state[: self.n_ids]
        return int(np.count_nonzero((state == KNOWN) | (state == EXPANDED)))

    def took_split(self, node: int) -> None:
        """The walk split candidate ``node`` (the tree's next split)."""
        self.state[node] = SPLIT

    def expand(self, batch: np.ndarray, then: Callable[[], object] | None = None) -> None:
        """Split every node of ``batch`` (each searched, none expanded yet) and search its children's splits
        where the depth limit allows them a split. ``then`` runs once the search is under way, before its result
        is waited for (host work that overlaps the device's), or before the look-ahead. The look-ahead splits no
        candidate of a gain below :attr:`floor`, the last :meth:`reachable`'s (0 where none chose the batch). Below a
        batch bounded at ``most`` (``kernels.batch``) it splits one level, those children the next batch would take
        (:func:`~mdhom.components.lookahead.within_chain_budget`: the ``most`` largest chain values among the children
        and the candidates this batch left out): the splits the host's next batch makes, one round trip earlier
        (PoCL posing as a GPU, 200k Higgs rows, 255 leaves: 264.2 -> 265.8 splits, 10.0 -> 6.9 round trips a tree);
        every child above the floor had been split, most of them never taken."""
        kernels, params = self.kernels, self.params
        batch = np.asarray(batch, np.int64).reshape(-1)
        ns = batch.size
        first = self.n_ids
        self._grow_ids(2 * ns)
        lo = np.arange(first, first + 2 * ns, 2, dtype=np.int64)
        d1 = self.depth[batch] + 1
        grow = np.flatnonzero(can_split_each(d1, params))
        feature, left_small = self.feature[batch], self.left_small[batch]
        cats = None
        if any_categorical(params, feature):  # every search of a fit with categorical features has tables
            self.settle()
            split_at = self.split_at
            cats = np.stack([split_at[n][0].cat_left[split_at[n][1]] for n in batch.tolist()])
        kernels.apply_splits(batch, feature, self.bin[batch], self.default_left[batch], lo, lo + 1,
                             small_left=left_small if grow.size == ns else None, cat_left=cats,
                             final=not grow.size)  # no child may split again (the depth limit): leaves
        small = lo[grow] + ~left_small[grow]  # the right child where the left is not the smaller
        large = lo[grow] + left_small[grow]
        h_small = kernels.histograms(small, transient=True) if grow.size else None
        # the last search's records and this batch's expansion, while the partition and the histograms run: before
        # the histograms' launch they had held it back where a late step's partition took less time than they did
        self.settle()
        self._expanded(batch, lo, d1)
        if not grow.size:
            if then is not None:
                then()
            return
        hist_at = self.hist_at
        pair = kernels.siblings_from([hist_at[n] for n in batch[grow].tolist()], h_small)  # [smalls, larges]
        children = np.concatenate([small, large])
        levels, bound = self._levels(first, grow.size == ns)
        chain = None
        if bound:  # below a bounded batch: the children the next one takes, ranked against those this one left out
            left = self.chain[: self.n_ids][self.state[: self.n_ids] == KNOWN]  # (only the bound's largest count)
            if left.size > bound:
                left = np.partition(left, left.size - bound)[left.size - bound:]
            chain = (np.tile(self.chain[batch], 2), left, bound)
        if not levels:
            self._searched(children, pair, kernels.best_splits(pair, self.mask, params.split, then))
            return
        if then is not None:
            then()
        # the steps after this one on the device, before the host sees this one's result: level k's entries (the
        # children's slots, 2^k each, alive or not) split by their best splits where their own children may split
        # again, children first_id[k] + 2e, first_id[k] + 2e + 1
        m = children.size
        depth0 = self.depth[children]
        allow, first_id = [], []
        for k in range(levels):
            allow.append(can_split_each(np.tile(depth0, 1 << k) + k + 1, params))
            first_id.append(self.n_ids)
            self._grow_ids(2 * (m << k))
        founds, hists = kernels.look_ahead(pair, self.mask, params.split, children.astype(np.int32),
                                           allow, first_id, min_gain=self.floor, chain=chain)
        ids, alive = children, np.ones(m, bool)
        self._searched(children, pair, founds[0])
        for k in range(levels):
            ok, _, next_ids, next_alive = ahead_step(founds[k], alive, allow[k], first_id[k], min_gain=self.floor,
                                                     chain=chain if k == 0 else None)
            e = np.flatnonzero(ok)
            c0 = first_id[k] + 2 * e
            self._expanded(ids[e], c0, self.depth[ids[e]] + 1)
            ids, alive = np.asarray(next_ids, np.int64), next_alive
            at = np.flatnonzero(alive)
            self._searched(ids[at], hists[k], founds[k + 1], at)

    def _levels(self, first: int, whole: bool) -> tuple[int, int]:
        """Levels below a batch's children that the device splits by their best splits before the host sees them
        (``whole``: every child may split): the layout's look-ahead below every batch (below a bounded one, one level
        of the children the next batch takes, :meth:`expand`; below an unbounded one, every child above the floor,
        speculative: the walk may never take them), and below the root's batch (``first`` 1) the top of the tree as
        a depth-wise tree's levels ahead (``depth_ahead``, :func:`~mdhom.trees.growth.ahead_levels`: while the leaf
        budget cannot bind) as far as a level's entries fit the batch bound. There the host's batches would have
        been those levels whole (every candidate of gain > SPLIT_EPS, :meth:`reachable` under a budget that covers
        them), one round trip each: the same splits and searches, on the device without the host between them.
        Returns (the levels, the batch bound where the one level below a bounded speculative batch is the next batch's
        children, else 0)."""
        if not whole:
            return 0, 0
        kernels = self.kernels
        levels, most = int(kernels.lookahead), int(kernels.batch)
        if first > 1:
            return (1, most) if levels and most > 0 and kernels.speculate else (levels, 0)
        if kernels.depth_ahead:
            top = ahead_levels(kernels, self.params, 1, 2, 2)  # the root's two children, two leaves
            if most > 0:  # level j holds 2^(j + 1) entries
                top = min(top, max(0, most.bit_length() - 1))
            levels = max(levels, top)
        return levels, 0

    def _expanded(self, nodes: np.ndarray, first: np.ndarray, depth: np.ndarray) -> None:
        """Each of ``nodes`` split into ``first`` and ``first + 1`` (their searches, if any, come later)."""
        self.kid[nodes] = first
        for c in (first, first + 1):
            self.parent[c] = nodes
            self.depth[c] = depth
        kid_of, depth_of = self.kid_of, self.depth_of
        for node, c, d in zip(nodes.tolist(), first.tolist(), depth.tolist(), strict=True):
            kid_of[node] = c
            depth_of[c] = depth_of[c + 1] = d
        state = self.state
        state[nodes[state[nodes] == KNOWN]] = EXPANDED

    def _searched(self, nodes: np.ndarray, pair: object, found: Splits, at: np.ndarray | None = None) -> None:
        """Record that ``nodes`` sit at ``at`` (default: in order) of the histogram handle ``pair``, with their best
        splits in ``found`` (by the same positions). What the next batch's choice and partition read is written here;
        the per-id Python lists and the child sums wait for :meth:`settle`: this runs between a step's read-back and
        its next launch, while the device waits, and their loop over the search's nodes was a fifth of that host time
        (PoCL, 2-core EPYC, 500k rows, 255 leaves: ~0.05 of ~0.5 ms a step)."""
        if at is None:  # (a batch's children: the search's every entry, in order; no gathers)
            gain, feature, bin_, default_left = found.gain, found.feature, found.bin, found.default_left
            left_sum, right_sum = found.left_sum, found.right_sum
            pos = range(nodes.size)
        else:
            at = np.asarray(at, np.int64)
            pos = at.tolist()
            gain, feature, bin_, default_left = found.gain[at], found.feature[at], found.bin[at], found.default_left[at]
            left_sum, right_sum = found.left_sum[at], found.right_sum[at]
        gain = np.asarray(gain, np.float64)
        if np.isnan(gain).any():  # NaN marks a candidate not searched yet (_Walk.advance); searches give -inf instead
            raise RuntimeError("a split search returned a NaN gain")
        self.gain[nodes] = gain
        self._fresh.append((nodes, gain, pos, pair, found, left_sum, right_sum))
        self.feature[nodes], self.bin[nodes], self.default_left[nodes] = feature, bin_, default_left
        self.left_small[nodes] = left_smaller(left_sum, right_sum)
        ok = gain > SPLIT_EPS
        known = nodes[ok]
        self.state[known] = KNOWN
        parent = self.parent[known]
        chain = gain[ok]
        below = parent >= 0  # searched nodes but the root have a parent
        chain[below] = np.minimum(self.chain[parent[below]], chain[below])
        self.chain[known] = chain
        self.seq[known] = np.arange(self._seq, self._seq + known.size)
        self._seq += known.size

    def settle(self) -> None:
        """The records :meth:`_searched` left for later: each searched node's gain, split and histogram by id (what
        the walk and the next batch's sibling histograms read) and its children's sums (what the tree's values are
        written from)."""
        gain_of, split_at, hist_at = self.gain_of, self.split_at, self.hist_at
        for nodes, gain, pos, pair, found, left_sum, right_sum in self._fresh:
            for node, g, j in zip(nodes.tolist(), gain.tolist(), pos, strict=True):
                gain_of[node] = g
                split_at[node] = (found, j)
                hist_at[node] = (pair, j)
            self.left_sum[nodes], self.right_sum[nodes] = left_sum, right_sum
        self._fresh.clear()

    def reachable(self, room: float, most: int = 0) -> np.ndarray:
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
        smaller gain (ties are kept).

        ``most`` (the layout's ``batch``; 0: no bound) keeps at most that many of them, those of the largest chain
        values, with every one tied with the last. The walk's next leaf is the known candidate of the largest chain
        value (the walk pops expanded candidates of larger ones first), so a bounded batch never stalls the walk; it
        takes more round trips and splits fewer candidates in vain: a batch that the budget covers whole is every
        searched leaf, a whole level of the candidate tree early in a tree, most of whose splits the walk never takes
        (PoCL, 2-core EPYC, 500k Higgs rows, 255 leaves: 364 splits and 729 searches a tree in 13.7 batches for the
        tree's 254 splits, against 262 and 526 in 15.3 batches at most 32; kernels 74.5 / 79.9 -> 64.9 / 75.0 ms a
        round)."""
        self.floor = 0.0
        if room < 1:  # the walk has split the budget's leaves
            return np.zeros(0, np.int64)
        n = self.n_ids
        state, chain = self.state[:n], self.chain[:n]
        known = state == KNOWN
        unsplit = chain[known | (state == EXPANDED)]
        if unsplit.size <= room:
            out = _largest(np.flatnonzero(known), chain, most)
            return out[np.argsort(self.seq[out], kind="stable")]
        last = np.partition(unsplit, unsplit.size - int(room))[unsplit.size - int(room)]  # the room-th largest
        self.floor = float(last)
        out = _largest(np.flatnonzero(known & (chain >= last)), chain, most)
        return out[np.lexsort((out, -chain[out]))]  # the walk's order: larger chain values first

    def leaf_map(self, tree_of: dict[int, int]) -> np.ndarray:
        """Backend id -> the tree node holding its rows: the tree leaf at or above it (``tree_of``: the backend id
        of each tree node; a tree node's children in the tree are its children here). A split candidate in no tree
        node sits below a tree leaf, and a child's id is larger than its parent's: one pass in id order. Ids that a
        look-ahead reserved for entries it did not split have no parent and hold no rows: tree node 0."""
        out = np.full(self.n_ids, -1, np.int64)
        out[np.fromiter(tree_of.values(), np.int64, len(tree_of))] = np.fromiter(tree_of, np.int64, len(tree_of))
        below = np.flatnonzero(out < 0)
        if below.size:
            flat, parent = out.tolist(), self.parent[below].tolist()
            for c, p in zip(below.tolist(), parent, strict=True):
                flat[c] = flat[p] if p >= 0 else 0
            out = np.asarray(flat, np.int64)
        return out.astype(np.int32)


def _largest(ids: np.ndarray, chain: np.ndarray, most: int) -> np.ndarray:
    """Those of ``ids`` among the ``most`` largest chain values, with every one tied with the last (all where
    ``most`` is 0 or less, or covers them)."""
    if most <= 0 or ids.size <= most:
        return ids
    values = chain[ids]
    return ids[values >= np.partition(values, values.size - most)[values.size - most]]


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
        # the splits taken, in the walk's order: the tree node split and its candidate; the k-th's children are tree
        # nodes first + 2k and first + 2k + 1 (written by :meth:`write`)
        self.first = nodes.n
        self.taken_node: list[int] = []
        self.taken: list[int] = []

    def room(self) -> float:
        """Splits the leaf budget has left."""
        return self.limit - self.n_leaves

    def advance(self) -> int | None:
        """Pop leaves while their candidates are expanded and the children's searches are in; returns the candidate
        it stops at for want of an expansion (None: the tree is done, or the next leaf's children are still being
        searched)."""
        cand, params, heap, tree_of = self.cand, self.params, self.heap, self.tree_of
        cand.settle()
        kid, depth, gains = cand.kid_of, cand.depth_of, cand.gain_of
        taken_node, taken = self.taken_node, self.taken
        while heap and self.n_leaves < self.limit:
            node = heap[0][1]
            at = tree_of[node]
            c_lo = kid[at]
            if c_lo < 0:
                return at
            c_hi = c_lo + 1
            grows = can_split(depth[c_lo], params) and self.n_leaves + 1 < self.limit
            if grows and gains[c_lo] != gains[c_lo]:  # NaN: expanded in the batch whose search is under way
                return None
            heapq.heappop(heap)
            cand.took_split(at)
            lo = self.first + 2 * len(taken)
            hi = lo + 1
            taken_node.append(node)
            taken.append(at)
            tree_of[lo], tree_of[hi] = c_lo, c_hi
            self.n_leaves += 1
            if not grows:
                continue
            for child, c in ((lo, c_lo), (hi, c_hi)):
                gain = gains[c]
                if gain > SPLIT_EPS:
                    heapq.heappush(heap, (-gain, child))
        return None

    def sums(self) -> np.ndarray:
        """The (g, h) sums of the tree's nodes by tree id, as :meth:`write` leaves them in the node table (the tree's
        values without the table)."""
        c = np.asarray(self.taken, np.int64)
        table = self.nodes.sums
        out = np.empty((self.first + 2 * c.size, *table.shape[1:]))
        out[: self.first] = table[: self.first]
        out[self.first::2], out[self.first + 1::2] = self.cand.left_sum[c], self.cand.right_sum[c]
        return out

    def write(self) -> None:
        """The splits taken into the node table, at once."""
        cand, c = self.cand, np.asarray(self.taken, np.int64)
        split_at = cand.split_at

        def cat_left(k: int) -> np.ndarray:
            found, j = split_at[self.taken[k]]
            return found.cat_left[j]

        first = self.nodes.write_splits(np.asarray(self.taken_node, np.int64), cand.feature[c], cand.bin[c],
                                        cand.default_left[c], cand.gain[c], cand.left_sum[c], cand.right_sum[c],
                                        cand.depth[c] + 1, self.params, cat_left)
        if c.size and first != self.first:
            raise RuntimeError("the node table grew during the loss-guided walk")


def grow_lossguide_batched(kernels: TreeKernels, nodes: NodeTable, mask: np.ndarray, params: GrowParams,
                           root: object, splits: Splits) -> _Walk:
    """The tree of :func:`grow_lossguide`, node for node, with the split searches batched.

    The walk is the same (pop the leaf of largest gain, ties to the lower tree id; push its children), over
    candidate splits that :class:`_Candidates` searches ahead. With ``kernels.speculate``, when the walk
    reaches a leaf whose children are not searched yet, every candidate it may still split joins one batch, or the
    ``kernels.batch`` of them it reaches first (:meth:`_Candidates.reachable`): about as many round trips as the
    tree is deep (H100, 10.5M Higgs rows, 255 leaves, no bound: 13 instead of 46 a tree, 0.025-0.027 s a round
    instead of 0.045-0.063). Without it, every
    leaf on the heap that can still be split joins one batch: each leaf among the ``max_leaves - leaves``
    best of the heap (each pop takes one leaf of the budget and entries above a leaf leave the heap only by
    pops, so a leaf ranked lower can never be split). Either way some candidates of a batch end up not split
    (their budget went to children of better splits); their rows move back to the tree leaf by one relabelling
    at the end.

    Returns the walk, its splits not yet in ``nodes``: the caller writes them (:meth:`_Walk.write`) and lets the walk
    and its candidates go once the tree's score update is launched (the values from :meth:`_Walk.sums`). Between the
    rows' relabelling and the score update the device waits, and there the write took ~0.2 ms and freeing the
    candidates' thousands of Python objects another ~0.2 (PoCL, 2-core EPYC, 300k rows, 255 leaves).
    """
    cand = _Candidates(kernels, mask, params, root, splits)
    walk = _Walk(cand, nodes, params, splits)
    if kernels.speculate:
        # each batch chosen as soon as the last one's searches are in (:meth:`_Candidates.reachable` does not need
        # the walk to have caught up), and the walk's pops over the last batch's results run while this one's
        # search is on the device: they had sat between a step's read-back and its next launch
        batch = cand.reachable(walk.room(), kernels.batch)
        while batch.size:
            cand.expand(batch, then=walk.advance)
            batch = cand.reachable(walk.room(), kernels.batch)
        stalled = walk.advance()
        if stalled is not None:
            raise RuntimeError(f"the walk's next leaf (candidate {stalled}) was in no batch")
    else:
        while (stalled := walk.advance()) is not None:
            room = int(min(walk.room(), len(walk.heap)))
            batch = np.array([walk.tree_of[t] for _, t in heapq.nsmallest(room, walk.heap)], np.int64)
            cand.expand(batch[cand.kid[batch] < 0])
    kernels.relabel(cand.leaf_map(walk.tree_of))
    return walk
