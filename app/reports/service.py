"""What the report and export routes read: a succeeded audit's results and all its influence rows (of nodes and
edges)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.audits.service import get_audit
from app.core.db.tables import Audit, EdgeInfluenceRow, InfluenceRow, Tenant
from app.core.errors import Conflict
from app.influence.edge_pages import require_edges
from bind_core.reporting import EDGE_COLUMNS


def succeeded_audit(session: Session, tenant: Tenant, audit_id: uuid.UUID) -> Audit:
    """The tenant's audit with its results.

    Raises:
        NotFound: no such audit for this tenant.
        Conflict: the audit has not succeeded (``audit-not-succeeded``): queued, running, failed or cancelled.
    """
    audit = get_audit(session, tenant, audit_id)
    if audit.state != "succeeded" or audit.results is None:
        raise Conflict(
            f"Audit {audit.id} is {audit.state}; reports and exports exist only for succeeded audits.",
            slug="audit-not-succeeded",
            title="Audit has not succeeded",
        )
    return audit


def all_influence_rows(session: Session, audit: Audit, *, required: bool) -> list[dict[str, Any]]:
    """Every influence row of ``audit`` by position, as ``bind_core`` row dicts (``group``, not ``grp``).

    Raises:
        Conflict: ``required`` and the audit has no rows (``influence-not-ready``).
    """
    row = InfluenceRow
    columns = (row.position, row.node_index, row.node_id, row.node_key, row.grp, row.label, row.delta, row.delta_sp)
    result = session.execute(select(*columns, row.delta_eo).where(row.audit_id == audit.id).order_by(row.position))
    names = ("position", "node_index", "node_id", "node_key", "group", "label", "delta", "delta_sp", "delta_eo")
    rows = [_user_ids(dict(zip(names, values, strict=True)), "node_id", "node_key") for values in result]
    if required and not rows:
        raise Conflict(
            f"Audit {audit.id} has no influence estimates (it ran without the influence stage).",
            slug="influence-not-ready",
            title="No influence estimates yet",
        )
    return rows


def all_edge_rows(session: Session, audit: Audit) -> list[dict[str, Any]]:
    """Every edge row of ``audit`` by position, as ``bind_core`` row dicts (``u_group``, not ``u_grp``).

    Raises:
        Conflict: the audit did not attribute its edges (``edges-not-computed``, with the reason).
    """
    require_edges(audit)
    row = EdgeInfluenceRow
    stored = {"u_group": "u_grp", "v_group": "v_grp"}  # the columns named otherwise in the table
    names = (*EDGE_COLUMNS, "u_key", "v_key")
    columns: list[InstrumentedAttribute[Any]] = [getattr(row, stored.get(name, name)) for name in names]
    result = session.execute(select(*columns).where(row.audit_id == audit.id).order_by(row.position))
    rows = [_user_ids(dict(zip(names, values, strict=True)), "u_id", "u_key") for values in result]
    return [_user_ids(r, "v_id", "v_key") for r in rows]


def _user_ids(row: dict[str, Any], id_key: str, text_key: str) -> dict[str, Any]:
    """``row`` with the user's id under ``id_key``: the stored text id where the user's ids are text."""
    text = row.pop(text_key)
    if text is not None:
        row[id_key] = text
    return row


def audit_profile(audit: Audit) -> dict[str, Any]:
    """The profile of a succeeded audit's harmful nodes (``results["profile"]``).

    Raises:
        Conflict: the audit has no profile (``profile-not-computed``): it ran without the influence stage, or was
            stored by a version without profiles.
    """
    profile = (audit.results or {}).get("profile")
    if not isinstance(profile, dict):
        raise Conflict(
            f"Audit {audit.id} has no profile of its harmful nodes (it ran without the influence stage, or before "
            "profiles were computed).",
            slug="profile-not-computed",
            title="No profile of the harmful nodes",
        )
    return profile
