"""``/v1/audits/{id}/report``, ``/influence.csv``, ``/influence.parquet``, ``/edges.csv``, ``/edges.parquet``,
``/export``, ``/profile``: a succeeded audit as a page a person reads, as files for spreadsheets and data tools (per
node and, when attributed, per edge), as a model card's quantitative analysis, and what its harmful training nodes
have in common.

The routes are plain ``def``: rendering the figures runs in the thread pool, not on the event loop.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Response

from app.core.deps import SessionDep
from app.core.problem_schema import problem_responses
from app.influence.rows import all_influence_rows
from app.reports.schemas import AuditExport, ProfileRead
from app.reports.service import all_edge_rows, audit_profile, succeeded_audit
from app.tenants.deps import ViewerTenant
from app.trail.record import trailed
from bind_core.codec import json_safe
from bind_core.reporting import edges_csv, edges_parquet, influence_csv, influence_parquet, model_card, render_report

router = APIRouter(prefix="/audits", tags=["reports"])

PARQUET_TYPE = "application/vnd.apache.parquet"
# The report has no script and loads nothing: forbid both, allow only its inline styles and SVG.
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_ERRORS = problem_responses(404, 409)


def _file(kind: str, media_type: str, description: str) -> dict[int | str, dict[str, Any]]:
    schema = {"type": "string", "format": "binary"} if kind == "binary" else {"type": "string"}
    return {200: {"description": description, "content": {media_type: {"schema": schema}}}, **_ERRORS}


@router.get(
    "/{audit_id}/report",
    dependencies=[trailed("report.read", "/audits/{audit_id}")],
    response_class=Response,
    responses=_file("text", "text/html", "The report: one self-contained HTML5 page (no script, no external files)"),
)
def read_report(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Response:
    """The audit as an HTML page: metrics with confidence intervals, warnings, each group's distribution of
    predicted probabilities, the distribution of node influence, the most harmful nodes, estimated against
    actual ΔΓ, and debiasing per budget. 409 unless the audit succeeded."""
    audit = succeeded_audit(session, tenant, audit_id)
    rows = all_influence_rows(session, audit, required=False)
    assert audit.results is not None
    meta = {"audit": str(audit.id), "finished": audit.finished_at.isoformat() if audit.finished_at else "?"}
    page = render_report(audit.results, rows or None, title=f"BIND audit {audit.id}", meta=meta)
    return Response(page, media_type="text/html; charset=utf-8", headers={"Content-Security-Policy": REPORT_CSP})


@router.get(
    "/{audit_id}/influence.csv",
    dependencies=[trailed("export.influence_csv", "/audits/{audit_id}")],
    response_class=Response,
    responses=_file("text", "text/csv", "Every training node's ΔΓ, one row per node in training-split order"),
)
def read_influence_csv(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Response:
    """Every training node's influence as CSV (``position, node_index, node_id, group, label, delta, delta_sp,
    delta_eo, settled, no_minimum``; ``settled`` as ``true``/``false`` for the step estimate, empty for the linear
    one; ``no_minimum`` ``true`` where the node's deletion has no minimum near the weights, its delta cells then
    empty, and empty otherwise). String cells starting with ``=``, ``+``, ``-`` or ``@`` are prefixed with ``'``;
    numbers, negative ones included, are written as numbers."""
    audit = succeeded_audit(session, tenant, audit_id)
    body = influence_csv(all_influence_rows(session, audit, required=True))
    return _attachment(body, "text/csv; charset=utf-8", f"influence-{audit.id}.csv")


@router.get(
    "/{audit_id}/influence.parquet",
    dependencies=[trailed("export.influence_parquet", "/audits/{audit_id}")],
    response_class=Response,
    responses=_file("binary", PARQUET_TYPE, "Every training node's ΔΓ as a typed Parquet table"),
)
def read_influence_parquet(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Response:
    """Every training node's influence as Parquet (the CSV's columns, int32/int64/float64 types; the deltas null
    where the node has no value, ``settled`` and ``no_minimum`` nullable booleans)."""
    audit = succeeded_audit(session, tenant, audit_id)
    body = influence_parquet(all_influence_rows(session, audit, required=True))
    return _attachment(body, PARQUET_TYPE, f"influence-{audit.id}.parquet")


@router.get(
    "/{audit_id}/edges.csv",
    dependencies=[trailed("export.edges_csv", "/audits/{audit_id}")],
    response_class=Response,
    responses=_file("text", "text/csv", "Every undirected edge's ΔΓ, one row per edge in the graph's edge order"),
)
def read_edges_csv(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Response:
    """Every edge's influence as CSV (``position, u_index, v_index, u_id, v_id, u_group, v_group, within_group,
    affects, delta, delta_sp, delta_eo, u_group_name, v_group_name``; the flags as ``true``/``false``; the group
    names as the user's data writes them). 409 unless the audit succeeded
    (``audit-not-succeeded``) with its edges attributed (``edges-not-computed``)."""
    audit = succeeded_audit(session, tenant, audit_id)
    return _attachment(edges_csv(all_edge_rows(session, audit)), "text/csv; charset=utf-8", f"edges-{audit.id}.csv")


@router.get(
    "/{audit_id}/edges.parquet",
    dependencies=[trailed("export.edges_parquet", "/audits/{audit_id}")],
    response_class=Response,
    responses=_file("binary", PARQUET_TYPE, "Every undirected edge's ΔΓ as a typed Parquet table"),
)
def read_edges_parquet(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Response:
    """Every edge's influence as Parquet (the CSV's columns; the flags as booleans)."""
    audit = succeeded_audit(session, tenant, audit_id)
    return _attachment(edges_parquet(all_edge_rows(session, audit)), PARQUET_TYPE, f"edges-{audit.id}.parquet")


@router.get(
    "/{audit_id}/export",
    response_model=AuditExport,
    responses=_ERRORS,
    dependencies=[trailed("export.model_card", "/audits/{audit_id}")],
)
def read_export(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> object:
    """The audit as a model card's quantitative analysis: each metric with its slice (``test`` or ``group=g``)
    and, where computed, its confidence interval; plus the influence summary, debiasing, validation and, when the
    audit asked for them, the edges."""
    audit = succeeded_audit(session, tenant, audit_id)
    assert audit.results is not None
    return json_safe(model_card(audit.results, audit_id=str(audit.id)).to_dict())


@router.get(
    "/{audit_id}/profile",
    response_model=ProfileRead,
    responses=_ERRORS,
    dependencies=[trailed("export.profile", "/audits/{audit_id}")],
)
def read_profile(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> dict[str, Any]:
    """What the harmful training nodes have in common: the distributions of group, label, degree, cross-group share
    and every feature over the harmful, helpful and all training nodes, and the rules that pick out where the harm
    concentrates, each checked on a held-out half (docs/METHOD.md). 409 unless the audit succeeded
    (``audit-not-succeeded``) and computed the profile (``profile-not-computed``: it ran without influence, or
    before profiles existed)."""
    return audit_profile(succeeded_audit(session, tenant, audit_id))


def _attachment(body: bytes, media_type: str, filename: str) -> Response:
    return Response(body, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'})
