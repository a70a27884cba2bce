"""Errors that point at the cells of a user's file: file, column, rows as a spreadsheet shows them, values."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from bind_core.errors import GraphValidationError, Message

SHOWN = 5
"""How many offending rows and values an error quotes (the total count is always given)."""

HEADER_ROWS = 1
"""Rows above the first data row of a node table: a spreadsheet shows data row 0 as row 2."""

TABLE_ROWS = "rows as a spreadsheet shows them, counted from 1 with the header as row 1"
"""How :func:`table_rows` counts, for messages."""


def table_rows(positions: np.ndarray | Sequence[int]) -> np.ndarray:
    """Spreadsheet row numbers (1-based, the header is row 1) of 0-based data rows of a node table."""
    return np.asarray(positions, dtype=np.int64) + HEADER_ROWS + 1


def where(file: str, column: str | None) -> str:
    """``"people.csv, column 'age'"``, or the file name alone."""
    return f"{file}, column {column!r}" if column is not None else file


def cell_error(
    field: str,
    what: str,
    *,
    file: str,
    column: str | None,
    rows: np.ndarray | Sequence[int],
    values: np.ndarray | Sequence[object],
    hint: str | Message = "",
    counted: str = "",
    shown: int = SHOWN,
) -> GraphValidationError:
    """An error naming the file, the column, the first ``shown`` offending rows with their values, and how
    many rows are at fault in all.

    Args:
        field: the error's field: the file (``nodes``, ``edges``) whose cells are at fault, or the option that
            chose the column (``sensitive_bins``...).
        what: what is wrong with these cells (``"missing values"``).
        file: the file name as the user knows it.
        column: the user's column, or ``None`` (an edge list without a header).
        rows: every offending row, 1-based as a spreadsheet or editor shows it.
        values: the value at each of ``rows`` (only the first ``shown`` are used).
        hint: a sentence appended to the message (what to do about it).
        counted: how ``rows`` count (:data:`TABLE_ROWS`), said after them.
        shown: how many rows and values to quote.
    """
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    count = int(rows.size)
    shown_rows = tuple(int(r) for r in rows[:shown])
    shown_values = tuple(_text(v) for v in list(values)[:shown])
    cells = ", ".join(f"row {r} ({v!r})" for r, v in zip(shown_rows, shown_values, strict=False))
    more = f" and {count - len(shown_rows)} more" if count > len(shown_rows) else ""
    message = f"{where(file, column)}: {what} in {count} row(s): {cells}{more}" + (f" ({counted})" if counted else "")
    text = Message.of(message, "; ", hint) if hint else Message.of(message)
    return GraphValidationError(
        field, text, column=column, file=file, rows=shown_rows, values=shown_values, count=count
    )


def _text(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


_RAGGED = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def ragged_row_error(exc: BaseException, *, field: str, file: str) -> GraphValidationError | None:
    """pandas' "Expected 6 fields in line 5, saw 7" said as the row a spreadsheet shows (pandas counts lines
    from 1, the header and blank lines included), or ``None`` for another parser error. The parser stops at the
    first such row, so no total count is known."""
    match = _RAGGED.search(str(exc))
    if match is None:
        return None
    expected, line, saw = (int(g) for g in match.groups())
    return GraphValidationError(
        field,
        f"{file}: row {line} has {saw} fields where the header has {expected} (a stray separator, or a quote "
        "left open?)",
        file=file,
        rows=(line,),
    )
