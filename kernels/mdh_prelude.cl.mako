/* md_hom prelude for "${desc.name}": types, combine operator, scalar function and fold.
 * Generated from the description; the skeleton that follows holds the control structure. */
% if desc.double_fp:
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
% if desc.atomic_64:
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
% endif
/* Results must not depend on whether the compiler fuses a*b+c: scoring code compares exactly. */
#pragma OPENCL FP_CONTRACT OFF

#ifdef MDH_INDEX_64
typedef long idx_t;
#else
typedef int idx_t;
#endif

${type_declaration}
${type_helpers}
% for sw in desc.switches:
#ifndef ${sw}
#define ${sw} 0
#endif
% endfor
% if desc.packed_pairs:
#ifndef PACKED
#define PACKED 0
#endif
#if PACKED && defined(PARTIALS_LOCAL) && PARTIALS_LOCAL
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#endif
/* PACKED=1 adds an int32 pair (a, b) as one 64-bit word, a + b * 2^32 with a sign-extended (one atomic, or one
 * load, add and store, instead of two). Where a's running sum is negative, the high half lacks the borrow, which
 * mdh_unpack_pairs gives back once the fold is done: the pair's sums are exact integers either way. */
inline ulong mdh_pack_pair(const int a, const int b) { return (ulong)(long)a + ((ulong)(uint)b << 32); }

#ifndef SPLIT_PAIRS
#define SPLIT_PAIRS 0
#endif
/* SPLIT_PAIRS=1 keeps a work-group's accumulator in local memory as two planes, every pair's a and then every
 * pair's b (copied out interleaved): neighbouring pairs' a lanes then sit in neighbouring banks, where interleaved
 * they share every other bank. Only where the pairs are added as two 32-bit atomics (PACKED=0). */
#define MDH_PAIRS ((idx_t)(sizeof(atom_t) / 8))
% if desc.padded:
#ifndef LOCAL_PAD
#define LOCAL_PAD 0
#endif
/* LOCAL_PAD=s > 0 leaves one unused word after every 2^s words (64-bit words with PACKED) of the local accumulator, so
 * that cells 2^s words apart fall in neighbouring banks instead of one; MDH_LANE_WORDS: its 32-bit words, padded */
#if LOCAL_PAD
#define MDH_PAD(i) ((i) + ((i) >> LOCAL_PAD))
#define MDH_LANE_WORDS (2 * (MDH_PAIRS + (MDH_PAIRS >> LOCAL_PAD) + 1))
#else
#define MDH_PAD(i) (i)
#define MDH_LANE_WORDS (2 * MDH_PAIRS)
#endif
% endif

/* Adds (a, b) to pair c (lanes 2c, 2c + 1) of the work-group's accumulator in local memory, skipping zeros (rows
 * left out by subsampling). */
inline void mdh_atomic_add_pair(__local atom_t* acc, const idx_t c, const int a, const int b) {
    volatile __local int* w = (volatile __local int*)acc;
#if PACKED && defined(PARTIALS_LOCAL) && PARTIALS_LOCAL
    const ulong v = mdh_pack_pair(a, b);
% if desc.padded:
    if (v != 0) atom_add((volatile __local ulong*)w + MDH_PAD(c), v);
% else:
    if (v != 0) atom_add((volatile __local ulong*)(w + 2 * c), v);
% endif
#elif SPLIT_PAIRS
    if (a != 0) atomic_add(w + ${pad("c")}, a);
    if (b != 0) atomic_add(w + ${pad("MDH_PAIRS + c")}, b);
#else
    if (a != 0) atomic_add(w + ${pad("2 * c")}, a);
    if (b != 0) atomic_add(w + ${pad("2 * c + 1")}, b);
#endif
}

/* Adds (a, b) to the pair at p in private memory. Packed, every access to the accumulator from its zeroing (ulong
 * words) to mdh_unpack_pairs is a ulong one, so type-based alias analysis cannot reorder them; the accumulator is
 * 8-byte aligned (vload2 / vstore2 instead ran 4x slower on PoCL). */
inline void mdh_add_pair(int* p, const int a, const int b) {
#if PACKED
    *(ulong*)p += mdh_pack_pair(a, b);
#else
    p[0] += a;
    p[1] += b;
#endif
}

/* The borrow a negative sum of a took from b, given back to every pair of a packed private accumulator. */
inline void mdh_unpack_pairs(atom_t* acc) {
    ulong* p = (ulong*)acc;
    for (idx_t i = 0; i < MDH_PAIRS; ++i) {
        const ulong w = p[i];
        p[i] = w + ((ulong)(as_int((uint)w) < 0) << 32);
    }
}

% endif

% if desc.scratch:
/* Where the scratch slice lives (Scratch.private): private memory of SCRATCH_PRIVATE elements, or the work-item's
 * slice of the global scratch buffer; functions of the preamble declare the slice's pointers MDH_SCRATCH. */
#ifndef SCRATCH_PRIVATE
#define SCRATCH_PRIVATE 0
#endif
#if SCRATCH_PRIVATE > 0
#define MDH_SCRATCH __private
#else
#define MDH_SCRATCH __global
#endif
% endif

% if exact_rounding:
/* Exact rounding without library calls, emitted where the description's code calls them. A library call per value
 * stays scalar on CPU runtimes (PoCL: ~8 ns per rint, 10x the rest of a quantisation); these are the same IEEE
 * operations a vector unit has, and give the library functions' bits.
 * mdh_rint(x): rint (ties to even) for every double: adding and subtracting 2^52 leaves the nearest integer under
 * the default rounding mode, exactly when |x| < 2^52; larger values, infinities and NaN are their own rint. */
inline double mdh_rint(const double x) {
    const double a = fabs(x);
    const double r = (a + 0x1.0p52) - 0x1.0p52;
    return (a < 0x1.0p52) ? copysign(r, x) : x;
}
/* 2^e for e in [-1022, 1023], from its exponent bits. */
inline double mdh_pow2(const int e) { return as_double((long)(e + 1023) << 52); }
/* mdh_ldexp(p, k) = ldexp(p, k) for 0.5 <= |p| < 2 (also 0 and NaN) and k <= 1023: one product rounds once, as ldexp
 * does; below 2^-1022 the product goes through 2^(k + 1021), still normal, so only the last one rounds. */
inline double mdh_ldexp(const double p, const int k) {
    const int kk = max(k, -2042);
    return (kk < -1022) ? (p * mdh_pow2(kk + 1021)) * mdh_pow2(-1021) : p * mdh_pow2(kk);
}

% endif
% if desc.vector:
/* The vector form's width (Vector, tuning parameter VEC; 1: point by point), and names for its types: MDH_VT(t) is
 * the vector of VEC t's, MDH_VT2(t) of 2 * VEC (a block's pairs, split by .even and .odd). */
#ifndef VEC
#define VEC 1
#endif
#define MDH_VEC VEC
#define MDH_CAT_(a, b) a##b
#define MDH_CAT(a, b) MDH_CAT_(a, b)
#if VEC > 1
#define MDH_VEC2 MDH_CAT(MDH_TWICE_, VEC)
#define MDH_TWICE_2 4
#define MDH_TWICE_4 8
#define MDH_TWICE_8 16
#define MDH_VT(t) MDH_CAT(t, VEC)
#define MDH_VT2(t) MDH_CAT(t, MDH_VEC2)
/* MDH_IOTA: (0, 1, ..., VEC - 1), a block's lane numbers as ints */
#define MDH_IOTA MDH_CAT(MDH_IOTA_, VEC)
#define MDH_IOTA_2 ((int2)(0, 1))
#define MDH_IOTA_4 ((int4)(0, 1, 2, 3))
#define MDH_IOTA_8 ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
/* Vector moves lane by lane through unions, for vector code in place of vloadn, vstoren and convert_: PoCL calls
 * those built-ins out of line, and PoCL 3.0 on a Zen 4 EPYC (AVX-512) builds kernels for znver3 (no AVX-512) beside
 * its AVX-512 built-in library, so a 512-bit vector passed between the two arrives wrong, or the build aborts. LLVM
 * makes the unrolled lanes vector moves again. mdh_vload_t(p) (VEC t's from global p), mdh_vload2_t(p) (2 * VEC),
 * mdh_vstore_t(x, p) (to private p), mdh_convert_to_from(x) (VEC lanes). */
#define MDH_VECTOR_MOVES(t) \
inline MDH_VT(t) MDH_CAT(mdh_vload_, t)(const __global t* p) { \
    union { t s[VEC]; MDH_VT(t) v; } u; \
    for (int i = 0; i < VEC; ++i) u.s[i] = p[i]; \
    return u.v; \
} \
inline MDH_VT2(t) MDH_CAT(mdh_vload2_, t)(const __global t* p) { \
    union { t s[MDH_VEC2]; MDH_VT2(t) v; } u; \
    for (int i = 0; i < MDH_VEC2; ++i) u.s[i] = p[i]; \
    return u.v; \
} \
inline void MDH_CAT(mdh_vstore_, t)(const MDH_VT(t) x, t* p) { \
    union { t s[VEC]; MDH_VT(t) v; } u; \
    u.v = x; \
    for (int i = 0; i < VEC; ++i) p[i] = u.s[i]; \
}
#define MDH_VECTOR_CONVERT(to, from) \
inline MDH_VT(to) MDH_CAT(MDH_CAT(mdh_convert_, to), MDH_CAT(_, from))(const MDH_VT(from) x) { \
    union { from s[VEC]; MDH_VT(from) v; } a; \
    union { to s[VEC]; MDH_VT(to) v; } b; \
    a.v = x; \
    for (int i = 0; i < VEC; ++i) b.s[i] = (to)a.s[i]; \
    return b.v; \
}
MDH_VECTOR_MOVES(int)
MDH_VECTOR_MOVES(long)
MDH_VECTOR_MOVES(float)
MDH_VECTOR_CONVERT(long, int)
MDH_VECTOR_CONVERT(float, int)
MDH_VECTOR_CONVERT(float, float)
#ifdef cl_khr_fp64
MDH_VECTOR_MOVES(double)
MDH_VECTOR_CONVERT(double, int)
MDH_VECTOR_CONVERT(double, long)
MDH_VECTOR_CONVERT(double, float)
MDH_VECTOR_CONVERT(double, double)
#endif
#endif

% endif
% if desc.prefetch:
/* PREFETCH=1: MDH_PREFETCH(p) asks for the cache line of global address p, for a point MDH_PREFETCH_AHEAD points
 * further along the work-item's chunk (OpenCL's prefetch() does nothing on PoCL). A checker device (MDH_CHECKER:
 * Oclgrind has no prefetch) reads the byte instead, so its bounds check covers the prefetched addresses. */
#ifndef PREFETCH
#define PREFETCH 0
#endif
#define MDH_PREFETCH_AHEAD ${prefetch_ahead}
#if defined(MDH_CHECKER)
#define MDH_PREFETCH(p) ((void)*(volatile __global const uchar*)(p))
#elif defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
#define MDH_PREFETCH(p) __builtin_prefetch(p)
#endif
#endif
#ifndef MDH_PREFETCH
#define MDH_PREFETCH(p) ((void)0)
#endif

% endif
% if desc.preamble:
/* ---- preamble of the description ---- */
${desc.preamble}
% endif

% if operator_source:
/* ---- combine operator: ${operator_name} ---- */
${operator_source}
% endif

/* Arguments every generated function and kernel receives after the output buffers. */
#define MDH_FN_PARAMS ${fn_params}
#define MDH_FN_ARGS ${fn_args}

/* The scalar function f: one point of the index space to one atom${" and, scattering, where it lands" if desc.scatter else ""}. */
% if desc.inline_scalar:
/* INLINE=1 forces the scalar function inline: PoCL leaves a large one a call per point. */
#ifndef INLINE
#define INLINE 0
#endif
#if INLINE
#define MDH_SCALAR_INLINE __attribute__((always_inline)) inline
#else
#define MDH_SCALAR_INLINE inline
#endif
% endif
% if desc.place:
/* (a placing scan runs it in its line's scope: mdh_place.cl.mako) */
% elif desc.scatter:
${scalar_inline} atom_t mdh_scalar(idx_t* mdh_at, ${point_params}, MDH_FN_PARAMS) {
% else:
${scalar_inline} atom_t mdh_scalar(${point_params}, MDH_FN_PARAMS) {
% endif
% if not desc.place:
% for ctype, name, index in loads:
    const ${ctype} ${name} = mdh_in_${name}[${index}];
% endfor
% if scratch_decl:
${scratch_decl}
% endif
    atom_t out = atom_zero();
% if desc.scatter:
#define out_at (*mdh_at)
% endif
    {
${desc.scalar}
    }
% if desc.scatter:
#undef out_at
% endif
    return out;
}
% endif

% if desc.vector and desc.vector.scalar is not None:
#if VEC > 1
/* The scalar function over VEC consecutive points along ${desc.vector.dim}, from the point's own on: out[s] is the atom of
 * the point ${desc.vector.dim} + s (a whole block; a partial one is folded point by point). */
inline void mdh_scalar_vec(atom_t* out, ${point_params}, MDH_FN_PARAMS) {
    {
${desc.vector.scalar}
    }
}
#endif

% endif
% if desc.inline_fold:
/* INLINE=1 forces the folds inline: PoCL leaves a large fold body a call per point. */
#ifndef INLINE
#define INLINE 0
#endif
#if INLINE
#define MDH_FOLD_INLINE __attribute__((always_inline)) inline
#else
#define MDH_FOLD_INLINE inline
#endif

% endif
% if operator_source and not desc.place:
/* Fold one point into the accumulator, in place: acc = combine(acc, f(point)), or the description's fused
 * form. The accumulator goes by pointer because array atoms (histograms) are kilobytes, and copying one per
 * point costs more than the work itself. */
${fold_inline} void mdh_fold(atom_t* mdh_acc, ${point_params}, MDH_FN_PARAMS) {
% if desc.accumulate:
% for ctype, name, index in loads:
    const ${ctype} ${name} = mdh_in_${name}[${index}];
% endfor
% if scratch_decl:
${scratch_decl}
% endif
#define acc (*mdh_acc)
    {
${desc.accumulate}
    }
#undef acc
% else:
    *mdh_acc = mdh_combine(*mdh_acc, mdh_scalar(${point_args}, MDH_FN_ARGS));
% endif
}
% if desc.vector and desc.vector.fold is not None:
#if VEC > 1
% if desc.vector.carry is not None:
/* What the fold carries from block to block (Vector.carry): zeroed where a work-item's accumulator starts. */
typedef struct {
${desc.vector.carry}
} mdh_carry_t;

% endif
/* A whole block of VEC points along ${desc.vector.dim} from the point's own on (mdh_vn of them within the dimension)
 * into the accumulator at once, as folding their atoms one by one would. */
% if desc.vector.carry is not None:
${fold_inline} void mdh_fold_vec(atom_t* mdh_acc, ${point_params}, const idx_t mdh_vn, mdh_carry_t* mdh_carry,
                                 MDH_FN_PARAMS) {
% else:
${fold_inline} void mdh_fold_vec(atom_t* mdh_acc, ${point_params}, const idx_t mdh_vn, MDH_FN_PARAMS) {
% endif
#define acc (*mdh_acc)
    {
${desc.vector.fold}
    }
#undef acc
}
#endif
% endif
% endif

% if desc.accumulate_atomic:
/* The same fold with integer atomics into a work-group's accumulator in local memory (PARTIALS_LOCAL=1). */
${fold_inline} void mdh_fold_atomic(__local atom_t* acc, ${point_params}, MDH_FN_PARAMS) {
% for ctype, name, index in loads:
    const ${ctype} ${name} = mdh_in_${name}[${index}];
% endfor
% if scratch_decl:
${scratch_decl}
% endif
    {
${desc.accumulate_atomic}
    }
}
% endif
