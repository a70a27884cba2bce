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
