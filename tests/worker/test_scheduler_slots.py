"""The scheduler's tick on SQLite: a slot whose graph is gone is a failed audit whose problem names it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, Schedule
from app.schedules.scheduler import tick


def test_failed_slot_problem_names_its_audit(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> None:
    at = datetime(2026, 1, 1, 3, tzinfo=UTC)
    with sessions.begin() as session:
        session.add(
            Schedule(
                tenant_id=tenant_id, graph_name="no-such-graph", settings={}, config={"lam": 0.5},
                interval_seconds=3600, next_run_at=at - timedelta(seconds=1),
            )
        )  # fmt: skip
    assert tick(sessions, at) == []  # nothing queued: the slot failed at once
    with sessions() as session:
        audit = session.scalars(select(Audit)).one()
    assert audit.state == "failed" and audit.error is not None
    assert audit.error["type"].endswith("/graph-not-found")
    assert audit.error["instance"] == f"/v1/audits/{audit.id}"  # was "/v1/audits/None"


def test_a_cron_that_never_fires_is_paused_not_a_crashed_tick(
    sessions: sessionmaker[Session], tenant_id: uuid.UUID
) -> None:
    """A stored schedule on Feb 31 (refused at creation now) pauses; the tick carries on with the others."""
    at = datetime(2026, 1, 1, 3, tzinfo=UTC)
    with sessions.begin() as session:
        never = Schedule(tenant_id=tenant_id, dataset="toy", settings={}, config={"lam": 0.5}, cron="0 3 31 2 *",
                         next_run_at=at - timedelta(seconds=2))  # fmt: skip
        hourly = Schedule(tenant_id=tenant_id, dataset="toy", settings={}, config={"lam": 0.5},
                          interval_seconds=3600, next_run_at=at - timedelta(seconds=1))  # fmt: skip
        session.add_all([never, hourly])
        session.flush()
        never_id, hourly_id = never.id, hourly.id
    queued = tick(sessions, at)  # raised CroniterBadDateError, rolling the whole tick back
    with sessions() as session:
        assert session.get_one(Schedule, never_id).state == "paused"
        assert [a.schedule_id for a in session.scalars(select(Audit))] == [hourly_id]
    assert len(queued) == 1
