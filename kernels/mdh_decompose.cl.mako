## The tile a work-item owns: its work-group's coordinate and its own lane in every dimension.
## Groups are numbered row-major over the dimensions; inside a group, the lanes of the reduced (or scanned)
## dimensions vary fastest, so r_lane runs over the work-items that combine through local memory.
<%def name="decompose()">
    idx_t mdh_rest = get_group_id(0);
% for d in reversed(dims):
    const idx_t wg_${d} = mdh_rest % NUM_WG_${d}; mdh_rest /= NUM_WG_${d};
% endfor
    const idx_t lid = get_local_id(0);
    const idx_t r_lane = lid % R_LANES;
    mdh_rest = r_lane;
% for d in reversed(lane_dims):
    const idx_t wi_${d} = mdh_rest % NUM_WI_${d}; mdh_rest /= NUM_WI_${d};
% endfor
    const idx_t c_lane = lid / R_LANES;
    mdh_rest = c_lane;
% for d in reversed(concat_dims):
    const idx_t wi_${d} = mdh_rest % NUM_WI_${d}; mdh_rest /= NUM_WI_${d};
% endfor
    const idx_t n_concat = ${concat_count};
</%def>
