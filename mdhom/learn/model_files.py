"""Model files both learners write: versioned JSON, written atomically, read back with clear errors."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from mdhom._files import atomic_write_json


def save_json(path: str | os.PathLike, document: dict[str, Any]) -> None:
    """Write the model atomically (compact; NaN is not valid JSON, so it is refused)."""
    atomic_write_json(path, document, allow_nan=False, separators=(",", ":"))


def read_json(path: str | os.PathLike, fmt: str, reads: int, what: str) -> dict[str, Any]:
    """The document of a model file of format ``fmt`` (``what`` names it in errors), readable by a reader of
    version ``reads``; damage is a ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{os.fspath(path)}: not a valid mdhom model file (corrupt JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise ValueError(f"{os.fspath(path)}: not {what} (format is not {fmt!r})")
    version = doc.get("version")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"{os.fspath(path)}: bad model format version {version!r}")
    if version > reads:
        raise ValueError(f"{os.fspath(path)}: model format version {version} is newer than this mdhom reads "
                         f"({reads}); upgrade mdhom")
    return doc


def format_of(path: str | os.PathLike) -> str | None:
    """The ``format`` a model file declares, or None where it is no readable JSON object (the reader of that
    format then names the damage)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return doc.get("format") if isinstance(doc, dict) else None


def encode_classes(classes: np.ndarray | None) -> dict[str, Any] | None:
    if classes is None:
        return None
    if classes.dtype.kind == "O":
        return {"dtype": "object", "values": [c.item() if hasattr(c, "item") else c for c in classes]}
    return {"dtype": classes.dtype.str, "values": classes.tolist()}


def decode_classes(d: dict[str, Any] | None) -> np.ndarray | None:
    if d is None:
        return None
    if d["dtype"] == "object":
        out = np.empty(len(d["values"]), object)
        out[:] = d["values"]
        return out
    return np.asarray(d["values"], dtype=np.dtype(d["dtype"]))
