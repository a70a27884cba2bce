"""Building a Graph from user files: a node table plus an edge list, or one ``.npz`` archive."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bind_core.datasets.edgelist import read_edges
from bind_core.datasets.intersect import encode_groups, sensitive_columns
from bind_core.datasets.npz import load_npz
from bind_core.datasets.scaling import minmax_scale
from bind_core.datasets.split import PAPER_SPLIT_SEED, paper_split
from bind_core.datasets.tables import encode_codes, numeric_matrix, read_node_table, require_columns
from bind_core.errors import GraphValidationError
from bind_core.graph import Graph

SPLIT_VALUES = ("train", "val", "test")


def from_files(
    nodes: str | Path,
    edges: str | Path | None = None,
    *,
    label: str | None = None,
    sensitive: str | Sequence[str] | None = None,
    features: Sequence[str] | None = None,
    split: str | None = None,
    node_id: str | None = None,
    split_seed: int = PAPER_SPLIT_SEED,
    scale: bool = True,
    name: str | None = None,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    max_columns: int | None = None,
) -> Graph:
    """Build a graph from a node table and an edge list, or from one ``.npz`` archive.

    Node table (``.csv``, ``.tsv``, ``.parquet``/``.pq``, chosen by suffix): one row per node.

    * ``label`` and ``sensitive`` values may be numbers or strings; each is mapped to codes ``0..k-1`` in
      sorted order of its distinct values.
    * ``sensitive`` may name several columns (a list, or one comma-separated string): the value combinations
      that occur become the groups (intersectional groups, codes in sorted order of the combinations), named
      ``"col=value, col=value"`` in ``Graph.group_names``.
    * ``features``: the numeric feature columns. ``None`` takes every column except ``label``, ``split``
      and ``node_id``; the sensitive column stays a feature as in the BIND paper (as its codes when it
      is not numeric). Booleans count as numeric.
    * ``split``: a column whose values ``train``/``val``/``test`` (any case) place the node; any other
      value, or an empty cell, leaves it in no split. Without it, :func:`paper_split` with ``split_seed``.
    * ``node_id``: a column of unique node ids that the edge list refers to (and that become
      ``Graph.node_ids`` when they are integers); without it the edge list holds 0-based row positions.

    Edge list: two columns per line separated by a comma, tab or whitespace, with an optional header line
    and ``#`` comments. Either direction or both may be listed; self-loops are dropped and duplicates
    merged. ``edges=None`` gives a graph without edges.

    ``.npz`` (when ``nodes`` ends in ``.npz``): see :func:`load_npz`; ``label``, ``sensitive``,
    ``features``, ``split``, ``node_id`` and ``scale`` do not apply and ``edges`` must be ``None``.

    Args:
        nodes: the node table or ``.npz`` archive.
        edges: the edge list, or ``None``.
        label: the label column (required for a node table).
        sensitive: the sensitive-attribute column(s) (required for a node table).
        features: the feature columns, or ``None`` for all (see above).
        split: the split column, or ``None`` for the paper split.
        node_id: the node id column, or ``None``.
        split_seed: seed of the paper split.
        scale: min-max scale every feature column to ``[-1, 1]`` (constant columns become 0).
        name: the graph's name (default: the file name without suffix).
        max_nodes: the most nodes accepted, ``None`` for no limit.
        max_edges: the most edge lines accepted, ``None`` for no limit.
        max_columns: the most columns in the node table (or features in an ``.npz``), ``None`` for no limit.

    Returns:
        The validated graph.

    Raises:
        GraphValidationError: any malformed input; the message names the file, column or field.
    """
    nodes = Path(nodes)
    if nodes.suffix.lower() == ".npz":
        if edges is not None:
            raise GraphValidationError("edges", "an .npz archive holds its own edges; pass edges=None")
        return load_npz(
            nodes,
            split_seed=split_seed,
            max_nodes=max_nodes,
            max_edges=max_edges,
            max_columns=max_columns,
            name=name,
        )
    if label is None or sensitive is None:
        raise GraphValidationError("label" if label is None else "sensitive", "required for a node table")
    table = read_node_table(nodes, max_nodes=max_nodes, max_columns=max_columns)
    require_columns(table, [label])
    sens_columns = sensitive_columns(table, sensitive)
    special = [label, *sens_columns, *(c for c in (split, node_id) if c is not None)]
    require_columns(table, special)
    if features is not None:
        features = [str(c) for c in features]
        require_columns(table, features)
        if label in features:
            raise GraphValidationError(label, "the label column cannot also be a feature")
    y, _ = encode_codes(table[label], label)
    sens, group_names, per_column = encode_groups(table, sens_columns)
    sens_codes = dict(zip(sens_columns, per_column, strict=True))
    x, feature_names = _features(table, features, sens_codes=sens_codes, skip=special)
    if scale:
        x = minmax_scale(x)
    ids, node_ids = _node_ids(table, node_id)
    edge_array = read_edges(edges, ids=ids, max_edges=max_edges) if edges is not None else np.empty((0, 2), np.int64)
    if split is not None:
        train, val, test = _split_column(table[split], split)
    else:
        train, val, test = paper_split(y, seed=split_seed)
    return Graph.build(
        x,
        edge_array,
        y,
        sens,
        train,
        val,
        test,
        feature_names=feature_names,
        node_ids=node_ids,
        name=name if name is not None else nodes.stem,
        group_names=group_names,
    )


def _features(
    table: pd.DataFrame,
    features: Sequence[str] | None,
    *,
    sens_codes: dict[str, np.ndarray],
    skip: Sequence[str],
) -> tuple[np.ndarray, list[str]]:
    default = [c for c in table.columns if c not in skip or c in sens_codes]
    columns = list(features) if features is not None else default
    if not columns:
        raise GraphValidationError("features", "no feature columns")
    text = [
        c
        for c in sens_codes
        if c in columns
        and not (pd.api.types.is_numeric_dtype(table[c].dtype) or pd.api.types.is_bool_dtype(table[c].dtype))
    ]
    if text:
        frame = table[columns].copy()
        for c in text:
            frame[c] = sens_codes[c].astype(np.float64)
        return numeric_matrix(frame, columns), columns
    return numeric_matrix(table, columns), columns


def _node_ids(table: pd.DataFrame, node_id: str | None) -> tuple[pd.Index | None, np.ndarray | None]:
    """The id index edges are matched against, and the int64 ``node_ids`` for the graph (if integral)."""
    if node_id is None:
        return None, None
    column = table[node_id]
    if column.isna().any():
        row = int(np.flatnonzero(column.isna().to_numpy())[0])
        raise GraphValidationError(node_id, f"missing node id in row {row}")
    if pd.api.types.is_integer_dtype(column.dtype):
        ids = pd.Index(column.to_numpy(dtype=np.int64))
        node_ids: np.ndarray | None = np.array(ids, dtype=np.int64)
    elif pd.api.types.is_float_dtype(column.dtype) and bool((column == column.round()).all()):
        ids = pd.Index(column.to_numpy(dtype=np.int64))
        node_ids = np.array(ids, dtype=np.int64)
    else:
        ids = pd.Index([str(v).strip() for v in column.tolist()], dtype=object)
        node_ids = None
    if not ids.is_unique:
        dupe = ids[ids.duplicated()][0]
        raise GraphValidationError(node_id, f"node ids must be unique; {dupe!r} appears more than once")
    return ids, node_ids


def _split_column(column: pd.Series, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    values = np.array([str(v).strip().lower() if not pd.isna(v) else "" for v in column.tolist()], dtype=object)
    parts = tuple(np.flatnonzero(values == part).astype(np.int64) for part in SPLIT_VALUES)
    for part, idx in zip(SPLIT_VALUES, parts, strict=True):
        if idx.size == 0:
            raise GraphValidationError(name, f"no node is marked {part!r} (values must be train/val/test)")
    return parts  # type: ignore[return-value]
