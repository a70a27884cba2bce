"""An audit's stored per-node estimates read back as ``bind_core``'s typed rows (the what-if, the reports and the
exports read them)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit
from app.core.db.tables import InfluenceRow as InfluenceRecord
from app.core.errors import Conflict
from app.influence.schemas import name_of
from bind_core.pipeline.results import InfluenceRow

__all__ = ["all_influence_rows", "code_names", "user_id"]


def all_influence_rows(session: Session, audit: Audit, *, required: bool) -> list[InfluenceRow]:
    """Every influence row of ``audit``, by position.

    Args:
        session: the database session.
        audit: the audit.
        required: raise when it has none.

    Returns:
        The stored rows as ``bind_core``'s typed rows, the user's text ids restored from ``node_key`` and the names of
        their group and label from the results' graph (:func:`code_names`); a row without a value keeps its null
        deltas and ``no_minimum`` true (``None`` on the others, as ``bind_core`` makes them).

    Raises:
        Conflict: ``required`` and the audit has no rows (``influence-not-ready``).
    """
    row = InfluenceRecord
    columns = (row.position, row.node_index, row.node_id, row.node_key, row.grp, row.label, row.delta, row.delta_sp)
    query = select(*columns, row.delta_eo, row.settled, row.no_minimum)
    query = query.where(row.audit_id == audit.id).order_by(row.position)
    result = session.execute(query)
    groups, classes = code_names(audit)
    rows = [
        InfluenceRow(
            position=r.position,
            node_index=r.node_index,
            node_id=user_id(r.node_id, r.node_key),
            group=r.grp,
            label=r.label,
            group_name=name_of(groups, r.grp),
            label_name=name_of(classes, r.label),
            delta=r.delta,
            delta_sp=r.delta_sp,
            delta_eo=r.delta_eo,
            settled=r.settled,
            no_minimum=True if r.no_minimum else None,
        )
        for r in result
    ]
    if required and not rows:
        raise Conflict(
            f"Audit {audit.id} has no influence estimates (it ran without the influence stage).",
            slug="influence-not-ready",
            title="No influence estimates yet",
        )
    return rows


def user_id(stored: int, text: str | None) -> int | str:
    """The user's id of a stored row: its text id where the user's ids are text, else the stored integer."""
    return text if text is not None else stored


def code_names(audit: Audit) -> tuple[list[str], list[str]]:
    """The user's names of the graph's group and class codes: the results' ``graph.group_names`` and
    ``graph.class_names`` (the stored rows keep the codes); empty while the audit has no results."""
    graph = (audit.results or {}).get("graph") or {}
    return [str(v) for v in graph.get("group_names") or []], [str(v) for v in graph.get("class_names") or []]
