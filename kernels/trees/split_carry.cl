/* A candidate's left sums and its feature's totals from the histogram itself, for the split score's vector form
 * (mdhom.components.split.split_score with vector=True, what CPUs build) and the packed result read after it: the
 * score walks its features' bins in order, a feature a vector lane, and carries their running sums from bin to bin
 * (mdh_carry_t, the generator's Vector.carry), so no scan kernel writes prefix sums for it to read back. Sums are
 * added in bin order from the first bin's own value on, as np.cumsum adds (float64 histograms: the same bits as
 * tree_split_scan's pinned scan). A feature whose candidates are not its bins in order (a categorical one,
 * cat_mode != 0) reads the categorical scan (tree_split_scan_cat) instead, as tree_left_sums does.
 * Built after split.cl; histograms and scans are laid out (node, feature, output, bin, 2). */
#pragma OPENCL FP_CONTRACT OFF

/* (node, feature, output k)'s first cell (bin 0). */
__attribute__((always_inline)) inline long tree_cell(const long node, const long n_feat, const long feat, const int k) {
    return ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
}

/* Adds bins [from, to) of a cell's histogram to (g, h) in bin order; bin 0 sets them (np.cumsum's first element). */
__attribute__((always_inline)) inline void tree_sum_bins(__global const tree_hist_t* hist, const long cell, int from,
                                                         const int to, tree_hist_t* g, tree_hist_t* h) {
    if (from == 0 && to > 0) {
        *g = hist[2 * cell];
        *h = hist[2 * cell + 1];
        from = 1;
    }
#if TREE_QUANTIZED
    tree_hist_t sg = *g, sh = *h;  /* integers: any order gives the same sums */
#else
    /* in bin order: Intel's CPU compiler vectorizes a sum of doubles into another order where a launch is too small
     * for its work-item vectors (fewer than 16 nodes: other last bits, a model file unlike numpy's), a loop pragma
     * notwithstanding; a partial sum stored after every 8 bins makes it add them one by one. Stored after every bin,
     * the store's round trip was the score's longest wait (PoCL, 2-core EPYC, 256 bins: ~40% of the kernel's
     * samples) */
    volatile tree_hist_t sg = *g, sh = *h;
    for (; from + 8 <= to; from += 8) {
        tree_hist_t rg = sg, rh = sh;
        const long c = 2 * (cell + from);
        rg = rg + hist[c];       rh = rh + hist[c + 1];
        rg = rg + hist[c + 2];   rh = rh + hist[c + 3];
        rg = rg + hist[c + 4];   rh = rh + hist[c + 5];
        rg = rg + hist[c + 6];   rh = rh + hist[c + 7];
        rg = rg + hist[c + 8];   rh = rh + hist[c + 9];
        rg = rg + hist[c + 10];  rh = rh + hist[c + 11];
        rg = rg + hist[c + 12];  rh = rh + hist[c + 13];
        rg = rg + hist[c + 14];  rh = rh + hist[c + 15];
        sg = rg;
        sh = rh;
    }
#endif
    for (int b = from; b < to; ++b) {
        sg = sg + hist[2 * (cell + b)];
        sh = sh + hist[2 * (cell + b) + 1];
    }
    *g = sg;
    *h = sh;
}

/* Whether any output's missing bin of (node, feature) holds rows: default-right is scored only then (an empty
 * missing bin makes it default-left's split, one index higher: it never wins, tree_gain). */
__attribute__((always_inline)) inline int tree_has_missing(__global const tree_hist_t* hist, const long node,
                                                           const long n_feat, const long feat) {
    int missing = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long m = 2 * (tree_cell(node, n_feat, feat, k) + TREE_BINS - 1);
        missing |= (hist[m] != 0) | (hist[m + 1] != 0);
    }
    return missing;
}

/* Left sums of candidate (bin, dir) and the totals of one (node, feature, output) cell, one candidate alone (the
 * scalar form): from the categorical scan where `sorted`, else summed from the histogram. */
__attribute__((always_inline)) inline void tree_candidate_sums(__global const tree_hist_t* scan,
                                                               __global const tree_hist_t* hist, const int sorted,
                                                               const long cell, const int bin, const int dir,
                                                               tree_hist_t* lg, tree_hist_t* lh, tree_hist_t* tg,
                                                               tree_hist_t* th) {
    if (sorted) {
        tree_left_sums(scan, hist, cell, bin, dir, lg, lh);
        *tg = scan[2 * (cell + TREE_BINS - 1)];
        *th = scan[2 * (cell + TREE_BINS - 1) + 1];
        return;
    }
    tree_sum_bins(hist, cell, 0, bin + 1, lg, lh);
    tree_sum_bins(hist, cell, 0, TREE_BINS, tg, th);
    if (dir == 0) {  /* the missing bin goes left */
        *lg = *lg + hist[2 * (cell + TREE_BINS - 1)];
        *lh = *lh + hist[2 * (cell + TREE_BINS - 1) + 1];
    }
}

#if VEC > 1
/* The vector form's lanes are features: lane s of a block of features feat .. feat + VEC - 1 walks feature feat + s's
 * bins in order and carries its own running sums, so each lane adds what np.cumsum adds for its feature, no lane
 * waits for the sums of the lane before, and a feature's totals are VEC features' at once. Lanes past the dimension
 * (from a block's mdh_vn on) read the block's last feature and are never folded. The cells of neighbouring features
 * are TREE_FEAT_STRIDE histogram lanes apart. */
#define TREE_FEAT_STRIDE (2L * TREE_OUTPUTS * TREE_BINS)
#define TREE_LANE_OF(s, vn) ((long)((s) < (vn) ? (s) : (vn) - 1) * TREE_FEAT_STRIDE)
/* The lanes' values at p (lane 0's; lane s's TREE_LANE_OF(s) further), built from scalars: through a union (lanes
 * stored and read back as a vector) PoCL's code waited on memory. */
__attribute__((always_inline)) inline tree_hist_v tree_feat_lanes(__global const tree_hist_t* p, const int vn) {
#if VEC == 2
    return (tree_hist_v)(p[0], p[TREE_LANE_OF(1, vn)]);
#elif VEC == 4
    return (tree_hist_v)(p[0], p[TREE_LANE_OF(1, vn)], p[TREE_LANE_OF(2, vn)], p[TREE_LANE_OF(3, vn)]);
#else
    return (tree_hist_v)(p[0], p[TREE_LANE_OF(1, vn)], p[TREE_LANE_OF(2, vn)], p[TREE_LANE_OF(3, vn)],
                         p[TREE_LANE_OF(4, vn)], p[TREE_LANE_OF(5, vn)], p[TREE_LANE_OF(6, vn)],
                         p[TREE_LANE_OF(7, vn)]);
#endif
}

/* Adds bins [from, to) of the lanes' cells (`cell`: lane 0's) to (g, h) in bin order; bin 0 sets them (np.cumsum's
 * first element). */
__attribute__((always_inline)) inline void tree_feat_sum_bins(__global const tree_hist_t* hist, const long cell,
                                                              const int vn, int from, const int to, tree_hist_v* g,
                                                              tree_hist_v* h) {
    __global const tree_hist_t* p = hist + 2 * cell;
    if (from == 0 && to > 0) {
        *g = tree_feat_lanes(p, vn);
        *h = tree_feat_lanes(p + 1, vn);
        from = 1;
    }
#if TREE_QUANTIZED
    tree_hist_v sg = *g, sh = *h;  /* integers: any order gives the same sums */
#else
    /* in bin order, a partial sum stored after every 8 bins, as tree_sum_bins does (Intel's CPU compiler) */
    volatile tree_hist_v sg = *g, sh = *h;
    for (; from + 8 <= to; from += 8) {
        tree_hist_v rg = sg, rh = sh;
        __global const tree_hist_t* q = p + 2 * from;
        rg = rg + tree_feat_lanes(q, vn);       rh = rh + tree_feat_lanes(q + 1, vn);
        rg = rg + tree_feat_lanes(q + 2, vn);   rh = rh + tree_feat_lanes(q + 3, vn);
        rg = rg + tree_feat_lanes(q + 4, vn);   rh = rh + tree_feat_lanes(q + 5, vn);
        rg = rg + tree_feat_lanes(q + 6, vn);   rh = rh + tree_feat_lanes(q + 7, vn);
        rg = rg + tree_feat_lanes(q + 8, vn);   rh = rh + tree_feat_lanes(q + 9, vn);
        rg = rg + tree_feat_lanes(q + 10, vn);  rh = rh + tree_feat_lanes(q + 11, vn);
        rg = rg + tree_feat_lanes(q + 12, vn);  rh = rh + tree_feat_lanes(q + 13, vn);
        rg = rg + tree_feat_lanes(q + 14, vn);  rh = rh + tree_feat_lanes(q + 15, vn);
        sg = rg;
        sh = rh;
    }
#endif
    for (int b = from; b < to; ++b) {
        sg = sg + tree_feat_lanes(p + 2 * b, vn);
        sh = sh + tree_feat_lanes(p + 2 * b + 1, vn);
    }
    *g = sg;
    *h = sh;
}
#endif
