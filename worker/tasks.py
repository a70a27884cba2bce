"""Celery tasks. They take ids only and open their own sessions; the logic lives in `worker.runner`."""

from __future__ import annotations

import time

from app.logs import audit_id as audit_id_var
from app.queue import RUN_AUDIT_TASK
from app.settings import get_settings
from worker import context, metrics
from worker.celery_app import app
from worker.runner import execute


@app.task(name=RUN_AUDIT_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)  # type: ignore[untyped-decorator]  # Celery ships no type hints
def run_audit_task(audit_id: str) -> str:
    """Run the audit ``audit_id`` once if it is queued (a no-op for finished or cancelled audits).

    Every log line written while it runs carries ``audit_id`` (a context variable read by the JSON log
    formatter); the outcome and timings go to the worker's metrics when they are served.
    """
    token = audit_id_var.set(audit_id[:64])
    start = time.perf_counter()
    try:
        sessions = context.sessions()
        outcome = execute(audit_id, sessions=sessions, settings=get_settings(), device=context.device())
        metrics.observe(audit_id, outcome.status, time.perf_counter() - start, sessions)
        return outcome.status
    finally:
        audit_id_var.reset(token)
