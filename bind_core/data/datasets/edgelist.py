"""Reading edge lists: two node columns (CSV, TSV or whitespace-separated), an optional header line, optional
further columns (weights, timestamps: reported and ignored), ``#`` comments."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from bind_core.data.datasets.integers import parse_integers
from bind_core.data.datasets.limits import check_limit
from bind_core.data.datasets.offending import SHOWN, cell_error
from bind_core.errors import BindError, GraphValidationError, Message, Option

_READ_ERRORS = (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError, csv.Error)
OnUnknown = Literal["error", "drop"]


@dataclass
class EdgeList:
    """An edge list read from a file.

    Attributes:
        edges: int64 ``[E, 2]`` 0-based node positions, directed rows as listed.
        rows: edge rows in the file (a header line not counted).
        dropped: rows dropped because they name an unknown node (``on_unknown="drop"``).
        unknown_ids: the first few distinct unknown ids, as written.
        extra_columns: the names (or ``"column 3"``...) of the columns after the first two.
    """

    edges: np.ndarray
    rows: int = 0
    dropped: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)


def _first_line(path: Path, field: str, shown: str) -> tuple[int, str] | None:
    """The 0-based number and text of the first line that is neither blank nor a comment."""
    try:
        with path.open("r", encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                stripped = line.strip()
                if stripped and not stripped.startswith("#"):
                    return number, stripped
    except UnicodeDecodeError as exc:
        raise GraphValidationError(field, f"{shown} is not UTF-8 text ({exc.reason})", file=shown) from exc
    except OSError as exc:
        raise GraphValidationError(field, f"cannot read {shown} ({exc.strerror or exc})", file=shown) from exc
    return None


def _separator(line: str) -> str:
    return "," if "," in line else ("\t" if "\t" in line else r"\s+")


def _split_line(line: str) -> list[str]:
    sep = _separator(line)
    return [t.strip() for t in (line.split(sep) if sep != r"\s+" else line.split())]


def _line_numbers(path: Path, rows: np.ndarray) -> np.ndarray:
    """1-based line numbers (as an editor shows them) of the 0-based data rows ``rows`` (blank and ``#``
    lines are not data rows)."""
    wanted = {int(r) for r in rows.tolist()}
    found: dict[int, int] = {}
    data = -1
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            data += 1
            if data in wanted:
                found[data] = number
                if len(found) == len(wanted):
                    break
    return np.array([found.get(int(r), int(r) + 1) for r in rows.tolist()], dtype=np.int64)


def _read_tokens(
    path: Path, sep: str, *, max_edges: int | None, field: str, shown: str, exact: bool = False
) -> pd.DataFrame:
    """Every data row as text, one column per field (the header line, if any, is the first row); ``exact``: the
    cells as written (text ids), else spaces after a separator skipped."""
    try:
        frame = pd.read_csv(
            path,
            sep=sep,
            header=None,
            dtype=str,
            comment="#",
            skip_blank_lines=True,
            skipinitialspace=sep != r"\s+" and not exact,
            nrows=None if max_edges is None else max_edges + 2,
            encoding="utf-8",
            keep_default_na=False,
        )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({0: pd.Series([], dtype=object), 1: pd.Series([], dtype=object)})
    except BindError:
        raise
    except _READ_ERRORS as exc:
        raise GraphValidationError(field, f"cannot parse {shown} as an edge list ({exc})", file=shown) from exc
    if frame.shape[1] < 2:
        raise GraphValidationError(
            field, f"{shown}: expected two columns (source, target), found {frame.shape[1]}", file=shown
        )
    return frame.astype(object).fillna("")


def _fast_positions(path: Path, first: tuple[int, str], max_edges: int | None) -> tuple[np.ndarray, list[str]] | None:
    """Parse the node columns of a clean integer edge list with the C parser, and name its further columns;
    ``None`` when anything is unusual (the token path then parses the file again, exactly, and explains any
    problem).

    Plain integers are read as int64 (exact to 64 bits); whole floats (``1.0e+02``) as float64 when every value
    is below 2^53, where float64 is exact.
    """
    number, text = first
    tokens = _split_line(text)
    if len(tokens) < 2:
        return None
    header = parse_integers(np.array(tokens[:2], dtype=object))[1].sum() == 0
    extra = tokens[2:] if header else [f"column {i + 1}" for i in range(2, len(tokens))]
    for dtype in (np.int64, np.float64):
        try:
            frame = pd.read_csv(
                path,
                sep=_separator(text),
                header=None,
                skiprows=[number] if header else None,
                usecols=[0, 1] if extra else None,
                dtype=dtype,
                comment="#",
                nrows=None if max_edges is None else max_edges + 1,
                encoding="utf-8",
            )
        except (ValueError, OverflowError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error):
            continue
        if frame.shape[1] != 2:
            return None
        values = frame.to_numpy()
        if dtype is np.int64:
            return values.astype(np.int64), extra
        if np.isfinite(values).all() and (values == np.round(values)).all() and (np.abs(values) < 2**53).all():
            return values.astype(np.int64), extra
        return None
    return None


def read_edge_list(
    path: str | Path,
    *,
    ids: pd.Index | None = None,
    num_nodes: int | None = None,
    id_column: str | None = None,
    on_unknown: OnUnknown = "error",
    max_edges: int | None = None,
    field: str = "edges",
    shown: str | None = None,
) -> EdgeList:
    """Read an edge list and map it to 0-based node positions.

    The delimiter is a comma if the first data line has one, else a tab, else any whitespace. The first two
    columns are the source and target; further columns are reported in ``extra_columns`` and ignored. A first
    line whose node columns are not node references is a header.

    Args:
        path: the file.
        ids: the node id of each position (unique): integer ids are matched exactly as int64 (``"7.0"`` and
            ``"7e0"`` match 7, ids above 2^53 stay exact), other ids as text. ``None``: the file holds 0-based
            positions.
        num_nodes: with positions, the number of nodes (larger positions are unknown nodes); ``None``: any.
        id_column: the node table's id column, for messages.
        on_unknown: ``"error"`` refuses a row naming a node that does not exist, ``"drop"`` drops it.
        max_edges: the most edge rows accepted, ``None`` for no limit.
        field: the field named in errors.
        shown: the file name errors show (default: the path's name).

    Raises:
        GraphValidationError: the file is missing, unreadable or not UTF-8; a row with fewer than two values;
            a value that cannot be a node reference; an unknown node with ``on_unknown="error"``; more than
            ``max_edges`` rows.
    """
    path = Path(path)
    shown = shown or path.name
    if not path.is_file():
        raise GraphValidationError(field, f"no such file: {shown}", file=shown)
    first = _first_line(path, field, shown)
    if first is None:
        return EdgeList(np.empty((0, 2), dtype=np.int64))
    numeric = ids is None or pd.api.types.is_integer_dtype(ids.dtype)
    if numeric:
        fast = _fast_edge_list(path, first, ids, num_nodes, max_edges, field)
        if fast is not None:
            return fast
    rows = _token_rows(path, first[1], ids, num_nodes, numeric=numeric, max_edges=max_edges, field=field, shown=shown)
    _refuse_malformed(path, rows, ids, field, shown)
    return _resolved(path, rows, ids, num_nodes, id_column, on_unknown, field, shown)


@dataclass
class _Rows:
    """An edge list's rows as text, and what they resolve to.

    Attributes:
        tokens: ``[E, 2]`` the node columns' text.
        integral: ``[E, 2]`` which tokens are integers (all, for text ids).
        positions: ``[E, 2]`` node positions, ``-1`` for an unknown node or a token that is not an integer.
        names: the names of every column (the header's, or ``"column 1"``...).
        skip: data rows before the first edge (1 for a header line).
        column: the node columns' names for messages (``"src/dst"``), ``None`` without a header.
    """

    tokens: np.ndarray
    integral: np.ndarray
    positions: np.ndarray
    names: list[str]
    skip: int
    column: str | None


def _fast_edge_list(
    path: Path,
    first: tuple[int, str],
    ids: pd.Index | None,
    num_nodes: int | None,
    max_edges: int | None,
    field: str,
) -> EdgeList | None:
    """The edge list of a clean integer file whose every node is known, or ``None`` (then the token path)."""
    fast = _fast_positions(path, first, max_edges)
    if fast is None:
        return None
    values, extra = fast
    check_limit(field, "edges", int(values.shape[0]), max_edges)
    positions = _positions(values.reshape(-1), ids, num_nodes).reshape(-1, 2)
    if not (positions >= 0).all():
        return None
    return EdgeList(positions, rows=int(values.shape[0]), extra_columns=extra)


def _token_rows(
    path: Path,
    first: str,
    ids: pd.Index | None,
    num_nodes: int | None,
    *,
    numeric: bool,
    max_edges: int | None,
    field: str,
    shown: str,
) -> _Rows:
    """Every row read as text and resolved to positions; a first row that names no node is the header."""
    frame = _read_tokens(path, _separator(first), max_edges=max_edges, field=field, shown=shown, exact=not numeric)
    tokens = frame.iloc[:, :2].to_numpy(dtype=object)
    if numeric:
        values, integral = parse_integers(tokens)
        positions = np.where(integral, _positions(values.reshape(-1), ids, num_nodes).reshape(-1, 2), -1)
    else:
        assert ids is not None
        integral = np.ones(tokens.shape, dtype=bool)
        text = pd.Index([str(t) for t in tokens.reshape(-1)], dtype=object)  # text ids match exactly as written
        positions = ids.get_indexer(text).reshape(-1, 2)
    header = len(frame) > 0 and (not integral[0].any() if numeric else bool((positions[0] < 0).all()))
    names = [str(t) for t in frame.iloc[0].tolist()] if header else [f"column {i + 1}" for i in range(frame.shape[1])]
    skip = 1 if header else 0
    check_limit(field, "edges", int(tokens.shape[0]) - skip, max_edges)
    column = f"{names[0]}/{names[1]}" if header else None
    return _Rows(tokens[skip:], integral[skip:], positions[skip:], names, skip, column)


def _refuse_malformed(path: Path, rows: _Rows, ids: pd.Index | None, field: str, shown: str) -> None:
    """Raise naming the rows with fewer than two node ids, or with a value that cannot be a node reference."""
    tokens = rows.tokens
    empty = np.flatnonzero((tokens == "").any(axis=1))
    if empty.size:
        raise cell_error(
            field,
            "fewer than two node ids",
            file=shown,
            column=rows.column,
            rows=_line_numbers(path, empty + rows.skip),
            values=[" ".join(map(str, tokens[r])) for r in empty[:SHOWN]],
        )
    malformed = np.flatnonzero(~rows.integral.all(axis=1))
    if malformed.size:
        what = "values that are not integer node positions" if ids is None else "values that are not integer ids"
        raise cell_error(
            field,
            what,
            file=shown,
            column=rows.column,
            rows=_line_numbers(path, malformed + rows.skip),
            values=[_unknown_text(tokens[r], ~rows.integral[r]) for r in malformed[:SHOWN]],
        )


def _resolved(
    path: Path,
    rows: _Rows,
    ids: pd.Index | None,
    num_nodes: int | None,
    id_column: str | None,
    on_unknown: OnUnknown,
    field: str,
    shown: str,
) -> EdgeList:
    """The edges of well-formed rows; a row naming an unknown node refused, or dropped with ``"drop"``."""
    tokens, positions = rows.tokens, rows.positions
    unknown = np.flatnonzero((positions < 0).any(axis=1))
    result = EdgeList(np.empty((0, 2), np.int64), rows=int(tokens.shape[0]), extra_columns=rows.names[2:])
    if unknown.size and on_unknown == "error":
        where = (
            f"absent from the node table's column {id_column!r}"
            if id_column is not None
            else f"outside 0..{(num_nodes or 0) - 1}"
        )
        what = f"node ids {where}" if ids is not None else f"node positions {where} (the table has {num_nodes} rows)"
        exact = ids is not None and not pd.api.types.is_integer_dtype(ids.dtype)
        spaced = _differ_in_spaces(tokens[unknown][positions[unknown] < 0], ids) if exact else ""
        raise cell_error(
            field,
            what,
            file=shown,
            column=rows.column,
            rows=_line_numbers(path, unknown + rows.skip),
            values=[_unknown_text(tokens[r], positions[r] < 0, exact=exact) for r in unknown[:SHOWN]],
            hint=Message.of(spaced, "to drop such edges, pass ", Option("on_unknown_nodes", "drop")),
        )
    if unknown.size:
        bad = tokens[unknown][positions[unknown] < 0]
        exact = ids is not None and not pd.api.types.is_integer_dtype(ids.dtype)
        result.unknown_ids = list(dict.fromkeys(str(t) if exact else str(t).strip() for t in bad.tolist()))[:SHOWN]
        result.dropped = int(unknown.size)
    result.edges = positions[(positions >= 0).all(axis=1)].astype(np.int64)
    return result


def _positions(values: np.ndarray, ids: pd.Index | None, num_nodes: int | None) -> np.ndarray:
    """Positions of integer node references, ``-1`` for an unknown one."""
    if ids is not None:
        return np.asarray(ids.get_indexer(pd.Index(values)), dtype=np.int64)
    out = values.astype(np.int64)
    bad = out < 0 if num_nodes is None else (out < 0) | (out >= num_nodes)
    return np.where(bad, -1, out)


def _unknown_text(row: np.ndarray, mask: np.ndarray, *, exact: bool = False) -> str:
    """The unknown references of an edge row; text ids as written (``exact``), quoted when two."""
    shown = [str(t) if exact else str(t).strip() for t, m in zip(row.tolist(), mask.tolist(), strict=True) if m]
    return " ".join(shown) if not exact or len(shown) == 1 else " ".join(map(repr, shown))


def _differ_in_spaces(unknown: np.ndarray, ids: pd.Index | None) -> str:
    """A sentence for the first unknown text id that equals a node id but for surrounding spaces (ids match
    exactly as written), or ``""``."""
    if ids is None or unknown.size == 0:
        return ""
    bare: dict[str, str] = {}
    for key in ids.tolist():
        bare.setdefault(str(key).strip(), str(key))
    for token in dict.fromkeys(str(t) for t in unknown.tolist()):
        match = bare.get(token.strip())
        if match is not None and match != token:
            return (
                f"edge endpoint {token!r} is not a node id; {match!r} is (they differ in spaces: ids match exactly "
                "as written); "
            )
    return ""


def sample_tokens(path: str | Path, rows: int = 1000) -> list[str]:
    """The node columns' values of an edge list's first ``rows`` rows, as written (a header line included), for
    guessing which column of a node table they name; empty when the file cannot be read."""
    path = Path(path)
    try:
        first = _first_line(path, "edges", path.name)
        if first is None:
            return []
        frame = _read_tokens(path, _separator(first[1]), max_edges=rows, field="edges", shown=path.name, exact=True)
    except BindError:
        return []
    return [str(t) for t in frame.iloc[:rows, :2].to_numpy(dtype=object).reshape(-1).tolist()]


def read_edges(
    path: str | Path, *, ids: pd.Index | None = None, max_edges: int | None = None, field: str = "edges"
) -> np.ndarray:
    """The node positions of an edge list (see :func:`read_edge_list`; an unknown node is an error).

    Returns:
        int64 ``[E, 2]`` (directed rows as listed; symmetrising is left to ``Graph.build``).
    """
    return read_edge_list(path, ids=ids, max_edges=max_edges, field=field).edges
