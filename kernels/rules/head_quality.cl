/* A rule head's quality as the split evaluator's scalar function (mdhom.rules.device_gain): the candidate
 * "bin <= b" (dir 1: the missing bin excluded) or "bin > b" (dir 0: the total minus the left sums that hold the
 * missing bin), so NaN satisfies neither operator, as in mdhom.rules.refinement. Per label the optimal score
 * s = -S(g, l1) / (h + l2) and its quality g s + h s^2 / 2 + l1 |s| + l2 s^2 / 2 (mdhom.rules.heads); a
 * single-label head takes the best label (lower index on ties), a complete head the sum in label order. The gain
 * is minus the quality (the evaluator maximises); a side whose hessian sum is below min_child_weight, or zero,
 * is not a candidate. RULE_SINGLE selects the head. Built after split.cl (tree_left_sums, TREE_REAL_OF). */
#pragma OPENCL FP_CONTRACT OFF

inline tree_real_t rule_soft_threshold(const tree_real_t g, const tree_real_t l1) {
    tree_real_t t = fabs(g) - l1;
    t = (t > (tree_real_t)0) ? t : (tree_real_t)0;
    return (g > (tree_real_t)0) ? t : ((g < (tree_real_t)0) ? -t : (tree_real_t)0);
}

inline tree_real_t rule_label_quality(const tree_real_t g, const tree_real_t h, const tree_real_t l2,
                                      const tree_real_t l1) {
    const tree_real_t den = h + l2;
    if (den == (tree_real_t)0) return (tree_real_t)0;
    const tree_real_t s = -rule_soft_threshold(g, l1) / den;
    return g * s + (tree_real_t)0.5 * h * s * s + l1 * fabs(s) + (tree_real_t)0.5 * l2 * (s * s);
}

inline tree_real_t tree_gain(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node,
                             const long n_feat, const long feat, const int bin, const int dir,
                             const tree_real_t l2, const tree_real_t l1,
                             const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_t q = 0, hs = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long cell = ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
        const tree_hist_t tgq = scan[2 * (cell + TREE_BINS - 1)];
        const tree_hist_t thq = scan[2 * (cell + TREE_BINS - 1) + 1];
        tree_hist_t lgq, lhq;
        tree_left_sums(scan, hist, cell, bin, dir, &lgq, &lhq);
        const tree_hist_t sgq = (dir == 1) ? lgq : (tree_hist_t)(tgq - lgq);
        const tree_hist_t shq = (dir == 1) ? lhq : (tree_hist_t)(thq - lhq);
        const tree_real_t g = TREE_REAL_OF(sgq, k, 0), h = TREE_REAL_OF(shq, k, 1);
        const tree_real_t qk = rule_label_quality(g, h, l2, l1);
#if RULE_SINGLE
        q = (k == 0 || qk < q) ? qk : q;
#else
        q = (k == 0) ? qk : q + qk;
#endif
        hs = (k == 0) ? h : hs + h;
    }
    if (!(hs >= min_child_weight) || hs == (tree_real_t)0) return -INFINITY;
    return -q;
}
