/* The one step of row partitioning that is not an md_hom computation: a scatter to computed positions.
 * Positions come in three regions of n_rows each (the row order `ridx`, and with TREE_MOVE_ROWS the bins and (g, h)
 * in position order; positions.cl): a node's rows lie at `begin .. begin + count` in one region, and a split writes
 * its children to the same range of the next region (tree_flip), so nothing is copied back, neither after a split
 * nor after a tree: the parent's region is free once its rows are read, region 0 (the rows in their original order)
 * is never written here, and no other node's range overlaps the children's (ranges of live nodes tile [0, n_rows)
 * once each region is taken modulo n_rows). Node ranges in the tables are these combined positions.
 * Indices are compact (see partition.cl): index i of split s is position begin_s + i - first_s. The row at
 * index i moves to the index of a stable partition of its split's range (left rows first, each side in its old
 * order), computed here from the inclusive go-left counts `incl` (tree_partition_flags); its node is written
 * once per tree, by tree_leaf_rows, from the ranges, not here (a scattered write per row and step). Its bins
 * and (g, h) pairs move with it, so they stay in position order (contiguous per node). Destinations are a
 * permutation of the split ranges in the next region, so every write goes to a distinct place read by no one: no
 * races.
 * Why not generated: one launch writes the row order, the moved bins and (g, h), the left counts and the next
 * histogram's slot tables; md_hom descriptions have one output each, and a launch per output is host time
 * per split step on GPUs (~20-30 us each on the H100), where a loss-guided round is mostly host time.
 * Fused into the scatter (work-items i < n_split): the rows going left per split (`n_left`, read back with
 * the next split search) and, for the child each split names in `next_child` (see
 * partition.cl), its first position and row count in `slot_begin`/`slot_count` at the split's index: the
 * next histogram's row ranges, prepared on the device so the host need not know them yet.
 * (g, h) lanes are moved as bits, never as floating-point values: 8-byte words (double, or int64 fixed
 * point when quantized) with TREE_GH_WIDE=1, 4-byte words (float) with 0.
 * With TREE_MOVE_ROWS=0 (row-index mode) only the row order moves: bins and (g, h) stay in row order and are read
 * through ridx.
 * Build options: -D TREE_FEATURE_MAJOR=0|1, -D TREE_GH_WIDE=0|1, -D TREE_MOVE_ROWS=0|1, -D TREE_BIN_WIDE=0|1,
 * -D TREE_ROW_WORDS=w (rows x features: a row's bins are w 4-byte words, moved as words; 0: byte by byte)
 * (tree_bin_t, partition.cl); built after the table typedefs, partition.cl and positions.cl. `stride`: positions per
 * feature column of features-major bins (all three regions: 3 n_rows). */
#ifndef TREE_MOVE_ROWS
#define TREE_MOVE_ROWS 1
#endif
#ifndef TREE_FEATURE_MAJOR
#define TREE_FEATURE_MAJOR 0
#endif
#ifndef TREE_ROW_WORDS
#define TREE_ROW_WORDS 0
#endif
/* (g, h) words of a row: 2 per output (the host passes it; the loop that moves them then has a constant count) */
#ifndef TREE_GH_WORDS
#define TREE_GH_WORDS (2 * n_out)
#endif
#if TREE_GH_WIDE
typedef ulong tree_gh_word_t;
#else
typedef uint tree_gh_word_t;
#endif

#if TREE_FEATURE_MAJOR
#define TREE_BIN_AT(p, f, stride) ((long)(f) * (stride) + (p))
#else
#define TREE_BIN_AT(p, f, stride) ((long)(p) * n_feat + (f))
#endif

/* The row at position s to position d (the next region), within the same buffers: its row index, and with
 * TREE_MOVE_ROWS and `move` its bins (4-byte words where a row is contiguous and a whole number of words,
 * TREE_ROW_WORDS, else bin by bin) and (g, h). `move` 0: a tree's last split, whose children no histogram and no
 * partition reads again (every tree's root reads region 0), needs the row order alone (the leaves' rows). */
inline void tree_move_row(__global int* ridx, __global tree_bin_t* bins, __global tree_gh_word_t* gh, const long d,
                          const long s, const long stride, const int n_feat, const int n_out, const int move) {
    ridx[d] = ridx[s];
#if TREE_MOVE_ROWS
    if (!move) return;
#if !TREE_FEATURE_MAJOR && TREE_ROW_WORDS
    __global uint* w = (__global uint*)bins;
    for (int k = 0; k < TREE_ROW_WORDS; ++k) w[d * TREE_ROW_WORDS + k] = w[s * TREE_ROW_WORDS + k];
#else
    for (int f = 0; f < n_feat; ++f) bins[TREE_BIN_AT(d, f, stride)] = bins[TREE_BIN_AT(s, f, stride)];
#endif
    for (int k = 0; k < TREE_GH_WORDS; ++k) gh[d * TREE_GH_WORDS + k] = gh[s * TREE_GH_WORDS + k];
#endif
}

/* A split's left count and, for its next_child, the child's range in the next region (the next histogram's slot). */
inline void tree_split_counts(__global const tree_split_t* t, const int s, const int nl, const int n_rows,
                              __global int* n_left, __global int* slot_begin, __global int* slot_count) {
    n_left[s] = nl;
    if (t->next_child >= 0) {
        const int dst = tree_flip(t->begin, n_rows);
        slot_begin[s] = (t->next_child == 0) ? dst : dst + nl;
        slot_count[s] = (t->next_child == 0) ? nl : t->count - nl;
    }
}

__kernel void tree_scatter_rows(__global int* ridx, __global tree_bin_t* bins, __global tree_gh_word_t* gh,
                                const int n, const int n_rows, const int stride, const int n_feat, const int n_out,
                                __global const tree_split_t* restrict split_tab, __global const int* restrict incl,
                                const int n_split, __global int* restrict n_left, __global int* restrict slot_begin,
                                __global int* restrict slot_count, const int move)
{
    const int i = get_global_id(0);
    if (i < n_split) {
        __global const tree_split_t* t = split_tab + i;
        const int count = t->count, first = t->first;
        const int nl = (count > 0) ? incl[first + count - 1] - ((first > 0) ? incl[first - 1] : 0) : 0;
        tree_split_counts(t, i, nl, n_rows, n_left, slot_begin, slot_count);
    }
    if (i >= n) return;
    __global const tree_split_t* t = split_tab + tree_split_at(i, split_tab, n_split);
    /* past the last range: n is an upper bound (a sentinel record ends the table) */
    if (i - t->first >= t->count) return;
    const int first = t->first, p = t->begin + (i - first);
    /* the stable partition's destination: left rows first, each side in its old order */
    const int base = (first > 0) ? incl[first - 1] : 0;
    const int nl = incl[first + t->count - 1] - base;
    const int f = incl[i] - ((i > 0) ? incl[i - 1] : 0);
    const int left_before = incl[i] - f - base;
    const int d = f ? left_before : nl + (i - first - left_before);
    tree_move_row(ridx, bins, gh, tree_flip(t->begin, n_rows) + d, p, stride, n_feat, n_out, move);
}

/* Block mode (CPUs): the split nodes' compact ranges cut into blocks of at most `blk_rows` indices, a block in one
 * split only (`blk`, from int `blk_at` on: per block its split's index and the block's index among the split's; each
 * split has at least one block, empty for an empty node, so its counts and slot tables are written). The block table
 * follows the split table in its buffer (one upload per split step), so `blk` is that buffer. A block is one work-item
 * that walks its indices in order: tree_block_counts counts the rows going left, tree_block_scatter adds the counts
 * of its split's earlier blocks (a split's blocks are consecutive) and writes its rows to the left and right
 * destinations in order:
 * the same stable partition as tree_scatter_rows, with no per-row prefix counts and no per-row search of the split
 * table (XGBoost's CPU partition: per-thread blocks, then their counts).
 * The split read: bins in position order (moved rows) or row order through ridx (TREE_MOVE_ROWS=0), laid out
 * features x rows when `split_cols` (the partition's column copy, row order), else as the bins are. */
/* A split's rule and the address step of its feature's bins, read once per block into private memory: the loops
 * below write through pointers the compiler cannot tell apart from the table's, and would read them again per row.
 * With the (g, h) word count a constant (TREE_GH_WORDS), PoCL, 500k Higgs rows, 255 leaves, 2 cores: 1.06x a round
 * (alternating fits in one process, old and new partition code). Passed by value: Oclgrind cannot run what LLVM
 * makes of a pointer to it. */
typedef struct {
    long at, step;     /* the split feature's bin of position p: split_bins[at + r * step], r = p or ridx[p] */
    int bin, cats, default_left;
} tree_rule_t;

inline tree_rule_t tree_rule_of(__global const tree_split_t* t, const int split_cols, const int n_rows,
                                const int stride, const int n_feat) {
    tree_rule_t u;
    u.bin = t->bin;
    u.cats = t->cats;
    u.default_left = t->default_left != 0;
#if TREE_FEATURE_MAJOR
    u.at = (long)t->feature * (split_cols ? n_rows : stride);
    u.step = 1;
#else
    u.at = split_cols ? (long)t->feature * n_rows : (long)t->feature;
    u.step = split_cols ? 1 : n_feat;
#endif
    return u;
}

inline int tree_block_go(__global const tree_bin_t* bins, __global const int* ridx, const int p,
                         const tree_rule_t u, __global const uchar* cat_tab) {
#if TREE_MOVE_ROWS
    const long r = p;
#else
    const long r = ridx[p];
#endif
    const tree_bin_t b = bins[u.at + r * u.step];
    if (b == TREE_BINS - 1) return u.default_left;
    return (u.cats >= 0) ? (cat_tab[u.cats + b] != 0) : ((int)b <= u.bin);
}

/* TREE_PREFETCH (CPUs, rows read through the row index): a block's walk asks for the split bin of the row 16
 * positions on, as the generator's PREFETCH does for gathered rows (mdhom.mdh.Description's prefetch): a CPU otherwise
 * waits a memory latency per row of a wide matrix. 2 on checkers: a read of the byte, which Oclgrind's bounds check
 * covers (it has no prefetch). */
#ifndef TREE_PREFETCH
#define TREE_PREFETCH 0
#endif
#define TREE_PREFETCH_AHEAD 16
inline void tree_block_ahead(__global const tree_bin_t* bins, __global const int* ridx, const int p, const int end_p,
                             const tree_rule_t u) {
#if TREE_PREFETCH && !TREE_MOVE_ROWS
    if (p + TREE_PREFETCH_AHEAD < end_p) {
        __global const tree_bin_t* at = bins + u.at + (long)ridx[p + TREE_PREFETCH_AHEAD] * u.step;
#if TREE_PREFETCH == 2
        (void)*(volatile __global const tree_bin_t*)at;
#else
        __builtin_prefetch(at);
#endif
    }
#endif
}

inline int tree_block_end(__global const tree_split_t* t, const int i0, const int blk_rows) {
    return min(i0 + blk_rows, t->first + t->count);
}

__kernel void tree_block_counts(__global const tree_bin_t* restrict split_bins, __global const int* restrict ridx,
                                __global const tree_split_t* restrict split_tab, __global const int* restrict blk,
                                const int blk_at, const int n_blk, const int blk_rows, const int split_cols,
                                const int n_rows, const int stride, const int n_feat, __global int* restrict blk_left)
{
    const int b = get_global_id(0);
    if (b >= n_blk) return;
    blk += blk_at;
    __global const tree_split_t* t = split_tab + blk[2 * b];
    const int i0 = t->first + blk[2 * b + 1] * blk_rows, end = tree_block_end(t, i0, blk_rows);
    const int shift = t->begin - t->first;
    const tree_rule_t u = tree_rule_of(t, split_cols, n_rows, stride, n_feat);
    int nl = 0;
    for (int i = i0; i < end; ++i) {
        tree_block_ahead(split_bins, ridx, i + shift, end + shift, u);
        nl += tree_block_go(split_bins, ridx, i + shift, u, (__global const uchar*)split_tab);
    }
    blk_left[b] = nl;
}

__kernel void tree_block_scatter(__global int* ridx, __global tree_bin_t* bins, __global tree_gh_word_t* gh,
                                 __global const tree_bin_t* split_bins, const int split_cols,
                                 const int n_rows, const int stride, const int n_feat, const int n_out,
                                 __global const tree_split_t* restrict split_tab, __global const int* restrict blk,
                                 const int blk_at, const int n_blk, const int blk_rows,
                                 __global const int* restrict blk_left, __global int* restrict n_left,
                                 __global int* restrict slot_begin, __global int* restrict slot_count, const int move)
{
    const int b = get_global_id(0);
    if (b >= n_blk) return;
    blk += blk_at;
    const int s = blk[2 * b];
    __global const tree_split_t* t = split_tab + s;
    const int i0 = t->first + blk[2 * b + 1] * blk_rows, end = tree_block_end(t, i0, blk_rows);
    /* a block past its split's rows (the spare blocks of a table cut on the device, all of its sentinel) moves
     * nothing and writes no count: it need not walk its split's other blocks either */
    if (i0 != t->first && i0 >= end) return;
    const int shift = t->begin - t->first;
    int before = 0, nl = 0;
    for (int c = b - 1; c >= 0 && blk[2 * c] == s; --c) before += blk_left[c];
    for (int c = b; c < n_blk && blk[2 * c] == s; ++c) nl += blk_left[c];
    nl += before;
    if (i0 == t->first) tree_split_counts(t, s, nl, n_rows, n_left, slot_begin, slot_count);
    const int dst = tree_flip(t->begin, n_rows);
    int dl = dst + before, dr = dst + nl + (i0 - t->first - before);
    const tree_rule_t u = tree_rule_of(t, split_cols, n_rows, stride, n_feat);
    for (int i = i0; i < end; ++i) {
        const int p = i + shift;
        tree_block_ahead(split_bins, ridx, p, end + shift, u);
        const int d = tree_block_go(split_bins, ridx, p, u, (__global const uchar*)split_tab) ? dl++ : dr++;
        tree_move_row(ridx, bins, gh, d, p, stride, n_feat, n_out, move);
    }
}

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
