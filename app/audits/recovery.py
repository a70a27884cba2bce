"""Recovery of stuck audits, run periodically by a thread in every worker (`worker/sweeper.py`).

* ``running`` with a heartbeat older than ``BIND_HEARTBEAT_TIMEOUT``: its worker died (SIGKILL, OOM, lost
  machine). Put back to ``queued`` and send its task again; the next claim makes a new attempt.
* ``queued`` and untouched for ``BIND_QUEUED_TIMEOUT``: its message was lost (the API crashed between commit
  and send, the broker lost it, an embedded broker's worker was killed after receiving it). Send it again.

* ``BIND_RETENTION_DAYS`` above 0: finished audits and graphs older than that are erased
  (`app.erasure.retention`).

Each step is one conditional ``UPDATE ... RETURNING``, so several workers sweeping at once re-send an audit
once; and a duplicate message is harmless anyway, because only one claim of a queued audit succeeds.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.tasks import RUN_AUDIT
from app.core.db.session import now
from app.core.db.tables import Audit
from app.core.errors import ProblemError
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.erasure.retention import expire

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sweep:
    """The audits one sweep re-queued (dead worker), re-sent (lost message) and abandoned (no attempts left)."""

    requeued: list[uuid.UUID]
    resent: list[uuid.UUID]
    abandoned: list[uuid.UUID] = field(default_factory=list)


def abandoned_problem(max_attempts: int) -> dict[str, Any]:
    detail = (
        f"The worker running this audit stopped without a result {max_attempts} times (killed, out of memory "
        "or its machine lost); it is not retried again."
    )
    return ProblemError(detail, status=500, title="Audit abandoned", slug="audit-abandoned").to_problem()


def sweep(
    sessions: sessionmaker[Session], *, heartbeat_timeout: float, queued_timeout: float, max_attempts: int = 3
) -> Sweep:
    """Find stuck audits and mark them for re-sending (touching ``updated_at``); commit; return their ids.

    A dead worker's audit with ``max_attempts`` attempts behind it is failed instead (an audit that kills
    its worker every time, by running out of memory say, must not loop forever). The caller sends the
    tasks, after the commit.
    """
    t = now()
    dead = and_(Audit.state == "running", Audit.heartbeat_at < t - timedelta(seconds=heartbeat_timeout))
    with sessions.begin() as session:
        abandoned = session.scalars(
            update(Audit)
            .where(dead, Audit.attempts >= max_attempts)
            .values(state="failed", error=abandoned_problem(max_attempts), finished_at=t, updated_at=t)
            .returning(Audit.id)
        ).all()
        requeued = session.scalars(
            update(Audit).where(dead).values(state="queued", stage=None, updated_at=t).returning(Audit.id)
        ).all()
        resent = session.scalars(
            update(Audit)
            .where(Audit.state == "queued", Audit.updated_at < t - timedelta(seconds=queued_timeout))
            .values(updated_at=t)
            .returning(Audit.id)
        ).all()
    return Sweep(list(requeued), list(resent), list(abandoned))


def sweep_and_send(publisher: Publisher, settings: Settings, sessions: sessionmaker[Session]) -> Sweep:
    """One sweep, then the tasks of every audit it found; then the retention period's erasures."""
    found = sweep(
        sessions,
        heartbeat_timeout=settings.heartbeat_timeout,
        queued_timeout=settings.queued_timeout,
        max_attempts=settings.max_attempts,
    )
    for audit_id in found.abandoned:
        log.error("audit %s: its worker died %d times; failed, not retried", audit_id, settings.max_attempts)
    for audit_id in found.requeued:
        log.warning(
            "audit %s: heartbeat older than %ss, worker presumed dead; re-queued", audit_id, settings.heartbeat_timeout
        )
    for audit_id in found.resent:
        log.warning("audit %s: queued for over %ss without a worker; task re-sent", audit_id, settings.queued_timeout)
    for audit_id in [*found.requeued, *found.resent]:
        publisher.send(RUN_AUDIT, [str(audit_id)], task_id=str(audit_id))
    expire(sessions, settings.retention_days)
    return found
