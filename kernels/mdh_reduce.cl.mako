/* md_hom skeleton for concatenated and reduced dimensions.
 *
 * Kernel 1 (${name}_main): each work-group owns a tile of the index space (NUM_WG_<d> tiles per
 * dimension); each work-item folds its strided share of the reduced dimensions in private memory, then the
 * work-items along the reduced dimensions combine through local memory (a tree) and one partial per output
 * element and work-group is written.
 * With PARTIALS_LOCAL=1 (descriptions with an atomic fold), the work-items of a concatenation lane instead
 * fold into one accumulator in local memory with integer atomics, and copy it out together.
 * Kernel 2 (${name}_combine): only where the reduced dimensions are split across work-groups; it folds
 * the NUM_WG_R partials of each output element in a fixed order, so results do not depend on scheduling
 * (lane by lane, one work-item each, where the operator is a SUM over lanes of one type).
 */
<%namespace name="tile" file="mdh_decompose.cl.mako"/>
## CHUNKED=1 (descriptions with chunked=True): each work-item takes one contiguous run of every dimension instead of
## a strided share, which is what CPUs stream (they run a work-group's items one after another). A mako comment, so
## that the source, and the stored configurations' description hashes, of other descriptions stay as they were.
## The loop over a work-item's share of reduced dimension d (its strided share, or its contiguous run with CHUNKED).
<%def name="lane_loop(d)">\
% if desc.chunked:
#if CHUNKED
        const idx_t mdh_chunk_${d} = (${bounds[d]} + (idx_t)NUM_WG_${d} * NUM_WI_${d} - 1) / ((idx_t)NUM_WG_${d} * NUM_WI_${d});
        const idx_t mdh_end_${d} = min((idx_t)${bounds[d]}, (wg_${d} * NUM_WI_${d} + wi_${d} + 1) * mdh_chunk_${d});
        for (idx_t ${d} = (wg_${d} * NUM_WI_${d} + wi_${d}) * mdh_chunk_${d}; ${d} < mdh_end_${d}; ++${d}) {
#else
% endif
        for (idx_t ${d} = wg_${d} * NUM_WI_${d} + wi_${d}; ${d} < ${bounds[d]}; ${d} += (idx_t)NUM_WG_${d} * NUM_WI_${d}) {
% if desc.chunked:
#endif
% endif
</%def>\
## The vector form's dimension: a work-item's share in blocks of VEC points (mdh_vn of them within the dimension;
## mdh_vblock: the vector form may compute the whole block).
<%def name="vec_loop(d)">\
#if VEC > 1
        for (idx_t ${d} = (wg_${d} * NUM_WI_${d} + wi_${d}) * VEC; ${d} < ${bounds[d]}; ${d} += (idx_t)NUM_WG_${d} * NUM_WI_${d} * VEC) {
            const idx_t mdh_vn = min((idx_t)VEC, ${bounds[d]} - ${d});
            const bool mdh_vblock = ${d} + VEC <= (idx_t)(${vec_reach});
#else
${lane_loop(d)}\
#endif
</%def>\
## One point into the private accumulator, or with the vector form a block of them.
<%def name="fold_point()">\
% if vec_dim and vec_dim not in concat_dims:
#if VEC > 1
            if (mdh_vblock) {
% if desc.vector.carry is not None:
                mdh_fold_vec(&acc, ${point_args}, mdh_vn, &mdh_carry, MDH_FN_ARGS);
% elif desc.vector.fold is not None:
                mdh_fold_vec(&acc, ${point_args}, mdh_vn, MDH_FN_ARGS);
% else:
                atom_t mdh_v[VEC];
                mdh_scalar_vec(mdh_v, ${point_args}, MDH_FN_ARGS);
                for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s) acc = mdh_combine(acc, mdh_v[mdh_s]);
% endif
            } else {
                for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s) mdh_fold(&acc, ${vec_tail_args}, MDH_FN_ARGS);
            }
#else
            mdh_fold(&acc, ${point_args}, MDH_FN_ARGS);
#endif
% else:
            mdh_fold(&acc, ${point_args}, MDH_FN_ARGS);
% endif
</%def>\
## The vector form along a concatenated dimension of a description that reduces: a block of VEC points, an accumulator
## each, the reduced dimensions folded in their usual order, each step a whole block's atoms at once (mdh_scalar_vec);
## every point's fold is the one VEC=1 makes, in the same order (the same bits). One work-item along the reduced
## dimensions (check_config); work-groups along them write partials as usual. Opens the #if that the plain fold closes.
<%def name="concat_vector_fold()">\
#if VEC > 1
    atom_t mdh_accs[VEC];
    for (idx_t mdh_s = 0; mdh_s < VEC; ++mdh_s) mdh_accs[mdh_s] = mdh_neutral();
    const idx_t mdh_vn = active ? min((idx_t)VEC, SIZE_${vec_dim} - ${vec_dim}) : 0;
    const bool mdh_vblock = ${vec_dim} + VEC <= (idx_t)(${vec_reach});
    if (active) {
% for d in lane_dims:
${lane_loop(d)}\
% endfor
            if (mdh_vblock) {
                atom_t mdh_v[VEC];
                mdh_scalar_vec(mdh_v, ${point_args}, MDH_FN_ARGS);
                for (idx_t mdh_s = 0; mdh_s < VEC; ++mdh_s) mdh_accs[mdh_s] = mdh_combine(mdh_accs[mdh_s], mdh_v[mdh_s]);
            } else {
                for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s) mdh_fold(&mdh_accs[mdh_s], ${vec_tail_args}, MDH_FN_ARGS);
            }
% for d in lane_dims:
        }
% endfor
    }
    for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s) {
#if NUM_WG_R > 1
        mdh_partial[(${wg_lane_index}) * n_concat + ${vec_concat_index}] = mdh_accs[mdh_s];
#else
        mdh_out[${vec_concat_index}] = mdh_accs[mdh_s];
#endif
    }
#else
</%def>\
## FLAT=1 (descriptions with flat=True): the concatenated points' ragged runs laid end to end in windows of
## FLAT_SPAN points, each work-group an equal share of a window's line, folded piece by piece (a piece: the part of
## one point's run in the share) into one local accumulator and added to the output with global atomics.
<%def name="flat_point(o)">\
            idx_t mdh_r = ${o};
% for d in reversed(concat_dims):
            const idx_t ${d} = mdh_r % SIZE_${d}; mdh_r /= SIZE_${d};
% endfor
</%def>\
<%def name="flat_main()">\
<% red = desc.reduce_dims[0]; ext = dict(desc.extents)[red] %>\
${lacc_decl("1")}
    __local idx_t mdh_pre[FLAT_SPAN + 1];  /* the window's run lengths, prefix-summed */
    __local idx_t mdh_sum[WG_SIZE];
    const idx_t lid = get_local_id(0);
    const idx_t n_concat = ${concat_count};
    const ulong mdh_g = get_group_id(0), mdh_ng = get_num_groups(0);
    for (idx_t mdh_w0 = 0; mdh_w0 < n_concat; mdh_w0 += FLAT_SPAN) {
        const idx_t mdh_wn = min((idx_t)FLAT_SPAN, n_concat - mdh_w0);
        /* each work-item sums its run of the window's points' lengths; a scan over the work-items; the prefix */
        const idx_t mdh_per = (mdh_wn + WG_SIZE - 1) / WG_SIZE;
        const idx_t mdh_j0 = min(mdh_wn, lid * mdh_per), mdh_j1 = min(mdh_wn, mdh_j0 + mdh_per);
        idx_t mdh_s = 0;
        for (idx_t mdh_j = mdh_j0; mdh_j < mdh_j1; ++mdh_j) {
${flat_point("mdh_w0 + mdh_j")}\
            mdh_s += max((idx_t)0, min(SIZE_${red}, (idx_t)(${ext})));
        }
        mdh_sum[lid] = mdh_s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (idx_t mdh_off = 1; mdh_off < WG_SIZE; mdh_off <<= 1) {
            const idx_t mdh_v = lid >= mdh_off ? mdh_sum[lid - mdh_off] : 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            mdh_sum[lid] += mdh_v;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        mdh_s = mdh_sum[lid] - mdh_s;
        for (idx_t mdh_j = mdh_j0; mdh_j < mdh_j1; ++mdh_j) {
${flat_point("mdh_w0 + mdh_j")}\
            mdh_s += max((idx_t)0, min(SIZE_${red}, (idx_t)(${ext})));
            mdh_pre[mdh_j + 1] = mdh_s;
        }
        if (lid == 0) mdh_pre[0] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        const ulong mdh_total = (ulong)mdh_pre[mdh_wn];
        const idx_t mdh_end = (idx_t)(mdh_total * (mdh_g + 1) / mdh_ng);
        idx_t mdh_at = (idx_t)(mdh_total * mdh_g / mdh_ng);
        /* the last point whose run starts at or before the share's start */
        idx_t mdh_k = 0, mdh_hi_k = mdh_wn - 1;
        while (mdh_k < mdh_hi_k) {
            const idx_t mdh_mid = (mdh_k + mdh_hi_k + 1) / 2;
            if (mdh_pre[mdh_mid] <= mdh_at) mdh_k = mdh_mid; else mdh_hi_k = mdh_mid - 1;
        }
        while (mdh_at < mdh_end) {  /* the same bounds in every work-item: barriers stay uniform */
            while (mdh_pre[mdh_k + 1] <= mdh_at) ++mdh_k;  /* past runs that end here (or are empty) */
            const idx_t mdh_lo = mdh_at - mdh_pre[mdh_k];
            const idx_t mdh_hi = min(mdh_end, mdh_pre[mdh_k + 1]) - mdh_pre[mdh_k];
            {
                __local uint* mdh_z = (__local uint*)mdh_lacc;
                for (idx_t w = lid; w < ${acc_words}; w += WG_SIZE) mdh_z[w] = 0;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            {
${flat_point("mdh_w0 + mdh_k")}\
% if desc.chunked:
#if CHUNKED
            const idx_t mdh_c = (mdh_hi - mdh_lo + WG_SIZE - 1) / WG_SIZE;
            const idx_t mdh_e = min(mdh_hi, mdh_lo + (lid + 1) * mdh_c);
            for (idx_t ${red} = mdh_lo + lid * mdh_c; ${red} < mdh_e; ++${red})
#else
% endif
            for (idx_t ${red} = mdh_lo + lid; ${red} < mdh_hi; ${red} += WG_SIZE)
% if desc.chunked:
#endif
% endif
                mdh_fold_atomic(${lane_acc("0")}, ${point_args}, MDH_FN_ARGS);
            barrier(CLK_LOCAL_MEM_FENCE);
            /* the piece's sums into the point's output (zeroed by the launch): integer atomics, any order */
            volatile __global int* mdh_dst = (volatile __global int*)&mdh_out[mdh_w0 + mdh_k];
            __local const int* mdh_src = (__local const int*)mdh_lacc;
% if desc.packed_pairs:
#if PACKED
            for (idx_t w = lid; w < MDH_PAIRS; w += WG_SIZE) {
                const int mdh_a = mdh_src[2 * ${pad("w")}], mdh_b = mdh_src[2 * ${pad("w")} + 1] + (mdh_a < 0);  /* the borrow back */
                if (mdh_a) atomic_add(mdh_dst + 2 * w, mdh_a);
                if (mdh_b) atomic_add(mdh_dst + 2 * w + 1, mdh_b);
            }
#elif SPLIT_PAIRS
            for (idx_t w = lid; w < MDH_PAIRS; w += WG_SIZE) {  /* the two planes, interleaved again */
                const int mdh_a = mdh_src[${pad("w")}], mdh_b = mdh_src[${pad("MDH_PAIRS + w")}];
                if (mdh_a) atomic_add(mdh_dst + 2 * w, mdh_a);
                if (mdh_b) atomic_add(mdh_dst + 2 * w + 1, mdh_b);
            }
#else
% endif
            for (idx_t w = lid; w < (idx_t)(sizeof(atom_t) / 4); w += WG_SIZE) {
                const int mdh_v = mdh_src[${pad("w")}];
                if (mdh_v) atomic_add(mdh_dst + w, mdh_v);
            }
% if desc.packed_pairs:
#endif
% endif
            }
            barrier(CLK_LOCAL_MEM_FENCE);  /* the next piece zeroes what was just read */
            mdh_at = mdh_pre[mdh_k] + mdh_hi;
            ++mdh_k;
        }
        barrier(CLK_LOCAL_MEM_FENCE);  /* the next window rewrites the prefix */
    }
</%def>\

## FLAT=1 with PARTIALS_LOCAL=0 (descriptions with flat="private"): what a CPU runs, one work-item after another,
## each with a private accumulator. Each work-item takes an equal share of the line and folds each piece of it into its
## accumulator; a piece that is a whole run is the point's only one and is stored, a part of a run is added with
## global atomics (the launch zeroes the output first), each work-item from its own word on.
<%def name="flat_private_main()">\
<% red = desc.reduce_dims[0]; ext = dict(desc.extents)[red] %>\
    const idx_t n_concat = ${concat_count};
    const ulong mdh_g = get_global_id(0), mdh_ng = get_global_size(0);
    ulong mdh_total = 0;
    for (idx_t mdh_j = 0; mdh_j < n_concat; ++mdh_j) {
${flat_point("mdh_j")}\
        mdh_total += (ulong)max((idx_t)0, min(SIZE_${red}, (idx_t)(${ext})));
    }
    const ulong mdh_at = mdh_total * mdh_g / mdh_ng, mdh_end = mdh_total * (mdh_g + 1) / mdh_ng;
    ulong mdh_pre = 0;  /* where run mdh_k starts on the line */
    for (idx_t mdh_k = 0; mdh_k < n_concat && mdh_pre < mdh_end; ++mdh_k) {
${flat_point("mdh_k")}\
        const ulong mdh_len = (ulong)max((idx_t)0, min(SIZE_${red}, (idx_t)(${ext})));
        const ulong mdh_lo = max(mdh_pre, mdh_at), mdh_hi = min(mdh_pre + mdh_len, mdh_end);
        if (mdh_lo < mdh_hi) {
% if desc.packed_pairs:
#if PACKED
            atom_t acc __attribute__((aligned(8)));
            for (idx_t mdh_i = 0; mdh_i < MDH_PAIRS; ++mdh_i) ((ulong*)&acc)[mdh_i] = 0;
#else
            atom_t acc = mdh_neutral();
#endif
% else:
            atom_t acc = mdh_neutral();
% endif
            for (idx_t ${red} = (idx_t)(mdh_lo - mdh_pre); ${red} < (idx_t)(mdh_hi - mdh_pre); ++${red})
                mdh_fold(&acc, ${point_args}, MDH_FN_ARGS);
            if (mdh_lo == mdh_pre && mdh_hi == mdh_pre + mdh_len) {
% if desc.packed_pairs:
#if PACKED
                mdh_unpack_pairs(&acc);
#endif
% endif
                mdh_out[mdh_k] = acc;
            } else {
                volatile __global int* mdh_dst = (volatile __global int*)&mdh_out[mdh_k];
% if desc.packed_pairs:
#if PACKED
                /* the packed pairs read as ulong words (as they were written), the borrow given back here */
                const idx_t mdh_n = MDH_PAIRS, mdh_i0 = (idx_t)(mdh_g * (ulong)MDH_PAIRS / mdh_ng);
                for (idx_t mdh_i = 0; mdh_i < mdh_n; ++mdh_i) {
                    const idx_t w = mdh_i + mdh_i0 < mdh_n ? mdh_i + mdh_i0 : mdh_i + mdh_i0 - mdh_n;
                    const ulong mdh_v = ((const ulong*)&acc)[w];
                    const int mdh_a = (int)(uint)mdh_v, mdh_b = (int)(uint)(mdh_v >> 32) + (mdh_a < 0);
                    if (mdh_a) atomic_add(mdh_dst + 2 * w, mdh_a);
                    if (mdh_b) atomic_add(mdh_dst + 2 * w + 1, mdh_b);
                }
#else
% endif
                const idx_t mdh_n = (idx_t)(sizeof(atom_t) / 4), mdh_i0 = (idx_t)(mdh_g * (ulong)mdh_n / mdh_ng);
                for (idx_t mdh_i = 0; mdh_i < mdh_n; ++mdh_i) {
                    const idx_t w = mdh_i + mdh_i0 < mdh_n ? mdh_i + mdh_i0 : mdh_i + mdh_i0 - mdh_n;
                    const int mdh_v = ((const int*)&acc)[w];
                    if (mdh_v) atomic_add(mdh_dst + w, mdh_v);
                }
% if desc.packed_pairs:
#endif
% endif
            }
        }
        mdh_pre += mdh_len;
    }
</%def>\
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void ${name}_main(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
% if desc.flat:
#if FLAT
% if desc.flat_private:
#if PARTIALS_LOCAL
${flat_main()}\
#else
${flat_private_main()}\
#endif
% else:
${flat_main()}\
% endif
#else
% endif
#if PARTIALS_LOCAL
${lacc_decl("C_LANES")}
#elif R_LANES > 1
    __local atom_t mdh_lm[WG_SIZE];
#endif
${tile.decompose()}
% for d in concat_dims:
<% vb = d == vec_dim %>\
% if vb:
    /* the vector form's dimension: the work-items share blocks of VEC points (mdh_vb_${d}), ${d} the first of one */
    const idx_t mdh_blocks_${d} = (SIZE_${d} + VEC - 1) / VEC;
% endif
    const idx_t stride_${d} = (idx_t)NUM_WG_${d} * NUM_WI_${d};
    const idx_t iters_${d} = (${"mdh_blocks_" + d if vb else "SIZE_" + d} + stride_${d} - 1) / stride_${d};
    for (idx_t k_${d} = 0; k_${d} < iters_${d}; ++k_${d}) {
% if desc.chunked:
#if CHUNKED
    const idx_t ${"mdh_vb_" + d if vb else d} = (wg_${d} * NUM_WI_${d} + wi_${d}) * iters_${d} + k_${d};
#else
% endif
    const idx_t ${"mdh_vb_" + d if vb else d} = wg_${d} * NUM_WI_${d} + wi_${d} + k_${d} * stride_${d};
% if desc.chunked:
#endif
% endif
% if vb:
    const idx_t ${d} = mdh_vb_${d} * VEC;
% endif
% endfor
    const bool active = ${" && ".join(f"{d} < SIZE_{d}" for d in concat_dims) or "true"};
% for d, e in desc.extents:
    /* ragged: this point's extent along ${d} */
    const idx_t EXTENT_${d} = active ? min(SIZE_${d}, (idx_t)(${e})) : 0;
% endfor
% if lane_dims:
#if PARTIALS_LOCAL
    {   /* zero this group's accumulators, word by word (atoms of integer lanes) */
        __local uint* mdh_z = (__local uint*)mdh_lacc;
        for (idx_t w = lid; w < C_LANES * ${acc_words}; w += WG_SIZE) mdh_z[w] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active) {
% for d in lane_dims:
${lane_loop(d)}\
% endfor
            mdh_fold_atomic(${lane_acc("c_lane")}, ${point_args}, MDH_FN_ARGS);
% for d in lane_dims:
        }
% endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active) {   /* the lane's work-items copy its accumulator out together */
        const idx_t o = ${concat_index};
#if NUM_WG_R > 1
        __global uint* mdh_dst = (__global uint*)&mdh_partial[(${wg_lane_index}) * n_concat + o];
#else
        __global uint* mdh_dst = (__global uint*)&mdh_out[o];
#endif
        __local const uint* mdh_src = (__local const uint*)${lane_acc("c_lane")};
% if desc.packed_pairs:
#if PACKED
        for (idx_t w = r_lane; w < MDH_PAIRS; w += R_LANES) {
            const uint mdh_a = mdh_src[2 * ${pad("w")}];
            mdh_dst[2 * w] = mdh_a;
            mdh_dst[2 * w + 1] = mdh_src[2 * ${pad("w")} + 1] + (uint)(as_int(mdh_a) < 0);  /* the borrow of a negative a */
        }
#elif SPLIT_PAIRS
        for (idx_t w = r_lane; w < MDH_PAIRS; w += R_LANES) {  /* the two planes, interleaved again */
            mdh_dst[2 * w] = mdh_src[${pad("w")}];
            mdh_dst[2 * w + 1] = mdh_src[${pad("MDH_PAIRS + w")}];
        }
#else
        for (idx_t w = r_lane; w < (idx_t)(sizeof(atom_t) / 4); w += R_LANES) mdh_dst[w] = mdh_src[${pad("w")}];
#endif
% else:
        for (idx_t w = r_lane; w < (idx_t)(sizeof(atom_t) / 4); w += R_LANES) mdh_dst[w] = mdh_src[w];
% endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);  /* the next iteration zeroes what was just read */
#else
% if vec_dim in concat_dims:
${concat_vector_fold()}\
% endif
% if desc.packed_pairs:
#if PACKED
    /* zeroed as ulong words: from here to mdh_unpack_pairs every access is a ulong one, so type-based alias
     * analysis sees one type (zeroed through its int lanes, Intel's CPU compiler read the packed sums of a ragged
     * fold as undefined) */
    atom_t acc __attribute__((aligned(8)));
    for (idx_t mdh_i = 0; mdh_i < MDH_PAIRS; ++mdh_i) ((ulong*)&acc)[mdh_i] = 0;
#else
% endif
    atom_t acc = mdh_neutral();
% if desc.packed_pairs:
#endif
% endif
% if desc.vector and desc.vector.carry is not None:
#if VEC > 1
    mdh_carry_t mdh_carry;  /* zeroed byte by byte: its members are the description's */
    for (idx_t mdh_i = 0; mdh_i < (idx_t)sizeof(mdh_carry_t); ++mdh_i) ((uchar*)&mdh_carry)[mdh_i] = 0;
#endif
% endif
    if (active) {
% for d in lane_dims:
% if d == vec_dim:
${vec_loop(d)}\
% else:
${lane_loop(d)}\
% endif
% endfor
${fold_point()}\
% for d in lane_dims:
        }
% endfor
    }
% if desc.packed_pairs:
#if PACKED
    mdh_unpack_pairs(&acc);
#endif
% endif
#if R_LANES > 1
    mdh_lm[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = R_POW2 / 2; s > 0; s >>= 1) {
        if (r_lane < s && r_lane + s < R_LANES) mdh_lm[lid] = mdh_combine(mdh_lm[lid], mdh_lm[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc = mdh_lm[lid];
#endif
    if (active && r_lane == 0) {
        const idx_t o = ${concat_index};
#if NUM_WG_R > 1
        const idx_t wg_r = ${wg_lane_index};
        mdh_partial[wg_r * n_concat + o] = acc;
#else
        mdh_out[o] = acc;
#endif
    }
% if vec_dim in concat_dims:
#endif
% endif
#endif
% elif desc.scatter:
    if (active) {
        idx_t mdh_at = ${concat_index};
        const atom_t mdh_v = mdh_scalar(&mdh_at, ${point_args}, MDH_FN_ARGS);
% if desc.scatter_add:
        if (mdh_at >= 0 && mdh_v != 0) atomic_add(&mdh_out[mdh_at], mdh_v);
% else:
        if (mdh_at >= 0) mdh_out[mdh_at] = mdh_v;
% endif
    }
% elif vec_dim:
    if (active) {
#if VEC > 1
        /* a block of the vector form's dimension: in vector form where it may compute the whole block, else (the
         * last, partial block) point by point */
        const idx_t mdh_vn = min((idx_t)VEC, SIZE_${vec_dim} - ${vec_dim});
        if (${vec_dim} + VEC <= (idx_t)(${vec_reach})) {
            atom_t mdh_v[VEC];
            mdh_scalar_vec(mdh_v, ${point_args}, MDH_FN_ARGS);
            for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s) mdh_out[${vec_concat_index}] = mdh_v[mdh_s];
        } else {
            for (idx_t mdh_s = 0; mdh_s < mdh_vn; ++mdh_s)
                mdh_out[${vec_concat_index}] = mdh_scalar(${vec_tail_args}, MDH_FN_ARGS);
        }
#else
        mdh_out[${concat_index}] = mdh_scalar(${point_args}, MDH_FN_ARGS);
#endif
    }
% else:
    if (active) mdh_out[${concat_index}] = mdh_scalar(${point_args}, MDH_FN_ARGS);
% endif
% for d in concat_dims:
    }
% endfor
% if desc.flat:
#endif
% endif
}

% if desc.flat_private:
/* FLAT's zeroed output, where its pieces are added with atomics: a kernel, each work-item zeroing one contiguous run
 * of its words (what a CPU streams), not a fill command, which PoCL runs on one thread */
__kernel void ${name}_zero(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
    const ulong mdh_n = (ulong)(${concat_count}) * (sizeof(atom_t) / 4);
    const ulong mdh_per = (mdh_n + get_global_size(0) - 1) / get_global_size(0);
    const ulong mdh_lo = min(mdh_n, get_global_id(0) * mdh_per), mdh_hi = min(mdh_n, mdh_lo + mdh_per);
    __global uint* mdh_z = (__global uint*)mdh_out;
    for (ulong w = mdh_lo; w < mdh_hi; ++w) mdh_z[w] = 0u;
}

% endif
% if lane_dims:
__kernel void ${name}_combine(__global atom_t* restrict mdh_out, __global atom_t* restrict mdh_partial, MDH_FN_PARAMS)
{
    const idx_t n_concat = ${concat_count};
% if combine_lanes:
    /* a SUM over lanes of one type: one work-item per lane of every output atom, partials in the same order */
    const idx_t i = get_global_id(0);
    if (i >= n_concat * ${combine_lanes}) return;
    __global const ${lane_ctype}* mdh_p = (__global const ${lane_ctype}*)mdh_partial;
    const idx_t mdh_stride = n_concat * ${combine_lanes};
    ${lane_ctype} acc = mdh_p[i];
    for (idx_t w = 1; w < NUM_WG_R; ++w) acc = acc + mdh_p[w * mdh_stride + i];
    ((__global ${lane_ctype}*)mdh_out)[i] = acc;
% else:
    const idx_t o = get_global_id(0);
    if (o >= n_concat) return;
    atom_t acc = mdh_partial[o];
    for (idx_t w = 1; w < NUM_WG_R; ++w) acc = mdh_combine(acc, mdh_partial[w * n_concat + o]);
    mdh_out[o] = acc;
% endif
}
% endif
