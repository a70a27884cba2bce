"""Pages of per-training-node influence, by keyset on the indexes ``(audit_id, delta, position)`` and
``(audit_id, node_index)``: each page costs O(limit) whatever its depth, and stays stable."""

from __future__ import annotations

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, InfluenceRow
from app.core.errors import Conflict
from app.core.pagination import decode_token, encode_token, float_part, int64_part
from app.influence.schemas import InfluenceOrder

_KIND = "influence:"


def influence_page(
    session: Session, audit: Audit, *, order: InfluenceOrder, limit: int, page_token: str | None
) -> tuple[list[InfluenceRow], str | None]:
    """One page of ``audit``'s influence rows in ``order``.

    Raises:
        Conflict: the audit has no influence rows (yet, or it ran without the influence stage).
    """
    row = InfluenceRow
    key = (row.node_index, row.position) if order is InfluenceOrder.node else (row.delta, row.position)
    stmt = select(row).where(row.audit_id == audit.id)
    if page_token is not None:
        first, position = decode_token(page_token, _KIND + order.value, 2)
        after = (int64_part(first) if order is InfluenceOrder.node else float_part(first), int64_part(position))
        stmt = stmt.where(
            tuple_(*key) < tuple_(*after) if order is InfluenceOrder.helpful else tuple_(*key) > tuple_(*after)
        )
    if order is InfluenceOrder.helpful:
        stmt = stmt.order_by(key[0].desc(), key[1].desc())
    else:
        stmt = stmt.order_by(key[0].asc(), key[1].asc())
    rows = list(session.scalars(stmt.limit(limit + 1)))
    if not rows and page_token is None:
        raise Conflict(
            f"Audit {audit.id} has no influence estimates (state: {audit.state}, stage: {audit.stage}).",
            slug="influence-not-ready",
            title="No influence estimates yet",
        )
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    last_key = [last.node_index, last.position] if order is InfluenceOrder.node else [last.delta, last.position]
    return rows[:limit], encode_token(_KIND + order.value, last_key)
