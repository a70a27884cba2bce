"""The scheduler: turns due schedule slots into queued audits, as a thread in every worker (the default,
``BIND_SCHEDULER_INTERVAL`` > 0) or as a process of its own (``bind-audit scheduler``, i.e.
``python -m worker.scheduler``), or both at once: every scheduler runs the same tick, and the tick is safe
to run concurrently from any number of threads and processes.

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

import argparse
import hashlib
import logging
import signal
import sys
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime
from types import FrameType

from celery import Celery
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Audit, Schedule
from app.errors import ProblemError
from app.logs import configure_logging
from app.queue import RUN_AUDIT_TASK
from app.services.slots import next_slot
from app.services.tenant_limits import queued_count
from app.services.versions import latest_version
from app.settings import Settings, get_settings
from worker import context, events
from worker.jobs import now

log = logging.getLogger("worker.scheduler")  # the same name when run as `python -m worker.scheduler`

BATCH = 50


def tick(
    sessions: sessionmaker[Session], at: datetime | None = None, *, max_queued: int | None = None
) -> list[uuid.UUID]:
    """Start the due slots of every schedule; commit; return the ids of the queued audits to send.

    A slot whose graph is gone is recorded as a failed audit at once (its ``audit.failed`` webhooks are sent).
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
            schedule.next_run_at = next_slot(slot, interval_seconds=schedule.interval_seconds, cron=schedule.cron,
                                             now=t)  # fmt: skip
            if limit and _queue_full(session, schedule.tenant_id, limit, waiting):
                log.warning("schedule %s: slot %s skipped, its tenant has %d queued audits (BIND_TENANT_MAX_QUEUED)",
                            schedule.id, slot.isoformat(), waiting[schedule.tenant_id])  # fmt: skip
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
    events.send_deliveries(deliveries)
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


def run_until(stopped: threading.Event, celery: Celery, sessions: sessionmaker[Session], interval: float) -> None:
    """Tick every ``interval`` seconds until ``stopped`` is set; a failed tick is logged and tried again."""
    while not stopped.is_set():
        try:
            tick_and_send(celery, sessions)
        except Exception:  # the database or broker is down: try again next tick
            log.warning("scheduler tick failed", exc_info=True)
        if stopped.wait(interval):
            return


class _Scheduler(threading.Thread):
    def __init__(self, celery: Celery, settings: Settings) -> None:
        super().__init__(name="bind-scheduler", daemon=True)
        self.celery, self.settings = celery, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        run_until(self.stopped, self.celery, context.sessions(), self.settings.scheduler_interval)


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


def main(argv: Sequence[str] | None = None) -> int:
    """``bind-audit scheduler``: the scheduler as a process of its own, until SIGTERM or Ctrl-C.

    It needs the database and the broker (it sends the audits' tasks), not a GPU nor the datasets. Workers
    may keep their scheduler threads or turn them off (``BIND_SCHEDULER_INTERVAL=0`` in their environment).
    """
    parser = argparse.ArgumentParser(prog="bind-audit scheduler", description="Run the scheduler as a process.")
    parser.add_argument("--interval", type=float, default=None,
                        help="seconds between two ticks (default: BIND_SCHEDULER_INTERVAL)")  # fmt: skip
    args = parser.parse_args(argv)
    settings = get_settings()
    interval = settings.scheduler_interval if args.interval is None else args.interval
    if interval <= 0:
        parser.error("the interval must be above 0 (BIND_SCHEDULER_INTERVAL or --interval)")
    configure_logging(settings.log_format)
    from worker.celery_app import app as celery  # the workers' app: the same broker and task routing

    stopped = threading.Event()

    def stop(signum: int, _: FrameType | None) -> None:
        log.info("scheduler: %s, stopping after this tick", signal.Signals(signum).name)
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("scheduler started: a tick every %g s", interval)
    run_until(stopped, celery, context.sessions(), interval)
    log.info("scheduler stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
