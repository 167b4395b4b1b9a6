/* md_hom skeleton for a placing scan along "${scan_dim}" (mdhom.mdh.Place), the other dimensions concatenated: each
 * line (a point of the concatenated dimensions) is taken by one work-group. Its work-items compute the line's atoms
 * side by side into local memory, fold them in contiguous runs whose totals they scan (Hillis-Steele through
 * private copies), rescan their runs to give each point its exclusive prefix, list each point at the place the
 * description's `at` gives it, and run the description's `emit` for the places side by side, so that neighbouring
 * work-items write neighbouring places. The output holds each line's total.
 */
<%namespace name="tile" file="mdh_decompose.cl.mako"/>
<% pl = desc.place; ext = dict(desc.extents).get(scan_dim); vt = pl.local_values or "atom_t" %>\
#define MDH_LINE_MAX ${pl.line_max}
#define MDH_LINE_WI R_LANES

/* The sum over the line's work-items of each one's x (every one of them calls it: it synchronises them); a long, so
 * that two non-negative ints below 2^31 summed as one (a + b * 2^32) take one sum. */
inline long mdh_line_sum(__local long* mdh_ls, const long x) {
    const int lid = get_local_id(0);
    mdh_ls[lid] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* halves folded onto the first (the lower work-items busy, no bank strides), from the power of two at or above */
    int mdh_p2 = 1;
    while (mdh_p2 < R_LANES) mdh_p2 <<= 1;
    for (int off = mdh_p2 >> 1; off > 0; off >>= 1) {
        if (lid < off && lid + off < R_LANES) mdh_ls[lid] += mdh_ls[lid + off];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const long total = mdh_ls[0];
    barrier(CLK_LOCAL_MEM_FENCE);  /* the next sum rewrites mdh_ls */
    return total;
}
#define MDH_LINE_SUM(x) mdh_line_sum(mdh_ls, (x))

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void ${name}_main(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
    __local atom_t mdh_lm[WG_SIZE];
    __local ${vt} mdh_vals[MDH_LINE_MAX];
    __local int mdh_place[MDH_LINE_MAX];
    __local long mdh_ls[WG_SIZE];
${tile.decompose()}
    const idx_t mdh_lane = r_lane;
    bool mdh_again = false;  /* a line came before: its local arrays are read until every work-item is past it */
% for d in concat_dims:
    const idx_t stride_${d} = (idx_t)NUM_WG_${d};
    const idx_t iters_${d} = (SIZE_${d} + stride_${d} - 1) / stride_${d};
    for (idx_t k_${d} = 0; k_${d} < iters_${d}; ++k_${d}) {
    const idx_t ${d} = wg_${d} + k_${d} * stride_${d};
% endfor
    const bool active = ${" && ".join(f"{d} < SIZE_{d}" for d in concat_dims) or "true"};
    if (mdh_again) barrier(CLK_LOCAL_MEM_FENCE);  /* (the same lines for the whole work-group: no divergence) */
    mdh_again = true;
    {
${pl.prologue}
    /* the line's length: its extent, within the local arrays */
% if ext:
    const idx_t mdh_len = active ? max((idx_t)0, min(min(SIZE_${scan_dim}, (idx_t)(${ext})), (idx_t)MDH_LINE_MAX)) : 0;
% else:
    const idx_t mdh_len = active ? min(SIZE_${scan_dim}, (idx_t)MDH_LINE_MAX) : 0;
% endif
    /* the line's atoms, neighbouring work-items on neighbouring points: the scalar function in the line's scope (it
     * may read what the prologue declares) */
    for (idx_t ${scan_dim} = r_lane; ${scan_dim} < mdh_len; ${scan_dim} += R_LANES) {
        atom_t out = mdh_neutral();
        {
${desc.scalar}
        }
        mdh_vals[${scan_dim}] = (${vt})out;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* each work-item's contiguous run, its total scanned over the line's work-items */
    const idx_t chunk = (mdh_len + R_LANES - 1) / R_LANES;
    const idx_t c0 = min(r_lane * chunk, mdh_len), c1 = min(c0 + chunk, mdh_len);
    atom_t run = mdh_neutral();
    for (idx_t c = c0; c < c1; ++c) run = mdh_combine(run, (atom_t)mdh_vals[c]);
    mdh_lm[lid] = run;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < R_LANES; off <<= 1) {
        atom_t w = mdh_lm[lid];
        if (r_lane >= off) w = mdh_combine(mdh_lm[lid - off], w);
        barrier(CLK_LOCAL_MEM_FENCE);
        mdh_lm[lid] = w;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const atom_t mdh_total = mdh_lm[R_LANES - 1];
    atom_t mdh_excl = (r_lane == 0) ? mdh_neutral() : mdh_lm[lid - 1];
    /* each point listed at its place */
    for (idx_t ${scan_dim} = c0; ${scan_dim} < c1; ++${scan_dim}) {
        const atom_t mdh_self = (atom_t)mdh_vals[${scan_dim}];
        idx_t mdh_at = ${scan_dim};
        {
${pl.at}
        }
        mdh_place[mdh_at] = (int)${scan_dim};
        mdh_excl = mdh_combine(mdh_excl, mdh_self);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* the places in order, neighbouring work-items on neighbouring places */
    for (idx_t mdh_dst = r_lane; mdh_dst < mdh_len; mdh_dst += R_LANES) {
        const idx_t mdh_src = mdh_place[mdh_dst];
${pl.emit}
    }
    if (active && r_lane == 0) mdh_out[${concat_index}] = mdh_total;
    }
% for d in concat_dims:
    }
% endfor
}
