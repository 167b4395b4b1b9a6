/* Maximum, lane by lane; the neutral element is the lowest value of each lane's type. */
inline atom_t mdh_neutral(void) { return atom_lowest(); }
inline atom_t mdh_combine(atom_t a, atom_t b) { return atom_max(a, b); }
