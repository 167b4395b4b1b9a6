"""Estimator options declared once: name, kind, default, documentation and the check that normalises a value.

A learner keeps one :class:`OptionTable`; its signature, docstring, ``fit``'s validation, the CLI's flags and
the model file's ``params`` block are derived from it, so a new option is added in one place.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    name: str
    kind: str  # "int", "float", "str", "list" (comma-separated on the command line), "bool", "any"
    default: Any
    doc: str
    check: Callable[[Any], Any]  # returns the normalised value or raises ValueError


def integer(lo: int | None = None, hi: int | None = None, none_ok: bool = False) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v is None and none_ok:
            return None
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            if isinstance(v, numbers.Real) and float(v).is_integer():
                v = int(v)
            else:
                raise ValueError(f"must be an integer, got {v!r}")
        v = int(v)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"must lie in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}], "
                             f"got {v}")
        return v
    return check


def real(lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"must be a number, got {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise ValueError(f"must be {'>' if lo_open else '>='} {lo}, got {v}")
        if hi is not None and v > hi:
            raise ValueError(f"must be <= {hi}, got {v}")
        return v
    return check


def choice(*values: Any) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in values:
            raise ValueError(f"must be one of {', '.join(repr(x) for x in values)}; got {v!r}")
        return v
    return check


def seed(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0:
        return int(v)
    # a numpy Generator or RandomState: draw a seed from it once, so that fit stays deterministic given it
    if hasattr(v, "integers"):
        return int(v.integers(0, 2**63 - 1))
    if hasattr(v, "randint"):
        return int(v.randint(0, 2**31 - 1))
    raise ValueError(f"must be None, a non-negative integer or a numpy random generator, got {v!r}")


def device_spec(v: Any) -> Any:
    if v is None or isinstance(v, str) or hasattr(v, "key"):
        return v
    raise ValueError(f"must be None, 'numpy', 'auto', 'cpu', 'gpu', a device key or an mdhom.Device; got {v!r}")


def n_jobs(v: Any) -> Any:
    """None or -1 (every core) or a positive count, as in XGBoost and LightGBM."""
    if v is None or v == -1:
        return None if v is None else -1
    try:
        return integer(1)(v)
    except ValueError:
        raise ValueError(f"must be None, -1 (all cores) or a positive number of threads, got {v!r}") from None


def verbose(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    return integer(0)(v)


class OptionTable:
    """The options of one learner, in signature order."""

    def __init__(self, options: tuple[Option, ...]) -> None:
        self.options = options
        self.by_name: dict[str, Option] = {o.name: o for o in options}
        self.defaults: dict[str, Any] = {o.name: o.default for o in options}

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Checked and normalised copies of ``params``; unknown names and bad values raise ValueError."""
        unknown = sorted(set(params) - set(self.by_name))
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(self.by_name)}")
        out = {}
        for name, value in params.items():
            try:
                out[name] = self.by_name[name].check(value)
            except ValueError as exc:
                raise ValueError(f"{name} {exc}") from None
        return out

    def docstring(self) -> str:
        """The numpydoc ``Parameters`` section."""
        lines = ["Parameters", "----------"]
        for o in self.options:
            lines.append(f"{o.name} : {o.kind}, default={o.default!r}")
            lines.append(f"    {o.doc}")
        return "\n".join(lines)
