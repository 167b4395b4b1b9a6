/* A label's optimal score under L1 and L2 regularisation, -soft(g, l1) / (h + l2) (0 where h + l2 is 0:
 * mlrl-boomer's divideOrZero), with mdhom.rules.heads.label_scores' operations in its order: the head quality of
 * the decomposable search (head_quality.cl) and the label-binning criterion of the coupled one (coupled_quality.cl)
 * both start from it. */
#pragma OPENCL FP_CONTRACT OFF

inline double rule_label_score(const double g, const double h, const double l2, const double l1) {
    const double den = h + l2;
    double t = g;
    if (l1 > 0.0) {
        const double m = fmax(fabs(g) - l1, 0.0);
        t = (g > 0.0) ? m : ((g < 0.0) ? -m : 0.0 * m);
    }
    return (den == 0.0) ? 0.0 : -t / den;
}
