/* The vector form of XGBoost's split gain (gain_xgboost.cl, built after it and split_carry.cl in the score kernel's
 * vector form: mdhom.components.split.split_score with vector=True): tree_gain_vec, the gains of VEC candidates in
 * vector types (mdhom.components.lanes.vector_defines), one a lane, each of its own feature, from their left sums and
 * their features' totals, each lane the bits tree_gain gives at its candidate; and tree_gain_sums, one candidate's
 * from the same sums (the form's scalar function). */
#pragma OPENCL FP_CONTRACT OFF

#if VEC > 1
/* Operators, not built-in functions, in the vector form: PoCL (3.x, x86) calls fabs, isfinite and the like out of
 * line, vectors passed through memory. */
/* tree_score of VEC lanes: the same operations lane by lane (|g| as g or -g: of -0, -0, which the threshold makes 0
 * as it does +0). */
inline tree_real_v tree_score_vec(const tree_real_v g, const tree_real_v h, const tree_real_t lambda,
                                  const tree_real_t alpha) {
    tree_real_v t = ((g < (tree_real_t)0) ? -g : g) - alpha;
    t = (t > (tree_real_t)0) ? t : (tree_real_v)0;
    const tree_real_v s = (g > (tree_real_t)0) ? t : ((g < (tree_real_t)0) ? -t : (tree_real_v)0);
    return s * s / (h + lambda);
}

/* Histogram lanes as reals, built lane by lane from scalars: convert_tree_real_v (the generator's, through unions)
 * stored the lanes in halves and loaded them back whole, a store PoCL's code could not forward (2-core Xeon, 128
 * nodes' candidates at 256 bins: 3.7 -> 2.1 ms a launch). */
#define TREE_LANE_REAL(x, i) ((tree_real_t)(x).s##i)
#if VEC == 2
#define TREE_REAL_LANES(x) ((tree_real_v)(TREE_LANE_REAL(x, 0), TREE_LANE_REAL(x, 1)))
#elif VEC == 4
#define TREE_REAL_LANES(x) \
    ((tree_real_v)(TREE_LANE_REAL(x, 0), TREE_LANE_REAL(x, 1), TREE_LANE_REAL(x, 2), TREE_LANE_REAL(x, 3)))
#else
#define TREE_REAL_LANES(x) \
    ((tree_real_v)(TREE_LANE_REAL(x, 0), TREE_LANE_REAL(x, 1), TREE_LANE_REAL(x, 2), TREE_LANE_REAL(x, 3), \
                   TREE_LANE_REAL(x, 4), TREE_LANE_REAL(x, 5), TREE_LANE_REAL(x, 6), TREE_LANE_REAL(x, 7)))
#endif

#if TREE_QUANTIZED
#define TREE_REAL_VEC(q, k, c) (TREE_REAL_LANES(q) * inv_scale[2 * (k) + (c)])
#else
#define TREE_REAL_VEC(q, k, c) TREE_REAL_LANES(q)
#endif

/* The parent's part of tree_gain for VEC candidates, each of its own feature (tgq, thq: their features' totals, a
 * vector per output; the gain's parameters as tree_gain_vec takes them): the sum over outputs of the totals' scores,
 * the same for every bin of a feature, so that the walk along its bins computes it once. */
__attribute__((always_inline)) inline tree_real_v tree_parent_vec(
    const tree_hist_v* tgq, const tree_hist_v* thq, const tree_real_t lambda, const tree_real_t alpha,
    const tree_real_t min_split_gain, const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_v sp = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const tree_real_v tg = TREE_REAL_VEC(tgq[k], k, 0), th = TREE_REAL_VEC(thq[k], k, 1);
        sp = (k == 0) ? tree_score_vec(tg, th, lambda, alpha) : sp + tree_score_vec(tg, th, lambda, alpha);
    }
    return sp;
}

/* tree_gain of VEC candidates from their left sums (lgq, lhq) and their features' totals (tgq, thq), a vector per
 * output each, and the parent's part (sp, tree_parent_vec of the same totals): the same operations as tree_gain, lane
 * by lane. */
/* forced inline: PoCL calls it out of line otherwise (its pointers are not restrict: Oclgrind runs the inlined form) */
__attribute__((always_inline)) inline tree_real_v tree_gain_vec(
    const tree_hist_v* lgq, const tree_hist_v* lhq, const tree_hist_v* tgq, const tree_hist_v* thq,
    const tree_real_v sp, const tree_real_t lambda, const tree_real_t alpha, const tree_real_t min_split_gain,
    const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_v sl = 0, sr = 0, hl = 0, hr = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const tree_real_v lg = TREE_REAL_VEC(lgq[k], k, 0), lh = TREE_REAL_VEC(lhq[k], k, 1);
        const tree_real_v rg = TREE_REAL_VEC(tgq[k] - lgq[k], k, 0), rh = TREE_REAL_VEC(thq[k] - lhq[k], k, 1);
        if (k == 0) {
            sl = tree_score_vec(lg, lh, lambda, alpha);
            sr = tree_score_vec(rg, rh, lambda, alpha);
            hl = lh;
            hr = rh;
        } else {
            sl = sl + tree_score_vec(lg, lh, lambda, alpha);
            sr = sr + tree_score_vec(rg, rh, lambda, alpha);
            hl = hl + lh;
            hr = hr + rh;
        }
    }
    const tree_real_v gain = (tree_real_t)0.5 * ((sl + sr) - sp) - min_split_gain;
    /* finite: x - x is 0 (inf - inf and NaN - NaN are NaN) */
    return ((hl >= min_child_weight) & (hr >= min_child_weight) & ((gain - gain) == (tree_real_t)0))
               ? gain : (tree_real_v)(-INFINITY);
}
#endif

/* tree_gain of one candidate from its left sums and its feature's totals per output (the vector form's scalar
 * function, VEC=1): tree_gain's operations, which read them from the scan instead (the GPUs' build, whose tuned
 * configurations hash that file's text: it stays as it is). */
inline tree_real_t tree_gain_sums(const tree_hist_t* lgq, const tree_hist_t* lhq, const tree_hist_t* tgq,
                                  const tree_hist_t* thq, const tree_real_t lambda, const tree_real_t alpha,
                                  const tree_real_t min_split_gain, const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_t sl = 0, sr = 0, sp = 0, hl = 0, hr = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const tree_real_t tg = TREE_REAL_OF(tgq[k], k, 0), th = TREE_REAL_OF(thq[k], k, 1);
        const tree_real_t lg = TREE_REAL_OF(lgq[k], k, 0), lh = TREE_REAL_OF(lhq[k], k, 1);
        const tree_real_t rg = TREE_REAL_OF(tgq[k] - lgq[k], k, 0), rh = TREE_REAL_OF(thq[k] - lhq[k], k, 1);
        sl = (k == 0) ? tree_score(lg, lh, lambda, alpha) : sl + tree_score(lg, lh, lambda, alpha);
        sr = (k == 0) ? tree_score(rg, rh, lambda, alpha) : sr + tree_score(rg, rh, lambda, alpha);
        sp = (k == 0) ? tree_score(tg, th, lambda, alpha) : sp + tree_score(tg, th, lambda, alpha);
        hl = (k == 0) ? lh : hl + lh;
        hr = (k == 0) ? rh : hr + rh;
    }
    if (!(hl >= min_child_weight && hr >= min_child_weight)) return -INFINITY;
    const tree_real_t gain = (tree_real_t)0.5 * ((sl + sr) - sp) - min_split_gain;
    return isfinite(gain) ? gain : -INFINITY;
}
