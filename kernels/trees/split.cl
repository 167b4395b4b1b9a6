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

/* Categorical splits (mdhom.trees.reference.category_predicate). A feature's mode: 0 numeric (bin <= candidate
 * goes left), TREE_ONE_VS_REST (the candidate's bin alone), TREE_SORTED (the bins ordered at or before the
 * candidate by G / (H + cat_smooth) of output 0, +inf for a bin without hessian, ties by bin). `cell0` indexes
 * (node, feature, output 0, bin 0) of the histograms. */
#define TREE_ONE_VS_REST 1
#define TREE_SORTED 2

inline tree_real_t tree_cat_key(__global const tree_hist_t* hist, const long cell0, const int b,
                                const tree_real_t smooth TREE_INV_DECL) {
    const tree_real_t g = TREE_REAL_OF(hist[2 * (cell0 + b)], 0, 0);
    const tree_real_t h = TREE_REAL_OF(hist[2 * (cell0 + b) + 1], 0, 1);
    return (h > (tree_real_t)0) ? g / (h + smooth) : (tree_real_t)INFINITY;
}

/* Whether real bin c2 goes left under candidate c of a feature of mode `mode`. */
inline int tree_cat_goes_left(__global const tree_hist_t* hist, const long cell0, const int mode, const int c2,
                              const int c, const tree_real_t smooth TREE_INV_DECL) {
    if (mode == 0) return c2 <= c;
    if (mode == TREE_ONE_VS_REST) return c2 == c;
    const tree_real_t k2 = tree_cat_key(hist, cell0, c2, smooth TREE_INV_ARG);
    const tree_real_t k = tree_cat_key(hist, cell0, c, smooth TREE_INV_ARG);
    return (k2 < k) || (k2 == k && c2 <= c);
}
