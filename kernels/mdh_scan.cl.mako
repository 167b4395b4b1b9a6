/* md_hom skeleton for a prefix scan along "${scan_dim}" (${"inclusive" if inclusive else "exclusive"}),
 * with the other dimensions concatenated.
 *
 * Kernel 1 (${name}_main): every work-item owns a contiguous chunk of the scanned dimension. It folds its
 * chunk, the work-items of a work-group scan their totals in local memory (Hillis-Steele, double-buffered
 * through private memory), then each work-item rescans its chunk from its offset and writes the output.
 * With SCAN_TILED=1 the work-group walks its range in rounds of consecutive elements instead (GPUs).
 * Where the scanned dimension spans several work-groups: kernel 2 (${name}_partials, a work-group of
 * NUM_WI_COMBINE per row) scans the work-group totals of every row in place, and kernel 3 (${name}_fixup) combines each element with the total
 * of the work-groups before its own.
 */
<%namespace name="tile" file="mdh_decompose.cl.mako"/>

__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void ${name}_main(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
#if R_LANES > 1
    __local atom_t mdh_lm[WG_SIZE];
#endif
${tile.decompose()}
    const idx_t lanes_${scan_dim} = (idx_t)NUM_WG_${scan_dim} * NUM_WI_${scan_dim};
    const idx_t chunk = (SIZE_${scan_dim} + lanes_${scan_dim} - 1) / lanes_${scan_dim};
    const idx_t begin = (wg_${scan_dim} * NUM_WI_${scan_dim} + wi_${scan_dim}) * chunk;
    const idx_t end = min(begin + chunk, (idx_t)SIZE_${scan_dim});
% for d in concat_dims:
    const idx_t stride_${d} = (idx_t)NUM_WG_${d} * NUM_WI_${d};
    const idx_t iters_${d} = (SIZE_${d} + stride_${d} - 1) / stride_${d};
    for (idx_t k_${d} = 0; k_${d} < iters_${d}; ++k_${d}) {
    const idx_t ${d} = wg_${d} * NUM_WI_${d} + wi_${d} + k_${d} * stride_${d};
% endfor
    const bool active = ${" && ".join(f"{d} < SIZE_{d}" for d in concat_dims) or "true"};
#if SCAN_TILED && R_LANES > 1
    /* tiled: the work-group's range in rounds of R_LANES consecutive elements, one per work-item (neighbouring
     * work-items read neighbouring elements, and each element's scalar function runs once), each round scanned
     * in local memory and carried into the next */
    const idx_t g_begin = wg_${scan_dim} * NUM_WI_${scan_dim} * chunk;
    const idx_t g_end = min(g_begin + NUM_WI_${scan_dim} * chunk, (idx_t)SIZE_${scan_dim});
    atom_t carry = mdh_neutral();
    for (idx_t mdh_base = g_begin; mdh_base < g_end; mdh_base += R_LANES) {
        const idx_t ${scan_dim} = mdh_base + r_lane;
        atom_t v = mdh_neutral();
        if (active && ${scan_dim} < g_end) mdh_fold(&v, ${point_args}, MDH_FN_ARGS);
        mdh_lm[lid] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int off = 1; off < R_LANES; off <<= 1) {
            atom_t w = mdh_lm[lid];
            if (r_lane >= off) w = mdh_combine(mdh_lm[lid - off], w);
            barrier(CLK_LOCAL_MEM_FENCE);
            mdh_lm[lid] = w;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
% if inclusive:
        const atom_t mine = mdh_lm[lid];
% else:
        const atom_t mine = (r_lane == 0) ? mdh_neutral() : mdh_lm[lid - 1];
% endif
        const atom_t round_total = mdh_lm[lid - r_lane + R_LANES - 1];
        if (active && ${scan_dim} < g_end) mdh_out[${output_index}] = mdh_combine(carry, mine);
        carry = mdh_combine(carry, round_total);
        barrier(CLK_LOCAL_MEM_FENCE);  /* the next round rewrites the slots read above */
    }
    const atom_t wg_total = carry;
#else
    atom_t total = mdh_neutral();
    if (active) {
        for (idx_t ${scan_dim} = begin; ${scan_dim} < end; ++${scan_dim}) mdh_fold(&total, ${point_args}, MDH_FN_ARGS);
    }
#if R_LANES > 1
    mdh_lm[lid] = total;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < R_LANES; off <<= 1) {
        atom_t v = mdh_lm[lid];
        if (r_lane >= off) v = mdh_combine(mdh_lm[lid - off], v);
        barrier(CLK_LOCAL_MEM_FENCE);
        mdh_lm[lid] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    atom_t run = (r_lane == 0) ? mdh_neutral() : mdh_lm[lid - 1];
    const atom_t wg_total = mdh_lm[lid - r_lane + R_LANES - 1];
#else
    atom_t run = mdh_neutral();
    const atom_t wg_total = total;
#endif
    if (active) {
        for (idx_t ${scan_dim} = begin; ${scan_dim} < end; ++${scan_dim}) {
            const idx_t o = ${output_index};
% if inclusive:
            mdh_fold(&run, ${point_args}, MDH_FN_ARGS);
            mdh_out[o] = run;
% else:
            mdh_out[o] = run;
            mdh_fold(&run, ${point_args}, MDH_FN_ARGS);
% endif
        }
    }
#endif
#if NUM_WG_R > 1
    if (active && r_lane == 0) mdh_partial[wg_${scan_dim} * n_concat + ${concat_index}] = wg_total;
#endif
#if R_LANES > 1
    barrier(CLK_LOCAL_MEM_FENCE);  /* the next iteration rewrites the slots read above */
#endif
% for d in concat_dims:
    }
% endfor
}

__kernel __attribute__((reqd_work_group_size(NUM_WI_COMBINE, 1, 1)))
void ${name}_partials(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
    /* one work-group per output row scans its NUM_WG_R work-group totals in place: each work-item a contiguous
     * chunk, their totals scanned in local memory, then each chunk rescanned from its offset */
    __local atom_t mdh_lp[NUM_WI_COMBINE];
    const idx_t n_concat = ${concat_count};
    const idx_t oc = get_group_id(0);
    const int lid = get_local_id(0);
    const idx_t chunk = (NUM_WG_R + NUM_WI_COMBINE - 1) / NUM_WI_COMBINE;
    const idx_t begin = lid * chunk;
    const idx_t end = min(begin + chunk, (idx_t)NUM_WG_R);
    atom_t total = mdh_neutral();
    for (idx_t w = begin; w < end; ++w) total = mdh_combine(total, mdh_partial[w * n_concat + oc]);
    mdh_lp[lid] = total;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = 1; off < NUM_WI_COMBINE; off <<= 1) {
        atom_t v = mdh_lp[lid];
        if (lid >= off) v = mdh_combine(mdh_lp[lid - off], v);
        barrier(CLK_LOCAL_MEM_FENCE);
        mdh_lp[lid] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    atom_t run = (lid == 0) ? mdh_neutral() : mdh_lp[lid - 1];
    for (idx_t w = begin; w < end; ++w) {
        run = mdh_combine(run, mdh_partial[w * n_concat + oc]);
        mdh_partial[w * n_concat + oc] = run;
    }
}

__kernel void ${name}_fixup(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
    const idx_t n_concat = ${concat_count};
    const idx_t o = get_global_id(0);
    if (o >= n_concat * SIZE_${scan_dim}) return;
    idx_t mdh_rest = o;
% for d in reversed(output_dims):
    const idx_t ${d} = mdh_rest % SIZE_${d}; mdh_rest /= SIZE_${d};
% endfor
    const idx_t lanes_${scan_dim} = (idx_t)NUM_WG_${scan_dim} * NUM_WI_${scan_dim};
    const idx_t chunk = (SIZE_${scan_dim} + lanes_${scan_dim} - 1) / lanes_${scan_dim};
    const idx_t g = ${scan_dim} / (chunk * NUM_WI_${scan_dim});
    if (g == 0) return;
    /* the partials now hold inclusive prefixes over work-groups: entry g-1 is everything before group g */
    mdh_out[o] = mdh_combine(mdh_partial[(g - 1) * n_concat + ${concat_index}], mdh_out[o]);
}
