/* Row partitioning shared by tree_partition_flags, tree_partition_dest and the scatter.
 * One upload per split step: the split table, n_split records tree_split_t (declared once, on the host, in
 * mdhom/components/tables.py, and prepended to every tree kernel's source).
 * The compact index space lays the split nodes' ranges end to end in table order (`first` is the running sum of
 * `count`), so a partition visits only the rows of the nodes it splits, however far apart their ranges lie
 * (loss-guided batches split leaves from all over the position order).
 * Expects TREE_BINS, TREE_FEATURE_MAJOR and TREE_BIN_WIDE: bins (in position order) laid out features x positions
 * when 1, positions x features when 0; tree_bin_t cells. */
#ifndef TREE_FEATURE_MAJOR
#define TREE_FEATURE_MAJOR 0
#endif
/* TREE_BIN_WIDE=1: 16-bit bins (more than 256 bins: max_bin above 255), else one byte a cell */
#ifndef TREE_BIN_WIDE
#define TREE_BIN_WIDE 0
#endif
#if TREE_BIN_WIDE
typedef ushort tree_bin_t;
#else
typedef uchar tree_bin_t;
#endif

/* The split whose compact range holds index v: the last row of the table that starts at or before v
 * (a binary search; rows of empty splits start where the next one does and are never the answer). */
inline int tree_split_at(const int v, __global const tree_split_t* split_tab, const int n_split) {
    int lo = 0, hi = n_split - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (split_tab[mid].first <= v) lo = mid; else hi = mid - 1;
    }
    return lo;
}

inline tree_bin_t tree_bin_of(__global const tree_bin_t* bins, const long p, const long feat, const long n_rows,
                              const long n_feat) {
#if TREE_FEATURE_MAJOR
    return bins[feat * n_rows + p];
#else
    return bins[p * n_feat + feat];
#endif
}

/* The split rule: bin <= split bin, or for a categorical split (cats >= 0) its left table's byte for the bin,
 * at byte offset `cats` of the table buffer `base`; the missing bin (TREE_BINS - 1) follows the default
 * direction. */
inline int tree_goes_left(const tree_bin_t b, __global const tree_split_t* split, __global const uchar* base) {
    if (b == TREE_BINS - 1) return split->default_left != 0;
    if (split->cats >= 0) return base[split->cats + b] != 0;
    return (int)b <= split->bin;
}
