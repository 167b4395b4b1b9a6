/* The vector form of XGBoost's split gain (gain_xgboost.cl, built after it in the score kernel's vector form:
 * mdhom.components.split.split_score with vector=True): tree_gain_vec, the gains of VEC consecutive bins from `bin`
 * on in vector types (mdhom.components.lanes.vector_defines), each lane the bits tree_gain gives at its bin. */
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

#if TREE_QUANTIZED
#define TREE_REAL_VEC(q, k, c) (convert_tree_real_v(q) * inv_scale[2 * (k) + (c)])
#else
#define TREE_REAL_VEC(q, k, c) convert_tree_real_v(q)
#endif

/* tree_gain of candidates (feat, bin .. bin + VEC - 1, dir): a node's and feature's totals and parent score once,
 * the left and right sums of VEC bins from one load of their prefix sums. */
/* forced inline: PoCL calls it out of line otherwise (its pointers are not restrict: Oclgrind runs the inlined form) */
__attribute__((always_inline)) inline tree_real_v tree_gain_vec(
    __global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node, const long n_feat,
    const long feat, const int bin, const int dir, const tree_real_t lambda, const tree_real_t alpha,
    const tree_real_t min_split_gain, const tree_real_t min_child_weight TREE_INV_DECL) {
    if (dir == 1) {  /* as tree_gain: an empty missing bin leaves default-right nothing to win */
        int missing = 0;
        for (int k = 0; k < TREE_OUTPUTS; ++k) {
            const long m = 2 * (((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS + TREE_BINS - 1);
            missing |= (hist[m] != 0) | (hist[m + 1] != 0);
        }
        if (!missing) return (tree_real_v)(-INFINITY);
    }
    tree_real_v sl = 0, sr = 0, hl = 0, hr = 0;
    tree_real_t sp = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long cell = ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
        const tree_hist_t tgq = scan[2 * (cell + TREE_BINS - 1)];
        const tree_hist_t thq = scan[2 * (cell + TREE_BINS - 1) + 1];
        const tree_hist_v2 pairs = vload_tree_hist_v2(scan + 2 * (cell + bin));
        tree_hist_v lgq = pairs.even, lhq = pairs.odd;
        if (dir == 0) {  /* the missing bin goes left (tree_left_sums) */
            lgq = lgq + hist[2 * (cell + TREE_BINS - 1)];
            lhq = lhq + hist[2 * (cell + TREE_BINS - 1) + 1];
        }
        const tree_real_t tg = TREE_REAL_OF(tgq, k, 0), th = TREE_REAL_OF(thq, k, 1);
        const tree_real_v lg = TREE_REAL_VEC(lgq, k, 0), lh = TREE_REAL_VEC(lhq, k, 1);
        const tree_real_v rg = TREE_REAL_VEC(tgq - lgq, k, 0), rh = TREE_REAL_VEC(thq - lhq, k, 1);
        if (k == 0) {
            sl = tree_score_vec(lg, lh, lambda, alpha);
            sr = tree_score_vec(rg, rh, lambda, alpha);
            sp = tree_score(tg, th, lambda, alpha);
            hl = lh;
            hr = rh;
        } else {
            sl = sl + tree_score_vec(lg, lh, lambda, alpha);
            sr = sr + tree_score_vec(rg, rh, lambda, alpha);
            sp = sp + tree_score(tg, th, lambda, alpha);
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
