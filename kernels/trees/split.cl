/* Split scoring shared by tree_split_score and tree_split_sums (see mdhom/trees/backend.py for the rule).
 * The arithmetic follows mdhom.trees.reference.best_splits operation by operation (same order, no fused
 * multiply-add), so in double precision equal histograms give bit-identical gains and ties break alike.
 * Expects: tree_real_t, tree_hist_t (the histogram lanes: tree_real_t, or int when TREE_QUANTIZED),
 * TREE_BINS (bins incl. the missing bin), TREE_OUTPUTS. Histograms and their scans are laid out
 * (node, feature, output, bin, 2) with the last axis (sum g, sum h).
 * Quantized: sums are int32 fixed point; left, right and total are formed in integers (exact) and turned
 * into reals by TREE_REAL_OF, (double)q * 2^-k with the round's scale per (output, g|h) from `inv_scale`. */
#pragma OPENCL FP_CONTRACT OFF
#ifndef TREE_BINS
#define TREE_BINS 64
#endif
#ifndef TREE_OUTPUTS
#define TREE_OUTPUTS 1
#endif
#ifndef TREE_QUANTIZED
#define TREE_QUANTIZED 0
#endif

#if TREE_QUANTIZED
#define TREE_INV_DECL , __global const tree_real_t* inv_scale
#define TREE_INV_ARG , inv_scale
#define TREE_REAL_OF(q, k, c) ((tree_real_t)(q) * inv_scale[2 * (k) + (c)])
#else
#define TREE_INV_DECL
#define TREE_INV_ARG
#define TREE_REAL_OF(q, k, c) (q)
#endif

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

/* Left sums of candidate (bin, dir) for one (node, feature, output): the inclusive prefix up to `bin`, plus
 * the missing bin when dir == 0 (default left). `cell` indexes (node, feature, output, bin 0). */
inline void tree_left_sums(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long cell,
                           const int bin, const int dir, tree_hist_t* lg, tree_hist_t* lh) {
    tree_hist_t g = scan[2 * (cell + bin)];
    tree_hist_t h = scan[2 * (cell + bin) + 1];
    if (dir == 0) {
        g = g + hist[2 * (cell + TREE_BINS - 1)];
        h = h + hist[2 * (cell + TREE_BINS - 1) + 1];
    }
    *lg = g;
    *lh = h;
}

/* Gain of candidate (feature, bin, dir) of node `node`, or -INFINITY when it is not allowed. */
inline tree_real_t tree_gain(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node,
                             const long n_feat, const long feat, const int bin, const int dir,
                             const tree_real_t lambda, const tree_real_t alpha, const tree_real_t min_split_gain,
                             const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_t sl = 0, sr = 0, sp = 0, hl = 0, hr = 0;
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
