/* A rule head's quality as the split evaluator's scalar function (mdhom.rules.device_gain), for the refinement
 * search over binned features (mdhom.rules.binned is the numpy reference, to the bit).
 *
 * The statistics (node, feat, slot, bin) hold the head's labels in slots 0 .. TREE_OUTPUTS - 2 as (g, h) sums and
 * the count slot last: (covered examples, covered examples of non-zero weight). `scan` is their inclusive prefix
 * sum over bins; the last bin (TREE_BINS - 1) holds NaN and satisfies no condition. The candidate (feat, bin, dir)
 * is the condition "bin <= b" (dir 0) or "bin > b" (dir 1): the prefix at b, or the prefix at the last real bin
 * minus it. It needs covered examples with a real value on both sides and min_coverage of non-zero weight on its
 * own side; else -INFINITY.
 *
 * Per label the optimal score s = -S(g, l1) / (h + l2) (0 where h + l2 is 0) and its quality
 * g s + 1/2 h s^2 + l1 |s| + 1/2 l2 s^2, evaluated as mdhom.rules.heads writes it (same operations, same order,
 * FP_CONTRACT OFF); a single-label head takes the quality of the label of the largest |s| (the first of equal
 * ones: mlrl-boomer's choice), a complete head the sum of the label qualities in label order.
 * The gain is minus the quality (the evaluator maximises; ARGMAX keeps the lower index on ties, as the reference's
 * arg-min keeps the first). RULE_SINGLE selects the head. Built after label_score.cl (rule_label_score) and
 * split.cl (tree_real_t, TREE_INV_DECL,
 * TREE_REAL_OF: quantized sums are int32 and become reals times their slot's 2^-k, the count slot's 2^0). */
#pragma OPENCL FP_CONTRACT OFF

inline double rule_label_quality(const double s, const double g, const double h, const double l2, const double l1) {
    return g * s + 0.5 * h * s * s + l1 * fabs(s) + 0.5 * l2 * s * s;
}

inline tree_real_t tree_gain(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node,
                             const long n_feat, const long feat, const int bin, const int dir, const tree_real_t l2,
                             const tree_real_t l1, const tree_real_t min_coverage TREE_INV_DECL) {
    const long base = (node * n_feat + feat) * TREE_OUTPUTS;
    const long cnt = (base + TREE_OUTPUTS - 1) * TREE_BINS;
    const int kc = TREE_OUTPUTS - 1;
    const double le_cov = TREE_REAL_OF(scan[2 * (cnt + bin)], kc, 0);
    const double le_w = TREE_REAL_OF(scan[2 * (cnt + bin) + 1], kc, 1);
    const double all_cov = TREE_REAL_OF(scan[2 * (cnt + TREE_BINS - 2)], kc, 0);
    const double all_w = TREE_REAL_OF(scan[2 * (cnt + TREE_BINS - 2) + 1], kc, 1);
    if (!(le_cov >= 1.0) || !(all_cov - le_cov >= 1.0)) return -INFINITY;
    const double side_w = (dir == 0) ? le_w : all_w - le_w;
    if (!(side_w >= min_coverage)) return -INFINITY;
    double q = 0.0;
#if RULE_SINGLE
    double top = 0.0;
#endif
    for (int k = 0; k < TREE_OUTPUTS - 1; ++k) {
        const long cell = (base + k) * TREE_BINS;
        const double lg = TREE_REAL_OF(scan[2 * (cell + bin)], k, 0);
        const double lh = TREE_REAL_OF(scan[2 * (cell + bin) + 1], k, 1);
        const double g = (dir == 0) ? lg : TREE_REAL_OF(scan[2 * (cell + TREE_BINS - 2)], k, 0) - lg;
        const double h = (dir == 0) ? lh : TREE_REAL_OF(scan[2 * (cell + TREE_BINS - 2) + 1], k, 1) - lh;
        const double s = rule_label_score(g, h, l2, l1);
#if RULE_SINGLE
        if (k == 0 || fabs(s) > top) {
            top = fabs(s);
            q = rule_label_quality(s, g, h, l2, l1);
        }
#else
        const double qk = rule_label_quality(s, g, h, l2, l1);
        q = (k == 0) ? qk : q + qk;
#endif
    }
    return -q;
}
