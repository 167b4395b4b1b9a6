"""The row partitioner's kernels (:mod:`mdhom.components.partition` drives them): their md_hom descriptions, numpy
references, heuristics, tuner inputs and specs, and the block table the block and group partitions read (the leaves'
pass at a tree's end: :mod:`mdhom.components.leaf_rows`). What every scatter shares is in kernels/trees/row_moves.cl.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import DEFAULT_BINS, bin_ctype, bins_reader, defines, snippet, with_default_bins
from mdhom.components.specs import KernelSpec, Tuning, elementwise, ones, pow2_at_most
from mdhom.components.tables import SPLIT_RECORD, split_table
from mdhom.devices import Device
from mdhom.mdh import SUM, Concat, Description, Input, Param, Place, Reduce, Scan

SPLIT_FIELDS = SPLIT_RECORD.dtype.names


def flip_positions(begin: np.ndarray | int, n_rows: int) -> np.ndarray | int:
    """The positions where a split of the nodes at ``begin`` writes their children: the same range of the next
    region (kernels/trees/positions.cl's tree_flip, which says why there are three)."""
    return np.where(np.asarray(begin) < 2 * n_rows, begin + n_rows, begin - n_rows) if n_rows else begin


def region_start(begin: np.ndarray, n_rows: int) -> np.ndarray:
    """The first position of the region holding each position of ``begin``."""
    return (np.asarray(begin, np.int64) // max(1, n_rows)) * n_rows


# ------------------------------------------------------------------------------------------------ partition
# the split table: SPLIT_RECORD records, read through a tree_split_t pointer (kernels/trees/partition.cl)
_PART_TAB = Input("split_tab", "int", ("*",), gather=True)
_SPLIT_AT = ("__global const tree_split_t* t = (__global const tree_split_t*)split_tab\n"
             "    + tree_split_at(pos, (__global const tree_split_t*)split_tab, n_split);")


@lru_cache(maxsize=32)
def partition_flags(n_bins: int, feature_major: bool = False, row_index: bool = False,
                    sparse: bool = False) -> Description:
    """Inclusive prefix count of the rows that go to a left child, over the split nodes' rows laid end to end
    (index ``pos`` of split ``s`` is position ``begin + pos - first``; ``bins`` in position order, as for the
    histogram, or in row order read through ``ridx`` with ``row_index``). Only the rows of split nodes are
    visited, wherever their ranges lie."""
    at = "ridx[t->begin + (pos - t->first)]" if row_index else "t->begin + (pos - t->first)"
    return Description(
        "tree_partition_flags", ["pos"], [Scan(SUM)], "int",
        scalar="""
""" + _SPLIT_AT + """
out = (pos - t->first < t->count)  /* past the last range: a table decided on the device ends in a sentinel */
    ? tree_goes_left(tree_bin_of(bins, """ + at + """, t->feature, n_rows, n_feat), t, (__global const uchar*)split_tab)
    : 0;""",
        inputs=[Input("bins", bin_ctype(n_bins), ("*",), gather=True), _PART_TAB]
        + ([Input("ridx", "int", ("*",), gather=True)] if row_index else []),
        params=[Param("n_split", "int"), Param("n_rows", "int"), Param("n_feat", "int")],
        preamble=defines("double", n_bins, feature_major=feature_major) + bins_reader(sparse),
    )


@lru_cache(maxsize=32)
def group_counts(n_bins: int, feature_major: bool = False, row_index: bool = False) -> Description:
    """The rows going left in each block of a split step's rows: block ``blk`` is block ``b`` of split ``s``, the
    int pair (s, b) at ``blk_tab[blk_at + 2 blk]`` (the host's after the split records, uploaded with them; a
    table made on the device, written beside it by :func:`mdhom.components.lookahead.split_from_search`, in a buffer of
    its own), its indices
    from ``b * SIZE_k`` on (``SIZE_k`` rows a block; the fold is ragged, a split's last block shorter). The first of
    the group partition's two launches (GPUs; :func:`group_scatter` the second) and of
    the CPUs' block partition where rows move (:func:`block_scatter` the second); where CPUs read rows through the
    row index, :func:`block_stage` counts as it walks."""
    at = "ridx[t->begin + (i - t->first)]" if row_index else "t->begin + (i - t->first)"
    count = f"split_tab[{len(SPLIT_FIELDS)} * blk_tab[blk_at + 2 * blk] + {SPLIT_FIELDS.index('count')}]"
    scalar = """
__global const tree_split_t* t = (__global const tree_split_t*)split_tab + blk_tab[blk_at + 2 * blk];
const int i = t->first + (int)(blk_tab[blk_at + 2 * blk + 1] * SIZE_k + k);
out = tree_goes_left(tree_bin_of(bins, """ + at + """, t->feature, n_rows, n_feat), t,
                     (__global const uchar*)split_tab);"""
    return Description(
        "tree_group_counts", ["blk", "k"], [Concat(), Reduce(SUM)], "int",
        scalar=scalar,
        inputs=[Input("bins", bin_ctype(n_bins), ("*",), gather=True), _PART_TAB,
                Input("blk_tab", "int", ("*",), gather=True)]
        + ([Input("ridx", "int", ("*",), gather=True)] if row_index else []),
        params=[Param("blk_at", "int"), Param("n_rows", "int"), Param("n_feat", "int")],
        extents={"k": f"(long){count} - (long)blk_tab[blk_at + 2 * blk + 1] * SIZE_k"},
        preamble=defines("double", n_bins, feature_major=feature_major) + bins_reader(),
    )


# the work-groups of the CPUs' block partition (the counts and the block scatter, or the walk and the copy), a block
# each: 8192 blocks of 2048 rows are 16.7M rows; a larger fit's work-items walk a strided share of the blocks
BLOCK_GROUPS = 8192


_BLOCK_OF = """
__global const int* mdh_blk = blk_tab + blk_at;
const int s = mdh_blk[2 * blk];
__global const tree_split_t* t = (__global const tree_split_t*)split_tab + s;
const int i0 = t->first + mdh_blk[2 * blk + 1] * blk_rows, end = tree_block_end(t, i0, blk_rows);"""
# a block partition's second launch, from the blocks' left counts (blk_left): the split's left rows before the block
# (before) and in all (nl), and the split's count and next slot from its first block; opens the block's own part
_BLOCK_PLACES = _BLOCK_OF + """
out_at = -1;
if (i0 == t->first || i0 < end) {
    int before = 0, nl = 0;
    for (long c = (long)blk - 1; c >= 0 && mdh_blk[2 * c] == s; --c) before += blk_left[c];
    for (long c = blk; c < SIZE_blk && mdh_blk[2 * c] == s; ++c) nl += blk_left[c];
    nl += before;
    if (i0 == t->first) {
        out = nl;
        out_at = s;
        tree_split_slots(t, s, nl, n_rows, slot_begin, slot_count);
    }"""


@lru_cache(maxsize=32)
def block_scatter(n_bins: int, feature_major: bool, gh_wide: bool, gh_words: int, row_words: int) -> Description:
    """The block partition's scatter where rows move (CPUs), after :func:`group_counts`: a point is a block of a
    split step's rows (``blk``, the int pair (split, block) at ``blk_tab[blk_at + 2 blk]``, ``blk_rows`` rows a block;
    a split's blocks consecutive), and its scalar function walks the block's rows in order, moving each with its bins
    and (g, h) words to the next region after the split's earlier blocks' left or right rows (their counts
    ``blk_left``): XGBoost's CPU partition, the same stable partition as the per-row scatter. The written gathered
    inputs are the row order ``ridx``, the bins and the (g, h) words (``gh_words`` a row, 8 bytes each where
    ``gh_wide``; the bins as ``row_words`` 4-byte words a row where they are whole words, else byte by byte;
    kernels/trees/row_moves.cl); the output, scattered, is each split's left count, written by its first block with
    the next child's slot (``slot_begin``, ``slot_count``, written). A block past its split's rows (the spare blocks
    of a table cut on the device) writes and moves nothing. ``move`` 0: the row order alone (a tree's last split).
    ``split_bins``: the bins the split reads, the buffer the rows move in: the rows it reads are the block's own, and
    no block writes where another reads. Each row streams once, in order (:func:`block_stage` says why rows read
    through the row index take a walk and a copy instead). A row's side is a select and two adds, not a branch
    (``? dl++ : dr++`` had one on Intel's CPU runtime, mispredicted for about half the rows: 2-core Xeon, 500k rows,
    float64, moved rows, fits alternating, identical models: 36.4 -> 34.3 ms a depth-wise round, 46.2 -> 42.5
    loss-guided; PoCL, which had made it branch-free itself, 32.9 / 32.6)."""
    body = _BLOCK_PLACES + """
    const int shift = t->begin - t->first, dst = tree_flip(t->begin, n_rows);
    int dl = dst + before, dr = dst + nl + (i0 - t->first - before);
    const tree_rule_t u = tree_rule_of(t, split_cols, n_rows, stride, n_feat);
    for (int i = i0; i < end; ++i) {
        const int p = i + shift;
        /* the side as a select and two adds, no branch: rows go either way at random */
        const int go = tree_block_go(split_bins, ridx, p, u, (__global const uchar*)split_tab);
        const int d = go ? dl : dr;
        dl += go;
        dr += 1 - go;
        tree_move_row(ridx, bins, gh, d, p, stride, n_feat, n_out, move);
    }
}"""
    return Description(
        "tree_block_scatter", ["blk"], [Concat()], "int",
        scalar=body,
        inputs=_block_moves(n_bins, gh_wide),
        params=[Param("split_cols", "int"), Param("n_rows", "int"), Param("stride", "int"), Param("n_feat", "int"),
                Param("n_out", "int"), Param("blk_at", "int"), Param("blk_rows", "int"), Param("move", "int")],
        preamble=_moves_preamble(n_bins, feature_major, True, gh_wide, gh_words, row_words) + snippet("row_moves.cl"),
        scatter=True,
    )


def _block_moves(n_bins: int, gh_wide: bool) -> list[Input]:
    """The inputs of a scatter of blocks from their left counts (the block and group scatters): the row order, bins
    and (g, h) words it moves (written), the bins the split reads, the split and block tables, the blocks' left counts
    and the next children's slots (written)."""
    b = bin_ctype(n_bins)
    return [Input("ridx", "int", ("*",), gather=True, writes=True), Input("bins", b, ("*",), gather=True, writes=True),
            Input("gh", "ulong" if gh_wide else "uint", ("*",), gather=True, writes=True),
            Input("split_bins", b, ("*",), gather=True), Input("split_tab", "int", ("*",), gather=True),
            Input("blk_tab", "int", ("*",), gather=True), Input("blk_left", "int", ("*",), gather=True),
            Input("slot_begin", "int", ("*",), gather=True, writes=True),
            Input("slot_count", "int", ("*",), gather=True, writes=True)]


@lru_cache(maxsize=32)
def group_scatter(n_bins: int, feature_major: bool, moved: bool, gh_wide: bool, gh_words: int, row_words: int,
                  group_rows: int) -> Description:
    """The group partition's scatter (GPUs), after :func:`group_counts`: a placing scan (:class:`mdhom.mdh.Place`)
    whose line is a block of a split step's rows (``blk``, the int pair (split, block) at ``blk_tab[blk_at + 2 blk]``,
    ``SIZE_k`` rows a block, at most ``group_rows``; a split's blocks consecutive, its last one shorter, a block past
    its split's rows empty) and whose points' atoms are whether their rows go left. A block's work-group sums the
    left rows of its split's earlier blocks and of all of them (``blk_left``) in the prologue, lists each row at its
    place in the block's stable partition (left rows first, each side in order) and moves the rows in place order:
    the left ones after the split's earlier blocks' left rows in the next region, the right ones after the split's
    left rows and the earlier blocks' right rows; neighbouring work-items write neighbouring places. The split's first
    block writes its left count (``n_left``) and next child's slot; the split rule is read once a block (the
    prologue), and each row's side from it. The output is each block's left count. The same stable partition as the
    block and per-row scatters; the rows a block reads (``split_bins``, its own positions) are in the region no block
    writes. ``move`` 0: the row order alone (a tree's last split).

    Against the hand-written kernel it replaced (H100, profiled fits, one round's launches): 0.385 against 0.342 ms
    (4M rows, loss-guided, 13 launches), 0.855 against 0.794 (10.5M rows, depth-wise, 8 launches), after its flags went
    to bytes and its two counts into one sum (before: 0.549 and 1.141); rounds within the host's spread (4M rows, fits
    alternating: depth-wise 3.94-6.51 against 4.41-6.05 ms, loss-guided 8.28-9.09 against 9.35-13.84), the same
    predictions. With the line sum's halves folded onto the lower work-items and no barrier after a work-group's last
    line (:class:`mdhom.mdh.Place`), 0.1862-0.1882 -> 0.1830-0.1832 ms kernel-alone (H100, 10^7 rows in 64 nodes);
    in a fit its root launch moves 45% / 41% of a copy's bytes a second (10.5M rows, depth-wise / loss-guided)."""
    count = f"split_tab[{len(SPLIT_FIELDS)} * blk_tab[blk_at + 2 * blk] + {SPLIT_FIELDS.index('count')}]"
    scalar = ("out = tree_block_go(split_bins, ridx, mdh_i0 + mdh_shift + (int)k, mdh_u,\n"
              "                    (__global const uchar*)split_tab);")
    prologue = """
const int mdh_s = active ? blk_tab[blk_at + 2 * blk] : 0, mdh_kb = active ? blk_tab[blk_at + 2 * blk + 1] : 0;
__global const tree_split_t* mdh_t = (__global const tree_split_t*)split_tab + mdh_s;
const int mdh_first = mdh_t->first, mdh_nb = max(1, (mdh_t->count + (int)SIZE_k - 1) / (int)SIZE_k);
const int mdh_i0 = mdh_first + mdh_kb * (int)SIZE_k, mdh_shift = mdh_t->begin - mdh_first;
/* the left rows of the split's blocks before this one, and of all of them (its blocks are consecutive) */
__global const int* mdh_counts = blk_left + (blk - mdh_kb);
long mdh_sums = 0;  /* before + nl * 2^32, both below 2^31: one sum */
for (int c = (int)mdh_lane; active && c < mdh_nb; c += MDH_LINE_WI) {
    const long v = mdh_counts[c];
    mdh_sums += ((c < mdh_kb) ? v : 0) + (v << 32);
}
mdh_sums = MDH_LINE_SUM(mdh_sums);
const int mdh_before = (int)(mdh_sums & 0xffffffffL), mdh_nl = (int)(mdh_sums >> 32);
if (active && mdh_kb == 0 && mdh_lane == 0)
    tree_split_counts(mdh_t, mdh_s, mdh_nl, n_rows, n_left, slot_begin, slot_count);
const long mdh_dst0 = tree_flip(mdh_t->begin, n_rows);
const tree_rule_t mdh_u = tree_rule_of(mdh_t, split_cols, n_rows, stride, n_feat);  /* the split, read once a block */
const long mdh_dl = mdh_dst0 + mdh_before, mdh_dr = mdh_dst0 + mdh_nl + (mdh_i0 - mdh_first - mdh_before);"""
    emit = """
tree_move_row(ridx, bins, gh, (mdh_dst < mdh_total) ? mdh_dl + mdh_dst : mdh_dr + (mdh_dst - mdh_total),
              mdh_i0 + mdh_src + mdh_shift, stride, n_feat, n_out, move);"""
    return Description(
        "tree_group_scatter", ["blk", "k"], [Concat(), Scan(SUM, inclusive=False)], "int",
        scalar=scalar,
        inputs=[*_block_moves(n_bins, gh_wide), Input("n_left", "int", ("*",), gather=True, writes=True)],
        params=[Param("split_cols", "int"), Param("n_rows", "int"), Param("stride", "int"), Param("n_feat", "int"),
                Param("n_out", "int"), Param("blk_at", "int"), Param("move", "int")],
        extents={"k": f"(long){count} - (long)blk_tab[blk_at + 2 * blk + 1] * SIZE_k"},
        preamble=_moves_preamble(n_bins, feature_major, moved, gh_wide, gh_words, row_words) + snippet("row_moves.cl"),
        place=Place(at="mdh_at = mdh_self ? mdh_excl : mdh_total + (k - mdh_excl);", emit=emit, prologue=prologue,
                    line_max=int(group_rows), local_values="uchar"),
    )


def group_scatter_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """A block a work-group, ``GROUP_WI`` work-items (fewer where the device or the block allows fewer), and
    :data:`BLOCK_GROUPS` work-groups (a launch runs those its blocks need; more blocks are taken in turn).

    Not tuned: an Optuna tune of its work-items and work-groups on the H100 (60 configurations at each of the group
    counts' four size classes, 10^6 and 10^7 rows in 64 nodes, 64 and 256 bins) found nothing faster (1.00x at each;
    0.259 / 0.216 / 0.183 ms at 64 / 128 / 256 work-items). It never tried 512 or 1024: NVIDIA's driver (580) reports a
    work-group limit (``CL_KERNEL_WORK_GROUP_SIZE``) of 256 for every kernel, a trivial one of 10 registers too, which
    was the limit then (now ptxas's registers set it: :func:`mdhom.mdh.build.work_group_limit`); this kernel needs 32
    registers a work-item and no spills. Beyond 256 (H100, 10^7 rows in 64 nodes, kernel alone): 0.1727 ms at 512 and
    0.1765 at 1024 against 0.1823 at 256, about 5%."""
    wi = pow2_at_most(min(dev.max_work_group_size, dev.max_work_item_sizes[0], int(sizes.get("k", 1))), GROUP_WI)
    return {"NUM_WG_blk": BLOCK_GROUPS, "NUM_WI_blk": 1, "NUM_WG_k": 1, "NUM_WI_k": wi}


@lru_cache(maxsize=32)
def block_stage(n_bins: int, feature_major: bool) -> Description:
    """The block partition's walk where rows are read through the row index (CPUs), the first of its two launches:
    a point is a block of a split step's rows (``blk``, the int pair (split, block) at ``blk_tab[blk_at + 2 blk]``,
    ``blk_rows`` rows a block; a split's blocks consecutive), and its scalar function walks the block's rows in order
    once, keeping each row's index entry in the block's own indices of ``stage`` (a written input, one int a compact
    index): left rows from the block's first index up, right rows from its last down. Both places are written for
    every row and the cursors select the one kept, so the walk has no branch (rows go either way at random), and
    neither write leaves the block's free middle. The output is the block's left count, which :func:`block_copy`
    reads. The split bin of the row 16 on is prefetched (``PREFETCH``).

    The split bin is gathered through the row index, a memory latency a row, so it is read once here where the
    count-then-scatter walks (:func:`group_counts`, :func:`block_scatter`) read it twice: fits alternating in one
    process (2-core Xeon, PoCL, float64, 500k rows, row index with a column copy, identical models), 32.8 -> 31.3 ms
    a depth-wise round and 46.7 -> 45.2 loss-guided. Where rows move, the scatter streams each row once in order
    while a copy from kept positions would read every row's cache lines once for each side (Intel's runtime, moved
    rows: 36.7 -> 38.8 ms a depth-wise round), so moved rows keep the two walks."""
    body = _BLOCK_OF + """
const int shift = t->begin - t->first;
const tree_rule_t u = tree_rule_of(t, split_cols, n_rows, stride, n_feat);
int nl = 0, nr = 0;
for (int i = i0; i < end; ++i) {
    tree_block_ahead(split_bins, ridx, i + shift, end + shift, u);
    const int r = ridx[i + shift];
    const int go = tree_row_go(split_bins, r, u, (__global const uchar*)split_tab);
    stage[i0 + nl] = r;
    stage[end - 1 - nr] = r;
    nl += go;
    nr += 1 - go;
}
out = nl;"""
    return Description(
        "tree_block_stage", ["blk"], [Concat()], "int",
        scalar=body,
        inputs=[Input("ridx", "int", ("*",), gather=True),
                Input("split_bins", bin_ctype(n_bins), ("*",), gather=True),
                Input("split_tab", "int", ("*",), gather=True), Input("blk_tab", "int", ("*",), gather=True),
                Input("stage", "int", ("*",), gather=True, writes=True)],
        params=[Param("split_cols", "int"), Param("n_rows", "int"), Param("stride", "int"), Param("n_feat", "int"),
                Param("blk_at", "int"), Param("blk_rows", "int")],
        preamble=_rows_preamble(n_bins, feature_major, False) + "#define TREE_PREFETCH PREFETCH\n"
        + snippet("row_moves.cl"),
        prefetch=True,
    )


@lru_cache(maxsize=1)
def block_copy() -> Description:
    """The block partition's copy where rows are read through the row index (CPUs), the second launch: a point is a
    block as in :func:`block_stage`, and its scalar function copies the row index entries the walk kept to the next
    region, the block's left rows after its split's earlier blocks' left rows (their counts ``blk_left``) and its
    right rows after the split's left rows and its earlier blocks' right rows: XGBoost's CPU partition, the same
    stable partition as the per-row scatter. The output, scattered, is each split's left count, written by its first
    block with the next child's slot (``slot_begin``, ``slot_count``, written). A block past its split's rows (the
    spare blocks of a table cut on the device) writes nothing. No bins are read (the bins count only completes the
    typedefs the shared code needs), so one build serves every fit."""
    body = _BLOCK_PLACES + """
    const int mine = blk_left[blk], dst = tree_flip(t->begin, n_rows);
    __global int* left = ridx + dst + before;
    __global int* right = ridx + dst + nl + (i0 - t->first - before);
    for (int k = 0; k < mine; ++k) left[k] = stage[i0 + k];
    for (int k = 0; k < end - i0 - mine; ++k) right[k] = stage[end - 1 - k];
}"""
    return Description(
        "tree_block_copy", ["blk"], [Concat()], "int",
        scalar=body,
        inputs=[Input("ridx", "int", ("*",), gather=True, writes=True),
                Input("stage", "int", ("*",), gather=True), Input("split_tab", "int", ("*",), gather=True),
                Input("blk_tab", "int", ("*",), gather=True), Input("blk_left", "int", ("*",), gather=True),
                Input("slot_begin", "int", ("*",), gather=True, writes=True),
                Input("slot_count", "int", ("*",), gather=True, writes=True)],
        params=[Param("n_rows", "int"), Param("blk_at", "int"), Param("blk_rows", "int")],
        preamble=_rows_preamble(DEFAULT_BINS, False, False) + snippet("row_moves.cl"),
        scatter=True,
    )


def _rows_preamble(n_bins: int, feature_major: bool, moved: bool) -> str:
    """What every kernel built on kernels/trees/row_moves.cl defines before it: the tables, the bins' reader, the
    positions' regions and whether rows move."""
    return (defines("double", n_bins, feature_major=feature_major) + bins_reader() + snippet("positions.cl")
            + f"#define TREE_MOVE_ROWS {int(moved)}\n")


def _moves_preamble(n_bins: int, feature_major: bool, moved: bool, gh_wide: bool, gh_words: int,
                    row_words: int) -> str:
    """:func:`_rows_preamble`, and for the scatters how a row moves (its bins as words or bytes, its (g, h) words)."""
    return (_rows_preamble(n_bins, feature_major, moved) + f"#define TREE_GH_WIDE {int(gh_wide)}\n"
            f"#define TREE_GH_WORDS {int(gh_words)}\n#define TREE_ROW_WORDS {int(row_words)}\n")


@lru_cache(maxsize=32)
def scatter_rows(n_bins: int, feature_major: bool, moved: bool, gh_wide: bool, gh_words: int,
                 row_words: int) -> Description:
    """The per-row partition's scatter (a layout without blocks, and every fit of sparse input: the block walks lack
    the compressed bins' reader): a point is an index of the split step's compact index space (the split nodes'
    ranges end to end, ``n`` of them at most, an upper bound where the table was made on the device), and its row
    goes to its place in a stable partition of its split's range in the next region (left rows first, each side in
    its old order) from the inclusive go-left counts ``incl`` (``tree_partition_flags``): the row order ``ridx`` and,
    where rows move, their bins and (g, h) words (written inputs, kernels/trees/row_moves.cl). The output, scattered,
    is each split's left count, written by the points below ``n_split`` with their split's next child's slot
    (written): the launch is ``max(n, n_split)`` points, and its output buffer holds one count a point. The
    destinations are a permutation of the split ranges in the next region, which no point reads. Against the
    hand-written kernel it replaced (2-core EPYC, 500k rows, moved rows, the two alternating launch by launch in
    profiled fits, medians a launch): PoCL 2.62 against 2.44-2.49 ms depth-wise and 1.72 against 1.66-1.69
    loss-guided (its shares chunked: strided ones, or a work-group of 16, were slower), Intel's runtime 5.64 against
    7.70 and 3.81 against 5.04."""
    body = """
__global const tree_split_t* mdh_tab = (__global const tree_split_t*)split_tab;
const int i = (int)pos;
out_at = -1;
if (i < n_split) {
    __global const tree_split_t* t = mdh_tab + i;
    const int count = t->count, first = t->first;
    const int nl = (count > 0) ? incl[first + count - 1] - ((first > 0) ? incl[first - 1] : 0) : 0;
    out = nl;
    out_at = i;
    tree_split_slots(t, i, nl, n_rows, slot_begin, slot_count);
}
if (i < n) {
    __global const tree_split_t* t = mdh_tab + tree_split_at(i, mdh_tab, n_split);
    if (i - t->first < t->count) {  /* past the last range: n is an upper bound (a sentinel record ends the table) */
        const int first = t->first, p = t->begin + (i - first);
        const int base = (first > 0) ? incl[first - 1] : 0;
        const int nl = incl[first + t->count - 1] - base;
        const int f = incl[i] - ((i > 0) ? incl[i - 1] : 0);
        const int left_before = incl[i] - f - base;
        const long d = tree_flip(t->begin, n_rows) + (f ? left_before : nl + (i - first - left_before));
        tree_move_row(ridx, bins, gh, d, p, stride, n_feat, n_out, move);
    }
}"""
    b = bin_ctype(n_bins)
    return Description(
        "tree_scatter_rows", ["pos"], [Concat()], "int",
        scalar=body,
        inputs=[Input("ridx", "int", ("*",), gather=True, writes=True),
                Input("bins", b, ("*",), gather=True, writes=True),
                Input("gh", "ulong" if gh_wide else "uint", ("*",), gather=True, writes=True),
                Input("split_tab", "int", ("*",), gather=True), Input("incl", "int", ("*",), gather=True),
                Input("slot_begin", "int", ("*",), gather=True, writes=True),
                Input("slot_count", "int", ("*",), gather=True, writes=True)],
        params=[Param("n", "int"), Param("n_split", "int"), Param("n_rows", "int"), Param("stride", "int"),
                Param("n_feat", "int"), Param("n_out", "int"), Param("move", "int")],
        preamble=_moves_preamble(n_bins, feature_major, moved, gh_wide, gh_words, row_words) + snippet("row_moves.cl"),
        scatter=True,
        chunked=True,
        inline_scalar=True,
    )


def block_scatter_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """A block a work-item, in work-groups of one on CPUs (a thread walks the block; PoCL hands work-groups out as
    threads come free) and of 64 elsewhere, in :data:`BLOCK_GROUPS` work-groups whatever the fit's size (a launch
    runs those its blocks fill, so one build serves every fit; past that many blocks each work-item walks a strided
    share)."""
    cfg = ones(desc, dev, sizes)
    cfg["NUM_WI_blk"] = 1 if dev.type == "cpu" else 64
    cfg["NUM_WG_blk"] = BLOCK_GROUPS
    return cfg


def group_counts_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """GPUs: a work-group per block at a time, its work-items on neighbouring indices (the row index read coalesced);
    16 work-groups per compute unit walk the blocks, two waves of the 8 a compute unit holds at once (H200, the
    tuner's 10^7 rows in 64 nodes: 116 us at 4 a compute unit, 99-101 at 16 or 32). Other devices (the block
    partition of CPUs): a block a work-group of one work-item folding it in order, :data:`BLOCK_GROUPS` work-groups
    (PoCL hands them out as threads come free; a launch runs those its blocks fill, so one build serves every fit's
    size): 2-core EPYC, 500k rows, PoCL, a launch 0.34-0.40 ms a
    level depth-wise (the hand-written walk it replaced 0.36-0.41) against 0.86 with 16 work-items a block and a
    work-group a core, 0.49 with one work-item a core."""
    cfg = ones(desc, dev, sizes)
    if dev.type == "gpu":
        cfg["NUM_WI_k"] = min(pow2_at_most(max(1, sizes["k"]), 256), dev.max_work_group_size)
        cfg["NUM_WG_blk"] = pow2_at_most(max(1, sizes["blk"]), 16 * max(1, dev.compute_units))
    else:
        cfg["NUM_WG_blk"] = BLOCK_GROUPS
    return cfg


@lru_cache(maxsize=8)
def bin_columns(n_bins: int) -> Description:
    """The bin matrix rows x features copied to features x rows, once per fit, for the partition alone.

    In row-index mode the histogram reads whole rows (rows x features), while a split reads one feature of each
    row of the nodes it splits: from rows x features that is a sector of 32 bytes for one byte, from a column
    the rows of a large node share sectors (at the root all of them)."""
    return Description(
        "tree_bin_columns", ["feat", "row"], [Concat(), Concat()], bin_ctype(n_bins),
        scalar="out = bins[(long)row * n_feat + feat];",
        inputs=[Input("bins", bin_ctype(n_bins), (1,), gather=True)],
        params=[Param("n_feat", "int")],
    )


def partition_reference(bins: np.ndarray, ridx: np.ndarray, row_node: np.ndarray, split_tab: np.ndarray,
                        n_bins: int, table_bytes: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(new ridx, new row_node, left count per split) after a stable partition of every split node's range
    (``table_bytes``: the split table's buffer as bytes, for categorical splits' left tables)."""
    from mdhom.trees import reference as ref  # the tree learner's numpy reference

    ridx, row_node = ridx.copy(), row_node.copy()
    counts = np.zeros(len(split_tab), np.int32)
    for s, t in enumerate(split_tab):
        node, f, b, d, lo, hi, begin, count = (int(t[x]) for x in SPLIT_FIELDS[:8])
        rows = ridx[begin:begin + count].copy()
        assert np.all(row_node[rows] == node)
        cats = int(t["cats"])
        table = None if cats < 0 else table_bytes[cats:cats + n_bins]
        go = ref.goes_left(bins[rows, f], b, bool(d), n_bins, table)
        ridx[begin:begin + count] = np.concatenate([rows[go], rows[~go]])
        row_node[rows] = np.where(go, lo, hi)
        counts[s] = int(go.sum())
    return ridx, row_node, counts



def flags_heuristic(desc: Description, dev, sizes) -> dict[str, int]:  # noqa: ANN001
    """16 work-groups per compute unit on GPUs, each scanning a short range (in coalesced rounds: the
    description's default SCAN_TILED=1 there), and the fixup (each count plus the work-groups' before it) in groups
    of 256 (H200, 10^7 rows in 64 nodes: fixup 0.098 -> 0.042 ms, the three kernels 0.246 -> 0.188 ms against groups
    of 64); 2 per compute unit on CPUs, a contiguous chunk per work-item."""
    cfg = desc.default_config(dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_pos"] = 256 if gpu else 64
    if gpu:
        cfg["NUM_WI_COMBINE"] = 256
    cfg["NUM_WG_pos"] = pow2_at_most(16 * max(1, dev.compute_units), 4096) if gpu else 2 * max(1, dev.compute_units)
    return cfg


def _flags_inputs(s, rng, equal: bool = False):
    """A split step of a GPU fit (row index, column copy of the bins): ``node`` nodes tiling ``pos`` rows, each a
    random set of the matrix's rows in ascending order (as the partition keeps them), split on random features and
    bins of 63 (or 255) + missing, every row of them visited (a depth-wise level: most of a tree's rows are visited at
    such depths, in ascending but scattered order)."""
    n, ns, f, b = s["pos"], s["node"], 28, int(s.get("n_bins", 64))
    bins = rng.integers(0, b, size=f * n, dtype=np.uint8)  # features x rows
    order = np.arange(n, dtype=np.int32) if ns == 1 else rng.permutation(n).astype(np.int32)
    if equal:  # nodes of n // ns rows, the last with the rest
        cuts = np.arange(1, ns, dtype=np.int64) * (n // ns)
    else:
        cuts = np.sort(rng.choice(np.arange(1, n), ns - 1, replace=False)) if ns > 1 else np.array([], np.int64)
    begin = np.concatenate([[0], cuts]).astype(np.int64)
    count = np.diff(np.concatenate([begin, [n]]))
    ridx = np.concatenate([order, np.zeros(n, np.int32)])  # regions 0 and 1 of positions; the nodes in region 0
    for b0, c in zip(begin.tolist(), count.tolist(), strict=True):
        ridx[b0:b0 + c] = np.sort(ridx[b0:b0 + c])
    tab = split_table(ns)
    tab["node"], tab["feature"], tab["bin"] = np.arange(ns), rng.integers(0, f, ns), rng.integers(0, b - 2, ns)
    tab["default_left"], tab["begin"], tab["count"] = rng.integers(0, 2, ns), begin, count
    tab["first"], tab["left"], tab["right"], tab["next_child"] = begin, 2 * np.arange(ns) + 1, 2 * np.arange(ns) + 2, -1
    return {"bins": bins, "split_tab": tab.view(np.int32).reshape(-1), "ridx": ridx, "n_split": ns, "n_rows": n,
            "n_feat": f, "n_bins": b}


def _flags_ref(a):
    from mdhom.trees import reference as ref

    tab, n, ridx = a["split_tab"].view(SPLIT_RECORD.dtype), a["n_rows"], a["ridx"]
    cols = a["bins"].reshape(-1, n)
    go = np.zeros(int(tab["count"].sum()), np.int32)
    for t in tab:
        rows = ridx[t["begin"]:t["begin"] + t["count"]]
        go[t["first"]:t["first"] + t["count"]] = ref.goes_left(cols[t["feature"], rows], t["bin"],
                                                                bool(t["default_left"]), a["n_bins"])
    return np.cumsum(go, dtype=np.int64).astype(np.int32)


# tuned in the variant GPUs launch (row index, column copy), at 64 bins and at the 256 of the default max_bin=255 (the
# missing bin's index is in the code); CPUs partition in blocks
_STEPS = (("1e6", 10**6), ("1e7", 10**7))
FLAGS = KernelSpec("tree_partition_flags", flags_heuristic, tuning=Tuning(
    lambda s: partition_flags(int(s.get("n_bins", 64)), feature_major=True, row_index=True),
    with_default_bins({f"{name}_nodes_64": {"pos": n, "node": 64, "n_bins": 64} for name, n in _STEPS},
                      [f"{name}_nodes_64" for name, _ in _STEPS], n_bins=DEFAULT_BINS),
    _flags_inputs, _flags_ref, applies=lambda dev, s: dev.type == "gpu",
    doc="go-left prefix counts of a split step's rows (row index, column copy of the bins: GPUs' layout)"))


def block_table(count: np.ndarray, blk_rows: int, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """The blocks of a split step's rows for the block and group partitions (``count`` rows per split, each cut
    into blocks of ``blk_rows``; at least one a split, so that an empty split's counts are written): per block its
    split and its index among the split's blocks (int32 pairs, into ``out`` where given: the staging array after the
    records); and how many."""
    nb = (count + (blk_rows - 1)) // blk_rows
    np.maximum(nb, 1, out=nb)
    cum = nb.cumsum()
    total = int(cum[-1]) if cum.size else 0
    pairs = np.empty((total, 2), np.int32) if out is None else out[:2 * total].reshape(total, 2)
    split = np.repeat(np.arange(count.size), nb)
    pairs[:, 0] = split
    pairs[:, 1] = np.arange(total) - (cum - nb)[split]
    return pairs.reshape(-1), total


def _group_inputs(s, rng):
    """:func:`_flags_inputs`' split step (GPUs' layout), ``split`` nodes of equal size over ``rows`` rows (``blk``,
    the blocks of them all, as :func:`_group_sizes` counts them)."""
    a = _flags_inputs({"pos": s["rows"], "node": s["split"], "n_bins": s.get("n_bins", 64)}, rng, equal=True)
    del a["n_split"]  # the flags' parameter: the blocks know their split
    tab = a["split_tab"]
    count = tab.view(SPLIT_RECORD.dtype)["count"].astype(np.int64)
    a["split_tab"] = a["blk_tab"] = np.concatenate([tab, block_table(count, s["k"])[0]])  # one upload, as the host's
    return {**a, "blk_at": tab.size}


def _group_sizes(rows: int, split: int) -> dict[str, int]:
    count = np.full(split, rows // split, np.int64)  # the nodes of _flags_inputs(equal=True)
    count[-1] += rows % split
    return {"blk": block_table(count, GROUP_ROWS)[1], "k": GROUP_ROWS, "rows": rows, "split": split}


def _group_ref(a):
    from mdhom.trees import reference as ref

    tab = a["split_tab"][:a["blk_at"]].view(SPLIT_RECORD.dtype)
    cols, ridx = a["bins"].reshape(-1, a["n_rows"]), a["ridx"]
    out = []
    for t in tab:
        go = ref.goes_left(cols[t["feature"], ridx[t["begin"]:t["begin"] + t["count"]]], t["bin"],
                           bool(t["default_left"]), a["n_bins"])
        out.append(np.add.reduceat(go, np.arange(0, go.size, GROUP_ROWS)) if go.size else np.zeros(1, np.int64))
    return np.concatenate(out).astype(np.int32)


GROUP_ROWS = 4096  # rows per block of the group partition (GPUs), a work-group of GROUP_WI a block
GROUP_WI = 256
GROUP_COUNTS = KernelSpec("tree_group_counts", group_counts_heuristic, tuning=Tuning(
    lambda s: group_counts(int(s.get("n_bins", 64)), feature_major=True, row_index=True),
    with_default_bins({f"{name}_nodes_64": {**_group_sizes(n, 64), "n_bins": 64} for name, n in _STEPS},
                      [f"{name}_nodes_64" for name, _ in _STEPS], n_bins=DEFAULT_BINS),
    _group_inputs, _group_ref, applies=lambda dev, s: dev.type == "gpu",
    doc="go-left counts per block of a split step's rows (the group partition: row index, column copy, GPUs)"))
BLOCK_SCATTER = KernelSpec("tree_block_scatter", block_scatter_heuristic)
GROUP_SCATTER = KernelSpec("tree_group_scatter", group_scatter_heuristic)
BLOCK_STAGE = KernelSpec("tree_block_stage", block_scatter_heuristic)
BLOCK_COPY = KernelSpec("tree_block_copy", block_scatter_heuristic)
SCATTER_ROWS = KernelSpec("tree_scatter_rows", elementwise())
COLUMNS = KernelSpec("tree_bin_columns", elementwise("row"))
SPECS = (FLAGS, GROUP_COUNTS, BLOCK_SCATTER, GROUP_SCATTER, BLOCK_STAGE, BLOCK_COPY, SCATTER_ROWS, COLUMNS)
