"""The scheduler and the tenant's queue cap: a slot of a tenant with ``BIND_TENANT_MAX_QUEUED`` queued audits is
skipped (the schedule moves on), so a schedule cannot fill the queue either."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, Schedule
from app.schedules.scheduler import tick

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def schedule(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> uuid.UUID:
    """An active dataset schedule every 60 s, due at ``T0``."""
    with sessions.begin() as session:
        row = Schedule(tenant_id=tenant_id, dataset="toy", settings={}, config={"lam": 0.5}, interval_seconds=60,
                       state="active", next_run_at=T0)  # fmt: skip
        session.add(row)
        session.flush()
        return row.id


def queued(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> int:
    with sessions() as session:
        stmt = select(func.count()).select_from(Audit).where(Audit.tenant_id == tenant_id, Audit.state == "queued")
        return int(session.scalar(stmt) or 0)


def test_slots_of_a_full_tenant_are_skipped(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> None:
    first, second = schedule(sessions, tenant_id), schedule(sessions, tenant_id)
    # Two due schedules, room for one more audit: one slot becomes an audit, the other is skipped.
    assert len(tick(sessions, T0, max_queued=1)) == 1
    assert queued(sessions, tenant_id) == 1
    with sessions() as session:
        moved = session.scalars(select(Schedule.next_run_at).where(Schedule.id.in_([first, second]))).all()
    assert sorted(moved) == [T0 + timedelta(seconds=60)] * 2  # both moved on to their next slot
    # Still full at the next slot: nothing; once the audit started, the next slot runs again.
    assert tick(sessions, T0 + timedelta(seconds=60), max_queued=1) == []
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.tenant_id == tenant_id).values(state="running"))
    assert len(tick(sessions, T0 + timedelta(seconds=120), max_queued=1)) == 1
    # 0 turns the cap off.
    assert len(tick(sessions, T0 + timedelta(seconds=180), max_queued=0)) == 2
