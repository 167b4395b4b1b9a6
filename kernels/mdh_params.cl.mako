/* Tuning parameters: the host passes them with -D; these defaults let the source build on its own. */
% for d in dims:
#ifndef NUM_WG_${d}
#define NUM_WG_${d} 1
#endif
#ifndef NUM_WI_${d}
#define NUM_WI_${d} 1
#endif
% endfor
#ifndef NUM_WI_COMBINE
#define NUM_WI_COMBINE 64
#endif
#ifndef PARTIALS_LOCAL
#define PARTIALS_LOCAL 0
#endif
#ifndef SCAN_TILED
#define SCAN_TILED 0
#endif
% if desc.flat:
#ifndef FLAT
#define FLAT 0
#endif
#define FLAT_SPAN ${flat_span}
% endif
% if desc.chunked:
#ifndef CHUNKED
#define CHUNKED 0
#endif
% endif

#define WG_SIZE (${" * ".join("NUM_WI_" + d for d in dims)})
/* Work-items along the concatenated dimensions, and those that combine through local memory (along reduced
 * or scanned dimensions). */
#define C_LANES (${" * ".join("NUM_WI_" + d for d in concat_dims) or "1"})
#define R_LANES (${" * ".join("NUM_WI_" + d for d in lane_dims) or "1"})
/* Work-groups along the reduced dimensions: above one, a second kernel combines their partials. */
#define NUM_WG_R (${" * ".join("NUM_WG_" + d for d in lane_dims) or "1"})
#if R_LANES <= 1
#define R_POW2 1
% for p in range(1, 17):
#elif R_LANES <= ${2 ** p}
#define R_POW2 ${2 ** p}
% endfor
#endif
