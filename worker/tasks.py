"""Celery tasks. They take ids only and open their own sessions; the logic lives in `worker.runner`."""

from __future__ import annotations

from app.queue import RUN_AUDIT_TASK
from app.settings import get_settings
from worker import context
from worker.celery_app import app
from worker.runner import execute


@app.task(name=RUN_AUDIT_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)  # type: ignore[untyped-decorator]  # Celery ships no type hints
def run_audit_task(audit_id: str) -> str:
    """Run the audit ``audit_id`` once if it is queued (a no-op for finished or cancelled audits)."""
    outcome = execute(audit_id, sessions=context.sessions(), settings=get_settings(), device=context.device())
    return outcome.status
