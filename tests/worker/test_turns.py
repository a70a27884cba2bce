"""Whose turn it is (`app.audits.turns`, `app.audits.repository.claim`): claiming rotates between tenants, respects the
per-tenant running limit, and, on Postgres, two workers claiming at once see each other's claims."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from pgtemp import migrated_database
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits import repository as jobs
from app.audits.turns import next_turn, ranked_tenants
from app.core.db.session import make_engine, session_factory
from app.core.db.tables import Audit, Tenant

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def new_tenant(sessions: sessionmaker[Session]) -> uuid.UUID:
    with sessions.begin() as session:
        tenant = Tenant(name=f"t-{uuid.uuid4().hex[:8]}")
        session.add(tenant)
        session.flush()
        return tenant.id


def add_audit(sessions: sessionmaker[Session], tenant: uuid.UUID, minute: int, **values: object) -> uuid.UUID:
    """A queued audit of ``tenant`` created ``minute`` minutes after ``T0`` (unless ``values`` say otherwise)."""
    with sessions.begin() as session:
        at = T0 + timedelta(minutes=minute)
        audit = Audit(tenant_id=tenant, dataset="toy", config={}, request_hash="h" * 64, state="queued",
                      created_at=at, updated_at=at)  # fmt: skip
        for name, value in values.items():
            setattr(audit, name, value)
        session.add(audit)
        session.flush()
        return audit.id


def claim(sessions: sessionmaker[Session], message: uuid.UUID, *, max_running: int = 0) -> uuid.UUID | None:
    """What a worker given the message for ``message`` runs (committed at once, as the runner does)."""
    with sessions.begin() as session:
        taken = jobs.claim(session, message, device="cpu", heartbeat_timeout=30, max_attempts=3,
                           max_running=max_running)  # fmt: skip
    return None if taken is None else taken.audit_id


def finish(sessions: sessionmaker[Session], audit_id: uuid.UUID) -> None:
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(state="succeeded"))


def test_one_tenants_backlog_does_not_hold_back_another_tenants_audit(sessions: sessionmaker[Session]) -> None:
    """One worker, tenant A with 20 audits, tenant B with one that arrives while A's first runs: B's runs next.

    The messages arrive in the order the audits were created (first come, first served would run all of A's
    first); the worker takes whatever audit has the turn.
    """
    a, b = new_tenant(sessions), new_tenant(sessions)
    backlog = [add_audit(sessions, a, i) for i in range(20)]
    messages = list(backlog)
    ran = [claim(sessions, messages.pop(0))]
    assert ran == [backlog[0]]
    single = add_audit(sessions, b, 30)
    messages.append(single)
    while messages:
        running = ran[-1]
        assert running is not None
        finish(sessions, running)
        ran.append(claim(sessions, messages.pop(0)))
    assert ran[1] == single  # the very next audit after the one that was running
    assert ran[2:] == backlog[1:]  # then A's, first come first served
    assert claim(sessions, single) is None  # a spare message is a no-op


def test_round_robin_between_busy_tenants(sessions: sessionmaker[Session]) -> None:
    """Equal running counts: the tenant served longest ago goes first, whatever the age of the audits."""
    a, b, c = (new_tenant(sessions) for _ in range(3))
    a_jobs = [add_audit(sessions, a, i) for i in range(3)]
    b_jobs = [add_audit(sessions, b, 10 + i) for i in range(3)]
    c_jobs = [add_audit(sessions, c, 20 + i) for i in range(2)]
    order = []
    for _ in range(8):
        taken = claim(sessions, a_jobs[0])
        assert taken is not None
        order.append(taken)
        finish(sessions, taken)
    assert order == [a_jobs[0], b_jobs[0], c_jobs[0], a_jobs[1], b_jobs[1], c_jobs[1], a_jobs[2], b_jobs[2]]


def test_fewest_running_first_and_the_running_limit(sessions: sessionmaker[Session]) -> None:
    """Two workers free at once take one audit of each tenant; with ``max_running=1`` a tenant never runs two."""
    a, b = new_tenant(sessions), new_tenant(sessions)
    a_jobs = [add_audit(sessions, a, i) for i in range(3)]
    b_job = add_audit(sessions, b, 10)
    assert claim(sessions, a_jobs[0], max_running=1) == a_jobs[0]
    assert claim(sessions, a_jobs[1], max_running=1) == b_job  # A has one running: B's turn
    assert claim(sessions, a_jobs[2], max_running=1) is None  # A at its limit, B has nothing left
    with sessions() as session:
        assert ranked_tenants(session, max_running=1) == []
        assert ranked_tenants(session) == [a]
        assert next_turn(session, max_running=1, lock=False) is None
    finish(sessions, a_jobs[0])
    assert claim(sessions, b_job, max_running=1) == a_jobs[1]
    assert claim(sessions, b_job, max_running=0) == a_jobs[2]  # without a limit A may run two


def test_a_dead_workers_audit_is_taken_over_only_when_nothing_else_may_start(
    sessions: sessionmaker[Session],
) -> None:
    a = new_tenant(sessions)
    stale = T0 - timedelta(hours=1)
    dead = add_audit(sessions, a, 0, state="running", attempts=1, heartbeat_at=stale, started_at=stale)
    waiting = add_audit(sessions, a, 1)
    assert claim(sessions, dead) == waiting  # a queued audit has the turn
    assert claim(sessions, dead) == dead  # then the message's own audit, whose worker died
    with sessions() as session:
        assert session.scalar(select(Audit.attempts).where(Audit.id == dead)) == 2


@pytest.fixture(scope="module")
def pg() -> Iterator[sessionmaker[Session]]:
    """Sessions on a new, migrated Postgres database, dropped at the end of the module."""
    with migrated_database("bind_turns") as url:
        engine = make_engine(url)
        try:
            yield session_factory(engine)
        finally:
            engine.dispose()


def test_concurrent_claims_on_postgres_see_each_other(pg: sessionmaker[Session]) -> None:
    """A second worker claiming while the first's claim is not committed waits for it (advisory lock), then
    counts it as running: it takes B's audit, not A's next one (which ``SKIP LOCKED`` alone would give)."""
    a, b = new_tenant(pg), new_tenant(pg)
    a_jobs = [add_audit(pg, a, i) for i in range(2)]
    b_job = add_audit(pg, b, 10)
    second: list[uuid.UUID | None] = []
    with pg.begin() as session:
        first = jobs.claim(session, a_jobs[0], device="cpu", heartbeat_timeout=30, max_attempts=3)
        assert first is not None and first.audit_id == a_jobs[0]
        other = threading.Thread(target=lambda: second.append(claim(pg, a_jobs[1])))
        other.start()
        other.join(timeout=1.0)
        assert other.is_alive()  # waiting for this claim to commit
    other.join(timeout=10)
    assert second == [b_job]
