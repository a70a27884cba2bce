"""Fair sharing between tenants: the cap on one tenant's queued audits (the floor on schedule intervals is
:func:`app.schedules.slots.check_interval_floor`).

Workers enforce the other half (``BIND_TENANT_MAX_RUNNING`` and the rotation between tenants) when they
claim an audit (``app/audits/turns.py``).
"""

from __future__ import annotations

import statistics
import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, Tenant
from app.core.errors import TooManyRequests
from app.core.settings import Settings

RETRY_AFTER_DEFAULT = 30
"""Seconds a refused client is told to wait when the tenant has no finished audit to time."""
RETRY_AFTER_MAX = 3600


class TenantQueueFull(TooManyRequests):
    """The tenant already has ``BIND_TENANT_MAX_QUEUED`` queued audits."""

    title, slug = "Too many queued audits", "tenant-queue-full"


def queued_count(session: Session, tenant_id: uuid.UUID) -> int:
    """How many of the tenant's audits wait in ``queued``."""
    stmt = select(func.count()).select_from(Audit).where(Audit.tenant_id == tenant_id, Audit.state == "queued")
    return int(session.scalar(stmt) or 0)


def check_queue_room(session: Session, tenant: Tenant, settings: Settings) -> None:
    """Raise :class:`TenantQueueFull` (429 with ``Retry-After``) when the tenant's queue is at its limit.

    The tenant's row is locked (``FOR NO KEY UPDATE``, which leaves foreign-key checks alone) until the
    request commits, so two concurrent requests cannot both take the last place.
    """
    limit = settings.tenant_max_queued
    if limit == 0:
        return
    session.execute(select(Tenant.id).where(Tenant.id == tenant.id).with_for_update(key_share=True))
    queued = queued_count(session, tenant.id)
    if queued < limit:
        return
    wait = retry_after(session, tenant.id)
    raise TenantQueueFull(
        f"This tenant already has {queued} queued audits, the limit (BIND_TENANT_MAX_QUEUED) is {limit}; "
        f"submit again when some have started (retry after {wait} s).",
        headers={"Retry-After": str(wait)},
    )


def retry_after(session: Session, tenant_id: uuid.UUID, *, recent: int = 20) -> int:
    """Seconds until a place in the tenant's queue is likely free: the median run time of its ``recent``
    latest finished audits (one of its queued audits starts when a running one ends), within 1 s–1 h."""
    rows = session.execute(
        select(Audit.started_at, Audit.finished_at)
        .where(
            Audit.tenant_id == tenant_id,
            Audit.state.in_(("succeeded", "failed")),
            Audit.started_at.is_not(None),
            Audit.finished_at.is_not(None),
        )
        .order_by(Audit.finished_at.desc())
        .limit(recent)
    ).all()
    seconds = [(r.finished_at - r.started_at).total_seconds() for r in rows]
    if not seconds:
        return RETRY_AFTER_DEFAULT
    return int(min(max(statistics.median(seconds), 1.0), RETRY_AFTER_MAX) + 0.999)
