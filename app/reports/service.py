"""What the report and export routes read: a succeeded audit's results and all its influence rows (of nodes and
edges)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audits.service import get_audit
from app.core.db.tables import Audit, EdgeInfluenceRow, Tenant
from app.core.errors import Conflict
from app.influence.edge_pages import require_edges
from app.influence.rows import code_names, user_id
from app.influence.schemas import name_of
from bind_core.pipeline.results import EdgeRow


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


def all_edge_rows(session: Session, audit: Audit) -> list[EdgeRow]:
    """Every edge row of ``audit``, by position.

    Args:
        session: the database session.
        audit: the audit.

    Returns:
        The stored rows as ``bind_core``'s typed rows, the user's text ids restored from ``u_key`` and ``v_key``.

    Raises:
        Conflict: the audit did not attribute its edges (``edges-not-computed``, with the reason).
    """
    require_edges(audit)
    row = EdgeInfluenceRow
    ends = (row.u_index, row.v_index, row.u_id, row.v_id, row.u_key, row.v_key, row.u_grp, row.v_grp)
    numbers = (row.within_group, row.affects, row.delta, row.delta_sp, row.delta_eo)
    groups, _ = code_names(audit)  # the stored rows keep the codes; the names come from the results
    result = session.execute(
        select(row.position, *ends, *numbers).where(row.audit_id == audit.id).order_by(row.position)
    )
    return [
        EdgeRow(
            position=r.position,
            u_index=r.u_index,
            v_index=r.v_index,
            u_id=user_id(r.u_id, r.u_key),
            v_id=user_id(r.v_id, r.v_key),
            u_group=r.u_grp,
            v_group=r.v_grp,
            within_group=r.within_group,
            affects=r.affects,
            delta=r.delta,
            delta_sp=r.delta_sp,
            delta_eo=r.delta_eo,
            u_group_name=name_of(groups, r.u_grp),
            v_group_name=name_of(groups, r.v_grp),
        )
        for r in result
    ]


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
