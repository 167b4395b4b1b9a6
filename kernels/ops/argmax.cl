/* Argmax with index: the atom is a struct { value; index; }.
 * Ties go to the lower index, so the result does not depend on the order of combination
 * (the operator is commutative as well as associative). NaN values never win. */
inline atom_t mdh_neutral(void) {
    atom_t r = atom_lowest();
    r.index = atom_highest().index;
    return r;
}
inline atom_t mdh_combine(atom_t a, atom_t b) {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    if (a.value == b.value) return (a.index <= b.index) ? a : b;
    return (a.value == a.value) ? a : b;   /* one side is NaN: keep the other */
}
