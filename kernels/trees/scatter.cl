/* The one step of row partitioning that is not an md_hom computation: a scatter to computed positions.
 * Row ridx[pos0 + i] moves to position dest[2 i] (within [pos0, pos0 + n)) and into node dest[2 i + 1].
 * Positions are a permutation of [pos0, pos0 + n), so every write goes to a distinct place: no races. */
__kernel void tree_scatter_rows(__global const int* restrict ridx, __global const int* restrict dest,
                                __global int* restrict ridx_out, __global int* restrict row_node,
                                const int pos0, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int row = ridx[pos0 + i];
    ridx_out[dest[2 * i] - pos0] = row;
    row_node[row] = dest[2 * i + 1];
}
