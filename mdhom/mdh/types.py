"""Atom types of md_hom outputs: a scalar, a struct, or a small fixed-size array, in OpenCL C and numpy.

Each type knows its OpenCL declaration, its numpy dtype (with the same layout, so buffers move without
conversion) and the element-wise helpers (zero, add, max, lowest) that the combine operators in
``kernels/ops`` are written against. Generating that plumbing from the type keeps one operator file valid
for every atom shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

CTYPES: dict[str, np.dtype] = {
    "char": np.dtype(np.int8),
    "uchar": np.dtype(np.uint8),
    "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16),
    "int": np.dtype(np.int32),
    "uint": np.dtype(np.uint32),
    "long": np.dtype(np.int64),
    "ulong": np.dtype(np.uint64),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
}

_LOWEST = {
    "char": "CHAR_MIN", "uchar": "0", "short": "SHRT_MIN", "ushort": "0", "int": "INT_MIN", "uint": "0",
    "long": "LONG_MIN", "ulong": "0", "float": "-INFINITY", "double": "-INFINITY",
}
_HIGHEST = {
    "char": "CHAR_MAX", "uchar": "UCHAR_MAX", "short": "SHRT_MAX", "ushort": "USHRT_MAX", "int": "INT_MAX",
    "uint": "UINT_MAX", "long": "LONG_MAX", "ulong": "ULONG_MAX", "float": "INFINITY", "double": "INFINITY",
}


def ctype_of(dtype: np.dtype | type | str) -> str:
    """The OpenCL C scalar type for a numpy dtype (raises for types OpenCL cannot hold)."""
    dt = np.dtype(dtype)
    for name, d in CTYPES.items():
        if d == dt:
            return name
    raise TypeError(f"numpy dtype {dt} has no OpenCL C scalar type")


def _check_ctype(ctype: str) -> str:
    if ctype not in CTYPES:
        raise TypeError(f"unknown OpenCL scalar type {ctype!r}; use one of {', '.join(CTYPES)}")
    return ctype


@dataclass(frozen=True)
class Scalar:
    """A scalar atom such as ``float`` or ``long``."""

    ctype: str

    def __post_init__(self) -> None:
        _check_ctype(self.ctype)

    @property
    def dtype(self) -> np.dtype:
        return CTYPES[self.ctype]

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def scalars(self) -> tuple[str, ...]:
        return (self.ctype,)

    def declaration(self, name: str) -> str:
        return f"typedef {self.ctype} {name};"

    def lanes(self, var: str) -> list[tuple[str, str]]:
        """(C lvalue, scalar type) of every scalar inside a value of this type."""
        return [(var, self.ctype)]


@dataclass(frozen=True)
class Struct:
    """A struct atom, e.g. a (gradient, hessian) pair or a (value, index) pair for argmax."""

    name: str
    fields: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.fields:
            raise TypeError(f"struct {self.name} has no fields")
        for _, ctype in self.fields:
            _check_ctype(ctype)

    @cached_property
    def dtype(self) -> np.dtype:
        """Made once per struct: a structured dtype takes numpy ~10 us to build, and launches and result reads ask
        for it on every split step."""
        return np.dtype([(f, CTYPES[t]) for f, t in self.fields], align=True)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def scalars(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.fields)

    def declaration(self, name: str) -> str:
        body = " ".join(f"{t} {f};" for f, t in self.fields)
        return f"typedef struct {{ {body} }} {name};"

    def lanes(self, var: str) -> list[tuple[str, str]]:
        return [(f"{var}.{f}", t) for f, t in self.fields]


@dataclass(frozen=True)
class Array:
    """A small fixed-size array atom (e.g. the bins of one histogram) of scalars or structs.

    In OpenCL it is a struct holding ``v[length]`` so that it can be assigned and returned by value; in
    numpy it adds a trailing axis of ``length``.
    """

    element: Scalar | Struct
    length: int

    def __post_init__(self) -> None:
        if not isinstance(self.element, Scalar | Struct):
            raise TypeError("array elements must be a Scalar or a Struct")
        if int(self.length) < 1:
            raise TypeError(f"array length must be positive, got {self.length}")

    @property
    def dtype(self) -> np.dtype:
        return self.element.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.length),)

    @property
    def scalars(self) -> tuple[str, ...]:
        return self.element.scalars

    def declaration(self, name: str) -> str:
        elem = "mdh_elem_t"
        return f"{self.element.declaration(elem)}\ntypedef struct {{ {elem} v[{self.length}]; }} {name};"

    def lanes(self, var: str) -> list[tuple[str, str]]:
        # Element-wise helpers loop over `mdh_k`; the loop is written by `helpers`.
        return self.element.lanes(f"{var}.v[mdh_k]")


AtomType = Scalar | Struct | Array


def as_atom(t: AtomType | str | np.dtype | type) -> AtomType:
    """Accept a type object, an OpenCL scalar name, or a numpy scalar dtype."""
    if isinstance(t, Scalar | Struct | Array):
        return t
    if isinstance(t, str):
        return Scalar(_check_ctype(t))
    return Scalar(ctype_of(t))


def itemsize(t: AtomType) -> int:
    """Bytes per atom, as laid out in OpenCL and numpy alike."""
    n = 1
    for s in t.shape:
        n *= s
    return t.dtype.itemsize * n


def helpers(t: AtomType, name: str = "atom_t") -> str:
    """OpenCL helpers ``atom_zero``, ``atom_lowest``, ``atom_highest``, ``atom_add``, ``atom_max``, ``atom_min``.

    They apply per scalar lane, so the operators in ``kernels/ops`` work for scalars, structs and arrays.
    """
    loop_open = f"for (int mdh_k = 0; mdh_k < {t.length}; ++mdh_k) {{ " if isinstance(t, Array) else ""
    loop_close = " }" if isinstance(t, Array) else ""

    def fill(fn: str, table: dict[str, str]) -> str:
        body = " ".join(f"{lv} = ({ct}){table[ct]};" for lv, ct in t.lanes("r"))
        return f"inline {name} {fn}(void) {{ {name} r; {loop_open}{body}{loop_close} return r; }}"

    def binary(fn: str, expr: str) -> str:
        parts = []
        for (lr, ct), (la, _), (lb, _) in zip(t.lanes("r"), t.lanes("a"), t.lanes("b"), strict=True):
            parts.append(f"{lr} = ({ct})({expr.format(a=la, b=lb)});")
        return (
            f"inline {name} {fn}({name} a, {name} b) {{ {name} r; {loop_open}{' '.join(parts)}{loop_close} "
            "return r; }"
        )

    zeros = {c: "0" for c in CTYPES}
    return "\n".join(
        [
            fill("atom_zero", zeros),
            fill("atom_lowest", _LOWEST),
            fill("atom_highest", _HIGHEST),
            binary("atom_add", "{a} + {b}"),
            binary("atom_max", "({a} > {b}) ? {a} : {b}"),
            binary("atom_min", "({a} < {b}) ? {a} : {b}"),
        ]
    )
