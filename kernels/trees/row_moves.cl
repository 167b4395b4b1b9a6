/* What the row scatters share (the generated per-row and block scatters, mdhom.components.partition_kernels
 * scatter_rows, block_scatter and group_scatter): a row's move to its new
 * position, a split's counts, and the block walk's split rule. Built after the table typedefs, partition.cl and
 * positions.cl.
 * Positions come in three regions of n_rows each (the row order `ridx`, and with TREE_MOVE_ROWS the bins and (g, h)
 * in position order; positions.cl): a node's rows lie at `begin .. begin + count` in one region, and a split writes
 * its children to the same range of the next region (tree_flip), so nothing is copied back, neither after a split
 * nor after a tree: the parent's region is free once its rows are read, region 0 (the rows in their original order)
 * is never written here, and no other node's range overlaps the children's (ranges of live nodes tile [0, n_rows)
 * once each region is taken modulo n_rows). Node ranges in the tables are these combined positions.
 * A row moves with its bins and (g, h) pairs, so they stay in position order (contiguous per node). (g, h) lanes
 * are moved as bits, never as floating-point values: 8-byte words (double, or int64 fixed point when quantized) with
 * TREE_GH_WIDE=1, 4-byte words (float) with 0. With TREE_MOVE_ROWS=0 (row-index mode) only the row order moves:
 * bins and (g, h) stay in row order and are read through ridx.
 * Build options: -D TREE_FEATURE_MAJOR=0|1, -D TREE_GH_WIDE=0|1, -D TREE_MOVE_ROWS=0|1, -D TREE_BIN_WIDE=0|1,
 * -D TREE_ROW_WORDS=w (rows x features: a row's bins are w 4-byte words, moved as words; 0: byte by byte)
 * (tree_bin_t, partition.cl). `stride`: positions per feature column of features-major bins (all three regions:
 * 3 n_rows). */
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

/* The bins and (g, h) of the row at position s to position d (the next region), within the same buffers, with
 * TREE_MOVE_ROWS and `move`: the bins as 4-byte words where a row is contiguous and a whole number of words
 * (TREE_ROW_WORDS), else bin by bin. `move` 0: a tree's last split, whose children no histogram and no partition
 * reads again (every tree's root reads region 0), needs the row order alone (the leaves' rows). */
inline void tree_move_data(__global tree_bin_t* bins, __global tree_gh_word_t* gh, const long d, const long s,
                           const long stride, const int n_feat, const int n_out, const int move) {
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

/* The row at position s to position d: its row index, and its bins and (g, h) as tree_move_data moves them. */
inline void tree_move_row(__global int* ridx, __global tree_bin_t* bins, __global tree_gh_word_t* gh, const long d,
                          const long s, const long stride, const int n_feat, const int n_out, const int move) {
    ridx[d] = ridx[s];
    tree_move_data(bins, gh, d, s, stride, n_feat, n_out, move);
}

/* For the child a split names in next_child, its range in the next region (the next histogram's slot). */
inline void tree_split_slots(__global const tree_split_t* t, const int s, const int nl, const int n_rows,
                             __global int* slot_begin, __global int* slot_count) {
    if (t->next_child >= 0) {
        const int dst = tree_flip(t->begin, n_rows);
        slot_begin[s] = (t->next_child == 0) ? dst : dst + nl;
        slot_count[s] = (t->next_child == 0) ? nl : t->count - nl;
    }
}

/* A split's left count and its next child's slot. */
inline void tree_split_counts(__global const tree_split_t* t, const int s, const int nl, const int n_rows,
                              __global int* n_left, __global int* slot_begin, __global int* slot_count) {
    n_left[s] = nl;
    tree_split_slots(t, s, nl, n_rows, slot_begin, slot_count);
}

/* The block walks (CPUs: the generated tree_block_scatter and tree_block_stage): the split nodes' compact
 * ranges cut into blocks of at most `blk_rows` indices, a block in one split only (`blk`, from int `blk_at` on: per
 * block its split's index and the block's index among the split's; each split has at least one block, empty for an
 * empty node, so its counts and slot tables are written). The split read: bins in position order (moved rows) or
 * row order through ridx (TREE_MOVE_ROWS=0), laid out features x rows when `split_cols` (the partition's column
 * copy, row order), else as the bins are. */
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

/* The row whose split bin the walk reads at position p: p itself where rows move, else its row index entry. */
inline int tree_block_row(__global const int* ridx, const int p) {
#if TREE_MOVE_ROWS
    return p;
#else
    return ridx[p];
#endif
}

/* Whether row r (tree_block_row) goes left by rule u. */
inline int tree_row_go(__global const tree_bin_t* bins, const int r, const tree_rule_t u,
                       __global const uchar* cat_tab) {
    const tree_bin_t b = bins[u.at + (long)r * u.step];
    if (b == TREE_BINS - 1) return u.default_left;
    return (u.cats >= 0) ? (cat_tab[u.cats + b] != 0) : ((int)b <= u.bin);
}

inline int tree_block_go(__global const tree_bin_t* bins, __global const int* ridx, const int p,
                         const tree_rule_t u, __global const uchar* cat_tab) {
    return tree_row_go(bins, tree_block_row(ridx, p), u, cat_tab);
}

/* TREE_PREFETCH (the generated tree_block_stage's PREFETCH: CPUs, and checkers, where MDH_PREFETCH reads the byte),
 * rows read through the row index: a block's walk asks for the split bin of the row MDH_PREFETCH_AHEAD positions on,
 * as the generator's PREFETCH does for gathered rows: a CPU otherwise waits a memory latency per row of a wide
 * matrix. 0 where undefined (the block scatter, whose rows move and stream in order; the copy; the group scatter). */
#ifndef TREE_PREFETCH
#define TREE_PREFETCH 0
#endif
inline void tree_block_ahead(__global const tree_bin_t* bins, __global const int* ridx, const int p, const int end_p,
                             const tree_rule_t u) {
#if TREE_PREFETCH && !TREE_MOVE_ROWS
    if (p + MDH_PREFETCH_AHEAD < end_p) MDH_PREFETCH(bins + u.at + (long)ridx[p + MDH_PREFETCH_AHEAD] * u.step);
#endif
}

inline int tree_block_end(__global const tree_split_t* t, const int i0, const int blk_rows) {
    return min(i0 + blk_rows, t->first + t->count);
}

