"""A node table's column that numbers the nodes, when no node-id column is named.

Without a node-id column the edge list holds 0-based row positions (:mod:`bind_core.data.datasets.files`). A node
table that carries its own numbering (an ``id`` column holding each of ``0 … n−1`` once, in another order than the
rows, or each of ``1 … n`` once) would then be read two ways at once: its column as a feature, and the edge list as
positions that are not the numbers the table gives its nodes. The graph would be wrong with no error.
:func:`check_numbering` refuses that and names both ways out; a column equal to the row positions themselves
(``0 … n−1`` in row order) reads the same either way and is only reported, as a feature that numbers the rows.

The check applies only where the feature columns are taken by default; a caller who lists them (``features``) has
said what each column is.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.errors import GraphValidationError, Message, Option

MIN_ROWS = 20
"""Tables of fewer rows are not checked: a small table's integer feature can cover ``0 … n−1`` by chance."""


def check_numbering(table: pd.DataFrame, columns: Iterable[str], *, file: str, report: IngestReport) -> None:
    """Refuse a column among ``columns`` that numbers the nodes otherwise than the row positions (the module
    docstring); report one equal to the row positions.

    Args:
        table: the node table.
        columns: the columns that would become features by default (not the label, split or sensitive columns).
        file: the node file's name as the user knows it.
        report: where a column equal to the row positions is reported.

    Raises:
        GraphValidationError: (``node_id``) a column holding ``0 … n−1`` in another order than the rows, or
            ``1 … n``.
    """
    n = len(table)
    if n < MIN_ROWS:
        return
    for column in columns:
        values = _whole_numbers(table[column])
        if values is None:
            continue
        low, high = int(values.min()), int(values.max())
        if (low, high) not in ((0, n - 1), (1, n)) or not pd.Index(values).is_unique:
            continue  # the bounds first: most columns end there, before hashing every value
        in_order = bool(np.array_equal(values, np.arange(low, low + n)))
        if low == 0 and high == n - 1 and in_order:
            report.hints.append(
                Message.of(
                    f"column {column!r} holds the row positions 0 to {n - 1} in order, as node ids would; it is used "
                    "as a feature (list the feature columns to leave it out: ",
                    Option("features"),
                    ")",
                )
            )
            continue
        raise GraphValidationError(
            "node_id", _numbering_message(file, column, low, high, in_order), column=column, file=file
        )


def _whole_numbers(series: pd.Series) -> np.ndarray | None:
    """The column's values as int64 where every cell is a whole number, else ``None``."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return None
    if pd.api.types.is_integer_dtype(series.dtype):
        return series.to_numpy(dtype=np.int64)
    if pd.api.types.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64)
        if np.isfinite(values).all() and (values == np.round(values)).all():
            return values.astype(np.int64)
    return None


def _numbering_message(file: str, column: str, low: int, high: int, in_order: bool) -> Message:
    order = "in row order" if in_order else "in another order than the rows"
    return Message.of(
        f"{file}, column {column!r} holds every whole number from {low} to {high} once, {order}: it numbers the "
        "nodes, it seems, while no node-id column is named, so the edge list would be read as 0-based row positions "
        "(the first row is node 0), which are not these numbers. If the edge list names the nodes by this column, "
        "name it as the node-id column (",
        Option("node_id", column),
        "); if the edge list holds row positions, leave the column out by listing the feature columns (",
        Option("features"),
        ")",
    )
