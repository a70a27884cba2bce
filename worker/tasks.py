"""The worker's tasks, registered under the names their features define (``app/<feature>/tasks.py``). Each
takes ids only, opens its own sessions, and passes this worker's publisher to what sends follow-up tasks."""

from __future__ import annotations

import time

from app.audits import tasks as audits
from app.core.publisher import CeleryPublisher
from app.core.settings import get_settings
from app.influence import tasks as influence
from app.webhooks import tasks as webhooks
from app.what_ifs import run as what_if_run
from app.what_ifs import tasks as what_ifs
from worker import context, metrics
from worker.celery_app import app

publisher = CeleryPublisher(app)


@app.task(name=audits.RUN_AUDIT, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_audit_task(audit_id: str) -> str:
    """Run the audit ``audit_id`` once if it is queued (:func:`app.audits.tasks.run_audit`); the outcome and
    timings go to the worker's metrics when they are served."""
    start = time.perf_counter()
    sessions = context.sessions()
    outcome = audits.run_audit(
        audit_id, publisher=publisher, sessions=sessions, settings=get_settings(), device=context.device()
    )
    metrics.observe(outcome.audit_id, outcome.status, time.perf_counter() - start, sessions)
    return outcome.status


@app.task(name=influence.INFLUENCE_CHUNK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def influence_chunk_task(plan_id: str, index: int) -> str:
    """Chunk ``index`` of a distributed influence estimate (:func:`app.influence.tasks.run_chunk`)."""
    return influence.run_chunk(
        plan_id, index, sessions=context.sessions(), settings=get_settings(), device=context.device()
    )


@app.task(name=webhooks.DELIVER_WEBHOOK, acks_late=True, ignore_result=True)
def deliver_webhook_task(delivery_id: str) -> None:
    """One attempt at a webhook delivery (:func:`app.webhooks.tasks.deliver_webhook`)."""
    webhooks.deliver_webhook(delivery_id, publisher=publisher, sessions=context.sessions(), settings=get_settings())


@app.task(name=what_ifs.VERIFY_WHAT_IF, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def verify_what_if_task(job_id: str) -> str:
    """Verify the what-if ``job_id`` once if it is queued (:func:`app.what_ifs.run.execute`)."""
    return what_if_run.execute(job_id, sessions=context.sessions(), settings=get_settings(), device=context.device())
