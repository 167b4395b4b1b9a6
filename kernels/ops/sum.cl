/* Sum, lane by lane: scalars, (gradient, hessian) structs and histogram arrays alike.
 * Exact for integer atoms; for floating point the order is fixed by the configuration. */
inline atom_t mdh_neutral(void) { return atom_zero(); }
inline atom_t mdh_combine(atom_t a, atom_t b) { return atom_add(a, b); }
