"""Celery tasks. They take ids only and open their own sessions; the logic lives in `worker.runner` and
`worker.chunks`."""

from __future__ import annotations

import logging
import time
import uuid

from celery import group
from sqlalchemy.orm import Session, sessionmaker

from app.logs import audit_id as audit_id_var
from app.queue import RUN_AUDIT_TASK
from app.settings import Settings, get_settings
from worker import context, metrics
from worker.celery_app import app
from worker.chunks import empty_cache, execute_chunk
from worker.runner import execute, load_graph
from worker.turns import next_turn

log = logging.getLogger(__name__)

INFLUENCE_CHUNK_TASK = "bind.influence_chunk"
"""One chunk of a distributed influence estimate; its arguments are the plan id (a string) and the index."""


@app.task(name=RUN_AUDIT_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)  # type: ignore[untyped-decorator]  # Celery ships no type hints
def run_audit_task(audit_id: str) -> str:
    """Run the audit ``audit_id`` once if it is queued (a no-op for finished or cancelled audits).

    Every log line written while it runs carries ``audit_id`` (a context variable read by the JSON log
    formatter); the outcome and timings go to the worker's metrics when they are served.
    """
    token = audit_id_var.set(audit_id[:64])
    start = time.perf_counter()
    empty_cache()  # the graph and model kept from another audit's chunks: this audit needs the memory
    try:
        sessions, settings = context.sessions(), get_settings()
        outcome = execute(
            audit_id, sessions=sessions, settings=settings, device=context.device(), send_chunks=send_chunks
        )
        metrics.observe(outcome.audit_id, outcome.status, time.perf_counter() - start, sessions)
        if outcome.status != "skipped" and settings.tenant_max_running > 0:
            wake_next(sessions, settings)
        return outcome.status
    finally:
        audit_id_var.reset(token)


def wake_next(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Send a message for the audit whose turn it is now, if any.

    With ``BIND_TENANT_MAX_RUNNING``, a worker that got a message while every queued audit's tenant was at
    its limit ran nothing and spent the message; the audit that ended just now freed a place, so a message
    is sent for it. A spare message is a no-op (nothing queued); a missing one is re-sent by the sweeper.
    """
    try:
        with sessions() as session:
            turn = next_turn(session, max_running=settings.tenant_max_running, lock=False)
        if turn is not None:
            app.send_task(RUN_AUDIT_TASK, args=[str(turn)])
    except Exception:
        log.warning("could not send the next audit's message; the sweeper re-sends it", exc_info=True)


@app.task(name=INFLUENCE_CHUNK_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)  # type: ignore[untyped-decorator]  # Celery ships no type hints
def influence_chunk_task(plan_id: str, index: int) -> str:
    """Compute chunk ``index`` of a distributed influence estimate, unless it is done, held by a live worker
    or no longer wanted (see `worker.chunks.execute_chunk`)."""
    sessions, settings = context.sessions(), get_settings()
    return execute_chunk(
        plan_id, int(index), sessions=sessions, settings=settings, device=context.device(),
        load_graph=lambda graph_id, dataset: load_graph(sessions, settings, graph_id, dataset),
    )  # fmt: skip


def send_chunks(plan_id: uuid.UUID, indices: list[int]) -> None:
    """Send one chunk task per index, as a Celery group (after the commit that stored the plan)."""
    group(
        influence_chunk_task.signature((str(plan_id), i), task_id=f"{plan_id}:{i}", immutable=True) for i in indices
    ).apply_async()
