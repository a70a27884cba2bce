"""The scheduler: a thread in every worker that turns due schedule slots into queued audits.

Each tick, in one transaction: take the active schedules whose ``next_run_at`` has come
(``SELECT ... FOR UPDATE SKIP LOCKED``, so two schedulers never take the same schedule at once), insert one
audit per schedule for the slot ``next_run_at`` (``audits (schedule_id, slot_time)`` is unique, so a slot
that somehow ran already is skipped) and move ``next_run_at`` to the next slot after now. The tasks are sent
after the commit; a send lost in a crash is re-sent by the sweeper (the audit stays ``queued``).

State lives in Postgres only, so a scheduler that restarts carries on from ``next_run_at``; slots missed
while none ran are coalesced into one run. Each run audits the latest version of the schedule's graph; if
the graph no longer exists, the slot's audit is recorded as failed with a 422 problem.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from datetime import datetime

from celery import Celery
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Audit, Schedule
from app.errors import ProblemError
from app.queue import RUN_AUDIT_TASK
from app.services.slots import next_slot
from app.services.versions import latest_version
from app.settings import Settings
from worker import context, events
from worker.jobs import now

log = logging.getLogger(__name__)

BATCH = 50


def tick(sessions: sessionmaker[Session], at: datetime | None = None) -> list[uuid.UUID]:
    """Start the due slots of every schedule; commit; return the ids of the queued audits to send.

    A slot whose graph is gone is recorded as a failed audit at once (its ``audit.failed`` webhooks are sent).
    """
    t = at or now()
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
            schedule.next_run_at = next_slot(slot, interval_seconds=schedule.interval_seconds, cron=schedule.cron,
                                             now=t)  # fmt: skip
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
            else:
                deliveries.extend(events.audit_finished(session, audit.id))
    events.send_deliveries(deliveries)
    return queued


def _slot_audit(session: Session, schedule: Schedule, slot: datetime, t: datetime) -> Audit:
    digest = hashlib.sha256(f"schedule:{schedule.id}:{slot.isoformat()}".encode()).hexdigest()
    audit = Audit(
        tenant_id=schedule.tenant_id, dataset=schedule.dataset, config=schedule.config, request_hash=digest,
        state="queued", progress=0.0, attempts=0, schedule_id=schedule.id, slot_time=slot, created_at=t, updated_at=t,
    )  # fmt: skip
    if schedule.graph_name is not None:
        graph = latest_version(session, schedule.tenant_id, schedule.graph_name, lock=True)
        if graph is None:
            detail = f"No graph named {schedule.graph_name!r} when the slot came."
            audit.state, audit.finished_at = "failed", t
            audit.error = ProblemError(detail, status=422, title="Graph not found", slug="graph-not-found").to_problem(
                instance=f"/v1/audits/{audit.id}"
            )
        else:
            audit.graph_id, audit.graph_version = graph.id, graph.version
    return audit


def tick_and_send(celery: Celery, sessions: sessionmaker[Session]) -> list[uuid.UUID]:
    """One tick, then the tasks of its audits; and webhook deliveries whose task was lost are re-sent."""
    queued = tick(sessions)
    from worker.webhooks import resend_stale

    resend_stale(sessions)
    for audit_id in queued:
        celery.send_task(RUN_AUDIT_TASK, args=[str(audit_id)], task_id=str(audit_id))
    return queued


class _Scheduler(threading.Thread):
    def __init__(self, celery: Celery, settings: Settings) -> None:
        super().__init__(name="bind-scheduler", daemon=True)
        self.celery, self.settings = celery, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                tick_and_send(self.celery, context.sessions())
            except Exception:  # the database or broker is down: try again next tick
                log.warning("scheduler tick failed", exc_info=True)
            if self.stopped.wait(self.settings.scheduler_interval):
                return


_scheduler: _Scheduler | None = None


def start_scheduler(celery: Celery, settings: Settings) -> None:
    """Start this process's scheduler thread (once), unless ``BIND_SCHEDULER_INTERVAL`` is 0."""
    global _scheduler
    if settings.scheduler_interval > 0 and (_scheduler is None or not _scheduler.is_alive()):
        _scheduler = _Scheduler(celery, settings)
        _scheduler.start()


def stop_scheduler() -> None:
    if _scheduler is not None:
        _scheduler.stopped.set()
