/* A candidate's left sums and its feature's totals from the histogram itself, for the split score's vector form
 * (mdhom.components.split.split_score with vector=True, what CPUs build) and the packed result read after it: the
 * score walks a feature's bins in order and carries their running sums from block to block (mdh_carry_t, the
 * generator's Vector.carry), so no scan kernel writes prefix sums for it to read back. Sums are added in bin order
 * from the first bin's own value on, as np.cumsum adds (float64 histograms: the same bits as tree_split_scan's pinned
 * scan). A feature whose candidates are not its bins in order (a categorical one, cat_mode != 0) reads the
 * categorical scan (tree_split_scan_cat) instead, as tree_left_sums does.
 * Built after split.cl; histograms and scans are laid out (node, feature, output, bin, 2). */
#pragma OPENCL FP_CONTRACT OFF

/* (node, feature, output k)'s first cell (bin 0). */
__attribute__((always_inline)) inline long tree_cell(const long node, const long n_feat, const long feat, const int k) {
    return ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
}

/* Adds bins [from, to) of a cell's histogram to (g, h) in bin order; bin 0 sets them (np.cumsum's first element). */
__attribute__((always_inline)) inline void tree_sum_bins(__global const tree_hist_t* hist, const long cell, int from, const int to,
                          tree_hist_t* g, tree_hist_t* h) {
    if (from == 0 && to > 0) {
        *g = hist[2 * cell];
        *h = hist[2 * cell + 1];
        from = 1;
    }
#if TREE_QUANTIZED
    tree_hist_t sg = *g, sh = *h;  /* integers: any order gives the same sums */
#else
    /* in bin order: Intel's CPU compiler vectorizes a sum of doubles into another order where a launch is too small for
     * its work-item vectors (fewer than 16 nodes: other last bits, a model file unlike numpy's), a loop pragma
     * notwithstanding; a partial sum stored after every 8 bins makes it add them one by one. Stored after every bin,
     * the store's round trip was the score's longest wait (PoCL, 2-core EPYC, 256 bins: ~40% of the kernel's samples) */
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
__attribute__((always_inline)) inline int tree_has_missing(__global const tree_hist_t* hist, const long node, const long n_feat, const long feat) {
    int missing = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long m = 2 * (tree_cell(node, n_feat, feat, k) + TREE_BINS - 1);
        missing |= (hist[m] != 0) | (hist[m + 1] != 0);
    }
    return missing;
}

/* Left sums of candidate (bin, dir) and the totals of one (node, feature, output) cell, one candidate alone (the
 * scalar form): from the categorical scan where `sorted`, else summed from the histogram. */
__attribute__((always_inline)) inline void tree_candidate_sums(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const int sorted,
                                const long cell, const int bin, const int dir, tree_hist_t* lg, tree_hist_t* lh,
                                tree_hist_t* tg, tree_hist_t* th) {
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
/* The running sums through each of bins bin .. bin + VEC - 1 of a cell (the first vn of them; the lanes after repeat
 * the last) into (lg, lh), from (g, h), the sums of the bins before `bin`, which end as the sums through the block.
 * Lane by lane in scalars, the vectors made of them at the end: through a union (vector stores read back as lanes,
 * lanes stored and read back as a vector) PoCL's code waited on memory (2-core Xeon, 128 nodes' candidates at 256
 * bins: 5.1 ms a launch against 2.3 without the sums at all). */
#define TREE_LANE(s, p)                                                                           \
    const tree_hist_t g##s = ((s) < vn) ? g##p + hist[2 * (cell + bin + (s))] : g##p;          \
    const tree_hist_t h##s = ((s) < vn) ? h##p + hist[2 * (cell + bin + (s)) + 1] : h##p;
__attribute__((always_inline)) inline void tree_block_lanes(__global const tree_hist_t* hist, const long cell,
                                                            const int bin, const int vn, tree_hist_t* g,
                                                            tree_hist_t* h, tree_hist_v* lg, tree_hist_v* lh) {
    /* bin 0's sum is its own value (np.cumsum's first element) */
    const tree_hist_t g0 = (bin == 0) ? hist[2 * cell] : *g + hist[2 * (cell + bin)];
    const tree_hist_t h0 = (bin == 0) ? hist[2 * cell + 1] : *h + hist[2 * (cell + bin) + 1];
    TREE_LANE(1, 0)
#if VEC == 2
    *lg = (tree_hist_v)(g0, g1);
    *lh = (tree_hist_v)(h0, h1);
    *g = g1;
    *h = h1;
#else
    TREE_LANE(2, 1) TREE_LANE(3, 2)
#if VEC == 4
    *lg = (tree_hist_v)(g0, g1, g2, g3);
    *lh = (tree_hist_v)(h0, h1, h2, h3);
    *g = g3;
    *h = h3;
#else
    TREE_LANE(4, 3) TREE_LANE(5, 4) TREE_LANE(6, 5) TREE_LANE(7, 6)
    *lg = (tree_hist_v)(g0, g1, g2, g3, g4, g5, g6, g7);
    *lh = (tree_hist_v)(h0, h1, h2, h3, h4, h5, h6, h7);
    *g = g7;
    *h = h7;
#endif
#endif
}
#undef TREE_LANE

/* The same from the categorical scan (a sorted feature's candidates), as tree_left_sums reads it, lane by lane: a
 * block may reach past the feature's bins. */
__attribute__((always_inline)) inline void tree_block_sums_scan(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long cell,
                                 const int bin, const int vn, const int dir, tree_hist_v* lg, tree_hist_v* lh) {
    union { tree_hist_t s[VEC]; tree_hist_v v; } ug, uh;
    tree_hist_t g = 0, h = 0;
    for (int s = 0; s < VEC; ++s) {
        if (s < vn) tree_left_sums(scan, hist, cell, bin + s, dir, &g, &h);
        ug.s[s] = g;
        uh.s[s] = h;
    }
    *lg = ug.v;
    *lh = uh.v;
}
#endif
