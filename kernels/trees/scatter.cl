/* The one row scatter that is not an md_hom computation: the GPUs' group scatter (the per-row and the CPUs' block
 * partitions are generated: mdhom.components.partition_kernels.scatter_rows, group_counts and block_scatter). Built
 * after the table typedefs, partition.cl, positions.cl and row_moves.cl (a row's move, a split's counts, the split
 * rule of a block's rows). Why not generated: it partitions a block in local memory with all of a work-group's
 * work-items (their runs' left counts scanned between barriers, then coalesced writes), which a scalar function of
 * one point cannot express; a point's walk writes its rows a run apart from its neighbours' (H200: the group scatter
 * at 20% of a copy when each work-item wrote its own run's rows, as a walk of a block does). */

/* Group mode (GPUs): the same blocks, a work-group of TREE_GROUP_WI work-items each instead of one work-item, so
 * that a block of thousands of rows keeps a GPU's lanes busy; blocks of TREE_GROUP_ROWS rows (a build option, as
 * the local arrays' size). A block's left count comes from the generated reduction tree_group_counts
 * (mdhom/components/partition_kernels.py); this scatter then needs no prefix count per row (the per-row partition
 * writes and rereads one, in three scan kernels, and searches the split table per row): per split step two launches
 * instead of four.
 * The block is partitioned in local memory first: its rows' go-left flags in
 * coalesced rounds, then each work-item counts a contiguous run of them, the runs' counts are scanned, and each run
 * lists its rows' source positions in the block's stable order (left rows first, each side in order); then the
 * work-items write the listed rows out in coalesced rounds, the left ones after the left rows of the split's
 * earlier blocks, the right ones likewise. The same stable partition as the per-row and block scatters; writes
 * of neighbouring work-items land side by side instead of a run apart (H200: the scatter at 20% of a copy when
 * each work-item wrote its run's rows itself).
 * Work-group g is block k of split s, the int pair (s, k) at blk_at + 2g of blk_tab (as for the block partition:
 * the split table's buffer for the host's tables, a buffer of its own for a table made on the device);
 * blk_left holds the blocks' counts in that order. Each work-group adds up its split's blocks'
 * counts (a split of 10^7 rows: 2442 blocks, each reading 2442 counts, 24 MB from L2 in all). */
#ifndef TREE_GROUP_WI
#define TREE_GROUP_WI 1
#endif
#ifndef TREE_GROUP_ROWS
#define TREE_GROUP_ROWS 1
#endif

/* The sums over the work-group of each work-item's a and b (a tree in local memory; TREE_GROUP_WI is a power
 * of two): one reduction where two scans had run for the totals alone. */
inline int2 tree_group_sum2(__local int* lm, const int a, const int b) {
    const int lid = get_local_id(0);
    lm[2 * lid] = a;
    lm[2 * lid + 1] = b;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = TREE_GROUP_WI / 2; off > 0; off >>= 1) {
        if (lid < off) {
            lm[2 * lid] += lm[2 * (lid + off)];
            lm[2 * lid + 1] += lm[2 * (lid + off) + 1];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int2 total = (int2)(lm[0], lm[1]);
    barrier(CLK_LOCAL_MEM_FENCE);  /* the next scan rewrites lm */
    return total;
}

/* The sum over the work-group of each work-item's v, and (in *excl) of the work-items' before it: a scan in local
 * memory (Hillis-Steele through private copies). */
inline int tree_group_scan(__local int* lm, const int v, int* excl) {
    const int lid = get_local_id(0);
    lm[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < TREE_GROUP_WI; off <<= 1) {
        const int w = (lid >= off) ? lm[lid - off] + lm[lid] : lm[lid];
        barrier(CLK_LOCAL_MEM_FENCE);
        lm[lid] = w;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *excl = lm[lid] - v;
    const int total = lm[TREE_GROUP_WI - 1];
    barrier(CLK_LOCAL_MEM_FENCE);  /* the next scan rewrites lm */
    return total;
}

__kernel __attribute__((reqd_work_group_size(TREE_GROUP_WI, 1, 1)))
void tree_group_scatter(__global int* ridx, __global tree_bin_t* bins, __global tree_gh_word_t* gh,
                        __global const tree_bin_t* split_bins, const int split_cols,
                        const int n_rows, const int stride, const int n_feat, const int n_out,
                        __global const tree_split_t* restrict split_tab, __global const int* restrict blk_tab,
                        const int blk_at, __global const int* restrict blk_left,
                        __global int* restrict n_left, __global int* restrict slot_begin,
                        __global int* restrict slot_count, const int move)
{
    __local int lm[2 * TREE_GROUP_WI];
    __local uchar go[TREE_GROUP_ROWS];
    __local int src[TREE_GROUP_ROWS];
    __global const int* blk = blk_tab + blk_at;
    const int g = get_group_id(0), lid = get_local_id(0), s = blk[2 * g], k = blk[2 * g + 1];
    __global const tree_split_t* t = split_tab + s;
    const int first = t->first, count = t->count, nb = max(1, (count + TREE_GROUP_ROWS - 1) / TREE_GROUP_ROWS);
    const int i0 = first + k * TREE_GROUP_ROWS, len = min(TREE_GROUP_ROWS, count - k * TREE_GROUP_ROWS);
    const int shift = t->begin - first;
    /* the left rows of the split's blocks before this one, and of all of them (its blocks are consecutive) */
    __global const int* counts = blk_left + (g - k);
    int before = 0, nl = 0;
    for (int c = lid; c < nb; c += TREE_GROUP_WI) {
        const int v = counts[c];
        nl += v;
        before += (c < k) ? v : 0;
    }
    const int2 sums = tree_group_sum2(lm, before, nl);
    before = sums.x;
    nl = sums.y;
    if (k == 0 && lid == 0) tree_split_counts(t, s, nl, n_rows, n_left, slot_begin, slot_count);
    const tree_rule_t u = tree_rule_of(t, split_cols, n_rows, stride, n_feat);
    for (int j = lid; j < len; j += TREE_GROUP_WI)
        go[j] = (uchar)tree_block_go(split_bins, ridx, i0 + j + shift, u, (__global const uchar*)split_tab);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* this work-item's run of the block, its left rows counted, the runs' counts scanned */
    const int run = (TREE_GROUP_ROWS + TREE_GROUP_WI - 1) / TREE_GROUP_WI;
    const int c0 = min(lid * run, len), c1 = min(c0 + run, len);
    int mine = 0;
    for (int j = c0; j < c1; ++j) mine += go[j];
    int left_at;
    const int blk_nl = tree_group_scan(lm, mine, &left_at);
    int right_at = blk_nl + (c0 - left_at);
    for (int j = c0; j < c1; ++j) src[go[j] ? left_at++ : right_at++] = i0 + j + shift;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* the block's left rows after the split's earlier blocks' left rows, its right rows after their right rows */
    const int dst = tree_flip(t->begin, n_rows);
    const int dl = dst + before, dr = dst + nl + (i0 - first - before) - blk_nl;
    for (int j = lid; j < len; j += TREE_GROUP_WI)
        tree_move_row(ridx, bins, gh, (j < blk_nl ? dl : dr) + j, src[j], stride, n_feat, n_out, move);
}
