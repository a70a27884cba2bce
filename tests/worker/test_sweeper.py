"""`app.audits.recovery`: dead workers' audits are re-queued, lost messages re-sent, the retention period enforced,
nothing else touched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits.recovery import sweep, sweep_and_send
from app.core.db.session import now
from app.core.db.tables import Audit, TrailEvent


class RecordingPublisher:
    """A :class:`~app.core.publisher.Publisher` that records what it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[str | int], str | None]] = []

    def send(
        self, name: str, args: Sequence[str | int], *, task_id: str | None = None, countdown: float | None = None
    ) -> None:
        self.sent.append((name, list(args), task_id))


def state(sessions: sessionmaker[Session], audit_id: Any) -> str:
    with sessions() as session:
        audit = session.get(Audit, audit_id)
        assert audit is not None
        return audit.state


def test_sweep_requeues_dead_and_resends_lost(sessions, settings, new_audit) -> None:
    t = now()
    dead = new_audit(state="running", attempts=1, heartbeat_at=t - timedelta(seconds=120))
    alive = new_audit(state="running", attempts=1, heartbeat_at=t)
    lost = new_audit(updated_at=t - timedelta(seconds=600))
    fresh = new_audit()
    done = new_audit(state="succeeded", heartbeat_at=t - timedelta(seconds=600))

    found = sweep(sessions, heartbeat_timeout=60, queued_timeout=300)
    assert found.requeued == [dead]
    assert found.resent == [lost]
    assert [state(sessions, a) for a in (dead, alive, lost, fresh, done)] == [
        "queued", "running", "queued", "queued", "succeeded"]  # fmt: skip

    # The re-queued audit was touched: the next sweep leaves it (and the re-sent one) alone.
    again = sweep(sessions, heartbeat_timeout=60, queued_timeout=300)
    assert (again.requeued, again.resent) == ([], [])


def test_a_dead_workers_last_attempt_fails_the_audit(sessions, settings, new_audit) -> None:
    stale = now() - timedelta(seconds=120)
    poison = new_audit(state="running", attempts=3, heartbeat_at=stale)
    retry = new_audit(state="running", attempts=2, heartbeat_at=stale)
    found = sweep(sessions, heartbeat_timeout=60, queued_timeout=300, max_attempts=3)
    assert (found.abandoned, found.requeued) == ([poison], [retry])
    with sessions() as session:
        audit = session.get(Audit, poison)
        assert audit is not None and audit.state == "failed" and audit.finished_at is not None
        assert audit.error is not None and audit.error["type"].endswith("/audit-abandoned")
        assert audit.error["status"] == 500


def test_sweep_and_send_sends_after_commit(sessions, settings, new_audit) -> None:
    dead = new_audit(state="running", attempts=1, heartbeat_at=now() - timedelta(seconds=120))
    publisher = RecordingPublisher()
    sweep_and_send(publisher, settings.model_copy(update={"heartbeat_timeout": 60}), sessions)
    assert publisher.sent == [("bind.run_audit", [str(dead)], str(dead))]


def test_the_sweep_enforces_the_retention_period(sessions, settings, new_audit) -> None:
    """``BIND_RETENTION_DAYS``: finished audits older than the period go, with one ``system`` trail entry each;
    newer ones, unfinished ones, and everything when the setting is 0, stay."""
    long_ago = now() - timedelta(days=10)
    old = new_audit(state="succeeded", finished_at=long_ago)
    recent = new_audit(state="failed", finished_at=now() - timedelta(days=1))
    queued = new_audit(updated_at=now())
    sweep_and_send(RecordingPublisher(), settings, sessions)  # 0 days: keep everything
    sweep_and_send(RecordingPublisher(), settings.model_copy(update={"retention_days": 7}), sessions)
    with sessions() as session:
        left = set(session.scalars(select(Audit.id)))
        trail = session.execute(select(TrailEvent.actor, TrailEvent.action, TrailEvent.target)).all()
    assert old not in left and {recent, queued} <= left
    assert trail == [("system", "audit.expire", f"/audits/{old}")]
