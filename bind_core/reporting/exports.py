"""Exports of an audit: per-node (and, when attributed, per-edge) influence as CSV or Parquet, and the audit as a
model card's quantitative analysis.

Pure functions over the audit's typed rows (:class:`~bind_core.pipeline.results.InfluenceRow` of
``AuditResult.influence_rows()``, :class:`~bind_core.influence.edge_records.EdgeRow` of ``AuditResult.edge_rows()``)
and its results (:class:`AuditResults`, or the JSON of ``AuditResult.to_dict()``); they return bytes or a typed
model card and touch no file, network or database. A row's columns are its JSON keys
(:func:`bind_core.codec.encode`), in the same order.

**CSV injection.** A spreadsheet treats a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some
programs, a tab or a carriage return) as a formula. :func:`csv_cell` prefixes such *string* cells with a single
quote, as OWASP recommends. Numbers are written as numbers and never escaped: a negative ΔΓ such as
``-0.0149`` starts with ``-`` but is a number, it stays numeric for every program that reads the file, and a
number cannot carry a formula. The string cells are the user's node ids where they are text (``node_id``,
``u_id``, ``v_id``; the Parquet columns are then ``string``, else ``int64``) and the user's names of a node's group and
label (``group_name``, ``label_name``, beside the codes ``group`` and ``label``) and of an edge's endpoints' groups
(``u_group_name``, ``v_group_name``); every other cell is a number or a flag.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bind_core.influence.edge_records import EdgeRow
from bind_core.influence.edge_rows import EDGE_ROW_KEYS
from bind_core.pipeline.results import AuditResults, InfluenceRow
from bind_core.reporting.card import ModelCard, build_model_card
from bind_core.reporting.views import typed_results

INFLUENCE_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(InfluenceRow))
"""The columns of ``AuditResult.influence_rows()``: the fields of :class:`InfluenceRow`, in order."""
_INFLUENCE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("position", pa.int32()),
    ("node_index", pa.int64()),
    ("node_id", pa.int64()),
    ("group", pa.int32()),
    ("label", pa.int32()),
    ("delta", pa.float64()),
    ("delta_sp", pa.float64()),
    ("delta_eo", pa.float64()),
    ("settled", pa.bool_()),
    ("no_minimum", pa.bool_()),
    ("group_name", pa.string()),
    ("label_name", pa.string()),
]
INFLUENCE_SCHEMA = pa.schema(_INFLUENCE_FIELDS)
EDGE_COLUMNS = EDGE_ROW_KEYS
"""The columns of ``AuditResult.edge_rows()``: the fields of :class:`EdgeRow` less ``settled``, in order."""
_EDGE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("position", pa.int32()),
    ("u_index", pa.int64()),
    ("v_index", pa.int64()),
    ("u_id", pa.int64()),
    ("v_id", pa.int64()),
    ("u_group", pa.int32()),
    ("v_group", pa.int32()),
    ("within_group", pa.bool_()),
    ("affects", pa.bool_()),
    ("delta", pa.float64()),
    ("delta_sp", pa.float64()),
    ("delta_eo", pa.float64()),
    ("u_group_name", pa.string()),
    ("v_group_name", pa.string()),
]
EDGE_SCHEMA = pa.schema(_EDGE_FIELDS)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` made safe for a spreadsheet: a string starting with a formula character gets a leading ``'``.

    Numbers (``int``, ``float``; not ``bool``) pass through unchanged, so negative numbers stay numeric.
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _csv(cells: Iterable[Sequence[Any]], columns: Sequence[str]) -> bytes:
    """A header row of ``columns`` and a row of each of ``cells`` as UTF-8 CSV (RFC 4180: CRLF line ends), string
    cells escaped by :func:`csv_cell`; floats in Python's shortest round-trip representation."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([csv_cell(c) for c in columns])
    for row in cells:
        writer.writerow([csv_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def influence_csv(rows: Iterable[InfluenceRow]) -> bytes:
    """Every training node's row as CSV.

    Args:
        rows: the rows (``AuditResult.influence_rows()``).

    Returns:
        UTF-8 CSV (RFC 4180: header row :data:`INFLUENCE_COLUMNS`, CRLF line ends), string cells escaped by
        :func:`csv_cell`; floats written with Python's shortest round-trip representation, so the file reproduces
        them exactly; ``settled`` as ``true``/``false``, empty for the linear estimate; ``no_minimum`` ``true`` where
        the node's deletion has no minimum near the given weights (its deltas' cells empty), empty otherwise;
        ``group_name`` and ``label_name`` the user's names of the codes ``group`` and ``label`` (empty for rows
        stored before they were written).
    """
    flags = ("settled", "no_minimum")
    return _csv(
        ([_flag(getattr(row, c)) if c in flags else getattr(row, c) for c in INFLUENCE_COLUMNS] for row in rows),
        INFLUENCE_COLUMNS,
    )


def influence_parquet(rows: Iterable[InfluenceRow]) -> bytes:
    """Every training node's row as Parquet.

    Args:
        rows: the rows (``AuditResult.influence_rows()``).

    Returns:
        A Parquet file (:data:`INFLUENCE_SCHEMA`, ``node_id`` as strings where the user's ids are text),
        zstd-compressed. Typed columns: no escaping.
    """
    return _parquet(list(rows), INFLUENCE_SCHEMA, ("node_id",))


def edges_csv(rows: Iterable[EdgeRow]) -> bytes:
    """Every edge's row as CSV.

    Args:
        rows: the rows (``AuditResult.edge_rows()``).

    Returns:
        CSV as :func:`influence_csv`, columns :data:`EDGE_COLUMNS`; the flags (``within_group``, ``affects``) as
        ``true``/``false``.
    """
    flags = ("within_group", "affects")
    return _csv(
        ([_flag(getattr(row, c)) if c in flags else getattr(row, c) for c in EDGE_COLUMNS] for row in rows),
        EDGE_COLUMNS,
    )


def edges_parquet(rows: Iterable[EdgeRow]) -> bytes:
    """Every edge's row as Parquet.

    Args:
        rows: the rows (``AuditResult.edge_rows()``).

    Returns:
        A Parquet file (:data:`EDGE_SCHEMA`: the flags as booleans; ``u_id`` and ``v_id`` as strings where the
        user's ids are text), zstd-compressed.
    """
    return _parquet(list(rows), EDGE_SCHEMA, ("u_id", "v_id"))


def _flag(value: bool | None) -> str:
    """A flag as CSV writes it: ``true``/``false``, empty where it is not defined (``None``)."""
    return "" if value is None else "true" if value else "false"


def _parquet(rows: Sequence[InfluenceRow] | Sequence[EdgeRow], schema: pa.Schema, ids: Sequence[str]) -> bytes:
    """``rows`` as a zstd-compressed Parquet file of ``schema``'s columns, the ``ids`` columns as text where one of
    them holds text."""
    schema = _text_ids(schema, rows, ids)
    table = pa.table({c: [getattr(r, c) for r in rows] for c in schema.names}, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def model_card(results: AuditResults | Mapping[str, Any], *, audit_id: str | None = None) -> ModelCard:
    """The audit as a JSON document shaped like a model card's quantitative analysis (Mitchell et al., 2019;
    the Model Card Toolkit's ``quantitative_analysis.performance_metrics``), plus BIND's own blocks.

    Shape::

        {"format": EXPORT_FORMAT, "audit_id": ..., "sign_convention": ..., "summary": {verdict, ...} | None,
         "quantitative_analysis": {"performance_metrics": [
             {"type": "accuracy", "value": 0.89, "slice": "test",
              "confidence_interval": {"lower_bound": 0.83, "upper_bound": 0.96}},   # only where finite
             {"type": "true_positive_rate", "value": 0.95, "slice": "group=0", "group": 0,
              "group_name": "gender=F & race=B", "included": true}, ...,
             {"type": "delta_sp_worst_pair", "value": 0.41, "slice": "group=0 vs group=2", "groups": [0, 2],
              "group_names": ["gender=F & race=B", "gender=M & race=W"]}, ...]},
         "influence": {summary: count, harmful, helpful, quantiles, ...; "top_harmful", "top_helpful"} | None,
         "debiasing": [{budget, requested, deleted, nodes, estimated_delta, before, after}] | None,
         "validation": {count, pearson, spearman, correlations} | None,
         "edges": {computed, reason, edges, affecting, top_harmful, top_helpful, cross_group, ...} | None,
         "warnings": [...], "graph": {...}, "model": {...}}

    Slices: ``test`` for the whole test set (the fairness gaps ΔSP, ΔEO, Γ compare the groups within it, the
    mean over pairs of the included groups), ``group=g`` for the test nodes of sensitive group g (with its
    ``group_name`` and whether the fairness metrics ``included`` it), and, with more than two included groups,
    ``group=a vs group=b`` for the worst pair of ΔSP, ΔEO, Γ_SP and Γ_EO (type ``<metric>_worst_pair``: the
    largest value over pairs, with the pair's ``groups`` and ``group_names``). In strict JSON
    (:func:`~bind_core.codec.json_safe`) non-finite numbers become ``null``.

    Args:
        results: :class:`AuditResults`, or ``AuditResult.to_dict()`` (as stored in ``audits.results``).
        audit_id: the audit's id, where it has one.

    Returns:
        The :class:`~bind_core.reporting.card.ModelCard`; ``card.to_dict()`` is the document above, and
        :func:`~bind_core.codec.json_safe` of it strict JSON (non-finite numbers as ``null``).

    Raises:
        ResultFormatError: ``results`` is a document that does not fit the types.
    """
    return build_model_card(typed_results(results), audit_id=audit_id)


def _text_ids(schema: pa.Schema, rows: Sequence[InfluenceRow] | Sequence[EdgeRow], columns: Sequence[str]) -> pa.Schema:
    """``schema`` with the id ``columns`` as strings where the user's ids are text (an id column of text), else
    unchanged (int64)."""
    if not any(isinstance(getattr(r, c), str) for r in rows for c in columns):
        return schema
    for c in columns:
        schema = schema.set(schema.get_field_index(c), pa.field(c, pa.string()))
    return schema
