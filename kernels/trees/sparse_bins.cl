/* Bins of sparse input kept sparse (mdhom/learn/sparse_bins.py), appended after partition.cl where a fit's bins are
 * compressed rows, in row order: int row_ptr[n_rows + 1], int feature[nnz] (ascending within a row), then
 * tree_bin_t bin[nnz], one buffer. A cell not stored is the missing bin (TREE_BINS - 1), so every kernel reads the
 * values of the dense matrix. Kernels call tree_bin_of(bins, row, feat, n_rows, n_feat) either way: the macro
 * below sends them here (the dense reader above stays, unused), so dense builds keep their sources unchanged. */

inline tree_bin_t tree_bin_of_sparse(__global const tree_bin_t* bins, const long p, const long feat,
                                     const long n_rows, const long n_feat) {
    __global const int* ptr = (__global const int*)bins;
    __global const int* fi = ptr + n_rows + 1;
    const int end = ptr[p + 1];
    int lo = ptr[p], hi = end;
    while (lo < hi) {  /* the row's stored features: a binary search (rows of sparse data hold few) */
        const int mid = (lo + hi) >> 1;
        if (fi[mid] < feat) lo = mid + 1; else hi = mid;
    }
    return (lo < end && fi[lo] == feat) ? ((__global const tree_bin_t*)(fi + ptr[n_rows]))[lo]
                                        : (tree_bin_t)(TREE_BINS - 1);
}

#define tree_bin_of tree_bin_of_sparse
