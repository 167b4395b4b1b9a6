/* The one step of row partitioning that is not an md_hom computation: a scatter to computed positions.
 * The row at position pos0 + i moves to position dest[2 i] (within [pos0, pos0 + n)) and into node
 * dest[2 i + 1]; its bins and (g, h) pairs move with it, so they stay in position order (contiguous per
 * node). Positions are a permutation of [pos0, pos0 + n), so every write goes to a distinct place: no
 * races. tree_scatter_rows writes into range-sized scratch buffers, tree_copy_back copies them home.
 * Build options: -D TREE_FEATURE_MAJOR=0|1, -D TREE_DOUBLE=0|1. */
#ifndef TREE_FEATURE_MAJOR
#define TREE_FEATURE_MAJOR 0
#endif
#if TREE_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double tree_real_t;
#else
typedef float tree_real_t;
#endif

#if TREE_FEATURE_MAJOR
#define TREE_BIN_AT(p, f, stride) ((long)(f) * (stride) + (p))
#else
#define TREE_BIN_AT(p, f, stride) ((long)(p) * n_feat + (f))
#endif

__kernel void tree_scatter_rows(__global const int* restrict ridx, __global const int* restrict dest,
                                __global const uchar* restrict bins, __global const tree_real_t* restrict gh,
                                __global int* restrict row_node, __global int* restrict tmp_ridx,
                                __global uchar* restrict tmp_bins, __global tree_real_t* restrict tmp_gh,
                                const int pos0, const int n, const int n_rows, const int n_feat, const int n_out)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int p = pos0 + i;
    const int d = dest[2 * i] - pos0;
    const int row = ridx[p];
    tmp_ridx[d] = row;
    row_node[row] = dest[2 * i + 1];
    for (int f = 0; f < n_feat; ++f) tmp_bins[TREE_BIN_AT(d, f, n)] = bins[TREE_BIN_AT(p, f, n_rows)];
    for (int k = 0; k < 2 * n_out; ++k) tmp_gh[(long)d * 2 * n_out + k] = gh[(long)p * 2 * n_out + k];
}

__kernel void tree_copy_back(__global int* restrict ridx, __global uchar* restrict bins,
                             __global tree_real_t* restrict gh, __global const int* restrict tmp_ridx,
                             __global const uchar* restrict tmp_bins, __global const tree_real_t* restrict tmp_gh,
                             const int pos0, const int n, const int n_rows, const int n_feat, const int n_out)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int p = pos0 + i;
    ridx[p] = tmp_ridx[i];
    for (int f = 0; f < n_feat; ++f) bins[TREE_BIN_AT(p, f, n_rows)] = tmp_bins[TREE_BIN_AT(i, f, n)];
    for (int k = 0; k < 2 * n_out; ++k) gh[(long)p * 2 * n_out + k] = tmp_gh[(long)i * 2 * n_out + k];
}
