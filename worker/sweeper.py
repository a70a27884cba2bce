"""Recovery of stuck audits, run periodically by a thread in every worker.

* ``running`` with a heartbeat older than ``BIND_HEARTBEAT_TIMEOUT``: its worker died (SIGKILL, OOM, lost
  machine). Put back to ``queued`` and send its task again; the next claim makes a new attempt.
* ``queued`` and untouched for ``BIND_QUEUED_TIMEOUT``: its message was lost (the API crashed between commit
  and send, the broker lost it, an embedded broker's worker was killed after receiving it). Send it again.

Each step is one conditional ``UPDATE ... RETURNING``, so several workers sweeping at once re-send an audit
once; and a duplicate message is harmless anyway, because only one claim of a queued audit succeeds.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from celery import Celery
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Audit
from app.queue import RUN_AUDIT_TASK
from app.settings import Settings
from worker import context
from worker.jobs import now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sweep:
    """The audits one sweep re-queued (dead worker) and re-sent (lost message)."""

    requeued: list[uuid.UUID]
    resent: list[uuid.UUID]


def sweep(sessions: sessionmaker[Session], *, heartbeat_timeout: float, queued_timeout: float) -> Sweep:
    """Find stuck audits and mark them for re-sending (touching ``updated_at``); commit; return their ids.

    The caller sends the tasks, after the commit.
    """
    t = now()
    with sessions.begin() as session:
        requeued = session.scalars(
            update(Audit)
            .where(Audit.state == "running", Audit.heartbeat_at < t - timedelta(seconds=heartbeat_timeout))
            .values(state="queued", stage=None, updated_at=t)
            .returning(Audit.id)
        ).all()
        resent = session.scalars(
            update(Audit)
            .where(Audit.state == "queued", Audit.updated_at < t - timedelta(seconds=queued_timeout))
            .values(updated_at=t)
            .returning(Audit.id)
        ).all()
    return Sweep(list(requeued), list(resent))


class TaskSender(Protocol):
    def send_task(self, name: str, args: list[str], task_id: str | None = None, **options: Any) -> Any: ...


def sweep_and_send(celery: TaskSender, settings: Settings, sessions: sessionmaker[Session]) -> Sweep:
    """One sweep, then the tasks of every audit it found."""
    found = sweep(sessions, heartbeat_timeout=settings.heartbeat_timeout, queued_timeout=settings.queued_timeout)
    for audit_id in found.requeued:
        log.warning("audit %s: heartbeat older than %ss, worker presumed dead; re-queued", audit_id,
                    settings.heartbeat_timeout)  # fmt: skip
    for audit_id in found.resent:
        log.warning("audit %s: queued for over %ss without a worker; task re-sent", audit_id,
                    settings.queued_timeout)  # fmt: skip
    for audit_id in [*found.requeued, *found.resent]:
        celery.send_task(RUN_AUDIT_TASK, args=[str(audit_id)], task_id=str(audit_id))
    return found


class _Sweeper(threading.Thread):
    def __init__(self, celery: Celery, settings: Settings) -> None:
        super().__init__(name="bind-sweeper", daemon=True)
        self.celery, self.settings = celery, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            try:
                sweep_and_send(self.celery, self.settings, context.sessions())
            except Exception:  # the database or broker is down: try again next round
                log.warning("sweep failed", exc_info=True)
            if self.stopped.wait(self.settings.sweep_interval):
                return


_sweeper: _Sweeper | None = None


def start_sweeper(celery: Celery, settings: Settings) -> None:
    """Start this process's sweeper thread (once); its first sweep runs at once."""
    global _sweeper
    if _sweeper is None or not _sweeper.is_alive():
        _sweeper = _Sweeper(celery, settings)
        _sweeper.start()


def stop_sweeper() -> None:
    if _sweeper is not None:
        _sweeper.stopped.set()
