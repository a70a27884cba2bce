"""The label column of a node table: class codes, and unlabeled nodes (an empty cell or a sentinel value)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bind_core.data.datasets.features import is_numeric, missing_mask
from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.data.datasets.tables import encode_codes, value_name
from bind_core.errors import GraphValidationError, Message, Option

UNLABELED = -1
"""The label code of an unlabeled node in a :class:`~bind_core.data.graph.Graph` (such a node is in no split)."""


def encode_labels(
    series: pd.Series,
    column: str,
    *,
    file: str,
    unlabeled: str | float | None = None,
    report: IngestReport,
) -> tuple[np.ndarray, list[str]]:
    """Class codes ``0..C-1`` (sorted order of the values, as :func:`encode_codes`) and ``-1`` for unlabeled.

    A node is unlabeled when its cell is empty, or equals ``unlabeled``: compared as a number when the column
    is numeric (``"-1"`` matches ``-1.0``), else as exact text.

    Args:
        series: the label column.
        column: its name.
        file: the node table's name, for messages.
        unlabeled: the value that marks unlabeled nodes, or ``None``.
        report: receives the number of unlabeled nodes, a hint when the column looks like a sentinel plus two
            classes, and one when it holds more than two classes (what ΔSP and ΔEO then mean).

    Returns:
        ``(codes, names)``: int64 codes per row (``-1`` unlabeled) and the value of each class.

    Raises:
        GraphValidationError: ``unlabeled`` is not a number for a numeric column; no labeled node.
    """
    unlabeled_mask = missing_mask(series)
    if unlabeled is not None:
        unlabeled_mask = unlabeled_mask | _equals(series, unlabeled, column, file)
    labeled = np.flatnonzero(~unlabeled_mask)
    if labeled.size == 0:
        raise GraphValidationError(column, f"{file}, column {column!r}: no node has a label", file=file)
    codes = np.full(len(series), UNLABELED, dtype=np.int64)
    part, names = encode_codes(series.iloc[labeled].reset_index(drop=True), column, file=file)
    codes[labeled] = part
    report.unlabeled = int(unlabeled_mask.sum())
    if unlabeled is None:
        report.hints += _sentinel_hint(series.iloc[labeled], column)
    elif not bool(_equals(series, unlabeled, column, file).any()):
        report.hints.append(f"no label in column {column!r} equals the unlabeled value {unlabeled!r}")
    if len(names) > 2:
        report.hints.append(multiclass_hint(column, names))
    return codes, names


def _equals(series: pd.Series, value: str | float, column: str, file: str) -> np.ndarray:
    if is_numeric(series) and not pd.api.types.is_bool_dtype(series.dtype):
        try:
            number = float(value)
        except ValueError as exc:
            raise GraphValidationError(
                "unlabeled",
                f"{file}, column {column!r} is numeric, but the unlabeled value {value!r} is not a number",
                value=str(value),
                column=column,
                file=file,
            ) from exc
        values = series.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)
        equal: np.ndarray = (values == number).astype(bool)
        return equal
    return (series.astype(object).map(lambda v: not pd.isna(v) and str(v) == str(value))).to_numpy(dtype=bool)


def multiclass_hint(column: str, classes: list[str]) -> str:
    """What the audit's parity metrics mean for a label with more than two classes (see
    :func:`bind_core.fairness.metrics.delta_sp`)."""
    shown = ", ".join(map(repr, classes[:10])) + (", ..." if len(classes) > 10 else "")
    return (
        f"label column {column!r} has {len(classes)} classes ({shown}): the audit treats it as a {len(classes)}-class "
        "problem, where ΔSP is the mean over the classes c of the gap between groups in P(ŷ=c) and ΔEO the mean "
        "over c of the gap in P(ŷ=c | y=c) (each class's true-positive rate); if the question is yes or no, map "
        "the values to two classes first"
    )


def _sentinel_hint(series: pd.Series, column: str) -> list[str | Message]:
    """A hint when a numeric label column holds exactly three values, one of them negative (``-1, 0, 1``)."""
    if not is_numeric(series) or pd.api.types.is_bool_dtype(series.dtype):
        return []
    values = np.unique(series.astype("float64").to_numpy(dtype=np.float64))
    negative = values[values < 0]
    if values.size != 3 or negative.size != 1:
        return []
    sentinel, rest = value_name(negative[0]), [value_name(v) for v in values[values >= 0]]
    return [
        Message.of(
            f"label column {column!r} holds {sentinel} beside {rest[0]} and {rest[1]}: it is read as a third class; "
            f"if {sentinel} marks unlabeled nodes, pass ",
            Option("unlabeled", sentinel),
        )
    ]
