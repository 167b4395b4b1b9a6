"""The parts an md_hom :class:`~mdhom.mdh.description.Description` is made of (dimensions, inputs, parameters,
combine operators, scratch memory, vector forms), the generator's own tuning switches, and the errors a
description or a configuration raises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# Names an index expression may use besides dimensions, sizes and parameters.
INDEX_BUILTINS = {"min", "max", "abs", "clamp", "long", "int", "uint", "ulong", "size_t"}


class DescriptionError(ValueError):
    """A description that cannot be generated: the message names the offending part."""


@dataclass(frozen=True)
class Dim:
    """A named dimension of the index space. Its size is bound per call, not per build."""

    name: str

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise DescriptionError(f"dimension name {self.name!r} is not a valid identifier")


@dataclass(frozen=True)
class Input:
    """An input buffer.

    ``shape`` lists dimension names (whose sizes then come from the array), integers, or ``"*"`` (any extent:
    only for gathered lookup buffers such as tree nodes or a whole matrix read by position). With ``index``
    (an OpenCL C expression over dimension names, ``SIZE_<dim>`` and parameters) the scalar function sees
    the element at the current point under the buffer's name; without it the element at the row-major
    position of the ``shape`` dimensions is loaded. ``gather=True`` instead passes the buffer as a
    ``__global const`` pointer for arbitrary reads (tree nodes, lookup tables).

    ``writes=True`` (gathered inputs only) passes it without ``const``: the scalar function may also write it, a
    second result beside the output where one launch must leave two (a split table and the host's records of the
    same search: one launch fewer a step). The description owns the races: each point writes only places no other
    point reads or writes, as a scatter's positions.
    """

    name: str
    ctype: str
    shape: tuple[str | int, ...]
    index: str | None = None
    gather: bool = False
    writes: bool = False


@dataclass(frozen=True)
class Param:
    """A scalar argument passed to every launch (a regularisation constant, a learning rate)."""

    name: str
    ctype: str


@dataclass(frozen=True)
class Operator:
    """A combine operator in OpenCL C: ``mdh_neutral()`` and ``mdh_combine(a, b)`` over ``atom_t``.

    Build one from a file in ``kernels/ops`` with :meth:`named`, or inline with ``neutral`` (an expression
    of type ``atom_t``) and ``combine`` (an expression in ``a`` and ``b``, or statements that ``return``).
    Reductions must be associative and commutative (work-items fold strided shares); scans need only
    associativity (each work-item owns a contiguous chunk).
    """

    name: str
    source: str

    @classmethod
    def named(cls, name: str) -> Operator:
        path = resources.files("mdhom.kernels").joinpath("ops", f"{name}.cl")
        if not path.is_file():
            raise DescriptionError(f"no combine operator kernels/ops/{name}.cl")
        return cls(name, path.read_text())

    @classmethod
    def inline(cls, combine: str, neutral: str, name: str = "inline") -> Operator:
        body = combine if "return" in combine else f"return {combine};"
        src = (
            f"inline atom_t mdh_neutral(void) {{ return {neutral}; }}\n"
            f"inline atom_t mdh_combine(atom_t a, atom_t b) {{ {body} }}\n"
        )
        return cls(name, src)


@dataclass(frozen=True)
class Concat:
    """The dimension survives into the output."""


@dataclass(frozen=True)
class Reduce:
    """The dimension is folded away with an associative, commutative operator."""

    op: Operator


@dataclass(frozen=True)
class Scan:
    """A prefix scan along the dimension: inclusive (element i includes point i) or exclusive."""

    op: Operator
    inclusive: bool = True


CombineOp = Concat | Reduce | Scan


@dataclass(frozen=True)
class Place:
    """A scan whose prefixes place its points: each line of the scanned dimension (a point of the concatenated ones)
    is permuted by where its points' prefixes send them, and each place is then written in order. A stable partition
    (rows to the left or right of a split, in order) is one: the scalar function gives a point's flag, the scan's
    exclusive prefix how many flagged points come before it in its line.

    ``at`` is OpenCL C statements that set ``mdh_at`` (an ``idx_t``) to the point's place in its line, from
    ``mdh_excl`` (the exclusive prefix of the point's atom along the line), ``mdh_self`` (its own atom), ``mdh_total``
    (the line's total) and the point's indices; the places of a line's points must be a permutation of the line's
    positions. ``emit`` is statements run for each place of a line in order, ``mdh_dst`` the place and ``mdh_src`` the
    index along the scanned dimension of the point placed there; they write gathered inputs (``writes=True``): the
    line's points moved to their places. ``prologue``, optional, is statements run once per line by every work-item
    of the line's work-group before the scan (uniformly: they may call ``MDH_LINE_SUM(x)``, the sum of a long over the
    line's work-items, which synchronises them; ``mdh_lane`` and ``MDH_LINE_WI`` number them); what it declares is
    seen by ``at``, ``emit`` and the description's scalar function, which runs in the line's scope (so a line's
    split rule, say, is read once, not per point); its inputs are gathered. The output holds each line's total.

    A work-group takes a line at a time (``NUM_WG`` 1 along the scanned dimension, ``NUM_WI`` 1 along the
    concatenated ones); its work-items compute the line's atoms side by side into local memory, scan them in
    contiguous runs, list each point at its place (local memory), and emit the places side by side: neighbouring
    work-items write neighbouring places, where a work-item moving its own run's points writes a run apart from its
    neighbours. ``line_max`` bounds a line's length (the local arrays' size, ``MDH_LINE_MAX``); a longer line is a
    launch error. A ragged line (``extents`` of the scanned dimension) ends at its extent. ``local_values``, optional,
    keeps the line's atoms in local memory as that narrower scalar type (an atom of one scalar whose values it holds:
    a flag as ``uchar``), so that more work-groups fit a compute unit."""

    at: str
    emit: str
    line_max: int
    prologue: str = ""
    local_values: str = ""


@dataclass(frozen=True)
class Scratch:
    """Global memory of the scalar function's own: each work-item gets a slice of ``length`` elements of
    ``ctype`` under ``name`` (a ``__global ctype*``), where ``length`` names an ``int`` parameter of the
    description, so the slice size is a launch argument and one build serves every size.

    What it is for: a scalar function that needs a working array too large for private memory and of a size
    only known at launch, such as a fixed-order factorisation of the point's own small matrix (a batched
    linear solve: one description over the candidates, each solving its own system). Slices are disjoint
    (indexed by the global work-item id), so there is nothing to race on; the computation allocates the buffer
    (work-items x length elements, checked against the device's memory before allocating) and reuses it.
    Not with a scanned dimension (its second kernels evaluate the scalar function on other work-items).

    ``private``, optional, offers capacities (elements) at which the slice may live in private memory instead:
    the tuning parameter ``SCRATCH_PRIVATE`` (0, the global slice, or one of them) is a build-time choice, and
    a launch whose ``length`` exceeds the built capacity is a :class:`ConfigError`, never an overflow
    (:meth:`Description.fit_scratch` picks the smallest that fits a known length). Why: a work-item's round
    trips through its global slice (a read-modify-write chain per element added) cost a GPU a global-memory
    latency each, where private memory stays in registers or the L1 cache; when the length is small (a
    handful of label bins) that is the whole kernel's time. The operations and their order are the same in
    both places, so the results keep their bits. Functions of the preamble that take the slice declare their
    pointer as ``MDH_SCRATCH ctype*``: the generator defines ``MDH_SCRATCH`` as ``__private`` or ``__global``
    to match."""

    name: str
    ctype: str
    length: str
    private: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "private", tuple(sorted({int(c) for c in self.private})))


@dataclass(frozen=True)
class Vector:
    """The scalar function over ``VEC`` consecutive points of one reduced or concatenated dimension at once, written
    with OpenCL vector types: what a CPU runtime needs to use its vector unit. PoCL vectorises a work-group's
    work-items only where their code has no loop of its own, so a work-item that folds (or writes) a share of points
    runs its scalar function one point at a time (the split search on a 2-core Xeon: ~18 ns a candidate, 6
    divisions' worth). Along a concatenated dimension (descriptions that concatenate or reduce) the work-items share
    blocks of ``VEC`` points and the block's atoms are written to their points' places; where the description reduces
    too, a work-item keeps an accumulator per point of its block and folds a whole block's atoms at each step of the
    reduced dimensions, in their usual order, so each point folds what ``VEC=1`` folds in the same order (one
    work-item along the reduced dimensions, so that a block's accumulators stay in one: a work-item walking several
    rows' trees at once, whose pointer chases overlap).

    ``scalar`` is OpenCL C statements that set ``out[0] .. out[MDH_VEC - 1]`` (``atom_t out[]``) to the atoms of
    the points whose ``dim`` index is ``dim, dim + 1, ..., dim + MDH_VEC - 1`` (the other dimensions as in the
    point); each must equal what the description's ``scalar`` gives at that point, bit for bit. The fold calls it
    for whole blocks, so it may read every point of its block; a share's last, partial block runs the scalar
    function point by point, unless ``reach`` (an OpenCL expression over sizes and parameters, at least the
    dimension's size) says how many points along ``dim`` the vector form may compute: a block that ends within
    it runs in vector form, and only its lanes within the dimension are folded. The tuning parameter ``VEC`` (1
    or one of ``widths``) chooses the width; 1 is the plain scalar fold. Its default (:meth:`Description.vec_default`,
    also what a stored configuration without ``VEC`` builds) is the widest on PoCL's CPUs and 1 elsewhere. The
    generator defines ``MDH_VT(t)`` (the
    vector of ``VEC`` ``t``), ``MDH_VT2(t)`` (of ``2 * VEC``: pairs), ``MDH_VEC2``, ``MDH_IOTA`` (the lanes' numbers,
    ints) and ``MDH_CAT(a, b)`` for the code and its preamble (``#if VEC > 1``), and vector moves lane by lane for
    ``t`` among int, long, float and double: ``mdh_vload_t(p)`` and ``mdh_vload2_t(p)`` (``VEC`` and ``2 * VEC``
    lanes from global ``p``), ``mdh_vstore_t(x, p)`` (to private ``p``), ``mdh_convert_to_from(x)``. Vector code uses
    these, not the vloadn, vstoren and convert_ built-ins: PoCL calls the built-ins out of line, and PoCL 3.0 on an
    AVX-512 Zen 4 passes their 512-bit vectors wrongly (its kernels are built for znver3, its built-ins for AVX-512).

    A work-item's share along ``dim`` comes in blocks of ``VEC`` points, so with several work-items along ``dim``
    a reduction combines in another order than at ``VEC=1``: exact-order pins fix ``VEC`` to 1 where the operator
    is not exact in every order (ARGMAX with ties to the lower index is).

    ``fold``, in place of ``scalar`` along a reduced dimension: OpenCL C statements that fold a whole block into
    ``acc`` (the work-item's ``atom_t`` accumulator) instead of its atoms one by one (``mdh_vn``: the block's points
    within the dimension, the rest are not folded), with the bits the one-by-one fold gives. A reduction whose atoms are
    structs otherwise writes every point's atom and combines it alone (the split search's argmax: a gain, an
    index and a compare a candidate), where a block's best can be found in vector registers and combined once.
    A vector form has one of ``scalar`` and ``fold``: with a fold the block's atoms are never written.

    ``carry``, with ``fold``: OpenCL C member declarations of a struct ``mdh_carry_t`` that the fold keeps from block
    to block (``mdh_carry``, a pointer to the work-item's): zeroed where the work-item's accumulator starts (each output
    point), so it carries what one block's fold worked out to the next, such as the running prefix sums of the blocks
    before (the split score reads a node's histograms and sums its bins as it walks them, instead of a scan kernel's
    output written and read back). A configuration may hand a work-item blocks out of order (several work-items along
    the dimensions, and the dimensions' order), so the fold checks what it carried still applies and starts over
    where not."""

    dim: str
    scalar: str | None = None
    widths: tuple[int, ...] = (2, 4, 8)
    reach: str | None = None
    fold: str | None = None
    carry: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "widths", tuple(sorted({int(w) for w in self.widths})))


@dataclass(frozen=True)
class Parameter:
    """One tuning parameter: the values that are valid on a device, and the heuristic default."""

    name: str
    values: tuple[int, ...]
    default: int


ATOMIC_LANES = ("int", "uint", "long", "ulong")
# FLAT=1: the points whose run-length prefix a work-group keeps in local memory at a time (the generator's FLAT_SPAN)
FLAT_SPAN = 1024
# the generator's own 0/1 tuning parameters (a description's `switches` are others)
GENERATOR_SWITCHES = ("PARTIALS_LOCAL", "SCAN_TILED", "CHUNKED", "PACKED", "SPLIT_PAIRS", "INLINE", "PREFETCH", "FLAT")
# LOCAL_PAD=s: a word of padding after every 2^s words of a padded local accumulator (0: none), from every 32 words
# (the banks of NVIDIA's and AMD's local memory) to every 256
LOCAL_PADS = (0, 5, 6, 7, 8)
# PREFETCH=1: how many points of its chunk ahead a work-item prefetches what they gather (MDH_PREFETCH_AHEAD)
PREFETCH_AHEAD = 16


def is_generator_parameter(name: str) -> bool:
    """Whether ``name`` is a tuning parameter of the generator's (work-groups and items, its switches, the scratch's
    place), as opposed to a switch of a description's own code."""
    return name.startswith("NUM_") or name in (*GENERATOR_SWITCHES, "SCRATCH_PRIVATE", "VEC", "LOCAL_PAD")


def pow2_upto(n: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= max(1, n):
        out.append(v)
        v *= 2
    return tuple(out)


class ConfigError(ValueError):
    """A configuration that the device cannot run (work-group size, local memory, fp64)."""


class KernelLimitError(ConfigError):
    """A compiled kernel runs fewer work-items per group than the configuration asks for.

    Only known after building (registers and private memory per work-item decide it), so the static
    :meth:`Description.check_config` cannot see it; :func:`mdhom.mdh.build_within_limits` shrinks to fit.
    """

    def __init__(self, message: str, kernel: str, limit: int, wanted: int) -> None:
        super().__init__(message)
        self.kernel, self.limit, self.wanted = kernel, limit, wanted


def strip_numbers(expr: str) -> str:
    """Drop numeric literals (with suffixes such as 1.0f or 10UL) before collecting identifiers."""
    return re.sub(r"\b\d+(\.\d*)?([eE][+-]?\d+)?[fFuUlL]*\b", " ", expr)
