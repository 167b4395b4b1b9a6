/* The vector form of the logistic loss's (g, h) (loss.cl, built after it in the gradient kernel's vector form:
 * mdhom.components.gradients.gradients with vector=True, the portable exp only): VEC rows at once in vector types
 * (tree_real_v, mdhom.components.lanes.vector_defines), each lane the bits tree_loss_gh gives for its row.
 * mdh_rint and mdh_ldexp of the prelude, lane by lane: the same IEEE operations in the same order. */
#pragma OPENCL FP_CONTRACT OFF
#if VEC > 1
typedef MDH_VT(long) tree_long_v;
typedef MDH_VT(ulong) tree_ulong_v;
#define as_tree_real_v MDH_CAT(as_, MDH_VT(double))
#define as_tree_long_v MDH_CAT(as_, MDH_VT(long))
#define as_tree_ulong_v MDH_CAT(as_, MDH_VT(ulong))

/* fabs and copysign by their bits: PoCL calls the builtins out of line, a call a lane */
#define TREE_SIGN_V ((tree_ulong_v)0x8000000000000000UL)
inline tree_real_v tree_fabs_vec(const tree_real_v x) { return as_tree_real_v(as_tree_ulong_v(x) & ~TREE_SIGN_V); }

inline tree_real_v tree_rint_vec(const tree_real_v x) {
    const tree_real_v a = tree_fabs_vec(x);
    const tree_real_v r = (a + 0x1.0p52) - 0x1.0p52;
    return (a < 0x1.0p52) ? as_tree_real_v(as_tree_ulong_v(r) | (as_tree_ulong_v(x) & TREE_SIGN_V)) : x;
}

/* An integer-valued k, |k| < 2^51, as a long by its bits: k + 1.5 * 2^52 is exact and holds k in its low bits.
 * No convert_ builtin: on a Zen 4 EPYC (AVX-512), PoCL 3.0's LLVM (target znver3) cannot select convert_int8 of a
 * double8 and aborts the process ("Cannot select ... X86ISD::CVTTP2SI"). */
inline tree_long_v tree_long_of_vec(const tree_real_v k) {
    return as_tree_long_v(k + 0x1.8p52) - (tree_long_v)0x4338000000000000L;
}

/* 2^e lane by lane for e in [-1022, 1023] (other lanes: bits that a select discards; shifted unsigned) */
inline tree_real_v tree_pow2_vec(const tree_long_v e) {
    return as_tree_real_v(as_tree_ulong_v(e + 1023) << 52);
}

inline tree_real_v tree_ldexp_vec(const tree_real_v p, const tree_long_v k) {
    const tree_long_v kk = (k < (tree_long_v)(-2042)) ? (tree_long_v)(-2042) : k;
    const tree_real_v low = (p * tree_pow2_vec(kk + 1021)) * tree_pow2_vec((tree_long_v)(-1021));
    return (kk < -1022) ? low : p * tree_pow2_vec(kk);
}

inline tree_real_v tree_exp_nonpositive_vec(tree_real_v x) {
    x = (x < TREE_EXP_MIN) ? (tree_real_v)TREE_EXP_MIN : x;
    const tree_real_v k = tree_rint_vec(x * TREE_INV_LN2);
    const tree_real_v r = (x - k * TREE_LN2_HI) - k * TREE_LN2_LO;
    tree_real_v p = (tree_real_v)TREE_EXP_C0;
    p = p * r + TREE_EXP_C1; p = p * r + TREE_EXP_C2; p = p * r + TREE_EXP_C3; p = p * r + TREE_EXP_C4;
    p = p * r + TREE_EXP_C5; p = p * r + TREE_EXP_C6; p = p * r + TREE_EXP_C7; p = p * r + TREE_EXP_C8;
    p = p * r + TREE_EXP_C9; p = p * r + TREE_EXP_C10; p = p * r + TREE_EXP_C11; p = p * r + TREE_EXP_C12;
    p = p * r + TREE_EXP_C13;
    return tree_ldexp_vec(p, tree_long_of_vec(k));
}

/* tree_loss_gh of the logistic loss for `x` the scores and `y` the targets of VEC rows. */
inline void tree_logistic_gh_vec(const tree_real_v x, const tree_real_v y, tree_real_v* g, tree_real_v* h) {
    const tree_real_v e = tree_exp_nonpositive_vec(-tree_fabs_vec(x));
    const tree_real_v p = (x >= (tree_real_t)0) ? (tree_real_t)1 / ((tree_real_t)1 + e) : e / ((tree_real_t)1 + e);
    *g = p - y;
    const tree_real_v v = p * ((tree_real_t)1 - p);
    *h = (v < (tree_real_t)TREE_EPS) ? (tree_real_v)TREE_EPS : v;
}
#endif
