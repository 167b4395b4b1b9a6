/* Split scoring shared by tree_split_score and tree_split_sums (see mdhom/trees/backend.py for the rule);
 * the gain itself, tree_gain(), comes from a gain file after this one (gain_xgboost.cl: XGBoost's).
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
