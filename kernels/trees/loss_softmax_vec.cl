/* The vector form of the softmax loss's (g, h) (loss.cl's tree_loss_gh with TREE_LOSS 2, built after loss_vec.cl in
 * the gradient kernel's vector form: mdhom.components.gradients.gradients with vector=True, the portable exp only):
 * VEC rows at once at output k, each lane the bits tree_loss_gh gives for its row: the same maximum, exps and sum in
 * index order. A lane's exp(s_k - m) is the sum's term k, not an exp computed again (one function of one argument:
 * the same bits), so a row's K outputs take K^2 exps instead of K (K + 1). PoCL runs the scalar form's polynomial a
 * row at a time: 4x Intel's runtime's time (10^6 rows x 4 outputs, 2-core EPYC). */
#pragma OPENCL FP_CONTRACT OFF
#if VEC > 1
inline tree_real_v tree_softmax_scores_vec(__global const tree_real_t* scores, const long row, const int j,
                                           const int n_out) {
    union { tree_real_t s[VEC]; tree_real_v v; } x;  /* PoCL calls vload out of line */
    for (int s = 0; s < VEC; ++s) x.s[s] = scores[(row + s) * n_out + j];
    return x.v;
}

/* `is_k`: 1 in the lanes whose row's class is k, else 0 */
inline void tree_softmax_gh_vec(__global const tree_real_t* scores, const long row, const int k, const int n_out,
                                const tree_real_v is_k, const tree_real_t factor, tree_real_v* g, tree_real_v* h) {
    tree_real_v m = tree_softmax_scores_vec(scores, row, 0, n_out);
    for (int j = 1; j < n_out; ++j) {
        const tree_real_v x = tree_softmax_scores_vec(scores, row, j, n_out);
        m = (x > m) ? x : m;
    }
    tree_real_v total = tree_exp_nonpositive_vec(tree_softmax_scores_vec(scores, row, 0, n_out) - m);
    tree_real_v ek = total;
    for (int j = 1; j < n_out; ++j) {
        const tree_real_v e = tree_exp_nonpositive_vec(tree_softmax_scores_vec(scores, row, j, n_out) - m);
        total = total + e;
        if (j == k) ek = e;
    }
    const tree_real_v p = ek / total;
    *g = p - is_k;
    const tree_real_v v = factor * p * ((tree_real_t)1 - p);
    *h = (v < (tree_real_t)TREE_EPS) ? (tree_real_v)TREE_EPS : v;
}
#endif
