"""Reading two-column edge lists (CSV, TSV or whitespace-separated, optional header line)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from bind_core.datasets.limits import check_limit
from bind_core.errors import BindError, GraphValidationError

_READ_ERRORS = (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError, csv.Error)


def _first_line(path: Path, field: str) -> tuple[int, str] | None:
    """The 0-based number and text of the first line that is neither blank nor a comment."""
    try:
        with path.open("r", encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                stripped = line.strip()
                if stripped and not stripped.startswith("#"):
                    return number, stripped
    except UnicodeDecodeError as exc:
        raise GraphValidationError(field, f"{path.name} is not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise GraphValidationError(field, f"cannot read {path.name} ({exc.strerror or exc})") from exc
    return None


def read_edge_tokens(path: str | Path, *, max_edges: int | None = None, field: str = "edges") -> pd.DataFrame:
    """Read an edge list as text: one row per line, two string columns ``u`` and ``v``.

    The delimiter is a comma if the first data line has one, else a tab, else any whitespace. Blank lines
    and lines starting with ``#`` are skipped. A header line is kept here (as a first row): the callers
    drop it once they know how node ids look (see :func:`read_edges`).

    Args:
        path: the file.
        max_edges: read at most ``max_edges + 2`` lines (enough to detect an excess), ``None`` for all.
        field: the field named in errors.

    Returns:
        A DataFrame with string columns ``u`` and ``v`` (no missing values).

    Raises:
        GraphValidationError: the file is missing, unreadable, not UTF-8, has other than two columns on a
            line, or holds more than ``max_edges`` lines.
    """
    path = Path(path)
    if not path.is_file():
        raise GraphValidationError(field, f"no such file: {path.name}")
    first = _first_line(path, field)
    if first is None:
        return pd.DataFrame({"u": pd.Series([], dtype=object), "v": pd.Series([], dtype=object)})
    sep = _separator(first[1])
    try:
        frame = pd.read_csv(
            path,
            sep=sep,
            header=None,
            dtype=str,
            comment="#",
            skip_blank_lines=True,
            skipinitialspace=sep != r"\s+",
            nrows=None if max_edges is None else max_edges + 2,
            encoding="utf-8",
            keep_default_na=False,
        )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({"u": pd.Series([], dtype=object), "v": pd.Series([], dtype=object)})
    except BindError:
        raise
    except _READ_ERRORS as exc:
        raise GraphValidationError(field, f"cannot parse {path.name} as an edge list ({exc})") from exc
    if frame.shape[1] != 2:
        raise GraphValidationError(field, f"expected two columns (source, target), found {frame.shape[1]}")
    frame.columns = ["u", "v"]
    frame = frame.astype(object)
    empty = (frame["u"].map(str).str.strip() == "") | (frame["v"].map(str).str.strip() == "")
    if bool(empty.any()):
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise GraphValidationError(field, f"row {row + 1} does not hold two node ids")
    return frame.reset_index(drop=True)


def _separator(line: str) -> str:
    return "," if "," in line else ("\t" if "\t" in line else r"\s+")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _fast_positions(path: Path, max_edges: int | None) -> np.ndarray | None:
    """Parse a clean numeric edge list with the C parser; ``None`` when anything is unusual.

    The slower token path then parses the file again and produces a precise error message.
    """
    first = _first_line(path, "edges")
    if first is None:
        return None
    number, text = first
    sep = _separator(text)
    tokens = [t for t in (text.split(",") if sep == "," else text.split()) if t.strip()]
    header = not any(_is_number(t) for t in tokens)
    try:
        frame = pd.read_csv(
            path,
            sep=sep,
            header=None,
            skiprows=[number] if header else None,
            dtype=np.float64,
            comment="#",
            nrows=None if max_edges is None else max_edges + 1,
            encoding="utf-8",
        )
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error):
        return None
    if frame.shape[1] != 2:
        return None
    values = frame.to_numpy()
    if not (np.isfinite(values).all() and (values == np.round(values)).all() and (np.abs(values) < 2**53).all()):
        return None
    return values.astype(np.int64)


def _parse_integers(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parse tokens as integral numbers; returns ``(values, ok_mask)``."""
    values = pd.to_numeric(pd.Series(tokens, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(values) & (values == np.round(values)) & (np.abs(values) < 2**53)
    return np.where(ok, values, 0).astype(np.int64), ok


def edge_positions(frame: pd.DataFrame, *, field: str = "edges") -> np.ndarray:
    """Edges given as 0-based node positions (integers, possibly float-formatted like ``1.0e+00``).

    A first row that is not numeric is taken as a header and dropped; any other non-integer value is an
    error.

    Returns:
        int64 ``[E, 2]``.
    """
    if len(frame) == 0:
        return np.empty((0, 2), dtype=np.int64)
    tokens = frame[["u", "v"]].to_numpy(dtype=object)
    values, ok = _parse_integers(tokens.reshape(-1))
    values, ok = values.reshape(-1, 2), ok.reshape(-1, 2)
    if not ok[0].any():
        values, ok = values[1:], ok[1:]
        offset = 2
    else:
        offset = 1
    bad = np.flatnonzero(~ok.all(axis=1))
    if bad.size:
        row = int(bad[0])
        raise GraphValidationError(
            field,
            f"row {row + offset} holds {tokens[row + offset - 1].tolist()}, not two integer node positions",
        )
    return values


def edge_ids(frame: pd.DataFrame, ids: pd.Index, *, numeric_ids: bool, field: str = "edges") -> np.ndarray:
    """Edges given as node ids, mapped to 0-based positions through ``ids``.

    Args:
        frame: from :func:`read_edge_tokens`.
        ids: the node id of each position (unique).
        numeric_ids: ``ids`` are integers, so tokens are parsed as numbers (``"7.0"`` matches id 7);
            otherwise tokens are compared as stripped strings.
        field: the field named in errors.

    Returns:
        int64 ``[E, 2]``.

    Raises:
        GraphValidationError: a token names no node (a first row of unknown ids is taken as a header).
    """
    if len(frame) == 0:
        return np.empty((0, 2), dtype=np.int64)
    tokens = frame[["u", "v"]].to_numpy(dtype=object)
    flat = tokens.reshape(-1)
    if numeric_ids:
        values, ok = _parse_integers(flat)
        positions = np.where(ok, ids.get_indexer(values), -1)
    else:
        positions = ids.get_indexer(pd.Index([str(t).strip() for t in flat], dtype=object))
    positions = positions.reshape(-1, 2)
    offset = 1
    if (positions[0] < 0).all():
        positions, offset = positions[1:], 2
    bad = np.flatnonzero((positions < 0).any(axis=1))
    if bad.size:
        row = int(bad[0])
        pair = tokens[row + offset - 1].tolist()
        raise GraphValidationError(field, f"row {row + offset} refers to an unknown node id in {pair}")
    return positions.astype(np.int64)


def read_edges(
    path: str | Path, *, ids: pd.Index | None = None, max_edges: int | None = None, field: str = "edges"
) -> np.ndarray:
    """Read an edge list and return 0-based node positions.

    Args:
        path: a CSV, TSV or whitespace-separated file of two columns, with an optional header line.
        ids: the node id of each position; ``None`` when the file holds 0-based positions. Integer ids
            are matched numerically (``"7.0"`` matches 7), others as stripped strings.
        max_edges: the most edge lines accepted (a header is not counted), ``None`` for no limit.
        field: the field named in errors.

    Returns:
        int64 ``[E, 2]`` (directed rows as listed; symmetrising is left to ``Graph.build``).

    Raises:
        GraphValidationError: see :func:`read_edge_tokens`; also a value that is not a node position or id,
            or more than ``max_edges`` edges.
    """
    numeric_ids = ids is not None and pd.api.types.is_integer_dtype(ids.dtype)
    fast = _fast_positions(Path(path), max_edges) if (ids is None or numeric_ids) and Path(path).is_file() else None
    if fast is not None:
        check_limit(field, "edges", int(fast.shape[0]), max_edges)
        if ids is None:
            return fast
        positions = ids.get_indexer(fast.reshape(-1)).reshape(-1, 2)
        if (positions >= 0).all():
            return positions.astype(np.int64)
    frame = read_edge_tokens(path, max_edges=max_edges, field=field)
    if ids is None:
        edges = edge_positions(frame, field=field)
    else:
        edges = edge_ids(frame, ids, numeric_ids=numeric_ids, field=field)
    check_limit(field, "edges", int(edges.shape[0]), max_edges)
    return edges
