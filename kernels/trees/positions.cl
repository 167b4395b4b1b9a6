/* Where a split's children go (mdhom.components.partition): positions come in three regions of n_rows each. Region 0
 * holds the rows in their original order (the row order `ridx` = 0, 1, ..., and where rows move, their bins and the
 * round's (g, h)), written when the data is set up and by the round's gradients, never by a partition: every tree's
 * root reads it, so no tree copies its rows back. A split of a node in region 0 or 2 writes its children to the same
 * range of region 1, one in region 1 to region 2: a node at depth d >= 1 sits in region 1 + (d + 1) % 2, and the
 * parent's region is free once its rows are read. mdhom.components.partition_kernels.flip_positions is this in
 * numpy. */
inline int tree_flip(const int b, const int n_rows) {
    return b < 2 * n_rows ? b + n_rows : b - n_rows;
}
