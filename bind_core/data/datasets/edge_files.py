"""The edge list of :func:`~bind_core.data.datasets.ingest_files`: read within the limits, matched to the node
table's ids, refused when it holds no edges (unless allowed), and reported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bind_core.data.datasets.compression import inner_suffix, unpacked
from bind_core.data.datasets.edgelist import EdgeList, OnUnknown, read_edge_list, sample_tokens
from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.data.datasets.limits import Limits
from bind_core.data.datasets.node_ids import node_id_index
from bind_core.errors import GraphValidationError, Message, Option


@dataclass(frozen=True)
class NodeIds:
    """The user's node ids: int64 ``ids`` when every id is an integer, else the ``keys`` as text (the rows'
    positions then stand for them); neither without an id column."""

    ids: np.ndarray | None = None
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class EdgeSource:
    """An edge-list file, the name errors give it, and how to treat unknown nodes and no edges."""

    path: Path
    name: str | None
    on_unknown: OnUnknown
    allow_no_edges: bool

    @property
    def shown(self) -> str:
        """The edge list's name in errors: the caller's, else the file's own."""
        return self.name or self.path.name


def ids_and_edges(
    table: pd.DataFrame,
    node_id: str | None,
    source: EdgeSource | None,
    shown: str,
    limits: Limits,
    report: IngestReport,
) -> tuple[NodeIds, EdgeList]:
    """The user's node ids (from the id column) and the edge list, matched to them."""
    ids, node_ids = node_id_index(table[node_id], node_id, file=shown) if node_id is not None else (None, None)
    user_ids = NodeIds(node_ids, tuple(str(k) for k in ids) if ids is not None and node_ids is None else ())
    if source is None:
        return user_ids, EdgeList(np.empty((0, 2), np.int64))
    edge_list = _edges(source, ids=ids, num_nodes=len(table), id_column=node_id, limits=limits, table=table)
    _report_edges(edge_list, report)
    return user_ids, edge_list


def _with_id_column(exc: GraphValidationError, table: pd.DataFrame, tokens: list[str]) -> GraphValidationError:
    """``exc`` (an edge list read as row positions) with the advice to name the node-id column, where one column of
    the table holds most of the edge list's values, each once; else ``exc`` itself."""
    sample = set(tokens)
    if not sample:
        return exc
    for column in table.columns:
        values = table[column]
        if values.isna().any() or not values.is_unique:
            continue
        text = set(values.astype(str).tolist())
        if len(sample & text) >= max(2, 0.9 * (len(sample) - 2)):  # a header line's two names need not match
            hint = Message.of(
                f"; the edge list's values are the values of column {column!r} of the node table, whose every row has "
                "its own: to match the edges by them, name it as the node-id column (",
                Option("node_id", str(column)),
                ")",
            )
            return GraphValidationError(
                exc.field,
                Message.of(exc.message, hint),
                value=exc.value,
                column=exc.column,
                file=exc.file,
                rows=exc.rows,
                values=exc.values,
                count=exc.count,
                suggestions=exc.suggestions,
            )
    return exc


def _edges(
    source: EdgeSource,
    *,
    ids: pd.Index | None,
    num_nodes: int,
    id_column: str | None,
    limits: Limits,
    table: pd.DataFrame | None = None,
) -> EdgeList:
    shown = source.shown
    if inner_suffix(source.path) in (".npz", ".parquet", ".pq"):
        raise GraphValidationError(
            "edges", f"{shown}: an edge list is a text file (CSV, TSV or whitespace)", file=shown
        )
    with unpacked(source.path, field="edges", shown=shown, max_bytes=limits.unpacked_bytes) as plain:
        try:
            edge_list = read_edge_list(
                plain,
                ids=ids,
                num_nodes=num_nodes,
                id_column=id_column,
                on_unknown=source.on_unknown,
                max_edges=limits.edges,
                shown=shown,
            )
        except GraphValidationError as exc:
            if ids is not None or table is None:
                raise
            raise _with_id_column(exc, table, sample_tokens(plain)) from exc
    if edge_list.edges.shape[0] == 0 and not source.allow_no_edges:
        why = (
            f"every one of its {edge_list.rows} edge row(s) names an unknown node"
            if edge_list.rows
            else "it holds no edges"
        )
        message = Message.of(
            f"{shown}: {why}; a GNN on a graph without edges sees only each node's own features. Pass ",
            Option("allow_no_edges", True),
            " to audit it anyway",
        )
        raise GraphValidationError("edges", message, file=shown)
    return edge_list


def _report_edges(edge_list: EdgeList, report: IngestReport) -> None:
    report.dropped_edges, report.unknown_ids = edge_list.dropped, edge_list.unknown_ids
    report.ignored_edge_columns = edge_list.extra_columns
    report.self_loops = int((edge_list.edges[:, 0] == edge_list.edges[:, 1]).sum())
    pairs = edge_list.edges[edge_list.edges[:, 0] != edge_list.edges[:, 1]].astype(np.int64)
    keys = pairs[:, 0] * (int(pairs.max(initial=0)) + 1) + pairs[:, 1]  # one int64 per ordered pair: a 1-D unique
    report.duplicate_edges = int(keys.size - np.unique(keys).size)
