"""The md_hom description: an index space, a scalar function, and one combine operator per dimension.

A :class:`Description` is pure data. It validates itself when constructed (unknown names in index
expressions, operator/atom mismatches, unsupported operator mixes), and it declares the tuning parameters
of its kernels together with their valid ranges on a given device (:mod:`mdhom.mdh.configuration`, mixed in),
so the code generator, the tuner's search space and the fallback configuration all derive from one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from mdhom.mdh.configuration import Configurable
from mdhom.mdh.parts import (
    ATOMIC_LANES,
    IDENT,
    INDEX_BUILTINS,
    NAME_RE,
    CombineOp,
    Concat,
    DescriptionError,
    Dim,
    Input,
    Operator,
    Param,
    Place,
    Reduce,
    Scan,
    Scratch,
    Vector,
    is_generator_parameter,
    strip_numbers,
)
from mdhom.mdh.types import CTYPES, AtomType, as_atom, itemsize


@dataclass(frozen=True)
class Description(Configurable):
    """An md_hom computation: see the module docstring and the README's md_hom computations section.

    ``scalar`` is OpenCL C statements that set ``out`` (an ``atom_t`` that starts at zero) from the point's
    dimension indices and inputs. ``accumulate``, optional, folds one point straight into ``acc`` and must
    equal ``acc = mdh_combine(acc, scalar(point))``; it lets a histogram scatter into one bin instead of
    adding a one-hot array.

    ``accumulate_atomic``, optional, is the same fold written with integer atomics on ``acc``, a
    ``__local atom_t*`` shared by the work-items of a work-group (``atomic_add`` for 32-bit lanes, ``atom_add``
    for 64-bit ones). It needs the SUM operator and an atom of integer lanes, and it adds the tuning parameter
    ``PARTIALS_LOCAL``: 1 keeps one partial per work-group in local memory instead of one per work-item in
    private memory (what GPUs want for histograms). Integer sums do not depend on the order of the atomics,
    so the result stays exact and deterministic.

    ``packed_pairs=True`` (with ``accumulate_atomic``; an atom of ``int`` lanes in (a, b) pairs) adds the tuning
    parameter ``PACKED``: 1 lets the folds add a pair as one 64-bit word, a + b * 2^32 with a sign-extended
    (LightGBM's packed histogram): one 64-bit atomic instead of two 32-bit ones (``mdh_atomic_add_pair``, which
    needs cl_khr_int64_base_atomics) or one load, add and store in private memory (``mdh_add_pair``); the borrow
    a negative sum of a took from the high half is given back once the fold is done. Sums are exact integers
    either way, so both values of ``PACKED`` write the same bits, provided every partial sum (a work-item's or a
    work-group's) fits its int32 lane, not only the total (the tree learner's quantisation keeps all within 2^30).
    It also adds ``SPLIT_PAIRS``: 1 keeps the local accumulator as two planes (every a, then every b), so the a lanes
    of neighbouring pairs fall in neighbouring banks instead of every other one (32-bit atomics only). The folds
    name a pair by its index in the atom: ``mdh_atomic_add_pair(acc, c, a, b)`` adds to lanes 2c and 2c + 1.

    ``switches``, optional, names 0/1 tuning parameters of the description's own code (``#if NAME``): a variant
    the description can express both ways, whose speed depends on the device (a row read as 32-bit words or byte by
    byte). 0 where a stored configuration lacks one (it was tuned before the switch existed).

    ``extents``, optional, makes reduced dimensions *ragged*: ``{"pos": "count[slot]"}`` bounds the fold along
    ``pos`` at each point of the concatenated dimensions by an OpenCL expression over them, ``SIZE_<dim>``,
    parameters and gathered inputs (and by ``SIZE_pos``). This is the tree dimension's shape: the nodes of many
    trees are one concatenated dimension of slots, each folding only its own rows, so a launch over thousands of
    nodes of unequal size does the work of their rows and not of slots x the largest node.

    ``scatter=True`` (concatenation-only descriptions) lets the scalar function choose where its atom lands:
    it may set ``out_at`` (an ``idx_t``, preset to the point's own output position; -1 writes nothing). The
    positions a launch writes must be distinct (a permutation, such as a stable partition of rows by node).
    ``scatter="add"`` lets positions repeat: each atom (one ``int`` or ``uint``) is added to the output at
    ``out_at`` with a global atomic, so the output holds its earlier contents plus the sum of the atoms sent
    there (a count per key over a data-dependent key: bootstrap draws counted per row). Integer additions
    commute, so the result does not depend on the configuration or the order the atomics land in.

    ``chunked=True`` adds the tuning parameter ``CHUNKED``: 1 gives each work-item one contiguous run of every
    dimension instead of a strided share. CPU runtimes run a work-group's items one after another, so strided
    shares walk memory a stride at a time (PoCL, 500k rows: a score update 2.4 ms strided, 0.55 ms chunked). A
    reduction folds in another order under it, so exact-order pins keep one work-item per reduction (or 0).

    ``vector``, optional (:class:`Vector`), is the scalar function over a block of points of one reduced or
    concatenated dimension in OpenCL vector types (or, along a reduced one, the block's fold), and adds the tuning
    parameter ``VEC`` (its width; 1: point by point).

    ``inline_fold=True`` adds the tuning parameter ``INLINE``: 1 forces the fold functions (``mdh_fold``,
    ``mdh_fold_atomic``, the vector form's ``mdh_fold_vec``) inline. PoCL's compiler leaves a large fold body (a
    whole row's features) a call per point and cannot keep the accumulator's address or the row's words in registers
    across points (2-core Xeon, 500k binned Higgs rows, 255 leaves, alternating fits: 0.0996 -> 0.0870 s a round, the
    whole-row histogram forced inline). It defaults to 1 on CPUs; GPU compilers inline every function anyway.
    Opt-in, so that every other description's generated source (and its stored configurations' hash) stays as it was.

    ``inline_scalar=True`` adds the same parameter ``INLINE`` for the scalar function (``mdh_scalar``) of a
    description without a fold: PoCL's compiler left a scalar function past its inlining threshold a call per point,
    and the work-items of a group then run one by one instead of as vectors (2-core Xeon, ``tree_leaf_rows`` over
    500k positions with a split rule to read: 3.1 ms as a call, 1.6 inline). Opt-in likewise; not with
    ``inline_fold``.

    ``prefetch=True`` adds the tuning parameter ``PREFETCH``: 1 defines ``MDH_PREFETCH(p)`` as a prefetch of the
    global address ``p`` (``__builtin_prefetch`` where the compiler has it; OpenCL's ``prefetch()`` is a no-op on
    PoCL) and ``MDH_PREFETCH_AHEAD``, how many points ahead to ask for, for the description's own code (``#if
    PREFETCH``) to prefetch what a later point of its chunk gathers. A CPU folding a chunk of gathered rows waits a
    memory latency per row, which its out-of-order window cannot hide behind a row's work (PoCL, 2-core EPYC,
    whole-row histograms through the row index, 500k binned Higgs rows, a loss-guided round: 131-138 -> 31-37 ms
    with rows prefetched 16 ahead; 8, 32 or 64 ahead the same). On a checker device (Oclgrind, which has no
    prefetch) ``MDH_PREFETCH`` reads the byte, so the bounds check covers the prefetched addresses too. Defaults to 1
    on CPUs and a configuration error elsewhere (NVIDIA's compiler refuses ``__builtin_prefetch`` of a ``__global``
    pointer; a GPU hides a gather's latency behind its other warps). Opt-in, so that every other description's
    generated source stays as it was.

    ``flat=True`` (with ``accumulate_atomic``, an atom of 32-bit integer lanes and one ragged reduced dimension) adds
    the tuning parameter ``FLAT``: 1 lays the points' ragged runs end to end and gives every work-group an equal
    share of that line, however unequal the runs; a work-group folds each piece of a run it holds into its local
    accumulator and adds that to the output with global atomics (the launch zeroes the output first): no partials,
    no combine kernel. The fixed grid (``NUM_WG_<dim>`` tiles) gives every point the same work-groups, so a launch
    over unequal nodes waits for those of its longest (H200, whole-row histograms of 10.5M binned rows: a
    loss-guided batch of 64 nodes at 10 rows per ns, one node of all the rows at 21). Integer sums: the same bits
    either way. Opt-in (a source of its own). The prefix of the runs' lengths is kept in local memory, ``FLAT_SPAN``
    points at a time.
    ``flat="private"`` adds the same under ``PARTIALS_LOCAL=0``: every work-item an equal share of the line, its
    pieces folded into a private accumulator; a piece that is a whole run is stored, a part of a run added with
    global atomics, and the output zeroed by a kernel of the description's own (``<name>_zero``; PoCL runs a fill
    command on one thread: 3.7 MB 0.40 ms against 0.31, 29 MB 5.0 against 1.7 on a 16-core host). What a CPU runs:
    the grid's private fold gives each point's run the same work-items, each writing a partial of the whole atom that
    the combine kernel adds (16-core PoCL, whole-row histograms of 64 unequal nodes at 256 bins, kernel alone: 0.92 ->
    0.64 ms). Opt-in likewise (the local form's source stays as it was).

    ``place`` (:class:`~mdhom.mdh.parts.Place`, with one scanned dimension, the others concatenated) makes the
    scan's exclusive prefixes place each line's points (a stable partition): a work-group a line, its points moved by
    the ``emit`` code in place order; the output is each line's total (the scanned dimension vanishes). Its scalar
    function runs in the line's scope, its inputs gathered.

    ``padded=True`` (with ``packed_pairs``) adds the tuning parameter ``LOCAL_PAD``: s > 0 leaves one unused word
    (one 64-bit word with PACKED) after every 2^s words of the local accumulator, so that cells 2^s words apart fall
    in neighbouring banks instead of one (a histogram of 64 bins a feature keeps every feature's bin b in bank b mod
    32: where a warp's work-items add to different features' few common bins, their atomics conflict in one bank as
    much as on one address). 0: no padding. The copy-out reads the padded words back into the atom's layout, so the
    output does not change. Opt-in, so that every other description's generated source stays as it was.
    """

    name: str
    dims: tuple[Dim, ...]
    combine: tuple[CombineOp, ...]
    atom: AtomType
    scalar: str
    inputs: tuple[Input, ...] = ()
    params: tuple[Param, ...] = ()
    accumulate: str | None = None
    accumulate_atomic: str | None = None
    preamble: str = ""
    extents: tuple[tuple[str, str], ...] = ()
    scatter: bool = False
    scatter_add: bool = False
    scratch: Scratch | None = None
    chunked: bool = False
    packed_pairs: bool = False
    switches: tuple[str, ...] = ()
    vector: Vector | None = None
    inline_fold: bool = False
    inline_scalar: bool = False
    prefetch: bool = False
    flat: bool = False
    flat_private: bool = False
    padded: bool = False
    place: Place | None = None
    double_fp: bool = field(default=False)

    def __init__(
        self,
        name: str,
        dims: list[Dim | str] | tuple[Dim | str, ...],
        combine: list[CombineOp] | tuple[CombineOp, ...],
        atom: AtomType | str,
        scalar: str,
        inputs: list[Input] | tuple[Input, ...] = (),
        params: list[Param] | tuple[Param, ...] = (),
        accumulate: str | None = None,
        preamble: str = "",
        accumulate_atomic: str | None = None,
        extents: dict[str, str] | None = None,
        scatter: bool | str = False,
        scratch: Scratch | None = None,
        chunked: bool = False,
        packed_pairs: bool = False,
        switches: tuple[str, ...] = (),
        vector: Vector | None = None,
        inline_fold: bool = False,
        inline_scalar: bool = False,
        prefetch: bool = False,
        flat: bool | str = False,
        padded: bool = False,
        place: Place | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "dims", tuple(d if isinstance(d, Dim) else Dim(d) for d in dims))
        set_(self, "combine", tuple(combine))
        set_(self, "atom", as_atom(atom))
        set_(self, "scalar", scalar)
        set_(self, "inputs", tuple(inputs))
        set_(self, "params", tuple(params))
        set_(self, "accumulate", accumulate)
        set_(self, "accumulate_atomic", accumulate_atomic)
        set_(self, "preamble", preamble)
        set_(self, "extents", tuple((extents or {}).items()))
        if scatter not in (False, True, "add"):
            raise DescriptionError(f"{name}: scatter must be False, True or \"add\", not {scatter!r}")
        set_(self, "scatter", bool(scatter))
        set_(self, "scatter_add", scatter == "add")
        set_(self, "scratch", scratch)
        set_(self, "chunked", bool(chunked))
        set_(self, "packed_pairs", bool(packed_pairs))
        set_(self, "switches", tuple(switches))
        set_(self, "vector", vector)
        set_(self, "inline_fold", bool(inline_fold))
        set_(self, "inline_scalar", bool(inline_scalar))
        set_(self, "prefetch", bool(prefetch))
        if flat not in (False, True, "private"):
            raise DescriptionError(f"{name}: flat must be False, True or \"private\", not {flat!r}")
        set_(self, "flat", bool(flat))
        set_(self, "flat_private", flat == "private")
        set_(self, "padded", bool(padded))
        set_(self, "place", place)
        uses = set(self.atom.scalars) | {i.ctype for i in self.inputs} | {p.ctype for p in self.params}
        uses |= {scratch.ctype} if scratch is not None else set()
        set_(self, "double_fp", "double" in uses)
        self._validate()

    # ----------------------------------------------------------------- validation
    def _validate(self) -> None:
        if not NAME_RE.match(self.name):
            raise DescriptionError(f"description name {self.name!r} is not a valid identifier")
        if not self.dims:
            raise DescriptionError(f"{self.name}: an index space needs at least one dimension")
        if len(self.combine) != len(self.dims):
            raise DescriptionError(
                f"{self.name}: {len(self.dims)} dimensions but {len(self.combine)} combine operators"
            )
        names = [d.name for d in self.dims]
        if len(set(names)) != len(names):
            raise DescriptionError(f"{self.name}: dimension names repeat: {names}")
        for op in self.combine:
            if not isinstance(op, Concat | Reduce | Scan):
                raise DescriptionError(f"{self.name}: {op!r} is not Concat(), Reduce(op) or Scan(op)")
        scans = [op for op in self.combine if isinstance(op, Scan)]
        reduces = [op for op in self.combine if isinstance(op, Reduce)]
        if len(scans) > 1:
            raise DescriptionError(f"{self.name}: at most one prefix-scan dimension is supported")
        if scans and reduces:
            raise DescriptionError(f"{self.name}: a scan and a reduction in one description is not supported")
        ops = {op.op.source for op in scans + reduces}
        if len(ops) > 1:
            raise DescriptionError(f"{self.name}: all reduced dimensions must share one combine operator")
        if self.accumulate and not reduces and not scans:
            raise DescriptionError(f"{self.name}: `accumulate` needs a reduced or scanned dimension")
        if self.accumulate_atomic:
            if not reduces or reduces[0].op.name != "sum":
                raise DescriptionError(
                    f"{self.name}: `accumulate_atomic` needs reduced dimensions with the SUM operator"
                )
            bad = sorted(set(self.atom.scalars) - set(ATOMIC_LANES))
            if bad:
                raise DescriptionError(
                    f"{self.name}: `accumulate_atomic` needs an atom of integer lanes ({', '.join(ATOMIC_LANES)}); "
                    f"this one has {', '.join(bad)}"
                )
        if self.packed_pairs and (not self.accumulate_atomic or set(self.atom.scalars) != {"int"}
                                  or itemsize(self.atom) % 8):
            raise DescriptionError(f"{self.name}: `packed_pairs` needs `accumulate_atomic` and an atom of (int, int) "
                                   "pairs")
        if self.padded and not self.packed_pairs:
            raise DescriptionError(f"{self.name}: `padded` pads the local accumulator of `packed_pairs` (its pairs' "
                                   "atomics, mdh_atomic_add_pair, address the padded words)")
        if self.packed_pairs and ("mdh_atomic_add_pair" not in self.accumulate_atomic
                                  or "mdh_add_pair" not in (self.accumulate or "")):
            raise DescriptionError(f"{self.name}: with `packed_pairs` the folds add their pairs through mdh_add_pair "
                                   "(`accumulate`) and mdh_atomic_add_pair (`accumulate_atomic`), which PACKED packs")
        for sw in self.switches:
            if (not re.fullmatch(r"[A-Z][A-Z0-9_]*", sw) or sw.startswith(("MDH_", "SIZE_"))
                    or is_generator_parameter(sw)):
                raise DescriptionError(f"{self.name}: switch {sw!r} must be an upper-case name of the description's "
                                       "own")
        if self.inline_fold and self.operator is None:
            raise DescriptionError(f"{self.name}: `inline_fold` needs a fold (a reduced or scanned dimension)")
        if self.inline_scalar and self.operator is not None:
            raise DescriptionError(f"{self.name}: `inline_scalar` is for descriptions without a fold (`inline_fold` "
                                   "inlines a fold's)")
        self._validate_extents(reduces, scans)
        self._validate_place(scans)
        if self.flat and (not self.accumulate_atomic or len(reduces) != 1 or len(self.extents) != 1
                          or set(self.atom.scalars) - {"int", "uint"}):
            raise DescriptionError(f"{self.name}: `flat` needs `accumulate_atomic` into an atom of int or uint lanes "
                                   "and one reduced dimension, ragged (`extents`)")
        self._validate_vector()
        if self.scatter and (reduces or scans):
            raise DescriptionError(f"{self.name}: `scatter` needs concatenated dimensions only")
        if self.scatter_add and self.atom.scalars not in (("int",), ("uint",)):
            raise DescriptionError(f"{self.name}: scatter=\"add\" adds atoms of one int or uint with global atomics; "
                                   f"this atom is {self.atom!r}")
        if self.chunked and scans:
            raise DescriptionError(f"{self.name}: `chunked` is for concatenated and reduced dimensions (a scan's "
                                   "work-items already take contiguous chunks unless SCAN_TILED)")
        seen = set(names)
        self._validate_scratch(scans)
        for p in self.params:
            if not NAME_RE.match(p.name) or p.name in seen or p.name in ("sizes", "zeroed", "queue"):
                raise DescriptionError(f"{self.name}: parameter name {p.name!r} is invalid, repeated or reserved "
                                       "(sizes, zeroed and queue are the launches' own)")
            as_atom(p.ctype)
            seen.add(p.name)
        known = set(names) | {f"SIZE_{n}" for n in names} | {p.name for p in self.params} | INDEX_BUILTINS
        for inp in self.inputs:
            if not NAME_RE.match(inp.name) or inp.name in seen:
                raise DescriptionError(f"{self.name}: input name {inp.name!r} is invalid or repeated")
            seen.add(inp.name)
            as_atom(inp.ctype)
            if not inp.shape:
                raise DescriptionError(f"{self.name}: input {inp.name} needs a shape")
            if inp.writes and not inp.gather:
                raise DescriptionError(f"{self.name}: input {inp.name} is written (writes=True), which only gathered "
                                       "inputs may be")
            for s in inp.shape:
                if s == "*":
                    if not inp.gather:
                        raise DescriptionError(
                            f"{self.name}: input {inp.name} has extent '*', which only gathered inputs may have"
                        )
                    continue
                if isinstance(s, str) and s not in names:
                    raise DescriptionError(
                        f"{self.name}: input {inp.name} has shape entry {s!r}, which is not a dimension "
                        f"({', '.join(names)})"
                    )
            if inp.index is not None:
                unknown = sorted(set(IDENT.findall(strip_numbers(inp.index))) - known)
                if unknown:
                    raise DescriptionError(
                        f"{self.name}: index expression of input {inp.name!r} ({inp.index}) uses unknown "
                        f"name(s) {', '.join(unknown)}; dimensions are {', '.join(names)}"
                    )
            elif not inp.gather and not all(isinstance(s, str) for s in inp.shape):
                raise DescriptionError(
                    f"{self.name}: input {inp.name} has integer extents, so it needs an `index` expression"
                )
    def _validate_scratch(self, scans: list) -> None:
        sc = self.scratch
        if sc is None:
            return
        if not isinstance(sc, Scratch):
            raise DescriptionError(f"{self.name}: scratch must be a Scratch(name, ctype, length), got {sc!r}")
        if not NAME_RE.match(sc.name) or sc.name in {d.name for d in self.dims} | {p.name for p in self.params} | {
                i.name for i in self.inputs}:
            raise DescriptionError(f"{self.name}: scratch name {sc.name!r} is invalid or repeated")
        as_atom(sc.ctype)
        if scans:
            raise DescriptionError(f"{self.name}: scratch memory with a scanned dimension is not supported")
        if any(c < 1 for c in sc.private):
            raise DescriptionError(f"{self.name}: private scratch capacities must be positive, got {sc.private}")
        lengths = [p for p in self.params if p.name == sc.length]
        if not lengths or lengths[0].ctype != "int":
            raise DescriptionError(f"{self.name}: scratch length {sc.length!r} must name an int parameter "
                                   f"({', '.join(p.name for p in self.params) or 'none declared'})")

    def _validate_vector(self) -> None:
        vec = self.vector
        if vec is None:
            return
        if not isinstance(vec, Vector):
            raise DescriptionError(f"{self.name}: vector must be a Vector(dim, scalar or fold), got {vec!r}")
        if vec.dim not in self.dim_names or self.kinds[vec.dim] == "scan":
            raise DescriptionError(f"{self.name}: vector's dimension {vec.dim!r} must be a reduced or concatenated "
                                   f"dimension ({', '.join(self.dim_names)})")
        if self.kinds[vec.dim] == "concat" and (self.scan_dim or self.scatter):
            raise DescriptionError(f"{self.name}: a vector form along a concatenated dimension is for descriptions "
                                   "that concatenate or reduce (no scan or scatter)")
        if vec.fold is not None and self.kinds[vec.dim] != "reduce":
            raise DescriptionError(f"{self.name}: a vector form's fold is for a reduced dimension, not {vec.dim!r}")
        if (vec.scalar is None) == (vec.fold is None):
            raise DescriptionError(f"{self.name}: a vector form is its block's atoms (`scalar`) or, along a reduced "
                                   "dimension, its block folded at once (`fold`): one of the two")
        if vec.carry is not None and vec.fold is None:
            raise DescriptionError(f"{self.name}: a vector form's carry is what its fold keeps from block to block: "
                                   "it needs a fold")
        if not vec.widths or any(w not in (2, 4, 8) for w in vec.widths):
            raise DescriptionError(f"{self.name}: vector widths must be among 2, 4 and 8 (OpenCL loads 2 x 8 "
                                   f"lanes at most), got {vec.widths}")
        why = [what for what, bad in (
            ("`accumulate` (the vector block folds through the combine operator)", self.accumulate),
            ("`accumulate_atomic`", self.accumulate_atomic),
            ("`chunked` (along a reduced dimension)", self.chunked and self.kinds[vec.dim] == "reduce"),
            ("a scratch", self.scratch), (f"a ragged extent along {vec.dim}", vec.dim in dict(self.extents)),
            ("inputs loaded at the point (gather them)", any(not i.gather for i in self.inputs))) if bad]
        if why:
            raise DescriptionError(f"{self.name}: a vector form does not go with {why[0]}")
        if vec.reach is not None:
            known = {f"SIZE_{n}" for n in self.dim_names} | {p.name for p in self.params} | INDEX_BUILTINS
            unknown = sorted(set(IDENT.findall(strip_numbers(vec.reach))) - known)
            if unknown:
                raise DescriptionError(f"{self.name}: vector reach ({vec.reach}) uses unknown name(s) "
                                       f"{', '.join(unknown)}; it may use sizes and parameters")

    def _validate_place(self, scans: list) -> None:
        pl = self.place
        if pl is None:
            return
        if not isinstance(pl, Place):
            raise DescriptionError(f"{self.name}: place must be a Place(at, emit, line_max), got {pl!r}")
        if not scans:
            raise DescriptionError(f"{self.name}: `place` places the points of a scanned dimension's lines: it needs "
                                   "a Scan")
        why = [what for what, bad in (
            ("`scatter`", self.scatter), ("`accumulate`", self.accumulate), ("a scratch", self.scratch),
            ("a vector form", self.vector), ("`inline_fold`", self.inline_fold)) if bad]
        if why:
            raise DescriptionError(f"{self.name}: `place` does not go with {why[0]}")
        if any(not i.gather for i in self.inputs):
            raise DescriptionError(f"{self.name}: a placing scan's scalar function runs in its line's scope: its "
                                   "inputs must be gathered")
        if pl.local_values and (pl.local_values not in CTYPES or len(self.atom.scalars) != 1
                                or self.atom.dtype.names):
            raise DescriptionError(f"{self.name}: place's local_values ({pl.local_values!r}) must be a scalar "
                                   "type, for an atom of one scalar")
        if int(pl.line_max) < 1:
            raise DescriptionError(f"{self.name}: place's line_max must be positive, got {pl.line_max}")
        if "mdh_at" not in pl.at:
            raise DescriptionError(f"{self.name}: place's `at` must set mdh_at (the point's place in its line)")

    def _validate_extents(self, reduces: list, scans: list) -> None:
        if not self.extents:
            return
        names = [d.name for d in self.dims]
        concat = {d for d, op in zip(names, self.combine, strict=True) if isinstance(op, Concat)}
        reduced = {d for d, op in zip(names, self.combine, strict=True) if isinstance(op, Reduce)}
        known = (concat | {f"SIZE_{n}" for n in names} | {p.name for p in self.params}
                 | {i.name for i in self.inputs if i.gather} | INDEX_BUILTINS)
        for dim, expr in self.extents:
            if dim not in reduced and not (self.place is not None and dim == self.scan_dim):
                raise DescriptionError(
                    f"{self.name}: extents names {dim!r}, which is not a reduced dimension "
                    f"({', '.join(sorted(reduced)) or 'none'})")
            unknown = sorted(set(IDENT.findall(strip_numbers(expr))) - known)
            if unknown:
                raise DescriptionError(
                    f"{self.name}: extent of {dim!r} ({expr}) uses unknown name(s) {', '.join(unknown)}; it may use "
                    "the concatenated dimensions, sizes, parameters and gathered inputs")

    # ----------------------------------------------------------------- structure
    # Structural facts are read on every launch, so each is computed once (the description is immutable).
    @cached_property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    @cached_property
    def kinds(self) -> dict[str, str]:
        """'concat', 'reduce' or 'scan' per dimension."""
        names = {Concat: "concat", Reduce: "reduce", Scan: "scan"}
        return {d.name: names[type(op)] for d, op in zip(self.dims, self.combine, strict=True)}

    def kind(self, dim: str) -> str:
        """'concat', 'reduce' or 'scan'."""
        return self.kinds[dim]

    @cached_property
    def concat_dims(self) -> tuple[str, ...]:
        return tuple(d for d in self.dim_names if self.kinds[d] == "concat")

    @cached_property
    def reduce_dims(self) -> tuple[str, ...]:
        return tuple(d for d in self.dim_names if self.kinds[d] == "reduce")

    @cached_property
    def scan_dim(self) -> str | None:
        scans = [d for d in self.dim_names if self.kinds[d] == "scan"]
        return scans[0] if scans else None

    @cached_property
    def output_dims(self) -> tuple[str, ...]:
        """Dimensions of the output, in declaration order (reduced ones vanish, and with ``place`` the scanned one:
        a line's total)."""
        gone = ("reduce", "scan") if self.place is not None else ("reduce",)
        return tuple(d for d in self.dim_names if self.kinds[d] not in gone)

    @cached_property
    def operator(self) -> Operator | None:
        for op in self.combine:
            if isinstance(op, Reduce | Scan):
                return op.op
        return None

    @cached_property
    def lane_dims(self) -> tuple[str, ...]:
        """Dimensions whose work-items cooperate through local memory (reduce or scan)."""
        return tuple(d for d in self.dim_names if self.kinds[d] in ("reduce", "scan"))

    # ----------------------------------------------------------------- derived (templates, configurations)
    @property
    def private_scratch(self) -> tuple[int, ...]:
        """The capacities at which the :class:`Scratch` may live in private memory (empty: global only)."""
        return self.scratch.private if self.scratch is not None else ()

    @property
    def combine_lanes(self) -> int:
        """Scalars per atom that the combine kernel folds one work-item each (0: one work-item per atom).

        A SUM of an atom whose lanes share one scalar type is a SUM per lane; folding the work-group partials
        lane by lane in the same fixed order gives the same bits as folding whole atoms, with one work-item per
        lane instead of per atom (a node's whole histogram as one atom would otherwise be copied through private
        memory partial by partial)."""
        op = self.operator
        if op is None or op.name != "sum" or self.scan_dim or len(set(self.atom.scalars)) != 1:
            return 0
        return itemsize(self.atom) // CTYPES[self.atom.scalars[0]].itemsize

    @property
    def atomic_64(self) -> bool:
        """Whether the local-memory partials need 64-bit atomics (cl_khr_int64_base_atomics)."""
        return bool(self.accumulate_atomic) and any(t in ("long", "ulong") for t in self.atom.scalars)
