"""Reading node tables (CSV, TSV or Parquet) and turning their columns into arrays."""

from __future__ import annotations

import csv
import difflib
import mmap
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow
import pyarrow.parquet as pq

from bind_core.data.datasets.limits import check_limit
from bind_core.data.datasets.offending import cell_error, ragged_row_error, table_rows
from bind_core.errors import BindError, GraphValidationError

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".parquet": None, ".pq": None}
"""Node-table file suffixes and their delimiter (``None``: Parquet)."""


def _read_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        ValueError,
        UnicodeDecodeError,
        OSError,
        pd.errors.ParserError,
        csv.Error,
        TypeError,
        NotImplementedError,
        pyarrow.ArrowException,
    ]
    return tuple(errors)


@cache
def _patterns(sep: bytes) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """``(blank lines, one field)`` for separator ``sep``, as pandas' C parser reads a CSV header.

    Blank run: spaces, tabs and line ends (the separator excepted); the lines it holds whole are the blank
    lines pandas skips before the header.
    A field: the ``csv`` module's rules (quote ``"``, doubled quotes inside quotes, no escape character): a
    quoted field, which may hold separators and newlines, then anything up to the next separator; an
    unquoted field; or none. Possessive quantifiers never backtrack, so each match is linear in its length.
    """
    s = re.escape(sep)
    blank = re.compile(b"[" + b"".join(re.escape(c) for c in (b" ", b"\t", b"\r", b"\n") if c != sep) + b"]*+")
    field = re.compile(rb'"(?:[^"]++|"")*+"[^' + s + rb"\r\n]*+|[^" + s + rb'\r\n"][^' + s + rb"\r\n]*+|")
    return blank, field


def header_columns(path: str | Path, sep: str, *, stop_after: int | None = None) -> int:
    """The number of columns of a CSV/TSV file's header, from its first logical record, without pandas.

    Blank lines before it are skipped as pandas skips them, and the record is parsed with the quoting rules
    of the ``csv`` module, so a quoted column name holding separators or newlines (``"a\\nb",c0,…``) is one
    column and the columns after it are all counted. The file is memory-mapped and scanned field by field
    (each field one regular-expression match), stopping once ``stop_after`` columns are passed: a hostile
    header costs milliseconds and no copy of the file, where pandas needs seconds to minutes.

    Args:
        path: the file.
        sep: its one-character separator.
        stop_after: stop counting once the count passes this (the result is then ``stop_after + 1``).

    Returns:
        The header's number of columns (0 for a file without one).
    """
    blank, field = _patterns(sep.encode())
    sep_byte = sep.encode()[0]
    if Path(path).stat().st_size == 0:
        return 0
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        run, end, count = _match(blank, data, 0).end(), len(data), 0
        if run >= end:
            return 0
        pos = max(data.rfind(b"\n", 0, run), data.rfind(b"\r", 0, run)) + 1  # the header's line starts here
        while True:
            pos = _match(field, data, pos).end()
            count += 1
            if pos >= end or (stop_after is not None and count > stop_after) or data[pos] != sep_byte:
                return count  # the end of the record, of the file (an unterminated quote included) or the limit
            pos += 1


SEPARATORS = {",": "','", ";": "';'", "\t": "tabs"}
"""The separators a CSV/TSV node table may use, as messages name them."""


def table_separator(path: str | Path) -> str | None:
    """The separator a node table is read with: its suffix's (``.csv`` a comma, ``.tsv`` a tab), unless its header
    line holds none of it but holds another of :data:`SEPARATORS` (a semicolon-separated CSV as spreadsheets in many
    locales save it, a TSV saved as ``.csv``): then the one the header holds most. A header without its suffix's
    separator would be one column, which no node table is. ``None`` for Parquet."""
    path = Path(path)
    sep = TABLE_SUFFIXES.get(path.suffix.lower())
    if sep is None:
        return None
    try:
        with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
            header = next((line for line in handle if line.strip()), "")[:65536]
    except OSError:
        return sep
    if sep in header:
        return sep
    counts = {c: header.count(c) for c in SEPARATORS if c != sep}
    best = max(counts, key=lambda c: counts[c])
    return best if counts[best] else sep


def _match(pattern: re.Pattern[bytes], data: mmap.mmap, pos: int) -> re.Match[bytes]:
    match = pattern.match(data, pos)  # both patterns match the empty string
    assert match is not None
    return match


def read_node_table(
    path: str | Path,
    *,
    max_nodes: int | None = None,
    max_columns: int | None = None,
    field: str = "nodes",
    shown: str | None = None,
    text_columns: Sequence[str] = (),
) -> pd.DataFrame:
    """Read a node table, one row per node, choosing the reader by file suffix.

    Args:
        path: a ``.csv``, ``.tsv``, ``.parquet`` or ``.pq`` file with a header row (CSV/TSV).
        max_nodes: the most rows accepted, ``None`` for no limit.
        max_columns: the most columns accepted, ``None`` for no limit.
        field: the field named in errors.
        shown: the file name errors show (default: the path's name).
        text_columns: CSV/TSV columns read as text, unconverted (node ids, read exactly).

    Returns:
        The table with string column names.

    Raises:
        GraphValidationError: unknown suffix, missing or unreadable file, a parse error, duplicate
            column names, no rows, or a limit exceeded.
    """
    path = Path(path)
    shown = shown or path.name
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise GraphValidationError(
            field, f"unsupported file type {suffix or '(none)'!r}; use one of {sorted(TABLE_SUFFIXES)} or .npz"
        )
    if not path.is_file():
        raise GraphValidationError(field, f"no such file: {shown}")
    try:
        frame = _read_frame(path, suffix, max_nodes, max_columns, field, text_columns)
    except BindError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise GraphValidationError(field, f"{shown} is empty") from exc
    except UnicodeDecodeError as exc:
        raise GraphValidationError(field, f"{shown} is not UTF-8 text ({exc.reason})") from exc
    except _read_errors() as exc:
        raise ragged_row_error(exc, field=field, file=shown) or GraphValidationError(
            field, f"cannot read {shown} ({type(exc).__name__}: {exc})"
        ) from exc
    return _checked(frame, max_nodes, max_columns, field, shown)


def _read_frame(
    path: Path,
    suffix: str,
    max_nodes: int | None,
    max_columns: int | None,
    field: str,
    text_columns: Sequence[str],
) -> pd.DataFrame:
    """The table as pandas reads it, refusing a file over a limit before reading it where the header says so."""
    if suffix in (".parquet", ".pq"):
        meta = pq.ParquetFile(path).metadata
        check_limit(field, "columns", int(meta.num_columns), max_columns)
        check_limit(field, "rows", int(meta.num_rows), max_nodes)
        return pd.read_parquet(path)
    sep = table_separator(path)
    assert sep is not None
    check_limit(field, "columns", header_columns(path, sep, stop_after=max_columns), max_columns)
    header = pd.read_csv(path, sep=sep, nrows=0, encoding="utf-8")
    check_limit(field, "columns", len(header.columns), max_columns)
    text = {c: str for c in text_columns if c in header.columns}
    rows = None if max_nodes is None else max_nodes + 1
    return pd.read_csv(path, sep=sep, encoding="utf-8", dtype=text or None, nrows=rows)


def _checked(
    frame: pd.DataFrame, max_nodes: int | None, max_columns: int | None, field: str, shown: str
) -> pd.DataFrame:
    """``frame`` with string column names, once its size, column names and rows pass."""
    frame.columns = [str(c) for c in frame.columns]
    check_limit(field, "rows", len(frame), max_nodes)
    check_limit(field, "columns", frame.shape[1], max_columns)
    dupes = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
    if dupes:
        raise GraphValidationError(field, f"duplicate column names {dupes}")
    if len(frame) == 0:
        raise GraphValidationError(field, f"{shown} has no rows")
    return frame


def require_columns(
    frame: pd.DataFrame, columns: Sequence[str], option: str = "nodes", *, file: str | None = None
) -> None:
    """Raise naming the first of ``columns`` that ``frame`` lacks, the columns with a close name ("did you
    mean"), and the file when given.

    Args:
        frame: the table.
        columns: the columns the caller named.
        option: the parameter that named them (``label``, ``features``...): the error's field.
        file: the table's name as the user knows it.
    """
    for column in columns:
        if column not in frame.columns:
            names = [str(c) for c in frame.columns]
            close = tuple(difflib.get_close_matches(column, names, n=3, cutoff=0.6))
            if not close:
                close = tuple(c for c in names if c.strip().casefold() == column.strip().casefold())[:3]
            where = file if file is not None else "the node table"
            guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
            raise GraphValidationError(
                option,
                f"no column {column!r} in {where}{guess} (columns: {shown})",
                value=column,
                file=file,
                suggestions=close,
            )


def value_name(value: object) -> str:
    """A value as a group or class name, exactly: a whole float as an integer (``1234567.0`` -> ``"1234567"``),
    another float by its shortest round-trip text, text as it is (no stripping: ``"F"`` and ``"F "`` differ)."""
    if isinstance(value, float | np.floating):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


def encode_codes(
    series: pd.Series, column: str, *, file: str = "the node table", field: str = "nodes"
) -> tuple[np.ndarray, list[str]]:
    """Map a label or sensitive column to contiguous codes ``0..k-1`` in sorted order of its values.

    Numbers sort numerically and anything else as strings (``"10" < "9"``); values are kept exactly (text is
    not stripped, numbers are not rounded), so distinct values stay distinct codes.

    Returns:
        ``(codes, values)``: int64 codes per row and the name of each code (:func:`value_name`).

    Raises:
        GraphValidationError: a missing or non-finite value (naming the rows; ``field`` is the error's field).
    """
    missing = series.isna().to_numpy(dtype=bool)
    if not (pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)):
        missing = missing | (series.astype(str).str.strip() == "").to_numpy(dtype=bool)
    if missing.any():
        rows = np.flatnonzero(missing)
        cells = table_rows(rows)
        raise cell_error(field, "missing values", file=file, column=column, rows=cells, values=[""] * rows.size)
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype):
        values = series.to_numpy(dtype=np.int64)
    elif pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            bad = np.flatnonzero(~np.isfinite(values))
            cells = table_rows(bad)
            raise cell_error(field, "non-finite values", file=file, column=column, rows=cells, values=values[bad])
    else:
        values = np.array([str(v) for v in series.tolist()], dtype=object)
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), [value_name(u) for u in uniques.tolist()]


def numeric_matrix(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Stack numeric (or boolean) columns into a float64 ``[n, d]`` matrix.

    Raises:
        GraphValidationError: a column is not numeric, or holds a missing or infinite value.
    """
    blocks = []
    for column in columns:
        series = frame[column]
        if pd.api.types.is_bool_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64)
        elif pd.api.types.is_numeric_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            sample = next((v for v in series.tolist() if isinstance(v, str)), series.iloc[0])
            raise GraphValidationError(
                "nodes",
                f"feature column {column!r} is not numeric (dtype {series.dtype}, e.g. {str(sample)[:40]!r})",
                column=column,
            )
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise GraphValidationError(
                "nodes", f"feature column {column!r}: missing or infinite value in row {int(bad[0])}", column=column
            )
        blocks.append(values)
    if not blocks:
        return np.empty((len(frame), 0), dtype=np.float64)
    return np.stack(blocks, axis=1)
