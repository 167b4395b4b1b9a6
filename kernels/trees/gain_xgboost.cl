/* XGBoost's split gain, the split evaluator's default scalar function (mdhom.components.split.XGBOOST_GAIN):
 * 0.5 * sum_k [S(G_L)^2/(H_L+lambda) + S(G_R)^2/(H_R+lambda) - S(G)^2/(H+lambda)] - min_split_gain, both sides
 * holding a hessian sum >= min_child_weight. Built after split.cl (tree_left_sums, TREE_REAL_OF). A gain file
 * defines tree_gain(scan, hist, node, n_feat, feat, bin, dir, <its parameters> TREE_INV_DECL). */
#pragma OPENCL FP_CONTRACT OFF

/* XGBoost's ThresholdL1: sign(g) * max(|g| - alpha, 0). */
inline tree_real_t tree_soft_threshold(const tree_real_t g, const tree_real_t alpha) {
    tree_real_t t = fabs(g) - alpha;
    t = (t > (tree_real_t)0) ? t : (tree_real_t)0;
    return (g > (tree_real_t)0) ? t : ((g < (tree_real_t)0) ? -t : (tree_real_t)0);
}

/* S(G)^2 / (H + lambda): one output's contribution to the structure score of a leaf. */
inline tree_real_t tree_score(const tree_real_t g, const tree_real_t h, const tree_real_t lambda,
                              const tree_real_t alpha) {
    const tree_real_t s = tree_soft_threshold(g, alpha);
    return s * s / (h + lambda);
}

/* Gain of candidate (feature, bin, dir) of node `node`, or -INFINITY when it is not allowed. */
inline tree_real_t tree_gain(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node,
                             const long n_feat, const long feat, const int bin, const int dir,
                             const tree_real_t lambda, const tree_real_t alpha, const tree_real_t min_split_gain,
                             const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_t sl = 0, sr = 0, sp = 0, hl = 0, hr = 0;
    if (dir == 1) {
        /* An empty missing bin makes default-right the same split as default-left, with the same gain bit for
         * bit, and its index is one higher: it can never win the argmax, so it is not scored (half of a node's
         * candidates where a feature has no missing values; split search on PoCL 1.9x faster) */
        int missing = 0;
        for (int k = 0; k < TREE_OUTPUTS; ++k) {
            const long m = 2 * (((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS + TREE_BINS - 1);
            missing |= (hist[m] != 0) | (hist[m + 1] != 0);
        }
        if (!missing) return -INFINITY;
    }
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long cell = ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
        const tree_hist_t tgq = scan[2 * (cell + TREE_BINS - 1)];
        const tree_hist_t thq = scan[2 * (cell + TREE_BINS - 1) + 1];
        tree_hist_t lgq, lhq;
        tree_left_sums(scan, hist, cell, bin, dir, &lgq, &lhq);
        const tree_real_t tg = TREE_REAL_OF(tgq, k, 0), th = TREE_REAL_OF(thq, k, 1);
        const tree_real_t lg = TREE_REAL_OF(lgq, k, 0), lh = TREE_REAL_OF(lhq, k, 1);
        const tree_real_t rg = TREE_REAL_OF(tgq - lgq, k, 0);
        const tree_real_t rh = TREE_REAL_OF(thq - lhq, k, 1);
        if (k == 0) {
            sl = tree_score(lg, lh, lambda, alpha);
            sr = tree_score(rg, rh, lambda, alpha);
            sp = tree_score(tg, th, lambda, alpha);
            hl = lh;
            hr = rh;
        } else {
            sl = sl + tree_score(lg, lh, lambda, alpha);
            sr = sr + tree_score(rg, rh, lambda, alpha);
            sp = sp + tree_score(tg, th, lambda, alpha);
            hl = hl + lh;
            hr = hr + rh;
        }
    }
    if (!(hl >= min_child_weight && hr >= min_child_weight)) return -INFINITY;
    const tree_real_t gain = (tree_real_t)0.5 * ((sl + sr) - sp) - min_split_gain;
    return isfinite(gain) ? gain : -INFINITY;   /* 0/0 with lambda = 0 never wins */
}
