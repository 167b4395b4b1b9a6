/* The quality of a complete head over a coupled label Hessian (the example-wise loss) for one candidate condition,
 * from the prefix sums over bins (mdhom.rules.device_coupled; mdhom.rules.coupled is the numpy reference, to the bit).
 *
 * scan (feat, lane, bin): lanes 0 .. k-1 the gradients of the head's labels, k .. width-1 their packed Hessian
 * (row-major lower triangle), lane width the covered examples and width + 1 those of non-zero weight; bins
 * 0 .. n_bins - 2 real, the last one NaN. The candidate (feat, bin, dir) is "bin <= b" (dir 0: the prefix at b)
 * or "bin > b" (dir 1: the prefix at the last real bin minus it). It needs covered examples with a real value on
 * both sides and min_coverage of non-zero weight on its own side, else -INFINITY.
 *
 * In the work-item's scratch (work_len >= P + k, P = k(k+1)/2): the regularised matrix (H + l2 I, packed), its
 * LDL^T factor in place, then s solving (H + l2 I) s = -soft(g, l1); the quality in mdhom.rules.coupled's order.
 * Returns minus the quality (the arg-max maximises; ties go to the lower index). Needs linalg/packed_ldl.cl.
 * The scratch is MDH_SCRATCH: private memory where the label-bin count keeps it small, else the global slice
 * (mdh.Scratch's private capacities; the generator defines the macro), the same operations in either. */
#pragma OPENCL FP_CONTRACT OFF

inline double rule_side(__global const double* scan, const long cell, const int bin, const int dir,
                        const int n_bins) {
    const double le = scan[cell + bin];
    return (dir == 0) ? le : scan[cell + n_bins - 2] - le;
}

inline double rule_coupled_gain(__global const double* scan, MDH_SCRATCH double* work, const long feat,
                                const int bin, const int dir, const int n_bins, const int k, const int n_lanes,
                                const double l2, const double l1, const double min_coverage) {
    const int width = n_lanes - 2;
    const long base = feat * n_lanes * (long)n_bins;
    const long cnt = base + (long)width * n_bins;
    const double le_cov = scan[cnt + bin], all_cov = scan[cnt + n_bins - 2];
    if (!(le_cov >= 1.0) || !(all_cov - le_cov >= 1.0)) return -INFINITY;
    if (!(rule_side(scan, cnt + n_bins, bin, dir, n_bins) >= min_coverage)) return -INFINITY;
    const long P = (long)k * (k + 1) / 2;
    MDH_SCRATCH double* a = work;
    MDH_SCRATCH double* s = work + P;
    for (long p = 0; p < P; ++p) a[p] = rule_side(scan, base + (k + p) * n_bins, bin, dir, n_bins);
    for (int i = 0; i < k; ++i) {
        const long d = (long)i * (i + 1) / 2 + i;
        a[d] = a[d] + l2;
        const double g = rule_side(scan, base + (long)i * n_bins, bin, dir, n_bins);
        double t = g;
        if (l1 > 0.0) {
            const double m = fmax(fabs(g) - l1, 0.0);
            t = (g > 0.0) ? m : ((g < 0.0) ? -m : 0.0 * m);
        }
        s[i] = -t;
    }
    mdh_ldl_packed(a, k);
    mdh_ldl_solve_packed(a, k, s);
    double q = 0.0;
    for (int i = 0; i < k; ++i) {
        const long row = (long)i * (i + 1) / 2;
        double t = 0.0;
        for (int j = 0; j < i; ++j) t = t + rule_side(scan, base + (k + row + j) * n_bins, bin, dir, n_bins) * s[j];
        const double hd = rule_side(scan, base + (k + row + i) * n_bins, bin, dir, n_bins);
        const double g = rule_side(scan, base + (long)i * n_bins, bin, dir, n_bins);
        const double si = s[i];
        const double qi = si * (g + 0.5 * hd * si + t) + l1 * fabs(si) + 0.5 * l2 * si * si;
        q = q + qi;
    }
    return isfinite(q) ? -q : -INFINITY;
}

/* ---- label binning (mdhom.rules.label_binning is the reference, to the bit; its criterion is a label's score,
 * rule_label_score of label_score.cl, which this file is built after) ---- */
/* ceil(ratio * n) in float, at least min(lo, n), at most hi where hi >= lo */
inline int rule_bounded(const int n, const float ratio, const int lo, const int hi) {
    const int r = (int)ceil(ratio * (float)n);
    const int mn = lo > n ? n : lo;
    if (r < mn) return mn;
    if (hi >= lo && r > hi) return hi;
    return r;
}

/* floor(...) as a bin index: NaN (a zero span) 0, at or past the last bin the last one */
inline int rule_bin_index(const double x, const int bins) {
    if (isnan(x)) return 0;
    return (int)fmax(fmin(x, (double)max(bins - 1, 0)), 0.0);
}

/* The binned head's gain: work holds the labels' bins (k), the bins' label counts, gradients (max_bins each), their
 * packed Hessian and its factor (P(max_bins) each), then the scores (max_bins; first the map of non-empty bins). */
inline double rule_binned_gain(__global const double* scan, MDH_SCRATCH double* work, const long feat,
                               const int bin, const int dir, const int n_bins, const int k, const int n_lanes,
                               const double l2, const double l1, const double min_coverage, const float lb_ratio,
                               const int lb_min, const int lb_max, const int max_bins) {
    const int width = n_lanes - 2;
    const long base = feat * n_lanes * (long)n_bins;
    const long cnt0 = base + (long)width * n_bins;
    const double le_cov = scan[cnt0 + bin], all_cov = scan[cnt0 + n_bins - 2];
    if (!(le_cov >= 1.0) || !(all_cov - le_cov >= 1.0)) return -INFINITY;
    if (!(rule_side(scan, cnt0 + n_bins, bin, dir, n_bins) >= min_coverage)) return -INFINITY;
    const long PB = (long)max_bins * (max_bins + 1) / 2;
    MDH_SCRATCH double* idx = work;
    MDH_SCRATCH double* cnt = idx + k;
    MDH_SCRATCH double* G = cnt + max_bins;
    MDH_SCRATCH double* H = G + max_bins;
    MDH_SCRATCH double* A = H + PB;
    MDH_SCRATCH double* s = A + PB;
    int n_neg = 0, n_pos = 0;
    double min_neg = 0.0, max_neg = -INFINITY, min_pos = INFINITY, max_pos = 0.0;
    for (int i = 0; i < k; ++i) {
        const double g = rule_side(scan, base + (long)i * n_bins, bin, dir, n_bins);
        const double hd = rule_side(scan, base + (k + (long)i * (i + 1) / 2 + i) * n_bins, bin, dir, n_bins);
        const double c = rule_label_score(g, hd, l2, l1);
        idx[i] = c;
        if (c < 0.0) {
            n_neg++;
            if (c < min_neg) min_neg = c;
            if (c > max_neg) max_neg = c;
        } else if (c > 0.0) {
            n_pos++;
            if (c < min_pos) min_pos = c;
            if (c > max_pos) max_pos = c;
        }
    }
    const int b_neg = n_neg > 0 ? rule_bounded(n_neg, lb_ratio, lb_min, lb_max) : 0;
    const int b_pos = n_pos > 0 ? rule_bounded(n_pos, lb_ratio, lb_min, lb_max) : 0;
    const double span_neg = (min_neg < 0.0) ? (max_neg - min_neg) / (double)b_neg : 0.0;
    const double span_pos = (max_pos > 0.0) ? (max_pos - min_pos) / (double)b_pos : 0.0;
    for (int b = 0; b < b_neg + b_pos; ++b) cnt[b] = 0.0;
    for (int i = 0; i < k; ++i) {
        const double c = idx[i];
        int b = -1;
        if (c < 0.0) b = rule_bin_index(floor((c - min_neg) / span_neg), b_neg);
        else if (c > 0.0) b = b_neg + rule_bin_index(floor((c - min_pos) / span_pos), b_pos);
        idx[i] = (double)b;
        if (b >= 0) cnt[b] = cnt[b] + 1.0;
    }
    int nb = 0;  /* drop empty bins: s holds each raw bin's new index for a moment */
    for (int b = 0; b < b_neg + b_pos; ++b) {
        s[b] = (double)nb;
        if (cnt[b] > 0.0) {
            cnt[nb] = cnt[b];
            nb++;
        }
    }
    for (int i = 0; i < k; ++i)
        if (idx[i] >= 0.0) idx[i] = s[(int)idx[i]];
    const long P = (long)nb * (nb + 1) / 2;
    for (int b = 0; b < nb; ++b) G[b] = 0.0;
    for (long p = 0; p < P; ++p) H[p] = 0.0;
    for (int i = 0; i < k; ++i) {
        if (idx[i] < 0.0) continue;
        const int b = (int)idx[i];
        G[b] = G[b] + rule_side(scan, base + (long)i * n_bins, bin, dir, n_bins);
        const long d = (long)b * (b + 1) / 2 + b;
        H[d] = H[d] + rule_side(scan, base + (k + (long)i * (i + 1) / 2 + i) * n_bins, bin, dir, n_bins);
    }
    for (int i = 1; i < k; ++i) {
        const int bi = (int)idx[i];
        if (bi < 0) continue;
        for (int j = 0; j < i; ++j) {
            const int bj = (int)idx[j];
            if (bj < 0 || bj == bi) continue;
            const int r = min(bi, bj), c = max(bi, bj);
            const long at = (long)c * (c + 1) / 2 + r;
            H[at] = H[at] + rule_side(scan, base + (k + (long)i * (i + 1) / 2 + j) * n_bins, bin, dir, n_bins);
        }
    }
    for (long p = 0; p < P; ++p) A[p] = H[p];
    for (int b = 0; b < nb; ++b) {
        const long d = (long)b * (b + 1) / 2 + b;
        A[d] = H[d] + cnt[b] * l2;
        double t = G[b];
        if (l1 > 0.0) {
            const double m = fmax(fabs(G[b]) - l1 * cnt[b], 0.0);
            t = (G[b] > 0.0) ? m : ((G[b] < 0.0) ? -m : 0.0 * m);
        }
        s[b] = -t;
    }
    mdh_ldl_packed(A, nb);
    mdh_ldl_solve_packed(A, nb, s);
    double q = 0.0;
    for (int b = 0; b < nb; ++b) {
        const long row = (long)b * (b + 1) / 2;
        double t = 0.0;
        for (int c = 0; c < b; ++c) t = t + H[row + c] * s[c];
        const double sb = s[b];
        const double qb = sb * (G[b] + 0.5 * H[row + b] * sb + t) + l1 * cnt[b] * fabs(sb) + 0.5 * l2 * cnt[b] * sb * sb;
        q = q + qb;
    }
    return isfinite(q) ? -q : -INFINITY;
}
