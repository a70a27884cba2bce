"""Intersectional sensitive groups: the value combinations of several sensitive columns become the groups."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bind_core.datasets.tables import encode_codes, require_columns
from bind_core.errors import GraphValidationError


def sensitive_columns(table: pd.DataFrame, sensitive: str | Sequence[str]) -> list[str]:
    """The sensitive column(s) ``sensitive`` names: a list, or one string of comma-separated names (a string
    that is itself a column name is that one column)."""
    if isinstance(sensitive, str):
        names = [sensitive] if sensitive in table.columns else [c.strip() for c in sensitive.split(",")]
    else:
        names = [str(c).strip() for c in sensitive]
    names = [c for c in names if c]
    if not names:
        raise GraphValidationError("sensitive", "name at least one sensitive column")
    if len(set(names)) != len(names):
        raise GraphValidationError("sensitive", f"a column is named twice in {names}")
    require_columns(table, names)
    return names


def encode_groups(table: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, list[str], list[np.ndarray]]:
    """Group codes ``0..G-1`` for the value combinations of ``columns`` that occur, in sorted order of the
    per-column codes (each column's values sorted as in :func:`encode_codes`).

    Returns:
        ``(codes, names, per_column)``: int64 group per row; each group's name (the value for one column,
        ``"col=value, col=value"`` for several); and each column's own codes.
    """
    per_column, values = [], []
    for column in columns:
        codes, names = encode_codes(table[column], column)
        per_column.append(codes)
        values.append(names)
    if len(columns) == 1:
        return per_column[0], values[0], per_column
    stacked = np.stack(per_column, axis=1)
    combos, codes = np.unique(stacked, axis=0, return_inverse=True)
    names = [
        ", ".join(f"{col}={values[i][int(code)]}" for i, (col, code) in enumerate(zip(columns, row, strict=True)))
        for row in combos
    ]
    return codes.astype(np.int64).reshape(-1), names, per_column
