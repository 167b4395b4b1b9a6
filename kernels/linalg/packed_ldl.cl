/* A fixed-order LDL^T factorisation and solve of one small symmetric matrix in packed lower-triangular storage
 * (row-major: entry (i, j), j <= i, at i(i+1)/2 + j), for scalar functions that solve their own system (one
 * candidate's regularised Hessian); the matrix lives in the description's Scratch memory.
 * mdhom.mdh.linalg holds the numpy twin: the same operations in the same order, so double results agree to the
 * bit (FP_CONTRACT OFF, no pivoting; a zero pivot gives a zero row, mlrl-boomer's divide-or-zero).
 *
 * mdh_ldl_packed: in place, row by row; in row i each W_ij = A_ij - sum_{m<j} W_im L_jm is formed by subtracting
 * the terms in increasing m, then L_ij = W_ij / D_j and D_i = A_ii - sum_{j<i} W_ij L_ij in increasing j.
 * Afterwards a holds L below the diagonal and D on it. No square roots: needs no positive definiteness. */
#pragma OPENCL FP_CONTRACT OFF

/* The address space of the matrix and vector: the generator's (Scratch.private), global when used on its own. */
#ifndef MDH_SCRATCH
#define MDH_SCRATCH __global
#endif

inline void mdh_ldl_packed(MDH_SCRATCH double* a, const int k) {
    for (int i = 0; i < k; ++i) {
        MDH_SCRATCH double* row = a + (long)i * (i + 1) / 2;
        for (int m = 0; m < i; ++m) {
            const double w = row[m];
            for (int j = m + 1; j < i; ++j) row[j] = row[j] - w * a[(long)j * (j + 1) / 2 + m];
        }
        double d = row[i];
        for (int j = 0; j < i; ++j) {
            const double w = row[j], dj = a[(long)j * (j + 1) / 2 + j];
            const double l = (dj == 0.0) ? 0.0 : w / dj;
            d = d - w * l;
            row[j] = l;
        }
        row[i] = d;
    }
}

/* Solve L D L^T x = x in place for a factor from mdh_ldl_packed: forward (x_i -= L_ij x_j for j ascending),
 * divide by D (0 where D_i is 0), backward (x_i -= L_ji x_j for j descending). */
inline void mdh_ldl_solve_packed(MDH_SCRATCH const double* a, const int k, MDH_SCRATCH double* x) {
    for (int j = 0; j < k; ++j) {
        const double xj = x[j];
        for (int i = j + 1; i < k; ++i) x[i] = x[i] - a[(long)i * (i + 1) / 2 + j] * xj;
    }
    for (int i = 0; i < k; ++i) {
        const double d = a[(long)i * (i + 1) / 2 + i];
        x[i] = (d == 0.0) ? 0.0 : x[i] / d;
    }
    for (int j = k - 1; j >= 0; --j) {
        const double xj = x[j];
        const long row = (long)j * (j + 1) / 2;
        for (int i = 0; i < j; ++i) x[i] = x[i] - a[row + i] * xj;
    }
}
