"""Reading the trail: one tenant's entries, filtered by actor, action, target and time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app.core.db.tables import TrailEvent
from app.core.pagination import newest_first

EXPORT_BATCH = 1000


@dataclass(frozen=True)
class EventFilter:
    """Entries match every filter given (``None``: any); ``since`` is inclusive, ``until`` exclusive."""

    actor: str | None = None
    actor_key_id: uuid.UUID | None = None
    action: str | None = None
    target: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def select(self, tenant_id: uuid.UUID) -> Select[TrailEvent]:
        stmt = select(TrailEvent).where(TrailEvent.tenant_id == tenant_id)
        if self.actor is not None:
            stmt = stmt.where(TrailEvent.actor == self.actor)
        if self.actor_key_id is not None:
            stmt = stmt.where(TrailEvent.actor_key_id == self.actor_key_id)
        if self.action is not None:
            stmt = stmt.where(TrailEvent.action == self.action)
        if self.target is not None:
            stmt = stmt.where(TrailEvent.target == self.target)
        if self.since is not None:
            stmt = stmt.where(TrailEvent.created_at >= self.since)
        if self.until is not None:
            stmt = stmt.where(TrailEvent.created_at < self.until)
        return stmt


def list_events(
    session: Session, tenant_id: uuid.UUID, where: EventFilter, *, limit: int, page_token: str | None
) -> tuple[list[TrailEvent], str | None]:
    """One page of the tenant's matching entries, newest first."""
    return newest_first(session, where.select(tenant_id), TrailEvent, kind="events", limit=limit, token=page_token)


def iter_events(session: Session, tenant_id: uuid.UUID, where: EventFilter) -> Iterator[TrailEvent]:
    """Every matching entry, oldest first, fetched a batch at a time (the JSON-lines export)."""
    stmt = where.select(tenant_id).order_by(TrailEvent.created_at, TrailEvent.id)
    yield from session.scalars(stmt.execution_options(yield_per=EXPORT_BATCH))
