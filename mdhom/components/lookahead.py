"""The look-ahead's split tables (below loss-guided batches, and depth-wise levels), made on the device: a step whose
splits the device decides from the split search it just ran, before the host has read the result (the row
partitioner's ``apply_searched`` launches it; ``OpenCLTreeKernels(lookahead=k, depth_ahead=d)`` use it, tuned layout
choices), with the blocks its rows are cut into for the block and group partitions, and the leaf budget of a
depth-wise tree's last level.

=======================  =========================  ==================================================================
kernel                   index space                combine operators
=======================  =========================  ==================================================================
tree_split_from_search   entry                      concat: one split record per searched node, and a sentinel (and,
                                                    written inputs, the search's packed result and the block table)
tree_ahead_budget        entry                      concat: which entries of a tree's last level split (its leaf budget)
tree_ahead_chain         entry                      concat: which children of a loss-guided batch the next batch takes
=======================  =========================  ==================================================================
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mdhom.components.lanes import defines, real_ctype, snippet
from mdhom.components.partition_kernels import block_table, flip_positions
from mdhom.components.specs import KernelSpec, elementwise
from mdhom.components.split import SPLIT_EPS
from mdhom.components.split_result import best_layout, result_code, result_inputs, result_preamble, result_type
from mdhom.components.tables import SPLIT_RECORD, split_table
from mdhom.mdh import Concat, Description, Input, Param


def _rule(precision: str) -> str:
    """OpenCL C: whether entry e of a split search may split: allowed, and a finite gain above SPLIT_EPS and at least
    min_gain (the host's rule, :func:`may_split`). The gain is the score's (``best_value``, the packed result's
    ``gain``, the same bits): read there, no entry waits for another's packed result."""
    rstride = best_layout(precision)[2]
    return f"""
inline int tree_ahead(__global const tree_real_t* gains, __global const int* allow, const int e,
                      const double min_gain) {{
    const double g = (double)gains[e * {rstride}];
    return allow[e] != 0 && isfinite(g) && g > {SPLIT_EPS!r} && g >= min_gain;
}}
"""


@lru_cache(maxsize=8)
def split_from_search(n_bins: int, n_outputs: int, precision: str, summed: bool = False) -> Description:
    """The split table of a step the device decides alone: a look-ahead splits the nodes of the split
    search just run before the host has seen its result (``RowPartitioner.apply_searched``). It also writes that
    result for the host (``res``, written: ``tree_split_sums``'s records,
    :func:`~mdhom.components.split_result.result_code`, ``summed`` as there) from the search's histograms, scan and
    best splits: one launch a step instead of two (a depth-wise tree of depth 8 launched 8 of ``tree_split_sums``);
    every entry reads the gains and indices of the others from the score's ``best``, which nothing writes here.

    Those nodes are the children of the last split step's records ``last_tab`` (``n_entries / 2`` of them), in the
    search's order: the child each record built (``next_child``), then the other; ``allow`` says whether each may
    split (``node`` is -1: the host knows the ids). Entry ``entry`` takes its node's row range from its record and
    the rows that went left (``n_left``; a record's children lie in the next region of the positions, ``n_rows`` a
    region: kernels/trees/positions.cl), and splits by the node's best split (``best``, the score's result) where
    it may and the gain is finite, above SPLIT_EPS and at least ``min_gain`` (the host's rule; a loss-guided batch's
    floor, 0 for none), into ``base + 2 entry`` (left) and
    ``base + 2 entry + 1``; otherwise its record holds no rows and the node keeps its range. ``next_child`` is the
    child of the smaller hessian sum over outputs, added in output order in double, ties left (the host's
    ``left_smaller``, bit for bit). ``first`` adds the counts before it (a loop: a few hundred entries). Entry
    ``n_entries`` is a sentinel at the end of the ranges with no rows: the partition launches for an upper bound of
    the rows, and indices past the last range find it. Its ``node`` counts the tree's leaves after the step (no other
    record names its node): ``leaves`` (the host's count, where the step is a look-ahead's first) or, where that is
    -1, the last table's sentinel's, plus the entries that split; a tree's last level takes its leaf budget from it
    (:func:`ahead_budget`). With ``blk_rows`` > 0 it also writes the step's block table for the block and group
    partitions (``blk_tab``, written: (record, block) int pairs, the rows of each record in blocks of ``blk_rows``,
    one block at least), each entry its own blocks after the blocks of the entries before it (counted in the same
    loop as ``first``), the sentinel its one and every further block up to the ``n_blk`` the partition launches for
    (an upper bound: those move no row): what ``tree_ahead_blocks`` had cut in a launch of its own (a depth-wise
    round of depth 8 launched 7). ``root`` 1: the one entry is a tree's root, every row in
    region 0 (no last table: a depth-wise tree whose root's split is the device's too)."""
    res = result_type(precision)
    n_cand = int(n_bins) - 2
    return Description(
        "tree_split_from_search", ["entry"], [Concat()], SPLIT_RECORD,
        scalar=f"""
__global const tree_real_t* gains = (__global const tree_real_t*)best_value;
__global const tree_split_t* last = (__global const tree_split_t*)last_tab;
const int ok = entry < n_entries && tree_ahead(gains, allow, entry, min_gain);
double sl = 0.0, sr = 0.0;  /* the children's hessian sums over outputs, in output order (the host's left_smaller) */
for (int output = 0; output < TREE_OUTPUTS && entry < n_entries; ++output) {{
    const int node = entry;
    lr_t rec;
    {{{result_code(precision, summed, "rec")}
    }}
    ((__global lr_t*)res)[entry * TREE_OUTPUTS + output] = rec;
    sl += (double)rec.lh;
    sr += (double)rec.rh;
}}
int first = 0, n_split = 0, bfirst = 0;  /* rows, splits and blocks of the entries before this one */
/* blocks of 1 row where the step has none (blk_rows 0): counted, not written, and no division by 0 */
const int br = max(blk_rows, 1), shift = (br & (br - 1)) == 0 ? 31 - (int)clz(br) : -1;
/* four entries a step, every load issued before the sums (integers: any order adds the same): a GPU work-item
 * walking a level's 256 entries one load chain at a time waited a memory latency each */
int e = 0;
for (; e + 4 <= entry; e += 4) {{
    int k[4], c[4];
    for (int u = 0; u < 4; ++u) {{
        k[u] = tree_ahead(gains, allow, e + u, min_gain);
        c[u] = root ? n_rows : tree_ahead_count(last, n_left, n_entries, e + u);
    }}
    for (int u = 0; u < 4; ++u) {{
        first += k[u] ? c[u] : 0;
        n_split += k[u];
        bfirst += tree_blocks_of(k[u] ? c[u] : 0, br, shift);
    }}
}}
for (; e < entry; ++e) {{
    if (tree_ahead(gains, allow, e, min_gain)) {{
        const int c = root ? n_rows : tree_ahead_count(last, n_left, n_entries, e);
        first += c;
        ++n_split;
        bfirst += tree_blocks_of(c, br, shift);
    }} else {{
        bfirst += 1;
    }}
}}
const int at = ok ? best[entry * {best_layout(precision)[0]} + {best_layout(precision)[1]}] : 0;
out.node = entry < n_entries ? -1 : (leaves >= 0 ? leaves : last[n_entries / 2].node) + n_split;
out.feature = at / (2 * N_CAND);
out.bin = (at / 2) % N_CAND;
out.default_left = (at % 2) == 0;
out.left = base + 2 * entry;
out.right = base + 2 * entry + 1;
out.begin = (entry < n_entries && !root) ? tree_ahead_begin(last, n_left, n_entries, entry, n_rows) : 0;
out.count = ok ? (root ? n_rows : tree_ahead_count(last, n_left, n_entries, entry)) : 0;
out.next_child = (entry < n_entries) ? (ok && !(sl <= sr) ? 1 : 0) : -1;
out.first = first;
out.cats = -1;
if (blk_rows > 0) {{  /* this entry's blocks; the sentinel's reach to the launch's bound */
    const int end = entry < n_entries ? min(n_blk, bfirst + tree_blocks_of(out.count, br, shift)) : n_blk;
    for (int b = bfirst; b < end; ++b) {{
        blk_tab[2 * b] = entry;
        blk_tab[2 * b + 1] = b - bfirst;
    }}
}}""",
        inputs=[Input("res", "uchar", (1,), gather=True, writes=True), *result_inputs(precision, summed, "*"),
                Input("last_tab", "int", (1,), gather=True), Input("n_left", "int", (1,), gather=True),
                Input("allow", "int", (1,), gather=True), Input("blk_tab", "int", (1,), gather=True, writes=True)],
        params=[Param("n_entries", "int"), Param("base", "int"), Param("n_rows", "int"), Param("root", "int"),
                Param("leaves", "int"), Param("min_gain", "double"), Param("n_feat", "int"), Param("blk_rows", "int"),
                Param("n_blk", "int")],
        preamble=defines(precision, n_bins, n_outputs) + res.declaration("lr_t") + result_preamble(precision, summed)
        + snippet("positions.cl") + f"""
#define N_CAND {n_cand}
/* a split's blocks: its rows over blk_rows, rounded up, one at least (shift: log2 blk_rows, -1 where not a power) */
inline int tree_blocks_of(const int count, const int blk_rows, const int shift) {{
    const int r = count + blk_rows - 1;
    return max(1, shift >= 0 ? r >> shift : r / blk_rows);
}}
/* the range of entry e: a child of record e % half of the last table (built child first, then the other) */
inline int tree_ahead_left(__global const tree_split_t* last, const int n_entries, const int e) {{
    const int built = n_entries / 2;  /* the built children come first */
    return (e < built) == (last[e < built ? e : e - built].next_child == 0);
}}
inline int tree_ahead_begin(__global const tree_split_t* last, __global const int* n_left, const int n_entries,
                            const int e, const int n_rows) {{
    const int i = e < n_entries / 2 ? e : e - n_entries / 2;
    const int dst = tree_flip(last[i].begin, n_rows);
    return tree_ahead_left(last, n_entries, e) ? dst : dst + n_left[i];
}}
inline int tree_ahead_count(__global const tree_split_t* last, __global const int* n_left, const int n_entries,
                            const int e) {{
    const int i = e < n_entries / 2 ? e : e - n_entries / 2;
    return tree_ahead_left(last, n_entries, e) ? n_left[i] : last[i].count - n_left[i];
}}
"""
        + _rule(precision),
    )


def split_from_search_reference(res: np.ndarray, last_tab: np.ndarray | None, n_left: np.ndarray | None,
                                allow: np.ndarray, base: int, n_bins: int, n_rows: int, leaves: int = 0,
                                min_gain: float = 0.0) -> np.ndarray:
    """``tree_split_from_search`` in numpy: ``res`` (n_entries, n_outputs) split-search records, ``last_tab`` the
    last step's split table (at least n_entries / 2 records; None: the one entry is the root, ``root`` 1), ``allow``
    per entry, ``n_rows`` positions a region, ``leaves`` the tree's before the step (-1: the last table's sentinel's);
    n_entries + 1 records."""
    m = len(res)
    half = m // 2
    out = split_table(m + 1)
    if last_tab is None:  # the root: every row, in region 0
        begin, count = np.zeros(m, np.int64), np.full(m, n_rows, np.int64)
    else:
        i = np.arange(m) % max(half, 1)
        built_left = last_tab["next_child"][i] == 0
        left = (np.arange(m) < half) == built_left
        nl = n_left[i].astype(np.int64)
        parent = last_tab["begin"][i].astype(np.int64)
        dst = flip_positions(parent, n_rows)
        begin = np.where(left, dst, dst + nl)
        count = np.where(left, nl, last_tab["count"][i] - nl)
    ok = may_split(res["gain"][:, 0], allow, min_gain)
    idx = np.where(ok, res["index"][:, 0], 0)
    n_cand = n_bins - 2
    sl = res["lh"].astype(np.float64).cumsum(axis=1)[:, -1]
    sr = res["rh"].astype(np.float64).cumsum(axis=1)[:, -1]
    out["node"] = -1
    out["node"][m] = (leaves if leaves >= 0 else int(last_tab["node"][half])) + int(ok.sum())
    out["feature"][:m], out["bin"][:m] = idx // (2 * n_cand), (idx // 2) % n_cand
    out["default_left"][:m] = idx % 2 == 0
    out["default_left"][m] = 1
    out["left"] = base + 2 * np.arange(m + 1)
    out["right"] = out["left"] + 1
    out["begin"][:m] = begin
    out["count"][:m] = np.where(ok, count, 0)
    out["next_child"][:m] = np.where(ok & ~(sl <= sr), 1, 0)
    out["next_child"][m] = -1
    out["first"] = np.concatenate([[0], np.cumsum(out["count"][:m])])
    return out


@lru_cache(maxsize=8)
def ahead_budget(n_bins: int, n_outputs: int, precision: str) -> Description:
    """Which entries of a depth-wise tree's last level split, decided on the device: those ``tree_split_from_search``
    would split (allowed, a finite gain above SPLIT_EPS; a depth-wise level has no floor), and where more would than
    the tree's leaf budget holds (``max_leaves`` less the leaves before the level, 0 for no limit), only as many of the
    largest gains, ties to the earlier entry: the host's level-wise rule (:func:`within_budget`), so the last level
    needs no round trip. The leaves before the level are ``leaves``, or where that is -1 the last table's sentinel's
    count (``tree_split_from_search``). The result is that step's ``allow``. Entry ``entry`` ranks its gain among the
    level's (a loop: a few hundred entries). It reads the gains from the score's result (``best_value``), ahead of
    the table maker that writes the host's records."""
    return Description(
        "tree_ahead_budget", ["entry"], [Concat()], "int",
        scalar="""
__global const tree_real_t* gains = (__global const tree_real_t*)best_value;
__global const tree_split_t* last = (__global const tree_split_t*)last_tab;
out = 0;
if (tree_ahead(gains, allow, entry, 0.0)) {
    const int room = max_leaves > 0 ? max_leaves - (leaves >= 0 ? leaves : last[n_entries / 2].node) : n_entries;
    const double g = (double)gains[entry * RSTRIDE];
    int rank = 0;  /* entries ahead of this one: a larger gain, or the same gain earlier */
    for (int e = 0; e < n_entries && rank < room; ++e) {
        if (e != entry && tree_ahead(gains, allow, e, 0.0)) {
            const double ge = (double)gains[e * RSTRIDE];
            rank += ge > g || (ge == g && e < entry);
        }
    }
    out = rank < room;
}""",
        inputs=[Input("best_value", real_ctype(precision), (1,), gather=True),
                Input("last_tab", "int", (1,), gather=True), Input("allow", "int", (1,), gather=True)],
        params=[Param("n_entries", "int"), Param("leaves", "int"), Param("max_leaves", "int")],
        preamble=defines(precision, n_bins, n_outputs) + f"#define RSTRIDE {best_layout(precision)[2]}\n"
        + _rule(precision),
    )


@lru_cache(maxsize=8)
def ahead_chain(n_bins: int, n_outputs: int, precision: str) -> Description:
    """Which children of a bounded loss-guided batch the host's next batch would take, decided on the device: the
    next batch is the ``most`` candidates of the largest chain values (the least gain on the path from the root)
    among those searched and not expanded, so it is drawn from this batch's children and the candidates the batch
    left out (the ``n_lchain`` of them of the largest chain values). An entry ``tree_split_from_search`` would
    split (allowed, a finite gain above SPLIT_EPS and at least ``min_gain``) splits where fewer than ``most``
    candidates rank ahead of it: left-out ones of a chain value at least its own, entries of a larger one or the same
    one earlier; its chain value is the smaller of its gain and its parent's. ``chains`` holds the parents' chain
    values, one an entry, then the ``n_lchain`` left-out ones. Ties against a left-out
    candidate go to that one and among entries to the earlier: no entry splits that the host's batch would not take
    (:meth:`mdhom.trees.lossguide._Candidates.reachable` keeps every tie), so the look-ahead splits nothing in vain
    that the host would not have split one round trip later (:func:`within_chain_budget`, the host's replay). The
    result is that step's ``allow``. Each entry ranks itself among the level's (a loop: 64 entries under the default
    bound of 32) and the left-out ones."""
    return Description(
        "tree_ahead_chain", ["entry"], [Concat()], "int",
        scalar="""
__global const tree_real_t* gains = (__global const tree_real_t*)best_value;
out = 0;
if (tree_ahead(gains, allow, entry, min_gain)) {
    const double c = fmin(chains[entry], (double)gains[entry * RSTRIDE]);
    int rank = 0;  /* candidates ahead of this one */
    for (int l = 0; l < n_lchain && rank < most; ++l) rank += chains[n_entries + l] >= c;
    for (int e = 0; e < n_entries && rank < most; ++e) {
        if (e != entry && tree_ahead(gains, allow, e, min_gain)) {
            const double ce = fmin(chains[e], (double)gains[e * RSTRIDE]);
            rank += ce > c || (ce == c && e < entry);
        }
    }
    out = rank < most;
}""",
        inputs=[Input("best_value", real_ctype(precision), (1,), gather=True), Input("allow", "int", (1,), gather=True),
                Input("chains", "double", (1,), gather=True)],
        params=[Param("n_entries", "int"), Param("n_lchain", "int"), Param("most", "int"),
                Param("min_gain", "double")],
        preamble=defines(precision, n_bins, n_outputs) + f"#define RSTRIDE {best_layout(precision)[2]}\n"
        + _rule(precision),
    )


def within_chain_budget(gain: np.ndarray, ok: np.ndarray, pchain: np.ndarray, lchain: np.ndarray,
                        most: int) -> np.ndarray:
    """``ok`` less the entries that ``most`` or more candidates rank ahead of (``tree_ahead_chain``'s rule, the
    host's replay of it): left-out candidates of a chain value (``lchain``) at least the entry's, entries of ``ok``
    with a larger one or the same one earlier; an entry's chain value is the smaller of its gain and ``pchain``."""
    ok = np.asarray(ok, bool)
    with np.errstate(invalid="ignore"):
        chain = np.fmin(np.asarray(pchain, np.float64), np.asarray(gain, np.float64))
    at = np.flatnonzero(ok)
    ahead = np.searchsorted(np.sort(-np.asarray(lchain, np.float64)), -chain[at], side="right")  # lchain >= chain
    order = at[np.lexsort((at, -chain[at]))]  # entries by chain value, larger first, ties to the earlier
    rank = np.empty(ok.size, np.int64)
    rank[order] = np.arange(order.size)
    out = np.zeros_like(ok)
    out[at] = ahead + rank[at] < most
    return out


def ahead_chain_reference(gain: np.ndarray, allow: np.ndarray, pchain: np.ndarray, lchain: np.ndarray, most: int,
                          min_gain: float = 0.0) -> np.ndarray:
    """``tree_ahead_chain`` in numpy (int32 per entry)."""
    return within_chain_budget(gain, may_split(gain, allow, min_gain), pchain, lchain, most).astype(np.int32)


def may_split(gain: np.ndarray, allow: np.ndarray, min_gain: float = 0.0) -> np.ndarray:
    """Which entries may split: allowed, with a finite gain above SPLIT_EPS and at least ``min_gain`` (``tree_ahead``,
    the kernels' rule)."""
    gain = np.asarray(gain, np.float64)
    with np.errstate(invalid="ignore"):
        return (np.asarray(allow) != 0) & np.isfinite(gain) & (gain > SPLIT_EPS) & (gain >= min_gain)


def within_budget(gain: np.ndarray, ok: np.ndarray, room: int | None) -> np.ndarray:
    """``ok`` less all but the ``room`` largest gains among it, ties to the earlier entry (None: no budget): which
    nodes of a level split where the tree's leaf budget binds (XGBoost's and the reference's level-wise rule)."""
    ok = np.asarray(ok, bool)
    if room is None or int(ok.sum()) <= room:
        return ok
    at = np.flatnonzero(ok)
    out = np.zeros_like(ok)
    out[at[np.argsort(-np.asarray(gain)[at], kind="stable")[: max(0, room)]]] = True
    return out


def ahead_budget_reference(gain: np.ndarray, allow: np.ndarray, leaves: int, max_leaves: int) -> np.ndarray:
    """``tree_ahead_budget`` in numpy: ``gain`` per entry (the score's), ``leaves`` the tree's before the level
    (int32 per entry)."""
    return within_budget(gain, may_split(gain, allow), max_leaves - leaves if max_leaves > 0 else None
                         ).astype(np.int32)


def block_pairs_reference(count: np.ndarray, n_blk: int, blk_rows: int) -> np.ndarray:
    """The block table ``tree_split_from_search`` writes, in numpy: :func:`block_table` of the records' ``count``
    (the sentinel's last), then more blocks of the sentinel up to ``n_blk``; (n_blk, 2) int32 pairs."""
    count = np.asarray(count, np.int64)
    pairs = block_table(count, blk_rows)[0].reshape(-1, 2)
    last = max(1, -(-int(count[-1]) // blk_rows))  # the last record's blocks
    more = np.arange(len(pairs), max(n_blk, len(pairs)))
    extra = np.stack([np.full(more.size, len(count) - 1), more - (len(pairs) - last)], axis=1)
    return np.concatenate([pairs, extra]).astype(np.int32)[:n_blk]


# a launch of a few hundred entries runs only the work-groups they fill (Computation.groups): a grid for the whole
# device had been launched every level, and PoCL on 16 cores woke every worker for each of 64 work-groups (the three
# kernels, 1.02 / 0.95 -> 0.59 / 0.67 ms of a depth-wise round at 500k rows and 255 bins, grids sized at the build then)
AHEAD = KernelSpec("tree_split_from_search", elementwise())
AHEAD_BUDGET = KernelSpec("tree_ahead_budget", elementwise())
AHEAD_CHAIN = KernelSpec("tree_ahead_chain", elementwise())
# the most entries (split slots, alive or not) of a look-ahead's deepest level: 2^10, a depth-wise tree's from the root
# with depth_ahead 7 are 2^7; a histogram each (28 features x 63 bins: 14 KB). Its kernels are built for them and the
# sentinel
AHEAD_ENTRIES = 1024
SPECS = (AHEAD, AHEAD_BUDGET, AHEAD_CHAIN)
