"""Building a Graph from user files: a node table plus an edge list, or one ``.npz`` archive."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from bind_core.data.datasets.bins import apply_bins, parse_bins
from bind_core.data.datasets.compression import COMPRESSED_SUFFIXES, inner_suffix, unpacked
from bind_core.data.datasets.edgelist import EdgeList, OnUnknown, read_edge_list
from bind_core.data.datasets.features import MAX_CATEGORIES, feature_matrix
from bind_core.data.datasets.ingest_report import Ingested, IngestReport
from bind_core.data.datasets.intersect import encode_groups, sensitive_columns
from bind_core.data.datasets.labels import encode_labels
from bind_core.data.datasets.node_ids import node_id_index
from bind_core.data.datasets.npz import load_npz
from bind_core.data.datasets.scaling import minmax_scale
from bind_core.data.datasets.split import PAPER_SPLIT_SEED, paper_split
from bind_core.data.datasets.tables import read_node_table, require_columns
from bind_core.data.graph import Graph
from bind_core.errors import GraphValidationError

SPLIT_VALUES = ("train", "val", "test")

MAX_SENSITIVE_VALUES = 10
"""Default: the most distinct values a numeric sensitive column without a binning rule may hold."""


def from_files(nodes: str | Path, edges: str | Path | None = None, **options: Any) -> Graph:
    """A graph from your files: a node table (CSV or Parquet) and an edge list.

    Args:
        nodes: the node table, one row per node.
        edges: the edge list (two columns of node ids); ``None`` for a graph without edges (with
            ``allow_no_edges=True``).
        options: the keyword arguments of :func:`ingest_files` (``label``, ``sensitive``, ``features``, ``split``,
            ``node_id``, limits and how to treat unknown nodes, missing values and categories).

    Returns:
        The graph of :func:`ingest_files`, without the report of what reading it did.
    """
    return ingest_files(nodes, edges, **options).graph


def ingest_files(
    nodes: str | Path,
    edges: str | Path | None = None,
    *,
    label: str | None = None,
    sensitive: str | Sequence[str] | None = None,
    features: Sequence[str] | None = None,
    split: str | None = None,
    node_id: str | None = None,
    unlabeled: str | float | None = None,
    on_unknown_nodes: OnUnknown = "error",
    allow_no_edges: bool = False,
    impute_missing: bool = False,
    max_categories: int = MAX_CATEGORIES,
    sensitive_bins: str | Sequence[str] | None = None,
    max_sensitive_values: int | None = MAX_SENSITIVE_VALUES,
    split_seed: int = PAPER_SPLIT_SEED,
    scale: bool = True,
    name: str | None = None,
    nodes_name: str | None = None,
    edges_name: str | None = None,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    max_columns: int | None = None,
    max_unpacked_bytes: int | None = None,
) -> Ingested:
    """Build a graph from a node table and an edge list, or from one ``.npz`` archive, and say what was done.

    Node table (``.csv``, ``.tsv``, ``.parquet``/``.pq`` by suffix; CSV/TSV also ``.gz`` or ``.zst``
    compressed): one row per node, a header row. Rules (docs/DATASETS.md, "Bringing your own graph"):

    * ``label``: class codes ``0..C-1`` in sorted order of the values; an empty cell, or the ``unlabeled``
      value, makes the node unlabeled: it stays in the graph and is in no split (``Graph.y`` is ``-1``).
    * ``sensitive``: one column or several (a list, or one comma-separated string; the value combinations
      that occur become the groups). Values are kept exactly. A numeric column with more than
      ``max_sensitive_values`` values needs a binning rule in ``sensitive_bins`` (``"age>=25"``,
      ``"age:25,60"``, several separated by ``;``).
    * ``features``: the feature columns; ``None`` takes every column except ``label``, ``split`` and
      ``node_id`` (the sensitive column stays a feature, as in the BIND paper). Numbers as they are,
      booleans as 0/1, text one-hot encoded up to ``max_categories`` values; missing values are refused
      unless ``impute_missing`` (see :mod:`bind_core.data.datasets.features`).
    * ``split``: a column whose values ``train``/``val``/``test`` (any case) place the node; anything else
      leaves it out. Without it, :func:`paper_split` with ``split_seed`` over the labeled nodes.
    * ``node_id``: unique node ids the edge list refers to; integer ids (exact to 64 bits) become
      ``Graph.node_ids``. Without it the edge list holds 0-based row positions.

    Edge list (also ``.gz``/``.zst``): the first two columns are the nodes (comma, tab or whitespace
    separated, an optional header line, ``#`` comments); further columns are reported and ignored (edges are
    unweighted). Rows naming an unknown node are refused, or dropped with ``on_unknown_nodes="drop"``.
    An edge list without edges is refused unless ``allow_no_edges``; ``edges=None`` gives a graph without
    edges. Self-loops are dropped and duplicates merged.

    ``.npz`` (when ``nodes`` ends in ``.npz``): see :func:`load_npz`; the table options do not apply.

    Args:
        nodes, edges: the files.
        nodes_name, edges_name: the names errors give the files (default: the files' own names); the
            service passes the names the client sent.
        scale: min-max scale every feature column to ``[-1, 1]`` (constant columns become 0).
        name: the graph's name (default: the node file's name without suffixes).
        max_nodes, max_edges, max_columns: size limits, ``None`` for none.
        max_unpacked_bytes: the most bytes a compressed file may unpack to, ``None`` for no limit.

    Returns:
        The validated graph and the :class:`IngestReport`.

    Raises:
        GraphValidationError: any malformed input; the message names the file, the user's column (or the
            option), the rows as a spreadsheet shows them, up to five offending values and their count.
    """
    nodes = Path(nodes)
    nodes_name = nodes_name or nodes.name
    stem = (nodes.with_suffix("") if nodes.suffix.lower() in COMPRESSED_SUFFIXES else nodes).stem
    if nodes.suffix.lower() == ".npz":
        if edges is not None:
            raise GraphValidationError("edges", "an .npz archive holds its own edges; pass edges=None")
        graph = load_npz(
            nodes, split_seed=split_seed, max_nodes=max_nodes, max_edges=max_edges, max_columns=max_columns, name=name
        )
        return Ingested(graph, IngestReport())
    if label is None or sensitive is None:
        raise GraphValidationError("label" if label is None else "sensitive", "required for a node table")
    report = IngestReport()
    with unpacked(nodes, field="nodes", shown=nodes_name, max_bytes=max_unpacked_bytes) as plain:
        table = read_node_table(
            plain, max_nodes=max_nodes, max_columns=max_columns, shown=nodes_name,
            text_columns=[node_id] if node_id is not None else [],
        )  # fmt: skip
    require_columns(table, [label], file=nodes_name)
    sens_columns = sensitive_columns(table, sensitive, file=nodes_name)
    special = [label, *sens_columns, *(c for c in (split, node_id) if c is not None)]
    require_columns(table, special, file=nodes_name)
    if features is not None:
        features = [str(c) for c in features]
        require_columns(table, features, file=nodes_name)
        if label in features:
            raise GraphValidationError(label, "the label column cannot also be a feature")
    y, classes = encode_labels(table[label], label, file=nodes_name, unlabeled=unlabeled, report=report)
    bins = parse_bins(sensitive_bins)
    sens, group_names, per_column = encode_groups(
        table, sens_columns, bins=bins, max_values=max_sensitive_values, file=nodes_name
    )
    report.binned = {c: apply_bins(table[c], rule, file=nodes_name)[1] for c, rule in bins.items()}
    columns = features if features is not None else [c for c in table.columns if c not in special or c in sens_columns]
    if not columns:
        raise GraphValidationError("features", f"{nodes_name}: no feature columns")
    x, feature_names = feature_matrix(
        table, columns, file=nodes_name, sens_codes=dict(zip(sens_columns, per_column, strict=True)),
        max_categories=max_categories, impute_missing=impute_missing, report=report,
    )  # fmt: skip
    if scale:
        x = minmax_scale(x)
    ids, node_ids = node_id_index(table[node_id], node_id, file=nodes_name) if node_id is not None else (None, None)
    edge_list = EdgeList(np.empty((0, 2), np.int64))
    if edges is not None:
        edge_list = _edges(
            Path(edges), ids=ids, num_nodes=len(table), id_column=node_id, on_unknown=on_unknown_nodes,
            allow_no_edges=allow_no_edges, shown=edges_name or Path(edges).name, max_edges=max_edges,
            max_unpacked_bytes=max_unpacked_bytes,
        )  # fmt: skip
        report.dropped_edges, report.unknown_ids = edge_list.dropped, edge_list.unknown_ids
        report.ignored_edge_columns = edge_list.extra_columns
        report.self_loops = int((edge_list.edges[:, 0] == edge_list.edges[:, 1]).sum())
    parts: tuple[np.ndarray | torch.Tensor, ...]
    if split is not None:
        parts = _split_column(table[split], split, y, file=nodes_name, report=report)
    else:
        parts = paper_split(y, seed=split_seed)
    train, val, test = parts
    try:
        graph = Graph.build(
            x,
            edge_list.edges,
            y,
            sens,
            train,
            val,
            test,
            feature_names=feature_names,
            node_ids=node_ids,
            name=name if name is not None else stem,
            group_names=group_names,
            sensitive=sens_columns,
            node_id_column=node_id,
            node_keys=[str(k) for k in ids] if ids is not None and node_ids is None else (),
            label_name=label,
            class_names=classes,
        )
    except GraphValidationError as exc:
        raise _in_user_terms(exc, label=label, sensitive=sens_columns, split=split, file=nodes_name,
                             classes=classes, groups=group_names) from exc  # fmt: skip
    return Ingested(graph, report)


def _edges(
    path: Path,
    *,
    ids: pd.Index | None,
    num_nodes: int,
    id_column: str | None,
    on_unknown: OnUnknown,
    allow_no_edges: bool,
    shown: str,
    max_edges: int | None,
    max_unpacked_bytes: int | None,
) -> EdgeList:
    if inner_suffix(path) in (".npz", ".parquet", ".pq"):
        raise GraphValidationError("edges", f"{shown}: an edge list is a text file (CSV, TSV or whitespace)")
    with unpacked(path, field="edges", shown=shown, max_bytes=max_unpacked_bytes) as plain:
        edge_list = read_edge_list(
            plain, ids=ids, num_nodes=num_nodes, id_column=id_column, on_unknown=on_unknown, max_edges=max_edges,
            shown=shown,
        )  # fmt: skip
    if edge_list.edges.shape[0] == 0 and not allow_no_edges:
        why = (
            f"every one of its {edge_list.rows} edge row(s) names an unknown node"
            if edge_list.rows
            else "it holds no edges"
        )
        raise GraphValidationError(
            "edges",
            f"{shown}: {why}; a GNN on a graph without edges sees only each node's own features. Pass "
            "allow_no_edges to audit it anyway",
            file=shown,
        )
    return edge_list


def _split_column(
    column: pd.Series, name: str, y: np.ndarray, *, file: str, report: IngestReport
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    values = np.array([str(v).strip().lower() if not pd.isna(v) else "" for v in column.tolist()], dtype=object)
    placed = np.isin(values, SPLIT_VALUES)
    unlabeled = placed & (y < 0)
    if unlabeled.any():
        report.hints.append(
            f"{int(unlabeled.sum())} unlabeled node(s) marked train/val/test in column {name!r} were left out of "
            "the split"
        )
        values = np.where(y < 0, "", values)
    parts = tuple(np.flatnonzero(values == part).astype(np.int64) for part in SPLIT_VALUES)
    for part, idx in zip(SPLIT_VALUES, parts, strict=True):
        if idx.size == 0:
            raise GraphValidationError(
                name, f"{file}, column {name!r}: no labeled node is marked {part!r} (values: train/val/test)", file=file
            )
    return parts  # type: ignore[return-value]


_INTERNAL = {"x": "features", "edge_index": "edges"}


def _in_user_terms(
    exc: GraphValidationError,
    *,
    label: str,
    sensitive: Sequence[str],
    split: str | None,
    file: str,
    classes: Sequence[str],
    groups: Sequence[str],
) -> GraphValidationError:
    """A graph-level error (``y``, ``sens``, ``test_idx``...) said with the user's column names and values."""
    message = str(exc).removeprefix(f"{exc.field}: ")
    field = {"y": label, "sens": ", ".join(sensitive)}.get(exc.field) or _INTERNAL.get(exc.field)
    if field is None:
        field = split if split is not None else "split"
        message = f"the {'split' if split is not None else 'paper split'}: {message}"
    legend = []
    if "class" in message or exc.field == "y":
        legend.append("classes " + ", ".join(f"{i}={c!r}" for i, c in enumerate(classes)) + f" (column {label!r})")
    if "group" in message or exc.field == "sens":
        legend.append("groups " + ", ".join(f"{i}={g!r}" for i, g in enumerate(groups)))
    if legend:
        message += f" ({'; '.join(legend)})"
    return GraphValidationError(field, f"the graph built from {file}: {message}", file=file)
