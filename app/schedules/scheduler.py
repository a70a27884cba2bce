"""The scheduler: turns due schedule slots into queued audits, as a thread in every worker (the default,
``BIND_SCHEDULER_INTERVAL`` > 0) or as a process of its own (``bind-audit scheduler``, i.e.
``python -m worker.scheduler``), or both at once: every scheduler runs the same tick, and the tick is safe
to run concurrently from any number of threads and processes.

Each tick, in one transaction: take the active schedules whose ``next_run_at`` has come
(``SELECT ... FOR UPDATE SKIP LOCKED``, so two schedulers never take the same schedule at once), insert one
audit per schedule for the slot ``next_run_at`` (``audits (schedule_id, slot_time)`` is unique, so a slot
that somehow ran already is skipped) and move ``next_run_at`` to the next slot after now. The tasks are sent
after the commit; a send lost in a crash is re-sent by the sweeper (the audit stays ``queued``).

A schedule whose cron expression has no next time (``0 3 31 2 *``, refused at creation since 2026-12-01) is
paused with an error logged, never crashing the tick for the others.

State lives in Postgres only, so a scheduler that restarts carries on from ``next_run_at``; slots missed
while none ran are coalesced into one run. Each run audits the latest version of the schedule's graph; if
the graph no longer exists, the slot's audit is recorded as failed with a 422 problem. A schedule of a supplied model
(``model_id``) audits it on that version, its inputs carried over by the worker
(:func:`app.graphs.model_inputs.carry_model_inputs`); a model deleted before the slot fails it with ``model-not-found``.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.audits.tasks import send_run_audit
from app.core.db.session import now
from app.core.db.tables import Audit, Schedule, SuppliedModel
from app.core.errors import ProblemError
from app.core.publisher import Publisher
from app.core.settings import get_settings
from app.graphs.versions import latest_version
from app.schedules.slots import CronNeverFires, next_slot
from app.tenants.limits import queued_count
from app.webhooks import events
from app.webhooks.tasks import resend_stale, send_deliveries

log = logging.getLogger("app.schedules.scheduler")

BATCH = 50


def tick(
    sessions: sessionmaker[Session],
    at: datetime | None = None,
    *,
    max_queued: int | None = None,
    publisher: Publisher | None = None,
) -> list[uuid.UUID]:
    """Start the due slots of every schedule; commit; return the ids of the queued audits to send.

    A slot whose graph is gone is recorded as a failed audit at once; its ``audit.failed`` webhooks are sent
    through ``publisher`` (without one they wait for :func:`app.webhooks.tasks.resend_stale`).
    A slot of a tenant that already has ``max_queued`` queued audits (default ``BIND_TENANT_MAX_QUEUED``;
    0: no limit) is skipped, like a missed slot: the schedule moves on to its next slot.
    """
    t = at or now()
    limit = get_settings().tenant_max_queued if max_queued is None else max_queued
    waiting: dict[uuid.UUID, int] = {}
    queued: list[uuid.UUID] = []
    deliveries: list[uuid.UUID] = []
    with sessions.begin() as session:
        due = session.scalars(
            select(Schedule)
            .where(Schedule.state == "active", Schedule.next_run_at <= t)
            .order_by(Schedule.next_run_at)
            .limit(BATCH)
            .with_for_update(skip_locked=True)
        ).all()
        for schedule in due:
            slot = schedule.next_run_at
            try:
                schedule.next_run_at = next_slot(
                    slot, interval_seconds=schedule.interval_seconds, cron=schedule.cron, now=t
                )
            except CronNeverFires as exc:  # stored before creation refused it: pause it, never crash the tick
                log.error("schedule %s: paused, its slot %s skipped: %s", schedule.id, slot.isoformat(), exc.detail)
                schedule.state = "paused"
                continue
            if limit and _queue_full(session, schedule.tenant_id, limit, waiting):
                log.warning(
                    "schedule %s: slot %s skipped, its tenant has %d queued audits (BIND_TENANT_MAX_QUEUED)",
                    schedule.id,
                    slot.isoformat(),
                    waiting[schedule.tenant_id],
                )
                continue
            audit = _slot_audit(session, schedule, slot, t)
            try:
                with session.begin_nested():
                    session.add(audit)
                    session.flush()
            except IntegrityError:
                log.warning("schedule %s: slot %s already ran; skipped", schedule.id, slot.isoformat())
                continue
            log.info("schedule %s: slot %s -> audit %s (%s)", schedule.id, slot.isoformat(), audit.id, audit.state)
            if audit.state == "queued":
                queued.append(audit.id)
                waiting[schedule.tenant_id] = waiting.get(schedule.tenant_id, 0) + 1
            else:
                deliveries.extend(events.audit_finished(session, audit.id))
    if publisher is not None:
        send_deliveries(publisher, deliveries)
    return queued


def _queue_full(session: Session, tenant_id: uuid.UUID, limit: int, waiting: dict[uuid.UUID, int]) -> bool:
    """Whether the tenant has ``limit`` queued audits (counted once a tick, then kept up to date in ``waiting``)."""
    if tenant_id not in waiting:
        waiting[tenant_id] = queued_count(session, tenant_id)
    return waiting[tenant_id] >= limit


def _slot_audit(session: Session, schedule: Schedule, slot: datetime, t: datetime) -> Audit:
    digest = hashlib.sha256(f"schedule:{schedule.id}:{slot.isoformat()}".encode()).hexdigest()
    audit = Audit(
        id=uuid.uuid4(),  # now, not at flush: a slot whose graph is gone names its audit in the problem below
        tenant_id=schedule.tenant_id,
        dataset=schedule.dataset,
        config=schedule.config,
        request_hash=digest,
        state="queued",
        progress=0.0,
        attempts=0,
        schedule_id=schedule.id,
        slot_time=slot,
        created_at=t,
        updated_at=t,
    )
    if schedule.model_id is not None and not _model_exists(session, schedule):
        detail = f"The model {schedule.model_id} the schedule audits was deleted before the slot came."
        _fail(audit, ProblemError(detail, status=422, title="Model not found", slug="model-not-found"), t)
        return audit
    audit.model_id = schedule.model_id
    if schedule.graph_name is not None:
        graph = latest_version(session, schedule.tenant_id, schedule.graph_name, lock=True)
        if graph is None:
            detail = f"No graph named {schedule.graph_name!r} when the slot came."
            _fail(audit, ProblemError(detail, status=422, title="Graph not found", slug="graph-not-found"), t)
        else:
            audit.graph_id, audit.graph_version = graph.id, graph.version
    return audit


def _model_exists(session: Session, schedule: Schedule) -> bool:
    """Whether the schedule's supplied model is still there (a share lock against its deletion until the commit)."""
    stmt = select(SuppliedModel.id).where(
        SuppliedModel.id == schedule.model_id, SuppliedModel.tenant_id == schedule.tenant_id
    )
    return session.scalar(stmt.with_for_update(read=True)) is not None


def _fail(audit: Audit, problem: ProblemError, t: datetime) -> None:
    audit.state, audit.finished_at = "failed", t
    audit.error = problem.to_problem(instance=f"/v1/audits/{audit.id}")


def tick_and_send(publisher: Publisher, sessions: sessionmaker[Session]) -> list[uuid.UUID]:
    """One tick, then the tasks of its audits; and webhook deliveries whose task was lost are re-sent."""
    queued = tick(sessions, publisher=publisher)
    resend_stale(publisher, sessions)
    for audit_id in queued:
        send_run_audit(publisher, audit_id)
    return queued
