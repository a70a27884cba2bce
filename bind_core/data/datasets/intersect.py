"""Intersectional sensitive groups: the value combinations of several sensitive columns become the groups."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bind_core.data.datasets.bins import BinRule, apply_bins
from bind_core.data.datasets.tables import encode_codes, require_columns, value_name
from bind_core.errors import GraphValidationError, Message, Option


def sensitive_columns(table: pd.DataFrame, sensitive: str | Sequence[str], *, file: str | None = None) -> list[str]:
    """The sensitive column(s) ``sensitive`` names: a list, or one string of comma-separated names (a string
    that is itself a column name is that one column)."""
    if isinstance(sensitive, str):
        names = [sensitive] if sensitive in table.columns else [c.strip() for c in sensitive.split(",")]
    else:
        names = [str(c).strip() for c in sensitive]
    names = [c for c in names if c]
    if not names:
        raise GraphValidationError("sensitive", "name at least one sensitive column", value=str(sensitive))
    if len(set(names)) != len(names):
        raise GraphValidationError("sensitive", f"a column is named twice in {names}", value=", ".join(names))
    require_columns(table, names, "sensitive", file=file)
    return names


def encode_groups(
    table: pd.DataFrame,
    columns: Sequence[str],
    *,
    bins: Mapping[str, BinRule] | None = None,
    max_values: int | None = None,
    file: str = "the node table",
) -> tuple[np.ndarray, list[str], list[np.ndarray]]:
    """Group codes ``0..G-1`` for the value combinations of ``columns`` that occur, in sorted order of the
    per-column codes (each column's values sorted as in :func:`encode_codes`, or its bins in increasing order).

    Args:
        table: the node table.
        columns: the sensitive columns.
        bins: a binning rule for some of the columns (:mod:`bind_core.data.datasets.bins`).
        max_values: the most distinct values a numeric column without a binning rule may hold (``None``: any).
        file: the node table's name, for messages.

    Returns:
        ``(codes, names, per_column)``: int64 group per row; each group's name (the value or bin for one
        column, ``"col=value & col=value"`` for several, a bin by its own name); and each column's own codes.

    Raises:
        GraphValidationError: a missing value, or a numeric column with more than ``max_values`` values.
    """
    bins = bins or {}
    unknown = sorted(set(bins) - set(columns))
    if unknown:
        close = tuple(dict.fromkeys(c for u in unknown for c in difflib.get_close_matches(u, list(columns), n=1)))
        guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise GraphValidationError(
            "sensitive_bins",
            f"binning rule(s) for {unknown}, which are not sensitive columns {list(columns)}{guess}",
            value=", ".join(unknown),
            suggestions=close,
        )
    per_column, values = [], []
    for column in columns:
        if column in bins:
            codes, names = apply_bins(table[column], bins[column], file=file)
        else:
            _check_values(table[column], column, max_values, file)
            codes, names = encode_codes(table[column], column, file=file)
        per_column.append(codes)
        values.append(names)
    if len(columns) == 1:
        return per_column[0], values[0], per_column
    stacked = np.stack(per_column, axis=1)
    combos, codes = np.unique(stacked, axis=0, return_inverse=True)
    names = [
        " & ".join(
            values[i][int(code)] if col in bins else f"{col}={values[i][int(code)]}"
            for i, (col, code) in enumerate(zip(columns, row, strict=True))
        )
        for row in combos
    ]
    return codes.astype(np.int64).reshape(-1), names, per_column


def _check_values(series: pd.Series, column: str, max_values: int | None, file: str) -> None:
    """Refuse a numeric (not boolean) column with more than ``max_values`` distinct values: one group per age
    in years is not what anyone means."""
    if max_values is None or pd.api.types.is_bool_dtype(series.dtype):
        return
    if not pd.api.types.is_numeric_dtype(series.dtype):
        return
    distinct = series.dropna().unique()
    if len(distinct) <= max_values:
        return
    median = value_name(float(np.median(series.dropna().to_numpy(dtype=np.float64))))
    message = Message.of(
        f"{file}, column {column!r} is numeric with {len(distinct)} distinct values, more than the {max_values} "
        "groups a sensitive column may have; make groups with a binning rule, e.g. ",
        Option("sensitive_bins", f"{column}>={median}"),
        f" (its median), or bin edges ('{column}:<edge>,<edge>')",
    )
    raise GraphValidationError("sensitive", message, value=column, column=column, file=file)
