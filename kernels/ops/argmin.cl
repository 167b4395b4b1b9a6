/* Argmin with index: the atom is a struct { value; index; }; ties go to the lower index. */
inline atom_t mdh_neutral(void) {
    atom_t r = atom_highest();
    return r;
}
inline atom_t mdh_combine(atom_t a, atom_t b) {
    if (a.value < b.value) return a;
    if (b.value < a.value) return b;
    if (a.value == b.value) return (a.index <= b.index) ? a : b;
    return (a.value == a.value) ? a : b;
}
