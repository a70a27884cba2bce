"""Whose turn it is: the queued audit a free worker takes next, rotating between tenants.

A ``bind.run_audit`` message only wakes a worker; which audit it then runs is decided here, from the
database. The tenants that have queued audits are ranked by

1. how many of their audits run now, fewest first (a tenant at ``BIND_TENANT_MAX_RUNNING`` is left out);
2. when one of their audits last started, longest ago (or never) first: round-robin;
3. their oldest queued audit, oldest first (first come, first served between equals);

and the first tenant's oldest queued audit is taken (``FOR UPDATE SKIP LOCKED``). On Postgres the claims of
all workers are serialized by a transaction-scoped advisory lock, so a claim sees the ones just before it in
the running counts. One tenant's backlog therefore delays another tenant's single audit by at most the rest
of the audits the workers are running when it arrives.
"""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from app.core.db.tables import Audit

CLAIM_LOCK = 0x62696E64
"""The key of the advisory lock that serializes claims (``'bind'`` in ASCII)."""


def serialize_claims(session: Session) -> None:
    """Wait for other workers' claims to commit (Postgres; SQLite serializes writers by itself)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(CLAIM_LOCK)))


def ranked_tenants(session: Session, *, max_running: int = 0) -> list[uuid.UUID]:
    """The tenants with queued audits, the one whose turn it is first (see the module's docstring).

    Args:
        max_running: leave out tenants with this many running audits; 0 for no limit.
    """
    waiting = (
        select(Audit.tenant_id, func.min(Audit.created_at).label("oldest"))
        .where(Audit.state == "queued")
        .group_by(Audit.tenant_id)
        .subquery()
    )
    other = aliased(Audit)
    running = (
        select(func.count())
        .select_from(other)
        .where(other.tenant_id == waiting.c.tenant_id, other.state == "running")
        .correlate(waiting)
        .scalar_subquery()
    )
    last_start = (
        select(func.max(other.started_at)).where(other.tenant_id == waiting.c.tenant_id).correlate(waiting)
    ).scalar_subquery()
    stmt = select(waiting.c.tenant_id).order_by(
        running, last_start.asc().nulls_first(), waiting.c.oldest, waiting.c.tenant_id
    )
    if max_running > 0:
        stmt = stmt.where(running < max_running)
    return list(session.scalars(stmt))


def next_turn(session: Session, *, max_running: int = 0, lock: bool = True) -> uuid.UUID | None:
    """The id of the queued audit whose turn it is, or ``None`` when no tenant's audit may start.

    With ``lock`` (a claim), the row is locked ``FOR UPDATE SKIP LOCKED`` for the caller's transaction;
    without it (a peek), nothing is locked.
    """
    for tenant_id in ranked_tenants(session, max_running=max_running):
        stmt = (
            select(Audit.id)
            .where(Audit.tenant_id == tenant_id, Audit.state == "queued")
            .order_by(Audit.created_at, Audit.id)
            .limit(1)
        )
        found = session.scalar(stmt.with_for_update(skip_locked=True) if lock else stmt)
        if found is not None:
            return found
    return None
