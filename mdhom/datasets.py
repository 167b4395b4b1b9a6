"""Readers for the small public data formats that tests and benchmarks use: LibSVM, CSV/TSV, ARFF, Mulan XML.

They exist so that tests and benchmarks run offline with numpy alone: no sklearn, pandas, liac-arff or
scikit-multilearn at runtime (scipy only when a caller asks for a sparse matrix). Every parse error is a
``ValueError`` naming the file and the 1-based line, because a silently misread column is the worst kind
of benchmark bug.
"""

from __future__ import annotations

import csv
import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load_libsvm", "load_delimited", "read_mulan_xml", "load_arff", "MISSING_TOKENS"]

# Cells read as NaN in delimited files (compared case-insensitively after stripping blanks).
MISSING_TOKENS = frozenset({"", "na", "nan", "?", "n/a", "null", "none"})

PathLike = str | os.PathLike


def _error(path: PathLike, line: int | None, message: str) -> ValueError:
    where = f"{os.fspath(path)}:{line}" if line is not None else os.fspath(path)
    return ValueError(f"{where}: {message}")


def _float(text: str, path: PathLike, line: int, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _error(path, line, f"cannot read {what} {text!r} as a number") from None


# --------------------------------------------------------------------------------------------- LibSVM


def load_libsvm(
    path: PathLike,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    sparse: bool = False,
) -> tuple[Any, np.ndarray]:
    """Read a LibSVM / SVMlight text file into ``(X, y)``.

    Absent entries are zeros (the format is sparse, not incomplete), so the dense ``X`` holds 0.0 there,
    never NaN. ``zero_based="auto"`` treats the ids as 1-based unless some id 0 occurs, as scikit-learn
    does; pass ``n_features`` (and an explicit ``zero_based``) when train and test files must agree on the
    column count although the test file happens to lack the highest ids. ``qid:`` tokens are skipped.

    Returns ``X`` as float32 (dense numpy, or ``scipy.sparse.csr_matrix`` when ``sparse=True``) and ``y``
    as float64.
    """
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', not {zero_based!r}")
    labels: list[float] = []
    indptr = [0]
    cols: list[int] = []
    vals: list[float] = []
    lines: list[int] = []  # source line of each data row, for error messages
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            tokens = text.split()
            labels.append(_float(tokens[0], path, number, "label"))
            for token in tokens[1:]:
                key, sep, value = token.partition(":")
                if not sep:
                    raise _error(path, number, f"expected 'index:value', got {token!r}")
                if key == "qid":
                    continue
                try:
                    index = int(key)
                except ValueError:
                    raise _error(path, number, f"feature id {key!r} is not an integer") from None
                if index < 0:
                    raise _error(path, number, f"negative feature id {index}")
                cols.append(index)
                vals.append(_float(value, path, number, "value"))
            indptr.append(len(cols))
            lines.append(number)

    col = np.asarray(cols, dtype=np.int64)
    if zero_based == "auto":
        zero_based = bool(col.size) and int(col.min()) == 0
    if not zero_based:
        if col.size and int(col.min()) == 0:
            bad = lines[int(np.searchsorted(indptr, int(np.argmin(col)), side="right")) - 1]
            raise _error(path, bad, "feature id 0 in a file read as 1-based (zero_based=False)")
        col -= 1
    width = int(col.max()) + 1 if col.size else 0
    if n_features is not None:
        if col.size and width > n_features:
            at = int(np.argmax(col))
            bad = lines[int(np.searchsorted(indptr, at, side="right")) - 1]
            raise _error(path, bad, f"feature id beyond n_features={n_features}")
        width = int(n_features)

    rows = len(labels)
    ptr = np.asarray(indptr, dtype=np.int64)
    row = np.repeat(np.arange(rows, dtype=np.int64), np.diff(ptr))
    flat = row * max(width, 1) + col
    if np.unique(flat).size != flat.size:
        order = np.argsort(flat, kind="stable")
        dup = order[1:][np.diff(flat[order]) == 0][0]
        raise _error(path, lines[int(row[dup])], "feature id repeated within one row")
    y = np.asarray(labels, dtype=np.float64)
    data = np.asarray(vals, dtype=np.float32)
    if sparse:
        import scipy.sparse  # lazy: only sparse callers need scipy

        X = scipy.sparse.csr_matrix((data, col.astype(np.int32), ptr.astype(np.int32)), shape=(rows, width))
        X.sort_indices()
        return X, y
    X = np.zeros((rows, width), dtype=np.float32)
    X[row, col] = data
    return X, y


# ------------------------------------------------------------------------------------------ delimited


def _delimiter_for(path: PathLike, first_line: str) -> str | None:
    suffix = Path(path).suffix.lower()
    if suffix in (".tsv", ".tab"):
        return "\t"
    if suffix == ".csv":
        return ","
    if "\t" in first_line:
        return "\t"
    if "," in first_line:
        return ","
    if ";" in first_line:
        return ";"
    return None  # runs of blanks


def _is_number_or_missing(cell: str) -> bool:
    if cell.strip().lower() in MISSING_TOKENS:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def load_delimited(
    path: PathLike,
    target: int | str = 0,
    delimiter: str | None = None,
    header: bool | str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV/TSV table of numbers into ``(X, y)``: X float64 with NaN for missing cells, y float64.

    ``delimiter=None`` picks tab for ``.tsv``/``.tab``, comma for ``.csv``, otherwise sniffs the first line
    (tab, comma, semicolon, else blanks). ``header="auto"`` takes the first line as column names when any of
    its cells is not a number. ``target`` is a column index (negative counts from the end) or a header name.
    Empty, ``NA``, ``nan``, ``?`` (and ``N/A``, ``null``, ``none``) cells are NaN in X; a missing target is an
    error, since no learner can use that row.
    """
    if header not in (True, False, "auto"):
        raise ValueError(f"header must be True, False or 'auto', not {header!r}")
    with open(path, encoding="utf-8", newline="") as handle:
        first = handle.readline()
        handle.seek(0)
        if delimiter is None:
            delimiter = _delimiter_for(path, first)
        if delimiter is None:
            records = ((n, line.split()) for n, line in enumerate(handle, start=1))
        else:
            reader = csv.reader(handle, delimiter=delimiter)
            records = ((reader.line_num, cells) for cells in reader)
        rows: list[list[float]] = []
        names: list[str] | None = None
        width = None
        for number, cells in records:
            if not cells or all(not c.strip() for c in cells):
                continue
            if names is None and not rows and header is not False:
                if header is True or (header == "auto" and not all(_is_number_or_missing(c) for c in cells)):
                    names = [c.strip() for c in cells]
                    width = len(names)
                    continue
            if width is None:
                width = len(cells)
            elif len(cells) != width:
                raise _error(path, number, f"{len(cells)} cells where earlier rows have {width}")
            row = []
            for cell in cells:
                token = cell.strip()
                if token.lower() in MISSING_TOKENS:
                    row.append(math.nan)
                else:
                    row.append(_float(token, path, number, "cell"))
            rows.append(row)
            rows[-1].append(number)  # remember the line for the target check below; dropped afterwards
    if not rows:
        raise _error(path, None, "no data rows")
    table = np.asarray(rows, dtype=np.float64)
    line_of = table[:, -1].astype(np.int64)
    table = table[:, :-1]
    ncols = table.shape[1]
    if isinstance(target, str):
        if names is None:
            raise _error(path, None, f"target {target!r} given by name but the file has no header")
        if target not in names:
            raise _error(path, 1, f"no column named {target!r} (columns: {', '.join(names[:10])}...)")
        column = names.index(target)
    else:
        column = int(target)
        if not -ncols <= column < ncols:
            raise _error(path, None, f"target column {target} out of range for {ncols} columns")
        column %= ncols
    y = table[:, column].copy()
    if np.isnan(y).any():
        raise _error(path, int(line_of[np.isnan(y).argmax()]), "missing target value")
    X = np.delete(table, column, axis=1)
    return X, y


# ------------------------------------------------------------------------------------------- Mulan XML


def read_mulan_xml(path: PathLike) -> list[str]:
    """Label names, in document order, from a Mulan labels XML (nested hierarchies are flattened)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise _error(path, exc.position[0], f"not well-formed XML: {exc}") from None
    names = [el.attrib["name"] for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "label" and "name" in el.attrib]
    if not names:
        raise _error(path, None, "no <label name=...> elements")
    return names


# ------------------------------------------------------------------------------------------------ ARFF


def _split_arff(text: str, path: PathLike, line: int, mark: bool = True) -> list[str]:
    """Split on commas outside single/double quotes; each token is stripped.

    With ``mark``, a quoted token is unquoted (backslash escapes resolved) and prefixed with ``\\x00`` so
    that a quoted ``'?'`` stays a value rather than the missing marker.
    """
    if "'" not in text and '"' not in text:
        return [t.strip() for t in text.split(",")]
    tokens: list[str] = []
    start, quote, i, n = 0, "", 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            tokens.append(text[start:i].strip())
            start = i + 1
        i += 1
    if quote:
        raise _error(path, line, f"unterminated quote in {text.strip()[:60]!r}")
    tokens.append(text[start:].strip())
    return [_mark(t, path, line) for t in tokens] if mark else tokens


def _mark(token: str, path: PathLike, line: int) -> str:
    if token[:1] not in ("'", '"'):
        return token
    if len(token) < 2 or token[-1] != token[0]:
        raise _error(path, line, f"text after a closing quote in {token[:60]!r}")
    return "\x00" + re.sub(r"\\(.)", r"\1", token[1:-1])


def _unquote(token: str) -> str:
    return token[1:] if token.startswith("\x00") else token


def _parse_attribute(rest: str, path: PathLike, line: int) -> tuple[str, list[str] | None]:
    """``name type`` after ``@attribute`` -> (name, nominal values or None for numeric)."""
    rest = rest.strip()
    if rest[:1] in "'\"":
        quote, j, buf = rest[0], 1, []
        while j < len(rest) and rest[j] != quote:
            if rest[j] == "\\" and j + 1 < len(rest):
                j += 1
            buf.append(rest[j])
            j += 1
        if j >= len(rest):
            raise _error(path, line, "unterminated quote in attribute name")
        name, kind = "".join(buf), rest[j + 1 :].strip()
    else:
        brace = rest.find("{")
        parts = rest.split(None, 1)
        if 0 < brace < len(parts[0]):
            parts = [rest[:brace], rest[brace:]]
        if len(parts) < 2:
            raise _error(path, line, f"attribute without a type: {rest!r}")
        name, kind = parts[0], parts[1].strip()
    if kind.startswith("{"):
        if not kind.endswith("}"):
            raise _error(path, line, f"nominal attribute {name!r} lacks a closing brace")
        values = [_unquote(v) for v in _split_arff(kind[1:-1], path, line)]
        return name, values
    lowered = kind.lower()
    if lowered in ("numeric", "real", "integer"):
        return name, None
    raise _error(path, line, f"attribute {name!r} has type {kind!r}; only numeric and nominal are supported")


def _resolve_labels(labels: int | list[str] | str | os.PathLike | None, names: list[str], path: PathLike) -> list[int]:
    if labels is None:
        return [len(names) - 1]
    if isinstance(labels, bool):
        raise ValueError("labels must be a count, a list of names or a Mulan XML path, not a bool")
    if isinstance(labels, int):
        if not 0 < labels < len(names):
            raise _error(path, None, f"labels={labels} but the file has {len(names)} attributes")
        return list(range(len(names) - labels, len(names)))
    if isinstance(labels, str | os.PathLike):
        labels = read_mulan_xml(labels)
    wanted = list(labels)
    position = {name: i for i, name in enumerate(names)}
    missing = [name for name in wanted if name not in position]
    if missing:
        raise _error(path, None, f"label attributes not in the file: {', '.join(missing[:5])}")
    if len(set(wanted)) != len(wanted):
        raise ValueError("label names repeat")
    return [position[name] for name in wanted]


def load_arff(
    path: PathLike,
    labels: int | list[str] | str | os.PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Read an ARFF file (dense or sparse rows) into ``(X, Y, feature_names, label_names)``.

    ``labels`` says which attributes are targets: a count (the last N attributes, MEKA/Mulan style), a list
    of names, or the path of a Mulan XML; ``None`` takes the last attribute as the single target. Label
    columns come out in the order given (attribute order for a count). Nominal attributes are encoded as the
    index of the value in their declaration; ``?`` is NaN in X. Omitted entries of sparse rows are 0, as the
    ARFF spec says (for a nominal attribute: its first value).

    ``Y`` is 2-D. For multi-label targets (and any target whose values are all 0/1) it is int8 0/1, read by
    value for nominal ``{0,1}`` labels so that a declaration ``{1,0}`` cannot flip them; a single nominal
    target with more values gives class indices (int8 up to 127 classes, else int32); a numeric single
    target stays float64. Instance weights (``{w}`` after a row) are ignored.
    """
    names: list[str] = []
    kinds: list[list[str] | None] = []
    rows_dense: list[list[float]] = []
    sparse_cells: list[tuple[int, int, float]] = []
    row_lines: list[int] = []
    in_data = False
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if not text or text.startswith("%"):
                continue
            if not in_data:
                keyword = text.split(None, 1)[0].lower()
                if keyword == "@relation":
                    continue
                if keyword == "@attribute":
                    name, values = _parse_attribute(text[len("@attribute") :], path, number)
                    if name in names:
                        raise _error(path, number, f"attribute {name!r} declared twice")
                    names.append(name)
                    kinds.append(values)
                    continue
                if keyword == "@data":
                    if not names:
                        raise _error(path, number, "@data before any @attribute")
                    lookups = [None if v is None else {s: float(i) for i, s in enumerate(v)} for v in kinds]
                    in_data = True
                    continue
                raise _error(path, number, f"unexpected header line {text[:40]!r}")
            row_index = len(row_lines)
            row_lines.append(number)
            if text.startswith("{"):
                close = text.find("}")
                if close < 0:
                    raise _error(path, number, "sparse row lacks its closing brace")
                body = text[1:close].strip()
                cells = _split_arff(body, path, number, mark=False) if body else []
                for cell in cells:
                    parts = cell.split(None, 1)
                    if len(parts) != 2:
                        raise _error(path, number, f"sparse entry {cell!r} is not 'index value'")
                    try:
                        index = int(parts[0])
                    except ValueError:
                        raise _error(path, number, f"sparse index {parts[0]!r} is not an integer") from None
                    if not 0 <= index < len(names):
                        raise _error(path, number, f"sparse index {index} outside 0..{len(names) - 1}")
                    token = _mark(parts[1].strip(), path, number)
                    value = _arff_value(token, lookups[index], path, number, names, index)
                    sparse_cells.append((row_index, index, value))
                rows_dense.append([])
            else:
                cells = _split_arff(text, path, number)
                if len(cells) == len(names) + 1 and cells[-1].startswith("{"):
                    cells = cells[:-1]  # instance weight
                if len(cells) != len(names):
                    raise _error(path, number, f"{len(cells)} values where {len(names)} attributes are declared")
                rows_dense.append([_arff_value(c, lookups[j], path, number, names, j) for j, c in enumerate(cells)])
    if not in_data:
        raise _error(path, None, "no @data section")

    table = np.zeros((len(row_lines), len(names)), dtype=np.float64)
    for i, row in enumerate(rows_dense):
        if row:
            table[i] = row
    if sparse_cells:
        r, c, v = (np.asarray(a) for a in zip(*sparse_cells, strict=True))
        table[r.astype(np.int64), c.astype(np.int64)] = v

    label_cols = _resolve_labels(labels, names, path)
    feature_cols = [j for j in range(len(names)) if j not in set(label_cols)]
    raw_y = table[:, label_cols].copy()
    for k, j in enumerate(label_cols):  # nominal labels by value where the values are numbers ({0,1})
        values = kinds[j]
        if values is not None:
            try:
                numeric = np.asarray([float(s) for s in values])
            except ValueError:
                continue
            col = raw_y[:, k]
            ok = ~np.isnan(col)
            col[ok] = numeric[col[ok].astype(np.int64)]
    if np.isnan(raw_y).any():
        r, k = np.argwhere(np.isnan(raw_y))[0]
        raise _error(path, row_lines[r], f"missing value for label {names[label_cols[k]]!r}")
    binary = bool(np.isin(raw_y, (0.0, 1.0)).all())
    if len(label_cols) > 1 and not binary:
        r, k = np.argwhere(~np.isin(raw_y, (0.0, 1.0)))[0]
        raise _error(path, row_lines[r], f"label {names[label_cols[k]]!r} is {float(raw_y[r, k])!r}, not 0 or 1")
    if binary:
        Y = raw_y.astype(np.int8)
    elif kinds[label_cols[0]] is not None and np.all(raw_y == np.round(raw_y)):
        Y = raw_y.astype(np.int8 if raw_y.max() <= 127 and raw_y.min() >= -128 else np.int32)
    else:
        Y = raw_y
    X = table[:, feature_cols]
    return X, Y, [names[j] for j in feature_cols], [names[j] for j in label_cols]


def _arff_value(
    token: str,
    lookup: dict[str, float] | None,
    path: PathLike,
    line: int,
    names: list[str],
    column: int | None = None,
) -> float:
    if token == "?":
        return math.nan
    value = _unquote(token)
    if lookup is None:
        return _float(value, path, line, "value")
    try:
        return lookup[value]
    except KeyError:
        where = f" of {names[column]!r}" if column is not None else ""
        raise _error(path, line, f"{value!r} is not a declared value{where}") from None
