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
 * Returns minus the quality (the arg-max maximises; ties go to the lower index). Needs linalg/packed_ldl.cl. */
#pragma OPENCL FP_CONTRACT OFF

inline double rule_side(__global const double* scan, const long cell, const int bin, const int dir,
                        const int n_bins) {
    const double le = scan[cell + bin];
    return (dir == 0) ? le : scan[cell + n_bins - 2] - le;
}

inline double rule_coupled_gain(__global const double* scan, __global double* work, const long feat, const int bin,
                                const int dir, const int n_bins, const int k, const int n_lanes, const double l2,
                                const double l1, const double min_coverage) {
    const int width = n_lanes - 2;
    const long base = feat * n_lanes * (long)n_bins;
    const long cnt = base + (long)width * n_bins;
    const double le_cov = scan[cnt + bin], all_cov = scan[cnt + n_bins - 2];
    if (!(le_cov >= 1.0) || !(all_cov - le_cov >= 1.0)) return -INFINITY;
    if (!(rule_side(scan, cnt + n_bins, bin, dir, n_bins) >= min_coverage)) return -INFINITY;
    const long P = (long)k * (k + 1) / 2;
    __global double* a = work;
    __global double* s = work + P;
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
