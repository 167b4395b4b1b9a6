/* Row partitioning shared by tree_partition_flags, tree_partition_dest and the scatter.
 * One upload per split step holds the split table, n_split rows of TREE_SPLIT_FIELDS ints per split node
 *   node id, feature, bin, default_left, left child id, right child id, first position, row count,
 *   which child's range the next histogram reads (0 left, 1 right, -1 neither),
 * followed by `node_slot`: n_table ints, the row of the split table for a node id (-1: not split now).
 * Expects TREE_BINS and TREE_FEATURE_MAJOR: bins (in position order) laid out features x positions when 1,
 * positions x features when 0. */
#ifndef TREE_SPLIT_FIELDS
#define TREE_SPLIT_FIELDS 9
#endif
#ifndef TREE_FEATURE_MAJOR
#define TREE_FEATURE_MAJOR 0
#endif

inline int tree_slot_of(const int node, __global const int* split_tab, const int n_split, const int n_table) {
    return (node >= 0 && node < n_table) ? split_tab[TREE_SPLIT_FIELDS * n_split + node] : -1;
}

inline uchar tree_bin_of(__global const uchar* bins, const long p, const long feat, const long n_rows,
                         const long n_feat) {
#if TREE_FEATURE_MAJOR
    return bins[feat * n_rows + p];
#else
    return bins[p * n_feat + feat];
#endif
}

/* The split rule: bin <= split bin, and the missing bin (TREE_BINS - 1) follows the default direction. */
inline int tree_goes_left(const uchar b, __global const int* split) {
    return (b == TREE_BINS - 1) ? (split[3] != 0) : ((int)b <= split[2]);
}
