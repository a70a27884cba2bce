"""The feature matrix of a node table: numbers as they are, booleans as 0/1, text one-hot encoded.

Rules (documented in docs/DATASETS.md, "Bringing your own graph"):

* a numeric column is used as it is; a boolean column as 0/1;
* a text (or categorical) column with at most ``max_categories`` distinct values becomes one 0/1 column per
  value, named ``column=value``, in sorted order of the values; with more it is refused, naming the column
  (list the feature columns with ``features`` to leave it out);
* a text column with more than ``max_categories`` values that holds numbers but for missing-value tokens
  (:data:`MISSING_TOKENS`: ``NA``, ``n/a``, ``unknown``, ``?``...) and a few cells of stray text (at most
  :data:`STRAY_SHARE` of its cells) is a numeric column: its tokens are missing values, and its stray text is
  refused, every such cell listed;
* a sensitive column that is text with two values stays one feature holding its group codes (as in the BIND
  paper); with more it is one-hot encoded like any text column (whatever ``max_categories``), since one column of
  codes would order its values (``east < north < south``) where they have no order;
* missing values are refused (naming the rows), unless ``impute_missing``: a numeric column's missing values
  become the median of its present values, a text column's missing cells get no category (all its
  one-hot columns 0). A column with no value at all is refused either way.

Every column's problems are reported together, in one error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.data.datasets.offending import TABLE_ROWS, cell_error, table_rows
from bind_core.data.records import Imputation
from bind_core.errors import GraphValidationError, Message, Option

MAX_CATEGORIES = 20
"""Default cap on the distinct values of a text feature column that is one-hot encoded."""

MISSING_TOKENS = frozenset(
    {"", "na", "n/a", "n.a.", "#n/a", "<na>", "nan", "null", "none", "nil", "-", "--", ".", "?", "unknown", "missing"}
)
"""Cell texts (stripped, in any case) that stand for a missing value in a column of numbers."""

STRAY_SHARE = 0.1
"""The largest share of a column's non-empty cells that may be stray text for it to count as numeric."""

LISTED = 20
"""How many bad cells of a numeric column an error lists (the count of all is always given)."""

_FEATURES, _IMPUTE = Option("features"), Option("impute_missing", True)


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
    problems: list[GraphValidationError] = []
    for column in columns:
        try:
            block, block_names = _column(
                table[column], column, file, sens_codes.get(column), max_categories, impute_missing, report
            )
        except GraphValidationError as exc:
            problems.append(exc)
            continue
        blocks.append(block)
        names += block_names
    if problems:
        raise GraphValidationError.together(problems)
    if not blocks:
        return np.empty((len(table), 0), dtype=np.float64), names
    return np.concatenate(blocks, axis=1), names


def _column(
    series: pd.Series,
    column: str,
    file: str,
    sens_codes: np.ndarray | None,
    cap: int,
    impute: bool,
    report: IngestReport,
) -> tuple[np.ndarray, list[str]]:
    """One column's block of the feature matrix, ``[n, k]``, and its ``k`` names."""
    if sens_codes is not None and not is_numeric(series):
        values = int(sens_codes.max(initial=0)) + 1
        if values <= 2:
            return sens_codes.astype(np.float64)[:, None], [column]
        block, categories = _one_hot(series, column, file, max(cap, values), impute, report)
        return block, [f"{column}={c}" for c in categories]
    if pd.api.types.is_bool_dtype(series.dtype):
        report.booleans.append(column)
        return _numbers(series, column, file, impute, report)[:, None], [column]
    if pd.api.types.is_numeric_dtype(series.dtype):
        return _numbers(series, column, file, impute, report)[:, None], [column]
    if pd.api.types.is_object_dtype(series.dtype) or isinstance(series.dtype, pd.CategoricalDtype | pd.StringDtype):
        if _numeric_text(series, cap):
            return _numbers_from_text(series, column, file, impute, report)[:, None], [column]
        block, categories = _one_hot(series, column, file, cap, impute, report)
        return block, [f"{column}={c}" for c in categories]
    message = Message.of(
        f"{file}, column {column!r}: a {series.dtype} column cannot be a feature; leave it out with ", _FEATURES
    )
    raise GraphValidationError("features", message, column=column, file=file)


def _numbers(series: pd.Series, column: str, file: str, impute: bool, report: IngestReport) -> np.ndarray:
    values = series.astype("float64").to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        raise cell_error(
            "nodes", "infinite values", file=file, column=column, rows=table_rows(infinite), values=values[infinite]
        )
    missing = np.flatnonzero(np.isnan(values))
    if missing.size == 0:
        return values
    if missing.size == values.size:
        raise GraphValidationError(
            "nodes", f"{file}, column {column!r} has no value in any row", column=column, file=file
        )
    if not impute:
        hint = Message.of("fill them, leave the column out with ", _FEATURES, ", or impute them (", _IMPUTE, ")")
        rows = table_rows(missing)
        raise cell_error(
            "nodes", "missing values", file=file, column=column, rows=rows, values=[""] * rows.size, hint=hint
        )
    median = float(np.median(values[~np.isnan(values)]))
    report.imputed[column] = Imputation(rule="median", count=int(missing.size), value=median)
    return np.where(np.isnan(values), median, values)


def _one_hot(
    series: pd.Series, column: str, file: str, cap: int, impute: bool, report: IngestReport
) -> tuple[np.ndarray, list[str]]:
    missing = missing_mask(series)
    present = series[~missing].astype(str)
    categories = sorted(set(present.tolist()))
    if len(categories) > cap:
        ids = len(categories) == len(present)  # every row its own value: node ids, not a category
        message = Message.of(
            f"{file}, column {column!r} holds text with {len(categories)} distinct values (e.g. "
            f"{', '.join(map(repr, categories[:5]))}), more than the {cap} that are one-hot encoded; ",
            *(
                ("every row has its own value, as node ids do: if the edge list names the nodes by them, name it as "
                 "the node-id column (", Option("node_id", column), "), which is not a feature; otherwise ")
                if ids
                else ()
            ),
            "leave it out by listing the feature columns (",
            _FEATURES,
            "), or raise ",
            Option("max_categories"),
        )  # fmt: skip
        raise GraphValidationError("features", message, column=column, file=file)
    rows = np.flatnonzero(missing)
    if rows.size and not impute:
        hint = Message.of(
            "fill them, leave the column out with ", _FEATURES, ", or let them have no category (", _IMPUTE, ")"
        )
        cells = table_rows(rows)
        raise cell_error(
            "nodes", "missing values", file=file, column=column, rows=cells, values=[""] * rows.size, hint=hint
        )
    if rows.size:
        report.imputed[column] = Imputation(rule="no category", count=int(rows.size), value=None)
    present_rows = np.flatnonzero(~missing)
    codes = np.full(len(series), -1, dtype=np.int64)
    codes[present_rows] = pd.Index(categories, dtype=object).get_indexer(pd.Index(present.to_numpy(dtype=object)))
    block = np.zeros((len(series), len(categories)), dtype=np.float64)
    block[present_rows, codes[present_rows]] = 1.0
    report.encoded[column] = categories
    return block, categories


def _numeric_text(series: pd.Series, cap: int) -> bool:
    """Whether a text column that is over the one-hot cap is numbers but for missing-value tokens and at most
    :data:`STRAY_SHARE` of its non-empty cells of stray text (then it is read as numbers)."""
    empty = missing_mask(series)
    present = series[~empty]
    if present.astype(str).nunique() <= cap:
        return False
    numbers = pd.to_numeric(present, errors="coerce").notna().to_numpy(dtype=bool)
    tokens = _is_token(present)
    stray = int((~numbers & ~tokens).sum())
    return bool(numbers.any()) and stray <= STRAY_SHARE * present.size


def _is_token(series: pd.Series) -> np.ndarray:
    """Cells whose text is one of :data:`MISSING_TOKENS`."""
    text = series.map(lambda v: "" if pd.isna(v) else str(v).strip().casefold())
    return text.isin(MISSING_TOKENS).to_numpy(dtype=bool)


def _numbers_from_text(series: pd.Series, column: str, file: str, impute: bool, report: IngestReport) -> np.ndarray:
    """A numeric column that pandas read as text: its numbers, its tokens and empty cells missing, its stray
    text refused; every bad cell (the missing ones too, unless ``impute``) listed in one error."""
    numbers = pd.to_numeric(series.where(~missing_mask(series)), errors="coerce")
    bad = numbers.isna().to_numpy(dtype=bool)
    missing = bad & (missing_mask(series) | _is_token(series))
    stray = bad & ~missing
    if stray.any() or (missing.any() and not impute):
        raise _bad_cells(series, column, file, missing & (not impute), stray)
    values = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    read_as = sorted({str(v).strip() for v in series[missing & ~missing_mask(series)].tolist()})
    values = _numbers(pd.Series(values), column, file, impute, report)
    if read_as and column in report.imputed:
        report.imputed[column].read_as_missing = read_as
    return values


def _bad_cells(
    series: pd.Series, column: str, file: str, missing: np.ndarray, stray: np.ndarray
) -> GraphValidationError:
    """Every missing and stray cell of a numeric column read as text, listed (up to :data:`LISTED`)."""
    rows = np.flatnonzero(missing | stray)
    cells = [("" if pd.isna(v) else str(v)) for v in series.iloc[rows[:LISTED]].tolist()]
    shown = ", ".join(
        f"row {r} ({v!r}{'' if not m else ', missing' if v.strip() else ', empty or NA'})"
        for r, v, m in zip(table_rows(rows[:LISTED]).tolist(), cells, missing[rows[:LISTED]].tolist(), strict=True)
    )
    more = f" and {rows.size - LISTED} more" if rows.size > LISTED else ""
    n_missing, n_stray = int(missing.sum()), int(stray.sum())
    kinds = []
    if n_missing:
        kinds.append(f"{n_missing} missing (empty, or a missing-value token such as NA, n/a, null, -, ?, unknown)")
    if n_stray:
        kinds.append(f"{n_stray} stray text")
    fact = (
        f"{file}, column {column!r} holds numbers but for {rows.size} cell(s): {shown}{more} ({TABLE_ROWS}); "
        + ", ".join(kinds)
    )
    if n_stray:
        advice = Message.of(
            "; correct the stray text, or leave the column out with ",
            _FEATURES,
            *((" (", _IMPUTE, " treats the missing cells as missing: the column's median)") if n_missing else ()),
        )
    else:
        advice = Message.of(
            "; fill them, leave the column out with ",
            _FEATURES,
            ", or treat them as missing (",
            _IMPUTE,
            ": the column's median)",
        )
    return GraphValidationError(
        "nodes",
        Message.of(fact, advice),
        column=column,
        file=file,
        rows=tuple(table_rows(rows[:LISTED]).tolist()),
        values=tuple(cells),
        count=int(rows.size),
    )
