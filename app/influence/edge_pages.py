"""Pages of per-edge influence, by keyset on ``(audit_id, delta, position)`` and the primary key
``(audit_id, position)``: each page costs O(limit) whatever its depth, as the per-node pages do."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, EdgeInfluenceRow
from app.core.errors import Conflict
from app.core.pagination import decode_token, encode_token, float_part, int64_part
from app.influence.edge_schemas import EdgeOrder

_KIND = "edges:"


def require_edges(audit: Audit) -> None:
    """Raise unless ``audit`` succeeded with its edges attributed.

    Raises:
        Conflict: ``audit-not-succeeded`` (queued, running, failed or cancelled), or ``edges-not-computed`` (it ran
            without ``edges``, on a model the estimator does not cover, whose reason the detail gives, or before
            edges were attributed).
    """
    if audit.state != "succeeded" or audit.results is None:
        raise Conflict(
            f"Audit {audit.id} is {audit.state}; its edge estimates exist only once it has succeeded.",
            slug="audit-not-succeeded",
            title="Audit has not succeeded",
        )
    section: Any = audit.results.get("edges")
    if not isinstance(section, dict) or not section.get("computed"):
        why = section.get("reason") if isinstance(section, dict) else None
        raise Conflict(
            f"Audit {audit.id} has no edge estimates: "
            + (str(why) if why else "it ran without edges (set edges: true), or before edges were attributed")
            + ".",
            slug="edges-not-computed",
            title="No edge estimates",
        )


def edge_page(
    session: Session, audit: Audit, *, order: EdgeOrder, limit: int, page_token: str | None
) -> tuple[list[EdgeInfluenceRow], str | None]:
    """One page of ``audit``'s edge rows in ``order``.

    Raises:
        Conflict: the audit has no edge estimates (:func:`require_edges`).
    """
    require_edges(audit)
    row = EdgeInfluenceRow
    by_edge = order is EdgeOrder.edge
    stmt = select(row).where(row.audit_id == audit.id)
    if page_token is not None:
        if by_edge:
            (position,) = decode_token(page_token, _KIND + order.value, 1)
            stmt = stmt.where(row.position > int64_part(position))
        else:
            first, position = decode_token(page_token, _KIND + order.value, 2)
            key, after = tuple_(row.delta, row.position), tuple_(float_part(first), int64_part(position))
            stmt = stmt.where(key < after if order is EdgeOrder.helpful else key > after)
    if by_edge:
        stmt = stmt.order_by(row.position.asc())
    elif order is EdgeOrder.helpful:
        stmt = stmt.order_by(row.delta.desc(), row.position.desc())
    else:
        stmt = stmt.order_by(row.delta.asc(), row.position.asc())
    rows = list(session.scalars(stmt.limit(limit + 1)))
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], encode_token(_KIND + order.value, [last.position] if by_edge else [last.delta, last.position])
