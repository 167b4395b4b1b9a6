/* Gradients and hessians of the boosting losses at one (row, output), and the exp they need.
 * The numpy references are mdhom.learn.portable.exp_nonpositive and mdhom.learn.losses (sigmoid_exact,
 * softmax_exact, Loss.gradients):
 * same operations in the same order, no contraction into FMA, so double precision agrees to the bit.
 * Expects tree_real_t, TREE_LOSS (0 squared error, 1 logistic, 2 softmax), TREE_EXP_EXACT (1: the portable
 * exp below with constants TREE_INV_LN2, TREE_LN2_HI, TREE_LN2_LO, TREE_EXP_MIN, TREE_EXP_C0..C13 given as
 * hex literals by the host; 0: the device's exp) and TREE_EPS. Scores and targets are (row, output);
 * a softmax target is one class index per row. */
#pragma OPENCL FP_CONTRACT OFF
#ifndef TREE_LOSS
#define TREE_LOSS 0
#endif
#ifndef TREE_EXP_EXACT
#define TREE_EXP_EXACT 0
#endif

/* exp(x) for x <= 0: 2^k * p(r), x = k ln2 + r, p the degree-13 Taylor polynomial by Horner's rule; rint and ldexp
 * are the generator's exact inline forms (mdh_rint, mdh_ldexp: the library calls' bits, without the calls). */
inline tree_real_t tree_exp_nonpositive(tree_real_t x) {
#if TREE_EXP_EXACT
    x = (x < TREE_EXP_MIN) ? TREE_EXP_MIN : x;
    const tree_real_t k = mdh_rint(x * TREE_INV_LN2);
    const tree_real_t r = (x - k * TREE_LN2_HI) - k * TREE_LN2_LO;
    tree_real_t p = TREE_EXP_C0;
    p = p * r + TREE_EXP_C1; p = p * r + TREE_EXP_C2; p = p * r + TREE_EXP_C3; p = p * r + TREE_EXP_C4;
    p = p * r + TREE_EXP_C5; p = p * r + TREE_EXP_C6; p = p * r + TREE_EXP_C7; p = p * r + TREE_EXP_C8;
    p = p * r + TREE_EXP_C9; p = p * r + TREE_EXP_C10; p = p * r + TREE_EXP_C11; p = p * r + TREE_EXP_C12;
    p = p * r + TREE_EXP_C13;
    return mdh_ldexp(p, (int)k);  /* p in [0.70, 1.42]: within mdh_ldexp's domain */
#else
    return exp(x);
#endif
}

inline tree_real_t tree_floor_eps(const tree_real_t v) {
    return (v < (tree_real_t)TREE_EPS) ? (tree_real_t)TREE_EPS : v;   /* np.maximum(v, eps); NaN stays NaN */
}

/* Unweighted (g, h) of output k of row `row`. */
inline void tree_loss_gh(__global const tree_real_t* scores, __global const tree_real_t* y, const long row,
                         const int k, const int n_out, const tree_real_t factor, tree_real_t* g, tree_real_t* h) {
    const long i = row * n_out + k;
#if TREE_LOSS == 0
    *g = scores[i] - y[i];
    *h = (tree_real_t)1;
#elif TREE_LOSS == 1
    const tree_real_t x = scores[i];
    const tree_real_t e = tree_exp_nonpositive(-fabs(x));
    const tree_real_t p = (x >= (tree_real_t)0) ? (tree_real_t)1 / ((tree_real_t)1 + e) : e / ((tree_real_t)1 + e);
    *g = p - y[i];
    *h = tree_floor_eps(p * ((tree_real_t)1 - p));
#else
    __global const tree_real_t* s = scores + row * n_out;
    tree_real_t m = s[0];
    for (int j = 1; j < n_out; ++j) m = (s[j] > m) ? s[j] : m;
    tree_real_t total = tree_exp_nonpositive(s[0] - m);
    for (int j = 1; j < n_out; ++j) total = total + tree_exp_nonpositive(s[j] - m);
    const tree_real_t p = tree_exp_nonpositive(s[k] - m) / total;
    *g = p - (((int)y[row] == k) ? (tree_real_t)1 : (tree_real_t)0);
    *h = tree_floor_eps(factor * p * ((tree_real_t)1 - p));
#endif
}
