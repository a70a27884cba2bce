"""Pages of per-training-node influence, by keyset on the indexes ``(audit_id, delta, position)`` and
``(audit_id, node_index)``: each page costs O(limit) whatever its depth, and stays stable.

In the ``harmful`` and ``helpful`` orders the rows without a value (null ``delta``: the node's deletion has no
minimum near the weights) come last in both, by position. A page's token then carries a null delta: the page after
it reads only such rows. A page that ends on the last row with a value is followed by the first rows without one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, select, tuple_
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
        BadRequest: ``page_token`` is not one this listing issued (``invalid-page-token``).
    """
    after = None if page_token is None else decode_token(page_token, _KIND + order.value, 2)
    if order is InfluenceOrder.node:
        rows = _node_rows(session, audit, after, limit + 1)
    else:
        rows = _delta_rows(session, audit, order, after, limit + 1)
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


def _node_rows(session: Session, audit: Audit, after: list[Any] | None, count: int) -> list[InfluenceRow]:
    """Up to ``count`` rows by ``(node_index, position)``, after the key ``after``."""
    row = InfluenceRow
    stmt = select(row).where(row.audit_id == audit.id)
    if after is not None:
        stmt = stmt.where(tuple_(row.node_index, row.position) > tuple_(int64_part(after[0]), int64_part(after[1])))
    return list(session.scalars(stmt.order_by(row.node_index.asc(), row.position.asc()).limit(count)))


def _delta_rows(
    session: Session, audit: Audit, order: InfluenceOrder, after: list[Any] | None, count: int
) -> list[InfluenceRow]:
    """Up to ``count`` rows in the ``harmful`` or ``helpful`` order after the key ``after`` (``[delta, position]``,
    ``delta`` null for a row without a value): first the rows with a value, by ``(delta, position)`` (descending for
    ``helpful``), then those without one, by position."""
    row = InfluenceRow
    rows: list[InfluenceRow] = []
    position = None if after is None else int64_part(after[1])
    if after is None or after[0] is not None:  # not yet past the rows with a value
        valued = select(row).where(row.audit_id == audit.id, row.delta.is_not(None))
        if after is not None:
            key, start = tuple_(row.delta, row.position), tuple_(float_part(after[0]), position)
            valued = valued.where(key < start if order is InfluenceOrder.helpful else key > start)
        if order is InfluenceOrder.helpful:
            valued = valued.order_by(row.delta.desc(), row.position.desc())
        else:
            valued = valued.order_by(row.delta.asc(), row.position.asc())
        rows = list(session.scalars(valued.limit(count)))
        if len(rows) == count:
            return rows
        position = None  # the rows without a value, from their first
    return rows + list(session.scalars(_undefined(audit, position).limit(count - len(rows))))


def _undefined(audit: Audit, after: int | None) -> Select[InfluenceRow]:
    """The audit's rows without a value (null delta), by position, after ``after``. Ordered by ``(delta,
    position)``, which is position among them, so that the index ``(audit_id, delta, position)`` serves it."""
    row = InfluenceRow
    stmt = select(row).where(row.audit_id == audit.id, row.delta.is_(None))
    if after is not None:
        stmt = stmt.where(row.position > after)
    return stmt.order_by(row.delta.asc(), row.position.asc())
