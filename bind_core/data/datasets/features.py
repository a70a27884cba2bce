"""The feature matrix of a node table: numbers as they are, booleans as 0/1, text one-hot encoded.

Rules (documented in docs/DATASETS.md, "Bringing your own graph"):

* a numeric column is used as it is; a boolean column as 0/1;
* a text (or categorical) column with at most ``max_categories`` distinct values becomes one 0/1 column per
  value, named ``column=value``, in sorted order of the values; with more it is refused, naming the column
  (list the feature columns with ``features=`` to leave it out);
* a sensitive column that is text stays one feature holding its group codes (as in the BIND paper);
* missing values are refused (naming the rows), unless ``impute_missing``: a numeric column's missing values
  become the median of its present values, a text column's missing cells get no category (all its
  one-hot columns 0). A column with no value at all is refused either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.data.datasets.offending import cell_error, table_rows
from bind_core.errors import GraphValidationError

MAX_CATEGORIES = 20
"""Default cap on the distinct values of a text feature column that is one-hot encoded."""


def is_numeric(series: pd.Series) -> bool:
    """Numbers or booleans (pandas' nullable types included)."""
    return bool(pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype))


def missing_mask(series: pd.Series) -> np.ndarray:
    """Empty cells: NaN/None, and text that is empty or only whitespace."""
    missing = series.isna().to_numpy(dtype=bool)
    if not is_numeric(series):
        text = series.astype(str).str.strip() == ""
        missing = missing | text.to_numpy(dtype=bool)
    return missing


def feature_matrix(
    table: pd.DataFrame,
    columns: Sequence[str],
    *,
    file: str,
    sens_codes: Mapping[str, np.ndarray],
    max_categories: int = MAX_CATEGORIES,
    impute_missing: bool = False,
    report: IngestReport,
) -> tuple[np.ndarray, list[str]]:
    """Stack ``columns`` of ``table`` into a float64 ``[n, d]`` matrix by the module's rules.

    Args:
        table: the node table.
        columns: the feature columns, in order.
        file: the node table's name, for errors.
        sens_codes: the group codes of each sensitive column (a text sensitive column is used as them).
        max_categories: the most distinct values a text column may have to be one-hot encoded.
        impute_missing: fill missing values (see the module docstring) instead of refusing them.
        report: receives what was encoded and imputed.

    Returns:
        ``(x, names)``: the matrix and one name per column of it.

    Raises:
        GraphValidationError: a text column over the cap, a missing value (without ``impute_missing``), a
            non-finite number, or a column of another type (dates...).
    """
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for column in columns:
        series = table[column]
        if column in sens_codes and not is_numeric(series):
            blocks.append(sens_codes[column].astype(np.float64)[:, None])
            names.append(column)
        elif pd.api.types.is_bool_dtype(series.dtype):
            blocks.append(_numbers(series, column, file, impute_missing, report)[:, None])
            names.append(column)
            report.booleans.append(column)
        elif pd.api.types.is_numeric_dtype(series.dtype):
            blocks.append(_numbers(series, column, file, impute_missing, report)[:, None])
            names.append(column)
        elif pd.api.types.is_object_dtype(series.dtype) or isinstance(
            series.dtype, pd.CategoricalDtype | pd.StringDtype
        ):
            block, categories = _one_hot(series, column, file, max_categories, impute_missing, report)
            blocks.append(block)
            names += [f"{column}={c}" for c in categories]
        else:
            raise GraphValidationError(
                column,
                f"{file}, column {column!r}: a {series.dtype} column cannot be a feature; leave it out with features=",
                file=file,
            )
    if not blocks:
        return np.empty((len(table), 0), dtype=np.float64), names
    return np.concatenate(blocks, axis=1), names


def _numbers(series: pd.Series, column: str, file: str, impute: bool, report: IngestReport) -> np.ndarray:
    values = series.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        raise cell_error(
            column, "infinite values", file=file, column=column, rows=table_rows(infinite), values=values[infinite]
        )
    missing = np.flatnonzero(np.isnan(values))
    if missing.size == 0:
        return values
    if missing.size == values.size:
        raise GraphValidationError(column, f"{file}, column {column!r} has no value in any row", file=file)
    if not impute:
        raise cell_error(
            column, "missing values", file=file, column=column, rows=table_rows(missing), values=[""] * missing.size,
            hint="fill them, leave the column out with features=, or impute them (impute_missing)",
        )  # fmt: skip
    median = float(np.median(values[~np.isnan(values)]))
    report.imputed[column] = {"rule": "median", "count": int(missing.size), "value": median}
    return np.where(np.isnan(values), median, values)


def _one_hot(
    series: pd.Series, column: str, file: str, cap: int, impute: bool, report: IngestReport
) -> tuple[np.ndarray, list[str]]:
    missing = missing_mask(series)
    present = series[~missing].astype(str)
    categories = sorted(set(present.tolist()))
    if len(categories) > cap:
        raise GraphValidationError(
            column,
            f"{file}, column {column!r} holds text with {len(categories)} distinct values (e.g. "
            f"{', '.join(map(repr, categories[:5]))}), more than the {cap} that are one-hot encoded"
            f"{_not_numbers(series, missing)}; leave it out by listing the feature columns (features=), or raise "
            "max_categories",
            file=file,
        )
    rows = np.flatnonzero(missing)
    if rows.size and not impute:
        raise cell_error(
            column, "missing values", file=file, column=column, rows=table_rows(rows), values=[""] * rows.size,
            hint="fill them, leave the column out with features=, or let them have no category (impute_missing)",
        )  # fmt: skip
    if rows.size:
        report.imputed[column] = {"rule": "no category", "count": int(rows.size), "value": None}
    present_rows = np.flatnonzero(~missing)
    codes = np.full(len(series), -1, dtype=np.int64)
    codes[present_rows] = pd.Index(categories, dtype=object).get_indexer(pd.Index(present.to_numpy(dtype=object)))
    block = np.zeros((len(series), len(categories)), dtype=np.float64)
    block[present_rows, codes[present_rows]] = 1.0
    report.encoded[column] = categories
    return block, categories


def _not_numbers(series: pd.Series, missing: np.ndarray) -> str:
    """For a mostly numeric text column: the values that kept it from being read as numbers."""
    numbers = pd.to_numeric(series.where(~missing), errors="coerce")
    bad = np.flatnonzero(numbers.isna().to_numpy() & ~missing)
    if bad.size == 0 or bad.size > 0.1 * max(int((~missing).sum()), 1):
        return ""
    rows = table_rows(bad[:5])
    shown = ", ".join(f"row {int(r)} ({series.iat[int(i)]!r})" for r, i in zip(rows, bad[:5], strict=True))
    return f"; it would be numeric but for {bad.size} value(s): {shown}"
