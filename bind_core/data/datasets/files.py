"""Building a Graph from user files: a node table plus an edge list, or one ``.npz`` archive.

Node table (``.csv``, ``.tsv``, ``.parquet``/``.pq`` by suffix; CSV/TSV also ``.gz`` or ``.zst``
compressed): one row per node, a header row. Rules (docs/DATASETS.md, "Bringing your own graph"):

* ``label``: class codes ``0..C-1`` in sorted order of the values; an empty cell, or the ``unlabeled``
  value, makes the node unlabeled: it stays in the graph and is in no split (``Graph.y`` is ``-1``). More
  than two classes is a note in the report (what ΔSP and ΔEO then mean).
* ``sensitive``: one column or several (a list, or one comma-separated string; the value combinations
  that occur become the groups). Values are kept exactly. A numeric column with more than
  ``max_sensitive_values`` values needs a binning rule in ``sensitive_bins`` (``"age>=25"``,
  ``"age:25,60"``, several separated by ``;``).
* ``features``: the feature columns (a list, or one comma-separated string); ``None`` takes every column except
  ``label``, ``split`` and ``node_id`` (the sensitive column stays a feature, as in the BIND paper).
  Numbers as they are, booleans as 0/1, text one-hot encoded up to ``max_categories`` values; missing values are
  refused unless ``impute_missing`` (see :mod:`bind_core.data.datasets.features`).
* ``split``: a column whose values ``train``/``val``/``test`` (any case) place the node; anything else
  leaves it out. Without it, :func:`paper_split` with ``split_seed`` over the labeled nodes.
* ``node_id``: unique node ids the edge list refers to; integer ids (exact to 64 bits) become
  ``Graph.node_ids``. Without it the edge list holds 0-based row positions, and a default feature column that
  numbers the nodes otherwise (``0 … n−1`` out of row order, or ``1 … n``) is refused
  (:mod:`~bind_core.data.datasets.positions`).
* ``scale``: min-max scale every feature column to ``[-1, 1]`` (constant columns become 0), as BIND's code does;
  the graph keeps each column's range (``Graph.feature_ranges``) and the report says so. Off for a graph a model
  trained on the table's own values is audited on.

A misspelled column is refused with the columns of close name ("did you mean").

Edge list (also ``.gz``/``.zst``): the first two columns are the nodes (comma, tab or whitespace
separated, an optional header line, ``#`` comments); further columns are reported and ignored (edges are
unweighted). Rows naming an unknown node are refused, or dropped with ``on_unknown_nodes="drop"``.
An edge list without edges is refused unless ``allow_no_edges``; ``edges=None`` gives a graph without
edges. Self-loops are dropped and duplicates merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from bind_core.data.datasets.bins import apply_bins, parse_bins
from bind_core.data.datasets.compression import COMPRESSED_SUFFIXES, unpacked
from bind_core.data.datasets.edge_files import EdgeSource, NodeIds, ids_and_edges
from bind_core.data.datasets.edgelist import EdgeList, OnUnknown
from bind_core.data.datasets.features import MAX_CATEGORIES, feature_matrix
from bind_core.data.datasets.ingest_report import Ingested, IngestReport
from bind_core.data.datasets.intersect import encode_groups, sensitive_columns
from bind_core.data.datasets.labels import encode_labels
from bind_core.data.datasets.limits import Limits
from bind_core.data.datasets.npz import load_npz
from bind_core.data.datasets.positions import check_numbering
from bind_core.data.datasets.scaling import column_ranges, minmax_scale
from bind_core.data.datasets.split import PAPER_SPLIT_SEED, paper_split
from bind_core.data.datasets.tables import (
    SEPARATORS,
    TABLE_SUFFIXES,
    read_node_table,
    require_columns,
    table_separator,
)
from bind_core.data.graph import Graph
from bind_core.errors import GraphValidationError, Message, Option

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
    features: str | Sequence[str] | None = None,
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

    The files and the options ``label`` ... ``scale`` follow the rules of this module's docstring
    (docs/DATASETS.md, "Bringing your own graph"); for an ``.npz`` see :func:`load_npz`.

    Args:
        nodes, edges: the files; ``nodes_name``, ``edges_name``: their names in errors (default: the files'
            own; the service passes the client's). ``name``: the graph's (default: the node file's, unsuffixed).
        max_nodes, max_edges, max_columns, max_unpacked_bytes: size limits (the last on what a compressed file
            unpacks to), ``None`` for none.

    Returns:
        The validated graph and the :class:`IngestReport`.

    Raises:
        GraphValidationError: malformed input; ``field`` is the parameter at fault (a file or an option), and
            the error names the column, the rows as a spreadsheet shows them, the bad values and their count.
    """
    nodes = Path(nodes)
    limits = Limits(max_nodes, max_edges, max_columns, max_unpacked_bytes)
    if nodes.suffix.lower() == ".npz":
        return _ingest_npz(nodes, edges, split_seed=split_seed, limits=limits, name=name)
    if label is None or sensitive is None:
        raise GraphValidationError("label" if label is None else "sensitive", "required for a node table")
    named = _Named(label, sensitive, features, split, node_id)
    rules = _Rules(unlabeled, impute_missing, max_categories, sensitive_bins, max_sensitive_values, split_seed, scale)
    source = None if edges is None else EdgeSource(Path(edges), edges_name, on_unknown_nodes, allow_no_edges)
    shown, report = nodes_name or nodes.name, IngestReport()
    table = _node_table(nodes, shown, node_id, limits, report)
    graph_parts = _graph_parts(table, named, rules, shown, report)
    user_ids, edges_read = ids_and_edges(table, node_id, source, shown, limits, report)
    split_idx = _splits(table, named, graph_parts.y, rules.split_seed, shown, report)
    graph_name = name if name is not None else _stem(nodes)
    return Ingested(_built(graph_parts, split_idx, edges_read, user_ids, named, shown, graph_name), report)


def _stem(nodes: Path) -> str:
    """The node file's name without its suffixes (``people.csv.gz`` -> ``people``)."""
    return (nodes.with_suffix("") if nodes.suffix.lower() in COMPRESSED_SUFFIXES else nodes).stem


@dataclass(frozen=True)
class _Named:
    """The columns the caller named (``sensitive`` as given: a list, or a comma-separated string)."""

    label: str
    sensitive: str | Sequence[str]
    features: str | Sequence[str] | None
    split: str | None
    node_id: str | None


@dataclass(frozen=True)
class _Rules:
    unlabeled: str | float | None
    impute_missing: bool
    max_categories: int
    sensitive_bins: str | Sequence[str] | None
    max_sensitive_values: int | None
    split_seed: int
    scale: bool


@dataclass
class _Parts:
    """What the node table gives the graph: features, labels and groups."""

    x: np.ndarray
    feature_names: list[str]
    y: np.ndarray
    classes: list[str]
    sens: np.ndarray
    group_names: list[str]
    sens_columns: list[str]
    feature_ranges: list[tuple[float, float]]


def _ingest_npz(
    nodes: Path, edges: str | Path | None, *, split_seed: int, limits: Limits, name: str | None
) -> Ingested:
    if edges is not None:
        raise GraphValidationError(
            "edges", Message.of("an .npz archive holds its own edges; leave out ", Option("edges")), value=str(edges)
        )
    graph = load_npz(
        nodes,
        split_seed=split_seed,
        max_nodes=limits.nodes,
        max_edges=limits.edges,
        max_columns=limits.columns,
        name=name,
    )
    return Ingested(graph, IngestReport())


def _node_table(nodes: Path, shown: str, node_id: str | None, limits: Limits, report: IngestReport) -> pd.DataFrame:
    """The node table, read (unpacked first when compressed) within the limits; the id column as text. A CSV/TSV
    whose header is separated otherwise than its suffix says is read so, and the report says it."""
    with unpacked(nodes, field="nodes", shown=shown, max_bytes=limits.unpacked_bytes) as plain:
        text = [node_id] if node_id is not None else []
        sep, usual = table_separator(plain), TABLE_SUFFIXES.get(plain.suffix.lower())
        if sep != usual and sep is not None and usual is not None:
            report.hints.append(
                f"{shown} read as separated by {SEPARATORS[sep]}: its header line holds no {SEPARATORS[usual]} "
                f"(the {plain.suffix.lower()} suffix's separator) but {SEPARATORS[sep]}"
            )
        return read_node_table(
            plain, max_nodes=limits.nodes, max_columns=limits.columns, shown=shown, text_columns=text
        )


def _named_features(table: pd.DataFrame, named: _Named, shown: str) -> list[str] | None:
    """The feature columns the caller named (checked), or ``None``."""
    if named.features is None:
        return None
    given = named.features
    if isinstance(given, str):  # "a,b,c", as the command line and the upload's form field take it
        given = [given] if given in table.columns else [c.strip() for c in given.split(",") if c.strip()]
    features = [str(c) for c in given]
    require_columns(table, features, "features", file=shown)
    if named.label in features:
        message = "the label column cannot also be a feature"
        raise GraphValidationError("features", message, value=named.label, column=named.label, file=shown)
    return features


def _default_features(table: pd.DataFrame, named: _Named, sens_columns: list[str], shown: str) -> list[str]:
    """Every column but the label, split and node id (a sensitive column stays a feature)."""
    special = {named.label, *(c for c in (named.split, named.node_id) if c is not None)}
    columns = [c for c in table.columns if c not in special or c in sens_columns]
    if not columns:
        raise GraphValidationError("features", f"{shown}: no feature columns", file=shown)
    return columns


def _graph_parts(table: pd.DataFrame, named: _Named, rules: _Rules, shown: str, report: IngestReport) -> _Parts:
    """Labels, groups and features from the node table, by the module's rules."""
    require_columns(table, [named.label], "label", file=shown)
    sens_columns = sensitive_columns(table, named.sensitive, file=shown)
    for option, column in (("split", named.split), ("node_id", named.node_id)):
        if column is not None:
            require_columns(table, [column], option, file=shown)
    features = _named_features(table, named, shown)
    y, classes = encode_labels(table[named.label], named.label, file=shown, unlabeled=rules.unlabeled, report=report)
    if features is None:
        features = _default_features(table, named, sens_columns, shown)
        if named.node_id is None:  # a column numbering the nodes would be a feature, the edges read as positions
            check_numbering(table, [c for c in features if c not in sens_columns], file=shown, report=report)
    sens, group_names, per_column = _groups(table, sens_columns, features, rules, shown, report)
    x, feature_names = feature_matrix(
        table,
        features,
        file=shown,
        sens_codes=dict(zip(sens_columns, per_column, strict=True)),
        max_categories=rules.max_categories,
        impute_missing=rules.impute_missing,
        report=report,
    )
    ranges: list[tuple[float, float]] = []
    if rules.scale:
        lo, hi = column_ranges(x)
        ranges = list(zip(lo.tolist(), hi.tolist(), strict=True))
        report.scaled = dict(zip(feature_names, ranges, strict=True))
        x = minmax_scale(x)
    return _Parts(x, feature_names, y, classes, sens, group_names, sens_columns, ranges)


def _groups(
    table: pd.DataFrame, sens_columns: list[str], features: list[str], rules: _Rules, shown: str, report: IngestReport
) -> tuple[np.ndarray, list[str], list[np.ndarray]]:
    """:func:`encode_groups` with the binning rules (reported); when the sensitive columns' cells are at fault,
    the other feature columns' problems come in the same error."""
    bins = parse_bins(rules.sensitive_bins)
    try:
        groups = encode_groups(table, sens_columns, bins=bins, max_values=rules.max_sensitive_values, file=shown)
    except GraphValidationError as exc:
        if exc.field != "nodes":
            raise
        others = [c for c in features if c not in sens_columns]
        try:
            feature_matrix(
                table,
                others,
                file=shown,
                sens_codes={},
                max_categories=rules.max_categories,
                impute_missing=rules.impute_missing,
                report=IngestReport(),
            )
        except GraphValidationError as more:
            raise GraphValidationError.together([exc, more]) from exc
        raise
    report.binned = {c: apply_bins(table[c], rule, file=shown)[1] for c, rule in bins.items()}
    return groups


def _splits(
    table: pd.DataFrame, named: _Named, y: np.ndarray, seed: int, shown: str, report: IngestReport
) -> tuple[np.ndarray | torch.Tensor, ...]:
    """Train, validation and test nodes: the split column's, else the paper split with ``seed``."""
    if named.split is not None:
        return _split_column(table[named.split], named.split, y, file=shown, report=report)
    return paper_split(y, seed=seed)


def _built(
    parts: _Parts,
    split: tuple[np.ndarray | torch.Tensor, ...],
    edge_list: EdgeList,
    user_ids: NodeIds,
    named: _Named,
    shown: str,
    name: str,
) -> Graph:
    """The validated graph; a graph-level error said with the user's column names and values."""
    train, val, test = split
    try:
        return Graph.build(
            parts.x,
            edge_list.edges,
            parts.y,
            parts.sens,
            train,
            val,
            test,
            feature_names=parts.feature_names,
            feature_ranges=parts.feature_ranges,
            node_ids=user_ids.ids,
            name=name,
            group_names=parts.group_names,
            sensitive=parts.sens_columns,
            node_id_column=named.node_id,
            node_keys=user_ids.keys,
            label_name=named.label,
            class_names=parts.classes,
        )
    except GraphValidationError as exc:
        raise _in_user_terms(exc, named, parts, file=shown) from exc


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
            message = f"{file}, column {name!r}: no labeled node is marked {part!r} (values: train/val/test)"
            raise GraphValidationError("split", message, column=name, file=file)
    return parts  # type: ignore[return-value]


_INTERNAL = {"x": "features", "edge_index": "edges"}


def _in_user_terms(exc: GraphValidationError, named: _Named, parts: _Parts, *, file: str) -> GraphValidationError:
    """A graph-level error (``y``, ``sens``, ``test_idx``...) said with the option at fault (``label``,
    ``sensitive``, ``split``...), the user's column names and values."""
    message = exc.text()
    sensitive = ", ".join(parts.sens_columns)
    field, column = {"y": ("label", named.label), "sens": ("sensitive", sensitive)}.get(exc.field, (None, None))
    if field is None and exc.field in _INTERNAL:
        field = _INTERNAL[exc.field]
    if field is None:
        field, column = "split", named.split
        message = f"the {'split' if named.split is not None else 'paper split'}: {message}"
    legend = []
    if "class" in message or exc.field == "y":
        classes = ", ".join(f"{i}={c!r}" for i, c in enumerate(parts.classes))
        legend.append(f"classes {classes} (column {named.label!r})")
    if "group" in message or exc.field == "sens":
        legend.append("groups " + ", ".join(f"{i}={g!r}" for i, g in enumerate(parts.group_names)))
    if legend:
        message += f" ({'; '.join(legend)})"
    return GraphValidationError(field, f"the graph built from {file}: {message}", column=column, file=file)
