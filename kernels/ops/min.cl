/* Minimum, lane by lane; the neutral element is the highest value of each lane's type. */
inline atom_t mdh_neutral(void) { return atom_highest(); }
inline atom_t mdh_combine(atom_t a, atom_t b) { return atom_min(a, b); }
